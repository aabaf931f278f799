//! Radius queries on the CPU: blocks of queries (in Morton order, so each block walks one part
//! of the tree) collect their rows in parallel, then every row is copied to its place.
//!
//! Queries go in groups of `GROUP` consecutive ones (neighbours along the Morton curve): the
//! group walks the tree once, with its bounding box, and lists the runs of sorted points
//! (leaves) within r of the box (`search::runs_near`); each query then tests those runs'
//! boxes several at a time and scans the runs near it eight points at a time, keeping the
//! points within without branches (`search::scan_runs`; AVX2 in `tree::scan_avx2`). Runs
//! come in ascending position, so a row is in the same tree order as the GPU's one-query walk
//! (radius.cu) gives.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use super::{beyond_memory, check_total, memory_limit, too_many, RadiusOptions, Within};
use crate::error::Result;
use crate::geometry::points::Points;
use crate::geometry::real::{from_ordered_bits, Real};
use crate::runtime::cpu::{big_vec, prefetch, RowPtr};
use crate::tree::search;
use crate::tree::MortonTree;

/// Queries per block: enough to amortise a task, few enough to balance clustered data.
const BLOCK: usize = 256;
/// Queries that walk the tree together.
const GROUP: usize = 64;
/// Points of the runs a group's queries scan (nodes this small are not descended).
const RUN: usize = 64;
const _: () = assert!(RUN <= search::RUN_MAX && crate::tree::DEFAULT_LEAF_SIZE as usize <= search::RUN_MAX);

/// One block's rows: (row, length) in search order, and their entries' squared distances
/// (when the rows are sorted or distances asked for) and ids.
struct Block<T> {
    rows: Vec<(u32, u32)>,
    d2: Vec<T>,
    ids: Vec<u32>,
}

/// The rows of `n_rows` queries, of which `n_search` are searched: `query(i)` gives the i-th
/// searched query (in search order) and its row; the rows of the others are empty. With
/// `above`, a row lists only ids greater than the row's own (each pair of a self-join once).
#[allow(clippy::too_many_arguments)]
pub(crate) fn within<T: Real>(
    tree: &MortonTree<T>,
    n_rows: usize,
    n_search: usize,
    query: impl Fn(usize) -> ([T; 3], u32) + Sync,
    r2: T,
    above: bool,
    opts: &RadiusOptions,
) -> Result<Within<T>> {
    let total = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // Without a limit, the rows stop where free memory would run out (they are held here
    // before they are copied into the result).
    let limit = opts.max_results.unwrap_or_else(memory_limit::<T>);
    let blocks: Vec<Block<T>> = (0..n_search.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            if stop.load(Ordering::Relaxed) {
                return Block { rows: Vec::new(), d2: Vec::new(), ids: Vec::new() };
            }
            let range = b * BLOCK..((b + 1) * BLOCK).min(n_search);
            let block = block_rows_fast(tree, range, &query, r2, above, opts.sorted, opts.sorted || opts.distances);
            if total.fetch_add(block.ids.len() as u64, Ordering::Relaxed) + block.ids.len() as u64 > limit {
                stop.store(true, Ordering::Relaxed);
            }
            block
        })
        .collect();
    let total = total.into_inner();
    if total > limit {
        return Err(match opts.max_results {
            Some(_) => too_many::<T>(total, limit),
            None => beyond_memory::<T>(total),
        });
    }
    check_total::<T>(total, opts)?;

    let mut counts = vec![0u32; n_rows];
    for block in &blocks {
        for &(row, len) in &block.rows {
            counts[row as usize] = len;
        }
    }
    let offsets = offsets_of(&counts);
    drop(counts);
    let total = total as usize;
    let (mut ids, mut distances) = (big_vec::<u32>(total), big_vec::<T>(if opts.distances { total } else { 0 }));
    let (ids_at, ds_at) = (RowPtr(ids.as_mut_ptr()), RowPtr(distances.as_mut_ptr()));
    // Rows land in random places (a row is a query's, blocks go in Morton order): each row
    // prefetches the place of the row `AHEAD` of it, so that those misses overlap the copies.
    const AHEAD: usize = 8;
    blocks.par_iter().for_each(|block| {
        let mut at = 0;
        for (r, &(row, len)) in block.rows.iter().enumerate() {
            if let Some(&(ahead, ahead_len)) = block.rows.get(r + AHEAD) {
                if ahead_len > 0 {
                    let a = offsets[ahead as usize] as usize;
                    prefetch(ids_at.0.wrapping_add(a), ahead_len as usize);
                    if opts.distances {
                        prefetch(ds_at.0.wrapping_add(a), ahead_len as usize);
                    }
                }
            }
            let (start, len) = (offsets[row as usize] as usize, len as usize);
            // SAFETY: row `row`'s slots start..start + len lie inside both allocations
            // (offsets sum the lengths; `distances` is empty without distances) and only this
            // row's block writes them.
            unsafe {
                ids_at.span(start, len).copy_from_slice(&block.ids[at..at + len]);
                if opts.distances {
                    // Squared distances become distances on their way.
                    for (d, &d2) in ds_at.span(start, len).iter_mut().zip(&block.d2[at..at + len]) {
                        *d = d2.sqrt();
                    }
                }
            }
            at += len;
        }
    });
    // SAFETY: every row was written whole, and the rows tile 0..total.
    unsafe {
        ids.set_len(total);
        if opts.distances {
            distances.set_len(total);
        }
    }
    Ok(Within { offsets, ids, distances })
}

/// The rows of the queries `range` (in search order), group after group; their squared
/// distances with `D2` (which sorted rows need).
#[inline(always)]
fn block_rows<T: Real, const AVX2: bool, const D2: bool>(
    tree: &MortonTree<T>,
    range: std::ops::Range<usize>,
    query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
    r2: T,
    above: bool,
    sorted: bool,
) -> Block<T> {
    assert!(D2 || !sorted, "sorted rows need their squared distances");
    let mut block = Block { rows: Vec::with_capacity(range.len()), d2: Vec::new(), ids: Vec::new() };
    let (mut runs, mut columns) = (Vec::new(), search::RunColumns::default());
    let mut group = [([T::ZERO; 3], 0u32); GROUP];
    let mut row_scratch = Vec::new();
    for g in range.clone().step_by(GROUP) {
        let m = GROUP.min(range.end - g);
        for (j, slot) in group[..m].iter_mut().enumerate() {
            *slot = query(g + j);
        }
        search::runs_near(tree, &group[..m], r2, RUN, &mut runs);
        columns.fill(&runs);
        for &(q, row) in &group[..m] {
            let start = block.ids.len();
            let first_id = if above { row + 1 } else { 0 };
            let len =
                search::scan_runs::<T, AVX2, D2>(tree, &mut columns, q, r2, first_id, &mut block.d2, &mut block.ids);
            if sorted {
                sort_row(&mut block.d2[start..], &mut block.ids[start..], &mut row_scratch);
            }
            block.rows.push((row, len as u32));
        }
    }
    block
}

/// [`block_rows`], compiled for AVX2 where the CPU has it: the distance loop of `scan_runs`
/// then runs eight f32 (four f64) lanes at a time, each lane the scalar code's operations, so
/// the bits are the same. `d2`: keep the squared distances.
fn block_rows_fast<T: Real>(
    tree: &MortonTree<T>,
    range: std::ops::Range<usize>,
    query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
    r2: T,
    above: bool,
    sorted: bool,
    d2: bool,
) -> Block<T> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt") {
        #[target_feature(enable = "avx2,popcnt")]
        unsafe fn avx2<T: Real, const D2: bool>(
            tree: &MortonTree<T>,
            range: std::ops::Range<usize>,
            query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
            r2: T,
            above: bool,
            sorted: bool,
        ) -> Block<T> {
            block_rows::<T, true, D2>(tree, range, query, r2, above, sorted)
        }
        // SAFETY: the CPU has AVX2 and POPCNT (checked just above).
        return unsafe {
            match d2 {
                true => avx2::<T, true>(tree, range, query, r2, above, sorted),
                false => avx2::<T, false>(tree, range, query, r2, above, sorted),
            }
        };
    }
    match d2 {
        true => block_rows::<T, false, true>(tree, range, query, r2, above, sorted),
        false => block_rows::<T, false, false>(tree, range, query, r2, above, sorted),
    }
}

/// Each of `n` queries' number of points within `r2`, in query order.
pub(crate) fn count_within<T: Real>(
    tree: &MortonTree<T>,
    queries: &crate::geometry::points::Points<T>,
    r2: T,
) -> Vec<u32> {
    let order = search_order(tree, queries, r2);
    let mut counts = vec![0u32; queries.len()];
    let at = RowPtr(counts.as_mut_ptr());
    let scratch = || (Vec::new(), search::RunColumns::<T>::default());
    order.par_chunks(GROUP).for_each_init(scratch, |(runs, columns), chunk| {
        let group: Vec<([T; 3], u32)> = chunk.iter().map(|&q| (queries.get(q as usize), q)).collect();
        search::runs_near(tree, &group, r2, RUN, runs);
        columns.fill(runs);
        // SAFETY: each query appears once in `order`, so one task writes its slot.
        let mut write = |q: u32, c: usize| unsafe { at.write(q as usize, c as u32) };
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt") {
            #[target_feature(enable = "avx2,popcnt")]
            unsafe fn avx2<T: Real>(
                tree: &MortonTree<T>,
                group: &[([T; 3], u32)],
                columns: &mut search::RunColumns<T>,
                r2: T,
                write: &mut impl FnMut(u32, usize),
            ) {
                for &(p, q) in group {
                    write(q, search::count_runs::<T, true>(tree, columns, p, r2));
                }
            }
            // SAFETY: the CPU has AVX2 and POPCNT (checked just above).
            return unsafe { avx2(tree, &group, columns, r2, &mut write) };
        }
        for &(p, q) in &group {
            write(q, search::count_runs::<T, false>(tree, columns, p, r2));
        }
    });
    counts
}

/// Sorts a row, squared distances `d2` and their `ids`, by (d², id): a total order, so any
/// sort gives the same row. The squared distances (never negative) sort as their bits, so the
/// sort compares integers.
pub(crate) fn sort_row<T: Real>(d2: &mut [T], ids: &mut [u32], scratch: &mut Vec<(u64, u32)>) {
    scratch.clear();
    scratch.extend(d2.iter().map(|d| d.ordered_bits()).zip(ids.iter().copied()));
    scratch.sort_unstable();
    for (k, &(bits, id)) in scratch.iter().enumerate() {
        d2[k] = from_ordered_bits(bits);
        ids[k] = id;
    }
}

/// Exclusive prefix sums of `counts`, with the total at the end.
pub(crate) fn offsets_of(counts: &[u32]) -> Vec<u64> {
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut sum = 0u64;
    offsets.push(0);
    for &c in counts {
        sum += c as u64;
        offsets.push(sum);
    }
    offsets
}

/// The queries to search for points within `r2`, in the tree's Morton order: those that may
/// have one. A query far from every data point (most of a box around a surface, say) has
/// none, and a coarse grid of the cells near the data tells so in one look: its row stays
/// empty without a sort or a tree walk. Where nearly every query may have one, all are
/// searched.
pub(crate) fn search_order<T: Real>(tree: &MortonTree<T>, queries: &Points<T>, r2: T) -> Vec<u32> {
    match NearData::build(tree, r2) {
        Some(near) => {
            let maybe: Vec<u32> =
                (0..queries.len() as u32).into_par_iter().filter(|&q| near.may_hold(queries.get(q as usize))).collect();
            if maybe.len() as f64 > 0.9 * queries.len() as f64 {
                return tree.morton_order(queries);
            }
            let order =
                crate::runtime::cpu::order_by_key(maybe.len(), |i| tree.morton_key(queries.get(maybe[i] as usize)));
            order.into_par_iter().map(|i| maybe[i as usize]).collect()
        }
        None => tree.morton_order(queries),
    }
}

/// Cells of a coarse grid over the data's box: marked where a point within r of the data may
/// lie (a superset: every point within r of a data point lies in a marked cell). One bit a
/// cell, x along the bits of a row of words, so that the grid stays in cache and is
/// dilated a word at a time.
struct NearData {
    lo: [f64; 3],
    /// 1 / the cell's width.
    inv: f64,
    dims: [usize; 3],
    /// Words of a row of cells along x.
    row: usize,
    bits: Vec<u64>,
}

impl NearData {
    /// Cells per axis of the grid at most (besides the margins).
    const CELLS: f64 = 128.0;

    /// `None` where the test would mark nearly everything or cannot be set up (no finite
    /// bounds, a radius beyond a quarter of the data's size).
    fn build<T: Real>(tree: &MortonTree<T>, r2: T) -> Option<Self> {
        let n = tree.len();
        if n == 0 {
            return None;
        }
        let bound = |c: &[T]| {
            c.par_iter()
                .with_min_len(1 << 14)
                .fold(|| (f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v.to_f64()), b.max(v.to_f64())))
                .reduce(|| (f64::INFINITY, f64::NEG_INFINITY), |x, y| (x.0.min(y.0), x.1.max(y.1)))
        };
        let b = [bound(&tree.x), bound(&tree.y), bound(&tree.z)];
        // r widened past any rounding of a squared distance (a few ulps of T) and past the
        // underflow of a tiny one, so that "within r" in T implies |dx| <= r' on each axis.
        let tiny = if T::NAME == "f32" { 1e-18 } else { 1e-150 };
        let r = r2.to_f64().sqrt() * (1.0 + 1e-5) + tiny;
        let extent = (0..3).map(|d| b[d].1 - b[d].0).fold(0.0, f64::max);
        if !r.is_finite() || !extent.is_finite() || r * 4.0 > extent {
            return None;
        }
        // Cells half as wide as r where the grid allows: a mark then reaches about 1.5 r.
        let cell = (r / 2.0).max(extent / Self::CELLS);
        // A point within r of data point p lies within ceil(r / cell) cells of p's on each
        // axis; one more covers any rounding of the cell indices.
        let reach = (r / cell).ceil() as usize + 1;
        // Cells beyond the box by the reach of a mark on each side.
        let lo = [0, 1, 2].map(|d| b[d].0 - reach as f64 * cell);
        let dims = [0, 1, 2].map(|d| ((b[d].1 - lo[d]) / cell) as usize + reach + 1);
        let inv = 1.0 / cell;
        let row = dims[0].div_ceil(64);
        let mut grid = NearData { lo, inv, dims, row, bits: vec![0u64; row * dims[1] * dims[2]] };
        let cells: Vec<[usize; 3]> = (0..n)
            .into_par_iter()
            .with_min_len(1 << 14)
            .map(|i| grid.cell([tree.x[i], tree.y[i], tree.z[i]]).expect("the grid holds the data"))
            .collect();
        for c in cells {
            grid.bits[(c[2] * dims[1] + c[1]) * row + c[0] / 64] |= 1 << (c[0] % 64);
        }
        grid.dilate(reach);
        let marked: u64 = grid.bits.iter().map(|w| w.count_ones() as u64).sum();
        if marked as f64 > 0.8 * (dims[0] * dims[1] * dims[2]) as f64 {
            return None;
        }
        Some(grid)
    }

    /// Marks every cell within `reach` cells (on each axis) of a marked one: along x by
    /// shifts of each row's words, along y and z by ORs of neighbouring rows.
    fn dilate(&mut self, reach: usize) {
        let (row, [nx, ny, nz]) = (self.row, self.dims);
        // Along x, one bit at a time, `reach` times (reach is 2 or 3).
        for _ in 0..reach {
            for r in self.bits.chunks_mut(row) {
                let mut carry_left = 0u64; // bit 63 of the previous word, moving up
                for w in 0..row {
                    let v = r[w];
                    let next = if w + 1 < row { r[w + 1] } else { 0 };
                    r[w] = v | (v << 1) | carry_left | (v >> 1) | (next << 63);
                    carry_left = v >> 63;
                }
            }
        }
        // Bits past the last cell of a row stay clear (no cell there).
        if nx % 64 != 0 {
            let keep = (1u64 << (nx % 64)) - 1;
            for r in self.bits.chunks_mut(row) {
                r[row - 1] &= keep;
            }
        }
        // Along y (rows of a plane) and z (planes), each line ORs the lines within reach.
        for (stride, count, lines) in [(row, ny, nz), (row * ny, nz, 1)] {
            let before = self.bits.clone();
            let plane = stride * count;
            for block in 0..lines {
                for k in 0..count {
                    let (s, e) = (k.saturating_sub(reach), (k + reach).min(count - 1));
                    for w in 0..stride {
                        let mut v = 0;
                        for j in s..=e {
                            v |= before[block * plane + j * stride + w];
                        }
                        self.bits[block * plane + k * stride + w] = v;
                    }
                }
            }
        }
    }

    /// The cell of `q`, if inside the grid.
    #[inline(always)]
    fn cell<T: Real>(&self, q: [T; 3]) -> Option<[usize; 3]> {
        let mut idx = [0usize; 3];
        for d in 0..3 {
            let t = (q[d].to_f64() - self.lo[d]) * self.inv;
            if !(t >= 0.0 && t < self.dims[d] as f64) {
                return None;
            }
            idx[d] = t as usize;
        }
        Some(idx)
    }

    /// Whether `q` may have a data point within r (outside the grid it has none).
    #[inline]
    fn may_hold<T: Real>(&self, q: [T; 3]) -> bool {
        self.cell(q)
            .is_some_and(|c| self.bits[(c[2] * self.dims[1] + c[1]) * self.row + c[0] / 64] >> (c[0] % 64) & 1 != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, Distribution};
    use crate::tree::DEFAULT_LEAF_SIZE;

    #[test]
    fn queries_far_from_the_data_are_not_searched() {
        let data = generate::<f32>(Distribution::Plane, 5000, 1000.0, 1);
        let queries = generate::<f32>(Distribution::Uniform, 20_000, 1000.0, 2);
        let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
        let order = search_order(&tree, &queries, 4.0 * 4.0);
        assert!(order.len() < queries.len() / 4, "{} of {} searched", order.len(), queries.len());
        // Every query within r of a data point is among them.
        let searched: std::collections::HashSet<u32> = order.iter().copied().collect();
        for q in 0..queries.len() {
            let p = queries.get(q);
            let near = (0..data.len()).any(|j| {
                let d = data.get(j);
                crate::geometry::real::dist2(p[0], p[1], p[2], d[0], d[1], d[2]) <= 16.0
            });
            assert!(!near || searched.contains(&(q as u32)), "query {q} has a neighbour but was skipped");
        }
        // Data filling the box, at a radius that reaches some point from anywhere: every
        // query is searched, in Morton order.
        let full = generate::<f32>(Distribution::Uniform, 5000, 1000.0, 3);
        let tree = MortonTree::build(&full, DEFAULT_LEAF_SIZE);
        assert_eq!(search_order(&tree, &queries, 100.0 * 100.0), tree.morton_order(&queries));
    }
}

#[cfg(test)]
mod portable_tests {
    use super::*;
    use crate::generate::{generate, Distribution};
    use crate::tree::DEFAULT_LEAF_SIZE;

    /// The portable scan and the AVX2 one (where the CPU has it) give the same rows, bit for
    /// bit and in the same order, from 1 point (fewer than a window) to thousands, and both
    /// agree with brute force on which points are in.
    fn same_rows<T: Real>() {
        for (n, dist) in [
            (1, Distribution::Uniform),
            (5, Distribution::Uniform),
            (8, Distribution::Clustered),
            (13, Distribution::Uniform),
            (300, Distribution::Clustered),
            (3000, Distribution::Plane),
            (3000, Distribution::Uniform),
        ] {
            let data = generate::<T>(dist, n, 100.0, n as u64);
            let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
            let query = |i: usize| ([tree.x[i], tree.y[i], tree.z[i]], tree.id[i]);
            for r in [0.0, 3.0, 20.0, 1000.0] {
                let r2 = T::from_f64(r * r);
                for (above, sorted) in [(false, false), (true, false), (true, true)] {
                    let portable = block_rows::<T, false, true>(&tree, 0..n, &query, r2, above, sorted);
                    let fast = block_rows_fast(&tree, 0..n, &query, r2, above, sorted, true);
                    let what = format!("{} n={n} r={r} above={above} sorted={sorted}", T::NAME);
                    assert_eq!(portable.rows, fast.rows, "{what}: rows");
                    assert_eq!(portable.ids, fast.ids, "{what}: ids");
                    let bits = |v: &[T]| v.iter().map(|d| d.to_f64().to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&portable.d2), bits(&fast.d2), "{what}: distances");
                    if !sorted {
                        // Without squared distances: the same rows, and none stored.
                        let ids_only = block_rows::<T, false, false>(&tree, 0..n, &query, r2, above, sorted);
                        let fast_ids_only = block_rows_fast(&tree, 0..n, &query, r2, above, sorted, false);
                        for b in [&ids_only, &fast_ids_only] {
                            assert_eq!((&b.rows, &b.ids), (&portable.rows, &portable.ids), "{what}: ids only");
                            assert!(b.d2.is_empty(), "{what}: ids only, yet squared distances");
                        }
                    }
                    let mut at = 0;
                    for &(row, len) in &portable.rows {
                        let q = data.get(row as usize);
                        let want = (0..n)
                            .filter(|&j| !above || j as u32 > row)
                            .filter(|&j| {
                                let p = data.get(j);
                                crate::geometry::real::dist2(q[0], q[1], q[2], p[0], p[1], p[2]) <= r2
                            })
                            .count();
                        assert_eq!(len as usize, want, "{what}: row {row}");
                        at += len as usize;
                    }
                    assert_eq!(at, portable.ids.len());
                }
            }
        }
    }

    #[test]
    fn portable_and_avx2_scans_give_the_same_rows() {
        same_rows::<f32>();
        same_rows::<f64>();
    }
}
