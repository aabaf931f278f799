// Radius queries on the device (radius/cuda.rs launches them). The queries, in Morton order,
// are counted a warp at a time: the warp walks the tree once for its 32 queries' box and every
// lane tests its query against each point of the runs found (within_count), keeping its first
// points. After a scan of the counts the rows are copied into place (copy_rows, short_rows),
// or walked again by one thread a query when longer than what was kept (within_fill). A row
// comes out in ascending tree position, as the CPU's group walk gives it (radius/cpu.rs);
// sorted rows are then put in (d2, id) order by a warp (short), a block (long) or the device
// sort (huge). The shared walk is tree/group.cuh.

// Every point within r2 (inclusive) to found(position, d2), in ascending tree position: the
// points, and the order, of the CPU's group walk (tree/search.rs runs_near, scan_runs). Boxes
// are tested as box_dist2, a sound lower bound in floating point, so no point within is missed.
//
// One loop whose every turn either tests one point or expands one node ("if-if", Aila and
// Laine 2009): the lanes of a warp, whose walks differ in length and shape, then mostly run the
// same turn, where nested loops (a node, then its run's points) left most lanes idle. Each
// lane still visits its nodes and points in the same order as a depth-first walk, left child
// first: a node's points in range come before the subtree it descends into next.
template <typename T, typename F>
__device__ __forceinline__ void within_visit(const Tree<T>& t, T qx, T qy, T qz, T r2, F found) {
    u32 run = scan_whole(t);
    if (t.n <= run || t.n == 1) {
        for (u32 i = 0; i < t.n; i++) {
            T d = dist2(qx, qy, qz, t.x[i], t.y[i], t.z[i]);
            if (d <= r2) found(i, d);
        }
        return;
    }
    if (box_dist2(t, 0, qx, qy, qz) > r2) return;
    u32 stack[NK_TREE_STACK];
    int sp = 0;
    // The node to expand next (NO_ID: pop one), and the points still to test, s..e.
    u32 node = 0, s = 0, e = 0;
    for (;;) {
        if (s < e) {
            T d = dist2(qx, qy, qz, t.x[s], t.y[s], t.z[s]);
            if (d <= r2) found(s, d);
            s++;
            continue;
        }
        if (node == NO_ID) {
            if (sp == 0) return;
            u32 c = stack[--sp];
            if (c & CHILD_POINT) {
                s = c & ~CHILD_POINT;
                e = s + 1;
                continue;
            }
            node = c;
        }
        u32 j = t.other_end[node];
        u32 ns = min(node, j), ne = max(node, j) + 1;
        if (ne - ns <= run) {
            s = ns;
            e = ne;
            node = NO_ID;
            continue;
        }
        u32 l = t.left[node], r = t.right[node];
        u32 next = NO_ID;
        // Point children are tested at once (s..e, empty here): the left one first, and the
        // right one just after it (its neighbour) unless the left subtree is descended into
        // first, in which case it waits on the stack.
        if (l & CHILD_POINT) {
            s = l & ~CHILD_POINT;
            e = s + 1;
        } else if (box_dist2(t, l, qx, qy, qz) <= r2) next = l;
        if (r & CHILD_POINT) {
            if (next != NO_ID) stack[sp++] = r;
            else if (s < e) e++;
            else {
                s = r & ~CHILD_POINT;
                e = s + 1;
            }
        } else if (box_dist2(t, r, qx, qy, qz) <= r2) {
            if (next == NO_ID) next = r;
            else stack[sp++] = r;
        }
        node = next;
    }
}

// Query i's points: each point within r2 (only ids above its row's, with `above`) to
// found(id, d2), in ascending position. A thread whose query is not in rows row_lo..row_hi
// finds nothing. Returns whether the thread has a query.
template <typename T, typename F>
__device__ __forceinline__ bool thread_within(u32 i, const T* qx, const T* qy, const T* qz, const u32* qrow, u32 nq,
                                              const Tree<T>& t, T r2, u32 above, u32 row_lo, u32 row_hi, u32& row,
                                              F found) {
    row = i < nq ? qrow[i] : row_hi;
    if (row < row_lo || row >= row_hi) return false;
    u32 lo = above ? row : NO_ID;
    within_visit(t, qx[i], qy[i], qz[i], r2, [&](u32 p, T d) {
        u32 id = t.id[p];
        if (lo == NO_ID || id > lo) found(id, d);
    });
    return true;
}

#define GROUP_WARPS NK_GROUP_WARPS

// Each query of rows row_lo..row_hi: its count into counts[row - row_lo]; the sum of all into
// *total, and the thread of each row into thread_of. Its first `keep` points are kept too,
// point k of thread i at keep_*[i * keep + k] (a row's points side by side, for the
// warp that copies it), so that a row of up to `keep` needs no second
// walk; threads of longer rows are listed in `longer` (their number in longer[0]).
//
// A warp's 32 queries (neighbours in search order) walk the tree once together, for their
// box (group_runs), then test every point of the runs found, each point read once for all 32
// lanes: no lane waits on another's walk. Each row comes out in ascending position, as
// within_visit gives it. A warp whose runs outgrow its list walks a query a lane instead.
template <typename T>
__device__ void within_count_impl(const T* qx, const T* qy, const T* qz, const u32* qrow, u32 nq, Tree<T> t, T r2,
                                  u32 above, u32 row_lo, u32 row_hi, u32 keep, u32* keep_ids, T* keep_d2, u32* counts,
                                  u32* thread_of, u32* longer, u64* total) {
    __shared__ __align__(16) uint2 items[GROUP_WARPS][2][GROUP_ITEMS];
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 lane = threadIdx.x % 32, w = threadIdx.x / 32;
    u32 row = i < nq ? qrow[i] : row_hi;
    bool mine = row >= row_lo && row < row_hi;
    if (__ballot_sync(FULL_WARP, mine) == 0) return;
    T x = mine ? qx[i] : (T)0, y = mine ? qy[i] : (T)0, z = mine ? qz[i] : (T)0;
    T glo[3], ghi[3];
    warp_box(mine, x, y, z, glo, ghi);
    // Ids from `least` on count: above the row's own in a self-join, all otherwise.
    u32 least = above ? row + 1 : 0;
    u32 c = 0;
    u32* my_ids = keep_ids + (u64)i * keep;
    T* my_d2 = keep_d2 + (u64)i * keep;
    auto found = [&](u32 id, T d) {
        if (id >= least) {
            if (c < keep) {
                my_ids[c] = id;
                my_d2[c] = d;
            }
            c++;
        }
    };
    uint2* runs;
    u32 m;
    if (group_runs(t, glo, ghi, r2, items[w][0], items[w][1], &runs, m)) {
        group_points(t, glo, ghi, r2, runs, m, (Cand<T>*)(runs == items[w][0] ? items[w][1] : items[w][0]),
                     [&](const Cand<T>& e) {
                         T d = dist2(x, y, z, e.x, e.y, e.z);
                         if (mine && d <= r2) found(e.id, d);
                     });
    } else if (mine) within_visit(t, x, y, z, r2, [&](u32 p, T d) { found(t.id[p], d); });
    if (mine) {
        counts[row - row_lo] = c;
        thread_of[row - row_lo] = i;
        // Rows of more than 32 go to within_fill, which walks those longer than what was kept
        // (kept rows are placed by copy_rows, or short_rows up to 64).
        if (c > min(keep, 32u)) longer[1 + atomicAdd(&longer[0], 1u)] = i;
    }
    u64 sum = c;
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(FULL_WARP, sum, o);
    if (lane == 0 && sum) atomicAdd(total, sum);
}
NK_INSTANTIATE(within_count, (const R* qx, const R* qy, const R* qz, const u32* qrow, u32 nq, Tree<R> t, R r2, u32 above,
                              u32 row_lo, u32 row_hi, u32 keep, u32* keep_ids, R* keep_d2, u32* counts, u32* thread_of,
                              u32* longer, u64* total),
               (qx, qy, qz, qrow, nq, t, r2, above, row_lo, row_hi, keep, keep_ids, keep_d2, counts, thread_of, longer,
                total))

// The rows of the threads listed in `longer` (rows of more than 32): those longer than what
// the count kept are walked again and written at offsets[row - row_lo], in tree order, as
// (id, distance) when unsorted, (id, d2) when sorted; kept rows are left to copy_rows and
// short_rows (up to 64; a longer kept row, were `keep` above 64, is copied here). With
// `sorted`, rows longer than a warp sorts are listed in `lists` for a block (up to
// NK_LONG_ROW) or the device sort: lists[0], lists[1] count long and huge rows; long rows (as
// row - row_lo) follow from lists[2], huge ones as (start, length) from lists[2 + max_lists].
template <typename T>
__device__ void within_fill_impl(const T* qx, const T* qy, const T* qz, const u32* qrow, u32 nq, Tree<T> t, T r2,
                                 u32 above, const u32* offsets, u32 row_lo, u32 row_hi, const u32* longer,
                                 u32 nlonger, u32 keep, const u32* keep_ids, const T* keep_d2, u32 sorted,
                                 u32 max_lists, u32* out_ids, T* out_d2, u32* lists) {
    u32 li = blockIdx.x * blockDim.x + threadIdx.x;
    if (li >= nlonger) return;
    u32 i = longer[1 + li];
    u32 row = qrow[i];
    u32 at = offsets[row - row_lo];
    u32 len = offsets[row - row_lo + 1] - at;
    u32* ids = out_ids + at;
    T* d2 = out_d2 + at;
    u32 m = 0;
    if (len <= keep) {
        // Unsorted, copy_rows places it; sorted, short_rows (up to 64).
        if (!sorted || len <= 64) return;
        for (; m < len; m++) {
            ids[m] = keep_ids[(u64)i * keep + m];
            d2[m] = keep_d2[(u64)i * keep + m];
        }
    } else thread_within(i, qx, qy, qz, qrow, nq, t, r2, above, row_lo, row_hi, row, [&](u32 id, T d) {
        ids[m] = id;
        // Unsorted rows are final here: distances at once.
        d2[m] = sorted ? d : sqrt(d);
        m++;
    });
    if (!sorted || m <= 32) return;
    if (m <= NK_LONG_ROW) {
        u32 slot = atomicAdd(&lists[0], 1u);
        lists[2 + slot] = row - row_lo;
    } else {
        u32 slot = atomicAdd(&lists[1], 1u);
        lists[2 + max_lists + 2 * slot] = at;
        lists[2 + max_lists + 2 * slot + 1] = m;
    }
}
NK_INSTANTIATE(within_fill, (const R* qx, const R* qy, const R* qz, const u32* qrow, u32 nq, Tree<R> t, R r2, u32 above,
                             const u32* offsets, u32 row_lo, u32 row_hi, const u32* longer, u32 nlonger, u32 keep,
                             const u32* keep_ids, const R* keep_d2, u32 sorted, u32 max_lists, u32* out_ids, R* out_d2,
                             u32* lists),
               (qx, qy, qz, qrow, nq, t, r2, above, offsets, row_lo, row_hi, longer, nlonger, keep, keep_ids, keep_d2,
                sorted, max_lists, out_ids, out_d2, lists))

// Sorted rows, one warp per row: a row the count kept (up to `keep`, and up to 64 points, two
// a lane) is read from there, a row of up to 32 walked again from its place; a bitonic sort
// across the lanes puts it in (d2, id) order and it is written into place as distances.
// Longer rows are sorted by sort_long_rows or the device sort.
template <typename T>
__device__ void short_rows_impl(const u32* offsets, u32 rows, const u32* thread_of, u32 keep, const u32* keep_ids,
                                const T* keep_d2, u32* ids, T* d2) {
    // 64-bit: a batch may have more than 2^27 rows (2^32 threads).
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32 lane = threadIdx.x % 32;
    if (g / 32 >= rows) return;
    u32 r = (u32)(g / 32);
    u32 at = offsets[r], m = offsets[r + 1] - at;
    bool kept = m <= keep;
    if (m == 0 || m > (kept ? 64u : 32u)) return;
    // Element lane + 32 h of the row in (d[h], id[h]).
    T d[2] = {t_inf<T>(), t_inf<T>()};
    u32 id[2] = {NO_ID, NO_ID};
    for (u32 h = 0; h < 2; h++) {
        u32 e = lane + 32 * h;
        if (e >= m) break;
        if (kept) {
            u64 k = (u64)thread_of[r] * keep + e;
            d[h] = keep_d2[k];
            id[h] = keep_ids[k];
        } else {
            d[h] = d2[at + e];
            id[h] = ids[at + e];
        }
    }
    u32 top = m > 32 ? 64 : 32;
    for (u32 k = 2; k <= top; k *= 2) {
        for (u32 j = k / 2; j > 0; j /= 2) {
            if (j == 32) {
                // Elements lane and lane + 32 (k = 64: ascending).
                if (before(d[1], id[1], d[0], id[0])) {
                    T td = d[0]; d[0] = d[1]; d[1] = td;
                    u32 ti = id[0]; id[0] = id[1]; id[1] = ti;
                }
                continue;
            }
            for (u32 h = 0; h < top / 32; h++) {
                u32 e = lane + 32 * h;
                T od = __shfl_xor_sync(0xffffffffu, d[h], j);
                u32 oi = __shfl_xor_sync(0xffffffffu, id[h], j);
                bool keep_min = ((e & j) == 0) == ((e & k) == 0);
                bool take = keep_min ? before(od, oi, d[h], id[h]) : before(d[h], id[h], od, oi);
                if (take) { d[h] = od; id[h] = oi; }
            }
        }
    }
    for (u32 h = 0; h < 2; h++) {
        u32 e = lane + 32 * h;
        if (e < m) {
            d2[at + e] = sqrt(d[h]);
            ids[at + e] = id[h];
        }
    }
}
NK_INSTANTIATE(short_rows, (const u32* offsets, u32 rows, const u32* thread_of, u32 keep, const u32* keep_ids,
                            const R* keep_d2, u32* ids, R* d2),
               (offsets, rows, thread_of, keep, keep_ids, keep_d2, ids, d2))

// Unsorted rows the count kept (up to `keep` points), put in place with their distances: a
// warp for 32 rows, each row's points copied by the lanes side by side. Longer rows were
// walked again by within_fill.
template <typename T>
__device__ void copy_rows_impl(const u32* offsets, u32 rows, const u32* thread_of, u32 keep, const u32* keep_ids,
                               const T* keep_d2, u32* ids, T* d) {
    u64 first = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32;
    u32 lane = threadIdx.x % 32;
    if (first >= rows) return;
    u64 r = first + lane;
    u32 at = 0, m = 0, th = 0;
    if (r < rows) {
        at = offsets[r];
        m = offsets[r + 1] - at;
        th = thread_of[r];
    }
    for (u32 k = 0; k < 32; k++) {
        u32 rat = __shfl_sync(0xffffffffu, at, k), rm = __shfl_sync(0xffffffffu, m, k);
        u32 rth = __shfl_sync(0xffffffffu, th, k);
        if (rm > keep) continue;
        for (u32 j = lane; j < rm; j += 32) {
            u64 src = (u64)rth * keep + j;
            ids[rat + j] = keep_ids[src];
            d[rat + j] = sqrt(keep_d2[src]);
        }
    }
}
NK_INSTANTIATE(copy_rows, (const u32* offsets, u32 rows, const u32* thread_of, u32 keep, const u32* keep_ids,
                           const R* keep_d2, u32* ids, R* d),
               (offsets, rows, thread_of, keep, keep_ids, keep_d2, ids, d))

// One block per listed long row: a bitonic sort by (d2, id) in shared memory.
template <typename T>
__device__ void sort_long_rows_impl(const u32* lists, const u32* offsets, u32* ids, T* d2) {
    __shared__ T sd[NK_LONG_ROW];
    __shared__ u32 si[NK_LONG_ROW];
    u32 row = lists[2 + blockIdx.x];
    u32 at = offsets[row], m = offsets[row + 1] - offsets[row];
    u32 p2 = 64;
    while (p2 < m) p2 *= 2;
    for (u32 j = threadIdx.x; j < p2; j += blockDim.x) {
        sd[j] = j < m ? d2[at + j] : t_inf<T>();
        si[j] = j < m ? ids[at + j] : NO_ID;
    }
    __syncthreads();
    for (u32 k = 2; k <= p2; k *= 2) {
        for (u32 j = k / 2; j > 0; j /= 2) {
            for (u32 i = threadIdx.x; i < p2; i += blockDim.x) {
                u32 o = i ^ j;
                if (o > i) {
                    bool up = (i & k) == 0;
                    bool swap = up ? before(sd[o], si[o], sd[i], si[i]) : before(sd[i], si[i], sd[o], si[o]);
                    if (swap) {
                        T td = sd[i]; sd[i] = sd[o]; sd[o] = td;
                        u32 ti = si[i]; si[i] = si[o]; si[o] = ti;
                    }
                }
            }
            __syncthreads();
        }
    }
    for (u32 j = threadIdx.x; j < m; j += blockDim.x) {
        d2[at + j] = sqrt(sd[j]);
        ids[at + j] = si[j];
    }
}
NK_INSTANTIATE(sort_long_rows, (const u32* lists, const u32* offsets, u32* ids, R* d2), (lists, offsets, ids, d2))

// Sort keys of a huge row, for the device sort: ordered bits of d2[perm[i]].
template <typename T>
__device__ void row_d2_keys_impl(const T* d2, const u32* perm, u32 n, u64* keys) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keys[i] = ordered_bits(d2[perm[i]]);
}
NK_INSTANTIATE(row_d2_keys, (const R* d2, const u32* perm, u32 n, u64* keys), (d2, perm, n, keys))

// A huge row put in the order `perm`, from a copy of it, as distances.
template <typename T>
__device__ void permute_row_impl(const u32* perm, u32 n, const u32* ids_in, const T* d2_in, u32* ids, T* d) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        ids[i] = ids_in[perm[i]];
        d[i] = sqrt(d2_in[perm[i]]);
    }
}
NK_INSTANTIATE(permute_row, (const u32* perm, u32 n, const u32* ids_in, const R* d2_in, u32* ids, R* d),
               (perm, n, ids_in, d2_in, ids, d))

