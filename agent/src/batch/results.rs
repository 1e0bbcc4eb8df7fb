//! What a run reports: an [`Item`] per part (`item.json`), and [`RunResults`]
//! (`results.json`), rendered as `results.md` and `index.html`.

use eval::{Report, SampleResult};
use serde::{Deserialize, Serialize};

use super::RunSettings;

/// How a part's reconstruction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// The model said END.
    Finished,
    /// The step limit was reached.
    Stopped,
    /// The loop stopped on a failure (no candidate got through, a backend that could not
    /// answer).
    Failed,
    /// The part ran past `--item-timeout` and was stopped.
    Timeout,
    /// The reconstruction process ended without an outcome.
    Crashed,
    /// The model server could not answer (unreachable, the key refused, out of retries):
    /// not the part's failure, so a resumed run tries the part again.
    BackendFailed,
}

impl ItemStatus {
    pub const ALL: [ItemStatus; 6] = [
        ItemStatus::Finished,
        ItemStatus::Stopped,
        ItemStatus::Failed,
        ItemStatus::Timeout,
        ItemStatus::Crashed,
        ItemStatus::BackendFailed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ItemStatus::Finished => "finished",
            ItemStatus::Stopped => "stopped",
            ItemStatus::Failed => "failed",
            ItemStatus::Timeout => "timeout",
            ItemStatus::Crashed => "crashed",
            ItemStatus::BackendFailed => "backend failed",
        }
    }

    /// The loop ran to its end (END or the step limit), whatever the model built.
    pub fn reached_the_end(self) -> bool {
        matches!(self, ItemStatus::Finished | ItemStatus::Stopped)
    }

    /// The machine or the model server failed, not the part: a resumed run tries it again.
    pub fn worth_retrying(self) -> bool {
        matches!(self, ItemStatus::Crashed | ItemStatus::BackendFailed)
    }
}

/// What a finished part left behind (`item.json`), besides its reconstruction's own files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: String,
    pub status: ItemStatus,
    pub reason: Option<String>,
    pub seconds: f64,
    pub steps: usize,
    /// Steps the loop set aside (no candidate got through) and went on from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_steps: Vec<usize>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens Stage 1's retrieved examples added (estimated; part of `input_tokens`
    /// where the server counts tokens).
    #[serde(default)]
    pub retrieval_tokens: u64,
    pub cost: Option<f64>,
}

impl Item {
    /// A part with `status` and nothing else recorded yet.
    pub fn new(id: &str, status: ItemStatus) -> Item {
        Item {
            id: id.into(),
            status,
            reason: None,
            seconds: 0.0,
            steps: 0,
            skipped_steps: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            retrieval_tokens: 0,
            cost: None,
        }
    }

    /// A part that left no `item.json`.
    pub fn missing(id: &str, reason: &str) -> Item {
        Item { reason: Some(reason.into()), ..Item::new(id, ItemStatus::Crashed) }
    }
}

/// Parts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    pub finished: usize,
    pub stopped: usize,
    pub failed: usize,
    pub timeout: usize,
    pub crashed: usize,
    #[serde(default)]
    pub backend_failed: usize,
}

impl StatusCounts {
    pub fn of(items: &[Item]) -> StatusCounts {
        let count = |status| items.iter().filter(|i| i.status == status).count();
        StatusCounts {
            finished: count(ItemStatus::Finished),
            stopped: count(ItemStatus::Stopped),
            failed: count(ItemStatus::Failed),
            timeout: count(ItemStatus::Timeout),
            crashed: count(ItemStatus::Crashed),
            backend_failed: count(ItemStatus::BackendFailed),
        }
    }

    pub fn get(&self, status: ItemStatus) -> usize {
        match status {
            ItemStatus::Finished => self.finished,
            ItemStatus::Stopped => self.stopped,
            ItemStatus::Failed => self.failed,
            ItemStatus::Timeout => self.timeout,
            ItemStatus::Crashed => self.crashed,
            ItemStatus::BackendFailed => self.backend_failed,
        }
    }
}

/// One protocol's figures over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtocolSummary {
    pub n: usize,
    pub cr: f64,
    pub miou: Option<f64>,
    pub cd_mean: Option<f64>,
    pub cd_median: Option<f64>,
    pub hd: Option<f64>,
    pub hd95: Option<f64>,
}

impl ProtocolSummary {
    pub fn of(report: &Report) -> ProtocolSummary {
        ProtocolSummary {
            n: report.n,
            cr: report.cr,
            miou: report.miou,
            cd_mean: report.cd_mean,
            cd_median: report.cd_median,
            hd: report.hd,
            hd95: report.hd95,
        }
    }

    /// Samples that compiled.
    pub fn compiled(&self) -> u64 {
        (self.cr * self.n as f64).round() as u64
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    /// What retrieval added to `input` (estimated).
    #[serde(default)]
    pub retrieval: u64,
}

/// One part's score under one protocol.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartScore {
    pub compiled: bool,
    pub iou: Option<f64>,
    pub cd: Option<f64>,
    pub hd: Option<f64>,
    pub hd95: Option<f64>,
}

impl PartScore {
    fn of(sample: &SampleResult) -> PartScore {
        PartScore { compiled: sample.compiled, iou: sample.iou, cd: sample.cd, hd: sample.hd, hd95: sample.hd95 }
    }
}

/// One part of `results.json`: its item and its scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartResult {
    pub id: String,
    pub status: ItemStatus,
    pub reason: Option<String>,
    pub steps: usize,
    /// Steps the loop set aside (no candidate got through) and went on from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_steps: Vec<usize>,
    pub seconds: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub retrieval_tokens: u64,
    pub cost: Option<f64>,
    #[serde(rename = "static")]
    pub static_: Option<PartScore>,
    pub edit10: Option<PartScore>,
}

impl From<&Item> for PartResult {
    /// The part's item, not scored yet.
    fn from(item: &Item) -> PartResult {
        PartResult {
            id: item.id.clone(),
            status: item.status,
            reason: item.reason.clone(),
            steps: item.steps,
            skipped_steps: item.skipped_steps.clone(),
            seconds: item.seconds,
            input_tokens: item.input_tokens,
            output_tokens: item.output_tokens,
            retrieval_tokens: item.retrieval_tokens,
            cost: item.cost,
            static_: None,
            edit10: None,
        }
    }
}

/// `results.json` of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    pub settings: RunSettings,
    pub parts: usize,
    pub status: StatusCounts,
    #[serde(rename = "static")]
    pub static_: ProtocolSummary,
    pub edit10: ProtocolSummary,
    pub tokens: Tokens,
    /// In the configured currency, when a price is known.
    pub cost: Option<f64>,
    pub seconds_per_part: f64,
    pub wall_seconds_this_session: f64,
    pub per_part: Vec<PartResult>,
}

impl RunResults {
    /// The results of `items`, scored by the two protocols' reports.
    pub fn new(settings: &RunSettings, items: &[Item], s: &Report, e: &Report, wall: f64) -> RunResults {
        let per_part = items
            .iter()
            .map(|item| {
                let find = |r: &Report| r.samples.iter().find(|x| x.id == item.id).map(PartScore::of);
                PartResult { static_: find(s), edit10: find(e), ..PartResult::from(item) }
            })
            .collect();
        let costs: Vec<f64> = items.iter().filter_map(|i| i.cost).collect();
        RunResults {
            settings: settings.clone(),
            parts: items.len(),
            status: StatusCounts::of(items),
            static_: ProtocolSummary::of(s),
            edit10: ProtocolSummary::of(e),
            tokens: Tokens {
                input: items.iter().map(|i| i.input_tokens).sum(),
                output: items.iter().map(|i| i.output_tokens).sum(),
                retrieval: items.iter().map(|i| i.retrieval_tokens).sum(),
            },
            cost: (!costs.is_empty()).then(|| costs.iter().sum()),
            seconds_per_part: items.iter().map(|i| i.seconds).sum::<f64>() / items.len().max(1) as f64,
            wall_seconds_this_session: wall,
            per_part,
        }
    }

    /// A protocol's summary by name (`static`, `edit10`).
    pub fn protocol(&self, name: &str) -> Option<&ProtocolSummary> {
        match name {
            "static" => Some(&self.static_),
            "edit10" => Some(&self.edit10),
            _ => None,
        }
    }

    /// `results.md`: the counts, the two protocols' figures, tokens and cost.
    pub fn markdown(&self) -> String {
        let mut t = String::new();
        let st = &self.status;
        t.push_str(&format!(
            "# Run over {} ({} split, {} parts, backend {})\n\n",
            self.settings.dataset.display(),
            self.settings.split,
            self.parts,
            self.settings.vlm.name()
        ));
        let backend = if st.backend_failed > 0 {
            format!(", the model server failed on {} (run again to retry them)", st.backend_failed)
        } else {
            String::new()
        };
        t.push_str(&format!(
            "Finished {} (END), stopped at the step limit {}, failed {}, timed out {}, crashed {}{backend}.\n\n",
            st.finished, st.stopped, st.failed, st.timeout, st.crashed
        ));
        t.push_str("| protocol | CR | mIoU | CD mean | CD median | HD | HD95 |\n|---|---|---|---|---|---|---|\n");
        for (p, s) in [("static", &self.static_), ("edit10", &self.edit10)] {
            t.push_str(&format!(
                "| {p} | {:.3} | {} | {} | {} | {} | {} |\n",
                s.cr,
                fmt(s.miou, 4),
                fmt(s.cd_mean, 4),
                fmt(s.cd_median, 4),
                fmt(s.hd, 4),
                fmt(s.hd95, 4)
            ));
        }
        let cost = self.cost.map_or("no price configured".into(), |c| format!("{c:.4}"));
        t.push_str(&format!(
            "\nTokens {} in, {} out; cost {cost}; {:.1} s per part.{}\n",
            self.tokens.input,
            self.tokens.output,
            self.seconds_per_part,
            self.retrieval_text()
        ));
        t
    }

    /// ` Retrieved examples added about N input tokens (M per part).` when they added any.
    pub fn retrieval_text(&self) -> String {
        if self.tokens.retrieval == 0 {
            return String::new();
        }
        format!(
            " Retrieved examples added about {} input tokens ({:.0} per part, estimated).",
            self.tokens.retrieval,
            self.tokens.retrieval as f64 / self.parts.max(1) as f64
        )
    }

    /// `index.html` of the run in `out`: the counts, the two protocols' figures and a
    /// sortable row per part (failure reasons shown), each linked to its report (its log
    /// when the part wrote no report).
    pub fn index_html(&self, out: &std::path::Path) -> String {
        use super::html::{Cell, page, table};
        let st = &self.status;
        let mut body = format!(
            "<p>Finished {} (END), stopped at the step limit {}, failed {}, timed out {}, crashed {}, model server \
             failed {}. Tokens {} in, {} out; cost {}; {:.1} s per part.{} Also as <a href=\"results.md\">results.md</a> \
             and <a href=\"results.json\">results.json</a>.</p>\n",
            st.finished,
            st.stopped,
            st.failed,
            st.timeout,
            st.crashed,
            st.backend_failed,
            self.tokens.input,
            self.tokens.output,
            self.cost.map_or("no price configured".into(), |c| format!("{c:.4}")),
            self.seconds_per_part,
            self.retrieval_text()
        );
        let protocols = [("static", &self.static_), ("edit10", &self.edit10)]
            .iter()
            .map(|(name, s)| {
                vec![
                    Cell::text(name),
                    Cell::number(Some(s.cr), 3),
                    Cell::number(s.miou, 4),
                    Cell::number(s.cd_mean, 4),
                    Cell::number(s.cd_median, 4),
                    Cell::number(s.hd, 4),
                    Cell::number(s.hd95, 4),
                ]
            })
            .collect();
        body.push_str(&table(&["protocol", "CR", "mIoU", "CD mean", "CD median", "HD", "HD95"], protocols, false));
        body.push_str("<h2>Parts</h2><p>Click a heading to sort.</p>\n");
        let rows = self
            .per_part
            .iter()
            .map(|p| {
                let dir = out.join("parts").join(&p.id);
                let target = if dir.join("report.html").is_file() { "report.html" } else { "reconstruct.log" };
                let status =
                    Cell::text(p.status.name()).class(if p.status == ItemStatus::Finished { "good" } else { "bad" });
                let score = |s: &Option<PartScore>, f: fn(&PartScore) -> Option<f64>| s.as_ref().and_then(f);
                vec![
                    Cell::link(&format!("parts/{}/{target}", p.id), &p.id),
                    status,
                    Cell::number(Some(p.steps as f64), 0),
                    Cell::number(score(&p.static_, |s| s.iou), 4),
                    Cell::number(score(&p.edit10, |s| s.iou), 4),
                    Cell::number(score(&p.static_, |s| s.cd), 4),
                    Cell::number(Some(p.input_tokens as f64), 0),
                    Cell::number(Some(p.seconds), 1),
                    Cell::text(p.reason.as_deref().unwrap_or("")).class("reason"),
                ]
            })
            .collect();
        body.push_str(&table(
            &["part", "status", "steps", "static IoU", "edit10 IoU", "static CD", "tokens in", "seconds", "reason"],
            rows,
            true,
        ));
        let title = format!(
            "Run over {} ({} split, {} parts, backend {})",
            self.settings.dataset.display(),
            self.settings.split,
            self.parts,
            self.settings.vlm.name()
        );
        page(&title, &body)
    }
}

/// A figure with `digits` decimals, `-` when there is none.
pub fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_set_aside_are_kept_per_part_and_left_out_where_there_are_none() {
        let plain = Item { steps: 4, ..Item::new("p1", ItemStatus::Finished) };
        let text = serde_json::to_string(&PartResult::from(&plain)).expect("json");
        assert!(!text.contains("skipped_steps"), "{text}");
        let set_aside = Item { skipped_steps: vec![2, 5], ..plain };
        let text = serde_json::to_string(&PartResult::from(&set_aside)).expect("json");
        let back: PartResult = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back.skipped_steps, [2, 5]);
        // A results.json written before the field reads as none set aside.
        let old: Item = serde_json::from_str(
            r#"{"id": "p1", "status": "finished", "reason": null, "seconds": 1.0, "steps": 4,
                "input_tokens": 0, "output_tokens": 0, "cost": null}"#,
        )
        .expect("an old item.json");
        assert!(old.skipped_steps.is_empty());
    }
}
