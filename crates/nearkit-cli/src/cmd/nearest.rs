//! `nearkit nearest`: every A's nearest B (the all-nearest-neighbour join).

use crate::note;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::{PointIndex, Real, Role, NO_ID};

use crate::common::{
    check_max_distance, check_out, load, ms, parse_columns, thousands, CliResult, DeviceArgs, Precision,
};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit nearest --a catalogue1.csv --b catalogue2.csv --out matches.csv
  nearkit nearest --a scan.ply --b model.ply --max-distance 0.01 --out nn.npy

Writes one row per A: a,b,distance (b = -1 when no B lies within --max-distance).
Ties go to the smaller B id.")]
pub struct NearestArgs {
    /// Query points A.
    #[arg(long)]
    pub a: PathBuf,
    /// Points B searched for each A's nearest.
    #[arg(long)]
    pub b: PathBuf,
    /// Output file: .csv (a,b,distance), .json or .npy (N×3 float64).
    #[arg(long)]
    pub out: PathBuf,
    /// Only neighbours at most this far away.
    #[arg(long, allow_negative_numbers = true)]
    pub max_distance: Option<f64>,
    /// CSV columns holding x,y,z (names or 0-based indices).
    #[arg(long, value_parser = parse_columns)]
    pub columns: Option<[String; 3]>,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(args: &NearestArgs) -> CliResult {
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

fn run_t<T: Real>(args: &NearestArgs) -> CliResult {
    check_max_distance::<T>(args.max_distance)?;
    nearkit_io::OutputFormat::from_path(&args.out)?;
    check_out(&args.out, &[Some(&args.a), Some(&args.b)])?;
    let quiet = args.dev.quiet;
    let a = load::<T>(&args.a, Role::A, &args.columns, quiet)?;
    let b = load::<T>(&args.b, Role::B, &args.columns, quiet)?;
    let engine = args.dev.open()?;
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let result = PointIndex::new(&b, &engine).and_then(|index| index.nearest(&a, args.max_distance.map(T::from_f64)));
    let elapsed = start.elapsed();
    spinner.finish();
    let result = result?;
    nearkit_io::write_nearest(&args.out, &result)?;
    if !quiet {
        let missing = result.b.iter().filter(|&&b| b == NO_ID).count();
        if missing > 0 {
            note!(
                "note: {} of {} A points have no B within the max distance (b = -1)",
                thousands(missing),
                thousands(a.len())
            );
        }
        note!(
            "nearest B of {} A points among {} in {} on {}",
            thousands(a.len()),
            thousands(b.len()),
            ms(elapsed),
            engine.describe()
        );
    }
    Ok(())
}
