// Builds src/tree.rs's MortonTree on the device: bounds -> Morton frame -> keys -> radix sort
// (radix_sort.cu) -> gather -> leaf boxes -> one launch per internal level.

// Order-preserving integer images of floats, so atomicMin/atomicMax give exact float min/max.
__device__ __forceinline__ u32 ord_enc(float v) { u32 b = __float_as_uint(v); return (b & 0x80000000u) ? ~b : (b | 0x80000000u); }
__device__ __forceinline__ float ord_dec(u32 b) { return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b); }
__device__ __forceinline__ u64 ord_enc(double v) { u64 b = (u64)__double_as_longlong(v); return (b >> 63) ? ~b : (b | (1ull << 63)); }
__device__ __forceinline__ double ord_dec(u64 b) { return __longlong_as_double((long long)((b >> 63) ? (b & ~(1ull << 63)) : ~b)); }
template <typename T> struct Ord;
template <> struct Ord<float> { typedef u32 U; };
template <> struct Ord<double> { typedef u64 U; };

// acc[0..3] = encoded min x, y, z; acc[3..6] = encoded max. Initialised by the host to
// (all-ones, zero) so that any value replaces them.
template <typename T>
__device__ void bounds_impl(const T* x, const T* y, const T* z, u32 n, typename Ord<T>::U* acc) {
    typedef typename Ord<T>::U U;
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
    if ((threadIdx.x & 31) == 0) {
        for (int d = 0; d < 3; d++) {
            atomicMin((U*)&acc[d], (U)ord_enc(lo[d]));
            atomicMax((U*)&acc[3 + d], (U)ord_enc(hi[d]));
        }
    }
}
NK_INSTANTIATE(bounds, (const R* x, const R* y, const R* z, u32 n, Ord<R>::U* acc), (x, y, z, n, acc))

// MortonFrame::from_bounds.
template <typename T>
__device__ void frame_impl(const typename Ord<T>::U* acc, T* frame) {
    T lo[3], hi[3];
    for (int d = 0; d < 3; d++) { lo[d] = ord_dec(acc[d]); hi[d] = ord_dec(acc[3 + d]); }
    T extent = t_max(t_max(hi[0] - lo[0], hi[1] - lo[1]), hi[2] - lo[2]);
    frame[0] = lo[0];
    frame[1] = lo[1];
    frame[2] = lo[2];
    frame[3] = extent > (T)0 ? (T)2097152.0 / extent : (T)0;
}
NK_INSTANTIATE(frame, (const Ord<R>::U* acc, R* frame), (acc, frame))

template <typename T>
__device__ void morton_keys_impl(const T* x, const T* y, const T* z, u32 n, const T* frame, u64* keys, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = morton_code(frame, x[i], y[i], z[i]);
    vals[i] = i;
}
NK_INSTANTIATE(morton_keys, (const R* x, const R* y, const R* z, u32 n, const R* frame, u64* keys, u32* vals),
               (x, y, z, n, frame, keys, vals))

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

// One thread per leaf slot (MortonTree::fill_leaf_boxes). `box` is 6 arrays of 2*leaf_base.
template <typename T>
__device__ void leaf_boxes_impl(const T* x, const T* y, const T* z, const u32* id, u32 n, u32 leaf_size, u32 leaf_base,
                                T* lo_x, T* lo_y, T* lo_z, T* hi_x, T* hi_y, T* hi_z, u32* min_id) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= leaf_base) return;
    u64 s = min((u64)j * leaf_size, (u64)n), e = min(s + leaf_size, (u64)n);
    T lo[3] = {t_inf<T>(), t_inf<T>(), t_inf<T>()};
    T hi[3] = {-t_inf<T>(), -t_inf<T>(), -t_inf<T>()};
    u32 mid = NO_ID;
    for (u64 i = s; i < e; i++) {
        T p[3] = {x[i], y[i], z[i]};
        for (int d = 0; d < 3; d++) { lo[d] = t_min(lo[d], p[d]); hi[d] = t_max(hi[d], p[d]); }
        mid = min(mid, id[i]);
    }
    u32 node = leaf_base + j;
    lo_x[node] = lo[0]; lo_y[node] = lo[1]; lo_z[node] = lo[2];
    hi_x[node] = hi[0]; hi_y[node] = hi[1]; hi_z[node] = hi[2];
    min_id[node] = mid;
}
NK_INSTANTIATE(leaf_boxes, (const R* x, const R* y, const R* z, const u32* id, u32 n, u32 leaf_size, u32 leaf_base,
                            R* lo_x, R* lo_y, R* lo_z, R* hi_x, R* hi_y, R* hi_z, u32* min_id),
               (x, y, z, id, n, leaf_size, leaf_base, lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, min_id))

// Nodes [level, 2*level) from their children. Levels below 1024 nodes are finished by one
// block looping upwards, to save launches.
template <typename T>
__device__ void internal_boxes_impl(u32 level, T* lo_x, T* lo_y, T* lo_z, T* hi_x, T* hi_y, T* hi_z, u32* min_id) {
    for (;;) {
        u32 node = level + blockIdx.x * blockDim.x + threadIdx.x;
        if (node < 2 * level) {
            u32 l = 2 * node, r = l + 1;
            lo_x[node] = t_min(lo_x[l], lo_x[r]); lo_y[node] = t_min(lo_y[l], lo_y[r]); lo_z[node] = t_min(lo_z[l], lo_z[r]);
            hi_x[node] = t_max(hi_x[l], hi_x[r]); hi_y[node] = t_max(hi_y[l], hi_y[r]); hi_z[node] = t_max(hi_z[l], hi_z[r]);
            min_id[node] = min(min_id[l], min_id[r]);
        }
        if (gridDim.x > 1 || level == 1) return;
        __threadfence_block();
        __syncthreads();
        level /= 2;
    }
}
NK_INSTANTIATE(internal_boxes, (u32 level, R* lo_x, R* lo_y, R* lo_z, R* hi_x, R* hi_y, R* hi_z, u32* min_id),
               (level, lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, min_id))
