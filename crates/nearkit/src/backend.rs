//! The interface every backend implements over the same data layout.

use crate::closest_point::{ClosestPointOptions, ClosestPoints};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::points::Points;
use crate::query::{Knn, KnnOptions, Nearest, Pair, PairsOptions};
use crate::real::Real;
use crate::shifted_sort::ShiftedSortOptions;
use crate::vectors::Vectors;

pub trait Backend {
    /// Human-readable name of the hardware used, e.g. `cpu (16 threads)`.
    fn describe(&self) -> String;

    /// Every A's nearest B (the all-nearest-neighbour join).
    fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>>;

    /// The k closest A–B pairs in the given mode, ascending by (squared distance, a, b).
    fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>>;

    /// Each query's k nearest data points, ascending by (distance, id).
    fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>>;

    /// Each query's closest point on the mesh (triangle, distance, point, barycentrics).
    fn closest_points<T: Real>(
        &self,
        mesh: &Mesh<T>,
        queries: &Points<T>,
        opts: &ClosestPointOptions<T>,
    ) -> Result<ClosestPoints<T>>;

    /// Exact kNN of vectors of any dimension (1 to 8), ascending by (distance, id).
    fn knn_vectors<T: Real>(&self, data: &Vectors<T>, queries: &Vectors<T>, opts: &KnnOptions<T>) -> Result<Knn<T>>;

    /// Approximate kNN by shifted sorting (see `shifted_sort`); the same answer on every backend.
    fn approx_knn<T: Real>(&self, data: &Vectors<T>, queries: &Vectors<T>, opts: &ShiftedSortOptions)
        -> Result<Knn<T>>;
}
