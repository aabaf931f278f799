// Mesh instances on the device (instance.rs): the placed triangles meeting a box, and the
// instances' part of a tick's contacts. After collide.cu (its grid walks and narrow phases).

#define INSTANCE_MARGIN NK_INSTANCE_MARGIN
#define INSTANCE_STACK NK_INSTANCE_STACK
#define INSTANCE_LEAF NK_INSTANCE_LEAF
#define INSTANCE_EMPTY NK_INSTANCE_EMPTY
#define INSTANCE_SCAN_BELOW NK_INSTANCE_SCAN_BELOW

// Instance::place: a shape point in world coordinates, R·v + p in this order.
__device__ __forceinline__ D3 place(const double* r, const double* p, const double* v) {
    return v3((r[0] * v[0] + r[1] * v[1] + r[2] * v[2]) + p[0], (r[3] * v[0] + r[4] * v[1] + r[5] * v[2]) + p[1],
              (r[6] * v[0] + r[7] * v[1] + r[8] * v[2]) + p[2]);
}

// Instance::local_box: a box in instance j's shape frame holding the preimage of the world
// box [lo, hi], widened by the margin, cut to the shape's box; false when they do not meet.
__device__ __forceinline__ bool instance_local_box(const InstanceView& iv, u32 j, const double* lo, const double* hi,
                                                   double* llo, double* lhi) {
    const double* r = iv.rot + 9 * (u64)j;
    const double* p = iv.pos + 3 * (u64)j;
    const double* sb = iv.shape_box + 7 * (u64)iv.shape[j];
    double d[3], h[3];
    double bd = 0.0, bh = 0.0, bp = 0.0;
    for (int a = 0; a < 3; a++) {
        d[a] = 0.5 * (lo[a] + hi[a]) - p[a];
        h[a] = 0.5 * (hi[a] - lo[a]);
        bd = fmax(bd, fabs(d[a]));
        bh = fmax(bh, fabs(h[a]));
        bp = fmax(bp, fabs(p[a]));
    }
    double m = INSTANCE_MARGIN * ((((bd + bh) + bp) + sb[6]) + 1e-300);
    for (int a = 0; a < 3; a++) {
        double c = r[a] * d[0] + r[3 + a] * d[1] + r[6 + a] * d[2];
        double e = fabs(r[a]) * h[0] + fabs(r[3 + a]) * h[1] + fabs(r[6 + a]) * h[2] + m;
        llo[a] = fmax(c - e, sb[a]);
        lhi[a] = fmin(c + e, sb[3 + a]);
        if (!(llo[a] <= lhi[a])) return false;
    }
    return true;
}

// The places (in the live list) of the instances in `mask` whose boxes (the tree's, f32,
// rounded outwards) meet [lo, hi], offered to f(j), each once (Instances::boxes_meeting).
template <typename F>
__device__ void instance_boxes_meeting(const InstanceView& iv, const double* lo, const double* hi, u32 mask, F f) {
    if (iv.n == 0) return;
    u32 stack[INSTANCE_STACK];
    int top = 1;
    stack[0] = 0;
    while (top > 0) {
        const BvhNode& node = iv.nodes[stack[--top]];
        for (int k = 0; k < 2; k++) {
            u32 child = node.child[k];
            if (child == INSTANCE_EMPTY || (node.layers[k] & mask) == 0) continue;
            const float* b = node.bounds + 6 * k;
            if (!(lo[0] <= (double)b[3] && (double)b[0] <= hi[0] && lo[1] <= (double)b[4] && (double)b[1] <= hi[1] &&
                  lo[2] <= (double)b[5] && (double)b[2] <= hi[2]))
                continue;
            if (child & INSTANCE_LEAF)
                f(iv.order[child & ~INSTANCE_LEAF]);
            else
                stack[top++] = child;
        }
    }
}

// The (instance slot j, triangle t) pairs of instances in `mask` whose shapes' grids offer
// triangle t for the world box [lo, hi] (a superset of Instances::overlapping's), offered to
// f(j, t), each once.
// The triangles t of instance slot j's shape whose boxes may meet the world box [lo, hi]
// (its grid's, or for a small shape each triangle's), offered to f(t), each once.
template <typename F>
__device__ void shape_candidates(const InstanceView& iv, u32 j, const double* lo, const double* hi, F f) {
    double llo[3], lhi[3];
    if (!instance_local_box(iv, j, lo, hi, llo, lhi)) return;
    const MeshView& sv = iv.shapes[iv.shape[j]];
    if (sv.n <= INSTANCE_SCAN_BELOW) {
        // A small shape's triangles one by one (Instances::overlapping_near).
        for (u32 t = 0; t < sv.n; t++) {
            const double* q = sv.corners + 9 * (u64)t;
            bool meets = true;
            for (int a = 0; a < 3; a++)
                meets = meets && llo[a] <= fmax(fmax(q[a], q[3 + a]), q[6 + a]) &&
                        fmin(fmin(q[a], q[3 + a]), q[6 + a]) <= lhi[a];
            if (meets) f(t);
        }
        return;
    }
    for (u32 l2 = 0; l2 < sv.levels; l2++) {
        int slc[3];
        u32 sx, sy, scells;
        if (!level_cells(sv, l2, llo, lhi, slc, sx, sy, scells)) scells = 0;
        for (u32 k2 = 0; k2 < scells; k2++) {
            int a, b, c;
            cell_at(slc, sx, sy, k2, a, b, c);
            mesh_pairs(sv, l2, cell_key(a, b, c), a, b, c, llo, lhi, slc, f);
        }
    }
}

// The (instance slot j, triangle t) pairs of instances in `mask` whose triangles' boxes may
// meet the world box [lo, hi] (a superset of Instances::overlapping's), offered to f(j, t),
// each once.
template <typename F>
__device__ void placed_candidates(const InstanceView& iv, const double* lo, const double* hi, u32 mask, F f) {
    instance_boxes_meeting(iv, lo, hi, mask, [&](u32 j) { shape_candidates(iv, j, lo, hi, [&](u32 t) { f(j, t); }); });
}

// Triangle t of instance slot j, placed; whether its box meets [lo, hi] (triangle_meets_box).
__device__ __forceinline__ bool placed_triangle(const InstanceView& iv, u32 j, u32 t, const double* lo,
                                                const double* hi, D3& p0, D3& p1, D3& p2) {
    const double* r = iv.rot + 9 * (u64)j;
    const double* p = iv.pos + 3 * (u64)j;
    const double* q = iv.shapes[iv.shape[j]].corners + 9 * (u64)t;
    p0 = place(r, p, q);
    p1 = place(r, p, q + 3);
    p2 = place(r, p, q + 6);
    return lo[0] <= fmax(fmax(p0.x, p1.x), p2.x) && fmin(fmin(p0.x, p1.x), p2.x) <= hi[0] &&
           lo[1] <= fmax(fmax(p0.y, p1.y), p2.y) && fmin(fmin(p0.y, p1.y), p2.y) <= hi[1] &&
           lo[2] <= fmax(fmax(p0.z, p1.z), p2.z) && fmin(fmin(p0.z, p1.z), p2.z) <= hi[2];
}

// Instances::overlapping: every placed triangle of an instance in `mask` whose box meets
// [lo, hi], offered to f(instance id, triangle, corners), each once, in no set order.
template <typename F>
__device__ void placed_meeting(const InstanceView& iv, const double* lo, const double* hi, u32 mask, F f) {
    placed_candidates(iv, lo, hi, mask, [&](u32 j, u32 t) {
        D3 p0, p1, p2;
        if (placed_triangle(iv, j, t, lo, hi, p0, p1, p2)) f(iv.id[j], t, p0, p1, p2);
    });
}

// The instances' part of a tick, first step, a thread per body: the instances whose boxes
// its box meets, as (body, instance slot) pairs (`triangle` unset), appended at count (not
// written past cap).
extern "C" __global__ void instance_pairs(BodyView bv, InstanceView iv, const u32* alive, u32 n, u32 cap,
                                          PlacedCandidate* out, u32* count) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !alive[i]) return;
    const double* bb = bv.bbox + 6 * (u64)i;
    double lo[3] = {bb[0], bb[1], bb[2]}, hi[3] = {bb[3], bb[4], bb[5]};
    instance_boxes_meeting(iv, lo, hi, bv.mask[i], [&](u32 j) {
        u32 at = atomicAdd(count, 1u);
        if (at < cap) {
            PlacedCandidate c;
            c.body = i;
            c.slot = j;
            c.triangle = 0;
            out[at] = c;
        }
    });
}

// Second step, a thread per pair: the pair's candidate triangles, as (body, instance slot,
// triangle), appended at count (not written past cap).
extern "C" __global__ void instance_candidates(BodyView bv, InstanceView iv, const PlacedCandidate* pairs, u32 n,
                                               u32 cap, PlacedCandidate* out, u32* count) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    PlacedCandidate pair = pairs[k];
    u32 i = pair.body, j = pair.slot;
    const double* bb = bv.bbox + 6 * (u64)i;
    double lo[3] = {bb[0], bb[1], bb[2]}, hi[3] = {bb[3], bb[4], bb[5]};
    shape_candidates(iv, j, lo, hi, [&](u32 t) {
        u32 at = atomicAdd(count, 1u);
        if (at < cap) {
            PlacedCandidate c;
            c.body = i;
            c.slot = j;
            c.triangle = t;
            out[at] = c;
        }
    });
}

// Third step, a thread per candidate: the placed triangle's box test and the narrow phase;
// each contact appended at count (not written past cap), in no order: placed_keys and the
// radix sort order them by (body, instance, triangle).
extern "C" __global__ void instance_contacts(BodyView bv, InstanceView iv, const PlacedCandidate* candidates, u32 n, u32 cap,
                                             PlacedContact* out, u32* count) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    PlacedCandidate cand = candidates[k];
    u32 i = cand.body, j = cand.slot, t = cand.triangle;
    const double* bb = bv.bbox + 6 * (u64)i;
    double lo[3] = {bb[0], bb[1], bb[2]}, hi[3] = {bb[3], bb[4], bb[5]};
    D3 p0, p1, p2;
    if (!placed_triangle(iv, j, t, lo, hi, p0, p1, p2)) return;
    Shape s = body_shape(bv, i);
    const double* pc = bv.center + 3 * (u64)i;
    D3 c = v3(pc[0], pc[1], pc[2]);
    Geometry g;
    if (!contact_ellipsoid_triangle(s, vsub(p0, c), vsub(p1, c), vsub(p2, c), g)) return;
    u32 at = atomicAdd(count, 1u);
    if (at >= cap) return;
    PlacedContact r;
    r.body = i;
    r.instance = iv.id[j];
    r.triangle = t;
    r.normal[0] = (float)g.normal.x;
    r.normal[1] = (float)g.normal.y;
    r.normal[2] = (float)g.normal.z;
    r.depth = (float)g.depth;
    r.offset[0] = (float)g.point.x;
    r.offset[1] = (float)g.point.y;
    r.offset[2] = (float)g.point.z;
    out[at] = r;
}

// The instances' part of each sweep (sweep_queries' input): its first hit on a placed
// triangle of an instance its mask meets, the earliest by (toi, instance, triangle); out_id
// NO_ID for none. The host keeps the earlier of this and sweep_queries' hit (on equal times,
// sweep_queries': instances come last).
extern "C" __global__ void instance_sweeps(const double* sweeps, u32 n, InstanceView iv, u32* out_id, u32* out_tri,
                                           double* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* w = sweeps + SWEEP_VALUES * (u64)i;
    u32 mask = (u32)w[13];
    Shape s;
    D3 from, to;
    double lo[3], hi[3];
    sweep_setup(w, s, from, to, lo, hi);
    D3 motion = vsub(to, from);
    bool found = false;
    u32 best_id = NO_ID, best_t = 0;
    Hit best;
    placed_meeting(iv, lo, hi, mask, [&](u32 inst, u32 t, D3 p0, D3 p1, D3 p2) {
        Hit hit;
        if (!sweep_ellipsoid_triangle(s, vsub(p0, from), vsub(p1, from), vsub(p2, from), motion, hit)) return;
        if (!found || hit.toi < best.toi ||
            (hit.toi == best.toi && (inst < best_id || (inst == best_id && t < best_t)))) {
            found = true;
            best = hit;
            best_id = inst;
            best_t = t;
        }
    });
    out_id[i] = best_id;
    out_tri[i] = best_t;
    if (found) {
        double* o = out + 7 * (u64)i;
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

// The instances' part of each overlap query (overlap_queries' input): the placed triangles
// it overlaps, the `limit` first by (instance, triangle) into out_ids / out_tris[limit·i..],
// and how many in all.
extern "C" __global__ void instance_overlaps(const double* queries, const u32* masks, u32 n, InstanceView iv,
                                             u32 limit, u32* out_ids, u32* out_tris, u32* out_total) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* w = queries + 11 * (u64)i;
    Shape s;
    D3 c;
    bool cuboid;
    double lo[3], hi[3];
    overlap_setup(w, s, c, cuboid, lo, hi);
    u64 best[OVERLAP_LIMIT_MAX];
    u32 kept = 0, total = 0;
    placed_meeting(iv, lo, hi, masks[i], [&](u32 inst, u32 t, D3 p0, D3 p1, D3 p2) {
        Geometry g;
        bool meets = cuboid ? cuboid_meets_triangle(s, vsub(p0, c), vsub(p1, c), vsub(p2, c))
                            : contact_ellipsoid_triangle(s, vsub(p0, c), vsub(p1, c), vsub(p2, c), g);
        if (!meets) return;
        u64 key = ((u64)inst << 32) | t;
        total++;
        if (kept == limit && key > best[limit - 1]) return;
        u32 j = kept < limit ? kept++ : limit - 1;
        while (j > 0 && best[j - 1] > key) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = key;
    });
    for (u32 k = 0; k < kept; k++) {
        out_ids[(u64)limit * i + k] = (u32)(best[k] >> 32);
        out_tris[(u64)limit * i + k] = (u32)best[k];
    }
    out_total[i] = total;
}

// The sort keys of the instance contacts and their places (order[i] = i): (instance,
// triangle) packed as instance << tri_bits | triangle, with the body above them from bit
// body_shift when `with_body` (else sorted by body afterwards: placed_body_keys).
extern "C" __global__ void placed_keys(const PlacedContact* c, u32 n, u32 tri_bits, u32 body_shift, u32 with_body,
                                       u64* keys, u32* order) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    PlacedContact p = c[i];
    u64 k = ((u64)p.instance << tri_bits) | (u64)p.triangle;
    if (with_body) k |= (u64)p.body << body_shift;
    keys[i] = k;
    order[i] = i;
}

// The body of each contact in `order`'s arrangement: the keys of the second, stable sort.
extern "C" __global__ void placed_body_keys(const PlacedContact* c, const u32* order, u32 n, u64* keys) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = c[order[i]].body;
}

// The contacts in `order`'s arrangement.
extern "C" __global__ void placed_gather(const PlacedContact* c, const u32* order, u32 n, PlacedContact* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = c[order[i]];
}
