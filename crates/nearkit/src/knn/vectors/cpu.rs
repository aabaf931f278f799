//! kNN of vectors of any dimension on the CPU: exact (a depth-first search of the
//! `VectorTree`, nearer child first) and the shifted-sort approximation.

use rayon::prelude::*;

use super::check_vectors;
use crate::error::Result;
use crate::geometry::points::NO_ID;
use crate::geometry::real::Real;
use crate::geometry::vectors::Aabb6;
use crate::geometry::vectors::{dist2_nd, Vectors, MAX_DIM};
use crate::knn::grid::{Aabb6Data, CandidateGrid, GridOptions};
use crate::knn::vectors::shifted_sort::{insert_candidate, window_of, ShiftFrame, ShiftedSortOptions};
use crate::knn::vectors::tree::{VectorTree, VECTOR_LEAF};
use crate::knn::{Knn, KnnOptions};

/// Writes sorted (d2, id) rows into a `Knn`, padding missing neighbours.
fn fill_row<T: Real>(found: &[(T, u32)], ids: &mut [u32], ds: &mut [T]) {
    for j in 0..ids.len() {
        (ids[j], ds[j]) = match found.get(j) {
            Some(&(d2, id)) => (id, d2.sqrt()),
            None => (NO_ID, T::INFINITY),
        };
    }
}

/// Each query's `k` nearest data points of `tree` within squared radius `r2`.
pub(crate) fn knn<T: Real>(
    tree: &VectorTree<T>,
    queries: &Vectors<T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
) -> Knn<T> {
    let grid = embedded_grid(tree, queries, k + usize::from(opts.exclude_self), r2, &opts.grid);
    let mut out = Knn { k, ids: vec![NO_ID; queries.len() * k], distances: vec![T::INFINITY; queries.len() * k] };
    out.ids.par_chunks_mut(k).zip(out.distances.par_chunks_mut(k)).enumerate().with_min_len(64).for_each_init(
        || (Vec::with_capacity(k + 1), Vec::with_capacity(64), vec![(T::ZERO, NO_ID); k]),
        |(best, stack, row), (q, (ids, ds))| {
            let skip = if opts.exclude_self { q as u32 } else { NO_ID };
            let qv = queries.get(q);
            if let Some((g, e)) = &grid {
                let data = Aabb6Data { tree, embedding: *e };
                if g.knn(&data, [qv[0], qv[1], qv[2]], r2, skip, row) {
                    best.clear();
                    best.extend(row.iter().filter(|r| r.1 != NO_ID));
                    fill_row(best, ids, ds);
                    return;
                }
            }
            search(tree, &qv, k, r2, skip, best, stack);
            fill_row(best, ids, ds);
        },
    );
    out
}

/// The candidate grid over the queries' 3-D space when they are 6-D triangle-box queries
/// (`Aabb6::detect`) and many; `None` otherwise.
pub fn embedded_grid<T: Real>(
    tree: &VectorTree<T>,
    queries: &Vectors<T>,
    k_list: usize,
    r2: T,
    opts: &GridOptions,
) -> Option<(CandidateGrid<T>, Aabb6)> {
    let e = Aabb6::detect(queries)?;
    let (lo, hi) = queries.bounds3();
    let data = Aabb6Data { tree, embedding: e };
    CandidateGrid::for_embedded(&data, lo, hi, queries.len(), k_list, r2, opts).map(|g| (g, e))
}

/// The k nearest (d2 <= r2, id != skip) of `q`, ascending by (d2, id), into `best`.
pub fn search<T: Real>(
    tree: &VectorTree<T>,
    q: &[T; MAX_DIM],
    k: usize,
    r2: T,
    skip: u32,
    best: &mut Vec<(T, u32)>,
    stack: &mut Vec<(usize, T)>,
) {
    let dim = tree.dim();
    best.clear();
    stack.clear();
    stack.push((1, tree.lower_bound(1, q)));
    // A node is visited while its bound can still beat (or tie) the k-th best.
    let bound = |best: &Vec<(T, u32)>| if best.len() == k { best[k - 1].0.min(r2) } else { r2 };
    while let Some((node, lb)) = stack.pop() {
        if lb > bound(best) {
            continue;
        }
        if node >= tree.leaves {
            let l = node - tree.leaves;
            for p in l * VECTOR_LEAF..((l + 1) * VECTOR_LEAF).min(tree.len()) {
                let id = tree.ids[p];
                let mut v = [T::ZERO; MAX_DIM];
                for a in 0..dim {
                    v[a] = tree.cols[a][p];
                }
                let d2 = dist2_nd(dim, q, &v);
                if d2 <= r2 && id != skip {
                    insert_candidate(best, k, d2, id);
                }
            }
            continue;
        }
        let (a, b) = (2 * node, 2 * node + 1);
        let (la, lb2) = (tree.lower_bound(a, q), tree.lower_bound(b, q));
        // Push the farther child first so the nearer one is searched first.
        let (near, far) = if lb2 < la { ((b, lb2), (a, la)) } else { ((a, la), (b, lb2)) };
        let cut = bound(best);
        if far.1 <= cut {
            stack.push(far);
        }
        if near.1 <= cut {
            stack.push(near);
        }
    }
}

/// The sorted copies of the data, one per shift (see `shifted_sort`).
pub struct ShiftedCopies<T> {
    pub keys: Vec<Vec<u128>>,
    pub ids: Vec<Vec<u32>>,
    /// `cols[shift][axis][position]`.
    pub cols: Vec<Vec<Vec<T>>>,
}

impl<T: Real> ShiftedCopies<T> {
    pub fn build(data: &Vectors<T>, frame: ShiftFrame, shifts: usize) -> Self {
        // One sorted copy: (keys, ids, columns).
        type Copy<T> = (Vec<u128>, Vec<u32>, Vec<Vec<T>>);
        let copies: Vec<Copy<T>> = (0..shifts as u32)
            .into_par_iter()
            .map(|s| {
                let mut keyed: Vec<(u128, u32)> =
                    (0..data.len()).map(|i| (frame.key(&data.get(i), s), i as u32)).collect();
                keyed.sort_unstable();
                let ids: Vec<u32> = keyed.iter().map(|&(_, i)| i).collect();
                let cols = data.cols.iter().map(|c| ids.iter().map(|&i| c[i as usize]).collect()).collect();
                (keyed.into_iter().map(|(k, _)| k).collect(), ids, cols)
            })
            .collect();
        let mut out = Self { keys: vec![], ids: vec![], cols: vec![] };
        for (k, i, c) in copies {
            out.keys.push(k);
            out.ids.push(i);
            out.cols.push(c);
        }
        out
    }
}

/// Each query's approximate `k` nearest by shifted sorting (see `shifted_sort`).
pub(crate) fn approx_knn<T: Real>(
    data: &Vectors<T>,
    queries: &Vectors<T>,
    opts: &ShiftedSortOptions,
) -> Result<Knn<T>> {
    check_vectors(data, queries)?;
    let k = opts.check(data.len())?;
    let frame = ShiftFrame::new(data, queries);
    let copies = ShiftedCopies::build(data, frame, opts.shifts);
    let dim = data.dim();
    let mut out = Knn { k, ids: vec![NO_ID; queries.len() * k], distances: vec![T::INFINITY; queries.len() * k] };
    out.ids.par_chunks_mut(k).zip(out.distances.par_chunks_mut(k)).enumerate().with_min_len(256).for_each_init(
        || Vec::with_capacity(k + 1),
        |best, (q, (ids, ds))| {
            best.clear();
            let qv = queries.get(q);
            for s in 0..opts.shifts {
                let (lo, hi) = window_of(&copies.keys[s], frame.key(&qv, s as u32), opts.window);
                for p in lo..hi {
                    let mut v = [T::ZERO; MAX_DIM];
                    for a in 0..dim {
                        v[a] = copies.cols[s][a][p];
                    }
                    insert_candidate(best, k, dist2_nd(dim, &qv, &v), copies.ids[s][p]);
                }
            }
            fill_row(best, ids, ds);
        },
    );
    Ok(out)
}
