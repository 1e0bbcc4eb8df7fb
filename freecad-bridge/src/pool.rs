//! A pool of sessions for batch work: one worker process per thread.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::BridgeError;
use crate::session::Session;
use crate::worker::WorkerConfig;

/// Runs jobs on `workers` sessions in parallel. Each job starts from an empty document;
/// each worker is replaced after `recycle_after` jobs.
///
/// A worker lost during a job (a crash, a kill, a timeout) is a fault of the machine, not
/// of the item: the job runs again from its start in the fresh worker, up to
/// `fault_retries` more times, so a fault changes no result. Only an item that loses the
/// worker on every attempt comes back as [`BridgeError::KernelFault`].
#[derive(Debug, Clone)]
pub struct WorkerPool {
    config: WorkerConfig,
    workers: usize,
    recycle_after: usize,
    fault_retries: usize,
    fresh_per_item: bool,
}

impl WorkerPool {
    /// `workers = 0` means one per core.
    pub fn new(config: WorkerConfig, workers: usize) -> Self {
        let workers = if workers == 0 { default_workers() } else { workers };
        WorkerPool { config, workers, recycle_after: 200, fault_retries: 3, fresh_per_item: false }
    }

    /// Replace each worker after this many jobs (at least 1).
    pub fn with_recycle_after(mut self, jobs: usize) -> Self {
        self.recycle_after = jobs.max(1);
        self
    }

    /// Runs of a job again after its worker was lost (default 3).
    pub fn with_fault_retries(mut self, retries: usize) -> Self {
        self.fault_retries = retries;
        self
    }

    /// Start every job (and every rerun of one) in a worker that has served nothing else
    /// ([`Session::fresh_start`]), so a job's numbers do not depend on which jobs its worker
    /// ran before, nor on the number of workers: what evaluation needs to repeat to the bit.
    /// Costs one worker start per job.
    pub fn with_fresh_worker_per_item(mut self) -> Self {
        self.fresh_per_item = true;
        self
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Apply `job` to every item, in parallel; results come back in item order.
    /// `done` is called with each item's final result (for progress bars).
    pub fn map<I, T, F>(
        &self,
        items: &[I],
        job: F,
        done: impl Fn(&Result<T, BridgeError>) + Sync,
    ) -> Vec<Result<T, BridgeError>>
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
                            Ok(s) => self.run_job(s, item, &job),
                            Err(e) => Err(BridgeError::Worker(crate::CallError::Spawn(e.to_string()))),
                        };
                        done(&result);
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(result);
                        }
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

impl WorkerPool {
    /// One item, from its start again whenever the worker was lost during it.
    fn run_job<I, T, F>(&self, session: &mut Session, item: &I, job: &F) -> Result<T, BridgeError>
    where
        F: Fn(&mut Session, &I) -> Result<T, BridgeError>,
    {
        let what = |result: &Result<T, BridgeError>| match result {
            Err(e) => e.to_string(),
            Ok(_) => "the worker was lost and replaced during the item".into(),
        };
        session
            .undisturbed(
                self.fault_retries,
                |s| {
                    let start = if self.fresh_per_item { s.fresh_start() } else { s.reset().map(|_| ()) };
                    start.and_then(|()| job(s, item))
                },
                |_, result| {
                    tracing::warn!(
                        "the FreeCAD worker was lost during an item ({}); running the item again from its start",
                        what(result)
                    )
                },
            )
            .unwrap_or_else(|(attempts, last)| Err(BridgeError::KernelFault { attempts, last: what(&last) }))
    }
}

/// One worker per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
