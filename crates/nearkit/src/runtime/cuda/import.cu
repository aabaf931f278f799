// Points another library holds in GPU memory (rows of three coordinates, any strides) copied
// into the columns queries read, with what validation needs on the way: the first row holding
// a value that is not finite, and the largest and the smallest nonzero |coordinate|, as the
// bits of |v| (which order as the magnitudes do).
//
// stats[0]: the first bad row (initially ~0); stats[1]: the largest |v| bits (initially 0);
// stats[2]: the smallest nonzero |v| bits (initially ~0).

template <typename T> __device__ __forceinline__ u64 abs_bits(T v);
template <> __device__ __forceinline__ u64 abs_bits<float>(float v) { return __float_as_uint(v) & 0x7fffffffu; }
template <> __device__ __forceinline__ u64 abs_bits<double>(double v) {
    return (u64)__double_as_longlong(v) & 0x7fffffffffffffffull;
}
template <typename T> __device__ __forceinline__ u64 inf_bits();
template <> __device__ __forceinline__ u64 inf_bits<float>() { return 0x7f800000ull; }
template <> __device__ __forceinline__ u64 inf_bits<double>() { return 0x7ff0000000000000ull; }

__device__ __forceinline__ u64 warp_min_u64(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ u64 warp_max_u64(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename T>
__device__ void import_rows_impl(const T* rows, long long row_stride, long long col_stride, u64 n, T* x, T* y,
                                 T* z, u64* stats) {
    u64 bad = ~0ull, hi = 0, lo = ~0ull;
    u64 step = (u64)gridDim.x * blockDim.x;
    // Every lane runs the same number of rounds, so that the warp reductions below see all 32.
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += step) {
        u64 i = base + threadIdx.x;
        if (i < n) {
            const T* r = rows + (long long)i * row_stride;
            T v[3] = {r[0], r[col_stride], r[2 * col_stride]};
            x[i] = v[0];
            y[i] = v[1];
            z[i] = v[2];
#pragma unroll
            for (int c = 0; c < 3; c++) {
                u64 a = abs_bits<T>(v[c]);
                if (a >= inf_bits<T>()) bad = min(bad, i);
                else {
                    hi = max(hi, a);
                    if (a != 0) lo = min(lo, a);
                }
            }
        }
    }
    bad = warp_min_u64(bad);
    hi = warp_max_u64(hi);
    lo = warp_min_u64(lo);
    if ((threadIdx.x & 31) == 0) {
        if (bad != ~0ull) atomicMin((unsigned long long*)&stats[0], (unsigned long long)bad);
        if (hi != 0) atomicMax((unsigned long long*)&stats[1], (unsigned long long)hi);
        if (lo != ~0ull) atomicMin((unsigned long long*)&stats[2], (unsigned long long)lo);
    }
}
NK_INSTANTIATE(import_rows,
               (const R* rows, long long row_stride, long long col_stride, u64 n, R* x, R* y, R* z, u64* stats),
               (rows, row_stride, col_stride, n, x, y, z, stats))
