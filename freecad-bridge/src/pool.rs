//! A pool of sessions for batch work: one worker process per thread.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::BridgeError;
use crate::session::Session;
use crate::worker::WorkerConfig;

/// Runs jobs on `workers` sessions in parallel. Each job starts from an empty document;
/// each worker is replaced after `recycle_after` jobs.
#[derive(Debug, Clone)]
pub struct WorkerPool {
    config: WorkerConfig,
    workers: usize,
    recycle_after: usize,
}

impl WorkerPool {
    /// `workers = 0` means one per core.
    pub fn new(config: WorkerConfig, workers: usize) -> Self {
        let workers = if workers == 0 { default_workers() } else { workers };
        WorkerPool { config, workers, recycle_after: 200 }
    }

    /// Replace each worker after this many jobs (at least 1).
    pub fn with_recycle_after(mut self, jobs: usize) -> Self {
        self.recycle_after = jobs.max(1);
        self
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Apply `job` to every item, in parallel; results come back in item order.
    /// `done` is called after each item (for progress bars).
    pub fn map<I, T, F>(&self, items: &[I], job: F, done: impl Fn() + Sync) -> Vec<Result<T, BridgeError>>
    where
        I: Sync,
        T: Send,
        F: Fn(&mut Session, &I) -> Result<T, BridgeError> + Sync,
    {
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<T, BridgeError>>>> = items.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..self.workers.min(items.len()) {
                scope.spawn(|| {
                    let mut session = Session::new(self.config.clone());
                    let mut jobs_done = 0usize;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let result = match session.as_mut() {
                            Ok(s) => s.reset().map(|_| ()).and_then(|()| job(s, item)),
                            Err(e) => Err(BridgeError::Worker(crate::CallError::Spawn(e.to_string()))),
                        };
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(result);
                        }
                        done();
                        jobs_done += 1;
                        if jobs_done.is_multiple_of(self.recycle_after)
                            && let Ok(s) = session.as_mut()
                        {
                            let _ = s.reset();
                            if let Err(e) = s.restart_worker() {
                                session = Err(e);
                            }
                        }
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(BridgeError::Worker(crate::CallError::Protocol("job was not run".into()))))
            })
            .collect()
    }
}

/// One worker per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
