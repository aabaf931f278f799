//! Coordinates far from 1 (1e±30 in f32, 1e±270 in f64): answers are the ones the same
//! points give near 1, scaled by the same power of two (exact in binary floating point), so
//! neither overflow nor underflow changes a neighbour or a distance. What no power of two can
//! bring in range is refused with an error naming f64.

mod common;

use common::*;
use nearkit::generate::{generate, Distribution};
use nearkit::{
    ClosestPointOptions, Error, KnnOptions, Mesh, MeshIndex, PairMode, PairsOptions, PointIndex, Points, Real,
};

/// v × 2^e, exact while the result stays normal.
fn pow2<T: Real>(v: T, e: i32) -> T {
    let mut w = v.to_f64();
    let mut e = e;
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        w *= 2f64.powi(step);
        e -= step;
    }
    T::from_f64(w)
}

fn scaled<T: Real>(p: &Points<T>, e: i32) -> Points<T> {
    let col = |c: &Vec<T>| c.iter().map(|&v| pow2(v, e)).collect();
    Points { x: col(&p.x), y: col(&p.y), z: col(&p.z) }
}

/// Powers of two that put sets of magnitude ~1000 far out in both directions.
fn exponents<T: Real>() -> Vec<i32> {
    if T::NAME == "f32" {
        vec![-110, -80, 60, 100]
    } else {
        vec![-1000, -700, 700, 980]
    }
}

/// Every query kind on `a`, `b` scaled by 2^e equals the unscaled brute force, scaled.
fn same_as_near_one<T: Real>(seed: u64) {
    for (name, a, b) in point_sets::<T>(seed, 150, 400) {
        if name == "far-from-origin" {
            continue; // its magnitude ratio is small already; the others cover the rest
        }
        for e in exponents::<T>() {
            let (sa, sb) = (scaled(&a, e), scaled(&b, e));
            let what = format!("{} {name} ×2^{e}", T::NAME);
            let index = PointIndex::build(&sb, nearkit::Device::Cpu).unwrap();

            let nn = index.nearest(&sa, None).unwrap();
            let reference = brute_nearest(&a, &b, T::INFINITY);
            for (i, (j, d2)) in reference.iter().enumerate() {
                assert_eq!(nn.b[i], *j, "{what}: nearest of {i}");
                assert_eq!(nn.distance[i].ordered_bits(), pow2(d2.sqrt(), e).ordered_bits(), "{what}: distance {i}");
            }

            let k = 8.min(b.len());
            let knn = index.knn(&sa, &KnnOptions::k(k)).unwrap();
            let plain = PointIndex::build(&b, nearkit::Device::Cpu).unwrap().knn(&a, &KnnOptions::k(k)).unwrap();
            assert_eq!(knn.ids, plain.ids, "{what}: knn ids");
            let back: Vec<u64> = plain.distances.iter().map(|&d| pow2(d, e).ordered_bits()).collect();
            assert_eq!(knn.distances.iter().map(|d| d.ordered_bits()).collect::<Vec<_>>(), back, "{what}: knn");

            for mode in [PairMode::NearestPerA, PairMode::AllPairs] {
                let r = T::from_f64(60.0);
                let opts = PairsOptions { k: 50, mode, max_distance: Some(pow2(r, e)) };
                let pairs = index.closest_pairs(&sa, &opts).unwrap();
                let reference = match mode {
                    PairMode::NearestPerA => brute_nearest_per_a(&a, &b, 50, r * r),
                    PairMode::AllPairs => brute_all_pairs(&a, &b, 50, r * r),
                };
                assert_eq!(pairs.len(), reference.len(), "{what}: {mode} count");
                for (p, (d2, i, j)) in pairs.iter().zip(&reference) {
                    assert_eq!((p.a, p.b), (*i, *j), "{what}: {mode}");
                    assert_eq!(p.distance.ordered_bits(), pow2(d2.sqrt(), e).ordered_bits(), "{what}: {mode}");
                }
            }
        }
    }
}

#[test]
fn f32_points_far_from_one_match_the_scaled_brute_force() {
    same_as_near_one::<f32>(71);
}

#[test]
fn f64_points_far_from_one_match_the_scaled_brute_force() {
    same_as_near_one::<f64>(72);
}

/// The cases: points 1e20 apart in f32 (squared distances overflow f32), 1e300 in
/// f64, 1e-25 and 1e-200 apart (squared distances underflow to 0).
#[test]
fn the_reported_cases_answer_right() {
    fn nearest<T: Real>(b: &[[f64; 3]], a: [f64; 3]) -> (u32, f64) {
        let cast = |r: &[f64; 3]| r.map(T::from_f64);
        let b = Points::from_rows(&b.iter().map(cast).collect::<Vec<_>>());
        let nn = PointIndex::build(&b, nearkit::Device::Cpu).unwrap().nearest(&Points::from_rows(&[cast(&a)]), None);
        let nn = nn.unwrap();
        (nn.b[0], nn.distance[0].to_f64())
    }
    let (id, d) = nearest::<f32>(&[[0.0, 0.0, 0.0], [3e20, 0.0, 0.0]], [2e20, 0.0, 0.0]);
    assert_eq!(id, 1);
    assert!((d / 1e20 - 1.0).abs() < 1e-6, "{d}");
    let (id, d) = nearest::<f64>(&[[-1e300, 0.0, 0.0], [1e300, 1e300, 0.0]], [0.5e300, 0.9e300, 0.0]);
    assert_eq!(id, 1);
    assert!((d / (0.5e300f64.hypot(0.1e300)) - 1.0).abs() < 1e-12, "{d}");
    let (id, d) = nearest::<f64>(&[[1e-200, 0.0, 0.0], [3e-200, 0.0, 0.0]], [2.5e-200, 0.0, 0.0]);
    assert_eq!(id, 1);
    assert!((d / 0.5e-200 - 1.0).abs() < 1e-12, "{d}");
    let (id, d) = nearest::<f32>(&[[1e-25, 0.0, 0.0], [3e-25, 0.0, 0.0]], [2.5e-25, 0.0, 0.0]);
    assert_eq!(id, 1);
    assert!((d / 0.5e-25 - 1.0).abs() < 1e-5, "{d}");
}

#[test]
fn queries_with_tiny_coordinates_are_fine_and_too_large_ones_refused() {
    let data: Points<f32> = generate(Distribution::Uniform, 500, 100.0, 5);
    let index = PointIndex::build(&data, nearkit::Device::Cpu).unwrap();
    // Tiny nonzero coordinates in the queries need no scaling.
    let q = Points::from_rows(&[[1e-30f32, 3e-41, 50.0], [0.0, 1e-45, 0.0]]);
    let nn = index.nearest(&q, None).unwrap();
    let reference = brute_nearest(&q, &data, f32::INFINITY);
    assert_eq!(nn.b, reference.iter().map(|r| r.0).collect::<Vec<_>>());
    // A query whose squared distances would overflow f32 is refused, naming f64.
    let far = Points::from_rows(&[[0.0f32, 1e30, 0.0]]);
    let e = index.nearest(&far, None).unwrap_err();
    assert!(matches!(e, Error::Magnitudes { .. }) && e.to_string().contains("f64"), "{e}");
    let far64 = far.cast::<f64>();
    let nn = PointIndex::build(&data.cast::<f64>(), nearkit::Device::Cpu).unwrap().nearest(&far64, None).unwrap();
    assert_eq!(nn.b[0], brute_nearest(&far64, &data.cast::<f64>(), f64::INFINITY)[0].0);
}

#[test]
fn data_too_wide_for_f32_is_refused_and_f64_answers() {
    let b = Points::from_rows(&[[1e-20f32, 0.0, 0.0], [1e20, 0.0, 0.0], [0.0, 2e-20, 0.0]]);
    let a = Points::from_rows(&[[0.0f32, 0.0, 0.0]]);
    let e = PointIndex::build(&b, nearkit::Device::Cpu).err().expect("refused");
    let m = e.to_string();
    assert!(m.contains("f64") && m.contains("1.000e20") && m.contains("1.000e-20"), "{m}");
    let e = nearkit::nearest(&a, &b, nearkit::Device::Cpu).unwrap_err().to_string();
    assert!(e.starts_with("point set B"), "{e}");
    let nn = nearkit::nearest(&a.cast::<f64>(), &b.cast::<f64>(), nearkit::Device::Cpu).unwrap();
    assert_eq!(nn.b, [0]);
}

/// Closest points on a mesh scaled by 2^e are the unscaled answers, scaled; signs too.
fn mesh_same_as_near_one<T: Real>() {
    let mesh: Mesh<T> = Mesh::uv_sphere(12, 24, 700.0, [100.0, -50.0, 30.0]);
    let queries: Points<T> = generate(Distribution::Uniform, 400, 2000.0, 9);
    let opts = ClosestPointOptions::default();
    let plain = MeshIndex::build(&mesh, nearkit::Device::Cpu).unwrap();
    let reference = plain.closest_points(&queries, &opts).unwrap();
    let signs = plain.signed_distances(&queries, &opts).unwrap();
    for e in exponents::<T>() {
        let what = format!("{} sphere ×2^{e}", T::NAME);
        let m = Mesh { vertices: scaled(&mesh.vertices, e), triangles: mesh.triangles.clone() };
        let index = MeshIndex::build(&m, nearkit::Device::Cpu).unwrap();
        let q = scaled(&queries, e);
        let got = index.closest_points(&q, &opts).unwrap();
        assert_eq!(got.triangle, reference.triangle, "{what}: triangles");
        let bits = |v: &[T], e: i32| v.iter().map(|&d| pow2(d, e).ordered_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got.distance, 0), bits(&reference.distance, e), "{what}: distances");
        assert_eq!(bits(&got.point.x, 0), bits(&reference.point.x, e), "{what}: points");
        assert_eq!(bits(&got.bary[1], 0), bits(&reference.bary[1], 0), "{what}: barycentrics");
        let sd = index.signed_distances(&q, &opts).unwrap();
        assert_eq!(bits(&sd, 0), bits(&signs, e), "{what}: signed distances");
        assert_eq!(bits(&index.signs_of(&q, &got).unwrap(), 0), bits(&sd, 0), "{what}: signs_of");
    }
}

#[test]
fn f32_meshes_far_from_one_match_the_scaled_answers() {
    mesh_same_as_near_one::<f32>();
}

#[test]
fn f64_meshes_far_from_one_match_the_scaled_answers() {
    mesh_same_as_near_one::<f64>();
}

#[test]
fn mesh_queries_too_far_for_f32_are_refused() {
    let mesh: Mesh<f32> = Mesh::uv_sphere(8, 16, 1.0, [0.0; 3]);
    let index = MeshIndex::build(&mesh, nearkit::Device::Cpu).unwrap();
    let e = index.closest_points(&Points::from_rows(&[[1e25f32, 0.0, 0.0]]), &Default::default()).unwrap_err();
    assert!(e.to_string().contains("f64"), "{e}");
    let ok = index.closest_points(&Points::from_rows(&[[1e15f32, 0.0, 0.0]]), &Default::default()).unwrap();
    assert!((ok.distance[0] / 1e15 - 1.0).abs() < 1e-6);
}

/// Vectors (1-D to 8-D, and the 6-D triangle boxes) scaled by 2^e: the same neighbours, and
/// distances scaled, exactly and approximately.
fn vectors_same_as_near_one<T: Real>(seed: u64) {
    use nearkit::{shifted_sort_knn, ShiftedSortOptions, VectorIndex, Vectors};
    let engine = nearkit::Engine::cpu();
    let scale = |v: &Vectors<T>, e: i32| Vectors {
        cols: v.cols.iter().map(|c| c.iter().map(|&t| pow2(t, e)).collect()).collect(),
    };
    for (name, data, queries) in vector_sets::<T>(seed, 300, 200) {
        let plain = VectorIndex::new(&data, &engine).unwrap().knn(&queries, &KnnOptions::k(6)).unwrap();
        let approx_opts = ShiftedSortOptions { k: 6, shifts: 2, window: 4 };
        let approx = shifted_sort_knn(&data, &queries, &approx_opts, &engine).unwrap();
        for e in exponents::<T>() {
            let what = format!("{} {name} ×2^{e}", T::NAME);
            let (d, q) = (scale(&data, e), scale(&queries, e));
            let got = VectorIndex::new(&d, &engine).unwrap().knn(&q, &KnnOptions::k(6)).unwrap();
            assert_eq!(got.ids, plain.ids, "{what}: ids");
            let bits = |v: &[T], e: i32| v.iter().map(|&t| pow2(t, e).ordered_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.distances, 0), bits(&plain.distances, e), "{what}: distances");
            let got = shifted_sort_knn(&d, &q, &approx_opts, &engine).unwrap();
            assert_eq!(got.ids, approx.ids, "{what}: shifted sort");
        }
    }
}

#[test]
fn f32_vectors_far_from_one_match_the_scaled_answers() {
    vectors_same_as_near_one::<f32>(81);
}

#[test]
fn f64_vectors_far_from_one_match_the_scaled_answers() {
    vectors_same_as_near_one::<f64>(82);
}
