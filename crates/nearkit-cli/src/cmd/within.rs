//! `nearkit within`: every data point within a radius of each query, or every pair of one set
//! within it.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::generate::{generate, Distribution};
use nearkit::{PointIndex, Points, RadiusOptions, Real, Role};
use nearkit_io::WithinLayout;

use crate::common::{
    check_distance, check_out, load, ms, parse_columns, thousands, CliError, CliResult, DeviceArgs, Precision,
};
use crate::progress::Spinner;
use crate::{note, out};

/// Queries per batch when rows stream to a .csv file.
const STREAM_QUERIES: usize = 1 << 20;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit within                                        built-in example: every pair of 1M points within r
  nearkit within --data scan.ply --queries q.npy -r 0.05 --out rows.npz
  nearkit within --data scan.ply --pairs -r 0.05 --out pairs.csv     every pair of one set, once
  nearkit within --data mesh.off --queries q.csv -r 2 --count-only --out counts.csv

Exact and inclusive: a point is within r when its distance is <= r (squared distances are
compared in the working precision, as every nearkit query does), the same on the CPU and a GPU.
Rows are sorted by (distance, id) unless --unsorted. Output: .csv (query,id,distance; with
--pairs i,j,distance and i < j) or .npz (offsets: N+1 int64, ids or i and j: int32 (int64 past 2^31 − 1),
distances); --no-distances leaves the distances out (faster with --unsorted). --count-only writes query,count (.npz: counts). Rows of --queries to a .csv are
written a million queries at a time, so their size is not bounded by memory; otherwise a
result larger than the memory free now is refused before it is computed in full
(--max-results sets the limit, per million queries when streaming).")]
pub struct WithinArgs {
    /// Data points searched (.csv, .npy, .ply, .off, .obj, .stl, .xyz).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Query points: one row of neighbours each.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// The radius (inclusive).
    #[arg(short, long, allow_negative_numbers = true)]
    pub radius: Option<f64>,
    /// Every pair of --data within the radius, each once (i < j), instead of rows of queries.
    #[arg(long, conflicts_with = "queries")]
    pub pairs: bool,
    /// Only each query's number of neighbours.
    #[arg(long, conflicts_with = "pairs")]
    pub count_only: bool,
    /// Leave rows in the index's order (faster; the same on every device).
    #[arg(long)]
    pub unsorted: bool,
    /// Write ids alone, without distances (the search then keeps no distances).
    #[arg(long, conflicts_with = "count_only")]
    pub no_distances: bool,
    /// Fail when the result would hold more neighbours than this (default: what free memory holds).
    #[arg(long)]
    pub max_results: Option<u64>,
    /// CSV columns holding x,y,z (names or 0-based indices).
    #[arg(long, value_parser = parse_columns)]
    pub columns: Option<[String; 3]>,
    /// Output file: .csv or .npz. Without it, a summary and the first rows are printed.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(args: &WithinArgs) -> CliResult {
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

fn run_t<T: Real>(args: &WithinArgs) -> CliResult {
    if let Some(r) = args.radius {
        check_distance::<T>("--radius", r)?;
    }
    if let Some(out) = &args.out {
        let ext = out.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
        if !matches!(ext.as_deref(), Some("csv" | "npz")) {
            return Err(CliError(format!("{}: unknown extension for radius results: use .csv or .npz", out.display())));
        }
        check_out(out, &[args.data.as_deref(), args.queries.as_deref()])?;
    }
    let quiet = args.dev.quiet;
    let (data, queries, radius): (Points<T>, Option<Points<T>>, f64) = match (&args.data, &args.queries) {
        (Some(d), q) => {
            let Some(r) = args.radius else { return Err(CliError("give the radius: -r R".into())) };
            if q.is_none() && !args.pairs {
                return Err(CliError("give --queries, or --pairs for every pair of --data within the radius".into()));
            }
            let data = load::<T>(d, Role::Data, &args.columns, quiet)?;
            let queries = q.as_ref().map(|q| load::<T>(q, Role::Queries, &args.columns, quiet)).transpose()?;
            (data, queries, r)
        }
        (None, Some(_)) => return Err(CliError("give --data too".into())),
        (None, None) => {
            let r = args.radius.unwrap_or(0.0194);
            if !quiet {
                note!(
                    "note: no --data given: every pair of 1,000,000 uniform points in the unit cube within r = {r} \
                     (about 30 neighbours a point at the default r)"
                );
            }
            (generate::<T>(Distribution::Uniform, 1_000_000, 1.0, 2031), None, r)
        }
    };
    if args.count_only && queries.is_none() {
        return Err(CliError("--count-only needs --queries".into()));
    }
    let engine = args.dev.open()?;
    let per = (4 + 2 * std::mem::size_of::<T>()) as u64;
    // Each neighbour is held about twice on the way out (rows, and the output buffer).
    let max_results = args.max_results.or_else(|| crate::common::available_memory().map(|m| m / (2 * per)));
    let opts = RadiusOptions { sorted: !args.unsorted, distances: !args.no_distances, max_results };
    let r = T::from_f64(radius);
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let index = PointIndex::new(&data, &engine)?;
    // A result over the default limit says where the limit came from and how to change it.
    let limit_note = |e: nearkit::Error| -> CliError {
        match (&e, args.max_results) {
            (nearkit::Error::InvalidArgument(m), None) if m.contains("max_results") => CliError(format!(
                "{e} (the limit is what this machine's free memory holds; --max-results sets it, --count-only counts)"
            )),
            _ => CliError(e.to_string()),
        }
    };
    let csv = args.out.as_ref().is_some_and(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")));
    if let (Some(q), Some(path), true, false) = (&queries, &args.out, csv, args.count_only) {
        // Rows of a million queries at a time straight to the file: a result of any size.
        let mut total = 0usize;
        // A failed query is reported as itself, not as a failed write.
        let mut failed = None;
        let written = nearkit_io::write_atomically(path, |w| {
            writeln!(w, "{}", if opts.distances { "query,id,distance" } else { "query,id" })?;
            let mut io_error = None;
            let run = index.within_each(q, r, &opts, STREAM_QUERIES, |first, rows| {
                total += rows.total();
                for (row, id, d) in rows.pairs() {
                    let row = first + row as usize;
                    let written = match opts.distances {
                        true => writeln!(w, "{row},{id},{d}"),
                        false => writeln!(w, "{row},{id}"),
                    };
                    if let Err(e) = written {
                        io_error = Some(e);
                        return Err(nearkit::Error::InvalidArgument("write failed".into()));
                    }
                }
                Ok(())
            });
            match (run, io_error) {
                (_, Some(e)) => Err(e),
                (Err(e), None) => {
                    failed = Some(e);
                    Err(std::io::Error::other("the query failed"))
                }
                (Ok(()), None) => Ok(()),
            }
        });
        if let Some(e) = failed {
            return Err(limit_note(e));
        }
        written?;
        spinner.finish();
        if !quiet {
            note!(
                "{} neighbours within {radius} of {} queries among {} points in {} on {}",
                thousands(total),
                thousands(q.len()),
                thousands(data.len()),
                ms(start.elapsed()),
                engine.describe()
            );
        }
        return Ok(());
    }
    let result = match &queries {
        Some(q) if args.count_only => Err(index.count_within(q, r)),
        Some(q) => Ok(index.within(q, r, &opts)),
        None => Ok(index.pairs_within(r, &opts)),
    };
    let elapsed = start.elapsed();
    spinner.finish();
    let device = engine.describe();
    let layout = if queries.is_some() { WithinLayout::Rows } else { WithinLayout::Pairs };
    match result {
        Err(counts) => {
            let counts = counts?;
            match &args.out {
                Some(path) => nearkit_io::write_counts(path, &counts)?,
                None => {
                    out!("{:>8} {:>10}", "query", "count");
                    for (q, c) in counts.iter().enumerate().take(5) {
                        out!("{q:>8} {c:>10}");
                    }
                }
            }
            let total: u64 = counts.iter().map(|&c| c as u64).sum();
            if !quiet {
                note!(
                    "{} neighbours within {radius} of {} queries among {} points in {} on {device}",
                    thousands(total as usize),
                    thousands(counts.len()),
                    thousands(data.len()),
                    ms(elapsed)
                );
            }
        }
        Ok(rows) => {
            let rows = rows.map_err(limit_note)?;
            match &args.out {
                Some(path) => nearkit_io::write_within(path, &rows, layout, opts.distances)?,
                None => {
                    let (a, b) = if layout == WithinLayout::Rows { ("query", "id") } else { ("i", "j") };
                    match opts.distances {
                        true => out!("{a:>8} {b:>10} {:>14}", "distance"),
                        false => out!("{a:>8} {b:>10}"),
                    }
                    let mut shown = 0;
                    for (i, j, d) in rows.pairs().take(10) {
                        match opts.distances {
                            true => out!("{i:>8} {j:>10} {:>14.6}", d.to_f64()),
                            false => out!("{i:>8} {j:>10}"),
                        }
                        shown += 1;
                    }
                    if rows.total() > shown && !quiet {
                        note!("note: showing the first {shown} of {}; use --out FILE for all", thousands(rows.total()));
                    }
                }
            }
            if !quiet {
                let what = match &queries {
                    Some(q) => format!("neighbours within {radius} of {} queries", thousands(q.len())),
                    None => format!("pairs within {radius}"),
                };
                note!(
                    "{} {what} among {} points in {} on {device}",
                    thousands(rows.total()),
                    thousands(data.len()),
                    ms(elapsed)
                );
            }
        }
    }
    Ok(())
}
