//! Scenes for `nearkit collide` and the tests: terrains, bodies near the surface, and a
//! deterministic random walk (the same on every backend and thread count).

use rayon::prelude::*;

use super::ellipsoid::{add, cross, normalize, sub, V3};
use super::heightfield::Heightfield;
use super::world::{Body, BodyId, World};
use crate::error::Result;
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;

/// A terrain from a row-major grid of heights (`rows` × `cols`, `spacing` apart): two
/// triangles per grid square, counter-clockwise seen from above.
pub fn heightfield(heights: &[f64], rows: usize, cols: usize, spacing: f64) -> Mesh<f64> {
    assert_eq!(heights.len(), rows * cols, "heights must be rows × cols");
    let mut vertices = Points::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            vertices.push(c as f64 * spacing, r as f64 * spacing, heights[r * cols + c]);
        }
    }
    let mut triangles = Vec::with_capacity(2 * rows.saturating_sub(1) * cols.saturating_sub(1));
    for r in 0..rows.saturating_sub(1) {
        for c in 0..cols.saturating_sub(1) {
            let v = (r * cols + c) as u32;
            let (right, up) = (v + 1, v + cols as u32);
            triangles.push([v, right, up + 1]);
            triangles.push([v, up + 1, up]);
        }
    }
    Mesh { vertices, triangles }
}

/// Height of a cratered landscape at (x, y): bowls of radius 30 m with raised rims on a
/// 120 m lattice, over gentle waves.
fn crater_height(x: f64, y: f64) -> f64 {
    let (cx, cy) = ((x / 120.0).floor() * 120.0 + 60.0, (y / 120.0).floor() * 120.0 + 60.0);
    let r = ((x - cx).powi(2) + (y - cy).powi(2)).sqrt() / 30.0;
    let bowl = if r < 1.0 { -8.0 * (1.0 - r * r) } else { 0.0 };
    let rim = 3.0 * (-((r - 1.0) * 6.0).powi(2)).exp();
    bowl + rim + 0.3 * (x / 3.0).sin() * (y / 4.0).cos()
}

/// A cratered terrain of `quads_x` × `quads_y` squares of 1 m (2 triangles each).
pub fn crater_terrain(quads_x: usize, quads_y: usize) -> Mesh<f64> {
    let (rows, cols) = (quads_y + 1, quads_x + 1);
    let heights: Vec<f64> =
        (0..rows * cols).map(|i| crater_height((i % cols) as f64 - 0.0, (i / cols) as f64)).collect();
    heightfield(&heights, rows, cols, 1.0)
}

/// Height of a generated relief at (x, y) metres: six octaves of waves, from 250 m over
/// 1.5 km down to 8 m over 47 m, so slopes reach about 45° as in hilly country.
fn relief_height(x: f64, y: f64) -> f64 {
    (0..6)
        .map(|k| {
            let s = (1u32 << k) as f64;
            let k = k as f64;
            250.0 / s * (x * s / 1500.0 + k).sin() * (y * s / 1300.0 + 2.0 * k).cos()
        })
        .sum()
}

/// A generated digital elevation model with the jacksboro DEM's size: 344 × 403 samples
/// 30 m apart (10.3 × 12.1 km, 276,000 triangles), heights from `relief_height`.
pub fn dem_heightfield() -> Heightfield {
    relief_heightfield(403, 344, 30.0).expect("a valid heightfield")
}

/// A generated relief (`relief_height`) of `rows` × `cols` samples, `spacing` apart.
pub fn relief_heightfield(rows: usize, cols: usize, spacing: f64) -> Result<Heightfield> {
    let heights: Vec<f64> = (0..rows * cols)
        .into_par_iter()
        .map(|i| relief_height((i % cols) as f64 * spacing, (i / cols) as f64 * spacing))
        .collect();
    Heightfield::new(heights, rows, cols, spacing, [0.0, 0.0])
}

/// `dem_heightfield` as a triangle mesh.
pub fn dem_terrain() -> Mesh<f64> {
    dem_heightfield().to_mesh()
}

/// A uniform number in [0, 1) from (seed, a, b, c): splitmix64, so any body can draw its
/// own numbers in parallel and get the same ones everywhere.
fn unit(seed: u64, a: u64, b: u64, c: u64) -> f64 {
    let mut z = seed
        .wrapping_add(a.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(b.wrapping_mul(0xd1b5_4a32_d192_ed03))
        .wrapping_add(c.wrapping_mul(0x8cb9_2ba7_2f3d_8dd3));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// `count` bodies near random points of the `tris` triangles that `corners` gives, and their
/// anchors (`Scene::on_surface`).
fn bodies_on(
    tris: usize,
    corners: impl Fn(usize) -> [V3; 3] + Sync,
    count: usize,
    radii: (f64, f64),
    seed: u64,
) -> (Vec<Body>, Vec<V3>) {
    let tris = tris as u64;
    (0..count as u64)
        .into_par_iter()
        .map(|i| {
            let u = |k: u64| unit(seed, 0, i, k);
            let t = ((u(0) * tris as f64) as u64).min(tris - 1) as usize;
            let [a, b, c] = corners(t);
            let (mut s, mut w) = (u(1), u(2));
            if s + w > 1.0 {
                (s, w) = (1.0 - s, 1.0 - w);
            }
            let p = [
                a[0] + (b[0] - a[0]) * s + (c[0] - a[0]) * w,
                a[1] + (b[1] - a[1]) * s + (c[1] - a[1]) * w,
                a[2] + (b[2] - a[2]) * s + (c[2] - a[2]) * w,
            ];
            let n = normalize(cross(sub(b, a), sub(c, a))).unwrap_or([0.0, 0.0, 1.0]);
            let r = [0, 1, 2].map(|k| radii.0 + (radii.1 - radii.0) * u(3 + k));
            let off = (u(6) * 1.3 - 0.3) * r[0].max(r[1]).max(r[2]);
            let center = add(p, [n[0] * off, n[1] * off, n[2] * off]);
            let q = [u(7) - 0.5, u(8) - 0.5, u(9) - 0.5, u(10) - 0.5];
            (Body::ellipsoid(center, r, q), center)
        })
        .unzip()
}

/// A mesh, bodies near its surface, and how they wander.
pub struct Scene {
    /// Its name (for reports).
    pub name: String,
    /// The static mesh (it may be empty).
    pub mesh: Mesh<f64>,
    /// The terrain, kept as heights.
    pub heightfield: Option<Heightfield>,
    /// The bodies at the start.
    pub bodies: Vec<Body>,
    /// Where each body is drawn back to.
    anchors: Vec<V3>,
    /// Largest random step per tick along each axis (m).
    step: f64,
    seed: u64,
}

impl Scene {
    /// `count` ellipsoids with radii in `radii`, random orientations, centred near random
    /// points of the mesh's surface (from `below` to `above` radii off it, along its normal).
    pub fn on_surface(name: &str, mesh: Mesh<f64>, count: usize, radii: (f64, f64), seed: u64) -> Self {
        let (bodies, anchors) = bodies_on(mesh.triangles.len(), |t| mesh.corners(t), count, radii, seed);
        Scene { name: name.into(), mesh, heightfield: None, bodies, anchors, step: 0.05, seed }
    }

    /// As `on_surface`, on a heightfield (kept as heights: the world gets no mesh).
    pub fn on_heightfield(name: &str, terrain: Heightfield, count: usize, radii: (f64, f64), seed: u64) -> Self {
        let (bodies, anchors) = bodies_on(terrain.triangle_count(), |t| terrain.triangle(t as u32), count, radii, seed);
        let mesh = Mesh { vertices: Points::with_capacity(0), triangles: Vec::new() };
        Scene { name: name.into(), mesh, heightfield: Some(terrain), bodies, anchors, step: 0.05, seed }
    }

    /// The crater scene: a crater-like terrain of 19,440 triangles (108 × 90 m) and `count`
    /// ellipsoids (the seed had about 4,000) with radii of 0.2–0.8 m.
    pub fn crater(count: usize, seed: u64) -> Self {
        Scene::on_surface("crater", crater_terrain(108, 90), count, (0.2, 0.8), seed)
    }

    /// `count` ellipsoids (radii 0.2–0.8 m) on a generated DEM of 30 m triangles
    /// (`dem_heightfield`, kept as heights), so triangles are 30 times the default cell.
    pub fn dem(count: usize, seed: u64) -> Self {
        Scene::on_heightfield("dem", dem_heightfield(), count, (0.2, 0.8), seed)
    }

    /// `count` small bodies (radii 0.1–0.4 m) on a terrain of about a million triangles
    /// (708 × 707 m).
    pub fn stress(count: usize, seed: u64) -> Self {
        Scene::on_surface("stress", crater_terrain(708, 707), count, (0.1, 0.4), seed)
    }

    /// A real mesh scaled so that its longest side is `size` metres, with bodies on it.
    pub fn on_mesh(name: &str, mesh: &Mesh<f64>, size: f64, count: usize, seed: u64) -> Self {
        let (lo, hi) = mesh.vertices.bounds();
        let side = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
        let s = if side > 0.0 { size / side } else { 1.0 };
        let mut scaled = mesh.clone();
        for (col, l) in [&mut scaled.vertices.x, &mut scaled.vertices.y, &mut scaled.vertices.z].into_iter().zip(lo) {
            col.iter_mut().for_each(|v| *v = (*v - l) * s);
        }
        Scene::on_surface(name, scaled, count, (0.2, 0.8), seed)
    }

    /// A world with this scene's mesh and bodies (ids 0, 1, … in order).
    pub fn world(&self, cell_size: f64) -> Result<World> {
        let mut world = World::new(cell_size)?;
        if !self.mesh.triangles.is_empty() {
            world.set_mesh(&self.mesh)?;
        }
        if let Some(h) = &self.heightfield {
            world.set_heightfield(h.clone())?;
        }
        for b in &self.bodies {
            world.add_body(*b)?;
        }
        Ok(world)
    }

    /// Moves every body one random step (drawn back towards its anchor) and turns it a
    /// little: the same numbers for tick `tick` wherever it runs.
    pub fn advance(&self, world: &mut World, tick: u64) {
        let (centers, orientations) = world.poses_mut();
        let (seed, step) = (self.seed, self.step);
        centers.par_iter_mut().zip(orientations.par_iter_mut()).enumerate().for_each(|(i, (c, q))| {
            let u = |k: u64| unit(seed, tick + 1, i as u64, k) - 0.5;
            let a = self.anchors[i];
            for ax in 0..3 {
                c[ax] += 2.0 * step * u(ax as u64) - 0.02 * (c[ax] - a[ax]);
            }
            for k in 0..4 {
                q[k] += 0.05 * u(3 + k as u64);
            }
            let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
            q.iter_mut().for_each(|v| *v /= n);
        });
    }

    /// The ids the bodies got in `world`.
    pub fn ids(&self) -> Vec<BodyId> {
        (0..self.bodies.len() as u32).map(BodyId).collect()
    }
}
