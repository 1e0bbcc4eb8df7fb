//! The picture model's search, on renders drawn with real edge polylines.

use super::*;
use freecad_bridge::command::Mode;
use freecad_bridge::state::ModelState;
use views::NO_ENTITY;

pub(crate) const SIZE: u32 = 300;

/// A camera on the isometric direction, 3 px per mm, looking at the origin.
pub(crate) fn still() -> crate::fit::Alignment {
    crate::fit::Alignment { shift: [0, 0], scale: 1.0, centre: 100.0 }
}

pub(crate) fn camera() -> Camera {
    camera_at(SIZE)
}

/// The same framing in a picture of `size` pixels.
pub(crate) fn camera_at(size: u32) -> Camera {
    views::Camera::framing(Point3::origin(), 50.0, Vector3::from(views::ISOMETRIC), false, size, size, 1.0)
}

fn on<'a>(state: &'a ModelState, frame: &'a Frame) -> Existing<'a> {
    Existing { state, frame }
}

pub(crate) fn xy() -> Frame {
    Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 1.0, 0.0], normal: [0.0, 0.0, 1.0] }
}

/// The XZ plane's frame: x along X, y along Z.
pub(crate) fn xz() -> Frame {
    Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 0.0, 1.0], normal: [0.0, -1.0, 0.0] }
}

pub(crate) fn rectangle(name: &str, corners: [[f64; 2]; 4]) -> Sketch {
    let primitives =
        (0..4).map(|i| Primitive::Line { start: corners[i], end: corners[(i + 1) % 4], construction: false }).collect();
    Sketch { name: name.into(), on: "XY".into(), primitives, constraints: Vec::new(), auto_coincident: true }
}

pub(crate) fn pad(depth: f64) -> Extrude {
    Extrude { profile: "S1".into(), mode: Mode::Add, extent: Extent::OneSide { depth }, reversed: false }
}

/// Every edge of a box pad on XY (profile `corners`, up `depth`) drawn into a mask, as a
/// renderer would draw them (hidden ones too: the fit's counted samples are the test).
pub(crate) fn drawn_box(corners: [[f64; 2]; 4], depth: f64) -> Vec<bool> {
    segments(&box_edges(corners, depth))
}

/// The box's twelve edges: the bottom, top and upright edge at each side, side by side.
pub(crate) fn box_edges(corners: [[f64; 2]; 4], depth: f64) -> Vec<([f64; 3], [f64; 3])> {
    let mut list = Vec::new();
    for i in 0..4 {
        let (a, b) = (corners[i], corners[(i + 1) % 4]);
        list.push(([a[0], a[1], 0.0], [b[0], b[1], 0.0]));
        list.push(([a[0], a[1], depth], [b[0], b[1], depth]));
        list.push(([a[0], a[1], 0.0], [a[0], a[1], depth]));
    }
    list
}

/// A candidate's render as the fit reads it: each polyline (model coordinates) an edge,
/// drawn through the test camera with its index in the ID buffer.
pub(crate) struct Picture {
    ids: IdBuffers,
    edges: Vec<Vec<Point3<f64>>>,
}

impl Picture {
    pub(crate) fn of(edges: Vec<Vec<Point3<f64>>>) -> Picture {
        let camera = camera();
        let mut ids = ids_of(&vec![false; (SIZE * SIZE) as usize]);
        for (index, line) in edges.iter().enumerate() {
            for w in line.windows(2) {
                for k in 0..=400 {
                    let p = w[0] + (w[1] - w[0]) * (k as f64 / 400.0);
                    let (x, y, _) = camera.project(&p).expect("in front");
                    let (x, y) = (x.floor() as i64, y.floor() as i64);
                    if (0..SIZE as i64).contains(&x) && (0..SIZE as i64).contains(&y) {
                        ids.edge[(y * SIZE as i64 + x) as usize] = index as u32;
                        ids.covered[(y * SIZE as i64 + x) as usize] = true;
                    }
                }
            }
        }
        Picture { ids, edges }
    }

    pub(crate) fn of_segments(list: &[([f64; 3], [f64; 3])]) -> Picture {
        Picture::of(list.iter().map(|&(a, b)| vec![Point3::from(a), Point3::from(b)]).collect())
    }

    pub(crate) fn of_box(corners: [[f64; 2]; 4], depth: f64) -> Picture {
        Picture::of_segments(&box_edges(corners, depth))
    }

    pub(crate) fn render(&self) -> Render<'_> {
        Render { ids: &self.ids, edges: &self.edges }
    }
}

/// The mask of straight segments (model coordinates) seen through the test camera.
pub(crate) fn segments(list: &[([f64; 3], [f64; 3])]) -> Vec<bool> {
    segments_at(list, SIZE)
}

/// The same, through the test camera's framing in a picture of `size` pixels.
pub(crate) fn segments_at(list: &[([f64; 3], [f64; 3])], size: u32) -> Vec<bool> {
    let camera = camera_at(size);
    let n = i64::from(size);
    let mut mask = vec![false; (size * size) as usize];
    for &(a, b) in list {
        for k in 0..=800 {
            let t = k as f64 / 800.0;
            let p = Point3::new(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), a[2] + t * (b[2] - a[2]));
            let (x, y, _) = camera.project(&p).expect("in front");
            let (x, y) = (x.floor() as i64, y.floor() as i64);
            if (0..n).contains(&x) && (0..n).contains(&y) {
                mask[(y * n + x) as usize] = true;
            }
        }
    }
    mask
}

#[test]
fn a_hidden_edge_crossed_by_other_edges_is_not_scored() {
    // The candidate's picture shows the box's bottom outline and its upright edges; its
    // top outline is hidden, but other features' edges cross it: short upright ticks
    // every 2 mm along it, as a later feature's edges might.
    let depth = 10.0;
    let mut shown: Vec<([f64; 3], [f64; 3])> = Vec::new();
    for i in 0..4 {
        let (a, b) = (TRUE[i], TRUE[(i + 1) % 4]);
        shown.push(([a[0], a[1], 0.0], [b[0], b[1], 0.0]));
        shown.push(([a[0], a[1], 0.0], [a[0], a[1], depth]));
    }
    let mut crossed = shown.clone();
    for i in 0..4 {
        let (a, b) = (TRUE[i], TRUE[(i + 1) % 4]);
        for k in 1..10 {
            let t = k as f64 / 10.0;
            let (x, y) = (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]));
            crossed.push(([x, y, depth - 1.5], [x, y, depth + 1.5]));
        }
    }
    let lines = drawn_box(TRUE, depth);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let scored = |list: &[([f64; 3], [f64; 3])]| {
        propose_box(TRUE, depth, &Picture::of_segments(list), &target).expect("scored").samples
    };
    let (plain, with_ticks) = (scored(&shown), scored(&crossed));
    // The ticks add at most the samples at their own feet (where the hidden outline meets
    // an upright tick's end), not the outline between them.
    assert!(with_ticks <= plain + plain / 20, "{plain} samples without the ticks, {with_ticks} with them");
}

#[test]
fn a_sample_counts_only_on_its_own_edge_not_on_another_drawn_over_it() {
    // An exact box, but its top front edge is gone (a later chamfer took it, say), and
    // another edge, 12 mm behind it along the line of sight, is drawn on the same pixels.
    let depth = 10.0;
    let target = TargetPixels::new(SIZE, drawn_box(TRUE, depth), &drawn_box(TRUE, depth));
    let exact = box_edges(TRUE, depth);
    let mut covered = exact.clone();
    let behind = Vector3::from(views::ISOMETRIC).normalize() * -12.0;
    let (a, b) = covered[1];
    covered[1] = ((Vector3::from(a) + behind).into(), (Vector3::from(b) + behind).into());
    let scored =
        |list: &[([f64; 3], [f64; 3])]| propose_box(TRUE, depth, &Picture::of_segments(list), &target).expect("scored");
    let (own, other) = (scored(&exact), scored(&covered));
    // The edge is 40 mm long, about 100 px: some 60 samples at 1.5 px, all gone.
    assert!(
        other.samples + 50 <= own.samples,
        "{} samples on the exact box, {} with the edge covered",
        own.samples,
        other.samples
    );
}

/// The fit of a box pad on XY (profile `drawn`, `depth` deep), its render `picture`, seen
/// by the test camera against `target`.
fn propose_box(drawn: [[f64; 2]; 4], depth: f64, picture: &Picture, target: &TargetPixels) -> Option<Proposal> {
    propose_box_at(drawn, depth, picture, target, still(), Moves::Fit)
}

/// [`propose_box`], the picture lined up on the target by `align`.
fn propose_box_at(
    drawn: [[f64; 2]; 4],
    depth: f64,
    picture: &Picture,
    target: &TargetPixels,
    align: crate::fit::Alignment,
    moves: Moves,
) -> Option<Proposal> {
    let pad = Feature::Extrude(pad(depth));
    let render = picture.render();
    propose(&rectangle("S1", drawn), &pad, on(&ModelState::empty(), &xy()), &camera(), render, align, target, moves)
}

pub(crate) fn ids_of(mask: &[bool]) -> IdBuffers {
    IdBuffers {
        width: SIZE,
        height: SIZE,
        face: vec![NO_ENTITY; mask.len()],
        edge: mask.iter().map(|m| if *m { 0 } else { NO_ENTITY }).collect(),
        covered: mask.to_vec(),
        seam: vec![false; mask.len()],
    }
}

pub(crate) const TRUE: [[f64; 2]; 4] = [[-20.0, -15.0], [20.0, -15.0], [20.0, 15.0], [-20.0, 15.0]];

#[test]
fn a_corner_drawn_off_goes_back_onto_the_targets_lines() {
    let lines = drawn_box(TRUE, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    // The model drew one corner 1.5 mm off in x and 1 mm in y (about 4 px and 3 px).
    let mut drawn = TRUE;
    drawn[2] = [21.5, 16.0];
    let picture = Picture::of_box(drawn, 10.0);
    let proposal = propose_box(drawn, 10.0, &picture, &target).expect("the drawing's edges are drawn");
    assert!(super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
    let Primitive::Line { start, .. } = proposal.sketch.primitives[2] else { panic!("a line") };
    // From 1.8 mm (5.4 px) off to within the width of a drawn line (a line is a band of
    // pixels at zero distance, so the fit's precision is about a pixel).
    let error = (start[0] - 20.0).hypot(start[1] - 15.0);
    assert!(error < 0.6, "the corner is back within two pixels: {start:?}");
    // The corner is one point: the two lines that meet there still meet.
    let Primitive::Line { end, .. } = proposal.sketch.primitives[1] else { panic!("a line") };
    assert_eq!(end, start);
    // The depth was right and stays about right.
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 10.0).abs() < 0.4, "{:?}", e.extent);
}

#[test]
fn a_base_plate_does_not_grow_into_the_boss_the_target_has_on_it() {
    // The target: the plate (10 mm) and a boss on it up to 25 mm, 20 x 14 mm, in the
    // plate's middle. The model holds the plate only, drawn exactly.
    let boss = [[-10.0, -7.0], [10.0, -7.0], [10.0, 7.0], [-10.0, 7.0]];
    let plate = drawn_box(TRUE, 10.0);
    let camera = camera();
    let tall = {
        let mut mask = plate.clone();
        // The boss's edges, from z = 10 to z = 25.
        for i in 0..4 {
            let (a, b) = (boss[i], boss[(i + 1) % 4]);
            for (p, q) in [
                ([a[0], a[1], 25.0], [b[0], b[1], 25.0]),
                ([a[0], a[1], 10.0], [b[0], b[1], 10.0]),
                ([a[0], a[1], 10.0], [a[0], a[1], 25.0]),
            ] {
                for k in 0..=400 {
                    let t = k as f64 / 400.0;
                    let r = Point3::new(p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1]), p[2] + t * (q[2] - p[2]));
                    let (x, y, _) = camera.project(&r).expect("in front");
                    mask[(y.floor() as i64 * SIZE as i64 + x.floor() as i64) as usize] = true;
                }
            }
        }
        mask
    };
    let target = TargetPixels::new(SIZE, tall.clone(), &tall);
    let proposal = propose_box(TRUE, 10.0, &Picture::of_box(TRUE, 10.0), &target).expect("scored");
    assert!(!super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 10.0).abs() < 0.4, "the plate stays 10 mm: {:?}", e.extent);
}

#[test]
fn a_drawing_the_reader_constrained_square_is_fitted_square() {
    // The rectangle drawn 3 mm too wide, its sides stated horizontal and vertical: the
    // fit moves whole sides, so the solver has nothing to put back.
    let lines = drawn_box(TRUE, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let mut drawn = TRUE;
    drawn[1][0] = 23.0;
    drawn[2][0] = 23.0;
    let mut sketch = rectangle("S1", drawn);
    sketch.constraints = serde_json::from_value(serde_json::json!([
        {"type": "horizontal", "line": "g0"}, {"type": "horizontal", "line": "g2"},
        {"type": "vertical", "line": "g1"}, {"type": "vertical", "line": "g3"}]))
    .expect("constraints");
    let picture = Picture::of_box(drawn, 10.0);
    let proposal = propose(
        &sketch,
        &Feature::Extrude(pad(10.0)),
        on(&ModelState::empty(), &xy()),
        &camera(),
        picture.render(),
        still(),
        &target,
        Moves::Fit,
    )
    .expect("scored");
    let corners: Vec<[f64; 2]> = proposal
        .sketch
        .primitives
        .iter()
        .map(|p| match p {
            Primitive::Line { start, .. } => *start,
            _ => panic!("a line"),
        })
        .collect();
    for i in 0..4 {
        let (a, b) = (corners[i], corners[(i + 1) % 4]);
        let square = if i % 2 == 0 { b[1] - a[1] } else { b[0] - a[0] };
        assert!(square.abs() < 1e-7, "side {i} keeps its constraint: {corners:?}");
    }
    assert!((corners[1][0] - 20.0).abs() < 0.6 && (corners[2][0] - 20.0).abs() < 0.6, "{corners:?}");
}

/// The corners of a fitted rectangle's four lines, in drawing order.
fn corners_of(sketch: &Sketch) -> Vec<[f64; 2]> {
    sketch
        .primitives
        .iter()
        .map(|p| match p {
            Primitive::Line { start, .. } => *start,
            _ => panic!("a line"),
        })
        .collect()
}

#[test]
fn a_rectangle_drawn_skewed_is_fitted_square() {
    // Each corner read a millimetre or two off (3 to 5 px), no constraint stated: the sides
    // run up to 4 degrees off the axes. The target's lines are those of the square box.
    let lines = drawn_box(TRUE, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let drawn = [[-21.0, -14.0], [19.2, -15.8], [21.0, 14.5], [-19.3, 16.0]];
    let proposal = propose_box(drawn, 10.0, &Picture::of_box(drawn, 10.0), &target).expect("scored");
    assert_eq!(proposal.regular.squared, 4, "{proposal:?}");
    let corners = corners_of(&proposal.sketch);
    for i in 0..4 {
        let (a, b) = (corners[i], corners[(i + 1) % 4]);
        let off_square = if i % 2 == 0 { b[1] - a[1] } else { b[0] - a[0] };
        assert!(off_square.abs() < 1e-7, "side {i} is level or upright: {corners:?}");
        assert!((a[0] - TRUE[i][0]).hypot(a[1] - TRUE[i][1]) < 0.6, "corner {i} on the target's: {corners:?}");
    }
}

#[test]
fn a_steps_drawing_is_only_squared_where_it_is_drawn() {
    // The step's candidate (Moves::Regular): the target's lines are the square box's, 1 to
    // 2 mm from the drawing's corners, but no number goes to them: each side is settled
    // square about where the model drew it (its ends' mean).
    let lines = drawn_box(TRUE, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let drawn = [[-21.0, -14.0], [19.2, -15.8], [21.0, 14.5], [-19.3, 16.0]];
    let picture = Picture::of_box(drawn, 10.0);
    let pad = Feature::Extrude(pad(10.0));
    let sketch = rectangle("S1", drawn);
    let (state, frame) = (ModelState::empty(), xy());
    let at = on(&state, &frame);
    let proposal =
        propose(&sketch, &pad, at, &camera(), picture.render(), still(), &target, Moves::Regular).expect("squared");
    assert_eq!(proposal.regular.squared, 4);
    let corners = corners_of(&proposal.sketch);
    // The least-squares square nearest the drawing: each side at its two ends' mean.
    let expected = [[-20.15, -14.9], [20.1, -14.9], [20.1, 15.25], [-20.15, 15.25]];
    for (c, e) in corners.iter().zip(expected) {
        assert!((c[0] - e[0]).abs() < 1e-6 && (c[1] - e[1]).abs() < 1e-6, "{corners:?}");
    }
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert_eq!(depth_of(&e.extent), Some(10.0), "the depth is not fitted");
    // A square drawing: nothing to do.
    let exact = rectangle("S1", TRUE);
    let picture = Picture::of_box(TRUE, 10.0);
    assert!(propose(&exact, &pad, at, &camera(), picture.render(), still(), &target, Moves::Regular).is_none());
}

#[test]
fn a_side_the_target_shows_slanted_is_not_squared() {
    // The target's right side leans 5 degrees (2.6 mm over its 30 mm, 8 px at the top
    // corner: within the squaring's reach): drawn as the target shows it, it stays slanted.
    let lean = 30.0 * 5f64.to_radians().tan();
    let slanted = [[-20.0, -15.0], [20.0, -15.0], [20.0 + lean, 15.0], [-20.0, 15.0]];
    let lines = drawn_box(slanted, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let proposal = propose_box(slanted, 10.0, &Picture::of_box(slanted, 10.0), &target).expect("scored");
    let corners = corners_of(&proposal.sketch);
    assert!((corners[2][0] - (20.0 + lean)).abs() < 0.6, "the lean is kept: {corners:?}");
    assert!(!proposal.regular.any(), "{proposal:?}");
    // Drawn a little off (the top corner 1 mm left): back to the target's lean.
    let mut drawn = slanted;
    drawn[2][0] -= 1.0;
    let proposal = propose_box(drawn, 10.0, &Picture::of_box(drawn, 10.0), &target).expect("scored");
    let corners = corners_of(&proposal.sketch);
    assert!((corners[2][0] - (20.0 + lean)).abs() < 0.6, "the lean is kept: {corners:?}");
    assert!(!proposal.regular.any(), "{proposal:?}");
}

#[test]
fn a_depth_read_far_off_is_found_beyond_the_searchs_reach() {
    // Read 1.8 times as deep and 0.6 times: the top outline lies 20 px and more off, beyond
    // the depth's reach (a quarter either way) and the capped cost's pull.
    let lines = drawn_box(TRUE, 12.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    for drawn in [21.6, 7.2] {
        let proposal = propose_box(TRUE, drawn, &Picture::of_box(TRUE, drawn), &target).expect("scored");
        assert!(super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
        let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
        assert!((depth_of(&e.extent).expect("depth") - 12.0).abs() < 0.4, "read {drawn}: {:?}", e.extent);
    }
    // A depth the target shows as drawn stays so.
    let proposal = propose_box(TRUE, 12.0, &Picture::of_box(TRUE, 12.0), &target).expect("scored");
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 12.0).abs() < 0.2, "{:?}", e.extent);
}

/// The picture lined up on the target `mm` along +Z off (whole pixels), visibly.
fn lined_up_along_z(mm: f64) -> crate::fit::Alignment {
    let c = camera();
    let (a, b) =
        (c.project(&Point3::origin()).expect("in front"), c.project(&Point3::new(0.0, 0.0, 1.0)).expect("in front"));
    let shift = [((b.0 - a.0) * mm).round() as i64, ((b.1 - a.1) * mm).round() as i64];
    assert!(shift[1].abs() >= 4, "the test lines the block up visibly off: {shift:?}");
    crate::fit::Alignment { shift, ..still() }
}

#[test]
fn a_depth_read_far_short_is_found_where_the_model_is_lined_up_on_the_targets_middle() {
    // The whole picture's alignment centres a block read 0.6 times as deep on the target's
    // silhouette: its top falls short of the target's and its bottom beyond. Lined up so, a
    // deeper block's top only moves further off; each depth tried is lined up anew.
    let lines = drawn_box(TRUE, 12.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let align = lined_up_along_z(12.0 * 0.4 / 2.0);
    let proposal = propose_box_at(TRUE, 7.2, &Picture::of_box(TRUE, 7.2), &target, align, Moves::Fit).expect("scored");
    assert!(super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 12.0).abs() < 1.0, "{:?}", e.extent);
}

#[test]
fn a_block_read_long_and_lined_up_on_its_top_is_fitted_back_from_its_base() {
    // The target: a block 30 mm tall. The model's is 32 mm, and the whole picture lined it
    // up on its top (a lid's many edges outweigh a base's few): its base lies 2 mm' worth
    // (5 px) beyond the target's. The depth alone moves the top off its lines, and no one
    // corner moves the base; the depth with the drawing slid along, keeping the top, does.
    let lines = drawn_box(TRUE, 30.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let align = lined_up_along_z(-2.0);
    let proposal =
        propose_box_at(TRUE, 32.0, &Picture::of_box(TRUE, 32.0), &target, align, Moves::Whole).expect("scored");
    assert!(super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 30.0).abs() < 0.25, "{:?}", e.extent);
    // Its outline the same size, moved in its plane.
    let corners = corners_of(&proposal.sketch);
    let width = (corners[1][0] - corners[0][0]).hypot(corners[1][1] - corners[0][1]);
    assert!((width - 40.0).abs() < 0.5, "{corners:?}");
    // Under other features (Moves::Fit) the drawing is not slid: the depth is found with
    // the picture lined up anew for each depth ([`super::depth::near_depth`]), its outline
    // where it was drawn.
    let under = propose_box_at(TRUE, 32.0, &Picture::of_box(TRUE, 32.0), &target, align, Moves::Fit).expect("scored");
    let Feature::Extrude(e) = under.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 30.0).abs() < 0.25, "{:?}", e.extent);
    let moved =
        corners_of(&under.sketch).iter().zip(TRUE).map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1])).fold(0.0, f64::max);
    assert!(moved < 0.5, "not slid: {:?}", corners_of(&under.sketch));
}

#[test]
fn a_depth_read_short_is_lengthened() {
    let lines = drawn_box(TRUE, 12.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let proposal = propose_box(TRUE, 10.0, &Picture::of_box(TRUE, 10.0), &target).expect("scored");
    let Feature::Extrude(e) = proposal.feature else { panic!("an extrusion") };
    assert!((depth_of(&e.extent).expect("depth") - 12.0).abs() < 0.4, "{:?}", e.extent);
}

#[test]
fn an_exact_drawing_gains_nothing_and_a_number_is_never_pulled_past_its_reach() {
    let lines = drawn_box(TRUE, 10.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let exact = propose_box(TRUE, 10.0, &Picture::of_box(TRUE, 10.0), &target).expect("scored");
    assert!(!super::super::worth_building(exact.before_px, exact.after_px), "{exact:?}");
    assert!(exact.before_px < 1.0, "an exact drawing lies on the lines: {exact:?}");
    assert!(!exact.regular.any(), "an exact drawing is square already: {exact:?}");
    // A corner 8 mm off (24 px, three times the reach): the target's line is out of reach,
    // so the corner is held where the model put it rather than pulled to the edge.
    let mut far = TRUE;
    far[2] = [28.0, 15.0];
    let proposal = propose_box(far, 10.0, &Picture::of_box(far, 10.0), &target).expect("scored");
    let reach = POINT_REACH_PX / pixels_per_unit(&camera());
    for (p, q) in proposal.sketch.primitives.iter().zip(&rectangle("S1", far).primitives) {
        let (Primitive::Line { start: a, .. }, Primitive::Line { start: b, .. }) = (p, q) else { panic!() };
        assert!((a[0] - b[0]).abs() <= reach + 1e-9 && (a[1] - b[1]).abs() <= reach + 1e-9, "{a:?} {b:?}");
    }
}

#[test]
fn a_revolves_corner_circles_fix_its_radius() {
    // A disc revolved from a rectangle on XZ about the sketch's vertical axis: radius 20,
    // height 8. The model drew the radius 1.2 mm short.
    // The disc's two circles, as polylines.
    let disc = |r: f64| Picture::of(vec![circle_about_z(r, 0.0), circle_about_z(r, 8.0)]);
    let lines = disc(20.0).ids.edge.iter().map(|&e| e != NO_ENTITY).collect::<Vec<_>>();
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let drawn = [[0.0, 0.0], [18.8, 0.0], [18.8, 8.0], [0.0, 8.0]];
    let mut sketch = rectangle("S1", drawn);
    sketch.on = "XZ".into();
    let proposal = propose_turn(&sketch, disc(18.8).render(), &target);
    let Primitive::Line { start, end, .. } = proposal.sketch.primitives[1] else { panic!("a line") };
    assert!((start[0] - 20.0).abs() < 0.6 && (end[0] - 20.0).abs() < 0.6, "{start:?} {end:?}");
}

/// `sketch`, drawn on XZ and turned a whole turn about its vertical axis (Z), fitted to
/// `target` through the test camera.
fn propose_turn(sketch: &Sketch, render: Render<'_>, target: &TargetPixels) -> Proposal {
    let feature = Feature::Revolve { point: [0.0, 0.0], direction: [0.0, 1.0], angle: 360.0 };
    propose(sketch, &feature, on(&ModelState::empty(), &xz()), &camera(), render, still(), target, Moves::Fit)
        .expect("scored")
}

/// A circle of radius `r` about the Z axis at height `z`, as a polyline.
fn circle_about_z(r: f64, z: f64) -> Vec<Point3<f64>> {
    (0..=720)
        .map(|k| {
            let a = std::f64::consts::TAU * k as f64 / 720.0;
            Point3::new(r * a.cos(), r * a.sin(), z)
        })
        .collect()
}

/// The silhouette of a shaft about Z through the test camera: sections `(radius, from, to)`
/// along Z, each a cylinder (a ray meets one where its nearest approach to the axis within
/// the section's heights lies inside the radius).
fn shaft_mask(sections: &[(f64, f64, f64)]) -> Vec<bool> {
    let camera = camera();
    let views::Projection::Orthographic { pixels_per_unit: scale } = camera.projection else { panic!("orthographic") };
    let [eye, forward, right, up] = [camera.eye, camera.forward, camera.right, camera.up].map(Vector3::from);
    let half = f64::from(SIZE) / 2.0;
    (0..SIZE * SIZE)
        .map(|i| {
            let (x, y) = (f64::from(i % SIZE) + 0.5, f64::from(i / SIZE) + 0.5);
            let base = eye + right * ((x - half) / scale) + up * ((half - y) / scale);
            sections.iter().any(|&(radius, from, to)| {
                let (t0, t1) = ((from - base.z) / forward.z, (to - base.z) / forward.z);
                let a = forward.x * forward.x + forward.y * forward.y;
                let b = 2.0 * (base.x * forward.x + base.y * forward.y);
                let t = (-b / (2.0 * a)).clamp(t0.min(t1), t0.max(t1));
                (base.x + t * forward.x).hypot(base.y + t * forward.y) <= radius
            })
        })
        .collect()
}

#[test]
fn a_shafts_sides_fix_a_radius_whose_circles_are_not_drawn() {
    // A shaft about Z: radius 12 up to 30, then 18 up to 40. The model drew the neck 2 mm thin
    // (6 px), and its render draws only the head's circles: the neck's were chamfered away,
    // so only the neck's sides, an outline and no edge, show its radius.
    let circle = circle_about_z;
    let head = || vec![circle(18.0, 30.0), circle(18.0, 40.0)];
    let lines = Picture::of(head()).ids.edge.iter().map(|&e| e != NO_ENTITY).collect::<Vec<_>>();
    let target = TargetPixels::new(SIZE, shaft_mask(&[(12.0, 0.0, 30.0), (18.0, 30.0, 40.0)]), &lines);
    let drawn = [[0.0, 0.0], [10.0, 0.0], [10.0, 30.0], [18.0, 30.0], [18.0, 40.0], [0.0, 40.0]];
    let primitives =
        (0..6).map(|i| Primitive::Line { start: drawn[i], end: drawn[(i + 1) % 6], construction: false }).collect();
    let sketch =
        Sketch { name: "S1".into(), on: "XZ".into(), primitives, constraints: Vec::new(), auto_coincident: true };
    let mut picture = Picture::of(head());
    picture.ids.covered = shaft_mask(&[(10.0, 0.0, 30.0), (18.0, 30.0, 40.0)]);
    let proposal = propose_turn(&sketch, picture.render(), &target);
    let Primitive::Line { start, end, .. } = proposal.sketch.primitives[1] else { panic!("a line") };
    assert!((start[0] - 12.0).abs() < 0.5 && (end[0] - 12.0).abs() < 0.5, "{start:?} {end:?}");
    // The head's radius, which its circles and sides agree on, stays.
    let Primitive::Line { start, end, .. } = proposal.sketch.primitives[3] else { panic!("a line") };
    assert!((start[0] - 18.0).abs() < 0.3 && (end[0] - 18.0).abs() < 0.3, "{start:?} {end:?}");
}

/// A pipe up 50 along Z from the origin, a quarter turn of radius 18 towards +X, then 13
/// along X: how it carries a profile about the origin to its far end, at (31, 0, 68),
/// facing +X.
fn bent_pipe() -> crate::fit::sweep::Carry {
    let path: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "XZ", "primitives": [
        {"type": "line", "start": [0.0, 0.0], "end": [0.0, 50.0]},
        {"type": "center_arc", "center": [18.0, 50.0], "radius": 18.0, "start_angle": 90.0, "end_angle": 180.0},
        {"type": "line", "start": [18.0, 68.0], "end": [31.0, 68.0]}]}))
    .expect("a path");
    crate::fit::sweep::carry(&path, &xz(), [0.0; 3]).expect("an open path")
}

/// The bent pipe's far end: its circle of radius `r`, about the path's end.
fn far_end(r: f64) -> Vec<Point3<f64>> {
    (0..=720)
        .map(|k| {
            let a = std::f64::consts::TAU * k as f64 / 720.0;
            Point3::new(31.0, r * a.cos(), 68.0 + r * a.sin())
        })
        .collect()
}

#[test]
fn a_bent_pipes_bore_is_read_off_its_far_end() {
    // The bore is drawn on XY at the start (hidden under the pipe), radius 3.5 where the
    // target's far end shows 2.5, and about a centre 1 mm off the path.
    let carry = bent_pipe();
    let lines =
        Picture::of(vec![far_end(6.0), far_end(2.5)]).ids.edge.iter().map(|&e| e != NO_ENTITY).collect::<Vec<_>>();
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let bore: Sketch = serde_json::from_value(serde_json::json!({"name": "S3", "on": "XY", "primitives": [
        {"type": "circle", "center": [0.8, -0.6], "radius": 3.5}]}))
    .expect("a sketch");
    let proposal = propose(
        &bore,
        &Feature::Sweep { carry, bore_under: None },
        on(&ModelState::empty(), &xy()),
        &camera(),
        Picture::of(vec![far_end(6.0), far_end(3.5)]).render(),
        still(),
        &target,
        Moves::Fit,
    )
    .expect("the far end is scored");
    let Primitive::Circle { center, radius, .. } = proposal.sketch.primitives[0] else { panic!("a circle") };
    assert!((radius - 2.5).abs() < 0.2, "radius {radius}");
    assert_eq!(center, [0.0, 0.0], "the bore's centre put on the path's start");
    assert_eq!(proposal.regular, Regularised { squared: 0, concentric: 1, equal: 0 });
    assert!(proposal.after_px < 0.5 && proposal.before_px > 1.5, "{} -> {} px", proposal.before_px, proposal.after_px);
}

#[test]
fn a_bore_drawn_nearer_its_pipes_ring_than_its_own_is_read_from_the_whole_range_inside_the_pipe() {
    // The bent pipe, radius 6; the target's bore is 2, drawn 4.5: the pipe's ring is nearer
    // it than the bore's own, and the nearest good value is the pipe's.
    let carry = bent_pipe();
    let lines =
        Picture::of(vec![far_end(6.0), far_end(2.0)]).ids.edge.iter().map(|&e| e != NO_ENTITY).collect::<Vec<_>>();
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let bore: Sketch = serde_json::from_value(serde_json::json!({"name": "S3", "on": "XY", "primitives": [
        {"type": "circle", "center": [0.0, 0.0], "radius": 4.5}]}))
    .expect("a sketch");
    let radius_with = |bore_under: Option<f64>| {
        let proposal = propose(
            &bore,
            &Feature::Sweep { carry, bore_under },
            on(&ModelState::empty(), &xy()),
            &camera(),
            Picture::of(vec![far_end(6.0), far_end(4.5)]).render(),
            still(),
            &target,
            Moves::Fit,
        )
        .expect("the far end is scored");
        let Primitive::Circle { radius, .. } = proposal.sketch.primitives[0] else { panic!("a circle") };
        radius
    };
    // Left to the nearest good value, the bore goes out to the pipe's ring.
    assert!(radius_with(None) > 5.0, "radius {}", radius_with(None));
    // Kept two pixels inside the pipe, it is read from all of that range.
    let pixel = 1.0 / pixels_per_unit(&camera());
    let radius = radius_with(Some(6.0 - 2.0 * pixel));
    assert!((radius - 2.0).abs() < 0.2, "radius {radius}");
}

/// A plate from z = 0 to z = 6, its two large faces listed as the state lists them.
fn plate_state() -> ModelState {
    let face = |id: &str, z: f64, normal: f64| freecad_bridge::state::Face {
        id: id.into(),
        kind: freecad_bridge::state::FaceKind::Plane,
        area: 1600.0,
        centroid: [0.0, 0.0, z],
        normal: Some([0.0, 0.0, normal]),
        axis: None,
        center: None,
        radius: None,
        minor_radius: None,
        semi_angle: None,
        edges: Vec::new(),
    };
    let mut plate = ModelState::empty();
    plate.faces = vec![face("F1", 0.0, -1.0), face("F2", 6.0, 1.0)];
    plate.bbox = Some(freecad_bridge::state::BoundingBox { min: [-20.0, -20.0, 0.0], max: [20.0, 20.0, 6.0] });
    plate
}

#[test]
fn a_pocket_drawn_above_the_plate_is_read_off_its_rim() {
    // The pocket is drawn on a plane 2 above the plate's top, 5 deep: its outline on the
    // plane and its floor are not drawn (the floor hidden, say), only its rim on the top.
    let true_rim = [[-10.0, -7.0], [10.0, -7.0], [10.0, 7.0], [-10.0, 7.0]];
    let drawn = [[-11.5, -8.2], [11.3, -8.2], [11.3, 8.4], [-11.5, 8.4]];
    let rim = |c: [[f64; 2]; 4]| {
        (0..4).map(|i| ([c[i][0], c[i][1], 6.0], [c[(i + 1) % 4][0], c[(i + 1) % 4][1], 6.0])).collect::<Vec<_>>()
    };
    let lines = segments(&rim(true_rim));
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let above = Frame { origin: [0.0, 0.0, 8.0], ..xy() };
    let mut pocket = pad(5.0);
    pocket.mode = Mode::Cut;
    let plate = plate_state();
    let proposal = propose(
        &rectangle("S2", drawn),
        &Feature::Extrude(pocket),
        on(&plate, &above),
        &camera(),
        Picture::of_segments(&rim(drawn)).render(),
        still(),
        &target,
        Moves::Fit,
    )
    .expect("the rim is scored");
    for (got, want) in corners_of(&proposal.sketch).iter().zip(true_rim) {
        assert!((got[0] - want[0]).abs() < 0.4 && (got[1] - want[1]).abs() < 0.4, "{got:?} against {want:?}");
    }
}

#[test]
fn a_through_holes_radius_is_read_off_the_face_it_comes_out_on() {
    // A plate from z = 0 to z = 6 with a through hole of radius 5 about (0, 0). The hole is
    // drawn on its bottom face (XY, hidden from the isometric camera), radius 6.5: only its
    // way out on the top face is drawn, in the target and in the candidate.
    let plate = plate_state();
    let circle = circle_about_z;
    let lines = Picture::of(vec![circle(5.0, 6.0)]).ids.edge.iter().map(|&e| e != NO_ENTITY).collect::<Vec<_>>();
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let hole: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "XY", "primitives": [
        {"type": "circle", "center": [0.0, 0.0], "radius": 6.5}]}))
    .expect("a sketch");
    let cut = Feature::Extrude(Extrude {
        profile: "S2".into(),
        mode: Mode::Cut,
        extent: Extent::ThroughAll { symmetric: false },
        reversed: false,
    });
    let proposal = propose(
        &hole,
        &cut,
        on(&plate, &xy()),
        &camera(),
        Picture::of(vec![circle(6.5, 6.0)]).render(),
        still(),
        &target,
        Moves::Fit,
    )
    .expect("the way out is scored");
    let Primitive::Circle { radius, .. } = proposal.sketch.primitives[0] else { panic!("a circle") };
    assert!((radius - 5.0).abs() < 0.3, "radius {radius}");
    assert!(proposal.samples >= 40, "{} samples on the way out", proposal.samples);
}

#[test]
fn a_proposals_tries_run_down_its_chain_and_a_later_search_follows_them() {
    let proposal = |after_px: f64, free: Option<Proposal>| Proposal {
        sketch: rectangle("S1", TRUE),
        feature: Feature::Extrude(pad(12.0)),
        before_px: 2.0,
        after_px,
        samples: 10,
        regular: Regularised::default(),
        free: free.map(Box::new),
        from_near: false,
    };
    // The drawing made regular, its free fit, then the search without the near depth's.
    let near = proposal(0.3, Some(proposal(0.4, None)));
    let tried: Vec<f64> = near.then(Some(proposal(0.5, None))).tries().map(|p| p.after_px).collect();
    assert_eq!(tried, vec![0.3, 0.4, 0.5]);
    assert_eq!(proposal(0.3, None).then(None).tries().count(), 1);
    // A try every move of which the search refused (infinite cost) is left out.
    let refused = proposal(0.3, Some(proposal(f64::INFINITY, Some(proposal(0.5, None)))));
    let tried: Vec<f64> = refused.finite().expect("finite tries").tries().map(|p| p.after_px).collect();
    assert_eq!(tried, vec![0.3, 0.5]);
    assert!(proposal(f64::INFINITY, None).finite().is_none());
}

#[test]
fn a_drawing_that_crosses_as_drawn_is_scored_as_any_other() {
    // Two corners swapped: the drawing's sides cross as drawn. Every move of it crosses too,
    // so it is not searched again refusing crossings (its own cost would be infinite, and a
    // report's numbers must be finite to be written as JSON).
    let bow_tie = [[-20.0, -15.0], [20.0, -15.0], [-20.0, 15.0], [20.0, 15.0]];
    assert!(freecad_bridge::crossing::first_crossing(&rectangle("S1", bow_tie).primitives).is_some());
    let lines = drawn_box(TRUE, 12.0);
    let target = TargetPixels::new(SIZE, lines.clone(), &lines);
    let proposal = propose_box(bow_tie, 12.0, &Picture::of_box(bow_tie, 12.0), &target).expect("scored");
    assert!(proposal.before_px.is_finite() && proposal.after_px.is_finite(), "{proposal:?}");
}

/// The ink of straight segments (model coordinates) seen through the test camera's framing
/// in a picture of `size` pixels, drawn as a renderer draws them smoothly: each pixel as
/// dark as its centre is near the line (all ink within 1 px), so the ink's centroid across
/// a line is on it.
fn anti_aliased(list: &[([f64; 3], [f64; 3])], size: u32) -> Vec<f32> {
    let camera = camera_at(size);
    let n = size as usize;
    let mut ink = vec![0.0f32; n * n];
    for &(a, b) in list {
        let (ax, ay, _) = camera.project(&Point3::from(a)).expect("in front");
        let (bx, by, _) = camera.project(&Point3::from(b)).expect("in front");
        let (dx, dy) = (bx - ax, by - ay);
        let length2 = (dx * dx + dy * dy).max(1e-12);
        let (x0, x1) = (ax.min(bx).floor() as i64 - 2, ax.max(bx).ceil() as i64 + 2);
        let (y0, y1) = (ay.min(by).floor() as i64 - 2, ay.max(by).ceil() as i64 + 2);
        for y in y0.max(0)..=y1.min(n as i64 - 1) {
            for x in x0.max(0)..=x1.min(n as i64 - 1) {
                let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
                let t = (((px - ax) * dx + (py - ay) * dy) / length2).clamp(0.0, 1.0);
                let d = (px - ax - t * dx).hypot(py - ay - t * dy);
                let i = y as usize * n + x as usize;
                ink[i] = ink[i].max((1.0 - d).max(0.0) as f32);
            }
        }
    }
    ink
}

/// The target of a box pad on XY (profile `corners`, `depth` deep) moved by `by` (mm), its
/// lines drawn both in the framed picture and, one ink pixel wide, in an image of three
/// pixels per framed pixel (the target's own pixels), with the lines read from those.
fn finely_drawn_box(corners: [[f64; 2]; 4], depth: f64, by: [f64; 3]) -> TargetPixels {
    let moved: Vec<([f64; 3], [f64; 3])> = box_edges(corners, depth)
        .iter()
        .map(|(a, b)| ([a[0] + by[0], a[1] + by[1], a[2] + by[2]], [b[0] + by[0], b[1] + by[1], b[2] + by[2]]))
        .collect();
    let native = crate::fit::NativeLines::centred(SIZE, 3, anti_aliased(&moved, SIZE * 3));
    let lines = segments(&moved);
    TargetPixels::new(SIZE, lines.clone(), &lines).with_native(native).with_refined_lines()
}

fn width_and_height(sketch: &Sketch) -> [f64; 2] {
    let c = corners_of(sketch);
    let (xs, ys): (Vec<f64>, Vec<f64>) = c.iter().map(|p| (p[0], p[1])).unzip();
    let span = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min);
    [span(&xs), span(&ys)]
}

#[test]
fn an_exact_box_whose_target_lies_a_fraction_of_a_pixel_off_is_left_alone() {
    // A third of a pixel along the picture's x (0.14 mm along X), which the whole-pixel
    // alignment cannot take out: the samples are scored where they lie best within half a
    // pixel.
    let target = finely_drawn_box(TRUE, 10.0, [0.14, 0.0, 0.0]);
    let exact = propose_box(TRUE, 10.0, &Picture::of_box(TRUE, 10.0), &target).expect("scored");
    assert!(!super::super::worth_building(exact.before_px, exact.after_px), "{exact:?}");
    let [w, h] = width_and_height(&exact.sketch);
    assert!((w - 40.0).abs() < 0.05 && (h - 30.0).abs() < 0.05, "{w} x {h}");
}

#[test]
fn a_side_drawn_a_millimetre_out_is_fitted_back_against_lines_a_fraction_of_a_pixel_off() {
    let target = finely_drawn_box(TRUE, 10.0, [0.14, 0.0, 0.0]);
    let mut drawn = TRUE;
    drawn[1][0] += 1.0;
    drawn[2][0] += 1.0;
    let fit = |target: &TargetPixels| {
        let proposal = propose_box(drawn, 10.0, &Picture::of_box(drawn, 10.0), target).expect("scored");
        assert!(super::super::worth_building(proposal.before_px, proposal.after_px), "{proposal:?}");
        width_and_height(&proposal.sketch)
    };
    // Back within 0.05 mm of the true 40 x 30 (from 41 x 30).
    let [w, h] = fit(&target);
    assert!((w - 40.0).abs() < 0.05 && (h - 30.0).abs() < 0.05, "{w} x {h}");
}
