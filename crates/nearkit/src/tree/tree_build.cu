// Builds tree/mod.rs's MortonTree on the device: bounds -> Morton frame -> keys -> radix sort
// (radix_sort.cu) -> gather -> topology -> boxes bottom-up.

// Order-preserving integer images of floats, so atomicMin/atomicMax give exact float min/max.
__device__ __forceinline__ u32 ord_enc(float v) { u32 b = __float_as_uint(v); return (b & 0x80000000u) ? ~b : (b | 0x80000000u); }
__device__ __forceinline__ float ord_dec(u32 b) { return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b); }
__device__ __forceinline__ u64 ord_enc(double v) { u64 b = (u64)__double_as_longlong(v); return (b >> 63) ? ~b : (b | (1ull << 63)); }
__device__ __forceinline__ double ord_dec(u64 b) { return __longlong_as_double((long long)((b >> 63) ? (b & ~(1ull << 63)) : ~b)); }

// acc[0..3] = encoded min x, y, z; acc[3..6] = encoded max (u32 encodings of floats widened to
// u64, which keeps their order). Initialised by the host to (all-ones, zero) so that any value
// replaces them.
template <typename T>
__device__ void bounds_impl(const T* x, const T* y, const T* z, u32 n, u64* acc) {
    T lo[3] = {t_inf<T>(), t_inf<T>(), t_inf<T>()};
    T hi[3] = {-t_inf<T>(), -t_inf<T>(), -t_inf<T>()};
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        T p[3] = {x[i], y[i], z[i]};
        for (int d = 0; d < 3; d++) { lo[d] = t_min(lo[d], p[d]); hi[d] = t_max(hi[d], p[d]); }
    }
    for (int d = 0; d < 3; d++) {
        for (int off = 16; off > 0; off /= 2) {
            lo[d] = t_min(lo[d], __shfl_down_sync(0xffffffffu, lo[d], off));
            hi[d] = t_max(hi[d], __shfl_down_sync(0xffffffffu, hi[d], off));
        }
    }
    // Warps -> block through shared memory, then one atomic per block and value.
    __shared__ T s_lo[3][32], s_hi[3][32];
    u32 warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
    if (lane == 0)
        for (int d = 0; d < 3; d++) { s_lo[d][warp] = lo[d]; s_hi[d][warp] = hi[d]; }
    __syncthreads();
    if (threadIdx.x < 3) {
        int d = threadIdx.x;
        T l = s_lo[d][0], h = s_hi[d][0];
        for (u32 w = 1; w < warps; w++) { l = t_min(l, s_lo[d][w]); h = t_max(h, s_hi[d][w]); }
        atomicMin(&acc[d], (u64)ord_enc(l));
        atomicMax(&acc[3 + d], (u64)ord_enc(h));
    }
}
NK_INSTANTIATE(bounds, (const R* x, const R* y, const R* z, u32 n, u64* acc), (x, y, z, n, acc))

// MortonFrame::from_bounds.
template <typename T> __device__ __forceinline__ T ord_dec_as(u64 b);
template <> __device__ __forceinline__ float ord_dec_as<float>(u64 b) { return ord_dec((u32)b); }
template <> __device__ __forceinline__ double ord_dec_as<double>(u64 b) { return ord_dec(b); }
template <typename T>
__device__ void frame_impl(const u64* acc, T* frame) {
    T lo[3], hi[3];
    for (int d = 0; d < 3; d++) { lo[d] = ord_dec_as<T>(acc[d]); hi[d] = ord_dec_as<T>(acc[3 + d]); }
    T extent = t_max(t_max(hi[0] - lo[0], hi[1] - lo[1]), hi[2] - lo[2]);
    frame[0] = lo[0];
    frame[1] = lo[1];
    frame[2] = lo[2];
    frame[3] = extent > (T)0 ? (T)(NK_MORTON3_MAX + 1) / extent : (T)0;
}
NK_INSTANTIATE(frame, (const u64* acc, R* frame), (acc, frame))

// Morton codes shifted right by `shift` (queries only need a coarse order: fewer sort passes).
template <typename T>
__device__ void morton_keys_impl(const T* x, const T* y, const T* z, u32 n, const T* frame, u32 shift, u64* keys, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = morton_code(frame, x[i], y[i], z[i]) >> shift;
    vals[i] = i;
}
NK_INSTANTIATE(morton_keys, (const R* x, const R* y, const R* z, u32 n, const R* frame, u32 shift, u64* keys, u32* vals),
               (x, y, z, n, frame, shift, keys, vals))

template <typename T>
__device__ void gather_points_impl(const T* x, const T* y, const T* z, const u32* perm, u32 n, T* sx, T* sy, T* sz) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 j = perm[i];
    sx[i] = x[j];
    sy[i] = y[j];
    sz[i] = z[j];
}
NK_INSTANTIATE(gather_points, (const R* x, const R* y, const R* z, const u32* perm, u32 n, R* sx, R* sy, R* sz),
               (x, y, z, perm, n, sx, sy, sz))

// The sorted points' ids renamed: id[i] becomes ids[id[i]] (a sharded index's global ids).
extern "C" __global__ void rename_ids(const u32* ids, u32 n, u32* id) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) id[i] = ids[id[i]];
}

// tree/mod.rs: common_prefix (Karras's delta) and radix_node.
__device__ __forceinline__ int common_prefix(const u64* keys, u32 n, u32 i, long long j) {
    if (j < 0 || j >= (long long)n) return -1;
    u64 a = keys[i], b = keys[j];
    if (a == b) return 64 + __clz(i ^ (u32)j);
    return __clzll(a ^ b);
}

// One thread per internal node: children, other end, parent links of internal children, and
// each node's arrival counter (a byte, four to a word) preset to its number of point
// children, which are ready from the start.
extern "C" __global__ void radix_nodes(const u64* keys, u32 n, u32* left, u32* right, u32* other_end, u32* parent,
                                       u32* flags) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 >= n) return;
    long long ii = i;
    long long d = common_prefix(keys, n, i, ii + 1) > common_prefix(keys, n, i, ii - 1) ? 1 : -1;
    int dmin = common_prefix(keys, n, i, ii - d);
    long long lmax = 2;
    while (common_prefix(keys, n, i, ii + lmax * d) > dmin) lmax *= 2;
    long long l = 0;
    for (long long t = lmax / 2; t >= 1; t /= 2)
        if (common_prefix(keys, n, i, ii + (l + t) * d) > dmin) l += t;
    long long j = ii + l * d;
    int dnode = common_prefix(keys, n, i, j);
    long long s = 0, t = l;
    for (;;) {
        t = (t + 1) / 2;
        if (common_prefix(keys, n, i, ii + (s + t) * d) > dnode) s += t;
        if (t <= 1) break;
    }
    long long split = ii + s * d + (d < 0 ? d : 0);
    long long first = ii < j ? ii : j, last = ii < j ? j : ii;
    u32 lc = first == split ? ((u32)split | CHILD_POINT) : (u32)split;
    u32 rc = last == split + 1 ? ((u32)(split + 1) | CHILD_POINT) : (u32)(split + 1);
    left[i] = lc;
    right[i] = rc;
    other_end[i] = (u32)j;
    if (!(lc & CHILD_POINT)) parent[lc] = i;
    if (!(rc & CHILD_POINT)) parent[rc] = i;
    u32 ready = ((lc & CHILD_POINT) ? 1u : 0u) + ((rc & CHILD_POINT) ? 1u : 0u);
    if (ready) atomicAdd(&flags[i >> 2], ready << ((i & 3) * 8));
}

// Adds v to *p with acquire-release order at device scope: the writes before it are seen by
// whoever reads its result, and the reads after it see what that thread wrote before its own.
// One atomic in place of a full fence and an atomic.
__device__ __forceinline__ u32 atomic_add_acq_rel(u32* p, u32 v) {
    u32 old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// Bottom-up boxes: a thread starts at each node whose children are both points and climbs
// while it completes a node's second child, so every node is computed once, after both
// children. The box it just computed stays in registers; the sibling's is read through L2
// (__ldcg): another block may have just written it.
template <typename T>
__device__ void radix_boxes_impl(const T* x, const T* y, const T* z, const u32* id, u32 n, const u32* left, const u32* right,
                                 const u32* parent, u32* flags, T* lo_x, T* lo_y, T* lo_z, T* hi_x, T* hi_y, T* hi_z, u32* min_id) {
    u32 node = blockIdx.x * blockDim.x + threadIdx.x;
    if (node + 1 >= n || !(left[node] & CHILD_POINT) || !(right[node] & CHILD_POINT)) return;
    T lo[3], hi[3];
    u32 mid = NO_ID;
    u32 from = NO_ID;  // the child whose box is in lo, hi, mid
    for (;;) {
        u32 kids[2] = {left[node], right[node]};
        T nlo[3], nhi[3];
        u32 nmid = NO_ID;
        for (int k = 0; k < 2; k++) {
            u32 c = kids[k];
            T cl[3], ch[3];
            u32 cm;
            if (c & CHILD_POINT) {
                u32 q = c & ~CHILD_POINT;
                cl[0] = ch[0] = x[q]; cl[1] = ch[1] = y[q]; cl[2] = ch[2] = z[q];
                cm = id[q];
            } else if (c == from) {
                for (int d = 0; d < 3; d++) { cl[d] = lo[d]; ch[d] = hi[d]; }
                cm = mid;
            } else {
                cl[0] = __ldcg(&lo_x[c]); cl[1] = __ldcg(&lo_y[c]); cl[2] = __ldcg(&lo_z[c]);
                ch[0] = __ldcg(&hi_x[c]); ch[1] = __ldcg(&hi_y[c]); ch[2] = __ldcg(&hi_z[c]);
                cm = __ldcg(&min_id[c]);
            }
            // Same association as the CPU: min(left, right).
            for (int d = 0; d < 3; d++) {
                nlo[d] = k == 0 ? cl[d] : t_min(nlo[d], cl[d]);
                nhi[d] = k == 0 ? ch[d] : t_max(nhi[d], ch[d]);
            }
            nmid = k == 0 ? cm : min(nmid, cm);
        }
        for (int d = 0; d < 3; d++) { lo[d] = nlo[d]; hi[d] = nhi[d]; }
        mid = nmid;
        lo_x[node] = lo[0]; lo_y[node] = lo[1]; lo_z[node] = lo[2];
        hi_x[node] = hi[0]; hi_y[node] = hi[1]; hi_z[node] = hi[2];
        min_id[node] = mid;
        if (node == 0) return;
        from = node;
        node = parent[node];
        // The second arrival at a node (counting point children as arrived) computes it.
        u32 shift = (node & 3) * 8;
        if (((atomic_add_acq_rel(&flags[node >> 2], 1u << shift) >> shift) & 0xffu) == 0) return;
    }
}
NK_INSTANTIATE(radix_boxes, (const R* x, const R* y, const R* z, const u32* id, u32 n, const u32* left, const u32* right,
                             const u32* parent, u32* flags, R* lo_x, R* lo_y, R* lo_z, R* hi_x, R* hi_y, R* hi_z, u32* min_id),
               (x, y, z, id, n, left, right, parent, flags, lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, min_id))

// tree/mod.rs key_table: table[b] = first position whose code is >= b << TABLE_SHIFT.
extern "C" __global__ void key_table(const u64* codes, u32 n, u32* table) {
    u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b > (1u << TABLE_BITS)) return;
    u64 code = (u64)b << TABLE_SHIFT;
    u32 lo = 0, hi = n;
    while (lo < hi) {
        u32 mid = lo + (hi - lo) / 2;
        if (codes[mid] < code) lo = mid + 1; else hi = mid;
    }
    table[b] = lo;
}
