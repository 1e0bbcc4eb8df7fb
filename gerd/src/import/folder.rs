//! Importing many DeepCAD files at once: the files a path names (one file, a folder searched
//! recursively, or a list), imported in parallel on a worker pool, each into its own part,
//! resuming where an earlier run stopped, with one [`FileOutcome`] per file for the report
//! (`import-report.jsonl`) and its failures grouped by [`reason_class`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecad_bridge::WorkerPool;
use serde::{Deserialize, Serialize};

use super::{Units, import_deepcad_in};
use crate::error::GerdError;
use crate::record::{PartSource, RecordOptions, Split, part_dir, read_part, write_part};

/// A DeepCAD file to import, and its path relative to what was given (for provenance and
/// the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub relative: String,
}

impl SourceFile {
    /// The part the file becomes: its file stem.
    pub fn part_id(&self) -> String {
        self.path.file_stem().map_or("deepcad".into(), |s| s.to_string_lossy().into_owned())
    }
}

/// How one file's import ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Imported,
    Failed,
}

/// One line of `import-report.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileOutcome {
    pub file: String,
    pub id: String,
    pub status: FileStatus,
    pub reason: Option<String>,
}

/// What an import of many files did.
#[derive(Debug, Clone, PartialEq)]
pub struct FolderImport {
    /// Every file of this run (of this shard), in order.
    pub outcomes: Vec<FileOutcome>,
    /// Files an earlier run had imported already.
    pub resumed: usize,
}

impl FolderImport {
    pub fn imported(&self) -> usize {
        self.outcomes.iter().filter(|o| o.status == FileStatus::Imported).count()
    }

    /// The failures grouped by [`reason_class`], most frequent first.
    pub fn failure_classes(&self) -> Vec<(String, usize)> {
        let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
        for reason in self.outcomes.iter().filter(|o| o.status == FileStatus::Failed).filter_map(|o| o.reason.as_ref())
        {
            *by_reason.entry(reason_class(reason)).or_default() += 1;
        }
        let mut classes: Vec<(String, usize)> = by_reason.into_iter().collect();
        classes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        classes
    }

    /// `import-report.jsonl`: one [`FileOutcome`] per line.
    pub fn report_lines(&self) -> String {
        self.outcomes.iter().filter_map(|o| serde_json::to_string(o).ok()).map(|l| l + "\n").collect()
    }
}

/// The DeepCAD files `path` names: a `.json` file, a folder (searched recursively for
/// `*.json`), or a text file listing files (one per line, relative to the list; `#` starts
/// a comment). Two files that would become the same part are refused.
pub fn deepcad_files(path: &Path) -> Result<Vec<SourceFile>, GerdError> {
    let relative = |file: &Path| file.strip_prefix(path).unwrap_or(file).display().to_string();
    let files: Vec<SourceFile> = if path.is_dir() {
        let mut found = Vec::new();
        let mut stack = vec![path.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| GerdError::io(&dir, e))? {
                let p = entry.map_err(|e| GerdError::io(&dir, e))?.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "json") {
                    found.push(p);
                }
            }
        }
        found.sort();
        if found.is_empty() {
            return Err(GerdError::Record(format!("{} holds no .json files", path.display())));
        }
        found.into_iter().map(|f| SourceFile { relative: relative(&f), path: f }).collect()
    } else {
        let text = std::fs::read_to_string(path).map_err(|e| GerdError::io(path, e))?;
        if path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{') {
            let name = path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
            vec![SourceFile { path: path.to_path_buf(), relative: name }]
        } else {
            let base = path.parent().unwrap_or(Path::new("."));
            let listed: Vec<SourceFile> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(|l| SourceFile { path: base.join(l), relative: l.to_string() })
                .collect();
            if listed.is_empty() {
                return Err(GerdError::Record(format!("{} lists no files", path.display())));
            }
            listed
        }
    };
    let mut seen = BTreeMap::new();
    for f in &files {
        if let Some(other) = seen.insert(f.part_id(), f.relative.clone()) {
            return Err(GerdError::Record(format!(
                "{other} and {} would both be part {}: give files with distinct names",
                f.relative,
                f.part_id()
            )));
        }
    }
    Ok(files)
}

/// Files an earlier run imported, and those left to import.
#[derive(Debug, Clone)]
pub struct Pending<'a> {
    pub earlier: Vec<&'a SourceFile>,
    pub todo: Vec<&'a SourceFile>,
}

/// `files` split by whether an earlier run imported them into the dataset at `out`.
pub fn already_imported<'a>(files: &'a [SourceFile], out: &Path) -> Pending<'a> {
    let (earlier, todo) = files.iter().partition(|f| read_part(&part_dir(out, &f.part_id())).is_ok());
    Pending { earlier, todo }
}

/// Import `files` into the dataset at `out` (part folders; the caller writes the index and
/// the report), skipping `earlier`, what [`already_imported`] found imported. `done` is told
/// of each file as it ends (true when it failed), for progress.
pub fn import_deepcad_files(
    files: &[SourceFile],
    Pending { earlier, todo }: Pending,
    out: &Path,
    pool: &WorkerPool,
    units: Units,
    done: impl Fn(bool) + Sync,
) -> Result<FolderImport, GerdError> {
    let parts = out.join(crate::record::PARTS_DIR);
    std::fs::create_dir_all(&parts).map_err(|e| GerdError::io(&parts, e))?;
    let results = pool.map(
        &todo,
        |session, file| {
            let outcome = std::fs::read_to_string(&file.path)
                .map_err(|e| format!("cannot read the file: {e}"))
                .and_then(|text| import_deepcad_in(&text, session, units).map_err(|e| e.to_string()))
                .and_then(|imported| {
                    let part = PartSource {
                        id: file.part_id(),
                        source: "deepcad".into(),
                        split: Split::Train,
                        licence: "see the source's licence (DeepCAD data: MIT)".into(),
                        provenance: format!("DeepCAD JSON {}; {}", file.relative, imported.notes.join("; ")),
                        program: imported.program,
                        target_image: None,
                    };
                    write_part(session, &part, out, &RecordOptions::default()).map(|_| ()).map_err(|e| e.to_string())
                });
            Ok(outcome)
        },
        |r| done(!matches!(r, Ok(Ok(())))),
    );
    let mut by_file: BTreeMap<&str, (FileStatus, Option<String>)> = earlier
        .iter()
        .map(|f| (f.relative.as_str(), (FileStatus::Imported, Some("imported by an earlier run".to_string()))))
        .collect();
    for (file, result) in todo.iter().zip(results) {
        let entry = match result.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(()) => (FileStatus::Imported, None),
            Err(reason) => (FileStatus::Failed, Some(reason)),
        };
        by_file.insert(file.relative.as_str(), entry);
    }
    let outcomes = files
        .iter()
        .map(|f| {
            let (status, reason) = by_file.remove(f.relative.as_str()).unwrap_or((FileStatus::Failed, None));
            FileOutcome { file: f.relative.clone(), id: f.part_id(), status, reason }
        })
        .collect();
    Ok(FolderImport { outcomes, resumed: earlier.len() })
}

/// A failure reason with its numbers and IDs blanked (any word holding a digit), to group
/// a report's failures.
pub fn reason_class(reason: &str) -> String {
    let mut class = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, class: &mut String| {
        if word.chars().any(|c| c.is_ascii_digit()) {
            class.push('#');
        } else {
            class.push_str(word);
        }
        word.clear();
    };
    for c in reason.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
            word.push(c);
        } else {
            flush(&mut word, &mut class);
            class.push(c);
        }
    }
    flush(&mut word, &mut class);
    class.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasons_group_without_their_numbers_and_ids() {
        assert_eq!(
            super::reason_class("extrusion 99c50ec2-b57e: the part is several separate solids"),
            "extrusion #: the part is several separate solids"
        );
        assert_eq!(super::reason_class("command 5 (extrude) failed at S3: x"), "command # (extrude) failed at #: x");
    }
}
