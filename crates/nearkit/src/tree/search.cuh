// MortonTree's k-nearest search on the device (tree/search.rs knn, line for line), shared by
// the kNN and the closest-pairs kernels.

#define KNN_STACK NK_TREE_STACK

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
