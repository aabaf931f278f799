//! The CPU collider: bodies are re-entered into a hashed grid every tick, then each body
//! (in parallel) tests the triangles and the higher-numbered bodies of its cells.

use rayon::prelude::*;

use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use crate::collide::contact_ellipsoid_triangle::contact_ellipsoid_triangle;
use crate::collide::ellipsoid::{sub, Shape, V3};
use crate::collide::hash_grid::{owns_pair, CellRange, HashGrid};
use crate::collide::sweep_ellipsoid_triangle::sweep_ellipsoid_triangle;
use crate::collide::world::{layers_meet, Contact, ContactKind, Sweep, SweepResult, World, BOX_SLACK};
use crate::error::Result;

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

/// Every contact of the world, sorted by (body, kind, other).
pub fn contacts(world: &World) -> Result<Vec<Contact>> {
    let b = world.bodies();
    let cell_size = world.cell_size();
    let boxes: Vec<Option<BodyBox>> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            if !b.alive[i] {
                return Ok(None);
            }
            crate::collide::check_center(b.center[i])?;
            let shape = b.shape(i);
            let (lo, hi) = body_box(&shape, b.center[i]);
            Ok(Some(BodyBox { shape, lo, hi, cells: CellRange::of_box(lo, hi, cell_size)? }))
        })
        .collect::<Result<_>>()?;
    let ranges: Vec<Option<CellRange>> = boxes.iter().map(|x| x.as_ref().map(|x| x.cells)).collect();
    let grid = HashGrid::build(&ranges)?;
    let mesh = world.mesh();
    let mesh_layer = world.mesh_layer();
    let per_body: Vec<Vec<Contact>> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            let Some(me) = &boxes[i] else { return Vec::new() };
            let c = b.center[i];
            let mut out = Vec::new();
            let with_mesh = mesh.filter(|_| b.mask[i] & mesh_layer != 0);
            for cell in me.cells.cells() {
                if let Some(m) = with_mesh {
                    for t in m.grid.items_in(cell) {
                        let t = t as usize;
                        if !boxes_overlap(&me.lo, &me.hi, &m.lo[t], &m.hi[t])
                            || !owns_pair(cell, me.cells.lo, m.lo_cell[t])
                        {
                            continue;
                        }
                        let corners = m.corners[t].map(|p| sub(p, c));
                        if let Some(g) = contact_ellipsoid_triangle(&me.shape, corners) {
                            out.push(Contact {
                                body: i as u32,
                                kind: ContactKind::Triangle,
                                other: t as u32,
                                normal: g.normal,
                                depth: g.depth,
                                point: [c[0] + g.point[0], c[1] + g.point[1], c[2] + g.point[2]],
                            });
                        }
                    }
                }
                for o in grid.items_in(cell) {
                    let o = o as usize;
                    if o <= i || !layers_meet(b.layer[i], b.mask[i], b.layer[o], b.mask[o]) {
                        continue;
                    }
                    let other = boxes[o].as_ref().expect("gridded bodies are alive");
                    if !boxes_overlap(&me.lo, &me.hi, &other.lo, &other.hi)
                        || !owns_pair(cell, me.cells.lo, other.cells.lo)
                    {
                        continue;
                    }
                    if let Some(g) = contact_ellipsoid_ellipsoid(&me.shape, &other.shape, sub(b.center[o], c)) {
                        out.push(Contact {
                            body: i as u32,
                            kind: ContactKind::Body,
                            other: o as u32,
                            normal: g.normal,
                            depth: g.depth,
                            point: [c[0] + g.point[0], c[1] + g.point[1], c[2] + g.point[2]],
                        });
                    }
                }
            }
            out.sort_unstable_by_key(Contact::order_key);
            out
        })
        .collect();
    Ok(per_body.concat())
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
