//! Sharding batch work across machines: `--shard-index I --shard-count N`, or the index a
//! scheduler gives (`JOB_COMPLETION_INDEX` of a Kubernetes Indexed Job, `SLURM_ARRAY_TASK_ID`
//! and `SLURM_ARRAY_TASK_COUNT` of a SLURM array). An item belongs to the shard given by a
//! stable hash of its id, so every shard of every machine agrees without talking to the
//! others, and `vision2cad merge` puts the pieces back together.

use anyhow::{Context, Result, bail};
pub use vision2cad::batch::shard::{Shard, shard_file};

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
    fn incomplete_shards_are_named() {
        let shards = [Shard { index: 0, count: 3 }, Shard { index: 2, count: 3 }];
        let e = check_complete(&shards, "run").expect_err("missing").to_string();
        assert!(e.contains("shard 1 of 3 missing"), "{e}");
        let all = [Shard { index: 0, count: 2 }, Shard { index: 1, count: 2 }];
        assert!(check_complete(&all, "run").is_ok());
    }
}
