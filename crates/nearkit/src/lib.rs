//! nearkit: exact 3-D proximity queries on multi-core CPUs and CUDA GPUs, with bitwise
//! identical answers on both.
//!
//! ```
//! use nearkit::{closest_pairs, Device, PairMode, Points};
//! let a = Points::from_rows(&[[0.0f32, 0.0, 0.0], [10.0, 0.0, 0.0]]);
//! let b = Points::from_rows(&[[1.0f32, 0.0, 0.0], [10.0, 0.5, 0.0]]);
//! let pairs = closest_pairs(&a, &b, 1, PairMode::NearestPerA, Device::Cpu).unwrap();
//! assert_eq!((pairs[0].a, pairs[0].b, pairs[0].distance), (1, 1, 0.5));
//! ```

pub mod backend;
pub mod closest_point;
pub mod closest_point_triangle;
pub mod collide;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod error;
pub mod generate;
pub mod grid;
pub mod mesh;
pub mod morton;
pub mod points;
pub mod query;
pub mod real;
pub mod shifted_sort;
pub mod signed_distance;
pub mod tree;
pub mod triangle_bvh;
pub mod vec3;
pub mod vector_tree;
pub mod vectors;

pub use backend::Backend;
pub use closest_point::{ClosestPointOptions, ClosestPoints};
pub use device::{Device, Engine};
pub use error::{Error, Result, Role};
pub use mesh::Mesh;
pub use points::Points;
pub use query::{Knn, KnnOptions, Nearest, Pair, PairMode, PairsOptions};
pub use real::Real;
pub use shifted_sort::ShiftedSortOptions;
pub use tree::NO_ID;
pub use vectors::{Aabb6, Vectors};

/// The k closest A–B pairs (see [`PairMode`]), ascending by distance; ties by smaller A id,
/// then smaller B id.
pub fn closest_pairs<T: Real>(
    a: &Points<T>,
    b: &Points<T>,
    k: usize,
    mode: PairMode,
    device: Device,
) -> Result<Vec<Pair<T>>> {
    let opts = PairsOptions { k, mode, max_distance: None };
    Engine::open(device)?.0.closest_pairs(a, b, &opts)
}

/// Every A's nearest B (id and distance); ties by smaller B id.
pub fn nearest<T: Real>(a: &Points<T>, b: &Points<T>, device: Device) -> Result<Nearest<T>> {
    Engine::open(device)?.0.nearest(a, b, None)
}

/// Each query's k nearest data points (ids and distances, ascending; ties by smaller id).
pub fn knn<T: Real>(data: &Points<T>, queries: &Points<T>, k: usize, device: Device) -> Result<Knn<T>> {
    Engine::open(device)?.0.knn(data, queries, &KnnOptions { k, ..Default::default() })
}
