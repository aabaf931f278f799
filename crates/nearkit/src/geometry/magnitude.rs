//! The magnitudes of a set's coordinates, found while validating it: what `scale` needs to
//! decide whether the set's squared distances can overflow or underflow.

use rayon::prelude::*;

use crate::geometry::real::Real;

/// The largest |coordinate| of a set, and the smallest nonzero one (∞ where all are zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Magnitudes {
    /// The largest |coordinate|.
    pub max: f64,
    /// The smallest nonzero |coordinate| (`f64::INFINITY` if there is none).
    pub min_nonzero: f64,
}

impl Magnitudes {
    /// Of no coordinates at all.
    pub const NONE: Self = Self { max: 0.0, min_nonzero: f64::INFINITY };

    /// Of one coordinate column, in parallel; `None` if a value is not finite.
    pub(crate) fn of_column<T: Real>(col: &[T]) -> Option<Self> {
        // On the bits of |v| (sign cleared), which order as the magnitudes do, and exceed
        // every finite value's for infinities and NaNs: one vectorised max and min per
        // column, on every query set.
        let (max, min_nonzero, inf) = if std::mem::size_of::<T>() == 4 {
            // SAFETY: T is f32 (the only 4-byte Real): same size and alignment as u32.
            let bits = unsafe { std::slice::from_raw_parts(col.as_ptr() as *const u32, col.len()) };
            let (hi, lo) = abs_bits_range(bits, 0x7fff_ffff);
            (f32::from_bits(hi) as f64, f32::from_bits(lo) as f64, hi >= 0x7f80_0000)
        } else {
            // SAFETY: T is f64 (the only 8-byte Real): same size and alignment as u64.
            let bits = unsafe { std::slice::from_raw_parts(col.as_ptr() as *const u64, col.len()) };
            let (hi, lo) = abs_bits_range(bits, 0x7fff_ffff_ffff_ffff);
            (f64::from_bits(hi), f64::from_bits(lo), hi >= 0x7ff0_0000_0000_0000)
        };
        if inf {
            return None;
        }
        Some(Self { max, min_nonzero: if min_nonzero.is_finite() { min_nonzero } else { f64::INFINITY } })
    }

    /// Both sets' together.
    pub fn union(self, other: Self) -> Self {
        Self { max: self.max.max(other.max), min_nonzero: self.min_nonzero.min(other.min_nonzero) }
    }
}

/// The largest and the smallest nonzero of `bits & mask` (the smallest is `mask`'s infinity
/// pattern's neighbour, all ones, when every value is zero).
fn abs_bits_range<U>(bits: &[U], mask: U) -> (U, U)
where
    U: Copy + Ord + Send + Sync + std::ops::BitAnd<Output = U> + Default + MaxValue,
{
    bits.par_chunks(1 << 16)
        .map(|c| {
            let (mut hi, mut lo) = (U::default(), U::MAX_VALUE);
            for &b in c {
                let a = b & mask;
                hi = hi.max(a);
                lo = lo.min(if a == U::default() { U::MAX_VALUE } else { a });
            }
            (hi, lo)
        })
        .reduce(|| (U::default(), U::MAX_VALUE), |x, y| (x.0.max(y.0), x.1.min(y.1)))
}

/// `MAX` of the unsigned types.
trait MaxValue {
    const MAX_VALUE: Self;
}
impl MaxValue for u32 {
    const MAX_VALUE: Self = u32::MAX;
}
impl MaxValue for u64 {
    const MAX_VALUE: Self = u64::MAX;
}
