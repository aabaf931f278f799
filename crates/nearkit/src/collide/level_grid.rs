//! A hierarchy of hashed grids for the static mesh, so that triangles of any size cost about
//! the same: each triangle goes into the level whose cells (the base cell times a power of
//! two) are at least as wide as its box, where it enters at most 2 × 2 × 2 cells. A 30 m terrain
//! triangle in a world of 1 m cells enters a few 32 m cells, not 900 of 1 m. A box query visits
//! its cells on every level there is (bodies are about a base cell wide, so one to eight cells a
//! level).
//!
//! Each level is a `HashGrid` of its own cells; a triangle lives on one level only, and a pair of
//! a box and a triangle is tested once, in the cell of their low corners' max on that level
//! (`hash_grid::owns_pair`). The CUDA collider uploads the levels one after another
//! (`cuda.rs`, `MeshView`) and walks them the same way.

use crate::collide::ellipsoid::V3;
use crate::collide::hash_grid::{boxes_overlap, owns_pair, CellRange, HashGrid};
use crate::error::{Error, Result};

/// Levels at most: cells up to 2¹⁵ base cells (32 km at 1 m). Larger triangles go to the top
/// level and enter more of its cells.
pub const MAX_LEVELS: usize = 16;

/// One level: its cell size and the grid of the triangles on it.
#[derive(Clone, Debug, Default)]
pub struct GridLevel {
    /// The base cell times a power of two.
    pub cell: f64,
    pub grid: HashGrid,
}

/// The levels that hold triangles, finest first, and where each triangle is.
#[derive(Clone, Debug, Default)]
pub struct LevelGrid {
    pub levels: Vec<GridLevel>,
    /// Each item's low cell on its level.
    pub lo_cell: Vec<[i32; 3]>,
}

/// The exponent of the finest level whose cells are at least as wide as the box [lo, hi].
fn exponent_of(lo: &V3, hi: &V3, base: f64) -> u32 {
    let extent = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
    let mut e = 0;
    while e + 1 < MAX_LEVELS as u32 && extent > base * (1u64 << e) as f64 {
        e += 1;
    }
    e
}

impl LevelGrid {
    /// Item i (box `lo[i]`, `hi[i]`) into its level; `base`: the finest level's cell size.
    pub fn build(lo: &[V3], hi: &[V3], base: f64) -> Result<Self> {
        let exponent: Vec<u32> = lo.iter().zip(hi).map(|(l, h)| exponent_of(l, h, base)).collect();
        let mut used = exponent.clone();
        used.sort_unstable();
        used.dedup();
        let mut lo_cell = vec![[0; 3]; lo.len()];
        let mut levels = Vec::with_capacity(used.len());
        let mut total = 0usize;
        for e in used {
            let cell = base * (1u64 << e) as f64;
            let ranges = (0..lo.len())
                .map(|i| {
                    if exponent[i] != e {
                        return Ok(None);
                    }
                    let r = CellRange::of_box(lo[i], hi[i], cell)?;
                    lo_cell[i] = r.lo;
                    Ok(Some(r))
                })
                .collect::<Result<Vec<_>>>()?;
            let grid = HashGrid::build(&ranges)?;
            total += grid.items.len();
            levels.push(GridLevel { cell, grid });
        }
        if total > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "the mesh's grid would hold {total} entries: use larger cells"
            )));
        }
        Ok(LevelGrid { levels, lo_cell })
    }

    /// Entries on all levels.
    pub fn entries(&self) -> usize {
        self.levels.iter().map(|l| l.grid.items.len()).sum()
    }

    /// Offers `f` every item whose box (`item_lo`, `item_hi`) meets the box [lo, hi], each once
    /// and level by level (in no set order). An error when the box lies beyond a level's range.
    #[inline]
    pub fn overlapping(&self, lo: &V3, hi: &V3, item_lo: &[V3], item_hi: &[V3], mut f: impl FnMut(u32)) -> Result<()> {
        for level in &self.levels {
            let r = CellRange::of_box(*lo, *hi, level.cell)?;
            for cell in r.cells() {
                for t in level.grid.items_in(cell) {
                    let k = t as usize;
                    if boxes_overlap(lo, hi, &item_lo[k], &item_hi[k]) && owns_pair(cell, r.lo, self.lo_cell[k]) {
                        f(t);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boxes from 1 mm to 5 km against boxes of every size: the grid offers exactly the
    /// overlapping ones, each once.
    #[test]
    fn offers_every_overlapping_box_once() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for _ in 0..3000 {
            let size = 10f64.powf(-3.0 + 6.7 * next());
            let c: V3 = std::array::from_fn(|_| (next() - 0.5) * 4000.0);
            let e: V3 = std::array::from_fn(|_| size * next());
            lo.push(c);
            hi.push(std::array::from_fn(|a| c[a] + e[a]));
        }
        let grid = LevelGrid::build(&lo, &hi, 1.0).unwrap();
        assert!(grid.levels.len() > 8, "{} levels", grid.levels.len());
        for q in 0..400 {
            let size = 10f64.powf(-1.0 + 3.0 * next());
            let c: V3 = std::array::from_fn(|_| (next() - 0.5) * 4000.0);
            let qhi: V3 = std::array::from_fn(|a| c[a] + size);
            let mut got = Vec::new();
            grid.overlapping(&c, &qhi, &lo, &hi, |t| got.push(t)).unwrap();
            got.sort_unstable();
            let want: Vec<u32> = (0..lo.len() as u32)
                .filter(|&t| {
                    let t = t as usize;
                    (0..3).all(|a| c[a] <= hi[t][a] && lo[t][a] <= qhi[a])
                })
                .collect();
            assert_eq!(got, want, "query {q}");
        }
    }
}
