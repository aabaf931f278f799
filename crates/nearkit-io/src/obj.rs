//! Wavefront OBJ: `v` positions and `f` faces (polygons split into triangle fans); materials,
//! normals, texture coordinates and groups are ignored. Vertices keep the file's order, so
//! vertex i of the mesh is the file's vertex i + 1.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::input::{parse_xyz, Lines, Source};
use crate::{IoError, Location, Result};

/// Reads the vertices, and with `faces` the triangles; lines and points (`l`, `p`) are not
/// triangles, so a mesh read rejects them.
pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path, faces: bool) -> Result<Mesh<T>> {
    let mut vertices = Points::with_capacity(0);
    let mut triangles: Vec<[u32; 3]> = Vec::new();
    // Faces may name vertices defined further down: the largest index is checked at the end.
    let mut largest: Option<(u64, usize)> = None;
    let mut corners: Vec<u32> = Vec::new();
    let mut lines = Lines::new(src, path);
    while let Some((line, content)) = lines.next_content()? {
        let at = |m: String| IoError::at(path, Location::Line(line), m);
        let mut fields = content.split_whitespace();
        let keyword = fields.next().unwrap_or("");
        match keyword {
            "v" => {
                let f: Vec<&str> = fields.collect();
                let v = parse_xyz::<T>(&f, path, line)?;
                vertices.push(v[0], v[1], v[2]);
            }
            "f" | "fo" if faces => {
                corners.clear();
                for token in fields {
                    // `v`, `v/vt`, `v//vn` or `v/vt/vn`: only the position index matters.
                    let s = token.split('/').next().unwrap_or("");
                    let i: i64 = s.parse().map_err(|_| at(format!("'{token}' is not a vertex index")))?;
                    let n = vertices.len() as i64;
                    let index = match i {
                        0 => return Err(at("vertex index 0: OBJ numbers vertices from 1".into())),
                        i if i > 0 => i - 1,
                        // Negative indices count back from the latest vertex.
                        i if n + i >= 0 => n + i,
                        i => return Err(at(format!("vertex index {i} reaches before the first vertex ({n} so far)"))),
                    };
                    let index = u32::try_from(index)
                        .map_err(|_| at(format!("vertex index {i} is beyond what a mesh can index")))?;
                    if largest.is_none_or(|(l, _)| u64::from(index) > l) {
                        largest = Some((u64::from(index), line));
                    }
                    corners.push(index);
                }
                if corners.len() < 3 {
                    return Err(at(format!(
                        "a face needs at least 3 corners, this one has {}: not a triangle mesh",
                        corners.len()
                    )));
                }
                // A polygon becomes a fan of triangles around its first corner.
                for j in 1..corners.len() - 1 {
                    triangles.push([corners[0], corners[j], corners[j + 1]]);
                }
            }
            "l" | "p" | "curv" | "curv2" | "surf" if faces => {
                let what = match keyword {
                    "l" => "a line",
                    "p" => "a point",
                    _ => "a free-form curve or surface",
                };
                return Err(at(format!(
                    "'{keyword}' is {what}, not a triangle: a mesh needs 'f' faces of 3 or more corners"
                )));
            }
            _ => {}
        }
    }
    if vertices.is_empty() {
        return Err(IoError::new(path, "no vertices ('v x y z' lines) in the OBJ file"));
    }
    if let Some((index, line)) = largest {
        if index >= vertices.len() as u64 {
            return Err(IoError::at(
                path,
                Location::Line(line),
                format!("face uses vertex {}, but the OBJ file has {} vertices", index + 1, vertices.len()),
            ));
        }
    }
    Ok(Mesh { vertices, triangles })
}
