//! Radius queries: every indexed point within a distance r of each query, a result whose size
//! is not known in advance.
//!
//! Both backends find a row's points in the `MortonTree`'s (Morton) order: the CPU's groups of
//! queries walk the tree once for their box and scan the runs of points near it
//! (`search::runs_near`, `scan_runs`), the GPU's threads walk it one query each, left child
//! first; either way a point is within when its squared distance is, and positions ascend. A
//! sorted row is then put in (squared distance, id) order, which is a total order, so every
//! sort gives the same bits. "Within" is inclusive and exact: a point is in
//! when its squared distance, computed as everywhere else, is <= r² in the working precision.
//!
//! Results are rows in compressed form ([`Within`]): the CPU collects each block of queries'
//! rows and copies them into place; the GPU counts first (keeping each row's first points),
//! scans the counts into offsets and fills (in several rounds when the result exceeds its
//! memory).

pub(crate) mod cpu;
pub(crate) mod cuda;

use crate::error::{Error, Result};
use crate::geometry::real::Real;

/// What a radius query asks for beyond the radius.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RadiusOptions {
    /// Sort each row by (distance, id) (the default); unsorted rows list their points in the
    /// index's Morton order, which is faster and still the same on every device.
    pub sorted: bool,
    /// Give each neighbour's distance (the default). Without, [`Within::distances`] stays
    /// empty and the search stores and moves only ids, which is faster: scipy's
    /// `query_pairs` and `query_ball_point`, say, give only ids. (Rows left in GPU memory,
    /// `within_device` and `pairs_within_device`, keep their distances either way.)
    pub distances: bool,
    /// Fail, before the result is allocated, when it would hold more than this many
    /// neighbours (`None`: as many as the machine's free memory holds, with room for the
    /// copies a search makes; the error is then [`Error::OutOfMemory`]).
    pub max_results: Option<u64>,
}

impl Default for RadiusOptions {
    fn default() -> Self {
        Self { sorted: true, distances: true, max_results: None }
    }
}

/// Rows of neighbours in compressed form: row `i` lists `ids[offsets[i]..offsets[i + 1]]`
/// and their `distances` (ascending by (distance, id) unless unsorted rows were asked for).
///
/// From [`PointIndex::within`](crate::PointIndex::within) a row is a query's; from
/// [`PointIndex::pairs_within`](crate::PointIndex::pairs_within) and
/// [`PointIndex::pairs_within_other`](crate::PointIndex::pairs_within_other) a row is an
/// indexed point's, and [`Within::pairs`] lists the same as (row, id, distance) pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Within<T> {
    /// Start of each row, and the total at the end (`rows + 1` entries).
    pub offsets: Vec<u64>,
    /// Neighbour ids, row after row.
    pub ids: Vec<u32>,
    /// Their Euclidean distances (the square root of the squared distance compared); empty
    /// when [`RadiusOptions::distances`] was off.
    pub distances: Vec<T>,
}

impl<T: Real> Within<T> {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The number of neighbours over all rows.
    pub fn total(&self) -> usize {
        self.ids.len()
    }

    /// Row `i`: its neighbours' ids and distances (no distances when they were not asked
    /// for).
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        let (s, e) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        (&self.ids[s..e], self.distances.get(s..e).unwrap_or_default())
    }

    /// Each row's length.
    pub fn counts(&self) -> Vec<u32> {
        self.offsets.windows(2).map(|w| (w[1] - w[0]) as u32).collect()
    }

    /// Every (row, id, distance), row after row (the distance NaN when distances were not
    /// asked for).
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32, T)> + '_ {
        (0..self.rows()).flat_map(move |r| {
            let (s, e) = (self.offsets[r] as usize, self.offsets[r + 1] as usize);
            (s..e)
                .map(move |k| (r as u32, self.ids[k], self.distances.get(k).copied().unwrap_or(T::from_f64(f64::NAN))))
        })
    }
}

/// The squared radius of `r` (finite and >= 0), scaled as the index's coordinates are
/// (infinite when scaling overflows it: every point is then within).
pub(crate) fn radius2<T: Real>(scale: crate::geometry::scale::Scale, r: T) -> Result<T> {
    if !(r.is_finite() && r >= T::ZERO) {
        return Err(Error::BadRadius(r.to_f64()));
    }
    crate::geometry::radius2(scale.max_distance(Some(r))?)
}

/// Fails when a result of `total` neighbours is more than asked for, or than memory holds.
pub(crate) fn check_total<T: Real>(total: u64, opts: &RadiusOptions) -> Result<()> {
    if let Some(max) = opts.max_results {
        if total > max {
            return Err(too_many::<T>(total, max));
        }
    } else if total > memory_limit::<T>() {
        return Err(beyond_memory::<T>(total));
    }
    let per = (std::mem::size_of::<u32>() + std::mem::size_of::<T>()) as u64;
    crate::runtime::cpu::check_room::<u8>(1, (total.saturating_mul(per)).try_into().unwrap_or(usize::MAX), "the rows")
}

/// The most neighbours a result may hold when no `max_results` is given: what the free
/// memory holds twice over (a search holds its rows, then copies them into the result), so
/// that a result too large fails with an error rather than the process being killed (on
/// systems that overcommit memory, an allocation alone does not fail). No limit where the
/// free memory is not known.
pub(crate) fn memory_limit<T>() -> u64 {
    let per = (std::mem::size_of::<u32>() + std::mem::size_of::<T>()) as u64;
    crate::runtime::cpu::available_memory().map_or(u64::MAX, |m| m / (2 * per))
}

fn size_of_rows<T>(total: u64) -> String {
    let bytes = total as f64 * (std::mem::size_of::<u32>() + std::mem::size_of::<T>()) as f64;
    if bytes >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", bytes / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
    }
}

pub(crate) fn beyond_memory<T>(total: u64) -> Error {
    Error::OutOfMemory(format!(
        "the result holds at least {total} neighbours (at least {} as ids and distances), more than this \
         machine's free memory holds: use a smaller radius, fewer queries, counts only, rows a batch at a time \
         (within_each), or set max_results",
        size_of_rows::<T>(total)
    ))
}

pub(crate) fn too_many<T>(total: u64, max: u64) -> Error {
    let size = size_of_rows::<T>(total);
    Error::InvalidArgument(format!(
        "the result holds at least {total} neighbours (at least {size} as ids and distances), more than \
         max_results = {max}: use a smaller radius, fewer queries, counts only, or a larger limit"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_default_limit_is_what_free_memory_holds() {
        let limit = memory_limit::<f64>();
        let free = crate::runtime::cpu::available_memory().unwrap();
        assert!(limit > 0 && limit < free, "{limit} neighbours of 12 bytes, held twice, within {free} bytes");
        // As many neighbours as there are free bytes need 12 times the free memory.
        let opts = RadiusOptions::default();
        assert!(matches!(check_total::<f64>(free, &opts), Err(Error::OutOfMemory(_))));
        // A limit given is the limit, whatever memory holds.
        assert!(matches!(
            check_total::<f64>(11, &RadiusOptions { max_results: Some(10), ..opts }),
            Err(Error::InvalidArgument(_))
        ));
        assert!(check_total::<f64>(10, &RadiusOptions { max_results: Some(10), ..opts }).is_ok());
    }
}
