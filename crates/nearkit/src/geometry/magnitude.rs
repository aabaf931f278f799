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

    /// Of each coordinate column, in one parallel pass over them all; `None` for a column
    /// with a value that is not finite.
    pub(crate) fn of_columns<T: Real>(cols: &[&[T]]) -> Vec<Option<Self>> {
        // On the bits of |v| (sign cleared), which order as the magnitudes do, and exceed
        // every finite value's for infinities and NaNs: one vectorised max and min per
        // column part, on every query set.
        if std::mem::size_of::<T>() == 4 {
            // SAFETY: T is f32 (the only 4-byte Real): same size and alignment as u32.
            let bits: Vec<&[u32]> =
                cols.iter().map(|c| unsafe { std::slice::from_raw_parts(c.as_ptr() as *const u32, c.len()) }).collect();
            let of = |(hi, lo): (u32, u32)| {
                (hi < 0x7f80_0000).then(|| Self::of_range(f32::from_bits(hi) as f64, f32::from_bits(lo) as f64))
            };
            abs_bits_ranges(&bits, 0x7fff_ffff).into_iter().map(of).collect()
        } else {
            // SAFETY: T is f64 (the only 8-byte Real): same size and alignment as u64.
            let bits: Vec<&[u64]> =
                cols.iter().map(|c| unsafe { std::slice::from_raw_parts(c.as_ptr() as *const u64, c.len()) }).collect();
            let of = |(hi, lo): (u64, u64)| {
                (hi < 0x7ff0_0000_0000_0000).then(|| Self::of_range(f64::from_bits(hi), f64::from_bits(lo)))
            };
            abs_bits_ranges(&bits, 0x7fff_ffff_ffff_ffff).into_iter().map(of).collect()
        }
    }

    /// Of one part of a column (merge a column's parts with `union`); `None` if a value is
    /// not finite. The same values as `of_columns` finds for the whole column.
    pub(crate) fn of_part<T: Real>(c: &[T]) -> Option<Self> {
        if std::mem::size_of::<T>() == 4 {
            // SAFETY: T is f32 (the only 4-byte Real): same size and alignment as u32.
            let bits = unsafe { std::slice::from_raw_parts(c.as_ptr() as *const u32, c.len()) };
            let (hi, lo) = abs_bits_range(bits, 0x7fff_ffff);
            (hi < 0x7f80_0000).then(|| Self::of_range(f32::from_bits(hi) as f64, f32::from_bits(lo) as f64))
        } else {
            // SAFETY: T is f64 (the only 8-byte Real): same size and alignment as u64.
            let bits = unsafe { std::slice::from_raw_parts(c.as_ptr() as *const u64, c.len()) };
            let (hi, lo) = abs_bits_range(bits, 0x7fff_ffff_ffff_ffff);
            (hi < 0x7ff0_0000_0000_0000).then(|| Self::of_range(f64::from_bits(hi), f64::from_bits(lo)))
        }
    }

    fn of_range(max: f64, min_nonzero: f64) -> Self {
        Self { max, min_nonzero: if min_nonzero.is_finite() { min_nonzero } else { f64::INFINITY } }
    }

    /// Both sets' together.
    pub fn union(self, other: Self) -> Self {
        Self { max: self.max.max(other.max), min_nonzero: self.min_nonzero.min(other.min_nonzero) }
    }
}

/// Per column, the largest and the smallest nonzero of `bits & mask` (the smallest is all
/// ones when every value is zero), in one parallel loop over every column's parts.
fn abs_bits_ranges<U>(cols: &[&[U]], mask: U) -> Vec<(U, U)>
where
    U: Copy + Ord + Send + Sync + std::ops::BitAnd<Output = U> + Default + MaxValue,
{
    const PART: usize = 1 << 16;
    let parts: Vec<(usize, &[U])> =
        cols.iter().enumerate().flat_map(|(i, c)| c.chunks(PART).map(move |p| (i, p))).collect();
    let found: Vec<(usize, U, U)> = parts
        .into_par_iter()
        .map(|(i, c)| {
            let (hi, lo) = abs_bits_range(c, mask);
            (i, hi, lo)
        })
        .collect();
    let mut out = vec![(U::default(), U::MAX_VALUE); cols.len()];
    for (i, hi, lo) in found {
        out[i] = (out[i].0.max(hi), out[i].1.min(lo));
    }
    out
}

/// The largest and the smallest nonzero of `bits & mask` over `c` (all ones when every value
/// is zero), in one vectorised loop.
#[inline]
fn abs_bits_range<U>(c: &[U], mask: U) -> (U, U)
where
    U: Copy + Ord + std::ops::BitAnd<Output = U> + Default + MaxValue,
{
    let (mut hi, mut lo) = (U::default(), U::MAX_VALUE);
    for &b in c {
        let a = b & mask;
        hi = hi.max(a);
        lo = lo.min(if a == U::default() { U::MAX_VALUE } else { a });
    }
    (hi, lo)
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
