// The collision world on the device (collide/cuda.rs launches these). Every function repeats
// its Rust twin in src/collide/ operation for operation, in f64 without fused multiply-add, so
// the CPU and CUDA colliders find the same contacts bit for bit.
//
// A tick is two kernels after a memset of the grid's heads and the status: body_cells makes
// each body's shape, box and cells and puts the cells into the body grid (a hash table of
// lists, one atomic per entry); body_contacts gives each body a warp, which finds the body's
// triangles and bodies, tests them exactly, 32 at a time, sorts the contacts and writes them
// at the body's place in id order (a decoupled look-back over the blocks). Lessons:
// no thread works through a long list while its neighbours idle (the warp shares a body's
// work out evenly), and few launches (each costs more than most of its work here).

typedef V3<double> D3;
#define CELL_BITS NK_CELL_BITS
#define CELL_LIMIT (1ll << (CELL_BITS - 1))
#define BOX_SLACK NK_BOX_SLACK
#define FULL_WARP 0xffffffffu

__device__ __forceinline__ u32 lane_id() { return threadIdx.x % 32; }
// How many lanes below this one have their bit set.
__device__ __forceinline__ u32 lanes_below(u32 bits) { return __popc(bits & ((1u << lane_id()) - 1)); }
// The sum of v over lanes 0..=this one (every lane calls it).
__device__ __forceinline__ u32 warp_inclusive_sum(u32 v) {
    for (u32 o = 1; o < 32; o *= 2) {
        u32 w = __shfl_up_sync(FULL_WARP, v, o);
        if (lane_id() >= o) v += w;
    }
    return v;
}

__device__ __forceinline__ D3 dadd(D3 u, D3 v) { return v3(u.x + v.x, u.y + v.y, u.z + v.z); }
__device__ __forceinline__ D3 dscale(D3 u, double s) { return v3(u.x * s, u.y * s, u.z * s); }
__device__ __forceinline__ D3 dneg(D3 u) { return v3(-u.x, -u.y, -u.z); }
__device__ __forceinline__ D3 dcross(D3 u, D3 v) {
    return v3(u.y * v.z - u.z * v.y, u.z * v.x - u.x * v.z, u.x * v.y - u.y * v.x);
}
// ellipsoid::normalize: false for a zero vector.
__device__ __forceinline__ bool dnormalize(D3 u, D3& out) {
    double l = sqrt(vdot(u, u));
    if (!(l > 0.0)) return false;
    out = v3(u.x / l, u.y / l, u.z / l);
    return true;
}

// ellipsoid::Shape
struct Shape {
    double r[3][3];
    D3 radii;
    double u[3][3];  // S⁻¹·Rᵀ
};

__device__ __forceinline__ Shape make_shape(D3 radii, double x, double y, double z, double w) {
    Shape s;
    double n2 = x * x + y * y + z * z + w * w;
    double k = 2.0 / n2;
    s.r[0][0] = 1.0 - k * (y * y + z * z);
    s.r[0][1] = k * (x * y - z * w);
    s.r[0][2] = k * (x * z + y * w);
    s.r[1][0] = k * (x * y + z * w);
    s.r[1][1] = 1.0 - k * (x * x + z * z);
    s.r[1][2] = k * (y * z - x * w);
    s.r[2][0] = k * (x * z - y * w);
    s.r[2][1] = k * (y * z + x * w);
    s.r[2][2] = 1.0 - k * (x * x + y * y);
    s.radii = radii;
    double rr[3] = {radii.x, radii.y, radii.z};
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) s.u[j][i] = s.r[i][j] / rr[j];
    return s;
}

__device__ __forceinline__ D3 half_extents(const Shape& s) {
    double e[3];
    for (int i = 0; i < 3; i++) {
        double a = s.r[i][0] * s.radii.x, b = s.r[i][1] * s.radii.y, c = s.r[i][2] * s.radii.z;
        e[i] = sqrt(a * a + b * b + c * c);
    }
    return v3(e[0], e[1], e[2]);
}
__device__ __forceinline__ D3 to_local(const Shape& s, D3 u) {
    return v3(s.r[0][0] * u.x + s.r[1][0] * u.y + s.r[2][0] * u.z, s.r[0][1] * u.x + s.r[1][1] * u.y + s.r[2][1] * u.z,
              s.r[0][2] * u.x + s.r[1][2] * u.y + s.r[2][2] * u.z);
}
__device__ __forceinline__ D3 to_world(const Shape& s, D3 u) {
    return v3(s.r[0][0] * u.x + s.r[0][1] * u.y + s.r[0][2] * u.z, s.r[1][0] * u.x + s.r[1][1] * u.y + s.r[1][2] * u.z,
              s.r[2][0] * u.x + s.r[2][1] * u.y + s.r[2][2] * u.z);
}
__device__ __forceinline__ D3 unit_of(const Shape& s, D3 d) {
    return v3(s.u[0][0] * d.x + s.u[0][1] * d.y + s.u[0][2] * d.z, s.u[1][0] * d.x + s.u[1][1] * d.y + s.u[1][2] * d.z,
              s.u[2][0] * d.x + s.u[2][1] * d.y + s.u[2][2] * d.z);
}
__device__ __forceinline__ D3 world_of(const Shape& s, D3 p) {
    return to_world(s, v3(p.x * s.radii.x, p.y * s.radii.y, p.z * s.radii.z));
}
__device__ __forceinline__ D3 normal_of_unit(const Shape& s, D3 p) {
    return to_world(s, v3(p.x / s.radii.x, p.y / s.radii.y, p.z / s.radii.z));
}
__device__ __forceinline__ double support(const Shape& s, D3 u) {
    D3 l = to_local(s, u);
    double a = l.x * s.radii.x, b = l.y * s.radii.y, c = l.z * s.radii.z;
    return sqrt(a * a + b * b + c * c);
}
// Shape::sigma: (xx, yy, zz, xy, xz, yz)
__device__ __forceinline__ void sigma(const Shape& s, double out[6]) {
    double s2[3] = {s.radii.x * s.radii.x, s.radii.y * s.radii.y, s.radii.z * s.radii.z};
    const int ii[6] = {0, 1, 2, 0, 0, 1}, kk[6] = {0, 1, 2, 1, 2, 2};
    for (int m = 0; m < 6; m++) {
        int i = ii[m], k = kk[m];
        out[m] = s.r[i][0] * s2[0] * s.r[k][0] + s.r[i][1] * s2[1] * s.r[k][1] + s.r[i][2] * s2[2] * s.r[k][2];
    }
}

struct Geometry {
    D3 normal;
    double depth;
    D3 point;
};

// contact_ellipsoid_triangle.rs
__device__ bool contact_ellipsoid_triangle(const Shape& s, D3 c0, D3 c1, D3 c2, Geometry& g) {
    D3 a = unit_of(s, c0), b = unit_of(s, c1), c = unit_of(s, c2);
    TriPoint<double> near = closest_point_triangle(v3(0.0, 0.0, 0.0), a, b, c);
    if (!(near.d2 < 1.0)) return false;
    D3 point = world_of(s, near.p);
    D3 gr = normal_of_unit(s, near.p);
    D3 n;
    if (!dnormalize(dneg(gr), n)) {
        if (!dnormalize(dcross(vsub(c1, c0), vsub(c2, c0)), n)) n = v3(0.0, 0.0, 1.0);
    }
    g.normal = n;
    g.depth = support(s, n) + vdot(n, point);
    g.point = point;
    return true;
}

// contact_ellipsoid_ellipsoid.rs: inverse, apply, solve.
struct PwInverse {
    double c[6], k;  // the adjugate, and 1 / det
};
__device__ __forceinline__ PwInverse pw_inverse(const double g[6]) {
    double xx = g[0], yy = g[1], zz = g[2], xy = g[3], xz = g[4], yz = g[5];
    PwInverse v;
    v.c[0] = yy * zz - yz * yz;  // c00
    v.c[3] = xz * yz - xy * zz;  // c01
    v.c[4] = xy * yz - xz * yy;  // c02
    v.c[1] = xx * zz - xz * xz;  // c11
    v.c[5] = xy * xz - xx * yz;  // c12
    v.c[2] = xx * yy - xy * xy;  // c22
    v.k = 1.0 / (xx * v.c[0] + xy * v.c[3] + xz * v.c[4]);
    return v;
}
__device__ __forceinline__ D3 pw_apply(const PwInverse& v, D3 r) {
    const double* c = v.c;
    return v3((c[0] * r.x + c[3] * r.y + c[4] * r.z) * v.k, (c[3] * r.x + c[1] * r.y + c[5] * r.z) * v.k,
              (c[4] * r.x + c[5] * r.y + c[2] * r.z) * v.k);
}
__device__ __forceinline__ D3 pw_solve(const double g[6], D3 r) { return pw_apply(pw_inverse(g), r); }
__device__ __forceinline__ void pw_blend(const double sa[6], const double sb[6], double l, double g[6]) {
    double m = 1.0 - l;
    for (int k = 0; k < 6; k++) g[k] = m * sa[k] + l * sb[k];
}
__device__ __forceinline__ double pw_f(const double sa[6], const double sb[6], D3 r, double l) {
    double g[6];
    pw_blend(sa, sb, l, g);
    D3 x = pw_solve(g, r);
    return l * (1.0 - l) * vdot(r, x);
}
#define PW_STEPS NK_PW_STEPS
#define PW_SETTLED NK_PW_SETTLED
__device__ __forceinline__ D3 sym_mul(const double m[6], D3 x) {
    return v3(m[0] * x.x + m[3] * x.y + m[4] * x.z, m[3] * x.x + m[1] * x.y + m[5] * x.z,
              m[4] * x.x + m[5] * x.y + m[2] * x.z);
}

// contact_ellipsoid_ellipsoid.rs: first_guess
__device__ __forceinline__ double pw_first_guess(const Shape& a, const Shape& b, D3 r) {
    double ha = support(a, r), hb = support(b, r);
    return ha + hb > 0.0 ? ha / (ha + hb) : 0.5;
}

// contact_ellipsoid_ellipsoid.rs: settle
__device__ double pw_settle(const double sa[6], const double sb[6], D3 r, double l) {
    double d[6];
    for (int k = 0; k < 6; k++) d[k] = sb[k] - sa[k];
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < PW_STEPS; it++) {
        double g[6];
        pw_blend(sa, sb, l, g);
        PwInverse inv = pw_inverse(g);
        D3 x = pw_apply(inv, r);
        D3 y = sym_mul(d, x);
        double s = vdot(r, x), q = vdot(x, y), w = vdot(y, pw_apply(inv, y));
        double m = l * (1.0 - l);
        double d1 = (1.0 - 2.0 * l) * s - m * q;
        double d2 = -2.0 * s - 2.0 * (1.0 - 2.0 * l) * q + 2.0 * m * w;
        if (d1 == 0.0) break;
        if (d1 > 0.0) lo = l;
        else hi = l;
        double step = l - d1 / d2;
        double next = d2 < 0.0 && step >= lo && step <= hi ? step : 0.5 * (lo + hi);
        double moved = fabs(next - l);
        l = next;
        if (moved <= PW_SETTLED) break;
    }
    return l;
}

__device__ bool contact_ellipsoid_ellipsoid(const Shape& a, const Shape& b, D3 r, Geometry& out) {
    double reach = t_max(t_max(a.radii.x, a.radii.y), a.radii.z) + t_max(t_max(b.radii.x, b.radii.y), b.radii.z);
    if (!(vdot(r, r) < reach * reach)) return false;
    double sa[6], sb[6];
    sigma(a, sa);
    sigma(b, sb);
    double l = pw_first_guess(a, b, r);
    if (!(pw_f(sa, sb, r, l) < 1.0)) return false;
    l = pw_settle(sa, sb, r, l);
    double g[6];
    pw_blend(sa, sb, l, g);
    D3 x = pw_solve(g, r);
    double f = l * (1.0 - l) * vdot(r, x);
    if (!(f < 1.0)) return false;
    double m = 1.0 - l;
    D3 sx = sym_mul(sa, x);
    out.point = v3(m * sx.x, m * sx.y, m * sx.z);
    D3 ab;
    if (!dnormalize(x, ab)) ab = v3(0.0, 0.0, 1.0);
    out.depth = support(a, ab) + support(b, ab) - vdot(ab, r);
    out.normal = dneg(ab);
    return true;
}

// sweep_ellipsoid_triangle.rs
__device__ __forceinline__ bool lowest_root(double a, double b, double c, double t_max, double& root) {
    if (a == 0.0) return false;
    double disc = b * b - 4.0 * a * c;
    if (disc < 0.0) return false;
    double s = sqrt(disc);
    double r1 = (-b - s) / (2.0 * a), r2 = (-b + s) / (2.0 * a);
    if (r1 > r2) {
        double t = r1;
        r1 = r2;
        r2 = t;
    }
    if (r1 >= 0.0 && r1 <= t_max) {
        root = r1;
        return true;
    }
    if (r2 >= 0.0 && r2 <= t_max) {
        root = r2;
        return true;
    }
    return false;
}

struct Hit {
    double toi;
    D3 point;
    D3 normal;
};

__device__ __forceinline__ Hit sweep_hit(const Shape& s, D3 c0, D3 c1, D3 c2, D3 v, double t, D3 q) {
    D3 g = normal_of_unit(s, v3(t * v.x - q.x, t * v.y - q.y, t * v.z - q.z));
    D3 n;
    if (!dnormalize(g, n)) {
        if (!dnormalize(dcross(vsub(c1, c0), vsub(c2, c0)), n)) n = v3(0.0, 0.0, 1.0);
    }
    return Hit{t, world_of(s, q), n};
}

__device__ bool sweep_ellipsoid_triangle(const Shape& s, D3 c0, D3 c1, D3 c2, D3 motion, Hit& out) {
    D3 p[3] = {unit_of(s, c0), unit_of(s, c1), unit_of(s, c2)};
    D3 v = unit_of(s, motion);
    TriPoint<double> start = closest_point_triangle(v3(0.0, 0.0, 0.0), p[0], p[1], p[2]);
    if (start.d2 < 1.0) {
        out = sweep_hit(s, c0, c1, c2, v, 0.0, start.p);
        return true;
    }
    D3 face;
    if (dnormalize(dcross(vsub(p[1], p[0]), vsub(p[2], p[0])), face)) {
        D3 n = face;
        double dist = -vdot(n, p[0]);
        if (dist < 0.0) {
            n = dneg(n);
            dist = -dist;
        }
        double nv = vdot(n, v);
        if (dist >= 1.0) {
            if (!(nv < 0.0)) return false;
            double t0 = (1.0 - dist) / nv;
            if (t0 > 1.0) return false;
            D3 q = v3(t0 * v.x - n.x, t0 * v.y - n.y, t0 * v.z - n.z);
            bool inside = true;
            for (int k = 0; k < 3; k++) {
                D3 st = p[k], e = p[(k + 1) % 3];
                inside = inside && vdot(dcross(vsub(e, st), vsub(q, st)), face) >= 0.0;
            }
            if (inside) {
                out = sweep_hit(s, c0, c1, c2, v, t0, q);
                return true;
            }
        }
    }
    double vv = vdot(v, v);
    bool found = false;
    double bt = 0.0;
    D3 bq = v3(0.0, 0.0, 0.0);
    for (int k = 0; k < 3; k++) {
        D3 c = p[k];
        double t_max = found ? bt : 1.0, t;
        if (lowest_root(vv, -2.0 * vdot(v, c), vdot(c, c) - 1.0, t_max, t)) {
            if (!found || t < bt) {
                found = true;
                bt = t;
                bq = c;
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        D3 st = p[k], e = p[(k + 1) % 3];
        D3 edge = vsub(e, st);
        double ee = vdot(edge, edge), ev = vdot(edge, v), es = vdot(edge, st);
        if (ee == 0.0) continue;
        double a = ee * -vv + ev * ev;
        double b = ee * (2.0 * vdot(v, st)) - 2.0 * ev * es;
        double c = ee * (1.0 - vdot(st, st)) + es * es;
        double t_max = found ? bt : 1.0, t;
        if (lowest_root(a, b, c, t_max, t)) {
            double f = (ev * t - es) / ee;
            if (f >= 0.0 && f <= 1.0 && (!found || t < bt)) {
                found = true;
                bt = t;
                bq = v3(st.x + f * edge.x, st.y + f * edge.y, st.z + f * edge.z);
            }
        }
    }
    if (found) out = sweep_hit(s, c0, c1, c2, v, bt, bq);
    return found;
}

// sweep_ellipsoid_ellipsoid.rs
#define SWEEP_STEPS NK_SWEEP_STEPS
#define SWEEP_SETTLED NK_SWEEP_SETTLED
#define REACH_SLACK NK_REACH_SLACK
__device__ __forceinline__ D3 sweep_at(D3 r0, D3 m, double t) { return v3(r0.x - t * m.x, r0.y - t * m.y, r0.z - t * m.z); }
__device__ __forceinline__ Hit sweep_touch(const double sa[6], const double sb[6], D3 r0, D3 m, double t, double l) {
    D3 r = sweep_at(r0, m, t);
    l = pw_settle(sa, sb, r, l);
    double g[6];
    pw_blend(sa, sb, l, g);
    D3 x = pw_solve(g, r);
    double k = 1.0 - l;
    D3 sx = sym_mul(sa, x);
    D3 ab;
    if (!dnormalize(x, ab)) ab = v3(0.0, 0.0, 1.0);
    return Hit{t, v3(t * m.x + k * sx.x, t * m.y + k * sx.y, t * m.z + k * sx.z), dneg(ab)};
}

// sweep_ellipsoid_ellipsoid.rs: entry. False when r is inside E_λ; else s = the entry ahead
// (inf: none).
__device__ __forceinline__ bool sweep_entry(const double sa[6], const double sb[6], D3 r, D3 m, double l,
                                            double& s) {
    double g[6];
    pw_blend(sa, sb, l, g);
    PwInverse inv = pw_inverse(g);
    D3 x = pw_apply(inv, r);
    double w = l * (1.0 - l);
    double c = w * vdot(r, x);
    if (!(c > 1.0)) return false;
    D3 y = pw_apply(inv, m);
    double qa = w * vdot(m, y), qb = w * vdot(m, x);
    double disc = qb * qb - qa * (c - 1.0);
    if (!(qb > 0.0 && disc >= 0.0)) {
        s = t_inf<double>();
        return true;
    }
    s = (c - 1.0) / (qb + sqrt(disc));
    return true;
}

__device__ bool sweep_ellipsoid_ellipsoid(const Shape& a, const Shape& b, D3 r0, D3 motion, Hit& out) {
    double reach =
        (t_max(t_max(a.radii.x, a.radii.y), a.radii.z) + t_max(t_max(b.radii.x, b.radii.y), b.radii.z)) * REACH_SLACK;
    double mm = vdot(motion, motion);
    double near = 0.0;
    if (mm > 0.0) near = t_min(t_max(vdot(r0, motion) / mm, 0.0), 1.0);
    D3 gap = sweep_at(r0, motion, near);
    if (!(vdot(gap, gap) < reach * reach)) return false;
    double sa[6], sb[6];
    sigma(a, sa);
    sigma(b, sb);
    double l = pw_first_guess(a, b, r0);
    double t = 0.0, s;
    if (sweep_entry(sa, sb, r0, motion, l, s)) {
        if (!(s <= 1.0)) return false;
        t = s;
    }
    for (int it = 0; it < SWEEP_STEPS; it++) {
        D3 r = sweep_at(r0, motion, t);
        l = pw_settle(sa, sb, r, l);
        if (!sweep_entry(sa, sb, r, motion, l, s)) {
            out = sweep_touch(sa, sb, r0, motion, t, l);
            return true;
        }
        t += s;
        if (!(t <= 1.0)) return false;
        if (s <= SWEEP_SETTLED) break;
    }
    out = sweep_touch(sa, sb, r0, motion, t, l);
    return true;
}

// hash_grid.rs
__device__ __forceinline__ u64 cell_key(int x, int y, int z) {
    return ((u64)((long long)x + CELL_LIMIT) << (2 * CELL_BITS)) | ((u64)((long long)y + CELL_LIMIT) << CELL_BITS) |
           (u64)((long long)z + CELL_LIMIT);
}
__device__ __forceinline__ u32 bucket_of(u64 h, u64 mask) {
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return (u32)(h & mask);
}
// CellRange::of_box for one coordinate; false when beyond the key range.
__device__ __forceinline__ bool cell_of(double x, double cell_size, int& c) {
    double f = floor(x / cell_size);
    if (!(fabs(f) < (double)(CELL_LIMIT - 1))) return false;
    c = (int)f;
    return true;
}

// A static-mesh grid entry with what the broad phase reads of its triangle, in 48 bytes (three
// 16-byte loads instead of five scattered ones): the cell key, the triangle, its low cell, and
// its box in f32 rounded outwards (so the box test passes whatever the f64 one would).


__device__ __forceinline__ bool boxes_overlap(const double* alo, const double* ahi, const double* blo, const double* bhi) {
    return alo[0] <= bhi[0] && blo[0] <= ahi[0] && alo[1] <= bhi[1] && blo[1] <= ahi[1] && alo[2] <= bhi[2] &&
           blo[2] <= ahi[2];
}

// The body grid of a tick: a hash table of cells whose buckets are lists, built with one
// atomic per entry in a single pass (no counting, scan and fill). head[b] is 1 + the last
// entry put in bucket b (0: empty; the heads are zeroed before each tick), and each entry
// links to the one put before it. The order within a bucket is a race; nothing depends on it
// (each body's contacts are sorted before they leave).


// Threads per body in body_cells: a body's cells (8-27 for bodies about a cell wide) go into
// the grid together, so that their atomics are in flight at once.
#define CELL_GROUP NK_CELL_GROUP
// Threads per block of body_cells.
#define CELLS_BLOCK NK_CELLS_BLOCK

// CELL_GROUP threads per body (poses from center_in and quat, which may be mapped host
// memory; centers copied to `center`). The first makes its shape (rotation and S⁻¹·Rᵀ, kept for the
// contacts), widened box and cells, and count[i] = its cells (0 when not alive or out of range,
// which status[2] names); the group puts its cells into the grid, at entries reserved by one
// atomic on status[1]. Past `entry_cap` nothing is put: the host grows it and runs again.
extern "C" __global__ void __launch_bounds__(CELLS_BLOCK)
    body_cells(const double* center_in, const double* quat, double* center, const double* radii, const u32* alive,
               u32 n, double cell_size, double* box, int* cells, u32* count, double* shapes,
                                      u32* head, BodyEntry* entries, u32 entry_cap, u64 mask, u32* status) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    u32 i = t / CELL_GROUP, sub = t % CELL_GROUP;
    u32 c = 0, base = 0;
    int l[3] = {0, 0, 0};
    u32 nx = 1, ny = 1;
    if (sub == 0 && i < n && alive[i]) {
        const double* p = center_in + 3 * (u64)i;
        // The device's copy of the centers, for body_contacts (the poses may be host memory).
        if (center != center_in)
            for (int a = 0; a < 3; a++) center[3 * (u64)i + a] = p[a];
        const double* q = quat + 4 * (u64)i;
        Shape s = make_shape(v3(radii[3 * i], radii[3 * i + 1], radii[3 * i + 2]), q[0], q[1], q[2], q[3]);
        double* sh = shapes + 18 * (u64)i;
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++) {
                sh[3 * r + k] = s.r[r][k];
                sh[9 + 3 * r + k] = s.u[r][k];
            }
        D3 h = half_extents(s);
        h = v3(h.x * BOX_SLACK, h.y * BOX_SLACK, h.z * BOX_SLACK);
        double lo[3] = {p[0] - h.x, p[1] - h.y, p[2] - h.z};
        double hi[3] = {p[0] + h.x, p[1] + h.y, p[2] + h.z};
        u64 cc = 1;
        bool ok = true;
        int u[3] = {0, 0, 0};
        for (int a = 0; a < 3; a++) {
            ok = ok && cell_of(lo[a], cell_size, l[a]) && cell_of(hi[a], cell_size, u[a]);
            box[6 * (u64)i + a] = lo[a];
            box[6 * (u64)i + 3 + a] = hi[a];
            cells[6 * (u64)i + a] = l[a];
            cells[6 * (u64)i + 3 + a] = u[a];
            cc *= (u64)(u[a] - l[a] + 1);
        }
        if (!ok || cc > 0x3fffffffull) {
            atomicMax(&status[2], i + 1);
            cc = 0;
        }
        c = (u32)cc;
        nx = (u32)(u[0] - l[0] + 1);
        ny = (u32)(u[1] - l[1] + 1);
    }
    // One atomic per block reserves the block's entries (one per body, all on one address,
    // took most of this kernel's time).
    __shared__ u32 warp_sum[CELLS_BLOCK / 32], block_base;
    u32 upto = warp_inclusive_sum(c);
    if (lane_id() == 31) warp_sum[threadIdx.x / 32] = upto;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 sum = 0;
        for (u32 w = 0; w < CELLS_BLOCK / 32; w++) {
            u32 v = warp_sum[w];
            warp_sum[w] = sum;
            sum += v;
        }
        block_base = sum > 0 ? atomicAdd(&status[1], sum) : 0;
    }
    __syncthreads();
    base = block_base + warp_sum[threadIdx.x / 32] + upto - c;
    if (base + (u64)c > entry_cap) c = 0;  // overflow: the tick runs again
    if (sub == 0 && i < n) count[i] = c;
    // The group's first thread tells the others (every lane of the warp takes part).
    u32 first = (threadIdx.x % 32) & ~(CELL_GROUP - 1);
    c = __shfl_sync(FULL_WARP, c, first);
    base = __shfl_sync(FULL_WARP, base, first);
    nx = __shfl_sync(FULL_WARP, nx, first);
    ny = __shfl_sync(FULL_WARP, ny, first);
    for (int a = 0; a < 3; a++) l[a] = __shfl_sync(FULL_WARP, l[a], first);
    for (u32 k = sub; k < c; k += CELL_GROUP) {
        u64 key = cell_key(l[0] + (int)(k % nx), l[1] + (int)(k / nx % ny), l[2] + (int)(k / (nx * ny)));
        u32 e = base + k;
        u32 before = atomicExch(&head[bucket_of(key, mask)], e + 1);
        BodyEntry r;
        r.key = key;
        r.body = i;
        r.next = before;
        entries[e] = r;
    }
}

// A contact as it leaves the device: `other` carries the kind in its top bit (set: a body),
// so sorting a body's contacts by it gives (kind, other) order. Normal, depth and the point's
// offset from the body's center are rounded to f32 (both colliders round alike).
#define KIND_BODY NK_KIND_BODY
#define KIND_HEIGHTFIELD NK_KIND_HEIGHTFIELD

__device__ __forceinline__ PackedContact make_rec(u32 body, u32 other, const Geometry& g) {
    PackedContact r;
    r.body = body;
    r.other = other;
    r.normal[0] = (float)g.normal.x;
    r.normal[1] = (float)g.normal.y;
    r.normal[2] = (float)g.normal.z;
    r.depth = (float)g.depth;
    r.offset[0] = (float)g.point.x;
    r.offset[1] = (float)g.point.y;
    r.offset[2] = (float)g.point.z;
    return r;
}


// The shape body_cells made (the same bits as make_shape, without its ten divisions).
__device__ __forceinline__ Shape body_shape(const BodyView& b, u32 i) {
    Shape s;
    const double* sh = b.shape + 18 * (u64)i;
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) {
            s.r[r][k] = sh[3 * r + k];
            s.u[r][k] = sh[9 + 3 * r + k];
        }
    s.radii = v3(b.radii[3 * i], b.radii[3 * i + 1], b.radii[3 * i + 2]);
    return s;
}

// Whether static-mesh grid entry `e` is a triangle in cell `key` (at cx, cy, cz) whose box
// meets the box [flo, fhi] (f32, rounded outwards, so the test stays conservative) with low
// cell lc, and whose pair with it this cell owns (hash_grid::owns_pair); t = its triangle.
__device__ __forceinline__ bool mesh_entry_pair(const MeshEntry* e, u64 key, int cx, int cy, int cz, const float* flo,
                                                const float* fhi, const int* lc, u32& t) {
    const uint4* r = (const uint4*)e;
    uint4 r0 = __ldg(r), r1 = __ldg(r + 1), r2 = __ldg(r + 2);
    if ((((u64)r0.y << 32) | r0.x) != key) return false;
    float tlo[3] = {__uint_as_float(r1.z), __uint_as_float(r1.w), __uint_as_float(r2.x)};
    float thi[3] = {__uint_as_float(r2.y), __uint_as_float(r2.z), __uint_as_float(r2.w)};
    if (!(flo[0] <= thi[0] && tlo[0] <= fhi[0] && flo[1] <= thi[1] && tlo[1] <= fhi[1] && flo[2] <= thi[2] &&
          tlo[2] <= fhi[2]))
        return false;
    if (cx != max(lc[0], (int)r0.w) || cy != max(lc[1], (int)r1.x) || cz != max(lc[2], (int)r1.y)) return false;
    t = r0.z;
    return true;
}

__device__ __forceinline__ void box_f32(const double* lo, const double* hi, float* flo, float* fhi) {
    for (int a = 0; a < 3; a++) {
        flo[a] = __double2float_rd(lo[a]);
        fhi[a] = __double2float_ru(hi[a]);
    }
}

// The first entry of cell `key`'s bucket on mesh level l, and the bucket's length.
__device__ __forceinline__ void mesh_bucket(const MeshView& mesh, u32 l, u64 key, u32& first, u32& len) {
    u32 b = mesh.base[l] + bucket_of(key, mesh.mask[l]);
    first = mesh.start[b];
    len = mesh.start[b + 1] - first;
}

// The box [lo, hi]'s cells on mesh level l (lc, and nx × ny × nz of them); false when it
// lies beyond the key range.
__device__ __forceinline__ bool level_cells(const MeshView& mesh, u32 l, const double* lo, const double* hi, int* lc,
                                            u32& nx, u32& ny, u32& cells) {
    int hc[3];
    bool ok = true;
    for (int a = 0; a < 3; a++) ok = ok && cell_of(lo[a], mesh.cell[l], lc[a]) && cell_of(hi[a], mesh.cell[l], hc[a]);
    if (!ok) return false;
    nx = (u32)(hc[0] - lc[0] + 1);
    ny = (u32)(hc[1] - lc[1] + 1);
    cells = nx * ny * (u32)(hc[2] - lc[2] + 1);
    return true;
}

// The mesh's triangles of level l in cell `key` (at cx, cy, cz) that a box [lo, hi] with low
// cell lc (on that level) meets and whose pair with it this cell owns, offered to sink(t).
template <typename Sink>
__device__ __forceinline__ void mesh_pairs(const MeshView& mesh, u32 l, u64 key, int cx, int cy, int cz,
                                           const double* lo, const double* hi, const int* lc, Sink sink) {
    float flo[3], fhi[3];
    box_f32(lo, hi, flo, fhi);
    u32 first, len;
    mesh_bucket(mesh, l, key, first, len);
    for (u32 e = first; e < first + len; e++) {
        u32 t;
        if (mesh_entry_pair(mesh.entries + e, key, cx, cy, cz, flo, fhi, lc, t)) sink(t);
    }
}


// Contacts a warp keeps in shared memory; a warp with more does its bodies again (body_contacts).
#define POOL 96
// Bodies a warp takes at most (body_contacts' `batch`).
#define BATCH_MAX NK_BATCH_MAX

// A warp's contacts as it finds them: the first POOL in shared memory (`rec`), or every one in
// global memory (`spill`, when not null); `count` counts them all. Every lane calls put()
// together.
struct HitList {
    PackedContact* rec;
    PackedContact* spill;
    u32 count;
    __device__ __forceinline__ void put(bool hit, const PackedContact& r) {
        u32 bits = __ballot_sync(FULL_WARP, hit);
        u32 at = count + lanes_below(bits);
        if (hit) {
            if (spill)
                spill[at] = r;
            else if (at < POOL)
                rec[at] = r;
        }
        count += __popc(bits);
    }
};

// Candidates waiting for their exact test (64 places in shared memory: the candidate and which
// of the warp's bodies it is for), so that tests run 32 at a time, a lane each: push() queues
// the lanes' candidates and tests 32 as soon as there are; flush() tests the rest. Every lane
// calls them together.
struct Queue {
    u32* item;
    u32* body;
    u32 count;
    template <typename Test>
    __device__ __forceinline__ void push(bool has, u32 v, u32 b, Test test) {
        u32 bits = __ballot_sync(FULL_WARP, has);
        if (has) {
            item[count + lanes_below(bits)] = v;
            body[count + lanes_below(bits)] = b;
        }
        count += __popc(bits);
        __syncwarp();
        if (count >= 32) {
            count -= 32;
            u32 w = item[count + lane_id()], wb = body[count + lane_id()];
            __syncwarp();
            test(true, w, wb);
        }
    }
    template <typename Test>
    __device__ __forceinline__ void flush(Test test) {
        if (count == 0) return;
        bool has = lane_id() < count;
        u32 w = has ? item[lane_id()] : 0, wb = has ? body[lane_id()] : 0;
        count = 0;
        __syncwarp();
        test(has, w, wb);
    }
};

// One of a warp's bodies, as its lanes read it (from shared memory).
struct WarpBody {
    Shape s;
    D3 c;
    double lo[3], hi[3];
    float flo[3], fhi[3];  // the box in f32, rounded outwards
    int lc[3];
    u32 nx, ny, cells;
    u32 layer, mask, i;
};

// What a warp of body_contacts keeps in shared memory.
// A body's cells on one level of the mesh's grid.
struct LevelBox {
    int lc[3];
    u32 nx, ny;
};

struct WarpShared {
    WarpBody body[BATCH_MAX];
    u32 cells_upto[BATCH_MAX];  // cells of bodies 0..=b
    LevelBox level[BATCH_MAX];  // the bodies' cells on the mesh level at hand
    u32 level_upto[BATCH_MAX];  // those cells of bodies 0..=b
    u32 queued[64], queued_body[64];
    PackedContact found[POOL];
    PackedContact sorted[POOL];
};

__device__ __forceinline__ void load_warp_body(const BodyView& bv, u32 i, u32 cells, WarpBody& b) {
    b.i = i;
    const double* p = bv.center + 3 * (u64)i;
    b.c = v3(p[0], p[1], p[2]);
    b.s = body_shape(bv, i);
    const double* box = bv.bbox + 6 * (u64)i;
    const int* c = bv.cells + 6 * (u64)i;
    for (int a = 0; a < 3; a++) {
        b.lo[a] = box[a];
        b.hi[a] = box[3 + a];
        b.lc[a] = c[a];
    }
    box_f32(b.lo, b.hi, b.flo, b.fhi);
    b.nx = (u32)(c[3] - c[0] + 1);
    b.ny = (u32)(c[4] - c[1] + 1);
    b.cells = cells;
    b.layer = bv.layer[i];
    b.mask = bv.mask[i];
}

// Cell k of the box of low cell lc that is nx × ny × … cells wide: x fastest, then y, then
// z, as body_cells numbers a body's cells.
__device__ __forceinline__ void cell_at(const int* lc, u32 nx, u32 ny, u32 k, int& x, int& y, int& z) {
    x = lc[0] + (int)(k % nx);
    y = lc[1] + (int)(k / nx % ny);
    z = lc[2] + (int)(k / (nx * ny));
}

// Slot k of the warp's cells (its bodies' cells one after another; upto[b]: the cells of
// bodies 0..=b): its body, and the cell's number kc among that body's.
__device__ __forceinline__ u32 slot_body(const u32* upto, u32 nb, u32 k, u32& kc) {
    u32 b = 0;
    while (b + 1 < nb && upto[b] <= k) b++;
    kc = k - (b > 0 ? upto[b - 1] : 0);
    return b;
}

// Every contact of the warp's nb bodies that their cells own (hash_grid::owns_pair), into
// `hits`: the mesh's triangles, level by level of its grid, then the higher-numbered bodies
// (a pair's contact belongs to its lower body). The CPU collider (collide/cpu) tests the same
// pairs. The lanes take the bodies' cells 32 at a time; the mesh entries of those cells are
// then shared out evenly, 32 at a time, and the body grid's lists walked a lane per cell.
__device__ void warp_contacts(const BodyView& bv, const MeshView& mesh, u32 mesh_layer, WarpShared& ws, u32 nb,
                              Queue& q, HitList& hits) {
    u32 lane = lane_id();
    u32 cells = ws.cells_upto[nb - 1];
    if (mesh.n > 0) {
        auto test = [&](bool has, u32 t, u32 b) {
            Geometry g;
            bool h = false;
            const WarpBody& w = ws.body[b];
            if (has) {
                const double* p = mesh.corners + 9 * (u64)t;
                D3 c = w.c;
                h = contact_ellipsoid_triangle(w.s, vsub(v3(p[0], p[1], p[2]), c), vsub(v3(p[3], p[4], p[5]), c),
                                               vsub(v3(p[6], p[7], p[8]), c), g);
            }
            hits.put(h, h ? make_rec(w.i, t, g) : PackedContact());
        };
        for (u32 l = 0; l < mesh.levels; l++) {
            // A lane per body: its cells on this level (none for a body without cells this
            // tick, or whose mask misses the mesh).
            u32 mine = 0;
            if (lane < nb) {
                const WarpBody& w = ws.body[lane];
                LevelBox& lb = ws.level[lane];
                bool any = ws.cells_upto[lane] > (lane > 0 ? ws.cells_upto[lane - 1] : 0);
                if (any && (w.mask & mesh_layer) != 0 && !level_cells(mesh, l, w.lo, w.hi, lb.lc, lb.nx, lb.ny, mine))
                    mine = 0;
            }
            u32 upto_b = warp_inclusive_sum(mine);
            if (lane < nb) ws.level_upto[lane] = upto_b;
            __syncwarp();
            u32 lcells = ws.level_upto[nb - 1];
            for (u32 k0 = 0; k0 < lcells; k0 += 32) {
                u32 k = k0 + lane, kc;
                u32 b = slot_body(ws.level_upto, nb, k, kc);
                const LevelBox& lb = ws.level[b];
                int x, y, z;
                cell_at(lb.lc, lb.nx, lb.ny, kc, x, y, z);
                u64 key = cell_key(x, y, z);
                u32 first = 0, len = 0;
                if (k < lcells) mesh_bucket(mesh, l, key, first, len);
                u32 upto = warp_inclusive_sum(len);  // entries of lanes 0..=lane
                u32 total = __shfl_sync(FULL_WARP, upto, 31);
                for (u32 m0 = 0; m0 < total; m0 += 32) {
                    u32 m = m0 + lane;
                    // Entry m lies in lane j's cell: j lanes have all their entries before m.
                    u32 j = 0;
                    for (u32 step = 16; step > 0; step /= 2) {
                        u32 v = __shfl_sync(FULL_WARP, upto, j + step - 1);
                        if (v <= m) j += step;
                    }
                    u32 at = __shfl_sync(FULL_WARP, first, j) + m -
                             (__shfl_sync(FULL_WARP, upto, j) - __shfl_sync(FULL_WARP, len, j));
                    u64 jkey = __shfl_sync(FULL_WARP, key, j);
                    u32 jb = __shfl_sync(FULL_WARP, b, j);
                    int jx = __shfl_sync(FULL_WARP, x, j), jy = __shfl_sync(FULL_WARP, y, j),
                        jz = __shfl_sync(FULL_WARP, z, j);
                    const WarpBody& w = ws.body[jb];
                    u32 t = 0;
                    bool has = m < total && mesh_entry_pair(mesh.entries + at, jkey, jx, jy, jz, w.flo, w.fhi,
                                                            ws.level[jb].lc, t);
                    q.push(has, t, jb, test);
                }
            }
            // The next level overwrites the bodies' level cells.
            __syncwarp();
        }
        q.flush(test);
    }
    if (mesh.terrain.rows > 0) {
        const HeightfieldView& hf = mesh.terrain;
        auto test = [&](bool has, u32 t, u32 b) {
            Geometry g;
            bool h = false;
            const WarpBody& w = ws.body[b];
            if (has) {
                D3 p0, p1, p2;
                hf_triangle(hf, t, p0, p1, p2);
                h = contact_ellipsoid_triangle(w.s, vsub(p0, w.c), vsub(p1, w.c), vsub(p2, w.c), g);
            }
            hits.put(h, h ? make_rec(w.i, KIND_HEIGHTFIELD | t, g) : PackedContact());
        };
        // A lane per body: the squares under its box (lc: first column and row; nx, ny: how
        // many), two triangles each.
        u32 mine = 0;
        if (lane < nb) {
            const WarpBody& w = ws.body[lane];
            LevelBox& lb = ws.level[lane];
            bool any = ws.cells_upto[lane] > (lane > 0 ? ws.cells_upto[lane - 1] : 0);
            u32 c0, c1, r0, r1;
            if (any && (w.mask & mesh_layer) != 0 && hf_span(w.lo[0], w.hi[0], hf.origin[0], hf.spacing, hf.cols, c0, c1) &&
                hf_span(w.lo[1], w.hi[1], hf.origin[1], hf.spacing, hf.rows, r0, r1)) {
                lb.lc[0] = (int)c0;
                lb.lc[1] = (int)r0;
                lb.nx = c1 - c0 + 1;
                lb.ny = r1 - r0 + 1;
                mine = 2 * lb.nx * lb.ny;
            }
        }
        u32 upto_b = warp_inclusive_sum(mine);
        if (lane < nb) ws.level_upto[lane] = upto_b;
        __syncwarp();
        u32 total = ws.level_upto[nb - 1];
        for (u32 k0 = 0; k0 < total; k0 += 32) {
            u32 k = k0 + lane, kc;
            u32 b = slot_body(ws.level_upto, nb, k, kc);
            const LevelBox& lb = ws.level[b];
            u32 sq = kc / 2;
            u32 col = (u32)lb.lc[0] + sq % lb.nx, row = (u32)lb.lc[1] + sq / lb.nx;
            u32 t = 2 * (row * (hf.cols - 1) + col) + kc % 2;
            D3 p0, p1, p2;
            bool has = k < total && hf_meets(hf, t, ws.body[b].lo, ws.body[b].hi, p0, p1, p2);
            q.push(has, t, b, test);
        }
        __syncwarp();
        q.flush(test);
    }
    auto test = [&](bool has, u32 o, u32 b) {
        Geometry g;
        bool h = false;
        const WarpBody& w = ws.body[b];
        if (has) {
            const double* p = bv.center + 3 * (u64)o;
            h = contact_ellipsoid_ellipsoid(w.s, body_shape(bv, o), vsub(v3(p[0], p[1], p[2]), w.c), g);
        }
        hits.put(h, h ? make_rec(w.i, KIND_BODY | o, g) : PackedContact());
    };
    for (u32 k0 = 0; k0 < cells; k0 += 32) {
        u32 k = k0 + lane, kc;
        u32 b = slot_body(ws.cells_upto, nb, k, kc);
        const WarpBody& w = ws.body[b];
        int x, y, z;
        cell_at(w.lc, w.nx, w.ny, kc, x, y, z);
        u64 key = cell_key(x, y, z);
        u32 e = k < cells ? bv.grid.head[bucket_of(key, bv.grid.mask)] : 0;
        while (__any_sync(FULL_WARP, e != 0)) {
            bool has = false;
            u32 o = 0;
            if (e != 0) {
                BodyEntry r = bv.grid.entries[e - 1];
                e = r.next;
                o = r.body;
                if (r.key == key && o > w.i && (w.layer & bv.mask[o]) != 0 && (bv.layer[o] & w.mask) != 0) {
                    const double* olo = bv.bbox + 6 * (u64)o;
                    const int* oc = bv.cells + 6 * (u64)o;
                    has = boxes_overlap(w.lo, w.hi, olo, olo + 3) && x == max(w.lc[0], oc[0]) &&
                          y == max(w.lc[1], oc[1]) && z == max(w.lc[2], oc[2]);
                }
            }
            q.push(has, o, b, test);
        }
    }
    q.flush(test);
}

// Whether contact a comes before b: by body, then `other` (kind, then id).
__device__ __forceinline__ bool contact_before(const PackedContact& a, const PackedContact& b) {
    return a.body < b.body || (a.body == b.body && a.other < b.other);
}

// Warps per block of body_contacts.
#define CONTACT_WARPS NK_CONTACT_WARPS

// The tick's contacts, a warp per `batch` bodies (1 to BATCH_MAX; more for smaller bodies, so
// that the lanes have work): found (warp_contacts), sorted by body and `other`, and written at
// their place in id order, which a decoupled look-back over the blocks gives (blocks take
// bodies in order by ticket, lookback[0]; lookback[2 + t] is tile t's word; all zero before
// the launch). A warp with more contacts than it keeps does its bodies again into `spill` at
// its place, and sorts from there. The last tile writes the status: [0] contacts, [1] grid
// entries (body_cells), [2] a body out of range (+1); also to `status_host` when not null
// (page-locked host memory, as `out` may be). Contacts past `contact_cap` are not written
// (the host grows it and runs the tick again), nor any when the grid's entries overflowed.
extern "C" __global__ void __launch_bounds__(32 * CONTACT_WARPS, 4)
    body_contacts(BodyView bv, MeshView mesh, u32 mesh_layer, u32 n, u32 batch, u32 entry_cap, u32 contact_cap,
                  u32* status, unsigned long long* lookback, PackedContact* spill, PackedContact* out,
                  u32* status_host) {
    __shared__ WarpShared shared[CONTACT_WARPS];
    __shared__ u32 tile_s, before_s, warp_count[CONTACT_WARPS], warp_before[CONTACT_WARPS];
    if (threadIdx.x == 0) tile_s = (u32)atomicAdd(&lookback[0], 1ull);
    __syncthreads();
    u32 tile = tile_s, warp = threadIdx.x / 32, lane = lane_id();
    WarpShared& ws = shared[warp];
    u32 first = (tile * CONTACT_WARPS + warp) * batch;
    u32 nb = first < n ? min(batch, n - first) : 0;
    // A lane per body: its cells (0 when it has none this tick) and what the lanes need of it.
    u32 cells = 0;
    if (lane < nb && status[1] <= entry_cap) {
        cells = bv.count[first + lane];
        if (cells > 0) load_warp_body(bv, first + lane, cells, ws.body[lane]);
    }
    cells = warp_inclusive_sum(cells);
    if (lane < nb) ws.cells_upto[lane] = cells;
    __syncwarp();
    HitList hits{ws.found, nullptr, 0};
    Queue q{ws.queued, ws.queued_body, 0};
    bool any = nb > 0 && ws.cells_upto[nb - 1] > 0;
    if (any) warp_contacts(bv, mesh, mesh_layer, ws, nb, q, hits);
    u32 h = hits.count;
    __syncwarp();
    if (h <= POOL) {
        // Each contact to its rank (no two of a body share `other`).
        for (u32 k = lane; k < h; k += 32) {
            u32 rank = 0;
            for (u32 m = 0; m < h; m++) rank += contact_before(ws.found[m], ws.found[k]);
            ws.sorted[rank] = ws.found[k];
        }
    }
    if (lane == 0) warp_count[warp] = h;
    __syncthreads();
    if (warp == 0) {
        u32 v = lane < CONTACT_WARPS ? warp_count[lane] : 0, upto = warp_inclusive_sum(v);
        if (lane < CONTACT_WARPS) warp_before[lane] = upto - v;
        u32 total = __shfl_sync(FULL_WARP, upto, 31);
        u32 before = lookback_before(lookback + 2, tile, total);
        if (lane == 0) {
            before_s = before;
            if (tile == gridDim.x - 1) {
                status[0] = before + total;
                if (status_host) {
                    status_host[0] = before + total;
                    status_host[1] = status[1];
                    status_host[2] = status[2];
                    status_host[3] = 0;
                }
            }
        }
    }
    __syncthreads();
    u32 base = before_s + warp_before[warp];
    if (h == 0 || (u64)base + h > contact_cap) return;
    if (h <= POOL) {
        // Whole words, lanes side by side: the writes may cross the bus (zero copy).
        const u32* from = (const u32*)ws.sorted;
        u32* to = (u32*)(out + base);
        for (u32 w = lane; w < 9 * h; w += 32) to[w] = from[w];
        return;
    }
    HitList all{nullptr, spill + base, 0};
    warp_contacts(bv, mesh, mesh_layer, ws, nb, q, all);
    __syncwarp();
    const PackedContact* run = spill + base;
    for (u32 k = lane; k < h; k += 32) {
        u32 rank = 0;
        for (u32 m = 0; m < h; m++) rank += contact_before(run[m], run[k]);
        out[base + rank] = run[k];
    }
}

// Calls f(t, corners) for each triangle t of the heightfield (rows 0: none) whose box meets
// [lo, hi] (hf_meets). Overlap queries and sweeps find their terrain so.
template <typename F>
__device__ __forceinline__ void heightfield_meeting(const HeightfieldView& hf, const double lo[3], const double hi[3],
                                                    F f) {
    u32 c0, c1, r0, r1;
    if (hf.rows > 0 && hf_span(lo[0], hi[0], hf.origin[0], hf.spacing, hf.cols, c0, c1) &&
        hf_span(lo[1], hi[1], hf.origin[1], hf.spacing, hf.rows, r0, r1)) {
        for (u32 r = r0; r <= r1; r++)
            for (u32 col = c0; col <= c1; col++)
                for (u32 k = 0; k < 2; k++) {
                    u32 t = 2 * (r * (hf.cols - 1) + col) + k;
                    D3 p0, p1, p2;
                    if (hf_meets(hf, t, lo, hi, p0, p1, p2)) f(t, p0, p1, p2);
                }
    }
}

// Calls f(o) once for each body o of the tick's grid in a layer of `mask` whose box meets the
// box [lo, hi], whose cells are lc..=hc (each pair in the cell of their boxes' low corners'
// maximum, as hash_grid::owns_pair). Overlap queries and sweeps find their bodies so.
template <typename F>
__device__ __forceinline__ void bodies_meeting(const BodyView& bv, const int lc[3], const int hc[3], const double lo[3],
                                               const double hi[3], u32 mask, F f) {
    for (int z = lc[2]; z <= hc[2]; z++)
        for (int y = lc[1]; y <= hc[1]; y++)
            for (int x = lc[0]; x <= hc[0]; x++) {
                u64 key = cell_key(x, y, z);
                u32 e = bv.grid.head[bucket_of(key, bv.grid.mask)];
                while (e != 0) {
                    BodyEntry r = bv.grid.entries[e - 1];
                    e = r.next;
                    u32 o = r.body;
                    if (r.key != key || (mask & bv.layer[o]) == 0) continue;
                    const double* olo = bv.bbox + 6 * (u64)o;
                    const int* oc = bv.cells + 6 * (u64)o;
                    if (!boxes_overlap(lo, hi, olo, olo + 3) || x != max(lc[0], oc[0]) || y != max(lc[1], oc[1]) ||
                        z != max(lc[2], oc[2]))
                        continue;
                    f(o);
                }
            }
}

// One thread per sweep (SWEEP_VALUES values: radii, quaternion, from, to, mask, ignored body
// or -1): the first triangle or body it touches, ties by smaller tagged id (collide/cpu
// sweeps). out_tri: the tagged id (NO_ID: none); out: toi, point, normal (7 values). The
// bodies come from the tick's grid (bv), which the host keeps current.
// A sweep as uploaded (SWEEP_VALUES: radii, quaternion, from, to, mask, ignored body): its
// shape, ends and box (Sweep::bounds), as sweep_queries and instance_sweeps read it.
__device__ __forceinline__ void sweep_setup(const double* w, Shape& s, D3& from, D3& to, double* lo, double* hi) {
    s = make_shape(v3(w[0], w[1], w[2]), w[3], w[4], w[5], w[6]);
    from = v3(w[7], w[8], w[9]);
    to = v3(w[10], w[11], w[12]);
    D3 h = half_extents(s);
    h = v3(h.x * BOX_SLACK, h.y * BOX_SLACK, h.z * BOX_SLACK);
    lo[0] = t_min(from.x - h.x, to.x - h.x);
    lo[1] = t_min(from.y - h.y, to.y - h.y);
    lo[2] = t_min(from.z - h.z, to.z - h.z);
    hi[0] = t_max(from.x + h.x, to.x + h.x);
    hi[1] = t_max(from.y + h.y, to.y + h.y);
    hi[2] = t_max(from.z + h.z, to.z + h.z);
}

#define SWEEP_VALUES NK_SWEEP_VALUES
extern "C" __global__ void sweep_queries(const double* sweeps, u32 n, double cell_size, MeshView mesh, BodyView bv,
                                         u32 body_layers, u32 mesh_layer, u32* out_tri, double* out, u32* error) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* w = sweeps + SWEEP_VALUES * (u64)i;
    u32 mask = (u32)w[13];
    long long ignore = (long long)w[14];
    Shape s;
    D3 from, to;
    double lo[3], hi[3];
    sweep_setup(w, s, from, to, lo, hi);
    int lc[3], hc[3];
    for (int a = 0; a < 3; a++) {
        if (!cell_of(lo[a], cell_size, lc[a]) || !cell_of(hi[a], cell_size, hc[a])) {
            atomicMax(error, i + 1);
            return;
        }
    }
    D3 motion = vsub(to, from);
    bool found = false;
    u32 best_t = NO_ID;
    Hit best;
    if ((mask & mesh_layer) != 0) {
        for (u32 l = 0; l < mesh.levels; l++) {
            int llc[3];
            u32 nx, ny, cells;
            if (!level_cells(mesh, l, lo, hi, llc, nx, ny, cells)) cells = 0;  // within the finest level's range: never
            for (u32 k = 0; k < cells; k++) {
                int x, y, z;
                cell_at(llc, nx, ny, k, x, y, z);
                mesh_pairs(mesh, l, cell_key(x, y, z), x, y, z, lo, hi, llc, [&](u32 t) {
                    const double* q = mesh.corners + 9 * (u64)t;
                    Hit hit;
                    if (sweep_ellipsoid_triangle(s, vsub(v3(q[0], q[1], q[2]), from), vsub(v3(q[3], q[4], q[5]), from),
                                                 vsub(v3(q[6], q[7], q[8]), from), motion, hit)) {
                        if (!found || hit.toi < best.toi || (hit.toi == best.toi && t < best_t)) {
                            found = true;
                            best = hit;
                            best_t = t;
                        }
                    }
                });
            }
        }
        // The heightfield's triangles, their ids tagged: ties go to the mesh, then the smaller id.
        heightfield_meeting(mesh.terrain, lo, hi, [&](u32 t, D3 p0, D3 p1, D3 p2) {
            Hit hit;
            if (sweep_ellipsoid_triangle(s, vsub(p0, from), vsub(p1, from), vsub(p2, from), motion, hit)) {
                u32 tagged = KIND_HEIGHTFIELD | t;
                if (!found || hit.toi < best.toi || (hit.toi == best.toi && tagged < best_t)) {
                    found = true;
                    best = hit;
                    best_t = tagged;
                }
            }
        });
    }
    // body_layers: the bodies' layers joined (0: no bodies).
    if ((mask & body_layers) != 0) {
        bodies_meeting(bv, lc, hc, lo, hi, mask, [&](u32 o) {
            if ((long long)o == ignore) return;
            const double* p = bv.center + 3 * (u64)o;
            Hit hit;
            if (sweep_ellipsoid_ellipsoid(s, body_shape(bv, o), vsub(v3(p[0], p[1], p[2]), from), motion, hit)) {
                u32 tagged = KIND_BODY | o;
                if (!found || hit.toi < best.toi || (hit.toi == best.toi && tagged < best_t)) {
                    found = true;
                    best = hit;
                    best_t = tagged;
                }
            }
        });
    }
    out_tri[i] = best_t;
    double* o = out + 7 * (u64)i;
    if (found) {
        D3 pt = dadd(from, best.point);
        o[0] = best.toi;
        o[1] = pt.x;
        o[2] = pt.y;
        o[3] = pt.z;
        o[4] = best.normal.x;
        o[5] = best.normal.y;
        o[6] = best.normal.z;
    }
}

// overlap_cuboid.rs: a box (Shape with half extents as radii) against a triangle and an
// ellipsoid.
__device__ __forceinline__ bool cuboid_axis_separates(D3 h, const D3 p[3], D3 u) {
    if (u.x == 0.0 && u.y == 0.0 && u.z == 0.0) return false;
    double r = h.x * fabs(u.x) + h.y * fabs(u.y) + h.z * fabs(u.z);
    double d0 = vdot(u, p[0]), d1 = vdot(u, p[1]), d2 = vdot(u, p[2]);
    return t_max(t_max(d0, d1), d2) <= -r || t_min(t_min(d0, d1), d2) >= r;
}
__device__ bool cuboid_meets_triangle(const Shape& b, D3 c0, D3 c1, D3 c2) {
    D3 p[3] = {to_local(b, c0), to_local(b, c1), to_local(b, c2)};
    D3 h = b.radii;
    const D3 axes[3] = {v3(1.0, 0.0, 0.0), v3(0.0, 1.0, 0.0), v3(0.0, 0.0, 1.0)};
    for (int a = 0; a < 3; a++)
        if (cuboid_axis_separates(h, p, axes[a])) return false;
    D3 e[3] = {vsub(p[1], p[0]), vsub(p[2], p[1]), vsub(p[0], p[2])};
    if (cuboid_axis_separates(h, p, dcross(e[0], e[1]))) return false;
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++)
            if (cuboid_axis_separates(h, p, dcross(axes[a], e[k]))) return false;
    return true;
}
__device__ bool cuboid_meets_ellipsoid(const Shape& b, const Shape& e, D3 r) {
    D3 h = b.radii;
    D3 c = to_local(b, r);
    if (fabs(c.x) <= h.x && fabs(c.y) <= h.y && fabs(c.z) <= h.z) return true;
    D3 q[8];
    for (int k = 0; k < 8; k++) {
        D3 s = v3(k & 1 ? h.x : -h.x, k & 2 ? h.y : -h.y, k & 4 ? h.z : -h.z);
        q[k] = unit_of(e, vsub(to_world(b, s), r));
    }
    const int faces[6][4] = {{0, 2, 6, 4}, {1, 3, 7, 5}, {0, 1, 5, 4}, {2, 3, 7, 6}, {0, 1, 3, 2}, {4, 5, 7, 6}};
    D3 o = v3(0.0, 0.0, 0.0);
    for (int f = 0; f < 6; f++) {
        D3 a = q[faces[f][0]], bb = q[faces[f][1]], cc = q[faces[f][2]], d = q[faces[f][3]];
        if (closest_point_triangle(o, a, bb, cc).d2 < 1.0 || closest_point_triangle(o, a, cc, d).d2 < 1.0) return true;
    }
    return false;
}

// Hits an overlap query keeps at most (overlap.rs: OVERLAP_LIMIT_MAX).
// An overlap query as uploaded (11 values: radii, quaternion, center, 1 for a box): its
// shape, center, whether it is a box, and its box (Overlap::bounds: a box's extents |R|·h),
// as overlap_queries and instance_overlaps read it.
__device__ __forceinline__ void overlap_setup(const double* w, Shape& s, D3& c, bool& cuboid, double* lo, double* hi) {
    s = make_shape(v3(w[0], w[1], w[2]), w[3], w[4], w[5], w[6]);
    c = v3(w[7], w[8], w[9]);
    cuboid = w[10] != 0.0;
    D3 h;
    if (cuboid) {
        const double(*r)[3] = s.r;
        D3 e = s.radii;
        h = v3((fabs(r[0][0]) * e.x + fabs(r[0][1]) * e.y + fabs(r[0][2]) * e.z) * BOX_SLACK,
               (fabs(r[1][0]) * e.x + fabs(r[1][1]) * e.y + fabs(r[1][2]) * e.z) * BOX_SLACK,
               (fabs(r[2][0]) * e.x + fabs(r[2][1]) * e.y + fabs(r[2][2]) * e.z) * BOX_SLACK);
    } else {
        h = half_extents(s);
        h = v3(h.x * BOX_SLACK, h.y * BOX_SLACK, h.z * BOX_SLACK);
    }
    lo[0] = c.x - h.x;
    lo[1] = c.y - h.y;
    lo[2] = c.z - h.z;
    hi[0] = c.x + h.x;
    hi[1] = c.y + h.y;
    hi[2] = c.z + h.z;
}

#define OVERLAP_LIMIT_MAX NK_OVERLAP_LIMIT_MAX

// One thread per overlap query (11 values: radii, quaternion, center, 1 for a box or 0 for an
// ellipsoid; and a mask): the mesh's
// and the heightfield's triangles and the bodies it overlaps, as tagged ids (the kind in the
// top bits), the `limit` smallest in order into out_ids[limit·i..], and how many in all
// (overlap.rs). The bodies come from the tick's grid (bv), which the host keeps current.
extern "C" __global__ void overlap_queries(const double* queries, const u32* masks, u32 n, double cell_size,
                                           MeshView mesh, BodyView bv, u32 bodies, u32 mesh_layer, u32 limit,
                                           u32* out_ids, u32* out_total, u32* error) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* w = queries + 11 * (u64)i;
    Shape s;
    D3 c;
    bool cuboid;
    double lo[3], hi[3];
    overlap_setup(w, s, c, cuboid, lo, hi);
    u32 mask = masks[i];
    int lc[3], hc[3];
    for (int a = 0; a < 3; a++) {
        if (!cell_of(lo[a], cell_size, lc[a]) || !cell_of(hi[a], cell_size, hc[a])) {
            atomicMax(error, i + 1);
            return;
        }
    }
    // Overlap::meets_triangle
    auto meets_triangle = [&](D3 c0, D3 c1, D3 c2) {
        Geometry g;
        return cuboid ? cuboid_meets_triangle(s, c0, c1, c2) : contact_ellipsoid_triangle(s, c0, c1, c2, g);
    };
    u32 best[OVERLAP_LIMIT_MAX];
    u32 kept = 0, total = 0;
    // Keeps the `limit` smallest tagged ids, in order (each id comes once).
    auto add = [&](u32 tagged) {
        total++;
        if (kept == limit && tagged > best[limit - 1]) return;
        u32 j = kept < limit ? kept++ : limit - 1;
        while (j > 0 && best[j - 1] > tagged) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = tagged;
    };
    if ((mask & mesh_layer) != 0) {
        for (u32 l = 0; l < mesh.levels; l++) {
            int llc[3];
            u32 nx, ny, cells;
            if (!level_cells(mesh, l, lo, hi, llc, nx, ny, cells)) cells = 0;
            for (u32 k = 0; k < cells; k++) {
                int x, y, z;
                cell_at(llc, nx, ny, k, x, y, z);
                mesh_pairs(mesh, l, cell_key(x, y, z), x, y, z, lo, hi, llc, [&](u32 t) {
                    const double* q = mesh.corners + 9 * (u64)t;
                    if (meets_triangle(vsub(v3(q[0], q[1], q[2]), c), vsub(v3(q[3], q[4], q[5]), c),
                                       vsub(v3(q[6], q[7], q[8]), c)))
                        add(t);
                });
            }
        }
        heightfield_meeting(mesh.terrain, lo, hi, [&](u32 t, D3 p0, D3 p1, D3 p2) {
            if (meets_triangle(vsub(p0, c), vsub(p1, c), vsub(p2, c))) add(KIND_HEIGHTFIELD | t);
        });
    }
    if (bodies > 0) {
        bodies_meeting(bv, lc, hc, lo, hi, mask, [&](u32 o) {
            const double* p = bv.center + 3 * (u64)o;
            Shape bs = body_shape(bv, o);
            D3 off = vsub(v3(p[0], p[1], p[2]), c);
            Geometry g;
            if (cuboid ? cuboid_meets_ellipsoid(s, bs, off) : contact_ellipsoid_ellipsoid(s, bs, off, g))
                add(KIND_BODY | o);
        });
    }
    for (u32 k = 0; k < kept; k++) out_ids[(u64)limit * i + k] = best[k];
    out_total[i] = total;
}

// For the equality tests: the narrow phase on given inputs. pairs: 17 values each (radii a,
// quaternion a, radii b, quaternion b, r = b − a); tris: 16 (radii, quaternion, corners as
// offsets). out: 8 values each (hit, normal, depth, point).
extern "C" __global__ void narrow_check(const double* pairs, u32 n_pairs, const double* tris, u32 n_tris,
                                        double* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_pairs + n_tris) return;
    Geometry g;
    bool hit;
    if (i < n_pairs) {
        const double* p = pairs + 17 * (u64)i;
        Shape a = make_shape(v3(p[0], p[1], p[2]), p[3], p[4], p[5], p[6]);
        Shape b = make_shape(v3(p[7], p[8], p[9]), p[10], p[11], p[12], p[13]);
        hit = contact_ellipsoid_ellipsoid(a, b, v3(p[14], p[15], p[16]), g);
    } else {
        const double* p = tris + 16 * (u64)(i - n_pairs);
        Shape a = make_shape(v3(p[0], p[1], p[2]), p[3], p[4], p[5], p[6]);
        hit = contact_ellipsoid_triangle(a, v3(p[7], p[8], p[9]), v3(p[10], p[11], p[12]), v3(p[13], p[14], p[15]), g);
    }
    double* o = out + 8 * (u64)i;
    o[0] = hit ? 1.0 : 0.0;
    if (hit) {
        o[1] = g.normal.x;
        o[2] = g.normal.y;
        o[3] = g.normal.z;
        o[4] = g.depth;
        o[5] = g.point.x;
        o[6] = g.point.y;
        o[7] = g.point.z;
    }
}
