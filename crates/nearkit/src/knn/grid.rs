//! `CandidateGrid`: exact kNN for many queries through per-cell candidate lists.
//!
//! A uniform grid covers the data's bounding box. Each cell keeps every data point that can
//! be among the k nearest of *any* point of the cell. Why that list is complete: for q in the
//! cell (|q - c| <= h, the half diagonal) and p one of q's k nearest, |p - q| <= d_k(q) <=
//! d_k(c) + h, so |p - c| <= d_k(c) + 2h, where d_k(c) is (an upper bound of) the centre's
//! k-th nearest distance. The list is split into `BUCKETS` bands of distance to the centre; a
//! query scans its cell's bands nearest first and skips a band once the band's smallest
//! |p - c| minus |q - c| (a lower bound of |p - q|) exceeds its current k-th distance, so a
//! query far from the data does not scan the whole shell its cell needs.
//!
//! Lists are built coarse to fine (`levels`): a cell's list is a subset of its parent cell's,
//! so each cell filters its parent's list instead of searching the tree, which on the GPU is a
//! warp reading one list. The bound on d_k(c) is `lane_bound`, computed the way the warp does.
//!
//! The answer is the same (d², id) order the tree search gives, so it is exact whichever of
//! the two a query takes; queries outside the grid take the tree. Rounding: every bound here
//! carries a relative margin (`MARGIN`) far above the few ulps by which a computed distance
//! can differ from the true one, and a skip needs a squared bound above `tiny` so that no
//! subnormal arithmetic is trusted.
//!
//! The same grid serves data of more dimensions whose queries lie on a 3-D subspace, such as
//! a mesh's triangles as 6-D boxes searched from points (`GridData`, `Aabb6Data`): the grid is
//! over the 3-D query space, distances are taken in the data's space, and the half diagonal is
//! stretched by the embedding's Lipschitz factor (√2 for (x, y, z, x, y, z)).
//!
//! Layout (structure of arrays, identical on the GPU, entry order included): bucket `b` of
//! cell `c` (x fastest) owns `entry[start[c * BUCKETS + b]..start[c * BUCKETS + b + 1]]`,
//! sorted positions in the data's `MortonTree`, in their parent list's order; `floor` holds
//! each bucket's smallest distance to the centre, rounded down.

use rayon::prelude::*;

use crate::geometry::real::{dist2, Real};
use crate::geometry::vectors::{dist2_nd, Aabb6, MAX_DIM as VEC_DIM};
use crate::knn::vectors::tree::VectorTree;
use crate::tree::MortonTree;

/// The data a grid lists, and the space its 3-D queries are embedded in.
pub trait GridData<T: Real>: Sync {
    /// Data points (positions `0..len` in the data's sorted order).
    fn len(&self) -> usize;
    /// The query-space point `p` in the data's space.
    fn embed(&self, p: [T; 3]) -> [T; VEC_DIM];
    /// Squared distance between two embedded points.
    fn d2_embedded(&self, a: &[T; VEC_DIM], b: &[T; VEC_DIM]) -> T;
    /// Squared distance from an embedded point to the data point at sorted position `i`.
    fn d2(&self, a: &[T; VEC_DIM], i: usize) -> T;
    /// `d2` of each listed position into `out` (cleared first).
    #[inline]
    fn d2_list(&self, a: &[T; VEC_DIM], list: &[u32], out: &mut Vec<T>) {
        out.clear();
        out.extend(list.iter().map(|&i| self.d2(a, i as usize)));
    }
    /// The listed points as columns (`cols[d * list.len() + j]`: axis d of entry j), for
    /// [`d2_cols`](GridData::d2_cols); false (and `cols` untouched) where the data keeps no
    /// columns to copy, and the build then uses `d2_list`.
    fn gather(&self, _list: &[u32], _cols: &mut Vec<T>) -> bool {
        false
    }
    /// `d2` of each of `n` points gathered by `gather` into `out` (cleared first): the same
    /// values, from contiguous columns.
    fn d2_cols(&self, _a: &[T; VEC_DIM], _cols: &[T], _n: usize, _out: &mut Vec<T>) {
        unreachable!("gather returned false")
    }
    /// The id of the data point at sorted position `i`.
    fn id(&self, i: usize) -> u32;
    /// A bound on |embed(a) - embed(b)| / |a - b|.
    fn stretch(&self) -> f64;
}

impl<T: Real> GridData<T> for MortonTree<T> {
    fn len(&self) -> usize {
        MortonTree::len(self)
    }
    #[inline(always)]
    fn embed(&self, p: [T; 3]) -> [T; VEC_DIM] {
        let mut e = [T::ZERO; VEC_DIM];
        e[..3].copy_from_slice(&p);
        e
    }
    #[inline(always)]
    fn d2_embedded(&self, a: &[T; VEC_DIM], b: &[T; VEC_DIM]) -> T {
        dist2(a[0], a[1], a[2], b[0], b[1], b[2])
    }
    #[inline(always)]
    fn d2(&self, a: &[T; VEC_DIM], i: usize) -> T {
        dist2(a[0], a[1], a[2], self.x[i], self.y[i], self.z[i])
    }
    #[inline]
    fn d2_list(&self, a: &[T; VEC_DIM], list: &[u32], out: &mut Vec<T>) {
        // Local slices: the stores into `out` cannot then make the compiler reload the
        // coordinate arrays' addresses for every entry.
        let (x, y, z) = (&self.x[..], &self.y[..], &self.z[..]);
        out.clear();
        out.resize(list.len(), T::ZERO);
        for (o, &i) in out.iter_mut().zip(list) {
            let i = i as usize;
            *o = dist2(a[0], a[1], a[2], x[i], y[i], z[i]);
        }
    }
    fn gather(&self, list: &[u32], cols: &mut Vec<T>) -> bool {
        cols.clear();
        for c in [&self.x, &self.y, &self.z] {
            cols.extend(list.iter().map(|&i| c[i as usize]));
        }
        true
    }
    #[inline]
    fn d2_cols(&self, a: &[T; VEC_DIM], cols: &[T], n: usize, out: &mut Vec<T>) {
        out.clear();
        out.resize(n, T::ZERO);
        d2_columns(a, &cols[..n], &cols[n..2 * n], &cols[2 * n..3 * n], out);
    }
    #[inline(always)]
    fn id(&self, i: usize) -> u32 {
        self.id[i]
    }
    fn stretch(&self) -> f64 {
        1.0
    }
}

/// `out[j] = dist2(a, (x[j], y[j], z[j]))`, in vector lanes (AVX2 where the CPU has it): the
/// same operations in each lane, so the same values.
#[inline]
fn d2_columns<T: Real>(a: &[T; VEC_DIM], x: &[T], y: &[T], z: &[T], out: &mut [T]) {
    #[inline(always)]
    fn each<T: Real>(a: &[T; VEC_DIM], x: &[T], y: &[T], z: &[T], out: &mut [T]) {
        for (j, o) in out.iter_mut().enumerate() {
            *o = dist2(a[0], a[1], a[2], x[j], y[j], z[j]);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Real>(a: &[T; VEC_DIM], x: &[T], y: &[T], z: &[T], out: &mut [T]) {
            each(a, x, y, z, out)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(a, x, y, z, out) };
    }
    each(a, x, y, z, out)
}

/// |E(a) - E(b)| / |a - b| of a triangle-box query embedding E (a hair over √2 for min-max).
pub fn aabb6_stretch(e: Aabb6) -> f64 {
    match e {
        Aabb6::MinMax => 2f64.sqrt() * (1.0 + 1e-6),
        Aabb6::MinExtent => 1.0,
    }
}

/// 6-D data (any vectors; a mesh's triangles as boxes in practice) searched from 3-D points
/// embedded as `Aabb6` says: (x, y, z, x, y, z) or (x, y, z, 0, 0, 0).
pub struct Aabb6Data<'a, T> {
    pub tree: &'a VectorTree<T>,
    pub embedding: Aabb6,
}

impl<T: Real> GridData<T> for Aabb6Data<'_, T> {
    fn len(&self) -> usize {
        self.tree.len()
    }
    #[inline(always)]
    fn embed(&self, p: [T; 3]) -> [T; VEC_DIM] {
        let mut e = [T::ZERO; VEC_DIM];
        e[..3].copy_from_slice(&p);
        if self.embedding == Aabb6::MinMax {
            e[3..6].copy_from_slice(&p);
        }
        e
    }
    #[inline(always)]
    fn d2_embedded(&self, a: &[T; VEC_DIM], b: &[T; VEC_DIM]) -> T {
        dist2_nd(6, a, b)
    }
    #[inline(always)]
    fn d2(&self, a: &[T; VEC_DIM], i: usize) -> T {
        let c = &self.tree.cols;
        let v = [c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i], T::ZERO, T::ZERO];
        dist2_nd(6, a, &v)
    }
    #[inline(always)]
    fn id(&self, i: usize) -> u32 {
        self.tree.ids[i]
    }
    fn stretch(&self) -> f64 {
        aabb6_stretch(self.embedding)
    }
}

/// Largest k the grid serves; beyond it lists grow long and the tree search is used.
pub const GRID_MAX_K: usize = 32;

/// Relative margin on every bound. Computed distances are within a few ulps of the truth
/// (2^-24 ≈ 6e-8 in f32), so 1e-5 is ample and costs nothing measurable.
pub const MARGIN: f64 = 1e-5;

/// Longest grid side in cells.
const MAX_DIM: u32 = 1024;

/// Smallest squared bound trusted to stop a scan (far above subnormals).
pub fn tiny<T: Real>() -> T {
    T::from_f64(if T::NAME == "f32" { 1e-30 } else { 1e-290 })
}

/// Cell geometry. `half_diag` is inflated a little so that a query whose computed cell index
/// rounded across a boundary still counts as inside; `locate` checks it per query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridFrame<T> {
    pub origin: [T; 3],
    pub cell: T,
    pub inv_cell: T,
    pub dims: [u32; 3],
    /// Half the cell diagonal (inflated), times `stretch`: in the data's space.
    pub half_diag: T,
    /// The embedding's stretch (`GridData::stretch`); 1 for 3-D data.
    pub stretch: f64,
}

impl<T: Real> GridFrame<T> {
    /// About `target_cells` cubic cells over the box `lo..hi`; `None` when the box is
    /// degenerate or its scale is outside what the margins cover (the tree handles those).
    pub fn plan(lo: [T; 3], hi: [T; 3], target_cells: usize) -> Option<Self> {
        Self::plan_stretched(lo, hi, target_cells, 1.0)
    }

    /// `plan` for data whose queries are embedded with the given stretch.
    pub fn plan_stretched(lo: [T; 3], hi: [T; 3], target_cells: usize, stretch: f64) -> Option<Self> {
        let ext: [f64; 3] = std::array::from_fn(|d| hi[d].to_f64() - lo[d].to_f64());
        let emax = ext[0].max(ext[1]).max(ext[2]);
        let huge = if T::NAME == "f32" { 1e15 } else { 1e150 };
        if !(emax > 0.0 && emax < huge) || target_cells == 0 {
            return None;
        }
        // Flat data (a plane) still gets cells of sensible size across its thin axis.
        let vol: f64 = ext.iter().map(|e| e.max(emax / 64.0)).product();
        let cell = (vol / target_cells as f64).cbrt();
        let tiny_cell = if T::NAME == "f32" { 1e-12 } else { 1e-140 };
        let sizeable = cell > tiny_cell * emax.max(1.0);
        if !sizeable {
            return None;
        }
        let dims: [u32; 3] = std::array::from_fn(|d| ((ext[d] / cell).ceil() as u32).clamp(1, MAX_DIM));
        let cell = (0..3).map(|d| ext[d] / dims[d] as f64).fold(cell, f64::max);
        // Centre the grid on the data.
        let origin = std::array::from_fn(|d| T::from_f64(lo[d].to_f64() - (dims[d] as f64 * cell - ext[d]) / 2.0));
        let cell_t = T::from_f64(cell);
        let half_diag = T::from_f64(cell * 0.5 * 3f64.sqrt() * 1.01 * stretch);
        Some(Self { origin, cell: cell_t, inv_cell: T::from_f64(1.0 / cell), dims, half_diag, stretch })
    }

    /// The grid both backends use for a batch of `n_queries` over `n_data` points in the box
    /// `lo..hi`, or `None` where one tree search per query is the better plan (`worth_it`) or
    /// the box cannot be gridded.
    pub fn for_queries(
        lo: [T; 3],
        hi: [T; 3],
        n_data: usize,
        n_queries: usize,
        k_list: usize,
        opts: &GridOptions,
    ) -> Option<Self> {
        if !worth_it(n_data, n_queries, k_list, opts) {
            return None;
        }
        Self::plan(lo, hi, target_cells(n_data, n_queries, opts))
    }

    /// The grid for a batch of embedded queries (see `GridData`) spanning `lo..hi` in 3-D.
    pub fn embedded(
        lo: [T; 3],
        hi: [T; 3],
        n_data: usize,
        n_queries: usize,
        k_list: usize,
        stretch: f64,
        opts: &GridOptions,
    ) -> Option<Self> {
        if !worth_it(n_data, n_queries, k_list, opts) {
            return None;
        }
        Self::plan_stretched(lo, hi, target_cells(n_data, n_queries, opts), stretch)
    }

    /// The next coarser level: `LEVEL_FACTOR`³ cells of this one per cell, same origin.
    pub fn parent(&self) -> Self {
        let cell = self.cell.to_f64() * LEVEL_FACTOR as f64;
        Self {
            origin: self.origin,
            cell: T::from_f64(cell),
            inv_cell: T::from_f64(1.0 / cell),
            dims: self.dims.map(|d| d.div_ceil(LEVEL_FACTOR)),
            half_diag: T::from_f64(cell * 0.5 * 3f64.sqrt() * 1.01 * self.stretch),
            stretch: self.stretch,
        }
    }

    /// The cell of the parent level holding cell `c`.
    #[inline(always)]
    pub fn parent_cell(&self, c: usize) -> usize {
        let (dx, dy) = (self.dims[0] as usize, self.dims[1] as usize);
        let f = LEVEL_FACTOR as usize;
        let (px, py) = (dx.div_ceil(f), dy.div_ceil(f));
        (c % dx) / f + px * (((c / dx) % dy) / f + py * ((c / (dx * dy)) / f))
    }

    /// The queries as records (point, index) in the order of the cells that hold them (a
    /// counting sort; within a cell, input order), those outside the grid last: neighbours in
    /// this order scan the same list, and the scan then reads the queries in sequence.
    pub fn sorted_queries<Q: crate::geometry::points::QueryPoints<T> + ?Sized>(&self, queries: &Q) -> Vec<GridCand<T>> {
        let cells = self.cells();
        let mut cell = crate::runtime::cpu::big_vec::<u32>(queries.len());
        cell.par_extend(
            (0..queries.len())
                .into_par_iter()
                .with_min_len(4096)
                .map(|i| self.cell_of(queries.get(i)).map_or(cells as u32, |c| c as u32)),
        );
        // A stable counting sort in parallel: each chunk of queries counts its cells, the
        // chunks' slots follow one another within every cell, then each chunk places its own.
        // A chunk a thread: the offsets below are (chunks × cells), laid out by chunk and
        // filled cell by cell, so more chunks cost more than they balance.
        let chunk = cell.len().div_ceil(rayon::current_num_threads().max(1)).max(1 << 14);
        let counts: Vec<Vec<u32>> = cell
            .par_chunks(chunk)
            .map(|part| {
                let mut h = vec![0u32; cells + 1];
                for &c in part {
                    h[c as usize] += 1;
                }
                h
            })
            .collect();
        let mut base = vec![0u32; counts.len() * (cells + 1)];
        let mut total = 0u32;
        for c in 0..=cells {
            for (j, h) in counts.iter().enumerate() {
                base[j * (cells + 1) + c] = total;
                total += h[c];
            }
        }
        let mut sorted = crate::runtime::cpu::big_vec::<GridCand<T>>(queries.len());
        let at = crate::runtime::cpu::RowPtr(sorted.as_mut_ptr());
        cell.par_chunks(chunk).zip(base.par_chunks_mut(cells + 1)).enumerate().for_each(|(j, (part, next))| {
            for (i, &c) in part.iter().enumerate() {
                let slot = &mut next[c as usize];
                let q = j * chunk + i;
                // SAFETY: every (chunk, cell) pair owns its own run of slots, and the slots
                // cover 0..len exactly once, so every record is written before `set_len`.
                unsafe { at.write(*slot as usize, GridCand { p: queries.get(q), id: q as u32 }) };
                *slot += 1;
            }
        });
        // SAFETY: every slot was written above.
        unsafe { sorted.set_len(queries.len()) };
        sorted
    }

    pub fn cells(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// Centre of cell `c` (the CUDA build computes it with the same operations).
    #[inline(always)]
    pub fn center(&self, c: usize) -> [T; 3] {
        let (dx, dy) = (self.dims[0] as usize, self.dims[1] as usize);
        self.center_at([c % dx, (c / dx) % dy, c / (dx * dy)])
    }

    /// Centre of the cell with integer coordinates `idx`.
    #[inline(always)]
    fn center_at(&self, idx: [usize; 3]) -> [T; 3] {
        std::array::from_fn(|d| self.origin[d] + T::from_f64(idx[d] as f64 + 0.5) * self.cell)
    }

    /// `locate` with |q - centre| measured in `data`'s space (between embedded points).
    #[inline(always)]
    pub fn locate_in<G: GridData<T>>(&self, data: &G, q: [T; 3]) -> Option<(usize, T)> {
        let idx = self.cell_idx(q)?;
        let (qe, ce) = (data.embed(q), data.embed(self.center_at(idx)));
        let e = data.d2_embedded(&qe, &ce).sqrt() * T::from_f64(1.0 + MARGIN);
        (e <= self.half_diag).then_some((self.cell_at(idx), e))
    }

    /// The cell of `q` (clamped at the edges), or `None` when `q` is a cell or more outside.
    #[inline(always)]
    fn cell_of(&self, q: [T; 3]) -> Option<usize> {
        self.cell_idx(q).map(|idx| self.cell_at(idx))
    }

    /// The integer coordinates of `cell_of`.
    #[inline(always)]
    fn cell_idx(&self, q: [T; 3]) -> Option<[usize; 3]> {
        // The cell is floor(t), clamped; floor(t) >= -1 and floor(t) <= n read t >= -1 and
        // t < n + 1, and on t >= 0 truncation is floor, so no floor call is needed (x86-64's
        // baseline has no rounding instruction).
        let mut idx = [0usize; 3];
        for d in 0..3 {
            let t = ((q[d] - self.origin[d]) * self.inv_cell).to_f64();
            let n = self.dims[d] as f64;
            if !(t >= -1.0 && t < n + 1.0) {
                return None;
            }
            idx[d] = (t.max(0.0) as usize).min(self.dims[d] as usize - 1);
        }
        Some(idx)
    }

    #[inline(always)]
    fn cell_at(&self, idx: [usize; 3]) -> usize {
        idx[0] + self.dims[0] as usize * (idx[1] + self.dims[1] as usize * idx[2])
    }

    /// Squared radius of cell `c`'s list: d_k(c) + 2h, capped by the query radius (r + h),
    /// with margins. `dk2`: the centre's k-th nearest squared distance (infinite if fewer).
    #[inline(always)]
    pub fn list_radius2(&self, dk2: T, r2: T) -> T {
        let m = T::from_f64(1.0 + MARGIN);
        let two = T::from_f64(2.0);
        let mut r = (dk2.sqrt() * m + two * self.half_diag) * m;
        let cap = (r2.sqrt() + self.half_diag) * m;
        if cap < r {
            r = cap;
        }
        r * r * m
    }
}

/// Buckets per cell: a cell's list is split by distance to the centre, nearest first, and
/// a query skips a whole bucket when the bucket's smallest distance rules it out.
pub const BUCKETS: usize = 16;

/// Children per parent cell along each axis between the levels of the build.
pub const LEVEL_FACTOR: u32 = 4;

/// How the candidate grid is sized. Tuning only: the answer is the same whatever they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridOptions {
    /// Aim for one cell per this many queries...
    pub queries_per_cell: usize,
    /// ...and at most this many cells per data point.
    pub cells_per_point: f64,
    /// A level of the build with at most this many cells takes its lists from all points.
    pub top_cells: usize,
    /// Past this many data points per cell (more data than the queries can share cells of),
    /// a cell's list is longer than a tree search, which is used instead.
    pub max_points_per_cell: f64,
}

impl Default for GridOptions {
    fn default() -> Self {
        Self { queries_per_cell: 64, cells_per_point: 2.0, top_cells: 4096, max_points_per_cell: 16.0 }
    }
}

/// The build's levels, finest (`frame`) first, each `LEVEL_FACTOR` times coarser.
pub fn levels<T: Real>(frame: GridFrame<T>, opts: &GridOptions) -> Vec<GridFrame<T>> {
    let mut v = vec![frame];
    while v.last().unwrap().cells() > opts.top_cells.max(1) {
        let p = v.last().unwrap().parent();
        v.push(p);
    }
    v
}

/// Lanes of a warp: the GPU build scans a list 32 entries at a time, one per lane.
pub const LANES: usize = 32;

/// An upper bound of the `k`-th smallest of `d2s` (k <= 2 * LANES), computed as the GPU's warp
/// does: entry j goes to lane j % 32, each lane keeps its two smallest, and the bound is the
/// k-th smallest of those 64 (k distinct entries lie within it). Also the smallest of all.
pub fn lane_bound<T: Real>(d2s: &[T], k: usize) -> (T, T) {
    // Branch-free min/max over 32 lanes at a time (the compiler vectorizes it); the same
    // values as "if v < t0 { t1 = t0; t0 = v } else if v < t1 { t1 = v }".
    let mut t0 = [T::INFINITY; LANES];
    let mut t1 = [T::INFINITY; LANES];
    let mut keep = |chunk: &[T]| {
        for (l, &v) in chunk.iter().enumerate() {
            let hi = if v > t0[l] { v } else { t0[l] };
            t1[l] = if hi < t1[l] { hi } else { t1[l] };
            t0[l] = if v < t0[l] { v } else { t0[l] };
        }
    };
    let mut chunks = d2s.chunks_exact(LANES);
    for chunk in &mut chunks {
        keep(chunk);
    }
    keep(chunks.remainder());
    let least = t0.iter().fold(T::INFINITY, |m, &v| if v < m { v } else { m });
    let mut all = [T::INFINITY; 2 * LANES];
    all[..LANES].copy_from_slice(&t0);
    all[LANES..].copy_from_slice(&t1);
    let (_, kth, _) = all.select_nth_unstable_by(k - 1, |a, b| a.partial_cmp(b).unwrap());
    (*kth, least)
}

/// A list entry with its point and id, so that the 3-D scan reads one record per candidate
/// instead of following the entry into the tree's arrays (`GridCand` of candidate_grid.cu).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct GridCand<T> {
    pub p: [T; 3],
    pub id: u32,
}

/// Per-cell candidate lists for one (k, radius): see the module comment. Entries are sorted
/// positions in the data's `MortonTree`, so the lists cost 4 bytes an entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateGrid<T> {
    pub frame: GridFrame<T>,
    /// Bucket `b` of cell `c` is `entry[start[c * BUCKETS + b]..start[c * BUCKETS + b + 1]]`.
    pub start: Vec<u32>,
    /// Lower bound of the distance from the cell's centre to every point of the bucket
    /// (infinite when empty).
    pub floor: Vec<T>,
    pub entry: Vec<u32>,
}

/// Cells to aim for: enough that a cell's list is short, no more than the queries can use.
pub fn target_cells(n_data: usize, n_queries: usize, opts: &GridOptions) -> usize {
    let per_query = opts.queries_per_cell.max(1);
    ((n_queries / per_query) as f64).min(n_data as f64 * opts.cells_per_point).min((1 << 22) as f64) as usize
}

/// Whether the grid pays for itself over one tree search per query.
pub fn worth_it(n_data: usize, n_queries: usize, k: usize, opts: &GridOptions) -> bool {
    let cells = target_cells(n_data, n_queries, opts);
    k <= GRID_MAX_K && n_data >= 64 && cells >= 512 && n_data as f64 <= cells as f64 * opts.max_points_per_cell
}

/// A cell's kept entries while its list is built: ids, squared distances, buckets.
#[derive(Default)]
struct Kept<T> {
    ids: Vec<u32>,
    d2: Vec<T>,
    bucket: Vec<u8>,
}

/// The bucket of every entry of `d2s` (squared distances from a centre whose list spans
/// `d_lo..=d_hi`), into `out`: `BUCKETS` equal steps of distance (grid_bucket of
/// grid_levels.cuh, the same values), in a loop the compiler vectorizes (AVX2 where the CPU
/// has it).
fn buckets_of<T: Real>(d2s: &[T], d_lo: T, d_hi: T, out: &mut Vec<u8>) {
    #[inline(always)]
    fn each<T: Real>(d2s: &[T], d_lo: T, d_hi: T, out: &mut [u8]) {
        let (span, n) = (d_hi - d_lo, T::from_f64(BUCKETS as f64));
        for (o, &d2) in out.iter_mut().zip(d2s) {
            let t = ((d2.sqrt() - d_lo) / span * n).to_f64();
            *o = if t >= 0.0 { t.min((BUCKETS - 1) as f64) as u8 } else { 0 };
        }
    }
    out.resize(d2s.len(), 0);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Real>(d2s: &[T], d_lo: T, d_hi: T, out: &mut [u8]) {
            each(d2s, d_lo, d_hi, out)
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(d2s, d_lo, d_hi, out) };
    }
    each(d2s, d_lo, d_hi, out)
}

impl<T: Real> CandidateGrid<T> {
    /// The grid for a batch of `n_queries` (built on the CPU), or `None` as
    /// `frame_for_queries` says. (The search builds it beside the queries' order; tests
    /// build it alone.)
    #[cfg(feature = "test-hooks")]
    pub fn for_queries(
        tree: &MortonTree<T>,
        n_queries: usize,
        k_list: usize,
        r2: T,
        opts: &GridOptions,
    ) -> Option<Self> {
        let frame = Self::frame_for_queries(tree, n_queries, k_list, opts)?;
        Some(Self::build(tree, frame, k_list, r2, opts))
    }

    /// The cells of the grid for a batch of `n_queries`, without its lists: `None` where one
    /// tree search per query is the better plan (`worth_it`) or the data's box cannot be
    /// gridded.
    pub fn frame_for_queries(
        tree: &MortonTree<T>,
        n_queries: usize,
        k_list: usize,
        opts: &GridOptions,
    ) -> Option<GridFrame<T>> {
        // A tree of one leaf has no internal node, hence no root box: too small for a grid anyway.
        if !worth_it(tree.len(), n_queries, k_list, opts) || tree.lo[0].is_empty() {
            return None;
        }
        let lo = [tree.lo[0][0], tree.lo[1][0], tree.lo[2][0]];
        let hi = [tree.hi[0][0], tree.hi[1][0], tree.hi[2][0]];
        GridFrame::for_queries(lo, hi, tree.len(), n_queries, k_list, opts)
    }

    /// The grid for a batch of `n_queries` embedded queries whose 3-D coordinates span
    /// `lo..hi` (built on the CPU), or `None` as in `for_queries`.
    pub fn for_embedded<G: GridData<T>>(
        data: &G,
        lo: [T; 3],
        hi: [T; 3],
        n_queries: usize,
        k_list: usize,
        r2: T,
        opts: &GridOptions,
    ) -> Option<Self> {
        let frame = GridFrame::embedded(lo, hi, data.len(), n_queries, k_list, data.stretch(), opts)?;
        Some(Self::build(data, frame, k_list, r2, opts))
    }

    /// Lists for the `k_list` nearest within squared radius `r2` (`k_list` counts a skipped
    /// self as one more), on the CPU. Built coarse to fine (see `levels`): each cell filters
    /// its parent's list, which holds every point the cell can need.
    pub fn build<G: GridData<T>>(data: &G, frame: GridFrame<T>, k_list: usize, r2: T, opts: &GridOptions) -> Self {
        let mut grid: Option<Self> = None;
        for f in levels(frame, opts).into_iter().rev() {
            grid = Some(Self::build_level(data, f, grid.as_ref(), k_list, r2));
        }
        grid.expect("at least one level")
    }

    fn build_level<G: GridData<T>>(data: &G, frame: GridFrame<T>, parent: Option<&Self>, k_list: usize, r2: T) -> Self {
        let shrink = T::from_f64(1.0 - MARGIN);
        let all: Vec<u32> = if parent.is_none() { (0..data.len() as u32).collect() } else { Vec::new() };
        // The cells grouped by parent (the top level: one group), so that each group reads
        // its parent's list once, as columns, for all its cells.
        let ncells = frame.cells();
        let groups: Vec<(usize, Vec<usize>)> = match parent {
            None => vec![(0, (0..ncells).collect())],
            Some(p) => {
                let mut by: Vec<Vec<usize>> = vec![Vec::new(); p.frame.cells()];
                for c in 0..ncells {
                    by[frame.parent_cell(c)].push(c);
                }
                by.into_iter().enumerate().filter(|(_, v)| !v.is_empty()).collect()
            }
        };
        // A group's lists one after another in one vector, and per cell: the cell, where its
        // list starts there, its bucket counts and floors (one allocation a group, not a cell:
        // per-cell vectors took milliseconds to place and free on 16 cores).
        type Cell<T> = (usize, usize, [u32; BUCKETS], [T; BUCKETS]);
        let done: Vec<(Vec<u32>, Vec<Cell<T>>)> = groups
            .par_iter()
            .with_min_len(1)
            .map(|(pc, cells)| {
                let list: &[u32] = match parent {
                    None => &all,
                    Some(p) => &p.entry[p.start[pc * BUCKETS] as usize..p.start[(pc + 1) * BUCKETS] as usize],
                };
                let mut cols = Vec::new();
                let packed = data.gather(list, &mut cols);
                let (mut d2s, mut sel) = (Vec::new(), Kept::default());
                // Cell c's list, appended to `kept`.
                let each = |&c: &usize, d2s: &mut Vec<T>, sel: &mut Kept<T>, kept: &mut Vec<u32>| {
                    let q = data.embed(frame.center(c));
                    if packed {
                        data.d2_cols(&q, &cols, list.len(), d2s);
                    } else {
                        data.d2_list(&q, list, d2s);
                    }
                    let (dk2, d1) = lane_bound(d2s, k_list);
                    let r_list2 = frame.list_radius2(dk2, r2);
                    let (d_lo, d_hi) = (d1.sqrt(), r_list2.sqrt());
                    // The kept entries with their buckets, then a counting sort into one list
                    // that keeps the parent's order within a bucket. The floor is taken on
                    // squared distances: sqrt and the shrink are monotone, so it is the same
                    // value as the smallest of d * shrink.
                    // Few entries are kept: their ids and squared distances gathered eight at
                    // a time (a branch-free test, then branch-free appends), then their buckets
                    // in one vector pass (the roots and divisions were most of a cell's time).
                    sel.ids.clear();
                    sel.d2.clear();
                    for (ids, d2s) in list.chunks(8).zip(d2s.chunks(8)) {
                        if !d2s.iter().fold(false, |any, &d2| any | (d2 <= r_list2)) {
                            continue;
                        }
                        let n = sel.ids.len();
                        sel.ids.resize(n + ids.len(), 0);
                        sel.d2.resize(n + ids.len(), T::ZERO);
                        let mut m = n;
                        for (&i, &d2) in ids.iter().zip(d2s) {
                            sel.ids[m] = i;
                            sel.d2[m] = d2;
                            m += usize::from(d2 <= r_list2);
                        }
                        sel.ids.truncate(m);
                        sel.d2.truncate(m);
                    }
                    buckets_of(&sel.d2, d_lo, d_hi, &mut sel.bucket);
                    // A counting sort into one list that keeps the parent's order within a
                    // bucket. The floor is taken on squared distances: sqrt and the shrink are
                    // monotone, so it is the same value as the smallest of d * shrink.
                    let mut count = [0u32; BUCKETS];
                    let mut least = [T::INFINITY; BUCKETS];
                    for (&b, &d2) in sel.bucket.iter().zip(&sel.d2) {
                        let b = b as usize;
                        count[b] += 1;
                        least[b] = if d2 < least[b] { d2 } else { least[b] };
                    }
                    let mut at = [0u32; BUCKETS];
                    for b in 1..BUCKETS {
                        at[b] = at[b - 1] + count[b - 1];
                    }
                    let first = kept.len();
                    kept.resize(first + sel.ids.len(), 0);
                    for (&i, &b) in sel.ids.iter().zip(&sel.bucket) {
                        kept[first + at[b as usize] as usize] = i;
                        at[b as usize] += 1;
                    }
                    let floor = std::array::from_fn(|b| least[b].sqrt() * shrink);
                    (c, first, count, floor)
                };
                if parent.is_none() {
                    // One group of every cell: its cells in parallel, each its own list.
                    let lists: Vec<(Vec<u32>, Cell<T>)> = cells
                        .par_iter()
                        .with_min_len(4)
                        .map_init(
                            || (Vec::new(), Kept::default()),
                            |(d2s, sel), c| {
                                let mut kept = Vec::new();
                                let cell = each(c, d2s, sel, &mut kept);
                                (kept, cell)
                            },
                        )
                        .collect();
                    let mut kept = Vec::with_capacity(lists.iter().map(|l| l.0.len()).sum());
                    let mut out = Vec::with_capacity(lists.len());
                    for (list, (c, _, count, floor)) in lists {
                        out.push((c, kept.len(), count, floor));
                        kept.extend_from_slice(&list);
                    }
                    (kept, out)
                } else {
                    let mut kept = Vec::new();
                    let out = cells.iter().map(|c| each(c, &mut d2s, &mut sel, &mut kept)).collect();
                    (kept, out)
                }
            })
            .collect();
        // Where each cell's list lies: (group, place in the group's cells). Each group writes
        // its own cells' places.
        let mut place = vec![(u32::MAX, 0u32); ncells];
        let places = crate::runtime::cpu::RowPtr(place.as_mut_ptr());
        done.par_iter().enumerate().for_each(|(g, (_, cells))| {
            for (i, &(c, ..)) in cells.iter().enumerate() {
                // SAFETY: c < ncells, and every cell belongs to one group.
                unsafe { places.write(c, (g as u32, i as u32)) };
            }
        });
        let cell = |c: usize| -> Option<&Cell<T>> {
            let (g, i) = place[c];
            done.get(g as usize).map(|d| &d.1[i as usize])
        };
        // Lay the lists out cell after cell: each cell's length, their running sum, then every
        // cell writes its offsets and floors and copies its own list into its span, in
        // parallel. A cell no group had keeps an empty list.
        const GRAIN: usize = 256;
        let mut first_of = vec![0usize; ncells + 1];
        first_of[1..].par_chunks_mut(GRAIN).enumerate().for_each(|(j, out)| {
            for (i, o) in out.iter_mut().enumerate() {
                *o = cell(j * GRAIN + i).map_or(0, |l| l.2.iter().map(|&n| n as usize).sum());
            }
        });
        for c in 0..ncells {
            first_of[c + 1] += first_of[c];
        }
        let total = first_of[ncells];
        assert!(total < u32::MAX as usize, "candidate lists exceed 2^32 entries");
        let mut start = vec![0u32; ncells * BUCKETS + 1];
        let mut floor = vec![T::INFINITY; ncells * BUCKETS];
        start[1..].par_chunks_mut(BUCKETS).zip(floor.par_chunks_mut(BUCKETS)).enumerate().with_min_len(GRAIN).for_each(
            |(c, (starts, floors))| {
                if let Some(&(_, _, lens, fl)) = cell(c) {
                    let mut at = first_of[c];
                    for b in 0..BUCKETS {
                        at += lens[b] as usize;
                        starts[b] = at as u32;
                    }
                    floors.copy_from_slice(&fl);
                } else {
                    starts.fill(first_of[c + 1] as u32);
                }
            },
        );
        let mut entry = crate::runtime::cpu::big_vec::<u32>(total);
        let at = crate::runtime::cpu::RowPtr(entry.as_mut_ptr());
        (0..ncells).into_par_iter().with_min_len(64).for_each(|c| {
            if let Some(&(_, first, ..)) = cell(c) {
                let (s, e) = (start[c * BUCKETS] as usize, start[(c + 1) * BUCKETS] as usize);
                let list = &done[place[c].0 as usize].0[first..first + (e - s)];
                // SAFETY: cell c owns entry[s..e], of its list's length.
                unsafe { at.copy_from(s, list) };
            }
        });
        // SAFETY: the cells' spans tile 0..total, and each was written above.
        unsafe { entry.set_len(total) };
        Self { frame, start, floor, entry }
    }

    /// Every entry's record, in list order, for `knn_packed` (the grid of `tree`).
    pub fn packed(&self, tree: &MortonTree<T>) -> Vec<GridCand<T>> {
        let mut cand = crate::runtime::cpu::big_vec(self.entry.len());
        cand.par_extend(self.entry.par_iter().with_min_len(4096).map(|&i| {
            let i = i as usize;
            GridCand { p: [tree.x[i], tree.y[i], tree.z[i]], id: tree.id[i] }
        }));
        cand
    }

    /// `knn` for the 3-D grid of a `MortonTree`, reading `cand` (`packed`) instead of the
    /// tree: the same answer. (`grid_top8::knn_packed` is the same with the top k in AVX2
    /// registers where it can.)
    #[inline]
    pub fn knn_packed(
        &self,
        tree: &MortonTree<T>,
        cand: &[GridCand<T>],
        q: [T; 3],
        r2: T,
        skip: u32,
        best: &mut [(T, u32)],
    ) -> bool {
        let Some((c, e)) = self.frame.locate_in(tree, q) else {
            return false;
        };
        self.scan(c, e, r2, skip, best, |range, top| {
            #[cfg(target_arch = "x86_64")]
            if let Some((cand, top)) = as_f32(cand, top) {
                let q = q.map(|v| v.to_f64() as f32);
                // SAFETY: SSE2 is part of x86-64's baseline.
                unsafe { offer_f32x4(&cand[range], q, top) };
                return;
            }
            for r in &cand[range] {
                top.offer(dist2(q[0], q[1], q[2], r.p[0], r.p[1], r.p[2]), r.id);
            }
        });
        true
    }

    /// q's up-to-k nearest within `r2` (ties by smaller id), ignoring id `skip`, into `best`
    /// (length k, ascending; unfilled slots stay `(r2, NO_ID)`). `false` when q is outside the
    /// grid, and `best` is untouched. `tree` is the one the grid was built from.
    #[inline]
    pub fn knn<G: GridData<T>>(&self, data: &G, q: [T; 3], r2: T, skip: u32, best: &mut [(T, u32)]) -> bool {
        let Some((c, e)) = self.frame.locate_in(data, q) else {
            return false;
        };
        let q = data.embed(q);
        self.scan(c, e, r2, skip, best, |range, top| {
            for &i in &self.entry[range] {
                top.offer(data.d2(&q, i as usize), data.id(i as usize));
            }
        });
        true
    }

    /// Cell `c`'s scan for a query at `e` from its centre: `visit(range, top)` offers list
    /// entries `range` (a bucket) to `top`. Fills `best` as `knn` says.
    #[inline(always)]
    fn scan(
        &self,
        c: usize,
        e: T,
        r2: T,
        skip: u32,
        best: &mut [(T, u32)],
        mut visit: impl FnMut(std::ops::Range<usize>, &mut TopK<'_, T>),
    ) {
        best.fill((r2, crate::geometry::points::NO_ID));
        let mut top = TopK { bound: r2, bound_id: crate::geometry::points::NO_ID, skip, filled: 0, best };
        let (m, tiny) = (T::from_f64(1.0 + MARGIN), tiny::<T>());
        for b in c * BUCKETS..(c + 1) * BUCKETS {
            let g = self.floor[b] - e;
            let g2 = g * g;
            if g > T::ZERO && g2 > tiny && g2 > top.bound * m {
                // The floors of non-empty buckets grow bucket by bucket, so past a non-empty
                // bucket ruled out, none can help; empty ones (infinite floor) are skipped.
                if self.floor[b] == T::INFINITY {
                    continue;
                }
                break;
            }
            visit(self.start[b] as usize..self.start[b + 1] as usize, &mut top);
        }
    }
}

/// The k best (squared distance, id) so far, ascending, ties by smaller id, as a scan fills
/// it; `bound` is the k-th.
pub struct TopK<'a, T> {
    bound: T,
    bound_id: u32,
    skip: u32,
    /// Slots taken so far; the others hold `(r2, NO_ID)`, and the bound is the radius's
    /// until every slot is taken.
    filled: usize,
    best: &'a mut [(T, u32)],
}

impl<T: Real> TopK<'_, T> {
    /// Takes (d, id) in if it beats the k-th (and is not the skipped id).
    #[inline(always)]
    pub fn offer(&mut self, d: T, id: u32) {
        if id == self.skip || !(d < self.bound || (d == self.bound && id < self.bound_id)) {
            return;
        }
        let best = &mut *self.best;
        let k = best.len();
        // A new entry enters at the end of the taken slots (the first k offers shift only
        // past those, not past every empty slot), then moves up past the larger ones.
        let mut pos = self.filled.min(k - 1);
        self.filled += usize::from(self.filled < k);
        // SAFETY: 0 <= pos - 1 < pos <= k - 1 while the loop runs.
        unsafe {
            while pos > 0 {
                let above = *best.get_unchecked(pos - 1);
                if !(d < above.0 || (d == above.0 && id < above.1)) {
                    break;
                }
                *best.get_unchecked_mut(pos) = above;
                pos -= 1;
            }
            *best.get_unchecked_mut(pos) = (d, id);
        }
        if self.filled == k {
            (self.bound, self.bound_id) = best[k - 1];
        }
    }
}

/// `cand` and `top` as f32 when T is f32 (for the SSE scan).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn as_f32<'t, 'a, T: Real>(
    cand: &[GridCand<T>],
    top: &'t mut TopK<'a, T>,
) -> Option<(&'t [GridCand<f32>], &'t mut TopK<'a, f32>)> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return None;
    }
    // SAFETY: T is f32, so these are the same types.
    unsafe {
        Some((
            &*(cand as *const [GridCand<T>] as *const [GridCand<f32>]),
            &mut *(top as *mut TopK<'a, T> as *mut TopK<'a, f32>),
        ))
    }
}

/// Offers `cand` to `top`, four records at a time: their distances in one SSE register
/// (the same operations as `dist2`, so the same values), and only those within the bound go
/// on to `offer`, which breaks ties exactly.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn offer_f32x4(cand: &[GridCand<f32>], q: [f32; 3], top: &mut TopK<'_, f32>) {
    use std::arch::x86_64::*;
    let (qx, qy, qz) = (_mm_set1_ps(q[0]), _mm_set1_ps(q[1]), _mm_set1_ps(q[2]));
    let mut quads = cand.chunks_exact(4);
    for quad in &mut quads {
        let p = quad.as_ptr() as *const f32;
        let (r0, r1, r2, r3) =
            (_mm_loadu_ps(p), _mm_loadu_ps(p.add(4)), _mm_loadu_ps(p.add(8)), _mm_loadu_ps(p.add(12)));
        // Transpose four (x, y, z, id) records into x, y and z lanes.
        let (t0, t1) = (_mm_unpacklo_ps(r0, r1), _mm_unpacklo_ps(r2, r3));
        let (t2, t3) = (_mm_unpackhi_ps(r0, r1), _mm_unpackhi_ps(r2, r3));
        let dx = _mm_sub_ps(qx, _mm_movelh_ps(t0, t1));
        let dy = _mm_sub_ps(qy, _mm_movehl_ps(t1, t0));
        let dz = _mm_sub_ps(qz, _mm_movelh_ps(t2, t3));
        let d = _mm_add_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy)), _mm_mul_ps(dz, dz));
        let mut hit = _mm_movemask_ps(_mm_cmple_ps(d, _mm_set1_ps(top.bound)));
        if hit != 0 {
            let mut ds = [0f32; 4];
            _mm_storeu_ps(ds.as_mut_ptr(), d);
            while hit != 0 {
                let l = hit.trailing_zeros() as usize;
                top.offer(ds[l], quad[l].id);
                hit &= hit - 1;
            }
        }
    }
    for r in quads.remainder() {
        top.offer(dist2(q[0], q[1], q[2], r.p[0], r.p[1], r.p[2]), r.id);
    }
}
