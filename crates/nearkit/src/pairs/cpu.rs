//! Closest A–B pairs and the all-nearest-neighbour join on the CPU.
//!
//! Top-k plan (identical on the GPU):
//! 1. Build the `MortonTree` over B.
//! 2. For each A, a cheap upper bound on its nearest distance from its Morton neighbours in B.
//!    The k-th smallest bound, τ, bounds the k-th smallest true nearest distance.
//! 3. Exact nearest search for each A within τ: almost every subtree is pruned at once.
//!    Queries run in Morton order, so consecutive ones walk the same part of the tree
//!    (cache hits on the CPU, coherent warps on the GPU).
//! 4. Sort the survivors by (squared distance, a) and keep k.
//!
//! All-pairs adds one step: only the A's of the nearest-per-a top k can own one of the k
//! globally closest pairs (any other A already has k better pairs ahead of its best one), so
//! a bounded kNN of those k A's, within the k-th nearest-per-a distance, finishes the job.

use rayon::prelude::*;

use super::{to_pairs, Candidate, Nearest, Pair, PairMode, TopK, BOUND_WINDOW};
use crate::geometry::points::Points;
use crate::geometry::points::NO_ID;
use crate::geometry::real::{from_ordered_bits, Real};
use crate::tree::search;
use crate::tree::MortonTree;

/// Queries per rayon task: large enough to amortise scheduling, small enough to balance.
const QUERY_GRAIN: usize = 2048;

/// Every A's nearest point of `tree` within squared radius `r2`.
pub(crate) fn nearest<T: Real>(tree: &MortonTree<T>, a: &Points<T>, r2: T) -> Nearest<T> {
    let order = tree.morton_order(a);
    // Runs of queries in Morton order, each seeded with the previous one's answer.
    let found: Vec<(T, u32)> = order
        .par_chunks(QUERY_GRAIN)
        .flat_map_iter(|run| {
            let mut hint = search::NO_POSITION;
            run.iter().map(move |&i| {
                let (d2, id, pos) = search::nearest_hinted(tree, a.get(i as usize), r2, NO_ID, hint);
                hint = if pos == search::NO_POSITION { hint } else { pos };
                (d2, id)
            })
        })
        .collect();
    let mut out = Nearest { b: vec![NO_ID; a.len()], distance: vec![T::INFINITY; a.len()] };
    for (&i, &(d2, id)) in order.iter().zip(&found) {
        if id != NO_ID {
            out.b[i as usize] = id;
            out.distance[i as usize] = d2.sqrt();
        }
    }
    out
}

/// The `k` closest pairs of A and the points of `tree` within squared radius `r2`.
pub(crate) fn closest_pairs<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    k: usize,
    mode: PairMode,
    r2: T,
) -> Vec<Pair<T>> {
    let per_a = nearest_per_a(tree, a, k, r2);
    let best = match mode {
        PairMode::NearestPerA => per_a,
        PairMode::AllPairs => all_pairs(tree, a, k, r2, &per_a),
    };
    to_pairs(&best, from_ordered_bits::<T>)
}

/// The k smallest (nearest distance², a, nearest b) over all A within squared radius `r2`.
pub(crate) fn nearest_per_a<T: Real>(tree: &MortonTree<T>, a: &Points<T>, k: usize, r2: T) -> Vec<Candidate> {
    let n = a.len();
    let order = tree.morton_order(a);
    let tau = if k < n {
        let mut bounds: Vec<T> = order
            .par_iter()
            .with_min_len(QUERY_GRAIN)
            .map(|&i| search::window_upper_bound(tree, a.get(i as usize), BOUND_WINDOW))
            .collect();
        let (_, kth, _) = bounds.select_nth_unstable_by(k - 1, |x, y| x.partial_cmp(y).unwrap());
        kth.min(r2)
    } else {
        r2
    };
    order
        .par_chunks(QUERY_GRAIN)
        .fold(
            || TopK::new(k),
            |mut top, run| {
                // Each query seeded with the previous one's answer (Morton order).
                let mut hint = search::NO_POSITION;
                for &i in run {
                    let (d2, id, pos) = search::nearest_hinted(tree, a.get(i as usize), tau, NO_ID, hint);
                    hint = if pos == search::NO_POSITION { hint } else { pos };
                    if id != NO_ID {
                        top.push(Candidate::new(d2, i, id));
                    }
                }
                top
            },
        )
        .reduce(|| TopK::new(k), TopK::merge)
        .into_sorted()
}

fn all_pairs<T: Real>(tree: &MortonTree<T>, a: &Points<T>, k: usize, r2: T, per_a: &[Candidate]) -> Vec<Candidate> {
    // Fewer than k owners means the radius, not the k-th pair, bounds the search.
    let tau = if per_a.len() == k { from_ordered_bits::<T>(per_a[k - 1].d2_bits) } else { r2 };
    per_a
        .par_iter()
        .fold(
            || (TopK::new(k), Vec::new()),
            |(mut top, mut buf), c| {
                search::knn(tree, a.get(c.a as usize), k, tau, NO_ID, &mut buf);
                for &(d2, id) in &buf {
                    top.push(Candidate::new(d2, c.a, id));
                }
                (top, buf)
            },
        )
        .map(|(top, _)| top)
        .reduce(|| TopK::new(k), TopK::merge)
        .into_sorted()
}
