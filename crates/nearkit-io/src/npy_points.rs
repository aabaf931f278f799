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
    let npy = NpyFile::new(reader).map_err(|e| IoError::new(path, format!("not a valid .npy file: {e}")))?;
    let shape = npy.shape().to_vec();
    let max = nearkit::vectors::MAX_DIM as u64;
    match want {
        Some(d) if shape.len() != 2 || shape[1] != d as u64 => {
            return Err(IoError::new(path, format!("array has shape {shape:?}; an N×{d} array of points is needed")))
        }
        None if shape.len() != 2 || shape[1] == 0 || shape[1] > max => {
            return Err(IoError::new(
                path,
                format!("array has shape {shape:?}; an N×d array, d from 1 to {max}, is needed"),
            ))
        }
        _ => {}
    }
    let (n, dim) = (shape[0] as usize, shape[1] as usize);
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
            return Err(IoError::new(
                path,
                format!("structured dtype {other:?} is not supported: use a plain N×3 array"),
            ))
        }
    };
    if flat.len() != n * dim {
        return Err(IoError::new(path, format!("file holds {} values, the header promises {}", flat.len(), n * dim)));
    }
    let at = |i: usize, d: usize| match order {
        Order::C => flat[i * dim + d],
        Order::Fortran => flat[d * n + i],
    };
    let cols = (0..dim).map(|d| (0..n).map(|i| T::from_f64(at(i, d))).collect()).collect();
    Ok(Vectors { cols })
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
