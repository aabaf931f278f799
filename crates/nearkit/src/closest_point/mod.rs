//! Closest point on a triangle mesh: for each query point, the nearest point on the mesh, its
//! triangle, distance and barycentric coordinates, and signed distances for closed meshes.
//!
//! `MeshIndex` is the public entry. The index is a `TriangleBvh` of oriented boxes (`bvh`),
//! searched on the CPU per query or by packets of 8 (`cpu`, `packet`, `packet_avx2`) and on
//! the GPU by warps of 32 (`cuda`); triangles are tested by `triangle`.

pub(crate) mod bvh;
pub(crate) mod bvh_cuda;
pub(crate) mod cpu;
pub(crate) mod cuda;
mod mesh_index;
pub(crate) mod packet;
#[cfg(target_arch = "x86_64")]
pub(crate) mod packet_avx2;
pub(crate) mod signed_distance;
pub(crate) mod triangle;

pub use cuda::DeviceClosestPoints;
pub use mesh_index::MeshIndex;

use crate::geometry::points::Points;
use crate::geometry::real::Real;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
/// What a closest-point query asks for.
pub struct ClosestPointOptions<T> {
    /// Only triangles at most this far away; queries with none get `NO_ID`.
    pub max_distance: Option<T>,
}

/// Per query, in query order. A query with no triangle within the max distance has triangle
/// `NO_ID`, an infinite distance, and NaN point and barycentrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClosestPoints<T> {
    /// The nearest triangle (ties to the smaller id).
    pub triangle: Vec<u32>,
    /// Distance to the closest point.
    pub distance: Vec<T>,
    /// The closest point on that triangle.
    pub point: Points<T>,
    /// Barycentric coordinates (u, v, w) of the point: point = u·a + v·b + w·c for the
    /// triangle's corners a, b, c in file order.
    pub bary: [Vec<T>; 3],
}

/// An absolute bound (with a wide margin) on the rounding error of a computed closest point:
/// its coordinates come from a few products and sums of values no larger than `scale`, the
/// largest magnitude of the mesh's box (`lo`, `hi`) and of the queries (`query_max`).
pub(crate) fn rounding_slack<T: Real>(lo: [T; 3], hi: [T; 3], query_max: T) -> T {
    let scale = lo.iter().chain(&hi).map(|v| v.to_f64().abs()).fold(query_max.to_f64().abs(), f64::max);
    let ulp = if T::NAME == "f32" { f32::EPSILON as f64 } else { f64::EPSILON };
    T::from_f64(scale * ulp * 64.0)
}

/// The Morton frame that orders closest-point queries (both backends): the mesh's box widened
/// by its size on every side. Queries around the mesh (most of them, for queries in a box 1.5
/// times the mesh's) keep their order instead of piling up, clamped, on the faces of the
/// mesh's own box, so consecutive queries lie together: their searches share a path (a GPU
/// warp's 32 queries walk the tree together) and each starts near its predecessor's answer.
pub(crate) fn query_frame<T: Real>(lo: [T; 3], hi: [T; 3]) -> crate::geometry::morton::MortonFrame<T> {
    let e = (0..3).map(|a| hi[a] - lo[a]).fold(T::ZERO, |m, v| if v > m { v } else { m });
    crate::geometry::morton::MortonFrame::from_bounds(lo.map(|v| v - e), hi.map(|v| v + e))
}
