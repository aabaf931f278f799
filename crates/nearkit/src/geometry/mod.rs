//! What every capability is built from: the coordinate types (`Real`), point sets, vectors of
//! any dimension, triangle meshes, 3-vector arithmetic and Morton codes.

pub mod magnitude;
pub mod mesh;
pub mod morton;
pub mod points;
pub mod real;
pub mod scale;
pub mod vec3;
pub mod vectors;

pub use mesh::Mesh;
pub use points::Points;
pub use real::Real;
pub use vectors::{Aabb6, Vectors};

use crate::error::{Error, Result};

/// The squared search radius of an optional max distance (which must be finite and >= 0).
pub(crate) fn radius2<T: Real>(max_distance: Option<T>) -> Result<T> {
    match max_distance {
        None => Ok(T::INFINITY),
        Some(r) if r.is_finite() && r >= T::ZERO => Ok(r * r),
        Some(r) => Err(Error::BadMaxDistance(r.to_f64())),
    }
}
