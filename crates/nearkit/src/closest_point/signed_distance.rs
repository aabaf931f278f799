//! Signs for closest-point distances on a closed mesh, by angle-weighted pseudo-normals
//! (Bærentzen and Aanæs, 2005): the closest point's feature — face, edge or corner, read from
//! its barycentric coordinates — has a normal whose side of the query gives inside or outside.
//! Computed in f64 on the host from a `ClosestPoints` result, so both backends sign alike.

use std::collections::HashMap;

use crate::closest_point::ClosestPoints;
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;
use crate::geometry::points::NO_ID;
use crate::geometry::real::Real;

use crate::geometry::vec3::{cross, dot, normalize, sub, V3 as V};

/// `a / |a|`, or zero for a zero vector.
fn unit(a: V) -> V {
    normalize(a).unwrap_or([0.0; 3])
}
fn add_scaled(acc: &mut V, a: V, s: f64) {
    for k in 0..3 {
        acc[k] += a[k] * s;
    }
}

/// The pseudo-normals of a closed, consistently oriented mesh, oriented outwards.
pub struct PseudoNormals {
    face: Vec<V>,
    corner: Vec<V>,
    edge: HashMap<(u32, u32), V>,
}

impl PseudoNormals {
    /// Checks the mesh is closed (every edge shared by exactly two triangles, in opposite
    /// directions) and computes its normals; an error names the first offending edge.
    pub fn new<T: Real>(mesh: &Mesh<T>) -> Result<Self> {
        mesh.validate()?;
        let corner_of = |v: u32| mesh.vertices.get(v as usize).map(|x| x.to_f64());
        let mut directed: HashMap<(u32, u32), u32> = HashMap::new();
        for tri in &mesh.triangles {
            for k in 0..3 {
                let (a, b) = (tri[k], tri[(k + 1) % 3]);
                if a != b {
                    *directed.entry((a, b)).or_default() += 1;
                }
            }
        }
        let mut bad: Vec<(u32, u32, u32, u32)> = directed
            .iter()
            .filter(|(&(a, b), &n)| n != 1 || directed.get(&(b, a)).copied() != Some(1))
            .map(|(&(a, b), &n)| (a.min(b), a.max(b), n, directed.get(&(b, a)).copied().unwrap_or(0)))
            .collect();
        bad.sort_unstable();
        if let Some(&(a, b, n, m)) = bad.first() {
            return Err(Error::InvalidArgument(format!(
                "the mesh is not closed: edge ({a}, {b}) belongs to {} triangle(s), {n} one way round and {m} the \
                 other (a closed, consistently oriented mesh has 2, one each way); signed distances need one",
                n + m
            )));
        }
        let mut face = Vec::with_capacity(mesh.triangles.len());
        let mut corner = vec![[0.0; 3]; mesh.vertices.len()];
        let mut edge: HashMap<(u32, u32), V> = HashMap::new();
        let mut volume = 0.0;
        for tri in &mesh.triangles {
            let [a, b, c] = tri.map(corner_of);
            let n = unit(cross(sub(b, a), sub(c, a)));
            volume += dot(a, cross(b, c));
            face.push(n);
            for k in 0..3 {
                let (p, q, r) = (tri[k], tri[(k + 1) % 3], tri[(k + 2) % 3]);
                let (e1, e2) = (unit(sub(corner_of(q), corner_of(p))), unit(sub(corner_of(r), corner_of(p))));
                let angle = dot(e1, e2).clamp(-1.0, 1.0).acos();
                add_scaled(&mut corner[p as usize], n, angle);
                add_scaled(edge.entry((p.min(q), p.max(q))).or_insert([0.0; 3]), n, 1.0);
            }
        }
        // Inward-facing triangles (negative volume): flip everything.
        if volume < 0.0 {
            let flip = |v: &mut V| *v = [-v[0], -v[1], -v[2]];
            face.iter_mut().for_each(flip);
            corner.iter_mut().for_each(flip);
            edge.values_mut().for_each(flip);
        }
        Ok(Self { face, corner, edge })
    }

    /// The outward pseudo-normal at a point of triangle `t` with barycentrics (u, v, w).
    fn at<T: Real>(&self, mesh: &Mesh<T>, t: usize, bary: [T; 3]) -> V {
        let tri = mesh.triangles[t];
        let zero: Vec<usize> = (0..3).filter(|&k| bary[k] == T::ZERO).collect();
        match zero.len() {
            0 => self.face[t],
            1 => {
                // The edge opposite the zero coordinate.
                let (p, q) = (tri[(zero[0] + 1) % 3], tri[(zero[0] + 2) % 3]);
                self.edge.get(&(p.min(q), p.max(q))).copied().unwrap_or(self.face[t])
            }
            _ => {
                let k = (0..3).find(|k| !zero.contains(k)).unwrap_or(0);
                self.corner[tri[k] as usize]
            }
        }
    }
}

impl PseudoNormals {
    /// The signed distances of a closest-point result on `mesh` (the mesh these normals were
    /// made from): negative inside. Queries with no triangle keep an infinite distance.
    pub fn sign<T: Real>(&self, mesh: &Mesh<T>, queries: &Points<T>, result: &ClosestPoints<T>) -> Vec<T> {
        (0..result.triangle.len())
            .map(|i| {
                let t = result.triangle[i];
                if t == NO_ID {
                    return result.distance[i];
                }
                let bary = [result.bary[0][i], result.bary[1][i], result.bary[2][i]];
                let n = self.at(mesh, t as usize, bary);
                let p = [result.point.x[i], result.point.y[i], result.point.z[i]].map(|x| x.to_f64());
                let q = queries.get(i).map(|x| x.to_f64());
                if dot(sub(q, p), n) < 0.0 {
                    -result.distance[i]
                } else {
                    result.distance[i]
                }
            })
            .collect()
    }
}
