//! Progress of long work on stderr: a bar on a terminal, otherwise a plain line at a steady
//! interval (done/total, rate, ETA, failures so far) and one at the end, so a CI or cluster
//! log shows long work too. The interval is `VISION2CAD_PROGRESS_SECONDS` (default 30).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    what: String,
    started: Instant,
    interval: Duration,
    /// done, failed, total, last plain line.
    state: Mutex<(usize, usize, usize, Instant)>,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(what: &str, total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let color = std::env::var_os(crate::cli::env::NO_COLOR).is_none();
            let template = if color {
                "{msg} {bar:40.cyan/blue} {pos}/{len} [{elapsed_precise}, ETA {eta}]"
            } else {
                "{msg} {bar:40} {pos}/{len} [{elapsed_precise}, ETA {eta}]"
            };
            let bar = ProgressBar::new(total as u64)
                .with_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
            bar.set_message(what.to_string());
            bar
        });
        let now = Instant::now();
        Progress {
            what: what.into(),
            started: now,
            interval: crate::cli::env::progress_interval(),
            state: Mutex::new((0, 0, total, now)),
            bar,
        }
    }

    /// One item done (`failed`: it did not succeed).
    pub fn tick(&self, failed: bool) {
        let Ok(mut s) = self.state.lock() else { return };
        s.0 += 1;
        s.1 += usize::from(failed);
        self.show(&mut s);
    }

    /// An item failed (counted in the failures; `tick` counts it as done).
    pub fn failed(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 += 1;
        }
    }

    /// Where work reports its own position (the total may grow as work is discovered).
    pub fn set(&self, done: usize, total: usize) {
        let Ok(mut s) = self.state.lock() else { return };
        (s.0, s.2) = (done, total);
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
        self.show(&mut s);
    }

    fn show(&self, s: &mut (usize, usize, usize, Instant)) {
        if let Some(bar) = &self.bar {
            bar.set_position(s.0 as u64);
            if s.1 > 0 {
                bar.set_message(format!("{} ({} failed)", self.what, s.1));
            }
        } else if s.3.elapsed() >= self.interval {
            s.3 = Instant::now();
            self.line(s.0, s.1, s.2);
        }
    }

    fn line(&self, done: usize, failed: usize, total: usize) {
        if total == 0 {
            return;
        }
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        let eta = if done == 0 {
            "unknown".to_string()
        } else {
            format!("{:.0} s", (total - done.min(total)) as f64 / rate.max(1e-9))
        };
        eprintln!("{}: {done}/{total} done, {:.1}/min, ETA {eta}, {failed} failed", self.what, rate * 60.0);
    }

    pub fn finish(&self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => {
                if let Ok(s) = self.state.lock() {
                    self.line(s.0, s.1, s.2);
                }
            }
        }
    }
}
