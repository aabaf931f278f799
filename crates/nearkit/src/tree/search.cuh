// MortonTree's searches on the device (tree/search.rs nearest and knn, line for line), shared
// by the kNN, closest-pairs, radius and sharded-index kernels.

#define KNN_STACK NK_TREE_STACK

// A device walk scans nodes of up to this many points whole (at least the tree's leaves): a
// distance costs less there than a level of the walk (dependent loads). The CPU's walk
// descends to the leaves; the answers are the same.
template <typename T>
__device__ __forceinline__ u32 scan_whole(const Tree<T>& t) {
    return max((u32)NK_GPU_RUN, t.leaf_size);
}

// Offers point i to a sorted (d, id) list of capacity k (search::knn's insertion).
template <typename T>
__device__ __forceinline__ void knn_offer(const Tree<T>& t, u32 i, T qx, T qy, T qz, u32 k, T r2, u32 skip, T* hd,
                                          u32* hi, u32& m) {
    u32 pid = t.id[i];
    if (pid == skip) return;
    T pd = dist2(qx, qy, qz, t.x[i], t.y[i], t.z[i]);
    T bd = m == k ? hd[k - 1] : r2;
    u32 bid = m == k ? hi[k - 1] : NO_ID;
    if (!before(pd, pid, bd, bid)) return;
    u32 pos = m < k ? m : k - 1;
    while (pos > 0 && before(pd, pid, hd[pos - 1], hi[pos - 1])) { hd[pos] = hd[pos - 1]; hi[pos] = hi[pos - 1]; pos--; }
    hd[pos] = pd;
    hi[pos] = pid;
    if (m < k) m++;
}

// search::knn: the up-to-k nearest points within r2 (ties included), ascending by
// (squared distance, id), into hd/hi; returns how many were found. `skip`: an id to ignore.
template <typename T>
__device__ u32 knn_search(const Tree<T>& t, T qx, T qy, T qz, u32 k, T r2, u32 skip, T* hd, u32* hi) {
    u32 m = 0;
    if (t.n <= t.leaf_size || t.n == 1) {
        for (u32 i = 0; i < t.n; i++) knn_offer(t, i, qx, qy, qz, k, r2, skip, hd, hi, m);
        return m;
    }
    u32 stack_node[KNN_STACK];
    T stack_d[KNN_STACK];
    int sp = 0;
    stack_node[sp] = 0; stack_d[sp] = box_dist2(t, 0, qx, qy, qz); sp++;
    while (sp > 0) {
        sp--;
        u32 node = stack_node[sp];
        T bd = m == k ? hd[k - 1] : r2;
        u32 bid = m == k ? hi[k - 1] : NO_ID;
        if (!before(stack_d[sp], t.min_id[node], bd, bid)) continue;
        u32 j = t.other_end[node];
        u32 s = min(node, j), e = max(node, j) + 1;
        if (e - s <= t.leaf_size) {
            for (u32 i = s; i < e; i++) knn_offer(t, i, qx, qy, qz, k, r2, skip, hd, hi, m);
            continue;
        }
        u32 kid[2]; T kd[2];
        int nk = 0;
        u32 cs[2] = {t.left[node], t.right[node]};
        for (int c = 0; c < 2; c++) {
            if (cs[c] & CHILD_POINT) knn_offer(t, cs[c] & ~CHILD_POINT, qx, qy, qz, k, r2, skip, hd, hi, m);
            else { kid[nk] = cs[c]; kd[nk] = box_dist2(t, cs[c], qx, qy, qz); nk++; }
        }
        // Push the far child first so the near one is searched first.
        if (nk == 2 && before(kd[0], t.min_id[kid[0]], kd[1], t.min_id[kid[1]])) {
            stack_node[sp] = kid[1]; stack_d[sp] = kd[1]; sp++;
            stack_node[sp] = kid[0]; stack_d[sp] = kd[0]; sp++;
        } else {
            for (int c = 0; c < nk; c++) { stack_node[sp] = kid[c]; stack_d[sp] = kd[c]; sp++; }
        }
    }
    return m;
}

template <typename T>
__device__ __forceinline__ void scan_points(const Tree<T>& t, u32 s, u32 e, T qx, T qy, T qz, T& bd, u32& bid) {
    for (u32 i = s; i < e; i++) {
        T d = dist2(qx, qy, qz, t.x[i], t.y[i], t.z[i]);
        u32 id = t.id[i];
        if (before(d, id, bd, bid)) { bd = d; bid = id; }
    }
}

// search::nearest — nearest point before (bd, bid) in (squared distance, id) order; nodes of
// up to scan_whole(t) points scanned whole.
template <typename T>
__device__ void nearest_search(const Tree<T>& t, T qx, T qy, T qz, T& bd, u32& bid) {
    u32 run = scan_whole(t);
    if (t.n <= run || t.n == 1) { scan_points(t, 0, t.n, qx, qy, qz, bd, bid); return; }
    if (!before(box_dist2(t, 0, qx, qy, qz), t.min_id[0], bd, bid)) return;
    u32 stack_node[KNN_STACK];
    T stack_d[KNN_STACK];
    int sp = 0;
    u32 node = 0;
    for (;;) {
        u32 j = t.other_end[node];
        u32 s = min(node, j), e = max(node, j) + 1;
        if (e - s <= run) {
            scan_points(t, s, e, qx, qy, qz, bd, bid);
        } else {
            u32 kid[2]; T kd[2]; u32 km[2];
            int nk = 0;
            u32 cs[2] = {t.left[node], t.right[node]};
            for (int c = 0; c < 2; c++) {
                if (cs[c] & CHILD_POINT) {
                    u32 p = cs[c] & ~CHILD_POINT;
                    scan_points(t, p, p + 1, qx, qy, qz, bd, bid);
                } else {
                    kid[nk] = cs[c]; kd[nk] = box_dist2(t, cs[c], qx, qy, qz); km[nk] = t.min_id[cs[c]]; nk++;
                }
            }
            if (nk == 2 && before(kd[1], km[1], kd[0], km[0])) {
                u32 a = kid[0]; kid[0] = kid[1]; kid[1] = a;
                T b = kd[0]; kd[0] = kd[1]; kd[1] = b;
                u32 m = km[0]; km[0] = km[1]; km[1] = m;
            }
            if (nk >= 1 && before(kd[0], km[0], bd, bid)) {
                if (nk == 2 && before(kd[1], km[1], bd, bid)) { stack_node[sp] = kid[1]; stack_d[sp] = kd[1]; sp++; }
                node = kid[0];
                continue;
            }
        }
        bool next = false;
        while (sp > 0) {
            sp--;
            if (before(stack_d[sp], t.min_id[stack_node[sp]], bd, bid)) { node = stack_node[sp]; next = true; break; }
        }
        if (!next) return;
    }
}
