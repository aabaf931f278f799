//! `nearkit bench pairs`: the k closest pairs of two armies, uniform and clustered.

use crate::{note, out};
use std::time::{Duration, Instant};

use nearkit::generate::{generate, Distribution, ARMY_RANGE};
use nearkit::{Engine, PairsOptions, PointIndex, Points, Real};

use super::{time, time_on, BenchPairsArgs};
use crate::common::{check_memory, ms, thousands, CliError, CliResult};

/// The time of the fastest known GPU code for the default workload before this project: the
/// grid ("ver 2", heuristic) of the problem's source, on an RTX 2080 Ti.
const REFERENCE_MS: f64 = 172.0;

struct Row {
    workload: String,
    what: String,
    resident: Option<Duration>,
    end_to_end: Duration,
    check: String,
}

pub fn run<T: Real>(args: &BenchPairsArgs) -> CliResult {
    // Each army is generated, kept as input and copied into its index.
    let size = 3 * 3 * std::mem::size_of::<T>() as u64;
    check_memory(&format!("--a-count {}", args.a_count), args.a_count, size)?;
    check_memory(&format!("--b-count {}", args.b_count), args.b_count, size)?;
    check_memory("--a-count + --b-count", args.a_count.saturating_add(args.b_count), size)?;
    let workloads: Vec<Distribution> =
        args.workloads.split(',').map(|s| s.trim().parse::<Distribution>()).collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let engine = args.dev.open()?;
    let startup = t0.elapsed();
    let device = engine.describe();
    note!("device: {device}; start-up {} (not counted below)", ms(startup));
    let mut rows = Vec::new();
    for dist in workloads {
        rows.extend(workload::<T>(args, &engine, dist)?);
    }
    print_table::<T>(args, &device, &rows)?;
    Ok(())
}

/// The rows of one distribution: top-k pairs (resident and end to end) and, with --nearest,
/// every A's nearest B.
fn workload<T: Real>(args: &BenchPairsArgs, engine: &Engine, dist: Distribution) -> CliResult<Vec<Row>> {
    let opts = PairsOptions::<T> { k: args.k, mode: args.mode, max_distance: None };
    let name = format!("{dist} {}x{}", short(args.a_count), short(args.b_count));
    note!("generating {name} ...");
    let a = generate::<T>(dist, args.a_count, ARMY_RANGE, 2026);
    let b = generate::<T>(dist, args.b_count, ARMY_RANGE, 2027);
    let query = || PointIndex::new(&b, engine)?.closest_pairs(&a, &opts);

    engine.memory_high_water(true)?;
    let reference = query()?; // warm-up
    if let Some((used, reserved)) = engine.memory_high_water(false)? {
        // One end-to-end query from host arrays: its peak of live GPU allocations.
        let input = 3 * (a.len() + b.len()) * std::mem::size_of::<T>();
        note!(
            "  GPU memory, one end-to-end query: peak live {:.1} MiB ({:.2}x the {:.1} MiB input), pool reserved {:.1} MiB",
            used as f64 / 1048576.0,
            used as f64 / input as f64,
            input as f64 / 1048576.0,
            reserved as f64 / 1048576.0
        );
    }
    let e2e = time(args.runs, || query().map(drop))?;
    let resident_data =
        if engine.is_cuda() && !args.skip_resident { Some((engine.upload(&a)?, engine.upload(&b)?)) } else { None };
    let mut resident = None;
    if let Some((da, db)) = &resident_data {
        let again = PointIndex::from_device(db, engine)?.closest_pairs_device(da, &opts)?;
        if again != reference {
            return Err(CliError("resident and end-to-end CUDA results differ".into()));
        }
        let run = || PointIndex::from_device(db, engine)?.closest_pairs_device(da, &opts).map(drop);
        resident = Some(time_on(engine, args.runs, run)?);
    }
    let check = check_against_cpu(engine, &a, &b, &opts, &reference, args.no_check)?;
    let mut rows = vec![Row {
        workload: name.clone(),
        what: format!("top-{} {}", args.k, args.mode),
        resident,
        end_to_end: e2e,
        check,
    }];
    if args.nearest {
        let nearest = || PointIndex::new(&b, engine)?.nearest(&a, None);
        let reference = nearest()?;
        let all = time(args.runs, || nearest().map(drop))?;
        let mut resident = None;
        if let Some((da, db)) = &resident_data {
            let again = PointIndex::from_device(db, engine)?.nearest_device(da, None)?.download(engine)?;
            if again != reference {
                return Err(CliError("resident and end-to-end CUDA nearest answers differ".into()));
            }
            let run = || PointIndex::from_device(db, engine)?.nearest_device(da, None).map(drop);
            resident = Some(time_on(engine, args.runs, run)?);
        }
        let check = if !engine.is_cuda() || args.no_check {
            "-".into()
        } else if PointIndex::new(&b, &Engine::cpu())?.nearest(&a, None)? == reference {
            "yes".into()
        } else {
            return Err(CliError("CUDA and CPU nearest answers differ".into()));
        };
        rows.push(Row { workload: name, what: "nearest of every A".into(), resident, end_to_end: all, check });
    }
    // The same bytes copied pinned, measured now: points up, answers down.
    let size = std::mem::size_of::<T>();
    let up = (a.len() + b.len()) * 3 * size;
    for (row, down) in rows.iter().zip([args.k * (8 + size), a.len() * (4 + size)]) {
        if let (Some(u), Some(d)) = (engine.bus_floor(up)?, engine.bus_floor(down)?) {
            let floor = u.pinned_up + d.pinned_down;
            out!(
                "  {}, {}: transfer floor {} ({:.1} MB up, {:.1} MB down, pinned); end to end = {:.1}× the floor",
                row.workload,
                row.what,
                ms(floor),
                up as f64 / 1e6,
                down as f64 / 1e6,
                row.end_to_end.as_secs_f64() / floor.as_secs_f64()
            );
        }
    }
    if !args.dev.quiet {
        let p = &reference[0];
        note!("  closest pair: a {} b {} distance {}", p.a, p.b, p.distance);
    }
    Ok(rows)
}

fn print_table<T: Real>(args: &BenchPairsArgs, device: &str, rows: &[Row]) -> CliResult {
    out!();
    out!("nearkit bench pairs — {device}, k = {}, median of {} runs, {}", args.k, args.runs, T::NAME);
    out!(
        "{:<28} {:<22} {:>12} {:>12} {:>10} {:>11}",
        "workload",
        "query",
        "resident",
        "end to end",
        "vs 172 ms",
        "same as cpu"
    );
    for r in rows {
        let best = r.resident.unwrap_or(r.end_to_end).as_secs_f64() * 1e3;
        out!(
            "{:<28} {:<22} {:>12} {:>12} {:>9.0}x {:>11}",
            r.workload,
            r.what,
            r.resident.map(ms).unwrap_or_else(|| "-".into()),
            ms(r.end_to_end),
            REFERENCE_MS / best,
            r.check
        );
    }
    out!(
        "172 ms: the problem's reference GPU grid (ver 2, heuristic, RTX 2080 Ti); 'vs 172 ms' = 172 ms / our best time"
    );
    let tops: Vec<&Row> = rows.iter().filter(|r| r.what.starts_with("top")).collect();
    if tops.len() >= 2 {
        let t = |r: &Row| r.resident.unwrap_or(r.end_to_end).as_secs_f64();
        out!("{} / {} time: {:.2}x", tops[1].workload, tops[0].workload, t(tops[1]) / t(tops[0]));
    }
    Ok(())
}

/// "yes" when the CPU gives the same pairs, an error naming the first difference when not,
/// "-" when not checked (on the CPU, or when asked not to).
fn check_against_cpu<T: Real>(
    engine: &Engine,
    a: &Points<T>,
    b: &Points<T>,
    opts: &PairsOptions<T>,
    got: &[nearkit::Pair<T>],
    skip: bool,
) -> CliResult<String> {
    if !engine.is_cuda() || skip {
        return Ok("-".into());
    }
    let cpu = PointIndex::new(b, &Engine::cpu())?.closest_pairs(a, opts)?;
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
