//! Selectors (the no-EGR way to name entities) resolve to the state's own IDs, in every body.

mod common;

use common::{example, session};

#[test]
fn selectors_name_entities_of_every_body_by_their_ids() {
    let mut s = session();
    s.execute_program(&example("two_bodies")).expect("two bodies");
    let state = s.state().clone();
    // The cylinder's side is the only cylindrical face whose axis is vertical and that
    // is not the hole's: the highest one in +X.
    let side = vision2cad::selectors::resolve("face cylindrical highest +X", &state).expect("resolves");
    assert_eq!(side, ["B2.F1"], "selectors answer with the state's own IDs");
    for id in ["B2.F1", "B2.E2", "F6", "E1"] {
        let selector = vision2cad::selectors::find(&state, id).unwrap_or_else(|| panic!("a selector for {id}"));
        let back = vision2cad::selectors::resolve(&selector, &state).expect("resolves");
        assert_eq!(back, [id], "{selector}");
    }
}
