// Shared by every nearkit module. Compiled with --fmad=false: arithmetic is done in the same
// order as the CPU code (geometry/real.rs) so both backends round identically. NK_* constants
// come from the Rust code (runtime/cuda/launch.rs writes them before this file).

typedef unsigned int u32;
typedef unsigned long long u64;
#define NO_ID NK_NO_ID

template <typename T> __device__ __forceinline__ T t_inf();
template <> __device__ __forceinline__ float t_inf<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double t_inf<double>() { return __longlong_as_double(0x7ff0000000000000ll); }

// Same definitions as Real::min / Real::max on the CPU.
template <typename T> __device__ __forceinline__ T t_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T t_max(T a, T b) { return b > a ? b : a; }

template <typename T>
__device__ __forceinline__ T dist2(T ax, T ay, T az, T bx, T by, T bz) {
    T dx = ax - bx;
    T dy = ay - by;
    T dz = az - bz;
    return dx * dx + dy * dy + dz * dz;
}

// Monotone bits of a value >= 0 (Real::ordered_bits).
__device__ __forceinline__ u64 ordered_bits(float v) { return (u64)__float_as_uint(v); }
__device__ __forceinline__ u64 ordered_bits(double v) { return (u64)__double_as_longlong(v); }
template <typename T> __device__ __forceinline__ T from_ordered_bits(u64 b);
template <> __device__ __forceinline__ float from_ordered_bits<float>(u64 b) { return __uint_as_float((u32)b); }
template <> __device__ __forceinline__ double from_ordered_bits<double>(u64 b) { return __longlong_as_double((long long)b); }

// (d, id) strictly before (bd, bid) in the one total order every query uses.
template <typename T>
__device__ __forceinline__ bool before(T d, u32 id, T bd, u32 bid) {
    return d < bd || (d == bd && id < bid);
}

// Instantiates a templated kernel body `name##_impl<T>` as extern "C" name_f32 and name_f64.
// `params` names the coordinate type `R`; each namespace binds it to one precision.
#define NK_INSTANTIATE(name, params, args)                                                                    \
    namespace nk_f32 { typedef float R; extern "C" __global__ void name##_f32 params { name##_impl<R> args; } } \
    namespace nk_f64 { typedef double R; extern "C" __global__ void name##_f64 params { name##_impl<R> args; } } \
    using nk_f32::name##_f32;                                                                                     \
    using nk_f64::name##_f64;
