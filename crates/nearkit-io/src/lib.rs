//! File formats for nearkit. Point sets are read by extension — `.csv`, `.npy`, `.ply`
//! (ascii and binary), `.off`, `.obj`, `.stl`, `.xyz`; a mesh's vertices are its points — and
//! results are written as `.csv`, `.json`, `.npy` or `.npz`. Meshes (`read_mesh`) come from
//! `.ply`, `.off`, `.obj` and `.stl` (ascii and binary).
//! Every error names the file and, where it applies, the line or row.

mod collide_output;
mod csv_points;
mod error;
mod input;
mod npy_points;
mod obj;
mod off;
mod output;
mod ply;
mod stl;
mod xyz;

use std::io::{BufRead, BufReader, Read};

use input::Source;
use std::path::Path;

pub use collide_output::{write_bodies, write_contacts, write_mesh_ply};
pub use error::{IoError, Location, Result};
pub use output::{
    refuse_overwriting_inputs, same_file, write_atomically, write_closest_points, write_counts, write_knn,
    write_nearest, write_pairs, write_points, write_together, write_within, OutputFormat, Part, WithinLayout,
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
    let (file, size) = input::open(path)?;
    read_points_source(Source::new(BufReader::with_capacity(1 << 20, file), size), format, path, opts)
}

/// Reads points from any reader (e.g. one wrapped in a progress bar); `path` names it in errors.
/// Counts in headers are checked as data arrives; `read_points_from_sized` checks them first.
pub fn read_points_from<T: Real, R: Read>(
    reader: R,
    format: Format,
    path: &Path,
    opts: &ReadOptions,
) -> Result<Points<T>> {
    read_points_source(Source::new(BufReader::with_capacity(1 << 20, reader), None), format, path, opts)
}

/// Reads points from a reader of `size` bytes in all (a file's length): a header that promises
/// more than that is an error before anything is allocated for it. Room is reserved on the
/// strength of `size`, so it must be the reader's true length.
pub fn read_points_from_sized<T: Real, R: Read>(
    reader: R,
    size: u64,
    format: Format,
    path: &Path,
    opts: &ReadOptions,
) -> Result<Points<T>> {
    read_points_source(Source::new(BufReader::with_capacity(1 << 20, reader), Some(size)), format, path, opts)
}

fn read_points_source<T: Real, R: BufRead>(
    mut src: Source<R>,
    format: Format,
    path: &Path,
    opts: &ReadOptions,
) -> Result<Points<T>> {
    let src = &mut src;
    check_columns(format, path, opts)?;
    let points = match format {
        Format::Csv => csv_points::read(src, path, opts)?,
        Format::Npy => npy_points::read(src, path)?,
        Format::Ply => ply::read(src, path)?,
        Format::Obj => obj::read(src, path, false)?.vertices,
        Format::Stl => stl::read_mesh(src, path)?.vertices,
        Format::Off => off::read(src, path)?,
        Format::Xyz => xyz::read(src, path)?,
    };
    check_finite(&points, path)?;
    Ok(points)
}

/// Columns are picked in CSV files only: anywhere else they would be ignored unseen.
fn check_columns(format: Format, path: &Path, opts: &ReadOptions) -> Result<()> {
    if opts.columns.is_some() && format != Format::Csv {
        return Err(IoError::new(path, "columns (x, y, z) can be picked in .csv files only: this file is not one"));
    }
    Ok(())
}

/// The columns of an N×d `.npy` file, from its header alone (`None` if it is not one).
pub fn npy_columns(path: &Path) -> Option<usize> {
    let (file, size) = input::open(path).ok()?;
    let header = npy_points::read_header(&mut Source::new(BufReader::new(file), size), path).ok()?;
    match header.shape[..] {
        [_, d] => usize::try_from(d).ok(),
        _ => None,
    }
}

/// Reads d-dimensional vectors (1 <= d <= 8) from an N×d `.npy`; other formats give 3-D points.
pub fn read_vectors<T: Real>(path: &Path, opts: &ReadOptions) -> Result<Vectors<T>> {
    if Format::from_path(path)? != Format::Npy {
        return read_points(path, opts).map(|p| Vectors::from_points(&p));
    }
    check_columns(Format::Npy, path, opts)?;
    let (file, size) = input::open(path)?;
    npy_points::read_vectors(&mut Source::new(BufReader::with_capacity(1 << 20, file), size), path)
}

/// Reads a triangle mesh (`.ply`, `.off`, `.obj`, `.stl`), checking indices and coordinates.
pub fn read_mesh<T: Real>(path: &Path) -> Result<Mesh<T>> {
    let format = Format::from_path(path)?;
    let (file, size) = input::open(path)?;
    read_mesh_source(Source::new(BufReader::with_capacity(1 << 20, file), size), format, path)
}

/// Reads a mesh from any reader; `path` names it in errors.
pub fn read_mesh_from<T: Real, R: Read>(reader: R, format: Format, path: &Path) -> Result<Mesh<T>> {
    read_mesh_source(Source::new(BufReader::with_capacity(1 << 20, reader), None), format, path)
}

/// Reads a mesh from a reader of `size` bytes in all, checking header counts against it first.
pub fn read_mesh_from_sized<T: Real, R: Read>(reader: R, size: u64, format: Format, path: &Path) -> Result<Mesh<T>> {
    read_mesh_source(Source::new(BufReader::with_capacity(1 << 20, reader), Some(size)), format, path)
}

fn read_mesh_source<T: Real, R: BufRead>(mut src: Source<R>, format: Format, path: &Path) -> Result<Mesh<T>> {
    let src = &mut src;
    let mesh = match format {
        Format::Ply => ply::read_mesh(src, path)?,
        Format::Off => off::read_mesh(src, path)?,
        Format::Obj => obj::read(src, path, true)?,
        Format::Stl => stl::read_mesh(src, path)?,
        _ => return Err(IoError::new(path, "not a mesh format: use .ply, .off, .obj or .stl")),
    };
    if mesh.triangles.is_empty() {
        return Err(IoError::new(path, "the mesh has no faces"));
    }
    check_finite(&mesh.vertices, path)?;
    Ok(mesh)
}

/// Every reader checks its coordinates where it knows the line or record; this is the backstop.
fn check_finite<T: Real>(p: &Points<T>, path: &Path) -> Result<()> {
    for i in 0..p.len() {
        for (axis, v) in [p.x[i], p.y[i], p.z[i]].into_iter().enumerate() {
            if !v.is_finite() {
                let m = input::coord::<T>(v.to_f64(), input::AXES[axis], None).err().unwrap_or_default();
                return Err(IoError::at(path, Location::Row(i), m));
            }
        }
    }
    Ok(())
}

/// A heightfield terrain from a 2-D `.npy` array of heights (rows along y, columns along x),
/// `spacing` apart, sample (0, 0) at the origin.
pub fn read_heightfield(path: &Path, spacing: f64) -> Result<nearkit::collide::Heightfield> {
    let (file, size) = input::open(path)?;
    let (heights, rows, cols) = npy_points::read_heights(&mut Source::new(BufReader::new(file), size), path)?;
    nearkit::collide::Heightfield::new(heights, rows, cols, spacing, [0.0, 0.0])
        .map_err(|e| IoError::new(path, e.to_string()))
}
