//! # gerd
//!
//! GERD (Geometry Explicit Reference Dataset) records: every modeling step with its command,
//! the entity table before and after, and the views. This crate will hold the record
//! format, the procedural part generator, the importers (CadQuery test100, DeepCAD JSON),
//! validation and the training export. It is empty until that work lands (see the
//! project's issues); nothing here pretends otherwise.
