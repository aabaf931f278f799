//! Exact k-nearest neighbours on the CPU, queries in Morton order for cache reuse. Many
//! queries against the same data go through a `CandidateGrid` (a short scan per query);
//! few queries, large k, or queries outside the data's box take a bounded best-first search
//! of the data's `MortonTree`. Both give the same exact answer.

use rayon::prelude::*;

use super::closest_pairs::morton_order;
use super::search;
use crate::error::Result;
use crate::grid::CandidateGrid;
use crate::points::Points;
use crate::query::{check_knn, Knn, KnnOptions};
use crate::real::Real;
use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE, NO_ID};

pub fn knn<T: Real>(data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
    let (k, r2) = check_knn(data, queries, opts)?;
    let tree = MortonTree::build(data, DEFAULT_LEAF_SIZE);
    let grid = CandidateGrid::for_queries(&tree, queries.len(), k + usize::from(opts.exclude_self), r2);
    let order = morton_order(&tree, queries);
    let n = queries.len();
    // Rows in Morton order first (contiguous, parallel), then put back in query order.
    let mut sorted_ids = vec![NO_ID; n * k];
    let mut sorted_d = vec![T::INFINITY; n * k];
    sorted_ids.par_chunks_mut(k).zip(sorted_d.par_chunks_mut(k)).zip(order.par_iter()).with_min_len(256).for_each_init(
        || (Vec::new(), vec![(T::ZERO, NO_ID); k]),
        |(buf, best), ((ids, ds), &q)| {
            let skip = if opts.exclude_self { q } else { NO_ID };
            let p = queries.get(q as usize);
            let found: &[(T, u32)] = match &grid {
                Some(g) if g.knn(&tree, p, r2, skip, best) => best,
                _ => {
                    search::knn(&tree, p, k, r2, skip, buf);
                    buf
                }
            };
            for (j, &(d2, id)) in found.iter().enumerate() {
                ids[j] = id;
                ds[j] = if id == NO_ID { T::INFINITY } else { d2.sqrt() };
            }
        },
    );
    let mut out = Knn { k, ids: vec![NO_ID; n * k], distances: vec![T::INFINITY; n * k] };
    for (row, &q) in order.iter().enumerate() {
        let (src, dst) = (row * k, q as usize * k);
        out.ids[dst..dst + k].copy_from_slice(&sorted_ids[src..src + k]);
        out.distances[dst..dst + k].copy_from_slice(&sorted_d[src..src + k]);
    }
    Ok(out)
}
