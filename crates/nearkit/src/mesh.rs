//! Triangle meshes: shared vertices (structure of arrays) and triangles as vertex indices.

use crate::error::{Error, Result};
use crate::points::Points;
use crate::real::Real;

/// A triangle mesh. Triangle ids are 0-based positions in `triangles`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh<T> {
    pub vertices: Points<T>,
    pub triangles: Vec<[u32; 3]>,
}

impl<T: Real> Mesh<T> {
    /// Checks there is at least one triangle, every index names a vertex, and every vertex is
    /// finite. Degenerate (zero-area, repeated-index) triangles are allowed.
    pub fn validate(&self) -> Result<()> {
        if self.triangles.is_empty() {
            return Err(Error::InvalidArgument("the mesh has no triangles".into()));
        }
        let n = self.vertices.len();
        for (t, tri) in self.triangles.iter().enumerate() {
            if let Some(&v) = tri.iter().find(|&&v| v as usize >= n) {
                return Err(Error::InvalidArgument(format!(
                    "triangle {t} uses vertex {v}, but the mesh has {n} vertices (indices are 0-based)"
                )));
            }
        }
        self.vertices.validate(crate::Role::Data)
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

/// The point of triangle (a, b, c) closest to `p`, in f64, by Voronoi-region classification
/// (Ericson, Real-Time Collision Detection, 5.1.5). Degenerate triangles give a point on them.
pub fn closest_point_on_triangle(p: [f64; 3], a: [f64; 3], b: [f64; 3], c: [f64; 3]) -> [f64; 3] {
    let sub = |u: [f64; 3], v: [f64; 3]| [u[0] - v[0], u[1] - v[1], u[2] - v[2]];
    let dot = |u: [f64; 3], v: [f64; 3]| u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
    let at = |o: [f64; 3], u: [f64; 3], s: f64| [o[0] + u[0] * s, o[1] + u[1] * s, o[2] + u[2] * s];
    let (ab, ac, ap) = (sub(b, a), sub(c, a), sub(p, a));
    let (d1, d2) = (dot(ab, ap), dot(ac, ap));
    if d1 <= 0.0 && d2 <= 0.0 {
        return a;
    }
    let bp = sub(p, b);
    let (d3, d4) = (dot(ab, bp), dot(ac, bp));
    if d3 >= 0.0 && d4 <= d3 {
        return b;
    }
    let vc = d1 * d4 - d3 * d2;
    // (Each division below needs a non-zero edge: a repeated corner falls through to the
    // degenerate case.)
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 && d1 - d3 > 0.0 {
        return at(a, ab, d1 / (d1 - d3));
    }
    let cp = sub(p, c);
    let (d5, d6) = (dot(ab, cp), dot(ac, cp));
    if d6 >= 0.0 && d5 <= d6 {
        return c;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 && d2 - d6 > 0.0 {
        return at(a, ac, d2 / (d2 - d6));
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 && (d4 - d3) + (d5 - d6) > 0.0 {
        return at(b, sub(c, b), (d4 - d3) / ((d4 - d3) + (d5 - d6)));
    }
    let denom = va + vb + vc;
    if denom == 0.0 || !denom.is_finite() {
        // Degenerate (collinear corners): the closest of the three edges.
        let seg = |s: [f64; 3], e: [f64; 3]| {
            let d = sub(e, s);
            let l = dot(d, d);
            let t = if l > 0.0 { (dot(sub(p, s), d) / l).clamp(0.0, 1.0) } else { 0.0 };
            at(s, d, t)
        };
        let dist = |q: [f64; 3]| dot(sub(p, q), sub(p, q));
        let cands = [seg(a, b), seg(b, c), seg(c, a)];
        return cands.into_iter().min_by(|x, y| dist(*x).total_cmp(&dist(*y))).unwrap();
    }
    let (v, w) = (vb / denom, vc / denom);
    [a[0] + ab[0] * v + ac[0] * w, a[1] + ab[1] * v + ac[1] * w, a[2] + ab[2] * v + ac[2] * w]
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
