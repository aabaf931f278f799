//! `PointIndex`: a 3-D point set indexed once, on the CPU or a GPU, for nearest-neighbour,
//! k-nearest and closest-pair queries from any number of query sets.

use std::mem::MaybeUninit;

use crate::device::{Device, Engine};
use crate::error::{Error, Result, Role};
use crate::geometry::points::{Points, QueryPoints};
use crate::geometry::radius2;
use crate::geometry::real::Real;
use crate::geometry::scale::Scale;
use crate::knn::cuda::DeviceKnn;
use crate::knn::{knn_limits, Knn, KnnBuffer, KnnOptions};
use crate::pairs::cuda::DeviceNearest;
use crate::pairs::{Nearest, Pair, PairsOptions};
use crate::radius::cuda::DeviceWithin;
use crate::radius::{RadiusOptions, Within};
use crate::runtime::cpu::{check_room, write_mapped};
use crate::runtime::cuda::memory::PointSource;
use crate::runtime::cuda::{DevicePoints, Gpu};
use crate::sharded::{nearest_rows_on_gpu, NearestRows};
use crate::tree::cuda::{BuildInput, DeviceTree};
use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE, MAX_TREE_POINTS};

/// A point set indexed for exact proximity queries: built once on the engine's device (a
/// Morton-ordered radix tree, the same bits on the CPU and on the GPU), then queried many
/// times. Point ids are the 0-based rows of the indexed set; results break distance ties by
/// the smaller id, and are bitwise the same on every device. Coordinates of any magnitude
/// are compared exactly: the index scales them by a power of two where squared distances
/// would overflow or underflow, or says why it cannot.
///
/// ```
/// use nearkit::{Device, KnnOptions, PairsOptions, PointIndex, Points};
/// let data = Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [5.0, 5.0, 5.0]]);
/// let index = PointIndex::build(&data, Device::Cpu).unwrap();
/// let queries = Points::from_rows(&[[0.9f32, 0.1, 0.0], [4.0, 5.0, 5.0]]);
///
/// let nn = index.nearest(&queries, None).unwrap();
/// assert_eq!(nn.b, [1, 2]);
///
/// let knn = index.knn(&queries, &KnnOptions::k(2)).unwrap();
/// assert_eq!(knn.ids, [1, 0, 2, 1]); // row-major: query 0's two, then query 1's
///
/// let pairs = index.closest_pairs(&queries, &PairsOptions::k(1)).unwrap();
/// assert_eq!((pairs[0].a, pairs[0].b), (0, 1));
/// ```
pub struct PointIndex<T: Real> {
    engine: Engine,
    len: usize,
    tree: Tree<T>,
    /// What the tree's coordinates are multiplied by.
    scale: Scale,
}

enum Tree<T> {
    Cpu(Box<MortonTree<T>>),
    Cuda(Box<DeviceTree<T>>),
}

impl<T: Real> PointIndex<T> {
    /// Indexes `points` on the engine's device.
    pub fn new(points: &Points<T>, engine: &Engine) -> Result<Self> {
        let mut phases = crate::runtime::profile::Phases::new("point index", engine.options().profile);
        if let (Some(gpu), true) = (engine.gpu(), points.len() <= MAX_TREE_POINTS) {
            // Checked on their way up (the same checks and errors as `validate`), so that the
            // host makes one pass over them, not two.
            let _busy = gpu.lock();
            let (up, found) = DevicePoints::upload_checked(gpu, points, Role::Data)?;
            let scale = Scale::for_points::<T>(found, Role::Data)?;
            phases.mark_after("checked and up", || gpu.synchronize())?;
            let up = if scale.is_identity() { up } else { DevicePoints::upload(gpu, &scale.points(points))? };
            // The unsorted copy is freed as soon as the tree has gathered it.
            let tree = DeviceTree::build_from(gpu, BuildInput::Owned(up))?;
            phases.mark_after("tree built", || gpu.synchronize())?;
            phases.report();
            return Ok(Self { engine: engine.clone(), len: points.len(), tree: Tree::Cuda(Box::new(tree)), scale });
        }
        let scale = Scale::for_points::<T>(points.validate(Role::Data)?, Role::Data)?;
        check_size(points.len())?;
        let points = &*scale.points(points);
        phases.mark("checked");
        let tree = match engine.gpu() {
            None => Tree::Cpu(Box::new(MortonTree::build(points, DEFAULT_LEAF_SIZE))),
            Some(gpu) => {
                let _busy = gpu.lock();
                let up = DevicePoints::upload(gpu, points)?;
                phases.mark_after("up", || gpu.synchronize())?;
                // The unsorted copy is freed as soon as the tree has gathered it.
                let tree = DeviceTree::build_from(gpu, BuildInput::Owned(up))?;
                phases.mark_after("tree built", || gpu.synchronize())?;
                Tree::Cuda(Box::new(tree))
            }
        };
        phases.report();
        Ok(Self { engine: engine.clone(), len: points.len(), tree, scale })
    }

    /// Indexes `points` on `device` (see [`Engine::open`]).
    pub fn build(points: &Points<T>, device: Device) -> Result<Self> {
        Self::new(points, &Engine::open(device)?)
    }

    /// Indexes points already in GPU memory (`engine` must be that GPU's): the tree is built
    /// there, with no transfer.
    pub fn from_device(points: &DevicePoints<T>, engine: &Engine) -> Result<Self> {
        let gpu = engine.need_gpu("an index of points in GPU memory")?;
        if points.is_empty() {
            return Err(Error::EmptySet { role: Role::Data });
        }
        check_size(points.len())?;
        if let Some(m) = points.magnitudes {
            if !Scale::for_points::<T>(m, Role::Data)?.is_identity() {
                return Err(Error::Magnitudes {
                    role: Role::Data,
                    detail: "coordinates this far from 1 need scaling by a power of two, which points in GPU memory \
                             cannot have: index them from host memory (PointIndex::new)"
                        .into(),
                });
            }
        }
        let _busy = gpu.lock();
        Ok(Self {
            engine: engine.clone(),
            len: points.len(),
            tree: Tree::Cuda(Box::new(DeviceTree::build(gpu, points)?)),
            scale: Scale::default(),
        })
    }

    /// The number of indexed points.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an index holds at least one point.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The engine the index lives on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Each query's nearest indexed point (`b`, `distance`), ties to the smaller id; with a
    /// `max_distance`, queries with none within it get `NO_ID` and an infinite distance.
    pub fn nearest(&self, queries: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
        if let (Tree::Cuda(tree), Some(up)) = (&self.tree, self.queries_up(queries, Role::Queries)?) {
            let r2 = radius2(self.scale.max_distance(max_distance)?)?;
            let gpu = self.engine.need_gpu("")?;
            let _busy = gpu.lock();
            let profile = self.engine.options().profile;
            return crate::pairs::cuda::nearest(gpu, tree, &PointSource::Device(&up), r2, self.chunk(), profile);
        }
        let queries = &*self.scaled_queries(queries, Role::Queries)?;
        let r2 = radius2(self.scale.max_distance(max_distance)?)?;
        let mut found = match &self.tree {
            Tree::Cpu(tree) => crate::pairs::cpu::nearest(tree, queries, r2, self.engine.options().profile),
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                let profile = self.engine.options().profile;
                crate::pairs::cuda::nearest(gpu, tree, &PointSource::Host(queries), r2, self.chunk(), profile)?
            }
        };
        self.scale.undo_all(&mut found.distance);
        Ok(found)
    }

    /// [`PointIndex::nearest`] of query rows (`[x0, y0, z0, x1, …]`: a C-ordered numpy `(n, 3)`
    /// array) into the caller's memory (one place per row), each id passed through `id` on its
    /// way (`NO_ID` where none lies within `max_distance`): a widening to the caller's type,
    /// say. On a GPU the rows go up as they are, a chunk at a time (at least
    /// [`CudaOptions::chunk_points`](crate::CudaOptions), as many as a quarter of the free GPU
    /// memory holds), sorted there, and the answers come down into place while the host faults
    /// in the output's fresh pages. The same answers as [`PointIndex::nearest`].
    pub fn nearest_rows_into<I: Send + Sync>(
        &self,
        rows: &[T],
        max_distance: Option<T>,
        distance: &mut [MaybeUninit<T>],
        ids: &mut [MaybeUninit<I>],
        id: impl Fn(u32) -> I + Sync,
    ) -> Result<()> {
        if rows.len() % 3 != 0 {
            return Err(Error::InvalidArgument(format!("{} values are not rows of three", rows.len())));
        }
        let n = rows.len() / 3;
        if distance.len() != n || ids.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{n} queries need {n} places for distances and ids, not {} and {}",
                distance.len(),
                ids.len()
            )));
        }
        if let (Tree::Cuda(tree), true, false) = (&self.tree, self.scale.is_identity(), n == 0) {
            let r2 = radius2(max_distance)?;
            let gpu = self.engine.need_gpu("")?;
            let _busy = gpu.lock();
            // Chunks as large as a quarter of free memory holds, if larger than the option's:
            // queries sorted along the curve together search faster the more there are.
            let per_query = 16 * std::mem::size_of::<T>() + 32;
            let chunk = self.chunk().max(gpu.memory_info()?.0 / 4 / per_query);
            let job = NearestRows { pieces: &[rows], r2, chunk, profile: self.engine.options().profile };
            return nearest_rows_on_gpu(gpu, tree, &tree.frame, &job, distance, ids, &id);
        }
        // Elsewhere (the CPU, or coordinates the index scales): the query as columns.
        let nn = self.nearest(&columns_of_rows(rows), max_distance)?;
        write_mapped(distance, &nn.distance, |d| d);
        write_mapped(ids, &nn.b, id);
        Ok(())
    }

    /// Each query's `k` nearest indexed points, ascending by (distance, id), row-major.
    pub fn knn(&self, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        if let (Tree::Cuda(tree), Some(up)) = (&self.tree, self.queries_up(queries, Role::Queries)?) {
            let opts = &KnnOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
            let (k, r2) = knn_limits(self.len, up.len, opts)?;
            check_room::<(u32, T)>(up.len, k, "the neighbour lists")?;
            let gpu = self.engine.need_gpu("")?;
            let _busy = gpu.lock();
            return crate::knn::cuda::knn(gpu, tree, &PointSource::Device(&up), opts, k, r2, self.chunk());
        }
        let queries = &*self.scaled_queries(queries, Role::Queries)?;
        let opts = &KnnOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        check_room::<(u32, T)>(queries.len(), k, "the neighbour lists")?;
        let mut found = match &self.tree {
            Tree::Cpu(tree) => crate::knn::cpu::knn(tree, queries, opts, k, r2, self.engine.options().profile),
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::knn::cuda::knn(gpu, tree, &PointSource::Host(queries), opts, k, r2, self.chunk())?
            }
        };
        self.scale.undo_all(&mut found.distances);
        Ok(found)
    }

    /// [`PointIndex::knn`] into the caller's memory: query `q`'s neighbours go to places
    /// `q*k..(q+1)*k` of `distances` and `ids` (uninitialised memory is fine: every place is
    /// written), each id passed through `id` on its way (`NO_ID` where there is none): a
    /// widening to the caller's type, say, with no intermediate array. `k` is the effective
    /// one, `opts.k` capped at the points a query can have as neighbours (see
    /// [`PointIndex::knn_k`]); the slices must hold exactly `queries.len() * k`. Returns `k`.
    ///
    /// The queries are any [`QueryPoints`]: [`Points`], borrowed columns ([`PointColumns`],
    /// numpy's Fortran order) or rows (`[[T; 3]]`, numpy's C order), which the CPU search
    /// reads in place.
    ///
    /// [`PointColumns`]: crate::PointColumns
    pub fn knn_into_slices<I: Send + Sync, Q: QueryPoints<T> + ?Sized>(
        &self,
        queries: &Q,
        opts: &KnnOptions<T>,
        distances: &mut [MaybeUninit<T>],
        ids: &mut [MaybeUninit<I>],
        id: impl Fn(u32) -> I + Sync,
    ) -> Result<usize> {
        self.scale.check_point_queries::<T>(queries.validate(Role::Queries)?, Role::Queries)?;
        if !self.scale.is_identity() {
            // Coordinates this index scales: the queries scaled as columns, then as below.
            let scaled = self.scale.points(&queries.columns()).into_owned();
            return self.knn_into_slices_checked(&scaled, opts, distances, ids, id);
        }
        self.knn_into_slices_checked(queries, opts, distances, ids, id)
    }

    /// `knn_into_slices` of queries checked, and scaled where the index needs it.
    fn knn_into_slices_checked<I: Send + Sync, Q: QueryPoints<T> + ?Sized>(
        &self,
        queries: &Q,
        opts: &KnnOptions<T>,
        distances: &mut [MaybeUninit<T>],
        ids: &mut [MaybeUninit<I>],
        id: impl Fn(u32) -> I + Sync,
    ) -> Result<usize> {
        let opts = &KnnOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        let places = queries.len() * k;
        if distances.len() != places || ids.len() != places {
            return Err(Error::InvalidArgument(format!(
                "{} queries with k = {k} need {places} places for distances and ids, not {} and {}",
                queries.len(),
                distances.len(),
                ids.len()
            )));
        }
        match &self.tree {
            Tree::Cpu(tree) => {
                let profile = self.engine.options().profile;
                crate::knn::cpu::knn_to(tree, queries, opts, k, r2, profile, ids, distances, &id);
            }
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                let found = crate::knn::cuda::knn(
                    gpu,
                    tree,
                    &PointSource::Host(&queries.columns()),
                    opts,
                    k,
                    r2,
                    self.chunk(),
                )?;
                write_mapped(ids, &found.ids, id);
                write_mapped(distances, &found.distances, |d| d);
            }
        }
        // SAFETY: every place was written above.
        let distances = unsafe { &mut *(distances as *mut [MaybeUninit<T>] as *mut [T]) };
        self.scale.undo_all(distances);
        Ok(k)
    }

    /// The k a kNN query of `n_queries` with `opts` returns: `opts.k` capped at the points a
    /// query can have as neighbours (one fewer when it excludes itself).
    pub fn knn_k(&self, n_queries: usize, opts: &KnnOptions<T>) -> Result<usize> {
        Ok(knn_limits(self.len, n_queries, opts)?.0)
    }

    /// [`PointIndex::knn`] into `out`, host memory reused from call to call: on a GPU engine
    /// it is page-locked when it first grows, and later results are copied into it by the
    /// device directly (the fastest way to bring many neighbours back to the host).
    pub fn knn_into(&self, queries: &Points<T>, opts: &KnnOptions<T>, out: &mut KnnBuffer<T>) -> Result<()> {
        let queries = &*self.scaled_queries(queries, Role::Queries)?;
        let opts = &KnnOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        check_room::<(u32, T)>(queries.len(), k, "the neighbour lists")?;
        let n = queries.len();
        match &self.tree {
            Tree::Cpu(tree) => {
                out.hold(crate::knn::cpu::knn(tree, queries, opts, k, r2, self.engine.options().profile), n)
            }
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                let (ids, distances, memory) = out.room(gpu, n, k)?;
                crate::knn::cuda::knn_to(
                    gpu,
                    tree,
                    &PointSource::Host(queries),
                    opts,
                    k,
                    r2,
                    self.chunk(),
                    ids,
                    distances,
                    memory,
                )?;
                out.filled(n, k);
            }
        }
        self.scale.undo_all(out.distances_mut());
        Ok(())
    }

    /// The `opts.k` closest pairs (a query `a`, an indexed point `b`) in `opts.mode`,
    /// ascending by (distance, a, b).
    pub fn closest_pairs(&self, queries: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        if let (Tree::Cuda(tree), Some(up)) = (&self.tree, self.queries_up(queries, Role::A)?) {
            let opts = &PairsOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
            let r2 = check_pairs(opts)?;
            return self.closest_pairs_on_gpu(tree, &PointSource::Device(&up), opts, r2);
        }
        let queries = &*self.scaled_queries(queries, Role::A)?;
        let opts = &PairsOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
        let r2 = check_pairs(opts)?;
        let mut pairs = match &self.tree {
            Tree::Cpu(tree) => {
                crate::pairs::cpu::closest_pairs(tree, queries, opts.k, opts.mode, r2, self.engine.options().profile)
            }
            Tree::Cuda(tree) => self.closest_pairs_on_gpu(tree, &PointSource::Host(queries), opts, r2)?,
        };
        for p in &mut pairs {
            p.distance = self.scale.undo(p.distance);
        }
        Ok(pairs)
    }

    /// Every indexed point within distance `r` of each query (inclusive, exact): row `q` of
    /// the result is query `q`'s, ascending by (distance, id) unless `opts` asks for unsorted
    /// rows.
    ///
    /// ```
    /// use nearkit::{Device, PointIndex, Points, RadiusOptions};
    /// let data = Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [3.0, 0.0, 0.0]]);
    /// let index = PointIndex::build(&data, Device::Cpu).unwrap();
    /// let rows = index.within(&Points::from_rows(&[[0.9f32, 0.0, 0.0]]), 1.0, &RadiusOptions::default()).unwrap();
    /// assert_eq!(rows.row(0).0, [1, 0]); // 0.1 away, then 0.9 away; 3 is 2.1 away
    /// ```
    pub fn within(&self, queries: &Points<T>, r: T, opts: &RadiusOptions) -> Result<Within<T>> {
        if let (Tree::Cuda(tree), Some(up)) = (&self.tree, self.queries_up(queries, Role::Queries)?) {
            let r2 = crate::radius::radius2(self.scale, r)?;
            let gpu = self.engine.need_gpu("")?;
            let _busy = gpu.lock();
            return crate::radius::cuda::within(gpu, tree, &PointSource::Device(&up), r2, opts, self.engine.options());
        }
        let queries = &*self.scaled_queries(queries, Role::Queries)?;
        let r2 = crate::radius::radius2(self.scale, r)?;
        let mut rows = match &self.tree {
            Tree::Cpu(tree) => {
                let order = crate::radius::cpu::search_order(tree, queries, r2);
                let query = |i: usize| (queries.get(order[i] as usize), order[i]);
                crate::radius::cpu::within(tree, queries.len(), order.len(), query, r2, false, opts)?
            }
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::radius::cuda::within(gpu, tree, &PointSource::Host(queries), r2, opts, self.engine.options())?
            }
        };
        self.scale.undo_all(&mut rows.distances);
        Ok(rows)
    }

    /// [`PointIndex::within`] of query rows (`[x0, y0, z0, x1, …]`: a C-ordered numpy `(n, 3)`
    /// array): on a GPU they go up as they are and become columns there, checked there (a bad
    /// row is named by its place); elsewhere they are made columns first. The same rows.
    pub fn within_rows(&self, rows: &[T], r: T, opts: &RadiusOptions) -> Result<Within<T>> {
        if let Some((tree, gpu, _busy, up)) = self.rows_up(rows)? {
            let r2 = crate::radius::radius2(self.scale, r)?;
            return crate::radius::cuda::within(gpu, tree, &PointSource::Device(&up), r2, opts, self.engine.options());
        }
        self.within(&columns_of_rows(rows), r, opts)
    }

    /// [`PointIndex::count_within`] of query rows, as [`PointIndex::within_rows`] takes them.
    pub fn count_within_rows(&self, rows: &[T], r: T) -> Result<Vec<u32>> {
        if let Some((tree, gpu, _busy, up)) = self.rows_up(rows)? {
            let r2 = crate::radius::radius2(self.scale, r)?;
            return crate::radius::cuda::count_within(gpu, tree, &PointSource::Device(&up), r2, self.engine.options());
        }
        self.count_within(&columns_of_rows(rows), r)
    }

    /// Query rows uploaded as they are to this index's GPU (held for the query), made columns
    /// and checked there; `None` where the query goes the usual way (the CPU, coordinates this
    /// index scales, no rows, more than one chunk).
    #[allow(clippy::type_complexity)]
    fn rows_up<'a>(
        &'a self,
        rows: &[T],
    ) -> Result<Option<(&'a DeviceTree<T>, &'a Gpu, std::sync::MutexGuard<'a, ()>, DevicePoints<T>)>> {
        if rows.len() % 3 != 0 {
            return Err(Error::InvalidArgument(format!("{} values are not rows of three", rows.len())));
        }
        let n = rows.len() / 3;
        let (Tree::Cuda(tree), true, true) = (&self.tree, self.scale.is_identity(), (1..=self.chunk()).contains(&n))
        else {
            return Ok(None);
        };
        let gpu = self.engine.need_gpu("")?;
        let busy = gpu.lock();
        let up = crate::runtime::cuda::import::upload_rows(gpu, rows, Role::Queries)?;
        self.check_device_queries(&up, Role::Queries)?;
        Ok(Some((tree, gpu, busy, up)))
    }

    /// [`PointIndex::within`] delivered in batches of `batch` queries, in order: `f(first,
    /// rows)` gets the rows of queries `first..first + rows.rows()` (offsets from 0), so a
    /// result larger than memory can be written out as it comes. `opts.max_results` bounds
    /// each batch.
    pub fn within_each(
        &self,
        queries: &Points<T>,
        r: T,
        opts: &RadiusOptions,
        batch: usize,
        mut f: impl FnMut(usize, Within<T>) -> Result<()>,
    ) -> Result<()> {
        self.scaled_queries(queries, Role::Queries)?;
        crate::radius::radius2(self.scale, r)?;
        let batch = batch.max(1);
        let mut first = 0;
        while first < queries.len() {
            let end = (first + batch).min(queries.len());
            let part = if first == 0 && end == queries.len() {
                std::borrow::Cow::Borrowed(queries)
            } else {
                let cut = |c: &Vec<T>| c[first..end].to_vec();
                std::borrow::Cow::Owned(Points { x: cut(&queries.x), y: cut(&queries.y), z: cut(&queries.z) })
            };
            f(first, self.within(&part, r, opts)?)?;
            first = end;
        }
        Ok(())
    }

    /// How many indexed points lie within distance `r` of each query (the row lengths of
    /// [`PointIndex::within`], without the rows).
    pub fn count_within(&self, queries: &Points<T>, r: T) -> Result<Vec<u32>> {
        if let (Tree::Cuda(tree), Some(up)) = (&self.tree, self.queries_up(queries, Role::Queries)?) {
            let r2 = crate::radius::radius2(self.scale, r)?;
            let gpu = self.engine.need_gpu("")?;
            let _busy = gpu.lock();
            return crate::radius::cuda::count_within(gpu, tree, &PointSource::Device(&up), r2, self.engine.options());
        }
        let queries = &*self.scaled_queries(queries, Role::Queries)?;
        let r2 = crate::radius::radius2(self.scale, r)?;
        match &self.tree {
            Tree::Cpu(tree) => Ok(crate::radius::cpu::count_within(tree, queries, r2)),
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::radius::cuda::count_within(gpu, tree, &PointSource::Host(queries), r2, self.engine.options())
            }
        }
    }

    /// Every pair of indexed points within distance `r` of each other, each pair once: row
    /// `i` lists the points `j > i` within `r` of point `i` ([`Within::pairs`] gives them as
    /// `(i, j, distance)`, ascending by `i`).
    pub fn pairs_within(&self, r: T, opts: &RadiusOptions) -> Result<Within<T>> {
        let r2 = crate::radius::radius2(self.scale, r)?;
        let mut rows = match &self.tree {
            Tree::Cpu(tree) => {
                let query = |i: usize| ([tree.x[i], tree.y[i], tree.z[i]], tree.id[i]);
                crate::radius::cpu::within(tree, self.len, self.len, query, r2, true, opts)?
            }
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::radius::cuda::tree_rows(gpu, tree, tree, r2, true, opts, self.engine.options())?
            }
        };
        self.scale.undo_all(&mut rows.distances);
        Ok(rows)
    }

    /// Every pair of an indexed point and a point of `other` within distance `r`: row `i`
    /// lists the points of `other` within `r` of indexed point `i`.
    pub fn pairs_within_other(&self, other: &Points<T>, r: T, opts: &RadiusOptions) -> Result<Within<T>> {
        let other = &*self.scaled_queries(other, Role::B)?;
        if other.len() > MAX_TREE_POINTS {
            return Err(Error::TooLarge { role: Role::B, len: other.len(), max: MAX_TREE_POINTS });
        }
        let r2 = crate::radius::radius2(self.scale, r)?;
        let mut rows = match &self.tree {
            Tree::Cpu(tree) => {
                let other_tree = MortonTree::build(other, DEFAULT_LEAF_SIZE);
                let query = |i: usize| ([tree.x[i], tree.y[i], tree.z[i]], tree.id[i]);
                crate::radius::cpu::within(&other_tree, self.len, self.len, query, r2, false, opts)?
            }
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                let other_tree = DeviceTree::build_from(gpu, BuildInput::Owned(DevicePoints::upload(gpu, other)?))?;
                crate::radius::cuda::tree_rows(gpu, &other_tree, tree, r2, false, opts, self.engine.options())?
            }
        };
        self.scale.undo_all(&mut rows.distances);
        Ok(rows)
    }

    /// [`PointIndex::within`] of queries in GPU memory, the rows left there (which must hold
    /// them).
    pub fn within_device(&self, queries: &DevicePoints<T>, r: T, opts: &RadiusOptions) -> Result<DeviceWithin<T>> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        if queries.is_empty() {
            return Err(Error::EmptySet { role: Role::Queries });
        }
        self.check_device_queries(queries, Role::Queries)?;
        let r2 = crate::radius::radius2(self.scale, r)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        crate::radius::cuda::within_resident(gpu, tree, queries, r2, opts, self.engine.options())
    }

    /// [`PointIndex::pairs_within`] with the rows left in GPU memory (which must hold them;
    /// an index on a GPU engine, whose points need no scaling).
    pub fn pairs_within_device(&self, r: T, opts: &RadiusOptions) -> Result<DeviceWithin<T>> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        if !self.scale.is_identity() {
            return Err(Error::Magnitudes {
                role: Role::Data,
                detail: "this index scales its coordinates by a power of two (its data are far from 1), so its \
                         distances in GPU memory would be scaled too: use pairs_within, which brings them back"
                    .into(),
            });
        }
        let r2 = crate::radius::radius2(self.scale, r)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        crate::radius::cuda::self_join_resident(gpu, tree, r2, opts, self.engine.options())
    }

    /// The queries checked, and scaled as the index's points are.
    /// Queries for a GPU index that needs no scaling, in one chunk: uploaded and checked on
    /// the way (the checks and errors of `scaled_queries`, with no pass of their own). `None`
    /// where the query goes the usual way (the CPU, scaled data, several chunks).
    fn queries_up(&self, queries: &Points<T>, role: Role) -> Result<Option<DevicePoints<T>>> {
        let (Tree::Cuda(_), true) = (&self.tree, self.scale.is_identity()) else { return Ok(None) };
        if queries.len() > self.chunk() {
            return Ok(None);
        }
        let gpu = self.engine.need_gpu("")?;
        let (up, found) = DevicePoints::upload_checked(gpu, queries, role)?;
        self.scale.check_point_queries::<T>(found, role)?;
        Ok(Some(up))
    }

    fn scaled_queries<'a>(&self, queries: &'a Points<T>, role: Role) -> Result<std::borrow::Cow<'a, Points<T>>> {
        self.scale.check_point_queries::<T>(queries.validate(role)?, role)?;
        Ok(self.scale.points(queries))
    }

    /// Queries in GPU memory: they cannot be scaled, and must not need it.
    fn check_device_queries(&self, queries: &DevicePoints<T>, role: Role) -> Result<()> {
        if !self.scale.is_identity() {
            return Err(Error::Magnitudes {
                role,
                detail: "this index scales its coordinates by a power of two (its data are far from 1), which \
                         queries in GPU memory cannot have: give the queries from host memory"
                    .into(),
            });
        }
        match queries.magnitudes {
            Some(m) => self.scale.check_point_queries::<T>(m, role),
            None => Ok(()),
        }
    }

    /// [`PointIndex::knn`] of queries in GPU memory, results left there (`out` must hold
    /// queries × k). Returns the effective k.
    pub fn knn_device(&self, queries: &DevicePoints<T>, opts: &KnnOptions<T>, out: &mut DeviceKnn<T>) -> Result<usize> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        self.check_device_queries(queries, Role::Queries)?;
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        out.check(queries.len(), k)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        let (ids, distances) = out.parts_mut();
        crate::knn::cuda::knn_resident(gpu, tree, queries, opts, k, r2, self.chunk(), ids, distances)?;
        Ok(k)
    }

    /// [`PointIndex::nearest`] of queries in GPU memory, the answers left there (in the queries'
    /// order).
    pub fn nearest_device(&self, queries: &DevicePoints<T>, max_distance: Option<T>) -> Result<DeviceNearest<T>> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        if queries.is_empty() {
            return Err(Error::EmptySet { role: Role::Queries });
        }
        self.check_device_queries(queries, Role::Queries)?;
        let r2 = radius2(self.scale.max_distance(max_distance)?)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        crate::pairs::cuda::nearest_resident(gpu, tree, queries, r2, self.chunk())
    }

    /// [`PointIndex::closest_pairs`] of queries in GPU memory: everything runs there, and only
    /// the k result rows come back.
    pub fn closest_pairs_device(&self, queries: &DevicePoints<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        if queries.is_empty() {
            return Err(Error::EmptySet { role: Role::A });
        }
        self.check_device_queries(queries, Role::A)?;
        let r2 = check_pairs(opts)?;
        self.closest_pairs_on_gpu(tree, &PointSource::Device(queries), opts, r2)
    }

    fn closest_pairs_on_gpu(
        &self,
        tree: &DeviceTree<T>,
        queries: &PointSource<'_, T>,
        opts: &PairsOptions<T>,
        r2: T,
    ) -> Result<Vec<Pair<T>>> {
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        let profile = self.engine.options().profile;
        crate::pairs::cuda::closest_pairs(gpu, tree, queries, opts.k, opts.mode, r2, self.chunk(), profile)
    }

    fn chunk(&self) -> usize {
        self.engine.options().cuda.chunk_points.max(1)
    }

    /// The index's tree, brought to the host (tests compare the CPU and GPU builds).
    #[cfg(feature = "test-hooks")]
    pub fn tree_to_host(&self) -> Result<MortonTree<T>> {
        match &self.tree {
            Tree::Cpu(t) => Ok((**t).clone()),
            Tree::Cuda(t) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                t.to_host(gpu)
            }
        }
    }
}

/// Checks a closest-pairs query's options; returns the squared radius.
fn check_pairs<T: Real>(opts: &PairsOptions<T>) -> Result<T> {
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    radius2(opts.max_distance)
}

/// Rows `[x0, y0, z0, x1, …]` as columns (a trailing partial row is ignored: callers check).
fn columns_of_rows<T: Real>(rows: &[T]) -> Points<T> {
    Points::from_rows(&rows.chunks_exact(3).map(|r| [r[0], r[1], r[2]]).collect::<Vec<_>>())
}

/// A tree holds at most `MAX_TREE_POINTS` points (its child indices keep a flag bit).
fn check_size(n: usize) -> Result<()> {
    if n > MAX_TREE_POINTS {
        return Err(Error::TooLarge { role: Role::Data, len: n, max: MAX_TREE_POINTS });
    }
    Ok(())
}

fn not_on_gpu() -> Error {
    Error::InvalidArgument("queries in GPU memory need an index built on a CUDA engine".into())
}
