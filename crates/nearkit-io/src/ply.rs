//! PLY: the `vertex` element's x, y, z and the `face` element's index lists (ascii, binary
//! little- and big-endian).

use std::io::BufRead;
use std::path::Path;

use nearkit::{Mesh, Points, Real};
use ply_rs::parser::Parser;
use ply_rs::ply::{DefaultElement, Property, PropertyAccess};

use crate::{IoError, Result};

/// A vertex as parsed: only the coordinates are kept.
struct Vertex([Option<f64>; 3]);

impl PropertyAccess for Vertex {
    fn new() -> Self {
        Vertex([None; 3])
    }
    fn set_property(&mut self, name: String, p: Property) {
        let d = match name.as_str() {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => return,
        };
        self.0[d] = match p {
            Property::Float(v) => Some(v as f64),
            Property::Double(v) => Some(v),
            Property::Int(v) => Some(v as f64),
            Property::UInt(v) => Some(v as f64),
            Property::Short(v) => Some(v as f64),
            Property::UShort(v) => Some(v as f64),
            Property::Char(v) => Some(v as f64),
            Property::UChar(v) => Some(v as f64),
            _ => None,
        };
    }
}

/// ply-rs's messages span several lines; keep them to one.
fn one_line(e: &std::io::Error) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A face as parsed: its vertex index list (`vertex_indices` or `vertex_index`).
struct Face(Option<Vec<i64>>);

impl PropertyAccess for Face {
    fn new() -> Self {
        Face(None)
    }
    fn set_property(&mut self, name: String, p: Property) {
        if name != "vertex_indices" && name != "vertex_index" {
            return;
        }
        let list: Vec<i64> = match p {
            Property::ListInt(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUInt(v) => v.into_iter().map(i64::from).collect(),
            Property::ListShort(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUShort(v) => v.into_iter().map(i64::from).collect(),
            Property::ListChar(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUChar(v) => v.into_iter().map(i64::from).collect(),
            _ => return,
        };
        self.0 = Some(list);
    }
}

pub fn read<T: Real, R: BufRead>(reader: &mut R, path: &Path) -> Result<Points<T>> {
    read_ply(reader, path, false).map(|m| m.vertices)
}

pub fn read_mesh<T: Real, R: BufRead>(reader: &mut R, path: &Path) -> Result<Mesh<T>> {
    read_ply(reader, path, true)
}

fn read_ply<T: Real, R: BufRead>(reader: &mut R, path: &Path, faces: bool) -> Result<Mesh<T>> {
    let bad = |e: std::io::Error| IoError::new(path, format!("not a valid PLY file: {}", one_line(&e)));
    let vparser = Parser::<Vertex>::new();
    let header = vparser.read_header(reader).map_err(bad)?;
    let mut points = Points::with_capacity(0);
    let mut triangles = Vec::new();
    let mut have_vertices = false;
    for (name, def) in header.elements.iter() {
        if name == "face" && faces {
            if !have_vertices {
                return Err(IoError::new(path, "the face element comes before the vertex element"));
            }
            let fs = Parser::<Face>::new().read_payload_for_element(reader, def, &header).map_err(|e| {
                IoError::new(
                    path,
                    format!("truncated or malformed face data ({} faces promised): {}", def.count, one_line(&e)),
                )
            })?;
            let nv = points.len() as i64;
            for (i, f) in fs.iter().enumerate() {
                let Some(idx) = &f.0 else {
                    return Err(IoError::new(path, "the face element has no vertex_indices list"));
                };
                let at = |m: String| IoError::at(path, crate::Location::Row(i), m);
                if idx.len() < 3 {
                    return Err(at(format!("face {i} has {} corners; at least 3 are needed", idx.len())));
                }
                if let Some(&v) = idx.iter().find(|&&v| v < 0 || v >= nv) {
                    return Err(at(format!("face {i}: vertex index {v} is out of range (the file has {nv} vertices)")));
                }
                for j in 1..idx.len() - 1 {
                    triangles.push([idx[0] as u32, idx[j] as u32, idx[j + 1] as u32]);
                }
            }
            continue;
        }
        if name == "vertex" {
            for p in ["x", "y", "z"] {
                if !def.properties.contains_key(p) {
                    return Err(IoError::new(path, format!("the vertex element has no '{p}' property")));
                }
            }
            let verts = vparser.read_payload_for_element(reader, def, &header).map_err(|e| {
                IoError::new(
                    path,
                    format!("truncated or malformed vertex data ({} vertices promised): {}", def.count, one_line(&e)),
                )
            })?;
            for (i, v) in verts.iter().enumerate() {
                let [Some(x), Some(y), Some(z)] = v.0 else {
                    return Err(IoError::at(path, crate::Location::Row(i), "vertex x, y, z must be scalar numbers"));
                };
                points.push(T::from_f64(x), T::from_f64(y), T::from_f64(z));
            }
            have_vertices = true;
            if !faces {
                return Ok(Mesh { vertices: points, triangles });
            }
            continue;
        }
        // Elements before the vertices (rare) are read and dropped.
        Parser::<DefaultElement>::new().read_payload_for_element(reader, def, &header).map_err(bad)?;
    }
    if !have_vertices {
        return Err(IoError::new(path, "no 'vertex' element in the PLY header"));
    }
    Ok(Mesh { vertices: points, triangles })
}
