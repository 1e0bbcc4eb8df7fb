//! GERD-RET: modeling steps of other parts that resemble the current situation, for Stage 1.
//!
//! A step is found by its part's target image and the state before it; the score is
//! `lambda * sim(images) + (1 - lambda) * sim(states)`, computed by one HNSW inner-product
//! search over vectors built for it ([`index`]). The embeddings sit behind a trait
//! ([`embed::Embedder`]) with an offline, deterministic built-in one.
//!
//! ```no_run
//! use gerd::record::Split;
//! use gerd::retrieve::{RetrievalIndex, embed::{Builtin, Embedder}};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut embedder = Builtin;
//! let index = RetrievalIndex::build("gerd-out".as_ref(), Split::Train, &mut embedder, 0.6, |_, _| {})?;
//! index.save("gerd-index".as_ref())?;
//! let target = image::open("part.png")?.to_rgb8();
//! let query = index.query_vector(
//!     embedder.embed_image(&target)?,
//!     embedder.embed_state(&freecad_bridge::ModelState::empty(), &[])?,
//! )?;
//! for hit in index.search(&query, 3, 64) {
//!     println!("{} step {}: {:.3}", hit.part, hit.step, hit.score);
//! }
//! # Ok(())
//! # }
//! ```

pub mod embed;
mod index;

pub use index::{
    DatasetInfo, EF_SEARCH, Entry, Example, Hit, INDEX_FORMAT, IndexMeta, RetrievalIndex, SketchOn, combine,
    from_vectors,
};
