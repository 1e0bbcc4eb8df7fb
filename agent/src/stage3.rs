//! Stage 3: the model judges the rendered preview of the candidate beside the target
//! (EVf); a rejection's reasons go back to Stage 1.

use std::time::Instant;

use freecad_bridge::command::{Primitive, Sketch};
use freecad_bridge::state::Frame;
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
        sketches: &[Sketch],
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
        let clipped = clipped_sides(&view.ids);
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
            .value("solved", solved_sketches(sketches, &preview.state))
            .flag("solved", !sketches.is_empty())
            .value("dropped", self.dropped.join("; "))
            .flag("dropped", !self.dropped.is_empty())
            .value("overlap", overlap.map(|o| o.describe(self.circle_px() / self.sphere.radius)).unwrap_or_default())
            .flag("overlap", overlap.is_some())
            .value("lines", lines.map(|l| l.describe()).unwrap_or_default())
            .flag("lines", lines.is_some())
            .value("clipped", clipped.join(" and "))
            .flag("clipped", !clipped.is_empty())
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
            .flag("fit", self.fit_report.is_some())
            .flag("fit_end", self.config.fit)
            .value(
                "after_rejection",
                turn.after_rejection.describe(turn.attempt, self.config.attempts_per_step(), self.can_set_aside()),
            );
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

/// The picture's sides the candidate's silhouette touches: it runs past them, and what lies
/// beyond is missing from the overlays and their figures (a relay reader's second body,
/// placed by registration on the first, was cut off, and its overlap read 0.725).
fn clipped_sides(ids: &views::IdBuffers) -> Vec<&'static str> {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let Some([left, right, top, bottom]) = views::extent(&views::silhouette(ids), w) else { return Vec::new() };
    [(left == 0, "left"), (right + 1 >= w, "right"), (top == 0, "top"), (bottom + 1 >= h, "bottom")]
        .into_iter()
        .filter_map(|(touches, side)| touches.then_some(side))
        .collect()
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

/// What follows when Stage 3 rejects a candidate, counting every later candidate of the step
/// as rejected too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRejection {
    /// `verified` more candidates are verified; after them, with `unverified_last`, one is
    /// committed without Stage 3, else the step fails.
    Another { verified: usize, unverified_last: bool },
    /// No attempt is left: the step is set aside (or, with none left to set aside, the run
    /// ends), the model as it is.
    StepFails,
}

impl AfterRejection {
    /// For attempt `attempt` of `attempts`, with `rejections` already made this step (a
    /// candidate is verified while fewer than `max_rejections` were).
    pub(crate) fn of(attempt: usize, attempts: usize, rejections: usize, max_rejections: usize) -> Self {
        let later = attempts.saturating_sub(attempt);
        if later == 0 {
            return AfterRejection::StepFails;
        }
        let verified = later.min(max_rejections.saturating_sub(rejections + 1));
        AfterRejection::Another { verified, unverified_last: verified < later }
    }

    /// One sentence for Stage 3's prompt; `set_aside`: a step no candidate gets through is set
    /// aside and the loop goes on (`max_skipped_steps` not reached), else the run ends.
    pub(crate) fn describe(self, attempt: usize, attempts: usize, set_aside: bool) -> String {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let fails = if set_aside {
            "the step is set aside, the model as it is, and the next step begins"
        } else {
            "the run ends with the model as it is"
        };
        let then = match self {
            AfterRejection::StepFails => format!("it is the step's last: a rejection means {fails}"),
            AfterRejection::Another { verified: 0, .. } => {
                "a rejection asks for one more candidate, which is committed without this check".into()
            }
            AfterRejection::Another { verified, unverified_last } => format!(
                "a rejection asks for another candidate, which you verify too; after {verified} more rejection{} {}",
                plural(verified),
                if unverified_last { "the next is committed without this check" } else { fails }
            ),
        };
        format!("This is candidate {attempt} of at most {attempts} for this step; {then}")
    }
}

/// The candidate's sketches as the solver left them, in model mm (readers asked for them, to
/// catch a slip in view coordinates before the extrusion hides it): each line's length, each
/// arc's and circle's centre and radius; construction geometry left out.
pub fn solved_sketches(sketches: &[Sketch], state: &ModelState) -> String {
    let frame_of = |name: &str| state.features.iter().find(|f| f.name == name).and_then(|f| f.frame);
    sketches.iter().map(|s| solved_sketch(s, frame_of(&s.name))).collect::<Vec<_>>().join("; ")
}

fn solved_sketch(sketch: &Sketch, frame: Option<Frame>) -> String {
    let at = |p: [f64; 2]| match frame {
        Some(f) => {
            let g = f.to_global(p[0], p[1]);
            format!("({:.2}, {:.2}, {:.2})", g[0], g[1], g[2])
        }
        None => format!("({:.2}, {:.2}) in the sketch", p[0], p[1]),
    };
    let mut lines = Vec::new();
    let mut curves = Vec::new();
    for primitive in &sketch.primitives {
        match *primitive {
            Primitive::Line { start, end, construction: false } => {
                lines.push(format!("{:.2}", (end[0] - start[0]).hypot(end[1] - start[1])));
            }
            Primitive::Arc { start, mid, end, construction: false } => {
                if let Some((centre, r)) = freecad_bridge::geometry::circumcircle(start, mid, end) {
                    curves.push(format!("an arc about {} of r {r:.2}", at(centre)));
                }
            }
            Primitive::CenterArc { center, radius, construction: false, .. } => {
                curves.push(format!("an arc about {} of r {radius:.2}", at(center)));
            }
            Primitive::Circle { center, radius, construction: false } => {
                curves.push(format!("a circle about {} of r {radius:.2}", at(center)));
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if !lines.is_empty() {
        parts.push(format!("lines {} mm long", lines.join(", ")));
    }
    parts.extend(curves);
    format!("{}: {}", sketch.name, if parts.is_empty() { "no geometry".into() } else { parts.join(", ") })
}

/// What a candidate changes, in one line: `volume +1200.000 mm3 (+25.0%), faces 6 -> 10`,
/// and the sliver faces it adds.
pub fn delta(before: &freecad_bridge::ModelState, after: &freecad_bridge::ModelState) -> String {
    let dv = after.volume - before.volume;
    let share = if before.volume > 0.0 { format!(" ({:+.1}%)", 100.0 * dv / before.volume) } else { String::new() };
    let solid = if after.valid { "" } else { ", not a valid solid" };
    format!(
        "volume {dv:+.3} mm3{share}, faces {} -> {}{solid}{}",
        before.faces.len(),
        after.faces.len(),
        slivers(before, after)
    )
}

/// A face smaller than this (mm2) is a sliver: no part is drawn with one, and a point a hair
/// off an edge makes one.
const SLIVER_MM2: f64 = 0.01;

/// The sliver faces `after` holds beyond those of `before`, told: a relay reader's notch,
/// centred 0.002 mm off the plate's edge, left a 0.004 mm2 face and split edges that no
/// picture shows (Stage 3 read 100% of the lines), and the reader found it only in the next
/// step's entity table.
fn slivers(before: &freecad_bridge::ModelState, after: &freecad_bridge::ModelState) -> String {
    let small = |s: &freecad_bridge::ModelState| s.faces.iter().filter(|f| f.area < SLIVER_MM2).count();
    if small(after) <= small(before) {
        return String::new();
    }
    let listed: Vec<String> =
        after.faces.iter().filter(|f| f.area < SLIVER_MM2).map(|f| format!("{} {:.4} mm2", f.id, f.area)).collect();
    format!(
        "; sliver faces under {SLIVER_MM2} mm2, which no picture shows: {} (a point a hair off an edge or a \
         face: tie it there, or move it clear)",
        listed.join(", ")
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_past_the_picture_s_edge_is_told() {
        let ids = |covered: &dyn Fn(usize, usize) -> bool| views::IdBuffers {
            width: 10,
            height: 8,
            face: vec![views::NO_ENTITY; 80],
            edge: vec![views::NO_ENTITY; 80],
            covered: (0..80).map(|i| covered(i % 10, i / 10)).collect(),
            seam: vec![false; 80],
        };
        assert!(clipped_sides(&ids(&|x, y| (2..8).contains(&x) && (2..6).contains(&y))).is_empty());
        assert_eq!(clipped_sides(&ids(&|x, y| x >= 5 && y >= 3)), ["right", "bottom"]);
        assert!(clipped_sides(&ids(&|_, _| false)).is_empty());
    }

    #[test]
    fn a_rejection_says_what_follows_it() {
        // Two rejections allowed, three candidates: the third is committed unchecked.
        let of = |attempt, rejections| AfterRejection::of(attempt, 3, rejections, 2);
        assert_eq!(of(1, 0), AfterRejection::Another { verified: 1, unverified_last: true });
        assert_eq!(of(2, 1), AfterRejection::Another { verified: 0, unverified_last: true });
        // The first candidate failed to build (no rejection): the second's rejection leaves
        // one more verified candidate, and rejecting that fails the step.
        assert_eq!(of(2, 0), AfterRejection::Another { verified: 1, unverified_last: false });
        assert_eq!(of(3, 1), AfterRejection::StepFails);
        assert_eq!(
            of(1, 0).describe(1, 3, true),
            "This is candidate 1 of at most 3 for this step; a rejection asks for another candidate, which you \
             verify too; after 1 more rejection the next is committed without this check"
        );
        assert_eq!(
            of(2, 1).describe(2, 3, true),
            "This is candidate 2 of at most 3 for this step; a rejection asks for one more candidate, which is \
             committed without this check"
        );
        assert_eq!(
            of(2, 0).describe(2, 3, true),
            "This is candidate 2 of at most 3 for this step; a rejection asks for another candidate, which you \
             verify too; after 1 more rejection the step is set aside, the model as it is, and the next step begins"
        );
        // The step's last candidate: its rejection sets the step aside, or, with no step left
        // to set aside, ends the run.
        assert_eq!(
            of(3, 1).describe(3, 3, true),
            "This is candidate 3 of at most 3 for this step; it is the step's last: a rejection means the step is \
             set aside, the model as it is, and the next step begins"
        );
        assert_eq!(
            of(3, 1).describe(3, 3, false),
            "This is candidate 3 of at most 3 for this step; it is the step's last: a rejection means the run ends \
             with the model as it is"
        );
    }

    #[test]
    fn a_sliver_face_the_candidate_adds_is_told_and_none_is_not() {
        let face = |id: &str, area: f64| -> freecad_bridge::state::Face {
            serde_json::from_value(serde_json::json!({"id": id, "kind": "plane", "area": area, "centroid": [0, 0, 0],
                "edges": []}))
            .expect("face")
        };
        let state = |faces: Vec<freecad_bridge::state::Face>| ModelState {
            faces,
            volume: 1000.0,
            valid: true,
            ..ModelState::empty()
        };
        let plate = state((1..=6).map(|i| face(&format!("F{i}"), 100.0)).collect());
        let mut notched = state((1..=8).map(|i| face(&format!("F{i}"), 100.0)).collect());
        assert_eq!(delta(&plate, &notched), "volume +0.000 mm3 (+0.0%), faces 6 -> 8");
        notched.faces.push(face("F9", 0.004));
        assert_eq!(
            delta(&plate, &notched),
            "volume +0.000 mm3 (+0.0%), faces 6 -> 9; sliver faces under 0.01 mm2, which no picture shows: F9 \
             0.0040 mm2 (a point a hair off an edge or a face: tie it there, or move it clear)"
        );
        // One the model already had is not told again.
        assert_eq!(delta(&notched, &notched), "volume +0.000 mm3 (+0.0%), faces 9 -> 9");
    }

    #[test]
    fn a_solved_sketch_is_told_in_model_mm_on_its_own_plane() {
        // A slot's half on a top face 10 mm up: a 20 mm line, a half circle through three
        // points about (20, 5) of radius 5, a hole of radius 2, and construction geometry.
        let sketch: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "F6", "primitives": [
            {"type": "line", "start": [0, 0], "end": [20, 0]},
            {"type": "arc", "start": [20, 0], "mid": [25, 5], "end": [20, 10]},
            {"type": "circle", "center": [5, 5], "radius": 2},
            {"type": "line", "start": [0, 0], "end": [0, 99], "construction": true}]}))
        .expect("sketch");
        let frame = Frame {
            origin: [0.0, 0.0, 10.0],
            x_axis: [1.0, 0.0, 0.0],
            y_axis: [0.0, 1.0, 0.0],
            normal: [0.0, 0.0, 1.0],
        };
        assert_eq!(
            solved_sketch(&sketch, Some(frame)),
            "S2: lines 20.00 mm long, an arc about (20.00, 5.00, 10.00) of r 5.00, a circle about (5.00, 5.00, 10.00) of r 2.00"
        );
    }
}
