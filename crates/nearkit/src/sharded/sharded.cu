// The sharded index's own steps (sharded/mod.rs has the plan): cutting points by Morton key
// range, and each query's nearest merged over the cells that may hold it. The searches are
// tree/search.cuh's, so every cell answers as the one-GPU index would.

// bins[key >> shift] += 1 for every key.
extern "C" __global__ void key_histogram(const u64* keys, u32 n, u32 shift, u32* bins) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[keys[i] >> shift], 1u);
}

// out[j]: the first position of the sorted `keys` whose key is >= cuts[j].
extern "C" __global__ void lower_bounds(const u64* keys, u32 n, const u64* cuts, u32 m, u32* out) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    u32 lo = 0, hi = n;
    while (lo < hi) {
        u32 mid = lo + (hi - lo) / 2;
        if (keys[mid] < cuts[j]) lo = mid + 1; else hi = mid;
    }
    out[j] = lo;
}

// Points perm[i] to place i, with their global ids (offset + their index).
template <typename T>
__device__ void gather_with_ids_impl(const T* x, const T* y, const T* z, const u32* perm, u32 n, u32 offset, T* sx, T* sy,
                                     T* sz, u32* gid) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 p = perm[i];
    sx[i] = x[p];
    sy[i] = y[p];
    sz[i] = z[p];
    gid[i] = offset + p;
}
NK_INSTANTIATE(gather_with_ids, (const R* x, const R* y, const R* z, const u32* perm, u32 n, u32 offset, R* sx, R* sy, R* sz, u32* gid),
               (x, y, z, perm, n, offset, sx, sy, sz, gid))

// Each query's nearest point of the tree before its best so far (bd, bid), which it replaces;
// with `init`, the best so far is (*r2, NO_ID).
template <typename T>
__device__ void nearest_improve_impl(const T* qx, const T* qy, const T* qz, u32 n, Tree<T> t, const T* r2, u32 init, T* bd,
                                     u32* bid) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T d = init ? *r2 : bd[i];
    u32 id = init ? NO_ID : bid[i];
    nearest_search(t, qx[i], qy[i], qz[i], d, id);
    bd[i] = d;
    bid[i] = id;
}
NK_INSTANTIATE(nearest_improve, (const R* qx, const R* qy, const R* qz, u32 n, Tree<R> t, const R* r2, u32 init, R* bd, u32* bid),
               (qx, qy, qz, n, t, r2, init, bd, bid))

// Lists, per other cell c, the queries whose best so far that cell's box could beat: the test
// nearest_search makes at a tree's root. boxes: cell c's lo x, y, z, hi x, y, z at 6c; min_id[c]
// its smallest id (NO_ID: an empty cell). lists[c * n + slot].
template <typename T>
__device__ void rerun_lists_impl(const T* qx, const T* qy, const T* qz, u32 n, const T* boxes, const u32* min_id, u32 cells,
                                 u32 home, const T* bd, const u32* bid, u32* counts, u32* lists) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T x = qx[i], y = qy[i], z = qz[i];
    for (u32 c = 0; c < cells; c++) {
        if (c == home || min_id[c] == NO_ID) continue;
        const T* b = boxes + 6 * c;
        T gx = t_max(t_max(b[0] - x, x - b[3]), (T)0);
        T gy = t_max(t_max(b[1] - y, y - b[4]), (T)0);
        T gz = t_max(t_max(b[2] - z, z - b[5]), (T)0);
        T d = gx * gx + gy * gy + gz * gz;
        if (before(d, min_id[c], bd[i], bid[i])) {
            u32 slot = atomicAdd(&counts[c], 1u);
            lists[(u64)c * n + slot] = i;
        }
    }
}
NK_INSTANTIATE(rerun_lists, (const R* qx, const R* qy, const R* qz, u32 n, const R* boxes, const u32* min_id, u32 cells, u32 home,
                             const R* bd, const u32* bid, u32* counts, u32* lists),
               (qx, qy, qz, n, boxes, min_id, cells, home, bd, bid, counts, lists))

// The listed queries and their bests, packed for another cell's search.
template <typename T>
__device__ void gather_queries_impl(const T* qx, const T* qy, const T* qz, const T* bd, const u32* bid, const u32* list, u32 n,
                                    T* ox, T* oy, T* oz, T* obd, u32* obid) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    u32 i = list[j];
    ox[j] = qx[i];
    oy[j] = qy[i];
    oz[j] = qz[i];
    obd[j] = bd[i];
    obid[j] = bid[i];
}
NK_INSTANTIATE(gather_queries, (const R* qx, const R* qy, const R* qz, const R* bd, const u32* bid, const u32* list, u32 n,
                                R* ox, R* oy, R* oz, R* obd, u32* obid),
               (qx, qy, qz, bd, bid, list, n, ox, oy, oz, obd, obid))

// Another cell's answers for the listed queries, kept where they come first.
template <typename T>
__device__ void merge_best_impl(const u32* list, u32 n, const T* rbd, const u32* rbid, T* bd, u32* bid) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    u32 i = list[j];
    if (before(rbd[j], rbid[j], bd[i], bid[i])) {
        bd[i] = rbd[j];
        bid[i] = rbid[j];
    }
}
NK_INSTANTIATE(merge_best, (const u32* list, u32 n, const R* rbd, const u32* rbid, R* bd, u32* bid), (list, n, rbd, rbid, bd, bid))

// Answers in sorted order back to the caller's: place perm[i] gets answer i (squared distance,
// +inf where none was found).
template <typename T>
__device__ void scatter_best_impl(const u32* perm, u32 n, const T* bd, const u32* bid, T* od2, u32* oid) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 o = perm[i];
    u32 id = bid[i];
    od2[o] = id == NO_ID ? t_inf<T>() : bd[i];
    oid[o] = id;
}
NK_INSTANTIATE(scatter_best, (const u32* perm, u32 n, const R* bd, const u32* bid, R* od2, u32* oid), (perm, n, bd, bid, od2, oid))

// Every best so far set to (*r2, NO_ID): the queries of a cell that holds no points.
template <typename T>
__device__ void init_best_impl(const T* r2, u32 n, T* bd, u32* bid) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bd[i] = *r2;
    bid[i] = NO_ID;
}
NK_INSTANTIATE(init_best, (const R* r2, u32 n, R* bd, u32* bid), (r2, n, bd, bid))

// Bests back from sorted order to the order the queries came in: place perm[i] gets best i.
template <typename T>
__device__ void unsort_best_impl(const u32* perm, u32 n, const T* bd, const u32* bid, T* obd, u32* obid) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 o = perm[i];
    obd[o] = bd[i];
    obid[o] = bid[i];
}
NK_INSTANTIATE(unsort_best, (const u32* perm, u32 n, const R* bd, const u32* bid, R* obd, u32* obid), (perm, n, bd, bid, obd, obid))

// Each key replaced by its cell: the c with cuts[c] <= key < cuts[c + 1].
extern "C" __global__ void cells_of_keys(u64* keys, u32 n, const u64* cuts, u32 cells) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 k = keys[i];
    u32 lo = 0, hi = cells;  // the last c with cuts[c] <= k
    while (hi - lo > 1) {
        u32 mid = (lo + hi) / 2;
        if (cuts[mid] <= k) lo = mid; else hi = mid;
    }
    keys[i] = lo;
}
