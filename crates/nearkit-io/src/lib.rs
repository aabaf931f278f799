//! File formats for nearkit. Point sets are read by extension — `.csv`, `.npy`, `.ply`
//! (ascii and binary), `.off`, `.obj`, `.stl`, `.xyz`; a mesh's vertices are its points — and
//! results are written as `.csv`, `.json`, `.npy` or `.npz`. Meshes (`read_mesh`) come from
//! `.ply`, `.off`, `.obj` and `.stl` (ascii and binary).
//! Every error names the file and, where it applies, the line or row.

mod collide_output;
mod csv_points;
mod error;
mod npy_points;
mod obj;
mod off;
mod output;
mod ply;
mod stl;
mod xyz;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

pub use collide_output::{write_bodies, write_contacts, write_mesh_ply};
pub use error::{IoError, Location, Result};
pub use output::{
    write_atomically, write_closest_points, write_knn, write_nearest, write_pairs, write_points, OutputFormat,
};

use nearkit::{Mesh, Points, Real, Vectors};

/// Input formats, chosen by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Npy,
    Ply,
    Off,
    Obj,
    Stl,
    Xyz,
}

const EXTENSIONS: &str = ".csv, .npy, .ply, .off, .obj, .stl or .xyz";

impl Format {
    pub fn from_path(path: &Path) -> Result<Format> {
        let ext = path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("csv") => Ok(Format::Csv),
            Some("npy") => Ok(Format::Npy),
            Some("ply") => Ok(Format::Ply),
            Some("off") => Ok(Format::Off),
            Some("obj") => Ok(Format::Obj),
            Some("stl") => Ok(Format::Stl),
            Some("xyz") | Some("txt") => Ok(Format::Xyz),
            Some(e) => Err(IoError::new(path, format!("unknown extension '.{e}': use {EXTENSIONS}"))),
            None => Err(IoError::new(path, format!("no file extension: use {EXTENSIONS}"))),
        }
    }
}

/// How to read a point file.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// CSV only: which columns hold x, y, z — names (with a header) or 0-based indices.
    pub columns: Option<[String; 3]>,
}

/// Reads a point file, choosing the format by its extension.
pub fn read_points<T: Real>(path: &Path, opts: &ReadOptions) -> Result<Points<T>> {
    let format = Format::from_path(path)?;
    let file = std::fs::File::open(path).map_err(|e| IoError::new(path, format!("cannot open: {e}")))?;
    read_points_from(BufReader::with_capacity(1 << 20, file), format, path, opts)
}

/// Reads points from any reader (e.g. one wrapped in a progress bar); `path` names it in errors.
pub fn read_points_from<T: Real, R: Read>(
    reader: R,
    format: Format,
    path: &Path,
    opts: &ReadOptions,
) -> Result<Points<T>> {
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let (points, rows_are_lines) = match format {
        Format::Csv => (csv_points::read(&mut reader, path, opts)?, None),
        Format::Npy => (npy_points::read(&mut reader, path)?, None),
        Format::Ply => (ply::read(&mut reader, path)?, None),
        Format::Obj => (obj::read_mesh(&mut reader, path)?.vertices, None),
        Format::Stl => (stl::read_mesh(&mut reader, path)?.vertices, None),
        Format::Off => off::read(&mut reader, path).map(|(p, lines)| (p, Some(lines)))?,
        Format::Xyz => xyz::read(&mut reader, path).map(|(p, lines)| (p, Some(lines)))?,
    };
    check_finite(&points, path, rows_are_lines.as_deref())?;
    Ok(points)
}

/// The columns of an N×d `.npy` file, from its header alone (`None` if it is not one).
pub fn npy_columns(path: &Path) -> Option<usize> {
    let file = std::fs::File::open(path).ok()?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).ok()?;
    match npy.shape() {
        [_, d] => Some(*d as usize),
        _ => None,
    }
}

/// Reads d-dimensional vectors (1 <= d <= 8) from an N×d `.npy`; other formats give 3-D points.
pub fn read_vectors<T: Real>(path: &Path, opts: &ReadOptions) -> Result<Vectors<T>> {
    if Format::from_path(path)? != Format::Npy {
        return read_points(path, opts).map(|p| Vectors::from_points(&p));
    }
    let file = std::fs::File::open(path).map_err(|e| IoError::new(path, format!("cannot open: {e}")))?;
    let v: Vectors<T> = npy_points::read_vectors(BufReader::with_capacity(1 << 20, file), path)?;
    for (a, c) in v.cols.iter().enumerate() {
        if let Some(i) = c.iter().position(|x| !x.is_finite()) {
            return Err(IoError::at(
                path,
                Location::Row(i),
                format!("coordinate {a} is {}; coordinates must be finite numbers", c[i]),
            ));
        }
    }
    Ok(v)
}

/// Reads a triangle mesh (`.ply`, `.off`, `.obj`, `.stl`), checking indices and coordinates.
pub fn read_mesh<T: Real>(path: &Path) -> Result<Mesh<T>> {
    let format = Format::from_path(path)?;
    let file = std::fs::File::open(path).map_err(|e| IoError::new(path, format!("cannot open: {e}")))?;
    read_mesh_from(file, format, path)
}

/// Reads a mesh from any reader; `path` names it in errors.
pub fn read_mesh_from<T: Real, R: Read>(reader: R, format: Format, path: &Path) -> Result<Mesh<T>> {
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let (mesh, lines) = match format {
        Format::Ply => (ply::read_mesh(&mut reader, path)?, None),
        Format::Off => off::read_mesh(&mut reader, path).map(|(m, l)| (m, Some(l)))?,
        Format::Obj => (obj::read_mesh(&mut reader, path)?, None),
        Format::Stl => (stl::read_mesh(&mut reader, path)?, None),
        _ => return Err(IoError::new(path, "not a mesh format: use .ply, .off, .obj or .stl")),
    };
    if mesh.triangles.is_empty() {
        return Err(IoError::new(path, "the mesh has no faces"));
    }
    check_finite(&mesh.vertices, path, lines.as_deref())?;
    Ok(mesh)
}

/// Non-finite coordinates are an error naming the row (or line) — never silently dropped.
fn check_finite<T: Real>(p: &Points<T>, path: &Path, lines: Option<&[usize]>) -> Result<()> {
    for i in 0..p.len() {
        for (axis, v) in [('x', p.x[i]), ('y', p.y[i]), ('z', p.z[i])] {
            if !v.is_finite() {
                let loc = match lines {
                    Some(l) => Location::Line(l[i]),
                    None => Location::Row(i),
                };
                return Err(IoError::at(
                    path,
                    loc,
                    format!("coordinate {axis} is {v}; coordinates must be finite numbers"),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn read_line<R: BufRead>(r: &mut R, buf: &mut String, path: &Path) -> Result<usize> {
    buf.clear();
    r.read_line(buf).map_err(|e| IoError::new(path, format!("read failed: {e}")))
}

/// The first three fields of a text line as coordinates (OFF and XYZ share this).
pub(crate) fn parse_xyz<T: Real>(fields: &[&str], path: &Path, line: usize) -> Result<[T; 3]> {
    if fields.len() < 3 {
        return Err(IoError::at(path, Location::Line(line), format!("{} columns, 3 are needed (x y z)", fields.len())));
    }
    let mut v = [T::ZERO; 3];
    for d in 0..3 {
        let x: f64 = fields[d]
            .parse()
            .map_err(|_| IoError::at(path, Location::Line(line), format!("'{}' is not a number", fields[d])))?;
        v[d] = T::from_f64(x);
    }
    Ok(v)
}

/// A heightfield terrain from a 2-D `.npy` array of heights (rows along y, columns along x),
/// `spacing` apart.
pub fn read_heightfield(path: &Path, spacing: f64) -> Result<Mesh<f64>> {
    let file = std::fs::File::open(path).map_err(|e| IoError::new(path, format!("cannot open: {e}")))?;
    let (heights, rows, cols) = npy_points::read_heights(BufReader::new(file), path)?;
    Ok(nearkit::collide::scene::heightfield(&heights, rows, cols, spacing))
}
