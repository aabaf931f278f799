//! Point sets as structure of arrays: `x[i], y[i], z[i]` is point `i`.

use rayon::prelude::*;

use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::real::Real;

/// A set of 3-D points stored as three coordinate columns.
///
/// Point ids everywhere in nearkit are 0-based row numbers into these columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Points<T> {
    /// x of every point.
    pub x: Vec<T>,
    /// y of every point.
    pub y: Vec<T>,
    /// z of every point.
    pub z: Vec<T>,
}

/// Id stored where there is no point ("no neighbour found").
pub const NO_ID: u32 = u32::MAX;

/// Largest supported set: ids are `u32` and `u32::MAX` means "none".
pub const MAX_POINTS: usize = (u32::MAX - 1) as usize;

impl<T: Real> Points<T> {
    /// Points from three columns of one length.
    pub fn new(x: Vec<T>, y: Vec<T>, z: Vec<T>) -> Result<Self> {
        if x.len() != y.len() || x.len() != z.len() {
            return Err(Error::RaggedColumns { x: x.len(), y: y.len(), z: z.len() });
        }
        Ok(Self { x, y, z })
    }

    /// An empty set with room for `n` points.
    pub fn with_capacity(n: usize) -> Self {
        Self { x: Vec::with_capacity(n), y: Vec::with_capacity(n), z: Vec::with_capacity(n) }
    }

    /// Points from (x, y, z) rows.
    pub fn from_rows(rows: &[[T; 3]]) -> Self {
        let mut p = Self::with_capacity(rows.len());
        for r in rows {
            p.push(r[0], r[1], r[2]);
        }
        p
    }

    #[inline]
    /// Adds a point.
    pub fn push(&mut self, x: T, y: T, z: T) {
        self.x.push(x);
        self.y.push(y);
        self.z.push(z);
    }

    #[inline]
    /// How many points.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    #[inline]
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    #[inline]
    /// Point `i` as (x, y, z).
    pub fn get(&self, i: usize) -> [T; 3] {
        [self.x[i], self.y[i], self.z[i]]
    }

    /// Converts to another precision (f32 <-> f64).
    pub fn cast<U: Real>(&self) -> Points<U> {
        let c = |v: &Vec<T>| v.iter().map(|&t| U::from_f64(t.to_f64())).collect();
        Points { x: c(&self.x), y: c(&self.y), z: c(&self.z) }
    }

    /// Checks the set is non-empty, not too large, and every coordinate is finite; returns
    /// the coordinates' magnitudes (found in the same pass).
    pub fn validate(&self, role: Role) -> Result<Magnitudes> {
        if self.x.len() != self.y.len() || self.x.len() != self.z.len() {
            return Err(Error::RaggedColumns { x: self.x.len(), y: self.y.len(), z: self.z.len() });
        }
        if self.is_empty() {
            return Err(Error::EmptySet { role });
        }
        if self.len() > MAX_POINTS {
            return Err(Error::TooLarge { role, len: self.len(), max: MAX_POINTS });
        }
        let mut all = Magnitudes::NONE;
        let found = Magnitudes::of_columns(&[&self.x, &self.y, &self.z]);
        for ((axis, col), m) in [('x', &self.x), ('y', &self.y), ('z', &self.z)].into_iter().zip(found) {
            match m {
                Some(m) => all = all.union(m),
                None => {
                    // The exact row is looked for only when something is wrong.
                    let index = col.iter().position(|v| !v.is_finite()).unwrap_or(0);
                    return Err(Error::NonFinite { role, index, axis, value: col[index].to_f64() });
                }
            }
        }
        Ok(all)
    }

    /// Axis-aligned bounds `(lo, hi)`, computed in parallel; empty sets give `(+inf, -inf)`.
    pub fn bounds(&self) -> ([T; 3], [T; 3]) {
        // Every column's parts in one parallel loop.
        let cols = [&self.x, &self.y, &self.z];
        let parts: Vec<(usize, &[T])> =
            cols.iter().enumerate().flat_map(|(a, c)| c.chunks(1 << 15).map(move |p| (a, p))).collect();
        let found: Vec<(usize, T, T)> = parts
            .into_par_iter()
            .map(|(a, c)| {
                let (lo, hi) = c.iter().fold((T::INFINITY, -T::INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                (a, lo, hi)
            })
            .collect();
        let (mut lo, mut hi) = ([T::INFINITY; 3], [-T::INFINITY; 3]);
        for (a, l, h) in found {
            lo[a] = lo[a].min(l);
            hi[a] = hi[a].max(h);
        }
        (lo, hi)
    }
}
