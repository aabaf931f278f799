//! NumPy `.npy`: an N×3 array (points) or N×d array, d <= 8 (vectors) of float32, float64,
//! int32 or int64 (C or Fortran order). The header is read here rather than by npyz, so that
//! its shape is checked against the file before anything is allocated for it.

use std::io::{BufRead, Read};
use std::path::Path;

use nearkit::{Points, Real, Vectors};

use crate::input::{coord, coord_integer, read_error, Source, AXES};
use crate::{IoError, Location, Result};

/// The values read per pass over the data.
const CHUNK_VALUES: usize = 8192;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Float,
    Int,
}

/// A `.npy` header: the shape, the element type and the order of the values.
pub struct Header {
    pub shape: Vec<u64>,
    fortran: bool,
    kind: Kind,
    size: usize,
    big_endian: bool,
    descr: String,
}

pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Points<T>> {
    let v = read_dims(src, path, Some(3))?;
    let mut cols = v.cols.into_iter();
    let mut col = || cols.next().unwrap_or_default();
    Ok(Points { x: col(), y: col(), z: col() })
}

/// An N×d array as vectors (any d from 1 to 8).
pub fn read_vectors<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Vectors<T>> {
    read_dims(src, path, None)
}

fn read_dims<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path, want: Option<usize>) -> Result<Vectors<T>> {
    let (header, flat) = read_flat(src, path, |shape| {
        let max = nearkit::MAX_VECTOR_DIM as u64;
        match want {
            Some(d) if shape.len() != 2 || shape[1] != d as u64 => {
                Err(format!("array has shape {shape:?}; an N×{d} array of points is needed"))
            }
            None if shape.len() != 2 || shape[1] == 0 || shape[1] > max => {
                Err(format!("array has shape {shape:?}; an N×d array, d from 1 to {max}, is needed"))
            }
            _ => Ok(()),
        }
    })?;
    // read_flat checked that n × dim values were read.
    let (n, dim) = (header.shape[0] as usize, header.shape[1] as usize);
    let at = |i: usize, d: usize| if header.fortran { flat[d * n + i] } else { flat[i * dim + d] };
    let mut cols = Vec::with_capacity(dim);
    for d in 0..dim {
        let name = if want.is_some() { AXES[d].to_string() } else { d.to_string() };
        let col = (0..n)
            .map(|i| {
                let v = at(i, d);
                let t = if header.kind == Kind::Int {
                    coord_integer::<T>(v as i64, &name)
                } else {
                    coord::<T>(v, &name, None)
                };
                t.map_err(|m| IoError::at(path, Location::Row(i), m))
            })
            .collect::<Result<Vec<T>>>()?;
        cols.push(col);
    }
    Ok(Vectors { cols })
}

/// A 2-D array of heights (rows × columns, at least 2 × 2), row-major, as f64.
pub fn read_heights<R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<(Vec<f64>, usize, usize)> {
    let (header, flat) = read_flat(src, path, |shape| {
        if shape.len() == 2 && shape[0] >= 2 && shape[1] >= 2 {
            Ok(())
        } else {
            Err(format!("array has shape {shape:?}; a heightfield needs a 2-D array of at least 2 × 2"))
        }
    })?;
    let (rows, cols) = (header.shape[0] as usize, header.shape[1] as usize);
    let heights: Vec<f64> =
        if header.fortran { (0..rows * cols).map(|i| flat[(i % cols) * rows + i / cols]).collect() } else { flat };
    if let Some(i) = heights.iter().position(|h| !h.is_finite()) {
        return Err(IoError::new(path, format!("height at row {}, column {} is not finite", i / cols, i % cols)));
    }
    Ok((heights, rows, cols))
}

/// The header (its shape checked by `check`, then against the file's size) and the values
/// widened to f64, in the order stored.
fn read_flat<R: BufRead>(
    src: &mut Source<R>,
    path: &Path,
    check: impl FnOnce(&[u64]) -> std::result::Result<(), String>,
) -> Result<(Header, Vec<f64>)> {
    let h = read_header(src, path)?;
    check(&h.shape).map_err(|m| IoError::new(path, m))?;
    let shape = &h.shape;
    // In u128 so that the message can give the number a wrapped-around product would hide.
    let values = h.shape.iter().try_fold(1u128, |a, &d| a.checked_mul(u128::from(d)));
    let bytes = values.and_then(|v| v.checked_mul(h.size as u128));
    let says = || match values {
        Some(v) => format!("header says shape {shape:?}: {v} {} values", h.descr),
        None => format!("header says shape {shape:?}: more {} values than can be counted", h.descr),
    };
    if let Some(left) = src.remaining() {
        match bytes {
            Some(b) if b == u128::from(left) => {}
            Some(b) if b < u128::from(left) => {
                return Err(IoError::new(
                    path,
                    format!(
                        "{} ({b} bytes), but {left} bytes follow the header: the shape does not cover the data",
                        says()
                    ),
                ))
            }
            _ => {
                return Err(IoError::new(
                    path,
                    format!("{}, but the file has only {left} bytes left: {} bytes a value", says(), h.size),
                ))
            }
        }
    }
    let count = values.and_then(|v| usize::try_from(v).ok()).filter(|_| bytes.is_some_and(|b| b <= u64::MAX as u128));
    let Some(count) = count else {
        return Err(IoError::new(path, format!("{}: more than this computer can address", says())));
    };
    let cap = if src.remaining().is_some() { count } else { count.min(CHUNK_VALUES) };
    let mut flat = Vec::with_capacity(cap);
    let mut buf = vec![0u8; CHUNK_VALUES * h.size];
    while flat.len() < count {
        let k = (count - flat.len()).min(CHUNK_VALUES);
        let chunk = &mut buf[..k * h.size];
        src.read_exact(chunk).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                IoError::new(path, format!("{}, but the file ends after about {} of them", says(), flat.len()))
            }
            _ => read_error(path, &e),
        })?;
        let start = flat.len();
        flat.extend(chunk.chunks_exact(h.size).map(|b| h.value(b)));
        if (h.kind, h.size) == (Kind::Int, 8) {
            // int64 beyond 2^53 would round on the way to f64: say so instead.
            if let Some(j) = chunk.chunks_exact(8).position(|b| h.int64(b) as f64 as i128 != h.int64(b) as i128) {
                let (i, dims) = (start + j, h.shape.iter().skip(1).product::<u64>().max(1) as usize);
                let rows = h.shape[0].max(1) as usize;
                let (row, col) = if h.fortran { (i % rows, i / rows) } else { (i / dims, i % dims) };
                let name = crate::input::AXES.get(col).map_or(format!("{col}"), |a| a.to_string());
                let m = crate::input::coord_integer::<f64>(h.int64(&chunk[j * 8..j * 8 + 8]), &name);
                return Err(IoError::at(path, Location::Row(row), m.err().unwrap_or_default()));
            }
        }
    }
    // Without a known size, more data after the values also means the shape is wrong.
    if src.remaining().is_none() && !src.fill_buf().map_err(|e| read_error(path, &e))?.is_empty() {
        return Err(IoError::new(
            path,
            format!("{}, but more data follows them: the shape does not cover the data", says()),
        ));
    }
    Ok((h, flat))
}

impl Header {
    /// An int64 value.
    fn int64(&self, b: &[u8]) -> i64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        if self.big_endian {
            a.reverse();
        }
        i64::from_le_bytes(a)
    }

    /// One value, widened to f64 (int64 beyond 2^53 rounds: `read_flat` refuses those).
    fn value(&self, b: &[u8]) -> f64 {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        if self.big_endian {
            a[..b.len()].reverse();
        }
        match (self.kind, self.size) {
            (Kind::Float, 4) => f32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            (Kind::Int, 4) => i32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            (Kind::Float, _) => f64::from_le_bytes(a),
            (Kind::Int, _) => i64::from_le_bytes(a) as f64,
        }
    }
}

/// Reads the magic string, the version, and the header's Python dict literal.
pub fn read_header<R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Header> {
    let bad = |m: String| IoError::new(path, format!("not a valid .npy file: {m}"));
    let mut pre = [0u8; 8];
    src.read_exact(&mut pre).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad("too short for the magic string".into()),
        _ => read_error(path, &e),
    })?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad("no \\x93NUMPY magic string at the start".into()));
    }
    let len_bytes = match pre[6] {
        1 => 2,
        2 | 3 => 4,
        v => return Err(bad(format!("format version {v}.{} is not supported (1, 2 or 3 are)", pre[7]))),
    };
    let mut len = [0u8; 4];
    src.read_exact(&mut len[..len_bytes]).map_err(|_| bad("file ends inside the header length".into()))?;
    let len = u32::from_le_bytes(len) as u64;
    if let Some(left) = src.remaining().filter(|&left| len > left) {
        return Err(bad(format!("the header length says {len} bytes, but the file has only {left} bytes left")));
    }
    let mut text = Vec::new();
    src.by_ref().take(len).read_to_end(&mut text).map_err(|e| read_error(path, &e))?;
    if (text.len() as u64) < len {
        return Err(bad(format!("header says it is {len} bytes long, but the file ends after {}", text.len())));
    }
    let text = std::str::from_utf8(&text).map_err(|_| bad("the header is not text".into()))?;
    let dict = match Py::parse(text).map_err(|m| bad(format!("header: {m}")))? {
        Py::Dict(d) => d,
        _ => return Err(bad("the header is not a Python dict".into())),
    };
    let get = |key: &str| {
        dict.iter()
            .find(|(k, _)| matches!(k, Py::Str(s) if s == key))
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("the header has no '{key}'")))
    };
    let fortran = match get("fortran_order")? {
        Py::Bool(b) => *b,
        _ => return Err(bad("'fortran_order' is not True or False".into())),
    };
    let shape = match get("shape")? {
        Py::Seq(items) => items
            .iter()
            .map(|i| match i {
                Py::Int(n) => Ok(*n),
                _ => Err(bad("'shape' holds something other than non-negative whole numbers".into())),
            })
            .collect::<Result<Vec<u64>>>()?,
        _ => return Err(bad("'shape' is not a tuple".into())),
    };
    let descr = match get("descr")? {
        Py::Str(s) => s.clone(),
        _ => {
            return Err(IoError::new(
                path,
                "a structured (record) dtype is not supported: save a plain N×3 array \
                 (numpy.lib.recfunctions.structured_to_unstructured makes one)",
            ))
        }
    };
    let unsupported =
        || IoError::new(path, format!("element type '{descr}' is not supported: use float32, float64, int32 or int64"));
    let (big_endian, rest) = match descr.as_bytes().first() {
        Some(b'>') => (true, &descr[1..]),
        Some(b'<' | b'|') => (false, &descr[1..]),
        Some(b'=') => (cfg!(target_endian = "big"), &descr[1..]),
        _ => (false, descr.as_str()),
    };
    let (kind, size) = match rest {
        "f4" => (Kind::Float, 4),
        "f8" => (Kind::Float, 8),
        "i4" => (Kind::Int, 4),
        "i8" => (Kind::Int, 8),
        _ => return Err(unsupported()),
    };
    let descr = match (kind, size) {
        (Kind::Float, 4) => "float32",
        (Kind::Float, _) => "float64",
        (Kind::Int, 4) => "int32",
        (Kind::Int, _) => "int64",
    }
    .to_string();
    Ok(Header { shape, fortran, kind, size, big_endian, descr })
}

/// The Python literals a `.npy` header holds.
#[derive(Debug)]
enum Py {
    Str(String),
    /// A non-negative whole number (the only kind a shape holds).
    Int(u64),
    Bool(bool),
    None,
    Seq(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

/// Nesting deeper than this is no header numpy writes (and would exhaust the stack).
const MAX_DEPTH: usize = 16;

impl Py {
    fn parse(text: &str) -> std::result::Result<Py, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let v = p.value(0)?;
        p.skip_space();
        if p.i != p.s.len() {
            return Err(format!("unexpected '{}' after the dict", p.s[p.i] as char));
        }
        Ok(v)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Py, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        match self.peek() {
            None => Err("ends early".into()),
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                let start = self.i;
                while let Some(&b) = self.s.get(self.i) {
                    match b {
                        b'\\' => self.i += 2,
                        b if b == q => {
                            let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                            self.i += 1;
                            return Ok(Py::Str(s));
                        }
                        _ => self.i += 1,
                    }
                }
                Err("a string is not closed".into())
            }
            Some(open @ (b'(' | b'[' | b'{')) => {
                self.i += 1;
                let close = match open {
                    b'(' => b')',
                    b'[' => b']',
                    _ => b'}',
                };
                let (mut items, mut pairs) = (Vec::new(), Vec::new());
                loop {
                    if self.peek() == Some(close) {
                        self.i += 1;
                        break;
                    }
                    let v = self.value(depth + 1)?;
                    if open == b'{' {
                        if self.peek() != Some(b':') {
                            return Err("a dict key without ':'".into());
                        }
                        self.i += 1;
                        pairs.push((v, self.value(depth + 1)?));
                    } else {
                        items.push(v);
                    }
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b) if b == close => {}
                        _ => return Err(format!("expected ',' or '{}'", close as char)),
                    }
                }
                Ok(if open == b'{' { Py::Dict(pairs) } else { Py::Seq(items) })
            }
            Some(b'0'..=b'9') => {
                let mut n: u64 = 0;
                while let Some(d) = self.s.get(self.i).filter(|b| b.is_ascii_digit()) {
                    n = n
                        .checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(d - b'0')))
                        .ok_or("a number larger than 2^64")?;
                    self.i += 1;
                }
                // Python 2 wrote long integers with an L.
                if self.s.get(self.i) == Some(&b'L') {
                    self.i += 1;
                }
                Ok(Py::Int(n))
            }
            Some(_) => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-') {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Ok(Py::Bool(true)),
                    b"False" => Ok(Py::Bool(false)),
                    b"None" => Ok(Py::None),
                    _ => Err(format!("unexpected '{}'", self.s[start] as char)),
                }
            }
        }
    }
}
