//! 3-vectors in f64 as plain arrays: the few operations the geometry modules share.

pub type V3 = [f64; 3];

#[inline(always)]
pub fn sub(u: V3, v: V3) -> V3 {
    [u[0] - v[0], u[1] - v[1], u[2] - v[2]]
}

#[inline(always)]
pub fn add(u: V3, v: V3) -> V3 {
    [u[0] + v[0], u[1] + v[1], u[2] + v[2]]
}

#[inline(always)]
pub fn dot(u: V3, v: V3) -> f64 {
    u[0] * v[0] + u[1] * v[1] + u[2] * v[2]
}

#[inline(always)]
pub fn cross(u: V3, v: V3) -> V3 {
    [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]
}

/// `u / |u|`, or `None` for a zero vector.
#[inline(always)]
pub fn normalize(u: V3) -> Option<V3> {
    let l = dot(u, u).sqrt();
    (l > 0.0).then(|| [u[0] / l, u[1] / l, u[2] / l])
}
