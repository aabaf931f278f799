//! STL (ascii and binary): triangles with their corners merged into shared vertices by
//! stl_io. STL stores f32, so f64 reads are f32 values widened.

use std::io::{Cursor, Read};
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::{IoError, Result};

pub fn read_mesh<T: Real, R: Read>(reader: &mut R, path: &Path) -> Result<Mesh<T>> {
    // stl_io needs Seek (to tell ascii from binary); STL files are read whole anyway.
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|e| IoError::new(path, format!("read failed: {e}")))?;
    let m = stl_io::read_stl(&mut Cursor::new(bytes))
        .map_err(|e| IoError::new(path, format!("not a valid STL file: {e}")))?;
    let mut vertices = Points::with_capacity(m.vertices.len());
    for v in &m.vertices {
        let [x, y, z] = v.0;
        vertices.push(T::from_f64(x as f64), T::from_f64(y as f64), T::from_f64(z as f64));
    }
    let triangles = m.faces.iter().map(|f| f.vertices.map(|v| v as u32)).collect();
    Ok(Mesh { vertices, triangles })
}
