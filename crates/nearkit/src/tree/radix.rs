//! The binary radix tree over sorted 64-bit keys (Karras 2012) built on the CPU in linear
//! time, and the sort of (key, id) pairs it starts from.
//!
//! Karras numbers internal node `i` by one end of its range and finds the other end and the
//! split by binary searches over the keys (`radix_node`, what the GPU runs: one thread a
//! node). The same tree is the Cartesian tree of the adjacent prefix lengths
//! `δ_j = common_prefix(j, j + 1)`: the node split at `j` covers the positions between the
//! nearest smaller `δ` on each side, and its parent is the split at whichever of those two
//! is larger (the smallest `δ` of any range is unique, since keys extended by their index
//! are distinct). `radix_tree_bottom_up` finds the nearest smaller values by a stack scan,
//! chunks in parallel, and gives every node of Karras's layout, bit for bit, without a
//! search, each after its children.

use rayon::prelude::*;

use super::{common_prefix, CHILD_POINT, TABLE_BITS};
use crate::runtime::cpu::{big_vec, scatter_by_digit, RowPtr};

/// Splits per task of the bottom-up pass.
const CHUNK: usize = 1 << 14;
/// Below this many keys a comparison sort beats the bucket pass.
const BUCKET_MIN: usize = 1 << 16;
const TABLE_SHIFT: u32 = 63 - TABLE_BITS;

/// `keyed` sorted by (key, id) with keys below 2^63, and the table of the first position of
/// each value of the keys' top `TABLE_BITS` bits (`MortonTree::key_table`). Large inputs go
/// by one stable counting pass on those top bits, then a sort within each bucket.
pub fn sort_by_key(mut keyed: Vec<(u64, u32)>) -> (Vec<(u64, u32)>, Vec<u32>) {
    let n = keyed.len();
    let buckets = 1usize << TABLE_BITS;
    let bucket = |k: u64| (k >> TABLE_SHIFT) as usize;
    if n < BUCKET_MIN {
        if n < 1 << 12 {
            keyed.sort_unstable();
        } else {
            keyed.par_sort_unstable();
        }
        // Each bucket's first position, in one pass over the sorted keys (a search per bucket
        // cost more than the sort for a few thousand keys).
        let mut table = Vec::with_capacity(buckets + 1);
        let mut p = 0;
        for b in 0..=buckets as u64 {
            while p < n && keyed[p].0 < b << TABLE_SHIFT {
                p += 1;
            }
            table.push(p as u32);
        }
        return (keyed, table);
    }
    let chunk = n.div_ceil(rayon::current_num_threads().max(1));
    let mut sorted: Vec<(u64, u32)> = big_vec(n);
    let table = scatter_by_digit(&keyed, &mut sorted, buckets, chunk, |v| bucket(v.0));
    drop(keyed);
    let out = RowPtr(sorted.as_mut_ptr());
    (0..buckets).into_par_iter().with_min_len(64).for_each(|b| {
        let (s, e) = (table[b] as usize, table[b + 1] as usize);
        if e - s > 1 {
            // SAFETY: buckets are disjoint spans of `sorted`.
            let span = unsafe { out.span(s, e - s) };
            if span.len() > BUCKET_MIN {
                span.par_sort_unstable();
            } else {
                span.sort_unstable();
            }
        }
    });
    (sorted, table)
}

/// An internal node of the radix tree, as Karras numbers and stores it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RadixNode {
    /// Its number: 0 for the root, else its last position when it is a left child and its
    /// first when a right one.
    pub node: usize,
    /// The positions `first..=last` it covers.
    pub first: usize,
    pub last: usize,
    /// Its children: the left one is numbered `split`, the right one `split + 1`, either a
    /// single point (`CHILD_POINT` set) when its range is one position.
    pub left: u32,
    pub right: u32,
}

impl RadixNode {
    /// Karras's "other end": the end of its range that is not its number.
    pub fn other_end(&self) -> u32 {
        (if self.node == self.first { self.last } else { self.first }) as u32
    }
}

/// Where a node's parent lies, seen from the node's split.
enum Parent {
    Root,
    /// The nearest smaller prefix after the node (it is a left child).
    After,
    /// The nearest smaller prefix before it (a right child).
    Before,
}

#[inline(always)]
fn node_of(split: usize, first: usize, last: usize, parent: Parent) -> RadixNode {
    let node = match parent {
        Parent::Root => 0,
        Parent::After => last,
        Parent::Before => first,
    };
    let left = if first == split { split as u32 | CHILD_POINT } else { split as u32 };
    let right = if last == split + 1 { (split + 1) as u32 | CHILD_POINT } else { (split + 1) as u32 };
    RadixNode { node, first, last, left, right }
}

/// Calls `visit` once on every internal node of the radix tree over the sorted `keys` (ties
/// told apart by position, as in `common_prefix`), each after both of its children.
///
/// The pass is the stack scan for nearest smaller prefixes: when split `j` pops split `s`,
/// `j` is the nearest smaller after `s` and the entry below it the nearest smaller before,
/// so `s`'s node is known and its children are done (they were popped before it). Chunks of
/// splits run in parallel; a node whose nearest smaller before lies in an earlier chunk, or
/// whose nearest smaller after lies in a later one, straddles chunks. Those form the top of
/// the tree (their ancestors straddle too) and finish in one more scan over them alone.
pub fn radix_tree_bottom_up(keys: &[u64], visit: impl Fn(&RadixNode) + Sync) {
    let n = keys.len();
    if n < 2 {
        return;
    }
    let m = n - 1;
    let delta = |j: usize| common_prefix(keys, j, j as i64 + 1) as u8;
    let straddling: Vec<Vec<(usize, u8)>> = (0..m.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let (c0, c1) = (c * CHUNK, ((c + 1) * CHUNK).min(m));
            let mut stack: Vec<(usize, u8)> = Vec::with_capacity(128);
            let mut straddle = Vec::new();
            for j in c0..c1 {
                let dj = delta(j);
                while let Some(&(s, ds)) = stack.last() {
                    if ds < dj {
                        break;
                    }
                    stack.pop();
                    match stack.last() {
                        Some(&(b, db)) => {
                            let parent = if dj > db { Parent::After } else { Parent::Before };
                            visit(&node_of(s, b + 1, j, parent));
                        }
                        None => straddle.push((s, ds)),
                    }
                }
                stack.push((j, dj));
            }
            // Popped with nothing below come first in position order, then the stack's rest.
            straddle.extend(stack);
            straddle
        })
        .collect();
    let mut stack: Vec<(usize, u8)> = Vec::with_capacity(256);
    for (j, dj) in straddling.into_iter().flatten() {
        while let Some(&(s, ds)) = stack.last() {
            if ds < dj {
                break;
            }
            stack.pop();
            let node = match stack.last() {
                Some(&(b, db)) => node_of(s, b + 1, j, if dj > db { Parent::After } else { Parent::Before }),
                None => node_of(s, 0, j, Parent::After),
            };
            visit(&node);
        }
        stack.push((j, dj));
    }
    while let Some((s, _)) = stack.pop() {
        let node = match stack.last() {
            Some(&(b, _)) => node_of(s, b + 1, m, Parent::Before),
            None => node_of(s, 0, m, Parent::Root),
        };
        visit(&node);
    }
}

/// Karras's columns over the sorted `keys`: (left, right, other end) of each internal node
/// by its number, as `radix_node` gives them one at a time.
pub fn radix_topology(keys: &[u64]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let m = keys.len().saturating_sub(1);
    let (mut left, mut right, mut other_end) = (vec![0u32; m], vec![0u32; m], vec![0u32; m]);
    let (l, r, o) = (RowPtr(left.as_mut_ptr()), RowPtr(right.as_mut_ptr()), RowPtr(other_end.as_mut_ptr()));
    radix_tree_bottom_up(keys, |v| {
        // SAFETY: every node is visited once, so each slot is written once.
        unsafe {
            l.write(v.node, v.left);
            r.write(v.node, v.right);
            o.write(v.node, v.other_end());
        }
    });
    (left, right, other_end)
}

#[cfg(test)]
mod tests {
    use super::super::radix_node;
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    fn keys(n: usize, spread: u64, seed: u64) -> Vec<u64> {
        let mut s = seed;
        let mut k: Vec<u64> = (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 1) % spread
            })
            .collect();
        k.sort_unstable();
        k
    }

    /// The linear build gives Karras's nodes, each once, children before parents.
    fn check(keys: &[u64]) {
        let m = keys.len().saturating_sub(1);
        let done: Vec<AtomicBool> = (0..m).map(|_| AtomicBool::new(false)).collect();
        let visits = AtomicUsize::new(0);
        radix_tree_bottom_up(keys, |v| {
            assert_eq!((v.left, v.right, v.other_end()), radix_node(keys, v.node), "node {} of {}", v.node, keys.len());
            let (s, e) = (v.node.min(v.other_end() as usize), v.node.max(v.other_end() as usize));
            assert_eq!((s, e), (v.first, v.last));
            for c in [v.left, v.right] {
                if c & CHILD_POINT == 0 {
                    assert!(done[c as usize].load(SeqCst), "child {c} before node {}", v.node);
                }
            }
            assert!(!done[v.node].swap(true, SeqCst), "node {} visited once", v.node);
            visits.fetch_add(1, SeqCst);
        });
        assert_eq!(visits.load(SeqCst), m);
        let (left, right, other_end) = radix_topology(keys);
        for i in 0..m {
            assert_eq!((left[i], right[i], other_end[i]), radix_node(keys, i));
        }
    }

    #[test]
    fn linear_build_matches_karras() {
        check(&[]);
        check(&[5]);
        check(&[1, 2]);
        check(&[7; 5]);
        check(&[0, 1, 1, 1, 4, 5, 5, 9, 12, 12, 12, 13]);
        for (n, spread, seed) in [(5000, 3000, 1), (100_000, 1 << 62, 2), (70_000, 40, 3), (50_000, 1, 4)] {
            check(&keys(n, spread, seed));
        }
        // More than one chunk, with keys close together and far apart.
        let mut k = keys(40_000, 1 << 20, 5);
        k.extend(keys(40_000, 1 << 62, 6).iter().map(|v| v | 1 << 61));
        k.sort_unstable();
        check(&k);
    }

    #[test]
    fn bucket_sort_matches_a_comparison_sort() {
        for (n, spread) in [(200_000usize, 1u64 << 63), (150_000, 1 << 50), (100_000, 7)] {
            let mut s = 9u64;
            let keyed: Vec<(u64, u32)> = (0..n)
                .map(|i| {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((s >> 1) % spread, i as u32)
                })
                .collect();
            let mut want = keyed.clone();
            want.sort_unstable();
            let table_want: Vec<u32> = (0..=(1u64 << TABLE_BITS))
                .map(|b| want.partition_point(|&(k, _)| k < (b << TABLE_SHIFT)) as u32)
                .collect();
            // Chunks per thread: one, two and seven threads.
            for threads in [1, 2, 7] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let (got, table) = pool.install(|| sort_by_key(keyed.clone()));
                assert_eq!(got, want, "{threads} threads");
                assert_eq!(table, table_want, "{threads} threads");
            }
        }
    }
}
