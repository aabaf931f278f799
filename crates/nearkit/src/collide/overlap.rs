//! Overlap queries: which triangles (of the mesh and the heightfield) and which bodies a
//! sphere or ellipsoid overlaps, for spawn checks, area effects, "what is under this player".
//! The tests are the contacts' own (`contact_ellipsoid_triangle`, `contact_ellipsoid_ellipsoid`:
//! touching is not overlapping), so a query shaped like a body overlaps what that body has
//! contacts with. Both colliders answer them (the CPU here, CUDA in `collide.cu`), the same.

use rayon::prelude::*;

use super::body_grid::BodyGrid;
use super::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use super::contact_ellipsoid_triangle::contact_ellipsoid_triangle;
use super::ellipsoid::{body_box, sub, Shape, V3};
use super::hash_grid::query_cells;
use super::world::{check_pose, ContactKind, World, ID_BITS};
use crate::error::{Error, Result};

/// At most this many hits are kept per query (`Overlaps::total` counts them all).
pub const OVERLAP_LIMIT_MAX: usize = 64;

/// An ellipsoid (or, with equal radii, a sphere) to test for overlaps. It overlaps the mesh
/// and the heightfield when `mask` meets the world's mesh layer, and a body when `mask` meets
/// the body's layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    /// Its center.
    pub center: V3,
    /// Semi-axes along its own x, y and z.
    pub radii: V3,
    /// Quaternion (x, y, z, w).
    pub orientation: [f64; 4],
    /// The layers it looks for.
    pub mask: u32,
}

impl Overlap {
    /// A sphere of `radius` at `center`, looking for every layer.
    pub fn sphere(center: V3, radius: f64) -> Self {
        Overlap { center, radii: [radius; 3], orientation: [0.0, 0.0, 0.0, 1.0], mask: u32::MAX }
    }

    /// An ellipsoid, looking for every layer.
    pub fn ellipsoid(center: V3, radii: V3, orientation: [f64; 4]) -> Self {
        Overlap { center, radii, orientation, mask: u32::MAX }
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
    /// Row i is `offsets[i]..offsets[i + 1]` of `kinds` and `ids`.
    pub offsets: Vec<usize>,
    /// What each hit is.
    pub kinds: Vec<ContactKind>,
    /// Each hit's triangle or body id.
    pub ids: Vec<u32>,
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

    /// From each query's tagged ids (ascending, at most `limit`) and totals.
    pub(crate) fn from_tagged(rows: Vec<(Vec<u32>, u32)>) -> Self {
        let mut out = Overlaps { offsets: Vec::with_capacity(rows.len() + 1), ..Overlaps::default() };
        out.offsets.push(0);
        for (tagged, total) in rows {
            out.kinds.extend(tagged.iter().map(|&t| ContactKind::of_tagged(t)));
            out.ids.extend(tagged.iter().map(|&t| t & ID_BITS));
            out.offsets.push(out.ids.len());
            out.total.push(total);
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
                let (lo, hi) = body_box(&Shape::new(q.radii, q.orientation), q.center);
                query_cells(lo, hi, cell_size).map(|_| ())
            })
            .map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("overlap query {i}: {m}")),
                e => e,
            })?;
    }
    Ok(())
}

/// Every query's overlaps on the CPU.
pub(crate) fn overlaps_cpu(world: &World, queries: &[Overlap], limit: usize) -> Result<Overlaps> {
    let cell_size = world.cell_size();
    check_queries(queries, limit, cell_size)?;
    let b = world.bodies();
    let bodies = BodyGrid::build(world, cell_size)?;
    let (mesh, terrain, mesh_layer) = (world.mesh(), world.heightfield(), world.mesh_layer());
    let rows = queries
        .par_iter()
        .with_min_len(64)
        .enumerate()
        .map(|(qi, q)| -> Result<(Vec<u32>, u32)> {
            let shape = Shape::new(q.radii, q.orientation);
            let (lo, hi) = body_box(&shape, q.center);
            let mut found: Vec<u32> = Vec::new();
            if q.mask & mesh_layer != 0 {
                if let Some(m) = mesh {
                    m.grid.overlapping(&lo, &hi, &m.lo, &m.hi, |t| {
                        if contact_ellipsoid_triangle(&shape, m.corners[t as usize].map(|p| sub(p, q.center))).is_some()
                        {
                            found.push(t);
                        }
                    })?;
                }
                if let Some(h) = terrain {
                    h.overlapping(&lo, &hi, |t, corners| {
                        if contact_ellipsoid_triangle(&shape, corners.map(|p| sub(p, q.center))).is_some() {
                            found.push(ContactKind::Heightfield.tag() | t);
                        }
                    });
                }
            }
            bodies
                .overlapping(&lo, &hi, |o| {
                    if q.mask & b.layer[o] != 0
                        && contact_ellipsoid_ellipsoid(&shape, &b.shape(o), sub(b.center[o], q.center)).is_some()
                    {
                        found.push(ContactKind::Body.tag() | o as u32);
                    }
                })
                .map_err(|e| match e {
                    Error::InvalidArgument(m) => Error::InvalidArgument(format!("overlap query {qi}: {m}")),
                    e => e,
                })?;
            found.sort_unstable();
            let total = found.len() as u32;
            found.truncate(limit);
            Ok((found, total))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Overlaps::from_tagged(rows))
}
