//! Closest point on a triangle mesh (CPU) against a brute force over every triangle, on
//! random meshes of several shapes (degenerate and duplicate triangles included) and queries
//! near, on and far from them.

use nearkit::generate::{generate, Distribution};
use nearkit::{
    closest_point_triangle, ClosestPointOptions, ClosestPoints, Engine, Mesh, MeshIndex, Points, Real, NO_ID,
};
use rand::{Rng, SeedableRng};

/// The CPU's closest points, through a fresh index.
fn closest_points<T: Real>(
    mesh: &Mesh<T>,
    q: &Points<T>,
    opts: &ClosestPointOptions<T>,
) -> nearkit::Result<ClosestPoints<T>> {
    MeshIndex::new(mesh, &Engine::cpu())?.closest_points(q, opts)
}

fn meshes<T: Real>(seed: u64) -> Vec<(&'static str, Mesh<T>)> {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut out = vec![];
    // A soup of random triangles of mixed sizes.
    let mut v = Points::with_capacity(0);
    let mut tris = vec![];
    for t in 0..600u32 {
        let c: [f64; 3] = std::array::from_fn(|_| rng.random::<f64>() * 100.0);
        let size = [0.5, 5.0, 30.0][t as usize % 3];
        for _ in 0..3 {
            v.push(
                T::from_f64(c[0] + rng.random::<f64>() * size),
                T::from_f64(c[1] + rng.random::<f64>() * size),
                T::from_f64(c[2] + rng.random::<f64>() * size),
            );
        }
        tris.push([3 * t, 3 * t + 1, 3 * t + 2]);
    }
    // Degenerate ones: collinear, a repeated corner, all corners equal; and exact duplicates.
    let base = v.len() as u32;
    for p in [[10.0, 10.0, 10.0], [20.0, 20.0, 20.0], [30.0, 30.0, 30.0], [40.0, 10.0, 50.0]] {
        v.push(T::from_f64(p[0]), T::from_f64(p[1]), T::from_f64(p[2]));
    }
    tris.extend([[base, base + 1, base + 2], [base, base, base + 3], [base + 3, base + 3, base + 3]]);
    tris.extend([tris[5], tris[5], tris[17]]);
    out.push(("soup with degenerate and duplicate triangles", Mesh { vertices: v, triangles: tris }));
    // A closed-ish surface: Morton-adjacent triples of points on a sphere.
    let s: Points<T> = generate(Distribution::Sphere, 900, 100.0, seed + 1);
    let tree = nearkit::test_hooks::MortonTree::build(&s, 8);
    let tris = (0..s.len() - 2).map(|i| [tree.id[i], tree.id[i + 1], tree.id[i + 2]]).collect();
    out.push(("sphere strips", Mesh { vertices: s, triangles: tris }));
    // An integer grid on a plane: many equidistant triangles (ties).
    let mut v = Points::with_capacity(0);
    let mut tris = vec![];
    let n = 12u32;
    for j in 0..n {
        for i in 0..n {
            v.push(T::from_f64(i as f64 * 4.0), T::from_f64(j as f64 * 4.0), T::from_f64(50.0));
        }
    }
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            let a = j * n + i;
            tris.push([a, a + 1, a + n + 1]);
            tris.push([a, a + n + 1, a + n]);
        }
    }
    out.push(("integer grid plane", Mesh { vertices: v, triangles: tris }));
    out
}

fn queries<T: Real>(mesh: &Mesh<T>, seed: u64) -> Points<T> {
    let (lo, hi) = mesh.vertices.bounds();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut q = Points::with_capacity(0);
    for i in 0..1500 {
        let p: [T; 3] = std::array::from_fn(|a| {
            let (l, h) = (lo[a].to_f64(), hi[a].to_f64());
            let ext = h - l;
            T::from_f64(match i % 3 {
                0 => l - 0.25 * ext + rng.random::<f64>() * 1.5 * ext, // 1.5× the box
                1 => l + rng.random::<f64>() * ext,
                _ => l - 3.0 * ext + rng.random::<f64>() * 7.0 * ext, // far away
            })
        });
        q.push(p[0], p[1], p[2]);
    }
    // Vertices themselves (distance 0, ties between the triangles sharing them), integer points.
    for i in (0..mesh.vertices.len()).step_by(7) {
        let p = mesh.vertices.get(i);
        q.push(p[0], p[1], p[2]);
    }
    for i in 0..200 {
        q.push(
            T::from_f64((i % 13) as f64 * 2.0),
            T::from_f64((i / 13) as f64 * 2.0),
            T::from_f64(50.0 + (i % 3) as f64),
        );
    }
    q
}

/// The brute force: every triangle, the smallest computed d2, ties to the smaller id.
fn brute<T: Real>(mesh: &Mesh<T>, q: [T; 3], r2: T) -> Option<(u32, nearkit::TrianglePoint<T>)> {
    let mut best: Option<(u32, nearkit::TrianglePoint<T>)> = None;
    for t in 0..mesh.triangles.len() {
        let [a, b, c] = mesh.corners(t);
        let tp = closest_point_triangle(q, a, b, c);
        if tp.d2 <= r2 && best.as_ref().is_none_or(|(_, bt)| tp.d2 < bt.d2) {
            best = Some((t as u32, tp));
        }
    }
    best
}

fn matches_brute_force<T: Real>(seed: u64) {
    for (name, mesh) in meshes::<T>(seed) {
        let qs = queries(&mesh, seed + 9);
        for r in [None, Some(3.0)] {
            let opts = ClosestPointOptions { max_distance: r.map(T::from_f64) };
            let got = closest_points(&mesh, &qs, &opts).unwrap();
            let r2 = r.map_or(T::INFINITY, |r| T::from_f64(r) * T::from_f64(r));
            for i in 0..qs.len() {
                let want = brute(&mesh, qs.get(i), r2);
                match want {
                    None => assert!(got.triangle[i] == NO_ID && got.distance[i] == T::INFINITY, "{name}: query {i}"),
                    Some((t, tp)) => {
                        let p = [got.point.x[i], got.point.y[i], got.point.z[i]];
                        let bary = [got.bary[0][i], got.bary[1][i], got.bary[2][i]];
                        assert_eq!(got.triangle[i], t, "{name} r={r:?}: query {i} triangle");
                        assert_eq!(got.distance[i].ordered_bits(), tp.d2.sqrt().ordered_bits(), "{name}: query {i}");
                        assert_eq!((p, bary), (tp.point, tp.bary), "{name}: query {i} point");
                    }
                }
            }
        }
    }
}

#[test]
fn f32_closest_points_match_brute_force() {
    matches_brute_force::<f32>(1);
}

#[test]
fn f64_closest_points_match_brute_force() {
    matches_brute_force::<f64>(2);
}

/// The f32 answer is the true nearest triangle up to f32 rounding (an f64 brute force).
#[test]
fn f32_distances_agree_with_an_f64_reference() {
    for (name, mesh) in meshes::<f32>(3) {
        let qs = queries(&mesh, 4);
        let got = closest_points(&mesh, &qs, &ClosestPointOptions::default()).unwrap();
        let (lo, hi) = mesh.vertices.bounds();
        let scale = (0..3).map(|a| (hi[a] - lo[a]) as f64).fold(0.0, f64::max) * 8.0;
        for i in 0..qs.len() {
            let q = qs.get(i).map(|v| v as f64);
            let truth = (0..mesh.triangles.len())
                .map(|t| {
                    let [a, b, c] = mesh.corners(t).map(|p| p.map(|v| v as f64));
                    let p = closest_point_triangle(q, a, b, c).point;
                    ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt()
                })
                .fold(f64::INFINITY, f64::min);
            let d = got.distance[i] as f64;
            assert!((d - truth).abs() <= 1e-5 * scale.max(1.0), "{name}: query {i}: {d} vs {truth}");
        }
    }
}

#[test]
fn points_lie_on_their_triangles() {
    for (name, mesh) in meshes::<f64>(5) {
        let qs = queries(&mesh, 6);
        let got = closest_points(&mesh, &qs, &ClosestPointOptions::default()).unwrap();
        for i in 0..qs.len() {
            let [a, b, c] = mesh.corners(got.triangle[i] as usize);
            let u = [got.bary[0][i], got.bary[1][i], got.bary[2][i]];
            assert!(u.iter().all(|&x| (-1e-9..=1.0 + 1e-9).contains(&x)), "{name}: {u:?}");
            assert!((u[0] + u[1] + u[2] - 1.0).abs() < 1e-9, "{name}: {u:?}");
            for k in 0..3 {
                let p = u[0] * a[k] + u[1] * b[k] + u[2] * c[k];
                let got_p = [got.point.x[i], got.point.y[i], got.point.z[i]][k];
                assert!((p - got_p).abs() < 1e-9 * (1.0 + p.abs()), "{name}: query {i} axis {k}");
            }
        }
    }
}

#[test]
fn bad_meshes_and_queries_are_refused() {
    let q = Points::from_rows(&[[0.0f32, 0.0, 0.0]]);
    let v = Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]);
    let opts = ClosestPointOptions::default();
    let bad = Mesh { vertices: v.clone(), triangles: vec![[0, 1, 3]] };
    assert!(closest_points(&bad, &q, &opts).unwrap_err().to_string().contains("vertex 3"));
    let empty = Mesh { vertices: v.clone(), triangles: vec![] };
    assert!(closest_points(&empty, &q, &opts).unwrap_err().to_string().contains("no triangles"));
    let ok = Mesh { vertices: v, triangles: vec![[0, 1, 2]] };
    let nan = Points::from_rows(&[[f32::NAN, 0.0, 0.0]]);
    assert!(closest_points(&ok, &nan, &opts).unwrap_err().to_string().contains("NaN"));
    let neg = ClosestPointOptions { max_distance: Some(-1.0f32) };
    assert!(closest_points(&ok, &q, &neg).is_err());
}

/// The GPU's wide index covers every triangle exactly once, and every child box holds the
/// corners of its triangles.
#[test]
fn wide_bvh_covers_every_triangle_once() {
    use nearkit::test_hooks::{TriangleBvh, WideBvh, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
    for n in [1usize, 2, 7, 8, 9, 64, 1000] {
        let p: nearkit::Points<f32> =
            nearkit::generate::generate(nearkit::generate::Distribution::Clustered, 3 * n, 10.0, n as u64);
        let mesh =
            nearkit::Mesh { vertices: p, triangles: (0..n as u32).map(|t| [3 * t, 3 * t + 1, 3 * t + 2]).collect() };
        let bvh = TriangleBvh::build(&mesh);
        let wide = WideBvh::of(&bvh).unwrap();
        let mut seen = vec![0u32; n];
        // Walk from the root: (node, box of the slot that led here).
        let mut todo = vec![0usize];
        let mut nodes = 0;
        while let Some(w) = todo.pop() {
            nodes += 1;
            for c in 0..WIDE {
                let (child, b) = (wide.children[w * WIDE + c], wide.boxes[w * WIDE + c]);
                if child == WIDE_EMPTY {
                    continue;
                }
                let (s, e) = if child & WIDE_LEAF != 0 {
                    let s = (child & WIDE_START) as usize;
                    (s, s + ((child >> 28) & 7) as usize + 1)
                } else {
                    todo.push(child as usize);
                    // The child node's slots hold all of its triangles; check them there.
                    (0, 0)
                };
                for t in s..e {
                    seen[t] += 1;
                    for corner in bvh.triangle(t) {
                        assert_eq!(b.lower_bound(corner), 0.0, "n {n}: a corner outside its leaf's box");
                    }
                }
            }
        }
        assert!(seen.iter().all(|&k| k == 1), "n {n}: every triangle in exactly one leaf");
        assert_eq!(nodes * WIDE, wide.children.len(), "n {n}: every node reachable");
    }
}
