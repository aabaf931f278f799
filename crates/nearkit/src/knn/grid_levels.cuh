// The level build of knn/grid.rs's CandidateGrid, shared by the 3-D grid (candidate_grid.cu) and
// the grid over embedded queries of 6-D data (vector_knn.cu). `G` is the device side of
// knn/grid.rs's GridData: n(), center(frame, cell, embedded centre) and d2(embedded point, data
// position).
#define GRID_BUCKETS NK_GRID_BUCKETS
#define GRID_MARGIN NK_GRID_MARGIN
#define GRID_LEVEL_FACTOR NK_GRID_LEVEL_FACTOR


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

// grid::buckets_of, for one distance.
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

#define GRID_WARPS NK_GRID_WARPS           // cells (one warp each) per block of the narrow level kernels
#define GRID_WIDE_WARPS NK_GRID_WIDE_WARPS // warps (one cell) per block of the wide ones, for the top level

// The level kernels come in two shapes: WPC = 1, a warp per cell and GRID_WARPS cells a block;
// and WPC = GRID_WIDE_WARPS, a block per cell, for the top level, whose few cells each scan
// every point (a warp alone there was latency-bound). Both give the same lists: lane j % 32
// of the list keeps its two smallest whichever warp reads entry j, and pass 2 places entries
// in list order across the warps.
template <int WPC> __device__ __forceinline__ void grid_cell_sync() {
    if (WPC == 1) __syncwarp(); else __syncthreads();
}

// Pass 1 of a level: grid::lane_bound over the parent list (lane j % 32 keeps its two
// smallest; the bound is the k-th smallest of those 64), the list radius, and per bucket the
// count and the floor. `cell_r2` / `cell_lo` keep the radius and the nearest distance for
// pass 2.
template <typename T, typename G, int WPC = 1>
__device__ void grid_level_count_body(G g, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                      u32 k_list, T r2, u32* count, T* floor_out, T* cell_r2, T* cell_lo) {
    constexpr int CPB = WPC == 1 ? GRID_WARPS : 1;  // cells per block
    __shared__ u32 s_count[CPB][GRID_BUCKETS];
    __shared__ u64 s_floor[CPB][GRID_BUCKETS];
    __shared__ T s_pair[WPC][2][32];
    __shared__ T s_bound[CPB][2];
    u32 wib = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 slot = wib / WPC, sub = wib % WPC;
    u32 c = blockIdx.x * CPB + slot;
    if (c >= cells) return;  // whole warps (whole blocks when WPC > 1) leave together
    T ce[G::D];
    g.center(f, c, ce);
    u32 s, e;
    grid_parent_list(g, f, c, pstart, s, e);
    T a = t_inf<T>(), b = t_inf<T>();
    for (u32 j = s + sub * 32 + lane; j < e; j += 32 * WPC) {
        u32 p = pstart ? pentry[j] : j;
        T v = g.d2(ce, p);
        if (v < a) { b = a; a = v; } else if (v < b) { b = v; }
    }
    if (WPC > 1) {
        // Lane j's two smallest over every warp: the two smallest of the warps' pairs.
        s_pair[sub][0][lane] = a;
        s_pair[sub][1][lane] = b;
        __syncthreads();
        if (sub == 0) {
            for (int w = 1; w < WPC; w++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    T v = s_pair[w][h][lane];
                    if (v < a) { b = a; a = v; } else if (v < b) { b = v; }
                }
            }
        }
    }
    if (sub == 0) {
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
        if (lane == 0) { s_bound[slot][0] = grid_list_radius2(f, kth, r2); s_bound[slot][1] = sqrt(d1); }
        if (lane < GRID_BUCKETS) { s_count[slot][lane] = 0; s_floor[slot][lane] = ordered_bits(t_inf<T>()); }
    }
    grid_cell_sync<WPC>();
    T rl2 = s_bound[slot][0], d_lo = s_bound[slot][1], d_hi = sqrt(rl2);
    T shrink = (T)(1.0 - GRID_MARGIN);
    for (u32 j = s + sub * 32 + lane; j < e; j += 32 * WPC) {
        u32 p = pstart ? pentry[j] : j;
        T v = g.d2(ce, p);
        if (v <= rl2) {
            T d = sqrt(v);
            u32 bk = grid_bucket(d, d_lo, d_hi);
            atomicAdd(&s_count[slot][bk], 1u);
            atomicMin(&s_floor[slot][bk], ordered_bits(d * shrink));
        }
    }
    grid_cell_sync<WPC>();
    if (sub == 0 && lane < GRID_BUCKETS) {
        count[(u64)c * GRID_BUCKETS + lane] = s_count[slot][lane];
        floor_out[(u64)c * GRID_BUCKETS + lane] = from_ordered_bits<T>(s_floor[slot][lane]);
    }
    if (sub == 0 && lane == 0) { cell_r2[c] = rl2; cell_lo[c] = d_lo; }
}
// Pass 2 of a level: the parent list again, in order, each kept entry to the next slot of its
// bucket (`start`: the exclusive scan of pass 1's counts). Entries of one round that share a
// bucket take consecutive slots in list order (lane order within a warp, then warp order), so
// every bucket keeps the parent list's order, as the CPU build does.
template <typename T, typename G, int WPC = 1>
__device__ void grid_level_fill_body(G g, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                     const u32* start, const T* cell_r2, const T* cell_lo, u32* entry) {
    constexpr int CPB = WPC == 1 ? GRID_WARPS : 1;
    __shared__ u32 s_at[CPB][GRID_BUCKETS];
    __shared__ u32 s_warp[WPC][GRID_BUCKETS];  // this round's entries per warp and bucket
    u32 wib = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 slot = wib / WPC, sub = wib % WPC;
    u32 c = blockIdx.x * CPB + slot;
    if (c >= cells) return;
    T ce[G::D];
    g.center(f, c, ce);
    u32 s, e;
    grid_parent_list(g, f, c, pstart, s, e);
    T rl2 = cell_r2[c], d_lo = cell_lo[c], d_hi = sqrt(rl2);
    if (sub == 0 && lane < GRID_BUCKETS) s_at[slot][lane] = start[(u64)c * GRID_BUCKETS + lane];
    if (WPC > 1 && lane < GRID_BUCKETS) s_warp[sub][lane] = 0;
    grid_cell_sync<WPC>();
    u32 below = (1u << lane) - 1;
    for (u32 j0 = s; j0 < e; j0 += 32 * WPC) {
        u32 j = j0 + sub * 32 + lane;
        u32 p = 0, bk = GRID_BUCKETS;  // GRID_BUCKETS: not kept
        if (j < e) {
            p = pstart ? pentry[j] : j;
            T v = g.d2(ce, p);
            if (v <= rl2) bk = grid_bucket(sqrt(v), d_lo, d_hi);
        }
        u32 peers = __match_any_sync(0xffffffffu, bk);
        bool leader = bk < GRID_BUCKETS && (peers & below) == 0;
        if (WPC == 1) {
            if (bk < GRID_BUCKETS) entry[s_at[slot][bk] + __popc(peers & below)] = p;
            __syncwarp();
            if (leader) s_at[slot][bk] += __popc(peers);
            __syncwarp();
        } else {
            if (leader) s_warp[sub][bk] = __popc(peers);
            __syncthreads();
            if (bk < GRID_BUCKETS) {
                u32 at = s_at[0][bk] + __popc(peers & below);
                for (u32 w = 0; w < sub; w++) at += s_warp[w][bk];
                entry[at] = p;
            }
            __syncthreads();
            if (threadIdx.x < GRID_BUCKETS) {
                u32 t = 0;
                for (u32 w = 0; w < WPC; w++) { t += s_warp[w][threadIdx.x]; s_warp[w][threadIdx.x] = 0; }
                s_at[0][threadIdx.x] += t;
            }
            __syncthreads();
        }
    }
}

// A list entry with its point, so the scan reads one record instead of following the entry
// to the tree's arrays (16 bytes for f32, 32 for f64).
template <typename T>
struct alignas(4 * sizeof(T)) GridCand {
    T x, y, z;
    u32 id;
};
