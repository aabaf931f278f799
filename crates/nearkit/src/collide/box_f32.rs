//! Boxes in f32 that hold f64 boxes (coordinates rounded outwards): the broad phase's box
//! tests read half the bytes, and pass whatever the f64 test passes, so the exact tests still
//! see every pair that can touch.

use super::ellipsoid::V3;

/// The largest f32 at most x.
#[inline(always)]
pub fn f32_down(x: f64) -> f32 {
    let y = x as f32;
    if (y as f64) > x {
        step_f32(y, -1)
    } else {
        y
    }
}

/// The smallest f32 at least x.
#[inline(always)]
pub fn f32_up(x: f64) -> f32 {
    let y = x as f32;
    if (y as f64) < x {
        step_f32(y, 1)
    } else {
        y
    }
}

/// The neighbouring f32 of finite or infinite y, upwards (`dir` 1) or downwards (-1),
/// without branches: one step of the bits away from zero or towards it, and from ±0 the
/// smallest subnormal on `dir`'s side.
#[inline(always)]
fn step_f32(y: f32, dir: i32) -> f32 {
    let zero = y == 0.0;
    // ±0 as the zero on `dir`'s side, whose step away from zero is the subnormal wanted.
    let b = if zero { u32::from(dir < 0) << 31 } else { y.to_bits() };
    let negative = b >> 31 == 1;
    let away = zero | (negative == (dir < 0));
    f32::from_bits(if away { b.wrapping_add(1) } else { b.wrapping_sub(1) })
}

/// An f32 box holding the f64 box (lo, hi).
#[inline(always)]
pub fn box_f32(lo: &V3, hi: &V3) -> ([f32; 3], [f32; 3]) {
    (lo.map(f32_down), hi.map(f32_up))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free step is the plain one: the bits one step from y, away from zero or
    /// towards it, and from ±0 the smallest subnormal of `dir`'s sign.
    #[test]
    fn steps_to_the_neighbouring_f32() {
        let reference = |y: f32, dir: i32| {
            if y == 0.0 {
                return f32::from_bits(1) * dir as f32;
            }
            let away = (y > 0.0) == (dir > 0);
            let b = y.to_bits();
            f32::from_bits(if away { b + 1 } else { b - 1 })
        };
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let special =
            [0.0, -0.0, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, f32::from_bits(1), -f32::from_bits(1), 1.0, -1.0];
        for k in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let y = match k % 4 {
                0 => special[k / 4 % special.len()],
                _ => f32::from_bits(s as u32 & 0x7f7f_ffff | (s >> 63 << 31) as u32),
            };
            for dir in [-1, 1] {
                assert_eq!(step_f32(y, dir).to_bits(), reference(y, dir).to_bits(), "{y:e} {dir}");
            }
        }
        // Off the ends of the range, inwards only (outwards is infinity's own business).
        assert_eq!(step_f32(f32::MAX, -1).to_bits(), reference(f32::MAX, -1).to_bits());
        assert_eq!(step_f32(f32::MIN, 1).to_bits(), reference(f32::MIN, 1).to_bits());
        assert_eq!(step_f32(f32::INFINITY, -1), f32::MAX);
        assert_eq!(step_f32(f32::NEG_INFINITY, 1), f32::MIN);
    }

    /// Each rounding is the nearest f32 on its side: f32_down(x) ≤ x < the next f32 up, and
    /// the mirror for f32_up, over magnitudes from subnormal to beyond f32's range.
    #[test]
    fn rounds_to_the_nearest_f32_on_each_side() {
        let mut s = 0x853c_49e6_748f_ea9bu64;
        let next = |y: f32, dir: i32| step_f32(y, dir);
        for k in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let mag = 10f64.powf((s % 900) as f64 / 10.0 - 45.0);
            let x = match k % 7 {
                0 => 0.0,
                1 => (s >> 11) as f64 as f32 as f64, // exactly an f32
                _ => mag * if s & 1 == 0 { 1.0 } else { -1.0 } * (1.0 + (s >> 40) as f64 / (1u64 << 24) as f64),
            };
            let (d, u) = (f32_down(x), f32_up(x));
            assert!((d as f64) <= x && (next(d, 1) as f64) > x, "down {x:e}: {d:e}");
            assert!((u as f64) >= x && (next(u, -1) as f64) < x, "up {x:e}: {u:e}");
        }
        assert_eq!(f32_up(1e300), f32::INFINITY);
        assert_eq!(f32_down(1e300), f32::MAX);
        assert_eq!(f32_down(-1e300), f32::NEG_INFINITY);
    }
}
