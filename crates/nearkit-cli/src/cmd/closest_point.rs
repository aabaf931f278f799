//! `nearkit closest-point`: for each query point, the nearest point on a triangle mesh.

use crate::{note, out};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nearkit::generate::{generate, Distribution};
use nearkit::{ClosestPointOptions, Mesh, MeshIndex, Points, Real, Role, NO_ID};

use crate::common::{check_max_distance, check_out, load, ms, thousands, CliError, CliResult, DeviceArgs, Precision};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit closest-point                                   built-in: 1M queries around a 40K-triangle sphere
  nearkit closest-point --mesh bunny.off --queries q.npy --out cp.csv
  nearkit closest-point --mesh part.stl --queries scan.ply --max-distance 0.5 --out cp.npz
  nearkit closest-point --mesh solid.ply --queries grid.npy --signed --out sdf.npz   negative inside

For every query: the nearest triangle (ties to the smaller id), the distance, the closest point
and its barycentric coordinates u, v, w (point = u·a + v·b + w·c for the triangle's corners in
file order). Exact: the same answer as comparing every triangle. Degenerate (zero-area)
triangles are fine. Output: .csv (query,triangle,distance,x,y,z,u,v,w) or .npz (triangle,
distance, point N×3, bary N×3); queries with no triangle within --max-distance get triangle -1.
CPU and CUDA give bitwise identical answers.")]
pub struct ClosestPointArgs {
    /// Triangle mesh (.ply, .off, .obj, .stl; ascii or binary).
    #[arg(long)]
    pub mesh: Option<PathBuf>,
    /// Query points (.csv, .npy, .ply, .off, .obj, .stl, .xyz).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Signed distances: negative inside. The mesh must be closed and consistently oriented
    /// (either way round); an open mesh is refused with the edge that is not shared by two.
    #[arg(long)]
    pub signed: bool,
    /// Only triangles at most this far away.
    #[arg(long, allow_negative_numbers = true)]
    pub max_distance: Option<f64>,
    /// Output file: .csv or .npz. Without it, a summary and the first queries are printed.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub dev: DeviceArgs,
}

pub fn run(args: &ClosestPointArgs) -> CliResult {
    match args.dev.precision {
        Precision::F32 => run_t::<f32>(args),
        Precision::F64 => run_t::<f64>(args),
    }
}

/// A mesh and `n` queries uniform in 1.5× its bounding box (the workload).
pub fn queries_around<T: Real>(mesh: &Mesh<T>, n: usize, seed: u64) -> Points<T> {
    let (lo, hi) = mesh.vertices.bounds();
    let unit: Points<T> = generate(Distribution::Uniform, n, 1.0, seed);
    let mut q = Points::with_capacity(n);
    let at = |a: usize, u: T| {
        let (l, h) = (lo[a].to_f64(), hi[a].to_f64());
        T::from_f64(l - 0.25 * (h - l) + u.to_f64() * 1.5 * (h - l))
    };
    for i in 0..n {
        let u = unit.get(i);
        q.push(at(0, u[0]), at(1, u[1]), at(2, u[2]));
    }
    q
}

fn run_t<T: Real>(args: &ClosestPointArgs) -> CliResult {
    check_max_distance::<T>(args.max_distance)?;
    if let Some(out) = &args.out {
        if !matches!(
            out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(),
            Some("csv" | "npz")
        ) {
            return Err(CliError(format!("{}: unknown extension for closest points: use .csv or .npz", out.display())));
        }
        check_out(out, &[args.mesh.as_deref(), args.queries.as_deref()])?;
    }
    let quiet = args.dev.quiet;
    let (mesh, queries) = match (&args.mesh, &args.queries) {
        (Some(m), Some(q)) => (nearkit_io::read_mesh::<T>(m)?, load::<T>(q, Role::Queries, &None, quiet)?),
        (Some(m), None) => {
            let mesh = nearkit_io::read_mesh::<T>(m)?;
            if !quiet {
                note!("note: no --queries given: 1,000,000 points uniform in 1.5× the mesh's bounding box");
            }
            let q = queries_around(&mesh, 1_000_000, 5);
            (mesh, q)
        }
        (None, Some(_)) => return Err(CliError("give --mesh too".into())),
        (None, None) => {
            if !quiet {
                note!("note: no --mesh given: a sphere of 40,000 triangles and 1,000,000 queries around it");
            }
            let mesh = Mesh::uv_sphere(100, 200, 1.0, [0.0; 3]);
            let q = queries_around(&mesh, 1_000_000, 5);
            (mesh, q)
        }
    };
    let engine = args.dev.open()?;
    let opts = ClosestPointOptions { max_distance: args.max_distance.map(T::from_f64) };
    let spinner = Spinner::start("searching", quiet);
    let start = Instant::now();
    let index = MeshIndex::new(&mesh, &engine);
    let result = index
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|i| i.closest_points(&queries, &opts).map_err(|e| e.to_string()));
    let elapsed = start.elapsed();
    spinner.finish();
    let mut result = result.map_err(CliError)?;
    if let (true, Ok(index)) = (args.signed, &index) {
        result.distance = index.signs_of(&queries, &result)?;
    }
    match &args.out {
        Some(path) => nearkit_io::write_closest_points(path, &result)?,
        None => {
            out!("{:>8} {:>9} {:>12} {:>36}", "query", "triangle", "distance", "closest point");
            for i in 0..queries.len().min(5) {
                let t = if result.triangle[i] == NO_ID { -1 } else { result.triangle[i] as i64 };
                out!(
                    "{i:>8} {t:>9} {:>12.6} {:>36}",
                    result.distance[i].to_f64(),
                    format!(
                        "({:.5}, {:.5}, {:.5})",
                        result.point.x[i].to_f64(),
                        result.point.y[i].to_f64(),
                        result.point.z[i].to_f64()
                    )
                );
            }
            if queries.len() > 5 && !quiet {
                note!("note: showing the first 5 of {} queries; use --out FILE for all", thousands(queries.len()));
            }
        }
    }
    if !quiet {
        note!(
            "closest points of {} queries on {} triangles in {} on {}",
            thousands(queries.len()),
            thousands(mesh.triangles.len()),
            ms(elapsed),
            engine.describe()
        );
    }
    Ok(())
}
