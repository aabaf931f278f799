// Exact k-nearest neighbours on the device: through the candidate grid (knn_grid_rows, the
// scan of knn/grid.rs's CandidateGrid::knn) or by the tree search (knn_rows, tree/search.rs
// knn), line for line as on the CPU.

// One thread per query (in Morton order; q_ids[i] is its row in the chunk). The row of the
// output is the thread's sorted list; distances leave as sqrt(d2), missing ones as (NO_ID, inf).
template <typename T>
__device__ void knn_rows_impl(const T* qx, const T* qy, const T* qz, const u32* q_ids, u32 nq, u32 q_offset, Tree<T> t,
                              u32 k, T r2, u32 exclude_self, u32* out_ids, T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 q = q_ids[i];
    u64 row = (u64)q * k;
    u32 skip = exclude_self ? q_offset + q : NO_ID;
    u32 m = knn_search(t, qx[i], qy[i], qz[i], k, r2, skip, out_d + row, out_ids + row);
    for (u32 j = 0; j < k; j++) {
        if (j < m) {
            out_d[row + j] = sqrt(out_d[row + j]);
        } else {
            out_d[row + j] = t_inf<T>();
            out_ids[row + j] = NO_ID;
        }
    }
}
NK_INSTANTIATE(knn_rows, (const R* qx, const R* qy, const R* qz, const u32* q_ids, u32 nq, u32 q_offset, Tree<R> t, u32 k, R r2,
                          u32 exclude_self, u32* out_ids, R* out_d),
               (qx, qy, qz, q_ids, nq, q_offset, t, k, r2, exclude_self, out_ids, out_d))

#ifndef GRID_SCAN_BATCH
#define GRID_SCAN_BATCH 2
#endif

// A finished row (ids, and distances as sqrt(d2), missing ones as (NO_ID, inf)) to memory:
// as 16-byte stores where k = K and the row's address allow. Rows of one warp are scattered, so
// each store is its own L2 request: four u32 stores where one uint4 would do quadrupled the
// L2 traffic, which bound the scan.
template <typename T> struct Vec4Store;
template <> struct Vec4Store<float> {
    static __device__ __forceinline__ void put(float* p, float a, float b, float c, float d) {
        *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
    }
};
template <> struct Vec4Store<double> {
    static __device__ __forceinline__ void put(double* p, double a, double b, double c, double d) {
        reinterpret_cast<double2*>(p)[0] = make_double2(a, b);
        reinterpret_cast<double2*>(p)[1] = make_double2(c, d);
    }
};
template <typename T, int K>
__device__ __forceinline__ void store_row(const u32 (&si)[K], const T (&sd)[K], u32 pad, u32* oi, T* od) {
    T dv[K];
#pragma unroll
    for (int h = 0; h < K; h++) dv[h] = si[h] == NO_ID ? t_inf<T>() : sqrt(sd[h]);
    bool vec = pad == 0 && K % 4 == 0 && ((unsigned long long)oi & 15) == 0 &&
               ((unsigned long long)od & (4 * sizeof(T) - 1)) == 0;
    if (vec) {
#pragma unroll
        for (int h = 0; h < K; h += 4) {
            *reinterpret_cast<uint4*>(oi + h) = make_uint4(si[h], si[h + 1], si[h + 2], si[h + 3]);
            Vec4Store<T>::put(od + h, dv[h], dv[h + 1], dv[h + 2], dv[h + 3]);
        }
        return;
    }
    // Slots pad.. hold the k entries; the store index is the runtime one, the slot constant.
#pragma unroll
    for (int h = 0; h < K; h++) {
        if ((u32)h >= pad) { oi[h - pad] = si[h]; od[h - pad] = dv[h]; }
    }
}

// CandidateGrid::knn for one query per thread, the sorted list in registers: K is a
// compile-time capacity >= k. Queries come as records in cell order (grid_cell_scatter), so a
// warp's threads mostly share a cell and their list loads are broadcasts. (A variant where the warp loaded each list
// 32 entries at a time and passed them round by shuffles was 1.8x slower on an H200: every
// lane then pays for every entry, while here each lane skips its own far buckets.) A query
// outside the grid takes the tree search (knn_rows).
template <typename T, int K>
__device__ void knn_grid_rows_impl(const T* queries, u32 nq, u32 q_offset, Tree<T> t,
                                   GridFrame<T> f, const u32* start, const T* floor_in, const T* cand_raw, u32 k, T r2,
                                   u32 exclude_self, u32* out_ids, T* out_d) {
    const GridCand<T>* cand = reinterpret_cast<const GridCand<T>*>(cand_raw);
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    GridCand<T> me = reinterpret_cast<const GridCand<T>*>(queries)[i];
    u32 q = me.id;
    u64 row = (u64)q * k;
    u32 skip = exclude_self ? q_offset + q : NO_ID;
    T x = me.x, y = me.y, z = me.z;
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
    // The list fills the last k of K slots; the first K - k hold -inf, which no candidate
    // goes before, so the k-th best is always slot K - 1. Every index is then a constant and
    // the list stays in registers (reading slot k - 1 by a runtime index put it in local
    // memory, whose traffic bound the scan).
    u32 pad = K - k;
    T sd[K];
    u32 si[K];
#pragma unroll
    for (int j = 0; j < K; j++) {
        bool unused = (u32)j < pad;
        sd[j] = unused ? -t_inf<T>() : r2;
        si[j] = NO_ID;
    }
    T bd = r2;
    u32 bid = NO_ID;
    T m = (T)(1.0 + GRID_MARGIN), tiny = grid_tiny<T>();
    u64 base = (u64)cell * GRID_BUCKETS;
    for (int b = 0; b < GRID_BUCKETS; b++) {
        T g = floor_in[base + b] - e;
        T g2 = g * g;
        // The floors of non-empty buckets grow bucket by bucket, so past a non-empty bucket
        // ruled out, none can help; empty ones (infinite floor) are skipped.
        if (g > (T)0 && g2 > tiny && g2 > bd * m) {
            if (floor_in[base + b] == t_inf<T>()) continue;
            break;
        }
        u32 s = start[base + b], end = start[base + b + 1];
        // Offers one candidate to the sorted list (the CPU's insertion, unrolled).
        auto offer = [&](const GridCand<T>& c) {
            u32 pid = c.id;
            if (pid == skip) return;
            T d = dist2(x, y, z, c.x, c.y, c.z);
            if (!before(d, pid, bd, bid)) return;
#pragma unroll
            for (int h = K - 1; h > 0; h--) {
                if (before(d, pid, sd[h - 1], si[h - 1])) { sd[h] = sd[h - 1]; si[h] = si[h - 1]; }
                else if (before(d, pid, sd[h], si[h])) { sd[h] = d; si[h] = pid; }
            }
            if (before(d, pid, sd[0], si[0])) { sd[0] = d; si[0] = pid; }
            bd = sd[K - 1];
            bid = si[K - 1];
        };
        // Loads go out GRID_SCAN_BATCH at a time, so their latencies overlap.
        u32 j = s;
        for (; j + GRID_SCAN_BATCH <= end; j += GRID_SCAN_BATCH) {
            GridCand<T> c[GRID_SCAN_BATCH];
#pragma unroll
            for (int u = 0; u < GRID_SCAN_BATCH; u++) c[u] = cand[j + u];
#pragma unroll
            for (int u = 0; u < GRID_SCAN_BATCH; u++) offer(c[u]);
        }
        for (; j < end; j++) offer(cand[j]);
    }
    store_row<T, K>(si, sd, pad, out_ids + row, out_d + row);
}
#define NK_GRID_ROWS(K)                                                                                                  \
    template <typename T>                                                                                                \
    __device__ void knn_grid_rows##K##_impl(const T* queries, u32 nq, u32 q_offset,                                     \
                                            Tree<T> t, GridFrame<T> f, const u32* start, const T* floor_in,              \
                                            const T* cand, u32 k, T r2, u32 exclude_self, u32* out_ids, T* out_d) {      \
        knn_grid_rows_impl<T, K>(queries, nq, q_offset, t, f, start, floor_in, cand, k, r2, exclude_self,                 \
                                 out_ids, out_d);                                                                        \
    }                                                                                                                    \
    NK_INSTANTIATE(knn_grid_rows##K, (const R* queries, u32 nq, u32 q_offset,                                            \
                                      Tree<R> t, GridFrame<R> f, const u32* start, const R* floor_in, const R* cand,     \
                                      u32 k, R r2, u32 exclude_self, u32* out_ids, R* out_d),                            \
                   (queries, nq, q_offset, t, f, start, floor_in, cand, k, r2, exclude_self, out_ids, out_d))
NK_GRID_ROWS(8)
NK_GRID_ROWS(16)
NK_GRID_ROWS(32)
