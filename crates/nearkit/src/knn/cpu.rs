//! Exact k-nearest neighbours on the CPU, queries in a coherent order for cache reuse. k = 1
//! is a nearest search (pairs/cpu.rs). Many queries against the same data go through a
//! `CandidateGrid` (a short scan per query); few queries, large k, or queries outside the
//! data's box take a bounded best-first search of the data's `MortonTree`. All give the same
//! exact answer.

use rayon::prelude::*;

use super::{Knn, KnnOptions};
use crate::geometry::points::Points;
use crate::geometry::points::NO_ID;
use crate::geometry::real::Real;
use crate::knn::grid::{CandidateGrid, GridCand};
use crate::runtime::cpu::{big_vec, prefetch, RowPtr};
use crate::runtime::profile::Phases;
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
    let mut prof = Phases::new("cpu knn", profile);
    let grid = CandidateGrid::for_queries(tree, queries.len(), k + usize::from(opts.exclude_self), r2, &opts.grid);
    prof.mark("grid");
    // Through the grid, queries go cell by cell (each cell's list stays in cache) and read
    // packed records; the tree search wants Morton order.
    let (order, cand) = match &grid {
        Some(g) => (g.sorted_queries(queries), g.packed(tree)),
        None => {
            let order = tree.morton_order(queries);
            (order.par_iter().map(|&i| GridCand { p: queries.get(i as usize), id: i }).collect(), Vec::new())
        }
    };
    prof.mark("query order");
    let n = queries.len();
    // Queries run in a coherent order (cache reuse) and write their rows in place: each query
    // owns its row, so the parallel writes never overlap, and every row is written whole, so
    // the arrays need no filling first. The rows land in random places: each query prefetches
    // the rows of the query `AHEAD` of it, so that those misses overlap the scans.
    const AHEAD: usize = 16;
    let (mut ids, mut distances) = (big_vec::<u32>(n * k), big_vec::<T>(n * k));
    let (ids_at, ds_at) = (RowPtr(ids.as_mut_ptr()), RowPtr(distances.as_mut_ptr()));
    order.par_chunks(256).for_each_init(
        || (Vec::new(), vec![(T::ZERO, NO_ID); k]),
        |(buf, best), chunk| {
            for (i, &GridCand { p, id: q }) in chunk.iter().enumerate() {
                if let Some(ahead) = chunk.get(i + AHEAD) {
                    let a = ahead.id as usize * k;
                    prefetch(ids_at.0.wrapping_add(a), k);
                    prefetch(ds_at.0.wrapping_add(a), k);
                }
                let skip = if opts.exclude_self { q } else { NO_ID };
                let found: &[(T, u32)] = match &grid {
                    Some(g) if g.knn_packed(tree, &cand, p, r2, skip, best) => best,
                    _ => {
                        search::knn(tree, p, k, r2, skip, buf);
                        buf
                    }
                };
                for j in 0..k {
                    let (id, d) = match found.get(j) {
                        Some(&(d2, id)) if id != NO_ID => (id, d2.sqrt()),
                        _ => (NO_ID, T::INFINITY),
                    };
                    // SAFETY: slot q * k + j lies inside both allocations and only this query
                    // writes it.
                    unsafe {
                        ids_at.write(q as usize * k + j, id);
                        ds_at.write(q as usize * k + j, d);
                    }
                }
            }
        },
    );
    // SAFETY: `order` holds every query once, and each wrote all k slots of its row.
    unsafe {
        ids.set_len(n * k);
        distances.set_len(n * k);
    }
    prof.mark("search");
    prof.report();
    Knn { k, ids, distances }
}
