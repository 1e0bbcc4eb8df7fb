//! A model as glTF 2.0 binary (`.glb`), for viewers: the faces as one grey triangle mesh
//! with smooth normals within each face (flat faces stay flat), and the B-rep edges as dark
//! lines. Positions are in metres, as glTF wants (the model's millimetres / 1000).

use freecad_bridge::Tessellation;
use serde_json::json;

const ARRAY_BUFFER: u32 = 34962;
const ELEMENT_ARRAY_BUFFER: u32 = 34963;
const FLOAT: u32 = 5126;
const UNSIGNED_INT: u32 = 5125;
const MM_TO_M: f64 = 1e-3;

/// The tessellation as a `.glb` file's bytes.
pub fn glb(t: &Tessellation) -> Vec<u8> {
    let positions: Vec<[f32; 3]> =
        t.mesh.positions.chunks_exact(3).map(|p| [p[0], p[1], p[2]].map(|x| (x * MM_TO_M) as f32)).collect();
    let triangles: Vec<u32> = t.mesh.triangles.clone();
    let normals = vertex_normals(&positions, &triangles);
    // The edges: each polyline as segments between consecutive points.
    let edge_positions: Vec<[f32; 3]> =
        t.edge_points.chunks_exact(3).map(|p| [p[0], p[1], p[2]].map(|x| (x * MM_TO_M) as f32)).collect();
    let mut segments: Vec<u32> = Vec::new();
    for w in t.edge_offsets.windows(2) {
        for i in w[0]..w[1].saturating_sub(1) {
            segments.extend([i, i + 1]);
        }
    }

    let mut bin: Vec<u8> = Vec::new();
    let mut views = Vec::new();
    let mut push = |bytes: Vec<u8>, target: u32| {
        let offset = bin.len();
        bin.extend(&bytes);
        while !bin.len().is_multiple_of(4) {
            bin.push(0);
        }
        views.push(json!({"buffer": 0, "byteOffset": offset, "byteLength": bytes.len(), "target": target}));
        views.len() - 1
    };
    let floats = |v: &[[f32; 3]]| v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ints = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let face_positions = push(floats(&positions), ARRAY_BUFFER);
    let face_normals = push(floats(&normals), ARRAY_BUFFER);
    let face_indices = push(ints(&triangles), ELEMENT_ARRAY_BUFFER);
    let line_positions = push(floats(&edge_positions), ARRAY_BUFFER);
    let line_indices = push(ints(&segments), ELEMENT_ARRAY_BUFFER);

    let vec3 = |view: usize, points: &[[f32; 3]], bounds: bool| {
        let mut a = json!({"bufferView": view, "componentType": FLOAT, "count": points.len(), "type": "VEC3"});
        if bounds && !points.is_empty() {
            let (lo, hi) = extent(points);
            a["min"] = json!(lo);
            a["max"] = json!(hi);
        }
        a
    };
    let scalar = |view: usize, count: usize| json!({"bufferView": view, "componentType": UNSIGNED_INT, "count": count, "type": "SCALAR"});
    let mut accessors = vec![
        vec3(face_positions, &positions, true),
        vec3(face_normals, &normals, false),
        scalar(face_indices, triangles.len()),
    ];
    let mut primitives = Vec::new();
    if !triangles.is_empty() {
        primitives.push(json!({"attributes": {"POSITION": 0, "NORMAL": 1}, "indices": 2, "material": 0, "mode": 4}));
    }
    if !segments.is_empty() {
        accessors.push(vec3(line_positions, &edge_positions, true));
        accessors.push(scalar(line_indices, segments.len()));
        primitives.push(json!({"attributes": {"POSITION": 3}, "indices": 4, "material": 1, "mode": 1}));
    }
    let document = json!({
        "asset": {"version": "2.0", "generator": "vision2cad"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": primitives}],
        "materials": [
            {"name": "part", "pbrMetallicRoughness": {"baseColorFactor": [0.62, 0.63, 0.66, 1.0], "metallicFactor": 0.0, "roughnessFactor": 0.7}},
            {"name": "edges", "pbrMetallicRoughness": {"baseColorFactor": [0.08, 0.08, 0.1, 1.0], "metallicFactor": 0.0, "roughnessFactor": 1.0}}
        ],
        "accessors": accessors,
        "bufferViews": views,
        "buffers": [{"byteLength": bin.len()}],
    });
    let mut json_chunk = document.to_string().into_bytes();
    while !json_chunk.len().is_multiple_of(4) {
        json_chunk.push(b' ');
    }
    let total = 12 + 8 + json_chunk.len() + 8 + bin.len();
    let mut out = Vec::with_capacity(total);
    out.extend(b"glTF");
    out.extend(2u32.to_le_bytes());
    out.extend((total as u32).to_le_bytes());
    out.extend((json_chunk.len() as u32).to_le_bytes());
    out.extend(b"JSON");
    out.extend(json_chunk);
    out.extend((bin.len() as u32).to_le_bytes());
    out.extend(b"BIN\0");
    out.extend(bin);
    out
}

fn extent(points: &[[f32; 3]]) -> ([f32; 3], [f32; 3]) {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for p in points {
        for k in 0..3 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    (lo, hi)
}

/// Area-weighted normals at each vertex from the triangles around it. Faces come with
/// vertices of their own, so normals never blend across an edge of the part.
fn vertex_normals(positions: &[[f32; 3]], triangles: &[u32]) -> Vec<[f32; 3]> {
    let mut sums = vec![[0.0f64; 3]; positions.len()];
    for t in triangles.chunks_exact(3) {
        let [a, b, c] = [t[0], t[1], t[2]].map(|i| positions[i as usize].map(f64::from));
        let (u, v) = ([b[0] - a[0], b[1] - a[1], b[2] - a[2]], [c[0] - a[0], c[1] - a[1], c[2] - a[2]]);
        let n = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
        for &i in t {
            for k in 0..3 {
                sums[i as usize][k] += n[k];
            }
        }
    }
    sums.iter()
        .map(|s| {
            let len = (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]).sqrt();
            if len > 0.0 { [(s[0] / len) as f32, (s[1] / len) as f32, (s[2] / len) as f32] } else { [0.0, 0.0, 1.0] }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecad_bridge::TriangleMesh;

    /// One triangle in mm and one edge of two points: a valid GLB that reads back.
    #[test]
    fn a_glb_has_its_header_chunks_and_metre_positions() {
        let t = Tessellation {
            mesh: TriangleMesh {
                positions: vec![0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 0.0, 10.0, 0.0],
                triangles: vec![0, 1, 2],
            },
            face_offsets: vec![0, 1],
            edge_points: vec![0.0, 0.0, 0.0, 10.0, 0.0, 0.0],
            edge_offsets: vec![0, 2],
        };
        let bytes = glb(&t);
        assert_eq!(&bytes[0..4], b"glTF");
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        assert_eq!(word(8), bytes.len());
        let json_len = word(12);
        assert_eq!(&bytes[16..20], b"JSON");
        let doc: serde_json::Value = serde_json::from_slice(&bytes[20..20 + json_len]).expect("json");
        assert_eq!(doc["accessors"][0]["max"], json!([0.01f32, 0.01f32, 0.0]));
        assert_eq!(doc["meshes"][0]["primitives"].as_array().map(Vec::len), Some(2), "faces and edges");
        let bin_at = 20 + json_len;
        assert_eq!(&bytes[bin_at + 4..bin_at + 8], b"BIN\0");
        let normal_at = bin_at + 8 + doc["bufferViews"][1]["byteOffset"].as_u64().expect("offset") as usize;
        let z = f32::from_le_bytes(bytes[normal_at + 8..normal_at + 12].try_into().expect("4 bytes"));
        assert_eq!(z, 1.0, "the triangle faces +Z");
    }
}
