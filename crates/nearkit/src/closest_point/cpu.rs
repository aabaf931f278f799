//! Closest point on a triangle mesh for many queries, on the CPU: queries in Morton order,
//! in f32 searched by packets of `LANES` over the `WideBvh` (`packet`, `packet_avx2`), else
//! each a depth-first search of the `TriangleBvh`, nearer child first.

use rayon::prelude::*;

use super::packet::{PacketSearch, LANES};
use super::{query_frame, ClosestPoints};
use crate::closest_point::bvh::{TriangleBvh, WideBvh, TRIANGLE_LEAF};
use crate::closest_point::triangle::{closest_point_triangle, TrianglePoint};
use crate::geometry::points::Points;
use crate::geometry::points::NO_ID;
use crate::geometry::real::Real;
use crate::runtime::cpu::{prefetch, RowPtr};

/// Each query's closest point on the mesh of `bvh` (whose box is `lo..hi`) within squared
/// radius `r2`; `wide`: the `WideBvh` of the index, searched by packets in f32.
pub(crate) fn closest_points<T: Real>(
    bvh: &TriangleBvh<T>,
    wide: Option<&WideBvh<f32>>,
    (lo, hi): ([T; 3], [T; 3]),
    queries: &Points<T>,
    r2: T,
    slack: T,
) -> ClosestPoints<T> {
    let frame = query_frame(lo, hi);
    let mut order: Vec<(u64, u32)> = (0..queries.len())
        .into_par_iter()
        .map(|i| (frame.code(queries.x[i], queries.y[i], queries.z[i]), i as u32))
        .collect();
    order.par_sort_unstable();
    let n = queries.len();
    let nan = T::from_f64(f64::NAN);
    let mut out = ClosestPoints {
        triangle: vec![NO_ID; n],
        distance: vec![T::INFINITY; n],
        point: Points { x: vec![nan; n], y: vec![nan; n], z: vec![nan; n] },
        bary: [vec![nan; n], vec![nan; n], vec![nan; n]],
    };
    let tri = RowPtr(out.triangle.as_mut_ptr());
    let dist = RowPtr(out.distance.as_mut_ptr());
    let pts = [RowPtr(out.point.x.as_mut_ptr()), RowPtr(out.point.y.as_mut_ptr()), RowPtr(out.point.z.as_mut_ptr())];
    let bary = [RowPtr(out.bary[0].as_mut_ptr()), RowPtr(out.bary[1].as_mut_ptr()), RowPtr(out.bary[2].as_mut_ptr())];
    let write = |q: usize, id: u32, tp: TrianglePoint<T>| {
        // SAFETY: entry q lies inside every output array and only query q writes it.
        unsafe {
            tri.row(q, 1)[0] = id;
            dist.row(q, 1)[0] = tp.d2.sqrt();
            for a in 0..3 {
                pts[a].row(q, 1)[0] = tp.point[a];
                bary[a].row(q, 1)[0] = tp.bary[a];
            }
        }
    };
    // f32: packets of Morton-consecutive queries searched together (packet.rs);
    // each lane's answer is the scalar search's, so the point is recomputed by the scalar
    // test for the winner only.
    let f32_parts = (bvh as &dyn std::any::Any)
        .downcast_ref::<TriangleBvh<f32>>()
        .zip((queries as &dyn std::any::Any).downcast_ref::<Points<f32>>());
    if let Some((bvh32, q32)) = f32_parts {
        if let Some(wide) = wide {
            let packets = PacketSearch { bvh: bvh32, wide, r2: r2.to_f64() as f32, slack: slack.to_f64() as f32 };
            let avx2 = has_avx2();
            // A task takes a run of packets. The queries and output rows lie in random
            // places: each packet prefetches the next one's, so those misses overlap a search.
            let ahead = |k: usize| {
                for (a, col) in [&q32.x, &q32.y, &q32.z].into_iter().enumerate() {
                    prefetch(col.as_ptr().wrapping_add(k), 1);
                    pts[a].prefetch(k);
                    bary[a].prefetch(k);
                }
                tri.prefetch(k);
                dist.prefetch(k);
            };
            order.par_chunks(LANES * 32).for_each_init(
                || Vec::with_capacity(64),
                |stack, run| {
                    for (pi, chunk) in run.chunks(LANES).enumerate() {
                        for &(_, k) in run.iter().skip((pi + 1) * LANES).take(LANES) {
                            ahead(k as usize);
                        }
                        let mut q = [[0.0f32; LANES]; 3];
                        for (i, &(_, k)) in chunk.iter().enumerate() {
                            let p = q32.get(k as usize);
                            (0..3).for_each(|a| q[a][i] = p[a]);
                        }
                        let pos = run_packet(&packets, avx2, &q, chunk.len(), stack);
                        for (i, &(_, k)) in chunk.iter().enumerate() {
                            if pos[i] != u32::MAX {
                                let s = pos[i] as usize;
                                let [a, b, c] = bvh.triangle(s);
                                write(k as usize, bvh.ids[s], closest_point_triangle(queries.get(k as usize), a, b, c));
                            }
                        }
                    }
                },
            );
            return out;
        }
    }
    order.par_iter().with_min_len(256).for_each_init(
        || (Vec::with_capacity(64), None),
        |(stack, hint), &(_, q)| {
            let q = q as usize;
            let found = search(bvh, queries.get(q), r2, slack, *hint, stack);
            *hint = found.map(|f| f.1);
            if let Some((id, _, tp)) = found {
                write(q, id, tp);
            }
        },
    );
    out
}

/// The nearest triangle of `q` within squared radius `r2` (ties to the smaller id) with its
/// sorted position, or `None`. A box is skipped only when its bound exceeds the best distance
/// plus `slack`, so a triangle whose computed distance rounds below its box's bound is never
/// lost: the answer is the brute-force minimum of the computed distances, whatever is tested
/// first. `hint`, a sorted position (the previous query's answer when queries come in
/// Morton order), has its neighbours tested first, so the cut is tight from the start.
pub(crate) fn search<T: Real>(
    bvh: &TriangleBvh<T>,
    q: [T; 3],
    r2: T,
    slack: T,
    hint: Option<usize>,
    stack: &mut Vec<(usize, T)>,
) -> Option<(u32, usize, TrianglePoint<T>)> {
    if bvh.is_empty() {
        return None;
    }
    let mut best: Option<(u32, usize, TrianglePoint<T>)> = None;
    // Boxes farther than this (squared) are skipped; it shrinks as `best` improves.
    let widen = |d2: T| {
        let r = d2.sqrt() + slack;
        r * r
    };
    let mut cut = widen(r2);
    let offer = |s: usize, best: &mut Option<(u32, usize, TrianglePoint<T>)>, cut: &mut T| {
        let [a, b, c] = bvh.triangle(s);
        let tp = closest_point_triangle(q, a, b, c);
        let id = bvh.ids[s];
        let better = match best {
            None => true,
            Some((bid, _, bt)) => tp.d2 < bt.d2 || (tp.d2 == bt.d2 && id < *bid),
        };
        if tp.d2 <= r2 && better {
            *cut = widen(tp.d2);
            *best = Some((id, s, tp));
        }
    };
    if let Some(h) = hint {
        let s = h.saturating_sub(3);
        (s..(s + 8).min(bvh.len())).for_each(|s| offer(s, &mut best, &mut cut));
    }
    if bvh.len() <= TRIANGLE_LEAF {
        (0..bvh.len()).for_each(|s| offer(s, &mut best, &mut cut));
        return best;
    }
    stack.clear();
    stack.push((0, bvh.lower_bound(0, q)));
    while let Some((node, lb)) = stack.pop() {
        if lb > cut {
            continue;
        }
        let (s, e) = bvh.range(node);
        if e - s <= TRIANGLE_LEAF {
            (s..e).for_each(|s| offer(s, &mut best, &mut cut));
            continue;
        }
        let mut kids = [(0usize, T::INFINITY); 2];
        let mut nk = 0;
        for c in [bvh.left[node], bvh.right[node]] {
            match TriangleBvh::<T>::child(c) {
                Ok(s) => offer(s, &mut best, &mut cut),
                Err(i) => {
                    kids[nk] = (i, bvh.lower_bound(i, q));
                    nk += 1;
                }
            }
        }
        // Push the farther child first so the nearer one is searched first.
        if nk == 2 && kids[1].1 < kids[0].1 {
            kids.swap(0, 1);
        }
        for &(i, lb) in kids[..nk].iter().rev() {
            if lb <= cut {
                stack.push((i, lb));
            }
        }
    }
    best
}

/// Whether the CPU has AVX2 (for `run_packet`).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// One packet's search, in AVX2 where the CPU has it (`avx2`), else portable: the same IEEE
/// operations either way, so the same answers.
#[inline(always)]
fn run_packet(
    s: &PacketSearch,
    avx2: bool,
    q: &[[f32; LANES]; 3],
    active: usize,
    stack: &mut Vec<u32>,
) -> [u32; LANES] {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the CPU has AVX2.
        return unsafe { super::packet_avx2::run(s, q, active, stack) };
    }
    let _ = avx2;
    s.run_portable(q, active, stack)
}
