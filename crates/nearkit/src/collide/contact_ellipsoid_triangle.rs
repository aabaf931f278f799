//! Ellipsoid–triangle contact, exact: in the space where the ellipsoid is the unit ball, the
//! triangle overlaps it iff its closest point to the center is nearer than 1.

use super::ellipsoid::{cross, dot, normalize, Shape, V3};
use crate::closest_point::triangle::closest_point_triangle;

/// A contact seen from one body: `normal` is the unit direction that moves the body out of
/// the other shape, `depth` how far it must move along it, and `point` the deepest point of
/// the other shape inside the body, as an offset from the body's center.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactGeometry {
    pub normal: V3,
    pub depth: f64,
    pub point: V3,
}

/// The contact of an ellipsoid with a triangle whose corners are given as offsets from the
/// ellipsoid's center, or `None` when they do not overlap (touching is not overlapping).
///
/// The point is the triangle's point nearest the center in the ellipsoid's own metric; the
/// normal is the ellipsoid's surface normal there, reversed; the depth is the ellipsoid's
/// extent beyond that point along the normal, h(n) + n·point (r − d for a sphere).
pub fn contact_ellipsoid_triangle(shape: &Shape, corners: [V3; 3]) -> Option<ContactGeometry> {
    let [a, b, c] = corners.map(|p| shape.unit_of(p));
    let near = closest_point_triangle([0.0; 3], a, b, c);
    if !(near.d2 < 1.0) {
        return None;
    }
    let point = shape.world_of(near.point);
    let g = shape.normal_of_unit(near.point);
    let normal = normalize([-g[0], -g[1], -g[2]])
        .or_else(|| {
            // The center lies on the triangle: push along the face normal.
            let [p, q, r] = corners;
            normalize(cross(super::ellipsoid::sub(q, p), super::ellipsoid::sub(r, p)))
        })
        .unwrap_or([0.0, 0.0, 1.0]);
    let depth = shape.support(normal) + dot(normal, point);
    Some(ContactGeometry { normal, depth, point })
}
