//! Progress on stderr for work that takes over about a second; nothing when stderr is not a
//! terminal (indicatif hides it) or with --quiet.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner that appears only if the work is still running after one second.
pub struct Spinner {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
}

impl Spinner {
    pub fn start(message: impl Into<String>, quiet: bool) -> Spinner {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").unwrap());
        bar.set_message(message.into());
        let done = Arc::new(AtomicBool::new(false));
        if !quiet {
            let (b, d) = (bar.clone(), done.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                if !d.load(Ordering::SeqCst) {
                    b.set_draw_target(ProgressDrawTarget::stderr());
                    b.enable_steady_tick(Duration::from_millis(120));
                }
            });
        }
        Spinner { bar, done }
    }

    pub fn finish(self) {
        self.done.store(true, Ordering::SeqCst);
        self.bar.finish_and_clear();
    }
}

/// A byte-count bar for reading a file, shown for files over 32 MB.
pub fn file_bar(path: &Path, quiet: bool) -> ProgressBar {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if quiet || len < (32 << 20) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(ProgressStyle::with_template("reading {msg} {bar:30} {bytes}/{total_bytes} ({eta})").unwrap());
    bar.set_message(path.display().to_string());
    bar
}

/// A bar counting `total` steps (ticks), drawn only on a terminal and without --quiet.
pub fn count_bar(total: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} ({eta})").unwrap());
    bar.set_message(what.to_string());
    bar
}
