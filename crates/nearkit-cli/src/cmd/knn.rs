//! `nearkit knn`: each query's k nearest data points: exact, or approximate by shifted sorting;
//! 3-D points, vectors of up to 8 dimensions (.npy N×d), or a mesh's triangles as 6-D boxes.

use crate::{note, out};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::generate::{generate, Distribution};
use nearkit::{
    shifted_sort_knn, Aabb6, KnnOptions, PointIndex, Real, Role, ShiftedSortOptions, VectorIndex, Vectors, NO_ID,
};

use crate::common::{
    check_max_distance, check_out, load, ms, parse_columns, thousands, CliError, CliResult, DeviceArgs, Precision,
};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit knn                                            built-in example: 1M queries, 20K clustered points, k = 8
  nearkit knn --data mesh.off --queries q.npy -k 8 --out nn.npz
  nearkit knn --data scan.ply --exclude-self -k 16 --out graph.csv     the kNN graph of one set
  nearkit knn --data v6.npy --queries q6.npy -k 8                      6-D vectors (any N×d, d <= 8)
  nearkit knn --data mesh.off --queries q.npy --approx --shifts 4 --window 8
  nearkit knn --data mesh.obj --queries q.npy --triangles-as-aabb6 min-max --out tri.npz

Results are exact: ascending by distance, ties to the smaller id. Output: .csv
(query,rank,id,distance) or .npz (ids: N×k int32, int64 past 2^31 − 1; distances: N×k); neighbours beyond
--max-distance are id -1 and distance inf. Mesh files (.off, .ply, .obj, .stl) give their
vertices. --approx is the shifted sort: much faster, not exact; `nearkit bench knn
--approx` measures its recall. --triangles-as-aabb6 searches the mesh's triangles as 6-D box
vectors — ids are triangle ids; the distance is the 6-D one, not the point-triangle
distance.")]
pub struct KnnArgs {
    /// Data points searched (.csv, .npy, .ply, .off, .obj, .stl, .xyz); .npy may be N×d, d <= 8.
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
    /// Approximate search by shifted sorting instead of the exact one.
    #[arg(long)]
    pub approx: bool,
    /// --approx: shifted copies of the data (more: better recall, slower).
    #[arg(long, default_value_t = 4, requires = "approx")]
    pub shifts: usize,
    /// --approx: candidates on each side of a query's place in each copy.
    #[arg(long, default_value_t = 8, requires = "approx")]
    pub window: usize,
    /// Search the --data mesh's triangles as 6-D vectors of their boxes: min-max or min-extent.
    #[arg(long, value_parser = crate::common::parse_with::<Aabb6>)]
    pub triangles_as_aabb6: Option<Aabb6>,
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
    check_max_distance::<T>(args.max_distance)?;
    if let Some(out) = &args.out {
        if !matches!(
            out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(),
            Some("csv" | "npz")
        ) {
            return Err(CliError(format!("{}: unknown extension for neighbours: use .csv or .npz", out.display())));
        }
        check_out(out, &[args.data.as_deref(), args.queries.as_deref()])?;
    }
    let quiet = args.dev.quiet;
    if args.approx || args.triangles_as_aabb6.is_some() || is_vector_file(&args.data) || is_vector_file(&args.queries) {
        return run_vectors::<T>(args);
    }
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
                note!(
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
    let opts = KnnOptions {
        k: args.k,
        max_distance: args.max_distance.map(T::from_f64),
        exclude_self: args.exclude_self,
        ..KnnOptions::default()
    };
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let result = PointIndex::new(&data, &engine).and_then(|index| index.knn(&queries, &opts));
    let elapsed = start.elapsed();
    spinner.finish();
    report::<T>(args, &result?, queries.len(), data.len(), elapsed, &engine.describe())
}

/// An .npy file of other than 3 columns holds vectors (read from its header only).
fn is_vector_file(p: &Option<std::path::PathBuf>) -> bool {
    let Some(p) = p else { return false };
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) && nearkit_io::npy_columns(p).is_some_and(|d| d != 3)
}

/// Vectors of any dimension, the 6-D triangle boxes, or the shifted-sort approximation.
fn run_vectors<T: Real>(args: &KnnArgs) -> CliResult {
    let quiet = args.dev.quiet;
    let read = |p: &std::path::Path| -> CliResult<Vectors<T>> {
        Ok(nearkit_io::read_vectors::<T>(p, &nearkit_io::ReadOptions { columns: args.columns.clone() })?)
    };
    let (data, queries) = match (&args.data, &args.queries, args.triangles_as_aabb6) {
        (Some(d), q, Some(e)) => {
            let mesh = nearkit_io::read_mesh::<T>(d)?;
            let q = match q {
                Some(q) => load::<T>(q, Role::Queries, &args.columns, quiet)?,
                None => return Err(CliError("--triangles-as-aabb6 needs --queries (3-D points)".into())),
            };
            (e.triangles(&mesh), e.queries(&q))
        }
        (None, _, Some(_)) => {
            return Err(CliError("--triangles-as-aabb6 needs --data MESH (.off, .ply, .obj, .stl)".into()))
        }
        (Some(d), Some(q), None) => (read(d)?, read(q)?),
        (Some(d), None, None) if args.exclude_self => {
            let v = read(d)?;
            (v.clone(), v)
        }
        (Some(_), None, None) => {
            return Err(CliError("give --queries, or --exclude-self for the kNN graph of --data".into()))
        }
        (None, Some(_), None) => return Err(CliError("give --data too".into())),
        (None, None, None) => {
            if !quiet {
                note!(
                    "note: no --data given: 1,000,000 uniform queries against 20,000 clustered points (k = {})",
                    args.k
                );
            }
            let d = Vectors::from_points(&generate::<T>(Distribution::Clustered, 20_000, 1000.0, 7));
            let q = Vectors::from_points(&generate::<T>(Distribution::Uniform, 1_000_000, 1000.0, 8));
            (d, q)
        }
    };
    let engine = args.dev.open()?;
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let result = if args.approx {
        if args.exclude_self || args.max_distance.is_some() {
            return Err(CliError("--approx does not take --exclude-self or --max-distance".into()));
        }
        let opts = ShiftedSortOptions { k: args.k, shifts: args.shifts, window: args.window };
        shifted_sort_knn(&data, &queries, &opts, &engine)
    } else {
        let opts = KnnOptions {
            k: args.k,
            max_distance: args.max_distance.map(T::from_f64),
            exclude_self: args.exclude_self,
            ..KnnOptions::default()
        };
        VectorIndex::new(&data, &engine).and_then(|index| index.knn(&queries, &opts))
    };
    let elapsed = start.elapsed();
    spinner.finish();
    report::<T>(args, &result?, queries.len(), data.len(), elapsed, &engine.describe())
}

fn report<T: Real>(
    args: &KnnArgs,
    result: &nearkit::Knn<T>,
    n_queries: usize,
    n_data: usize,
    elapsed: std::time::Duration,
    device: &str,
) -> CliResult {
    let quiet = args.dev.quiet;
    if !quiet && result.k < args.k {
        note!(
            "note: k = {} is more than the {} possible neighbours; using k = {}",
            args.k,
            thousands(result.k),
            result.k
        );
    }
    match &args.out {
        Some(path) => nearkit_io::write_knn(path, result)?,
        None => {
            let k = result.k;
            out!("{:>8} {:>5} {:>10} {:>14}", "query", "rank", "id", "distance");
            for q in 0..n_queries.min(3) {
                for j in 0..k {
                    let i = q * k + j;
                    let id = if result.ids[i] == NO_ID { -1 } else { result.ids[i] as i64 };
                    out!("{q:>8} {:>5} {id:>10} {:>14.4}", j + 1, result.distances[i].to_f64());
                }
            }
            if n_queries > 3 && !quiet {
                note!("note: showing the first 3 of {} queries; use --out FILE for all", thousands(n_queries));
            }
        }
    }
    if !quiet {
        note!(
            "{} {} of {} queries among {} points in {} on {device}",
            result.k,
            if args.approx { "approximate nearest (shifted sort)" } else { "nearest" },
            thousands(n_queries),
            thousands(n_data),
            ms(elapsed),
        );
    }
    Ok(())
}
