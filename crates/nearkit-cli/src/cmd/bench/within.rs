//! `nearkit bench within`: radius queries. Self-joins (every pair of one set within r) of
//! uniform and clustered points at the same mean neighbour count, and, with --mesh, every
//! vertex within 1% of the mesh's diagonal of many queries.

use std::time::Duration;

use nearkit::generate::{generate, Distribution};
use nearkit::{Engine, PointIndex, Points, RadiusOptions, Real, Within};

use super::{time, time_on, BenchWithinArgs};
use crate::common::{check_memory, ms, thousands, CliError, CliResult};
use crate::{note, out};

struct Row {
    workload: String,
    query: String,
    total: usize,
    resident: Option<Duration>,
    end_to_end: Duration,
    floor: Option<Floors>,
    check: String,
}

/// A run's copies of a call's bytes: pinned both ways (the transfer floor), and the points
/// up pinned with the rows down by one plain copy into fresh (never touched) host memory,
/// where a call returning new arrays must put them (its pages faulted in by the copy; nearkit
/// faults them in on many threads, so it can beat this).
#[derive(Clone, Copy)]
struct Floors {
    pinned: Duration,
    fresh: Duration,
}

pub fn run<T: Real>(args: &BenchWithinArgs) -> CliResult {
    if args.runs == 0 || args.count == 0 || args.neighbours.is_nan() || args.neighbours <= 0.0 {
        return Err(CliError("need --runs >= 1, --count >= 1 and --neighbours > 0".into()));
    }
    let size = std::mem::size_of::<T>() as u64;
    // Points, and the pairs (two copies on the way out) of the self-join.
    let per_point = 6 * size + (args.neighbours.ceil() as u64) * (4 + size) * 2;
    check_memory(&format!("--count {} with --neighbours {}", args.count, args.neighbours), args.count, per_point)?;
    let workloads: Vec<Distribution> =
        args.workloads.split(',').map(|s| s.trim().parse::<Distribution>()).collect::<Result<_, _>>()?;
    let engine = args.dev.open()?;
    let device = engine.describe();
    let mut rows = Vec::new();
    for dist in workloads {
        note!("generating {dist} x {} ...", thousands(args.count));
        let points = generate::<T>(dist, args.count, 1.0, 2031);
        let r = radius_for::<T>(&engine, &points, args.neighbours)?;
        let name = format!("{dist} {} r={:.4}", short(args.count), r.to_f64());
        // Sorted, unsorted, and unsorted ids alone (scipy's `query_pairs`).
        for (sorted, distances) in [(true, true), (false, true), (false, false)] {
            let opts = RadiusOptions { sorted, distances, ..Default::default() };
            rows.push(self_join(args, &engine, &name, &points, r, &opts)?);
        }
    }
    if let Some(path) = &args.mesh {
        let data = nearkit_io::read_mesh::<T>(path)?.vertices;
        let (lo, hi) = data.bounds();
        let diag = (0..3).map(|d| (hi[d] - lo[d]).to_f64().powi(2)).sum::<f64>().sqrt();
        let r = T::from_f64(diag * 0.01);
        let n = 1usize << args.queries_log2;
        let queries = super::knn::queries_in_box::<T>(n, lo, hi, args.queries_log2);
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let name = format!("{file} {} verts, 2^{} queries", thousands(data.len()), args.queries_log2);
        rows.push(within_rows(args, &engine, &name, &data, &queries, r)?);
    }
    out!();
    out!("nearkit bench within — {device}, median of {} runs, {}", args.runs, T::NAME);
    out!(
        "{:<34} {:<24} {:>12} {:>11} {:>11} {:>16} {:>16} {:>9}",
        "workload",
        "query",
        "neighbours",
        "resident",
        "end to end",
        "floor",
        "plain copy",
        "same cpu"
    );
    let ratio = |t: Duration, f: Duration| format!("{} ({:.1}×)", ms(f), t.as_secs_f64() / f.as_secs_f64());
    for r in &rows {
        out!(
            "{:<34} {:<24} {:>12} {:>11} {:>11} {:>16} {:>16} {:>9}",
            r.workload,
            r.query,
            thousands(r.total),
            r.resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(r.end_to_end),
            r.floor.map(|f| ratio(r.end_to_end, f.pinned)).unwrap_or_else(|| "-".into()),
            r.floor.map(|f| ratio(r.end_to_end, f.fresh)).unwrap_or_else(|| "-".into()),
            r.check
        );
    }
    out!("resident: points and result in GPU memory, index built inside the timing; end to end: host");
    out!("arrays in, host rows out; floor: the same bytes copied up and down, pinned, in this run;");
    out!("plain copy: the points up pinned, the rows down by one plain copy into fresh host memory (whose");
    out!("pages a call returning new arrays must fault in), in this run; (×): end to end over either.");
    Ok(())
}

/// The radius at which points of `points` have about `neighbours` others within it, on
/// average (bisection on the counts of a sample of the points).
fn radius_for<T: Real>(engine: &Engine, points: &Points<T>, neighbours: f64) -> CliResult<T> {
    let step = (points.len() / 20_000).max(1);
    let mut sample = Points::with_capacity(points.len() / step + 1);
    for i in (0..points.len()).step_by(step) {
        sample.push(points.x[i], points.y[i], points.z[i]);
    }
    let index = PointIndex::new(points, engine)?;
    let (lo, hi) = points.bounds();
    let (mut a, mut b) = (0.0f64, (0..3).map(|d| (hi[d] - lo[d]).to_f64()).fold(0.0, f64::max).max(1e-30));
    for _ in 0..40 {
        let mid = 0.5 * (a + b);
        let counts = index.count_within(&sample, T::from_f64(mid))?;
        // Each count includes the point itself.
        let mean = counts.iter().map(|&c| c as f64 - 1.0).sum::<f64>() / counts.len() as f64;
        if mean < neighbours {
            a = mid;
        } else {
            b = mid;
        }
    }
    Ok(T::from_f64(b))
}

fn self_join<T: Real>(
    args: &BenchWithinArgs,
    engine: &Engine,
    name: &str,
    points: &Points<T>,
    r: T,
    opts: &RadiusOptions,
) -> CliResult<Row> {
    let query = || PointIndex::new(points, engine)?.pairs_within(r, opts);
    let got = query()?;
    let e2e = time(args.runs, || query().map(drop))?;
    let mut resident = None;
    let mut floor = None;
    if engine.is_cuda() {
        let dp = engine.upload(points)?;
        let run = || PointIndex::from_device(&dp, engine)?.pairs_within_device(r, opts).map(drop);
        resident = Some(time_on(engine, args.runs, run)?);
        floor = transfer_floor::<T>(engine, points.len(), &got)?;
    }
    let check = check(engine, args.no_check, &got, || PointIndex::new(points, &Engine::cpu())?.pairs_within(r, opts))?;
    let query = match (opts.sorted, opts.distances) {
        (true, _) => "pairs within r",
        (false, true) => "pairs within r, unsorted",
        (false, false) => "pairs within r, ids only",
    };
    Ok(Row { workload: name.into(), query: query.into(), total: got.total(), resident, end_to_end: e2e, floor, check })
}

fn within_rows<T: Real>(
    args: &BenchWithinArgs,
    engine: &Engine,
    name: &str,
    data: &Points<T>,
    queries: &Points<T>,
    r: T,
) -> CliResult<Row> {
    let opts = RadiusOptions::default();
    let query = || PointIndex::new(data, engine)?.within(queries, r, &opts);
    let got = query()?;
    let e2e = time(args.runs, || query().map(drop))?;
    let (mut resident, mut floor) = (None, None);
    if engine.is_cuda() {
        let (dd, dq) = (engine.upload(data)?, engine.upload(queries)?);
        let run = || PointIndex::from_device(&dd, engine)?.within_device(&dq, r, &opts).map(drop);
        resident = Some(time_on(engine, args.runs, run)?);
        floor = transfer_floor::<T>(engine, data.len() + queries.len(), &got)?;
    }
    let check =
        check(engine, args.no_check, &got, || PointIndex::new(data, &Engine::cpu())?.within(queries, r, &opts))?;
    let query = format!("within r = 1% diagonal ({:.4})", r.to_f64());
    Ok(Row { workload: name.into(), query, total: got.total(), resident, end_to_end: e2e, floor, check })
}

/// Copies of `points` up and of the rows down, measured now.
fn transfer_floor<T: Real>(engine: &Engine, points: usize, rows: &Within<T>) -> CliResult<Option<Floors>> {
    let size = std::mem::size_of::<T>();
    let up = points * 3 * size;
    let down = rows.offsets.len() * 8 + rows.total() * 4 + rows.distances.len() * size;
    Ok(match (engine.bus_floor(up)?, engine.bus_floor(down)?) {
        (Some(u), Some(d)) => Some(Floors { pinned: u.pinned_up + d.pinned_down, fresh: u.pinned_up + d.fresh_down }),
        _ => None,
    })
}

/// "yes" when the CPU's rows are the same, an error when not, "-" on the CPU or when skipped.
fn check<T: Real>(
    engine: &Engine,
    skip: bool,
    got: &Within<T>,
    cpu: impl FnOnce() -> nearkit::Result<Within<T>>,
) -> CliResult<String> {
    if !engine.is_cuda() || skip {
        return Ok("-".into());
    }
    let want = cpu()?;
    if &want == got {
        return Ok("yes".into());
    }
    let first = want.ids.iter().zip(&got.ids).position(|(a, b)| a != b);
    Err(CliError(format!(
        "CUDA and CPU rows differ ({} vs {} neighbours; first different id at {first:?})",
        got.total(),
        want.total()
    )))
}

fn short(n: usize) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n % 1000 == 0 {
        format!("{}K", n / 1000)
    } else {
        thousands(n)
    }
}
