// Device-wide stable LSD radix sort of (u64 key, u32 value) pairs, 8 bits a pass, and the
// exclusive scan it needs. Device-wide CUB does not run under NVRTC, so these are built from
// block-level CUB: per pass, an upsweep counts digits per tile, a scan turns the
// digit-major counts into output offsets, and a downsweep sorts each tile by the digit
// (stable) and scatters it.

#define SORT_THREADS 256
#define SORT_ITEMS 8
#define SORT_TILE (SORT_THREADS * SORT_ITEMS)

extern "C" __global__ void radix_upsweep(const u64* keys, u32 n, u32 shift, u32* counts) {
    __shared__ u32 hist[256];
    u32 tiles = gridDim.x;
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    u64 base = (u64)blockIdx.x * SORT_TILE;
    for (u32 i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
        u64 g = base + i;
        if (g < n) atomicAdd(&hist[(keys[g] >> shift) & 0xff], 1u);
    }
    __syncthreads();
    for (u32 d = threadIdx.x; d < 256; d += blockDim.x) counts[(u64)d * tiles + blockIdx.x] = hist[d];
}

// Ranks each key of the tile by its digit with match.any (CUB's BlockRadixRankMatch, as in
// onesweep) and scatters it straight to its place: no shared-memory sort of the tile. Keys are
// loaded warp-striped, the order the ranking keeps, so the sort stays stable.
extern "C" __global__ void __launch_bounds__(SORT_THREADS) radix_downsweep(const u64* keys_in, const u32* vals_in,
                                                                         u64* keys_out, u32* vals_out, u32 n,
                                                                         u32 shift, const u32* offsets) {
    typedef cub::BlockRadixRankMatch<SORT_THREADS, 8, false> Rank;
    __shared__ typename Rank::TempStorage tmp;
    __shared__ u32 tile_start[256];
    u32 tiles = gridDim.x;
    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    u64 base = (u64)blockIdx.x * SORT_TILE + (u64)warp * (32 * SORT_ITEMS) + lane;
    u64 k[SORT_ITEMS];
    u32 v[SORT_ITEMS];
    int rank[SORT_ITEMS];
    for (int i = 0; i < SORT_ITEMS; i++) {
        u64 g = base + (u64)i * 32;
        // Padding comes last in warp-striped order and carries the largest digit.
        k[i] = g < n ? keys_in[g] : ~0ull;
        v[i] = g < n ? vals_in[g] : 0;
    }
    int prefix[1];
    Rank(tmp).RankKeys(k, rank, cub::BFEDigitExtractor<u64>(shift, 8), prefix);
    // Thread d holds the tile-local start of digit d.
    tile_start[threadIdx.x] = (u32)prefix[0];
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++) {
        u64 g = base + (u64)i * 32;
        if (g < n) {
            u32 d = (u32)((k[i] >> shift) & 0xff);
            u64 dst = (u64)offsets[(u64)d * tiles + blockIdx.x] + (u32)rank[i] - tile_start[d];
            keys_out[dst] = k[i];
            vals_out[dst] = v[i];
        }
    }
}

#define SCAN_THREADS 1024
#define SCAN_ITEMS 4
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

// Sum of each tile of `data`.
extern "C" __global__ void scan_tile_sums(const u32* data, u32 n, u32* sums) {
    typedef cub::BlockReduce<u32, SCAN_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    u64 base = (u64)blockIdx.x * SCAN_TILE;
    u32 s = 0;
    for (int i = 0; i < SCAN_ITEMS; i++) {
        u64 g = base + (u64)i * SCAN_THREADS + threadIdx.x;
        if (g < n) s += data[g];
    }
    u32 total = Reduce(tmp).Sum(s);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// In-place exclusive scan of `data` by one block, tile after tile with a running carry.
// If `carry_in` is given, tile t starts from carry_in[t] instead (used with one tile a block).
__device__ void scan_tiles(u32* data, u32 n, u64 first_tile, u64 tile_count, const u32* carry_in) {
    typedef cub::BlockScan<u32, SCAN_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ u32 carry;
    if (threadIdx.x == 0) carry = carry_in ? carry_in[first_tile] : 0;
    __syncthreads();
    for (u64 t = first_tile; t < first_tile + tile_count; t++) {
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
    scan_tiles(data, n, 0, ((u64)n + SCAN_TILE - 1) / SCAN_TILE, nullptr);
}

// Second half of a multi-block scan: tile t adds the scanned tile sum `sums[t]`.
extern "C" __global__ void scan_apply(u32* data, u32 n, const u32* sums) {
    scan_tiles(data, n, blockIdx.x, 1, sums);
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
