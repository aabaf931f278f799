// The level build of grid.rs's CandidateGrid, shared by the 3-D grid (candidate_grid.cu) and
// the grid over embedded queries of 6-D data (vector_knn.cu). `G` is the device side of
// grid.rs's GridData: n(), center(frame, cell, embedded centre) and d2(embedded point, data
// position).
#define GRID_BUCKETS 16
#define GRID_MARGIN 1e-5
#define GRID_LEVEL_FACTOR 4  // grid::LEVEL_FACTOR

template <typename T>
struct GridFrame {
    T ox, oy, oz, cell, inv_cell, half_diag;
    u32 dx, dy, dz;
};

template <typename T> __device__ __forceinline__ T grid_tiny();
template <> __device__ __forceinline__ float grid_tiny<float>() { return 1e-30f; }
template <> __device__ __forceinline__ double grid_tiny<double>() { return 1e-290; }

// GridFrame::center.
template <typename T>
__device__ __forceinline__ void grid_center(const GridFrame<T>& f, u32 c, T& x, T& y, T& z) {
    u32 ix = c % f.dx, iy = (c / f.dx) % f.dy, iz = c / (f.dx * f.dy);
    x = f.ox + (T)((double)ix + 0.5) * f.cell;
    y = f.oy + (T)((double)iy + 0.5) * f.cell;
    z = f.oz + (T)((double)iz + 0.5) * f.cell;
}

// GridFrame::locate: the cell of q and an upper bound e of |q - centre|; false if outside.
template <typename T>
__device__ __forceinline__ bool grid_locate(const GridFrame<T>& f, T qx, T qy, T qz, u32& cell, T& e) {
    T q[3] = {qx, qy, qz};
    T o[3] = {f.ox, f.oy, f.oz};
    u32 dims[3] = {f.dx, f.dy, f.dz};
    u32 idx[3];
#pragma unroll
    for (int d = 0; d < 3; d++) {
        double t = floor((double)((q[d] - o[d]) * f.inv_cell));
        if (!(t >= -1.0 && t <= (double)dims[d])) return false;
        u32 i = t > 0.0 ? (u32)t : 0u;
        idx[d] = min(i, dims[d] - 1);
    }
    cell = idx[0] + f.dx * (idx[1] + f.dy * idx[2]);
    T cx, cy, cz;
    grid_center(f, cell, cx, cy, cz);
    e = sqrt(dist2(qx, qy, qz, cx, cy, cz)) * (T)(1.0 + GRID_MARGIN);
    return e <= f.half_diag;
}

// GridFrame::list_radius2.
template <typename T>
__device__ __forceinline__ T grid_list_radius2(const GridFrame<T>& f, T dk2, T r2) {
    T m = (T)(1.0 + GRID_MARGIN);
    T r = (sqrt(dk2) * m + (T)2.0 * f.half_diag) * m;
    T cap = (sqrt(r2) + f.half_diag) * m;
    if (cap < r) r = cap;
    return r * r * m;
}

// grid::bucket_of.
template <typename T>
__device__ __forceinline__ u32 grid_bucket(T d, T d_lo, T d_hi) {
    T t = (d - d_lo) / (d_hi - d_lo) * (T)GRID_BUCKETS;
    double tt = (double)t;
    if (!(tt >= 0.0)) return 0;
    return tt >= (double)(GRID_BUCKETS - 1) ? GRID_BUCKETS - 1 : (u32)tt;
}

// GridFrame::parent_cell.
template <typename T>
__device__ __forceinline__ u32 grid_parent_cell(const GridFrame<T>& f, u32 c) {
    u32 px = (f.dx + GRID_LEVEL_FACTOR - 1) / GRID_LEVEL_FACTOR, py = (f.dy + GRID_LEVEL_FACTOR - 1) / GRID_LEVEL_FACTOR;
    return (c % f.dx) / GRID_LEVEL_FACTOR +
           px * (((c / f.dx) % f.dy) / GRID_LEVEL_FACTOR + py * ((c / (f.dx * f.dy)) / GRID_LEVEL_FACTOR));
}

// The parent list of cell c: entries s..e of `pentry`, or every sorted position at the top.
template <typename T, typename G>
__device__ __forceinline__ void grid_parent_list(const G& g, const GridFrame<T>& f, u32 c, const u32* pstart,
                                                 u32& s, u32& e) {
    if (pstart == nullptr) { s = 0; e = g.n(); return; }
    u32 pc = grid_parent_cell(f, c);
    s = pstart[(u64)pc * GRID_BUCKETS];
    e = pstart[(u64)(pc + 1) * GRID_BUCKETS];
}

#define GRID_WARPS 4  // warps (cells) per block of the level kernels

// Pass 1 of a level, one warp per cell: grid::lane_bound over the parent list (lane j % 32
// keeps its two smallest; the bound is the k-th smallest of those 64), the list radius, and
// per bucket the count and the floor. `cell_r2` / `cell_lo` keep the radius and the nearest
// distance for pass 2.
template <typename T, typename G>
__device__ void grid_level_count_body(G g, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                      u32 k_list, T r2, u32* count, T* floor_out, T* cell_r2, T* cell_lo) {
    __shared__ u32 s_count[GRID_WARPS][GRID_BUCKETS];
    __shared__ u64 s_floor[GRID_WARPS][GRID_BUCKETS];
    u32 w = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 c = blockIdx.x * GRID_WARPS + w;
    if (c >= cells) return;  // whole warps leave together
    T ce[G::D];
    g.center(f, c, ce);
    u32 s, e;
    grid_parent_list(g, f, c, pstart, s, e);
    T a = t_inf<T>(), b = t_inf<T>();
    for (u32 j = s + lane; j < e; j += 32) {
        u32 p = pstart ? pentry[j] : j;
        T v = g.d2(ce, p);
        if (v < a) { b = a; a = v; } else if (v < b) { b = v; }
    }
    // The k-th smallest of the 64 kept values: the one whose rank (ties by lane, slot) is k-1.
    T kth = t_inf<T>(), d1 = a;
    for (u32 o = 16; o > 0; o >>= 1) d1 = t_min(d1, __shfl_xor_sync(0xffffffffu, d1, o));
    u32 ra = 0, rb = 0;
    for (u32 l = 0; l < 32; l++) {
        T la = __shfl_sync(0xffffffffu, a, l), lb = __shfl_sync(0xffffffffu, b, l);
        // Order: (value, lane, slot); slot 0 is a, 1 is b.
        ra += (la < a || (la == a && l < lane)) + (lb < a || (lb == a && l < lane));
        rb += (la < b || (la == b && l <= lane)) + (lb < b || (lb == b && l < lane));
    }
    if (ra == k_list - 1) kth = a;
    if (rb == k_list - 1) kth = b;
    for (u32 o = 16; o > 0; o >>= 1) kth = t_min(kth, __shfl_xor_sync(0xffffffffu, kth, o));
    T rl2 = grid_list_radius2(f, kth, r2);
    T d_lo = sqrt(d1), d_hi = sqrt(rl2);
    T shrink = (T)(1.0 - GRID_MARGIN);
    if (lane < GRID_BUCKETS) { s_count[w][lane] = 0; s_floor[w][lane] = ordered_bits(t_inf<T>()); }
    __syncwarp();
    for (u32 j = s + lane; j < e; j += 32) {
        u32 p = pstart ? pentry[j] : j;
        T v = g.d2(ce, p);
        if (v <= rl2) {
            T d = sqrt(v);
            u32 bk = grid_bucket(d, d_lo, d_hi);
            atomicAdd(&s_count[w][bk], 1u);
            atomicMin(&s_floor[w][bk], ordered_bits(d * shrink));
        }
    }
    __syncwarp();
    if (lane < GRID_BUCKETS) {
        count[(u64)c * GRID_BUCKETS + lane] = s_count[w][lane];
        floor_out[(u64)c * GRID_BUCKETS + lane] = from_ordered_bits<T>(s_floor[w][lane]);
    }
    if (lane == 0) { cell_r2[c] = rl2; cell_lo[c] = d_lo; }
}
// Pass 2 of a level, one warp per cell: the parent list again, in order, each kept entry to
// the next slot of its bucket (`start`: the exclusive scan of pass 1's counts). Lanes of one
// round that share a bucket take consecutive slots in lane order, so every bucket keeps the
// parent list's order, as the CPU build does.
template <typename T, typename G>
__device__ void grid_level_fill_body(G g, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                     const u32* start, const T* cell_r2, const T* cell_lo, u32* entry) {
    __shared__ u32 s_at[GRID_WARPS][GRID_BUCKETS];
    u32 w = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 c = blockIdx.x * GRID_WARPS + w;
    if (c >= cells) return;
    T ce[G::D];
    g.center(f, c, ce);
    u32 s, e;
    grid_parent_list(g, f, c, pstart, s, e);
    T rl2 = cell_r2[c], d_lo = cell_lo[c], d_hi = sqrt(rl2);
    if (lane < GRID_BUCKETS) s_at[w][lane] = start[(u64)c * GRID_BUCKETS + lane];
    __syncwarp();
    u32 below = (1u << lane) - 1;
    for (u32 j0 = s; j0 < e; j0 += 32) {
        u32 j = j0 + lane;
        u32 p = 0, bk = GRID_BUCKETS;  // GRID_BUCKETS: not kept
        if (j < e) {
            p = pstart ? pentry[j] : j;
            T v = g.d2(ce, p);
            if (v <= rl2) bk = grid_bucket(sqrt(v), d_lo, d_hi);
        }
        u32 peers = __match_any_sync(0xffffffffu, bk);
        if (bk < GRID_BUCKETS) {
            u32 at = s_at[w][bk];
            entry[at + __popc(peers & below)] = p;
        }
        __syncwarp();
        if (bk < GRID_BUCKETS && (peers & below) == 0) s_at[w][bk] += __popc(peers);
        __syncwarp();
    }
}
