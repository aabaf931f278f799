//! Overlap queries: which triangles (of the mesh and the heightfield) and which bodies a
//! sphere, ellipsoid or box overlaps, for spawn checks, area effects, "what is under this
//! player". An ellipsoid's tests are the contacts' own (`contact_ellipsoid_triangle`,
//! `contact_ellipsoid_ellipsoid`: touching is not overlapping), so a query shaped like a body
//! overlaps what that body has contacts with; a box's are in `overlap_cuboid`. Both colliders
//! answer them (the CPU here, CUDA in `collide.cu`), the same.

use rayon::prelude::*;

use super::body_grid::BodyFinder;
use super::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use super::contact_ellipsoid_triangle::contact_ellipsoid_triangle;
use super::ellipsoid::{body_box, sub, Shape, BOX_SLACK, V3};
use super::hash_grid::query_cells;
use super::overlap_cuboid::{cuboid_meets_ellipsoid, cuboid_meets_triangle};
use super::world::{check_pose, ContactKind, World, ID_BITS, NO_ID};
use crate::error::{Error, Result};

/// At most this many hits are kept per query (`Overlaps::total` counts them all).
pub const OVERLAP_LIMIT_MAX: usize = 64;

/// The shape of an overlap query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OverlapShape {
    /// An ellipsoid of semi-axes `radii` (a sphere when they are equal).
    Ellipsoid,
    /// A box of half extents `radii` along its own axes.
    Cuboid,
}

/// An ellipsoid, sphere or box to test for overlaps. It overlaps the mesh and the heightfield
/// when `mask` meets the world's mesh layer, and a body when `mask` meets the body's layer.
///
/// ```
/// use nearkit::collide::{Overlap, OverlapShape};
/// let q = Overlap::cuboid([0.0, 0.0, 1.0], [2.0, 1.0, 0.5], [0.0, 0.0, 0.0, 1.0]).with_mask(0b10);
/// assert_eq!((q.shape, q.mask), (OverlapShape::Cuboid, 0b10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    /// Its center.
    pub center: V3,
    /// Semi-axes (or a box's half extents) along its own x, y and z.
    pub radii: V3,
    /// Quaternion (x, y, z, w).
    pub orientation: [f64; 4],
    /// The layers it looks for.
    pub mask: u32,
    /// An ellipsoid or a box.
    pub shape: OverlapShape,
}

impl Overlap {
    /// A sphere of `radius` at `center`, looking for every layer.
    pub fn sphere(center: V3, radius: f64) -> Self {
        Self::ellipsoid(center, [radius; 3], [0.0, 0.0, 0.0, 1.0])
    }

    /// An ellipsoid, looking for every layer.
    pub fn ellipsoid(center: V3, radii: V3, orientation: [f64; 4]) -> Self {
        Overlap { center, radii, orientation, mask: u32::MAX, shape: OverlapShape::Ellipsoid }
    }

    /// A box of `half_extents` along its own axes, turned by `orientation`, looking for every
    /// layer.
    pub fn cuboid(center: V3, half_extents: V3, orientation: [f64; 4]) -> Self {
        Overlap { center, radii: half_extents, orientation, mask: u32::MAX, shape: OverlapShape::Cuboid }
    }

    /// The box the query's shape fits in (widened by `BOX_SLACK`, as bodies' boxes are).
    pub(crate) fn bounds(&self, shape: &Shape) -> (V3, V3) {
        match self.shape {
            OverlapShape::Ellipsoid => body_box(shape, self.center),
            OverlapShape::Cuboid => {
                let (r, h) = (&shape.rot, shape.radii);
                let e: V3 = std::array::from_fn(|i| {
                    (r[i][0].abs() * h[0] + r[i][1].abs() * h[1] + r[i][2].abs() * h[2]) * BOX_SLACK
                });
                let c = self.center;
                ([c[0] - e[0], c[1] - e[1], c[2] - e[2]], [c[0] + e[0], c[1] + e[1], c[2] + e[2]])
            }
        }
    }

    /// Whether the query meets the triangle whose corners are offsets from its center.
    pub(crate) fn meets_triangle(&self, shape: &Shape, corners: [V3; 3]) -> bool {
        match self.shape {
            OverlapShape::Ellipsoid => contact_ellipsoid_triangle(shape, corners).is_some(),
            OverlapShape::Cuboid => cuboid_meets_triangle(shape, corners),
        }
    }

    /// Whether the query meets ellipsoid `body`, whose center is at offset `r` from its own.
    pub(crate) fn meets_ellipsoid(&self, shape: &Shape, body: &Shape, r: V3) -> bool {
        match self.shape {
            OverlapShape::Ellipsoid => contact_ellipsoid_ellipsoid(shape, body, r).is_some(),
            OverlapShape::Cuboid => cuboid_meets_ellipsoid(shape, body, r),
        }
    }

    /// The same query looking for the layers of `mask` only.
    pub fn with_mask(self, mask: u32) -> Self {
        Overlap { mask, ..self }
    }

    pub(crate) fn check(&self) -> Result<()> {
        check_pose(self.center, self.orientation)?;
        if !self.radii.iter().all(|r| r.is_finite() && *r > 0.0) {
            return Err(Error::InvalidArgument(format!("overlap radii {:?} must be positive numbers", self.radii)));
        }
        Ok(())
    }
}

/// Each query's overlaps, sorted by (kind, id): mesh triangles, heightfield triangles, then
/// bodies; the first `limit` of them (row i: `kinds[offsets[i]..offsets[i + 1]]` and the
/// same of `ids`), and how many there were in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overlaps {
    /// Row i is `offsets[i]..offsets[i + 1]` of `kinds`, `ids` and `triangles`.
    pub offsets: Vec<usize>,
    /// What each hit is.
    pub kinds: Vec<ContactKind>,
    /// Each hit's triangle, body or instance id.
    pub ids: Vec<u32>,
    /// Each hit's triangle in its own mesh (as [`Contact::triangle`](crate::collide::Contact):
    /// the id for the mesh and the heightfield, the shape's triangle for an instance,
    /// [`NO_ID`](crate::NO_ID) for a body).
    pub triangles: Vec<u32>,
    /// Per query, its overlaps in all (more than its row holds when it hit the limit).
    pub total: Vec<u32>,
}

impl Overlaps {
    /// Queries answered.
    pub fn len(&self) -> usize {
        self.total.len()
    }

    /// Whether there were no queries.
    pub fn is_empty(&self) -> bool {
        self.total.is_empty()
    }

    /// Query i's overlaps kept, as (kind, id).
    pub fn row(&self, i: usize) -> impl Iterator<Item = (ContactKind, u32)> + '_ {
        let r = self.offsets[i]..self.offsets[i + 1];
        self.kinds[r.clone()].iter().copied().zip(self.ids[r].iter().copied())
    }

    /// Query i's overlaps kept, as (kind, id, triangle).
    pub fn row_triangles(&self, i: usize) -> impl Iterator<Item = (ContactKind, u32, u32)> + '_ {
        let r = self.offsets[i]..self.offsets[i + 1];
        self.row(i).zip(self.triangles[r].iter().copied()).map(|((k, id), t)| (k, id, t))
    }

    /// From each query's keys (`overlap_key`: tagged id, triangle; ascending, at most
    /// `limit`) and totals.
    pub(crate) fn from_keys(rows: Vec<(Vec<u64>, u32)>) -> Self {
        let mut out = Overlaps { offsets: Vec::with_capacity(rows.len() + 1), ..Overlaps::default() };
        out.offsets.push(0);
        for (keys, total) in rows {
            for &k in &keys {
                let tagged = (k >> 32) as u32;
                let kind = ContactKind::of_tagged(tagged);
                out.kinds.push(kind);
                out.ids.push(tagged & ID_BITS);
                out.triangles.push(match kind {
                    ContactKind::Body => NO_ID,
                    ContactKind::Instance => k as u32,
                    _ => tagged & ID_BITS,
                });
            }
            out.offsets.push(out.ids.len());
            out.total.push(total);
        }
        out
    }

    /// From each query's tagged ids (ascending, at most `limit`, no instances) and totals.
    pub(crate) fn from_tagged(rows: Vec<(Vec<u32>, u32)>) -> Self {
        Self::from_keys(
            rows.into_iter().map(|(t, total)| (t.into_iter().map(|t| overlap_key(t, 0)).collect(), total)).collect(),
        )
    }

    /// These overlaps with `placed`'s (instances only) after each row, cut at `limit`.
    pub(crate) fn merged(&self, placed: &Overlaps, limit: usize) -> Overlaps {
        let mut out = Overlaps { offsets: vec![0], ..Overlaps::default() };
        for i in 0..self.len() {
            for o in [self, placed] {
                let r = o.offsets[i]..o.offsets[i + 1];
                let room = limit - (out.ids.len() - out.offsets[i]);
                let r = r.start..r.end.min(r.start + room);
                out.kinds.extend_from_slice(&o.kinds[r.clone()]);
                out.ids.extend_from_slice(&o.ids[r.clone()]);
                out.triangles.extend_from_slice(&o.triangles[r]);
            }
            out.offsets.push(out.ids.len());
            out.total.push(self.total[i] + placed.total[i]);
        }
        out
    }
}

/// Checks the queries (their boxes within the grid of cells of `cell_size`:
/// `hash_grid::query_cells`) and the limit (1 to `OVERLAP_LIMIT_MAX`).
pub(crate) fn check_queries(queries: &[Overlap], limit: usize, cell_size: f64) -> Result<()> {
    if !(1..=OVERLAP_LIMIT_MAX).contains(&limit) {
        return Err(Error::InvalidArgument(format!("the overlap limit must be 1 to {OVERLAP_LIMIT_MAX}, got {limit}")));
    }
    for (i, q) in queries.iter().enumerate() {
        q.check()
            .and_then(|()| {
                let (lo, hi) = q.bounds(&Shape::new(q.radii, q.orientation));
                query_cells(lo, hi, cell_size).map(|_| ())
            })
            .map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("overlap query {i}: {m}")),
                e => e,
            })?;
    }
    Ok(())
}

/// An overlap's sort key: its tagged id, then its triangle (an instance's).
#[inline(always)]
fn overlap_key(tagged: u32, triangle: u32) -> u64 {
    (tagged as u64) << 32 | triangle as u64
}

/// Every query's overlaps on the CPU.
pub(crate) fn overlaps_cpu(world: &World, queries: &[Overlap], limit: usize) -> Result<Overlaps> {
    let cell_size = world.cell_size();
    check_queries(queries, limit, cell_size)?;
    let b = world.bodies();
    let bodies = BodyFinder::new(world, queries.len(), cell_size)?;
    let (mesh, terrain, mesh_layer) = (world.mesh(), world.heightfield(), world.mesh_layer());
    let instances = world.instances();
    let rows = queries
        .par_iter()
        .with_min_len(64)
        .enumerate()
        .map(|(qi, q)| -> Result<(Vec<u64>, u32)> {
            let shape = Shape::new(q.radii, q.orientation);
            let (lo, hi) = q.bounds(&shape);
            let mut found: Vec<u64> = Vec::new();
            let name = |e: Error| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("overlap query {qi}: {m}")),
                e => e,
            };
            if q.mask & mesh_layer != 0 {
                if let Some(m) = mesh {
                    m.grid.overlapping(&lo, &hi, &m.lo, &m.hi, |t| {
                        if q.meets_triangle(&shape, m.corners[t as usize].map(|p| sub(p, q.center))) {
                            found.push(overlap_key(t, 0));
                        }
                    })?;
                }
                if let Some(h) = terrain {
                    h.overlapping(&lo, &hi, |t, corners| {
                        if q.meets_triangle(&shape, corners.map(|p| sub(p, q.center))) {
                            found.push(overlap_key(ContactKind::Heightfield.tag() | t, 0));
                        }
                    });
                }
            }
            bodies
                .overlapping(&lo, &hi, |o| {
                    if q.mask & b.layer[o] != 0 && q.meets_ellipsoid(&shape, &b.shape(o), sub(b.center[o], q.center)) {
                        found.push(overlap_key(ContactKind::Body.tag() | o as u32, 0));
                    }
                })
                .map_err(name)?;
            instances
                .overlapping(&lo, &hi, q.mask, |inst, t, corners| {
                    if q.meets_triangle(&shape, corners.map(|p| sub(p, q.center))) {
                        found.push(overlap_key(ContactKind::Instance.tag() | inst, t));
                    }
                })
                .map_err(name)?;
            found.sort_unstable();
            let total = found.len() as u32;
            found.truncate(limit);
            Ok((found, total))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Overlaps::from_keys(rows))
}
