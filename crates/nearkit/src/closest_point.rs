//! What a closest-point query asks for and returns: for each query point, the nearest point on
//! a triangle mesh, its triangle, distance and barycentric coordinates.

use crate::points::Points;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
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
    pub distance: Vec<T>,
    /// The closest point on that triangle.
    pub point: Points<T>,
    /// Barycentric coordinates (u, v, w) of the point: point = u·a + v·b + w·c for the
    /// triangle's corners a, b, c in file order.
    pub bary: [Vec<T>; 3],
}
