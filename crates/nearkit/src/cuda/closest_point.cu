// Closest point on a triangle mesh: one thread per query (in Morton order), a depth-first
// search of the TriangleBvh (src/triangle_bvh.rs) built on the host. closest_point_triangle
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

// TriangleBvh on the device: corners c[k*3 + axis] columns of n, boxes lo/hi (axis columns of
// n - 1 internal nodes).
template <typename T>
struct TriBvh {
    const u32* ids;
    const T* corners;  // 9 columns of n
    const u32* left;
    const u32* right;
    const u32* other_end;
    const T* lo;  // 3 columns of n - 1
    const T* hi;
    u32 n;
};

#define CP_LEAF 4  // triangle_bvh::TRIANGLE_LEAF
#define CP_STACK 64

template <typename T>
__device__ __forceinline__ T cp_bound(const TriBvh<T>& t, u32 i, V3<T> q) {
    u64 m = t.n - 1;
    T gx = t_max(t_max(t.lo[i] - q.x, q.x - t.hi[i]), (T)0);
    T gy = t_max(t_max(t.lo[m + i] - q.y, q.y - t.hi[m + i]), (T)0);
    T gz = t_max(t_max(t.lo[2 * m + i] - q.z, q.z - t.hi[2 * m + i]), (T)0);
    return gx * gx + gy * gy + gz * gz;
}

template <typename T>
__device__ __forceinline__ void cp_offer(const TriBvh<T>& t, u32 s, V3<T> q, T r2, T slack, bool& found, u32& bid,
                                         TriPoint<T>& best, T& cut) {
    u64 n = t.n;
    const T* c = t.corners;
    V3<T> a = v3(c[s], c[n + s], c[2 * n + s]);
    V3<T> b = v3(c[3 * n + s], c[4 * n + s], c[5 * n + s]);
    V3<T> cc = v3(c[6 * n + s], c[7 * n + s], c[8 * n + s]);
    TriPoint<T> tp = closest_point_triangle(q, a, b, cc);
    u32 id = t.ids[s];
    bool better = !found || tp.d2 < best.d2 || (tp.d2 == best.d2 && id < bid);
    if (tp.d2 <= r2 && better) {
        T r = sqrt(tp.d2) + slack;
        cut = r * r;
        best = tp;
        bid = id;
        found = true;
    }
}

// cpu/closest_point.rs::search for the queries in `order`; results at each query's index.
template <typename T>
__device__ void closest_points_impl(const T* qx, const T* qy, const T* qz, const u32* order, u32 nq, TriBvh<T> t, T r2,
                                    T slack, u32* out_tri, T* out_d, T* out_x, T* out_y, T* out_z, T* out_u, T* out_v,
                                    T* out_w) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    u32 qi = order[i];
    V3<T> q = v3(qx[qi], qy[qi], qz[qi]);
    bool found = false;
    u32 bid = NO_ID;
    TriPoint<T> best;
    T r = sqrt(r2) + slack;
    T cut = r * r;
    if (t.n <= CP_LEAF) {
        for (u32 s = 0; s < t.n; s++) cp_offer(t, s, q, r2, slack, found, bid, best, cut);
    } else {
        u32 stack_node[CP_STACK];
        T stack_lb[CP_STACK];
        int top = 0;
        stack_node[0] = 0;
        stack_lb[0] = cp_bound(t, 0, q);
        top = 1;
        while (top > 0) {
            top--;
            u32 node = stack_node[top];
            if (stack_lb[top] > cut) continue;
            u32 j = t.other_end[node];
            u32 s = min(node, j), e = max(node, j) + 1;
            if (e - s <= CP_LEAF) {
                for (u32 k = s; k < e; k++) cp_offer(t, k, q, r2, slack, found, bid, best, cut);
                continue;
            }
            u32 kid[2];
            T klb[2];
            int nk = 0;
            u32 ch[2] = {t.left[node], t.right[node]};
            for (int h = 0; h < 2; h++) {
                if (ch[h] & CHILD_POINT) {
                    cp_offer(t, ch[h] & ~CHILD_POINT, q, r2, slack, found, bid, best, cut);
                } else {
                    kid[nk] = ch[h];
                    klb[nk] = cp_bound(t, ch[h], q);
                    nk++;
                }
            }
            if (nk == 2 && klb[1] < klb[0]) {
                u32 tk = kid[0]; kid[0] = kid[1]; kid[1] = tk;
                T tl = klb[0]; klb[0] = klb[1]; klb[1] = tl;
            }
            for (int h = nk - 1; h >= 0; h--) {
                if (klb[h] <= cut) { stack_node[top] = kid[h]; stack_lb[top] = klb[h]; top++; }
            }
        }
    }
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
NK_INSTANTIATE(closest_points, (const R* qx, const R* qy, const R* qz, const u32* order, u32 nq, TriBvh<R> t, R r2,
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
