//! Sharding batch work across machines: `--shard-index I --shard-count N`, or the index a
//! scheduler gives (`JOB_COMPLETION_INDEX` of a Kubernetes Indexed Job, `SLURM_ARRAY_TASK_ID`
//! and `SLURM_ARRAY_TASK_COUNT` of a SLURM array). An item belongs to the shard given by a
//! stable hash of its id, so every shard of every machine agrees without talking to the
//! others, and `vision2cad merge` puts the pieces back together.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cli::env;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct ShardArgs {
    /// This process's shard, 0-based (else JOB_COMPLETION_INDEX, else SLURM_ARRAY_TASK_ID
    /// minus SLURM_ARRAY_TASK_MIN).
    #[arg(long, value_name = "I")]
    pub shard_index: Option<usize>,
    /// How many shards share the work (else SLURM_ARRAY_TASK_COUNT). Sharding is on when a
    /// count is known.
    #[arg(long, value_name = "N")]
    pub shard_count: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl ShardArgs {
    /// The shard of this process, or `None` when the work is not sharded.
    pub fn resolve(&self) -> Result<Option<Shard>> {
        let count = match self.shard_count {
            Some(n) => Some(n),
            None => env::scheduler_shard_count()
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .with_context(|| format!("{}={v:?} is not a shard count", env::SLURM_ARRAY_TASK_COUNT))
                })
                .transpose()?,
        };
        let Some(count) = count else {
            if let Some(i) = self.shard_index {
                bail!("--shard-index {i} needs --shard-count (or SLURM_ARRAY_TASK_COUNT)");
            }
            // A Kubernetes Indexed Job does not tell its pods the completion count: running
            // the whole split in every pod into one folder is never what was meant.
            if let Some(index) = env::scheduler_shard_index() {
                bail!(
                    "this is shard {index} of a scheduler's job ({} or {} is set) but the shard count is unknown: give --shard-count N (--shard-count 1 runs everything here)",
                    env::JOB_COMPLETION_INDEX,
                    env::SLURM_ARRAY_TASK_ID
                );
            }
            return Ok(None);
        };
        anyhow::ensure!(count >= 1, "the shard count must be at least 1");
        if count == 1 && self.shard_index.is_none_or(|i| i == 0) {
            return Ok(None);
        }
        let index = match self.shard_index {
            Some(i) => i,
            None => {
                let v = env::scheduler_shard_index().with_context(|| {
                    format!(
                        "{count} shards but no shard index: pass --shard-index, or run as a Kubernetes Indexed Job ({}) or a SLURM array ({})",
                        env::JOB_COMPLETION_INDEX,
                        env::SLURM_ARRAY_TASK_ID
                    )
                })?;
                v.trim().parse::<usize>().with_context(|| format!("the shard index {v:?} is not a number"))?
            }
        };
        anyhow::ensure!(index < count, "shard index {index} is out of range for {count} shards (0 to {})", count - 1);
        if count > 1 {
            eprintln!("shard {index} of {count}");
        }
        Ok(Some(Shard { index, count }))
    }
}

impl Shard {
    /// Whether the item `id` is this shard's.
    pub fn holds(&self, id: &str) -> bool {
        shard_of(id, self.count) == self.index
    }

    /// The name of this shard's output (`shard-2-of-8`).
    pub fn name(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }

    /// Parses a name written by [`Shard::name`].
    pub fn parse(name: &str) -> Option<Shard> {
        let rest = name.strip_prefix("shard-")?;
        let (index, count) = rest.split_once("-of-")?;
        let shard = Shard { index: index.parse().ok()?, count: count.parse().ok()? };
        (shard.index < shard.count).then_some(shard)
    }
}

/// The shard of `id` among `count`: the first 8 bytes of its SHA-256, modulo the count.
pub fn shard_of(id: &str, count: usize) -> usize {
    let digest = Sha256::digest(id.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % count.max(1) as u64) as usize
}

/// The path of a shard's own result file: `report.json` becomes `report.shard-1-of-4.json`.
pub fn shard_file(path: &std::path::Path, shard: Option<Shard>) -> std::path::PathBuf {
    let Some(shard) = shard else { return path.to_path_buf() };
    let stem = path.file_stem().map_or("out".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{}.{}", shard.name(), ext.to_string_lossy()),
        None => format!("{stem}.{}", shard.name()),
    };
    path.with_file_name(name)
}

/// Checks that `shards` are exactly the shards 0..N of one count, naming what is missing.
pub fn check_complete(shards: &[Shard], what: &str) -> Result<()> {
    let Some(count) = shards.first().map(|s| s.count) else { bail!("no shards of {what} to merge") };
    if let Some(other) = shards.iter().find(|s| s.count != count) {
        bail!("{what}: shards of {count} and of {} cannot be merged", other.count);
    }
    let mut seen = vec![0usize; count];
    for s in shards {
        anyhow::ensure!(s.index < count, "{what}: shard index {} is out of range for {count} shards", s.index);
        seen[s.index] += 1;
    }
    let missing: Vec<String> = (0..count).filter(|&i| seen[i] == 0).map(|i| i.to_string()).collect();
    let twice: Vec<String> = (0..count).filter(|&i| seen[i] > 1).map(|i| i.to_string()).collect();
    anyhow::ensure!(twice.is_empty(), "{what}: shard {} given twice", twice.join(", "));
    anyhow::ensure!(missing.is_empty(), "{what}: shard {} of {count} missing (has it finished?)", missing.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_lands_in_exactly_one_shard_and_the_split_is_even_enough() {
        let ids: Vec<String> = (0..4000).map(|i| format!("gen-7-{i:05}")).collect();
        let mut sizes = [0usize; 4];
        for id in &ids {
            let owners: Vec<usize> = (0..4).filter(|&i| Shard { index: i, count: 4 }.holds(id)).collect();
            assert_eq!(owners.len(), 1, "{id}");
            sizes[owners[0]] += 1;
        }
        assert!(sizes.iter().all(|&n| (900..1100).contains(&n)), "{sizes:?}");
        // Stable across releases: a fixed id keeps its shard.
        assert_eq!(shard_of("gen-7-00000", 4), shard_of("gen-7-00000", 4));
    }

    #[test]
    fn names_and_files_round_trip() {
        let s = Shard { index: 1, count: 4 };
        assert_eq!(Shard::parse(&s.name()), Some(s));
        assert_eq!(Shard::parse("shard-4-of-4"), None);
        assert_eq!(
            shard_file(std::path::Path::new("out/report.json"), Some(s)).to_str(),
            Some("out/report.shard-1-of-4.json")
        );
        assert_eq!(shard_file(std::path::Path::new("report.json"), None).to_str(), Some("report.json"));
    }

    #[test]
    fn incomplete_shards_are_named() {
        let shards = [Shard { index: 0, count: 3 }, Shard { index: 2, count: 3 }];
        let e = check_complete(&shards, "run").expect_err("missing").to_string();
        assert!(e.contains("shard 1 of 3 missing"), "{e}");
        let all = [Shard { index: 0, count: 2 }, Shard { index: 1, count: 2 }];
        assert!(check_complete(&all, "run").is_ok());
    }
}
