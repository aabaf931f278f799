//! NumPy `.npy`: an N×3 array of float32, float64, int32 or int64 (C or Fortran order).

use std::io::Read;
use std::path::Path;

use nearkit::{Points, Real};
use npyz::{DType, NpyFile, Order, TypeChar};

use crate::{IoError, Result};

pub fn read<T: Real, R: Read>(reader: R, path: &Path) -> Result<Points<T>> {
    let npy = NpyFile::new(reader).map_err(|e| IoError::new(path, format!("not a valid .npy file: {e}")))?;
    let shape = npy.shape().to_vec();
    if shape.len() != 2 || shape[1] != 3 {
        return Err(IoError::new(path, format!("array has shape {shape:?}; an N×3 array of points is needed")));
    }
    let n = shape[0] as usize;
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
    if flat.len() != n * 3 {
        return Err(IoError::new(path, format!("file holds {} values, the header promises {}", flat.len(), n * 3)));
    }
    let mut p = Points::with_capacity(n);
    for i in 0..n {
        let at = |d: usize| match order {
            Order::C => flat[i * 3 + d],
            Order::Fortran => flat[d * n + i],
        };
        p.push(T::from_f64(at(0)), T::from_f64(at(1)), T::from_f64(at(2)));
    }
    Ok(p)
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
