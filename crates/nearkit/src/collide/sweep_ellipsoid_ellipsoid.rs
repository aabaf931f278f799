//! A moving ellipsoid against a still one: the first time they touch.
//!
//! Ellipsoids a and b touch or overlap when r = b − a lies in their Minkowski body M, and M
//! is the intersection over λ in (0, 1) of the ellipsoids
//! E_λ = {r : λ(1 − λ)·rᵀG(λ)⁻¹r ≤ 1} (the Perram–Wertheim function F of
//! `contact_ellipsoid_ellipsoid` is the largest of these forms). Along a sweep
//! r(t) = r₀ − t·m, so the time r(t) enters any one E_λ, a quadratic's root, is a lower bound
//! on the time of impact. Each step takes the λ maximising F at r(t), whose E_λ touches M
//! where the ray from 0 through r(t) crosses it, and moves t to that E_λ's entry. Steps never
//! pass the impact, and converge quadratically as r(t) nears M; a line that misses M leaves
//! some E_λ behind, or misses it, which ends the walk with no hit.
//!
//! So the time found is never later than the true one, and earlier by at most the last step
//! (2^-40 of the sweep, or what is left after `STEPS` steps: a sweep that grazes a body can
//! stop short of it). Two spheres take one step (their E_λ at the optimum is M itself).

use super::contact_ellipsoid_ellipsoid::{apply, blend, first_guess, inverse, settle, solve, sym_mul};
use super::ellipsoid::{dot, normalize, Shape, V3};
use super::sweep_ellipsoid_triangle::SweepHit;

/// Steps at most.
pub(crate) const STEPS: usize = 32;
/// A step of at most this (a fraction of the sweep) ends the walk: the bodies touch there.
pub(crate) const SETTLED: f64 = 1.0 / (1u64 << 40) as f64;
/// The bodies' reach is widened by this before the quick reject, against rounding.
pub(crate) const REACH_SLACK: f64 = 1.000_001;

/// The first contact of ellipsoid `a` moving by `motion` with the still ellipsoid `b`, whose
/// center is at offset `r0` from a's start; `None` when they do not touch before the end.
/// Bodies that start overlapping touch at toi 0. `point` is the touching point as an offset
/// from a's start center; `normal` pushes `a` away from `b`.
pub fn sweep_ellipsoid_ellipsoid(a: &Shape, b: &Shape, r0: V3, motion: V3) -> Option<SweepHit> {
    // The segment's closest approach to b beyond both bodies' reach: no touch.
    let reach = (a.radii[0].max(a.radii[1]).max(a.radii[2]) + b.radii[0].max(b.radii[1]).max(b.radii[2])) * REACH_SLACK;
    let mm = dot(motion, motion);
    let near = if mm > 0.0 { (dot(r0, motion) / mm).clamp(0.0, 1.0) } else { 0.0 };
    let at = |t: f64| [r0[0] - t * motion[0], r0[1] - t * motion[1], r0[2] - t * motion[2]];
    let gap = at(near);
    if !(dot(gap, gap) < reach * reach) {
        return None;
    }
    let (sa, sb) = (a.sigma(), b.sigma());
    // The touch at t: the touching point a(t) + (1 − λ)·Σa·G⁻¹r and G⁻¹r's direction, as in
    // contact_ellipsoid_ellipsoid.
    let touch = |t: f64, l: f64| {
        let r = at(t);
        let l = settle(&sa, &sb, r, l);
        let x = solve(blend(&sa, &sb, l), r);
        let (m, sx) = (1.0 - l, sym_mul(&sa, x));
        let point = [t * motion[0] + m * sx[0], t * motion[1] + m * sx[1], t * motion[2] + m * sx[2]];
        let ab = normalize(x).unwrap_or([0.0, 0.0, 1.0]);
        SweepHit { toi: t, point, normal: [-ab[0], -ab[1], -ab[2]] }
    };
    // E_λ's entry ahead of r(t): the smaller root s of w·(r − s·m)ᵀG⁻¹(r − s·m) = 1, that is
    // A·s² − 2B·s + (c − 1) = 0 (c = w·rᵀG⁻¹r > 1: r is outside E_λ), in the form without
    // cancellation; `None` when the line misses E_λ or moves away from it.
    let entry = |r: V3, l: f64| -> Result<f64, f64> {
        let inv = inverse(blend(&sa, &sb, l));
        let x = apply(&inv, r);
        let w = l * (1.0 - l);
        let c = w * dot(r, x);
        if !(c > 1.0) {
            return Err(c); // r is inside E_λ
        }
        let y = apply(&inv, motion);
        let (qa, qb) = (w * dot(motion, y), w * dot(motion, x));
        let disc = qb * qb - qa * (c - 1.0);
        if !(qb > 0.0 && disc >= 0.0) {
            return Ok(f64::INFINITY);
        }
        Ok((c - 1.0) / (qb + disc.sqrt()))
    };
    // Most pairs the broad phase gives are settled by the first guess's E_λ alone: the sweep
    // passes it by, or stops short of it.
    let mut l = first_guess(a, b, r0);
    let mut t = match entry(r0, l) {
        Ok(s) if !(s <= 1.0) => return None,
        Ok(s) => s,
        Err(_) => 0.0,
    };
    for _ in 0..STEPS {
        let r = at(t);
        l = settle(&sa, &sb, r, l);
        let s = match entry(r, l) {
            Err(_) => return Some(touch(t, l)), // max F ≤ 1: touching or overlapping at t
            Ok(s) => s,
        };
        t += s;
        if !(t <= 1.0) {
            return None;
        }
        if s <= SETTLED {
            break;
        }
    }
    Some(touch(t, l))
}
