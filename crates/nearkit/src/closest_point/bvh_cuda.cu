// Builds bvh.rs's TriangleBvh, collapsed to its WideBvh, on the device: centroid keys ->
// radix sort (radix_sort.cu) -> sorted triangle records -> topology (tree_build.cu's
// radix_nodes) -> every node's OrientedBox -> the collapse to WIDE children, breadth first.
// Keys, topology and collapse are the host's operation for operation, so the tree has the
// same shape; boxes are computed in f64 as the host does but summed in another order, so they
// may differ in the last bits (every box still holds its triangles: the search is exact with
// any tree that bounds its triangles).

#define CPB_WIDE NK_WIDE
#define CPB_LEAF NK_WIDE_LEAF
#define CPB_EMPTY NK_WIDE_EMPTY

// TriangleBvh::build: each triangle's Morton code (its centroid in `frame`) and its index.
template <typename T>
__device__ void cpb_keys_impl(const T* vx, const T* vy, const T* vz, const u32* tris, u32 n, const T* frame, u64* keys,
                              u32* vals) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    u32 a = tris[3 * t], b = tris[3 * t + 1], c = tris[3 * t + 2];
    T third = (T)(1.0 / 3.0);
    T mx = (vx[a] + vx[b] + vx[c]) * third;
    T my = (vy[a] + vy[b] + vy[c]) * third;
    T mz = (vz[a] + vz[b] + vz[c]) * third;
    keys[t] = morton_code(frame, mx, my, mz);
    vals[t] = t;
}
NK_INSTANTIATE(cpb_keys, (const R* vx, const R* vy, const R* vz, const u32* tris, u32 n, const R* frame, u64* keys, u32* vals),
               (vx, vy, vz, tris, n, frame, keys, vals))

// Sorted triangle s's record {a, b, c, 0 0 0} (12 values) from mesh triangle ids[s].
template <typename T>
__device__ void cpb_records_impl(const T* vx, const T* vy, const T* vz, const u32* tris, const u32* ids, u32 n, T* recs) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 12 * n) return;
    u32 s = i / 12, v = i % 12;
    T value = (T)0;
    if (v < 9) {
        u32 corner = tris[3 * ids[s] + v / 3];
        value = v % 3 == 0 ? vx[corner] : v % 3 == 1 ? vy[corner] : vz[corner];
    }
    recs[i] = value;
}
NK_INSTANTIATE(cpb_records, (const R* vx, const R* vy, const R* vz, const u32* tris, const u32* ids, u32 n, R* recs),
               (vx, vy, vz, tris, ids, n, recs))

// ---- bvh.rs frame_of and principal_axes, in f64 ----

__device__ __forceinline__ double cpb_dot(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
__device__ __forceinline__ void cpb_cross(const double* a, const double* b, double* o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}
// u / |u|; NaN for a zero vector (then frame_of falls back to the box axes).
__device__ __forceinline__ void cpb_unit(double* u) {
    double l = sqrt(cpb_dot(u, u));
    for (int i = 0; i < 3; i++) u[i] = l > 0.0 ? u[i] / l : __longlong_as_double(0x7ff8000000000000ll);
}

__device__ void cpb_principal_axes(double a[3][3], double out[3][3]) {
    double v[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    const int P[3] = {0, 0, 1}, Q[3] = {1, 2, 2};
    for (int sweep = 0; sweep < 12; sweep++) {
        for (int r = 0; r < 3; r++) {
            int p = P[r], q = Q[r];
            if (fabs(a[p][q]) <= 1e-300) continue;
            double th = 0.5 * atan2(2.0 * a[p][q], a[q][q] - a[p][p]);
            double c = cos(th), s = sin(th);
            for (int k = 0; k < 3; k++) {
                double akp = a[k][p], akq = a[k][q];
                a[k][p] = c * akp - s * akq;
                a[k][q] = s * akp + c * akq;
            }
            for (int k = 0; k < 3; k++) {
                double apk = a[p][k], aqk = a[q][k];
                a[p][k] = c * apk - s * aqk;
                a[q][k] = s * apk + c * aqk;
            }
            for (int k = 0; k < 3; k++) {
                double vp = v[k][p], vq = v[k][q];
                v[k][p] = c * vp - s * vq;
                v[k][q] = s * vp + c * vq;
            }
        }
    }
    double e0[3] = {v[0][0], v[1][0], v[2][0]};
    cpb_unit(e0);
    double c1[3] = {v[0][1], v[1][1], v[2][1]};
    double d = cpb_dot(c1, e0);
    double e1[3] = {c1[0] - e0[0] * d, c1[1] - e0[1] * d, c1[2] - e0[2] * d};
    cpb_unit(e1);
    for (int i = 0; i < 3; i++) { out[0][i] = e0[i]; out[1][i] = e1[i]; }
    cpb_cross(e0, e1, out[2]);
}

// The sum (min, max) over the LANES threads that share a box: one thread, a warp, or a
// block (whose every thread must call it). Every one of them gets the result.
#define CPB_SUM 0
#define CPB_MIN 1
#define CPB_MAX 2
template <int OP> __device__ __forceinline__ double cpb_op(double a, double b) {
    return OP == CPB_SUM ? a + b : OP == CPB_MIN ? fmin(a, b) : fmax(a, b);
}
template <int LANES, int OP> __device__ __forceinline__ double cpb_reduce(double v) {
    if (LANES == 1) return v;
    for (int off = 16; off > 0; off /= 2) v = cpb_op<OP>(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (LANES == 32) return v;
    __shared__ double part[LANES >= 64 ? LANES / 32 : 1];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < LANES / 32; w++) v = cpb_op<OP>(v, part[w]);
    __syncthreads();
    return v;
}

template <typename T> __device__ __forceinline__ double cpb_eps();
template <> __device__ __forceinline__ double cpb_eps<float>() { return 1.1920928955078125e-7; }
template <> __device__ __forceinline__ double cpb_eps<double>() { return 2.220446049250313e-16; }

// Box r's sorted range: boxes 0..n-1 are the internal nodes', n-1..2n-1 the single triangles'.
__device__ __forceinline__ void cpb_box_range(const u32* other_end, u32 n, u32 r, u32& s, u32& e) {
    if (r + 1 < n) {
        u32 j = other_end[r];
        s = min(r, j);
        e = max(r, j) + 1;
    } else {
        s = r - (n - 1);
        e = s + 1;
    }
}

// OrientedBox::of_triangles of sorted triangles s..e into `out` (16 values), by LANES
// threads (`lane` is this one's place among them), which stride over the triangles and all
// end with the same sums.
template <typename T, int LANES>
__device__ void cpb_box(const T* recs, u32 s, u32 e, u32 lane, T* out) {
    const u32 step = LANES;
    // Pass 1: summed normal, area, corner sum.
    double nsum[3] = {0, 0, 0}, area = 0, mean[3] = {0, 0, 0}, m = 0;
    for (u32 t = s + lane; t < e; t += step) {
        const T* p = recs + (u64)t * 12;
        double a[3] = {(double)p[0], (double)p[1], (double)p[2]};
        double b[3] = {(double)p[3], (double)p[4], (double)p[5]};
        double c[3] = {(double)p[6], (double)p[7], (double)p[8]};
        double ab[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, ac[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
        double nn[3];
        cpb_cross(ab, ac, nn);
        area += sqrt(cpb_dot(nn, nn));
        for (int i = 0; i < 3; i++) {
            nsum[i] += nn[i];
            mean[i] += a[i] + b[i] + c[i];
        }
        m += 3.0;
    }
    area = cpb_reduce<LANES, CPB_SUM>(area);
    m = cpb_reduce<LANES, CPB_SUM>(m);
    for (int i = 0; i < 3; i++) {
        nsum[i] = cpb_reduce<LANES, CPB_SUM>(nsum[i]);
        mean[i] = cpb_reduce<LANES, CPB_SUM>(mean[i]) / m;
    }
    // Pass 2: covariance of the corners about their mean.
    double cov[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    for (u32 t = s + lane; t < e; t += step) {
        const T* p = recs + (u64)t * 12;
        for (int k = 0; k < 3; k++) {
            double d[3] = {(double)p[3 * k] - mean[0], (double)p[3 * k + 1] - mean[1], (double)p[3 * k + 2] - mean[2]};
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) cov[i][j] += d[i] * d[j];
        }
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) cov[i][j] = cpb_reduce<LANES, CPB_SUM>(cov[i][j]);
    // The frame (bvh.rs frame_of).
    double axes[3][3];
    double nl = sqrt(cpb_dot(nsum, nsum));
    if (nl > 0.0 && nl >= NK_FLAT_ENOUGH * area) {
        double nv[3] = {nsum[0] / nl, nsum[1] / nl, nsum[2] / nl};
        int k = 0;
        for (int i = 1; i < 3; i++)
            if (fabs(nv[i]) < fabs(nv[k])) k = i;
        double ax[3] = {0, 0, 0};
        ax[k] = 1.0;
        double d = cpb_dot(ax, nv);
        double u[3] = {ax[0] - nv[0] * d, ax[1] - nv[1] * d, ax[2] - nv[2] * d};
        cpb_unit(u);
        double v[3];
        cpb_cross(nv, u, v);
        double quv = 0, quu = 0, qvv = 0;
        for (int i = 0; i < 3; i++) {
            double su = 0, sv = 0, sw = 0;
            for (int j = 0; j < 3; j++) {
                su += u[i] * cov[i][j] * v[j];
                sv += u[i] * cov[i][j] * u[j];
                sw += v[i] * cov[i][j] * v[j];
            }
            quv += su;
            quu += sv;
            qvv += sw;
        }
        double th = 0.5 * atan2(2.0 * quv, quu - qvv);
        double c = cos(th), sn = sin(th);
        double u2[3] = {u[0] * c + v[0] * sn, u[1] * c + v[1] * sn, u[2] * c + v[2] * sn};
        cpb_unit(u2);
        for (int i = 0; i < 3; i++) { axes[0][i] = u2[i]; axes[2][i] = nv[i]; }
        cpb_cross(nv, u2, axes[1]);
    } else {
        cpb_principal_axes(cov, axes);
    }
    bool finite = true;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) finite = finite && isfinite(axes[i][j]);
    // The axes as stored (rounded to T), and the corners' extent along them.
    T ax_t[9];
    double ax_d[3][3];
    for (int i = 0; i < 9; i++) {
        double v = finite ? axes[i / 3][i % 3] : (i / 3 == i % 3 ? 1.0 : 0.0);
        ax_t[i] = (T)v;
        ax_d[i / 3][i % 3] = (double)ax_t[i];
    }
    double lo[3] = {t_inf<double>(), t_inf<double>(), t_inf<double>()};
    double hi[3] = {-t_inf<double>(), -t_inf<double>(), -t_inf<double>()};
    double norm1 = 0;
    for (u32 t = s + lane; t < e; t += step) {
        const T* p = recs + (u64)t * 12;
        for (int k = 0; k < 3; k++) {
            double x[3] = {(double)p[3 * k], (double)p[3 * k + 1], (double)p[3 * k + 2]};
            norm1 = fmax(norm1, fabs(x[0]) + fabs(x[1]) + fabs(x[2]));
            for (int j = 0; j < 3; j++) {
                double pr = cpb_dot(x, ax_d[j]);
                lo[j] = fmin(lo[j], pr);
                hi[j] = fmax(hi[j], pr);
            }
        }
    }
    norm1 = cpb_reduce<LANES, CPB_MAX>(norm1);
    for (int j = 0; j < 3; j++) {
        lo[j] = cpb_reduce<LANES, CPB_MIN>(lo[j]);
        hi[j] = cpb_reduce<LANES, CPB_MAX>(hi[j]);
    }
    if (lane != 0) return;
    for (int i = 0; i < 9; i++) out[i] = ax_t[i];
    for (int j = 0; j < 3; j++) {
        double widen = (fabs(lo[j]) + fabs(hi[j]) + norm1) * cpb_eps<T>() * 4.0;
        out[9 + j] = (T)(lo[j] - widen);
        out[12 + j] = (T)(hi[j] + widen);
    }
    out[15] = (T)0;
}

// Boxes of at most CPB_SMALL triangles, a thread each: their frames (the costly part in f64)
// then run 32 to a warp instead of once per warp.
#define CPB_SMALL 32
// Boxes of more than CPB_HUGE triangles (the top of the tree) take a block of CPB_BLOCK
// threads each, the others a warp: a warp alone would scan the root's every triangle.
#define CPB_HUGE NK_HUGE_BOX
#define CPB_BLOCK NK_HUGE_BLOCK
template <typename T>
__device__ void cpb_small_boxes_impl(const T* recs, const u32* other_end, u32 n, T* boxes) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x, s, e;
    if (r + 1 >= 2 * n) return;
    cpb_box_range(other_end, n, r, s, e);
    if (e - s <= CPB_SMALL) cpb_box<T, 1>(recs, s, e, 0, boxes + (u64)r * 16);
}
NK_INSTANTIATE(cpb_small_boxes, (const R* recs, const u32* other_end, u32 n, R* boxes), (recs, other_end, n, boxes))

// The middle-sized internal nodes' boxes, a warp each; the huge ones are listed in
// `huge` (count first) for cpb_huge_boxes.
template <typename T>
__device__ void cpb_large_boxes_impl(const T* recs, const u32* other_end, u32 n, T* boxes, u32* huge) {
    u32 r = (blockIdx.x * (u64)blockDim.x + threadIdx.x) / 32, s, e, lane = threadIdx.x & 31;
    if (r + 1 >= n) return;
    cpb_box_range(other_end, n, r, s, e);
    if (e - s <= CPB_SMALL) return;
    if (e - s > CPB_HUGE) {
        if (lane == 0) huge[1 + atomicAdd(&huge[0], 1u)] = r;
        return;
    }
    cpb_box<T, 32>(recs, s, e, lane, boxes + (u64)r * 16);
}
NK_INSTANTIATE(cpb_large_boxes, (const R* recs, const u32* other_end, u32 n, R* boxes, u32* huge),
               (recs, other_end, n, boxes, huge))

// The listed huge nodes' boxes, a block (CPB_BLOCK threads) each, blocks taking turns.
template <typename T>
__device__ void cpb_huge_boxes_impl(const T* recs, const u32* other_end, u32 n, const u32* huge, T* boxes) {
    u32 count = huge[0];
    for (u32 k = blockIdx.x; k < count; k += gridDim.x) {
        u32 r = huge[1 + k], s, e;
        cpb_box_range(other_end, n, r, s, e);
        cpb_box<T, CPB_BLOCK>(recs, s, e, threadIdx.x, boxes + (u64)r * 16);
    }
}
NK_INSTANTIATE(cpb_huge_boxes, (const R* recs, const u32* other_end, u32 n, const u32* huge, R* boxes),
               (recs, other_end, n, huge, boxes))

// ---- WideBvh::of: the collapse, breadth first, in one block ----

// A binary reference: an internal node i, or (CHILD_POINT set) the single sorted triangle.
__device__ __forceinline__ void cpb_range(const u32* other_end, u32 ref, u32& s, u32& e) {
    if (ref & CHILD_POINT) {
        s = ref & ~CHILD_POINT;
        e = s + 1;
    } else {
        u32 j = other_end[ref];
        s = min(ref, j);
        e = max(ref, j) + 1;
    }
}
__device__ __forceinline__ bool cpb_expandable(u32 ref, u32 s, u32 e) { return !(ref & CHILD_POINT) && e - s > CPB_WIDE; }

// Exclusive prefix sum of `v` over the block; `total` gets the sum. Every thread must call it.
__device__ u32 cpb_block_scan(u32 v, u32& total) {
    __shared__ u32 warp_sums[32];
    u32 lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    u32 x = v;
    for (int off = 1; off < 32; off *= 2) {
        u32 y = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= (u32)off) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 w = lane < warps ? warp_sums[lane] : 0;
        for (int off = 1; off < 32; off *= 2) {
            u32 y = __shfl_up_sync(0xffffffffu, w, off);
            if (lane >= (u32)off) w += y;
        }
        if (lane < warps) warp_sums[lane] = w;
    }
    __syncthreads();
    total = warp_sums[warps - 1];
    u32 before = (warp > 0 ? warp_sums[warp - 1] : 0) + x - v;
    __syncthreads();
    return before;
}

// WideBvh::of over the topology, in one block: the queue of wide nodes (binary references)
// is filled a level at a time, each node's expandable children appended in slot order after
// an exclusive scan, so node numbers are the host's breadth-first ones. Writes `children`
// and each slot's binary reference (`slot_ref`; CPB_EMPTY for none), and
// out = {nodes, depth, overflow}.
extern "C" __global__ void cpb_collapse(const u32* left, const u32* right, const u32* other_end, u32 n, u32 cap, u32* queue,
                                        u32* children, u32* slot_ref, u32* out) {
    if (threadIdx.x == 0) queue[0] = n == 1 ? CHILD_POINT : 0u;
    __syncthreads();
    u32 head = 0, tail = 1, depth = 0, overflow = 0;
    while (head < tail && !overflow) {
        depth++;
        u32 level_end = tail;
        for (u32 base = head; base < level_end; base += blockDim.x) {
            u32 q = base + threadIdx.x;
            bool live = q < level_end;
            u32 fr[CPB_WIDE], fs[CPB_WIDE], fe[CPB_WIDE];
            u32 len = 0;
            if (live) {
                fr[0] = queue[q];
                cpb_range(other_end, fr[0], fs[0], fe[0]);
                len = 1;
                while (len < CPB_WIDE) {
                    // The expandable entry of the largest range, the first of equals.
                    int k = -1;
                    for (u32 i = 0; i < len; i++)
                        if (cpb_expandable(fr[i], fs[i], fe[i]) && (k < 0 || fe[i] - fs[i] > fe[k] - fs[k])) k = i;
                    if (k < 0) break;
                    for (int i = len; i > k + 1; i--) { fr[i] = fr[i - 1]; fs[i] = fs[i - 1]; fe[i] = fe[i - 1]; }
                    u32 node = fr[k];
                    fr[k] = left[node];
                    fr[k + 1] = right[node];
                    cpb_range(other_end, fr[k], fs[k], fe[k]);
                    cpb_range(other_end, fr[k + 1], fs[k + 1], fe[k + 1]);
                    len++;
                }
            }
            u32 count = 0;
            for (u32 i = 0; i < len; i++) count += cpb_expandable(fr[i], fs[i], fe[i]) ? 1 : 0;
            u32 total;
            u32 at = tail + cpb_block_scan(count, total);
            if (live) {
                for (u32 slot = 0; slot < CPB_WIDE; slot++) {
                    u64 w = (u64)q * CPB_WIDE + slot;
                    if (slot >= len) {
                        children[w] = CPB_EMPTY;
                        slot_ref[w] = CPB_EMPTY;
                        continue;
                    }
                    slot_ref[w] = fr[slot];
                    if (cpb_expandable(fr[slot], fs[slot], fe[slot])) {
                        if (at < cap) queue[at] = fr[slot];
                        children[w] = at++;
                    } else {
                        children[w] = CPB_LEAF | ((fe[slot] - fs[slot] - 1) << 28) | fs[slot];
                    }
                }
            }
            tail += total;
            if (tail > cap) overflow = 1;
            // Queue entries written above are read by other threads at the next level.
            __syncthreads();
            if (overflow) break;
        }
        head = level_end;
    }
    if (threadIdx.x == 0) {
        out[0] = tail;
        out[1] = depth;
        out[2] = overflow;
    }
}

// Each wide slot's box record: its binary reference's box (`boxes` from the two box kernels), zeros
// for an empty slot. A thread per value.
template <typename T>
__device__ void cpb_wide_boxes_impl(const T* boxes, const u32* slot_ref, u32 n, u64 values, T* wide) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= values) return;
    u32 ref = slot_ref[i / 16];
    T v = (T)0;
    if (ref != CPB_EMPTY) {
        u64 box = (ref & CHILD_POINT) ? (u64)(n - 1) + (ref & ~CHILD_POINT) : (u64)ref;
        v = boxes[box * 16 + i % 16];
    }
    wide[i] = v;
}
NK_INSTANTIATE(cpb_wide_boxes, (const R* boxes, const u32* slot_ref, u32 n, u64 values, R* wide), (boxes, slot_ref, n, values, wide))
