// Heightfields on the device (heightfield.rs): their samples, triangles, the squares under a
// box and their tiles' heights, each as its Rust twin computes it, operation for operation.
// After triangle.cuh.

#define HF_MAX_TILE_LEVELS NK_MAX_TILE_LEVELS
#define HF_TILE_BITS NK_TILE_BITS

// heightfield.rs: sample (r, c) of the heightfield, as Heightfield::vertex computes it.
__device__ __forceinline__ V3<double> hf_vertex(const HeightfieldView& h, u32 r, u32 c) {
    return v3(h.origin[0] + (double)c * h.spacing, h.origin[1] + (double)r * h.spacing, h.heights[(u64)r * h.cols + c]);
}
// The corners of heightfield triangle t (Heightfield::triangle).
__device__ __forceinline__ void hf_triangle(const HeightfieldView& h, u32 t, V3<double>& a, V3<double>& b, V3<double>& c) {
    u32 q = t / 2, r = q / (h.cols - 1), col = q % (h.cols - 1);
    a = hf_vertex(h, r, col);
    if (t % 2 == 0) {
        b = hf_vertex(h, r, col + 1);
        c = hf_vertex(h, r + 1, col + 1);
    } else {
        b = hf_vertex(h, r + 1, col + 1);
        c = hf_vertex(h, r + 1, col);
    }
}
// Heightfield::squares for one axis: the run of squares a..=b whose sides meet [lo, hi];
// false when the box is beside the terrain.
__device__ __forceinline__ bool hf_span(double lo, double hi, double origin, double spacing, u32 n, u32& a, u32& b) {
    double last = (double)(n - 2);
    double fa = fmin(fmax(floor((lo - origin) / spacing), 0.0), last);
    double fb = fmin(fmax(floor((hi - origin) / spacing), 0.0), last);
    while (fa > 0.0 && origin + fa * spacing >= lo) fa -= 1.0;
    while (fa < last && origin + (fa + 1.0) * spacing < lo) fa += 1.0;
    while (fb < last && origin + (fb + 1.0) * spacing <= hi) fb += 1.0;
    while (fb > 0.0 && origin + fb * spacing > hi) fb -= 1.0;
    if (!(origin + (fa + 1.0) * spacing >= lo && origin + fb * spacing <= hi && fa <= fb)) return false;
    a = (u32)fa;
    b = (u32)fb;
    return true;
}
// Whether heightfield triangle t's box meets [lo, hi] (Heightfield::overlapping); its corners.
__device__ __forceinline__ bool hf_meets(const HeightfieldView& h, u32 t, const double* lo, const double* hi, V3<double>& a,
                                         V3<double>& b, V3<double>& c) {
    hf_triangle(h, t, a, b, c);
    double x0 = fmin(fmin(a.x, b.x), c.x), x1 = fmax(fmax(a.x, b.x), c.x);
    double y0 = fmin(fmin(a.y, b.y), c.y), y1 = fmax(fmax(a.y, b.y), c.y);
    double z0 = fmin(fmin(a.z, b.z), c.z), z1 = fmax(fmax(a.z, b.z), c.z);
    return lo[0] <= x1 && x0 <= hi[0] && lo[1] <= y1 && y0 <= hi[1] && lo[2] <= z1 && z0 <= hi[2];
}
// Heightfield::tile_heights: the lowest and highest heights of the tiles of `level` (from 1)
// holding squares sq (c0, c1, r0, r1).
__device__ __forceinline__ void hf_tile_heights(const HeightfieldView& h, u32 level, const u32* sq, double& low,
                                                double& high) {
    u32 shift = HF_TILE_BITS * level;
    u32 start = h.tile_start[level - 1], cols = h.tile_cols[level - 1];
    low = t_inf<double>();
    high = -t_inf<double>();
    for (u32 i = sq[2] >> shift; i <= sq[3] >> shift; i++) {
        for (u32 j = sq[0] >> shift; j <= sq[1] >> shift; j++) {
            const double* t = h.tiles + 2 * ((u64)start + (u64)i * cols + j);
            low = fmin(low, t[0]);
            high = fmax(high, t[1]);
        }
    }
}
