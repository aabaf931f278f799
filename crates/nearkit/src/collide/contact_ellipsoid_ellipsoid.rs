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

/// Golden-section steps: the bracket shrinks to 0.618^64 ≈ 4·10⁻¹⁴ of [0, 1], and F is flat
/// (quadratic) at its maximum, so the maximum is found to the last bits of an f64.
const STEPS: usize = 64;

/// G(λ)⁻¹·r for symmetric G = (xx, yy, zz, xy, xz, yz), by the adjugate.
#[inline(always)]
fn solve(g: [f64; 6], r: V3) -> V3 {
    let [xx, yy, zz, xy, xz, yz] = g;
    let c00 = yy * zz - yz * yz;
    let c01 = xz * yz - xy * zz;
    let c02 = xy * yz - xz * yy;
    let c11 = xx * zz - xz * xz;
    let c12 = xy * xz - xx * yz;
    let c22 = xx * yy - xy * xy;
    let det = xx * c00 + xy * c01 + xz * c02;
    [
        (c00 * r[0] + c01 * r[1] + c02 * r[2]) / det,
        (c01 * r[0] + c11 * r[1] + c12 * r[2]) / det,
        (c02 * r[0] + c12 * r[1] + c22 * r[2]) / det,
    ]
}

#[inline(always)]
fn blend(sa: &[f64; 6], sb: &[f64; 6], l: f64) -> [f64; 6] {
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
    // Golden-section search for the maximum of the concave F on [0, 1].
    let inv_phi = 0.618_033_988_749_894_9;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut x1 = hi - inv_phi * (hi - lo);
    let mut x2 = lo + inv_phi * (hi - lo);
    let mut f1 = contact_function(&sa, &sb, r, x1);
    let mut f2 = contact_function(&sa, &sb, r, x2);
    for _ in 0..STEPS {
        if f1 < f2 {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + inv_phi * (hi - lo);
            f2 = contact_function(&sa, &sb, r, x2);
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - inv_phi * (hi - lo);
            f1 = contact_function(&sa, &sb, r, x1);
        }
    }
    let l = if f1 < f2 { x2 } else { x1 };
    let x = solve(blend(&sa, &sb, l), r);
    let f = l * (1.0 - l) * dot(r, x);
    if !(f < 1.0) {
        return None;
    }
    let m = 1.0 - l;
    // The touching point a + (1 − λ)·Σa·x.
    let point = [
        m * (sa[0] * x[0] + sa[3] * x[1] + sa[4] * x[2]),
        m * (sa[3] * x[0] + sa[1] * x[1] + sa[5] * x[2]),
        m * (sa[4] * x[0] + sa[5] * x[1] + sa[2] * x[2]),
    ];
    // x = G⁻¹·r points from a towards b; equal centers leave no direction: use +z.
    let ab = normalize(x).unwrap_or([0.0, 0.0, 1.0]);
    let depth = a.support(ab) + b.support(ab) - dot(ab, r);
    Some(ContactGeometry { normal: [-ab[0], -ab[1], -ab[2]], depth, point })
}
