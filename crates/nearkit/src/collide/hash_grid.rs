//! A hashed uniform grid: items (triangles or bodies) are entered into every cell their box
//! overlaps, and cells are found by hashing their integer coordinates, so the world needs no
//! bounds. Entries are grouped by hash bucket (a counting sort); a bucket may hold entries of
//! other cells, which a lookup skips by comparing the full cell key.
//!
//! A pair of items overlapping several common cells is tested once: in the cell holding the
//! low corner of the intersection of their boxes, which is the componentwise max of their
//! low cells (`owns_pair`).

use crate::error::{Error, Result};

/// Cell coordinates are biased into 21 bits each: ±2²⁰ cells (±1,048 km at 1 m cells).
pub const CELL_BITS: u32 = 21;
pub const CELL_LIMIT: i64 = 1 << (CELL_BITS - 1);

/// Inclusive range of cells covered by a box.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CellRange {
    pub lo: [i32; 3],
    pub hi: [i32; 3],
}

impl CellRange {
    /// The cells of box [lo, hi]; an error when a coordinate is beyond the key range.
    pub fn of_box(lo: [f64; 3], hi: [f64; 3], cell_size: f64) -> Result<Self> {
        let cell = |x: f64| -> Result<i32> {
            let c = (x / cell_size).floor();
            if c.abs() < (CELL_LIMIT - 1) as f64 {
                Ok(c as i32)
            } else {
                Err(Error::InvalidArgument(format!(
                    "coordinate {x:e} is beyond ±{} cells of {cell_size}: use larger cells, or keep it nearer the origin",
                    CELL_LIMIT - 1
                )))
            }
        };
        Ok(CellRange { lo: [cell(lo[0])?, cell(lo[1])?, cell(lo[2])?], hi: [cell(hi[0])?, cell(hi[1])?, cell(hi[2])?] })
    }

    pub fn count(&self) -> usize {
        (0..3).map(|a| (self.hi[a] - self.lo[a] + 1) as usize).product()
    }

    /// The cells in x-fastest order.
    pub fn cells(&self) -> impl Iterator<Item = [i32; 3]> + '_ {
        (self.lo[2]..=self.hi[2]).flat_map(move |z| {
            (self.lo[1]..=self.hi[1]).flat_map(move |y| (self.lo[0]..=self.hi[0]).map(move |x| [x, y, z]))
        })
    }
}

/// Grid cells one query's box (a sweep's, an overlap query's) may cover: its cells are walked
/// one by one, so a box of a kilometre at 1 m cells would take minutes.
pub const MAX_QUERY_CELLS: usize = 1 << 24;

/// The cells of a query's box; an error when it lies beyond the grid's range or covers more
/// than `MAX_QUERY_CELLS`.
pub fn query_cells(lo: [f64; 3], hi: [f64; 3], cell_size: f64) -> Result<CellRange> {
    let r = CellRange::of_box(lo, hi, cell_size)?;
    let n = r.count();
    if n > MAX_QUERY_CELLS {
        return Err(Error::InvalidArgument(format!(
            "its box covers {n} grid cells of {cell_size} (at most {MAX_QUERY_CELLS}): use larger cells or split it"
        )));
    }
    Ok(r)
}

/// Whether `cell` is where the pair of items with low cells `a` and `b` is tested.
#[inline(always)]
pub fn owns_pair(cell: [i32; 3], a: [i32; 3], b: [i32; 3]) -> bool {
    cell[0] == a[0].max(b[0]) && cell[1] == a[1].max(b[1]) && cell[2] == a[2].max(b[2])
}

/// Whether boxes [alo, ahi] and [blo, bhi] meet (touching counts).
#[inline(always)]
pub fn boxes_overlap(alo: &[f64; 3], ahi: &[f64; 3], blo: &[f64; 3], bhi: &[f64; 3]) -> bool {
    alo[0] <= bhi[0] && blo[0] <= ahi[0] && alo[1] <= bhi[1] && blo[1] <= ahi[1] && alo[2] <= bhi[2] && blo[2] <= ahi[2]
}

#[inline(always)]
pub fn cell_key(c: [i32; 3]) -> u64 {
    let f = |v: i32| (v as i64 + CELL_LIMIT) as u64;
    (f(c[0]) << (2 * CELL_BITS)) | (f(c[1]) << CELL_BITS) | f(c[2])
}

/// The bucket of a cell key (the splitmix64 finaliser; `collide.cu` repeats it).
#[inline(always)]
pub fn bucket_of(key: u64, mask: u64) -> usize {
    let mut h = key;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h & mask) as usize
}

/// Buckets for `entries` entries: a power of two, at least as many as entries.
pub fn bucket_count(entries: usize) -> usize {
    entries.max(1).next_power_of_two()
}

#[derive(Clone, Debug, Default)]
pub struct HashGrid {
    /// Entries of bucket b are `start[b]..start[b + 1]`.
    pub start: Vec<u32>,
    pub keys: Vec<u64>,
    pub items: Vec<u32>,
}

impl HashGrid {
    /// Enters item i into every cell of `ranges[i]` (`None`: not entered).
    pub fn build(ranges: &[Option<CellRange>]) -> Result<Self> {
        let mut grid = HashGrid::default();
        let total: usize = ranges.iter().flatten().map(CellRange::count).sum();
        if total > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!("the grid would hold {total} entries: use larger cells")));
        }
        let buckets = bucket_count(total);
        let mask = (buckets - 1) as u64;
        let start = &mut grid.start;
        start.clear();
        start.resize(buckets + 1, 0);
        for r in ranges.iter().flatten() {
            for c in r.cells() {
                start[bucket_of(cell_key(c), mask) + 1] += 1;
            }
        }
        for b in 0..buckets {
            start[b + 1] += start[b];
        }
        grid.keys.resize(total, 0);
        grid.items.resize(total, 0);
        // start[b] serves as bucket b's cursor, ending at bucket b + 1's start; shifted back after.
        for (i, r) in ranges.iter().enumerate() {
            for c in r.iter().flat_map(CellRange::cells) {
                let key = cell_key(c);
                let b = bucket_of(key, mask);
                let at = start[b] as usize;
                start[b] += 1;
                grid.keys[at] = key;
                grid.items[at] = i as u32;
            }
        }
        for b in (1..=buckets).rev() {
            start[b] = start[b - 1];
        }
        start[0] = 0;
        Ok(grid)
    }

    pub fn mask(&self) -> u64 {
        (self.start.len() - 2) as u64
    }

    /// The items entered into `cell`.
    #[inline]
    pub fn items_in(&self, cell: [i32; 3]) -> impl Iterator<Item = u32> + '_ {
        let key = cell_key(cell);
        let b = bucket_of(key, self.mask());
        let range = self.start[b] as usize..self.start[b + 1] as usize;
        range.filter(move |&e| self.keys[e] == key).map(move |e| self.items[e])
    }
}
