//! The bodies gridded for one call of queries on the CPU (overlaps, sweeps): at the world's
//! cells, by the same boxes as a tick's, so a query finds the bodies a tick would.

use rayon::prelude::*;

use super::ellipsoid::{body_box, V3};
use super::hash_grid::{boxes_overlap, owns_pair, CellRange, HashGrid};
use super::world::{body_error, World};
use crate::error::Result;

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
