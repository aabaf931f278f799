// Device-wide stable LSD radix sort of (u64 key, u32 value) pairs, 8 bits a pass, and an
// exclusive scan (single-pass, by decoupled look-back). Device-wide CUB does not run under
// NVRTC, so these are built from block-level CUB: one kernel counts every pass's digits, then
// one kernel a pass sorts each tile by the digit (stable) and scatters it, the tiles learning
// their places from each other by decoupled look-back.

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#define SORT_THREADS NK_SORT_THREADS
#define SORT_ITEMS NK_SORT_ITEMS
#define SORT_TILE (SORT_THREADS * SORT_ITEMS)

// Every pass's digit counts over all keys, in one read: hist[p * 256 + d] += the keys whose
// digit p (bits 8p..8p+8) is d. Each thread loads its SORT_ITEMS keys before counting any (the
// loads overlap). `hist` must be zero before the launch.
extern "C" __global__ void __launch_bounds__(SORT_THREADS) radix_histograms(const u64* keys, u32 n, u32 passes, u32* hist) {
    __shared__ u32 h[8 * 256];
    for (u32 i = threadIdx.x; i < 8 * 256; i += blockDim.x) h[i] = 0;
    u64 base = (u64)blockIdx.x * SORT_TILE + threadIdx.x;
    u64 k[SORT_ITEMS];
    for (int i = 0; i < SORT_ITEMS; i++) {
        u64 g = base + (u64)i * SORT_THREADS;
        k[i] = g < n ? keys[g] : 0;
    }
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++)
        if (base + (u64)i * SORT_THREADS < n)
            for (u32 p = 0; p < passes; p++) atomicAdd(&h[p * 256 + ((k[i] >> (8 * p)) & 0xff)], 1u);
    __syncthreads();
    for (u32 i = threadIdx.x; i < passes * 256; i += blockDim.x)
        if (h[i]) atomicAdd(&hist[i], h[i]);
}

// One pass of the sort, by digit `pass` (onesweep: Adinets & Merrill, 2022). Each block takes
// the next tile by ticket, counts its digits and publishes the counts, ranks its keys by the
// digit with match.any (CUB's BlockRadixRankMatch; keys are loaded warp-striped, the order the
// ranking keeps, so the sort is stable), then learns, digit by digit, how many keys of that
// digit the tiles before it hold by decoupled look-back over their published counts (thread d
// walks digit d, eight tiles a step). Counts go out before the ranking so that, by the time a
// tile looks back, the tiles before it have mostly resolved theirs. With the digit's start
// from `hist`, that places every key: the ranked tile is put in order in shared memory and
// written out by consecutive threads to consecutive places of each digit's run.
// `state` serves every pass of a sort: zero before its first, word `pass` is that pass's
// ticket, and word 8 + t * 256 + d tile t's count of digit d, tagged (pass + 1) << 40 |
// flag << 32 | count (AGGREGATE: the tile's own; PREFIX: tiles 0..=t together); a word of
// another tag (an earlier pass's, or zero) is not published yet, so no pass clears it.
extern "C" __global__ void __launch_bounds__(SORT_THREADS) radix_onesweep(const u64* keys_in, const u32* vals_in,
                                                                        u64* keys_out, u32* vals_out, u32 n,
                                                                        u32 pass, const u32* hist, u64* state) {
    typedef cub::BlockRadixRankMatch<SORT_THREADS, 8, false> Rank;
    typedef cub::BlockScan<u32, SORT_THREADS> Scan;
    __shared__ union {
        typename Rank::TempStorage rank;
        typename Scan::TempStorage scan;
        u64 keys[SORT_TILE];
        u32 vals[SORT_TILE];
    } shm;
    // digit_base[d] + (tile-local rank) is where a key of digit d goes.
    __shared__ u32 digit_base[256];
    __shared__ u32 tile_count[256];
    __shared__ u32 tile_s;
    // Thread d (SORT_THREADS == 256) owns digit d.
    u32 d = threadIdx.x;
    if (d == 0) tile_s = (u32)atomicAdd(&state[pass], 1ull);
    tile_count[d] = 0;
    __syncthreads();
    u32 tile = tile_s;
    u32 shift = 8 * pass;
    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    u64 tile0 = (u64)tile * SORT_TILE;
    u32 count = (u32)min((u64)SORT_TILE, (u64)n - tile0);
    u64 base = tile0 + (u64)warp * (32 * SORT_ITEMS) + lane;
    u64 k[SORT_ITEMS];
    u32 v[SORT_ITEMS];
    int rank[SORT_ITEMS];
    for (int i = 0; i < SORT_ITEMS; i++) {
        u64 g = base + (u64)i * 32;
        // Padding comes last in warp-striped order and carries the largest digit: it ranks
        // after every key of the tile.
        k[i] = g < n ? keys_in[g] : ~0ull;
        v[i] = g < n ? vals_in[g] : 0;
    }
    // The digit's start over all keys (while the keys load).
    u32 start;
    Scan(shm.scan).ExclusiveSum(hist[pass * 256 + d], start);
    for (int i = 0; i < SORT_ITEMS; i++)
        if (base + (u64)i * 32 < n) atomicAdd(&tile_count[(u32)((k[i] >> shift) & 0xff)], 1u);
    __syncthreads();
    u32 mine = tile_count[d];
    volatile u64* word = state + 8 + d;
    const u64 tag = (u64)(pass + 1) << 40;
    word[(u64)tile * 256] = tag | ((tile == 0 ? SCAN_PREFIX : SCAN_AGGREGATE) << 32) | mine;
    int prefix[1];
    Rank(shm.rank).RankKeys(k, rank, cub::BFEDigitExtractor<u64>(shift, 8), prefix);
    u32 before = 0;
    if (tile > 0) {
        bool done = false;
        for (long long top = (long long)tile - 1; !done; top -= 8) {
            u64 w[8];
            for (int i = 0; i < 8; i++) w[i] = top - i >= 0 ? word[(u64)(top - i) * 256] : tag | SCAN_PREFIX << 32;
            for (int i = 0; i < 8 && !done; i++) {
                while ((w[i] >> 40) != pass + 1) w[i] = word[(u64)(top - i) * 256];
                before += (u32)w[i];
                done = ((w[i] >> 32) & 0xff) == SCAN_PREFIX;
            }
        }
        word[(u64)tile * 256] = tag | (SCAN_PREFIX << 32) | (before + mine);
    }
    digit_base[d] = start + before - (u32)prefix[0];
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++)
        if ((u32)rank[i] < count) shm.keys[rank[i]] = k[i];
    __syncthreads();
    u32 dst[SORT_ITEMS];
    for (int m = 0; m < SORT_ITEMS; m++) {
        u32 j = threadIdx.x + m * SORT_THREADS;
        if (j < count) {
            u64 key = shm.keys[j];
            dst[m] = digit_base[(u32)((key >> shift) & 0xff)] + j;
            keys_out[dst[m]] = key;
        }
    }
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++)
        if ((u32)rank[i] < count) shm.vals[rank[i]] = v[i];
    __syncthreads();
    for (int m = 0; m < SORT_ITEMS; m++) {
        u32 j = threadIdx.x + m * SORT_THREADS;
        if (j < count) vals_out[dst[m]] = shm.vals[j];
    }
}

#define SCAN_THREADS NK_SCAN_THREADS
#define SCAN_ITEMS NK_SCAN_ITEMS
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

extern "C" __global__ void __launch_bounds__(SCAN_THREADS) scan_lookback(u32* data, u32 n, unsigned long long* state) {
    typedef cub::BlockScan<u32, SCAN_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ u32 tile_s, before_s, last_s;
    if (threadIdx.x == 0) tile_s = (u32)atomicAdd(&state[0], 1ull);
    __syncthreads();
    u32 t = tile_s;
    u64 base = (u64)t * SCAN_TILE + (u64)threadIdx.x * SCAN_ITEMS;
    u32 items[SCAN_ITEMS];
    for (int i = 0; i < SCAN_ITEMS; i++) items[i] = base + i < n ? data[base + i] : 0;
    u32 total;
    Scan(tmp).ExclusiveSum(items, items, total);
    if (threadIdx.x < 32) {
        u32 before = lookback_before(state + 2, t, total);
        if (threadIdx.x == 0) before_s = before;
    }
    __syncthreads();
    u32 before = before_s;
    for (int i = 0; i < SCAN_ITEMS; i++)
        if (base + i < n) data[base + i] = items[i] + before;
    // Every block is past its look-back once all have counted themselves done.
    if (threadIdx.x == 0) {
        __threadfence();
        last_s = atomicAdd(&state[1], 1ull) == gridDim.x - 1;
    }
    __syncthreads();
    if (last_s)
        for (u32 w = threadIdx.x; w < gridDim.x + 2; w += blockDim.x) state[w] = 0;
}

// In-place exclusive scan of `data` by one block, tile after tile with a running carry.
__device__ void scan_tiles(u32* data, u32 n) {
    typedef cub::BlockScan<u32, SCAN_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ u32 carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (u64 t = 0; t * SCAN_TILE < n; t++) {
        u64 base = t * SCAN_TILE + (u64)threadIdx.x * SCAN_ITEMS;
        u32 items[SCAN_ITEMS];
        for (int i = 0; i < SCAN_ITEMS; i++) items[i] = base + i < n ? data[base + i] : 0;
        u32 total;
        Scan(tmp).ExclusiveSum(items, items, total);
        for (int i = 0; i < SCAN_ITEMS; i++)
            if (base + i < n) data[base + i] = items[i] + carry;
        __syncthreads();
        if (threadIdx.x == 0) carry += total;
        __syncthreads();
    }
}

extern "C" __global__ void scan_single_block(u32* data, u32 n) {
    scan_tiles(data, n);
}

// keys[i] = source[perm[i]] (a gather to re-key by another column, for multi-key sorts).
extern "C" __global__ void gather_u64(const u64* source, const u32* perm, u32 n, u64* keys) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keys[i] = source[perm[i]];
}
extern "C" __global__ void gather_u32_as_u64(const u32* source, const u32* perm, u32 n, u64* keys) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keys[i] = (u64)source[perm[i]];
}
extern "C" __global__ void iota_u32(u32* v, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = i;
}
