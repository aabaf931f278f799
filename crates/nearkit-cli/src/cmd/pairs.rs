//! `nearkit pairs`: the k closest A–B pairs.

use crate::{note, out};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::generate::{armies, ARMY_RANGE};
use nearkit::{PairMode, PairsOptions, PointIndex, Real, Role};

use crate::common::{
    check_max_distance, check_out, load, ms, parse_columns, parse_with, require_both, thousands, CliError, CliResult,
    DeviceArgs, Precision,
};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit pairs                                   built-in battle: 1,000,000 vs 400,000 generated soldiers
  nearkit pairs --a army_a.csv --b army_b.npy -k 10
  nearkit pairs --a a.ply --b b.ply --mode all-pairs --out pairs.csv --device cuda

With no --a/--b it generates two armies (integer coordinates uniform in [0, 2^20),
fixed seed) and prints the 100 closest pairs. Ids are 0-based row numbers of the inputs.
Results are exact: ties go to the smaller A id, then the smaller B id.")]
pub struct PairsArgs {
    /// Point set A (.csv, .npy, .ply, .off, .xyz).
    #[arg(long)]
    pub a: Option<PathBuf>,
    /// Point set B (.csv, .npy, .ply, .off, .xyz).
    #[arg(long)]
    pub b: Option<PathBuf>,
    /// Number of pairs to return.
    #[arg(short, long, default_value_t = 100)]
    pub k: usize,
    /// nearest-per-a: each A's nearest B, then the k closest (an A appears once).
    /// all-pairs: the k globally closest A–B pairs (an A may repeat).
    #[arg(long, default_value = "nearest-per-a", value_parser = parse_with::<PairMode>)]
    pub mode: PairMode,
    /// Only pairs at most this far apart.
    #[arg(long, allow_negative_numbers = true)]
    pub max_distance: Option<f64>,
    /// CSV columns holding x,y,z: names (with a header row) or 0-based indices, e.g. "lon,lat,h" or "2,3,4".
    #[arg(long, value_parser = parse_columns)]
    pub columns: Option<[String; 3]>,
    /// Write the pairs to this file (.csv, .json or .npy) instead of printing them.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the built-in generated armies.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(args: &PairsArgs) -> CliResult {
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

fn run_t<T: Real>(args: &PairsArgs) -> CliResult {
    if args.k == 0 {
        return Err(CliError("k must be at least 1 (got 0)".into()));
    }
    check_max_distance::<T>(args.max_distance)?;
    if let Some(out) = &args.out {
        nearkit_io::OutputFormat::from_path(out)?;
        check_out(out, &[args.a.as_deref(), args.b.as_deref()])?;
    }
    let quiet = args.dev.quiet;
    let (a, b) = if require_both(&args.a, &args.b)? {
        let a = load::<T>(args.a.as_ref().unwrap(), Role::A, &args.columns, quiet)?;
        let b = load::<T>(args.b.as_ref().unwrap(), Role::B, &args.columns, quiet)?;
        (a, b)
    } else {
        if !quiet {
            note!(
                "note: no --a/--b given: generating two armies (A = 1,000,000, B = 400,000, integers in [0, {}), seed {})",
                ARMY_RANGE as u64, args.seed
            );
        }
        armies::<T>(args.seed)
    };
    let engine = args.dev.open()?;
    let opts = PairsOptions { k: args.k, mode: args.mode, max_distance: args.max_distance.map(T::from_f64) };
    let spinner = Spinner::start(format!("finding the {} closest pairs", args.k), quiet);
    let start = Instant::now();
    let pairs = PointIndex::new(&b, &engine).and_then(|index| index.closest_pairs(&a, &opts));
    let elapsed = start.elapsed();
    spinner.finish();
    let pairs = pairs?;
    if !quiet {
        let possible = match args.mode {
            PairMode::NearestPerA => a.len(),
            PairMode::AllPairs => a.len().saturating_mul(b.len()),
        };
        if args.k > possible {
            note!(
                "note: k = {} is more than the {} possible pairs; returning {} rows",
                args.k,
                thousands(possible),
                pairs.len()
            );
        } else if pairs.len() < args.k {
            note!("note: only {} pairs lie within the max distance", pairs.len());
        }
    }
    match &args.out {
        Some(path) => nearkit_io::write_pairs(path, &pairs)?,
        None => {
            out!("{:>6} {:>10} {:>10} {:>14}", "rank", "a", "b", "distance");
            for (i, p) in pairs.iter().enumerate() {
                out!("{:>6} {:>10} {:>10} {:>14.4}", i + 1, p.a, p.b, p.distance.to_f64());
            }
        }
    }
    if !quiet {
        note!(
            "{} pairs ({}) of A = {} and B = {} points in {} on {}",
            pairs.len(),
            args.mode,
            thousands(a.len()),
            thousands(b.len()),
            ms(elapsed),
            engine.describe()
        );
    }
    Ok(())
}
