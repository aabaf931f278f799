// The closest point of a triangle to a point (closest_point/triangle.rs, operation for
// operation, no fused multiply-add), shared by the closest-point and collision kernels.

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

// triangle.rs::nearest_edge
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

// triangle.rs::closest_point_triangle
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

// The WideBvh (bvh.rs) on the device. Per node WIDE children: OrientedBox
// records of 16 values {axes[9], lo[3], hi[3], pad} and child references; per sorted triangle
// a record of 12 values {a, b, c, pad} and its mesh id.
