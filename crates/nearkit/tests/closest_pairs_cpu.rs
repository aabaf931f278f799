//! The CPU backend against brute force on every input shape, in f32 and f64.

mod common;

use common::*;
use nearkit::{Error, PairMode, PairsOptions, Points, Real, NO_ID};
use proptest::prelude::*;

fn check_nearest_per_a<T: Real>(name: &str, a: &Points<T>, b: &Points<T>, k: usize, max_distance: Option<T>) {
    let opts = PairsOptions { k, mode: PairMode::NearestPerA, max_distance };
    let got = cpu().closest_pairs(a, b, &opts).unwrap();
    let r2 = max_distance.map(|r| r * r).unwrap_or(T::INFINITY);
    let want = brute_nearest_per_a(a, b, k, r2);
    assert_eq!(got.len(), want.len(), "{name}: row count (k={k})");
    for (r, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.a, g.b), (w.1, w.2), "{name}: rank {r} (k={k}) got {g:?} want {w:?}");
        assert_eq!(g.distance, w.0.sqrt(), "{name}: rank {r} distance");
    }
}

fn check_all_pairs<T: Real>(name: &str, a: &Points<T>, b: &Points<T>, k: usize, max_distance: Option<T>) {
    let opts = PairsOptions { k, mode: PairMode::AllPairs, max_distance };
    let got = cpu().closest_pairs(a, b, &opts).unwrap();
    let r2 = max_distance.map(|r| r * r).unwrap_or(T::INFINITY);
    let want = brute_all_pairs(a, b, k, r2);
    assert_eq!(got.len(), want.len(), "{name}: row count (k={k})");
    for (r, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.a, g.b, g.distance), (w.1, w.2, w.0.sqrt()), "{name}: all-pairs rank {r} (k={k})");
    }
}

fn check_nearest<T: Real>(name: &str, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) {
    let got = cpu().nearest(a, b, max_distance).unwrap();
    let r2 = max_distance.map(|r| r * r).unwrap_or(T::INFINITY);
    let want = brute_nearest(a, b, r2);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(got.b[i], w.0, "{name}: nearest of A {i}");
        if w.0 == NO_ID {
            assert!(got.distance[i].to_f64().is_infinite());
        } else {
            assert_eq!(got.distance[i], w.1.sqrt(), "{name}: distance of A {i}");
        }
    }
    // The same from query rows, into the caller's memory, ids widened on the way.
    let index = nearkit::PointIndex::build(b, nearkit::Device::Cpu).unwrap();
    let rows: Vec<T> = (0..a.len()).flat_map(|i| a.get(i)).collect();
    let (mut d, mut ids) =
        (vec![std::mem::MaybeUninit::uninit(); a.len()], vec![std::mem::MaybeUninit::uninit(); a.len()]);
    index.nearest_rows_into(&rows, max_distance, &mut d, &mut ids, |b| b as u64).unwrap();
    for (i, w) in want.iter().enumerate() {
        // SAFETY: `nearest_rows_into` wrote every place.
        let (d, id) = unsafe { (d[i].assume_init(), ids[i].assume_init()) };
        assert_eq!(id, w.0 as u64, "{name}: nearest row {i}");
        assert_eq!(d.to_f64().to_bits(), got.distance[i].to_f64().to_bits(), "{name}: distance of row {i}");
    }
    let cut = &rows[..rows.len().saturating_sub(1)];
    assert!(
        rows.is_empty() || index.nearest_rows_into(cut, None, &mut d, &mut ids, |b| b as u64).is_err(),
        "{name}: not rows"
    );
}

fn all_checks<T: Real>(seed: u64) {
    for (name, a, b) in point_sets::<T>(seed, 1500, 700) {
        for k in [1, 7, 100, 5000] {
            check_nearest_per_a(&name, &a, &b, k, None);
        }
        check_all_pairs(&name, &a, &b, 50, None);
        check_nearest(&name, &a, &b, None);
        // A radius that cuts through the answers.
        let r = T::from_f64(if name == "one-vs-many" { 30.0 } else { 5.0 });
        check_nearest_per_a(&name, &a, &b, 100, Some(r));
        check_all_pairs(&name, &a, &b, 30, Some(r));
        check_nearest(&name, &a, &b, Some(r));
    }
}

#[test]
fn f32_matches_brute_force_on_every_shape() {
    all_checks::<f32>(7);
}

#[test]
fn f64_matches_brute_force_on_every_shape() {
    all_checks::<f64>(11);
}

#[test]
fn f32_answers_agree_with_an_f64_reference() {
    // The f32 search is exact in f32; against exact f64 arithmetic its chosen neighbour may
    // differ only where the two distances are within f32 rounding of each other.
    for (name, a, b) in point_sets::<f32>(3, 1200, 900) {
        let got = cpu().nearest(&a, &b, None).unwrap();
        let (a64, b64) = (a.cast::<f64>(), b.cast::<f64>());
        let want = brute_nearest(&a64, &b64, f64::INFINITY);
        for i in 0..a.len() {
            let g = d2_f64(&a, i, &b, got.b[i] as usize).sqrt();
            let w = want[i].1.sqrt();
            let scale = [a.x[i], a.y[i], a.z[i]].iter().map(|v| v.abs() as f64).fold(1.0, f64::max);
            assert!((g - w).abs() <= 1e-6 * scale + 1e-6 * w, "{name}: A {i}: f32 nearest at {g}, f64 nearest at {w}");
        }
    }
}

/// Sets large enough for the block search's every path: blocks whose walk finds too many
/// runs, groups with too many candidates, queries whose answer lies past the guessed reach
/// (clusters of A far from every cluster of B), long runs of ties, and a bounded radius.
fn large_uneven_sets<T: Real>(seed: u64) {
    use nearkit::generate::{generate, Distribution::*};
    let sets = [
        (
            "clustered vs other clusters",
            generate::<T>(Clustered, 12_000, 1000.0, seed),
            generate::<T>(Clustered, 5_000, 1000.0, seed + 1),
        ),
        (
            "duplicates",
            generate::<T>(Duplicates, 12_000, 1000.0, seed),
            generate::<T>(Duplicates, 5_000, 1000.0, seed + 1),
        ),
        (
            "uniform vs sphere",
            generate::<T>(Uniform, 12_000, 1000.0, seed),
            generate::<T>(Sphere, 5_000, 1000.0, seed + 1),
        ),
        (
            "plane vs uniform ints",
            generate::<T>(Plane, 12_000, 1000.0, seed),
            generate::<T>(UniformInt, 5_000, 64.0, seed + 1),
        ),
    ];
    for (name, a, b) in &sets {
        check_nearest(name, a, b, None);
        check_nearest(name, a, b, Some(T::from_f64(3.0)));
        check_nearest_per_a(name, a, b, 100, None);
    }
}

#[test]
fn nearest_on_large_uneven_sets_matches_brute_force() {
    large_uneven_sets::<f32>(71);
    large_uneven_sets::<f64>(72);
}

#[test]
fn k_larger_than_a_returns_every_a_once() {
    let a = Points::from_rows(&[[0.0f32, 0.0, 0.0], [5.0, 0.0, 0.0], [9.0, 9.0, 9.0]]);
    let b = Points::from_rows(&[[1.0f32, 0.0, 0.0]]);
    let got = cpu().closest_pairs(&a, &b, &PairsOptions { k: 100, ..Default::default() }).unwrap();
    assert_eq!(got.iter().map(|p| p.a).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(got.iter().map(|p| p.b).collect::<Vec<_>>(), vec![0, 0, 0]);
}

#[test]
fn bad_inputs_are_named() {
    let ok = Points::from_rows(&[[0.0f32, 0.0, 0.0]]);
    let empty = Points::<f32>::default();
    let nan = Points::from_rows(&[[0.0f32, 0.0, 0.0], [0.0, f32::NAN, 1.0]]);
    let opts = PairsOptions::<f32>::default();
    assert!(matches!(cpu().closest_pairs(&empty, &ok, &opts), Err(Error::EmptySet { .. })));
    assert!(matches!(cpu().closest_pairs(&ok, &empty, &opts), Err(Error::EmptySet { .. })));
    let e = cpu().closest_pairs(&ok, &nan, &opts).unwrap_err();
    assert!(matches!(e, Error::NonFinite { index: 1, axis: 'y', .. }), "{e}");
    assert!(e.to_string().contains("point 1") && e.to_string().contains("set B"), "{e}");
    let zero_k = PairsOptions { k: 0, ..opts };
    assert!(matches!(cpu().closest_pairs(&ok, &ok, &zero_k), Err(Error::ZeroK)));
    let neg = PairsOptions { max_distance: Some(-1.0), ..opts };
    assert!(matches!(cpu().closest_pairs(&ok, &ok, &neg), Err(Error::BadMaxDistance(_))));
}

fn small_grid_points() -> impl Strategy<Value = Points<f32>> {
    // Coordinates on a 6-step grid: many exact ties and duplicates.
    prop::collection::vec([0i32..6, 0i32..6, 0i32..6], 1..120)
        .prop_map(|rows| Points::from_rows(&rows.iter().map(|r| r.map(|v| v as f32 * 0.5)).collect::<Vec<_>>()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn ties_break_by_smaller_ids(a in small_grid_points(), b in small_grid_points(), k in 1usize..40) {
        check_nearest_per_a("proptest", &a, &b, k, None);
        check_all_pairs("proptest", &a, &b, k, None);
        check_nearest("proptest", &a, &b, None);
    }
}
