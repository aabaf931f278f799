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
use crate::runtime::cpu::{big_vec, RowPtr};
use crate::runtime::profile::Phases;
use crate::tree::nearest_block::{nearest_block, NearestScratch};
use crate::tree::search;
use crate::tree::MortonTree;

/// Queries per rayon task: large enough to amortise scheduling, small enough to balance.
const QUERY_GRAIN: usize = 2048;
/// Queries (consecutive in Morton order) that walk the tree together.
const BLOCK: usize = 256;
/// Points of the runs a block's queries scan (nodes this small are not descended).
const RUN: usize = 32;
const _: () = assert!(RUN <= search::RUN_MAX);

/// Every A's nearest point of `tree` within squared radius `r2`.
pub(crate) fn nearest<T: Real>(tree: &MortonTree<T>, a: &Points<T>, r2: T, profile: bool) -> Nearest<T> {
    let mut prof = Phases::new("cpu nearest", profile);
    let order = tree.morton_order(a);
    prof.mark("query order");
    let n = a.len();
    let (mut b, mut distance) = (big_vec::<u32>(n), big_vec::<T>(n));
    let (b_at, d_at) = (RowPtr(b.as_mut_ptr()), RowPtr(distance.as_mut_ptr()));
    order.par_chunks(QUERY_GRAIN).for_each(|run| {
        nearest_run_fast(tree, a, run, r2, &mut |i, (d2, id)| {
            let found = id != NO_ID;
            // SAFETY: each A appears once in `order`, so only this query writes slot i.
            unsafe {
                b_at.write(i as usize, if found { id } else { NO_ID });
                d_at.write(i as usize, if found { d2.sqrt() } else { T::INFINITY });
            }
        });
    });
    // SAFETY: every A's slot was written above.
    unsafe {
        b.set_len(n);
        distance.set_len(n);
    }
    prof.mark("search");
    prof.report();
    Nearest { b, distance }
}

/// The nearest point of `tree` within squared radius `r2` of each A in `run` (consecutive in
/// Morton order), handed to `found(a, (d2, id))` in that order. Queries go in blocks
/// (`search::nearest_block`); each block's reach is guessed from the one before.
#[inline(always)]
fn nearest_run<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    run: &[u32],
    r2: T,
    found: &mut impl FnMut(u32, (T, u32)),
) {
    let mut scratch = NearestScratch::default();
    let mut reach2 = T::ZERO;
    let mut block = [([T::ZERO; 3], 0u32); BLOCK];
    let mut out = [(T::ZERO, NO_ID); BLOCK];
    for (g, ids) in run.chunks(BLOCK).enumerate() {
        for (slot, &i) in block.iter_mut().zip(ids.iter()) {
            *slot = (a.get(i as usize), i);
        }
        let m = ids.len();
        if g == 0 {
            // The first query alone gives the first guess of the reach.
            let (d2, _, _) = search::nearest_hinted(tree, block[0].0, r2, NO_ID, search::NO_POSITION);
            reach2 = d2 * T::from_f64(4.0);
        }
        nearest_block(tree, &block[..m], r2, reach2, RUN, &mut scratch, &mut out[..m]);
        // The next block reaches as far as this one's farthest answer.
        reach2 = out[..m].iter().filter(|o| o.1 != NO_ID).fold(T::ZERO, |r, o| if o.0 > r { o.0 } else { r });
        for (&(_, i), &o) in block[..m].iter().zip(&out[..m]) {
            found(i, o);
        }
    }
}

/// [`nearest_run`], compiled for AVX2 where the CPU has it: the distance loops then run
/// eight f32 (four f64) lanes at a time, each lane the scalar code's operations, so the bits
/// are the same.
fn nearest_run_fast<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    run: &[u32],
    r2: T,
    found: &mut impl FnMut(u32, (T, u32)),
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Real>(
            tree: &MortonTree<T>,
            a: &Points<T>,
            run: &[u32],
            r2: T,
            found: &mut impl FnMut(u32, (T, u32)),
        ) {
            nearest_run(tree, a, run, r2, found)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(tree, a, run, r2, found) };
    }
    nearest_run(tree, a, run, r2, found)
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
