// Closest A–B pairs and the all-nearest join (the plan is in pairs/cpu.rs; the
// searches mirror tree/search.rs line for line, so both backends return the same bits).

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

// An upper bound of A i's nearest squared distance: the closest of the points within `window`
// positions of i's place in B's Morton order (a real distance, so the k-th smallest bound over
// all A bounds their k-th nearest distance), counted straight into a histogram of the top 16
// bits of each bound (bits are monotone for values >= 0); select_threshold reads the k-th.
// The points within `window` positions of (qx, qy, qz)'s place in the tree's Morton order
// (MortonTree::lower_bound: codes of sorted points are recomputed, not stored), each offered
// to f(j).
template <typename T, typename F>
__device__ __forceinline__ void morton_window(const Tree<T>& t, T qx, T qy, T qz, u32 window, F f) {
    u64 code = morton_code(t.frame, qx, qy, qz);
    u32 b = (u32)(code >> TABLE_SHIFT);
    u32 lo = t.key_table[b], hi = t.key_table[b + 1];  // first code >= code lies in [lo, hi]
    while (lo < hi) {
        u32 mid = lo + (hi - lo) / 2;
        if (morton_code(t.frame, t.x[mid], t.y[mid], t.z[mid]) < code) lo = mid + 1; else hi = mid;
    }
    u32 s = lo > window ? lo - window : 0;
    u32 e = max(min(lo + window, t.n), s + 1);
    for (u32 j = s; j < e; j++) f(j);
}

template <typename T>
__device__ void window_bound_impl(const T* ax, const T* ay, const T* az, u32 na, Tree<T> t, u32 window, u32 per_warp,
                                  u32* hist) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= na) return;
    T qx = ax[i], qy = ay[i], qz = az[i];
    T best = t_inf<T>();
    morton_window(t, qx, qy, qz, window, [&](u32 j) { best = t_min(best, dist2(qx, qy, qz, t.x[j], t.y[j], t.z[j])); });
    // With many queries, one value per warp, its minimum: a million same-bin atomics
    // serialise in L2, and the k-th smallest of the warp minima still bounds the k-th smallest
    // nearest distance from above (each of those k warps holds a query at least that close).
    if (!per_warp) {
        atomicAdd(&hist[ordered_bits(best) >> (sizeof(T) * 8 - 16)], 1u);
        return;
    }
    u32 active = __activemask();
    for (int off = 16; off > 0; off /= 2) {
        T other = __shfl_down_sync(active, best, off);
        if ((threadIdx.x & 31) + off < 32 && ((active >> ((threadIdx.x & 31) + off)) & 1)) best = t_min(best, other);
    }
    if ((threadIdx.x & 31) == __ffs(active) - 1) atomicAdd(&hist[ordered_bits(best) >> (sizeof(T) * 8 - 16)], 1u);
}
NK_INSTANTIATE(window_bound, (const R* ax, const R* ay, const R* az, u32 na, Tree<R> t, u32 window, u32 per_warp, u32* hist),
               (ax, ay, az, na, t, window, per_warp, hist))

// The threshold from the histogram, in two coalesced steps: per-bucket sums of 256 bins
// (select_threshold_sums, 256 blocks), then one block finds the bucket and the bin holding
// the k-th smallest value and lowers *tau to that bin's largest value (an upper bound on the
// k-th smallest). Fewer than k values: *tau is left as it is.
extern "C" __global__ void select_threshold_sums(const u32* hist, u32* sums) {
    typedef cub::BlockReduce<u32, 256> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    u32 total = Reduce(tmp).Sum(hist[blockIdx.x * 256 + threadIdx.x]);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

template <typename T>
__device__ void select_threshold_impl(const u32* hist, const u32* sums, u32 k, T* tau) {
    typedef cub::BlockScan<u32, 256> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ u32 bucket, before_bucket;
    u32 v = sums[threadIdx.x], excl;
    Scan(tmp).ExclusiveSum(v, excl);
    if (threadIdx.x == 0) bucket = 0xffffffffu;
    __syncthreads();
    if (excl < k && excl + v >= k) { bucket = threadIdx.x; before_bucket = excl; }
    __syncthreads();
    if (bucket == 0xffffffffu) return;
    u32 h = hist[bucket * 256 + threadIdx.x];
    Scan(tmp).ExclusiveSum(h, excl);
    excl += before_bucket;
    if (excl < k && excl + h >= k) {
        u32 bin = bucket * 256 + threadIdx.x;
        const int shift = sizeof(T) * 8 - 16;
        u64 top = ((u64)(bin + 1) << shift) - 1;
        T val = top >= ordered_bits(t_inf<T>()) ? t_inf<T>() : from_ordered_bits<T>(top);
        *tau = t_min(*tau, val);
    }
}
NK_INSTANTIATE(select_threshold, (const u32* hist, const u32* sums, u32 k, R* tau), (hist, sums, k, tau))

// Offers to (bd, bid) every point that can lie within squared distance bd of q, and maybe
// more: the key table's buckets under the Morton cells that the box q ± r meets, of the
// finest level whose cells are at least the box's size (so at most two a side). r is √bd with
// a margin far above the rounding of any distance computed within bd, so no such point lies
// outside the box; a box's points lie in the cells between its corners' (cells are monotone
// in each coordinate). False, and nothing offered, where those buckets hold more than `most`
// points or the cells are coarser than 1/16 of the frame a side.
template <typename T>
__device__ __forceinline__ bool ball_scan(const Tree<T>& t, T qx, T qy, T qz, u32 most, T& bd, u32& bid) {
    const T* f = t.frame;
    T r = sqrt(bd) * (T)1.0001 + (T)1e-30;
    u32 lo[3] = {morton_cell(qx - r, f[0], f[3]), morton_cell(qy - r, f[1], f[3]), morton_cell(qz - r, f[2], f[3])};
    u32 hi[3] = {morton_cell(qx + r, f[0], f[3]), morton_cell(qy + r, f[1], f[3]), morton_cell(qz + r, f[2], f[3])};
    u32 span = max(hi[0] - lo[0], max(hi[1] - lo[1], hi[2] - lo[2]));
    // Cells of 2^s finest cells a side, the least s with 2^s >= span.
    u32 s = span <= 1 ? 0 : 32 - __clz(span - 1);
    if (s > 21 - 4) return false;
    u64 spread[3][2];
    for (int a = 0; a < 3; a++) {
        spread[a][0] = spread3_21(lo[a] >> s << s) << a;
        spread[a][1] = spread3_21(hi[a] >> s << s) << a;
    }
    u32 first[8], end[8];
    u32 ranges = 0, total = 0;
    for (int c = 0; c < 8; c++) {
        int x = c & 1, y = (c >> 1) & 1, z = c >> 2;
        if ((x && lo[0] >> s == hi[0] >> s) || (y && lo[1] >> s == hi[1] >> s) || (z && lo[2] >> s == hi[2] >> s)) continue;
        u64 code = spread[0][x] | spread[1][y] | spread[2][z];
        u64 last = code + ((1ull << (3 * s)) - 1);
        u32 b0 = t.key_table[code >> TABLE_SHIFT], b1 = t.key_table[(last >> TABLE_SHIFT) + 1];
        bool seen = false;
        for (u32 j = 0; j < ranges; j++) seen |= first[j] == b0 && end[j] == b1;
        if (seen) continue;
        first[ranges] = b0;
        end[ranges] = b1;
        ranges++;
        total += b1 - b0;
    }
    if (total > most) return false;
    for (u32 j = 0; j < ranges; j++) scan_points(t, first[j], end[j], qx, qy, qz, bd, bid);
    return true;
}

// Offers to (bd, bid) every point that can lie within squared distance bd of q, and maybe
// more: the points of the key table's cells (TABLE_BITS / 3 levels: 32 a side) that the box
// q ± r meets, r as in ball_scan. False where the box meets more than three cells a side, a
// cell holds more than `cell_most` points (the table is coarse there for the points' spread:
// on a surface a cell holds many points, few of them near q) or all more than `most`; the
// points offered before that stay offered (a walk from there still ends at the first point
// in (squared distance, id) order).
template <typename T>
__device__ __forceinline__ bool cell_scan(const Tree<T>& t, T qx, T qy, T qz, u32 cell_most, u32 most, T& bd, u32& bid) {
    const u32 level = TABLE_BITS / 3, shift = 21 - level, spare = TABLE_BITS - 3 * level;
    const T* f = t.frame;
    T r = sqrt(bd) * (T)1.0001 + (T)1e-30;
    u32 lo[3] = {morton_cell(qx - r, f[0], f[3]) >> shift, morton_cell(qy - r, f[1], f[3]) >> shift,
                 morton_cell(qz - r, f[2], f[3]) >> shift};
    u32 hi[3] = {morton_cell(qx + r, f[0], f[3]) >> shift, morton_cell(qy + r, f[1], f[3]) >> shift,
                 morton_cell(qz + r, f[2], f[3]) >> shift};
    if (hi[0] - lo[0] > 2 || hi[1] - lo[1] > 2 || hi[2] - lo[2] > 2) return false;
    u32 seen = 0;
    for (u32 z = lo[2]; z <= hi[2]; z++)
        for (u32 y = lo[1]; y <= hi[1]; y++)
            for (u32 x = lo[0]; x <= hi[0]; x++) {
                u64 cell = spread3_21(x) | (spread3_21(y) << 1) | (spread3_21(z) << 2);
                u32 s = t.key_table[cell << spare], e = t.key_table[(cell + 1) << spare];
                seen += e - s;
                if (e - s > cell_most || seen > most) return false;
                scan_points(t, s, e, qx, qy, qz, bd, bid);
            }
    return true;
}

// Points a query's nearest search scans in place of a tree walk, in all and in one cell.
#define NEAREST_SCAN 256
#define NEAREST_CELL 48

// Every query's nearest point within *r2 (inclusive); NO_ID and +inf when none.
// Queries arrive in Morton order; a_ids[i] is query i's position in the caller's order.
// The distance is the root of the squared one, correctly rounded, as the CPU takes it.
// The search starts from the best of the query's Morton neighbours in B (`window` each side),
// where that is within *r2: a real point, so it still ends at the first point in (squared
// distance, id) order, but prunes from its first step (an unbounded walk took most of this
// kernel's time, BENCHMARKS.md, session 49). Then the key table's cells around that bound's
// ball are scanned where they hold at most NEAREST_SCAN points (NEAREST_CELL in one), else
// the tree is walked.
template <typename T>
__device__ void nearest_all_impl(const T* ax, const T* ay, const T* az, const u32* a_ids, u32 na, Tree<T> t, const T* r2,
                                 u32 window, u32* out_b, T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= na) return;
    T bd = *r2;
    u32 bid = NO_ID;
    T qx = ax[i], qy = ay[i], qz = az[i];
    if (t.n > t.leaf_size && window > 0)
        morton_window(t, qx, qy, qz, window, [&](u32 j) {
            T d = dist2(qx, qy, qz, t.x[j], t.y[j], t.z[j]);
            u32 id = t.id[j];
            if (before(d, id, bd, bid)) { bd = d; bid = id; }
        });
    if (t.n <= scan_whole(t) || !cell_scan(t, qx, qy, qz, NEAREST_CELL, NEAREST_SCAN, bd, bid)) nearest_search(t, qx, qy, qz, bd, bid);
    u32 o = a_ids[i];
    out_b[o] = bid;
    out_d[o] = bid == NO_ID ? t_inf<T>() : sqrt(bd);
}
NK_INSTANTIATE(nearest_all, (const R* ax, const R* ay, const R* az, const u32* a_ids, u32 na, Tree<R> t, const R* r2, u32 window, u32* out_b, R* out_d),
               (ax, ay, az, a_ids, na, t, r2, window, out_b, out_d))

// Points a query's candidate search scans in place of a tree walk.
#define BALL_SCAN 64

// Queries whose nearest point lies within *tau append (d2, a_offset + a_ids[i], b) to the
// candidates. Where every point within tau lies in Morton cells of at most BALL_SCAN points
// (tau is small: it bounds the k-th nearest pair), those points are scanned; else the tree
// is walked (a warp waits for its slowest query, so cells are taken two a side: a box
// straddling a cell's side would otherwise send about one query in five to the tree).
// Either way the first point in (squared distance, id) order within tau is found.
template <typename T>
__device__ void nearest_candidates_impl(const T* ax, const T* ay, const T* az, const u32* a_ids, u32 na, u32 a_offset, Tree<T> t,
                                        const T* tau, u32* count, u64* cand_d2, u32* cand_a, u32* cand_b) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= na) return;
    T bd = *tau;
    u32 bid = NO_ID;
    T qx = ax[i], qy = ay[i], qz = az[i];
    if (t.n <= scan_whole(t) || !ball_scan(t, qx, qy, qz, BALL_SCAN, bd, bid)) nearest_search(t, qx, qy, qz, bd, bid);
    if (bid != NO_ID) {
        u32 slot = atomicAdd(count, 1u);
        cand_d2[slot] = ordered_bits(bd);
        cand_a[slot] = a_offset + a_ids[i];
        cand_b[slot] = bid;
    }
}
NK_INSTANTIATE(nearest_candidates, (const R* ax, const R* ay, const R* az, const u32* a_ids, u32 na, u32 a_offset, Tree<R> t,
                                    const R* tau, u32* count, u64* cand_d2, u32* cand_a, u32* cand_b),
               (ax, ay, az, a_ids, na, a_offset, t, tau, count, cand_d2, cand_a, cand_b))

// search::knn for all-pairs: up to k nearest within *tau per query, kept sorted in a slice
// of global memory, then appended to the candidates. Few queries run this (at most k).
template <typename T>
__device__ void knn_candidates_impl(const T* qx, const T* qy, const T* qz, const u32* qid, u32 nq, Tree<T> t, u32 k,
                                    const T* tau, T* heap_d, u32* heap_id, u32* count, u64* cand_d2, u32* cand_a, u32* cand_b) {
    u32 q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    T* hd = heap_d + (u64)q * k;
    u32* hi = heap_id + (u64)q * k;
    u32 m = knn_search(t, qx[q], qy[q], qz[q], k, *tau, NO_ID, hd, hi);
    u32 slot = atomicAdd(count, m);
    for (u32 j = 0; j < m; j++) {
        cand_d2[slot + j] = ordered_bits(hd[j]);
        cand_a[slot + j] = qid[q];
        cand_b[slot + j] = hi[j];
    }
}
NK_INSTANTIATE(knn_candidates, (const R* qx, const R* qy, const R* qz, const u32* qid, u32 nq, Tree<R> t, u32 k, const R* tau,
                                R* heap_d, u32* heap_id, u32* count, u64* cand_d2, u32* cand_a, u32* cand_b),
               (qx, qy, qz, qid, nq, t, k, tau, heap_d, heap_id, count, cand_d2, cand_a, cand_b))

// Moves the candidates listed by `perm` to the front, in that order (after a sort).
extern "C" __global__ void permute_candidates(const u32* perm, u32 n, const u64* d2, const u32* a, const u32* b,
                                              u64* d2_out, u32* a_out, u32* b_out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 j = perm[i];
    d2_out[i] = d2[j];
    a_out[i] = a[j];
    b_out[i] = b[j];
}

// The whole candidate sort of Candidates::sort_and_keep in one block, for n <= 2048: stable
// passes by b (all-pairs only), then a, then squared distance, through shared memory.
#define SMALL_SORT_THREADS NK_SMALL_SORT_THREADS
#define SMALL_SORT_ITEMS NK_SMALL_SORT_ITEMS
// The candidates sorted by (d2, a, b) in one block: the stable passes from the least
// significant column up, in shared memory. Returns each thread's items' sorted positions
// (v) for n <= SMALL_SORT_THREADS * SMALL_SORT_ITEMS.
__device__ __forceinline__ void sort_small_block(const u64* d2, const u32* a, const u32* b, u32 n, u32 a_bits,
                                                 u32 b_bits, u32 d2_bits, u32 (&v)[SMALL_SORT_ITEMS]) {
    typedef cub::BlockRadixSort<u64, SMALL_SORT_THREADS, SMALL_SORT_ITEMS, u32> Sort;
    __shared__ typename Sort::TempStorage tmp;
    u64 k[SMALL_SORT_ITEMS];
    for (int j = 0; j < SMALL_SORT_ITEMS; j++) v[j] = threadIdx.x * SMALL_SORT_ITEMS + j;
    // Padding (index >= n) carries the all-ones key and stays behind equal keys (stability).
    if (b_bits > 0) {
        for (int j = 0; j < SMALL_SORT_ITEMS; j++) k[j] = v[j] < n ? (u64)b[v[j]] : ~0ull;
        Sort(tmp).Sort(k, v, 0, (int)b_bits);
        __syncthreads();
    }
    for (int j = 0; j < SMALL_SORT_ITEMS; j++) k[j] = v[j] < n ? (u64)a[v[j]] : ~0ull;
    Sort(tmp).Sort(k, v, 0, (int)a_bits);
    __syncthreads();
    for (int j = 0; j < SMALL_SORT_ITEMS; j++) k[j] = v[j] < n ? d2[v[j]] : ~0ull;
    Sort(tmp).Sort(k, v, 0, (int)d2_bits);
}

extern "C" __global__ void sort_candidates_small(const u64* d2, const u32* a, const u32* b, u32 n, u32 a_bits, u32 b_bits,
                                                 u32 d2_bits, u64* d2_out, u32* a_out, u32* b_out) {
    u32 v[SMALL_SORT_ITEMS];
    sort_small_block(d2, a, b, n, a_bits, b_bits, d2_bits, v);
    for (int j = 0; j < SMALL_SORT_ITEMS; j++) {
        u32 p = threadIdx.x * SMALL_SORT_ITEMS + j;
        if (p < n) {
            d2_out[p] = d2[v[j]];
            a_out[p] = a[v[j]];
            b_out[p] = b[v[j]];
        }
    }
}

// The best `keep` of the *count candidates, packed for one download: out[0] = *count, then
// for each kept rank p, out[1 + 2p] = d2 and out[2 + 2p] = a << 32 | b. Only where *count fits
// one block (<= SMALL_SORT_THREADS * SMALL_SORT_ITEMS); otherwise only out[0] is written and
// the host sorts on the general path. The count is read here, not by the host: the whole
// top k costs the host one wait.
extern "C" __global__ void top_candidates_small(const u64* d2, const u32* a, const u32* b, const u32* count, u32 keep,
                                                u32 a_bits, u32 b_bits, u32 d2_bits, u64* out) {
    u32 n = *count;
    if (threadIdx.x == 0) out[0] = n;
    if (n > SMALL_SORT_THREADS * SMALL_SORT_ITEMS) return;
    u32 v[SMALL_SORT_ITEMS];
    sort_small_block(d2, a, b, n, a_bits, b_bits, d2_bits, v);
    for (int j = 0; j < SMALL_SORT_ITEMS; j++) {
        u32 p = threadIdx.x * SMALL_SORT_ITEMS + j;
        if (p < n && p < keep) {
            out[1 + 2 * (u64)p] = d2[v[j]];
            out[2 + 2 * (u64)p] = ((u64)a[v[j]] << 32) | b[v[j]];
        }
    }
}
