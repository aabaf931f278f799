// The collision world on the device (cuda/collide.rs launches these). Every function repeats
// its Rust twin in src/collide/ operation for operation, in f64 without fused multiply-add, so
// the CPU and CUDA colliders find the same contacts bit for bit.
//
// A tick: body_boxes → (scan) → body_entries → (scan) → grid_fill rebuild the body grid;
// count_pairs → (scan) → write_pairs list the candidate pairs each grid entry owns, in body
// order; narrow_pairs tests them, a thread each; (scan) → compact_hits keeps the contacts and
// counts each body's, (scan) → place_runs puts each body's run, sorted, at its place in id
// order. Scans are single launches (radix_sort.cu); each kernel takes odd jobs (zeroing,
// the status) that would otherwise cost a launch of their own. Big worlds are first
// put in Morton order of their cells (a radix sort), so that neighbours share caches; every
// kernel after body_boxes works on "slots", slot j holding body order[j].

typedef V3<double> D3;
#define CELL_BITS 21
#define CELL_LIMIT (1ll << (CELL_BITS - 1))
#define BOX_SLACK 1.000000001

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
__device__ __forceinline__ D3 to_unit(const Shape& s, D3 d) {
    return v3(s.u[0][0] * d.x + s.u[0][1] * d.y + s.u[0][2] * d.z, s.u[1][0] * d.x + s.u[1][1] * d.y + s.u[1][2] * d.z,
              s.u[2][0] * d.x + s.u[2][1] * d.y + s.u[2][2] * d.z);
}
__device__ __forceinline__ D3 from_unit(const Shape& s, D3 p) {
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
    D3 a = to_unit(s, c0), b = to_unit(s, c1), c = to_unit(s, c2);
    TriPoint<double> near = closest_point_triangle(v3(0.0, 0.0, 0.0), a, b, c);
    if (!(near.d2 < 1.0)) return false;
    D3 point = from_unit(s, near.p);
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
#define PW_STEPS 24
#define PW_SETTLED 1e-13
__device__ __forceinline__ D3 sym_mul(const double m[6], D3 x) {
    return v3(m[0] * x.x + m[3] * x.y + m[4] * x.z, m[3] * x.x + m[1] * x.y + m[5] * x.z,
              m[4] * x.x + m[5] * x.y + m[2] * x.z);
}

__device__ bool contact_ellipsoid_ellipsoid(const Shape& a, const Shape& b, D3 r, Geometry& out) {
    double reach = t_max(t_max(a.radii.x, a.radii.y), a.radii.z) + t_max(t_max(b.radii.x, b.radii.y), b.radii.z);
    if (!(vdot(r, r) < reach * reach)) return false;
    double sa[6], sb[6];
    sigma(a, sa);
    sigma(b, sb);
    double ha = support(a, r), hb = support(b, r);
    double l = ha + hb > 0.0 ? ha / (ha + hb) : 0.5;
    if (!(pw_f(sa, sb, r, l) < 1.0)) return false;
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
    return Hit{t, from_unit(s, q), n};
}

__device__ bool sweep_ellipsoid_triangle(const Shape& s, D3 c0, D3 c1, D3 c2, D3 motion, Hit& out) {
    D3 p[3] = {to_unit(s, c0), to_unit(s, c1), to_unit(s, c2)};
    D3 v = to_unit(s, motion);
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

struct HashGridView {
    const u32* start;
    const u64* keys;
    const u32* items;
    u64 mask;
};

// A static-mesh grid entry with what the broad phase reads of its triangle, in 48 bytes (three
// 16-byte loads instead of five scattered ones): the cell key, the triangle, its low cell, and
// its box in f32 rounded outwards (so the box test passes whatever the f64 one would).
struct MeshEntry {
    u64 key;
    u32 t;
    int cell[3];
    float lo[3];
    float hi[3];
};

struct MeshView {
    const double* corners;  // 9 per triangle
    const double* lo;       // 3 per triangle
    const double* hi;
    const int* lo_cell;     // 3 per triangle
    HashGridView grid;
    const MeshEntry* entries;  // grid entry e, as MeshEntry
    u32 n;
};

__device__ __forceinline__ bool boxes_overlap(const double* alo, const double* ahi, const double* blo, const double* bhi) {
    return alo[0] <= bhi[0] && blo[0] <= ahi[0] && alo[1] <= bhi[1] && blo[1] <= ahi[1] && alo[2] <= bhi[2] &&
           blo[2] <= ahi[2];
}

// One thread per body: its shape, widened box and cells; count = cells (0 when not alive).
// With `sort_key` (not null), also each body's 30-bit Morton code of its low cell (cells
// taken mod 1024), which orders the tick's work so that neighbours run together.
// It also zeroes the grid's `starts` bucket counters (body_entries counts into them), which
// saves the tick a launch.
extern "C" __global__ void body_boxes(const double* center, const double* quat, const double* radii, const u32* alive, u32 n,
                                      double cell_size, double* box, int* cells, u32* count, u32* error,
                                      u64* sort_key, u32* sort_val, double* shapes, u32* start, u32 starts) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    for (u32 b = i; b < starts; b += gridDim.x * blockDim.x) start[b] = 0;
    if (i >= n) {
        if (i == n) count[n] = 0;  // so that the scan's last element is the total
        return;
    }
    if (sort_key) {
        sort_key[i] = 0x3fffffffull;  // dead bodies last
        sort_val[i] = i;
    }
    if (!alive[i]) {
        count[i] = 0;
        return;
    }
    const double* p = center + 3 * (u64)i;
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
    u64 c = 1;
    bool ok = true;
    for (int a = 0; a < 3; a++) {
        int l = 0, u = 0;
        ok = ok && cell_of(lo[a], cell_size, l) && cell_of(hi[a], cell_size, u);
        box[6 * (u64)i + a] = lo[a];
        box[6 * (u64)i + 3 + a] = hi[a];
        cells[6 * (u64)i + a] = l;
        cells[6 * (u64)i + 3 + a] = u;
        c *= (u64)(u - l + 1);
    }
    if (!ok || c > 0x3fffffffull) {
        atomicMax(error, i + 1);
        c = 0;
    }
    count[i] = (u32)c;
    if (sort_key) {
        const int* l = cells + 6 * (u64)i;
        sort_key[i] = spread3_21((u32)l[0] & 1023u) | (spread3_21((u32)l[1] & 1023u) << 1) |
                      (spread3_21((u32)l[2] & 1023u) << 2);
    }
}

// Cell counts in work order: slot j holds body order[j].
extern "C" __global__ void slot_counts(const u32* order, const u32* count, u32 n, u32* slot_count) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) slot_count[j] = count[order[j]];
    if (j == n) slot_count[n] = 0;
}

// Threads per slot in body_entries and place_runs: a body's cells (8-27 for bodies about a
// cell wide) or contacts are worked on together, so that their atomics and copies are in
// flight at once instead of one after another.
#define SLOT_GROUP 8

// SLOT_GROUP threads per slot: entry e of the slot's body (cell k = e - offset[j] of its
// range, x fastest, then y, then z) gets its key and bucket, and its rank in the bucket.
// Entries past `capacity` are dropped: the host grows it and runs the tick again.
extern "C" __global__ void body_entries(const int* cells, const u32* order, const u32* offset, u32 n, u32 capacity,
                                        u64 mask, u64* entry_key, u32* entry_body, u32* entry_bucket,
                                        u32* entry_rank, u32* bucket_count) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    u32 j = t / SLOT_GROUP;
    if (j >= n) return;
    u32 i = order ? order[j] : j;
    u32 e0 = offset[j], end = min(offset[j + 1], capacity);
    const int* c = cells + 6 * (u64)i;
    u32 nx = (u32)(c[3] - c[0] + 1), ny = (u32)(c[4] - c[1] + 1);
    for (u32 e = e0 + t % SLOT_GROUP; e < end; e += SLOT_GROUP) {
        u32 k = e - e0;
        u64 key = cell_key(c[0] + (int)(k % nx), c[1] + (int)(k / nx % ny), c[2] + (int)(k / (nx * ny)));
        u32 b = bucket_of(key, mask);
        entry_key[e] = key;
        entry_body[e] = i;
        entry_bucket[e] = b;
        entry_rank[e] = atomicAdd(&bucket_count[b], 1u);
    }
}

// Entries into bucket order; the total is offset[n] (at most `capacity`).
extern "C" __global__ void grid_fill(const u64* entry_key, const u32* entry_body, const u32* entry_bucket,
                                     const u32* entry_rank, const u32* offset, u32 n, u32 capacity, const u32* start,
                                     u64* keys, u32* items) {
    u32 e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= min(offset[n], capacity)) return;
    u32 at = start[entry_bucket[e]] + entry_rank[e];
    keys[at] = entry_key[e];
    items[at] = entry_body[e];
}

// A contact as it leaves the device: `other` carries the kind in its top bit (set: a body),
// so sorting a body's contacts by it gives (kind, other) order. Normal, depth and the point's
// offset from the body's center are rounded to f32 (both colliders round alike).
struct PackedContact {
    u32 body;
    u32 other;
    float n[3];
    float depth;
    float off[3];
};
#define KIND_BODY 0x80000000u

__device__ __forceinline__ PackedContact make_rec(u32 body, u32 other, const Geometry& g) {
    PackedContact r;
    r.body = body;
    r.other = other;
    r.n[0] = (float)g.normal.x;
    r.n[1] = (float)g.normal.y;
    r.n[2] = (float)g.normal.z;
    r.depth = (float)g.depth;
    r.off[0] = (float)g.point.x;
    r.off[1] = (float)g.point.y;
    r.off[2] = (float)g.point.z;
    return r;
}

struct BodyView {
    const double* center; // 3 per body
    const double* radii;  // 3 per body
    const double* shape;  // rotation and S⁻¹·Rᵀ, row by row: 18 per body (from body_boxes)
    const u32* layer;
    const u32* mask;
    const u32* alive;
    const double* box;    // lo, hi: 6 per body
    const int* cells;     // lo, hi cell: 6 per body
    HashGridView grid;
};

// The shape body_boxes made (the same bits as make_shape, without its ten divisions).
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

// The mesh's triangles in cell `key` (at cx, cy, cz) that a box [lo, hi] with low cell lc
// meets and whose pair with it this cell owns (hash_grid::owns_pair), offered to sink(t).
template <typename Sink>
__device__ __forceinline__ void mesh_pairs(const MeshView& mesh, u64 key, int cx, int cy, int cz, const double* lo,
                                           const double* hi, const int* lc, Sink sink) {
    // The body's box in f32, rounded outwards: the test stays conservative.
    float flo[3] = {__double2float_rd(lo[0]), __double2float_rd(lo[1]), __double2float_rd(lo[2])};
    float fhi[3] = {__double2float_ru(hi[0]), __double2float_ru(hi[1]), __double2float_ru(hi[2])};
    u32 b = bucket_of(key, mesh.grid.mask);
    u32 end = mesh.grid.start[b + 1];
    for (u32 e = mesh.grid.start[b]; e < end; e++) {
        const uint4* r = (const uint4*)(mesh.entries + e);
        uint4 r0 = __ldg(r), r1 = __ldg(r + 1), r2 = __ldg(r + 2);
        if ((((u64)r0.y << 32) | r0.x) != key) continue;
        float tlo[3] = {__uint_as_float(r1.z), __uint_as_float(r1.w), __uint_as_float(r2.x)};
        float thi[3] = {__uint_as_float(r2.y), __uint_as_float(r2.z), __uint_as_float(r2.w)};
        if (!(flo[0] <= thi[0] && tlo[0] <= fhi[0] && flo[1] <= thi[1] && tlo[1] <= fhi[1] && flo[2] <= thi[2] &&
              tlo[2] <= fhi[2]))
            continue;
        if (cx != max(lc[0], (int)r0.w) || cy != max(lc[1], (int)r1.x) || cz != max(lc[2], (int)r1.y)) continue;
        sink(r0.z);
    }
}

// The pairs that grid entry e (body i in cell `key`) owns (hash_grid::owns_pair): part 0, the
// cell's triangles, and part 1, its higher-numbered bodies, whose boxes meet body i's, offered
// to sink(other) in bucket order, `other` with KIND_BODY set for a body. A part is a thread's
// work, so each thread walks one bucket chain. cpu/collide.rs tests the same pairs.
template <typename Sink>
__device__ __forceinline__ void entry_pairs(const BodyView& bv, const MeshView& mesh, u32 mesh_layer, u32 i, u64 key,
                                            u32 part, Sink sink) {
    int cx = (int)((long long)(key >> (2 * CELL_BITS)) - CELL_LIMIT);
    int cy = (int)((long long)((key >> CELL_BITS) & ((1ull << CELL_BITS) - 1)) - CELL_LIMIT);
    int cz = (int)((long long)(key & ((1ull << CELL_BITS) - 1)) - CELL_LIMIT);
    const double* blo = bv.box + 6 * (u64)i;
    const double* bhi = blo + 3;
    const int* lc = bv.cells + 6 * (u64)i;
    if (part == 0) {
        if (mesh.n > 0 && (bv.mask[i] & mesh_layer) != 0) mesh_pairs(mesh, key, cx, cy, cz, blo, bhi, lc, sink);
        return;
    }
    u32 b = bucket_of(key, bv.grid.mask);
    for (u32 e = bv.grid.start[b]; e < bv.grid.start[b + 1]; e++) {
        if (bv.grid.keys[e] != key) continue;
        u32 o = bv.grid.items[e];
        if (o <= i) continue;
        if (!((bv.layer[i] & bv.mask[o]) != 0 && (bv.layer[o] & bv.mask[i]) != 0)) continue;
        const double* olo = bv.box + 6 * (u64)o;
        const int* oc = bv.cells + 6 * (u64)o;
        if (!boxes_overlap(blo, bhi, olo, olo + 3)) continue;
        if (cx != max(lc[0], oc[0]) || cy != max(lc[1], oc[1]) || cz != max(lc[2], oc[2])) continue;
        sink(KIND_BODY | o);
    }
}

// Pairs a part keeps from its counting pass, so that most parts are enumerated once.
#define KEPT_PAIRS 8

// Thread τ's part: warps alternate between the parts of 32 entries, so that a warp walks
// one kind of bucket (the two kinds diverge). p = 2e + part indexes the part's data.
__device__ __forceinline__ void part_of_thread(u32 tau, u32& e, u32& part, u32& p) {
    e = (tau / 64) * 32 + tau % 32;
    part = (tau / 32) % 2;
    p = 2 * e + part;
}

// A thread per part p = 2e + part of grid entry e (entry_pairs): how many pairs it owns; the
// first KEPT_PAIRS of them are kept (kept[k · 2·entry_cap + p]) for write_pairs. Pair offsets
// are by part, so entry e's pairs start at pair_offset[2e].
extern "C" __global__ void count_pairs(const u64* entry_key, const u32* entry_body, const u32* offset, u32 n,
                                       u32 entry_cap, BodyView bv, MeshView mesh, u32 mesh_layer, u32* pair_count,
                                       u32* kept) {
    u32 e, part, p;
    part_of_thread(blockIdx.x * blockDim.x + threadIdx.x, e, part, p);
    u32 parts = 2 * min(offset[n], entry_cap);
    if (p > parts) return;
    if (p == parts) {
        pair_count[p] = 0;  // so that the scan's last element is the total
        return;
    }
    u32 k = 0;
    u64 stride = 2 * (u64)entry_cap;  // kept is slot-major: kept[k * stride + p]
    entry_pairs(bv, mesh, mesh_layer, entry_body[e], entry_key[e], part, [&](u32 other) {
        if (k < KEPT_PAIRS) kept[k * stride + p] = other;
        k++;
    });
    pair_count[p] = k;
}

// A thread per part: its pairs at its offset, as (body, other), from what count_pairs kept
// (enumerated again only past KEPT_PAIRS). Entries are in body order, so each body's pairs
// form one run.
extern "C" __global__ void write_pairs(const u64* entry_key, const u32* entry_body, const u32* offset, u32 n,
                                       u32 entry_cap, BodyView bv, MeshView mesh, u32 mesh_layer,
                                       const u32* pair_offset, u32 pair_cap, const u32* kept, u32* pair_body,
                                       u32* pair_other, u32* body_pairs, u32* body_pair_count) {
    u32 e, part, p;
    part_of_thread(blockIdx.x * blockDim.x + threadIdx.x, e, part, p);
    if (p >= 2 * min(offset[n], entry_cap)) return;
    u32 i = entry_body[e], at = pair_offset[p], count = pair_offset[p + 1] - at;
    auto put = [&](u32 other) {
        if (at < pair_cap) {
            pair_body[at] = i;
            pair_other[at] = other;
            // Body pairs cost ten times a triangle's: narrow_pairs gives them threads of their own.
            if (other & KIND_BODY) body_pairs[atomicAdd(body_pair_count, 1u)] = at;
        }
        at++;
    };
    if (count <= KEPT_PAIRS) {
        u64 stride = 2 * (u64)entry_cap;
        for (u32 k = 0; k < count; k++) put(kept[k * stride + p]);
    } else {
        entry_pairs(bv, mesh, mesh_layer, i, entry_key[e], part, put);
    }
}

// The exact test of candidate pair k; hit[k] = 1 and rec[k] on contact.
__device__ __forceinline__ void narrow_pair(u32 k, const u32* pair_body, const u32* pair_other, const BodyView& bv,
                                            const MeshView& mesh, u32* hit, PackedContact* rec) {
    u32 i = pair_body[k], other = pair_other[k];
    const double* p = bv.center + 3 * (u64)i;
    D3 c = v3(p[0], p[1], p[2]);
    Shape s = body_shape(bv, i);
    Geometry g;
    bool h;
    if (other & KIND_BODY) {
        u32 o = other & ~KIND_BODY;
        const double* po = bv.center + 3 * (u64)o;
        h = contact_ellipsoid_ellipsoid(s, body_shape(bv, o), vsub(v3(po[0], po[1], po[2]), c), g);
    } else {
        const double* q = mesh.corners + 9 * (u64)other;
        h = contact_ellipsoid_triangle(s, vsub(v3(q[0], q[1], q[2]), c), vsub(v3(q[3], q[4], q[5]), c),
                                       vsub(v3(q[6], q[7], q[8]), c), g);
    }
    hit[k] = h;
    if (h) rec[k] = make_rec(i, other, g);
}

// The exact tests, a thread per candidate pair (seed B's lesson: every thread does one test,
// none idles while a neighbour works through a long list). Threads [0, pair_cap) take the
// body pairs, which write_pairs listed in body_pairs: ten times dearer than a triangle's, they
// get warps of their own and start first. Threads [pair_cap, 2·pair_cap] take the pairs in
// order, skipping body pairs; the last writes hit[total] = 0 for the scan.
extern "C" __global__ void narrow_pairs(const u32* pair_body, const u32* pair_other, const u32* pair_offset,
                                        const u32* offset, u32 n, u32 entry_cap, u32 pair_cap,
                                        const u32* body_pairs, const u32* body_pair_count, BodyView bv,
                                        MeshView mesh, u32* hit, PackedContact* rec) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < pair_cap) {
        if (t < min(*body_pair_count, pair_cap)) narrow_pair(body_pairs[t], pair_body, pair_other, bv, mesh, hit, rec);
        return;
    }
    u32 k = t - pair_cap;
    u32 total = min(pair_offset[2 * min(offset[n], entry_cap)], pair_cap);
    if (k > total) return;
    if (k == total) {
        hit[k] = 0;
        return;
    }
    if (pair_other[k] & KIND_BODY) return;
    narrow_pair(k, pair_body, pair_other, bv, mesh, hit, rec);
}
// The run of contacts of the body in slot j, in compact_hits' layout.
__device__ __forceinline__ void slot_run(const u32* offset, const u32* pair_offset, const u32* hit_offset, u32 j,
                                         u32 entry_cap, u32 pair_cap, u32& lo, u32& hi) {
    u32 e0 = min(offset[j], entry_cap), e1 = min(offset[j + 1], entry_cap);
    lo = hit_offset[min(pair_offset[2 * e0], pair_cap)];
    hi = hit_offset[min(pair_offset[2 * e1], pair_cap)];
}

// A thread per candidate pair k: its contact, if any, to its place in `out` (hit_offset is
// scanned). Thread j ≤ n also counts slot j's contacts into run_count (0 at n, for the scan).
extern "C" __global__ void compact_hits(const u32* order, const u32* hit_offset, const u32* pair_offset,
                                        const u32* offset, u32 n, u32 entry_cap, u32 pair_cap, u32 contact_cap,
                                        const PackedContact* rec, PackedContact* out, u32* run_count) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) {
        u32 lo, hi;
        slot_run(offset, pair_offset, hit_offset, k, entry_cap, pair_cap, lo, hi);
        run_count[order ? order[k] : k] = hi - lo;
    } else if (k == n) {
        run_count[n] = 0;
    }
    u32 total = min(pair_offset[2 * min(offset[n], entry_cap)], pair_cap);
    if (k >= total) return;
    u32 at = hit_offset[k];
    if (hit_offset[k + 1] != at && at < contact_cap) out[at] = rec[k];
}
// The tick's status for the host: entries, pairs, contacts (each only when the one before
// fit its buffer).
__device__ __forceinline__ void tick_status(const u32* offset, u32 n, u32 entry_cap, const u32* pair_offset, u32 pair_cap,
                                       const u32* hit_offset, u32* status) {
    u32 entries = offset[n];
    status[1] = entries;
    if (entries > entry_cap) return;
    u32 pairs = pair_offset[2 * entries];
    status[3] = pairs;
    if (pairs > pair_cap) return;
    status[0] = hit_offset[pairs];
}

// SLOT_GROUP threads per slot: its body's run copied to the body's place in id order, sorted
// by `other` (kind, then id). Each thread takes contacts of the run and places each at its
// rank, the number of the run's contacts before it (ties, which do not occur, by position):
// the copies are independent, where an insertion sort in place made each wait on the last.
// Thread 0 also writes the tick's status.
extern "C" __global__ void place_runs(const u32* order, const u32* offset, const u32* pair_offset,
                                      const u32* hit_offset, const u32* run_offset, u32 n, u32 entry_cap,
                                      u32 pair_cap, u32 contact_cap, const PackedContact* compact, PackedContact* out,
                                      u32* status, u32* status_host) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) {
        tick_status(offset, n, entry_cap, pair_offset, pair_cap, hit_offset, status);
        // Where the host's copy is mapped here, it needs no copy after the tick.
        if (status_host)
            for (int k = 0; k < 4; k++) status_host[k] = status[k];
    }
    u32 j = t / SLOT_GROUP;
    if (j >= n) return;
    u32 lo, hi;
    slot_run(offset, pair_offset, hit_offset, j, entry_cap, pair_cap, lo, hi);
    u32 at = run_offset[order ? order[j] : j];
    if (hi > contact_cap || at + (hi - lo) > contact_cap) return;  // overflow: the host runs again
    for (u32 k = lo + t % SLOT_GROUP; k < hi; k += SLOT_GROUP) {
        PackedContact r = compact[k];
        u32 rank = 0;
        for (u32 q = lo; q < hi; q++) {
            u32 o = compact[q].other;
            rank += o < r.other || (o == r.other && q < k);
        }
        out[at + rank] = r;
    }
}

// status: [0] contacts, [1] grid entries, [2] a body out of range (+1), [3] candidate pairs.

// One thread per sweep (13 values: radii, quaternion, from, to): the first triangle it
// touches, ties by smaller id (cpu/collide.rs::sweeps). out: toi, point, normal (7 values).
extern "C" __global__ void sweep_queries(const double* sweeps, u32 n, double cell_size, MeshView mesh, u32* out_tri,
                                         double* out, u32* error) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* w = sweeps + 13 * (u64)i;
    Shape s = make_shape(v3(w[0], w[1], w[2]), w[3], w[4], w[5], w[6]);
    D3 from = v3(w[7], w[8], w[9]), to = v3(w[10], w[11], w[12]);
    D3 h = half_extents(s);
    h = v3(h.x * BOX_SLACK, h.y * BOX_SLACK, h.z * BOX_SLACK);
    double lo[3] = {t_min(from.x - h.x, to.x - h.x), t_min(from.y - h.y, to.y - h.y), t_min(from.z - h.z, to.z - h.z)};
    double hi[3] = {t_max(from.x + h.x, to.x + h.x), t_max(from.y + h.y, to.y + h.y), t_max(from.z + h.z, to.z + h.z)};
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
    for (int z = lc[2]; z <= hc[2]; z++)
        for (int y = lc[1]; y <= hc[1]; y++)
            for (int x = lc[0]; x <= hc[0]; x++) {
                u64 key = cell_key(x, y, z);
                mesh_pairs(mesh, key, x, y, z, lo, hi, lc, [&](u32 t) {
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
