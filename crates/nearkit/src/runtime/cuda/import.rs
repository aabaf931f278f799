//! Launches import.cu: points another library holds in GPU memory (CuPy, PyTorch, …: rows of
//! three coordinates at any strides) copied into a `DevicePoints`' columns on the device, and
//! validated there as host input is (no NaN or infinity; magnitudes for scaling).

use cudarc::driver::LaunchConfig;

use super::launch::{kernels, Address, In, Out};
use super::{cuda_err, CudaSource, DevicePoints, Gpu, COMMON};
use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::points::MAX_POINTS;
use crate::geometry::real::Real;

static IMPORT: CudaSource = CudaSource::plain("import.cu", include_str!("import.cu"));

kernels! {
    module KERNELS = "import", [&COMMON, &IMPORT];
    /// Rows to columns, with the first non-finite row and the |coordinate| range in `stats`.
    fn import_rows<T>(
        rows: In<T>,
        row_stride: i64,
        col_stride: i64,
        n: u64,
        x: Out<T>,
        y: Out<T>,
        z: Out<T>,
        stats: Out<u64>,
    );
}

/// Rows of three `T` at `address` (element strides `row_stride`, `col_stride`) on `gpu`,
/// copied into columns and validated.
///
/// # Safety
/// `address` must hold `len` such rows in memory `gpu` can read, and nothing may write them
/// until this returns.
pub(crate) unsafe fn rows_to_columns<T: Real>(
    gpu: &Gpu,
    address: u64,
    len: usize,
    (row_stride, col_stride): (isize, isize),
    role: Role,
) -> Result<DevicePoints<T>> {
    check_address(gpu, address)?;
    // The rows were written on other libraries' streams: wait for all of the device's work.
    gpu.stream().context().synchronize().map_err(cuda_err)?;
    // SAFETY: the caller's promise, passed on.
    unsafe { columns_of_rows(gpu, address, len, (row_stride, col_stride), role) }
}

/// Rows of three `T` in host memory (`rows.len()` a multiple of 3), uploaded as they are and
/// turned into columns on the device: no conversion pass on the host.
pub(crate) fn upload_rows<T: Real>(gpu: &Gpu, rows: &[T], role: Role) -> Result<DevicePoints<T>> {
    upload_row_pieces(gpu, &[&rows[..rows.len() / 3 * 3]], role)
}

/// [`upload_rows`] of rows given in pieces (each a multiple of 3 values), one after another:
/// one point set, without a host copy joining them.
pub(crate) fn upload_row_pieces<T: Real>(gpu: &Gpu, pieces: &[&[T]], role: Role) -> Result<DevicePoints<T>> {
    let values: usize = pieces.iter().map(|p| p.len()).sum();
    let len = values / 3;
    if len == 0 {
        return Err(Error::EmptySet { role });
    }
    let mut d = gpu.alloc_uninit::<T>(values)?;
    let mut at = 0;
    for p in pieces.iter().filter(|p| !p.is_empty()) {
        debug_assert_eq!(p.len() % 3, 0, "a piece holds whole rows");
        super::transfer::upload(gpu, p, &mut d.slice_mut(at..at + p.len()))?;
        at += p.len();
    }
    let address = Address::of(&d, gpu.stream()).0;
    // SAFETY: `d` holds the rows and lives until the stream has run the kernel (the stats
    // download below waits for it).
    unsafe { columns_of_rows(gpu, address, len, (3, 1), role) }
}

/// [`rows_to_columns`] of memory already known to be the GPU's and complete.
///
/// # Safety
/// As for [`rows_to_columns`].
unsafe fn columns_of_rows<T: Real>(
    gpu: &Gpu,
    address: u64,
    len: usize,
    (row_stride, col_stride): (isize, isize),
    role: Role,
) -> Result<DevicePoints<T>> {
    if len == 0 {
        return Err(Error::EmptySet { role });
    }
    if len > MAX_POINTS {
        return Err(Error::TooLarge { role, len, max: MAX_POINTS });
    }
    let s = gpu.stream();
    let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?);
    let mut stats = s.clone_htod(&[u64::MAX, 0, u64::MAX]).map_err(cuda_err)?;
    let blocks = len.div_ceil(256).min(132 * 16) as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    import_rows::<T>(
        gpu,
        cfg,
        Address::<T>::raw(address),
        row_stride as i64,
        col_stride as i64,
        len as u64,
        &mut x,
        &mut y,
        &mut z,
        &mut stats,
    )?;
    let st = s.clone_dtoh(&stats).map_err(cuda_err)?;
    if st[0] < len as u64 {
        let index = st[0] as usize;
        for (axis, col) in [('x', &x), ('y', &y), ('z', &z)] {
            let v = s.clone_dtoh(&col.slice(index..index + 1)).map_err(cuda_err)?[0];
            if !v.is_finite() {
                return Err(Error::NonFinite { role, index, axis, value: v.to_f64() });
            }
        }
    }
    let from_bits = |b: u64| if T::NAME == "f32" { f32::from_bits(b as u32) as f64 } else { f64::from_bits(b) };
    let min_nonzero = if st[2] == u64::MAX { f64::INFINITY } else { from_bits(st[2]) };
    let magnitudes = Magnitudes { max: from_bits(st[1]), min_nonzero };
    Ok(DevicePoints { x, y, z, len, bounds: None, magnitudes: Some(magnitudes) })
}

/// That `address` is memory of `gpu`'s device (or managed memory it can read).
fn check_address(gpu: &Gpu, address: u64) -> Result<()> {
    use cudarc::driver::sys::{self, CUpointer_attribute as A};
    gpu.stream().context().bind_to_thread().map_err(cuda_err)?;
    let mut ordinal: i32 = -1;
    // SAFETY: a query of the driver about an address; an out-parameter of the attribute's type.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut ordinal as *mut i32 as *mut std::ffi::c_void,
            A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            address,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS || ordinal < 0 {
        return Err(Error::InvalidArgument(format!(
            "address {address:#x} is not CUDA device memory this process can read ({r:?})"
        )));
    }
    if ordinal as usize != gpu.ordinal() {
        return Err(Error::InvalidArgument(format!(
            "the array is on cuda:{ordinal}, the engine on cuda:{}: use the engine of the array's GPU",
            gpu.ordinal()
        )));
    }
    Ok(())
}
