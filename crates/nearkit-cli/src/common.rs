//! Options and helpers shared by the subcommands.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use nearkit::{CudaOptions, Device, Engine, EngineOptions, Points, Real, Role};
use nearkit_io::ReadOptions;

use crate::note;
use crate::progress;

/// An error the CLI reports in one line and exits with code 2 on.
#[derive(Debug)]
pub struct CliError(pub String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Precision {
    F32,
    F64,
}

#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// Where to run: auto (CUDA if a usable GPU is present, else CPU), cpu, cuda, or cuda:N.
    #[arg(long, default_value = "auto", value_parser = parse_with::<Device>)]
    pub device: Device,
    /// Working precision of coordinates and distances; both backends give identical results.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Print nothing but the results (no notes, no progress).
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the time of each phase of the query to stderr (the GPU waits between phases).
    #[arg(long)]
    pub profile: bool,
}

/// A clap value parser for any of the library's `FromStr` types (devices, modes, distributions),
/// so their error messages reach the user unchanged.
pub fn parse_with<T: std::str::FromStr<Err = nearkit::Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: nearkit::Error| e.to_string())
}

/// `--max-distance` must be a finite number >= 0 that the working precision T holds.
pub fn check_max_distance<T: Real>(r: Option<f64>) -> CliResult {
    r.map_or(Ok(()), |r| check_distance::<T>("--max-distance", r))
}

/// A distance option (`name`) must be a finite number >= 0 that the working precision T holds.
pub fn check_distance<T: Real>(name: &str, r: f64) -> CliResult {
    if !(r.is_finite() && r >= 0.0) {
        return Err(CliError(format!("{name} must be a finite number >= 0 (got {r})")));
    }
    if !T::from_f64(r).is_finite() {
        return Err(CliError(format!(
            "{name} {r:e} does not fit {} (largest {:e}): --precision f64 holds it",
            T::NAME,
            f32::MAX
        )));
    }
    Ok(())
}

/// Parses `x,y,z` column names or indices for CSV input.
pub fn parse_columns(s: &str) -> Result<[String; 3], String> {
    let parts: Vec<String> = s.split(',').map(|p| p.trim().to_string()).collect();
    <[String; 3]>::try_from(parts)
        .map_err(|p| format!("--columns needs three names or indices separated by commas, got {}", p.len()))
}

impl DeviceArgs {
    /// Opens the backend, telling the user where the work runs (and why, on a fallback).
    pub fn open(&self) -> CliResult<Engine> {
        let start = Instant::now();
        let spinner = progress::Spinner::start("starting the device", self.quiet);
        let engine = Engine::with_options(self.device, &engine_options(self.profile))?;
        spinner.finish();
        if !self.quiet {
            if let Some(n) = engine.note() {
                note!("note: {n}");
            }
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if ms > 50.0 {
                note!("note: device start-up (context + kernels) took {ms:.0} ms, not counted in query times");
            }
        }
        Ok(engine)
    }
}

/// The engine's options: `profile`, and where the CUDA toolkit's headers and the kernel cache
/// are, from the environment (`NEARKIT_CCCL_INCLUDE`, else `$CUDA_HOME/include/cccl`;
/// `NEARKIT_CACHE_DIR`), where the defaults do not fit.
pub fn engine_options(profile: bool) -> EngineOptions {
    let mut cuda = CudaOptions::default();
    if let Some(p) = std::env::var_os("NEARKIT_CCCL_INCLUDE") {
        cuda.cccl_include = PathBuf::from(p);
    } else if let Some(home) = std::env::var_os("CUDA_HOME").or_else(|| std::env::var_os("CUDA_PATH")) {
        cuda.cccl_include = PathBuf::from(home).join("include").join("cccl");
    }
    if let Some(p) = std::env::var_os("NEARKIT_CACHE_DIR") {
        cuda.kernel_cache = Some(PathBuf::from(p));
    }
    EngineOptions { cuda, profile }
}

/// Reads a point file in precision T, with a progress bar for big files.
pub fn load<T: Real>(path: &Path, role: Role, columns: &Option<[String; 3]>, quiet: bool) -> CliResult<Points<T>> {
    let format = nearkit_io::Format::from_path(path)?;
    let file = std::fs::File::open(path).map_err(|e| CliError(format!("{}: cannot open: {e}", path.display())))?;
    let bar = progress::file_bar(path, quiet);
    let opts = ReadOptions { columns: columns.clone() };
    // A regular file's length bounds what its header may promise (a pipe's is unknown).
    let size = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    let points = match size {
        Some(size) => nearkit_io::read_points_from_sized(bar.wrap_read(file), size, format, path, &opts),
        None => nearkit_io::read_points_from(bar.wrap_read(file), format, path, &opts),
    };
    bar.finish_and_clear();
    let points = points?;
    if points.is_empty() {
        return Err(CliError(format!(
            "{}: no points in the file (point set {role} must not be empty)",
            path.display()
        )));
    }
    Ok(points)
}

pub fn require_both(a: &Option<PathBuf>, b: &Option<PathBuf>) -> CliResult<bool> {
    match (a, b) {
        (Some(_), Some(_)) => Ok(true),
        (None, None) => Ok(false),
        _ => Err(CliError("give both --a and --b, or neither to run the built-in example".into())),
    }
}

pub fn ms(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A failed write to standard output: a closed pipe (`nearkit … | head`) ends the program
/// quietly with the status a pipe's signal gives (141); anything else is an error.
pub fn stdout_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    CliError(format!("cannot write to standard output: {e}"))
}

/// `println!` that returns a `CliError` from the enclosing function instead of panicking when
/// standard output cannot be written.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            return Err($crate::common::stdout_error(e));
        }
    }};
}

/// `eprintln!` for notes: a note that cannot be written is dropped, never a panic.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Memory the system can give now (Linux's MemAvailable; elsewhere, unknown).
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// 1536 -> "1.5 KiB".
pub fn bytes(n: u128) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// An error, before anything is allocated, when `count` items of at least `bytes_each` bytes
/// (`what`, e.g. "--bodies 1000000000") cannot fit in the memory this machine has free.
pub fn check_memory(what: &str, count: usize, bytes_each: u64) -> CliResult {
    let need = count as u128 * bytes_each as u128;
    match available_memory() {
        Some(free) if need > free as u128 => Err(CliError(format!(
            "{what} needs at least {} of memory ({} bytes each), but this machine has {} free: ask for fewer",
            bytes(need),
            bytes_each,
            bytes(free as u128)
        ))),
        None if need > isize::MAX as u128 => {
            Err(CliError(format!("{what} needs at least {} of memory, more than can be addressed", bytes(need))))
        }
        _ => Ok(()),
    }
}

/// An error when `out` would overwrite one of the inputs.
pub fn check_out(out: &Path, inputs: &[Option<&Path>]) -> CliResult {
    let inputs: Vec<&Path> = inputs.iter().flatten().copied().collect();
    nearkit_io::refuse_overwriting_inputs(out, &inputs)?;
    Ok(())
}
