//! Phase times of one query, printed to stderr when profiling is asked for
//! (`EngineOptions::profile`); otherwise nothing is measured.

use std::time::Instant;

use crate::error::Result;

pub(crate) struct Phases {
    label: &'static str,
    on: bool,
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub fn new(label: &'static str, on: bool) -> Self {
        Phases { label, on, last: Instant::now(), done: Vec::new() }
    }

    /// Ends phase `name` now.
    pub fn mark(&mut self, name: &'static str) {
        if self.on {
            let now = Instant::now();
            self.done.push((name, (now - self.last).as_secs_f64() * 1e3));
            self.last = now;
        }
    }

    /// Ends phase `name` once `wait` returns (a device's queued work finishing); `wait` runs
    /// only when profiling, so the work is not serialised otherwise.
    pub fn mark_after(&mut self, name: &'static str, wait: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.on {
            wait()?;
            self.mark(name);
        }
        Ok(())
    }

    /// Starts the clock afresh (after waiting for earlier work, when profiling).
    pub fn restart(&mut self, wait: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.on {
            wait()?;
            self.last = Instant::now();
        }
        Ok(())
    }

    pub fn report(&self) {
        if self.on {
            let parts: Vec<String> = self.done.iter().map(|(n, ms)| format!("{n} {ms:.3} ms")).collect();
            eprintln!("profile {}: {}", self.label, parts.join(", "));
        }
    }
}
