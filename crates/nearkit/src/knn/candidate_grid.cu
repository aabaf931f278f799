// The CandidateGrid of knn/grid.rs, built on the device (one thread per cell, the same
// traversal order as the CPU build, so both lay the lists out identically), and the queries
// ordered by cell (the scan is in knn.cu).


// GridData (knn/grid.rs) for the 3-D tree: queries and centres are the data's own space.
template <typename T>
struct TreeGridData {
    Tree<T> t;
    static const int D = 3;
    __device__ __forceinline__ u32 n() const { return t.n; }
    __device__ __forceinline__ void center(const GridFrame<T>& f, u32 c, T* e) const { grid_center(f, c, e[0], e[1], e[2]); }
    __device__ __forceinline__ T d2(const T* e, u32 p) const { return dist2(e[0], e[1], e[2], t.x[p], t.y[p], t.z[p]); }
};

template <typename T, int WPC>
__device__ void grid_level_count_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                      u32 k_list, T r2, u32* count, T* floor_out, T* cell_r2, T* cell_lo) {
    grid_level_count_body<T, TreeGridData<T>, WPC>(TreeGridData<T>{t}, f, cells, pstart, pentry, k_list, r2, count,
                                                    floor_out, cell_r2, cell_lo);
}
template <typename T, int WPC>
__device__ void grid_level_fill_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                     const u32* start, const T* cell_r2, const T* cell_lo, u32* entry) {
    grid_level_fill_body<T, TreeGridData<T>, WPC>(TreeGridData<T>{t}, f, cells, pstart, pentry, start, cell_r2, cell_lo,
                                                   entry);
}
#define NK_TREE_LEVELS(SUFFIX, WPC)                                                                                     \
    template <typename T>                                                                                               \
    __device__ void grid_level_count##SUFFIX##_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart,            \
                                                    const u32* pentry, u32 k_list, T r2, u32* count, T* floor_out,      \
                                                    T* cell_r2, T* cell_lo) {                                           \
        grid_level_count_impl<T, WPC>(t, f, cells, pstart, pentry, k_list, r2, count, floor_out, cell_r2, cell_lo);     \
    }                                                                                                                   \
    NK_INSTANTIATE(grid_level_count##SUFFIX, (Tree<R> t, GridFrame<R> f, u32 cells, const u32* pstart,                  \
                                              const u32* pentry, u32 k_list, R r2, u32* count, R* floor_out,            \
                                              R* cell_r2, R* cell_lo),                                                  \
                   (t, f, cells, pstart, pentry, k_list, r2, count, floor_out, cell_r2, cell_lo))                       \
    template <typename T>                                                                                               \
    __device__ void grid_level_fill##SUFFIX##_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart,             \
                                                   const u32* pentry, const u32* start, const T* cell_r2,               \
                                                   const T* cell_lo, u32* entry) {                                      \
        grid_level_fill_impl<T, WPC>(t, f, cells, pstart, pentry, start, cell_r2, cell_lo, entry);                      \
    }                                                                                                                   \
    NK_INSTANTIATE(grid_level_fill##SUFFIX, (Tree<R> t, GridFrame<R> f, u32 cells, const u32* pstart,                   \
                                             const u32* pentry, const u32* start, const R* cell_r2, const R* cell_lo,   \
                                             u32* entry),                                                               \
                   (t, f, cells, pstart, pentry, start, cell_r2, cell_lo, entry))
NK_TREE_LEVELS(, 1)
NK_TREE_LEVELS(_wide, GRID_WIDE_WARPS)

// The root box (the data's bounds) in one buffer: lo x, y, z, hi x, y, z.
template <typename T>
__device__ void root_box_impl(Tree<T> t, T* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = t.lo_x[0]; out[1] = t.lo_y[0]; out[2] = t.lo_z[0];
        out[3] = t.hi_x[0]; out[4] = t.hi_y[0]; out[5] = t.hi_z[0];
    }
}
NK_INSTANTIATE(root_box, (Tree<R> t, R* out), (t, out))

// The entries' records, in list order.
template <typename T>
__device__ void grid_pack_impl(Tree<T> t, const u32* entry, u32 n, T* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 p = entry[i];
    GridCand<T> c;
    c.x = t.x[p]; c.y = t.y[p]; c.z = t.z[p]; c.id = t.id[p];
    reinterpret_cast<GridCand<T>*>(out)[i] = c;
}
NK_INSTANTIATE(grid_pack, (Tree<R> t, const u32* entry, u32 n, R* out), (t, entry, n, out))

// Queries ordered by grid cell (a counting sort): queries of one cell scan the same list, so a
// warp's list loads are broadcasts. Pass 1: each query's cell (`cells` for a query outside the
// grid, which takes the tree search), the cells' counts, and each query's rank in its cell
// (whatever order the atomics give: it changes no answer).
template <typename T>
__device__ void grid_cell_count_impl(const T* qx, const T* qy, const T* qz, u32 n, GridFrame<T> f, u32 cells, u32* cell_of,
                                     u32* rank, u32* count) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 c;
    T e;
    if (!grid_locate(f, qx[i], qy[i], qz[i], c, e)) c = cells;
    cell_of[i] = c;
    rank[i] = atomicAdd(&count[c], 1u);
}
NK_INSTANTIATE(grid_cell_count, (const R* qx, const R* qy, const R* qz, u32 n, GridFrame<R> f, u32 cells, u32* cell_of,
                                 u32* rank, u32* count),
               (qx, qy, qz, n, f, cells, cell_of, rank, count))

// Pass 2: each query's record (x, y, z, index) to its slot, `start` (the exclusive scan of the
// counts) of its cell plus its rank: one 16-byte store (f32).
template <typename T>
__device__ void grid_cell_scatter_impl(const T* qx, const T* qy, const T* qz, u32 n, const u32* cell_of, const u32* rank,
                                       const u32* start, T* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    GridCand<T> c;
    c.x = qx[i]; c.y = qy[i]; c.z = qz[i]; c.id = i;
    reinterpret_cast<GridCand<T>*>(out)[start[cell_of[i]] + rank[i]] = c;
}
NK_INSTANTIATE(grid_cell_scatter, (const R* qx, const R* qy, const R* qz, u32 n, const u32* cell_of, const u32* rank,
                                   const u32* start, R* out),
               (qx, qy, qz, n, cell_of, rank, start, out))
