//! Single-query searches over a `MortonTree`, shared by every CPU query.
//!
//! Order is lexicographic on (squared distance, id): a candidate replaces the best only if it
//! is strictly smaller in that order, and a subtree is skipped only if its (box distance,
//! smallest id) cannot beat the current bound. That gives exact answers with ties broken by
//! the smaller id, without an epsilon anywhere.

use crate::real::{dist2, Real};
use crate::tree::{MortonTree, NO_ID};

/// Deep enough for any tree of `u32` leaves (depth <= 32) with nearest-first descent.
const STACK: usize = 64;

#[inline(always)]
fn before<T: Real>(d: T, id: u32, bd: T, bid: u32) -> bool {
    d < bd || (d == bd && id < bid)
}

/// Nearest point to `q` that comes before `(bound_d2, bound_id)`; returns that bound unchanged
/// when nothing does. Pass `(r2, NO_ID)` to search within squared radius `r2` (inclusive).
#[inline]
pub fn nearest<T: Real>(tree: &MortonTree<T>, q: [T; 3], bound_d2: T, bound_id: u32) -> (T, u32) {
    let (mut bd, mut bid) = (bound_d2, bound_id);
    let base = tree.leaf_base as usize;
    let mut stack: [(u32, T); STACK] = [(0, T::ZERO); STACK];
    let mut sp = 0usize;
    let mut node = 1usize;
    if !before(tree.box_dist2(1, q), tree.min_id[1], bd, bid) {
        return (bd, bid);
    }
    loop {
        if node >= base {
            let (s, e) = tree.leaf_range((node - base) as u32);
            for i in s..e {
                let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
                if before(d, tree.id[i], bd, bid) {
                    bd = d;
                    bid = tree.id[i];
                }
            }
        } else {
            let (l, r) = (2 * node, 2 * node + 1);
            let (dl, dr) = (tree.box_dist2(l, q), tree.box_dist2(r, q));
            let (ml, mr) = (tree.min_id[l], tree.min_id[r]);
            let ((near, dn, mn), (far, df, mf)) = if before(dr, mr, dl, ml) {
                ((r, dr, mr), (l, dl, ml))
            } else {
                ((l, dl, ml), (r, dr, mr))
            };
            if before(dn, mn, bd, bid) {
                if before(df, mf, bd, bid) {
                    stack[sp] = (far as u32, df);
                    sp += 1;
                }
                node = near;
                continue;
            }
            // `far` never beats the bound when `near` does not: it is after `near`.
        }
        loop {
            if sp == 0 {
                return (bd, bid);
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
/// (squared distance, id), appended into `out` (cleared first).
pub fn knn<T: Real>(tree: &MortonTree<T>, q: [T; 3], k: usize, r2: T, out: &mut Vec<(T, u32)>) {
    out.clear();
    if k == 0 {
        return;
    }
    let base = tree.leaf_base as usize;
    // The bound is the k-th entry once there are k, else the radius (ties included).
    let bound = |out: &Vec<(T, u32)>| {
        if out.len() == k {
            out[k - 1]
        } else {
            (r2, NO_ID)
        }
    };
    let mut stack: Vec<(u32, T)> = Vec::with_capacity(STACK);
    stack.push((1, tree.box_dist2(1, q)));
    while let Some((n, d)) = stack.pop() {
        let (bd, bid) = bound(out);
        let node = n as usize;
        if !before(d, tree.min_id[node], bd, bid) {
            continue;
        }
        if node >= base {
            let (s, e) = tree.leaf_range((node - base) as u32);
            for i in s..e {
                let d = dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]);
                let (bd, bid) = bound(out);
                if before(d, tree.id[i], bd, bid) {
                    let pos = out.partition_point(|&(od, oid)| before(od, oid, d, tree.id[i]));
                    if out.len() == k {
                        out.pop();
                    }
                    out.insert(pos, (d, tree.id[i]));
                }
            }
        } else {
            let (l, r) = (2 * node, 2 * node + 1);
            let (dl, dr) = (tree.box_dist2(l, q), tree.box_dist2(r, q));
            // Push the far child first so the near one is searched first.
            if before(dr, tree.min_id[r], dl, tree.min_id[l]) {
                stack.push((l as u32, dl));
                stack.push((r as u32, dr));
            } else {
                stack.push((r as u32, dr));
                stack.push((l as u32, dl));
            }
        }
    }
}

/// An upper bound on `q`'s nearest squared distance: the closest of the points within
/// `window` positions of `q`'s place in Morton order. Cheap (one binary search), and a real
/// distance, so the k-th smallest bound over many queries bounds their k-th nearest distance.
#[inline]
pub fn window_upper_bound<T: Real>(tree: &MortonTree<T>, q: [T; 3], window: usize) -> T {
    let code = tree.frame.code(q[0], q[1], q[2]);
    let pos = tree.keys.partition_point(|&k| k < code);
    let n = tree.len();
    let s = pos.saturating_sub(window);
    let e = (pos + window).min(n).max(s + 1);
    let mut best = T::INFINITY;
    for i in s..e {
        best = best.min(dist2(q[0], q[1], q[2], tree.x[i], tree.y[i], tree.z[i]));
    }
    best
}
