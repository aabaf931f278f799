//! Options and helpers shared by the subcommands.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use nearkit::{CudaOptions, Device, Engine, EngineOptions, Points, Real, Role};
use nearkit_io::ReadOptions;

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

/// `--max-distance` must be a finite number >= 0.
pub fn check_max_distance(r: Option<f64>) -> CliResult {
    match r {
        Some(r) if !(r.is_finite() && r >= 0.0) => {
            Err(CliError(format!("--max-distance must be a finite number >= 0 (got {r})")))
        }
        _ => Ok(()),
    }
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
                eprintln!("note: {n}");
            }
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if ms > 50.0 {
                eprintln!("note: device start-up (context + kernels) took {ms:.0} ms, not counted in query times");
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
    let points = nearkit_io::read_points_from(bar.wrap_read(file), format, path, &opts);
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
