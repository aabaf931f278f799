//! The CPU's search of a ray-cast tree in its wide form (`bvh::WideNode`: the binary tree
//! collapsed into nodes of four children), whose four boxes a ray tests together, a lane each
//! (AVX2 where the CPU has it).
//!
//! Each lane does the scalar `RayFrame::slab`'s operations on the same f32 boxes, so the
//! intervals, and with them every pruning decision and every hit, are those of the binary
//! tree's search: a wide node only saves the levels in between (half the nodes, a quarter of
//! the stack traffic) and tests four boxes in the time of one.

use super::bvh::{WideNode, LEAF, STACK, WIDTH};
use super::intersect::RayFrame;
use super::TaggedHit;
use crate::runtime::cpu::prefetch;

/// What a search does at the leaves it reaches.
pub(crate) trait Visit {
    /// Nodes entered beyond this t are skipped.
    fn limit(&self) -> f64;
    /// A hit (already in [0, max_distance]).
    fn hit(&mut self, h: TaggedHit);
}

/// A wide search's stack: each node popped pushes at most `WIDTH - 1` more than it takes.
const WIDE_STACK: usize = (WIDTH - 1) * STACK + 1;

/// Whether no component of the ray's direction is 0 (`slab4_oblique` serves it).
#[inline(always)]
fn oblique(r: &RayFrame) -> bool {
    r.dir.iter().all(|&d| d != 0.0)
}

/// The four boxes' intervals (enter, exit) for the ray: `RayFrame::slab` in each lane.
/// `oblique`: `oblique(r)`, found once a ray.
#[inline(always)]
fn slab4(r: &RayFrame, node: &WideNode, oblique: bool) -> ([f64; WIDTH], [f64; WIDTH]) {
    if oblique {
        return slab4_oblique(r, node);
    }
    slab4_any(r, node)
}

/// `slab4` of a ray with no zero direction component: each axis's near side (lo where the
/// direction is positive) picked once, so each lane computes the same two values as
/// `RayFrame::slab` without choosing between them.
#[inline(always)]
fn slab4_oblique(r: &RayFrame, node: &WideNode) -> ([f64; WIDTH], [f64; WIDTH]) {
    let mut enter = [f64::NEG_INFINITY; WIDTH];
    let mut exit = [f64::INFINITY; WIDTH];
    for a in 0..3 {
        let (o, inv) = (r.origin[a], r.inv[a]);
        let (near, far) = if inv > 0.0 { (&node.lo[a], &node.hi[a]) } else { (&node.hi[a], &node.lo[a]) };
        for k in 0..WIDTH {
            let tn = (near[k] as f64 - o) * inv;
            let tf = (far[k] as f64 - o) * inv;
            enter[k] = if tn > enter[k] { tn } else { enter[k] };
            exit[k] = if tf < exit[k] { tf } else { exit[k] };
        }
    }
    (enter, exit)
}

#[inline(always)]
fn slab4_any(r: &RayFrame, node: &WideNode) -> ([f64; WIDTH], [f64; WIDTH]) {
    let mut enter = [f64::NEG_INFINITY; WIDTH];
    let mut exit = [f64::INFINITY; WIDTH];
    let mut out = [false; WIDTH];
    for a in 0..3 {
        let o = r.origin[a];
        let (lo, hi) = (node.lo[a].map(|v| v as f64), node.hi[a].map(|v| v as f64));
        if r.dir[a] == 0.0 {
            for k in 0..WIDTH {
                out[k] |= o < lo[k] || o > hi[k];
            }
            continue;
        }
        let inv = r.inv[a];
        let t0: [f64; WIDTH] = std::array::from_fn(|k| (lo[k] - o) * inv);
        let t1: [f64; WIDTH] = std::array::from_fn(|k| (hi[k] - o) * inv);
        let (near, far) = if inv > 0.0 { (t0, t1) } else { (t1, t0) };
        for k in 0..WIDTH {
            enter[k] = if near[k] > enter[k] { near[k] } else { enter[k] };
            exit[k] = if far[k] < exit[k] { far[k] } else { exit[k] };
        }
    }
    for k in 0..WIDTH {
        if out[k] {
            (enter[k], exit[k]) = (f64::INFINITY, f64::NEG_INFINITY);
        }
    }
    (enter, exit)
}

/// As bits, the children whose boxes (enter, exit) the ray meets within [0, `limit`], of a
/// layer in its mask (an empty slot's box, (+∞, −∞), is met by no ray).
#[inline(always)]
fn met_bits(r: &RayFrame, node: &WideNode, enter: &[f64; WIDTH], exit: &[f64; WIDTH], limit: f64) -> u32 {
    let mut bits = 0u32;
    for k in 0..WIDTH {
        let ok = (node.layers[k] & r.mask != 0) & RayFrame::meets(enter[k], exit[k], limit);
        bits |= u32::from(ok) << k;
    }
    bits
}

/// `met_bits` in four AVX2 lanes: the same comparisons (ordered, so NaN meets nothing as there).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn met_bits_avx2(r: &RayFrame, node: &WideNode, enter: &[f64; WIDTH], exit: &[f64; WIDTH], limit: f64) -> u32 {
    use std::arch::x86_64::*;
    const _: () = assert!(WIDTH == 4);
    let (e, x) = (_mm256_loadu_pd(enter.as_ptr()), _mm256_loadu_pd(exit.as_ptr()));
    let inside = _mm256_and_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(e, x), _mm256_cmp_pd::<_CMP_GE_OQ>(x, _mm256_setzero_pd()));
    let ok = _mm256_and_pd(inside, _mm256_cmp_pd::<_CMP_LE_OQ>(e, _mm256_set1_pd(limit)));
    let layers = _mm_and_si128(_mm_loadu_si128(node.layers.as_ptr() as *const __m128i), _mm_set1_epi32(r.mask as i32));
    let none = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(layers, _mm_setzero_si128()))) as u32;
    _mm256_movemask_pd(ok) as u32 & !none & 0xf
}

/// The ray's search of a wide tree (primitives only of layers meeting its mask): `leaf`
/// tests the primitive at a sorted position, the ray in its box over (enter, exit), and
/// returns its hit. Depth first, nearer children first; `visit` keeps what it keeps by
/// (distance, kind, id), whatever order the hits come in.
#[inline(always)]
pub(crate) fn search<const AVX2: bool>(
    nodes: &[WideNode],
    r: &RayFrame,
    visit: &mut impl Visit,
    mut leaf: impl FnMut(u32, f64, f64) -> Option<TaggedHit>,
) {
    if nodes.is_empty() {
        return;
    }
    let mut stack = [std::mem::MaybeUninit::<(u32, f64)>::uninit(); WIDE_STACK];
    let mut top = 0;
    // The node searched next: the nearest child met, entered without a trip through the
    // stack; the others wait there, nearest on top.
    let mut cur = 0u32;
    let oblique = oblique(r);
    loop {
        let node = &nodes[cur as usize];
        let (enter, exit) = slab4(r, node, oblique);
        // The children the ray meets within the limit, as bits, without a branch per child
        // (an empty slot's box, (+∞, −∞), is met by no ray).
        let limit = visit.limit();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is asked for only where the CPU has it (`cpu::search_world`).
        let mut meets = if AVX2 {
            unsafe { met_bits_avx2(r, node, &enter, &exit, limit) }
        } else {
            met_bits(r, node, &enter, &exit, limit)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let mut meets = met_bits(r, node, &enter, &exit, limit);
        let mut inner = [(0u32, 0.0f64); WIDTH];
        let mut found = 0;
        while meets != 0 {
            let k = meets.trailing_zeros() as usize;
            meets &= meets - 1;
            let c = node.child[k];
            if c & LEAF != 0 {
                // A hit found here may lower the limit below the next child's entry: that
                // child's test is then in vain, but finds nothing the visit keeps.
                if let Some(h) = leaf(c & !LEAF, enter[k], exit[k]) {
                    visit.hit(h);
                }
            } else {
                prefetch(nodes.as_ptr().wrapping_add(c as usize) as *const u8, std::mem::size_of::<WideNode>());
                inner[found] = (c, enter[k]);
                found += 1;
            }
        }
        match found {
            0 => {
                // The nearest waiting node still entered within the limit, if any.
                loop {
                    if top == 0 {
                        return;
                    }
                    top -= 1;
                    // SAFETY: entries below `top` were written by a push.
                    let (i, enter) = unsafe { stack[top].assume_init() };
                    if enter <= visit.limit() {
                        cur = i;
                        break;
                    }
                }
            }
            1 => cur = inner[0].0,
            _ => {
                // Farthest first; the nearest is searched next, the rest pushed in order.
                let inner = &mut inner[..found];
                for j in 1..inner.len() {
                    let mut m = j;
                    while m > 0 && inner[m].1 > inner[m - 1].1 {
                        inner.swap(m, m - 1);
                        m -= 1;
                    }
                }
                let (last, rest) = inner.split_last().expect("two at least");
                for &e in rest {
                    // A wide tree is no deeper than its binary tree (at most STACK), and a
                    // node searched adds at most WIDTH - 1 entries.
                    stack[top].write(e);
                    top += 1;
                }
                cur = last.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collide::ray_cast::bvh::EMPTY;
    use crate::collide::ray_cast::intersect::UnitRay;
    use crate::collide::ray_cast::Ray;
    use rand::{Rng, SeedableRng};

    fn random_box(g: &mut rand_pcg::Pcg64) -> ([f32; 3], [f32; 3]) {
        let a: [f32; 3] = std::array::from_fn(|_| g.random_range(-4.0..4.0));
        let b: [f32; 3] = std::array::from_fn(|_| g.random_range(-4.0..4.0));
        (std::array::from_fn(|i| a[i].min(b[i])), std::array::from_fn(|i| a[i].max(b[i])))
    }

    /// The AVX2 lanes find the children the scalar test finds, on intervals with ties,
    /// infinities and NaN, and layers that meet the mask or not.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn met_bits_in_avx2_are_the_scalar_ones() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: no AVX2");
            return;
        }
        let mut g = rand_pcg::Pcg64::seed_from_u64(11);
        let values = [f64::NEG_INFINITY, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, f64::INFINITY, f64::NAN];
        let pick = |g: &mut rand_pcg::Pcg64| values[g.random_range(0..values.len())];
        for n in 0..20_000 {
            let enter: [f64; WIDTH] = std::array::from_fn(|_| pick(&mut g));
            let exit: [f64; WIDTH] = std::array::from_fn(|_| pick(&mut g));
            let limit = [0.0, 0.5, 1.0, f64::INFINITY][n % 4];
            let node = WideNode {
                lo: [[0.0; WIDTH]; 3],
                hi: [[0.0; WIDTH]; 3],
                child: [EMPTY; WIDTH],
                layers: std::array::from_fn(|_| [0, 1, 2, 3, u32::MAX][g.random_range(0..5)]),
            };
            let d = [1.0, 0.0, 0.0];
            let mut r = RayFrame::new(&UnitRay::new(&Ray::new([0.0; 3], d, f64::INFINITY)).unwrap());
            r.mask = [1, 2, u32::MAX][n % 3];
            // SAFETY: the CPU has AVX2 (checked above).
            let wide = unsafe { met_bits_avx2(&r, &node, &enter, &exit, limit) };
            assert_eq!(wide, met_bits(&r, &node, &enter, &exit, limit), "{enter:?} {exit:?} {limit} {:?}", node.layers);
        }
    }

    #[test]
    fn four_lanes_give_the_scalar_intervals() {
        let mut g = rand_pcg::Pcg64::seed_from_u64(7);
        for n in 0..20_000 {
            // Directions along axes and planes too (zero components), and origins on faces.
            let mut d: [f64; 3] = std::array::from_fn(|_| g.random_range(-1.0..1.0));
            for c in &mut d {
                if g.random_range(0..4) == 0 {
                    *c = 0.0;
                }
            }
            if d == [0.0; 3] {
                d[n % 3] = 1.0;
            }
            let mut node = WideNode {
                lo: [[f32::INFINITY; WIDTH]; 3],
                hi: [[f32::NEG_INFINITY; WIDTH]; 3],
                child: [EMPTY; WIDTH],
                layers: [0; WIDTH],
            };
            let boxes: Vec<_> = (0..WIDTH - n % 2).map(|_| random_box(&mut g)).collect();
            for (k, (lo, hi)) in boxes.iter().enumerate() {
                for a in 0..3 {
                    node.lo[a][k] = lo[a];
                    node.hi[a][k] = hi[a];
                }
            }
            let mut o: [f64; 3] = std::array::from_fn(|_| g.random_range(-6.0..6.0));
            if n % 5 == 0 {
                o[n % 3] = boxes[0].0[n % 3] as f64;
            }
            let r = RayFrame::new(&UnitRay::new(&Ray::new(o, d, f64::INFINITY)).unwrap());
            let (enter, exit) = slab4(&r, &node, oblique(&r));
            if oblique(&r) {
                let (e, x) = slab4_any(&r, &node);
                assert_eq!(
                    (enter.map(f64::to_bits), exit.map(f64::to_bits)),
                    (e.map(f64::to_bits), x.map(f64::to_bits))
                );
            }
            for k in 0..WIDTH {
                let (lo, hi) = ([0, 1, 2].map(|a| node.lo[a][k]), [0, 1, 2].map(|a| node.hi[a][k]));
                let (e, x) = r.slab(&lo, &hi);
                assert_eq!((enter[k].to_bits(), exit[k].to_bits()), (e.to_bits(), x.to_bits()), "ray {n}, box {k}");
                if k >= boxes.len() {
                    assert!(!RayFrame::meets(enter[k], exit[k], f64::INFINITY), "an empty slot is never met");
                }
            }
        }
    }
}
