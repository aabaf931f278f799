//! What the CPU code of every capability shares: rows written in parallel, large result
//! vectors in huge pages, and prefetch hints.

use crate::error::{Error, Result};

/// A result array that parallel queries write row by row (each query its own row).
#[derive(Clone, Copy)]
pub(crate) struct RowPtr<V>(pub *mut V);
// SAFETY: used only to write disjoint rows from different threads.
unsafe impl<V: Send> Send for RowPtr<V> {}
unsafe impl<V: Send> Sync for RowPtr<V> {}

impl<V> RowPtr<V> {
    /// # Safety
    /// Row `q` must lie inside the array, and no one else may touch it meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn row(&self, q: usize, k: usize) -> &mut [V] {
        std::slice::from_raw_parts_mut(self.0.add(q * k), k)
    }

    /// # Safety
    /// `start..start + len` must lie inside the array, and no one else may touch it meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn span(&self, start: usize, len: usize) -> &mut [V] {
        std::slice::from_raw_parts_mut(self.0.add(start), len)
    }

    /// Asks for slot `i`'s cache line ahead of a write (a hint; nothing is touched).
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        prefetch(self.0.wrapping_add(i), 1)
    }

    /// Writes slot `i`, which may be uninitialized (no reference to it is made).
    ///
    /// # Safety
    /// Slot `i` must lie inside the allocation, and no one else may touch it meanwhile.
    pub(crate) unsafe fn write(&self, i: usize, v: V) {
        self.0.add(i).write(v)
    }

    /// Copies `src` to slots `start..start + src.len()`, which may be uninitialized.
    ///
    /// # Safety
    /// Those slots must lie inside the allocation, and no one else may touch them meanwhile.
    pub(crate) unsafe fn copy_from(&self, start: usize, src: &[V])
    where
        V: Copy,
    {
        std::ptr::copy_nonoverlapping(src.as_ptr(), self.0.add(start), src.len())
    }
}

/// An error, rather than an abort, when a result of `rows` × `per_row` values of `V` cannot
/// be allocated: the system is asked for the room (and it is given back at once).
pub(crate) fn check_room<V>(rows: usize, per_row: usize, what: &str) -> Result<()> {
    let bytes = (rows as u128) * (per_row as u128) * (std::mem::size_of::<V>() as u128);
    let fits = usize::try_from(bytes).ok().is_some_and(|b| Vec::<u8>::new().try_reserve_exact(b).is_ok());
    if fits {
        return Ok(());
    }
    Err(Error::OutOfMemory(format!(
        "{what} take {bytes} bytes ({rows} rows of {per_row}), more than this machine can give: ask for a smaller \
         k or fewer queries"
    )))
}

/// The position of the first item for which `bad` holds, searched in parallel by parts of
/// 65,536 items, each scanned in order: rayon's `position_first` by item took 2 to 30 times as
/// long as a plain loop (1M rays on 2 cores: 5.3 against 2.8 ms; the 75,408 triangles of the
/// bunny: 0.6-0.9 ms against 26 µs).
pub(crate) fn first_where<T: Sync>(items: &[T], bad: impl Fn(&T) -> bool + Sync) -> Option<usize> {
    use rayon::prelude::*;
    const PART: usize = 1 << 16;
    if items.len() <= PART {
        return items.iter().position(bad);
    }
    items.par_chunks(PART).enumerate().find_map_first(|(p, part)| part.iter().position(&bad).map(|i| p * PART + i))
}

/// An empty vector with room for `n` values, in huge pages where the system grants them on
/// request (Linux with transparent huge pages set to `madvise`), for the whole 2 MiB pages
/// inside it: filling hundreds of MB of fresh 4 KiB pages took about a tenth of a kNN run in
/// page faults, and building a CPU tree then querying it a third of the build. For results
/// that a caller fills (through `spare_capacity_mut`) from a `*_into` call, and for large
/// arrays the library fills itself.
pub fn big_vec<V>(n: usize) -> Vec<V> {
    huge_pages(Vec::with_capacity(n), n)
}

/// [`big_vec`] of `rows × per_row` values, or an `OutOfMemory` error naming `what` where the
/// machine cannot give them (where `big_vec` would abort the process).
pub fn try_big_vec<V>(rows: usize, per_row: usize, what: &str) -> Result<Vec<V>> {
    let oom = || {
        let bytes = rows as u128 * per_row as u128 * std::mem::size_of::<V>() as u128;
        Error::OutOfMemory(format!(
            "{what} take {bytes} bytes ({rows} rows of {per_row}), more than this machine can give: ask for fewer"
        ))
    };
    let n = rows.checked_mul(per_row).ok_or_else(oom)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom())?;
    Ok(huge_pages(v, n))
}

/// `v` (with room for `n` values) advised into huge pages.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
fn huge_pages<V>(v: Vec<V>, n: usize) -> Vec<V> {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = n * std::mem::size_of::<V>();
        if bytes >= HUGE {
            // Whole huge pages inside the allocation only.
            let lo = (v.as_ptr() as usize).next_multiple_of(HUGE);
            let hi = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
            if hi > lo {
                // SAFETY: advice on pages of our own allocation; it changes no contents, and
                // failure (an old kernel) is harmless.
                unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
            }
        }
    }
    v
}

/// `iter` collected into a [`big_vec`] (in huge pages where granted).
pub(crate) fn big_collect<V: Send>(iter: impl rayon::iter::IndexedParallelIterator<Item = V>) -> Vec<V> {
    use rayon::prelude::*;
    let mut v = big_vec(iter.len());
    v.par_extend(iter);
    v
}

/// A thread faulting in the pages of memory about to be written (one write per 4 KiB page,
/// in parallel), joined when dropped: on every path, before the memory is written or freed.
pub(crate) struct Toucher(Option<std::thread::JoinHandle<()>>);

impl Toucher {
    /// Below this many bytes in all the pages are left to fault in as they are written.
    const MIN_BYTES: usize = 16 << 20;

    /// Starts touching `(address, bytes)` ranges that the caller owns, does not read, and
    /// writes only after dropping the toucher.
    pub(crate) fn start(ranges: &[(usize, usize)]) -> Self {
        if ranges.iter().map(|r| r.1).sum::<usize>() < Self::MIN_BYTES {
            return Toucher(None);
        }
        let ranges = ranges.to_vec();
        Toucher(Some(std::thread::spawn(move || {
            use rayon::prelude::*;
            const HUGE: usize = 2 << 20;
            // Every range's 2 MiB parts in one parallel loop.
            let parts: Vec<(usize, usize)> = ranges
                .iter()
                .flat_map(|&(addr, bytes)| {
                    (0..bytes.div_ceil(HUGE)).map(move |c| (addr + c * HUGE, ((c + 1) * HUGE).min(bytes) - c * HUGE))
                })
                .collect();
            parts.into_par_iter().for_each(|(addr, bytes)| {
                for off in (0..bytes).step_by(4096) {
                    // SAFETY: inside the caller's range, which nothing else touches until this
                    // thread is joined; a zero byte in memory that is then overwritten.
                    unsafe { ((addr + off) as *mut u8).write_volatile(0) };
                }
            });
        })))
    }

    /// [`Toucher::start`] on the memory of two slices about to be written.
    pub(crate) fn start_on<A, B>(a: &mut [A], b: &mut [B]) -> Self {
        Self::start(&[
            (a.as_mut_ptr() as usize, std::mem::size_of_val(a)),
            (b.as_mut_ptr() as usize, std::mem::size_of_val(b)),
        ])
    }
}

impl Drop for Toucher {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            // A panic there is a bug in the loop above, not the caller's: re-raise it.
            if let Err(e) = t.join() {
                std::panic::resume_unwind(e);
            }
        }
    }
}

/// Asks for the cache lines of `len` values from `at` (a hint: no memory is touched).
#[inline(always)]
pub(crate) fn prefetch<V>(at: *const V, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint and never faults, wherever it points.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(len - 1) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}

/// One stable counting pass: `src` scattered into `dst` (cleared first) by `digit` (below
/// `digits`), chunks of `chunk` values counted and placed in parallel, each chunk's values of
/// a digit after those of the chunks before it. Returns each digit's first slot (`digits + 1`
/// entries). `src` holds fewer than 2^32 values.
pub(crate) fn scatter_by_digit<V: Copy + Send + Sync>(
    src: &[V],
    dst: &mut Vec<V>,
    digits: usize,
    chunk: usize,
    digit: impl Fn(V) -> usize + Sync,
) -> Vec<u32> {
    use rayon::prelude::*;
    let n = src.len();
    dst.clear();
    dst.reserve(n);
    let hist: Vec<Vec<u32>> = src
        .par_chunks(chunk)
        .map(|c| {
            let mut h = vec![0u32; digits];
            c.iter().for_each(|&v| h[digit(v)] += 1);
            h
        })
        .collect();
    let mut first = Vec::with_capacity(digits + 1);
    let mut at = 0u32;
    for d in 0..digits {
        first.push(at);
        at += hist.iter().map(|h| h[d]).sum::<u32>();
    }
    first.push(at);
    // Chunk c's first slot for digit d: the digit's first, then what earlier chunks put there.
    let mut starts: Vec<Vec<u32>> = Vec::with_capacity(hist.len());
    starts.push(first[..digits].to_vec());
    for c in 1..hist.len() {
        let next = starts[c - 1].iter().zip(&hist[c - 1]).map(|(s, h)| s + h).collect();
        starts.push(next);
    }
    drop(hist);
    let out = RowPtr(dst.as_mut_ptr());
    src.par_chunks(chunk).zip(starts).for_each(|(c, mut next)| {
        for &v in c {
            let d = digit(v);
            // SAFETY: the starts tile 0..n (within the reserved capacity); each chunk writes
            // its own slots of each digit, and every slot once.
            unsafe { out.write(next[d] as usize, v) };
            next[d] += 1;
        }
    });
    // SAFETY: every slot of 0..n was written above.
    unsafe { dst.set_len(n) };
    first
}

/// `dst[i] = f(src[i])` for every i, in parallel, into memory that may be uninitialised
/// (all of it is written): results copied into the caller's place and type.
pub(crate) fn write_mapped<S: Copy + Sync, O: Send>(
    dst: &mut [std::mem::MaybeUninit<O>],
    src: &[S],
    f: impl Fn(S) -> O + Sync,
) {
    use rayon::prelude::*;
    assert_eq!(dst.len(), src.len(), "one place a value");
    dst.par_iter_mut().with_min_len(1 << 14).zip(src).for_each(|(o, &s)| {
        o.write(f(s));
    });
}

/// The indices `0..n` ordered by `key` (ties by index): a parallel least-significant-digit
/// radix sort, three passes of 11 bits over (key, index) packed in a u64. It stands in for a
/// comparison sort where only an order's locality matters (queries along the Morton curve).
pub(crate) fn order_by_key(n: usize, key: impl Fn(usize) -> u32 + Sync) -> Vec<u32> {
    order_by_key_top(n, 32, key)
}

/// [`order_by_key`] by the top `bits` bits of each key only (equal tops in index order): one
/// pass of the sort per 11 bits.
pub(crate) fn order_by_key_top(n: usize, bits: u32, key: impl Fn(usize) -> u32 + Sync) -> Vec<u32> {
    use rayon::prelude::*;
    const BITS: u32 = 11;
    const DIGITS: usize = 1 << BITS;
    // The passes sort bits `low..32` of the key (three passes: all 32).
    let passes = bits.clamp(1, 32).div_ceil(BITS);
    let low = 32u32.saturating_sub(passes * BITS);
    let mut a: Vec<u64> = big_collect((0..n).into_par_iter().map(|i| (key(i) as u64) << 32 | i as u64));
    if n <= 1 << 14 {
        a.sort_unstable_by_key(|&v| (v >> (32 + low), v as u32));
        return a.into_iter().map(|v| v as u32).collect();
    }
    let mut b = big_vec(n);
    let chunk = n.div_ceil(rayon::current_num_threads() * 4);
    for pass in 0..passes {
        let shift = 32 + low + BITS * pass;
        scatter_by_digit(&a, &mut b, DIGITS, chunk, |v| ((v >> shift) as usize) & (DIGITS - 1));
        std::mem::swap(&mut a, &mut b);
    }
    big_collect(a.into_par_iter().map(|v| v as u32))
}

/// The memory the system could give now (Linux's MemAvailable), if known. It is read from the
/// operating system, not configured: a guard against results that would not fit.
pub(crate) fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_where_finds_the_first_of_several() {
        for n in [0usize, 1, 1000, 65_536, 65_537, 300_001] {
            let items: Vec<usize> = (0..n).collect();
            assert_eq!(first_where(&items, |_| false), None, "{n}");
            for bad in [[0, 7], [65_535, 65_536], [65_536, 200_000], [131_073, 299_999], [n.saturating_sub(1), n]] {
                let want = bad.iter().copied().filter(|&b| b < n).min();
                assert_eq!(first_where(&items, |v| bad.contains(v)), want, "{n} {bad:?}");
            }
        }
    }

    #[test]
    fn order_by_key_sorts_by_key_then_index() {
        for (n, spread) in [(10usize, 3u64), (100_000, 1 << 32), (70_000, 5)] {
            let mut s = 3u64;
            let keys: Vec<u32> = (0..n)
                .map(|_| {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((s >> 20) % spread) as u32
                })
                .collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (keys[i as usize], i));
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                assert_eq!(pool.install(|| order_by_key(n, |i| keys[i])), want, "{n} keys, {threads} threads");
                // By the top bits only: equal tops in index order.
                for bits in [11, 22] {
                    let mut top: Vec<u32> = (0..n as u32).collect();
                    top.sort_by_key(|&i| (keys[i as usize] >> (32 - bits), i));
                    let got = pool.install(|| order_by_key_top(n, bits, |i| keys[i]));
                    assert_eq!(got, top, "{n} keys, top {bits} bits, {threads} threads");
                }
            }
        }
    }
}
