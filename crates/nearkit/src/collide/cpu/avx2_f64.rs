//! The arithmetic of the AVX2 f64 code (`*_avx2.rs`): four f64 lanes in one register, one
//! IEEE operation per call (no fused multiply-add), so a lane repeats the scalar code's bits.
//! Callers are `#[target_feature(enable = "avx2")]` functions; these inline into them.

use std::arch::x86_64::*;

pub(crate) type F = __m256d;

#[inline(always)]
pub(crate) unsafe fn splat(v: f64) -> F {
    _mm256_set1_pd(v)
}

#[inline(always)]
pub(crate) unsafe fn add(a: F, b: F) -> F {
    _mm256_add_pd(a, b)
}

#[inline(always)]
pub(crate) unsafe fn sb(a: F, b: F) -> F {
    _mm256_sub_pd(a, b)
}

#[inline(always)]
pub(crate) unsafe fn ml(a: F, b: F) -> F {
    _mm256_mul_pd(a, b)
}

#[inline(always)]
pub(crate) unsafe fn dv(a: F, b: F) -> F {
    _mm256_div_pd(a, b)
}

/// Four values into the lanes.
#[inline(always)]
pub(crate) unsafe fn load(v: &[f64; 4]) -> F {
    _mm256_loadu_pd(v.as_ptr())
}

/// The lanes out as four values.
#[inline(always)]
pub(crate) unsafe fn lanes(v: F) -> [f64; 4] {
    let mut out = [0.0; 4];
    _mm256_storeu_pd(out.as_mut_ptr(), v);
    out
}

// Comparisons, ordered and quiet: false in a lane holding NaN, as the scalar `<=` and the like.

#[inline(always)]
pub(crate) unsafe fn le(a: F, b: F) -> F {
    _mm256_cmp_pd::<_CMP_LE_OQ>(a, b)
}

#[inline(always)]
pub(crate) unsafe fn ge(a: F, b: F) -> F {
    _mm256_cmp_pd::<_CMP_GE_OQ>(a, b)
}

#[inline(always)]
pub(crate) unsafe fn gt(a: F, b: F) -> F {
    _mm256_cmp_pd::<_CMP_GT_OQ>(a, b)
}

#[inline(always)]
pub(crate) unsafe fn lt(a: F, b: F) -> F {
    _mm256_cmp_pd::<_CMP_LT_OQ>(a, b)
}

#[inline(always)]
pub(crate) unsafe fn and(a: F, b: F) -> F {
    _mm256_and_pd(a, b)
}
