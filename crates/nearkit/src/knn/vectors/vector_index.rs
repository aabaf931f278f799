//! `VectorIndex`: vectors of any dimension (1 to 8) indexed once for exact kNN, and the
//! shifted-sort approximate kNN.

use super::check_queries;
use super::cpu;
use super::cuda::{self as vcuda, DeviceShiftedCopies, DeviceVectorTree, DeviceVectors};
use super::shifted_sort::{ShiftFrame, ShiftedSortOptions};
use super::tree::VectorTree;
use crate::device::Engine;
use crate::error::{Error, Result, Role};
use crate::geometry::real::Real;
use crate::geometry::scale::Scale;
use crate::geometry::vectors::Vectors;
use crate::knn::cuda::DeviceKnn;
use crate::knn::{knn_limits, Knn, KnnOptions};

/// Vectors of one dimension (1 to 8) indexed for exact k-nearest-neighbour queries (a
/// Morton-ordered tree of boxes), on the CPU or a GPU, with the same answers on both.
///
/// ```
/// use nearkit::{Engine, KnnOptions, VectorIndex, Vectors};
/// let data = Vectors::from_row_major(2, &[0.0f32, 0.0, 1.0, 0.0, 0.0, 3.0]).unwrap(); // 2-D
/// let index = VectorIndex::new(&data, &Engine::cpu()).unwrap();
/// let queries = Vectors::from_row_major(2, &[0.9f32, 0.2]).unwrap();
/// let knn = index.knn(&queries, &KnnOptions::k(2)).unwrap();
/// assert_eq!(knn.ids, [1, 0]);
/// ```
pub struct VectorIndex<T: Real> {
    engine: Engine,
    len: usize,
    dim: usize,
    index: Index<T>,
    /// What the tree's coordinates are multiplied by (see `geometry::magnitude`).
    scale: Scale,
}

enum Index<T> {
    Cpu(VectorTree<T>),
    Cuda(Box<DeviceVectorTree<T>>),
}

impl<T: Real> VectorIndex<T> {
    /// Indexes `data` (built on the host, then uploaded on a CUDA engine).
    pub fn new(data: &Vectors<T>, engine: &Engine) -> Result<Self> {
        let scale = Scale::for_points::<T>(data.validate(Role::Data)?, Role::Data)?;
        let data = &*scale.vectors(data);
        let tree = VectorTree::build(data);
        let index = match engine.gpu() {
            None => Index::Cpu(tree),
            Some(gpu) => {
                let _busy = gpu.lock();
                Index::Cuda(Box::new(DeviceVectorTree::upload(gpu, &tree, data)?))
            }
        };
        Ok(Self { engine: engine.clone(), len: data.len(), dim: data.dim(), index, scale })
    }

    /// The number of indexed vectors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an index holds at least one vector.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Their dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Each query's `k` nearest indexed vectors, ascending by (distance, id), row-major.
    pub fn knn(&self, queries: &Vectors<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        self.scale.check_point_queries::<T>(check_queries(self.dim, queries)?, Role::Queries)?;
        let queries = &*self.scale.vectors(queries);
        let opts = &KnnOptions { max_distance: self.scale.max_distance(opts.max_distance)?, ..*opts };
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        crate::runtime::cpu::check_room::<(u32, T)>(queries.len(), k, "the neighbour lists")?;
        let mut found = match &self.index {
            Index::Cpu(tree) => cpu::knn(tree, queries, opts, k, r2),
            Index::Cuda(tree) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                vcuda::knn(gpu, tree, queries, opts, k, r2)?
            }
        };
        self.scale.undo_all(&mut found.distances);
        Ok(found)
    }

    /// [`VectorIndex::knn`] of queries in GPU memory, results left there. Returns the
    /// effective k.
    pub fn knn_device(
        &self,
        queries: &DeviceVectors<T>,
        opts: &KnnOptions<T>,
        out: &mut DeviceKnn<T>,
    ) -> Result<usize> {
        let Index::Cuda(tree) = &self.index else {
            return Err(Error::InvalidArgument("queries in GPU memory need an index built on a CUDA engine".into()));
        };
        if queries.dim() != self.dim {
            return Err(Error::InvalidArgument(format!(
                "the data are {}-D but the queries are {}-D: give both the same dimension",
                self.dim,
                queries.dim()
            )));
        }
        self.scale.require_identity(Role::Queries, "queries")?;
        if let Some(m) = queries.magnitudes {
            self.scale.check_point_queries::<T>(m, Role::Queries)?;
        }
        let (k, r2) = knn_limits(self.len, queries.len(), opts)?;
        out.check(queries.len(), k)?;
        let gpu = self.engine.need_gpu("")?;
        let _busy = gpu.lock();
        let (ids, distances) = out.parts_mut();
        vcuda::knn_resident(gpu, tree, queries, opts, k, r2, ids, distances)?;
        Ok(k)
    }

    /// Copies vectors into GPU memory (for the `*_device` queries).
    pub fn upload(engine: &Engine, v: &Vectors<T>) -> Result<DeviceVectors<T>> {
        let magnitudes = Some(v.validate(Role::Queries)?);
        let bounds = Some(v.bounds());
        Ok(DeviceVectors { bounds, magnitudes, ..DeviceVectors::upload(engine.need_gpu("upload")?, v)? })
    }
}

/// Approximate kNN by shifted sorting (Chan 1997; Li et al. 2012): data and queries keyed on `opts.shifts`
/// diagonally shifted Morton curves, each query taking `opts.window` candidates on each side
/// of its place in each copy. The same answer on every device; measure its recall against
/// [`VectorIndex::knn`].
pub fn shifted_sort_knn<T: Real>(
    data: &Vectors<T>,
    queries: &Vectors<T>,
    opts: &ShiftedSortOptions,
    engine: &Engine,
) -> Result<Knn<T>> {
    let scale = Scale::for_points::<T>(data.validate(Role::Data)?, Role::Data)?;
    scale.check_point_queries::<T>(check_queries(data.dim(), queries)?, Role::Queries)?;
    let (data, queries) = (&*scale.vectors(data), &*scale.vectors(queries));
    crate::runtime::cpu::check_room::<(u32, T)>(queries.len(), opts.check(data.len())?, "the neighbour lists")?;
    let mut found = match engine.gpu() {
        None => cpu::approx_knn(data, queries, opts)?,
        Some(gpu) => {
            let _busy = gpu.lock();
            vcuda::approx_knn(gpu, data, queries, opts)?
        }
    };
    scale.undo_all(&mut found.distances);
    Ok(found)
}

/// [`shifted_sort_knn`] of data and queries in GPU memory (both from
/// [`VectorIndex::upload`]), results left there. Returns the effective k.
pub fn shifted_sort_knn_device<T: Real>(
    data: &DeviceVectors<T>,
    queries: &DeviceVectors<T>,
    opts: &ShiftedSortOptions,
    engine: &Engine,
    out: &mut DeviceKnn<T>,
) -> Result<usize> {
    let gpu = engine.need_gpu("the shifted sort of vectors in GPU memory")?;
    if data.dim() != queries.dim() {
        return Err(Error::InvalidArgument(format!(
            "the data are {}-D but the queries are {}-D: give both the same dimension",
            data.dim(),
            queries.dim()
        )));
    }
    if let Some(m) = data.magnitudes {
        let scale = Scale::for_points::<T>(m, Role::Data)?;
        scale.require_identity(Role::Data, "data")?;
    }
    if let Some(m) = queries.magnitudes {
        Scale::default().check_point_queries::<T>(m, Role::Queries)?;
    }
    let k = opts.check(data.len())?;
    out.check(queries.len(), k)?;
    let _busy = gpu.lock();
    let box_of =
        |v: &DeviceVectors<T>| v.bounds.clone().expect("vectors uploaded by VectorIndex::upload carry their box");
    let frame = ShiftFrame::of_bounds(data.dim(), &box_of(data), &box_of(queries));
    let copies = DeviceShiftedCopies::build(gpu, data, frame, opts.shifts)?;
    let (ids, distances) = out.parts_mut();
    vcuda::approx_knn_resident(gpu, &copies, queries, opts, ids, distances)
}
