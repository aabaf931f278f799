//! `nearkit bench closest-point`: closest points of many queries around a mesh.

use crate::out;
use std::time::Instant;

use nearkit::{
    closest_point_triangle, Aabb6, ClosestPointOptions, ClosestPoints, DeviceClosestPoints, Engine, KnnOptions, Mesh,
    MeshIndex, Points, Real, VectorIndex,
};

use super::{time, time_on, BenchClosestPointArgs};
use crate::common::{check_memory, ms, thousands, CliError, CliResult};

pub fn run<T: Real>(args: &BenchClosestPointArgs) -> CliResult {
    if args.runs == 0 || args.queries_log2.is_some_and(|l| l > 30) {
        return Err(CliError("need --runs >= 1 and --queries-log2 <= 30".into()));
    }
    let mesh = match &args.mesh {
        Some(p) => nearkit_io::read_mesh::<T>(p)?,
        None => Mesh::uv_sphere(100, 200, 1.0, [0.0; 3]),
    };
    let mesh = match args.cut_to {
        Some(n) => mesh.cut_to(n),
        None => mesh,
    };
    let n = args.queries_log2.map_or(1_000_000, |l| 1usize << l);
    // Queries, and a result (triangle, distance, point, barycentrics) for each.
    let size = std::mem::size_of::<T>() as u64;
    check_memory(&format!("2^{} queries", n.ilog2()), n, 3 * size + 4 + 7 * size)?;
    let q = crate::cmd::closest_point::queries_around(&mesh, n, 17);
    let engine = args.dev.open()?;
    let opts = ClosestPointOptions::<T>::default();
    out!(
        "nearkit bench closest-point — {}, {} triangles, {} queries in 1.5× the box, median of {} runs",
        engine.describe(),
        mesh.triangles.len(),
        thousands(n),
        args.runs
    );
    let query = || MeshIndex::new(&mesh, &engine)?.closest_points(&q, &opts);
    let got = query()?; // warm-up
    let e2e = time(args.runs, || query().map(drop))?;
    let mut resident = None;
    if engine.is_cuda() {
        // The index is built beforehand, not timed; queries and results stay on the GPU.
        let index = MeshIndex::new(&mesh, &engine)?;
        let dq = engine.upload(&q)?;
        let mut out = DeviceClosestPoints::new(&engine, n)?;
        resident = Some(time_on(&engine, args.runs, || index.closest_points_device(&dq, &opts, &mut out))?);
        check_against_cpu(&mesh, &q, &opts, &got)?;
    }
    out!("{:>12} {:>12}", "resident", "end to end");
    out!("{:>12} {:>12}", resident.map(ms).unwrap_or_else(|| "-".into()), ms(e2e));
    // The same bytes copied pinned, measured now: the mesh and the queries up, the answers
    // (triangle, distance, point, barycentrics) down.
    let up = (mesh.vertices.len() * 3 + n * 3) * size as usize + mesh.triangles.len() * 12;
    let down = n * (4 + 7 * size as usize);
    if let (Some(u), Some(d)) = (engine.bus_floor(up)?, engine.bus_floor(down)?) {
        let floor = u.pinned_up + d.pinned_down;
        out!(
            "transfer floor {} ({:.1} MB up, {:.1} MB down, pinned); end to end = {:.1}× the floor",
            ms(floor),
            up as f64 / 1e6,
            down as f64 / 1e6,
            e2e.as_secs_f64() / floor.as_secs_f64()
        );
    }
    for e in [Aabb6::MinMax, Aabb6::MinExtent] {
        box_approximation(&engine, &mesh, &q, &got, e)?;
    }
    Ok(())
}

/// The CPU's answer on a prefix of the queries must be the GPU's, bit for bit.
fn check_against_cpu<T: Real>(
    mesh: &Mesh<T>,
    q: &Points<T>,
    opts: &ClosestPointOptions<T>,
    got: &ClosestPoints<T>,
) -> CliResult {
    let m = q.len().min(1 << 16);
    let sub = Points { x: q.x[..m].to_vec(), y: q.y[..m].to_vec(), z: q.z[..m].to_vec() };
    let cpu = MeshIndex::new(mesh, &Engine::cpu())?.closest_points(&sub, opts)?;
    let bits = |v: &[T]| v.iter().map(|x| x.ordered_bits()).collect::<Vec<_>>();
    let same = cpu.triangle[..] == got.triangle[..m]
        && bits(&cpu.distance) == bits(&got.distance[..m])
        && bits(&cpu.point.x) == bits(&got.point.x[..m])
        && bits(&cpu.bary[0]) == bits(&got.bary[0][..m]);
    out!("GPU answer {} the CPU's on the first {} queries", if same { "equals" } else { "DIFFERS FROM" }, thousands(m));
    if !same {
        return Err(CliError("the GPU answer differs from the CPU's".into()));
    }
    Ok(())
}

/// The 6-D box approximation of the same question (each triangle as a box vector, searched
/// exactly in 6-D): how often its triangle is farther than the exact answer `got`, and by how
/// much.
fn box_approximation<T: Real>(
    engine: &Engine,
    mesh: &Mesh<T>,
    q: &Points<T>,
    got: &ClosestPoints<T>,
    e: Aabb6,
) -> CliResult {
    let n = q.len();
    let start = Instant::now();
    let nn = VectorIndex::new(&e.triangles(mesh), engine)?.knn(&e.queries(q), &KnnOptions::k(1))?;
    let t6 = start.elapsed();
    let f = |v: [T; 3]| v.map(|x| x.to_f64());
    let (mut wrong, mut excess_sum, mut excess_max) = (0usize, 0.0f64, 0.0f64);
    for i in 0..n {
        if nn.ids[i] == got.triangle[i] {
            continue;
        }
        let qp = f(q.get(i));
        let [a, b, c] = mesh.corners(nn.ids[i] as usize).map(f);
        let p = closest_point_triangle(qp, a, b, c).point;
        let d6 = ((qp[0] - p[0]).powi(2) + (qp[1] - p[1]).powi(2) + (qp[2] - p[2]).powi(2)).sqrt();
        let exact = got.distance[i].to_f64();
        if d6 > exact * (1.0 + 1e-6) {
            wrong += 1;
            let x = if exact > 0.0 { d6 / exact - 1.0 } else { 0.0 };
            excess_sum += x;
            excess_max = excess_max.max(x);
        }
    }
    out!(
        "6-D {e:?} boxes (exact 6-D search, {} end to end): a farther triangle for {:.1}% of queries, \
         distance excess mean {:.1}%, worst {:.0}%",
        ms(t6),
        100.0 * wrong as f64 / n as f64,
        100.0 * excess_sum / n as f64,
        100.0 * excess_max
    );
    Ok(())
}
