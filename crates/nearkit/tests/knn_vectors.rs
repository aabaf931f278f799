//! kNN of vectors of any dimension on the CPU: exact against brute force (several dimensions
//! and shapes, ties included), and the shifted-sort approximation's own guarantees.

mod common;

use common::*;
use nearkit::test_hooks::dist2_nd;
use nearkit::{KnnOptions, Real, ShiftedSortOptions, Vectors, NO_ID};

fn check_rows<T: Real>(name: &str, got: &nearkit::Knn<T>, want: &[Vec<(T, u32)>]) {
    let k = got.k;
    for (q, w) in want.iter().enumerate() {
        for j in 0..k {
            let (id, d) = (got.ids[q * k + j], got.distances[q * k + j]);
            match w.get(j) {
                Some(&(d2, wid)) => {
                    assert_eq!((id, d.ordered_bits()), (wid, d2.sqrt().ordered_bits()), "{name}: query {q} rank {j}")
                }
                None => assert!(id == NO_ID && d == T::INFINITY, "{name}: query {q} rank {j} should be empty"),
            }
        }
    }
}

fn exact_matches_brute_force<T: Real>(seed: u64) {
    for (name, data, queries) in vector_sets::<T>(seed, 1200, 300) {
        for (k, r) in [(1, None), (8, None), (40, Some(30.0))] {
            let opts = KnnOptions { k, max_distance: r.map(T::from_f64), exclude_self: false, ..Default::default() };
            let got = cpu().knn_vectors(&data, &queries, &opts).unwrap();
            let r2 = r.map_or(T::INFINITY, |r| T::from_f64(r) * T::from_f64(r));
            check_rows(&format!("{name} k={k}"), &got, &brute_knn_vectors(&data, &queries, k, r2, false));
        }
        let opts = KnnOptions { k: 5, max_distance: None, exclude_self: true, ..Default::default() };
        let got = cpu().knn_vectors(&data, &data, &opts).unwrap();
        check_rows(&format!("{name} graph"), &got, &brute_knn_vectors(&data, &data, 5, T::INFINITY, true));
    }
}

#[test]
fn f32_vector_knn_matches_brute_force() {
    exact_matches_brute_force::<f32>(11);
}

#[test]
fn f64_vector_knn_matches_brute_force() {
    exact_matches_brute_force::<f64>(12);
}

/// The f32 answer is the true (f64) k nearest up to f32 rounding of the distances.
#[test]
fn f32_vector_knn_agrees_with_an_f64_reference() {
    for (name, data, queries) in vector_sets::<f32>(13, 800, 200) {
        let got = cpu().knn_vectors(&data, &queries, &KnnOptions { k: 8, ..Default::default() }).unwrap();
        let want = brute_knn_vectors(&data.cast::<f64>(), &queries.cast::<f64>(), 8, f64::INFINITY, false);
        let dim = data.dim();
        for (q, w) in want.iter().enumerate() {
            let qv = queries.cast::<f64>().get(q);
            for (j, &(d2, _)) in w.iter().enumerate() {
                let id = got.ids[q * 8 + j] as usize;
                let mine = dist2_nd(dim, &qv, &data.cast::<f64>().get(id)).sqrt();
                assert!(mine <= d2.sqrt() * (1.0 + 1e-5) + 1e-4, "{name}: query {q} rank {j}: {mine} vs {}", d2.sqrt());
            }
        }
    }
}

/// A window covering the whole data set makes the approximation exact.
#[test]
fn shifted_sort_with_a_full_window_is_exact() {
    for (name, data, queries) in vector_sets::<f32>(14, 500, 200) {
        let opts = ShiftedSortOptions { k: 8, shifts: 1, window: 500 };
        let got = cpu().approx_knn(&data, &queries, &opts).unwrap();
        check_rows(&name, &got, &brute_knn_vectors(&data, &queries, 8, f32::INFINITY, false));
    }
}

/// Small windows: rows ascending, no repeated id, each distance that of its id; and more
/// shifts or a wider window never lower the recall much on uniform 3-D data.
#[test]
fn shifted_sort_rows_are_consistent_and_recall_grows() {
    for (name, data, queries) in vector_sets::<f64>(15, 3000, 400) {
        let dim = data.dim();
        let exact = brute_knn_vectors(&data, &queries, 8, f64::INFINITY, false);
        let mut recalls = vec![];
        for (shifts, window) in [(1, 4), (4, 8), (8, 32)] {
            let got = cpu().approx_knn(&data, &queries, &ShiftedSortOptions { k: 8, shifts, window }).unwrap();
            let mut hits = 0;
            for q in 0..queries.len() {
                let row = &got.ids[q * 8..q * 8 + 8];
                let ds = &got.distances[q * 8..q * 8 + 8];
                for j in 0..8 {
                    assert_ne!(row[j], NO_ID, "{name}: 2·window·shifts >= k, so every row fills");
                    assert_eq!(ds[j], dist2_nd(dim, &queries.get(q), &data.get(row[j] as usize)).sqrt(), "{name}");
                    if j > 0 {
                        assert!((ds[j - 1], row[j - 1]) < (ds[j], row[j]), "{name}: row {q} not ascending/distinct");
                    }
                }
                // Recall by distance: ties make ids ambiguous.
                let kth = exact[q][7].0.sqrt();
                hits += ds.iter().filter(|&&d| d <= kth).count();
            }
            recalls.push(hits as f64 / (8 * queries.len()) as f64);
        }
        assert!(recalls[2] >= recalls[0], "{name}: recall {recalls:?}");
        eprintln!("{name}: recall@8 {recalls:?}");
        assert!(recalls[2] > 0.3, "{name}: recall {recalls:?}");
    }
}

#[test]
fn bad_vector_input_is_named() {
    let a = Vectors::<f32>::from_row_major(2, &[0.0, 0.0, 1.0, 1.0]).unwrap();
    let b = Vectors::<f32>::from_row_major(3, &[0.0, 0.0, 0.0]).unwrap();
    let err = cpu().knn_vectors(&a, &b, &KnnOptions::default()).unwrap_err().to_string();
    assert!(err.contains("2-D") && err.contains("3-D"), "{err}");
    let err = cpu().knn_vectors(&a, &a, &KnnOptions { k: 0, ..Default::default() }).unwrap_err().to_string();
    assert!(err.contains("k must be"), "{err}");
    let nan = Vectors::<f32>::from_row_major(2, &[0.0, f32::NAN]).unwrap();
    let err = cpu().knn_vectors(&a, &nan, &KnnOptions::default()).unwrap_err().to_string();
    assert!(err.contains("NaN") && err.contains("queries"), "{err}");
    let err = cpu().approx_knn(&a, &a, &ShiftedSortOptions { k: 1, shifts: 0, window: 4 }).unwrap_err();
    assert!(err.to_string().contains("shifts"), "{err}");
    let err = cpu().approx_knn(&a, &a, &ShiftedSortOptions { k: 1, shifts: 2, window: 0 }).unwrap_err();
    assert!(err.to_string().contains("window"), "{err}");
    assert!(Vectors::<f32>::new(vec![vec![0.0]; 9]).is_err(), "9-D is refused");
}

/// The closest point on a triangle is never farther than any sampled point of the triangle.
#[test]
fn closest_point_on_triangle_beats_samples() {
    use nearkit::closest_point_triangle;
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
    let mut v = || [rng.random::<f64>() * 2.0 - 1.0, rng.random::<f64>() * 2.0 - 1.0, rng.random::<f64>() * 2.0 - 1.0];
    let d = |a: [f64; 3], b: [f64; 3]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
    for t in 0..300 {
        let (a, b, mut c, p) = (v(), v(), v(), v());
        if t % 10 == 0 {
            c = [(a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0, (a[2] + b[2]) / 2.0];
            // degenerate
        }
        let q = closest_point_triangle(p, a, b, c).point;
        let best = d(p, q);
        for i in 0..=40 {
            for j in 0..=(40 - i) {
                let (u, w) = (i as f64 / 40.0, j as f64 / 40.0);
                let s = [0, 1, 2].map(|k| a[k] + (b[k] - a[k]) * u + (c[k] - a[k]) * w);
                assert!(best <= d(p, s) + 1e-12, "triangle {t}: {best} > {}", d(p, s));
            }
        }
    }
}

/// Many 6-D triangle-box queries go through the candidate grid over their 3-D space; the
/// answers must still be the brute-force ones (checked on every 7th query).
#[test]
fn triangle_box_queries_through_the_grid_match_brute_force() {
    use nearkit::test_hooks::{embedded_grid, GridOptions, VectorTree};
    for (name, data, queries) in vector_sets::<f32>(16, 1500, 40_000).into_iter().filter(|s| s.0.starts_with("6-D")) {
        for k in [1, 8, 20] {
            let tree = VectorTree::build(&data);
            assert!(embedded_grid(&tree, &queries, k, f32::INFINITY, &GridOptions::default()).is_some(), "{name}");
            let got = cpu().knn_vectors(&data, &queries, &KnnOptions { k, ..Default::default() }).unwrap();
            let pick: Vec<usize> = (0..queries.len()).step_by(7).collect();
            let sub = Vectors { cols: queries.cols.iter().map(|c| pick.iter().map(|&i| c[i]).collect()).collect() };
            let want = brute_knn_vectors(&data, &sub, k, f32::INFINITY, false);
            let rows = nearkit::Knn {
                k,
                ids: pick.iter().flat_map(|&q| got.ids[q * k..(q + 1) * k].to_vec()).collect(),
                distances: pick.iter().flat_map(|&q| got.distances[q * k..(q + 1) * k].to_vec()).collect(),
            };
            check_rows(&format!("{name} k={k}"), &rows, &want);
        }
    }
}
