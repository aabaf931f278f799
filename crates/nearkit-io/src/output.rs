//! Writing results and points. Files are written to a temporary name and renamed into place,
//! so a failed run never leaves a partial output file behind.

use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use nearkit::{ClosestPoints, Knn, Nearest, Pair, Points, Real, NO_ID};
use serde::Serialize;

use crate::{IoError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Csv,
    Json,
    Npy,
}

impl OutputFormat {
    pub fn from_path(path: &Path) -> Result<Self> {
        match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
            Some("csv") => Ok(Self::Csv),
            Some("json") => Ok(Self::Json),
            Some("npy") => Ok(Self::Npy),
            _ => Err(IoError::new(path, "unknown output extension: use .csv, .json or .npy")),
        }
    }
}

/// Writes through `f` into a temporary file beside `path`, then renames it into place. A
/// symbolic link is written through: its target is replaced and the link kept. A target that is
/// not a regular file (`/dev/null`, a pipe) cannot be renamed over and is written straight to.
/// Every failure, a full disk included, is an error naming `path`.
pub fn write_atomically(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    write_file(path, |w| f(w))
}

/// [`write_atomically`] handing `f` the file itself (buffered), which can also seek.
fn write_file(path: &Path, f: impl FnOnce(&mut BufWriter<std::fs::File>) -> io::Result<()>) -> Result<()> {
    let target = resolve_links(path).map_err(|e| write_error(path, &e))?;
    let existing = std::fs::metadata(&target).ok();
    if let Some(m) = &existing {
        if m.is_dir() {
            return Err(IoError::new(path, "is a directory, not a file"));
        }
        if !m.is_file() {
            let result = (|| {
                let mut w = BufWriter::new(std::fs::OpenOptions::new().write(true).open(&target)?);
                f(&mut w)?;
                w.flush()
            })();
            return result.map_err(|e| write_error(path, &e));
        }
    }
    let tmp = beside(&target, "tmp");
    let result = (|| {
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        // A replaced file keeps its permissions.
        if let Some(m) = &existing {
            file.set_permissions(m.permissions())?;
        }
        let mut w = BufWriter::with_capacity(1 << 20, file);
        f(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        // Some file systems report a full disk only here.
        file.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        write_error(path, &e)
    })
}

fn write_error(path: &Path, e: &io::Error) -> IoError {
    match e.kind() {
        io::ErrorKind::IsADirectory => IoError::new(path, "is a directory, not a file"),
        _ => IoError::new(path, format!("cannot write: {e}")),
    }
}

/// A name of its own beside `target` for one write (`.name.pid-n.kind`), so that threads
/// writing the same path at once never share a temporary file.
fn beside(target: &Path, kind: &str) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(".{name}.{}-{n}.{kind}", std::process::id()))
}

/// One file of [`write_together`]: where it goes, and how to write it (into the path given).
pub type Part<'a> = (&'a Path, Box<dyn FnOnce(&Path) -> Result<()> + 'a>);

/// Writes several files as one: each into a fresh file beside its target (links followed),
/// then all renamed into place, each keeping the permissions of the file it replaces. If any
/// write fails, the fresh files are removed and every target is left as it was. (Targets that
/// are not regular files, a pipe or `/dev/null`, are written straight to, after the others.)
pub fn write_together(parts: Vec<Part<'_>>) -> Result<()> {
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut direct = Vec::new();
    let undo = |staged: &[(PathBuf, PathBuf)]| {
        for (s, _) in staged {
            let _ = std::fs::remove_file(s);
        }
    };
    for (path, write) in parts {
        let target = resolve_links(path).map_err(|e| write_error(path, &e))?;
        match std::fs::metadata(&target) {
            Ok(m) if m.is_dir() => {
                undo(&staged);
                return Err(IoError::new(path, "is a directory, not a file"));
            }
            Ok(m) if !m.is_file() => {
                direct.push((path, write));
                continue;
            }
            _ => {}
        }
        let fresh = beside(&target, "staged");
        // The error names the file asked for, not the fresh one.
        if let Err(e) = write(&fresh).map_err(|e| IoError { path: path.to_path_buf(), ..e }) {
            let _ = std::fs::remove_file(&fresh);
            undo(&staged);
            return Err(e);
        }
        staged.push((fresh, target));
    }
    for (i, (fresh, target)) in staged.iter().enumerate() {
        if let Ok(m) = std::fs::metadata(target) {
            let _ = std::fs::set_permissions(fresh, m.permissions());
        }
        if let Err(e) = std::fs::rename(fresh, target) {
            undo(&staged[i..]);
            return Err(write_error(target, &e));
        }
    }
    direct.into_iter().try_for_each(|(path, write)| write(path))
}

/// The file `path` names once symbolic links are followed; a dangling link gives the file that
/// writing through it creates.
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // As many links as Linux follows before it gives up (ELOOP).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(c) = std::fs::canonicalize(&p) {
                    return Ok(c);
                }
                let t = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if t.is_relative() => dir.join(t),
                    _ => t,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// The absolute form of `path` with links resolved, also for a file not yet written (its
/// directory resolved, its name kept).
fn canonical(path: &Path) -> PathBuf {
    let p = resolve_links(path).unwrap_or_else(|_| path.to_path_buf());
    if let Ok(c) = std::fs::canonicalize(&p) {
        return c;
    }
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p,
    }
}

/// An error when `out` names the same file as one of `inputs` — by the same name, another
/// spelling of it, a symbolic link or a hard link: writing it would destroy an input. Outputs
/// that are not regular files (`/dev/null`) destroy nothing and pass.
pub fn refuse_overwriting_inputs(out: &Path, inputs: &[&Path]) -> Result<()> {
    let out_meta = std::fs::metadata(out).ok();
    if out_meta.as_ref().is_some_and(|m| !m.is_file()) {
        return Ok(());
    }
    for input in inputs {
        if same_file(out, input) {
            let aka = if *input == out { String::new() } else { format!(" ({})", input.display()) };
            return Err(IoError::new(out, format!("--out is one of the inputs{aka}: choose another file")));
        }
    }
    Ok(())
}

/// Whether `a` and `b` name the same file — by the same name, another spelling of it, a
/// symbolic link or a hard link — whether or not it exists yet.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let linked = match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => same_inode(&a, &b),
        _ => false,
    };
    linked || canonical(a) == canonical(b)
}

#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

#[derive(Serialize)]
struct PairRow {
    rank: usize,
    a: u32,
    b: u32,
    distance: f64,
}

/// Pairs as `.csv` (`rank,a,b,distance`, ranks from 1), `.json` (array of those records) or
/// `.npy` (N×4 float64: rank, a, b, distance — ids are exact in float64).
pub fn write_pairs<T: Real>(path: &Path, pairs: &[Pair<T>]) -> Result<()> {
    let format = OutputFormat::from_path(path)?;
    write_atomically(path, |w| match format {
        OutputFormat::Csv => {
            writeln!(w, "rank,a,b,distance")?;
            for (i, p) in pairs.iter().enumerate() {
                writeln!(w, "{},{},{},{}", i + 1, p.a, p.b, p.distance)?;
            }
            Ok(())
        }
        OutputFormat::Json => {
            let rows: Vec<PairRow> = pairs
                .iter()
                .enumerate()
                .map(|(i, p)| PairRow { rank: i + 1, a: p.a, b: p.b, distance: p.distance.to_f64() })
                .collect();
            serde_json::to_writer_pretty(&mut *w, &rows)?;
            writeln!(w)
        }
        OutputFormat::Npy => write_npy_f64(
            w,
            pairs.len(),
            4,
            pairs.iter().enumerate().flat_map(|(i, p)| [(i + 1) as f64, p.a as f64, p.b as f64, p.distance.to_f64()]),
        ),
    })
}

/// Each A's nearest B: `.csv` (`a,b,distance`; b = -1 and distance = inf when none lies
/// within the max distance), `.json`, or `.npy` (N×3 float64: a, b, distance).
pub fn write_nearest<T: Real>(path: &Path, n: &Nearest<T>) -> Result<()> {
    let format = OutputFormat::from_path(path)?;
    let b = |i: usize| if n.b[i] == NO_ID { -1i64 } else { n.b[i] as i64 };
    write_atomically(path, |w| match format {
        OutputFormat::Csv => {
            writeln!(w, "a,b,distance")?;
            for i in 0..n.b.len() {
                writeln!(w, "{},{},{}", i, b(i), n.distance[i])?;
            }
            Ok(())
        }
        OutputFormat::Json => {
            #[derive(Serialize)]
            struct Row {
                a: usize,
                b: i64,
                distance: Option<f64>,
            }
            let rows: Vec<Row> = (0..n.b.len())
                .map(|i| Row { a: i, b: b(i), distance: Some(n.distance[i].to_f64()).filter(|d| d.is_finite()) })
                .collect();
            serde_json::to_writer(&mut *w, &rows)?;
            writeln!(w)
        }
        OutputFormat::Npy => {
            write_npy_f64(w, n.b.len(), 3, (0..n.b.len()).flat_map(|i| [i as f64, b(i) as f64, n.distance[i].to_f64()]))
        }
    })
}

/// Points as `.csv` (`x,y,z`), `.npy` (N×3 in the working precision), `.xyz` or ascii `.ply`.
pub fn write_points<T: Real>(path: &Path, p: &Points<T>) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("csv") => write_atomically(path, |w| {
            writeln!(w, "x,y,z")?;
            (0..p.len()).try_for_each(|i| writeln!(w, "{},{},{}", p.x[i], p.y[i], p.z[i]))
        }),
        Some("xyz") => {
            write_atomically(path, |w| (0..p.len()).try_for_each(|i| writeln!(w, "{} {} {}", p.x[i], p.y[i], p.z[i])))
        }
        Some("ply") => write_atomically(path, |w| {
            write!(w, "ply\nformat ascii 1.0\nelement vertex {}\nproperty {t} x\nproperty {t} y\nproperty {t} z\nend_header\n", p.len(), t = if T::NAME == "f32" { "float" } else { "double" })?;
            (0..p.len()).try_for_each(|i| writeln!(w, "{} {} {}", p.x[i], p.y[i], p.z[i]))
        }),
        Some("npy") => write_atomically(path, |w| {
            if T::NAME == "f32" {
                let it = (0..p.len()).flat_map(|i| [p.x[i], p.y[i], p.z[i]].map(|v| v.to_f64() as f32));
                write_npy(w, p.len(), 3, it)
            } else {
                write_npy_f64(w, p.len(), 3, (0..p.len()).flat_map(|i| [p.x[i], p.y[i], p.z[i]].map(|v| v.to_f64())))
            }
        }),
        _ => Err(IoError::new(path, "unknown extension for points: use .csv, .npy, .ply or .xyz")),
    }
}

fn write_npy_f64(
    w: &mut dyn Write,
    rows: usize,
    cols: usize,
    values: impl Iterator<Item = f64>,
) -> std::io::Result<()> {
    write_npy(w, rows, cols, values)
}

fn write_npy<V: NpyValue>(
    w: &mut dyn Write,
    rows: usize,
    cols: usize,
    values: impl Iterator<Item = V>,
) -> io::Result<()> {
    write_npy_shape(w, &[rows as u64, cols as u64], values)
}

/// k-nearest neighbours: `.csv` (`query,rank,id,distance`, ranks from 1; missing neighbours
/// beyond the max distance as id -1 and distance inf) or `.npz` (`ids`: N×k int32, int64 past 2^31 − 1, with -1 for
/// missing, `distances`: N×k in the working precision, inf for missing).
pub fn write_knn<T: Real>(path: &Path, knn: &Knn<T>) -> Result<()> {
    let k = knn.k;
    let id = |i: usize| if knn.ids[i] == NO_ID { -1i64 } else { knn.ids[i] as i64 };
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("csv") => write_atomically(path, |w| {
            writeln!(w, "query,rank,id,distance")?;
            for i in 0..knn.ids.len() {
                writeln!(w, "{},{},{},{}", i / k, i % k + 1, id(i), knn.distances[i])?;
            }
            Ok(())
        }),
        Some("npz") => write_npz(path, |npz| {
            let shape = [(knn.ids.len() / k.max(1)) as u64, k as u64];
            npz.ids("ids", &shape, (0..knn.ids.len()).map(id), max_id(&knn.ids))?;
            if T::NAME == "f32" {
                npz.array("distances", &shape, knn.distances.iter().map(|d| d.to_f64() as f32))
            } else {
                npz.array("distances", &shape, knn.distances.iter().map(|d| d.to_f64()))
            }
        }),
        _ => Err(IoError::new(path, "unknown extension for neighbours: use .csv or .npz")),
    }
}

/// Closest points on a mesh: `.csv` (`query,triangle,distance,x,y,z,u,v,w`; triangle -1 and
/// empty point where nothing lies within the max distance) or `.npz` (triangle: N int32 (int64 past 2^31 − 1),
/// distance: N, point: N×3, bary: N×3).
pub fn write_closest_points<T: Real>(path: &Path, c: &ClosestPoints<T>) -> Result<()> {
    let n = c.triangle.len();
    let tri = |i: usize| if c.triangle[i] == NO_ID { -1i64 } else { c.triangle[i] as i64 };
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("csv") => write_atomically(path, |w| {
            writeln!(w, "query,triangle,distance,x,y,z,u,v,w")?;
            for i in 0..n {
                if c.triangle[i] == NO_ID {
                    writeln!(w, "{i},-1,inf,,,,,,")?;
                } else {
                    let (p, b) = (&c.point, &c.bary);
                    writeln!(
                        w,
                        "{i},{},{},{},{},{},{},{},{}",
                        tri(i),
                        c.distance[i],
                        p.x[i],
                        p.y[i],
                        p.z[i],
                        b[0][i],
                        b[1][i],
                        b[2][i]
                    )?;
                }
            }
            Ok(())
        }),
        Some("npz") => write_npz(path, |npz| {
            let rows = n as u64;
            npz.ids("triangle", &[rows], (0..n).map(tri), max_id(&c.triangle))?;
            fn cols3<T: Real>(a: [&[T]; 3]) -> impl Iterator<Item = f64> + '_ {
                (0..3 * a[0].len()).map(move |j| a[j % 3][j / 3].to_f64())
            }
            let point: [&[T]; 3] = [&c.point.x, &c.point.y, &c.point.z];
            let bary: [&[T]; 3] = [&c.bary[0], &c.bary[1], &c.bary[2]];
            if T::NAME == "f32" {
                npz.array("distance", &[rows], c.distance.iter().map(|d| d.to_f64() as f32))?;
                npz.array("point", &[rows, 3], cols3(point).map(|v| v as f32))?;
                npz.array("bary", &[rows, 3], cols3(bary).map(|v| v as f32))
            } else {
                npz.array("distance", &[rows], c.distance.iter().map(|d| d.to_f64()))?;
                npz.array("point", &[rows, 3], cols3(point))?;
                npz.array("bary", &[rows, 3], cols3(bary))
            }
        }),
        _ => Err(IoError::new(path, "unknown extension for closest points: use .csv or .npz")),
    }
}

/// A value of an `.npy` array: its dtype and its little-endian bytes.
trait NpyValue: Copy {
    const DESCR: &'static str;
    const SIZE: u64;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! npy_value {
    ($($t:ty => $d:literal),*) => {$(
        impl NpyValue for $t {
            const DESCR: &'static str = $d;
            const SIZE: u64 = std::mem::size_of::<$t>() as u64;
            #[inline(always)]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
npy_value!(i32 => "<i4", i64 => "<i8", f32 => "<f4", f64 => "<f8");

/// An `.npy` array (format 1.0) of `shape` holding `values` in C order: the header, then the
/// values' bytes a block at a time (about disk speed; a call per value was 20× slower).
fn write_npy_shape<V: NpyValue, W: Write>(mut w: W, shape: &[u64], values: impl Iterator<Item = V>) -> io::Result<()> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}", V::DESCR);
    // Padded with spaces and ended by a newline so that the data start on a 64-byte boundary.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(header.len() as u16).to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    const BLOCK: usize = 1 << 20;
    let mut buf = Vec::with_capacity(BLOCK + 16);
    let mut count = 0u64;
    for v in values {
        v.put(&mut buf);
        if buf.len() >= BLOCK {
            w.write_all(&buf)?;
            buf.clear();
        }
        count += 1;
    }
    debug_assert_eq!(count, shape.iter().product::<u64>(), "an array holds its shape's values");
    w.write_all(&buf)
}

/// A `.npz` being written (numpy's `np.savez`: a zip of `.npy` arrays, stored uncompressed),
/// streamed into its file, or made in memory where the output cannot seek (a pipe).
struct Npz<'a> {
    zip: zip::ZipWriter<NpzOut<'a>>,
}

enum NpzOut<'a> {
    File(&'a mut BufWriter<std::fs::File>),
    Memory(io::Cursor<Vec<u8>>),
}

impl Write for NpzOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            NpzOut::File(f) => f.write(buf),
            NpzOut::Memory(m) => m.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            NpzOut::File(f) => f.write_all(buf),
            NpzOut::Memory(m) => m.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            NpzOut::File(f) => f.flush(),
            NpzOut::Memory(m) => m.flush(),
        }
    }
}

impl Seek for NpzOut<'_> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        match self {
            NpzOut::File(f) => f.seek(pos),
            NpzOut::Memory(m) => m.seek(pos),
        }
    }
}

fn zip_error(e: zip::result::ZipError) -> io::Error {
    io::Error::other(e.to_string())
}

impl Npz<'_> {
    /// Adds `name`.npy.
    fn array<V: NpyValue>(&mut self, name: &str, shape: &[u64], values: impl Iterator<Item = V>) -> io::Result<()> {
        let bytes = shape.iter().product::<u64>() * V::SIZE;
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(bytes >= 1 << 31);
        self.zip.start_file(format!("{name}.npy"), stored).map_err(zip_error)?;
        write_npy_shape(&mut self.zip, shape, values)
    }

    /// Ids (-1 for none) as int32, or as int64 where the largest, `max`, does not fit int32.
    fn ids(&mut self, name: &str, shape: &[u64], values: impl Iterator<Item = i64>, max: i64) -> io::Result<()> {
        if max > i64::from(i32::MAX) {
            self.array(name, shape, values)
        } else {
            self.array(name, shape, values.map(|v| v as i32))
        }
    }
}

/// The largest id of `ids` that is one (not `NO_ID`), or -1.
fn max_id(ids: &[u32]) -> i64 {
    ids.iter().filter(|&&i| i != NO_ID).max().map_or(-1, |&i| i64::from(i))
}

/// A `.npz` file written as [`write_atomically`] writes: `f` adds its arrays.
fn write_npz(path: &Path, f: impl FnOnce(&mut Npz<'_>) -> io::Result<()>) -> Result<()> {
    let regular = resolve_links(path).ok().and_then(|t| std::fs::metadata(t).ok()).is_none_or(|m| m.is_file());
    if regular {
        write_file(path, |w| {
            let mut npz = Npz { zip: zip::ZipWriter::new(NpzOut::File(w)) };
            f(&mut npz)?;
            npz.zip.finish().map_err(zip_error)?;
            Ok(())
        })
    } else {
        write_atomically(path, |w| {
            let mut npz = Npz { zip: zip::ZipWriter::new(NpzOut::Memory(io::Cursor::new(Vec::new()))) };
            f(&mut npz)?;
            match npz.zip.finish().map_err(zip_error)? {
                NpzOut::Memory(m) => w.write_all(&m.into_inner()),
                NpzOut::File(_) => unreachable!("made in memory"),
            }
        })
    }
}

/// How radius rows are written: each row as a query's, or as an indexed point's pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithinLayout {
    /// Row q lists query q's neighbours: `.csv` `query,id,distance`; `.npz` `offsets`
    /// (N+1 int64), `ids` (int32; int64 past 2^31 − 1), `distances`.
    Rows,
    /// Row i lists the points paired with point i: `.csv` `i,j,distance`; `.npz` `i`, `j`
    /// (int32; int64 past 2^31 − 1), `distances`, and `offsets` (the rows' starts, N+1 int64).
    Pairs,
}

/// Radius rows (see [`WithinLayout`]); with `with_distances` their distances in the working
/// precision too (rows found without, `RadiusOptions::distances` off, have none: the files
/// then hold ids alone, no `distance` column and no `distances` array).
pub fn write_within<T: Real>(
    path: &Path,
    rows: &nearkit::Within<T>,
    layout: WithinLayout,
    with_distances: bool,
) -> Result<()> {
    if with_distances && rows.distances.len() != rows.total() {
        return Err(IoError::new(path, "the rows hold no distances: write them without"));
    }
    let (first, second) = match layout {
        WithinLayout::Rows => ("query", "id"),
        WithinLayout::Pairs => ("i", "j"),
    };
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("csv") => write_atomically(path, |w| {
            match with_distances {
                true => writeln!(w, "{first},{second},distance")?,
                false => writeln!(w, "{first},{second}")?,
            }
            for r in 0..rows.rows() {
                let (ids, ds) = rows.row(r);
                if with_distances {
                    for (id, d) in ids.iter().zip(ds) {
                        writeln!(w, "{r},{id},{d}")?;
                    }
                } else {
                    for id in ids {
                        writeln!(w, "{r},{id}")?;
                    }
                }
            }
            Ok(())
        }),
        Some("npz") => write_npz(path, |npz| {
            let n = rows.total() as u64;
            npz.array("offsets", &[rows.offsets.len() as u64], rows.offsets.iter().map(|&o| o as i64))?;
            if layout == WithinLayout::Pairs {
                let row_of = (0..rows.rows())
                    .flat_map(|r| std::iter::repeat_n(r as i64, (rows.offsets[r + 1] - rows.offsets[r]) as usize));
                npz.ids("i", &[n], row_of, rows.rows() as i64 - 1)?;
            }
            let ids = if layout == WithinLayout::Pairs { "j" } else { "ids" };
            npz.ids(ids, &[n], rows.ids.iter().map(|&i| i64::from(i)), max_id(&rows.ids))?;
            if !with_distances {
                Ok(())
            } else if T::NAME == "f32" {
                npz.array("distances", &[n], rows.distances.iter().map(|d| d.to_f64() as f32))
            } else {
                npz.array("distances", &[n], rows.distances.iter().map(|d| d.to_f64()))
            }
        }),
        _ => Err(IoError::new(path, "unknown extension for radius results: use .csv or .npz")),
    }
}

/// Each query's neighbour count: `.csv` `query,count` or `.npz` `counts` (N int64).
pub fn write_counts(path: &Path, counts: &[u32]) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("csv") => write_atomically(path, |w| {
            writeln!(w, "query,count")?;
            for (q, c) in counts.iter().enumerate() {
                writeln!(w, "{q},{c}")?;
            }
            Ok(())
        }),
        Some("npz") => {
            write_npz(path, |npz| npz.array("counts", &[counts.len() as u64], counts.iter().map(|&c| c as i64)))
        }
        _ => Err(IoError::new(path, "unknown extension for counts: use .csv or .npz")),
    }
}
