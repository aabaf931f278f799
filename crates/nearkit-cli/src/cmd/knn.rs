//! `nearkit knn`: each query's k nearest data points (exact).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::generate::{generate, Distribution};
use nearkit::{Backend, KnnOptions, Real, Role, NO_ID};

use crate::common::{
    check_max_distance, load, ms, parse_columns, thousands, CliError, CliResult, DeviceArgs, Precision,
};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit knn                                            built-in example: 1M queries, 20K clustered points, k = 8
  nearkit knn --data mesh.off --queries q.npy -k 8 --out nn.npz
  nearkit knn --data scan.ply --exclude-self -k 16 --out graph.csv     the kNN graph of one set

Results are exact: ascending by distance, ties to the smaller id. Output: .csv
(query,rank,id,distance) or .npz (ids: N×k int32, distances: N×k); neighbours beyond
--max-distance are id -1 and distance inf. Mesh files (.off, .ply) give their vertices.")]
pub struct KnnArgs {
    /// Data points searched (.csv, .npy, .ply, .off, .xyz).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Query points; with --exclude-self and no --queries, the data itself.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Neighbours per query (clamped to the number of data points).
    #[arg(short, long, default_value_t = 8)]
    pub k: usize,
    /// Only neighbours at most this far away.
    #[arg(long, allow_negative_numbers = true)]
    pub max_distance: Option<f64>,
    /// Queries are the data: leave each point out of its own neighbours (a kNN graph).
    #[arg(long)]
    pub exclude_self: bool,
    /// CSV columns holding x,y,z (names or 0-based indices).
    #[arg(long, value_parser = parse_columns)]
    pub columns: Option<[String; 3]>,
    /// Output file: .csv or .npz. Without it, a summary and the first queries are printed.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(args: &KnnArgs) -> CliResult {
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

fn run_t<T: Real>(args: &KnnArgs) -> CliResult {
    if args.k == 0 {
        return Err(CliError("k must be at least 1 (got 0)".into()));
    }
    check_max_distance(args.max_distance)?;
    if let Some(out) = &args.out {
        if !matches!(out.extension().and_then(|e| e.to_str()), Some("csv" | "npz")) {
            return Err(CliError(format!("{}: unknown extension for neighbours: use .csv or .npz", out.display())));
        }
    }
    let quiet = args.dev.quiet;
    let (data, queries) = match (&args.data, &args.queries) {
        (Some(d), Some(q)) => {
            (load::<T>(d, Role::Data, &args.columns, quiet)?, load::<T>(q, Role::Queries, &args.columns, quiet)?)
        }
        (Some(d), None) if args.exclude_self => {
            let data = load::<T>(d, Role::Data, &args.columns, quiet)?;
            (data.clone(), data)
        }
        (Some(_), None) => {
            return Err(CliError("give --queries, or --exclude-self for the kNN graph of --data".into()))
        }
        (None, Some(_)) => return Err(CliError("give --data too".into())),
        (None, None) => {
            if !quiet {
                eprintln!(
                    "note: no --data given: 1,000,000 uniform queries against 20,000 clustered points (k = {})",
                    args.k
                );
            }
            let data = generate::<T>(Distribution::Clustered, 20_000, 1000.0, 7);
            let queries = if args.exclude_self {
                data.clone()
            } else {
                generate::<T>(Distribution::Uniform, 1_000_000, 1000.0, 8)
            };
            (data, queries)
        }
    };
    let engine = args.dev.open()?;
    let opts =
        KnnOptions { k: args.k, max_distance: args.max_distance.map(T::from_f64), exclude_self: args.exclude_self };
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let result = engine.knn(&data, &queries, &opts);
    let elapsed = start.elapsed();
    spinner.finish();
    let result = result?;
    if !quiet && result.k < args.k {
        eprintln!(
            "note: k = {} is more than the {} possible neighbours; using k = {}",
            args.k,
            thousands(result.k),
            result.k
        );
    }
    match &args.out {
        Some(path) => nearkit_io::write_knn(path, &result)?,
        None => {
            let k = result.k;
            println!("{:>8} {:>5} {:>10} {:>14}", "query", "rank", "id", "distance");
            for q in 0..queries.len().min(3) {
                for j in 0..k {
                    let i = q * k + j;
                    let id = if result.ids[i] == NO_ID { -1 } else { result.ids[i] as i64 };
                    println!("{q:>8} {:>5} {id:>10} {:>14.4}", j + 1, result.distances[i].to_f64());
                }
            }
            if queries.len() > 3 && !quiet {
                eprintln!("note: showing the first 3 of {} queries; use --out FILE for all", thousands(queries.len()));
            }
        }
    }
    if !quiet {
        eprintln!(
            "{} nearest of {} queries among {} points in {} on {}",
            result.k,
            thousands(queries.len()),
            thousands(data.len()),
            ms(elapsed),
            engine.describe()
        );
    }
    Ok(())
}
