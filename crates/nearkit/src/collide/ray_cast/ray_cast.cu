// Ray casts on the device (collide/ray_cast/cuda.rs launches these): a thread per ray
// searches the mesh's tree and then the bodies', depth first, nearer child first. Every test
// repeats its Rust twin in collide/ray_cast/intersect.rs operation for operation, in f64
// without fused multiply-add, so both backends find the same hits bit for bit; the order of
// the search does not change them (pruning by boxes never loses a hit, see ray_cast/mod.rs).

#define RAY_STACK NK_RAY_STACK
#define RAY_LEAF NK_RAY_LEAF
#define RAY_EMPTY NK_RAY_EMPTY
#define RAY_KIND_BODY NK_RAY_KIND_BODY
#define RAY_KIND_HEIGHTFIELD NK_RAY_KIND_HEIGHTFIELD
#define RAY_MARGIN_OF_TERRAIN NK_RAY_MARGIN_OF_TERRAIN
#define RAY_MARGIN_OF_ORIGIN NK_RAY_MARGIN_OF_ORIGIN
#define RAY_KIND_INSTANCE NK_RAY_KIND_INSTANCE
#define RAY_ID_BITS NK_RAY_ID_BITS
#define RAY_INSTANCE_MARGIN NK_RAY_INSTANCE_MARGIN

// intersect.rs: RayFrame.
struct RayFrame {
    double o[3], d[3];
    double max_distance;
    double inv[3];
    double shear[3];
    int kx, ky, kz;
    u32 mask;
};

// v[k] for an axis k known only at run time (selects, not local memory).
__device__ __forceinline__ double axis(const double v[3], int k) { return k == 0 ? v[0] : (k == 1 ? v[1] : v[2]); }

__device__ __forceinline__ RayFrame ray_frame(const double* ray, u32 mask) {
    RayFrame r;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        r.o[a] = ray[a];
        r.d[a] = ray[3 + a];
    }
    r.max_distance = ray[6];
    r.mask = mask;
#pragma unroll
    for (int a = 0; a < 3; a++) r.inv[a] = r.d[a] != 0.0 ? 1.0 / r.d[a] : 0.0;
    int kz = 0;
    if (fabs(r.d[1]) > fabs(axis(r.d, kz))) kz = 1;
    if (fabs(r.d[2]) > fabs(axis(r.d, kz))) kz = 2;
    int kx = kz == 2 ? 0 : kz + 1;
    int ky = kx == 2 ? 0 : kx + 1;
    double dz = axis(r.d, kz);
    if (dz < 0.0) {
        int s = kx;
        kx = ky;
        ky = s;
    }
    r.shear[0] = axis(r.d, kx) / dz;
    r.shear[1] = axis(r.d, ky) / dz;
    r.shear[2] = 1.0 / dz;
    r.kx = kx;
    r.ky = ky;
    r.kz = kz;
    return r;
}

// RayFrame::slab_f64: the ray's interval in the box (lo, hi); enter > exit when it misses.
__device__ __forceinline__ void ray_slab_f64(const RayFrame& r, const double* lo, const double* hi, double& enter,
                                             double& exit) {
    enter = t_inf<double>() * -1.0;
    exit = t_inf<double>();
#pragma unroll
    for (int a = 0; a < 3; a++) {
        if (r.d[a] == 0.0) {
            if (r.o[a] < lo[a] || r.o[a] > hi[a]) {
                enter = t_inf<double>();
                exit = t_inf<double>() * -1.0;
                return;
            }
            continue;
        }
        double t0 = (lo[a] - r.o[a]) * r.inv[a];
        double t1 = (hi[a] - r.o[a]) * r.inv[a];
        double near = r.inv[a] > 0.0 ? t0 : t1;
        double far = r.inv[a] > 0.0 ? t1 : t0;
        if (near > enter) enter = near;
        if (far < exit) exit = far;
    }
}

// RayFrame::slab: the same for an f32 box (its values exact in f64).
__device__ __forceinline__ void ray_slab(const RayFrame& r, const float* lo, const float* hi, double& enter,
                                         double& exit) {
    double l[3] = {(double)lo[0], (double)lo[1], (double)lo[2]};
    double h[3] = {(double)hi[0], (double)hi[1], (double)hi[2]};
    ray_slab_f64(r, l, h, enter, exit);
}

// RayFrame::meets
__device__ __forceinline__ bool ray_meets(double enter, double exit, double limit) {
    return enter <= exit && exit >= 0.0 && enter <= limit;
}

// RayFrame::keep: t clamped into (enter, exit), if then in [0, max_distance].
__device__ __forceinline__ bool ray_keep(const RayFrame& r, double t, double enter, double exit, double& out) {
    if (t < enter) {
        t = enter;
    } else if (t > exit) {
        t = exit;
    }
    out = t;
    return t >= 0.0 && t <= r.max_distance;
}

// RayFrame::triangle: the watertight test. q: the 9 corners.
__device__ __forceinline__ bool ray_triangle(const RayFrame& r, const double* q, double enter, double exit,
                                             double& t) {
    double pa[3], pb[3], pc[3];
#pragma unroll
    for (int a = 0; a < 3; a++) {
        pa[a] = q[a] - r.o[a];
        pb[a] = q[3 + a] - r.o[a];
        pc[a] = q[6 + a] - r.o[a];
    }
    double sx = r.shear[0], sy = r.shear[1], sz = r.shear[2];
    double ax = axis(pa, r.kx) - sx * axis(pa, r.kz);
    double ay = axis(pa, r.ky) - sy * axis(pa, r.kz);
    double bx = axis(pb, r.kx) - sx * axis(pb, r.kz);
    double by = axis(pb, r.ky) - sy * axis(pb, r.kz);
    double cx = axis(pc, r.kx) - sx * axis(pc, r.kz);
    double cy = axis(pc, r.ky) - sy * axis(pc, r.kz);
    double u = cx * by - cy * bx;
    double v = ax * cy - ay * cx;
    double w = bx * ay - by * ax;
    if ((u < 0.0 || v < 0.0 || w < 0.0) && (u > 0.0 || v > 0.0 || w > 0.0)) return false;
    double det = u + v + w;
    if (det == 0.0) return false;
    double az = sz * axis(pa, r.kz), bz = sz * axis(pb, r.kz), cz = sz * axis(pc, r.kz);
    double tt = (u * az + v * bz + w * cz) / det;
    return ray_keep(r, tt, enter, exit, t);
}

// intersect.rs: apply (m·d, m row by row).
__device__ __forceinline__ void ray_apply(const double* m, const double d[3], double out[3]) {
    out[0] = m[0] * d[0] + m[1] * d[1] + m[2] * d[2];
    out[1] = m[3] * d[0] + m[4] * d[1] + m[5] * d[2];
    out[2] = m[6] * d[0] + m[7] * d[1] + m[8] * d[2];
}

__device__ __forceinline__ double ray_dot(const double u[3], const double v[3]) {
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
}

// RayFrame::ellipsoid: center (3) and unit-ball map (9).
__device__ __forceinline__ bool ray_ellipsoid(const RayFrame& r, const double* center, const double* unit,
                                              double enter, double exit, double& t) {
    double rel[3] = {r.o[0] - center[0], r.o[1] - center[1], r.o[2] - center[2]};
    double p[3];
    ray_apply(unit, rel, p);
    double c = ray_dot(p, p) - 1.0;
    if (c <= 0.0) return ray_keep(r, 0.0, enter, exit, t);
    double v[3];
    ray_apply(unit, r.d, v);
    double b = ray_dot(p, v);
    if (!(b < 0.0)) return false;
    double a = ray_dot(v, v);
    double disc = b * b - a * c;
    if (!(disc >= 0.0)) return false;
    double tt = c / (sqrt(disc) - b);
    return ray_keep(r, tt, enter, exit, t);
}

// vec3::normalize: false for a zero vector.
__device__ __forceinline__ bool ray_normalize(const double u[3], double out[3]) {
    double l = sqrt(ray_dot(u, u));
    if (!(l > 0.0)) return false;
    out[0] = u[0] / l;
    out[1] = u[1] / l;
    out[2] = u[2] / l;
    return true;
}

// RayFrame::triangle_normal
__device__ __forceinline__ void ray_triangle_normal(const RayFrame& r, const double* q, double n[3]) {
    double e1[3] = {q[3] - q[0], q[4] - q[1], q[5] - q[2]};
    double e2[3] = {q[6] - q[0], q[7] - q[1], q[8] - q[2]};
    double c[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    if (!ray_normalize(c, n)) {
        n[0] = 0.0;
        n[1] = 0.0;
        n[2] = 1.0;
    }
    if (ray_dot(n, r.d) > 0.0) {
        n[0] = -n[0];
        n[1] = -n[1];
        n[2] = -n[2];
    }
}

// RayFrame::ellipsoid_normal
__device__ __forceinline__ void ray_ellipsoid_normal(const RayFrame& r, const double* center, const double* unit,
                                                     double t, double n[3]) {
    double back[3] = {-r.d[0], -r.d[1], -r.d[2]};
    double rel[3] = {r.o[0] - center[0], r.o[1] - center[1], r.o[2] - center[2]};
    double p[3];
    ray_apply(unit, rel, p);
    bool done = false;
    if (!(ray_dot(p, p) - 1.0 <= 0.0)) {
        double v[3];
        ray_apply(unit, r.d, v);
        double q[3] = {p[0] + t * v[0], p[1] + t * v[1], p[2] + t * v[2]};
        double g[3] = {unit[0] * q[0] + unit[3] * q[1] + unit[6] * q[2], unit[1] * q[0] + unit[4] * q[1] + unit[7] * q[2],
                       unit[2] * q[0] + unit[5] * q[1] + unit[8] * q[2]};
        done = ray_normalize(g, n);
    }
    if (!done) {
        n[0] = back[0];
        n[1] = back[1];
        n[2] = back[2];
    }
}

// One node, in four 16-byte loads (nodes are 64 bytes, the buffer 256-byte aligned).
__device__ __forceinline__ BvhNode ray_node(const BvhNode* nodes, u32 i) {
    const float4* p = reinterpret_cast<const float4*>(nodes + i);
    float4 a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + 2);
    uint4 d = __ldg(reinterpret_cast<const uint4*>(p + 3));
    BvhNode n;
    n.bounds[0] = a.x, n.bounds[1] = a.y, n.bounds[2] = a.z, n.bounds[3] = a.w;
    n.bounds[4] = b.x, n.bounds[5] = b.y, n.bounds[6] = b.z, n.bounds[7] = b.w;
    n.bounds[8] = c.x, n.bounds[9] = c.y, n.bounds[10] = c.z, n.bounds[11] = c.w;
    n.child[0] = d.x, n.child[1] = d.y, n.layers[0] = d.z, n.layers[1] = d.w;
    return n;
}

// cpu.rs: search. `leaf(position, enter, exit)` tests a primitive and hands its hits to the
// visitor; `visit.limit()` is the t beyond which nothing is wanted. A stacked node keeps its
// entry t rounded down to f32 (a weaker, still safe, prune when it is popped).
template <typename Visit, typename Leaf>
__device__ __forceinline__ void ray_search(const BvhNode* nodes, u32 n_nodes, const RayFrame& r, Visit& visit,
                                           Leaf leaf) {
    if (n_nodes == 0) return;
    u32 stack[RAY_STACK];
    float stack_enter[RAY_STACK];
    stack[0] = 0;
    stack_enter[0] = t_inf<float>() * -1.0f;
    int top = 1;
    while (top > 0) {
        top--;
        u32 i = stack[top];
        if ((double)stack_enter[top] > visit.limit()) continue;
        BvhNode node = ray_node(nodes, i);
        u32 inner[2];
        double inner_enter[2];
        int found = 0;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            u32 c = node.child[k];
            if (c == RAY_EMPTY || (node.layers[k] & r.mask) == 0) continue;
            double enter, exit;
            ray_slab(r, &node.bounds[6 * k], &node.bounds[6 * k + 3], enter, exit);
            if (!ray_meets(enter, exit, visit.limit())) continue;
            if (c & RAY_LEAF) {
                leaf(c & ~RAY_LEAF, enter, exit);
            } else {
                inner[found] = c;
                inner_enter[found] = enter;
                found++;
            }
        }
        if (found == 2 && inner_enter[1] > inner_enter[0]) {
            u32 s = inner[0];
            inner[0] = inner[1];
            inner[1] = s;
            double e = inner_enter[0];
            inner_enter[0] = inner_enter[1];
            inner_enter[1] = e;
        }
        for (int k = 0; k < found; k++) {
            stack[top] = inner[k];
            stack_enter[top] = __double2float_rd(inner_enter[k]);
            top++;
        }
    }
}

// (t, tag, s) before (bt, btag, bs): TaggedHit::before (s: the primitive's position in its
// tree, or an instance's triangle).
__device__ __forceinline__ bool ray_before(double t, u32 tag, u32 s, double bt, u32 btag, u32 bs) {
    return t < bt || (t == bt && (tag < btag || (tag == btag && s < bs)));
}

// intersect.rs: step_out, the next f32 away from y on side dir (1 up, -1 down).
__device__ __forceinline__ float ray_step_out(float y, int dir) {
    if (isinf(y) && ((y > 0.0f) == (dir > 0))) return y;
    if (y == 0.0f) return __uint_as_float(dir > 0 ? 1u : 0x80000001u);
    bool away = (y > 0.0f) == (dir > 0);
    u32 b = __float_as_uint(y);
    return __uint_as_float(away ? b + 1u : b - 1u);
}

// intersect.rs: triangle_box (box_f32 of the corners' box, then a step out on every side).
__device__ __forceinline__ void ray_triangle_box(const double* q, float* lo, float* hi) {
#pragma unroll
    for (int a = 0; a < 3; a++) {
        double l = fmin(fmin(q[a], q[3 + a]), q[6 + a]);
        double h = fmax(fmax(q[a], q[3 + a]), q[6 + a]);
        lo[a] = ray_step_out(__double2float_rd(l), -1);
        hi[a] = ray_step_out(__double2float_ru(h), 1);
    }
}

// intersect.rs: degenerate, (b − a) × (c − a) = 0.
__device__ __forceinline__ bool ray_degenerate(const double* q) {
    double e1[3] = {q[3] - q[0], q[4] - q[1], q[5] - q[2]};
    double e2[3] = {q[6] - q[0], q[7] - q[1], q[8] - q[2]};
    return e1[1] * e2[2] - e1[2] * e2[1] == 0.0 && e1[2] * e2[0] - e1[0] * e2[2] == 0.0 &&
           e1[0] * e2[1] - e1[1] * e2[0] == 0.0;
}

// RayFrame::point, one axis.
__device__ __forceinline__ double ray_at(const RayFrame& r, int a, double t) { return r.o[a] + t * r.d[a]; }

// heightfield.rs: meets_terrain. The squares under the ray's piece from ta to tb (its box
// widened by m), unless the piece passes above or below the heights of their tiles of `level`.
__device__ __forceinline__ bool ray_meets_terrain(const RayFrame& r, const HeightfieldView& h, u32 level, double ta,
                                                  double tb, double m, u32* sq) {
    double lo[3], hi[3];
#pragma unroll
    for (int a = 0; a < 3; a++) {
        double pa = ray_at(r, a, ta), pb = ray_at(r, a, tb);
        lo[a] = fmin(pa, pb) - m;
        hi[a] = fmax(pa, pb) + m;
    }
    if (!hf_span(lo[0], hi[0], h.origin[0], h.spacing, h.cols, sq[0], sq[1]) ||
        !hf_span(lo[1], hi[1], h.origin[1], h.spacing, h.rows, sq[2], sq[3]))
        return false;
    double low, high;
    hf_tile_heights(h, level, sq, low, high);
    return hi[2] >= low && lo[2] <= high;
}

// heightfield.rs: visit_squares. Tests the triangles of squares sq (c0, c1, r0, r1) that are
// not in prev (m: the margin).
template <typename Visit>
__device__ __forceinline__ void ray_visit_squares(const RayFrame& r, const HeightfieldView& h, const u32* sq,
                                                  bool have_prev, const u32* prev, double m, Visit& visit) {
    u32 cols1 = h.cols - 1;
    for (u32 row = sq[2]; row <= sq[3]; row++) {
        for (u32 col = sq[0]; col <= sq[1]; col++) {
            if (have_prev && prev[2] <= row && row <= prev[3] && prev[0] <= col && col <= prev[1]) continue;
            V3<double> a = hf_vertex(h, row, col), b = hf_vertex(h, row, col + 1);
            V3<double> d = hf_vertex(h, row + 1, col + 1), e = hf_vertex(h, row + 1, col);
            // The square's box widened by m holds both triangles' boxes.
            double slo[3] = {a.x - m, a.y - m, fmin(fmin(fmin(a.z, b.z), d.z), e.z) - m};
            double shi[3] = {d.x + m, d.y + m, fmax(fmax(fmax(a.z, b.z), d.z), e.z) + m};
            double se, sx;
            ray_slab_f64(r, slo, shi, se, sx);
            if (!ray_meets(se, sx, visit.limit())) continue;
            u32 q = row * cols1 + col;
#pragma unroll
            for (u32 half = 0; half < 2; half++) {
                V3<double> p1 = half == 0 ? b : d, p2 = half == 0 ? d : e;
                double c[9] = {a.x, a.y, a.z, p1.x, p1.y, p1.z, p2.x, p2.y, p2.z};
                if (ray_degenerate(c)) continue;
                float tlo[3], thi[3];
                ray_triangle_box(c, tlo, thi);
                double te, tx;
                ray_slab(r, tlo, thi, te, tx);
                if (!ray_meets(te, tx, visit.limit())) continue;
                double t;
                if (ray_triangle(r, c, te, tx, t)) {
                    u32 id = 2 * q + half;
                    visit.hit(t, id | RAY_KIND_HEIGHTFIELD, id);
                }
            }
        }
    }
}

// heightfield.rs: search, its walk of the pyramid of tiles as a loop over levels.
template <typename Visit>
__device__ __forceinline__ void ray_search_heightfield(const RayFrame& r, const HeightfieldView& h, Visit& visit) {
    if (h.rows == 0) return;
    V3<double> far = hf_vertex(h, h.rows - 1, h.cols - 1);
    double lo[3] = {h.origin[0], h.origin[1], h.lowest};
    double hi[3] = {far.x, far.y, h.highest};
    double scale = 0.0, reach = 0.0;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        scale = fmax(fmax(scale, fabs(lo[a])), fabs(hi[a]));
        reach = fmax(reach, fabs(r.o[a]));
    }
    double m = scale * RAY_MARGIN_OF_TERRAIN + reach * RAY_MARGIN_OF_ORIGIN;
    double blo[3] = {lo[0] - m, lo[1] - m, lo[2] - m};
    double bhi[3] = {hi[0] + m, hi[1] + m, hi[2] + m};
    double enter, exit;
    ray_slab_f64(r, blo, bhi, enter, exit);
    double t0 = enter > 0.0 ? enter : 0.0;
    double limit = visit.limit();
    double t1 = exit < limit ? exit : limit;
    if (!(t0 <= t1)) return;
    double dxy = fmax(fabs(r.d[0]), fabs(r.d[1]));
    u32 top = h.tile_levels;
    double from[HF_MAX_TILE_LEVELS + 1], to[HF_MAX_TILE_LEVELS + 1], step[HF_MAX_TILE_LEVELS + 1];
    u32 n[HF_MAX_TILE_LEVELS + 1], k[HF_MAX_TILE_LEVELS + 1];
    // Walk::enter
    auto enter_level = [&](u32 l, double a, double b, double most) {
        double squares = (double)(1ull << (HF_TILE_BITS * l));
        double pieces = fmin(fmax(ceil(((b - a) * dxy / h.spacing) / squares), 1.0), most);
        from[l] = a;
        to[l] = b;
        n[l] = (u32)pieces;
        step[l] = (b - a) / (double)n[l];
        k[l] = 0;
    };
    enter_level(top, t0, t1, (double)(h.rows + h.cols));
    u32 level = top;
    bool have_prev = false;
    u32 prev[4] = {0, 0, 0, 0};
    while (true) {
        if (k[level] == n[level]) {
            if (level == top) return;
            level++;
            continue;
        }
        // Walk::next
        u32 kk = k[level]++;
        double pa = fmin(from[level] + (double)kk * step[level], to[level]);
        double pb = kk + 1 == n[level] ? to[level] : fmin(from[level] + (double)(kk + 1) * step[level], to[level]);
        u32 sq[4];
        if (!ray_meets_terrain(r, h, level > 1 ? level : 1, pa, pb, m, sq)) continue;
        if (level == 0) {
            ray_visit_squares(r, h, sq, have_prev, prev, m, visit);
            have_prev = true;
#pragma unroll
            for (int i = 0; i < 4; i++) prev[i] = sq[i];
            if (visit.limit() <= pb) return;
        } else {
            level--;
            enter_level(level, pa, pb, (double)(2 << HF_TILE_BITS) + 2.0);
        }
    }
}

// instances.rs: mesh instances. Instance::place, a shape point in world coordinates
// (R·v + p in this order); `pl`: the rotation row by row, then the position.
__device__ __forceinline__ void ray_place(const double* pl, const double* v, double* out) {
#pragma unroll
    for (int a = 0; a < 3; a++)
        out[a] = (pl[3 * a] * v[0] + pl[3 * a + 1] * v[1] + pl[3 * a + 2] * v[2]) + pl[9 + a];
}

// Instance::local_dir: Rᵀ·d.
__device__ __forceinline__ void ray_local_dir(const double* pl, const double d[3], double out[3]) {
#pragma unroll
    for (int a = 0; a < 3; a++) out[a] = pl[a] * d[0] + pl[3 + a] * d[1] + pl[6 + a] * d[2];
}

// Triangle t of the instance in slot `slot`, placed (9 values).
__device__ __forceinline__ void ray_placed_triangle(const RayInstanceView& iv, u32 slot, u32 t, double* q) {
    const double* pl = iv.place + 12 * (u64)slot;
    const double* c = iv.shape_corners + 9 * (iv.shapes[iv.shape[slot]].corners + (u64)t);
    ray_place(pl, c, q);
    ray_place(pl, c + 3, q + 3);
    ray_place(pl, c + 6, q + 6);
}

// The largest magnitude of v's coordinates (instances.rs: big).
__device__ __forceinline__ double ray_big(const double v[3]) {
    return fmax(fmax(fmax(0.0, fabs(v[0])), fabs(v[1])), fabs(v[2]));
}

// instances.rs: search_instance's box test, in the shape's frame (o + t·u, inv: 1/u or 0),
// the f32 box widened by m, within `limit` (the visit's plus the slack); its entry in
// `enter`. Rust's min and max are fmin and fmax (NaN-ignoring).
__device__ __forceinline__ bool ray_crosses(const double o[3], const double u[3], const double inv[3], double m,
                                            double slack, const float* lo, const float* hi, double limit,
                                            double& enter) {
    enter = t_inf<double>() * -1.0;
    double exit = t_inf<double>();
#pragma unroll
    for (int a = 0; a < 3; a++) {
        double l = (double)lo[a] - m, h = (double)hi[a] + m;
        if (u[a] == 0.0) {
            if (o[a] < l || o[a] > h) return false;
            continue;
        }
        double t0 = (l - o[a]) * inv[a], t1 = (h - o[a]) * inv[a];
        double near = inv[a] > 0.0 ? t0 : t1;
        double far = inv[a] > 0.0 ? t1 : t0;
        enter = fmax(enter, near);
        exit = fmin(exit, far);
    }
    return enter <= exit && exit >= -slack && enter <= limit;
}

// A walk's stack (walk_near_first in instances.rs): nodes and their entries (rounded down to
// f32: a weaker, still safe, prune when popped), the farther of two children pushed first.
struct RayWalkStack {
    u32 node[RAY_STACK];
    float enter[RAY_STACK];
    int top;
    __device__ void push(u32 c, double e) {
        node[top] = c;
        enter[top] = __double2float_rd(e);
        top++;
    }
    __device__ void push_pair(int found, const u32* c, const double* e) {
        if (found == 2 && e[1] > e[0]) {
            push(c[1], e[1]);
            push(c[0], e[0]);
        } else {
            for (int k = 0; k < found; k++) push(c[k], e[k]);
        }
    }
};

// instances.rs: search_instance. The placed triangles of the instance in slot `slot` that
// the ray hits, found by a walk of its shape's tree with the ray in the shape's frame;
// `exit`: where the ray leaves the instance's box.
template <typename Visit>
__device__ void ray_search_instance(const RayFrame& r, const RayInstanceView& iv, u32 slot, double exit,
                                    Visit& visit) {
    RayShape sh = iv.shapes[iv.shape[slot]];
    if (sh.n_nodes == 0) return;
    const double* pl = iv.place + 12 * (u64)slot;
    const double* p = pl + 9;
    double d[3] = {r.o[0] - p[0], r.o[1] - p[1], r.o[2] - p[2]};
    double o[3], u[3], inv[3];
    ray_local_dir(pl, d, o);
    ray_local_dir(pl, r.d, u);
#pragma unroll
    for (int a = 0; a < 3; a++) inv[a] = u[a] != 0.0 ? 1.0 / u[a] : 0.0;
    double reach = fmax(fmin(exit, r.max_distance), 0.0);
    double m = RAY_INSTANCE_MARGIN * ((((ray_big(d) + reach) + ray_big(p)) + sh.reach) + 1e-300);
    double slack = m * 4.0;
    const BvhNode* nodes = iv.shape_nodes + sh.nodes;
    RayWalkStack st;
    st.top = 0;
    st.push(0, t_inf<double>() * -1.0);
    while (st.top > 0) {
        st.top--;
        if ((double)st.enter[st.top] > visit.limit() + slack) continue;
        BvhNode node = ray_node(nodes, st.node[st.top]);
        u32 inner[2];
        double inner_enter[2];
        int found = 0;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            u32 c = node.child[k];
            if (c == RAY_EMPTY) continue;
            double enter;
            if (!ray_crosses(o, u, inv, m, slack, &node.bounds[6 * k], &node.bounds[6 * k + 3], visit.limit() + slack,
                             enter))
                continue;
            if (!(c & RAY_LEAF)) {
                inner[found] = c;
                inner_enter[found] = enter;
                found++;
                continue;
            }
            u32 t = iv.shape_ids[sh.ids + (c & ~RAY_LEAF)];
            double q[9];
            ray_placed_triangle(iv, slot, t, q);
            if (ray_degenerate(q)) continue;
            float tlo[3], thi[3];
            ray_triangle_box(q, tlo, thi);
            double te, tx;
            ray_slab(r, tlo, thi, te, tx);
            if (!ray_meets(te, tx, r.max_distance)) continue;
            double th;
            if (ray_triangle(r, q, te, tx, th)) visit.hit(th, RAY_KIND_INSTANCE | slot, t);
        }
        st.push_pair(found, inner, inner_enter);
    }
}

// instances.rs: search. The instances in the ray's mask whose boxes it crosses within the
// visit's limit, each searched (the instances' tree is walked as the mesh's is).
template <typename Visit>
__device__ void ray_search_instances(const RayFrame& r, const RayInstanceView& iv, Visit& visit) {
    ray_search(iv.nodes, iv.n_nodes, r, visit,
               [&](u32 s, double, double exit) { ray_search_instance(r, iv, iv.slot[s], exit, visit); });
}

struct RayMeshTree {
    RayMeshView v;
    const u32* ids;
    HeightfieldView terrain;
};
struct RayBodyTree {
    RayBodyView v;
    const u32* ids;
};
// What a ray can hit: the mesh and the heightfield, the bodies, the instances.
struct RayWorld {
    RayMeshTree mesh;
    RayBodyTree bodies;
    RayInstanceView instances;
};

// cpu.rs: search_world. hit(t, tag, position) gets every hit.
template <typename Visit>
__device__ __forceinline__ void ray_search_world(const RayFrame& r, const RayWorld& w, Visit& visit) {
    const RayMeshTree& mesh = w.mesh;
    const RayBodyTree& bodies = w.bodies;
    ray_search_instances(r, w.instances, visit);
    if ((r.mask & mesh.v.layer) != 0) {
        ray_search(mesh.v.nodes, mesh.v.n_nodes, r, visit, [&](u32 s, double enter, double exit) {
            double t;
            if (ray_triangle(r, mesh.v.corners + 9 * (u64)s, enter, exit, t)) visit.hit(t, mesh.ids[s], s);
        });
        ray_search_heightfield(r, mesh.terrain, visit);
    }
    ray_search(bodies.v.nodes, bodies.v.n_nodes, r, visit, [&](u32 s, double enter, double exit) {
        double t;
        if (ray_ellipsoid(r, bodies.v.center + 3 * (u64)s, bodies.v.unit + 9 * (u64)s, enter, exit, t))
            visit.hit(t, bodies.ids[s] | RAY_KIND_BODY, s);
    });
}

// cpu.rs: finish. A hit's 7 values: t (−0 as 0), point, normal.
__device__ __forceinline__ void ray_finish(const RayFrame& r, const RayWorld& w, double t, u32 tag, u32 s, double* o) {
    const RayMeshTree& mesh = w.mesh;
    const RayBodyTree& bodies = w.bodies;
    t = t + 0.0;
    double n[3];
    if ((tag & RAY_KIND_INSTANCE) == RAY_KIND_INSTANCE) {
        double q[9];
        ray_placed_triangle(w.instances, tag & RAY_ID_BITS, s, q);
        ray_triangle_normal(r, q, n);
    } else if (tag & RAY_KIND_BODY) {
        ray_ellipsoid_normal(r, bodies.v.center + 3 * (u64)s, bodies.v.unit + 9 * (u64)s, t, n);
    } else if (tag & RAY_KIND_HEIGHTFIELD) {
        V3<double> a, b, c;
        hf_triangle(mesh.terrain, s, a, b, c);
        double q[9] = {a.x, a.y, a.z, b.x, b.y, b.z, c.x, c.y, c.z};
        ray_triangle_normal(r, q, n);
    } else {
        ray_triangle_normal(r, mesh.v.corners + 9 * (u64)s, n);
    }
    o[0] = t;
    o[1] = r.o[0] + t * r.d[0];
    o[2] = r.o[1] + t * r.d[1];
    o[3] = r.o[2] + t * r.d[2];
    o[4] = n[0];
    o[5] = n[1];
    o[6] = n[2];
}

// cpu.rs: First.
struct RayFirst {
    double t;
    u32 tag, s;
    bool found;
    __device__ double limit() const { return t; }
    __device__ void hit(double ht, u32 htag, u32 hs) {
        if (!found || ray_before(ht, htag, hs, t, tag, s)) {
            found = true;
            t = ht;
            tag = htag;
            s = hs;
        }
    }
};

// Spreads the low 10 bits of v three apart (a Morton code's one axis).
__device__ __forceinline__ u64 ray_spread10(u32 v) {
    u64 x = v & 1023u;
    x = (x | (x << 16)) & 0x030000FFull;
    x = (x | (x << 8)) & 0x0300F00Full;
    x = (x | (x << 4)) & 0x030C30C3ull;
    x = (x | (x << 2)) & 0x09249249ull;
    return x;
}

// The order a piece of rays is searched in: by the Morton code of the origin (10 bits an
// axis in the box lo + [0, 1024 / scale)) and then the direction's octant, so that a warp's
// rays start near each other and head the same way. Only the order of the work changes.
extern "C" __global__ void ray_order_keys(const double* rays, u32 n, double lo0, double lo1, double lo2, double scale,
                                          u64* keys, u32* order) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* r = rays + 7 * (u64)i;
    double lo[3] = {lo0, lo1, lo2};
    u64 code = 0;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        double q = (r[a] - lo[a]) * scale;
        u32 c = q > 0.0 ? (q < 1023.0 ? (u32)q : 1023u) : 0u;
        code |= ray_spread10(c) << (2 - a);
    }
    u32 octant = (r[3] < 0.0 ? 4u : 0u) | (r[4] < 0.0 ? 2u : 0u) | (r[5] < 0.0 ? 1u : 0u);
    keys[i] = (code << 3) | octant;
    order[i] = i;
}

// Each ray's nearest hit: its tag (NO_ID: none), its triangle in its own mesh for an
// instance's (out_tri, when not null), and its 7 values. Thread i takes ray order[i] (i
// when order is null).
extern "C" __global__ void ray_first_hits(const double* rays, const u32* masks, u32 n, const u32* order,
                                          RayMeshView mesh, const u32* mesh_ids, HeightfieldView terrain,
                                          RayBodyView bodies, const u32* body_ids, RayInstanceView instances,
                                          u32* out_tag, u32* out_tri, double* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (order != nullptr) i = order[i];
    RayFrame r = ray_frame(rays + 7 * (u64)i, masks[i]);
    RayWorld w = {{mesh, mesh_ids, terrain}, {bodies, body_ids}, instances};
    RayFirst v = {r.max_distance, 0u, 0u, false};
    ray_search_world(r, w, v);
    out_tag[i] = v.found ? v.tag : NO_ID;
    if (out_tri != nullptr) out_tri[i] = v.s;
    if (v.found) ray_finish(r, w, v.t, v.tag, v.s, out + 7 * (u64)i);
}

// Counts hits (all of them within max_distance; the caller cuts at the limit).
struct RayCount {
    double max_distance;
    u32 count;
    __device__ double limit() const { return max_distance; }
    __device__ void hit(double, u32, u32) { count++; }
};

extern "C" __global__ void ray_hit_counts(const double* rays, const u32* masks, u32 n, RayMeshView mesh,
                                          const u32* mesh_ids, HeightfieldView terrain, RayBodyView bodies,
                                          const u32* body_ids, RayInstanceView instances, u32 limit, u32* counts) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 c = 0;
    if (limit > 0) {
        RayFrame r = ray_frame(rays + 7 * (u64)i, masks[i]);
        RayWorld w = {{mesh, mesh_ids, terrain}, {bodies, body_ids}, instances};
        RayCount v = {r.max_distance, 0u};
        ray_search_world(r, w, v);
        c = v.count < limit ? v.count : limit;
    }
    counts[i] = c;
}

// cpu.rs: Nearest. The row's `cap` nearest hits, sorted, in place: t in o[7k], the tag in
// tags[k], the sorted position (until finished) in o[7k + 1].
struct RayRow {
    double max_distance;
    double* o;
    u32* tags;
    u32 len, cap;
    __device__ double limit() const { return len < cap ? max_distance : o[7 * (u64)(cap - 1)]; }
    __device__ u32 s_at(u32 k) const { return (u32)o[7 * (u64)k + 1]; }
    __device__ void hit(double t, u32 tag, u32 s) {
        if (len == cap && !ray_before(t, tag, s, o[7 * (u64)(cap - 1)], tags[cap - 1], s_at(cap - 1))) return;
        u32 j = len < cap ? len : cap - 1;
        while (j > 0 && ray_before(t, tag, s, o[7 * (u64)(j - 1)], tags[j - 1], s_at(j - 1))) {
            o[7 * (u64)j] = o[7 * (u64)(j - 1)];
            o[7 * (u64)j + 1] = o[7 * (u64)(j - 1) + 1];
            tags[j] = tags[j - 1];
            j--;
        }
        o[7 * (u64)j] = t;
        o[7 * (u64)j + 1] = (double)s;
        tags[j] = tag;
        if (len < cap) len++;
    }
};

extern "C" __global__ void ray_all_hits(const double* rays, const u32* masks, u32 n, RayMeshView mesh,
                                        const u32* mesh_ids, HeightfieldView terrain, RayBodyView bodies,
                                        const u32* body_ids, RayInstanceView instances, const u64* offsets,
                                        const u32* counts, u32* out_tag, u32* out_tri, double* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 cap = counts[i];
    if (cap == 0) return;
    RayFrame r = ray_frame(rays + 7 * (u64)i, masks[i]);
    RayWorld w = {{mesh, mesh_ids, terrain}, {bodies, body_ids}, instances};
    u64 at = offsets[i];
    RayRow v = {r.max_distance, out + 7 * at, out_tag + at, 0u, cap};
    ray_search_world(r, w, v);
    for (u32 k = 0; k < v.len; k++) {
        double* o = v.o + 7 * (u64)k;
        u32 s = (u32)o[1];
        out_tri[at + k] = s;
        ray_finish(r, w, o[0], v.tags[k], s, o);
    }
}
