//! The kNN candidate grid against brute force: lists complete for any cell size, k, radius
//! and skipped self, on every input shape; and the CPU backend's kNN through it.

mod common;

use common::*;
use nearkit::generate::{generate, Distribution};
use nearkit::test_hooks::{knn_packed_top8, CandidateGrid, GridFrame, GridOptions};
use nearkit::test_hooks::{MortonTree, DEFAULT_LEAF_SIZE};
use nearkit::{KnnOptions, Points, Real, NO_ID};

/// The first k of all data points within r2 (not `skip`), by (squared distance, id).
fn brute<T: Real>(data: &Points<T>, q: [T; 3], k: usize, r2: T, skip: u32) -> Vec<(T, u32)> {
    let mut best: Vec<(T, u32)> = Vec::with_capacity(k + 1);
    for j in 0..data.len() {
        let p = data.get(j);
        let dx = q[0] - p[0];
        let dy = q[1] - p[1];
        let dz = q[2] - p[2];
        let d = dx * dx + dy * dy + dz * dz;
        if j as u32 == skip || d > r2 {
            continue;
        }
        let pos = best.partition_point(|&(bd, bid)| bd < d || (bd == d && bid < j as u32));
        if pos < k {
            best.insert(pos, (d, j as u32));
            best.truncate(k);
        }
    }
    best
}

fn check_grid<T: Real>(seed: u64) {
    let mut located = 0usize;
    for (name, queries, data) in point_sets::<T>(seed, 1500, 300) {
        let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
        if data.len() < 2 {
            continue;
        }
        let lo = [tree.lo[0][0], tree.lo[1][0], tree.lo[2][0]];
        let hi = [tree.hi[0][0], tree.hi[1][0], tree.hi[2][0]];
        // 20,000 cells build in two levels (TOP_CELLS), the others in one.
        for cells in [1, 60, 3000, 20_000] {
            let Some(frame) = GridFrame::plan(lo, hi, cells) else { continue };
            for (k, radius, self_set) in
                [(1, None, false), (8, None, false), (33, None, false), (5, Some(30.0), false), (6, None, true)]
            {
                let k = k.min(data.len() - usize::from(self_set));
                let r2 = radius.map_or(T::INFINITY, |r: f64| T::from_f64(r * r));
                let grid = CandidateGrid::build(&tree, frame, k + usize::from(self_set), r2, &GridOptions::default());
                let qs = if self_set { &data } else { &queries };
                let cand = grid.packed(&tree);
                let mut best = vec![(T::ZERO, NO_ID); k];
                let mut best_packed = best.clone();
                for i in 0..qs.len() {
                    let q = qs.get(i);
                    let skip = if self_set { i as u32 } else { NO_ID };
                    if !grid.knn(&tree, q, r2, skip, &mut best) {
                        continue;
                    }
                    located += 1;
                    // The packed records' scans (SIMD for f32 on x86-64; the top 8 in AVX2
                    // registers) give the same list.
                    assert!(grid.knn_packed(&tree, &cand, q, r2, skip, &mut best_packed));
                    assert_eq!(best_packed, best, "{name}: packed scan, {cells} cells, k {k}, query {i}");
                    assert!(knn_packed_top8(&grid, &tree, &cand, q, r2, skip, &mut best_packed));
                    assert_eq!(best_packed, best, "{name}: top 8 scan, {cells} cells, k {k}, query {i}");
                    let want = brute(&data, q, k, r2, skip);
                    let got: Vec<(T, u32)> = best.iter().copied().filter(|b| b.1 != NO_ID).collect();
                    assert_eq!(
                        got, want,
                        "{name}: {cells} cells, k {k}, radius {radius:?}, self {self_set}, query {i}"
                    );
                }
            }
        }
    }
    assert!(located > 100_000, "too few queries went through the grid: {located}");
}

#[test]
fn f32_grid_lists_are_complete() {
    check_grid::<f32>(71);
}

#[test]
fn f64_grid_lists_are_complete() {
    check_grid::<f64>(72);
}

/// Queries outside the data's box are refused (the caller falls back to the tree).
#[test]
fn grid_refuses_queries_outside() {
    let data = generate::<f32>(Distribution::Uniform, 500, 10.0, 3);
    let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
    let frame = GridFrame::plan(
        [tree.lo[0][0], tree.lo[1][0], tree.lo[2][0]],
        [tree.hi[0][0], tree.hi[1][0], tree.hi[2][0]],
        1000,
    )
    .unwrap();
    let grid = CandidateGrid::build(&tree, frame, 4, f32::INFINITY, &GridOptions::default());
    let mut best = vec![(0.0, NO_ID); 4];
    assert!(!grid.knn(&tree, [100.0, 5.0, 5.0], f32::INFINITY, NO_ID, &mut best));
    assert!(!grid.knn(&tree, [5.0, -50.0, 5.0], f32::INFINITY, NO_ID, &mut best));
    assert!(grid.knn(&tree, [5.0, 5.0, 5.0], f32::INFINITY, NO_ID, &mut best));
}

/// Enough queries for the CPU backend to pick the grid; answers equal brute force.
fn check_backend<T: Real>(seed: u64) {
    for dist in [Distribution::Uniform, Distribution::Clustered, Distribution::Sphere, Distribution::Duplicates] {
        let data = generate::<T>(dist, 700, 1000.0, seed);
        let queries = generate::<T>(Distribution::Uniform, 40_000, 1000.0, seed + 1);
        let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
        assert!(
            CandidateGrid::for_queries(&tree, queries.len(), 8, T::INFINITY, &GridOptions::default()).is_some(),
            "grid not chosen"
        );
        for opts in [
            KnnOptions { k: 8, ..Default::default() },
            KnnOptions { k: 3, max_distance: Some(T::from_f64(40.0)), exclude_self: false, ..Default::default() },
        ] {
            let got = cpu().knn(&data, &queries, &opts).unwrap();
            let r2 = opts.max_distance.map_or(T::INFINITY, |r| r * r);
            for q in 0..queries.len() {
                let want = brute(&data, queries.get(q), opts.k, r2, NO_ID);
                for j in 0..opts.k {
                    let (id, d) = (got.ids[q * opts.k + j], got.distances[q * opts.k + j]);
                    match want.get(j) {
                        Some(&(wd, wid)) => assert_eq!((id, d), (wid, wd.sqrt()), "{dist:?} query {q} rank {j}"),
                        None => assert!(id == NO_ID && d.to_f64().is_infinite(), "{dist:?} query {q} rank {j}"),
                    }
                }
            }
        }
        // The kNN graph of one set: each point skips itself, through the grid.
        let set = generate::<T>(dist, 40_000, 1000.0, seed + 2);
        for k in [1, 6] {
            let opts = KnnOptions { k, max_distance: None, exclude_self: true, ..Default::default() };
            let got = cpu().knn(&set, &set, &opts).unwrap();
            for q in (0..set.len()).step_by(13) {
                let want = brute(&set, set.get(q), k, T::INFINITY, q as u32);
                for (j, &(wd, wid)) in want.iter().enumerate() {
                    let (id, d) = (got.ids[q * k + j], got.distances[q * k + j]);
                    assert_eq!((id, d), (wid, wd.sqrt()), "{dist:?} graph, k {k}, query {q} rank {j}");
                }
            }
        }
    }
}

#[test]
fn f32_cpu_knn_through_grid_matches_brute_force() {
    check_backend::<f32>(81);
}

#[test]
fn f64_cpu_knn_through_grid_matches_brute_force() {
    check_backend::<f64>(82);
}

/// Points of a small integer lattice, their ids shuffled (so that list order is not id
/// order), queried from lattice and half-lattice points: many neighbours tie at the k-th
/// place, and the one with the smaller id must win wherever it comes in the scan (that of
/// the top 8 in registers where it applies, else the portable one).
fn check_lattice_ties<T: Real>(seed: u64) {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut cells: Vec<[i32; 3]> = (0..7 * 7 * 7).map(|i| [i % 7, (i / 7) % 7, i / 49]).collect();
    cells.shuffle(&mut rng);
    let mut data = Points::with_capacity(cells.len());
    for c in &cells {
        data.push(T::from_f64(c[0] as f64), T::from_f64(c[1] as f64), T::from_f64(c[2] as f64));
    }
    let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
    let lo = [tree.lo[0][0], tree.lo[1][0], tree.lo[2][0]];
    let hi = [tree.hi[0][0], tree.hi[1][0], tree.hi[2][0]];
    let mut checked = 0;
    for cells in [60, 700] {
        let frame = GridFrame::plan(lo, hi, cells).unwrap();
        for k in [1, 2, 4, 5, 7, 8, 9, 12] {
            for radius in [None, Some(1.5), Some(2.0)] {
                let r2 = radius.map_or(T::INFINITY, |r: f64| T::from_f64(r * r));
                let grid = CandidateGrid::build(&tree, frame, k, r2, &GridOptions::default());
                let cand = grid.packed(&tree);
                let mut best = vec![(T::ZERO, NO_ID); k];
                for i in 0..13 * 13 * 13 {
                    let q = [i % 13, (i / 13) % 13, i / 169].map(|v| T::from_f64(v as f64 * 0.5));
                    if !knn_packed_top8(&grid, &tree, &cand, q, r2, NO_ID, &mut best) {
                        continue;
                    }
                    let want = brute(&data, q, k, r2, NO_ID);
                    let got: Vec<(T, u32)> = best.iter().copied().filter(|b| b.1 != NO_ID).collect();
                    assert_eq!(got, want, "{cells} cells, k {k}, radius {radius:?}, query {q:?}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50_000, "too few queries went through the grid: {checked}");
}

#[test]
fn f32_grid_breaks_lattice_ties_by_id() {
    check_lattice_ties::<f32>(91);
}

#[test]
fn f64_grid_breaks_lattice_ties_by_id() {
    check_lattice_ties::<f64>(92);
}
