//! Triangle meshes: shared vertices (structure of arrays) and triangles as vertex indices.

use crate::error::{Error, Result};
use crate::geometry::points::Points;
use crate::geometry::real::Real;

/// A triangle mesh. Triangle ids are 0-based positions in `triangles`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh<T> {
    /// The corners, shared between triangles.
    pub vertices: Points<T>,
    /// Each triangle's three vertex indices (0-based).
    pub triangles: Vec<[u32; 3]>,
}

impl<T: Real> Mesh<T> {
    /// Checks there is at least one triangle, every index names a vertex, and every vertex is
    /// finite (returning the vertices' magnitudes). Degenerate (zero-area, repeated-index)
    /// triangles are allowed.
    pub fn validate(&self) -> Result<crate::geometry::magnitude::Magnitudes> {
        if self.triangles.is_empty() {
            return Err(Error::InvalidArgument("the mesh has no triangles".into()));
        }
        let n = self.vertices.len();
        let out_of_range = |tri: &[u32; 3]| tri.iter().any(|&v| v as usize >= n);
        if let Some(t) = crate::runtime::cpu::first_where(&self.triangles, out_of_range) {
            let v = self.triangles[t].iter().find(|&&v| v as usize >= n).copied().unwrap_or_default();
            return Err(Error::InvalidArgument(format!(
                "triangle {t} uses vertex {v}, but the mesh has {n} vertices (indices are 0-based)"
            )));
        }
        self.vertices.validate(crate::Role::Vertices)
    }

    /// The three corners of triangle `t`.
    #[inline]
    pub fn corners(&self, t: usize) -> [[T; 3]; 3] {
        self.triangles[t].map(|v| self.vertices.get(v as usize))
    }

    /// The mesh cut by a plane across its longest axis: the `keep` vertices with the smallest
    /// coordinate along that axis, and the triangles whose three corners all remain. Benchmarks
    /// use it to bring a real mesh to a given size while keeping its surface character.
    pub fn cut_to(&self, keep: usize) -> Self {
        let (lo, hi) = self.vertices.bounds();
        let axis = (0..3).max_by(|&a, &b| (hi[a] - lo[a]).partial_cmp(&(hi[b] - lo[b])).unwrap()).unwrap_or(0);
        let col = [&self.vertices.x, &self.vertices.y, &self.vertices.z][axis];
        let mut order: Vec<u32> = (0..self.vertices.len() as u32).collect();
        order.sort_by(|&a, &b| col[a as usize].partial_cmp(&col[b as usize]).unwrap().then(a.cmp(&b)));
        order.truncate(keep);
        order.sort_unstable();
        let mut new_id = vec![u32::MAX; self.vertices.len()];
        let mut vertices = Points::with_capacity(order.len());
        for (j, &i) in order.iter().enumerate() {
            new_id[i as usize] = j as u32;
            let p = self.vertices.get(i as usize);
            vertices.push(p[0], p[1], p[2]);
        }
        let triangles = self
            .triangles
            .iter()
            .filter_map(|t| {
                let m = t.map(|v| new_id[v as usize]);
                m.iter().all(|&v| v != u32::MAX).then_some(m)
            })
            .collect();
        Self { vertices, triangles }
    }
}

impl<T: Real> Mesh<T> {
    /// A closed UV sphere of `rings` × `segments` quads (two triangles each, fans at the poles)
    /// centred at `centre`: a built-in mesh for examples and benchmarks.
    pub fn uv_sphere(rings: u32, segments: u32, radius: f64, centre: [f64; 3]) -> Self {
        let (rings, segments) = (rings.max(2), segments.max(3));
        let mut vertices = Points::with_capacity(((rings - 1) * segments + 2) as usize);
        let at = |theta: f64, phi: f64| {
            [
                T::from_f64(centre[0] + radius * theta.sin() * phi.cos()),
                T::from_f64(centre[1] + radius * theta.sin() * phi.sin()),
                T::from_f64(centre[2] + radius * theta.cos()),
            ]
        };
        let p = at(0.0, 0.0);
        vertices.push(p[0], p[1], p[2]);
        for r in 1..rings {
            for s in 0..segments {
                let p = at(
                    std::f64::consts::PI * r as f64 / rings as f64,
                    std::f64::consts::TAU * s as f64 / segments as f64,
                );
                vertices.push(p[0], p[1], p[2]);
            }
        }
        let p = at(std::f64::consts::PI, 0.0);
        vertices.push(p[0], p[1], p[2]);
        let south = vertices.len() as u32 - 1;
        let v = |r: u32, s: u32| 1 + (r - 1) * segments + s % segments;
        let mut triangles = Vec::new();
        for s in 0..segments {
            triangles.push([0, v(1, s), v(1, s + 1)]);
            triangles.push([south, v(rings - 1, s + 1), v(rings - 1, s)]);
        }
        for r in 1..rings - 1 {
            for s in 0..segments {
                triangles.push([v(r, s), v(r + 1, s), v(r + 1, s + 1)]);
                triangles.push([v(r, s), v(r + 1, s + 1), v(r, s + 1)]);
            }
        }
        Self { vertices, triangles }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mesh_index_past_its_vertices_is_named() {
        let vertices = Points::<f32>::from_rows(&[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]);
        for (n, bad) in [(5, 3), (200_000, 70_000), (200_000, 199_999)] {
            let mut triangles = vec![[0u32, 1, 2]; n];
            triangles[bad] = [0, 3, 1];
            triangles[n - 1][2] = if bad == n - 1 { 3 } else { 9 };
            let err = Mesh { vertices: vertices.clone(), triangles }.validate().expect_err("a bad index").to_string();
            assert!(err.contains(&format!("triangle {bad} uses vertex 3")), "{err}");
        }
    }
}
