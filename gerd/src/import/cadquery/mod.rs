//! The CadQuery subset of CAD-Coder's test100: a hand-written tokenizer, parser and
//! evaluator that reproduce what CadQuery builds, without Python.
//!
//! Semantics follow CadQuery 2.x: a `Workplane` shares one context (pending edges, pending
//! wires, first point) with every workplane derived from it; `moveTo` sets the current
//! point; `lineTo`/`threePointArc` add pending edges from the current point (the plane
//! origin on a fresh workplane); `close` adds a closing line when the end is more than 1e-6
//! from the first point and turns the pending edges into a wire; `circle` adds a circle
//! wire centred at the current point; `extrude` makes faces from *all* pending wires of the
//! context (the first the outer one, the others holes), whatever `add` put on the stack,
//! and extrudes them by `d` along the plane normal (`both=True`: `d` to each side).

mod evaluator;
mod lexer;
mod parser;

use freecad_bridge::Session;

use super::{ImportError, Imported, Placement, build};
use evaluator::features_of;
pub use parser::{Expr, Stmt, parse_cadquery};

/// Why CadQuery text was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CqError {
    #[error("line {line}: syntax error: {message}")]
    Syntax { line: usize, message: String },
    #[error("line {line}: unsupported construct `{construct}`")]
    Unsupported { line: usize, construct: String },
    #[error("line {line}: {message}")]
    Semantic { line: usize, message: String },
    #[error("the program never assigns `solid`, the final part")]
    NoResult,
}

/// Import CAD-Coder-style CadQuery code: build it in `session` (which should hold an empty
/// document) and return the program in the command language.
pub fn import_cadquery(code: &str, session: &mut Session) -> Result<Imported, ImportError> {
    import_cadquery_with(code, session, Placement::FacesFirst)
}

/// [`import_cadquery`] with a choice of where sketches may go.
pub fn import_cadquery_with(code: &str, session: &mut Session, placement: Placement) -> Result<Imported, ImportError> {
    let (features, notes) = features_of(code)?;
    build(session, &features, notes, placement)
}

#[cfg(test)]
mod tests {
    use super::lexer::{Tok, tokenize};
    use super::*;
    use crate::import::{Curve, Feature, Span, V3};
    use freecad_bridge::command::Mode;

    const PLANE: &str =
        "cq.Workplane(cq.Plane(cq.Vector(1.0, 2.0, 3.0), cq.Vector(1.0, 0.0, 0.0), cq.Vector(0.0, 0.0, 1.0)))";

    fn features(code: &str) -> Vec<Feature> {
        features_of(code).map(|(f, _)| f).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn tokenizer_reads_numbers_comments_and_continued_lines() {
        let toks = tokenize("a = f(1.5e-3, -2,\n .5) # note\nb=3E2\n").expect("tokens");
        let kinds: Vec<Tok> = toks.into_iter().map(|t| t.tok).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Ident("a".into()),
                Tok::Punct('='),
                Tok::Ident("f".into()),
                Tok::Punct('('),
                Tok::Number(1.5e-3),
                Tok::Punct(','),
                Tok::Punct('-'),
                Tok::Number(2.0),
                Tok::Punct(','),
                Tok::Number(0.5),
                Tok::Punct(')'),
                Tok::Newline,
                Tok::Ident("b".into()),
                Tok::Punct('='),
                Tok::Number(300.0),
                Tok::Newline,
                Tok::Newline,
            ]
        );
    }

    #[test]
    fn parser_builds_method_chains_and_keywords() {
        let stmts = parse_cadquery("import cadquery as cq\ns = wp.add(l0).extrude(-0.5, both=True)\n").expect("parse");
        assert_eq!(stmts[0], Stmt::Import { alias: "cq".into(), line: 1 });
        let Stmt::Assign { target, value, line } = &stmts[1] else { panic!("assignment expected") };
        assert_eq!((target.as_str(), *line), ("s", 2));
        assert_eq!(value.to_string(), "wp.add(l0).extrude(-0.5, both=True)");
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let err = parse_cadquery("import cadquery as cq\nx = f(1,\n2))\n").expect_err("extra paren");
        assert!(matches!(err, CqError::Syntax { line: 3, .. }), "{err}");
        let err = parse_cadquery("x = 1 $ 2").expect_err("bad char");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn unsupported_constructs_are_named_with_their_line() {
        let code = format!("import cadquery as cq\nwp = {PLANE}\nr = wp.rect(1, 2)\n");
        let err = features_of(&code).expect_err("rect");
        assert_eq!(err, CqError::Unsupported { line: 3, construct: ".rect()".into() });
        let code = format!(
            "import cadquery as cq\nwp = {PLANE}\nl = wp.moveTo(0, 0).lineTo(1, 0).lineTo(1, 1).close()\ns = wp.add(l).extrude(1, taper=5)\nsolid = s\n"
        );
        let err = features_of(&code).expect_err("taper");
        assert!(matches!(err, CqError::Unsupported { line: 4, .. }), "{err}");
        let err = features_of("import cadquery as cq\nshow_object(x)\n").expect_err("call");
        assert_eq!(err, CqError::Unsupported { line: 2, construct: "show_object".into() });
    }

    #[test]
    fn close_adds_the_closing_line_and_lineto_starts_at_the_origin() {
        let code = format!(
            "import cadquery as cq\nwp = {PLANE}\nl = wp.lineTo(2.0, 0.0).lineTo(2.0, 1.0).close()\ns0 = wp.add(l).extrude(0.5)\nsolid = s0\n"
        );
        let f = features(&code);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].loops[0],
            vec![
                Curve::Line([1.0, 2.0, 3.0], [3.0, 2.0, 3.0]),
                Curve::Line([3.0, 2.0, 3.0], [3.0, 3.0, 3.0]),
                Curve::Line([3.0, 3.0, 3.0], [1.0, 2.0, 3.0]),
            ]
        );
        assert_eq!(f[0].span, Span { forward: 0.5, backward: 0.0 });
    }

    #[test]
    fn extrude_takes_every_pending_wire_and_circles_centre_on_moveto() {
        let code = format!(
            "import cadquery as cq\nwp = {PLANE}\nl0 = wp.moveTo(0, 0).lineTo(4, 0).lineTo(4, 4).lineTo(0, 4).close()\nl1 = wp.moveTo(2, 2).circle(1)\ns0 = wp.add(l0).extrude(-2, both=True)\nsolid = s0\n"
        );
        let f = features(&code);
        assert_eq!(f[0].loops.len(), 2);
        assert_eq!(f[0].loops[0].len(), 4, "lineTo back to the start needs no closing line");
        assert_eq!(f[0].loops[1], vec![Curve::Circle { center: [3.0, 4.0, 3.0], radius: 1.0 }]);
        assert_eq!(f[0].span, Span { forward: 2.0, backward: 2.0 });
    }

    #[test]
    fn unions_and_cuts_flatten_into_program_order() {
        let sketch = |n: usize| {
            format!(
                "wp{n} = {PLANE}\nl{n} = wp{n}.moveTo(0, 0).lineTo(1, 0).lineTo(1, 1).close()\ns{n} = wp{n}.add(l{n}).extrude(1)\n"
            )
        };
        let code = format!(
            "import cadquery as cq\n{}{}{}{}solid = s0\nt = s1\nt = t.union(s2)\nsolid = solid.union(t)\nsolid = solid.cut(s3)\n",
            sketch(0),
            sketch(1),
            sketch(2),
            sketch(3)
        );
        let modes: Vec<Mode> = features(&code).iter().map(|f| f.mode).collect();
        assert_eq!(modes, vec![Mode::Add, Mode::Add, Mode::Add, Mode::Cut]);
        let bad =
            format!("import cadquery as cq\n{}{}{}solid = s0.union(s1.cut(s2))\n", sketch(0), sketch(1), sketch(2));
        assert!(matches!(features_of(&bad), Err(CqError::Unsupported { line: 11, .. })));
    }

    #[test]
    fn holes_inside_the_first_wire_stay_in_its_sketch_and_touching_ones_become_a_pocket() {
        let square = "wp.moveTo(0, 0).lineTo(4, 0).lineTo(4, 4).lineTo(0, 4).close()";
        let run = |second: &str, third: &str| {
            features_of(&format!(
                "import cadquery as cq\nwp = {PLANE}\nl0 = {square}\nl1 = {second}\nl2 = {third}\nsolid = wp.add(l0).add(l1).add(l2).extrude(1)\n"
            ))
        };
        let loops = |f: &Feature| f.loops.len();
        let (f, notes) = run("wp.moveTo(1, 2).circle(0.5)", "wp.moveTo(2.5, 2).circle(1)").expect("touching holes");
        assert_eq!(f.len(), 1, "two holes tangent to each other are both holes of the one sketch");
        assert_eq!(loops(&f[0]), 3);
        // The larger one shrinks a little, so the wall between them is not of zero thickness.
        assert!(notes.iter().any(|n| n.contains("shrank the circle of wire 3")), "{notes:?}");
        let Curve::Circle { radius, .. } = f[0].loops[2][0] else { panic!("{:?}", f[0].loops[2]) };
        assert!(radius < 1.0 && radius > 1.0 - 1e-4, "{radius}");
        let err = run(
            "wp.moveTo(1, 1).lineTo(2, 1).lineTo(2, 2).close()",
            "wp.moveTo(2, 1).lineTo(3, 1).lineTo(3, 2).close()",
        )
        .expect_err("refused");
        assert!(err.to_string().contains("holes 2 and 3 touch and neither is a circle"), "{err}");
        // Tangent to the outer boundary, and a triangle on the outer's corner: pad then pocket.
        for touching in ["wp.moveTo(3, 2).circle(1)", "wp.moveTo(0, 0).lineTo(1, 0).lineTo(1, 1).close()"] {
            let (f, _) = run(touching, "wp.moveTo(1, 3).circle(0.2)").expect(touching);
            assert_eq!(f.len(), 2, "{touching}");
            assert_eq!((f[0].mode, loops(&f[0]), f[1].mode, loops(&f[1])), (Mode::Add, 2, Mode::Cut, 1));
            assert_eq!((f[1].span.forward, f[1].span.backward), (f[0].span.forward, f[0].span.backward));
            assert!(f[1].label.contains("wire 2"), "{}", f[1].label);
            let expected = f[0].expected_area.expect("expected area");
            assert!((expected - (16.0 - std::f64::consts::PI * 0.04)).abs() < 1e-9, "{expected}");
        }
        for (second, third, wire) in [
            ("wp.moveTo(6, 2).circle(1)", "wp.moveTo(1, 3).circle(0.2)", "wire 2 is not inside"),
            ("wp.moveTo(2, 2).circle(1)", "wp.moveTo(2, 2).circle(0.5)", "holes 2 and 3 nest"),
            ("wp.moveTo(2, 2).circle(1)", "wp.moveTo(2.5, 2).circle(1)", "holes 2 and 3 nest"),
        ] {
            let err = run(second, third).expect_err(second);
            assert!(matches!(&err, CqError::Unsupported { line: 6, construct } if construct.contains(wire)), "{err}");
        }
        let arcs = "wp.moveTo(1, 1).lineTo(3, 1).threePointArc((3.9, 2), (3, 3)).lineTo(1, 3).close()";
        let (f, _) = run(arcs, "wp.moveTo(0.5, 0.5).circle(0.2)").expect("arcs and a hole");
        assert_eq!(f.len(), 1, "an arc 0.1 from the boundary is inside");
    }

    #[test]
    fn a_touching_hole_after_the_first_solid_is_refused_by_name() {
        let code = format!(
            "import cadquery as cq\nwp = {PLANE}\nbase = wp.moveTo(-5, -5).lineTo(5, -5).lineTo(5, 5).lineTo(-5, 5).close().extrude(1)\nl0 = wp.moveTo(0, 0).lineTo(4, 0).lineTo(4, 4).lineTo(0, 4).close()\nl1 = wp.moveTo(3, 2).circle(1)\nsolid = base.union(wp.add(l0).add(l1).extrude(2))\n"
        );
        let err = features_of(&code).expect_err("refused");
        assert!(err.to_string().contains("not the part's first solid"), "{err}");
    }

    #[test]
    fn zero_width_spikes_are_dropped_mid_wire_and_where_the_wire_closes() {
        let run = |wire: &str| {
            let code = format!("import cadquery as cq\nwp = {PLANE}\nsolid = {wire}.extrude(1)\n");
            let (f, notes) = features_of(&code).expect(wire);
            (f[0].loops[0].clone(), f[0].plane, notes)
        };
        // Out and back: the spike goes, the triangle stays.
        let (wire, _, notes) = run("wp.moveTo(1, 1).lineTo(3, 1).lineTo(2, 1).lineTo(2, 3).close()");
        assert_eq!(wire.len(), 3, "{wire:?}");
        assert!(notes.iter().any(|n| n.contains("zero-width spike at (3, 1)")), "{notes:?}");
        // The test100 shape: spikes down to y = 0 at both ends, one where the wire closes.
        let (wire, plane, notes) = run(
            "wp.lineTo(0, 1).lineTo(4, 1).lineTo(4, 0).lineTo(4, 1).lineTo(4, 2).lineTo(0, 2).lineTo(0, 1).lineTo(0, 0).close()",
        );
        assert_eq!(notes.iter().filter(|n| n.contains("zero-width spike")).count(), 2, "{notes:?}");
        let corners: Vec<V3> = wire.iter().map(|c| c.points()[0]).collect();
        assert_eq!(wire.len(), 4, "a rectangle is left: {corners:?}");
        let area = crate::import::loop_area(&wire, &plane).abs();
        assert!((area - 4.0).abs() < 1e-12, "{area}");
    }

    #[test]
    fn planes_make_x_perpendicular_and_refuse_skew_axes() {
        let code = "import cadquery as cq\nwp = cq.Workplane(cq.Plane(cq.Vector(0, 0, 0), cq.Vector(1, 0, 0), cq.Vector(0, 1, 1)))\n";
        assert!(matches!(features_of(code), Err(CqError::NoResult)));
        let code = "import cadquery as cq\nwp = cq.Workplane(cq.Plane(cq.Vector(0, 0, 0), cq.Vector(1, 0, 1), cq.Vector(0, 0, 1)))\n";
        assert!(matches!(features_of(code), Err(CqError::Semantic { line: 2, .. })));
    }
}
