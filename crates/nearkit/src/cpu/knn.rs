//! Exact k-nearest neighbours on the CPU, queries in a coherent order for cache reuse. Many
//! queries against the same data go through a `CandidateGrid` (a short scan per query);
//! few queries, large k, or queries outside the data's box take a bounded best-first search
//! of the data's `MortonTree`. Both give the same exact answer.

use rayon::prelude::*;

use super::closest_pairs::morton_order;
use super::search;
use super::{prefetch, RowPtr};
use crate::error::Result;
use crate::grid::{CandidateGrid, GridCand};
use crate::points::Points;
use crate::query::{check_knn, Knn, KnnOptions};
use crate::real::Real;
use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE, NO_ID};

pub fn knn<T: Real>(data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
    let (k, r2) = check_knn(data, queries, opts)?;
    let prof = Profile::start();
    let tree = MortonTree::build(data, DEFAULT_LEAF_SIZE);
    let grid = CandidateGrid::for_queries(&tree, queries.len(), k + usize::from(opts.exclude_self), r2);
    prof.mark("tree + grid");
    // Through the grid, queries go cell by cell (each cell's list stays in cache) and read
    // packed records; the tree search wants Morton order.
    let (order, cand) = match &grid {
        Some(g) => (g.sorted_queries(queries), g.packed(&tree)),
        None => {
            let order = morton_order(&tree, queries);
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
    let (mut ids, mut distances) = (super::big_vec::<u32>(n * k), super::big_vec::<T>(n * k));
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
                    Some(g) if g.knn_packed(&tree, &cand, p, r2, skip, best) => best,
                    _ => {
                        search::knn(&tree, p, k, r2, skip, buf);
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
    let out = Knn { k, ids, distances };
    prof.mark("search");

    Ok(out)
}

/// Phase times on stderr when NEARKIT_PROFILE=1.
struct Profile(Option<std::cell::Cell<std::time::Instant>>);

impl Profile {
    fn start() -> Self {
        Self((std::env::var("NEARKIT_PROFILE").as_deref() == Ok("1")).then(|| std::time::Instant::now().into()))
    }
    fn mark(&self, what: &str) {
        if let Some(t) = &self.0 {
            eprintln!("cpu knn: {what} {:.1} ms", t.get().elapsed().as_secs_f64() * 1e3);
            t.set(std::time::Instant::now());
        }
    }
}
