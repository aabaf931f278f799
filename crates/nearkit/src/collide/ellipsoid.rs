//! Ellipsoid geometry in f64: the rotation of a quaternion, the world box, the support
//! function, and the maps to and from the unit sphere. `collide.cu` repeats every
//! function here operation for operation (no fused multiply-add), so both backends agree bit
//! for bit.

use crate::error::{Error, Result};
pub use crate::geometry::vec3::{add, cross, dot, normalize, sub, V3};

/// Boxes of bodies are widened by this factor, so that rounding never lets a touching pair
/// fall outside each other's boxes (the same factor on the GPU).
pub const BOX_SLACK: f64 = 1.000_000_001;

/// A body's (or sweep's) box: `center` ± its half extents widened by `BOX_SLACK`.
#[inline]
pub fn body_box(shape: &Shape, center: V3) -> (V3, V3) {
    let h = shape.half_extents().map(|e| e * BOX_SLACK);
    ([center[0] - h[0], center[1] - h[1], center[2] - h[2]], [center[0] + h[0], center[1] + h[1], center[2] + h[2]])
}

/// An ellipsoid's orientation and radii, ready for the narrow phase. `rot` is row-major:
/// world = rot · local, so its columns are the local axes in world coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub rot: [[f64; 3]; 3],
    pub radii: V3,
    /// S⁻¹·Rᵀ, row by row: world offsets to the unit-ball space, without divisions.
    pub unit: [[f64; 3]; 3],
}

/// The rotation of quaternion (x, y, z, w); it need not be of unit length. The identity
/// quaternion gives the exact identity matrix.
pub fn rotation(q: [f64; 4]) -> [[f64; 3]; 3] {
    let [x, y, z, w] = q;
    let n2 = x * x + y * y + z * z + w * w;
    let s = 2.0 / n2;
    [
        [1.0 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
        [s * (x * y + z * w), 1.0 - s * (x * x + z * z), s * (y * z - x * w)],
        [s * (x * z - y * w), s * (y * z + x * w), 1.0 - s * (x * x + y * y)],
    ]
}

/// M·u for a row-major 3 × 3 matrix, in this order of operations.
#[inline(always)]
pub(crate) fn times(m: &[[f64; 3]; 3], u: V3) -> V3 {
    [
        m[0][0] * u[0] + m[0][1] * u[1] + m[0][2] * u[2],
        m[1][0] * u[0] + m[1][1] * u[1] + m[1][2] * u[2],
        m[2][0] * u[0] + m[2][1] * u[1] + m[2][2] * u[2],
    ]
}

/// Mᵀ·u for a row-major 3 × 3 matrix, in this order of operations.
#[inline(always)]
pub(crate) fn transpose_times(m: &[[f64; 3]; 3], u: V3) -> V3 {
    [
        m[0][0] * u[0] + m[1][0] * u[1] + m[2][0] * u[2],
        m[0][1] * u[0] + m[1][1] * u[1] + m[2][1] * u[2],
        m[0][2] * u[0] + m[1][2] * u[1] + m[2][2] * u[2],
    ]
}

impl Shape {
    pub fn new(radii: V3, orientation: [f64; 4]) -> Self {
        let rot = rotation(orientation);
        let unit = std::array::from_fn(|j| std::array::from_fn(|i| rot[i][j] / radii[j]));
        Shape { rot, radii, unit }
    }

    /// Half the world box's extent along each axis.
    pub fn half_extents(&self) -> V3 {
        let r = &self.rot;
        let e = |i: usize| {
            let (a, b, c) = (r[i][0] * self.radii[0], r[i][1] * self.radii[1], r[i][2] * self.radii[2]);
            (a * a + b * b + c * c).sqrt()
        };
        [e(0), e(1), e(2)]
    }

    /// Rᵀ·u: a world direction in local axes.
    #[inline(always)]
    pub(crate) fn local_dir(&self, u: V3) -> V3 {
        transpose_times(&self.rot, u)
    }

    /// R·u: local axes to world.
    #[inline(always)]
    pub(crate) fn world_dir(&self, u: V3) -> V3 {
        times(&self.rot, u)
    }

    /// S⁻¹Rᵀ·d: an offset from the center into the space where the ellipsoid is the unit ball.
    #[inline(always)]
    pub fn unit_of(&self, d: V3) -> V3 {
        let u = &self.unit;
        [
            u[0][0] * d[0] + u[0][1] * d[1] + u[0][2] * d[2],
            u[1][0] * d[0] + u[1][1] * d[1] + u[1][2] * d[2],
            u[2][0] * d[0] + u[2][1] * d[1] + u[2][2] * d[2],
        ]
    }

    /// R·S·p: a unit-ball point back to a world offset from the center.
    #[inline(always)]
    pub fn world_of(&self, p: V3) -> V3 {
        self.world_dir([p[0] * self.radii[0], p[1] * self.radii[1], p[2] * self.radii[2]])
    }

    /// R·S⁻¹·p: the world direction of the surface normal at unit-ball point p.
    #[inline(always)]
    pub fn normal_of_unit(&self, p: V3) -> V3 {
        self.world_dir([p[0] / self.radii[0], p[1] / self.radii[1], p[2] / self.radii[2]])
    }

    /// The support function h(u) = max over the ellipsoid of u·(x − center) = |S·Rᵀ·u|.
    #[inline(always)]
    pub fn support(&self, u: V3) -> f64 {
        let l = self.local_dir(u);
        let (a, b, c) = (l[0] * self.radii[0], l[1] * self.radii[1], l[2] * self.radii[2]);
        (a * a + b * b + c * c).sqrt()
    }

    /// Σ = R·S²·Rᵀ, the inverse of the quadratic form (x − c)ᵀΣ⁻¹(x − c) ≤ 1; symmetric,
    /// stored as (xx, yy, zz, xy, xz, yz).
    pub fn sigma(&self) -> [f64; 6] {
        let r = &self.rot;
        let s2 = [self.radii[0] * self.radii[0], self.radii[1] * self.radii[1], self.radii[2] * self.radii[2]];
        let e = |i: usize, k: usize| r[i][0] * s2[0] * r[k][0] + r[i][1] * s2[1] * r[k][1] + r[i][2] * s2[2] * r[k][2];
        [e(0, 0), e(1, 1), e(2, 2), e(0, 1), e(0, 2), e(1, 2)]
    }
}

/// Checks a pose: a finite center and a usable quaternion (an error names the problem).
pub(crate) fn check_pose(center: V3, orientation: [f64; 4]) -> Result<()> {
    if !center.iter().all(|v| v.is_finite()) {
        return Err(Error::InvalidArgument(format!("body center {center:?} is not finite")));
    }
    let n2: f64 = orientation.iter().map(|v| v * v).sum();
    if !(n2.is_finite() && n2 > 1e-12) {
        return Err(Error::InvalidArgument(format!(
            "orientation {orientation:?} is not a usable quaternion (x, y, z, w); the identity is (0, 0, 0, 1)"
        )));
    }
    Ok(())
}
