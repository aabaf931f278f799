//! `nearkit._native`: the Rust half of the `nearkit` Python package. The pure-Python package
//! (`python/nearkit/`) turns user input into what these functions take (float32 or float64
//! arrays of shape (N, 3), validated options) and gives results scipy's conventions; this side
//! indexes, queries with the GIL released, and converts between numpy rows and the library's
//! columns.
//!
//! - `engines`: one `Engine` per device per process, the CUDA options, `workers` thread pools.
//! - `arrays`: numpy (N, 3) rows to `Points` columns and back, in parallel; errors to Python.
//! - `cuda_arrays`: CuPy / PyTorch arrays in GPU memory, read and answered in place.
//! - `partition`: nearkit.dask's passes over every row (cutting chunks into cells).
//! - `point_index`, `sharded`, `mesh_index`, `collide`, `io`: the classes and functions.

mod arrays;
mod collide;
mod cuda_arrays;
mod engines;
mod io;
mod mesh_index;
mod partition;
mod point_index;
mod sharded;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<point_index::PyPointIndex>()?;
    m.add_class::<cuda_arrays::CudaKnn>()?;
    m.add_class::<sharded::PyShardedIndex>()?;
    m.add_class::<mesh_index::PyMeshIndex>()?;
    m.add_class::<collide::PyWorld>()?;
    m.add_class::<collide::PyCollider>()?;
    m.add_function(wrap_pyfunction!(engines::configure_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(engines::device_info, m)?)?;
    m.add_function(wrap_pyfunction!(engines::kernel_images, m)?)?;
    m.add_function(wrap_pyfunction!(engines::cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(engines::bus_floor, m)?)?;
    m.add_function(wrap_pyfunction!(point_index::row_lists, m)?)?;
    m.add_function(wrap_pyfunction!(partition::sort_by_cells, m)?)?;
    m.add_function(wrap_pyfunction!(partition::rows_in_box, m)?)?;
    m.add_function(wrap_pyfunction!(io::read_points, m)?)?;
    m.add_function(wrap_pyfunction!(io::read_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(collide::heightfield_mesh, m)?)?;
    m.add("AUTO_CPU_BELOW", engines::AUTO_CPU_BELOW)?;
    m.add("CPU_CHUNK", engines::CPU_CHUNK)?;
    m.add("CONTACT_RECORD_SIZE", collide::CONTACT_RECORD_SIZE)?;
    Ok(())
}
