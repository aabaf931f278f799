//! `nearkit bench pairs`: seed A's workload and a clustered one, timed on one device.

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use nearkit::cpu::CpuBackend;
use nearkit::generate::{generate, Distribution, SEED_A_RANGE};
use nearkit::{Backend, Engine, KnnOptions, PairMode, PairsOptions, Points, Real};

use crate::common::{ms, parse_with, thousands, CliError, CliResult, DeviceArgs, Precision};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Closest pairs on seed A's armies and on clustered armies of the same size.
    #[command(after_help = "\
Examples:
  nearkit bench pairs                       on the best device here
  nearkit bench pairs --device cpu --runs 9
  nearkit bench pairs --device cuda --a-count 100000000 --b-count 100000000 --runs 1 --workloads uniform-int

Prints the median of --runs timed runs after one warm-up. On CUDA two times are given:
'resident' with the points already in GPU memory (tree build, search and top-k all on
the device, the k rows copied back) and 'end to end' from host arrays (uploads included).
Device start-up (context creation, kernel compile or cache load) is reported apart.
Each GPU result is checked against the CPU backend's, which must be bitwise identical.")]
    Pairs(BenchPairsArgs),
    /// Exact kNN over a range of query counts (seed C's table), k = 8 by default.
    #[command(after_help = "\
Examples:
  nearkit bench knn --device cuda
  nearkit bench knn --data ../shared/data/bunny00.off --max-log2 20 --device cpu

Data: --data FILE (mesh vertices or points), else 19,851 points on a sphere (the paper's horse
had 19,851 vertices). Queries: uniform in the data's bounding box, 2^min-log2 ... 2^max-log2.
On CUDA, 'resident' has data, queries and the N×k results in GPU memory; 'end to end' starts
from host arrays and ends with the results in host memory. Seed C's 3-D shifted-sort times
(approximate, RTX 2080 Ti) are shown beside them for reference.")]
    Knn(BenchKnnArgs),
    /// Closest point on a mesh for many queries (uniform in 1.5× the mesh's box).
    #[command(after_help = "\
Examples:
  nearkit bench closest-point --device cuda --mesh ../shared/data/bunny00.off
  nearkit bench closest-point --mesh ../shared/data/bunny00.off --cut-to 19851 --queries-log2 23

Times building the mesh's index and answering every query (median of --runs after a warm-up).
On CUDA, 'resident' has the queries and results in GPU memory and the index built on the host
beforehand (not timed); 'end to end' starts from host arrays. The GPU answer is checked against
the CPU's, bit for bit, on the first 2^16 queries. Last, seed C's 6-D box approximation answers
the same queries: how often its triangle is farther than the exact one, and by how much.")]
    ClosestPoint(BenchClosestPointArgs),
}

#[derive(Args, Debug)]
pub struct BenchClosestPointArgs {
    /// The mesh (.ply, .off, .obj, .stl); else a 40,000-triangle sphere.
    #[arg(long)]
    pub mesh: Option<std::path::PathBuf>,
    /// Cut the mesh to this many vertices first (as `bench knn --cut-to`).
    #[arg(long)]
    pub cut_to: Option<usize>,
    /// 2^N queries; without it, 1,000,000.
    #[arg(long)]
    pub queries_log2: Option<u32>,
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

#[derive(Args, Debug)]
pub struct BenchKnnArgs {
    /// Data points (.off/.ply vertices, .npy, .csv, .xyz).
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    #[arg(short, long, default_value_t = 8)]
    pub k: usize,
    #[arg(long, default_value_t = 12)]
    pub min_log2: u32,
    #[arg(long, default_value_t = 23)]
    pub max_log2: u32,
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also run the shifted-sort approximation for each SHIFTS:WINDOW given (e.g. 1:8,4:8,8:16),
    /// with its recall@k and worst distance ratio against the exact answer of the same run.
    #[arg(long)]
    pub approx: Option<String>,
    /// 6-D: search the --data mesh's triangles as box vectors (min-max or min-extent); also
    /// reports how often the 6-D nearest is not the truly closest triangle.
    #[arg(long, value_parser = parse_with::<nearkit::Aabb6>)]
    pub aabb6: Option<nearkit::Aabb6>,
    /// Cut the --data mesh to this many vertices first (19851: the paper's horse).
    #[arg(long)]
    pub cut_to: Option<usize>,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

#[derive(Args, Debug)]
pub struct BenchPairsArgs {
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    #[arg(long, default_value_t = 1_000_000)]
    pub a_count: usize,
    #[arg(long, default_value_t = 400_000)]
    pub b_count: usize,
    #[arg(short, long, default_value_t = 100)]
    pub k: usize,
    /// nearest-per-a (seed A's query) or all-pairs.
    #[arg(long, default_value = "nearest-per-a", value_parser = parse_with::<PairMode>)]
    pub mode: PairMode,
    /// Comma-separated distributions to run (see `nearkit gen points --help`).
    #[arg(long, default_value = "uniform-int,clustered")]
    pub workloads: String,
    /// Also time every A's nearest B (the all-nearest join), the work kd-tree peers do.
    #[arg(long)]
    pub nearest: bool,
    /// Skip the comparison with the CPU backend.
    #[arg(long)]
    pub no_check: bool,
    /// CUDA: time only end to end (no copy of the inputs kept in GPU memory, e.g. to measure
    /// the memory an end-to-end query needs).
    #[arg(long)]
    pub skip_resident: bool,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(cmd: &BenchCommand) -> CliResult {
    let args = match cmd {
        BenchCommand::Pairs(args) => args,
        BenchCommand::Knn(args) => {
            return match args.dev.precision {
                Precision::F32 => run_knn::<f32>(args),
                Precision::F64 => run_knn::<f64>(args),
            }
        }
        BenchCommand::ClosestPoint(args) => {
            return match args.dev.precision {
                Precision::F32 => run_closest_point::<f32>(args),
                Precision::F64 => run_closest_point::<f64>(args),
            }
        }
    };
    if args.runs == 0 || args.k == 0 {
        return Err(CliError("--runs and -k must be at least 1".into()));
    }
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

struct Row {
    workload: String,
    what: String,
    resident: Option<Duration>,
    end_to_end: Duration,
    check: String,
}

fn run_t<T: Real>(args: &BenchPairsArgs) -> CliResult {
    let workloads: Vec<Distribution> =
        args.workloads.split(',').map(|s| s.trim().parse::<Distribution>()).collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let engine = args.dev.open()?;
    let startup = t0.elapsed();
    let device = engine.describe();
    eprintln!("device: {device}; start-up {} (not counted below)", ms(startup));
    let opts = PairsOptions::<T> { k: args.k, mode: args.mode, max_distance: None };
    let mut rows = Vec::new();
    for dist in workloads {
        let name = format!("{dist} {}x{}", short(args.a_count), short(args.b_count));
        eprintln!("generating {name} ...");
        let a = generate::<T>(dist, args.a_count, SEED_A_RANGE, 2026);
        let b = generate::<T>(dist, args.b_count, SEED_A_RANGE, 2027);

        if let Engine::Cuda(cuda) = &engine {
            cuda.memory_high_water(true)?;
        }
        let reference = engine.closest_pairs(&a, &b, &opts)?; // warm-up
        if let Engine::Cuda(cuda) = &engine {
            // One end-to-end query from host arrays: its peak of live GPU allocations.
            let (used, reserved) = cuda.memory_high_water(false)?;
            let input = 3 * (a.len() + b.len()) * std::mem::size_of::<T>();
            eprintln!(
                "  GPU memory, one end-to-end query: peak live {:.1} MiB ({:.2}x the {:.1} MiB input), pool reserved {:.1} MiB",
                used as f64 / 1048576.0,
                used as f64 / input as f64,
                input as f64 / 1048576.0,
                reserved as f64 / 1048576.0
            );
        }
        let e2e = time(args.runs, || engine.closest_pairs(&a, &b, &opts).map(drop))?;
        let mut resident = None;
        if let (Engine::Cuda(cuda), false) = (&engine, args.skip_resident) {
            let (da, db) = (cuda.upload(&a)?, cuda.upload(&b)?);
            cuda.synchronize()?;
            let again = cuda.closest_pairs_resident(&da, &db, &opts)?;
            if again != reference {
                return Err(CliError("resident and end-to-end CUDA results differ".into()));
            }
            resident = Some(time(args.runs, || cuda.closest_pairs_resident(&da, &db, &opts).map(drop))?);
        }
        let check = check_against_cpu(&engine, &a, &b, &opts, &reference, args.no_check)?;
        rows.push(Row {
            workload: name.clone(),
            what: format!("top-{} {}", args.k, args.mode),
            resident,
            end_to_end: e2e,
            check,
        });
        if args.nearest {
            let all = time(args.runs, || engine.nearest(&a, &b, None).map(drop))?;
            rows.push(Row {
                workload: name.clone(),
                what: "nearest of every A".into(),
                resident: None,
                end_to_end: all,
                check: "-".into(),
            });
        }
        if !args.dev.quiet {
            let p = &reference[0];
            eprintln!("  closest pair: a {} b {} distance {}", p.a, p.b, p.distance);
        }
    }

    println!();
    println!(
        "nearkit bench pairs — {device}, k = {}, median of {} runs, {}",
        args.k,
        args.runs,
        if T::NAME == "f32" { "f32" } else { "f64" }
    );
    println!(
        "{:<28} {:<22} {:>12} {:>12} {:>10} {:>11}",
        "workload", "query", "resident", "end to end", "seed A", "same as cpu"
    );
    for r in &rows {
        let best = r.resident.unwrap_or(r.end_to_end).as_secs_f64() * 1e3;
        println!(
            "{:<28} {:<22} {:>12} {:>12} {:>9.0}x {:>11}",
            r.workload,
            r.what,
            r.resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(r.end_to_end),
            172.0 / best,
            r.check
        );
    }
    println!("seed A: 172 ms (ver 2 grid, heuristic, RTX 2080 Ti); 'seed A' column = 172 ms / our best time");
    let tops: Vec<&Row> = rows.iter().filter(|r| r.what.starts_with("top")).collect();
    if tops.len() >= 2 {
        let t = |r: &Row| r.resident.unwrap_or(r.end_to_end).as_secs_f64();
        println!("{} / {} time: {:.2}x", tops[1].workload, tops[0].workload, t(tops[1]) / t(tops[0]));
    }
    Ok(())
}

fn time(runs: usize, mut f: impl FnMut() -> nearkit::Result<()>) -> CliResult<Duration> {
    let mut v = Vec::with_capacity(runs);
    for _ in 0..runs {
        let s = Instant::now();
        f()?;
        v.push(s.elapsed());
    }
    Ok(median(v))
}

fn check_against_cpu<T: Real>(
    engine: &Engine,
    a: &Points<T>,
    b: &Points<T>,
    opts: &PairsOptions<T>,
    got: &[nearkit::Pair<T>],
    skip: bool,
) -> CliResult<String> {
    if matches!(engine, Engine::Cpu(_)) || skip {
        return Ok("-".into());
    }
    let cpu = CpuBackend.closest_pairs(a, b, opts)?;
    if cpu == got {
        Ok("yes".into())
    } else {
        let first = cpu.iter().zip(got).position(|(c, g)| c != g).unwrap_or(cpu.len().min(got.len()));
        Err(CliError(format!(
            "CUDA and CPU results differ first at rank {} (cpu {:?}, cuda {:?})",
            first + 1,
            cpu.get(first),
            got.get(first)
        )))
    }
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

/// Seed C's shifted-sort 3-D times in ms for 2^12 ... 2^23 queries (approximate kNN, k = 8).
const SEED_C_3D_MS: [f64; 12] = [10.0, 12.0, 11.0, 20.0, 24.0, 39.0, 64.0, 113.0, 217.0, 387.0, 740.0, 1459.0];

fn run_closest_point<T: Real>(args: &BenchClosestPointArgs) -> CliResult {
    use nearkit::Backend;
    if args.runs == 0 || args.queries_log2.is_some_and(|l| l > 30) {
        return Err(CliError("need --runs >= 1 and --queries-log2 <= 30".into()));
    }
    let mesh = match &args.mesh {
        Some(p) => nearkit_io::read_mesh::<T>(p)?,
        None => nearkit::Mesh::uv_sphere(100, 200, 1.0, [0.0; 3]),
    };
    let mesh = match args.cut_to {
        Some(n) => mesh.cut_to(n),
        None => mesh,
    };
    let n = args.queries_log2.map_or(1_000_000, |l| 1usize << l);
    let q = crate::cmd::closest_point::queries_around(&mesh, n, 17);
    let engine = args.dev.open()?;
    let opts = nearkit::ClosestPointOptions::<T>::default();
    println!(
        "nearkit bench closest-point — {}, {} triangles, {} queries in 1.5× the box, median of {} runs",
        engine.describe(),
        mesh.triangles.len(),
        thousands(n),
        args.runs
    );
    let got = engine.closest_points(&mesh, &q, &opts)?; // warm-up
    let e2e = time(args.runs, || engine.closest_points(&mesh, &q, &opts).map(drop))?;
    let mut resident = None;
    if let Engine::Cuda(cuda) = &engine {
        let bvh = cuda.triangle_bvh(&mesh)?;
        let dq = cuda.upload(&q)?;
        let (lo, hi) = mesh.vertices.bounds();
        let slack = nearkit::closest_point::rounding_slack(lo, hi, &q);
        let mut out = nearkit::cuda::DeviceClosestPoints::alloc(cuda, n)?;
        let mut run = || -> nearkit::Result<()> {
            cuda.closest_points_resident(&bvh, &dq, &opts, slack, &mut out)?;
            cuda.synchronize()
        };
        run()?;
        resident = Some(time(args.runs, &mut run)?);
        // The CPU's answer on a prefix, bit for bit.
        let m = n.min(1 << 16);
        let sub = Points { x: q.x[..m].to_vec(), y: q.y[..m].to_vec(), z: q.z[..m].to_vec() };
        let cpu = nearkit::cpu::CpuBackend.closest_points(&mesh, &sub, &opts)?;
        let bits = |v: &[T]| v.iter().map(|x| x.ordered_bits()).collect::<Vec<_>>();
        let same = cpu.triangle[..] == got.triangle[..m]
            && bits(&cpu.distance) == bits(&got.distance[..m])
            && bits(&cpu.point.x) == bits(&got.point.x[..m])
            && bits(&cpu.bary[0]) == bits(&got.bary[0][..m]);
        println!(
            "GPU answer {} the CPU's on the first {} queries",
            if same { "equals" } else { "DIFFERS FROM" },
            thousands(m)
        );
        if !same {
            return Err(CliError("the GPU answer differs from the CPU's".into()));
        }
    }
    println!("{:>12} {:>12}", "resident", "end to end");
    println!("{:>12} {:>12}", resident.map(ms).unwrap_or_else(|| "-".into()), ms(e2e));
    // Seed C's approximation of the same question: the nearest 6-D box vector (exact search).
    for e in [nearkit::Aabb6::MinMax, nearkit::Aabb6::MinExtent] {
        let start = Instant::now();
        let k1 = KnnOptions::<T> { k: 1, ..Default::default() };
        let nn = engine.knn_vectors(&e.triangles(&mesh), &e.queries(&q), &k1)?;
        let t6 = start.elapsed();
        let f = |v: [T; 3]| v.map(|x| x.to_f64());
        let (mut wrong, mut excess_sum, mut excess_max) = (0usize, 0.0f64, 0.0f64);
        for i in 0..n {
            if nn.ids[i] == got.triangle[i] {
                continue;
            }
            let qp = f(q.get(i));
            let [a, b, c] = mesh.corners(nn.ids[i] as usize).map(f);
            let p = nearkit::closest_point_triangle::closest_point_triangle(qp, a, b, c).point;
            let d6 = ((qp[0] - p[0]).powi(2) + (qp[1] - p[1]).powi(2) + (qp[2] - p[2]).powi(2)).sqrt();
            let exact = got.distance[i].to_f64();
            if d6 > exact * (1.0 + 1e-6) {
                wrong += 1;
                let x = if exact > 0.0 { d6 / exact - 1.0 } else { 0.0 };
                excess_sum += x;
                excess_max = excess_max.max(x);
            }
        }
        println!(
            "seed C's 6-D {e:?} boxes (exact 6-D search, {} end to end): a farther triangle for {:.1}% of queries, \
             distance excess mean {:.1}%, worst {:.0}%",
            ms(t6),
            100.0 * wrong as f64 / n as f64,
            100.0 * excess_sum / n as f64,
            100.0 * excess_max
        );
    }
    Ok(())
}

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
fn approx_quality<T: Real>(exact: &nearkit::Knn<T>, approx: &nearkit::Knn<T>) -> (f64, f64, f64) {
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

fn run_knn<T: Real>(args: &BenchKnnArgs) -> CliResult {
    if args.runs == 0 || args.k == 0 || args.min_log2 > args.max_log2 || args.max_log2 > 30 {
        return Err(CliError("need --runs >= 1, -k >= 1 and --min-log2 <= --max-log2 <= 30".into()));
    }
    let approx = args.approx.as_deref().map(parse_approx).transpose()?.unwrap_or_default();
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
    let opts = KnnOptions::<T> { k: args.k, ..Default::default() };
    println!("nearkit bench knn — {device}, {} data points, k = {}, median of {} runs", data.len(), args.k, args.runs);
    println!(
        "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9} {:>12}",
        "queries", "method", "resident", "end to end", "recall", "eps max", "eps mean", "seed C 3-D"
    );
    for log2 in args.min_log2..=args.max_log2 {
        let n = 1usize << log2;
        let q = queries_in_box::<T>(n, lo, hi, log2);
        let exact = engine.knn(&data, &q, &opts)?; // warm-up, and the reference for --approx
        let e2e = time(args.runs, || engine.knn(&data, &q, &opts).map(drop))?;
        let mut resident = None;
        if let Engine::Cuda(cuda) = &engine {
            let (dd, dq) = (cuda.upload(&data)?, cuda.upload(&q)?);
            let mut ids = cuda.alloc_zeroed::<u32>(n * args.k)?;
            let mut dist = cuda.alloc_zeroed::<T>(n * args.k)?;
            let mut run = || -> nearkit::Result<()> {
                cuda.knn_resident(&dd, &dq, &opts, &mut ids, &mut dist)?;
                cuda.synchronize()
            };
            run()?;
            resident = Some(time(args.runs, &mut run)?);
        }
        let seed = SEED_C_3D_MS
            .get((log2 as usize).wrapping_sub(12))
            .map(|m| format!("{m:.0} ms"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9} {:>12}",
            format!("2^{log2}"),
            "exact",
            resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(e2e),
            "1",
            "0",
            "0",
            seed
        );
        let (vd, vq) = (nearkit::Vectors::from_points(&data), nearkit::Vectors::from_points(&q));
        approx_rows(&engine, &vd, &vq, &exact, &approx, args, log2)?;
    }
    Ok(())
}

/// `n` queries uniform in the box (lo, hi).
fn queries_in_box<T: Real>(n: usize, lo: [T; 3], hi: [T; 3], log2: u32) -> Points<T> {
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
    data: &nearkit::Vectors<T>,
    q: &nearkit::Vectors<T>,
    exact: &nearkit::Knn<T>,
    approx: &[(usize, usize)],
    args: &BenchKnnArgs,
    log2: u32,
) -> CliResult {
    let n = q.len();
    for &(shifts, window) in approx {
        let o = nearkit::ShiftedSortOptions { k: args.k, shifts, window };
        let got = engine.approx_knn(data, q, &o)?;
        let e2e = time(args.runs, || engine.approx_knn(data, q, &o).map(drop))?;
        let mut resident = None;
        if let Engine::Cuda(cuda) = engine {
            let (dd, dq) = (cuda.upload_vectors(data)?, cuda.upload_vectors(q)?);
            let frame = nearkit::shifted_sort::ShiftFrame::new(data, q);
            let mut ids = cuda.alloc_zeroed::<u32>(n * got.k)?;
            let mut dist = cuda.alloc_zeroed::<T>(n * got.k)?;
            // Resident: the copies are keyed and sorted on the device inside the timing.
            let mut run = || -> nearkit::Result<()> {
                let copies = cuda.shifted_copies(&dd, frame, shifts)?;
                cuda.approx_knn_resident(&copies, &dq, &o, &mut ids, &mut dist)?;
                cuda.synchronize()
            };
            run()?;
            resident = Some(time(args.runs, &mut run)?);
        }
        let (recall, worst, mean) = approx_quality(exact, &got);
        println!(
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

/// Seed C's 6-D table: the mesh's triangles as box vectors, queries uniform in its box.
fn run_knn_aabb6<T: Real>(
    args: &BenchKnnArgs,
    mesh: &nearkit::Mesh<T>,
    e: nearkit::Aabb6,
    approx: &[(usize, usize)],
) -> CliResult {
    let engine = args.dev.open()?;
    let data = e.triangles(mesh);
    let (lo, hi) = mesh.vertices.bounds();
    let opts = KnnOptions::<T> { k: args.k, ..Default::default() };
    println!(
        "nearkit bench knn 6-D ({e:?}) — {}, {} triangles ({} vertices), k = {}, median of {} runs",
        engine.describe(),
        data.len(),
        mesh.vertices.len(),
        args.k,
        args.runs
    );
    println!(
        "{:>10} {:>14} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "queries", "method", "resident", "end to end", "recall", "eps max", "eps mean"
    );
    let mut quality_done = false;
    for log2 in args.min_log2..=args.max_log2 {
        let n = 1usize << log2;
        let p = queries_in_box::<T>(n, lo, hi, log2);
        let q = e.queries(&p);
        let exact = engine.knn_vectors(&data, &q, &opts)?;
        let e2e = time(args.runs, || engine.knn_vectors(&data, &q, &opts).map(drop))?;
        let mut resident = None;
        if let Engine::Cuda(cuda) = &engine {
            let tree = cuda.vector_tree(&data)?;
            let dq = cuda.upload_vectors(&q)?;
            let mut ids = cuda.alloc_zeroed::<u32>(n * exact.k)?;
            let mut dist = cuda.alloc_zeroed::<T>(n * exact.k)?;
            let mut run = || -> nearkit::Result<()> {
                cuda.knn_vectors_resident(&tree, &dq, &opts, &mut ids, &mut dist)?;
                cuda.synchronize()
            };
            run()?;
            resident = Some(time(args.runs, &mut run)?);
        }
        println!(
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
            triangle_quality(mesh, &p, &exact);
            quality_done = true;
        }
    }
    Ok(())
}

/// How often the exact 6-D nearest is not the truly closest triangle (brute force in f64 over
/// all triangles, on up to 2,000 queries), and the relative excess distance when it is not.
fn triangle_quality<T: Real>(mesh: &nearkit::Mesh<T>, p: &Points<T>, knn6: &nearkit::Knn<T>) {
    use rayon::prelude::*;
    let f = |v: [T; 3]| v.map(|x| x.to_f64());
    let n = p.len().min(2000);
    let dist = |q: [f64; 3], t: usize| {
        let [a, b, c] = mesh.corners(t).map(f);
        let c = nearkit::closest_point_triangle::closest_point_triangle(q, a, b, c).point;
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
    println!(
        "  6-D nearest vs the truly closest triangle (f64 brute force, {n} queries): wrong {:.1}%, distance excess mean {:.1}%, worst {:.0}%",
        100.0 * wrong as f64 / n as f64,
        100.0 * mean,
        100.0 * worst
    );
}
