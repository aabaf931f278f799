//! Closest points for packets of `LANES` queries at once (f32), the CPU counterpart of the
//! CUDA kernel's warps: Morton-consecutive queries walk the `WideBvh` together, a box is
//! entered when any lane's bound is within that lane's cut, and each triangle is tested for
//! every lane at once. The lane loops are plain element-wise arithmetic on arrays, which the
//! compiler turns into SIMD; one scalar search per query spent most of its time on branches
//! and dependent loads.
//!
//! Exactness: `closest_d2` repeats `closest_point_triangle`'s operations lane by lane and picks
//! the region the scalar code would return, so each lane's squared distance has the same bits;
//! a lane keeps the least (d², id) of what it tested, and boxes are skipped only past the cut
//! plus the rounding slack. So each lane's answer is the scalar search's, bit for bit.

use crate::closest_point::bvh::{OrientedBox, TriangleBvh, WideBvh, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};

/// Queries per packet.
pub const LANES: usize = 8;

type F = [f32; LANES];
type M = [bool; LANES];

#[inline(always)]
fn map2(a: F, b: F, f: impl Fn(f32, f32) -> f32) -> F {
    std::array::from_fn(|i| f(a[i], b[i]))
}

#[inline(always)]
fn sub3(p: [F; 3], a: [f32; 3]) -> [F; 3] {
    std::array::from_fn(|k| p[k].map(|x| x - a[k]))
}

/// u·v with u per lane and v shared, in `dot`'s order.
#[inline(always)]
fn dot_s(u: [F; 3], v: [f32; 3]) -> F {
    std::array::from_fn(|i| u[0][i] * v[0] + u[1][i] * v[1] + u[2][i] * v[2])
}

#[inline(always)]
fn select(m: M, a: F, b: F) -> F {
    std::array::from_fn(|i| if m[i] { a[i] } else { b[i] })
}

/// |p − point|² with point = o + u·s (`along` then `finish`), s per lane.
#[inline(always)]
fn d2_along(p: [F; 3], o: [f32; 3], u: [f32; 3], s: F) -> F {
    std::array::from_fn(|i| {
        let d: [f32; 3] = std::array::from_fn(|k| p[k][i] - (o[k] + u[k] * s[i]));
        d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    })
}

/// |p − c|² for a shared point c.
#[inline(always)]
fn d2_to(p: [F; 3], c: [f32; 3]) -> F {
    let d = sub3(p, c);
    std::array::from_fn(|i| d[0][i] * d[0][i] + d[1][i] * d[1][i] + d[2][i] * d[2][i])
}

/// `closest_point_triangle(p, a, b, c).d2` for every lane.
#[inline(always)]
pub fn closest_d2(p: [F; 3], a: [f32; 3], b: [f32; 3], c: [f32; 3]) -> F {
    let sub = |u: [f32; 3], v: [f32; 3]| -> [f32; 3] { std::array::from_fn(|k| u[k] - v[k]) };
    let (ab, ac) = (sub(b, a), sub(c, a));
    let (ap, bp, cp) = (sub3(p, a), sub3(p, b), sub3(p, c));
    let (d1, d2) = (dot_s(ap, ab), dot_s(ap, ac));
    let (d3, d4) = (dot_s(bp, ab), dot_s(bp, ac));
    let (d5, d6) = (dot_s(cp, ab), dot_s(cp, ac));
    let vc = map2(map2(d1, d4, |x, y| x * y), map2(d3, d2, |x, y| x * y), |x, y| x - y);
    let vb = map2(map2(d5, d2, |x, y| x * y), map2(d1, d6, |x, y| x * y), |x, y| x - y);
    let va = map2(map2(d3, d6, |x, y| x * y), map2(d5, d4, |x, y| x * y), |x, y| x - y);
    // The regions in the scalar code's order; `done` marks lanes already answered.
    let mut out = [0.0f32; LANES];
    let mut done = [false; LANES];
    fn take(cond: M, val: F, out: &mut F, done: &mut M) {
        for i in 0..LANES {
            if cond[i] && !done[i] {
                out[i] = val[i];
                done[i] = true;
            }
        }
    }
    let m: M = std::array::from_fn(|i| d1[i] <= 0.0 && d2[i] <= 0.0);
    take(m, d2_to(p, a), &mut out, &mut done);
    let m: M = std::array::from_fn(|i| d3[i] >= 0.0 && d4[i] <= d3[i]);
    take(m, d2_to(p, b), &mut out, &mut done);
    let m: M = std::array::from_fn(|i| vc[i] <= 0.0 && d1[i] >= 0.0 && d3[i] <= 0.0 && d1[i] - d3[i] > 0.0);
    if m.iter().any(|&x| x) {
        take(m, d2_along(p, a, ab, map2(d1, d3, |x, y| x / (x - y))), &mut out, &mut done);
    }
    let m: M = std::array::from_fn(|i| d6[i] >= 0.0 && d5[i] <= d6[i]);
    take(m, d2_to(p, c), &mut out, &mut done);
    let m: M = std::array::from_fn(|i| vb[i] <= 0.0 && d2[i] >= 0.0 && d6[i] <= 0.0 && d2[i] - d6[i] > 0.0);
    if m.iter().any(|&x| x) {
        take(m, d2_along(p, a, ac, map2(d2, d6, |x, y| x / (x - y))), &mut out, &mut done);
    }
    let e43 = map2(d4, d3, |x, y| x - y);
    let e56 = map2(d5, d6, |x, y| x - y);
    let m: M = std::array::from_fn(|i| va[i] <= 0.0 && e43[i] >= 0.0 && e56[i] >= 0.0 && e43[i] + e56[i] > 0.0);
    if m.iter().any(|&x| x) {
        take(m, d2_along(p, b, sub(c, b), map2(e43, e56, |x, y| x / (x + y))), &mut out, &mut done);
    }
    if done.iter().all(|&x| x) {
        return out;
    }
    // Inside or degenerate (closest_point_triangle's last part).
    let denom: F = std::array::from_fn(|i| va[i] + vb[i] + vc[i]);
    let proper: M = std::array::from_fn(|i| denom[i] > 0.0 && denom[i].is_finite());
    let lab = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
    let lac = ac[0] * ac[0] + ac[1] * ac[1] + ac[2] * ac[2];
    let sliver_at = lab * lac * (1e-3f64 as f32);
    let (v, w) = (map2(vb, denom, |x, y| x / y), map2(vc, denom, |x, y| x / y));
    let u: F = std::array::from_fn(|i| 1.0 - v[i] - w[i]);
    let face: F = std::array::from_fn(|i| {
        let d: [f32; 3] = std::array::from_fn(|k| p[k][i] - (a[k] + ab[k] * v[i] + ac[k] * w[i]));
        d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    });
    let on_face: M = std::array::from_fn(|i| v[i] >= 0.0 && w[i] >= 0.0 && u[i] >= 0.0);
    let sliver: M = std::array::from_fn(|i| denom[i] <= sliver_at);
    let m: M = std::array::from_fn(|i| proper[i] && on_face[i] && !sliver[i]);
    take(m, face, &mut out, &mut done);
    if done.iter().all(|&x| x) {
        return out;
    }
    let edge = nearest_edge_d2(p, a, b, c);
    let m: M = std::array::from_fn(|i| proper[i] && on_face[i] && face[i] < edge[i]);
    take(m, face, &mut out, &mut done);
    take([true; LANES], edge, &mut out, &mut done);
    out
}

/// `nearest_edge(p, a, b, c).d2` for every lane.
#[inline(always)]
#[allow(clippy::manual_clamp)] // max then min, as `nearest_edge` does
fn nearest_edge_d2(p: [F; 3], a: [f32; 3], b: [f32; 3], c: [f32; 3]) -> F {
    let mut best = [0.0f32; LANES];
    for (k, (s, e)) in [(a, b), (b, c), (c, a)].into_iter().enumerate() {
        let d: [f32; 3] = std::array::from_fn(|x| e[x] - s[x]);
        let l = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let t: F = if l > 0.0 { dot_s(sub3(p, s), d).map(|x| (x / l).max(0.0).min(1.0)) } else { [0.0; LANES] };
        let cand = d2_along(p, s, d, t);
        best = if k == 0 { cand } else { select(std::array::from_fn(|i| cand[i] < best[i]), cand, best) };
    }
    best
}

/// `OrientedBox::lower_bound` for every lane.
#[inline(always)]
fn box_bound(b: &OrientedBox<f32>, q: &[F; 3]) -> F {
    let mut s = [0.0f32; LANES];
    for k in 0..3 {
        let ax = &b.axes[k * 3..k * 3 + 3];
        for i in 0..LANES {
            let p = q[0][i] * ax[0] + q[1][i] * ax[1] + q[2][i] * ax[2];
            let g = (b.lo[k] - p).max(p - b.hi[k]).max(0.0);
            s[i] += g * g;
        }
    }
    s
}

/// Pushes the wanted children (bound, slot) of a node, farthest first, so that the nearest is
/// popped first: an insertion sort, as there are at most `WIDE` of them.
#[inline(always)]
pub fn push_farthest_first(kids: &mut [(f32, u32)], stack: &mut Vec<u32>) {
    for i in 1..kids.len() {
        let mut j = i;
        while j > 0 && kids[j - 1].0 < kids[j].0 {
            kids.swap(j - 1, j);
            j -= 1;
        }
    }
    stack.extend(kids.iter().map(|k| k.1));
}

/// A mesh's index, collapsed for packets, and the query's squared radius and rounding slack.
pub struct PacketSearch<'a> {
    pub bvh: &'a TriangleBvh<f32>,
    pub wide: &'a WideBvh<f32>,
    pub r2: f32,
    pub slack: f32,
}

impl PacketSearch<'_> {
    /// Each lane's nearest triangle within the radius (its sorted position; `u32::MAX` for
    /// none), for the queries `q` (lanes past `active` are padding), in portable code.
    /// `packet_avx2::run` gives the same answers (the same IEEE operations) in AVX2.
    #[inline(always)]
    pub fn run_portable(&self, q: &[F; 3], active: usize, stack: &mut Vec<u32>) -> [u32; LANES] {
        let PacketSearch { bvh, wide, r2, slack } = *self;
        let widen = |d2: f32| {
            let r = d2.sqrt() + slack;
            r * r
        };
        let mut best = [f32::INFINITY; LANES];
        let mut best_id = [u32::MAX; LANES];
        let mut best_pos = [u32::MAX; LANES];
        let mut cut: F = std::array::from_fn(|i| if i < active { widen(r2) } else { f32::NEG_INFINITY });
        stack.clear();
        let mut node = 0usize;
        loop {
            // Expand `node`: the children some lane wants, farthest first (by the least bound).
            let mut kids = [(0.0f32, 0u32); WIDE];
            let mut nk = 0;
            for j in 0..WIDE {
                let slot = node * WIDE + j;
                if wide.children[slot] == WIDE_EMPTY {
                    continue;
                }
                let lb = box_bound(&wide.boxes[slot], q);
                if (0..LANES).any(|i| lb[i] <= cut[i]) {
                    let key = (0..LANES).filter(|&i| lb[i] <= cut[i]).map(|i| lb[i]).fold(f32::INFINITY, f32::min);
                    kids[nk] = (key, slot as u32);
                    nk += 1;
                }
            }
            push_farthest_first(&mut kids[..nk], stack);
            // Pop until a node to expand; leaves are tested on the way.
            let mut next = None;
            while let Some(slot) = stack.pop() {
                let slot = slot as usize;
                let lb = box_bound(&wide.boxes[slot], q);
                if !(0..LANES).any(|i| lb[i] <= cut[i]) {
                    continue;
                }
                let child = wide.children[slot];
                if child & WIDE_LEAF == 0 {
                    next = Some(child as usize);
                    break;
                }
                let s = (child & WIDE_START) as usize;
                let cnt = ((child >> 28) & 7) as usize + 1;
                for k in s..s + cnt {
                    let [ta, tb, tc] = bvh.triangle(k);
                    let d2 = closest_d2(*q, ta, tb, tc);
                    let id = bvh.ids[k];
                    for i in 0..active {
                        let better = d2[i] < best[i] || (d2[i] == best[i] && id < best_id[i]);
                        if d2[i] <= r2 && better {
                            best[i] = d2[i];
                            best_id[i] = id;
                            best_pos[i] = k as u32;
                            cut[i] = widen(d2[i]);
                        }
                    }
                }
            }
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        best_pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::closest_point::triangle::closest_point_triangle;

    /// Lane by lane, the same bits as the scalar test, on random, degenerate and sliver
    /// triangles and points in every region.
    #[test]
    fn closest_d2_matches_the_scalar_test() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        };
        for t in 0..20_000 {
            let mut tri: [[f32; 3]; 3] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
            match t % 5 {
                1 => tri[2] = tri[1], // a zero-length edge
                2 => tri[2] = std::array::from_fn(|k| tri[0][k] + 2.0 * (tri[1][k] - tri[0][k])), // collinear
                3 => tri[2] = std::array::from_fn(|k| tri[0][k] + 1e-4 * rnd()), // a sliver
                4 => tri = [tri[0]; 3], // a point
                _ => {}
            }
            let p: [F; 3] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
            let got = closest_d2(p, tri[0], tri[1], tri[2]);
            for i in 0..LANES {
                let want = closest_point_triangle([p[0][i], p[1][i], p[2][i]], tri[0], tri[1], tri[2]).d2;
                assert_eq!(got[i].to_bits(), want.to_bits(), "triangle {t} {tri:?}, lane {i}");
            }
        }
    }
}
