// Shared by every nearkit kernel. Compiled with --fmad=false: arithmetic is done in the same
// order as the CPU code (src/real.rs, src/tree.rs) so both backends round identically.
#pragma once
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_reduce.cuh>

typedef unsigned int u32;
typedef unsigned long long u64;
#define NO_ID 0xffffffffu

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

// The tree of src/tree.rs, as device pointers. `frame` holds origin x, y, z and scale.
#define CHILD_POINT 0x80000000u
template <typename T>
struct Tree {
    const T* lo_x; const T* lo_y; const T* lo_z;
    const T* hi_x; const T* hi_y; const T* hi_z;
    const u32* min_id;
    const u32* left; const u32* right; const u32* other_end;
    const T* x; const T* y; const T* z;
    const u32* id;
    const u32* key_table;
    const T* frame;
    u32 n;
    u32 leaf_size;
};
#define TABLE_BITS 16
#define TABLE_SHIFT (63 - TABLE_BITS)

// MortonTree::box_dist2: a lower bound, in floating point, of the distance to every point inside.
template <typename T>
__device__ __forceinline__ T box_dist2(const Tree<T>& t, u32 node, T qx, T qy, T qz) {
    T gx = t_max(t_max(t.lo_x[node] - qx, qx - t.hi_x[node]), (T)0);
    T gy = t_max(t_max(t.lo_y[node] - qy, qy - t.hi_y[node]), (T)0);
    T gz = t_max(t_max(t.lo_z[node] - qz, qz - t.hi_z[node]), (T)0);
    return gx * gx + gy * gy + gz * gz;
}

// morton.rs: spread3_21 and MortonFrame::cell.
__device__ __forceinline__ u64 spread3_21(u32 v) {
    u64 x = v & 0x1fffffu;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}
template <typename T>
__device__ __forceinline__ u32 morton_cell(T v, T origin, T scale) {
    T t = (v - origin) * scale;
    t = t_min(t_max(t, (T)0), (T)2097151.0);
    return (u32)t;
}
template <typename T>
__device__ __forceinline__ u64 morton_code(const T* frame, T x, T y, T z) {
    T s = frame[3];
    return spread3_21(morton_cell(x, frame[0], s)) | (spread3_21(morton_cell(y, frame[1], s)) << 1) |
           (spread3_21(morton_cell(z, frame[2], s)) << 2);
}

// Instantiates a templated kernel body `name##_impl<T>` as extern "C" name_f32 and name_f64.
// `params` names the coordinate type `R`; each namespace binds it to one precision.
#define NK_INSTANTIATE(name, params, args)                                              \
    namespace nk_f32 { typedef float R; extern "C" __global__ void name##_f32 params { name##_impl<R> args; } } \
    namespace nk_f64 { typedef double R; extern "C" __global__ void name##_f64 params { name##_impl<R> args; } }
