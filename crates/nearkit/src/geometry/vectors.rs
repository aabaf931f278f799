//! Sets of d-dimensional vectors (1 <= d <= 8) as d coordinate columns, and the paper's two
//! 6-D embeddings of a mesh's triangles (as boxes): the kNN of any dimension runs on these.

use std::str::FromStr;

use rayon::prelude::*;

use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::mesh::Mesh;
use crate::geometry::points::{Points, MAX_POINTS};
use crate::geometry::real::Real;

/// Most dimensions a vector may have.
pub const MAX_DIM: usize = 8;

/// `cols[a][i]` is coordinate `a` of vector `i`; every column has the same length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vectors<T> {
    /// Column `a` holds axis `a` of every vector.
    pub cols: Vec<Vec<T>>,
}

impl<T: Real> Vectors<T> {
    /// Vectors from columns of one length (1 to 8 of them).
    pub fn new(cols: Vec<Vec<T>>) -> Result<Self> {
        let v = Self { cols };
        v.check_shape()?;
        Ok(v)
    }

    /// From row-major data of `dim` coordinates per vector.
    pub fn from_row_major(dim: usize, rows: &[T]) -> Result<Self> {
        if dim == 0 || dim > MAX_DIM || rows.len() % dim != 0 {
            return Err(Error::InvalidArgument(format!("{} values do not make {dim}-D vectors", rows.len())));
        }
        Ok(Self { cols: (0..dim).map(|a| rows.iter().skip(a).step_by(dim).copied().collect()).collect() })
    }

    /// 3-D points as vectors.
    pub fn from_points(p: &Points<T>) -> Self {
        Self { cols: vec![p.x.clone(), p.y.clone(), p.z.clone()] }
    }

    #[inline]
    /// Their dimension.
    pub fn dim(&self) -> usize {
        self.cols.len()
    }

    #[inline]
    /// How many vectors.
    pub fn len(&self) -> usize {
        self.cols.first().map_or(0, Vec::len)
    }

    #[inline]
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Vector `i`, padded with zeros to `MAX_DIM`.
    #[inline]
    pub fn get(&self, i: usize) -> [T; MAX_DIM] {
        let mut v = [T::ZERO; MAX_DIM];
        for (a, c) in self.cols.iter().enumerate() {
            v[a] = c[i];
        }
        v
    }

    fn check_shape(&self) -> Result<()> {
        let d = self.dim();
        if d == 0 || d > MAX_DIM {
            return Err(Error::InvalidArgument(format!("vectors of {d} dimensions: 1 to {MAX_DIM} are supported")));
        }
        if self.cols.iter().any(|c| c.len() != self.len()) {
            return Err(Error::InvalidArgument("vector columns have different lengths".into()));
        }
        Ok(())
    }

    /// Checks the shape, that the set is non-empty and not too large, and that every
    /// coordinate is finite.
    pub fn validate(&self, role: Role) -> Result<Magnitudes> {
        self.check_shape()?;
        if self.is_empty() {
            return Err(Error::EmptySet { role });
        }
        if self.len() > MAX_POINTS {
            return Err(Error::TooLarge { role, len: self.len(), max: MAX_POINTS });
        }
        let mut all = Magnitudes::NONE;
        let cols: Vec<&[T]> = self.cols.iter().map(|c| &c[..]).collect();
        for ((a, col), m) in self.cols.iter().enumerate().zip(Magnitudes::of_columns(&cols)) {
            match m {
                Some(m) => all = all.union(m),
                None => {
                    let index = col.iter().position(|v| !v.is_finite()).unwrap_or(0);
                    let axis = char::from_digit(a as u32, 10).unwrap_or('?');
                    return Err(Error::NonFinite { role, index, axis, value: col[index].to_f64() });
                }
            }
        }
        Ok(all)
    }

    /// Per-dimension bounds `(lo, hi)` in f64.
    pub fn bounds(&self) -> (Vec<f64>, Vec<f64>) {
        let lo = self.cols.iter().map(|c| c.par_iter().map(|v| v.to_f64()).reduce(|| f64::INFINITY, f64::min));
        let hi = self.cols.iter().map(|c| c.par_iter().map(|v| v.to_f64()).reduce(|| f64::NEG_INFINITY, f64::max));
        (lo.collect(), hi.collect())
    }

    /// Bounds of the first three axes (the 3-D part of embedded queries); needs dim >= 3.
    pub fn bounds3(&self) -> ([T; 3], [T; 3]) {
        let lo = std::array::from_fn(|a| self.cols[a].par_iter().copied().reduce(|| T::INFINITY, T::min));
        let hi = std::array::from_fn(|a| self.cols[a].par_iter().copied().reduce(|| -T::INFINITY, T::max));
        (lo, hi)
    }

    /// Converted to another precision.
    pub fn cast<U: Real>(&self) -> Vectors<U> {
        Vectors { cols: self.cols.iter().map(|c| c.iter().map(|&t| U::from_f64(t.to_f64())).collect()).collect() }
    }
}

/// Squared Euclidean distance in `d` dimensions, summed in axis order without fused
/// multiply-add: the GPU computes the same bits.
#[inline(always)]
pub fn dist2_nd<T: Real>(d: usize, a: &[T; MAX_DIM], b: &[T; MAX_DIM]) -> T {
    let mut s = T::ZERO;
    for k in 0..d {
        let t = a[k] - b[k];
        s = s + t * t;
    }
    s
}

/// Two ways to make a triangle a 6-D point (from its axis-aligned box) and a query
/// point a 6-D query. Neither distance is the point–triangle distance: see `nearkit
/// closest-point` for that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aabb6 {
    /// Triangle (xmin, ymin, zmin, xmax, ymax, zmax); query (x, y, z, x, y, z).
    MinMax,
    /// Triangle (xmin, ymin, zmin, xmax − xmin, ymax − ymin, zmax − zmin); query (x, y, z, 0, 0, 0).
    MinExtent,
}

impl FromStr for Aabb6 {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "min-max" => Ok(Self::MinMax),
            "min-extent" => Ok(Self::MinExtent),
            _ => Err(Error::InvalidArgument(format!("unknown AABB embedding '{s}': use min-max or min-extent"))),
        }
    }
}

impl Aabb6 {
    /// One 6-D vector per triangle; vector i is triangle i.
    pub fn triangles<T: Real>(self, mesh: &Mesh<T>) -> Vectors<T> {
        let mut cols: Vec<Vec<T>> = (0..6).map(|_| Vec::with_capacity(mesh.triangles.len())).collect();
        for t in 0..mesh.triangles.len() {
            let c = mesh.corners(t);
            for a in 0..3 {
                let lo = c[0][a].min(c[1][a]).min(c[2][a]);
                let hi = c[0][a].max(c[1][a]).max(c[2][a]);
                cols[a].push(lo);
                cols[a + 3].push(match self {
                    Self::MinMax => hi,
                    Self::MinExtent => hi - lo,
                });
            }
        }
        Vectors { cols }
    }

    /// Which embedding (if any) a 6-D query set is: (x, y, z, x, y, z) rows, or (x, y, z, 0, 0, 0).
    /// Exact kNN uses it to grid the queries' 3-D space (`grid::Aabb6Data`).
    pub fn detect<T: Real>(queries: &Vectors<T>) -> Option<Self> {
        if queries.dim() != 6 {
            return None;
        }
        let c = &queries.cols;
        let same = |a: usize, b: usize| {
            c[a].par_iter().zip(c[b].par_iter()).all(|(x, y)| x.ordered_bits() == y.ordered_bits())
        };
        let zero = |a: usize| c[a].par_iter().all(|x| x.ordered_bits() == T::ZERO.ordered_bits());
        if same(0, 3) && same(1, 4) && same(2, 5) {
            Some(Self::MinMax)
        } else if zero(3) && zero(4) && zero(5) {
            Some(Self::MinExtent)
        } else {
            None
        }
    }

    /// The 6-D query of each 3-D point.
    pub fn queries<T: Real>(self, p: &Points<T>) -> Vectors<T> {
        let zeros = || vec![T::ZERO; p.len()];
        let upper = match self {
            Self::MinMax => [p.x.clone(), p.y.clone(), p.z.clone()],
            Self::MinExtent => [zeros(), zeros(), zeros()],
        };
        let [ux, uy, uz] = upper;
        Vectors { cols: vec![p.x.clone(), p.y.clone(), p.z.clone(), ux, uy, uz] }
    }
}
