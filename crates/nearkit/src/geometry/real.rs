//! The scalar types a query can run in: `f32` (default) and `f64`.

use std::fmt::{Debug, Display};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A floating-point coordinate type supported by both backends.
///
/// Distances are compared as squared distances computed as `dx*dx + dy*dy + dz*dz`, in that
/// order, without fused multiply-add, so the CPU and the GPU produce bitwise identical values.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Debug
    + Display
    + Default
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
{
    /// 0.
    const ZERO: Self;
    /// +∞.
    const INFINITY: Self;
    /// The smallest positive normal number.
    const MIN_NORMAL: Self;
    /// Significant bits (24 for f32, 53 for f64): integers up to 2^this are exact.
    const MANTISSA_DIGITS: u32;
    /// Suffix of the CUDA kernels instantiated for this type (`f32` or `f64`).
    const NAME: &'static str;
    /// The square root (IEEE, correctly rounded).
    fn sqrt(self) -> Self;
    /// Widened to f64 (exact).
    fn to_f64(self) -> f64;
    /// Rounded from f64 to nearest.
    fn from_f64(v: f64) -> Self;
    /// Neither NaN nor infinite.
    fn is_finite(self) -> bool;
    /// Monotone bit pattern for values >= 0 (used for sort keys).
    fn ordered_bits(self) -> u64;
    /// The smaller (`self` on ties), as the kernels compute it.
    fn min(self, other: Self) -> Self;
    /// The larger (`self` on ties), as the kernels compute it.
    fn max(self, other: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $name:literal) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const INFINITY: Self = <$t>::INFINITY;
            const MIN_NORMAL: Self = <$t>::MIN_POSITIVE;
            const MANTISSA_DIGITS: u32 = <$t>::MANTISSA_DIGITS;
            const NAME: &'static str = $name;
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn ordered_bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                if other < self {
                    other
                } else {
                    self
                }
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                if other > self {
                    other
                } else {
                    self
                }
            }
        }
    };
}
impl_real!(f32, "f32");
impl_real!(f64, "f64");

/// Squared Euclidean distance, in the operation order the CUDA kernels use.
#[inline(always)]
pub fn dist2<T: Real>(ax: T, ay: T, az: T, bx: T, by: T, bz: T) -> T {
    let dx = ax - bx;
    let dy = ay - by;
    let dz = az - bz;
    dx * dx + dy * dy + dz * dz
}

/// Inverse of [`Real::ordered_bits`].
pub fn from_ordered_bits<T: Real>(bits: u64) -> T {
    if T::NAME == "f32" {
        T::from_f64(f32::from_bits(bits as u32) as f64)
    } else {
        T::from_f64(f64::from_bits(bits))
    }
}
