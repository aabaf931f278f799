//! kNN of vectors of any dimension (1 to 8): exact, through the `VectorTree` (and, for seed
//! C's 6-D triangle boxes searched from points, the candidate grid over their 3-D space), or
//! approximate by shifted sorting (`shifted_sort`). `VectorIndex` is the public entry.

pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod shifted_sort;
pub(crate) mod tree;
mod vector_index;

pub use cuda::DeviceVectors;
pub use shifted_sort::ShiftedSortOptions;
pub use vector_index::{shifted_sort_knn, shifted_sort_knn_device, VectorIndex};

use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::real::Real;
use crate::geometry::scale::Scale;
use crate::geometry::vectors::Vectors;

/// Checks that data and queries are valid vectors of one dimension.
pub(crate) fn check_vectors<T: Real>(data: &Vectors<T>, queries: &Vectors<T>) -> Result<()> {
    unscaled::<T>(data.validate(Role::Data)?, Role::Data)?;
    Scale::default().check_point_queries::<T>(check_queries(data.dim(), queries)?, Role::Queries)
}

/// Vectors whose magnitudes need no scaling (see `geometry::magnitude`; the public entries
/// scale the others first).
pub(crate) fn unscaled<T: Real>(m: Magnitudes, role: Role) -> Result<()> {
    Scale::for_points::<T>(m, role)?.require_identity(role, "these vectors")
}

/// Checks that `queries` are valid vectors of dimension `dim`; returns their magnitudes.
pub(crate) fn check_queries<T: Real>(dim: usize, queries: &Vectors<T>) -> Result<Magnitudes> {
    let m = queries.validate(Role::Queries)?;
    if dim != queries.dim() {
        return Err(Error::InvalidArgument(format!(
            "the data are {dim}-D but the queries are {}-D: give both the same dimension",
            queries.dim()
        )));
    }
    Ok(m)
}
