//! Exact k-nearest neighbours on the CPU, queries in a coherent order for cache reuse. k = 1
//! is a nearest search (pairs/cpu.rs). Many queries against the same data go through a
//! `CandidateGrid` (a short scan per query); where the grid does not pay (large data), queries
//! about as many as the data points go through the block search (`tree::nearest_block`), and
//! the rest (few queries, large k) take a bounded best-first search of the data's
//! `MortonTree`. All give the same exact answer.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{Knn, KnnOptions};
use crate::geometry::points::NO_ID;
use crate::geometry::points::{Points, QueryPoints};
use crate::geometry::real::Real;
use crate::knn::grid::{CandidateGrid, GridCand};
use crate::knn::grid_top8;
use crate::runtime::cpu::{big_vec, prefetch, write_mapped, RowPtr};
use crate::runtime::profile::Phases;
use crate::tree::nearest_block::{knn_block, NearestScratch, BLOCK, BLOCK_MAX_K, QUERY_GRAIN, RUN};
use crate::tree::search;
use crate::tree::MortonTree;

/// Each query's `k` nearest points of `tree` within squared radius `r2` (`opts` says whether
/// to skip a query's own id, and how to size the grid); phase times on stderr if `profile`.
pub(crate) fn knn<T: Real>(
    tree: &MortonTree<T>,
    queries: &Points<T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    profile: bool,
) -> Knn<T> {
    if k == 1 && !opts.exclude_self {
        // One neighbour is a nearest search: blocks of queries (tree::nearest_block) beat the
        // grid and the single-query walk alike.
        let found = crate::pairs::cpu::nearest(tree, queries, r2, profile);
        return Knn { k, ids: found.b, distances: found.distance };
    }
    let len = queries.len() * k;
    let (mut ids, mut distances) = (big_vec::<u32>(len), big_vec::<T>(len));
    knn_to(tree, queries, opts, k, r2, profile, ids.spare_capacity_mut(), distances.spare_capacity_mut(), &|id| id);
    // SAFETY: `knn_to` wrote every row.
    unsafe {
        ids.set_len(len);
        distances.set_len(len);
    }
    Knn { k, ids, distances }
}

/// [`knn`] into the caller's memory (`queries.len() * k` places each, which may be
/// uninitialised; every one is written), each id passed through `id` on its way (a widening
/// to the caller's type, say): the rows are written once, where they belong.
#[allow(clippy::too_many_arguments)]
pub(crate) fn knn_to<T: Real, I: Send + Sync, Q: QueryPoints<T> + ?Sized>(
    tree: &MortonTree<T>,
    queries: &Q,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    profile: bool,
    ids: &mut [MaybeUninit<I>],
    distances: &mut [MaybeUninit<T>],
    id: &(impl Fn(u32) -> I + Sync),
) {
    let n = queries.len();
    assert!(ids.len() == n * k && distances.len() == n * k, "k places a query");
    if k == 1 && !opts.exclude_self {
        // As in `knn`, which keeps these vectors as its result instead of copying them.
        let found = crate::pairs::cpu::nearest(tree, &queries.columns(), r2, profile);
        write_mapped(ids, &found.b, id);
        write_mapped(distances, &found.distance, |d| d);
        return;
    }
    let mut prof = Phases::new("cpu knn", profile);
    // The grid's lists (then their packed records) and the queries' order in its cells are
    // built side by side: each has serial steps, which the other's work fills.
    let k_list = k + usize::from(opts.exclude_self);
    let (grid, order) = match CandidateGrid::frame_for_queries(tree, queries.len(), k_list, &opts.grid) {
        Some(frame) => {
            let (g, o) = rayon::join(
                || {
                    let g = CandidateGrid::build(tree, frame, k_list, r2, &opts.grid);
                    let cand = g.packed(tree);
                    (g, cand)
                },
                || frame.sorted_queries(queries),
            );
            (Some(g), Some(o))
        }
        None => (None, None),
    };
    prof.mark("grid, packed lists and query order");
    let at = RowWriter { k, ids: RowPtr(ids.as_mut_ptr()), distances: RowPtr(distances.as_mut_ptr()), id };
    if grid.is_none() && k <= BLOCK_MAX_K && tree.len() <= BLOCK_MAX_DATA_PER_QUERY * queries.len() {
        knn_blocks(tree, &queries.columns(), k, r2, opts.exclude_self, &mut prof, &at);
        prof.report();
        return;
    }
    // Through the grid, queries go cell by cell (each cell's list stays in cache) and read
    // packed records; the tree search wants Morton order.
    let (grid, order, cand) = match (grid, order) {
        (Some((g, cand)), Some(order)) => (Some(g), order, cand),
        _ => {
            let order = tree.morton_order(&queries.columns());
            let order = order.par_iter().map(|&i| GridCand { p: queries.get(i as usize), id: i }).collect();
            prof.mark("query order");
            (None, order, Vec::new())
        }
    };
    // Queries run in a coherent order (cache reuse) and write their rows in place: each query
    // owns its row, so the parallel writes never overlap, and every row is written whole, so
    // the arrays need no filling first. The rows land in random places: each query prefetches
    // the rows of the query `AHEAD` of it, so that those misses overlap the scans.
    const AHEAD: usize = 16;
    order.par_chunks(256).for_each_init(
        || (Vec::new(), vec![(T::ZERO, NO_ID); k]),
        |(buf, best), chunk| {
            for (i, &GridCand { p, id: q }) in chunk.iter().enumerate() {
                if let Some(ahead) = chunk.get(i + AHEAD) {
                    at.prefetch_row(ahead.id);
                }
                let skip = if opts.exclude_self { q } else { NO_ID };
                let found: &[(T, u32)] = match &grid {
                    Some(g) if grid_top8::knn_packed(g, tree, &cand, p, r2, skip, best) => best,
                    _ => {
                        search::knn(tree, p, k, r2, skip, buf);
                        buf
                    }
                };
                // SAFETY: each query appears once in `order`, so only this task writes its row.
                unsafe { at.write_row(q, found) };
            }
        },
    );
    prof.mark("search");
    prof.report();
}

/// The block search lists every candidate near a group of 16 queries, and each goes down
/// the lists of the queries it is near: past a few data points per query (or a long list),
/// the single-query search does less (2 cores, 1M queries: k = 8 over 400K points 2.3×
/// faster in blocks, over 1M 1.7×, over 3M the same; k = 16 over 3M 0.76×).
const BLOCK_MAX_DATA_PER_QUERY: usize = 2;

/// The kNN rows through the block search (`tree::nearest_block::knn_block`), queries in
/// Morton order, each block reaching as far as the previous one's farthest k-th neighbour.
fn knn_blocks<T: Real, I: Send + Sync, F: Fn(u32) -> I + Sync>(
    tree: &MortonTree<T>,
    queries: &Points<T>,
    k: usize,
    r2: T,
    skip_self: bool,
    prof: &mut Phases,
    at: &RowWriter<'_, T, I, F>,
) {
    let order = tree.morton_order(queries);
    prof.mark("query order");
    order.par_chunks(QUERY_GRAIN).for_each(|run| {
        knn_run_fast(tree, queries, run, k, r2, skip_self, &mut |q, row| {
            // SAFETY: each query appears once in `order`, so only this task writes its row.
            unsafe { at.write_row(q, row) };
        });
    });
    prof.mark("search");
}

/// Where the parallel searches write their rows: the caller's arrays, `k` slots a query,
/// uninitialised until then (each row is written whole), ids mapped by `id`.
struct RowWriter<'a, T, I, F> {
    k: usize,
    ids: RowPtr<MaybeUninit<I>>,
    distances: RowPtr<MaybeUninit<T>>,
    id: &'a F,
}

impl<T: Real, I: Send + Sync, F: Fn(u32) -> I + Sync> RowWriter<'_, T, I, F> {
    /// Query `q`'s row: the entries of `found` (squared distance, id) in order as (id,
    /// distance), then empty slots (`NO_ID`, infinite) up to k.
    ///
    /// # Safety
    /// Row `q` must lie inside the arrays, and no one else may write it meanwhile.
    #[inline(always)]
    unsafe fn write_row(&self, q: u32, found: &[(T, u32)]) {
        for j in 0..self.k {
            let (id, d) = match found.get(j) {
                Some(&(d2, id)) if id != NO_ID => (id, d2.sqrt()),
                _ => (NO_ID, T::INFINITY),
            };
            let at = q as usize * self.k + j;
            self.ids.write(at, MaybeUninit::new((self.id)(id)));
            self.distances.write(at, MaybeUninit::new(d));
        }
    }

    /// Asks for row `q`'s cache lines ahead of its write.
    #[inline(always)]
    fn prefetch_row(&self, q: u32) {
        prefetch(self.ids.0.wrapping_add(q as usize * self.k), self.k);
        prefetch(self.distances.0.wrapping_add(q as usize * self.k), self.k);
    }
}

/// The rows of the queries `run` (consecutive in Morton order), handed to `found(query, row)`.
#[inline(always)]
fn knn_run<T: Real>(
    tree: &MortonTree<T>,
    queries: &Points<T>,
    run: &[u32],
    k: usize,
    r2: T,
    skip_self: bool,
    found: &mut impl FnMut(u32, &[(T, u32)]),
) {
    let mut scratch = NearestScratch::default();
    let mut buf = Vec::new();
    let mut block = [([T::ZERO; 3], 0u32); BLOCK];
    let mut out = vec![(T::ZERO, NO_ID); BLOCK * k];
    let mut reach2 = r2;
    for (g, ids) in run.chunks(BLOCK).enumerate() {
        for (slot, &i) in block.iter_mut().zip(ids) {
            *slot = (queries.get(i as usize), i);
        }
        let m = ids.len();
        if g == 0 {
            // The first query alone gives the first guess of the reach.
            let skip = if skip_self { block[0].1 } else { NO_ID };
            search::knn(tree, block[0].0, k, r2, skip, &mut buf);
            if let Some(&(d2, _)) = buf.get(k - 1) {
                reach2 = d2 * T::from_f64(4.0);
            }
        }
        let far =
            knn_block(tree, &block[..m], k, r2, reach2, RUN, skip_self, &mut scratch, &mut buf, &mut out[..m * k]);
        reach2 = far;
        for (&(_, i), row) in block[..m].iter().zip(out.chunks(k)) {
            found(i, row);
        }
    }
}

/// [`knn_run`], compiled for AVX2 where the CPU has it (the same operations in each lane, so
/// the same bits).
fn knn_run_fast<T: Real>(
    tree: &MortonTree<T>,
    queries: &Points<T>,
    run: &[u32],
    k: usize,
    r2: T,
    skip_self: bool,
    found: &mut impl FnMut(u32, &[(T, u32)]),
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Real>(
            tree: &MortonTree<T>,
            queries: &Points<T>,
            run: &[u32],
            k: usize,
            r2: T,
            skip_self: bool,
            found: &mut impl FnMut(u32, &[(T, u32)]),
        ) {
            knn_run(tree, queries, run, k, r2, skip_self, found)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(tree, queries, run, k, r2, skip_self, found) };
    }
    knn_run(tree, queries, run, k, r2, skip_self, found)
}
