//! Coordinates far from 1 (1e20 in f32, 1e-200 in f64) would make squared distances overflow
//! to infinity or underflow to zero: wrong neighbours, and ties that are not there. An index
//! therefore keeps its coordinates multiplied by a power of two (exact in binary floating
//! point) that brings them where squared distances can neither, and scales distances and
//! points back on the way out. What no power of two can bring there is refused, with the
//! range in the message.
//!
//! The ranges, for `f32` (`f64` in brackets):
//! - points: every nonzero |coordinate| in [2^-38, 2^61) ([2^-457, 2^509)). Below, two
//!   distinct points could be closer than the square root of the smallest normal number;
//!   above, a squared distance (of up to 8 axes) could overflow. Queries need only the upper
//!   bound: a query can be that close to at most one indexed point, which then is its nearest.
//! - meshes: the largest |coordinate| M in [2^-7, 2^30) ([2^-202, 2^254)), where the
//!   triangle test's products of four coordinates neither overflow nor underflow; queries
//!   need M·(|q| + M) < 2^60 (2^508).

use rayon::prelude::*;

use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;
use crate::geometry::real::Real;
use crate::geometry::vectors::Vectors;

/// floor(log2 v) for finite v > 0, subnormals included.
fn exponent(v: f64) -> i32 {
    let bits = v.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        exponent(v * 2f64.powi(64)) - 64
    } else {
        e - 1023
    }
}

/// v × 2^e in f64, exact unless the result leaves f64's normal range (2^e itself may not be
/// representable, so large steps are split).
fn times_pow2(mut v: f64, mut e: i32) -> f64 {
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        v *= 2f64.powi(step);
        e -= step;
    }
    v
}

/// The binary exponents bounding coordinates, per precision (see the module's comment).
struct Window {
    /// Points: nonzero |coordinate| in [2^lo, 2^hi).
    points: (i32, i32),
    /// Meshes: the largest |coordinate| in [2^lo, 2^hi).
    mesh: (i32, i32),
    /// Meshes' queries: M·(|q| + M) < 2^this.
    mesh_query: i32,
}

fn window<T: Real>() -> Window {
    if T::NAME == "f32" {
        Window { points: (-38, 61), mesh: (-7, 30), mesh_query: 60 }
    } else {
        Window { points: (-457, 509), mesh: (-202, 254), mesh_query: 508 }
    }
}

fn short(v: f64) -> String {
    format!("{v:.3e}")
}

/// The power of two an index multiplies its coordinates by (2^0 for almost all data, which
/// then is used as given, with no copy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scale {
    exp: i32,
}

impl Scale {
    /// For an index of points with these magnitudes: 2^0 if they fit already, else the power
    /// nearest 1 that makes them fit; an error if none does.
    pub fn for_points<T: Real>(m: Magnitudes, role: Role) -> Result<Self> {
        let (lo, hi) = window::<T>().points;
        if m.max == 0.0 {
            return Ok(Self::default());
        }
        // Scaled exponents must satisfy min + s >= lo and max + s <= hi - 1.
        let (min_e, max_e) = (exponent(m.min_nonzero), exponent(m.max));
        let (s_lo, s_hi) = (lo - min_e, hi - 1 - max_e);
        if s_lo > s_hi {
            return Err(Error::Magnitudes {
                role,
                detail: format!(
                    "nonzero coordinates range in magnitude from {} to {}, a ratio of 2^{}; {} compares distances \
                     exactly only within a ratio of 2^{}: {}",
                    short(m.min_nonzero),
                    short(m.max),
                    max_e - min_e,
                    T::NAME,
                    hi - 1 - lo,
                    if T::NAME == "f64" { "remove the offset or the outliers" } else { "compute in f64" }
                ),
            });
        }
        // Closest to 0; when the data are too large, keep half the slack for larger queries.
        let exp = if s_lo > 0 {
            s_lo
        } else if s_hi < 0 {
            s_hi - (s_hi - s_lo) / 2
        } else {
            0
        };
        Ok(Self { exp })
    }

    /// For a mesh index: 2^0 if the mesh fits already, else the power that brings its largest
    /// coordinate to [1, 2).
    pub fn for_mesh<T: Real>(m: Magnitudes) -> Self {
        let (lo, hi) = window::<T>().mesh;
        if m.max == 0.0 {
            return Self::default();
        }
        let e = exponent(m.max);
        Self { exp: if (lo..hi).contains(&e) { 0 } else { -e } }
    }

    /// Queries of a point index built with this scale: an error if a coordinate is too large.
    pub fn check_point_queries<T: Real>(self, m: Magnitudes, role: Role) -> Result<()> {
        let hi = window::<T>().points.1;
        if m.max == 0.0 || exponent(m.max) + self.exp < hi {
            return Ok(());
        }
        Err(Error::Magnitudes {
            role,
            detail: format!(
                "a coordinate of magnitude {} is too large for this index's {} distances (below {} they are \
                 exact{}): {}",
                short(m.max),
                T::NAME,
                short(times_pow2(1.0, hi - self.exp)),
                if self.exp == 0 { "" } else { ", at the scale its data needed" },
                if T::NAME == "f64" { "query nearer the data" } else { "compute in f64" }
            ),
        })
    }

    /// Queries of a mesh index whose largest coordinate is `mesh_max` (unscaled).
    pub fn check_mesh_queries<T: Real>(self, mesh_max: f64, m: Magnitudes) -> Result<()> {
        if m.max == 0.0 || mesh_max == 0.0 {
            return Ok(());
        }
        let (lm, lq) = (exponent(mesh_max) + self.exp, exponent(m.max) + self.exp);
        // M·(|q| + M) < 2^(lm + 1) · 2^(max(lq, lm) + 2).
        if lm + 1 + lq.max(lm) + 2 <= window::<T>().mesh_query {
            return Ok(());
        }
        Err(Error::Magnitudes {
            role: Role::Queries,
            detail: format!(
                "a coordinate of magnitude {} is too far from a mesh of size {} for {} to compute its closest \
                 point exactly: {}",
                short(m.max),
                short(mesh_max),
                T::NAME,
                if T::NAME == "f64" { "query nearer the mesh" } else { "compute in f64" }
            ),
        })
    }

    /// Whether this is 2^0.
    pub fn is_identity(self) -> bool {
        self.exp == 0
    }

    /// v × 2^exp.
    pub fn apply<T: Real>(self, v: T) -> T {
        if self.exp == 0 {
            v
        } else {
            T::from_f64(times_pow2(v.to_f64(), self.exp))
        }
    }

    /// v × 2^-exp (back to the caller's units).
    pub fn undo<T: Real>(self, v: T) -> T {
        Self { exp: -self.exp }.apply(v)
    }

    /// Every value of `v`, in place, back to the caller's units.
    pub fn undo_all<T: Real>(self, v: &mut [T]) {
        if self.exp != 0 {
            v.par_iter_mut().with_min_len(1 << 14).for_each(|t| *t = self.undo(*t));
        }
    }

    /// The points scaled (borrowed as given at 2^0).
    pub fn points<'a, T: Real>(self, p: &'a Points<T>) -> std::borrow::Cow<'a, Points<T>> {
        if self.exp == 0 {
            return std::borrow::Cow::Borrowed(p);
        }
        let col = |c: &Vec<T>| c.par_iter().with_min_len(1 << 14).map(|&v| self.apply(v)).collect();
        std::borrow::Cow::Owned(Points { x: col(&p.x), y: col(&p.y), z: col(&p.z) })
    }

    /// The vectors scaled (borrowed as given at 2^0).
    pub fn vectors<'a, T: Real>(self, v: &'a Vectors<T>) -> std::borrow::Cow<'a, Vectors<T>> {
        if self.exp == 0 {
            return std::borrow::Cow::Borrowed(v);
        }
        let col = |c: &Vec<T>| c.par_iter().with_min_len(1 << 14).map(|&t| self.apply(t)).collect();
        std::borrow::Cow::Owned(Vectors { cols: v.cols.iter().map(col).collect() })
    }

    /// Data or queries in GPU memory cannot be scaled: an error unless no scaling is needed.
    pub fn require_identity(self, role: Role, what: &str) -> Result<()> {
        if self.exp == 0 {
            return Ok(());
        }
        Err(Error::Magnitudes {
            role,
            detail: format!(
                "coordinates this far from 1 are compared after scaling by a power of two, which {what} in GPU \
                 memory cannot be: give them from host memory"
            ),
        })
    }

    /// The mesh scaled (borrowed as given at 2^0).
    pub fn mesh<'a, T: Real>(self, m: &'a Mesh<T>) -> std::borrow::Cow<'a, Mesh<T>> {
        match self.points(&m.vertices) {
            std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(m),
            std::borrow::Cow::Owned(vertices) => {
                std::borrow::Cow::Owned(Mesh { vertices, triangles: m.triangles.clone() })
            }
        }
    }

    /// An optional max distance (checked first), scaled; none where scaling overflows it:
    /// every distance the index can hold is then within it.
    pub fn max_distance<T: Real>(self, r: Option<T>) -> Result<Option<T>> {
        crate::geometry::radius2(r)?;
        Ok(r.map(|r| self.apply(r)).filter(|r| r.is_finite()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_and_scaling_are_exact() {
        for (v, e) in [(1.0, 0), (1.5, 0), (2.0, 1), (0.75, -1), (f64::MAX, 1023), (f64::MIN_POSITIVE, -1022)] {
            assert_eq!(exponent(v), e, "{v}");
        }
        assert_eq!(exponent(5e-324), -1074);
        assert_eq!(times_pow2(3.0, 1500 - 1500), 3.0);
        assert_eq!(times_pow2(times_pow2(5e-324, 1600), -1600), 5e-324);
        assert_eq!(times_pow2(1.0, 1023), f64::MAX / (2.0 - f64::EPSILON));
    }

    #[test]
    fn scales_stay_at_one_for_ordinary_data() {
        let m = Magnitudes { max: 1e6, min_nonzero: 1e-6 };
        assert!(Scale::for_points::<f32>(m, Role::Data).unwrap().is_identity());
        assert!(Scale::for_points::<f64>(m, Role::Data).unwrap().is_identity());
        let tiny = Magnitudes { max: 1e-20, min_nonzero: 1e-25 };
        let s = Scale::for_points::<f32>(tiny, Role::Data).unwrap();
        assert!(s.exp > 0 && exponent(1e-25) + s.exp >= -38 && exponent(1e-20) + s.exp < 61);
        let huge = Magnitudes { max: 1e30, min_nonzero: 1e10 };
        let s = Scale::for_points::<f32>(huge, Role::Data).unwrap();
        assert!(s.exp < 0 && exponent(1e10) + s.exp >= -38 && exponent(1e30) + s.exp < 61);
        let wide = Magnitudes { max: 1e20, min_nonzero: 1e-20 };
        let e = Scale::for_points::<f32>(wide, Role::Data).unwrap_err().to_string();
        assert!(e.contains("f64") && e.contains("1.000e20"), "{e}");
        assert!(Scale::for_points::<f64>(wide, Role::Data).unwrap().is_identity());
    }
}
