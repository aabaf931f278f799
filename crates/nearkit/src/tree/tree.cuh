// The MortonTree of tree/mod.rs as device pointers, its search bound, and Morton codes
// (geometry/morton.rs). `Tree` (defined from tree/cuda.rs's TreeArgs) holds the tree's device
// pointers; its `frame` holds origin x, y, z and scale.
#define CHILD_POINT NK_CHILD_POINT
#define TABLE_BITS NK_TABLE_BITS
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
    u64 x = v & NK_MORTON3_MAX;
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
    t = t_min(t_max(t, (T)0), (T)NK_MORTON3_MAX);
    return (u32)t;
}
template <typename T>
__device__ __forceinline__ u64 morton_code(const T* frame, T x, T y, T z) {
    T s = frame[3];
    return spread3_21(morton_cell(x, frame[0], s)) | (spread3_21(morton_cell(y, frame[1], s)) << 1) |
           (spread3_21(morton_cell(z, frame[2], s)) << 2);
}

