//! Bad commands are refused with a reason a model can act on, and leave the document
//! exactly as it was.

use freecad_bridge::testing::{example, program, session};
use freecad_bridge::{BridgeError, Command, ModelState, Session};

fn command(json: &str) -> Command {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn snapshot(s: &mut Session) -> (ModelState, Vec<freecad_bridge::Parameter>) {
    (s.state().clone(), s.parameters().expect("parameters"))
}

/// Run `bad` on the plate example and check the refusal and that nothing changed.
fn refused(bad: &str, expect_entity: Option<&str>, expect_reason: &str) {
    let mut s = session();
    s.execute_program(&example("plate_counterbore")).expect("plate");
    let before = snapshot(&mut s);
    let err = s.execute(&command(bad)).expect_err(bad);
    let BridgeError::Command { entity, reason, op, .. } = &err else { panic!("{bad}: unexpected error {err}") };
    assert_eq!(op, command(bad).op());
    assert!(reason.contains(expect_reason), "{bad}: reason '{reason}' lacks '{expect_reason}'");
    if let Some(id) = expect_entity {
        assert_eq!(entity.as_deref(), Some(id), "{bad}: {err}");
        assert!(err.to_string().contains(id), "the message names {id}: {err}");
    }
    // Nothing changed, not in our view nor in FreeCAD's (the worker's fresh state report).
    assert_eq!(snapshot(&mut s), before, "{bad} changed the document");
    let reported = s.query_state().expect("fresh state");
    assert_eq!(reported, before.0, "{bad} changed FreeCAD's document");
    // And the session still works.
    s.execute(&command(r#"{"op": "fillet", "edges": ["E1"], "radius": 0.5}"#))
        .expect("a good command after the bad one");
}

#[test]
fn unknown_entity_ids_are_refused() {
    refused(r#"{"op": "fillet", "edges": ["E99"], "radius": 1}"#, Some("E99"), "E1..E");
    refused(
        r#"{"op": "sketch", "name": "S9", "on": "F42", "primitives": [{"type": "circle", "center": [0, 0], "radius": 1}]}"#,
        Some("F42"),
        "unknown face",
    );
    refused(
        r#"{"op": "sketch", "name": "S9", "on": "F5", "primitives": [{"type": "circle", "center": [1, 1], "radius": 1}],
            "constraints": [{"type": "point_on_object", "point": "g0.center", "object": "E500"}]}"#,
        Some("E500"),
        "unknown edge",
    );
}

#[test]
fn references_of_the_wrong_kind_are_refused() {
    refused(
        r#"{"op": "sketch", "name": "S9", "on": "F7", "primitives": [{"type": "circle", "center": [0, 0], "radius": 1}]}"#,
        Some("F7"),
        "planar",
    );
    refused(
        r#"{"op": "extrude", "profile": "S7", "mode": "add", "extent": {"type": "one_side", "depth": 1}}"#,
        Some("S7"),
        "unknown sketch",
    );
    refused(
        r#"{"op": "revolve", "profile": "S2", "mode": "add", "axis": "E12", "angle": 90}"#,
        Some("E12"),
        "not a straight edge",
    );
    refused(r#"{"op": "plane", "name": "S1", "on": "XY", "offset": 3}"#, Some("S1"), "already taken");
}

#[test]
fn an_open_profile_is_refused_by_freecad() {
    // The sketch alone is fine; extruding it is not.
    let mut s = session();
    s.execute_program(&example("box")).expect("box");
    s.execute(&command(
        r#"{"op": "sketch", "name": "S2", "on": "F6", "primitives": [
            {"type": "line", "start": [1, 1], "end": [5, 1]}, {"type": "line", "start": [5, 1], "end": [5, 5]}]}"#,
    ))
    .expect("open sketch");
    let before = snapshot(&mut s);
    let err = s
        .execute(&command(
            r#"{"op": "extrude", "profile": "S2", "mode": "add", "extent": {"type": "one_side", "depth": 2}}"#,
        ))
        .expect_err("open profile");
    assert!(matches!(err, BridgeError::Command { .. }), "{err}");
    assert_eq!(snapshot(&mut s), before);
}

#[test]
fn a_fillet_the_kernel_refuses_is_rolled_back() {
    refused(r#"{"op": "fillet", "edges": ["E1", "E2"], "radius": 50}"#, None, "fillet");
}

#[test]
fn conflicting_constraints_are_refused() {
    refused(
        r#"{"op": "sketch", "name": "S9", "on": "F5", "primitives": [{"type": "line", "start": [1, 1], "end": [5, 1]}],
            "constraints": [{"type": "horizontal", "line": "g0"}, {"type": "vertical", "line": "g0"}]}"#,
        Some("S9"),
        "cannot be solved",
    );
}

#[test]
fn cuts_that_remove_nothing_and_pockets_without_a_base_are_refused() {
    let mut s = session();
    let err = s
        .execute_program(&program(
            r#"{"commands": [
            {"op": "sketch", "name": "S1", "on": "XY", "primitives": [{"type": "circle", "center": [0, 0], "radius": 1}]},
            {"op": "extrude", "profile": "S1", "mode": "cut", "extent": {"type": "one_side", "depth": 1}}]}"#,
        ))
        .expect_err("a cut with nothing to cut");
    assert_eq!(err.index, 1);
    assert!(s.state().empty, "the failed pocket left something behind");

    let mut s = session();
    s.execute_program(&example("box")).expect("box");
    s.execute(&command(r#"{"op": "sketch", "name": "S2", "on": "XY", "primitives": [{"type": "circle", "center": [100, 100], "radius": 1}]}"#))
        .expect("far sketch");
    let before = snapshot(&mut s);
    let err = s
        .execute(&command(r#"{"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "through_all"}}"#))
        .expect_err("miss");
    assert!(err.to_string().contains("removed no material"), "{err}");
    assert_eq!(snapshot(&mut s), before);
}

#[test]
fn a_failed_parameter_edit_restores_the_old_values() {
    let mut s = session();
    s.execute_program(&example("box")).expect("box");
    let before = snapshot(&mut s);
    let err = s.set_parameters(&[("Pad.Length".to_string(), -3.0)].into()).expect_err("negative depth");
    assert!(err.to_string().contains("Pad.Length"), "{err}");
    let err = s.set_parameters(&[("Nope.Length".to_string(), 3.0)].into()).expect_err("unknown parameter");
    assert!(err.to_string().contains("Nope.Length"), "{err}");
    assert_eq!(snapshot(&mut s), before);
}

#[test]
fn redundant_constraints_are_dropped_and_named_and_conflicting_ones_refused() {
    let mut s = session();
    let rectangle = r#"{"op": "sketch", "name": "S1", "on": "XY", "primitives": [
        {"type": "line", "start": [0, 0], "end": [10, 0]}, {"type": "line", "start": [10, 0], "end": [10, 5]},
        {"type": "line", "start": [10, 5], "end": [0, 5]}, {"type": "line", "start": [0, 5], "end": [0, 0]}],
        "constraints": [CONSTRAINTS]}"#;
    // The bottom is horizontal and parallel to the top, which is horizontal too: one of the
    // three says nothing new.
    let redundant = rectangle.replace(
        "CONSTRAINTS",
        r#"{"type": "horizontal", "line": "g0"}, {"type": "horizontal", "line": "g2"}, {"type": "parallel", "a": "g0", "b": "g2"}"#,
    );
    let executed = s.execute(&command(&redundant)).expect("the sketch solves without the redundant constraint");
    assert_eq!(executed.dropped.len(), 1, "{executed:?}");
    assert!(executed.dropped[0].starts_with('#'), "{executed:?}");
    assert!(s.state().features.iter().any(|f| f.name == "S1"));
    // Two lengths for one line conflict: refused, the document unchanged.
    let mut s = session();
    let conflicting = rectangle.replace(
        "CONSTRAINTS",
        r#"{"type": "length", "line": "g0", "value": 10}, {"type": "length", "line": "g0", "value": 12}"#,
    );
    let err = s.execute(&command(&conflicting)).expect_err("conflicting constraints");
    assert!(err.to_string().contains("conflicting constraints (#0, #1:"), "the two lengths are named: {err}");
    assert!(s.state().empty && s.state().features.is_empty(), "nothing was added");
}
