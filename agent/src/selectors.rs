//! Selectors: how entities are named when EGR is off and no IDs are shown (`no_egr`).
//!
//! `KIND FILTER... PICK...`: KIND is `face`, `edge`, `vertex` (exactly one must match) or
//! `faces`, `edges`, `vertices` (one or more); filters `planar`, `cylindrical`, `conical`,
//! `spherical`, `toroidal`, `line`, `circle`, `normal +Z` (planar faces facing +Z),
//! `parallel X` (straight edges, circle axes or face normals along X), `of (SELECTOR)`
//! (edges of the selected faces, vertices of the selected edges, faces bounded by the
//! selected edges); picks `highest +Z`, `lowest -X` keep the entities whose centre is
//! extreme along the direction, applied in order. The harness resolves selectors to IDs of
//! the current state and refuses ambiguous ones with the reason.

use freecad_bridge::ModelState;
use freecad_bridge::state::{EdgeKind, FaceKind};
use nalgebra::Vector3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Face,
    Edge,
    Vertex,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Face => "face",
            Kind::Edge => "edge",
            Kind::Vertex => "vertex",
        }
    }
}

/// Does this text look like a selector (rather than an ID or a sketch reference)?
pub fn is_selector(text: &str) -> bool {
    let first = text.trim_start().split(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
    matches!(first, "face" | "faces" | "edge" | "edges" | "vertex" | "vertices") || text.trim_start().starts_with('(')
}

/// The IDs a selector names in `state`.
pub fn resolve(selector: &str, state: &ModelState) -> Result<Vec<String>, String> {
    let tokens = tokenize(selector);
    let mut pos = 0;
    let ids = eval(&tokens, &mut pos, state).map_err(|e| format!("selector '{selector}': {e}"))?;
    if pos != tokens.len() {
        return Err(format!("selector '{selector}': unexpected '{}'", tokens[pos]));
    }
    Ok(ids)
}

fn tokenize(text: &str) -> Vec<String> {
    text.replace('(', " ( ").replace(')', " ) ").split_whitespace().map(str::to_string).collect()
}

fn direction(token: Option<&String>) -> Result<Vector3<f64>, String> {
    let t = token.map(String::as_str).unwrap_or("");
    let (sign, axis) = match t.split_at_checked(1) {
        Some(("+", a)) => (1.0, a),
        Some(("-", a)) => (-1.0, a),
        _ => (1.0, t),
    };
    let v = match axis {
        "X" | "x" => Vector3::x(),
        "Y" | "y" => Vector3::y(),
        "Z" | "z" => Vector3::z(),
        _ => return Err(format!("expected a direction such as +Z or -X, got '{t}'")),
    };
    Ok(v * sign)
}

fn parallel(a: Option<[f64; 3]>, d: &Vector3<f64>) -> bool {
    a.map(Vector3::from).and_then(|a| a.try_normalize(1e-12)).is_some_and(|a| a.dot(d).abs() > 1.0 - 1e-6)
}

/// The point picks compare: a face's centroid, a circle's centre, an edge's midpoint.
fn position(state: &ModelState, kind: Kind, i: usize) -> Vector3<f64> {
    match kind {
        Kind::Face => Vector3::from(state.faces[i].centroid),
        Kind::Edge => {
            let e = &state.edges[i];
            let p = if e.kind == EdgeKind::Circle { e.center } else { None };
            Vector3::from(p.or(e.midpoint).or(e.start).unwrap_or([0.0; 3]))
        }
        Kind::Vertex => Vector3::from(state.vertices[i].point),
    }
}

fn eval(tokens: &[String], pos: &mut usize, state: &ModelState) -> Result<Vec<String>, String> {
    let word = tokens.get(*pos).ok_or("empty selector")?.as_str();
    let (kind, single) = match word {
        "face" => (Kind::Face, true),
        "faces" => (Kind::Face, false),
        "edge" => (Kind::Edge, true),
        "edges" => (Kind::Edge, false),
        "vertex" => (Kind::Vertex, true),
        "vertices" => (Kind::Vertex, false),
        _ => return Err(format!("starts with '{word}'; expected face, edge, vertex or their plurals")),
    };
    *pos += 1;
    let count = match kind {
        Kind::Face => state.faces.len(),
        Kind::Edge => state.edges.len(),
        Kind::Vertex => state.vertices.len(),
    };
    let mut keep: Vec<usize> = (0..count).collect();
    let tolerance = 1e-6 * state.bbox.map_or(1.0, |b| b.diagonal()).max(1e-9);
    while let Some(token) = tokens.get(*pos).map(String::as_str) {
        if token == ")" {
            break;
        }
        *pos += 1;
        let face_kind = match token {
            "planar" => Some(FaceKind::Plane),
            "cylindrical" => Some(FaceKind::Cylinder),
            "conical" => Some(FaceKind::Cone),
            "spherical" => Some(FaceKind::Sphere),
            "toroidal" => Some(FaceKind::Torus),
            _ => None,
        };
        let edge_kind = match token {
            "line" | "straight" => Some(EdgeKind::Line),
            "circle" | "circular" => Some(EdgeKind::Circle),
            _ => None,
        };
        match token {
            _ if face_kind.is_some() && kind == Kind::Face => keep.retain(|&i| Some(state.faces[i].kind) == face_kind),
            _ if edge_kind.is_some() && kind == Kind::Edge => keep.retain(|&i| Some(state.edges[i].kind) == edge_kind),
            "normal" => {
                let d = direction(tokens.get(*pos))?;
                *pos += 1;
                if kind != Kind::Face {
                    return Err("'normal' applies to faces".into());
                }
                keep.retain(|&i| state.faces[i].normal.is_some_and(|n| Vector3::from(n).dot(&d) > 1.0 - 1e-6));
            }
            "parallel" => {
                let d = direction(tokens.get(*pos))?;
                *pos += 1;
                keep.retain(|&i| match kind {
                    Kind::Face => parallel(state.faces[i].normal.or(state.faces[i].axis), &d),
                    Kind::Edge => parallel(state.edges[i].direction.or(state.edges[i].axis), &d),
                    Kind::Vertex => false,
                });
            }
            "of" => {
                if tokens.get(*pos).map(String::as_str) != Some("(") {
                    return Err("'of' needs a selector in parentheses".into());
                }
                *pos += 1;
                let inner = eval(tokens, pos, state)?;
                if tokens.get(*pos).map(String::as_str) != Some(")") {
                    return Err("missing ')'".into());
                }
                *pos += 1;
                keep.retain(|&i| match kind {
                    Kind::Edge => inner.iter().any(|f| {
                        state.faces.iter().any(|face| &face.id == f && face.edges.contains(&state.edges[i].id))
                            || state.vertices.iter().any(|v| &v.id == f && state.edges[i].vertices.contains(f))
                    }),
                    Kind::Vertex => inner.iter().any(|e| {
                        state.edges.iter().any(|edge| &edge.id == e && edge.vertices.contains(&state.vertices[i].id))
                    }),
                    Kind::Face => inner.iter().any(|e| state.faces[i].edges.contains(e)),
                });
            }
            "highest" | "lowest" => {
                let mut d = direction(tokens.get(*pos))?;
                *pos += 1;
                if token == "lowest" {
                    d = -d;
                }
                let best = keep.iter().map(|&i| position(state, kind, i).dot(&d)).fold(f64::NEG_INFINITY, f64::max);
                keep.retain(|&i| position(state, kind, i).dot(&d) >= best - tolerance);
            }
            other => return Err(format!("unknown word '{other}' for a {}", kind.word())),
        }
    }
    // The state's own IDs: with several bodies, `B2.F3` (position alone would misname it).
    let ids: Vec<String> = keep
        .iter()
        .map(|&i| match kind {
            Kind::Face => state.faces[i].id.clone(),
            Kind::Edge => state.edges[i].id.clone(),
            Kind::Vertex => state.vertices[i].id.clone(),
        })
        .collect();
    match (single, ids.len()) {
        (_, 0) => Err(format!("matches no {}", kind.word())),
        (true, n) if n > 1 => Err(format!(
            "matches {n} entities ({}); add a filter or a pick, or use the plural to mean all",
            ids.join(", ")
        )),
        _ => Ok(ids),
    }
}

const DIRECTIONS: [&str; 6] = ["+Z", "-Z", "+X", "-X", "+Y", "-Y"];

fn axis_name(v: Option<[f64; 3]>) -> Option<&'static str> {
    let v = Vector3::from(v?).try_normalize(1e-12)?;
    [("X", Vector3::x()), ("Y", Vector3::y()), ("Z", Vector3::z())]
        .into_iter()
        .find(|(_, a)| v.dot(a).abs() > 1.0 - 1e-6)
        .map(|(n, _)| n)
}

fn signed_axis_name(v: Option<[f64; 3]>) -> Option<String> {
    let v = Vector3::from(v?);
    let name = axis_name(Some(v.into()))?;
    let component = match name {
        "X" => v.x,
        "Y" => v.y,
        _ => v.z,
    };
    Some(format!("{}{name}", if component > 0.0 { "+" } else { "-" }))
}

/// The filters that describe an entity without picks (the base of a search).
fn bases(state: &ModelState, id: &str, depth: usize) -> Vec<String> {
    let Some(entity) = id.parse::<freecad_bridge::command::EntityId>().ok() else { return Vec::new() };
    let Some(index) = state.position(entity) else { return Vec::new() };
    match entity.kind {
        freecad_bridge::command::EntityKind::Face => {
            let Some(f) = state.faces.get(index) else { return Vec::new() };
            let kind = f.kind.adjective().unwrap_or("");
            let head = format!("face {kind}").trim_end().to_string();
            let mut out = Vec::new();
            if let Some(n) = signed_axis_name(f.normal) {
                out.push(format!("{head} normal {n}"));
            }
            if let Some(a) = axis_name(f.axis) {
                out.push(format!("{head} parallel {a}"));
            }
            out.push(head);
            out
        }
        freecad_bridge::command::EntityKind::Edge => {
            let Some(e) = state.edges.get(index) else { return Vec::new() };
            let kind = match e.kind {
                EdgeKind::Line => "line",
                EdgeKind::Circle => "circle",
                _ => "",
            };
            let head = format!("edge {kind}").trim_end().to_string();
            let mut out = Vec::new();
            if let Some(a) = axis_name(e.direction.or(e.axis)) {
                out.push(format!("{head} parallel {a}"));
            }
            out.push(head.clone());
            if depth == 0 {
                for face in state.faces.iter().filter(|f| f.edges.contains(&e.id)) {
                    if let Some(face_selector) = find_with_depth(state, &face.id, 1) {
                        out.push(format!("{head} of ({face_selector})"));
                    }
                }
            }
            out
        }
        freecad_bridge::command::EntityKind::Vertex => vec!["vertex".to_string()],
    }
}

/// A selector that names exactly `id` in `state`, as short as the search finds; none when
/// no selector of this language singles it out.
pub fn find(state: &ModelState, id: &str) -> Option<String> {
    find_with_depth(state, id, 0)
}

fn find_with_depth(state: &ModelState, id: &str, depth: usize) -> Option<String> {
    let picks: Vec<String> = DIRECTIONS.iter().flat_map(|d| [format!("highest {d}"), format!("lowest {d}")]).collect();
    let unique = |s: &str| resolve(s, state).is_ok_and(|ids| ids.len() == 1 && ids[0] == id);
    let bases = bases(state, id, depth);
    for base in &bases {
        if unique(base) {
            return Some(base.clone());
        }
    }
    for base in &bases {
        for p in &picks {
            let s = format!("{base} {p}");
            if unique(&s) {
                return Some(s);
            }
        }
    }
    for base in &bases {
        for p in &picks {
            for q in &picks {
                let s = format!("{base} {p} {q}");
                if unique(&s) {
                    return Some(s);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecad_bridge::state::{BoundingBox, Edge, Face};

    /// A unit cube's top and bottom faces and two of the top's edges.
    fn state() -> ModelState {
        let face = |id: &str, c: [f64; 3], n: [f64; 3], edges: &[&str]| Face {
            id: id.into(),
            kind: FaceKind::Plane,
            area: 1.0,
            centroid: c,
            normal: Some(n),
            axis: None,
            center: None,
            radius: None,
            minor_radius: None,
            semi_angle: None,
            edges: edges.iter().map(|s| s.to_string()).collect(),
        };
        let line = |id: &str, a: [f64; 3], b: [f64; 3]| Edge {
            id: id.into(),
            kind: EdgeKind::Line,
            length: 1.0,
            start: Some(a),
            end: Some(b),
            midpoint: Some(std::array::from_fn(|i| (a[i] + b[i]) / 2.0)),
            closed: false,
            center: None,
            radius: None,
            axis: None,
            direction: Some(std::array::from_fn(|i| b[i] - a[i])),
            vertices: Vec::new(),
        };
        let mut s = ModelState::empty();
        s.bbox = Some(BoundingBox { min: [0.0; 3], max: [1.0; 3] });
        s.faces = vec![
            face("F1", [0.5, 0.5, 0.0], [0.0, 0.0, -1.0], &[]),
            face("F2", [0.5, 0.5, 1.0], [0.0, 0.0, 1.0], &["E1", "E2"]),
        ];
        s.edges = vec![line("E1", [0.0, 0.0, 1.0], [1.0, 0.0, 1.0]), line("E2", [1.0, 0.0, 1.0], [1.0, 1.0, 1.0])];
        s
    }

    #[test]
    fn selectors_resolve_and_refuse_ambiguity() {
        let s = state();
        assert_eq!(resolve("face planar normal +Z", &s), Ok(vec!["F2".to_string()]));
        assert_eq!(resolve("face highest +Z", &s), Ok(vec!["F2".to_string()]));
        assert_eq!(resolve("edges of (face normal +Z)", &s), Ok(vec!["E1".to_string(), "E2".to_string()]));
        assert_eq!(resolve("edge line parallel Y", &s), Ok(vec!["E2".to_string()]));
        let err = resolve("face planar", &s).expect_err("two faces");
        assert!(err.contains("F1, F2"), "{err}");
        assert!(resolve("face shiny", &s).expect_err("unknown").contains("shiny"));
    }

    #[test]
    fn the_search_finds_a_selector_that_names_exactly_the_entity() {
        let s = state();
        for id in ["F1", "F2", "E1", "E2"] {
            let found = find(&s, id).expect("a selector");
            assert_eq!(resolve(&found, &s), Ok(vec![id.to_string()]), "{found}");
        }
        assert!(is_selector("edge line highest +Z") && is_selector("(edge circle).center") && !is_selector("E3"));
    }
}
