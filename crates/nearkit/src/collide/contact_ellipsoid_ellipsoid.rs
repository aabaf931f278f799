//! Ellipsoid–ellipsoid contact by the Perram–Wertheim contact function:
//!
//! F(λ) = λ(1 − λ)·rᵀ·G(λ)⁻¹·r,  G(λ) = (1 − λ)·Σa + λ·Σb,  r = b − a,
//!
//! is concave on [0, 1], and max F < 1 iff the ellipsoids overlap (= 1: touching). √max F is
//! the factor by which both must be scaled about their centers to just touch. At the
//! maximising λ the touching point is a + (1 − λ)·Σa·G⁻¹·r and the common normal is G⁻¹·r.
//! (Perram & Wertheim, J. Comput. Phys. 58, 1985.)

use super::contact_ellipsoid_triangle::ContactGeometry;
use super::ellipsoid::{dot, normalize, Shape, V3};

/// At most this many safeguarded Newton steps; they stop once a step moves λ by at most
/// `SETTLED`, about five from the first guess. (Newton converges quadratically, so the last
/// step leaves λ within ~1e-24 of the optimum; F is flat there.)
pub(crate) const STEPS: usize = 24;
pub(crate) const SETTLED: f64 = 1e-13;

/// The adjugate of symmetric G = (xx, yy, zz, xy, xz, yz), in the same order, and the
/// reciprocal of its determinant: G⁻¹·r is then `apply(&inverse(g), r)`, and one G serves two
/// solves with one division.
#[inline(always)]
pub(crate) fn inverse(g: [f64; 6]) -> ([f64; 6], f64) {
    let [xx, yy, zz, xy, xz, yz] = g;
    let c00 = yy * zz - yz * yz;
    let c01 = xz * yz - xy * zz;
    let c02 = xy * yz - xz * yy;
    let c11 = xx * zz - xz * xz;
    let c12 = xy * xz - xx * yz;
    let c22 = xx * yy - xy * xy;
    let det = xx * c00 + xy * c01 + xz * c02;
    ([c00, c11, c22, c01, c02, c12], 1.0 / det)
}

/// G⁻¹·r from `inverse(g)`.
#[inline(always)]
pub(crate) fn apply(inv: &([f64; 6], f64), r: V3) -> V3 {
    let ([c00, c11, c22, c01, c02, c12], k) = *inv;
    [
        (c00 * r[0] + c01 * r[1] + c02 * r[2]) * k,
        (c01 * r[0] + c11 * r[1] + c12 * r[2]) * k,
        (c02 * r[0] + c12 * r[1] + c22 * r[2]) * k,
    ]
}

/// G(λ)⁻¹·r for symmetric G.
#[inline(always)]
pub(crate) fn solve(g: [f64; 6], r: V3) -> V3 {
    apply(&inverse(g), r)
}

#[inline(always)]
pub(crate) fn blend(sa: &[f64; 6], sb: &[f64; 6], l: f64) -> [f64; 6] {
    let m = 1.0 - l;
    [
        m * sa[0] + l * sb[0],
        m * sa[1] + l * sb[1],
        m * sa[2] + l * sb[2],
        m * sa[3] + l * sb[3],
        m * sa[4] + l * sb[4],
        m * sa[5] + l * sb[5],
    ]
}

#[inline(always)]
fn contact_function(sa: &[f64; 6], sb: &[f64; 6], r: V3, l: f64) -> f64 {
    let x = solve(blend(sa, sb, l), r);
    l * (1.0 - l) * dot(r, x)
}

/// M·x for symmetric M = (xx, yy, zz, xy, xz, yz).
#[inline(always)]
pub(crate) fn sym_mul(m: &[f64; 6], x: V3) -> V3 {
    [
        m[0] * x[0] + m[3] * x[1] + m[4] * x[2],
        m[3] * x[0] + m[1] * x[1] + m[5] * x[2],
        m[4] * x[0] + m[5] * x[1] + m[2] * x[2],
    ]
}

/// The first guess of the λ maximising F at offset `r`: the optimum for two spheres with the
/// bodies' reach along r.
#[inline(always)]
pub(crate) fn first_guess(a: &Shape, b: &Shape, r: V3) -> f64 {
    let (ha, hb) = (a.support(r), b.support(r));
    if ha + hb > 0.0 {
        ha / (ha + hb)
    } else {
        0.5
    }
}

/// The λ maximising F at offset `r`, from the guess `l`.
pub(crate) fn settle(sa: &[f64; 6], sb: &[f64; 6], r: V3, l: f64) -> f64 {
    // F is concave, so F' falls through zero once on [0, 1]: Newton on F', kept inside the
    // bracket where F' changes sign, bisecting when a step would leave it. With x = G⁻¹r and
    // y = (Σb − Σa)·x: F' = (1 − 2λ)·r·x − λ(1 − λ)·x·y and
    // F'' = −2·r·x − 2(1 − 2λ)·x·y + 2λ(1 − λ)·y·G⁻¹y.
    let d = [sb[0] - sa[0], sb[1] - sa[1], sb[2] - sa[2], sb[3] - sa[3], sb[4] - sa[4], sb[5] - sa[5]];
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut l = l;
    for _ in 0..STEPS {
        let inv = inverse(blend(sa, sb, l));
        let x = apply(&inv, r);
        let y = sym_mul(&d, x);
        let (s, q, w) = (dot(r, x), dot(x, y), dot(y, apply(&inv, y)));
        let m = l * (1.0 - l);
        let d1 = (1.0 - 2.0 * l) * s - m * q;
        let d2 = -2.0 * s - 2.0 * (1.0 - 2.0 * l) * q + 2.0 * m * w;
        if d1 == 0.0 {
            break;
        }
        if d1 > 0.0 {
            lo = l;
        } else {
            hi = l;
        }
        // A Newton step that stays in the bracket (its ends included: a settled λ steps onto
        // itself), else bisection.
        let step = l - d1 / d2;
        let next = if d2 < 0.0 && step >= lo && step <= hi { step } else { 0.5 * (lo + hi) };
        let moved = (next - l).abs();
        l = next;
        if moved <= SETTLED {
            break;
        }
    }
    l
}

/// The contact of ellipsoid `a` with ellipsoid `b`, whose center is at offset `r` from a's,
/// seen from `a` (normal moves `a` away; point is an offset from a's center); `None` when they
/// do not overlap. The depth is the overlap of the two along the normal,
/// h_a(n) + h_b(n) − n·r.
pub fn contact_ellipsoid_ellipsoid(a: &Shape, b: &Shape, r: V3) -> Option<ContactGeometry> {
    let reach = a.radii[0].max(a.radii[1]).max(a.radii[2]) + b.radii[0].max(b.radii[1]).max(b.radii[2]);
    if !(dot(r, r) < reach * reach) {
        return None;
    }
    let (sa, sb) = (a.sigma(), b.sigma());
    // First guess: the optimum for two spheres with the bodies' reach along r. F(λ) ≥ 1 at
    // any λ proves the bodies apart, which settles most candidate pairs with one solve.
    let l = first_guess(a, b, r);
    if !(contact_function(&sa, &sb, r, l) < 1.0) {
        return None;
    }
    let l = settle(&sa, &sb, r, l);
    let x = solve(blend(&sa, &sb, l), r);
    let f = l * (1.0 - l) * dot(r, x);
    if !(f < 1.0) {
        return None;
    }
    // The touching point a + (1 − λ)·Σa·x.
    let (m, sx) = (1.0 - l, sym_mul(&sa, x));
    let point = [m * sx[0], m * sx[1], m * sx[2]];
    // x = G⁻¹·r points from a towards b; equal centers leave no direction: use +z.
    let ab = normalize(x).unwrap_or([0.0, 0.0, 1.0]);
    let depth = a.support(ab) + b.support(ab) - dot(ab, r);
    Some(ContactGeometry { normal: [-ab[0], -ab[1], -ab[2]], depth, point })
}
