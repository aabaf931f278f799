//! The exact tests of a ray against a box, a triangle and an ellipsoid, in f64. `ray_cast.cu`
//! repeats every function here operation for operation (no fused multiply-add; divisions
//! and square roots are correctly rounded on both), so both backends find the same hits bit
//! for bit.

use super::Ray;
use crate::collide::box_f32::box_f32;
use crate::collide::ellipsoid::{body_box, cross, dot, normalize, sub, times, Shape, V3};

/// A checked ray with a unit direction: what both backends are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct UnitRay {
    pub origin: V3,
    pub dir: V3,
    pub max_distance: f64,
    pub mask: u32,
}

impl UnitRay {
    /// The ray with its direction made unit: divided by its largest component's magnitude
    /// (no overflow or underflow), then by its length; components below 2^-1022 become 0 (so
    /// that their reciprocals are finite). An error message for an unusable ray.
    pub fn new(r: &Ray) -> Result<Self, String> {
        Self::check(r)?;
        let d = r.direction;
        let m = d[0].abs().max(d[1].abs()).max(d[2].abs());
        let u = [d[0] / m, d[1] / m, d[2] / m];
        let l = dot(u, u).sqrt();
        let dir = u.map(|v| {
            let c = v / l;
            if c.abs() < f64::MIN_POSITIVE {
                0.0
            } else {
                c
            }
        });
        Ok(UnitRay { origin: r.origin, dir, max_distance: r.max_distance, mask: r.mask })
    }

    /// Whether `r` can be made unit (`new` succeeds), or what is wrong with it.
    pub fn check(r: &Ray) -> Result<(), String> {
        if !r.origin.iter().all(|v| v.is_finite()) {
            return Err(format!("origin {:?} is not finite", r.origin));
        }
        let d = r.direction;
        // Each component checked (`f64::max` would pass over a NaN).
        let m = d[0].abs().max(d[1].abs()).max(d[2].abs());
        if !(d.iter().all(|v| v.is_finite()) && m > 0.0) {
            return Err(format!("direction {d:?} must be finite and not zero"));
        }
        if r.max_distance.is_nan() || r.max_distance < 0.0 {
            return Err(format!("max_distance {} must be 0 or more", r.max_distance));
        }
        Ok(())
    }
}

/// What the tests need of a ray, derived from it once: the reciprocals of its direction
/// (for boxes), and the watertight test's axes and shear.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RayFrame {
    pub origin: V3,
    pub dir: V3,
    pub max_distance: f64,
    pub mask: u32,
    /// 1 / dir (unused where dir is 0).
    pub inv: V3,
    /// The axis of dir's largest magnitude (kz), and the two others (kx, ky), in an order
    /// that keeps triangles' winding.
    pub kx: usize,
    pub ky: usize,
    pub kz: usize,
    /// dir[kx] / dir[kz], dir[ky] / dir[kz], 1 / dir[kz].
    pub shear: V3,
}

impl RayFrame {
    #[inline]
    pub fn new(r: &UnitRay) -> Self {
        let d = r.dir;
        let inv = d.map(|v| if v != 0.0 { 1.0 / v } else { 0.0 });
        let mut kz = 0;
        if d[1].abs() > d[kz].abs() {
            kz = 1;
        }
        if d[2].abs() > d[kz].abs() {
            kz = 2;
        }
        let mut kx = if kz == 2 { 0 } else { kz + 1 };
        let mut ky = if kx == 2 { 0 } else { kx + 1 };
        if d[kz] < 0.0 {
            std::mem::swap(&mut kx, &mut ky);
        }
        let shear = [d[kx] / d[kz], d[ky] / d[kz], 1.0 / d[kz]];
        RayFrame { origin: r.origin, dir: d, max_distance: r.max_distance, mask: r.mask, inv, kx, ky, kz, shear }
    }

    /// The interval of t over which the ray is in the box (lo, hi): (enter, exit), with
    /// enter > exit when it misses. For a box holding another, the interval holds the other's
    /// (each step rounds monotonically), which is what makes pruning by boxes exact.
    #[inline(always)]
    pub fn slab(&self, lo: &[f32; 3], hi: &[f32; 3]) -> (f64, f64) {
        self.slab_f64(&lo.map(f64::from), &hi.map(f64::from))
    }

    /// `slab` of a box in f64 (the f32 boxes' values are exact in f64: the same steps).
    #[inline(always)]
    pub fn slab_f64(&self, lo: &V3, hi: &V3) -> (f64, f64) {
        let (mut enter, mut exit) = (f64::NEG_INFINITY, f64::INFINITY);
        for a in 0..3 {
            let (l, h) = (lo[a], hi[a]);
            if self.dir[a] == 0.0 {
                if self.origin[a] < l || self.origin[a] > h {
                    return (f64::INFINITY, f64::NEG_INFINITY);
                }
                continue;
            }
            let t0 = (l - self.origin[a]) * self.inv[a];
            let t1 = (h - self.origin[a]) * self.inv[a];
            let (near, far) = if self.inv[a] > 0.0 { (t0, t1) } else { (t1, t0) };
            if near > enter {
                enter = near;
            }
            if far < exit {
                exit = far;
            }
        }
        (enter, exit)
    }

    /// Whether the interval (enter, exit) of a box meets [0, limit].
    #[inline(always)]
    pub fn meets(enter: f64, exit: f64, limit: f64) -> bool {
        enter <= exit && exit >= 0.0 && enter <= limit
    }

    /// Where the ray meets triangle (a, b, c), whose box it is in over (enter, exit):
    /// the watertight test, its t clamped into (enter, exit), kept if in [0, max_distance].
    #[inline(always)]
    pub fn triangle(&self, a: V3, b: V3, c: V3, enter: f64, exit: f64) -> Option<f64> {
        let o = self.origin;
        let (pa, pb, pc) = (sub(a, o), sub(b, o), sub(c, o));
        let (kx, ky, kz) = (self.kx, self.ky, self.kz);
        let [sx, sy, sz] = self.shear;
        let ax = pa[kx] - sx * pa[kz];
        let ay = pa[ky] - sy * pa[kz];
        let bx = pb[kx] - sx * pb[kz];
        let by = pb[ky] - sy * pb[kz];
        let cx = pc[kx] - sx * pc[kz];
        let cy = pc[ky] - sy * pc[kz];
        let u = cx * by - cy * bx;
        let v = ax * cy - ay * cx;
        let w = bx * ay - by * ax;
        if (u < 0.0 || v < 0.0 || w < 0.0) && (u > 0.0 || v > 0.0 || w > 0.0) {
            return None;
        }
        let det = u + v + w;
        if det == 0.0 {
            return None;
        }
        let (az, bz, cz) = (sz * pa[kz], sz * pb[kz], sz * pc[kz]);
        let t = (u * az + v * bz + w * cz) / det;
        self.keep(t, enter, exit)
    }

    /// Where the ray meets the ellipsoid at `center` whose unit-ball map is `unit` (S⁻¹·Rᵀ),
    /// and whose box it is in over (enter, exit). A ray starting inside (or on) it meets it at
    /// 0. The t of the nearer root, clamped into (enter, exit), kept if in [0, max_distance].
    #[inline(always)]
    pub fn ellipsoid(&self, center: V3, unit: &[[f64; 3]; 3], enter: f64, exit: f64) -> Option<f64> {
        let p = times(unit, sub(self.origin, center));
        let c = dot(p, p) - 1.0;
        if c <= 0.0 {
            return self.keep(0.0, enter, exit);
        }
        let v = times(unit, self.dir);
        let b = dot(p, v);
        if !(b < 0.0) {
            return None;
        }
        let a = dot(v, v);
        let disc = b * b - a * c;
        if !(disc >= 0.0) {
            return None;
        }
        // c / (√disc − b) is the nearer root (−b − √disc) / a without the cancellation.
        let t = c / (disc.sqrt() - b);
        self.keep(t, enter, exit)
    }

    /// t clamped into (enter, exit), if then in [0, max_distance].
    #[inline(always)]
    fn keep(&self, t: f64, enter: f64, exit: f64) -> Option<f64> {
        let t = if t < enter {
            enter
        } else if t > exit {
            exit
        } else {
            t
        };
        (t >= 0.0 && t <= self.max_distance).then_some(t)
    }

    /// The point at t.
    #[inline]
    pub fn point(&self, t: f64) -> V3 {
        [self.origin[0] + t * self.dir[0], self.origin[1] + t * self.dir[1], self.origin[2] + t * self.dir[2]]
    }

    /// Triangle (a, b, c)'s unit normal, turned to face the ray.
    pub fn triangle_normal(&self, a: V3, b: V3, c: V3) -> V3 {
        let n = normalize(cross(sub(b, a), sub(c, a))).unwrap_or([0.0, 0.0, 1.0]);
        if dot(n, self.dir) > 0.0 {
            [-n[0], -n[1], -n[2]]
        } else {
            n
        }
    }

    /// The ellipsoid's unit outward normal where the ray meets it at t (−dir for a ray that
    /// starts inside, as `ellipsoid` decides): the gradient of |unit·(x − center)|²,
    /// unitᵀ·unit·(x − center).
    pub fn ellipsoid_normal(&self, center: V3, unit: &[[f64; 3]; 3], t: f64) -> V3 {
        let back = [-self.dir[0], -self.dir[1], -self.dir[2]];
        let p = times(unit, sub(self.origin, center));
        if dot(p, p) - 1.0 <= 0.0 {
            return back;
        }
        let v = times(unit, self.dir);
        let q = [p[0] + t * v[0], p[1] + t * v[1], p[2] + t * v[2]];
        let g = [
            unit[0][0] * q[0] + unit[1][0] * q[1] + unit[2][0] * q[2],
            unit[0][1] * q[0] + unit[1][1] * q[1] + unit[2][1] * q[2],
            unit[0][2] * q[0] + unit[1][2] * q[1] + unit[2][2] * q[2],
        ];
        normalize(g).unwrap_or(back)
    }
}

/// Whether a triangle is degenerate (never hit): (b − a) × (c − a) = 0 in f64.
pub(crate) fn degenerate(c: &[V3; 3]) -> bool {
    cross(sub(c[1], c[0]), sub(c[2], c[0])) == [0.0; 3]
}

/// The next f32 away from zero's side `dir` (1 up, -1 down), for finite or infinite y.
#[inline(always)]
fn step_out(y: f32, dir: i32) -> f32 {
    if y.is_infinite() && (y > 0.0) == (dir > 0) {
        return y;
    }
    if y == 0.0 {
        return f32::from_bits(1) * dir as f32;
    }
    let away = (y > 0.0) == (dir > 0);
    f32::from_bits(if away { y.to_bits() + 1 } else { y.to_bits() - 1 })
}

/// A triangle's box as its tests use it: its corners' box in f32, rounded outwards and then
/// one f32 step wider on every side (so that a ray along a shared edge is in both boxes).
#[inline(always)]
pub(crate) fn triangle_box(c: &[V3; 3]) -> ([f32; 3], [f32; 3]) {
    let lo: V3 = std::array::from_fn(|a| c[0][a].min(c[1][a]).min(c[2][a]));
    let hi: V3 = std::array::from_fn(|a| c[0][a].max(c[1][a]).max(c[2][a]));
    let (lo, hi) = box_f32(&lo, &hi);
    (lo.map(|v| step_out(v, -1)), hi.map(|v| step_out(v, 1)))
}

/// A body's box as its tests use it: `body_box` (with its slack) in f32, rounded outwards.
pub(crate) fn body_box_f32(shape: &Shape, center: V3) -> ([f32; 3], [f32; 3]) {
    let (lo, hi) = body_box(shape, center);
    box_f32(&lo, &hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(o: V3, d: V3, max: f64) -> RayFrame {
        RayFrame::new(&UnitRay::new(&Ray::new(o, d, max)).unwrap())
    }

    #[test]
    fn a_ray_down_hits_a_ground_triangle_at_its_height() {
        let r = frame([0.2, 0.3, 5.0], [0.0, 0.0, -2.0], 10.0);
        let c = [[0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]];
        let (lo, hi) = triangle_box(&c);
        let (e, x) = r.slab(&lo, &hi);
        assert_eq!(r.triangle(c[0], c[1], c[2], e, x), Some(4.0));
        assert_eq!(r.triangle_normal(c[0], c[1], c[2]), [0.0, 0.0, 1.0]);
        // Too short, and in the plane.
        let short = frame([0.2, 0.3, 5.0], [0.0, 0.0, -1.0], 3.9);
        assert_eq!(short.triangle(c[0], c[1], c[2], e, x), None);
        let flat = frame([-1.0, 0.3, 1.0], [1.0, 0.0, 0.0], 10.0);
        let (e, x) = flat.slab(&lo, &hi);
        assert_eq!(flat.triangle(c[0], c[1], c[2], e, x), None);
    }

    #[test]
    fn a_ray_meets_a_sphere_at_its_surface_or_at_zero_from_inside() {
        let s = Shape::new([2.0; 3], [0.0, 0.0, 0.0, 1.0]);
        let r = frame([-5.0, 0.0, 0.0], [3.0, 0.0, 0.0], 100.0);
        let (lo, hi) = body_box_f32(&s, [0.0; 3]);
        let (e, x) = r.slab(&lo, &hi);
        assert_eq!(r.ellipsoid([0.0; 3], &s.unit, e, x), Some(3.0));
        assert_eq!(r.ellipsoid_normal([0.0; 3], &s.unit, 3.0), [-1.0, 0.0, 0.0]);
        let inside = frame([0.5, 0.0, 0.0], [0.0, 1.0, 0.0], 0.0);
        let (e, x) = inside.slab(&lo, &hi);
        assert_eq!(inside.ellipsoid([0.0; 3], &s.unit, e, x), Some(0.0));
        assert_eq!(inside.ellipsoid_normal([0.0; 3], &s.unit, 0.0), [-0.0, -1.0, -0.0]);
        let away = frame([-5.0, 0.0, 0.0], [-1.0, 0.0, 0.0], 100.0);
        let (e, x) = away.slab(&lo, &hi);
        assert_eq!(away.ellipsoid([0.0; 3], &s.unit, e, x), None);
    }
}
