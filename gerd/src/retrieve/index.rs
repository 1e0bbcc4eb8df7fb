//! The GERD-RET index: one vector per modeling operation of a split, searched with HNSW.
//!
//! A step's vector is `[sqrt(lambda) * image ; sqrt(1 - lambda) * state]` with both halves
//! of unit length, so the dot product of a query built the same way with a step's vector is
//! exactly `lambda * sim(target images) + (1 - lambda) * sim(states)`, and one inner-product
//! search ranks by the weighted score.
//!
//! On disk, `INDEX/` holds `index.json` (format, embedder, lambda, the dataset it was built
//! from with a digest of every part, and one entry per step), `vectors.f32` (the vectors,
//! little-endian) and `hnsw.hnsw.graph` / `hnsw.hnsw.data` (the graph as `hnsw_rs` dumps it).

use std::path::{Path, PathBuf};

use freecad_bridge::Command;
use hnsw_rs::anndists::dist::Distance;
use hnsw_rs::api::AnnT;
use hnsw_rs::hnsw::Hnsw;
use hnsw_rs::hnswio::HnswIo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::embed::{Embedder, dot, normalise, operation_key};
use crate::GerdError;
use crate::record::{PART_JSON, PartRecord, Split, part_dirs, read_part};

pub const INDEX_FORMAT: &str = "gerd-ret-1";
const META_FILE: &str = "index.json";
const VECTORS_FILE: &str = "vectors.f32";
const GRAPH_NAME: &str = "hnsw";
/// Neighbours per node and candidate list while building; the search list by default.
const MAX_CONNECTIONS: usize = 24;
const EF_CONSTRUCTION: usize = 200;
pub const EF_SEARCH: usize = 64;

/// `1 - dot`, never negative (round-off can push the dot of unit vectors past 1).
#[derive(Debug, Clone, Copy, Default)]
pub struct DotDistance;

impl Distance<f32> for DotDistance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        let d = 1.0 - dot(a, b);
        if d.is_nan() { 2.0 } else { d.max(0.0) }
    }
}

/// One indexed step: an operation of a part (not a sketch: the sketches it uses are listed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub part: String,
    /// Index of the operation among the part's GERD steps.
    pub step: usize,
    pub source: String,
    /// `extrude_add`, `fillet`, `end`...
    pub op: String,
    pub command: Command,
    /// The sketches the operation uses, as the loop's Stage 1 names them: `{name, on}`.
    pub sketches: Vec<SketchOn>,
    pub description: String,
    /// The tagged view of the state before the step, relative to the dataset root (none
    /// while the model is empty).
    pub tagged_view: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SketchOn {
    pub name: String,
    pub on: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// Absolute path of the dataset root at build time.
    pub root: PathBuf,
    pub split: Split,
    pub parts: usize,
    /// SHA-256 of every indexed part's `part.json`, by part ID.
    pub part_digests: std::collections::BTreeMap<String, String>,
    /// SHA-256 over the part digests: the dataset version.
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    pub format: String,
    pub embedder: String,
    pub lambda: f64,
    pub image_dim: usize,
    pub state_dim: usize,
    pub dataset: DatasetInfo,
    pub entries: Vec<Entry>,
}

/// One retrieved step (as retrieval found it; read back from a trace, without `entry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub part: String,
    pub step: usize,
    /// lambda * image + (1 - lambda) * state.
    #[serde(serialize_with = "four_decimals")]
    pub score: f32,
    #[serde(serialize_with = "four_decimals")]
    pub image_score: f32,
    #[serde(serialize_with = "four_decimals")]
    pub state_score: f32,
    /// Position in [`RetrievalIndex::entries`].
    #[serde(skip)]
    pub entry: usize,
}

fn four_decimals<S: serde::Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((*x as f64 * 1e4).round() / 1e4)
}

/// A retrieved step as Stage 1 shows it.
#[derive(Debug, Clone)]
pub struct Example {
    pub hit: Hit,
    pub entry: Entry,
    /// The tagged view before the step, when the model was not empty.
    pub image: Option<PathBuf>,
    /// The model before the step, and the commands that made it: what Stage 1 compares with
    /// the current model to say why the example is shown.
    pub before: freecad_bridge::ModelState,
    pub history: Vec<Command>,
}

pub struct RetrievalIndex {
    pub meta: IndexMeta,
    vectors: Vec<f32>,
    hnsw: Hnsw<'static, f32, DotDistance>,
}

impl std::fmt::Debug for RetrievalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetrievalIndex")
            .field("entries", &self.meta.entries.len())
            .field("embedder", &self.meta.embedder)
            .finish_non_exhaustive()
    }
}

fn err(message: impl Into<String>) -> GerdError {
    GerdError::Record(message.into())
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The weighted vector of a step or a query. `image` and `state` are normalised here.
pub fn combine(mut image: Vec<f32>, mut state: Vec<f32>, lambda: f64) -> Vec<f32> {
    normalise(&mut image);
    normalise(&mut state);
    let (a, b) = ((lambda.sqrt()) as f32, ((1.0 - lambda).sqrt()) as f32);
    image.iter().map(|x| x * a).chain(state.iter().map(|x| x * b)).collect()
}

/// The operation steps of a record: every command except sketches, with the sketches each
/// one uses.
fn operation_entries(record: &PartRecord, root: &Path) -> Vec<(Entry, usize)> {
    let commands = &record.program.commands;
    let mut out = Vec::new();
    let mut pending: Vec<SketchOn> = Vec::new();
    for step in &record.steps {
        if let Command::Sketch(s) = &step.command {
            pending.push(SketchOn { name: s.name.clone(), on: s.on.clone() });
            continue;
        }
        // A body switch is part of the operation that follows it (the loop's `body` answer),
        // not an operation to retrieve.
        if let Command::Body(_) = &step.command {
            continue;
        }
        let used: Vec<SketchOn> = pending
            .drain(..)
            .filter(|s| serde_json::to_string(&step.command).is_ok_and(|t| t.contains(&format!("\"{}\"", s.name))))
            .collect();
        let tagged_view = step.tagged_view.as_ref().map(|v| {
            let dir = crate::record::part_dir(root, &record.id);
            let path = dir.join(v);
            path.strip_prefix(root).map_or_else(|_| v.clone(), |p| p.display().to_string())
        });
        let description = describe(&step.command, &used, &record.states[step.before]);
        let history_len = commands.iter().take(step.index).count();
        out.push((
            Entry {
                part: record.id.clone(),
                step: step.index,
                source: record.source.clone(),
                op: operation_key(&step.command).to_string(),
                command: step.command.clone(),
                sketches: used,
                description,
                tagged_view,
            },
            history_len,
        ));
    }
    out
}

/// One line: what the step did, on what.
fn describe(command: &Command, sketches: &[SketchOn], before: &freecad_bridge::ModelState) -> String {
    let on: Vec<String> = sketches.iter().map(|s| format!("{} on {}", s.name, s.on)).collect();
    let model = if before.empty {
        "on an empty model".to_string()
    } else {
        format!("on a model with {} faces and {} edges", before.faces.len(), before.edges.len())
    };
    let what = operation_key(command).replace('_', " ");
    if on.is_empty() { format!("{what} {model}") } else { format!("{what} of {} {model}", on.join(", ")) }
}

impl RetrievalIndex {
    /// Index every operation step of `split` in the dataset at `root`. `progress` is told
    /// (parts done, parts).
    pub fn build(
        root: &Path,
        split: Split,
        embedder: &mut dyn Embedder,
        lambda: f64,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<RetrievalIndex, GerdError> {
        if !(lambda > 0.0 && lambda < 1.0) {
            return Err(err(format!("lambda must be between 0 and 1 (exclusive), got {lambda}")));
        }
        let root = root.canonicalize().map_err(|e| GerdError::io(root, e))?;
        let dirs = part_dirs(&root)?;
        let mut entries = Vec::new();
        let mut vectors = Vec::new();
        let mut digests = std::collections::BTreeMap::new();
        let (mut image_dim, mut state_dim) = (0, 0);
        for (n, dir) in dirs.iter().enumerate() {
            progress(n, dirs.len());
            let path = dir.join(PART_JSON);
            let bytes = std::fs::read(&path).map_err(|e| GerdError::io(&path, e))?;
            let record = read_part(dir)?;
            if record.split != split {
                continue;
            }
            digests.insert(record.id.clone(), hex_digest(&bytes));
            let target_path = dir.join(&record.files.target);
            let target =
                image::open(&target_path).map_err(|e| err(format!("{}: {e}", target_path.display())))?.to_rgb8();
            let image = embedder.embed_image(&target).map_err(|e| err(format!("{}: {e}", target_path.display())))?;
            let consistent = record.steps.iter().enumerate().all(|(i, s)| {
                s.index == i && s.before < record.states.len() && s.index <= record.program.commands.len()
            });
            if !consistent {
                return Err(err(format!(
                    "{}: steps and states do not match; run `vision2cad gerd validate`",
                    path.display()
                )));
            }
            for (entry, history_len) in operation_entries(&record, &root) {
                let step = &record.steps[entry.step];
                let state = embedder
                    .embed_state(&record.states[step.before], &record.program.commands[..history_len])
                    .map_err(|e| err(format!("{} step {}: {e}", record.id, entry.step)))?;
                if image_dim == 0 {
                    (image_dim, state_dim) = (image.len(), state.len());
                }
                if image.len() != image_dim || state.len() != state_dim {
                    return Err(err(format!("the embedder gave vectors of changing length at {}", record.id)));
                }
                vectors.extend(combine(image.clone(), state, lambda));
                entries.push(entry);
            }
        }
        progress(dirs.len(), dirs.len());
        if entries.is_empty() {
            return Err(err(format!("{} has no {} parts with steps to index", root.display(), split.name())));
        }
        let version = hex_digest(digests.iter().map(|(k, v)| format!("{k} {v}\n")).collect::<String>().as_bytes());
        let meta = IndexMeta {
            format: INDEX_FORMAT.into(),
            embedder: embedder.id(),
            lambda,
            image_dim,
            state_dim,
            dataset: DatasetInfo { root, split, parts: digests.len(), part_digests: digests, version },
            entries,
        };
        let hnsw = graph(&vectors, meta.image_dim + meta.state_dim);
        Ok(RetrievalIndex { meta, vectors, hnsw })
    }

    pub fn dim(&self) -> usize {
        self.meta.image_dim + self.meta.state_dim
    }

    pub fn entries(&self) -> &[Entry] {
        &self.meta.entries
    }

    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim()..(i + 1) * self.dim()]
    }

    /// Write the index into `dir` (created; files replaced).
    pub fn save(&self, dir: &Path) -> Result<(), GerdError> {
        std::fs::create_dir_all(dir).map_err(|e| GerdError::io(dir, e))?;
        // An index being rewritten is no index until its metadata is back: a crash in between
        // leaves nothing that loads, never old metadata over new vectors.
        let meta_path = dir.join(META_FILE);
        match std::fs::remove_file(&meta_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(GerdError::io(&meta_path, e)),
            _ => {}
        }
        let bytes: Vec<u8> = self.vectors.iter().flat_map(|x| x.to_le_bytes()).collect();
        let vectors = dir.join(VECTORS_FILE);
        std::fs::write(&vectors, bytes).map_err(|e| GerdError::io(&vectors, e))?;
        self.hnsw
            .file_dump(dir, GRAPH_NAME)
            .map_err(|e| err(format!("cannot write the graph in {}: {e}", dir.display())))?;
        // The metadata last: an index without it is not an index.
        crate::record::write_json(&dir.join(META_FILE), &self.meta)
    }

    /// Read an index written by [`RetrievalIndex::save`], refusing one of another format or
    /// built by another embedder than `embedder_id`.
    /// The parts an index holds (by ID, with their `part.json` digests), from its
    /// `index.json` alone: no vectors, no graph.
    pub fn parts_of(dir: &Path) -> Result<std::collections::BTreeMap<String, String>, GerdError> {
        let meta_path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&meta_path).map_err(|e| GerdError::io(&meta_path, e))?;
        #[derive(Deserialize)]
        struct Head {
            dataset: DatasetInfo,
        }
        let head: Head = serde_json::from_str(&text).map_err(|e| err(format!("{}: {e}", meta_path.display())))?;
        Ok(head.dataset.part_digests)
    }

    pub fn load(dir: &Path, embedder_id: &str) -> Result<RetrievalIndex, GerdError> {
        let meta_path = dir.join(META_FILE);
        if !meta_path.is_file() {
            return Err(err(format!(
                "{} is not a retrieval index (no {META_FILE}; build one with `vision2cad gerd index`)",
                dir.display()
            )));
        }
        let text = std::fs::read_to_string(&meta_path).map_err(|e| GerdError::io(&meta_path, e))?;
        let meta: IndexMeta = serde_json::from_str(&text).map_err(|e| err(format!("{}: {e}", meta_path.display())))?;
        if meta.format != INDEX_FORMAT {
            return Err(err(format!(
                "{}: index format {} is not {INDEX_FORMAT}; rebuild it",
                dir.display(),
                meta.format
            )));
        }
        if meta.embedder != embedder_id {
            return Err(err(format!(
                "{} was built with the embedder {}, but this run embeds with {embedder_id}; rebuild the index or use that embedder",
                dir.display(),
                meta.embedder
            )));
        }
        if !(meta.lambda > 0.0 && meta.lambda < 1.0) || meta.image_dim == 0 || meta.state_dim == 0 {
            return Err(err(format!(
                "{}: lambda or vector sizes are out of range; rebuild the index",
                meta_path.display()
            )));
        }
        let vectors_path = dir.join(VECTORS_FILE);
        let bytes = std::fs::read(&vectors_path).map_err(|e| GerdError::io(&vectors_path, e))?;
        let dim = meta.image_dim + meta.state_dim;
        let expected = meta.entries.len().checked_mul(dim).and_then(|n| n.checked_mul(4));
        if expected != Some(bytes.len()) {
            return Err(err(format!(
                "{}: {} bytes, but index.json describes {} steps of {dim} values; rebuild the index",
                vectors_path.display(),
                bytes.len(),
                meta.entries.len()
            )));
        }
        let vectors: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        // hnsw_rs ties the graph's lifetime to its loader; one loader per loaded index lives
        // as long as the process.
        let loader: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, GRAPH_NAME)));
        // hnsw_rs asserts on what it reads: a damaged graph file is an error here, not a crash.
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let owned = loader;
            load_graph(owned)
        }));
        let hnsw: Hnsw<'static, f32, DotDistance> = match loaded {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                return Err(err(format!("cannot read the graph in {}: {e}; rebuild the index", dir.display())));
            }
            Err(_) => return Err(err(format!("the graph in {} is damaged; rebuild the index", dir.display()))),
        };
        if hnsw.get_nb_point() != meta.entries.len() {
            return Err(err(format!("{}: the graph and index.json disagree on the number of steps", dir.display())));
        }
        Ok(RetrievalIndex { meta, vectors, hnsw })
    }

    /// The ID of the embedder that built the index in `dir` (to pick the same one for queries).
    pub fn embedder_of(dir: &Path) -> Result<String, GerdError> {
        let meta_path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&meta_path).map_err(|_| {
            err(format!(
                "{} is not a retrieval index (no {META_FILE}; build one with `vision2cad gerd index`)",
                dir.display()
            ))
        })?;
        #[derive(Deserialize)]
        struct Head {
            embedder: String,
        }
        let head: Head = serde_json::from_str(&text).map_err(|e| err(format!("{}: {e}", meta_path.display())))?;
        Ok(head.embedder)
    }

    /// The query vector for a target image's and a state's embeddings.
    pub fn query_vector(&self, image: Vec<f32>, state: Vec<f32>) -> Result<Vec<f32>, GerdError> {
        if image.len() != self.meta.image_dim || state.len() != self.meta.state_dim {
            return Err(err(format!(
                "query vectors of {} + {} values; the index holds {} + {}",
                image.len(),
                state.len(),
                self.meta.image_dim,
                self.meta.state_dim
            )));
        }
        Ok(combine(image, state, self.meta.lambda))
    }

    /// The `k` nearest steps by HNSW (`ef` candidates), best first, without diversity.
    pub fn nearest(&self, query: &[f32], k: usize, ef: usize) -> Vec<(usize, f32)> {
        let mut found: Vec<(usize, f32)> = self
            .hnsw
            .search(query, k, ef.max(k))
            .into_iter()
            .filter(|n| n.d_id < self.entries().len())
            .map(|n| (n.d_id, dot(query, self.vector(n.d_id))))
            .filter(|(_, score)| score.is_finite())
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.truncate(k);
        found
    }

    /// The `k` nearest steps by exhaustive search, best first.
    pub fn brute_force(&self, query: &[f32], k: usize) -> Vec<(usize, f32)> {
        let mut all: Vec<(usize, f32)> = (0..self.entries().len()).map(|i| (i, dot(query, self.vector(i)))).collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// The `k` best steps with at most one per part, best first.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<Hit> {
        let n = self.entries().len();
        if k == 0 || n == 0 {
            return Vec::new();
        }
        let mut wanted = (k * 10).max(30).min(n);
        loop {
            let mut hits: Vec<Hit> = Vec::new();
            for (i, score) in self.nearest(query, wanted, ef.max(wanted)) {
                let entry = &self.meta.entries[i];
                if hits.iter().any(|h| h.part == entry.part) {
                    continue;
                }
                hits.push(self.hit(i, query, score));
                if hits.len() == k {
                    return hits;
                }
            }
            if wanted >= n {
                return hits;
            }
            wanted = (wanted * 4).min(n);
        }
    }

    fn hit(&self, i: usize, query: &[f32], score: f32) -> Hit {
        let v = self.vector(i);
        let split = self.meta.image_dim;
        let lambda = self.meta.lambda as f32;
        let image_score = dot(&query[..split], &v[..split]) / lambda;
        let state_score = dot(&query[split..], &v[split..]) / (1.0 - lambda);
        let entry = &self.meta.entries[i];
        Hit { part: entry.part.clone(), step: entry.step, score, image_score, state_score, entry: i }
    }

    /// The material Stage 1 shows for a hit. The hit's part must be unchanged since the
    /// index was built (its `part.json` digest is checked).
    pub fn example(&self, hit: &Hit) -> Result<Example, GerdError> {
        let entry = self.meta.entries[hit.entry].clone();
        let root = &self.meta.dataset.root;
        let dir = crate::record::part_dir(root, &entry.part);
        let path = dir.join(PART_JSON);
        let bytes = std::fs::read(&path).map_err(|e| {
            err(format!("the index's dataset is gone or moved ({}: {e}); rebuild the index", path.display()))
        })?;
        if self.meta.dataset.part_digests.get(&entry.part) != Some(&hex_digest(&bytes)) {
            return Err(err(format!(
                "{} changed after the index was built (dataset version {}); rebuild the index",
                path.display(),
                self.meta.dataset.version.get(..12).unwrap_or(&self.meta.dataset.version)
            )));
        }
        // The bytes read for the digest are the record: read once.
        let text = String::from_utf8(bytes).map_err(|e| err(format!("{}: {e}", path.display())))?;
        let record = crate::record::parse_part(&text, &path)?;
        let step = record.steps.get(entry.step).filter(|s| s.before < record.states.len()).ok_or_else(|| {
            err(format!("{}: step {} is not in the record; rebuild the index", path.display(), entry.step))
        })?;
        let before = record.states[step.before].clone();
        let history = record.program.commands.iter().take(step.index).cloned().collect();
        let image = entry.tagged_view.as_ref().map(|v| root.join(v));
        Ok(Example { hit: hit.clone(), entry, image, before, history })
    }
}

fn load_graph(loader: &'static mut HnswIo) -> anyhow::Result<Hnsw<'static, f32, DotDistance>> {
    loader.load_hnsw()
}

/// Build the HNSW graph over `vectors` (inserted in order: the graph is the same every time).
fn graph(vectors: &[f32], dim: usize) -> Hnsw<'static, f32, DotDistance> {
    let n = vectors.len() / dim;
    let hnsw = Hnsw::new(MAX_CONNECTIONS, n.max(1), 16, EF_CONSTRUCTION, DotDistance);
    for i in 0..n {
        hnsw.insert_slice((&vectors[i * dim..(i + 1) * dim], i));
    }
    hnsw
}

/// An index over given vectors, for tests and benchmarks of the search alone (no dataset).
#[doc(hidden)]
pub fn from_vectors(vectors: Vec<f32>, image_dim: usize, state_dim: usize, lambda: f64) -> RetrievalIndex {
    let dim = image_dim + state_dim;
    let n = vectors.len() / dim;
    let entries = (0..n)
        .map(|i| Entry {
            part: format!("p{}", i / 4),
            step: i % 4,
            source: "synthetic".into(),
            op: "extrude_add".into(),
            command: Command::End,
            sketches: Vec::new(),
            description: String::new(),
            tagged_view: None,
        })
        .collect();
    let meta = IndexMeta {
        format: INDEX_FORMAT.into(),
        embedder: "synthetic".into(),
        lambda,
        image_dim,
        state_dim,
        dataset: DatasetInfo {
            root: PathBuf::new(),
            split: Split::Train,
            parts: n / 4,
            part_digests: Default::default(),
            version: String::new(),
        },
        entries,
    };
    let hnsw = graph(&vectors, dim);
    RetrievalIndex { meta, vectors, hnsw }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    /// Clustered vectors: `n` steps around `n / 8` parts' images and 12 typical states.
    fn synthetic(n: usize, image_dim: usize, state_dim: usize, seed: u64) -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut uniform = move || (rng.next_u32() as f32 / u32::MAX as f32) - 0.5;
        let images: Vec<Vec<f32>> = (0..n / 8).map(|_| (0..image_dim).map(|_| uniform()).collect()).collect();
        let states: Vec<Vec<f32>> = (0..12).map(|_| (0..state_dim).map(|_| uniform()).collect()).collect();
        (0..n)
            .map(|i| {
                // A part's steps share its target image, as in GERD: the nearest steps of a
                // query are then often siblings, which the one-per-part rule must skip.
                let image = images[(i / 4) % images.len()].iter().map(|x| x + 0.05 * uniform()).collect();
                let state = states[(i * 7) % states.len()].iter().map(|x| x + 0.3 * uniform()).collect();
                (image, state)
            })
            .collect()
    }

    fn index_of(pairs: &[(Vec<f32>, Vec<f32>)], lambda: f64) -> RetrievalIndex {
        let (i, s) = (pairs[0].0.len(), pairs[0].1.len());
        let vectors = pairs.iter().flat_map(|(a, b)| combine(a.clone(), b.clone(), lambda)).collect();
        from_vectors(vectors, i, s, lambda)
    }

    #[test]
    fn hnsw_recall_at_3_against_brute_force_is_at_least_095() {
        let pairs = synthetic(2000, 96, 24, 1);
        let index = index_of(&pairs, 0.6);
        let queries = synthetic(1000, 96, 24, 2);
        let mut found = 0;
        for (image, state) in queries {
            let q = combine(image, state, 0.6);
            let exact: Vec<usize> = index.brute_force(&q, 3).into_iter().map(|(i, _)| i).collect();
            let approx: Vec<usize> = index.nearest(&q, 3, EF_SEARCH).into_iter().map(|(i, _)| i).collect();
            found += exact.iter().filter(|i| approx.contains(i)).count();
        }
        let recall = found as f64 / 3000.0;
        assert!(recall >= 0.95, "recall@3 {recall}");
    }

    #[test]
    fn the_score_is_the_weighted_sum_of_the_two_similarities() {
        let pairs = synthetic(64, 20, 8, 3);
        let index = index_of(&pairs, 0.6);
        let (qi, qs) = (pairs[5].0.clone(), pairs[9].1.clone());
        let q = combine(qi.clone(), qs.clone(), 0.6);
        let cos = |a: &[f32], b: &[f32]| dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt());
        for hit in index.search(&q, 3, EF_SEARCH) {
            let (image, state) = &pairs[hit.entry];
            let expected = 0.6 * cos(&qi, image) + 0.4 * cos(&qs, state);
            assert!((hit.score - expected).abs() < 1e-5, "{} vs {expected}", hit.score);
            assert!((hit.image_score - cos(&qi, image)).abs() < 1e-5);
            assert!((hit.state_score - cos(&qs, state)).abs() < 1e-5);
        }
    }

    #[test]
    fn an_indexed_step_finds_itself_first_and_hits_come_from_distinct_parts() {
        let pairs = synthetic(400, 32, 8, 4);
        let index = index_of(&pairs, 0.6);
        let q = combine(pairs[17].0.clone(), pairs[17].1.clone(), 0.6);
        let nearest: Vec<usize> = index.nearest(&q, 3, EF_SEARCH).into_iter().map(|(i, _)| i).collect();
        assert!(nearest.iter().any(|&i| i != 17 && i / 4 == 17 / 4), "siblings are near: the rule has work to do");
        assert!(index.search(&q, 0, EF_SEARCH).is_empty());
        for i in [0, 17, 399] {
            let q = combine(pairs[i].0.clone(), pairs[i].1.clone(), 0.6);
            let hits = index.search(&q, 3, EF_SEARCH);
            assert_eq!(hits[0].entry, i);
            let parts: std::collections::BTreeSet<&str> = hits.iter().map(|h| h.part.as_str()).collect();
            assert_eq!(parts.len(), 3, "one step per part");
        }
    }

    #[test]
    fn a_saved_index_reloads_to_identical_results_and_refuses_another_embedder() {
        let pairs = synthetic(300, 32, 8, 5);
        let index = index_of(&pairs, 0.6);
        let dir = tempfile::tempdir().expect("tempdir");
        // Saved over an older, smaller index: the new one is what loads.
        index_of(&synthetic(100, 32, 8, 9), 0.6).save(dir.path()).expect("save the old one");
        index.save(dir.path()).expect("save");
        let again = RetrievalIndex::load(dir.path(), "synthetic").expect("load");
        for (image, state) in synthetic(50, 32, 8, 6) {
            let q = combine(image, state, 0.6);
            assert_eq!(index.search(&q, 3, EF_SEARCH), again.search(&q, 3, EF_SEARCH));
        }
        let err = RetrievalIndex::load(dir.path(), "builtin-1").expect_err("other embedder").to_string();
        assert!(err.contains("synthetic") && err.contains("builtin-1"), "{err}");
        let err = RetrievalIndex::load(&dir.path().join("nothing"), "synthetic").expect_err("no index").to_string();
        assert!(err.contains("not a retrieval index"), "{err}");
        // Damaged files are errors, not crashes.
        let graph = dir.path().join("hnsw.hnsw.graph");
        let bytes = std::fs::read(&graph).expect("graph");
        std::fs::write(&graph, &bytes[..bytes.len() / 3]).expect("truncate");
        assert!(RetrievalIndex::load(dir.path(), "synthetic").is_err());
        std::fs::write(dir.path().join(VECTORS_FILE), b"short").expect("truncate vectors");
        let err = RetrievalIndex::load(dir.path(), "synthetic").expect_err("short vectors").to_string();
        assert!(err.contains("rebuild"), "{err}");
    }
}
