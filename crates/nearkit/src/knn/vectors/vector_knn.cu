// kNN of vectors of any dimension D (1..8): exact (knn/vectors/tree.rs's tree, searched depth
// first) and shifted sort (shifted_sort.rs). One thread per query. The sorted list lives in
// registers when K (a compile-time capacity) is 8 or 32, and in the output row (global
// memory) when K is 0, for k up to the data size. Both searches return the same bits as the
// CPU (knn/vectors/cpu.rs): same distance formula, same (d2, id) order.

#define VEC_MAX_DIM NK_MAX_DIM

template <typename T, int D>
__device__ __forceinline__ T dist2_nd(const T* q, const T* cols, u64 stride, u32 p) {
    T s = (T)0;
#pragma unroll
    for (int a = 0; a < D; a++) {
        T t = q[a] - cols[a * stride + p];
        s = s + t * t;
    }
    return s;
}

// The k best (d2, id) so far, ascending. K > 0: registers, the list in the last k of K slots
// (the first K - k hold -inf, which no candidate goes before), so that every slot index is a
// constant: reading slot k - 1 by a runtime index put the whole list in local memory. K == 0:
// the caller's row.
template <typename T, int K, bool DEDUP = true>
struct TopList {
    T d[K > 0 ? K : 1];
    u32 id[K > 0 ? K : 1];
    T* gd;
    u32* gid;
    u32 k;
    u32 pad;
    T bd;   // the k-th entry (the bound a candidate must beat)
    u32 bid;

    __device__ __forceinline__ void init(u32 k_, T r2, T* row_d, u32* row_id) {
        k = k_; gd = row_d; gid = row_id; bd = r2; bid = NO_ID;
        pad = K > 0 ? K - k_ : 0;
        if (K > 0) {
#pragma unroll
            for (int j = 0; j < (K > 0 ? K : 1); j++) { d[j] = (u32)j < pad ? -t_inf<T>() : r2; id[j] = NO_ID; }
        } else {
            for (u32 j = 0; j < k; j++) { gd[j] = r2; gid[j] = NO_ID; }
        }
    }

    // Inserts (c, cid) unless it is already listed (shifted copies meet the same point twice).
    __device__ __forceinline__ void insert(T c, u32 cid) {
        if (!before(c, cid, bd, bid)) return;
        if (K > 0) {
            if (DEDUP) {
                bool dup = false;
#pragma unroll
                for (int j = 0; j < (K > 0 ? K : 1); j++) dup |= (d[j] == c && id[j] == cid);
                if (dup) return;
            }
#pragma unroll
            for (int h = (K > 0 ? K : 1) - 1; h > 0; h--) {
                if (before(c, cid, d[h - 1], id[h - 1])) { d[h] = d[h - 1]; id[h] = id[h - 1]; }
                else if (before(c, cid, d[h], id[h])) { d[h] = c; id[h] = cid; }
            }
            if (before(c, cid, d[0], id[0])) { d[0] = c; id[0] = cid; }
            bd = d[(K > 0 ? K : 1) - 1];
            bid = id[(K > 0 ? K : 1) - 1];
        } else {
            u32 h = k - 1;
            while (h > 0 && before(c, cid, gd[h - 1], gid[h - 1])) h--;
            if (DEDUP && h > 0 && gd[h - 1] == c && gid[h - 1] == cid) return;
            for (u32 j = k - 1; j > h; j--) { gd[j] = gd[j - 1]; gid[j] = gid[j - 1]; }
            gd[h] = c; gid[h] = cid;
            bd = gd[k - 1]; bid = gid[k - 1];
        }
    }

    // Final distances (square roots), NO_ID rows infinite.
    __device__ __forceinline__ void write(T* row_d, u32* row_id) {
        if (K > 0) {
#pragma unroll
            for (int h = 0; h < (K > 0 ? K : 1); h++) {
                if ((u32)h >= pad) {
                    row_id[h - pad] = id[h];
                    row_d[h - pad] = id[h] == NO_ID ? t_inf<T>() : sqrt(d[h]);
                }
            }
        } else {
            for (u32 h = 0; h < k; h++) row_d[h] = gid[h] == NO_ID ? t_inf<T>() : sqrt(gd[h]);
        }
    }
};

// VectorTree::lower_bound.
template <typename T, int D>
__device__ __forceinline__ T node_bound(const T* lo, const T* hi, u64 stride, u32 node, const T* q) {
    T s = (T)0;
#pragma unroll
    for (int a = 0; a < D; a++) {
        T g = t_max(t_max(lo[a * stride + node] - q[a], q[a] - hi[a * stride + node]), (T)0);
        s = s + g * g;
    }
    return s;
}

#define VECTOR_LEAF NK_VECTOR_LEAF
#define VECTOR_STACK 64

// knn/vectors/cpu.rs::search for one query, into its output row.
template <typename T, int D, int K>
__device__ void vector_search(const T* q, u32 skip, u64 row, const T* cols, const u32* ids, u32 n, const T* lo,
                              const T* hi, u32 leaves, u32 k, T r2, u32* out_ids, T* out_d) {
    TopList<T, K, false> best;
    best.init(k, r2, out_d + row, out_ids + row);
    u32 stack_node[VECTOR_STACK];
    T stack_lb[VECTOR_STACK];
    int top = 0;
    u64 bs = 2 * (u64)leaves;
    stack_node[0] = 1;
    stack_lb[0] = node_bound<T, D>(lo, hi, bs, 1, q);
    top = 1;
    while (top > 0) {
        top--;
        u32 node = stack_node[top];
        if (stack_lb[top] > best.bd) continue;
        if (node >= leaves) {
            u32 l = node - leaves;
            u32 end = min((l + 1) * VECTOR_LEAF, n);
            for (u32 p = l * VECTOR_LEAF; p < end; p++) {
                T d = dist2_nd<T, D>(q, cols, n, p);
                u32 pid = ids[p];
                if (d <= r2 && pid != skip) best.insert(d, pid);
            }
            continue;
        }
        u32 a = 2 * node, b = a + 1;
        T la = node_bound<T, D>(lo, hi, bs, a, q), lb = node_bound<T, D>(lo, hi, bs, b, q);
        u32 nn = a, fn = b;
        T nl = la, fl = lb;
        if (lb < la) { nn = b; fn = a; nl = lb; fl = la; }
        if (fl <= best.bd) { stack_node[top] = fn; stack_lb[top] = fl; top++; }
        if (nl <= best.bd) { stack_node[top] = nn; stack_lb[top] = nl; top++; }
    }
    best.write(out_d + row, out_ids + row);
}

// `order` lists the queries to run, in a coherent order.
template <typename T, int D, int K>
__device__ void vector_knn_impl(const T* qcols, u32 nq, const u32* order, const T* cols, const u32* ids, u32 n,
                                const T* lo, const T* hi, u32 leaves, u32 k, T r2, u32 exclude_self, u32* out_ids,
                                T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 qi = order[i];
    T q[D];
#pragma unroll
    for (int a = 0; a < D; a++) q[a] = qcols[(u64)a * nq + qi];
    vector_search<T, D, K>(q, exclude_self ? qi : NO_ID, (u64)qi * k, cols, ids, n, lo, hi, leaves, k, r2, out_ids,
                           out_d);
}

// ShiftFrame::key as (hi, lo) 64-bit halves: bit i of axis a's cell on bit i*D + a.
template <typename T, int D>
__device__ __forceinline__ void shift_key(const T* v, const double* lo, double scale, u32 bits, u32 shift_cells,
                                          u64& khi, u64& klo) {
    double max = (double)((1u << (bits - 1)) - 1);
    khi = 0; klo = 0;
#pragma unroll
    for (int a = 0; a < D; a++) {
        double t = fmin(fmax(floor(((double)v[a] - lo[a]) * scale), 0.0), max);
        u32 c = (u32)t + shift_cells;
        for (u32 i = 0; i < bits; i++) {
            if ((c >> i) & 1u) {
                u32 pos = i * D + a;
                if (pos < 64) klo |= 1ull << pos; else khi |= 1ull << (pos - 64);
            }
        }
    }
}


// ShiftFrame::offset.
__device__ __forceinline__ u32 shift_offset(const ShiftFrameArgs& f, u32 shift) {
    return (u32)(((u64)shift * f.step) & ((1ull << (f.bits - 1)) - 1));
}

// Keys of copy `shift` for every data vector: low halves in klo, high halves in khi; vals = ids.
template <typename T, int D>
__device__ void shift_keys_impl(const T* cols, u32 n, ShiftFrameArgs f, u32 shift, u64* klo, u64* khi, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T v[D];
#pragma unroll
    for (int a = 0; a < D; a++) v[a] = cols[(u64)a * n + i];
    u64 h, l;
    shift_key<T, D>(v, f.lo, f.scale, f.bits, shift_offset(f, shift), h, l);
    klo[i] = l; khi[i] = h; vals[i] = i;
}

// The approximate search over `shifts` sorted copies: copy s has keys khi/klo[s*n..], ids and
// columns (stride n, copy stride D*n).
// `order` lists the queries in Morton order, so a warp's windows overlap.
template <typename T, int D, int K>
__device__ void shifted_knn_impl(const T* qcols, u32 nq, const u32* order, ShiftFrameArgs f, u32 shifts, u32 window,
                                 const u64* khi, const u64* klo, const u32* ids, const T* cols, u32 n, u32 k,
                                 u32* out_ids, T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 qi = order[i];
    T q[D];
#pragma unroll
    for (int a = 0; a < D; a++) q[a] = qcols[(u64)a * nq + qi];
    u64 row = (u64)qi * k;
    TopList<T, K> best;
    best.init(k, t_inf<T>(), out_d + row, out_ids + row);
    for (u32 s = 0; s < shifts; s++) {
        u64 h, l;
        shift_key<T, D>(q, f.lo, f.scale, f.bits, shift_offset(f, s), h, l);
        const u64* H = khi + (u64)s * n;
        const u64* L = klo + (u64)s * n;
        // First position whose key is >= the query's (slice::partition_point).
        u32 lo_i = 0, hi_i = n;
        while (lo_i < hi_i) {
            u32 mid = (lo_i + hi_i) >> 1;
            bool less = H[mid] < h || (H[mid] == h && L[mid] < l);
            if (less) lo_i = mid + 1; else hi_i = mid;
        }
        // shifted_sort::window_of: 2*window positions around lo_i, slid inwards at the ends.
        u32 b = lo_i > window ? lo_i - window : 0;
        b = n >= 2 * window ? min(b, n - 2 * window) : 0;
        u32 e = min(b + 2 * window, n);
        const T* c = cols + (u64)s * D * n;
        const u32* id = ids + (u64)s * n;
        for (u32 p = b; p < e; p++) best.insert(dist2_nd<T, D>(q, c, n, p), id[p]);
    }
    best.write(out_d + row, out_ids + row);
}

// The top 64 - `shift` bits of each query's D-dimensional Morton key, for ordering.
template <typename T, int D>
__device__ void vector_order_keys_impl(const T* qcols, u32 nq, ShiftFrameArgs f, u32 shift, u64* keys, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    T v[D];
#pragma unroll
    for (int a = 0; a < D; a++) v[a] = qcols[(u64)a * nq + i];
    u64 h, l;
    shift_key<T, D>(v, f.lo, f.scale, f.bits, 0, h, l);
    u32 total = f.bits * D;
    u64 top = total <= 64 ? l << (64 - total) : (h << (128 - total)) | (l >> (total - 64));
    keys[i] = top >> shift;
    vals[i] = i;
}

#define NK_VECTOR_D(D)                                                                                               \
    template <typename T>                                                                                            \
    __device__ void shift_keys_d##D##_impl(const T* cols, u32 n, ShiftFrameArgs f, u32 shift, u64* klo, u64* khi,    \
                                           u32* vals) {                                                              \
        shift_keys_impl<T, D>(cols, n, f, shift, klo, khi, vals);                                                    \
    }                                                                                                                \
    NK_INSTANTIATE(shift_keys_d##D, (const R* cols, u32 n, ShiftFrameArgs f, u32 shift, u64* klo, u64* khi, u32* vals), \
                   (cols, n, f, shift, klo, khi, vals))                                                              \
    template <typename T>                                                                                            \
    __device__ void vector_order_keys_d##D##_impl(const T* qcols, u32 nq, ShiftFrameArgs f, u32 shift, u64* keys,    \
                                                  u32* vals) {                                                       \
        vector_order_keys_impl<T, D>(qcols, nq, f, shift, keys, vals);                                               \
    }                                                                                                                \
    NK_INSTANTIATE(vector_order_keys_d##D, (const R* qcols, u32 nq, ShiftFrameArgs f, u32 shift, u64* keys,          \
                                            u32* vals),                                                              \
                   (qcols, nq, f, shift, keys, vals))                                                                \
    NK_VECTOR_DK(D, 8)                                                                                               \
    NK_VECTOR_DK(D, 32)                                                                                              \
    NK_VECTOR_DK(D, 0)

#define NK_VECTOR_DK(D, K)                                                                                           \
    template <typename T>                                                                                            \
    __device__ void vector_knn_d##D##_k##K##_impl(const T* qcols, u32 nq, const u32* order, const T* cols,           \
                                                  const u32* ids, u32 n, const T* lo, const T* hi, u32 leaves, u32 k,  \
                                                  T r2, u32 exclude_self, u32* out_ids, T* out_d) {                  \
        vector_knn_impl<T, D, K>(qcols, nq, order, cols, ids, n, lo, hi, leaves, k, r2, exclude_self, out_ids, out_d); \
    }                                                                                                                \
    NK_INSTANTIATE(vector_knn_d##D##_k##K, (const R* qcols, u32 nq, const u32* order, const R* cols, const u32* ids, \
                                            u32 n, const R* lo, const R* hi, u32 leaves, u32 k, R r2,                \
                                            u32 exclude_self, u32* out_ids, R* out_d),                               \
                   (qcols, nq, order, cols, ids, n, lo, hi, leaves, k, r2, exclude_self, out_ids, out_d))            \
    template <typename T>                                                                                            \
    __device__ void shifted_knn_d##D##_k##K##_impl(const T* qcols, u32 nq, const u32* order, ShiftFrameArgs f,      \
                                                   u32 shifts, u32 window, const u64* khi, const u64* klo,           \
                                                   const u32* ids, const T* cols, u32 n, u32 k, u32* out_ids,        \
                                                   T* out_d) {                                                       \
        shifted_knn_impl<T, D, K>(qcols, nq, order, f, shifts, window, khi, klo, ids, cols, n, k, out_ids, out_d);   \
    }                                                                                                                \
    NK_INSTANTIATE(shifted_knn_d##D##_k##K, (const R* qcols, u32 nq, const u32* order, ShiftFrameArgs f, u32 shifts, \
                                             u32 window, const u64* khi, const u64* klo, const u32* ids,             \
                                             const R* cols, u32 n, u32 k, u32* out_ids, R* out_d),                   \
                   (qcols, nq, order, f, shifts, window, khi, klo, ids, cols, n, k, out_ids, out_d))

NK_VECTOR_D(1)
NK_VECTOR_D(2)
NK_VECTOR_D(3)
NK_VECTOR_D(4)
NK_VECTOR_D(5)
NK_VECTOR_D(6)
NK_VECTOR_D(7)
NK_VECTOR_D(8)

// Gathers `dim` columns of `n` values by `perm` into `dst` (column stride n).
template <typename T>
__device__ void gather_cols_impl(const T* src, const u32* perm, u32 n, u32 dim, T* dst) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 p = perm[i];
    for (u32 a = 0; a < dim; a++) dst[(u64)a * n + i] = src[(u64)a * n + p];
}
NK_INSTANTIATE(gather_cols, (const R* src, const u32* perm, u32 n, u32 dim, R* dst), (src, perm, n, dim, dst))

extern "C" __global__ void gather_u32(const u32* source, const u32* perm, u32 n, u32* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = source[perm[i]];
}


// knn/grid.rs's Aabb6Data: 6-D data (the VectorTree's sorted columns) and 3-D queries embedded as
// (x, y, z, x, y, z) (MM = 1) or (x, y, z, 0, 0, 0) (MM = 0).
template <typename T, int MM>
struct Aabb6GridData {
    const T* cols;
    u32 len;
    static const int D = 6;
    __device__ __forceinline__ u32 n() const { return len; }
    __device__ __forceinline__ void center(const GridFrame<T>& f, u32 c, T* e) const {
        grid_center(f, c, e[0], e[1], e[2]);
        e[3] = MM ? e[0] : (T)0; e[4] = MM ? e[1] : (T)0; e[5] = MM ? e[2] : (T)0;
    }
    __device__ __forceinline__ T d2(const T* e, u32 p) const { return dist2_nd<T, 6>(e, cols, len, p); }
};

// Exact 6-D kNN of embedded queries through the grid (knn/grid.rs CandidateGrid::knn); queries
// outside it take the tree search.
template <typename T, int MM, int K>
__device__ void aabb6_grid_rows_impl(const T* qcols, u32 nq, const u32* order, const T* cols, const u32* ids, u32 n,
                                     const T* lo, const T* hi, u32 leaves, GridFrame<T> f, const u32* start,
                                     const T* floor_in, const u32* entry, u32 k, T r2, u32 exclude_self, u32* out_ids,
                                     T* out_d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 qi = order[i];
    T q[6];
#pragma unroll
    for (int a = 0; a < 6; a++) q[a] = qcols[(u64)a * nq + qi];
    u32 skip = exclude_self ? qi : NO_ID;
    u64 row = (u64)qi * k;
    // GridFrame::locate_in: the cell from the 3-D coordinates, the distance in 6-D.
    T o[3] = {f.ox, f.oy, f.oz};
    u32 dims[3] = {f.dx, f.dy, f.dz};
    u32 idx[3];
    bool inside = true;
#pragma unroll
    for (int d = 0; d < 3; d++) {
        double t = floor((double)((q[d] - o[d]) * f.inv_cell));
        if (!(t >= -1.0 && t <= (double)dims[d])) inside = false;
        u32 c = t > 0.0 ? (u32)t : 0u;
        idx[d] = min(c, dims[d] - 1);
    }
    T e = t_inf<T>();
    u32 cell = 0;
    if (inside) {
        cell = idx[0] + f.dx * (idx[1] + f.dy * idx[2]);
        T ce[6];
        Aabb6GridData<T, MM>{cols, n}.center(f, cell, ce);
        T s = (T)0;
#pragma unroll
        for (int a = 0; a < 6; a++) { T t = q[a] - ce[a]; s = s + t * t; }
        e = sqrt(s) * (T)(1.0 + GRID_MARGIN);
    }
    if (!(e <= f.half_diag)) {
        vector_search<T, 6, K>(q, skip, row, cols, ids, n, lo, hi, leaves, k, r2, out_ids, out_d);
        return;
    }
    TopList<T, K, false> best;
    best.init(k, r2, out_d + row, out_ids + row);
    T m = (T)(1.0 + GRID_MARGIN), tiny = grid_tiny<T>();
    u64 base = (u64)cell * GRID_BUCKETS;
    for (int b = 0; b < GRID_BUCKETS; b++) {
        T g = floor_in[base + b] - e;
        T g2 = g * g;
        if (g > (T)0 && g2 > tiny && g2 > best.bd * m) continue;
        u32 s = start[base + b], end = start[base + b + 1];
        for (u32 j = s; j < end; j++) {
            u32 p = entry[j];
            u32 pid = ids[p];
            if (pid == skip) continue;
            best.insert(dist2_nd<T, 6>(q, cols, n, p), pid);
        }
    }
    best.write(out_d + row, out_ids + row);
}

#define NK_AABB6_LEVELS(NAME, MM, SUFFIX, WPC)                                                                       \
    template <typename T>                                                                                            \
    __device__ void aabb6_grid_level_count##SUFFIX##_##NAME##_impl(VecColsArg<T> a, GridFrame<T> f, u32 cells,        \
                                                                   const u32* pstart, const u32* pentry, u32 k_list, \
                                                                   T r2, u32* count, T* floor_out, T* cell_r2,       \
                                                                   T* cell_lo) {                                     \
        grid_level_count_body<T, Aabb6GridData<T, MM>, WPC>(Aabb6GridData<T, MM>{a.cols, a.n}, f, cells, pstart,       \
                                                            pentry, k_list, r2, count, floor_out, cell_r2, cell_lo);   \
    }                                                                                                                \
    NK_INSTANTIATE(aabb6_grid_level_count##SUFFIX##_##NAME, (VecColsArg<R> a, GridFrame<R> f, u32 cells,              \
                                                             const u32* pstart, const u32* pentry, u32 k_list, R r2,  \
                                                             u32* count, R* floor_out, R* cell_r2, R* cell_lo),       \
                   (a, f, cells, pstart, pentry, k_list, r2, count, floor_out, cell_r2, cell_lo))                    \
    template <typename T>                                                                                            \
    __device__ void aabb6_grid_level_fill##SUFFIX##_##NAME##_impl(VecColsArg<T> a, GridFrame<T> f, u32 cells,         \
                                                                  const u32* pstart, const u32* pentry,              \
                                                                  const u32* start, const T* cell_r2,                \
                                                                  const T* cell_lo, u32* entry) {                    \
        grid_level_fill_body<T, Aabb6GridData<T, MM>, WPC>(Aabb6GridData<T, MM>{a.cols, a.n}, f, cells, pstart,        \
                                                           pentry, start, cell_r2, cell_lo, entry);                    \
    }                                                                                                                \
    NK_INSTANTIATE(aabb6_grid_level_fill##SUFFIX##_##NAME, (VecColsArg<R> a, GridFrame<R> f, u32 cells,               \
                                                            const u32* pstart, const u32* pentry, const u32* start,   \
                                                            const R* cell_r2, const R* cell_lo, u32* entry),          \
                   (a, f, cells, pstart, pentry, start, cell_r2, cell_lo, entry))

#define NK_AABB6_GRID(NAME, MM)                                                                                      \
    NK_AABB6_LEVELS(NAME, MM, , 1)                                                                                   \
    NK_AABB6_LEVELS(NAME, MM, _wide, GRID_WIDE_WARPS)                                                                \
    NK_AABB6_ROWS(NAME, MM, 8)                                                                                       \
    NK_AABB6_ROWS(NAME, MM, 32)

#define NK_AABB6_ROWS(NAME, MM, K)                                                                                   \
    template <typename T>                                                                                            \
    __device__ void aabb6_grid_rows_##NAME##_k##K##_impl(const T* qcols, u32 nq, const u32* order, const T* cols,      \
                                                         const u32* ids, u32 n, const T* lo, const T* hi, u32 leaves, \
                                                         GridFrame<T> f, const u32* start, const T* floor_in,        \
                                                         const u32* entry, u32 k, T r2, u32 exclude_self,            \
                                                         u32* out_ids, T* out_d) {                                   \
        aabb6_grid_rows_impl<T, MM, K>(qcols, nq, order, cols, ids, n, lo, hi, leaves, f, start, floor_in, entry, k,   \
                                       r2, exclude_self, out_ids, out_d);                                            \
    }                                                                                                                \
    NK_INSTANTIATE(aabb6_grid_rows_##NAME##_k##K,                                                                    \
                   (const R* qcols, u32 nq, const u32* order, const R* cols, const u32* ids, u32 n, const R* lo,     \
                    const R* hi, u32 leaves, GridFrame<R> f, const u32* start, const R* floor_in, const u32* entry,  \
                    u32 k, R r2, u32 exclude_self, u32* out_ids, R* out_d),                                          \
                   (qcols, nq, order, cols, ids, n, lo, hi, leaves, f, start, floor_in, entry, k, r2, exclude_self,  \
                    out_ids, out_d))

NK_AABB6_GRID(mm, 1)
NK_AABB6_GRID(me, 0)
