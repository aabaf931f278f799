//! OFF meshes: vertices, then polygon faces (split into triangle fans).

use std::io::BufRead;
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::input::{parse_xyz, Lines, Source};
use crate::{IoError, Location, Result};

/// The shortest vertex line, `0 0 0` and its line break.
const MIN_VERTEX_BYTES: u64 = 6;
/// The shortest face line, `3 0 1 2` and its line break, less one: a face of two corners
/// (`2 0 1`) then gets its own error, not one about the bytes left.
const MIN_FACE_BYTES: u64 = 7;

pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Points<T>> {
    read_off(src, path, false).map(|m| m.vertices)
}

pub fn read_mesh<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Mesh<T>> {
    read_off(src, path, true)
}

fn read_off<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path, faces: bool) -> Result<Mesh<T>> {
    let mut lines = Lines::new(src, path);
    let first: Vec<String> = match lines.next_content()? {
        Some((_, l)) => l.split_whitespace().map(str::to_string).collect(),
        None => return Err(IoError::new(path, "empty file: an OFF header is needed")),
    };
    let at = |line: usize, m: String| IoError::at(path, Location::Line(line), m);
    if !first[0].ends_with("OFF") {
        return Err(at(lines.number, format!("expected 'OFF', found '{}'", first[0])));
    }
    // ST (texture coordinates), C (colours) and N (normals) add values after a vertex's x,
    // y, z, which are read alone; 4OFF and nOFF have other coordinates.
    const THREE_D: [&str; 8] = ["OFF", "COFF", "NOFF", "CNOFF", "STOFF", "STCOFF", "STNOFF", "STCNOFF"];
    if !THREE_D.contains(&first[0].as_str()) {
        return Err(at(
            lines.number,
            format!("'{}' files are not supported: only OFF (and COFF, NOFF, STOFF: 3-D vertices)", first[0]),
        ));
    }
    // The counts may follow OFF on the same line.
    let counts: Vec<String> = if first.len() > 1 {
        first[1..].to_vec()
    } else {
        match lines.next_content()? {
            Some((_, l)) => l.split_whitespace().map(str::to_string).collect(),
            None => return Err(IoError::new(path, "missing vertex/face counts")),
        }
    };
    let counts_line = lines.number;
    let count = |i: usize, what: &str| -> Result<u64> {
        let c = counts.get(i).ok_or_else(|| at(counts_line, format!("the header has no {what} count")))?;
        c.parse().map_err(|_| at(counts_line, format!("the {what} count '{c}' is not a whole number")))
    };
    if counts.first().map(String::as_str) == Some("BINARY") {
        return Err(at(counts_line, "binary OFF is not supported: only text OFF".into()));
    }
    let nv = count(0, "vertex")?;
    // The faces are read (and checked) even for the points alone: a wrong vertex count shows
    // there, where it would otherwise drop a vertex or read a face as one.
    let nf = count(1, "face")?;
    let (nv, cap) = lines.source().check_count(
        path,
        Some(Location::Line(counts_line)),
        nv,
        ("vertices", "vertex"),
        MIN_VERTEX_BYTES,
    )?;
    let mut p = Points::with_capacity(cap);
    for i in 0..nv {
        let Some((line, l)) = lines.next_content()? else {
            return Err(IoError::new(path, format!("file ends after {i} of {nv} vertices")));
        };
        let fields: Vec<&str> = l.split_whitespace().collect();
        let v = parse_xyz::<T>(&fields, path, line)?;
        p.push(v[0], v[1], v[2]);
    }
    let mut triangles = Vec::new();
    {
        let (nf, cap) = lines.source().check_count(
            path,
            Some(Location::Line(counts_line)),
            nf,
            ("faces", "face"),
            MIN_FACE_BYTES,
        )?;
        if faces {
            triangles.reserve(cap);
        }
        let mut idx = Vec::new();
        for i in 0..nf {
            let Some((line, l)) = lines.next_content()? else {
                return Err(IoError::new(path, format!("file ends after {i} of {nf} faces")));
            };
            let f: Vec<&str> = l.split_whitespace().collect();
            let n: usize = f[0].parse().map_err(|_| at(line, format!("'{}' is not a vertex count", f[0])))?;
            // Colours may follow the indices; fewer indices than the count is an error.
            if n < 3 || f.len() - 1 < n {
                return Err(at(
                    line,
                    format!("a face needs a count >= 3 and that many indices (found '{}')", f.join(" ")),
                ));
            }
            idx.clear();
            for s in &f[1..=n] {
                let v: u32 = s.parse().map_err(|_| at(line, format!("'{s}' is not a vertex index")))?;
                if v as usize >= nv {
                    return Err(at(line, format!("vertex index {v} is out of range (the file has {nv} vertices)")));
                }
                idx.push(v);
            }
            // A polygon becomes a fan of triangles around its first corner.
            for j in (1..n - 1).filter(|_| faces) {
                triangles.push([idx[0], idx[j], idx[j + 1]]);
            }
        }
        // Faces past the declared count would be dropped unseen.
        if let Some((line, _)) = lines.next_content()? {
            return Err(at(
                line,
                format!("more lines after the {nv} vertices and {nf} faces the header declares: fix the counts"),
            ));
        }
    }
    Ok(Mesh { vertices: p, triangles })
}
