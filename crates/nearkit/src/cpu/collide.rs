//! The CPU collider: bodies are re-entered into a hashed grid every tick, then each body
//! (in parallel) tests the triangles and the higher-numbered bodies of its cells.

use rayon::prelude::*;

use super::RowPtr;
use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use crate::collide::contact_ellipsoid_triangle::contact_ellipsoid_triangle;
use crate::collide::ellipsoid::{dot, sub, Shape, V3};
use crate::collide::hash_grid::{owns_pair, CellRange, HashGrid, CELL_LIMIT};
use crate::collide::sweep_ellipsoid_triangle::sweep_ellipsoid_triangle;
use crate::collide::world::{
    layers_meet, ContactKind, PackedContact, StaticMesh, Sweep, SweepResult, World, BOX_SLACK,
};
use crate::error::{Error, Result};
use crate::morton::morton3_64;

#[inline(always)]
fn boxes_overlap(alo: &V3, ahi: &V3, blo: &V3, bhi: &V3) -> bool {
    alo[0] <= bhi[0] && blo[0] <= ahi[0] && alo[1] <= bhi[1] && blo[1] <= ahi[1] && alo[2] <= bhi[2] && blo[2] <= ahi[2]
}

/// A body's (or sweep's) box: `center` ± its widened half extents.
#[inline]
pub(crate) fn body_box(shape: &Shape, center: V3) -> (V3, V3) {
    let h = shape.half_extents().map(|e| e * BOX_SLACK);
    ([center[0] - h[0], center[1] - h[1], center[2] - h[2]], [center[0] + h[0], center[1] + h[1], center[2] + h[2]])
}

struct BodyBox {
    shape: Shape,
    lo: V3,
    hi: V3,
    cells: CellRange,
}

/// Bodies per work unit: a run of neighbours in Morton order.
const CHUNK: usize = 64;

/// A chunk's contacts (one sorted run per body) and its runs as (body, length).
type ChunkContacts = (Vec<PackedContact>, Vec<(u32, u32)>);

/// Body `i`'s contacts, appended to `out` sorted by `other` (kind, then id).
#[allow(clippy::too_many_arguments)]
fn body_contacts(
    world: &World,
    boxes: &[Option<BodyBox>],
    grid: &HashGrid,
    mesh: Option<&StaticMesh>,
    i: usize,
    out: &mut Vec<PackedContact>,
) {
    let b = world.bodies();
    let me = boxes[i].as_ref().expect("ordered bodies are alive");
    let c = b.center[i];
    let start = out.len();
    let with_mesh = mesh.filter(|_| b.mask[i] & world.mesh_layer() != 0);
    for cell in me.cells.cells() {
        if let Some(m) = with_mesh {
            for t in m.grid.items_in(cell) {
                let t = t as usize;
                if !boxes_overlap(&me.lo, &me.hi, &m.lo[t], &m.hi[t]) || !owns_pair(cell, me.cells.lo, m.lo_cell[t]) {
                    continue;
                }
                // The body reaches h(n) from its center along the plane's normal: farther
                // from the plane (with room for rounding) it cannot touch the triangle.
                let [nx, ny, nz, off] = m.plane[t];
                let n = [nx, ny, nz];
                let d = dot(n, c) - off;
                let reach = me.shape.support(n);
                if d.abs() > reach * (1.0 + 1e-9) + 1e-9 * (off.abs() + 1.0) {
                    continue;
                }
                let corners = m.corners[t].map(|p| sub(p, c));
                if let Some(g) = contact_ellipsoid_triangle(&me.shape, corners) {
                    out.push(PackedContact::new(i as u32, ContactKind::Triangle, t as u32, &g));
                }
            }
        }
        for o in grid.items_in(cell) {
            let o = o as usize;
            if o <= i || !layers_meet(b.layer[i], b.mask[i], b.layer[o], b.mask[o]) {
                continue;
            }
            let other = boxes[o].as_ref().expect("gridded bodies are alive");
            if !boxes_overlap(&me.lo, &me.hi, &other.lo, &other.hi) || !owns_pair(cell, me.cells.lo, other.cells.lo) {
                continue;
            }
            if let Some(g) = contact_ellipsoid_ellipsoid(&me.shape, &other.shape, sub(b.center[o], c)) {
                out.push(PackedContact::new(i as u32, ContactKind::Body, o as u32, &g));
            }
        }
    }
    out[start..].sort_unstable_by_key(|p| p.other);
}

/// The CPU collider: its buffers are kept between ticks, so a steady world allocates almost
/// nothing per tick.
#[derive(Default)]
pub struct CpuCollider {
    packed: Vec<PackedContact>,
    boxes: Vec<Option<BodyBox>>,
    ranges: Vec<Option<CellRange>>,
    grid: HashGrid,
    order: Vec<(u64, u32)>,
    offset: Vec<usize>,
}

impl CpuCollider {
    /// Every contact of the world, sorted by (body, kind, other).
    pub fn contacts(&mut self, world: &World) -> Result<&[PackedContact]> {
        let b = world.bodies();
        let n = b.len();
        let cell_size = world.cell_size();
        let t0 = std::time::Instant::now();
        self.boxes.resize_with(n, || None);
        self.boxes.par_iter_mut().enumerate().with_min_len(256).try_for_each(|(i, slot)| -> Result<()> {
            *slot = None;
            if b.alive[i] {
                crate::collide::check_center(i, b.center[i])?;
                let shape = b.shape(i);
                let (lo, hi) = body_box(&shape, b.center[i]);
                *slot = Some(BodyBox {
                    shape,
                    lo,
                    hi,
                    cells: CellRange::of_box(lo, hi, cell_size).map_err(|e| body_error(i, e))?,
                });
            }
            Ok(())
        })?;
        let boxes = &self.boxes;
        self.ranges.clear();
        self.ranges.extend(boxes.iter().map(|x| x.as_ref().map(|x| x.cells)));
        let t1 = t0.elapsed();
        self.grid.rebuild(&self.ranges)?;
        let grid = &self.grid;
        let t2 = t0.elapsed();
        // Bodies are visited in Morton order of their cells, so that neighbours, which read
        // the same grid buckets and triangles, run one after another (mostly cache hits).
        self.order.clear();
        self.order.extend(boxes.iter().enumerate().filter_map(|(i, x)| {
            let c = x.as_ref()?.cells.lo.map(|v| (v as i64 + CELL_LIMIT) as u32 & 0x1f_ffff);
            Some((morton3_64(c[0], c[1], c[2]), i as u32))
        }));
        self.order.par_sort_unstable();
        let mesh = world.mesh().map(|m| &**m);
        // Each chunk of neighbours: its bodies' contacts, one sorted run per body.
        let chunks: Vec<ChunkContacts> = self
            .order
            .par_chunks(CHUNK)
            .map(|chunk| {
                let (mut found, mut runs) = (Vec::new(), Vec::with_capacity(chunk.len()));
                for &(_, i) in chunk {
                    let start = found.len();
                    body_contacts(world, boxes, grid, mesh, i as usize, &mut found);
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
                "collide cpu: boxes {t1:?}, grid {:?}, narrow {:?}, gather {:?}",
                t2 - t1,
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
fn body_error(i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("body {i}: {m}")),
        e => e,
    }
}
