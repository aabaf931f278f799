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

/// A group's runs as columns, so that a query's box tests run several runs at a time.
#[derive(Clone, Debug, Default)]
pub struct RunColumns<T> {
    s: Vec<u32>,
    e: Vec<u32>,
    lo: [Vec<T>; 3],
    hi: [Vec<T>; 3],
    /// A bit for each run near the query at hand.
    near: Vec<u64>,
}

impl<T: Real> RunColumns<T> {
    /// The runs of `runs`, in their order, padded to whole words of `near` with empty runs
    /// whose boxes lie at infinity.
    pub fn fill(&mut self, runs: &[Run<T>]) {
        let padded = runs.len().div_ceil(64) * 64;
        let pad = padded - runs.len();
        self.s.clear();
        self.e.clear();
        self.s.extend(runs.iter().map(|r| r.s).chain(std::iter::repeat_n(0, pad)));
        self.e.extend(runs.iter().map(|r| r.e).chain(std::iter::repeat_n(0, pad)));
        for d in 0..3 {
            self.lo[d].clear();
            self.hi[d].clear();
            self.lo[d].extend(runs.iter().map(|r| r.lo[d]).chain(std::iter::repeat_n(T::INFINITY, pad)));
            self.hi[d].extend(runs.iter().map(|r| r.hi[d]).chain(std::iter::repeat_n(T::INFINITY, pad)));
        }
        self.near.resize(padded / 64, 0);
    }

    /// Marks in `near` the runs whose box lies within `r2` of `q` (as `box_box_dist2` computes it): several
    /// boxes at a time, in AVX2 with `AVX2` (the caller runs with AVX2 and POPCNT).
    #[inline(always)]
    fn mark_near<const AVX2: bool>(&mut self, q: [T; 3], r2: T) {
        #[cfg(target_arch = "x86_64")]
        if AVX2 && (T::NAME == "f64" || T::NAME == "f32") {
            // SAFETY: T is the type its name says, so the casts only rename; the caller runs
            // with AVX2; `fill` padded the columns to whole words of `near`.
            unsafe {
                if T::NAME == "f64" {
                    let col = |v: &Vec<T>| std::slice::from_raw_parts(v.as_ptr() as *const f64, v.len());
                    let q = q.map(|v| v.to_f64());
                    let (lo, hi) = (self.lo.each_ref().map(col), self.hi.each_ref().map(col));
                    super::scan_avx2::boxes_near_f64(lo, hi, q, r2.to_f64(), &mut self.near);
                } else {
                    let col = |v: &Vec<T>| std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len());
                    let q = q.map(|v| v.to_f64() as f32);
                    let (lo, hi) = (self.lo.each_ref().map(col), self.hi.each_ref().map(col));
                    super::scan_avx2::boxes_near_f32(lo, hi, q, r2.to_f64() as f32, &mut self.near);
                }
            }
            return;
        }
        let gap = |lo: T, hi: T, q: T| (lo - q).max(q - hi).max(T::ZERO);
        let [lx, ly, lz] = &self.lo;
        let [hx, hy, hz] = &self.hi;
        for (word, bits) in self.near.iter_mut().enumerate() {
            let mut out = 0u64;
            for j in 0..64 {
                let k = word * 64 + j;
                let (gx, gy, gz) = (gap(lx[k], hx[k], q[0]), gap(ly[k], hy[k], q[1]), gap(lz[k], hz[k], q[2]));
                out |= u64::from(gx * gx + gy * gy + gz * gz <= r2) << j;
            }
            *bits = out;
        }
    }

    /// The runs marked near, as (start, end) positions, in order.
    #[inline(always)]
    fn marked(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.near.iter().enumerate().flat_map(move |(word, &bits)| {
            let mut left = bits;
            std::iter::from_fn(move || {
                (left != 0).then(|| {
                    let k = word * 64 + left.trailing_zeros() as usize;
                    left &= left - 1;
                    (self.s[k] as usize, self.e[k] as usize)
                })
            })
        })
    }
}

/// Points a window of the scan tests at once.
const WINDOW: usize = 8;

/// The window of `WINDOW` positions that holds position `j` of a tree of `n >= WINDOW`
/// points, and the bits of its lanes from `j` up to `e`: the window starts at `j`, or where
/// it ends with the tree's last point (so as not to read past it).
#[inline(always)]
fn window(n: usize, j: usize, e: usize) -> (usize, u32) {
    let w = if j + WINDOW <= n { j } else { n - WINDOW };
    let upto = (e - w).min(WINDOW);
    (w, ((1u32 << upto) - 1) & !((1u32 << (j - w)) - 1))
}

/// The tree's coordinate columns as `U`.
///
/// # Safety
/// `U` is `T` (the caller checked `T::NAME`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn columns_as<T: Real, U>(tree: &MortonTree<T>) -> [&[U]; 3] {
    // SAFETY: U is T, so the cast only renames.
    let col = |v: &[T]| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const U, v.len()) };
    [col(&tree.x), col(&tree.y), col(&tree.z)]
}

/// The points of window `w` among `lanes` within `r2` of `q` whose id is at least
/// `first_id`: their squared distances (computed as `dist2`; with `D2` only) and ids written
/// from `d_out` and `id_out` on (`WINDOW` slots of each may be written); returns how many. In
/// AVX2 with `AVX2` (the caller runs with AVX2 and POPCNT).
///
/// # Safety
/// `w + WINDOW` is at most the tree's size; `id_out`, and with `D2` `d_out`, have room for
/// `WINDOW`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn keep_window<T: Real, const AVX2: bool, const D2: bool>(
    tree: &MortonTree<T>,
    w: usize,
    lanes: u32,
    q: [T; 3],
    r2: T,
    first_id: u32,
    d_out: *mut T,
    id_out: *mut u32,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if AVX2 && (T::NAME == "f64" || T::NAME == "f32") {
        // SAFETY: T is the type its name says (Real has no other of that name), so the casts
        // only rename; the caller runs with AVX2 and POPCNT; the rest is the caller's promise.
        return unsafe {
            if T::NAME == "f64" {
                let (xyz, q) = (columns_as::<T, f64>(tree), q.map(|v| v.to_f64()));
                super::scan_avx2::keep_f64::<D2>(
                    xyz,
                    &tree.id,
                    w,
                    lanes,
                    q,
                    r2.to_f64(),
                    first_id,
                    d_out.cast(),
                    id_out,
                )
            } else {
                let xyz = columns_as::<T, f32>(tree);
                let f32s = |v: T| v.to_f64() as f32;
                super::scan_avx2::keep_f32::<D2>(
                    xyz,
                    &tree.id,
                    w,
                    lanes,
                    q.map(f32s),
                    f32s(r2),
                    first_id,
                    d_out.cast(),
                    id_out,
                )
            }
        };
    }
    let mut len = 0;
    for l in 0..WINDOW {
        let i = w + l;
        let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
        let id = tree.id[i];
        // SAFETY: len < WINDOW, for which the caller made room.
        unsafe {
            if D2 {
                d_out.add(len).write(d);
            }
            id_out.add(len).write(id);
        }
        len += usize::from((lanes >> l & 1 != 0) & (d <= r2) & (id >= first_id));
    }
    len
}

/// How many points of window `w` among `lanes` lie within `r2` of `q` (as [`keep_window`]).
#[inline(always)]
fn count_window<T: Real, const AVX2: bool>(tree: &MortonTree<T>, w: usize, lanes: u32, q: [T; 3], r2: T) -> usize {
    #[cfg(target_arch = "x86_64")]
    if AVX2 && (T::NAME == "f64" || T::NAME == "f32") {
        // SAFETY: as in `keep_window`; `window` keeps w + WINDOW within the tree.
        return unsafe {
            if T::NAME == "f64" {
                super::scan_avx2::count_f64(columns_as(tree), w, lanes, q.map(|v| v.to_f64()), r2.to_f64())
            } else {
                let f32s = |v: T| v.to_f64() as f32;
                super::scan_avx2::count_f32(columns_as(tree), w, lanes, q.map(f32s), f32s(r2))
            }
        } as usize;
    }
    (0..WINDOW)
        .filter(|&l| lanes >> l & 1 != 0 && dist2(q[0], q[1], q[2], tree.x[w + l], tree.y[w + l], tree.z[w + l]) <= r2)
        .count()
}

/// Every point of `runs` within squared radius `r2` of `q` (inclusive) whose id is at least
/// `first_id`, appended as squared distances to `d2` (with `D2` only) and ids to `ids`, in the runs' order (for
/// the runs of `runs_near`: ascending position, which is the order radius/radius.cu's
/// one-query walk gives too); returns how many. Runs whose box lies beyond r are skipped
/// (their boxes tested several at a time); the others are tested `WINDOW` points at a time.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn scan_runs<T: Real, const AVX2: bool, const D2: bool>(
    tree: &MortonTree<T>,
    runs: &mut RunColumns<T>,
    q: [T; 3],
    r2: T,
    first_id: u32,
    d2: &mut Vec<T>,
    ids: &mut Vec<u32>,
) -> usize {
    let start = ids.len();
    let n = tree.len();
    runs.mark_near::<AVX2>(q, r2);
    for (s, e) in runs.marked() {
        if n < WINDOW {
            for i in s..e {
                let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
                if d <= r2 && tree.id[i] >= first_id {
                    if D2 {
                        d2.push(d);
                    }
                    ids.push(tree.id[i]);
                }
            }
            continue;
        }
        // Windows write up to WINDOW slots past the points kept.
        if D2 {
            d2.reserve(e - s + WINDOW);
        }
        ids.reserve(e - s + WINDOW);
        let (d_at, id_at, mut len) = (d2.as_mut_ptr(), ids.as_mut_ptr(), ids.len());
        let mut j = s;
        while j < e {
            let (w, lanes) = window(n, j, e);
            // SAFETY: `window` keeps w + WINDOW within the tree; len grows by at most the
            // points of s..e, so WINDOW slots from len lie within the room reserved.
            len += unsafe {
                keep_window::<T, AVX2, D2>(tree, w, lanes, q, r2, first_id, d_at.wrapping_add(len), id_at.add(len))
            };
            j = w + WINDOW;
        }
        // SAFETY: both hold `len` values written above (or before; `d2` with D2 only).
        unsafe {
            if D2 {
                d2.set_len(len);
            }
            ids.set_len(len);
        }
    }
    ids.len() - start
}

/// How many points of `runs` lie within squared radius `r2` of `q` (as [`scan_runs`] finds them).
#[inline(always)]
pub fn count_runs<T: Real, const AVX2: bool>(
    tree: &MortonTree<T>,
    runs: &mut RunColumns<T>,
    q: [T; 3],
    r2: T,
) -> usize {
    let n = tree.len();
    runs.mark_near::<AVX2>(q, r2);
    let mut count = 0;
    for (s, e) in runs.marked() {
        if n < WINDOW {
            count += (s..e).filter(|&i| dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]) <= r2).count();
            continue;
        }
        let mut j = s;
        while j < e {
            let (w, lanes) = window(n, j, e);
            count += count_window::<T, AVX2>(tree, w, lanes, q, r2);
            j = w + WINDOW;
        }
    }
    count
}
