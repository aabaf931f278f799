//! Exact k-nearest neighbours on the CPU, queries in a coherent order for cache reuse. Many
//! queries against the same data go through a `CandidateGrid` (a short scan per query);
//! few queries, large k, or queries outside the data's box take a bounded best-first search
//! of the data's `MortonTree`. Both give the same exact answer.

use rayon::prelude::*;

use super::closest_pairs::morton_order;
use super::search;
use super::RowPtr;
use crate::error::Result;
use crate::grid::CandidateGrid;
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
        Some(g) => (g.cell_order(queries), g.packed(&tree)),
        None => (morton_order(&tree, queries), Vec::new()),
    };
    prof.mark("query order");
    let n = queries.len();
    // Queries run in a coherent order (cache reuse) and write their rows in place: each query
    // owns its row, so the parallel writes never overlap. The rows are filled in parallel too
    // (2^23 × 8 × 8 bytes: one thread alone took ~0.1 s).
    let (mut ids, mut distances) = (Vec::with_capacity(n * k), Vec::with_capacity(n * k));
    ids.par_extend(rayon::iter::repeat_n(NO_ID, n * k));
    distances.par_extend(rayon::iter::repeat_n(T::INFINITY, n * k));
    let mut out = Knn { k, ids, distances };
    let (ids_at, ds_at) = (RowPtr(out.ids.as_mut_ptr()), RowPtr(out.distances.as_mut_ptr()));
    order.par_iter().with_min_len(256).for_each_init(
        || (Vec::new(), vec![(T::ZERO, NO_ID); k]),
        |(buf, best), &q| {
            let skip = if opts.exclude_self { q } else { NO_ID };
            let p = queries.get(q as usize);
            let found: &[(T, u32)] = match &grid {
                Some(g) if g.knn_packed(&tree, &cand, p, r2, skip, best) => best,
                _ => {
                    search::knn(&tree, p, k, r2, skip, buf);
                    buf
                }
            };
            // SAFETY: row q (k entries from q * k) lies inside both arrays and only this
            // query writes it.
            let (ids, ds) = unsafe { (ids_at.row(q as usize, k), ds_at.row(q as usize, k)) };
            for (j, &(d2, id)) in found.iter().enumerate() {
                ids[j] = id;
                ds[j] = if id == NO_ID { T::INFINITY } else { d2.sqrt() };
            }
        },
    );
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
