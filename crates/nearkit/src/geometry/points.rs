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
        let found = Magnitudes::of_columns(&[&self.x, &self.y, &self.z]);
        let cols = [&self.x, &self.y, &self.z];
        Self::checked(self.len(), role, found, |i, a| cols[a][i])
    }

    /// The checks of `validate` that need no pass over the values: columns of one length, a
    /// set neither empty nor too large.
    pub(crate) fn check_shape(&self, role: Role) -> Result<()> {
        if self.x.len() != self.y.len() || self.x.len() != self.z.len() {
            return Err(Error::RaggedColumns { x: self.x.len(), y: self.y.len(), z: self.z.len() });
        }
        Self::checked(self.len(), role, Vec::new(), |_, _| T::ZERO).map(drop)
    }

    /// `validate`'s result from each column's magnitudes found elsewhere (`None` for a column
    /// with a value that is not finite: the error names the first, as `validate` does).
    pub(crate) fn validate_found(&self, role: Role, found: Vec<Option<Magnitudes>>) -> Result<Magnitudes> {
        let cols = [&self.x, &self.y, &self.z];
        Self::checked(self.len(), role, found, |i, a| cols[a][i])
    }

    /// The checks of `validate` on any count and columns (also rows, read as three strided
    /// columns by `axis_at`).
    fn checked(
        len: usize,
        role: Role,
        found: Vec<Option<Magnitudes>>,
        axis_at: impl Fn(usize, usize) -> T,
    ) -> Result<Magnitudes> {
        if len == 0 {
            return Err(Error::EmptySet { role });
        }
        if len > MAX_POINTS {
            return Err(Error::TooLarge { role, len, max: MAX_POINTS });
        }
        let mut all = Magnitudes::NONE;
        for (a, m) in found.into_iter().enumerate() {
            match m {
                Some(m) => all = all.union(m),
                None => {
                    // The exact row is looked for only when something is wrong: the first
                    // bad x, else the first bad y, else z.
                    let (axes, index) = (['x', 'y', 'z'], (0..len).position(|i| !axis_at(i, a).is_finite()));
                    let index = index.unwrap_or(0);
                    return Err(Error::NonFinite { role, index, axis: axes[a], value: axis_at(index, a).to_f64() });
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

/// Query points read one at a time, in place: columns ([`Points`], or borrowed as
/// [`PointColumns`], as numpy's Fortran order lays an (N, 3) array out) or rows (`[[T; 3]]`,
/// as its C order does). The CPU kNN reads rows where they are; a search
/// that wants columns makes them (`columns`).
pub trait QueryPoints<T: Real>: Sync {
    /// How many points.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Point `i` as (x, y, z).
    fn get(&self, i: usize) -> [T; 3];
    /// [`Points::validate`]'s checks, with the same errors.
    fn validate(&self, role: Role) -> Result<Magnitudes>;
    /// The points as columns: themselves, or a copy of rows.
    fn columns(&self) -> std::borrow::Cow<'_, Points<T>>;
}

impl<T: Real> QueryPoints<T> for Points<T> {
    #[inline]
    fn len(&self) -> usize {
        Points::len(self)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> [T; 3] {
        Points::get(self, i)
    }
    fn validate(&self, role: Role) -> Result<Magnitudes> {
        Points::validate(self, role)
    }
    fn columns(&self) -> std::borrow::Cow<'_, Points<T>> {
        std::borrow::Cow::Borrowed(self)
    }
}

impl<T: Real> QueryPoints<T> for [[T; 3]] {
    #[inline]
    fn len(&self) -> usize {
        <[[T; 3]]>::len(self)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> [T; 3] {
        self[i]
    }
    fn validate(&self, role: Role) -> Result<Magnitudes> {
        // The magnitudes of all three axes at once (the result is their union anyway); an
        // axis is named only when one is not finite.
        let flat = self.as_flattened();
        let whole = Magnitudes::of_columns(&[flat]).pop().flatten();
        let found = match whole {
            Some(m) => vec![Some(m), Some(Magnitudes::NONE), Some(Magnitudes::NONE)],
            None => (0..3).map(|a| self.iter().all(|r| r[a].is_finite()).then_some(Magnitudes::NONE)).collect(),
        };
        Points::checked(self.len(), role, found, |i, a| self[i][a])
    }
    fn columns(&self) -> std::borrow::Cow<'_, Points<T>> {
        let n = self.len();
        let mut p = Points { x: vec![T::ZERO; n], y: vec![T::ZERO; n], z: vec![T::ZERO; n] };
        const BLOCK: usize = 1 << 14;
        p.x.par_chunks_mut(BLOCK)
            .zip(p.y.par_chunks_mut(BLOCK))
            .zip(p.z.par_chunks_mut(BLOCK))
            .zip(self.par_chunks(BLOCK))
            .for_each(|(((x, y), z), rows)| {
                for (i, r) in rows.iter().enumerate() {
                    (x[i], y[i], z[i]) = (r[0], r[1], r[2]);
                }
            });
        std::borrow::Cow::Owned(p)
    }
}

/// Three borrowed columns of one length: query points read in place.
#[derive(Clone, Copy, Debug)]
pub struct PointColumns<'a, T> {
    /// x of every point.
    pub x: &'a [T],
    /// y of every point.
    pub y: &'a [T],
    /// z of every point.
    pub z: &'a [T],
}

impl<T: Real> QueryPoints<T> for PointColumns<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.x.len()
    }
    #[inline(always)]
    fn get(&self, i: usize) -> [T; 3] {
        [self.x[i], self.y[i], self.z[i]]
    }
    fn validate(&self, role: Role) -> Result<Magnitudes> {
        let (x, y, z) = (self.x, self.y, self.z);
        if x.len() != y.len() || x.len() != z.len() {
            return Err(Error::RaggedColumns { x: x.len(), y: y.len(), z: z.len() });
        }
        let cols = [x, y, z];
        Points::checked(x.len(), role, Magnitudes::of_columns(&cols), |i, a| cols[a][i])
    }
    fn columns(&self) -> std::borrow::Cow<'_, Points<T>> {
        std::borrow::Cow::Owned(Points { x: self.x.to_vec(), y: self.y.to_vec(), z: self.z.to_vec() })
    }
}
