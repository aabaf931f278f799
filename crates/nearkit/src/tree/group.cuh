// A warp's 32 queries walking the tree together (radius.cu's counts): the runs of points
// near the queries' box, found once for the warp, then each point read once and offered to
// every lane. (A warp walking for its box with one lane, the others waiting, was 5x slower
// than a walk per thread: what makes the shared walk pay is a list of runs built
// breadth-first by all 32 lanes, and the runs' points read once and tested by every lane.)

#define GROUP_ITEMS NK_GROUP_ITEMS
#define FULL_WARP 0xffffffffu

// A point of a run as a warp reads it from shared memory: one 16-byte load in f32.
template <typename T>
struct __align__(16) Cand {
    T x, y, z;
    u32 id;
};

// A lower bound, in floating point, of dist2 between any point of `node` and any point of the
// box glo..ghi: rounding is monotone, so each gap is at most the difference it bounds.
template <typename T>
__device__ __forceinline__ T box_box_dist2(const Tree<T>& t, u32 node, const T* glo, const T* ghi) {
    T gx = t_max(t_max(t.lo_x[node] - ghi[0], glo[0] - t.hi_x[node]), (T)0);
    T gy = t_max(t_max(t.lo_y[node] - ghi[1], glo[1] - t.hi_y[node]), (T)0);
    T gz = t_max(t_max(t.lo_z[node] - ghi[2], glo[2] - t.hi_z[node]), (T)0);
    return gx * gx + gy * gy + gz * gz;
}

// The runs of sorted points (x..y) of every node within r2 of the box glo..ghi, in ascending
// position, for the whole warp: a breadth-first walk in which each lane replaces one item of
// the list by its children (left first) a turn, so the list stays in position order. Items
// are runs (y != NO_ID) or nodes still to expand (x, NO_ID). `a` and `b` hold GROUP_ITEMS
// items each; the runs end in *runs (one of them), their number in m. False when the list
// would outgrow GROUP_ITEMS.
template <typename T>
__device__ bool group_runs(const Tree<T>& t, const T* glo, const T* ghi, T r2, uint2* a, uint2* b, uint2** runs,
                           u32& m) {
    u32 lane = threadIdx.x % 32;
    u32 run = scan_whole(t);
    *runs = a;
    if (t.n <= run || t.n == 1) {
        if (lane == 0) a[0] = make_uint2(0, t.n);
        __syncwarp();
        m = 1;
        return true;
    }
    m = 0;
    if (box_box_dist2(t, 0, glo, ghi) > r2) return true;
    if (lane == 0) a[0] = make_uint2(0, NO_ID);
    __syncwarp();
    m = 1;
    uint2 *cur = a, *nxt = b;
    for (;;) {
        u32 nm = 0;
        bool expand = false;
        for (u32 base = 0; base < m; base += 32) {
            u32 k = base + lane;
            uint2 o[2];
            u32 no = 0;
            if (k < m) {
                uint2 it = cur[k];
                if (it.y != NO_ID) o[no++] = it;
                else {
                    u32 cs[2] = {t.left[it.x], t.right[it.x]};
                    for (int c = 0; c < 2; c++) {
                        u32 ch = cs[c];
                        if (ch & CHILD_POINT) {
                            u32 p = ch & ~CHILD_POINT;
                            o[no++] = make_uint2(p, p + 1);
                        } else if (box_box_dist2(t, ch, glo, ghi) <= r2) {
                            u32 j = t.other_end[ch];
                            u32 ns = min(ch, j), ne = max(ch, j) + 1;
                            if (ne - ns <= run) o[no++] = make_uint2(ns, ne);
                            else {
                                o[no++] = make_uint2(ch, NO_ID);
                                expand = true;
                            }
                        }
                    }
                    // Two runs side by side (a node's two halves) are one run.
                    if (no == 2 && o[0].y != NO_ID && o[1].y != NO_ID && o[0].y == o[1].x) {
                        o[0].y = o[1].y;
                        no = 1;
                    }
                }
            }
            u32 one = __ballot_sync(FULL_WARP, no >= 1), two = __ballot_sync(FULL_WARP, no == 2);
            u32 below = (1u << lane) - 1;
            u32 at = nm + __popc(one & below) + __popc(two & below);
            nm += __popc(one) + __popc(two);
            if (nm > GROUP_ITEMS) return false;
            if (no >= 1) nxt[at] = o[0];
            if (no == 2) nxt[at + 1] = o[1];
        }
        bool more = __any_sync(FULL_WARP, expand);
        __syncwarp();
        uint2* sw = cur;
        cur = nxt;
        nxt = sw;
        m = nm;
        if (!more) break;
    }
    *runs = cur;
    return true;
}

// The points of `runs` (m of them, from group_runs) within r2 of the box glo..ghi, each to
// f(point) in every lane, in ascending position, 32 at a time: each lane finds its point's run
// (runs[k].y becomes the points up to the end of run k) and reads it; those near the box go to
// `st` (room for 32), and every lane takes each in turn.
template <typename T, typename F>
__device__ __forceinline__ void group_points(const Tree<T>& t, const T* glo, const T* ghi, T r2, uint2* runs, u32 m,
                                             Cand<T>* st, F f) {
    u32 lane = threadIdx.x % 32;
    u32 all = 0;
    for (u32 base = 0; base < m; base += 32) {
        u32 k = base + lane;
        u32 len = k < m ? runs[k].y - runs[k].x : 0;
        for (int o = 1; o < 32; o *= 2) {
            u32 v = __shfl_up_sync(FULL_WARP, len, o);
            if (lane >= o) len += v;
        }
        if (k < m) runs[k].y = all + len;
        all += __shfl_sync(FULL_WARP, len, 31);
    }
    for (u32 f0 = 0; f0 < all; f0 += 32) {
        u32 fi = f0 + lane;
        Cand<T> cd;
        bool near = false;
        __syncwarp();
        if (fi < all) {
            u32 lo_k = 0, hi_k = m - 1;
            while (lo_k < hi_k) {
                u32 mid = (lo_k + hi_k) / 2;
                if (runs[mid].y > fi) hi_k = mid;
                else lo_k = mid + 1;
            }
            u32 p = runs[lo_k].x + fi - (lo_k ? runs[lo_k - 1].y : 0);
            cd = Cand<T>{t.x[p], t.y[p], t.z[p], t.id[p]};
            // A point farther than r from the warp's box is near none of its queries (a lower
            // bound, as box_box_dist2): only the others are kept, in order.
            T gx = t_max(t_max(glo[0] - cd.x, cd.x - ghi[0]), (T)0);
            T gy = t_max(t_max(glo[1] - cd.y, cd.y - ghi[1]), (T)0);
            T gz = t_max(t_max(glo[2] - cd.z, cd.z - ghi[2]), (T)0);
            near = gx * gx + gy * gy + gz * gz <= r2;
        }
        u32 kept = __ballot_sync(FULL_WARP, near);
        if (near) st[__popc(kept & ((1u << lane) - 1))] = cd;
        __syncwarp();
        u32 cnt = __popc(kept);
        for (u32 j = 0; j < cnt; j++) f(st[j]);
    }
}

// The box of the lanes' points where `mine` (+inf..-inf in no lane), in every lane.
template <typename T>
__device__ __forceinline__ void warp_box(bool mine, T x, T y, T z, T* glo, T* ghi) {
    glo[0] = mine ? x : t_inf<T>(); glo[1] = mine ? y : t_inf<T>(); glo[2] = mine ? z : t_inf<T>();
    ghi[0] = mine ? x : -t_inf<T>(); ghi[1] = mine ? y : -t_inf<T>(); ghi[2] = mine ? z : -t_inf<T>();
    for (int o = 16; o > 0; o /= 2) {
        for (int a = 0; a < 3; a++) {
            glo[a] = t_min(glo[a], __shfl_xor_sync(FULL_WARP, glo[a], o));
            ghi[a] = t_max(ghi[a], __shfl_xor_sync(FULL_WARP, ghi[a], o));
        }
    }
}
