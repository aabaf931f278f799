//! PLY points: the `vertex` element's x, y, z (ascii, binary little- and big-endian).

use std::io::BufRead;
use std::path::Path;

use nearkit::{Points, Real};
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

pub fn read<T: Real, R: BufRead>(reader: &mut R, path: &Path) -> Result<Points<T>> {
    let bad = |e: std::io::Error| IoError::new(path, format!("not a valid PLY file: {}", one_line(&e)));
    let vparser = Parser::<Vertex>::new();
    let header = vparser.read_header(reader).map_err(bad)?;
    let mut points = Points::with_capacity(0);
    for (name, def) in header.elements.iter() {
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
            return Ok(points);
        }
        // Elements before the vertices (rare) are read and dropped.
        Parser::<DefaultElement>::new().read_payload_for_element(reader, def, &header).map_err(bad)?;
    }
    Err(IoError::new(path, "no 'vertex' element in the PLY header"))
}
