//! Exact k-nearest neighbours: each query's k nearest data points (`cpu`, `cuda`, through the
//! candidate grid of `grid` or the tree search), and the same for vectors of any dimension,
//! exact or by shifted sorting (`vectors`).

pub(crate) mod buffer;
pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod grid;
pub(crate) mod grid_cuda;
pub(crate) mod grid_top8;
pub(crate) mod vectors;

use crate::error::{Error, Result};
use crate::geometry::radius2;
use crate::geometry::real::Real;

pub use buffer::KnnBuffer;
pub use grid::GridOptions;

/// What a k-nearest-neighbour query asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KnnOptions<T> {
    /// Neighbours per query (at most the number of data points are returned).
    pub k: usize,
    /// Only neighbours with squared distance <= `max_distance²` (in the working precision).
    pub max_distance: Option<T>,
    /// Queries and data are the same set: query i does not list data point i (a kNN graph).
    pub exclude_self: bool,
    /// How the candidate grid of many-query batches is sized (tuning; same answers).
    pub grid: GridOptions,
}

impl<T: Real> Default for KnnOptions<T> {
    fn default() -> Self {
        Self { k: 8, max_distance: None, exclude_self: false, grid: GridOptions::default() }
    }
}

impl<T: Real> KnnOptions<T> {
    /// The `k` nearest, everything else as default.
    pub fn k(k: usize) -> Self {
        Self { k, ..Self::default() }
    }
}

/// For each query its `k` nearest data points, ascending by (distance, id), row-major:
/// query `q`'s neighbours are `ids[q*k..(q+1)*k]`. Missing neighbours (beyond the max
/// distance) are `NO_ID` with an infinite distance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Knn<T> {
    /// Neighbours per query (the asked k, at most the data's size).
    pub k: usize,
    /// Neighbour ids, queries × k, row-major.
    pub ids: Vec<u32>,
    /// Their distances.
    pub distances: Vec<T>,
}

/// Effective k and squared radius of a kNN query over `n_data` points (also for data already
/// on a device). k is clamped to the number of data points a query can have as neighbours.
pub(crate) fn knn_limits<T: Real>(n_data: usize, n_queries: usize, opts: &KnnOptions<T>) -> Result<(usize, T)> {
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    if opts.exclude_self && n_data != n_queries {
        return Err(Error::InvalidArgument(format!(
            "exclude-self needs the queries to be the data itself ({n_data} data points, {n_queries} queries)"
        )));
    }
    let available = n_data - usize::from(opts.exclude_self);
    Ok((opts.k.min(available).max(1), radius2(opts.max_distance)?))
}
