// The CandidateGrid of src/grid.rs, built on the device (one thread per cell, the same
// traversal order as the CPU build, so both lay the lists out identically), and the kNN
// kernel that scans it.

// Uses grid_levels.cuh (compile.rs puts it before this file).

// GridData (grid.rs) for the 3-D tree: queries and centres are the data's own space.
template <typename T>
struct TreeGridData {
    Tree<T> t;
    static const int D = 3;
    __device__ __forceinline__ u32 n() const { return t.n; }
    __device__ __forceinline__ void center(const GridFrame<T>& f, u32 c, T* e) const { grid_center(f, c, e[0], e[1], e[2]); }
    __device__ __forceinline__ T d2(const T* e, u32 p) const { return dist2(e[0], e[1], e[2], t.x[p], t.y[p], t.z[p]); }
};

template <typename T>
__device__ void grid_level_count_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                      u32 k_list, T r2, u32* count, T* floor_out, T* cell_r2, T* cell_lo) {
    grid_level_count_body<T>(TreeGridData<T>{t}, f, cells, pstart, pentry, k_list, r2, count, floor_out, cell_r2, cell_lo);
}
template <typename T>
__device__ void grid_level_fill_impl(Tree<T> t, GridFrame<T> f, u32 cells, const u32* pstart, const u32* pentry,
                                     const u32* start, const T* cell_r2, const T* cell_lo, u32* entry) {
    grid_level_fill_body<T>(TreeGridData<T>{t}, f, cells, pstart, pentry, start, cell_r2, cell_lo, entry);
}

NK_INSTANTIATE(grid_level_count, (Tree<R> t, GridFrame<R> f, u32 cells, const u32* pstart, const u32* pentry, u32 k_list,
                                  R r2, u32* count, R* floor_out, R* cell_r2, R* cell_lo),
               (t, f, cells, pstart, pentry, k_list, r2, count, floor_out, cell_r2, cell_lo))

NK_INSTANTIATE(grid_level_fill, (Tree<R> t, GridFrame<R> f, u32 cells, const u32* pstart, const u32* pentry,
                                 const u32* start, const R* cell_r2, const R* cell_lo, u32* entry),
               (t, f, cells, pstart, pentry, start, cell_r2, cell_lo, entry))

// The root box (the data's bounds) in one buffer: lo x, y, z, hi x, y, z.
template <typename T>
__device__ void root_box_impl(Tree<T> t, T* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = t.lo_x[0]; out[1] = t.lo_y[0]; out[2] = t.lo_z[0];
        out[3] = t.hi_x[0]; out[4] = t.hi_y[0]; out[5] = t.hi_z[0];
    }
}
NK_INSTANTIATE(root_box, (Tree<R> t, R* out), (t, out))

// CandidateGrid::knn for one query per thread, the sorted list in registers: K is a
// compile-time capacity >= k. Queries come in Morton order, so neighbouring threads mostly
// share a cell and their list loads are broadcasts. (A variant where the warp loaded each list
// 32 entries at a time and passed them round by shuffles was 1.8x slower on an H200: every
// lane then pays for every entry, while here each lane skips its own far buckets.) A query
// outside the grid takes the tree search (knn_rows).
template <typename T, int K>
__device__ void knn_grid_rows_impl(const T* qx, const T* qy, const T* qz, const u32* q_ids, u32 nq, u32 q_offset, Tree<T> t,
                                   GridFrame<T> f, const u32* start, const T* floor_in, const u32* entry, u32 k, T r2,
                                   u32 exclude_self, u32* out_ids, T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 q = q_ids[i];
    u64 row = (u64)q * k;
    u32 skip = exclude_self ? q_offset + q : NO_ID;
    T x = qx[i], y = qy[i], z = qz[i];
    u32 cell;
    T e;
    if (!grid_locate(f, x, y, z, cell, e)) {
        u32 m = knn_search(t, x, y, z, k, r2, skip, out_d + row, out_ids + row);
        for (u32 j = 0; j < k; j++) {
            if (j < m) out_d[row + j] = sqrt(out_d[row + j]);
            else { out_d[row + j] = t_inf<T>(); out_ids[row + j] = NO_ID; }
        }
        return;
    }
    T sd[K];
    u32 si[K];
#pragma unroll
    for (int j = 0; j < K; j++) { sd[j] = r2; si[j] = NO_ID; }
    T bd = r2;
    u32 bid = NO_ID;
    T m = (T)(1.0 + GRID_MARGIN), tiny = grid_tiny<T>();
    u64 base = (u64)cell * GRID_BUCKETS;
    for (int b = 0; b < GRID_BUCKETS; b++) {
        T g = floor_in[base + b] - e;
        T g2 = g * g;
        if (g > (T)0 && g2 > tiny && g2 > bd * m) continue;
        u32 s = start[base + b], end = start[base + b + 1];
        for (u32 j = s; j < end; j++) {
            u32 p = entry[j];
            u32 pid = t.id[p];
            if (pid == skip) continue;
            T d = dist2(x, y, z, t.x[p], t.y[p], t.z[p]);
            if (!before(d, pid, bd, bid)) continue;
#pragma unroll
            for (int h = K - 1; h > 0; h--) {
                if (before(d, pid, sd[h - 1], si[h - 1])) { sd[h] = sd[h - 1]; si[h] = si[h - 1]; }
                else if (before(d, pid, sd[h], si[h])) { sd[h] = d; si[h] = pid; }
            }
            if (before(d, pid, sd[0], si[0])) { sd[0] = d; si[0] = pid; }
#pragma unroll
            for (int h = 0; h < K; h++) if (h == (int)k - 1) { bd = sd[h]; bid = si[h]; }
        }
    }
#pragma unroll
    for (int h = 0; h < K; h++) {
        if (h < (int)k) {
            out_ids[row + h] = si[h];
            out_d[row + h] = si[h] == NO_ID ? t_inf<T>() : sqrt(sd[h]);
        }
    }
}
#define NK_GRID_ROWS(K)                                                                                                  \
    template <typename T>                                                                                                \
    __device__ void knn_grid_rows##K##_impl(const T* qx, const T* qy, const T* qz, const u32* q_ids, u32 nq, u32 q_offset, \
                                            Tree<T> t, GridFrame<T> f, const u32* start, const T* floor_in,              \
                                            const u32* entry, u32 k, T r2, u32 exclude_self, u32* out_ids, T* out_d) {   \
        knn_grid_rows_impl<T, K>(qx, qy, qz, q_ids, nq, q_offset, t, f, start, floor_in, entry, k, r2, exclude_self,      \
                                 out_ids, out_d);                                                                        \
    }                                                                                                                    \
    NK_INSTANTIATE(knn_grid_rows##K, (const R* qx, const R* qy, const R* qz, const u32* q_ids, u32 nq, u32 q_offset,     \
                                      Tree<R> t, GridFrame<R> f, const u32* start, const R* floor_in, const u32* entry,  \
                                      u32 k, R r2, u32 exclude_self, u32* out_ids, R* out_d),                            \
                   (qx, qy, qz, q_ids, nq, q_offset, t, f, start, floor_in, entry, k, r2, exclude_self, out_ids, out_d))
NK_GRID_ROWS(8)
NK_GRID_ROWS(16)
NK_GRID_ROWS(32)
