// Single-pass exclusive scan by decoupled look-back (Merrill & Garland, 2016): each block
// takes the next tile by ticket (state[0]), publishes its tile's sum, learns the sum of all
// tiles before it from its predecessors' published words, and scans its tile from there. One
// launch instead of three. state[2 + t] holds flag << 32 | value: AGGREGATE, the tile's own
// sum; PREFIX, the sum of tiles 0..=t. `state` (2 + tiles words) must be zero before the
// launch, and is left zero after it: the last block to finish (counted in state[1]) clears
// it, so a buffer serves scan after scan without a memset.
#define SCAN_AGGREGATE 1ull
#define SCAN_PREFIX 2ull

// Warp-wide (every lane calls it): tile t's part of a decoupled look-back. Publishes the tile's
// `total` in word[t] and returns the sum of the tiles before it, read from its predecessors'
// words 32 at a time, nearest in lane 0, until one of them has its prefix; tiles before the
// first count as a prefix of 0. word[] must be zero before the first tile starts.
__device__ u32 lookback_before(volatile unsigned long long* word, u32 t, u32 total) {
    u32 lane = threadIdx.x % 32;
    u32 before = 0;
    if (t > 0) {
        if (lane == 0) word[t] = (SCAN_AGGREGATE << 32) | total;
        for (long long top = (long long)t - 1;; top -= 32) {
            long long j = top - (long long)lane;
            unsigned long long w = j >= 0 ? word[j] : SCAN_PREFIX << 32;
            while (__any_sync(0xffffffffu, (w >> 32) == 0))
                if ((w >> 32) == 0) w = word[j];
            u32 prefixes = __ballot_sync(0xffffffffu, (w >> 32) == SCAN_PREFIX);
            u32 last = prefixes ? __ffs(prefixes) - 1 : 31;
            u32 v = lane <= last ? (u32)w : 0;
            for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
            before += v;
            if (prefixes) break;
        }
    }
    if (lane == 0) word[t] = (SCAN_PREFIX << 32) | (before + total);
    return before;
}
