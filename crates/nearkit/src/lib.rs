//! nearkit: exact 3-D proximity queries on multi-core CPUs and CUDA GPUs, with bitwise
//! identical answers on both.
//!
//! Build an index once on an [`Engine`] (the CPU, or a GPU), then query it many times:
//!
//! - [`PointIndex`]: each query's nearest point, its k nearest, and the k closest pairs of a
//!   query set and the indexed set.
//!   It also answers radius queries: every point within r of each query
//!   ([`PointIndex::within`]), and every pair of a set, or of two sets, within r.
//! - [`MeshIndex`]: each query's closest point on a triangle mesh, and signed distances.
//! - [`VectorIndex`]: exact kNN of vectors of any dimension up to 8; [`shifted_sort_knn`] is
//!   the approximate shifted-sort kNN.
//! - [`ShardedIndex`]: a point set cut by space across several GPUs of one host, for the
//!   all-nearest join on all of them at once.
//! - [`collide`]: a collision world of ellipsoid bodies against a static mesh and each other.
//!
//! The free functions ([`closest_pairs`], [`nearest`], [`knn`], [`closest_points`]) build an
//! index and run one query. Results are exact (the brute-force answer), ties go to the
//! smaller id, and every device gives the same bits.
//!
//! ```
//! use nearkit::{closest_pairs, Device, PairMode, Points};
//! let a = Points::from_rows(&[[0.0f32, 0.0, 0.0], [10.0, 0.0, 0.0]]);
//! let b = Points::from_rows(&[[1.0f32, 0.0, 0.0], [10.0, 0.5, 0.0]]);
//! let pairs = closest_pairs(&a, &b, 1, PairMode::NearestPerA, Device::Cpu).unwrap();
//! assert_eq!((pairs[0].a, pairs[0].b, pairs[0].distance), (1, 1, 0.5));
//! ```
//!
//! Layout: one folder per capability (`pairs`, `knn`, `radius`, `closest_point`, `collide`,
//! and `sharded`, which is GPUs only), each with its CPU code and its CUDA launcher beside the
//! `.cu` file it launches; `tree` is the point index pairs and kNN share; `geometry` the types every capability uses; `runtime` what the
//! backends share (CUDA context, NVRTC, device memory, CPU row writers).

// Every public item is documented (the test hooks expose internals, which are not).
#![cfg_attr(not(feature = "test-hooks"), warn(missing_docs))]

mod closest_point;
pub mod collide;
mod device;
mod error;
pub mod generate;
mod geometry;
pub mod kernels;
mod knn;
mod pairs;
mod point_index;
mod radius;
mod runtime;
mod sharded;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod test_hooks;
mod tree;

pub use closest_point::triangle::{closest_point_triangle, TrianglePoint};
pub use closest_point::{ClosestPointOptions, ClosestPoints, DeviceClosestPoints, MeshIndex};
pub use device::{CudaOptions, Device, Engine, EngineOptions};
pub use error::{Error, Result, Role};
pub use geometry::magnitude::Magnitudes;
pub use geometry::points::{PointColumns, QueryPoints, NO_ID};
pub use geometry::vectors::MAX_DIM as MAX_VECTOR_DIM;
pub use geometry::{Aabb6, Mesh, Points, Real, Vectors};
pub use knn::cuda::DeviceKnn;
pub use knn::vectors::{shifted_sort_knn, shifted_sort_knn_device, DeviceVectors, ShiftedSortOptions, VectorIndex};
pub use knn::{GridOptions, Knn, KnnBuffer, KnnOptions};
pub use pairs::cuda::DeviceNearest;
pub use pairs::{Nearest, Pair, PairMode, PairsOptions};
pub use point_index::PointIndex;
pub use radius::cuda::DeviceWithin;
pub use radius::{RadiusOptions, Within};
pub use runtime::cpu::{big_vec, try_big_vec};
pub use runtime::cuda::transfer::BusFloor;
pub use runtime::cuda::DevicePoints;
pub use sharded::ShardedIndex;

/// The k closest A–B pairs (see [`PairMode`]), ascending by distance; ties by smaller A id,
/// then smaller B id. Indexes B; see [`PointIndex::closest_pairs`].
pub fn closest_pairs<T: Real>(
    a: &Points<T>,
    b: &Points<T>,
    k: usize,
    mode: PairMode,
    device: Device,
) -> Result<Vec<Pair<T>>> {
    a.validate(Role::A)?;
    geometry::scale::Scale::for_points::<T>(b.validate(Role::B)?, Role::B)?;
    PointIndex::build(b, device)?.closest_pairs(a, &PairsOptions { k, mode, max_distance: None })
}

/// Every A's nearest B (id and distance); ties by smaller B id. Indexes B; see
/// [`PointIndex::nearest`].
pub fn nearest<T: Real>(a: &Points<T>, b: &Points<T>, device: Device) -> Result<Nearest<T>> {
    a.validate(Role::A)?;
    geometry::scale::Scale::for_points::<T>(b.validate(Role::B)?, Role::B)?;
    PointIndex::build(b, device)?.nearest(a, None)
}

/// Each query's k nearest data points (ids and distances, ascending; ties by smaller id),
/// row-major. Indexes the data; see [`PointIndex::knn`].
pub fn knn<T: Real>(data: &Points<T>, queries: &Points<T>, k: usize, device: Device) -> Result<Knn<T>> {
    PointIndex::build(data, device)?.knn(queries, &KnnOptions::k(k))
}

/// Each query's closest point on the mesh. Indexes the mesh; see [`MeshIndex::closest_points`].
pub fn closest_points<T: Real>(mesh: &Mesh<T>, queries: &Points<T>, device: Device) -> Result<ClosestPoints<T>> {
    MeshIndex::build(mesh, device)?.closest_points(queries, &ClosestPointOptions::default())
}
