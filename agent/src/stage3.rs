//! Stage 3: the model judges the rendered preview of the candidate beside the target
//! (EVf); a rejection's reasons go back to Stage 1.

use std::time::Instant;

use freecad_bridge::{ModelState, Preview};
use serde::{Deserialize, Serialize};

use crate::engine::{Asked, Attempt, Engine, Turn};
use crate::error::LoopError;
use crate::events::TraceEvent;
use crate::prompts::Fill;
use crate::register;
use crate::stage1::Plan;
use crate::vlm::{Stage, Vlm};

impl Engine<'_> {
    /// Stage 3: the preview beside the target, judged. `None`: accepted; otherwise how the
    /// attempt ends (a rejection, an invalid answer, a backend that cannot answer).
    pub(crate) fn stage3(
        &mut self,
        vlm: &mut dyn Vlm,
        state: &ModelState,
        plan: &Plan,
        preview: &Preview,
        turn: Turn,
    ) -> Result<Option<Attempt>, LoopError> {
        let start = Instant::now();
        // The target at the candidate panel's framing, S_t's circle on both panels.
        let target = self.framed_target.as_ref().unwrap_or(&self.target.image);
        let mut view = views::preview(preview, &self.options(), Some(target));
        if !self.config.ablations.no_reg {
            register::draw_sphere_on(&mut view, self.sphere);
        }
        // The two silhouettes overlaid: where a dimension or a position is off shows as a
        // coloured band, which side by side is hard to see. The overlays are a second image:
        // four panels in one strip (2012 px at 500 px views) were shrunk by readers' viewers,
        // and the 1 px bands lost.
        let mut overlays: Option<image::RgbImage> = None;
        let overlap = self.framed_mask.as_ref().filter(|m| m.len() == view.ids.face.len()).map(|mask| {
            let (mut panel, overlap) = views::silhouette_overlap(&view.ids, mask);
            let (half, radius) = (f64::from(panel.width()) / 2.0, crate::engine::circle_px(panel.width()));
            register::draw_sphere(&mut panel, [half, half], radius);
            views::caption(&mut panel, "silhouettes overlaid");
            overlays = Some(panel);
            overlap
        });
        // The lines inside the outline: a wall's inner side, holes and slots on a face.
        let lines = match (&overlap, &self.framed_lines, &self.framed_mask, &overlays) {
            (Some(o), Some(lines), Some(mask), Some(silhouettes)) if lines.len() == view.ids.edge.len() => {
                let (mut panel, counts) = views::line_overlap(&view.ids, lines, mask, o.shift_px);
                let (half, radius) = (f64::from(panel.width()) / 2.0, crate::engine::circle_px(panel.width()));
                register::draw_sphere(&mut panel, [half, half], radius);
                overlays = Some(views::append_panel(silhouettes, &panel, "edges overlaid"));
                Some(counts)
            }
            _ => None,
        };
        let name = |what: &str| format!("step{:02}_try{}_{what}.png", turn.step, turn.attempt);
        let mut images = vec![self.save(&view.image, &name("preview"))?];
        if let Some(overlays) = &overlays {
            images.push(self.save(overlays, &name("overlay"))?);
        }
        self.timing.render += start.elapsed().as_secs_f64();
        let start = Instant::now();
        let fill = Fill::default()
            .value("step", turn.step.to_string())
            .value("plan", plan.describe())
            .value("preview_summary", summary(&preview.state))
            .value("before_summary", summary(state))
            .value("delta", delta(state, &preview.state))
            .value("overlap", overlap.map(|o| o.describe(self.circle_px() / self.sphere.radius)).unwrap_or_default())
            .flag("overlap", overlap.is_some())
            .value("lines", lines.map(|l| l.describe()).unwrap_or_default())
            .flag("lines", lines.is_some())
            .flag("revision", plan.revision.is_some())
            .value("fit", self.fit_report.as_ref().map(|f| f.describe()).unwrap_or_default())
            .value(
                "fit_reach",
                format!(
                    "{} px' worth and the depth by up to {}%",
                    crate::fit::sketch::POINT_REACH_PX,
                    crate::fit::sketch::DEPTH_REACH * 100.0
                ),
            )
            .flag("fit", self.fit_report.is_some());
        let mut context = self.context(state);
        context.plan = Some(plan.clone());
        context.preview = Some(preview.state.clone());
        let request = self.request(Stage::Stage3, "stage3.md", fill, images, context)?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        let asked =
            self.ask(vlm, request, turn, |v| serde_json::from_value::<Verdict>(v).map_err(|e| e.to_string()))?;
        Ok(match asked {
            Asked::Answer(v) if v.accepted() => {
                if v.finish {
                    let why = if v.reasons.is_empty() { String::new() } else { format!(": {}", v.reasons.join("; ")) };
                    self.finish = Some(format!("Stage 3 accepted step {} as the last{why}", turn.step));
                }
                None
            }
            Asked::Answer(v) => {
                self.rejections += 1;
                let reason =
                    format!("attempt {} ({}) was rejected: {}", turn.attempt, plan.describe(), v.reasons.join("; "));
                self.emit(TraceEvent::Rejected { step: turn.step, attempt: turn.attempt, reasons: v.reasons })?;
                Some(Attempt::Retry { reason, rejected: true })
            }
            Asked::Invalid(reason) => Some(Attempt::retry(reason)),
            Asked::Backend(reason) => Some(Attempt::Failed(reason)),
        })
    }
}

/// Stage 3's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: Decision,
    #[serde(default)]
    pub reasons: Vec<String>,
    /// With an accept: the model with this candidate is the whole part, and the run ends
    /// with this step (the Stage 1 call that would only say END is not made).
    #[serde(default)]
    pub finish: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accept,
    Reject,
}

impl Verdict {
    pub fn accepted(&self) -> bool {
        self.verdict == Decision::Accept
    }
}

/// What a candidate changes, in one line: `volume +1200.000 mm3 (+25.0%), faces 6 -> 10`.
pub fn delta(before: &freecad_bridge::ModelState, after: &freecad_bridge::ModelState) -> String {
    let dv = after.volume - before.volume;
    let share = if before.volume > 0.0 { format!(" ({:+.1}%)", 100.0 * dv / before.volume) } else { String::new() };
    let solid = if after.valid { "" } else { ", not a valid solid" };
    format!("volume {dv:+.3} mm3{share}, faces {} -> {}{solid}", before.faces.len(), after.faces.len())
}

/// One line summarising a model state for the Stage 3 prompt.
pub fn summary(state: &freecad_bridge::ModelState) -> String {
    if state.empty {
        return "empty".into();
    }
    let bbox = state.bbox.map_or_else(String::new, |b| {
        format!(
            ", box ({:.2}, {:.2}, {:.2}) to ({:.2}, {:.2}, {:.2})",
            b.min[0], b.min[1], b.min[2], b.max[0], b.max[1], b.max[2]
        )
    });
    format!(
        "volume {:.3} mm3, {} faces, {} edges{bbox}{}",
        state.volume,
        state.faces.len(),
        state.edges.len(),
        if state.valid { "" } else { ", not a valid solid" }
    )
}
