//! `nearkit gen points`: reproducible test data.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use nearkit::generate::{check_range, generate, Distribution};

use crate::common::{check_memory, parse_with, CliError, CliResult, Precision};

#[derive(Subcommand, Debug)]
pub enum GenCommand {
    /// Generate a point set.
    #[command(after_help = "\
Examples:
  nearkit gen points --count 1000000 --distribution uniform-int --range 1048576 --seed 1 --out army_a.npy
  nearkit gen points --count 50000 --distribution clustered --out clusters.csv

The armies of `nearkit pairs` are uniform-int with range 2^20 = 1048576. The same arguments always
give the same points, whatever the number of threads.")]
    Points(GenPointsArgs),
}

#[derive(Args, Debug)]
pub struct GenPointsArgs {
    /// Number of points.
    #[arg(long)]
    pub count: usize,
    /// Edge of the cube [0, range)^3 the points lie in.
    #[arg(long, default_value_t = 1_048_576.0)]
    pub range: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// uniform-int, uniform, clustered, sphere, plane or duplicates.
    #[arg(long, default_value = "uniform-int", value_parser = parse_with::<Distribution>)]
    pub distribution: Distribution,
    /// Output: .npy (N×3), .csv (x,y,z), .ply or .xyz.
    #[arg(long)]
    pub out: PathBuf,
    /// Precision of the written coordinates.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
}

pub fn run(cmd: &GenCommand) -> CliResult {
    let GenCommand::Points(args) = cmd;
    if args.count == 0 {
        return Err(CliError("--count must be at least 1".into()));
    }
    let (size, checked) = match args.precision {
        Precision::F32 => (4, check_range::<f32>(args.distribution, args.range)),
        Precision::F64 => (8, check_range::<f64>(args.distribution, args.range)),
    };
    checked.map_err(|e| match e {
        nearkit::Error::InvalidArgument(m) => CliError(format!("--{m}")),
        e => CliError(e.to_string()),
    })?;
    // The points are made in memory, then written.
    check_memory(&format!("--count {}", args.count), args.count, 3 * size)?;
    match args.precision {
        Precision::F32 => {
            nearkit_io::write_points(&args.out, &generate::<f32>(args.distribution, args.count, args.range, args.seed))?
        }
        Precision::F64 => {
            nearkit_io::write_points(&args.out, &generate::<f64>(args.distribution, args.count, args.range, args.seed))?
        }
    }
    Ok(())
}
