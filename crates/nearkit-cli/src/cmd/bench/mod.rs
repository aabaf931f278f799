//! `nearkit bench`: the project's workloads timed on one device, resident (data in GPU
//! memory) and end to end, each GPU answer checked against the CPU's. One module a workload:
//! `pairs`, `knn` (3-D, 6-D triangle boxes and the shifted sort), `closest_point`, `within`.

mod closest_point;
mod knn;
mod pairs;
mod within;

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use nearkit::{Engine, PairMode};

use crate::common::{parse_with, CliError, CliResult, DeviceArgs, Precision};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Closest pairs of two armies (1,000,000 vs 400,000 integer points) and of clustered
    /// armies of the same size.
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
    /// Exact kNN over a range of query counts, k = 8 by default (and the shifted sort).
    #[command(after_help = "\
Examples:
  nearkit bench knn --device cuda
  nearkit bench knn --data ../shared/data/bunny00.off --max-log2 20 --device cpu

Data: --data FILE (mesh vertices or points), else 19,851 points on a sphere (the paper's horse
had 19,851 vertices). Queries: uniform in the data's bounding box, 2^min-log2 ... 2^max-log2.
On CUDA, 'resident' has data, queries and the N×k results in GPU memory; 'end to end' starts
from host arrays and ends with the results in host memory. The shifted-sort paper's 3-D times
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
the CPU's, bit for bit, on the first 2^16 queries. Last, the 6-D box approximation (each
triangle as a box vector) answers the same queries: how often its triangle is farther than the
exact one, and by how much.")]
    ClosestPoint(BenchClosestPointArgs),
    /// Radius queries: every pair of 1,000,000 points within r (uniform and clustered, r set
    /// for 30 neighbours a point on average), and with --mesh every vertex within 1% of the
    /// mesh's diagonal of 2^20 queries.
    #[command(after_help = "\
Examples:
  nearkit bench within --device cuda --mesh ../shared/data/bunny00.off
  nearkit bench within --device cpu --count 100000 --neighbours 10 --workloads uniform

Points are generated in the unit cube; r is found by bisection so that a point has
--neighbours others within it on average. Each self-join is timed with rows sorted by
(distance, id), unsorted, and unsorted with ids alone (no distances: scipy's query_pairs).
On CUDA, 'resident' has the points and the rows in GPU memory
(the index is built inside the timing), 'end to end' starts from host arrays and ends with
the rows in host memory, beside the transfer floor of the same bytes measured in the run;
each GPU result is checked against the CPU's, bit for bit.")]
    Within(BenchWithinArgs),
}

#[derive(Args, Debug)]
pub struct BenchWithinArgs {
    /// Points of each self-join.
    #[arg(long, default_value_t = 1_000_000)]
    pub count: usize,
    /// Mean neighbours a point (r is chosen for it).
    #[arg(long, default_value_t = 30.0)]
    pub neighbours: f64,
    /// Comma-separated distributions of the self-joins (see `nearkit gen points --help`).
    #[arg(long, default_value = "uniform,clustered")]
    pub workloads: String,
    /// A mesh whose vertices are searched from uniform queries in its box (.ply, .off, .obj, .stl).
    #[arg(long)]
    pub mesh: Option<std::path::PathBuf>,
    /// 2^N queries for --mesh.
    #[arg(long, default_value_t = 20)]
    pub queries_log2: u32,
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Skip the comparison with the CPU backend.
    #[arg(long)]
    pub no_check: bool,
    #[command(flatten)]
    pub dev: DeviceArgs,
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
    /// nearest-per-a (each A's nearest B, then the k closest) or all-pairs.
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
                Precision::F32 => knn::run::<f32>(args),
                Precision::F64 => knn::run::<f64>(args),
            }
        }
        BenchCommand::ClosestPoint(args) => {
            return match args.dev.precision {
                Precision::F32 => closest_point::run::<f32>(args),
                Precision::F64 => closest_point::run::<f64>(args),
            }
        }
        BenchCommand::Within(args) => {
            return match args.dev.precision {
                Precision::F32 => within::run::<f32>(args),
                Precision::F64 => within::run::<f64>(args),
            }
        }
    };
    if args.runs == 0 || args.k == 0 {
        return Err(CliError("--runs and -k must be at least 1".into()));
    }
    match args.dev.precision {
        Precision::F32 => pairs::run::<f32>(args),
        Precision::F64 => pairs::run::<f64>(args),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median time of `runs` calls of `f`.
fn time(runs: usize, mut f: impl FnMut() -> nearkit::Result<()>) -> CliResult<Duration> {
    let mut v = Vec::new();
    for _ in 0..runs {
        let s = Instant::now();
        f()?;
        v.push(s.elapsed());
    }
    Ok(median(v))
}

/// The median time of `runs` calls of `f` on the engine, each waiting for the GPU to finish.
fn time_on(engine: &Engine, runs: usize, mut f: impl FnMut() -> nearkit::Result<()>) -> CliResult<Duration> {
    f()?;
    engine.synchronize()?;
    time(runs, || {
        f()?;
        engine.synchronize()
    })
}
