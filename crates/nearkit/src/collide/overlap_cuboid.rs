//! Overlap tests of a cuboid (an oriented box: `Shape` with its half extents as radii) with a
//! triangle and with an ellipsoid. Touching is not overlapping, as for the contact tests.
//! `collide.cu` repeats both operation for operation.

use super::ellipsoid::{cross, dot, sub, Shape, V3};
use crate::closest_point::triangle::closest_point_triangle;

/// Whether the cuboid meets the triangle whose corners are offsets from its center: no
/// separating axis among the box's three, the triangle's normal and their edges' nine cross
/// products (a zero axis, of a degenerate triangle, separates nothing and is skipped). On an
/// axis, touching projections separate.
pub fn cuboid_meets_triangle(b: &Shape, corners: [V3; 3]) -> bool {
    let p = corners.map(|c| b.local_dir(c));
    let h = b.radii;
    let separates = |u: V3| -> bool {
        if u == [0.0; 3] {
            return false;
        }
        let r = h[0] * u[0].abs() + h[1] * u[1].abs() + h[2] * u[2].abs();
        let (d0, d1, d2) = (dot(u, p[0]), dot(u, p[1]), dot(u, p[2]));
        d0.max(d1).max(d2) <= -r || d0.min(d1).min(d2) >= r
    };
    const AXES: [V3; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    if AXES.iter().any(|&a| separates(a)) {
        return false;
    }
    let edges = [sub(p[1], p[0]), sub(p[2], p[1]), sub(p[0], p[2])];
    if separates(cross(edges[0], edges[1])) {
        return false;
    }
    !AXES.iter().any(|&a| edges.iter().any(|&e| separates(cross(a, e))))
}

/// The cuboid's corners by index (bit 0: +x, bit 1: +y, bit 2: +z) and its faces, each a
/// quad of corners in order around it.
const FACES: [[usize; 4]; 6] = [[0, 2, 6, 4], [1, 3, 7, 5], [0, 1, 5, 4], [2, 3, 7, 6], [0, 1, 3, 2], [4, 5, 7, 6]];

/// Whether the cuboid meets ellipsoid `e`, whose center is at offset `r` from the cuboid's:
/// the ellipsoid's center is in the box, or in the ellipsoid's unit-ball space a face of the
/// box (two triangles) comes nearer than 1 to the center.
pub fn cuboid_meets_ellipsoid(b: &Shape, e: &Shape, r: V3) -> bool {
    let h = b.radii;
    let c = b.local_dir(r);
    if (0..3).all(|a| c[a].abs() <= h[a]) {
        return true;
    }
    let corners: [V3; 8] = std::array::from_fn(|k| {
        let s = |bit: usize, a: usize| if k & bit != 0 { h[a] } else { -h[a] };
        e.unit_of(sub(b.world_dir([s(1, 0), s(2, 1), s(4, 2)]), r))
    });
    FACES.iter().any(|f| {
        let [a, b, c, d] = f.map(|k| corners[k]);
        closest_point_triangle([0.0; 3], a, b, c).d2 < 1.0 || closest_point_triangle([0.0; 3], a, c, d).d2 < 1.0
    })
}
