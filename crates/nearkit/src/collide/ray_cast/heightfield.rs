//! A ray against a heightfield, by arithmetic on its grid rather than a tree: the ray's part
//! over the terrain is walked in segments about a square long, and each segment tests the
//! squares under its box, widened by a margin, that the segment before did not. Pieces of the
//! path that pass above or below every height of the tiles under them are skipped, from
//! tiles of the whole terrain down to tiles of 8 × 8 squares (a pyramid of lowest and highest
//! heights, `Heightfield::tile_heights`), and so are a square's triangles when the ray misses
//! the square's (widened) box. The tests are the mesh's (`triangle_box`, `RayFrame::slab`,
//! `RayFrame::triangle`), so a heightfield and the same terrain as a mesh have the same hits,
//! bit for bit (kind aside).
//!
//! Why no hit is lost: a hit at t is clamped into its triangle's box interval, so the ray's
//! point at t lies in that f32 box, which exceeds its square by a few f32 steps; the margin
//! (2^-18 of the largest coordinate, and 2^-40 of the origin's for the rounding of the points
//! computed) is far more. So the square meets the box of whichever segment holds t, and was
//! tested by that segment or an earlier one: the squares under each segment's box form a
//! rectangle whose sides only move one way along the ray, so a square under segments i and k
//! is under every segment in between (tested or skipped: a skipped one can hold no hit). The
//! walk stops once the visitor wants nothing beyond the segment just done. `ray_cast.cu`'s
//! `ray_search_heightfield` is its twin.

use super::intersect::{degenerate, triangle_box, RayFrame};
use super::wide::Visit;
use super::TaggedHit;
use crate::collide::ellipsoid::V3;
use crate::collide::heightfield::{Heightfield, Squares, MAX_TILE_LEVELS, TILE_BITS};
use crate::collide::world::KIND_HEIGHTFIELD;

/// The margin's part of the largest coordinate of the terrain: 2^-18.
pub(crate) const MARGIN_OF_TERRAIN: f64 = 3.814697265625e-6;
/// The margin's part of the largest coordinate of the ray's origin: 2^-40.
pub(crate) const MARGIN_OF_ORIGIN: f64 = 9.094947017729282e-13;

/// Hands `visit` the ray's hits on `h`'s triangles (ids tagged `KIND_HEIGHTFIELD`, each
/// once) that it may want: all those up to `visit.limit()` as it stands when the walk ends.
#[inline(always)]
pub(crate) fn search(r: &RayFrame, h: &Heightfield, visit: &mut impl Visit) {
    let (lo, hi) = h.bounds();
    let mut scale = 0.0f64;
    let mut reach = 0.0f64;
    for a in 0..3 {
        scale = scale.max(lo[a].abs()).max(hi[a].abs());
        reach = reach.max(r.origin[a].abs());
    }
    let m = scale * MARGIN_OF_TERRAIN + reach * MARGIN_OF_ORIGIN;
    let (blo, bhi): (V3, V3) = (std::array::from_fn(|a| lo[a] - m), std::array::from_fn(|a| hi[a] + m));
    let (enter, exit) = r.slab_f64(&blo, &bhi);
    let t0 = if enter > 0.0 { enter } else { 0.0 };
    let limit = visit.limit();
    let t1 = if exit < limit { exit } else { limit };
    if !(t0 <= t1) {
        return;
    }
    // The ray's part over the terrain is split into pieces of about a top-level tile (along
    // its larger horizontal component), each piece that meets the heights of the tiles under
    // it into pieces of about a tile of the level below, and so on down to segments of about
    // a square, whose squares are tested. Depth first, nearer pieces first: the same order as
    // `ray_cast.cu`'s loop.
    let dxy = r.dir[0].abs().max(r.dir[1].abs());
    let top = h.tile_levels();
    let pieces = |span: f64, level: usize, most: f64| {
        let squares = (1u64 << (TILE_BITS as usize * level)) as f64;
        ((span * dxy / h.spacing()) / squares).ceil().clamp(1.0, most) as u32
    };
    let mut walk = Walk::default();
    walk.enter(top, t0, t1, pieces(t1 - t0, top, (h.rows() + h.cols()) as f64));
    let mut level = top;
    let mut prev: Option<Squares> = None;
    loop {
        let Some((pa, pb)) = walk.next(level) else {
            if level == top {
                return;
            }
            level += 1;
            continue;
        };
        let Some(s) = meets_terrain(r, h, level.max(1), pa, pb, m) else { continue };
        if level == 0 {
            visit_squares(r, h, &s, prev, m, visit);
            prev = Some(s);
            if visit.limit() <= pb {
                return;
            }
        } else {
            level -= 1;
            walk.enter(level, pa, pb, pieces(pb - pa, level, (2 << TILE_BITS) as f64 + 2.0));
        }
    }
}

/// The pieces being walked at each level: the interval split, the split's length, how many
/// pieces and the next one's number.
#[derive(Default)]
struct Walk {
    from: [f64; MAX_TILE_LEVELS + 1],
    to: [f64; MAX_TILE_LEVELS + 1],
    step: [f64; MAX_TILE_LEVELS + 1],
    n: [u32; MAX_TILE_LEVELS + 1],
    k: [u32; MAX_TILE_LEVELS + 1],
}

impl Walk {
    /// Level `l` splits [from, to] into `n` pieces.
    #[inline(always)]
    fn enter(&mut self, l: usize, from: f64, to: f64, n: u32) {
        (self.from[l], self.to[l], self.step[l], self.n[l], self.k[l]) = (from, to, (to - from) / n as f64, n, 0);
    }

    /// Level `l`'s next piece, if any is left: consecutive pieces share their ends, the last
    /// ends where the split does.
    #[inline(always)]
    fn next(&mut self, l: usize) -> Option<(f64, f64)> {
        let k = self.k[l];
        if k == self.n[l] {
            return None;
        }
        self.k[l] = k + 1;
        let at = |k: u32| (self.from[l] + k as f64 * self.step[l]).min(self.to[l]);
        Some((at(k), if k + 1 == self.n[l] { self.to[l] } else { at(k + 1) }))
    }
}

/// The squares under the ray's piece from ta to tb (its box widened by m), unless the piece
/// passes above or below every height of their tiles of level `level`.
#[inline(always)]
fn meets_terrain(r: &RayFrame, h: &Heightfield, level: usize, ta: f64, tb: f64, m: f64) -> Option<Squares> {
    let (pa, pb) = (r.point(ta), r.point(tb));
    let lo: V3 = std::array::from_fn(|a| pa[a].min(pb[a]) - m);
    let hi: V3 = std::array::from_fn(|a| pa[a].max(pb[a]) + m);
    let s = h.squares(&lo, &hi)?;
    let [low, high] = h.tile_heights(level, &s);
    (hi[2] >= low && lo[2] <= high).then_some(s)
}

/// Tests the triangles of the squares `s` that are not in `prev` (`m`: the margin).
#[inline(always)]
fn visit_squares(r: &RayFrame, h: &Heightfield, s: &Squares, prev: Option<Squares>, m: f64, visit: &mut impl Visit) {
    let cols1 = (h.cols() - 1) as u32;
    for row in s.r0..=s.r1 {
        for col in s.c0..=s.c1 {
            if prev.is_some_and(|p| p.holds(row, col)) {
                continue;
            }
            let q = row * cols1 + col;
            let sq = h.square(row as usize, col as usize);
            // The square's box widened by m holds both triangles' boxes, so a ray that misses
            // it misses them (intervals grow with boxes).
            let (a, b, d, e) = (sq[0][0], sq[0][1], sq[0][2], sq[1][2]);
            let lo = [a[0] - m, a[1] - m, a[2].min(b[2]).min(d[2]).min(e[2]) - m];
            let hi = [d[0] + m, d[1] + m, a[2].max(b[2]).max(d[2]).max(e[2]) + m];
            let (se, sx) = r.slab_f64(&lo, &hi);
            if !RayFrame::meets(se, sx, visit.limit()) {
                continue;
            }
            for (half, c) in sq.into_iter().enumerate() {
                if degenerate(&c) {
                    continue;
                }
                let (tlo, thi) = triangle_box(&c);
                let (e, x) = r.slab(&tlo, &thi);
                if !RayFrame::meets(e, x, visit.limit()) {
                    continue;
                }
                if let Some(t) = r.triangle(c[0], c[1], c[2], e, x) {
                    let id = 2 * q + half as u32;
                    visit.hit(TaggedHit { t, tagged: id | KIND_HEIGHTFIELD, at: id });
                }
            }
        }
    }
}
