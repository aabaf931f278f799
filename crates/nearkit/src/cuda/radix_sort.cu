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

// At most 64 registers: four blocks per SM instead of two.
extern "C" __global__ void __launch_bounds__(SORT_THREADS, 4) radix_downsweep(const u64* keys_in, const u32* vals_in, u64* keys_out, u32* vals_out,
                                           u32 n, u32 shift, const u32* offsets) {
    typedef cub::BlockRadixSort<u64, SORT_THREADS, SORT_ITEMS, u32> Sort;
    __shared__ union {
        typename Sort::TempStorage sort;
        unsigned short digit[SORT_TILE];
    } smem;
    __shared__ u32 first[256];
    u32 tiles = gridDim.x;
    u64 base = (u64)blockIdx.x * SORT_TILE;
    u64 k[SORT_ITEMS];
    u32 v[SORT_ITEMS];
    for (int i = 0; i < SORT_ITEMS; i++) {
        u64 g = base + threadIdx.x * SORT_ITEMS + i;
        // Padding sorts last: all-ones has the largest digit, and stability keeps it behind.
        k[i] = g < n ? keys_in[g] : ~0ull;
        v[i] = g < n ? vals_in[g] : 0;
    }
    Sort(smem.sort).Sort(k, v, (int)shift, (int)shift + 8);
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++) smem.digit[threadIdx.x * SORT_ITEMS + i] = (unsigned short)((k[i] >> shift) & 0xff);
    __syncthreads();
    for (int i = 0; i < SORT_ITEMS; i++) {
        u32 p = threadIdx.x * SORT_ITEMS + i;
        if (p == 0 || smem.digit[p] != smem.digit[p - 1]) first[smem.digit[p]] = p;
    }
    __syncthreads();
    u32 valid = (u32)min((u64)SORT_TILE, (u64)n - base);
    for (int i = 0; i < SORT_ITEMS; i++) {
        u32 p = threadIdx.x * SORT_ITEMS + i;
        if (p < valid) {
            u32 d = (u32)((k[i] >> shift) & 0xff);
            u64 dst = (u64)offsets[(u64)d * tiles + blockIdx.x] + (p - first[d]);
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
