//! The packet search of `packet`, written in AVX2 intrinsics: one register holds
//! a value for all eight lanes, and lane masks are compare results, so a packet's state never
//! leaves the registers. (The portable version, plain loops over lane arrays, compiled to
//! 128-bit halves and stack traffic; this one takes about half the time.)
//!
//! Every operation is the IEEE operation the scalar code does, in its order and without fused
//! multiply-add, so `closest_d2` gives the scalar test's bits lane by lane; `max_ps(x, 0)`
//! returns 0 for a NaN x, as `f32::max` does.

use std::arch::x86_64::*;

use super::packet::{push_farthest_first, PacketSearch, LANES};
use crate::closest_point::bvh::{OrientedBox, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};

/// A point per lane.
#[derive(Clone, Copy)]
struct P3 {
    x: __m256,
    y: __m256,
    z: __m256,
}

#[inline(always)]
unsafe fn splat(v: f32) -> __m256 {
    _mm256_set1_ps(v)
}

/// (x·x + y·y) + z·z.
#[inline(always)]
unsafe fn norm2(x: __m256, y: __m256, z: __m256) -> __m256 {
    _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(x, x), _mm256_mul_ps(y, y)), _mm256_mul_ps(z, z))
}

/// (p − a)·v per lane, for shared a and v, in `dot`'s order.
#[inline(always)]
unsafe fn dot_from(p: &P3, a: [f32; 3], v: [f32; 3]) -> __m256 {
    let (x, y, z) = (_mm256_sub_ps(p.x, splat(a[0])), _mm256_sub_ps(p.y, splat(a[1])), _mm256_sub_ps(p.z, splat(a[2])));
    _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(x, splat(v[0])), _mm256_mul_ps(y, splat(v[1]))),
        _mm256_mul_ps(z, splat(v[2])),
    )
}

/// |p − c|² for a shared point c.
#[inline(always)]
unsafe fn d2_to(p: &P3, c: [f32; 3]) -> __m256 {
    norm2(_mm256_sub_ps(p.x, splat(c[0])), _mm256_sub_ps(p.y, splat(c[1])), _mm256_sub_ps(p.z, splat(c[2])))
}

/// |p − (o + u·s)|², s per lane (`along` then `finish`).
#[inline(always)]
unsafe fn d2_along(p: &P3, o: [f32; 3], u: [f32; 3], s: __m256) -> __m256 {
    let d = |pk: __m256, k: usize| _mm256_sub_ps(pk, _mm256_add_ps(splat(o[k]), _mm256_mul_ps(splat(u[k]), s)));
    norm2(d(p.x, 0), d(p.y, 1), d(p.z, 2))
}

#[inline(always)]
unsafe fn le(a: __m256, b: __m256) -> __m256 {
    _mm256_cmp_ps::<_CMP_LE_OQ>(a, b)
}

#[inline(always)]
unsafe fn ge(a: __m256, b: __m256) -> __m256 {
    _mm256_cmp_ps::<_CMP_GE_OQ>(a, b)
}

#[inline(always)]
unsafe fn gt(a: __m256, b: __m256) -> __m256 {
    _mm256_cmp_ps::<_CMP_GT_OQ>(a, b)
}

#[inline(always)]
unsafe fn and(a: __m256, b: __m256) -> __m256 {
    _mm256_and_ps(a, b)
}

#[inline(always)]
unsafe fn any(m: __m256) -> bool {
    _mm256_movemask_ps(m) != 0
}

/// The lanes' answers so far: `out` where `done` is set.
struct Answer {
    out: __m256,
    done: __m256,
}

impl Answer {
    /// Lanes where `cond` holds and none answered yet take `val`.
    #[inline(always)]
    unsafe fn take(&mut self, cond: __m256, val: __m256) {
        let m = _mm256_andnot_ps(self.done, cond);
        self.out = _mm256_blendv_ps(self.out, val, m);
        self.done = _mm256_or_ps(self.done, m);
    }

    #[inline(always)]
    unsafe fn all(&self) -> bool {
        _mm256_movemask_ps(self.done) == 0xff
    }
}

/// `closest_point_triangle(p, a, b, c).d2` for every lane (`packet::closest_d2`).
#[inline(always)]
unsafe fn closest_d2(p: &P3, a: [f32; 3], b: [f32; 3], c: [f32; 3]) -> __m256 {
    let sub = |u: [f32; 3], v: [f32; 3]| -> [f32; 3] { std::array::from_fn(|k| u[k] - v[k]) };
    let (ab, ac) = (sub(b, a), sub(c, a));
    let zero = _mm256_setzero_ps();
    let (d1, d2) = (dot_from(p, a, ab), dot_from(p, a, ac));
    let (d3, d4) = (dot_from(p, b, ab), dot_from(p, b, ac));
    let (d5, d6) = (dot_from(p, c, ab), dot_from(p, c, ac));
    let mul = |x, y| _mm256_mul_ps(x, y);
    let vc = _mm256_sub_ps(mul(d1, d4), mul(d3, d2));
    let vb = _mm256_sub_ps(mul(d5, d2), mul(d1, d6));
    let va = _mm256_sub_ps(mul(d3, d6), mul(d5, d4));
    // The regions in the scalar code's order.
    let mut ans = Answer { out: zero, done: zero };
    ans.take(and(le(d1, zero), le(d2, zero)), d2_to(p, a));
    ans.take(and(ge(d3, zero), le(d4, d3)), d2_to(p, b));
    if ans.all() {
        return ans.out;
    }
    let d13 = _mm256_sub_ps(d1, d3);
    let m = and(and(le(vc, zero), ge(d1, zero)), and(le(d3, zero), gt(d13, zero)));
    if any(_mm256_andnot_ps(ans.done, m)) {
        ans.take(m, d2_along(p, a, ab, _mm256_div_ps(d1, d13)));
    }
    ans.take(and(ge(d6, zero), le(d5, d6)), d2_to(p, c));
    let d26 = _mm256_sub_ps(d2, d6);
    let m = and(and(le(vb, zero), ge(d2, zero)), and(le(d6, zero), gt(d26, zero)));
    if any(_mm256_andnot_ps(ans.done, m)) {
        ans.take(m, d2_along(p, a, ac, _mm256_div_ps(d2, d26)));
    }
    let e43 = _mm256_sub_ps(d4, d3);
    let e56 = _mm256_sub_ps(d5, d6);
    let s = _mm256_add_ps(e43, e56);
    let m = and(and(le(va, zero), ge(e43, zero)), and(ge(e56, zero), gt(s, zero)));
    if any(_mm256_andnot_ps(ans.done, m)) {
        ans.take(m, d2_along(p, b, sub(c, b), _mm256_div_ps(e43, s)));
    }
    if ans.all() {
        return ans.out;
    }
    // Inside or degenerate (closest_point_triangle's last part).
    let denom = _mm256_add_ps(_mm256_add_ps(va, vb), vc);
    let abs = _mm256_andnot_ps(splat(-0.0), denom);
    let proper = and(gt(denom, zero), _mm256_cmp_ps::<_CMP_LT_OQ>(abs, splat(f32::INFINITY)));
    let lab = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
    let lac = ac[0] * ac[0] + ac[1] * ac[1] + ac[2] * ac[2];
    let sliver_at = lab * lac * (1e-3f64 as f32);
    let (v, w) = (_mm256_div_ps(vb, denom), _mm256_div_ps(vc, denom));
    let u = _mm256_sub_ps(_mm256_sub_ps(splat(1.0), v), w);
    let f = |pk: __m256, k: usize| {
        _mm256_sub_ps(
            pk,
            _mm256_add_ps(_mm256_add_ps(splat(a[k]), _mm256_mul_ps(splat(ab[k]), v)), _mm256_mul_ps(splat(ac[k]), w)),
        )
    };
    let face = norm2(f(p.x, 0), f(p.y, 1), f(p.z, 2));
    let on_face = and(and(ge(v, zero), ge(w, zero)), ge(u, zero));
    let sliver = le(denom, splat(sliver_at));
    let proper_on_face = and(proper, on_face);
    ans.take(_mm256_andnot_ps(sliver, proper_on_face), face);
    if ans.all() {
        return ans.out;
    }
    let edge = nearest_edge_d2(p, a, b, c);
    ans.take(and(proper_on_face, _mm256_cmp_ps::<_CMP_LT_OQ>(face, edge)), face);
    ans.take(_mm256_castsi256_ps(_mm256_set1_epi32(-1)), edge);
    ans.out
}

/// `nearest_edge(p, a, b, c).d2` for every lane.
#[inline(always)]
unsafe fn nearest_edge_d2(p: &P3, a: [f32; 3], b: [f32; 3], c: [f32; 3]) -> __m256 {
    let mut best = _mm256_setzero_ps();
    for (k, (s, e)) in [(a, b), (b, c), (c, a)].into_iter().enumerate() {
        let d: [f32; 3] = std::array::from_fn(|x| e[x] - s[x]);
        let l = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let t = if l > 0.0 {
            let t = _mm256_div_ps(dot_from(p, s, d), splat(l));
            _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), splat(1.0))
        } else {
            _mm256_setzero_ps()
        };
        let cand = d2_along(p, s, d, t);
        best = if k == 0 { cand } else { _mm256_blendv_ps(best, cand, _mm256_cmp_ps::<_CMP_LT_OQ>(cand, best)) };
    }
    best
}

/// `OrientedBox::lower_bound` for every lane.
#[inline(always)]
unsafe fn box_bound(b: &OrientedBox<f32>, p: &P3) -> __m256 {
    let mut s = _mm256_setzero_ps();
    for k in 0..3 {
        let ax = &b.axes[k * 3..k * 3 + 3];
        let d = _mm256_add_ps(
            _mm256_add_ps(_mm256_mul_ps(p.x, splat(ax[0])), _mm256_mul_ps(p.y, splat(ax[1]))),
            _mm256_mul_ps(p.z, splat(ax[2])),
        );
        let g = _mm256_max_ps(
            _mm256_max_ps(_mm256_sub_ps(splat(b.lo[k]), d), _mm256_sub_ps(d, splat(b.hi[k]))),
            _mm256_setzero_ps(),
        );
        s = _mm256_add_ps(s, _mm256_mul_ps(g, g));
    }
    s
}

/// The least lane of `v` (no NaNs).
#[inline(always)]
unsafe fn hmin(v: __m256) -> f32 {
    let m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_min_ss(m, _mm_shuffle_ps::<1>(m, m));
    _mm_cvtss_f32(m)
}

/// (√d² + slack)², the cut for a lane whose best is d².
#[inline(always)]
unsafe fn widen(d2: __m256, slack: __m256) -> __m256 {
    let r = _mm256_add_ps(_mm256_sqrt_ps(d2), slack);
    _mm256_mul_ps(r, r)
}

/// `PacketSearch::run` (same contract): each lane's nearest triangle within the radius, by
/// sorted position (`u32::MAX` for none).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn run(s: &PacketSearch, q: &[[f32; LANES]; 3], active: usize, stack: &mut Vec<u32>) -> [u32; LANES] {
    let PacketSearch { bvh, wide, r2, slack } = *s;
    let p =
        P3 { x: _mm256_loadu_ps(q[0].as_ptr()), y: _mm256_loadu_ps(q[1].as_ptr()), z: _mm256_loadu_ps(q[2].as_ptr()) };
    let (r2v, slackv, inf) = (splat(r2), splat(slack), splat(f32::INFINITY));
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let act = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(active as i32), lane));
    let mut best = inf;
    // Ids compared unsigned: both sides offset by 2³¹ for the signed compare.
    let sign = _mm256_set1_epi32(i32::MIN);
    let mut best_id = _mm256_set1_epi32(-1);
    let mut best_pos = _mm256_set1_epi32(-1);
    let mut cut = _mm256_blendv_ps(splat(f32::NEG_INFINITY), widen(r2v, slackv), act);
    stack.clear();
    let mut node = 0usize;
    loop {
        // Expand `node`: the children some lane wants, farthest first (by the least bound).
        let mut kids = [(0.0f32, 0u32); WIDE];
        let mut nk = 0;
        for j in 0..WIDE {
            let slot = node * WIDE + j;
            if *wide.children.get_unchecked(slot) == WIDE_EMPTY {
                continue;
            }
            let lb = box_bound(wide.boxes.get_unchecked(slot), &p);
            let m = le(lb, cut);
            if any(m) {
                kids[nk] = (hmin(_mm256_blendv_ps(inf, lb, m)), slot as u32);
                nk += 1;
            }
        }
        push_farthest_first(&mut kids[..nk], stack);
        // The nearest child, popped first, was just checked against the same cuts.
        let mut fresh = nk > 0;
        // Pop until a node to expand; leaves are tested on the way.
        let mut next = None;
        while let Some(slot) = stack.pop() {
            let slot = slot as usize;
            if !fresh && !any(le(box_bound(wide.boxes.get_unchecked(slot), &p), cut)) {
                continue;
            }
            fresh = false;
            let child = *wide.children.get_unchecked(slot);
            if child & WIDE_LEAF == 0 {
                next = Some(child as usize);
                break;
            }
            let start = (child & WIDE_START) as usize;
            let cnt = ((child >> 28) & 7) as usize + 1;
            for k in start..start + cnt {
                let [ta, tb, tc] = bvh.triangle(k);
                let d2 = closest_d2(&p, ta, tb, tc);
                let id = *bvh.ids.get_unchecked(k);
                let idv = _mm256_set1_epi32(id as i32);
                let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(d2, best);
                let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(d2, best);
                let id_lt = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                    _mm256_xor_si256(best_id, sign),
                    _mm256_xor_si256(idv, sign),
                ));
                let better = _mm256_or_ps(lt, and(eq, id_lt));
                let m = and(and(better, le(d2, r2v)), act);
                if any(m) {
                    best = _mm256_blendv_ps(best, d2, m);
                    let mi = _mm256_castps_si256(m);
                    best_id = _mm256_blendv_epi8(best_id, idv, mi);
                    best_pos = _mm256_blendv_epi8(best_pos, _mm256_set1_epi32(k as i32), mi);
                    cut = _mm256_blendv_ps(cut, widen(d2, slackv), m);
                }
            }
        }
        match next {
            Some(n) => node = n,
            None => break,
        }
    }
    let mut out = [0u32; LANES];
    _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, best_pos);
    out
}

/// `closest_d2` for a test against the portable and scalar versions.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(test)]
#[target_feature(enable = "avx2")]
pub unsafe fn closest_d2_lanes(q: &[[f32; LANES]; 3], a: [f32; 3], b: [f32; 3], c: [f32; 3]) -> [f32; LANES] {
    let p =
        P3 { x: _mm256_loadu_ps(q[0].as_ptr()), y: _mm256_loadu_ps(q[1].as_ptr()), z: _mm256_loadu_ps(q[2].as_ptr()) };
    let mut out = [0.0f32; LANES];
    _mm256_storeu_ps(out.as_mut_ptr(), closest_d2(&p, a, b, c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::closest_point::bvh::{TriangleBvh, WideBvh};
    use crate::closest_point::packet::closest_d2 as portable_closest_d2;

    /// Lane by lane, the same bits as the portable test, on random, degenerate and sliver
    /// triangles and points in every region.
    #[test]
    fn closest_d2_matches_the_portable_test() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
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
                1 => tri[2] = tri[1],
                2 => tri[2] = std::array::from_fn(|k| tri[0][k] + 2.0 * (tri[1][k] - tri[0][k])),
                3 => tri[2] = std::array::from_fn(|k| tri[0][k] + 1e-4 * rnd()),
                4 => tri = [tri[0]; 3],
                _ => {}
            }
            let p: [[f32; LANES]; 3] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
            let want = portable_closest_d2(p, tri[0], tri[1], tri[2]);
            // SAFETY: the CPU has AVX2.
            let got = unsafe { closest_d2_lanes(&p, tri[0], tri[1], tri[2]) };
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "triangle {t} {tri:?}");
        }
    }

    /// The AVX2 search and the portable one give the same answers, packet by packet, on a
    /// random mesh with degenerate triangles, for full and partial packets and a radius.
    #[test]
    fn avx2_search_matches_the_portable_one() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut mesh = crate::geometry::mesh::Mesh::<f32>::uv_sphere(12, 24, 1.0, [0.0; 3]);
        let nv = mesh.vertices.len() as u32;
        for t in 0..200u32 {
            // Extra triangles, some repeated or degenerate (ties, zero area).
            mesh.triangles.push([t % nv, (t * 7 + 1) % nv, if t % 3 == 0 { t % nv } else { (t * 13 + 5) % nv }]);
        }
        let bvh = TriangleBvh::build(&mesh);
        for (r2, slack) in [(f32::INFINITY, 1e-6f32), (0.04, 1e-6)] {
            let wide = WideBvh::of(&bvh).unwrap();
            let search = PacketSearch { bvh: &bvh, wide: &wide, r2, slack };
            let mut stack = Vec::new();
            for packet in 0..500 {
                let q: [[f32; LANES]; 3] = std::array::from_fn(|_| std::array::from_fn(|_| rnd() * 3.0 - 1.5));
                let active = if packet % 5 == 0 { 1 + packet % LANES } else { LANES };
                let want = search.run_portable(&q, active, &mut stack);
                // SAFETY: the CPU has AVX2.
                let got = unsafe { run(&search, &q, active, &mut stack) };
                assert_eq!(got[..active], want[..active], "packet {packet}, r2 {r2}");
            }
        }
    }
}
