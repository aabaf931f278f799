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
        let (finite, m) = col
            .par_chunks(1 << 16)
            .map(|c| {
                // Branch-free, so that it vectorises: it runs on every query set.
                c.iter().fold((true, (T::ZERO, T::INFINITY)), |(ok, (hi, lo)), &v| {
                    let a = if v < T::ZERO { -v } else { v };
                    (ok & v.is_finite(), (hi.max(a), lo.min(if a > T::ZERO { a } else { T::INFINITY })))
                })
            })
            .reduce(|| (true, (T::ZERO, T::INFINITY)), |a, b| (a.0 & b.0, (a.1 .0.max(b.1 .0), a.1 .1.min(b.1 .1))));
        finite.then(|| Self { max: m.0.to_f64(), min_nonzero: m.1.to_f64() })
    }

    /// Both sets' together.
    pub fn union(self, other: Self) -> Self {
        Self { max: self.max.max(other.max), min_nonzero: self.min_nonzero.min(other.min_nonzero) }
    }
}
