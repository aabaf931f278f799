//! NumPy `.npy`: an N×3 array (points) or N×d array, d <= 8 (vectors) of float32, float64,
//! int32 or int64 (C or Fortran order).

use std::io::Read;
use std::path::Path;

use nearkit::{Points, Real, Vectors};
use npyz::{DType, NpyFile, Order, TypeChar};

use crate::{IoError, Result};

pub fn read<T: Real, R: Read>(reader: R, path: &Path) -> Result<Points<T>> {
    let v = read_dims(reader, path, Some(3))?;
    Ok(Points { x: v.cols[0].clone(), y: v.cols[1].clone(), z: v.cols[2].clone() })
}

/// An N×d array as vectors (any d from 1 to 8).
pub fn read_vectors<T: Real, R: Read>(reader: R, path: &Path) -> Result<Vectors<T>> {
    read_dims(reader, path, None)
}

fn read_dims<T: Real, R: Read>(reader: R, path: &Path, want: Option<usize>) -> Result<Vectors<T>> {
    let (shape, order, flat) = read_flat(reader, path, |shape| {
        let max = nearkit::MAX_VECTOR_DIM as u64;
        match want {
            Some(d) if shape.len() != 2 || shape[1] != d as u64 => {
                Err(format!("array has shape {shape:?}; an N×{d} array of points is needed"))
            }
            None if shape.len() != 2 || shape[1] == 0 || shape[1] > max => {
                Err(format!("array has shape {shape:?}; an N×d array, d from 1 to {max}, is needed"))
            }
            _ => Ok(()),
        }
    })?;
    let (n, dim) = (shape[0] as usize, shape[1] as usize);
    let at = |i: usize, d: usize| match order {
        Order::C => flat[i * dim + d],
        Order::Fortran => flat[d * n + i],
    };
    let cols = (0..dim).map(|d| (0..n).map(|i| T::from_f64(at(i, d))).collect()).collect();
    Ok(Vectors { cols })
}

/// A 2-D array of heights (rows × columns, at least 2 × 2), row-major, as f64.
pub fn read_heights<R: Read>(reader: R, path: &Path) -> Result<(Vec<f64>, usize, usize)> {
    let (shape, order, flat) = read_flat(reader, path, |shape| {
        if shape.len() == 2 && shape[0] >= 2 && shape[1] >= 2 {
            Ok(())
        } else {
            Err(format!("array has shape {shape:?}; a heightfield needs a 2-D array of at least 2 × 2"))
        }
    })?;
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let heights: Vec<f64> = match order {
        Order::C => flat,
        Order::Fortran => (0..rows * cols).map(|i| flat[(i % cols) * rows + i / cols]).collect(),
    };
    if let Some(i) = heights.iter().position(|h| !h.is_finite()) {
        return Err(IoError::new(path, format!("height at row {}, column {} is not finite", i / cols, i % cols)));
    }
    Ok((heights, rows, cols))
}

/// The array's shape (checked by `check`), order and values widened to f64.
fn read_flat<R: Read>(
    reader: R,
    path: &Path,
    check: impl FnOnce(&[u64]) -> std::result::Result<(), String>,
) -> Result<(Vec<u64>, Order, Vec<f64>)> {
    let npy = NpyFile::new(reader).map_err(|e| IoError::new(path, format!("not a valid .npy file: {e}")))?;
    let shape = npy.shape().to_vec();
    check(&shape).map_err(|m| IoError::new(path, m))?;
    let count: u64 = shape.iter().product();
    let order = npy.order();
    let flat: Vec<f64> = match npy.dtype() {
        DType::Plain(t) => match (t.type_char(), t.size_field()) {
            (TypeChar::Float, 4) => convert(npy.into_vec::<f32>(), path)?,
            (TypeChar::Float, 8) => convert(npy.into_vec::<f64>(), path)?,
            (TypeChar::Int, 4) => convert(npy.into_vec::<i32>(), path)?,
            (TypeChar::Int, 8) => convert(npy.into_vec::<i64>(), path)?,
            _ => {
                return Err(IoError::new(
                    path,
                    format!("element type '{}' is not supported: use float32, float64, int32 or int64", t),
                ))
            }
        },
        other => {
            return Err(IoError::new(path, format!("structured dtype {other:?} is not supported: use a plain array")))
        }
    };
    if flat.len() as u64 != count {
        return Err(IoError::new(path, format!("file holds {} values, the header promises {count}", flat.len())));
    }
    Ok((shape, order, flat))
}

fn convert<V: Into<Widen>>(r: std::io::Result<Vec<V>>, path: &Path) -> Result<Vec<f64>> {
    let v = r.map_err(|e| IoError::new(path, format!("truncated or unreadable data: {e}")))?;
    Ok(v.into_iter().map(|x| x.into().0).collect())
}

/// Lossless-enough widening to f64 for the four supported element types.
pub struct Widen(f64);
impl From<f32> for Widen {
    fn from(v: f32) -> Self {
        Widen(v as f64)
    }
}
impl From<f64> for Widen {
    fn from(v: f64) -> Self {
        Widen(v)
    }
}
impl From<i32> for Widen {
    fn from(v: i32) -> Self {
        Widen(v as f64)
    }
}
impl From<i64> for Widen {
    fn from(v: i64) -> Self {
        Widen(v as f64)
    }
}
