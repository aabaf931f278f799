//! The `nearkit` command. Each subcommand lives in `cmd/`; this file only dispatches and
//! turns errors into one line on stderr and exit code 2.

mod cmd;
mod common;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "nearkit",
    version,
    about = "Exact proximity queries (closest pairs, kNN, radius, closest point on a mesh) on CPUs and CUDA GPUs",
    long_about = "Exact proximity queries on multi-core CPUs and CUDA GPUs: closest pairs, k-nearest\n\
neighbours (3-D points or vectors up to 8-D; a shifted sort as an approximation),\n\
every point or pair within a radius,\n\
the closest point on a triangle mesh, and a collision world of ellipsoids.\n\n\
Results are exact on any input (uniform, clustered, on surfaces, with duplicates) and\n\
bitwise identical between the CPU and the GPU; ties go to the smaller id.",
    after_help = "Start with `nearkit pairs` (a built-in example), then `nearkit pairs --help`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The k closest A–B pairs ("the closest enemy pairs" of two armies).
    Pairs(cmd::pairs::PairsArgs),
    /// Every A's nearest B, written to a file.
    Nearest(cmd::nearest::NearestArgs),
    /// Each query's k nearest data points.
    Knn(cmd::knn::KnnArgs),
    /// Every data point within a radius of each query, or every pair within it.
    Within(cmd::within::WithinArgs),
    /// Each query's nearest point on a triangle mesh.
    ClosestPoint(cmd::closest_point::ClosestPointArgs),
    /// A collision world: ellipsoids against a triangle mesh and each other, tick after tick.
    Collide(cmd::collide::CollideArgs),
    /// Batched ray casts into a collision world: each ray's first hit, or all its hits.
    Raycast(cmd::raycast::RaycastArgs),
    /// Generate reproducible test data.
    #[command(subcommand)]
    Gen(cmd::gen::GenCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Pairs(a) => cmd::pairs::run(a),
        Command::Nearest(a) => cmd::nearest::run(a),
        Command::Knn(a) => cmd::knn::run(a),
        Command::Within(a) => cmd::within::run(a),
        Command::ClosestPoint(a) => cmd::closest_point::run(a),
        // The library says "use larger cells"; here that is a flag.
        Command::Collide(a) => cmd::collide::run(a).map_err(cell_size_hint),
        Command::Raycast(a) => cmd::raycast::run(a).map_err(cell_size_hint),
        Command::Gen(g) => cmd::gen::run(g),
        Command::Bench(b) => cmd::bench::run(b),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::note!("error: {}", e.0);
            ExitCode::from(2)
        }
    }
}

/// Names the flag where an error asks for larger cells.
fn cell_size_hint(e: common::CliError) -> common::CliError {
    if e.0.contains("use larger cells") && !e.0.contains("--cell-size") {
        common::CliError(format!("{} (--cell-size)", e.0))
    } else {
        e
    }
}
