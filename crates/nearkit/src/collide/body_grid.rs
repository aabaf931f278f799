//! How one call of queries on the CPU (overlaps, sweeps) finds the bodies whose boxes meet
//! each query's box (the boxes a tick uses, so a query finds the bodies a tick would): a few
//! queries look at every body, many share a grid of the bodies made for the call.

use rayon::prelude::*;

use super::ellipsoid::{body_box, V3};
use super::hash_grid::{boxes_overlap, owns_pair, CellRange, HashGrid};
use super::world::{body_error, Bodies, World};
use crate::error::Result;

/// Up to this many queries a call look at every body; more share a grid (whose set-up costs
/// about as much as this many looks at each body).
const SCAN_QUERIES: usize = 128;

/// A body's box is within its center ± its largest radius times this (the box's half extents
/// are at most the largest radius, widened by `BOX_SLACK`, with room for rounding).
const SPHERE_SLACK: f64 = 1.000_001;

pub(crate) enum BodyFinder<'w> {
    /// The bodies, and a sphere around each (center, radius; −∞ for a slot with no body).
    Scan(&'w Bodies, Vec<[f64; 4]>),
    Grid(BodyGrid),
}

impl<'w> BodyFinder<'w> {
    /// For `queries` queries; a grid gets cells of `cell_size`.
    pub fn new(world: &'w World, queries: usize, cell_size: f64) -> Result<Self> {
        Ok(if queries <= SCAN_QUERIES {
            let b = world.bodies();
            let spheres = (0..b.len())
                .map(|o| {
                    let (c, r) = (b.center[o], b.radii[o]);
                    let reach = if b.alive[o] { r[0].max(r[1]).max(r[2]) * SPHERE_SLACK } else { f64::NEG_INFINITY };
                    [c[0], c[1], c[2], reach]
                })
                .collect();
            BodyFinder::Scan(b, spheres)
        } else {
            BodyFinder::Grid(BodyGrid::build(world, cell_size)?)
        })
    }

    /// Calls `f` once for each body whose box meets the box [lo, hi].
    pub fn overlapping(&self, lo: &V3, hi: &V3, mut f: impl FnMut(usize)) -> Result<()> {
        match self {
            BodyFinder::Grid(g) => g.overlapping(lo, hi, f),
            BodyFinder::Scan(b, spheres) => {
                for (o, &[x, y, z, reach]) in spheres.iter().enumerate() {
                    // First the sphere around the body, which needs no rotation.
                    if x + reach < lo[0]
                        || hi[0] < x - reach
                        || y + reach < lo[1]
                        || hi[1] < y - reach
                        || z + reach < lo[2]
                        || hi[2] < z - reach
                    {
                        continue;
                    }
                    let (olo, ohi) = body_box(&b.shape(o), b.center[o]);
                    if boxes_overlap(lo, hi, &olo, &ohi) {
                        f(o);
                    }
                }
                Ok(())
            }
        }
    }
}

pub(crate) struct BodyGrid {
    /// Each slot's box; `None` for a slot with no body.
    boxes: Vec<Option<(V3, V3)>>,
    ranges: Vec<Option<CellRange>>,
    grid: HashGrid,
    cell_size: f64,
}

impl BodyGrid {
    /// The bodies of `world` in cells of `cell_size` (any size finds the same bodies).
    pub fn build(world: &World, cell_size: f64) -> Result<Self> {
        let b = world.bodies();
        let boxes: Vec<Option<(V3, V3)>> = (0..b.len())
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| b.alive[i].then(|| body_box(&b.shape(i), b.center[i])))
            .collect();
        let ranges = boxes
            .iter()
            .enumerate()
            .map(|(i, bx)| match bx {
                Some((lo, hi)) => CellRange::of_box(*lo, *hi, cell_size).map(Some).map_err(|e| body_error(i, e)),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let grid = HashGrid::build(&ranges)?;
        Ok(BodyGrid { boxes, ranges, grid, cell_size })
    }

    /// Calls `f` once for each body whose box meets the box [lo, hi].
    pub fn overlapping(&self, lo: &V3, hi: &V3, mut f: impl FnMut(usize)) -> Result<()> {
        let cells = CellRange::of_box(*lo, *hi, self.cell_size)?;
        for cell in cells.cells() {
            for o in self.grid.items_in(cell) {
                let o = o as usize;
                let Some((olo, ohi)) = &self.boxes[o] else { continue };
                if boxes_overlap(lo, hi, olo, ohi)
                    && owns_pair(cell, cells.lo, self.ranges[o].expect("gridded bodies have cells").lo)
                {
                    f(o);
                }
            }
        }
        Ok(())
    }
}
