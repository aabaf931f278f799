//! Exact kNN on the CPU against brute force, on every input shape, in f32 and f64.

mod common;

use common::*;
use nearkit::{Error, KnnOptions, Points, Real, NO_ID};
use proptest::prelude::*;

/// Brute force: every data point, sorted by (squared distance, id), the first k within r2.
fn brute_knn<T: Real>(
    data: &Points<T>,
    queries: &Points<T>,
    k: usize,
    r2: T,
    exclude_self: bool,
) -> Vec<Vec<(T, u32)>> {
    (0..queries.len())
        .map(|q| {
            let mut all: Vec<(T, u32)> = (0..data.len())
                .filter(|&j| !(exclude_self && j == q))
                .map(|j| (d2(queries, q, data, j), j as u32))
                .filter(|&(d, _)| d <= r2)
                .collect();
            all.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap().then(x.1.cmp(&y.1)));
            all.truncate(k);
            all
        })
        .collect()
}

pub fn check_knn<T: Real>(name: &str, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) {
    let got = cpu().knn(data, queries, opts).unwrap();
    let r2 = opts.max_distance.map(|r| r * r).unwrap_or(T::INFINITY);
    let k = got.k;
    assert_eq!(k, opts.k.min(data.len() - usize::from(opts.exclude_self)).max(1), "{name}: effective k");
    let want = brute_knn(data, queries, k, r2, opts.exclude_self);
    for (q, w) in want.iter().enumerate() {
        for j in 0..k {
            let (gid, gd) = (got.ids[q * k + j], got.distances[q * k + j]);
            match w.get(j) {
                Some(&(d, id)) => assert_eq!((gid, gd), (id, d.sqrt()), "{name}: query {q}, rank {j}"),
                None => {
                    assert!(gid == NO_ID && gd.to_f64().is_infinite(), "{name}: query {q}, rank {j} should be empty")
                }
            }
        }
    }
}

fn all_checks<T: Real>(seed: u64) {
    for (name, queries, data) in point_sets::<T>(seed, 600, 900) {
        for k in [1, 8, 33] {
            check_knn(&name, &data, &queries, &KnnOptions { k, ..Default::default() });
        }
        let r = T::from_f64(if name == "one-vs-many" { 40.0 } else { 6.0 });
        check_knn(
            &name,
            &data,
            &queries,
            &KnnOptions { k: 16, max_distance: Some(r), exclude_self: false, ..Default::default() },
        );
        // The kNN graph of one set.
        check_knn(
            &name,
            &data,
            &data,
            &KnnOptions { k: 5, max_distance: None, exclude_self: true, ..Default::default() },
        );
    }
}

/// Large data and few queries a cell (no candidate grid): the block search of every query
/// path, with clusters of queries far from the data's clusters, duplicates, surfaces, a radius,
/// the kNN graph, and k past the block search's largest.
fn block_search_checks<T: Real>(seed: u64) {
    use nearkit::generate::{generate, Distribution::*};
    let sets = [
        (
            "clustered vs other clusters",
            generate::<T>(Clustered, 1_500, 1000.0, seed),
            generate::<T>(Clustered, 2_500, 1000.0, seed + 1),
        ),
        (
            "duplicates",
            generate::<T>(Duplicates, 1_500, 1000.0, seed),
            generate::<T>(Duplicates, 2_500, 1000.0, seed + 1),
        ),
        (
            "uniform vs sphere",
            generate::<T>(Uniform, 1_500, 1000.0, seed),
            generate::<T>(Sphere, 2_500, 1000.0, seed + 1),
        ),
        (
            "plane vs uniform ints",
            generate::<T>(Plane, 1_500, 1000.0, seed),
            generate::<T>(UniformInt, 2_500, 64.0, seed + 1),
        ),
    ];
    let no_grid = nearkit::GridOptions { queries_per_cell: usize::MAX, ..Default::default() };
    for (name, queries, data) in &sets {
        for k in [3, 16, 40] {
            check_knn(name, data, queries, &KnnOptions { k, grid: no_grid, ..Default::default() });
        }
        let r = Some(T::from_f64(4.0));
        check_knn(name, data, queries, &KnnOptions { k: 8, max_distance: r, grid: no_grid, ..Default::default() });
        check_knn(name, data, data, &KnnOptions { k: 6, exclude_self: true, grid: no_grid, ..Default::default() });
    }
}

#[test]
fn block_search_matches_brute_force() {
    block_search_checks::<f32>(31);
    block_search_checks::<f64>(32);
}

#[test]
fn f32_knn_matches_brute_force() {
    all_checks::<f32>(51);
}

#[test]
fn f64_knn_matches_brute_force() {
    all_checks::<f64>(52);
}

#[test]
fn knn_clamps_k_and_rejects_bad_input() {
    let data = Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0]]);
    let got = cpu().knn(&data, &data, &KnnOptions { k: 10, ..Default::default() }).unwrap();
    assert_eq!(got.k, 2);
    assert_eq!(got.ids, vec![0, 1, 1, 0]);
    let e = cpu().knn(&data, &data, &KnnOptions { k: 0, ..Default::default() }).unwrap_err();
    assert!(matches!(e, Error::ZeroK));
    let other = Points::from_rows(&[[0.0f32, 0.0, 0.0]]);
    let e = cpu()
        .knn(&data, &other, &KnnOptions { k: 1, max_distance: None, exclude_self: true, ..Default::default() })
        .unwrap_err();
    assert!(e.to_string().contains("exclude-self"), "{e}");
    let nan = Points::from_rows(&[[0.0f32, f32::NAN, 0.0]]);
    assert!(matches!(cpu().knn(&data, &nan, &KnnOptions::default()), Err(Error::NonFinite { .. })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn knn_ties_break_by_smaller_id(
        data in prop::collection::vec([0i32..5, 0i32..5, 0i32..5], 1..90),
        queries in prop::collection::vec([0i32..5, 0i32..5, 0i32..5], 1..40),
        k in 1usize..20,
    ) {
        let p = |v: &Vec<[i32; 3]>| Points::from_rows(&v.iter().map(|r| r.map(|c| c as f32)).collect::<Vec<_>>());
        check_knn("proptest", &p(&data), &p(&queries), &KnnOptions { k, ..Default::default() });
    }
}

/// `knn_into` a reused buffer gives `knn`'s answer, call after call, growing and shrinking.
#[test]
fn knn_into_a_reused_buffer_matches_knn() {
    use nearkit::{Device, KnnBuffer, PointIndex};
    let mut out = KnnBuffer::new();
    for (name, a, b) in point_sets::<f32>(33, 300, 900) {
        let index = PointIndex::build(&b, Device::Cpu).unwrap();
        for k in [1, 8] {
            index.knn_into(&a, &KnnOptions::k(k), &mut out).unwrap();
            let want = index.knn(&a, &KnnOptions::k(k)).unwrap();
            assert_eq!(out.to_knn(), want, "{name} k={k}");
            assert_eq!((out.len(), out.k()), (a.len(), want.k));
        }
    }
}

/// `knn_into_slices` writes `knn`'s answer into the caller's memory, ids mapped on the way
/// (the grid, the block search and k = 1 alike), and refuses slices of the wrong size.
#[test]
fn knn_into_slices_matches_knn() {
    use nearkit::{Device, PointIndex};
    use std::mem::MaybeUninit;
    let widen = |id: u32| if id == NO_ID { -1i64 } else { i64::from(id) };
    for (name, a, b) in point_sets::<f64>(35, 40_000, 3_000).into_iter().chain(point_sets::<f64>(36, 500, 2_000)) {
        let index = PointIndex::build(&b, Device::Cpu).unwrap();
        for opts in
            [KnnOptions::k(1), KnnOptions::k(8), KnnOptions { k: 5, max_distance: Some(30.0), ..Default::default() }]
        {
            let want = index.knn(&a, &opts).unwrap();
            let k = index.knn_k(a.len(), &opts).unwrap();
            assert_eq!(k, want.k);
            let mut d = vec![MaybeUninit::<f64>::uninit(); a.len() * k];
            let mut ids = vec![MaybeUninit::<i64>::uninit(); a.len() * k];
            assert_eq!(index.knn_into_slices(&a, &opts, &mut d, &mut ids, widen).unwrap(), k);
            // SAFETY: every place was written.
            let (d, ids): (Vec<f64>, Vec<i64>) =
                unsafe { (d.iter().map(|v| v.assume_init()).collect(), ids.iter().map(|v| v.assume_init()).collect()) };
            assert_eq!(d, want.distances, "{name} {opts:?}");
            assert_eq!(ids, want.ids.iter().map(|&i| widen(i)).collect::<Vec<_>>(), "{name} {opts:?}");
            // The same queries as rows, read in place: the same answer.
            let rows: Vec<[f64; 3]> = (0..a.len()).map(|i| a.get(i)).collect();
            let mut d_rows = vec![MaybeUninit::<f64>::uninit(); a.len() * k];
            let mut ids_rows = vec![MaybeUninit::<i64>::uninit(); a.len() * k];
            assert_eq!(index.knn_into_slices(&rows[..], &opts, &mut d_rows, &mut ids_rows, widen).unwrap(), k);
            // SAFETY: every place was written.
            let (d_rows, ids_rows): (Vec<f64>, Vec<i64>) = unsafe {
                (d_rows.iter().map(|v| v.assume_init()).collect(), ids_rows.iter().map(|v| v.assume_init()).collect())
            };
            assert_eq!((d_rows, ids_rows), (d.clone(), ids.clone()), "{name} {opts:?}, rows");
            // And as borrowed columns.
            let cols = nearkit::PointColumns { x: &a.x, y: &a.y, z: &a.z };
            let mut d_cols = vec![MaybeUninit::<f64>::uninit(); a.len() * k];
            let mut ids_cols = vec![MaybeUninit::<i64>::uninit(); a.len() * k];
            assert_eq!(index.knn_into_slices(&cols, &opts, &mut d_cols, &mut ids_cols, widen).unwrap(), k);
            // SAFETY: every place was written.
            let (d_cols, ids_cols): (Vec<f64>, Vec<i64>) = unsafe {
                (d_cols.iter().map(|v| v.assume_init()).collect(), ids_cols.iter().map(|v| v.assume_init()).collect())
            };
            assert_eq!((d_cols, ids_cols), (d, ids), "{name} {opts:?}, borrowed columns");
        }
        let wrong = a.len() * index.knn_k(a.len(), &KnnOptions::k(2)).unwrap() + 1;
        let mut short = vec![MaybeUninit::<f64>::uninit(); wrong];
        let mut ids = vec![MaybeUninit::<i64>::uninit(); wrong];
        let err = index.knn_into_slices(&a, &KnnOptions::k(2), &mut short, &mut ids, widen).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{name}: {err}");
    }
    // A graph (each point's neighbours but itself) through the same path.
    let (_, _, b) = point_sets::<f64>(37, 10, 50_000).swap_remove(0);
    let index = PointIndex::build(&b, Device::Cpu).unwrap();
    let opts = KnnOptions { k: 4, exclude_self: true, ..Default::default() };
    let want = index.knn(&b, &opts).unwrap();
    let mut d = vec![MaybeUninit::<f64>::uninit(); b.len() * 4];
    let mut ids = vec![MaybeUninit::<u32>::uninit(); b.len() * 4];
    index.knn_into_slices(&b, &opts, &mut d, &mut ids, |i| i).unwrap();
    // SAFETY: every place was written.
    let ids: Vec<u32> = unsafe { ids.iter().map(|v| v.assume_init()).collect() };
    assert_eq!(ids, want.ids);
}

/// Rows are checked as columns are: the same errors (the first bad x, else y, else z), and
/// far-off coordinates scaled as the index needs.
#[test]
fn knn_of_rows_checks_and_scales_as_columns() {
    use nearkit::{Device, PointIndex, QueryPoints};
    use std::mem::MaybeUninit;
    let data = point_sets::<f64>(38, 10, 2_000).swap_remove(0).2;
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    let mut rows: Vec<[f64; 3]> = (0..500).map(|i| data.get(i)).collect();
    rows[300][2] = f64::NAN;
    rows[200][1] = f64::INFINITY;
    let cols = Points::from_rows(&rows);
    let (mut d, mut ids) = (vec![MaybeUninit::<f64>::uninit(); 500], vec![MaybeUninit::<u32>::uninit(); 500]);
    let from_rows = index.knn_into_slices(&rows[..], &KnnOptions::k(1), &mut d, &mut ids, |i| i).unwrap_err();
    let from_cols = index.knn_into_slices(&cols, &KnnOptions::k(1), &mut d, &mut ids, |i| i).unwrap_err();
    assert_eq!(from_rows.to_string(), from_cols.to_string());
    assert!(from_rows.to_string().contains("200"), "{from_rows}");
    let empty: &[[f64; 3]] = &[];
    assert_eq!(
        empty.validate(nearkit::Role::Queries).unwrap_err().to_string(),
        Points::<f64>::default().validate(nearkit::Role::Queries).unwrap_err().to_string()
    );
    // Data far from 1: the index scales coordinates by a power of two, rows too.
    let far = Points::from_rows(&(0..3_000).map(|i| data.get(i % data.len()).map(|v| v * 1e200)).collect::<Vec<_>>());
    let index = PointIndex::build(&far, Device::Cpu).unwrap();
    let rows: Vec<[f64; 3]> = (0..2_000).map(|i| far.get(i).map(|v| v * 0.999)).collect();
    let want = index.knn(&Points::from_rows(&rows), &KnnOptions::k(3)).unwrap();
    let (mut d, mut ids) = (vec![MaybeUninit::<f64>::uninit(); 6_000], vec![MaybeUninit::<u32>::uninit(); 6_000]);
    index.knn_into_slices(&rows[..], &KnnOptions::k(3), &mut d, &mut ids, |i| i).unwrap();
    // SAFETY: every place was written.
    let (d, ids): (Vec<f64>, Vec<u32>) =
        unsafe { (d.iter().map(|v| v.assume_init()).collect(), ids.iter().map(|v| v.assume_init()).collect()) };
    assert_eq!((d, ids), (want.distances, want.ids));
}
