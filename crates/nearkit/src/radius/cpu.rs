//! Radius queries on the CPU: blocks of queries (in Morton order, so each block walks one part
//! of the tree) collect their rows in parallel, then every row is copied to its place.
//!
//! Queries go in groups of `GROUP` consecutive ones (neighbours along the Morton curve): the
//! group walks the tree once, with its bounding box, and lists the runs of sorted points
//! (leaves) within r of the box (`search::runs_near`); each query then scans those runs whose
//! box is within r of it. Runs come in ascending position, so a row is in the same tree
//! order as the GPU's one-query walk (radius.cu) gives.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use super::{beyond_memory, check_total, memory_limit, too_many, RadiusOptions, Within};
use crate::error::Result;
use crate::geometry::real::Real;
use crate::runtime::cpu::{big_vec, prefetch, RowPtr};
use crate::tree::search;
use crate::tree::MortonTree;

/// Queries per block: enough to amortise a task, few enough to balance clustered data.
const BLOCK: usize = 256;
/// Queries that walk the tree together.
const GROUP: usize = 32;
/// Points of the runs a group's queries scan (nodes this small are not descended).
const RUN: usize = 64;
const _: () = assert!(RUN <= search::RUN_MAX && crate::tree::DEFAULT_LEAF_SIZE as usize <= search::RUN_MAX);

/// One block's rows: (row, length) in search order, and their (d², id) entries.
struct Block<T> {
    rows: Vec<(u32, u32)>,
    entries: Vec<(T, u32)>,
}

/// The rows of `n_rows` queries: `query(i)` gives the i-th query in search order and its row.
/// With `above`, a row lists only ids greater than the row's own (each pair of a self-join
/// once).
pub(crate) fn within<T: Real>(
    tree: &MortonTree<T>,
    n_rows: usize,
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
    let blocks: Vec<Block<T>> = (0..n_rows.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            if stop.load(Ordering::Relaxed) {
                return Block { rows: Vec::new(), entries: Vec::new() };
            }
            let range = b * BLOCK..((b + 1) * BLOCK).min(n_rows);
            let block = block_rows_fast(tree, range, &query, r2, above, opts.sorted);
            if total.fetch_add(block.entries.len() as u64, Ordering::Relaxed) + block.entries.len() as u64 > limit {
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
    let (mut ids, mut distances) = (big_vec::<u32>(total), big_vec::<T>(total));
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
                    prefetch(ds_at.0.wrapping_add(a), ahead_len as usize);
                }
            }
            let start = offsets[row as usize] as usize;
            for (j, &(d2, id)) in block.entries[at..at + len as usize].iter().enumerate() {
                // SAFETY: row `row`'s slots start..start + len lie inside both allocations
                // (offsets sum the lengths) and only this row's block writes them.
                unsafe {
                    ids_at.write(start + j, id);
                    ds_at.write(start + j, d2.sqrt());
                }
            }
            at += len as usize;
        }
    });
    // SAFETY: every row was written whole, and the rows tile 0..total.
    unsafe {
        ids.set_len(total);
        distances.set_len(total);
    }
    Ok(Within { offsets, ids, distances })
}

/// The rows of the queries `range` (in search order), group after group.
#[inline(always)]
fn block_rows<T: Real>(
    tree: &MortonTree<T>,
    range: std::ops::Range<usize>,
    query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
    r2: T,
    above: bool,
    sorted: bool,
) -> Block<T> {
    let mut block = Block { rows: Vec::with_capacity(range.len()), entries: Vec::new() };
    let mut runs = Vec::new();
    let mut group = [([T::ZERO; 3], 0u32); GROUP];
    for g in range.clone().step_by(GROUP) {
        let m = GROUP.min(range.end - g);
        for (j, slot) in group[..m].iter_mut().enumerate() {
            *slot = query(g + j);
        }
        search::runs_near(tree, &group[..m], r2, RUN, &mut runs);
        for &(q, row) in &group[..m] {
            let start = block.entries.len();
            let first_id = if above { row as u64 + 1 } else { 0 };
            search::scan_runs(tree, &runs, q, r2, first_id, &mut block.entries);
            let row_entries = &mut block.entries[start..];
            if sorted {
                sort_row(row_entries);
            }
            block.rows.push((row, row_entries.len() as u32));
        }
    }
    block
}

/// [`block_rows`], compiled for AVX2 where the CPU has it: the distance loop of `scan_runs`
/// then runs eight f32 (four f64) lanes at a time, each lane the scalar code's operations, so
/// the bits are the same.
fn block_rows_fast<T: Real>(
    tree: &MortonTree<T>,
    range: std::ops::Range<usize>,
    query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
    r2: T,
    above: bool,
    sorted: bool,
) -> Block<T> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Real>(
            tree: &MortonTree<T>,
            range: std::ops::Range<usize>,
            query: &(impl Fn(usize) -> ([T; 3], u32) + Sync),
            r2: T,
            above: bool,
            sorted: bool,
        ) -> Block<T> {
            block_rows(tree, range, query, r2, above, sorted)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(tree, range, query, r2, above, sorted) };
    }
    block_rows(tree, range, query, r2, above, sorted)
}

/// Each of `n` queries' number of points within `r2`, in query order.
pub(crate) fn count_within<T: Real>(
    tree: &MortonTree<T>,
    queries: &crate::geometry::points::Points<T>,
    r2: T,
) -> Vec<u32> {
    let order = tree.morton_order(queries);
    let mut counts = vec![0u32; queries.len()];
    let at = RowPtr(counts.as_mut_ptr());
    order.par_chunks(GROUP).for_each_init(Vec::new, |runs, chunk| {
        let group: Vec<([T; 3], u32)> = chunk.iter().map(|&q| (queries.get(q as usize), q)).collect();
        search::runs_near(tree, &group, r2, RUN, runs);
        for &(p, q) in &group {
            let c = search::count_runs(tree, runs, p, r2) as u32;
            // SAFETY: each query appears once in `order`, so one task writes its slot.
            unsafe { at.write(q as usize, c) };
        }
    });
    counts
}

/// Sorts a row by (d², id): a total order, so any sort gives the same row.
pub(crate) fn sort_row<T: Real>(row: &mut [(T, u32)]) {
    let before = |a: &(T, u32), b: &(T, u32)| a.0 < b.0 || (a.0 == b.0 && a.1 < b.1);
    if row.len() <= 32 {
        for i in 1..row.len() {
            let v = row[i];
            let mut j = i;
            while j > 0 && before(&v, &row[j - 1]) {
                row[j] = row[j - 1];
                j -= 1;
            }
            row[j] = v;
        }
    } else {
        row.sort_unstable_by(|a, b| {
            if before(a, b) {
                std::cmp::Ordering::Less
            } else if before(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
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
