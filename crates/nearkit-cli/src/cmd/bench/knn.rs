//! `nearkit bench knn`: exact kNN over a range of query counts (3-D points, or a mesh's
//! triangles as 6-D box vectors), and the shifted-sort approximation with its recall.

use crate::{note, out};
use nearkit::generate::{generate, Distribution};
use nearkit::{
    closest_point_triangle, shifted_sort_knn, shifted_sort_knn_device, Aabb6, DeviceKnn, Engine, Knn, KnnOptions, Mesh,
    PointIndex, Points, Real, ShiftedSortOptions, VectorIndex, Vectors,
};

use super::{time, time_on, BenchKnnArgs};
use crate::common::{check_memory, ms, CliError, CliResult};

/// The shifted-sort paper's 3-D times in ms for 2^12 ... 2^23 queries (approximate kNN,
/// k = 8, RTX 2080 Ti).
const PAPER_3D_MS: [f64; 12] = [10.0, 12.0, 11.0, 20.0, 24.0, 39.0, 64.0, 113.0, 217.0, 387.0, 740.0, 1459.0];

/// `S:W,S:W,...` -> shifted-sort settings.
fn parse_approx(s: &str) -> CliResult<Vec<(usize, usize)>> {
    s.split(',')
        .map(|p| {
            let (a, b) = p.split_once(':').ok_or_else(|| CliError(format!("--approx: '{p}' is not SHIFTS:WINDOW")))?;
            match (a.trim().parse(), b.trim().parse()) {
                (Ok(a), Ok(b)) => Ok((a, b)),
                _ => Err(CliError(format!("--approx: '{p}' is not SHIFTS:WINDOW (two whole numbers)"))),
            }
        })
        .collect()
}

/// recall@k (share of approximate distances within the exact k-th) and the worst and mean
/// rank-wise distance ratio minus one (the ε reached).
fn approx_quality<T: Real>(exact: &Knn<T>, approx: &Knn<T>) -> (f64, f64, f64) {
    let k = exact.k;
    let n = exact.ids.len() / k;
    let (mut hits, mut worst, mut sum, mut cnt) = (0usize, 0f64, 0f64, 0usize);
    for q in 0..n {
        let kth = exact.distances[q * k + k - 1];
        for j in 0..k {
            let (a, e) = (approx.distances[q * k + j], exact.distances[q * k + j]);
            hits += usize::from(a <= kth);
            if e.to_f64() > 0.0 {
                let r = a.to_f64() / e.to_f64() - 1.0;
                worst = worst.max(r);
                sum += r;
                cnt += 1;
            }
        }
    }
    (hits as f64 / (n * k) as f64, worst, sum / cnt.max(1) as f64)
}

pub fn run<T: Real>(args: &BenchKnnArgs) -> CliResult {
    if args.runs == 0 || args.k == 0 || args.min_log2 > args.max_log2 || args.max_log2 > 30 {
        return Err(CliError("need --runs >= 1, -k >= 1 and --min-log2 <= --max-log2 <= 30".into()));
    }
    let approx = args.approx.as_deref().map(parse_approx).transpose()?.unwrap_or_default();
    // The largest query set, and its exact and approximate neighbours.
    let size = std::mem::size_of::<T>() as u64;
    let per_query = 6 * size + 2 * args.k.min(1 << 20) as u64 * (4 + size);
    check_memory(&format!("2^{} queries with k = {}", args.max_log2, args.k), 1 << args.max_log2, per_query)?;
    let mesh = match (&args.data, args.aabb6.is_some() || args.cut_to.is_some()) {
        (Some(p), true) => {
            let m = nearkit_io::read_mesh::<T>(p)?;
            Some(match args.cut_to {
                Some(n) => m.cut_to(n),
                None => m,
            })
        }
        (None, true) => return Err(CliError("--aabb6 and --cut-to need --data MESH".into())),
        _ => None,
    };
    if let Some(e) = args.aabb6 {
        return run_knn_aabb6::<T>(args, mesh.as_ref().unwrap(), e, &approx);
    }
    let data: Points<T> = match (&args.data, mesh) {
        (_, Some(m)) => m.vertices,
        (Some(p), None) => crate::common::load(p, nearkit::Role::Data, &None, args.dev.quiet)?,
        (None, None) => generate(Distribution::Sphere, 19_851, 1.0, 11),
    };
    let engine = args.dev.open()?;
    let device = engine.describe();
    let (lo, hi) = data.bounds();
    let opts = KnnOptions::<T>::k(args.k);
    out!("nearkit bench knn — {device}, {} data points, k = {}, median of {} runs", data.len(), args.k, args.runs);
    out!(
        "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9} {:>12}",
        "queries",
        "method",
        "resident",
        "end to end",
        "recall",
        "eps max",
        "eps mean",
        "paper 3-D"
    );
    for log2 in args.min_log2..=args.max_log2 {
        let n = 1usize << log2;
        let q = queries_in_box::<T>(n, lo, hi, log2);
        let query = || PointIndex::new(&data, &engine)?.knn(&q, &opts);
        let exact = query()?; // warm-up, and the reference for --approx
        let e2e = time(args.runs, || query().map(drop))?;
        let mut resident = None;
        if engine.is_cuda() {
            // Data, queries and results in GPU memory; the index is built inside the timing.
            let (dd, dq) = (engine.upload(&data)?, engine.upload(&q)?);
            let mut out = DeviceKnn::new(&engine, n, args.k)?;
            let run = || PointIndex::from_device(&dd, &engine)?.knn_device(&dq, &opts, &mut out).map(drop);
            resident = Some(time_on(&engine, args.runs, run)?);
        }
        if engine.is_cuda() {
            // End to end into host memory reused from call to call (page-locked once).
            let mut buf = nearkit::KnnBuffer::new();
            let mut into = || PointIndex::new(&data, &engine)?.knn_into(&q, &opts, &mut buf);
            into()?;
            let reused = time(args.runs, &mut into)?;
            let size = std::mem::size_of::<T>();
            let (up, down) = (n * 3 * size, n * args.k.min(data.len()) * (4 + size));
            if let (Some(u), Some(d)) = (engine.bus_floor(up)?, engine.bus_floor(down)?) {
                let floor = u.pinned_up + d.pinned_down;
                note!(
                    "  2^{log2}: transfer floor {} ({} MB up, {} MB down, pinned); a plain download into fresh \
                     memory {}; plain upload {}; nearkit's staged copies {} up, {} down; registered down {}; end to end = {:.1}× the floor; into a reused buffer {} ({:.1}× the floor)",
                    ms(floor),
                    up >> 20,
                    down >> 20,
                    ms(d.fresh_down),
                    ms(u.plain_up),
                    ms(u.staged_up),
                    ms(d.staged_down),
                    ms(d.registered_down),
                    e2e.as_secs_f64() / floor.as_secs_f64(),
                    ms(reused),
                    reused.as_secs_f64() / floor.as_secs_f64()
                );
            }
        }
        let paper = PAPER_3D_MS
            .get((log2 as usize).wrapping_sub(12))
            .map(|m| format!("{m:.0} ms"))
            .unwrap_or_else(|| "-".into());
        out!(
            "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9} {:>12}",
            format!("2^{log2}"),
            "exact",
            resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(e2e),
            "1",
            "0",
            "0",
            paper
        );
        let (vd, vq) = (Vectors::from_points(&data), Vectors::from_points(&q));
        approx_rows(&engine, &vd, &vq, &exact, &approx, args, log2)?;
    }
    Ok(())
}

/// `n` queries uniform in the box (lo, hi).
pub(super) fn queries_in_box<T: Real>(n: usize, lo: [T; 3], hi: [T; 3], log2: u32) -> Points<T> {
    let unit = generate::<T>(Distribution::Uniform, n, 1.0, 100 + log2 as u64);
    let mut q = Points::with_capacity(n);
    for i in 0..n {
        let p = unit.get(i);
        q.push(lo[0] + p[0] * (hi[0] - lo[0]), lo[1] + p[1] * (hi[1] - lo[1]), lo[2] + p[2] * (hi[2] - lo[2]));
    }
    q
}

/// One row per shifted-sort setting: times, and quality against `exact`.
fn approx_rows<T: Real>(
    engine: &Engine,
    data: &Vectors<T>,
    q: &Vectors<T>,
    exact: &Knn<T>,
    approx: &[(usize, usize)],
    args: &BenchKnnArgs,
    log2: u32,
) -> CliResult {
    let n = q.len();
    for &(shifts, window) in approx {
        let o = ShiftedSortOptions { k: args.k, shifts, window };
        let got = shifted_sort_knn(data, q, &o, engine)?;
        let e2e = time(args.runs, || shifted_sort_knn(data, q, &o, engine).map(drop))?;
        let mut resident = None;
        if engine.is_cuda() {
            let (dd, dq) = (VectorIndex::upload(engine, data)?, VectorIndex::upload(engine, q)?);
            let mut out = DeviceKnn::new(engine, n, got.k)?;
            // Resident: the copies are keyed and sorted on the device inside the timing.
            let run = || shifted_sort_knn_device(&dd, &dq, &o, engine, &mut out).map(drop);
            resident = Some(time_on(engine, args.runs, run)?);
        }
        let (recall, worst, mean) = approx_quality(exact, &got);
        out!(
            "{:>10} {:>14} {:>12} {:>12} {:>9.4} {:>9.3} {:>9.4} {:>12}",
            format!("2^{log2}"),
            format!("shifted {shifts}x{window}"),
            resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(e2e),
            recall,
            worst,
            mean,
            ""
        );
    }
    Ok(())
}

/// The 6-D table: the mesh's triangles as box vectors, queries uniform in its box.
fn run_knn_aabb6<T: Real>(args: &BenchKnnArgs, mesh: &Mesh<T>, e: Aabb6, approx: &[(usize, usize)]) -> CliResult {
    let engine = args.dev.open()?;
    let data = e.triangles(mesh);
    let (lo, hi) = mesh.vertices.bounds();
    let opts = KnnOptions::<T>::k(args.k);
    out!(
        "nearkit bench knn 6-D ({e:?}) — {}, {} triangles ({} vertices), k = {}, median of {} runs",
        engine.describe(),
        data.len(),
        mesh.vertices.len(),
        args.k,
        args.runs
    );
    out!(
        "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "queries",
        "method",
        "resident",
        "end to end",
        "recall",
        "eps max",
        "eps mean"
    );
    let mut quality_done = false;
    for log2 in args.min_log2..=args.max_log2 {
        let n = 1usize << log2;
        let p = queries_in_box::<T>(n, lo, hi, log2);
        let q = e.queries(&p);
        let query = || VectorIndex::new(&data, &engine)?.knn(&q, &opts);
        let exact = query()?;
        let e2e = time(args.runs, || query().map(drop))?;
        let mut resident = None;
        if engine.is_cuda() {
            // The index is built beforehand, not timed; queries and results stay on the GPU.
            let index = VectorIndex::new(&data, &engine)?;
            let dq = VectorIndex::upload(&engine, &q)?;
            let mut out = DeviceKnn::new(&engine, n, exact.k)?;
            resident = Some(time_on(&engine, args.runs, || index.knn_device(&dq, &opts, &mut out).map(drop))?);
        }
        out!(
            "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9}",
            format!("2^{log2}"),
            "exact 6-D",
            resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(e2e),
            "1",
            "0",
            "0"
        );
        approx_rows(&engine, &data, &q, &exact, approx, args, log2)?;
        if !quality_done {
            triangle_quality(mesh, &p, &exact)?;
            quality_done = true;
        }
    }
    Ok(())
}

/// How often the exact 6-D nearest is not the truly closest triangle (brute force in f64 over
/// all triangles, on up to 2,000 queries), and the relative excess distance when it is not.
fn triangle_quality<T: Real>(mesh: &Mesh<T>, p: &Points<T>, knn6: &Knn<T>) -> CliResult {
    use rayon::prelude::*;
    let f = |v: [T; 3]| v.map(|x| x.to_f64());
    let n = p.len().min(2000);
    let dist = |q: [f64; 3], t: usize| {
        let [a, b, c] = mesh.corners(t).map(f);
        let c = closest_point_triangle(q, a, b, c).point;
        ((q[0] - c[0]).powi(2) + (q[1] - c[1]).powi(2) + (q[2] - c[2]).powi(2)).sqrt()
    };
    let rows: Vec<(bool, f64)> = (0..n)
        .into_par_iter()
        .map(|i| {
            let q = f(p.get(i));
            let best = (0..mesh.triangles.len()).map(|t| dist(q, t)).fold(f64::INFINITY, f64::min);
            let mine = dist(q, knn6.ids[i * knn6.k] as usize);
            (mine > best, if best > 0.0 { mine / best - 1.0 } else { 0.0 })
        })
        .collect();
    let wrong = rows.iter().filter(|r| r.0).count();
    let worst = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let mean = rows.iter().map(|r| r.1).sum::<f64>() / n as f64;
    out!(
        "  6-D nearest vs the truly closest triangle (f64 brute force, {n} queries): wrong {:.1}%, distance excess mean {:.1}%, worst {:.0}%",
        100.0 * wrong as f64 / n as f64,
        100.0 * mean,
        100.0 * worst
    );
    Ok(())
}
