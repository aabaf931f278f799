// Closest point on a triangle mesh: eight lanes per query (queries in Morton order), a
// depth-first search of the WideBvh (src/triangle_bvh.rs) built on the host. closest_point_triangle
// repeats src/closest_point_triangle.rs operation for operation (no fused multiply-add), so
// both backends return the same bits.

template <typename T>
struct V3 {
    T x, y, z;
};
template <typename T> __device__ __forceinline__ V3<T> v3(T x, T y, T z) { return V3<T>{x, y, z}; }
template <typename T> __device__ __forceinline__ V3<T> vsub(V3<T> u, V3<T> v) { return v3(u.x - v.x, u.y - v.y, u.z - v.z); }
template <typename T> __device__ __forceinline__ T vdot(V3<T> u, V3<T> v) { return u.x * v.x + u.y * v.y + u.z * v.z; }
// o + u·s
template <typename T> __device__ __forceinline__ V3<T> along(V3<T> o, V3<T> u, T s) {
    return v3(o.x + u.x * s, o.y + u.y * s, o.z + u.z * s);
}

template <typename T>
struct TriPoint {
    T d2;
    V3<T> p;
    T u, v, w;
};

template <typename T>
__device__ __forceinline__ TriPoint<T> tp_finish(V3<T> p, V3<T> point, T u, T v, T w) {
    V3<T> d = vsub(p, point);
    return TriPoint<T>{vdot(d, d), point, u, v, w};
}

// closest_point_triangle.rs::nearest_edge
template <typename T>
__device__ TriPoint<T> nearest_edge(V3<T> p, V3<T> a, V3<T> b, V3<T> c) {
    T zero = (T)0, one = (T)1;
    V3<T> s_[3] = {a, b, c};
    V3<T> e_[3] = {b, c, a};
    TriPoint<T> best;
    for (int k = 0; k < 3; k++) {
        V3<T> s = s_[k], e = e_[k];
        V3<T> d = vsub(e, s);
        T l = vdot(d, d);
        T t = l > zero ? t_min(t_max(vdot(vsub(p, s), d) / l, zero), one) : zero;
        T bary[3] = {zero, zero, zero};
        int i = k, j = (k + 1) % 3;
        bary[i] = one - t;
        bary[j] = bary[j] + t;
        TriPoint<T> cand = tp_finish(p, along(s, d, t), bary[0], bary[1], bary[2]);
        if (k == 0 || cand.d2 < best.d2) best = cand;
    }
    return best;
}

// The NaN Rust's f64::NAN (and its f32 cast) has, so that empty rows match bit for bit.
template <typename T> __device__ __forceinline__ T quiet_nan();
template <> __device__ __forceinline__ float quiet_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double quiet_nan<double>() { return __longlong_as_double(0x7ff8000000000000ll); }

template <typename T> __device__ __forceinline__ T sliver_ratio();
template <> __device__ __forceinline__ float sliver_ratio<float>() { return (float)1e-3; }
template <> __device__ __forceinline__ double sliver_ratio<double>() { return 1e-9; }

// closest_point_triangle.rs::closest_point_triangle
template <typename T>
__device__ TriPoint<T> closest_point_triangle(V3<T> p, V3<T> a, V3<T> b, V3<T> c) {
    T zero = (T)0, one = (T)1;
    V3<T> ab = vsub(b, a), ac = vsub(c, a), ap = vsub(p, a);
    T d1 = vdot(ab, ap), d2 = vdot(ac, ap);
    if (d1 <= zero && d2 <= zero) return tp_finish(p, a, one, zero, zero);
    V3<T> bp = vsub(p, b);
    T d3 = vdot(ab, bp), d4 = vdot(ac, bp);
    if (d3 >= zero && d4 <= d3) return tp_finish(p, b, zero, one, zero);
    T vc = d1 * d4 - d3 * d2;
    if (vc <= zero && d1 >= zero && d3 <= zero && d1 - d3 > zero) {
        T v = d1 / (d1 - d3);
        return tp_finish(p, along(a, ab, v), one - v, v, zero);
    }
    V3<T> cp = vsub(p, c);
    T d5 = vdot(ab, cp), d6 = vdot(ac, cp);
    if (d6 >= zero && d5 <= d6) return tp_finish(p, c, zero, zero, one);
    T vb = d5 * d2 - d1 * d6;
    if (vb <= zero && d2 >= zero && d6 <= zero && d2 - d6 > zero) {
        T w = d2 / (d2 - d6);
        return tp_finish(p, along(a, ac, w), one - w, zero, w);
    }
    T va = d3 * d6 - d5 * d4;
    if (va <= zero && (d4 - d3) >= zero && (d5 - d6) >= zero && (d4 - d3) + (d5 - d6) > zero) {
        T w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return tp_finish(p, along(b, vsub(c, b), w), zero, one - w, w);
    }
    T denom = va + vb + vc;
    if (denom > zero && isfinite(denom)) {
        T v = vb / denom, w = vc / denom;
        T u = one - v - w;
        V3<T> point = v3(a.x + ab.x * v + ac.x * w, a.y + ab.y * v + ac.y * w, a.z + ab.z * v + ac.z * w);
        bool on_face = v >= zero && w >= zero && u >= zero;
        bool sliver = denom <= vdot(ab, ab) * vdot(ac, ac) * sliver_ratio<T>();
        if (on_face && !sliver) return tp_finish(p, point, u, v, w);
        TriPoint<T> edge = nearest_edge(p, a, b, c);
        TriPoint<T> face = tp_finish(p, point, u, v, w);
        return on_face && face.d2 < edge.d2 ? face : edge;
    }
    return nearest_edge(p, a, b, c);
}

// The WideBvh (src/triangle_bvh.rs) on the device. Per node WIDE children: OrientedBox
// records of 16 values {axes[9], lo[3], hi[3], pad} and child references; per sorted triangle
// a record of 12 values {a, b, c, pad} and its mesh id.
template <typename T>
struct WideBvh {
    const T* boxes;
    const u32* children;
    const T* tris;
    const u32* ids;
    u32 stack_cap;  // stack entries per query
    u32 n;          // triangles
};

#define CP_RUN 16  // consecutive queries per group (closest_point.rs::QUERIES_PER_GROUP)

#define CP_WIDE 8  // triangle_bvh::WIDE
#define CP_LEAF_BIT 0x80000000u
#define CP_START 0x0fffffffu
#define CP_EMPTY 0xffffffffu

// triangle_bvh.rs::OrientedBox::lower_bound
template <typename T>
__device__ __forceinline__ T cp_bound(const T* b, V3<T> q) {
    T s = (T)0;
#pragma unroll
    for (int k = 0; k < 3; k++) {
        T p = q.x * __ldg(b + k * 3) + q.y * __ldg(b + k * 3 + 1) + q.z * __ldg(b + k * 3 + 2);
        T g = t_max(t_max(__ldg(b + 9 + k) - p, p - __ldg(b + 12 + k)), (T)0);
        s = s + g * g;
    }
    return s;
}

// A bound stored as f32, rounded down so it stays a lower bound.
__device__ __forceinline__ float cp_lb_f32(float v) { return v; }
__device__ __forceinline__ float cp_lb_f32(double v) { return __double2float_rd(v); }

// cpu/closest_point.rs::search, by CP_WIDE lanes per query (a warp serves four queries): at
// a node each lane bounds one child and the children within the cut are pushed farthest
// first; at a leaf each lane tests one triangle. Every lane keeps the best of the triangles
// it tested; the cut is the group's best. The answer is the brute-force minimum of the
// computed distances, ties to the smaller id, whatever the order of visits, so it equals the
// CPU's bit for bit. Why lanes per query and not a thread per query: with a thread per query
// a warp's lanes stood at different nodes, so about 6 of 32 were active and each read its own
// sectors; here a group's lanes read one node's children together.
// Dynamic shared memory: per group, stack_cap entries of (reference, f32 bound).
template <typename T>
__device__ void closest_points_impl(const T* qx, const T* qy, const T* qz, const u32* order, u32 nq, WideBvh<T> t, T r2,
                                    T slack, u32* out_tri, T* out_d, T* out_x, T* out_y, T* out_z, T* out_u, T* out_v,
                                    T* out_w) {
    extern __shared__ u32 cp_stack[];
    u32 tid = threadIdx.x;
    u32 sub = tid & (CP_WIDE - 1);
    unsigned gmask = 0xffu << (tid & 24);
    u64 g0 = ((u64)blockIdx.x * blockDim.x + tid) / CP_WIDE * CP_RUN;
    u32* st_ref = cp_stack + (tid / CP_WIDE) * t.stack_cap * 2;
    float* st_lb = (float*)(st_ref + t.stack_cap);
    T inf = t_inf<T>();
    // Sorted position of the previous query's triangle: the next query (its neighbour on the
    // Morton curve) tests the 8 triangles around it first, so its cut is tight from the start.
    u32 hint = NO_ID;
    for (u64 g = g0; g < g0 + CP_RUN && g < nq; g++) {
    u32 qi = order[g];
    V3<T> q = v3(qx[qi], qy[qi], qz[qi]);
    bool found = false;
    u32 bid = NO_ID, bpos = NO_ID;
    TriPoint<T> best;
    T r = sqrt(r2) + slack;
    T cut = r * r;
    int top = 1;
    if (sub == 0) {
        st_ref[0] = 0;
        st_lb[0] = 0.0f;
        if (hint != NO_ID) {
            u32 hs = hint >= 3 ? hint - 3 : 0, he = min(hs + CP_WIDE, t.n);
            st_ref[1] = CP_LEAF_BIT | ((he - hs - 1) << 28) | hs;
            st_lb[1] = 0.0f;
        }
    }
    if (hint != NO_ID) top = 2;
    __syncwarp(gmask);
    while (top > 0) {
        top--;
        u32 ref = st_ref[top];
        T lb_in = (T)st_lb[top];
        __syncwarp(gmask);  // all have read the entry before a push may overwrite it
        if (lb_in > cut) continue;
        if (ref & CP_LEAF_BIT) {
            u32 s = ref & CP_START, cnt = ((ref >> 28) & 7) + 1;
            if (sub < cnt) {
                u32 k = s + sub;
                const T* c = t.tris + (u64)k * 12;
                V3<T> a = v3(__ldg(c), __ldg(c + 1), __ldg(c + 2));
                V3<T> b = v3(__ldg(c + 3), __ldg(c + 4), __ldg(c + 5));
                V3<T> cc = v3(__ldg(c + 6), __ldg(c + 7), __ldg(c + 8));
                TriPoint<T> tp = closest_point_triangle(q, a, b, cc);
                u32 id = __ldg(t.ids + k);
                bool better = !found || tp.d2 < best.d2 || (tp.d2 == best.d2 && id < bid);
                if (tp.d2 <= r2 && better) {
                    best = tp;
                    bid = id;
                    bpos = k;
                    found = true;
                }
            }
            T m = found ? best.d2 : inf;
#pragma unroll
            for (int off = CP_WIDE / 2; off > 0; off /= 2) m = t_min(m, __shfl_xor_sync(gmask, m, off, CP_WIDE));
            if (m < inf) {
                T rr = sqrt(m) + slack;
                cut = rr * rr;
            }
            continue;
        }
        u64 slot = (u64)ref * CP_WIDE + sub;
        u32 child = __ldg(t.children + slot);
        T lb = child == CP_EMPTY ? inf : cp_bound(t.boxes + slot * 16, q);
        bool valid = child != CP_EMPTY && lb <= cut;
        u32 vm = (__ballot_sync(gmask, valid) >> (tid & 24)) & 0xffu;
        // Rank among the valid children, farthest first (ties: the higher slot first), so the
        // nearest ends on top.
        int rank = 0;
#pragma unroll
        for (int j = 0; j < CP_WIDE; j++) {
            T o = __shfl_sync(gmask, lb, j, CP_WIDE);
            if (((vm >> j) & 1) && (o > lb || (o == lb && (u32)j > sub))) rank++;
        }
        if (valid) {
            st_ref[top + rank] = child;
            st_lb[top + rank] = cp_lb_f32(lb);
        }
        top += __popc(vm);
        __syncwarp(gmask);
    }
    // The group's answer: the least (d2, id) of its lanes.
    T d = found ? best.d2 : inf;
    u32 id = found ? bid : NO_ID, pos = found ? bpos : NO_ID;
#pragma unroll
    for (int off = CP_WIDE / 2; off > 0; off /= 2) {
        T od = __shfl_xor_sync(gmask, d, off, CP_WIDE);
        u32 oid = __shfl_xor_sync(gmask, id, off, CP_WIDE);
        u32 opos = __shfl_xor_sync(gmask, pos, off, CP_WIDE);
        if (od < d || (od == d && oid < id)) {
            d = od;
            id = oid;
            pos = opos;
        }
    }
    hint = pos;
    bool mine = found && bid == id;
    bool none = id == NO_ID && sub == 0;
    if (mine) {
        out_tri[qi] = bid;
        out_d[qi] = sqrt(best.d2);
        out_x[qi] = best.p.x; out_y[qi] = best.p.y; out_z[qi] = best.p.z;
        out_u[qi] = best.u; out_v[qi] = best.v; out_w[qi] = best.w;
    } else if (none) {
        T nan = quiet_nan<T>();
        out_tri[qi] = NO_ID;
        out_d[qi] = t_inf<T>();
        out_x[qi] = nan; out_y[qi] = nan; out_z[qi] = nan;
        out_u[qi] = nan; out_v[qi] = nan; out_w[qi] = nan;
    }
    __syncwarp(gmask);  // the stack is reused by the next query
    }
}
NK_INSTANTIATE(closest_points, (const R* qx, const R* qy, const R* qz, const u32* order, u32 nq, WideBvh<R> t, R r2,
                                R slack, u32* out_tri, R* out_d, R* out_x, R* out_y, R* out_z, R* out_u, R* out_v,
                                R* out_w),
               (qx, qy, qz, order, nq, t, r2, slack, out_tri, out_d, out_x, out_y, out_z, out_u, out_v, out_w))

// Morton keys (top 24 bits of the 63-bit code in the mesh's frame) of the queries, for order.
template <typename T>
__device__ void cp_query_keys_impl(const T* qx, const T* qy, const T* qz, u32 n, const T* frame, u64* keys, u32* vals) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = morton_code(frame, qx[i], qy[i], qz[i]) >> 39;
    vals[i] = i;
}
NK_INSTANTIATE(cp_query_keys, (const R* qx, const R* qy, const R* qz, u32 n, const R* frame, u64* keys, u32* vals),
               (qx, qy, qz, n, frame, keys, vals))
