//! Wavefront OBJ: `v` positions and `f` faces (polygons triangulated by tobj); materials,
//! normals and texture coordinates are ignored.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::{IoError, Result};

pub fn read_mesh<T: Real, R: BufRead>(reader: &mut R, path: &Path) -> Result<Mesh<T>> {
    let opts = tobj::LoadOptions { triangulate: true, single_index: false, ..Default::default() };
    let (models, _) = tobj::load_obj_buf(reader, &opts, |_| Err(tobj::LoadError::OpenFileFailed))
        .map_err(|e| IoError::new(path, format!("not a valid OBJ file: {e}")))?;
    let mut vertices = Points::with_capacity(0);
    let mut triangles = Vec::new();
    // tobj numbers each model's positions from 0; concatenate with offsets.
    for m in &models {
        let base = vertices.len() as u32;
        let pos = &m.mesh.positions;
        for v in pos.chunks_exact(3) {
            vertices.push(T::from_f64(v[0]), T::from_f64(v[1]), T::from_f64(v[2]));
        }
        let nv = (pos.len() / 3) as u32;
        for (t, f) in m.mesh.indices.chunks_exact(3).enumerate() {
            if let Some(&v) = f.iter().find(|&&v| v >= nv) {
                return Err(IoError::new(path, format!("face {t} of '{}' uses vertex {v} of {nv}", m.name)));
            }
            triangles.push([base + f[0], base + f[1], base + f[2]]);
        }
    }
    if vertices.is_empty() {
        return Err(IoError::new(path, "no vertices ('v x y z' lines) in the OBJ file"));
    }
    Ok(Mesh { vertices, triangles })
}
