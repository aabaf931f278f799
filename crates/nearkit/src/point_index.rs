//! `PointIndex`: a 3-D point set indexed once, on the CPU or a GPU, for nearest-neighbour,
//! k-nearest and closest-pair queries from any number of query sets.

use crate::device::{Device, Engine};
use crate::error::{Error, Result, Role};
use crate::geometry::points::Points;
use crate::geometry::radius2;
use crate::geometry::real::Real;
use crate::knn::cuda::DeviceKnn;
use crate::knn::{check_knn, knn_limits, Knn, KnnOptions};
use crate::pairs::{Nearest, Pair, PairsOptions};
use crate::runtime::cuda::memory::PointSource;
use crate::runtime::cuda::DevicePoints;
use crate::tree::cuda::{BuildInput, DeviceTree};
use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE, MAX_TREE_POINTS};

/// A point set indexed for exact proximity queries: built once on the engine's device (a
/// Morton-ordered radix tree, the same bits on the CPU and on the GPU), then queried many
/// times. Point ids are the 0-based rows of the indexed set; results break distance ties by
/// the smaller id, and are bitwise the same on every device.
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
}

enum Tree<T> {
    Cpu(Box<MortonTree<T>>),
    Cuda(Box<DeviceTree<T>>),
}

impl<T: Real> PointIndex<T> {
    /// Indexes `points` on the engine's device.
    pub fn new(points: &Points<T>, engine: &Engine) -> Result<Self> {
        points.validate(Role::Data)?;
        check_size(points.len())?;
        let tree = match engine.gpu() {
            None => Tree::Cpu(Box::new(MortonTree::build(points, DEFAULT_LEAF_SIZE))),
            Some(gpu) => {
                let _busy = gpu.lock();
                // The unsorted copy is freed as soon as the tree has gathered it.
                Tree::Cuda(Box::new(DeviceTree::build_from(
                    gpu,
                    BuildInput::Owned(DevicePoints::upload(gpu, points)?),
                )?))
            }
        };
        Ok(Self { engine: engine.clone(), len: points.len(), tree })
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
        let _busy = gpu.lock();
        Ok(Self {
            engine: engine.clone(),
            len: points.len(),
            tree: Tree::Cuda(Box::new(DeviceTree::build(gpu, points)?)),
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
        queries.validate(Role::Queries)?;
        let r2 = radius2(max_distance)?;
        match &self.tree {
            Tree::Cpu(tree) => Ok(crate::pairs::cpu::nearest(tree, queries, r2)),
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::pairs::cuda::nearest(gpu, tree, queries, r2, self.chunk())
            }
        }
    }

    /// Each query's `k` nearest indexed points, ascending by (distance, id), row-major.
    pub fn knn(&self, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        let (k, r2) = check_knn(self.len, queries, opts)?;
        match &self.tree {
            Tree::Cpu(tree) => Ok(crate::knn::cpu::knn(tree, queries, opts, k, r2, self.engine.options().profile)),
            Tree::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                crate::knn::cuda::knn(gpu, tree, queries, opts, k, r2, self.chunk())
            }
        }
    }

    /// The `opts.k` closest pairs (a query `a`, an indexed point `b`) in `opts.mode`,
    /// ascending by (distance, a, b).
    pub fn closest_pairs(&self, queries: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        queries.validate(Role::A)?;
        let r2 = check_pairs(opts)?;
        match &self.tree {
            Tree::Cpu(tree) => Ok(crate::pairs::cpu::closest_pairs(tree, queries, opts.k, opts.mode, r2)),
            Tree::Cuda(tree) => self.closest_pairs_on_gpu(tree, &PointSource::Host(queries), opts, r2),
        }
    }

    /// [`PointIndex::knn`] of queries in GPU memory, results left there (`out` must hold
    /// queries × k). Returns the effective k.
    pub fn knn_device(&self, queries: &DevicePoints<T>, opts: &KnnOptions<T>, out: &mut DeviceKnn<T>) -> Result<usize> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        out.check(queries.len(), k)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        let (ids, distances) = out.parts_mut();
        crate::knn::cuda::knn_resident(gpu, tree, queries, opts, k, r2, self.chunk(), ids, distances)?;
        Ok(k)
    }

    /// [`PointIndex::closest_pairs`] of queries in GPU memory: everything runs there, and only
    /// the k result rows come back.
    pub fn closest_pairs_device(&self, queries: &DevicePoints<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        let Tree::Cuda(tree) = &self.tree else { return Err(not_on_gpu()) };
        if queries.is_empty() {
            return Err(Error::EmptySet { role: Role::A });
        }
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
