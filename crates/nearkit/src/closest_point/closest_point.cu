// Closest point on a triangle mesh: a warp per 32 queries (in Morton order), a depth-first
// search of the WideBvh (closest_point/bvh.rs) built on the host, triangles tested by
// triangle.cuh (triangle.rs operation for operation, no fused multiply-add), so both backends
// return the same bits.


#define CP_WIDE NK_WIDE
#define CP_LEAF_BIT NK_WIDE_LEAF
#define CP_START NK_WIDE_START
#define CP_EMPTY NK_WIDE_EMPTY

// A bound stored as f32, rounded down so it stays a lower bound.
__device__ __forceinline__ float cp_lb_f32(float v) { return v; }
__device__ __forceinline__ float cp_lb_f32(double v) { return __double2float_rd(v); }

// Morton keys (top 30 bits of the 63-bit code in the frame closest_point.rs sets) of the
// queries, for order.
template <typename T>
__device__ void cp_query_keys_impl(const T* qx, const T* qy, const T* qz, u32 n, const T* frame, u64* keys, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = morton_code(frame, qx[i], qy[i], qz[i]) >> 33;
    vals[i] = i;
}
NK_INSTANTIATE(cp_query_keys, (const R* qx, const R* qy, const R* qz, u32 n, const R* frame, u64* keys, u32* vals),
               (qx, qy, qz, n, frame, keys, vals))

// 16-value box records and 12-value triangle records, loaded as vectors (records are
// 64 and 48 bytes, aligned).
__device__ __forceinline__ void cp_load(const float* p, float* v, int n) {
    for (int i = 0; i < n / 4; i++) {
        float4 x = __ldg((const float4*)p + i);
        v[4 * i] = x.x; v[4 * i + 1] = x.y; v[4 * i + 2] = x.z; v[4 * i + 3] = x.w;
    }
}
__device__ __forceinline__ void cp_load(const double* p, double* v, int n) {
    for (int i = 0; i < n / 2; i++) {
        double2 x = __ldg((const double2*)p + i);
        v[2 * i] = x.x; v[2 * i + 1] = x.y;
    }
}

// bvh.rs::OrientedBox::lower_bound, of a loaded record.
template <typename T>
__device__ __forceinline__ T cp_bound_of(const T* b, V3<T> q) {
    T s = (T)0;
#pragma unroll
    for (int k = 0; k < 3; k++) {
        T p = q.x * b[k * 3] + q.y * b[k * 3 + 1] + q.z * b[k * 3 + 2];
        T g = t_max(t_max(b[9 + k] - p, p - b[12 + k]), (T)0);
        s = s + g * g;
    }
    return s;
}

template <typename T>
__device__ __forceinline__ T cp_box_bound(const T* boxes, u64 slot, V3<T> q) {
    T b[16];
    cp_load(boxes + slot * 16, b, 16);
    return cp_bound_of(b, q);
}

// cpu.rs::search by packets: a warp takes 32 consecutive queries (Morton order),
// a lane each, and walks the WideBvh once for all of them. A child is visited when any lane's bound is
// within that lane's cut; children are pushed farthest first by the least of the lanes'
// bounds. Control flow is the warp's, so no lane waits on another's path; a lane whose bound
// rules a box out idles there. Each lane keeps the brute-force minimum of what it tests (ties
// to the smaller id), so the answer equals the CPU's bit for bit. The stack holds child slots
// (node · WIDE + c), whose box is rechecked when popped, as the cuts have shrunk since.
template <typename T>
__device__ void closest_points_impl(const T* qx, const T* qy, const T* qz, const u32* order, u32 nq,
                                           WideBvh<T> t, T r2, T slack, u32* out_tri, T* out_d, T* out_x, T* out_y,
                                           T* out_z, T* out_u, T* out_v, T* out_w) {
    extern __shared__ u32 cp_stack[];
    const unsigned full = 0xffffffffu;
    u32* st = cp_stack + (threadIdx.x >> 5) * t.stack_cap;
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    bool active = g < nq;
    if (__ballot_sync(full, active) == 0) return;
    u32 qi = active ? order[g] : 0;
    V3<T> q = active ? v3(qx[qi], qy[qi], qz[qi]) : v3((T)0, (T)0, (T)0);
    T inf = t_inf<T>();
    bool found = false;
    u32 bid = NO_ID;
    TriPoint<T> best;
    T r = sqrt(r2) + slack;
    T cut = active ? r * r : -inf;  // a lane past the end wants nothing
    int top = 0;
    u32 node = 0;
    while (true) {
        // Expand `node`: bound its children, push the wanted ones farthest first.
        u32 key[CP_WIDE];
        u32 want = 0, mine = 0;
#pragma unroll
        for (int j = 0; j < CP_WIDE; j++) {
            u64 slot = (u64)node * CP_WIDE + j;
            u32 child = __ldg(t.children + slot);
            key[j] = 0;
            if (child != CP_EMPTY) {
                T lb = cp_box_bound(t.boxes, slot, q);
                bool w = lb <= cut;
                mine |= (u32)w << j;
                if (__any_sync(full, w)) {
                    want |= 1u << j;
                    key[j] = __reduce_min_sync(full, w ? __float_as_uint(cp_lb_f32(lb)) : 0xffffffffu);
                }
            }
        }
        // The nearest child ends on top; its bounds stand until a leaf shrinks a cut.
        bool fresh = want != 0;
        u32 last = 0;
        while (want) {
            u32 bj = 0, bk = 0;
#pragma unroll
            for (int j = 0; j < CP_WIDE; j++)
                if (((want >> j) & 1) && key[j] >= bk) {
                    bk = key[j];
                    bj = j;
                }
            if ((threadIdx.x & 31) == 0) st[top] = node * CP_WIDE + bj;
            top++;
            want &= ~(1u << bj);
            last = bj;
        }
        __syncwarp(full);
        // Pop until a node to expand; leaves are tested on the way.
        bool more = false;
        while (top > 0) {
            top--;
            u32 slot = st[top];
            __syncwarp(full);  // all have read the entry before a push may overwrite it
            u32 child = __ldg(t.children + slot);
            bool w;
            if (fresh) {
                w = (mine >> last) & 1;
                fresh = false;
            } else {
                w = cp_box_bound(t.boxes, (u64)slot, q) <= cut;
                if (!__any_sync(full, w)) continue;
            }
            if (!(child & CP_LEAF_BIT)) {
                node = child;
                more = true;
                break;
            }
            if (w) {
                u32 s = child & CP_START, cnt = ((child >> 28) & 7) + 1;
                for (u32 k = s; k < s + cnt; k++) {
                    T c[12];
                    cp_load(t.tris + (u64)k * 12, c, 12);
                    V3<T> a = v3(c[0], c[1], c[2]), b = v3(c[3], c[4], c[5]), cc = v3(c[6], c[7], c[8]);
                    TriPoint<T> tp = closest_point_triangle(q, a, b, cc);
                    u32 id = __ldg(t.ids + k);
                    bool better = !found || tp.d2 < best.d2 || (tp.d2 == best.d2 && id < bid);
                    if (tp.d2 <= r2 && better) {
                        best = tp;
                        bid = id;
                        found = true;
                        T rr = sqrt(tp.d2) + slack;
                        cut = rr * rr;
                    }
                }
            }
            __syncwarp(full);
        }
        if (!more) break;
    }
    if (!active) return;
    if (found) {
        out_tri[qi] = bid;
        out_d[qi] = sqrt(best.d2);
        out_x[qi] = best.p.x; out_y[qi] = best.p.y; out_z[qi] = best.p.z;
        out_u[qi] = best.u; out_v[qi] = best.v; out_w[qi] = best.w;
    } else {
        T nan = quiet_nan<T>();
        out_tri[qi] = NO_ID;
        out_d[qi] = t_inf<T>();
        out_x[qi] = nan; out_y[qi] = nan; out_z[qi] = nan;
        out_u[qi] = nan; out_v[qi] = nan; out_w[qi] = nan;
    }
}
NK_INSTANTIATE(closest_points, (const R* qx, const R* qy, const R* qz, const u32* order, u32 nq, WideBvh<R> t,
                                       R r2, R slack, u32* out_tri, R* out_d, R* out_x, R* out_y, R* out_z, R* out_u,
                                       R* out_v, R* out_w),
               (qx, qy, qz, order, nq, t, r2, slack, out_tri, out_d, out_x, out_y, out_z, out_u, out_v, out_w))
