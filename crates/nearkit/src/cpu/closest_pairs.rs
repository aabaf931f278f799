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

use super::search;
use crate::error::{Error, Result};
use crate::points::Points;
use crate::query::{check_inputs, to_pairs, Candidate, Nearest, Pair, PairMode, PairsOptions, TopK};
use crate::real::{from_ordered_bits, Real};
use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE, NO_ID};

/// Morton-order neighbours on each side examined for the upper bound of step 2.
pub const BOUND_WINDOW: usize = 4;
/// Queries per rayon task: large enough to amortise scheduling, small enough to balance.
const QUERY_GRAIN: usize = 2048;

pub fn nearest<T: Real>(a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
    let r2 = check_inputs(a, b, max_distance)?;
    let tree = MortonTree::build(b, DEFAULT_LEAF_SIZE);
    let order = morton_order(&tree, a);
    let found: Vec<(T, u32)> = order
        .par_iter()
        .with_min_len(QUERY_GRAIN)
        .map(|&i| search::nearest(&tree, a.get(i as usize), r2, NO_ID))
        .collect();
    let mut out = Nearest { b: vec![NO_ID; a.len()], distance: vec![T::INFINITY; a.len()] };
    for (&i, &(d2, id)) in order.iter().zip(&found) {
        if id != NO_ID {
            out.b[i as usize] = id;
            out.distance[i as usize] = d2.sqrt();
        }
    }
    Ok(out)
}

/// Indices of `a` sorted by Morton code in the tree's frame (ties by index).
pub(crate) fn morton_order<T: Real>(tree: &MortonTree<T>, a: &Points<T>) -> Vec<u32> {
    let mut keyed: Vec<(u64, u32)> =
        (0..a.len()).into_par_iter().map(|i| (tree.frame.code(a.x[i], a.y[i], a.z[i]), i as u32)).collect();
    keyed.par_sort_unstable();
    keyed.into_par_iter().map(|(_, i)| i).collect()
}

pub fn closest_pairs<T: Real>(a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
    let r2 = check_inputs(a, b, opts.max_distance)?;
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    let tree = MortonTree::build(b, DEFAULT_LEAF_SIZE);
    let per_a = nearest_per_a(&tree, a, opts.k, r2);
    let best = match opts.mode {
        PairMode::NearestPerA => per_a,
        PairMode::AllPairs => all_pairs(&tree, a, opts.k, r2, &per_a),
    };
    Ok(to_pairs(&best, from_ordered_bits::<T>))
}

/// The k smallest (nearest distance², a, nearest b) over all A within squared radius `r2`.
pub(crate) fn nearest_per_a<T: Real>(tree: &MortonTree<T>, a: &Points<T>, k: usize, r2: T) -> Vec<Candidate> {
    let n = a.len();
    let order = morton_order(tree, a);
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
        .par_iter()
        .with_min_len(QUERY_GRAIN)
        .fold(
            || TopK::new(k),
            |mut top, &i| {
                let (d2, id) = search::nearest(tree, a.get(i as usize), tau, NO_ID);
                if id != NO_ID {
                    top.push(Candidate::new(d2, i, id));
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
