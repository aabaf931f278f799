//! OFF meshes: vertices, then polygon faces (split into triangle fans).

use std::io::BufRead;
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::{parse_xyz, read_line, IoError, Location, Result};

/// Returns the vertices and each vertex's 1-based line number.
pub fn read<T: Real, R: BufRead>(r: &mut R, path: &Path) -> Result<(Points<T>, Vec<usize>)> {
    read_off(r, path, false).map(|(m, lines)| (m.vertices, lines))
}

/// Returns the mesh (faces too) and each vertex's 1-based line number.
pub fn read_mesh<T: Real, R: BufRead>(r: &mut R, path: &Path) -> Result<(Mesh<T>, Vec<usize>)> {
    read_off(r, path, true)
}

fn read_off<T: Real, R: BufRead>(r: &mut R, path: &Path, faces: bool) -> Result<(Mesh<T>, Vec<usize>)> {
    let mut buf = String::new();
    let mut line = 0usize;
    // Next non-empty, non-comment line, split into fields.
    let mut next = |r: &mut R, line: &mut usize| -> Result<Option<Vec<String>>> {
        loop {
            if read_line(r, &mut buf, path)? == 0 {
                return Ok(None);
            }
            *line += 1;
            let content = buf.split('#').next().unwrap_or("").trim();
            if !content.is_empty() {
                return Ok(Some(content.split_whitespace().map(str::to_string).collect()));
            }
        }
    };
    let first = next(r, &mut line)?.ok_or_else(|| IoError::new(path, "empty file: an OFF header is needed"))?;
    if !first[0].ends_with("OFF") {
        return Err(IoError::at(path, Location::Line(line), format!("expected 'OFF', found '{}'", first[0])));
    }
    if first[0] != "OFF" {
        return Err(IoError::at(
            path,
            Location::Line(line),
            format!("'{}' files are not supported: only plain OFF", first[0]),
        ));
    }
    // The counts may follow OFF on the same line.
    let counts = if first.len() > 1 {
        first[1..].to_vec()
    } else {
        next(r, &mut line)?.ok_or_else(|| IoError::new(path, "missing vertex/face counts"))?
    };
    let nv: usize = counts
        .first()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| IoError::at(path, Location::Line(line), "expected the vertex count"))?;
    let mut p = Points::with_capacity(nv);
    let mut lines = Vec::with_capacity(nv);
    for i in 0..nv {
        let f =
            next(r, &mut line)?.ok_or_else(|| IoError::new(path, format!("file ends after {i} of {nv} vertices")))?;
        let fields: Vec<&str> = f.iter().map(String::as_str).collect();
        let v = parse_xyz::<T>(&fields, path, line)?;
        p.push(v[0], v[1], v[2]);
        lines.push(line);
    }
    let mut triangles = Vec::new();
    if faces {
        let nf: usize = counts
            .get(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| IoError::new(path, "the header has no face count"))?;
        triangles.reserve(nf);
        for i in 0..nf {
            let f =
                next(r, &mut line)?.ok_or_else(|| IoError::new(path, format!("file ends after {i} of {nf} faces")))?;
            let at = |m: String| IoError::at(path, Location::Line(line), m);
            let n: usize = f[0].parse().map_err(|_| at(format!("'{}' is not a vertex count", f[0])))?;
            if n < 3 || f.len() < n + 1 {
                return Err(at(format!("a face needs a count >= 3 and that many indices (found '{}')", f.join(" "))));
            }
            let mut idx = Vec::with_capacity(n);
            for s in &f[1..=n] {
                let v: u32 = s.parse().map_err(|_| at(format!("'{s}' is not a vertex index")))?;
                if v as usize >= nv {
                    return Err(at(format!("vertex index {v} is out of range (the file has {nv} vertices)")));
                }
                idx.push(v);
            }
            // A polygon becomes a fan of triangles around its first corner.
            for j in 1..n - 1 {
                triangles.push([idx[0], idx[j], idx[j + 1]]);
            }
        }
    }
    Ok((Mesh { vertices: p, triangles }, lines))
}
