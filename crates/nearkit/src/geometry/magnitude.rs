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
/// is zero), in one vectorised loop: in AVX2 where the CPU has it (x86-64's baseline has no
/// unsigned 32-bit min and max, which made this loop about twice as slow as the copy it
/// follows in a staged upload: BENCHMARKS.md, session 49).
#[inline]
fn abs_bits_range<U>(c: &[U], mask: U) -> (U, U)
where
    U: Copy + Ord + std::ops::BitAnd<Output = U> + Default + MaxValue,
{
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { abs_bits_range_avx2(c, mask) };
    }
    abs_bits_range_portable(c, mask)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn abs_bits_range_avx2<U>(c: &[U], mask: U) -> (U, U)
where
    U: Copy + Ord + std::ops::BitAnd<Output = U> + Default + MaxValue,
{
    abs_bits_range_portable(c, mask)
}

#[inline(always)]
fn abs_bits_range_portable<U>(c: &[U], mask: U) -> (U, U)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorised range (AVX2 where the CPU has it) against a plain loop, over random bit
    /// patterns with zeros, negative zeros and lengths that leave tails.
    #[test]
    fn abs_bits_range_matches_a_plain_loop() {
        use rand::{Rng, SeedableRng};
        let mut g = rand_pcg::Pcg64::seed_from_u64(49);
        let mut next = || g.random::<u64>();
        for len in [0usize, 1, 7, 31, 64, 1000, 4099] {
            let v64: Vec<u64> = (0..len)
                .map(|i| match i % 5 {
                    0 => 0,
                    1 => 1 << 63,
                    _ => next() >> (next() % 64),
                })
                .collect();
            let v32: Vec<u32> = v64.iter().map(|&b| (b >> 32) as u32 ^ b as u32).collect();
            let plain64 = v64.iter().fold((0u64, u64::MAX), |(hi, lo), &b| {
                let a = b & 0x7fff_ffff_ffff_ffff;
                (hi.max(a), if a == 0 { lo } else { lo.min(a) })
            });
            let plain32 = v32.iter().fold((0u32, u32::MAX), |(hi, lo), &b| {
                let a = b & 0x7fff_ffff;
                (hi.max(a), if a == 0 { lo } else { lo.min(a) })
            });
            assert_eq!(abs_bits_range(&v64, 0x7fff_ffff_ffff_ffff), plain64, "u64, {len} values");
            assert_eq!(abs_bits_range(&v32, 0x7fff_ffff), plain32, "u32, {len} values");
        }
    }
}
