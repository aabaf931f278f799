//! The interface every backend implements over the same data layout.

use crate::error::Result;
use crate::points::Points;
use crate::query::{Knn, KnnOptions, Nearest, Pair, PairsOptions};
use crate::real::Real;

pub trait Backend {
    /// Human-readable name of the hardware used, e.g. `cpu (16 threads)`.
    fn describe(&self) -> String;

    /// Every A's nearest B (the all-nearest-neighbour join).
    fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>>;

    /// The k closest A–B pairs in the given mode, ascending by (squared distance, a, b).
    fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>>;

    /// Each query's k nearest data points, ascending by (distance, id).
    fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>>;
}
