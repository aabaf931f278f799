//! Closest A–B pairs and the all-nearest-neighbour join on the CPU.
//!
//! Every nearest search goes through `tree::nearest_block`: A in Morton order, blocks of
//! queries walking the tree once, groups of them sharing one candidate list.
//!
//! Top-k plan:
//! 1. Build the `MortonTree` over B.
//! 2. The exact nearest distances of a sample of A (every 16th block along the Morton curve):
//!    their k-th smallest, τ, bounds the k-th smallest nearest distance of all A.
//! 3. Every A's nearest within τ, with blocks that reach τ: most blocks find no run at all.
//! 4. Keep the k smallest by (squared distance, a).
//!
//! The GPU bounds τ differently (each A's Morton neighbours in B, pairs/cuda.rs), since there a
//! pass over every A costs less than a sample's searches; the answer is the same.
//!
//! All-pairs adds one step: only the A's of the nearest-per-a top k can own one of the k
//! globally closest pairs (any other A already has k better pairs ahead of its best one), so
//! a bounded kNN of those k A's, within the k-th nearest-per-a distance, finishes the job.

use rayon::prelude::*;

use super::{to_pairs, Candidate, Nearest, Pair, PairMode, TopK};
use crate::geometry::points::Points;
use crate::geometry::points::NO_ID;
use crate::geometry::real::{from_ordered_bits, Real};
use crate::runtime::cpu::{big_vec, RowPtr};
use crate::runtime::profile::Phases;
use crate::tree::nearest_block::{nearest_block, NearestScratch, BLOCK, QUERY_GRAIN, RUN};
use crate::tree::search;
use crate::tree::MortonTree;

/// The sparsest sample of A that bounds the top-k distance.
const SAMPLE_STRIDE: usize = 16;

/// A block's reach is the previous block's farthest answer times this (squared: 1.2 times
/// the distance). Queries whose answer lies past the reach search the tree alone; a little
/// slack makes them fewer at the price of a few more candidates.
const GUESS_SLACK2: f64 = 1.44;

/// How far a block's candidates reach.
#[derive(Clone, Copy, PartialEq)]
enum Reach {
    /// As far as the previous block's farthest answer (queries past it search alone).
    Guess,
    /// The radius itself: every answer is among the candidates.
    Radius,
}

/// Every A's nearest point of `tree` within squared radius `r2`.
pub(crate) fn nearest<T: Real>(tree: &MortonTree<T>, a: &Points<T>, r2: T, profile: bool) -> Nearest<T> {
    let mut prof = Phases::new("cpu nearest", profile);
    let order = tree.morton_order(a);
    prof.mark("query order");
    let n = a.len();
    let (mut b, mut distance) = (big_vec::<u32>(n), big_vec::<T>(n));
    let (b_at, d_at) = (RowPtr(b.as_mut_ptr()), RowPtr(distance.as_mut_ptr()));
    order.par_chunks(QUERY_GRAIN).for_each(|run| {
        nearest_run_fast(tree, a, run, r2, Reach::Guess, &mut |i, (d2, id)| {
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
/// (`nearest_block`), each reaching as `reach` says.
#[inline(always)]
fn nearest_run<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    run: &[u32],
    r2: T,
    reach: Reach,
    found: &mut impl FnMut(u32, (T, u32)),
) {
    let mut scratch = NearestScratch::default();
    let mut reach2 = r2;
    let mut block = [([T::ZERO; 3], 0u32); BLOCK];
    let mut out = [(T::ZERO, NO_ID); BLOCK];
    let key = |i: u32| tree.morton_key(a.get(i as usize));
    let depth = natural_depth(a.len());
    let mut start = 0;
    let mut g = 0;
    while start < run.len() {
        let mut end = (start + BLOCK).min(run.len());
        // A block that crosses the boundary of a cell larger than a block's share of A has a
        // wide box, and its walk finds far more than its queries need: it ends there.
        let diff = key(run[start]) ^ key(run[end - 1]);
        if diff != 0 && diff.leading_zeros() / 3 < depth {
            let bit = 31 - diff.leading_zeros();
            end = start + run[start..end].partition_point(|&i| key(i) >> bit & 1 == 0);
        }
        let ids = &run[start..end];
        start = end;
        g += 1;
        for (slot, &i) in block.iter_mut().zip(ids.iter()) {
            *slot = (a.get(i as usize), i);
        }
        let m = ids.len();
        if g == 1 && reach == Reach::Guess {
            // The first query alone gives the first guess of the reach.
            let (d2, _, _) = search::nearest_hinted(tree, block[0].0, r2, NO_ID, search::NO_POSITION);
            reach2 = d2 * T::from_f64(4.0);
        }
        nearest_block(tree, &block[..m], r2, reach2, RUN, &mut scratch, &mut out[..m]);
        if reach == Reach::Guess {
            reach2 = farthest(&out[..m]) * T::from_f64(GUESS_SLACK2);
        }
        for (&(_, i), &o) in block[..m].iter().zip(&out[..m]) {
            found(i, o);
        }
    }
}

/// The depth of the Morton cells that hold about a block's share of `n` queries, uniform.
fn natural_depth(n: usize) -> u32 {
    let mut d = 0;
    while (n >> (3 * d)) > BLOCK {
        d += 1;
    }
    d
}

/// The farthest answer of a block.
fn farthest<T: Real>(out: &[(T, u32)]) -> T {
    out.iter().filter(|o| o.1 != NO_ID).fold(T::ZERO, |r, o| if o.0 > r { o.0 } else { r })
}

/// [`nearest_run`], compiled for AVX2 where the CPU has it: the distance loops then run
/// eight f32 (four f64) lanes at a time, each lane the scalar code's operations, so the bits
/// are the same.
fn nearest_run_fast<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    run: &[u32],
    r2: T,
    reach: Reach,
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
            reach: Reach,
            found: &mut impl FnMut(u32, (T, u32)),
        ) {
            nearest_run(tree, a, run, r2, reach, found)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(tree, a, run, r2, reach, found) };
    }
    nearest_run(tree, a, run, r2, reach, found)
}

/// The `k` closest pairs of A and the points of `tree` within squared radius `r2`.
pub(crate) fn closest_pairs<T: Real>(
    tree: &MortonTree<T>,
    a: &Points<T>,
    k: usize,
    mode: PairMode,
    r2: T,
    profile: bool,
) -> Vec<Pair<T>> {
    let mut prof = Phases::new("cpu closest pairs", profile);
    let per_a = nearest_per_a(tree, a, k, r2, &mut prof);
    let best = match mode {
        PairMode::NearestPerA => per_a,
        PairMode::AllPairs => all_pairs(tree, a, k, r2, &per_a),
    };
    prof.mark("all pairs");
    prof.report();
    to_pairs(&best, from_ordered_bits::<T>)
}

/// The k smallest (nearest distance², a, nearest b) over all A within squared radius `r2`.
fn nearest_per_a<T: Real>(tree: &MortonTree<T>, a: &Points<T>, k: usize, r2: T, prof: &mut Phases) -> Vec<Candidate> {
    let order = tree.morton_order(a);
    prof.mark("query order");
    // τ: the k-th smallest nearest distance of a sample (every `stride`-th block of A along
    // the curve: whole blocks search as fast as all A do), which bounds the k-th smallest of
    // all (a subset's k-th smallest is no smaller). A sparser sample is cheaper but gives a
    // looser τ, so more A pass it (about k * stride).
    let stride = (a.len() / (4 * k.max(1))).clamp(1, SAMPLE_STRIDE);
    let tau = if stride > 1 {
        let sample: Vec<u32> = order.chunks(BLOCK).step_by(stride).flatten().copied().collect();
        let mut d2: Vec<T> = sample
            .par_chunks(QUERY_GRAIN)
            .flat_map_iter(|run| {
                let mut found = Vec::with_capacity(run.len());
                nearest_run_fast(tree, a, run, r2, Reach::Guess, &mut |_, (d2, id)| {
                    if id != NO_ID {
                        found.push(d2)
                    }
                });
                found
            })
            .collect();
        if d2.len() >= k {
            let (_, kth, _) = d2.select_nth_unstable_by(k - 1, |x, y| x.partial_cmp(y).unwrap());
            if *kth < r2 {
                *kth
            } else {
                r2
            }
        } else {
            r2
        }
    } else {
        r2
    };
    prof.mark("tau from a sample");
    // Every A's nearest within τ: the blocks reach τ, so no query searches alone.
    let best = order
        .par_chunks(QUERY_GRAIN)
        .fold(
            || TopK::new(k),
            |mut top, run| {
                nearest_run_fast(tree, a, run, tau, Reach::Radius, &mut |i, (d2, id)| {
                    if id != NO_ID {
                        top.push(Candidate::new(d2, i, id));
                    }
                });
                top
            },
        )
        .reduce(|| TopK::new(k), TopK::merge)
        .into_sorted();
    prof.mark("nearest within tau");
    best
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
