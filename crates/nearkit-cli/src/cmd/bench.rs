//! `nearkit bench pairs`: seed A's workload and a clustered one, timed on one device.

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use nearkit::cpu::CpuBackend;
use nearkit::generate::{generate, Distribution, SEED_A_RANGE};
use nearkit::{Backend, Engine, PairMode, PairsOptions, Points, Real};

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
    let BenchCommand::Pairs(args) = cmd;
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
