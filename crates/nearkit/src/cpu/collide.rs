//! The CPU collider: each body (in parallel) tests the triangles and the higher-numbered
//! bodies of its candidate lists, which are kept from tick to tick (`candidate_lists`).

use rayon::prelude::*;

use super::candidate_lists::{boxes_overlap, BodyBox, CandidateLists};
use super::RowPtr;
use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use crate::collide::contact_ellipsoid_triangle::contact_ellipsoid_triangle;
use crate::collide::ellipsoid::{dot, sub, Shape, V3};
use crate::collide::hash_grid::{owns_pair, CellRange};
use crate::collide::sweep_ellipsoid_triangle::sweep_ellipsoid_triangle;
use crate::collide::world::{layers_meet, ContactKind, PackedContact, Sweep, SweepResult, World, BOX_SLACK};
use crate::error::{Error, Result};

/// A body's (or sweep's) box: `center` ± its widened half extents.
#[inline]
pub(crate) fn body_box(shape: &Shape, center: V3) -> (V3, V3) {
    let h = shape.half_extents().map(|e| e * BOX_SLACK);
    ([center[0] - h[0], center[1] - h[1], center[2] - h[2]], [center[0] + h[0], center[1] + h[1], center[2] + h[2]])
}

/// Bodies per work unit.
const CHUNK: usize = 64;

/// A chunk's contacts (one sorted run per body) and its runs as (body, length).
type ChunkContacts = (Vec<PackedContact>, Vec<(u32, u32)>);

/// Body `i`'s contacts, appended to `out` sorted by `other` (kind, then id): its listed
/// triangles (ascending), then its listed higher-numbered bodies.
fn body_contacts(
    world: &World,
    shapes: &[Option<Shape>],
    boxes: &[Option<BodyBox>],
    lists: &CandidateLists,
    i: usize,
    out: &mut Vec<PackedContact>,
) {
    let b = world.bodies();
    let (Some(me), Some((lo, hi))) = (&shapes[i], &boxes[i]) else { return };
    let c = b.center[i];
    if let Some(m) = world.mesh().filter(|_| b.mask[i] & world.mesh_layer() != 0) {
        for &t in &lists.triangles[i] {
            let t = t as usize;
            if !boxes_overlap(lo, hi, &m.lo[t], &m.hi[t]) {
                continue;
            }
            // The body reaches h(n) from its center along the plane's normal: farther from
            // the plane (with room for rounding) it cannot touch the triangle.
            let [nx, ny, nz, off] = m.plane[t];
            let n = [nx, ny, nz];
            let d = dot(n, c) - off;
            let reach = me.support(n);
            if d.abs() > reach * (1.0 + 1e-9) + 1e-9 * (off.abs() + 1.0) {
                continue;
            }
            let corners = m.corners[t].map(|p| sub(p, c));
            if let Some(g) = contact_ellipsoid_triangle(me, corners) {
                out.push(PackedContact::new(i as u32, ContactKind::Triangle, t as u32, &g));
            }
        }
    }
    let start = out.len();
    for &o in &lists.bodies[i] {
        let o = o as usize;
        if o <= i || !layers_meet(b.layer[i], b.mask[i], b.layer[o], b.mask[o]) {
            continue;
        }
        // The box first: most listed pairs stop there, and the shape is three times its size.
        let Some((olo, ohi)) = &boxes[o] else { continue };
        if !boxes_overlap(lo, hi, olo, ohi) {
            continue;
        }
        let Some(other) = &shapes[o] else { continue };
        if let Some(g) = contact_ellipsoid_ellipsoid(me, other, sub(b.center[o], c)) {
            out.push(PackedContact::new(i as u32, ContactKind::Body, o as u32, &g));
        }
    }
    out[start..].sort_unstable_by_key(|p| p.other);
}

/// The CPU collider: its buffers and candidate lists are kept between ticks, so a steady
/// world allocates almost nothing per tick and re-lists only the bodies that left their fat
/// boxes (`candidate_lists`).
#[derive(Default)]
pub struct CpuCollider {
    packed: Vec<PackedContact>,
    shapes: Vec<Option<Shape>>,
    boxes: Vec<Option<BodyBox>>,
    lists: CandidateLists,
    offset: Vec<usize>,
}

impl CpuCollider {
    /// Every contact of the world, sorted by (body, kind, other).
    pub fn contacts(&mut self, world: &World) -> Result<&[PackedContact]> {
        let b = world.bodies();
        let n = b.len();
        let cell_size = world.cell_size();
        let t0 = std::time::Instant::now();
        self.shapes.resize(n, None);
        self.boxes.resize(n, None);
        self.shapes.par_iter_mut().zip(self.boxes.par_iter_mut()).enumerate().with_min_len(256).try_for_each(
            |(i, (shape, bbox))| -> Result<()> {
                (*shape, *bbox) = (None, None);
                if b.alive[i] {
                    crate::collide::check_center(i, b.center[i])?;
                    let s = b.shape(i);
                    let (lo, hi) = body_box(&s, b.center[i]);
                    // The world's grid must hold the box (as on the GPU), though the lists
                    // grid their own way.
                    CellRange::of_box(lo, hi, cell_size).map_err(|e| body_error(i, e))?;
                    *bbox = Some((lo, hi));
                    *shape = Some(s);
                }
                Ok(())
            },
        )?;
        let t1 = t0.elapsed();
        self.lists.update(world, &self.boxes)?;
        let t2 = t0.elapsed();
        let (shapes, boxes, lists) = (&self.shapes, &self.boxes, &self.lists);
        // Each chunk of bodies: their contacts, one sorted run per body.
        let chunks: Vec<ChunkContacts> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let chunk = (c * CHUNK) as u32..(n.min((c + 1) * CHUNK)) as u32;
                let (mut found, mut runs) = (Vec::new(), Vec::with_capacity(chunk.len()));
                for i in chunk {
                    let start = found.len();
                    body_contacts(world, shapes, boxes, lists, i as usize, &mut found);
                    runs.push((i, (found.len() - start) as u32));
                }
                (found, runs)
            })
            .collect();
        let t3 = t0.elapsed();
        // Runs to their places in body order.
        let offset = &mut self.offset;
        offset.clear();
        offset.resize(n + 1, 0);
        for (_, runs) in &chunks {
            for &(i, c) in runs {
                offset[i as usize + 1] = c as usize;
            }
        }
        for i in 0..n {
            offset[i + 1] += offset[i];
        }
        let out = &mut self.packed;
        out.clear();
        out.resize(offset[n], PackedContact::default());
        let dst = RowPtr(out.as_mut_ptr());
        let offset = &self.offset;
        chunks.par_iter().for_each(|(found, runs)| {
            let mut at = 0;
            for &(i, c) in runs {
                let c = c as usize;
                // SAFETY: body i's run [offset[i], offset[i + 1]) is written by this chunk only.
                unsafe { dst.span(offset[i as usize], c) }.copy_from_slice(&found[at..at + c]);
                at += c;
            }
        });
        if std::env::var_os("NEARKIT_PROFILE").is_some() {
            eprintln!(
                "collide cpu: boxes {t1:?}, lists {:?} ({} re-listed; {} triangles, {} bodies listed), narrow {:?}, \
                 gather {:?}",
                t2 - t1,
                self.lists.relisted,
                self.lists.triangles.iter().map(Vec::len).sum::<usize>(),
                self.lists.bodies.iter().map(Vec::len).sum::<usize>(),
                t3 - t2,
                t0.elapsed() - t3
            );
        }
        Ok(&self.packed)
    }
}

/// Each sweep's first contact with the mesh (`None`: it moves freely, or there is no mesh).
pub fn sweeps(world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
    for s in sweeps {
        s.check()?;
    }
    let Some(m) = world.mesh() else { return Ok(vec![None; sweeps.len()]) };
    let cell_size = world.cell_size();
    sweeps
        .par_iter()
        .map(|s| {
            let shape = Shape::new(s.radii, s.orientation);
            let (lo0, hi0) = body_box(&shape, s.from);
            let (lo1, hi1) = body_box(&shape, s.to);
            let lo: V3 = std::array::from_fn(|a| lo0[a].min(lo1[a]));
            let hi: V3 = std::array::from_fn(|a| hi0[a].max(hi1[a]));
            let cells = CellRange::of_box(lo, hi, cell_size)?;
            let motion = sub(s.to, s.from);
            let mut best: Option<SweepResult> = None;
            for cell in cells.cells() {
                for t in m.grid.items_in(cell) {
                    let t = t as usize;
                    if !boxes_overlap(&lo, &hi, &m.lo[t], &m.hi[t]) || !owns_pair(cell, cells.lo, m.lo_cell[t]) {
                        continue;
                    }
                    let corners = m.corners[t].map(|p| sub(p, s.from));
                    if let Some(h) = sweep_ellipsoid_triangle(&shape, corners, motion) {
                        if best.is_none_or(|b| h.toi < b.toi || (h.toi == b.toi && (t as u32) < b.triangle)) {
                            let point = [s.from[0] + h.point[0], s.from[1] + h.point[1], s.from[2] + h.point[2]];
                            best = Some(SweepResult { toi: h.toi, triangle: t as u32, point, normal: h.normal });
                        }
                    }
                }
            }
            Ok(best)
        })
        .collect()
}

/// An error about one body, naming it (the CUDA collider's errors name the body too).
pub(crate) fn body_error(i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("body {i}: {m}")),
        e => e,
    }
}
