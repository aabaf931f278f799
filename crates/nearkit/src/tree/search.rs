//! Single-query searches over a `MortonTree`, shared by every CPU query.
//!
//! Order is lexicographic on (squared distance, id): a candidate replaces the best only if it
//! is strictly smaller in that order, and a subtree is skipped only if its (box distance,
//! smallest id) cannot beat the current bound. That gives exact answers with ties broken by
//! the smaller id, without an epsilon anywhere. pairs/closest_pairs.cu and tree/search.cuh mirror this file.

use super::{MortonTree, CHILD_POINT};
use crate::geometry::points::NO_ID;
use crate::geometry::real::{dist2, Real};

/// Deeper than any radix tree over 63-bit keys and 31-bit indices (depth <= 95).
pub const STACK: usize = 128;

#[inline(always)]
pub(crate) fn before<T: Real>(d: T, id: u32, bd: T, bid: u32) -> bool {
    d < bd || (d == bd && id < bid)
}

/// No tree position (no hint, or no answer).
pub const NO_POSITION: usize = usize::MAX;

/// Nearest point to `q` that comes before `(bound_d2, bound_id)`; returns that bound unchanged
/// when nothing does. Pass `(r2, NO_ID)` to search within squared radius `r2` (inclusive).
///
/// The search is seeded with the tree's point at (sorted) position `hint` when there is one:
/// for queries in Morton order, the previous query's answer. It is a real point, so the
/// answer is the same, but its distance bounds the search from the start. Returns the
/// answer's position too (`NO_POSITION` if the bound was not beaten).
#[inline]
pub fn nearest_hinted<T: Real>(
    tree: &MortonTree<T>,
    q: [T; 3],
    bound_d2: T,
    bound_id: u32,
    hint: usize,
) -> (T, u32, usize) {
    let (mut bd, mut bid, mut bpos) = (bound_d2, bound_id, NO_POSITION);
    let leaf = tree.leaf_size as usize;
    let scan = |s: usize, e: usize, bd: &mut T, bid: &mut u32, bpos: &mut usize| {
        for i in s..e {
            let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
            if before(d, tree.id[i], *bd, *bid) {
                *bd = d;
                *bid = tree.id[i];
                *bpos = i;
            }
        }
    };
    let n = tree.len();
    if hint < n {
        scan(hint, hint + 1, &mut bd, &mut bid, &mut bpos);
    }
    if n <= leaf || n == 1 {
        scan(0, n, &mut bd, &mut bid, &mut bpos);
        return (bd, bid, bpos);
    }
    if !before(tree.box_dist2(0, q), tree.min_id[0], bd, bid) {
        return (bd, bid, bpos);
    }
    let mut stack: [(u32, T); STACK] = [(0, T::ZERO); STACK];
    let mut sp = 0usize;
    let mut node = 0usize;
    loop {
        let (s, e) = tree.range(node);
        if e - s <= leaf {
            scan(s, e, &mut bd, &mut bid, &mut bpos);
        } else {
            // Point children are tested at once; internal ones are ordered nearest first.
            let mut kids = [(0usize, T::ZERO, 0u32); 2];
            let mut nk = 0;
            for c in [tree.left[node], tree.right[node]] {
                if c & CHILD_POINT != 0 {
                    let p = (c & !CHILD_POINT) as usize;
                    scan(p, p + 1, &mut bd, &mut bid, &mut bpos);
                } else {
                    let c = c as usize;
                    kids[nk] = (c, tree.box_dist2(c, q), tree.min_id[c]);
                    nk += 1;
                }
            }
            if nk == 2 && before(kids[1].1, kids[1].2, kids[0].1, kids[0].2) {
                kids.swap(0, 1);
            }
            if nk >= 1 && before(kids[0].1, kids[0].2, bd, bid) {
                if nk == 2 && before(kids[1].1, kids[1].2, bd, bid) {
                    stack[sp] = (kids[1].0 as u32, kids[1].1);
                    sp += 1;
                }
                node = kids[0].0;
                continue;
            }
            // The farther child never beats the bound when the nearer one does not.
        }
        loop {
            if sp == 0 {
                return (bd, bid, bpos);
            }
            sp -= 1;
            let (n, d) = stack[sp];
            if before(d, tree.min_id[n as usize], bd, bid) {
                node = n as usize;
                break;
            }
        }
    }
}

/// The up-to-`k` nearest points to `q` with squared distance <= `r2`, ascending by
/// (squared distance, id), written into `out` (cleared first). The point with id `skip` is
/// ignored (`NO_ID`: none). Subtree pruning on smallest ids stays sound with a skipped id:
/// it can only make a subtree look better than it is.
pub fn knn<T: Real>(tree: &MortonTree<T>, q: [T; 3], k: usize, r2: T, skip: u32, out: &mut Vec<(T, u32)>) {
    out.clear();
    if k == 0 {
        return;
    }
    // The bound is the k-th entry once there are k, else the radius (ties included).
    let bound = |out: &Vec<(T, u32)>| if out.len() == k { out[k - 1] } else { (r2, NO_ID) };
    let offer = |i: usize, out: &mut Vec<(T, u32)>| {
        if tree.id[i] == skip {
            return;
        }
        let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
        let (bd, bid) = bound(out);
        if before(d, tree.id[i], bd, bid) {
            let pos = out.partition_point(|&(od, oid)| before(od, oid, d, tree.id[i]));
            if out.len() == k {
                out.pop();
            }
            out.insert(pos, (d, tree.id[i]));
        }
    };
    let n = tree.len();
    let leaf = tree.leaf_size as usize;
    if n <= leaf || n == 1 {
        (0..n).for_each(|i| offer(i, out));
        return;
    }
    let mut stack: Vec<(u32, T)> = Vec::with_capacity(STACK);
    stack.push((0, tree.box_dist2(0, q)));
    while let Some((node, d)) = stack.pop() {
        let node = node as usize;
        let (bd, bid) = bound(out);
        if !before(d, tree.min_id[node], bd, bid) {
            continue;
        }
        let (s, e) = tree.range(node);
        if e - s <= leaf {
            (s..e).for_each(|i| offer(i, out));
            continue;
        }
        let mut kids: Vec<(u32, T)> = Vec::with_capacity(2);
        for c in [tree.left[node], tree.right[node]] {
            if c & CHILD_POINT != 0 {
                offer((c & !CHILD_POINT) as usize, out);
            } else {
                kids.push((c, tree.box_dist2(c as usize, q)));
            }
        }
        // Push the far child first so the near one is searched first.
        if kids.len() == 2
            && before(kids[0].1, tree.min_id[kids[0].0 as usize], kids[1].1, tree.min_id[kids[1].0 as usize])
        {
            kids.swap(0, 1);
        }
        stack.extend(kids);
    }
}

/// A run of sorted positions `s..e` whose points lie in the box `lo..=hi`.
#[derive(Clone, Copy, Debug)]
pub struct Run<T> {
    pub s: u32,
    pub e: u32,
    pub lo: [T; 3],
    pub hi: [T; 3],
}

impl<T: Real> Run<T> {
    /// Squared distance from `q` to the run's box (as `MortonTree::box_dist2`).
    #[inline(always)]
    fn dist2(&self, q: [T; 3]) -> T {
        let gap = |d: usize| (self.lo[d] - q[d]).max(q[d] - self.hi[d]).max(T::ZERO);
        let (gx, gy, gz) = (gap(0), gap(1), gap(2));
        gx * gx + gy * gy + gz * gz
    }
}

/// Squared distance between two boxes: a lower bound, in floating point, of the squared
/// distance between any point of one and any point of the other (as `box_dist2`).
#[inline(always)]
fn box_box_dist2<T: Real>(alo: [T; 3], ahi: [T; 3], blo: [T; 3], bhi: [T; 3]) -> T {
    let gap = |d: usize| (alo[d] - bhi[d]).max(blo[d] - ahi[d]).max(T::ZERO);
    let (gx, gy, gz) = (gap(0), gap(1), gap(2));
    gx * gx + gy * gy + gz * gz
}

/// The runs of `tree` (nodes of at most `run` points, and single points) that may hold a
/// point within squared radius `r2` of any of `group`'s points, in ascending position, into
/// `out` (cleared first): the tree walked once for the group's bounding box.
pub fn runs_near<T: Real, R>(tree: &MortonTree<T>, group: &[([T; 3], R)], r2: T, run: usize, out: &mut Vec<Run<T>>) {
    runs_near_capped(tree, group, r2, run, usize::MAX, out);
}

/// [`runs_near`], giving up (and returning false, `out` then partial) once more than `cap`
/// runs are found: a group spread too widely is better served one query at a time.
pub fn runs_near_capped<T: Real, R>(
    tree: &MortonTree<T>,
    group: &[([T; 3], R)],
    r2: T,
    run: usize,
    cap: usize,
    out: &mut Vec<Run<T>>,
) -> bool {
    out.clear();
    let (mut glo, mut ghi) = ([T::INFINITY; 3], [-T::INFINITY; 3]);
    for (q, _) in group {
        for d in 0..3 {
            glo[d] = glo[d].min(q[d]);
            ghi[d] = ghi[d].max(q[d]);
        }
    }
    let n = tree.len();
    let leaf = run.max(tree.leaf_size as usize);
    let node_box =
        |i: usize| ([tree.lo[0][i], tree.lo[1][i], tree.lo[2][i]], [tree.hi[0][i], tree.hi[1][i], tree.hi[2][i]]);
    let point = |p: usize| {
        let v = [tree.x[p], tree.y[p], tree.z[p]];
        Run { s: p as u32, e: p as u32 + 1, lo: v, hi: v }
    };
    if n <= leaf || n == 1 {
        let (lo, hi) = if n == 1 { (point(0).lo, point(0).hi) } else { node_box(0) };
        out.push(Run { s: 0, e: n as u32, lo, hi });
        return true;
    }
    let (lo, hi) = node_box(0);
    if box_box_dist2(glo, ghi, lo, hi) > r2 {
        return true;
    }
    // Depth first, left before right (the right child waits on the stack): ascending positions.
    let mut stack = [0u32; STACK];
    let mut sp = 1usize;
    while sp > 0 {
        sp -= 1;
        let c = stack[sp];
        if c & CHILD_POINT != 0 {
            let p = point((c & !CHILD_POINT) as usize);
            if box_box_dist2(glo, ghi, p.lo, p.hi) <= r2 {
                out.push(p);
            }
        } else {
            let node = c as usize;
            let (s, e) = tree.range(node);
            let (lo, hi) = node_box(node);
            if e - s <= leaf {
                out.push(Run { s: s as u32, e: e as u32, lo, hi });
            } else {
                for child in [tree.right[node], tree.left[node]] {
                    if child & CHILD_POINT != 0 {
                        stack[sp] = child;
                        sp += 1;
                    } else {
                        let (lo, hi) = node_box(child as usize);
                        if box_box_dist2(glo, ghi, lo, hi) <= r2 {
                            stack[sp] = child;
                            sp += 1;
                        }
                    }
                }
            }
        }
        if out.len() > cap {
            return false;
        }
    }
    true
}

/// The most points of a run `runs_near` gives when asked for runs of at most `RUN_MAX`.
pub const RUN_MAX: usize = 64;

/// Every point of `runs` within squared radius `r2` of `q` (inclusive) whose id is at least
/// `first_id`, appended to `out` as (d2, id) in the runs' order (for the runs of `runs_near`:
/// ascending position, which is the order radius/radius.cu's one-query walk gives too); returns
/// how many. Runs hold at most `RUN_MAX` points. A run's squared distances are computed in a
/// loop the compiler vectorises (the same IEEE operations in each lane), then kept without
/// branches: each is written, and the end advances only past those within.
#[inline(always)]
pub fn scan_runs<T: Real>(
    tree: &MortonTree<T>,
    runs: &[Run<T>],
    q: [T; 3],
    r2: T,
    first_id: u64,
    out: &mut Vec<(T, u32)>,
) -> usize {
    let mut d2 = [T::ZERO; RUN_MAX];
    let start = out.len();
    for run in runs {
        if run.dist2(q) > r2 {
            continue;
        }
        let (s, e) = (run.s as usize, run.e as usize);
        let (xs, ys, zs, ids) = (&tree.x[s..e], &tree.y[s..e], &tree.z[s..e], &tree.id[s..e]);
        let dist = &mut d2[..e - s];
        for (((d, &x), &y), &z) in dist.iter_mut().zip(xs).zip(ys).zip(zs) {
            *d = dist2(q[0], q[1], q[2], x, y, z);
        }
        out.reserve(e - s);
        let (at, mut len) = (out.as_mut_ptr(), out.len());
        // Most candidates lie beyond r: eight at a time give a mask (compares the compiler
        // vectorises), and only the set bits are written.
        for (dc, ic) in dist.chunks(8).zip(ids.chunks(8)) {
            let mut mask = 0u32;
            for (j, (&d, &id)) in dc.iter().zip(ic).enumerate() {
                mask |= u32::from(d <= r2 && id as u64 >= first_id) << j;
            }
            while mask != 0 {
                let j = mask.trailing_zeros() as usize;
                // SAFETY: `len` < the capacity reserved for this run's e - s entries.
                unsafe { at.add(len).write((dc[j], ic[j])) };
                len += 1;
                mask &= mask - 1;
            }
        }
        // SAFETY: entries up to `len` were written above.
        unsafe { out.set_len(len) };
    }
    out.len() - start
}

/// How many points of `runs` lie within squared radius `r2` of `q` (as [`scan_runs`] finds them).
#[inline(always)]
pub fn count_runs<T: Real>(tree: &MortonTree<T>, runs: &[Run<T>], q: [T; 3], r2: T) -> usize {
    let mut count = 0;
    for run in runs {
        if run.dist2(q) > r2 {
            continue;
        }
        let (s, e) = (run.s as usize, run.e as usize);
        let (xs, ys, zs) = (&tree.x[s..e], &tree.y[s..e], &tree.z[s..e]);
        count += xs
            .iter()
            .zip(ys)
            .zip(zs)
            .map(|((&x, &y), &z)| usize::from(dist2(q[0], q[1], q[2], x, y, z) <= r2))
            .sum::<usize>();
    }
    count
}
