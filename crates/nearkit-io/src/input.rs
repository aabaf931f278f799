//! What every reader shares: a byte source that knows how much of the file is left, so that a
//! count in a header is checked against the file before anything is allocated for it; text
//! lines with their numbers; and coordinates converted to the working precision.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

use nearkit::Real;

use crate::{IoError, Location, Result};

/// Room reserved up front for records whose count no file size vouches for (a stream's header
/// could claim anything); vectors grow past it as records actually arrive.
const UNCHECKED_CAPACITY: usize = 4096;

/// A buffered reader that counts the bytes it has handed out.
pub(crate) struct Source<R> {
    inner: R,
    consumed: u64,
    size: Option<u64>,
}

impl<R: BufRead> Source<R> {
    /// `size`: the bytes `inner` holds in all, where known (a regular file's length).
    pub fn new(inner: R, size: Option<u64>) -> Self {
        Self { inner, consumed: 0, size }
    }

    /// Bytes not yet read, where the size is known.
    pub fn remaining(&self) -> Option<u64> {
        self.size.map(|s| s.saturating_sub(self.consumed))
    }

    /// Checks `count` records of at least `min_bytes` each (a header's promise) against the bytes
    /// left, and returns the count and the capacity to reserve for them. `what` is the record's
    /// name, plural and singular.
    pub fn check_count(
        &self,
        path: &Path,
        loc: Option<Location>,
        count: u64,
        what: (&str, &str),
        min_bytes: u64,
    ) -> Result<(usize, usize)> {
        let (many, one) = what;
        if let Some(left) = self.remaining() {
            // One byte of slack: a text file's last line may lack its line break.
            if count.checked_mul(min_bytes).is_none_or(|need| need > left.saturating_add(1)) {
                let unit = if min_bytes == 1 { "byte" } else { "bytes" };
                return Err(IoError::maybe_at(
                    path,
                    loc,
                    format!(
                        "header says {count} {many}, but the file has only {left} bytes left: \
                         at least {min_bytes} {unit} a {one}"
                    ),
                ));
            }
        }
        let n = usize::try_from(count).map_err(|_| {
            IoError::maybe_at(path, loc, format!("header says {count} {many}: more than this computer can address"))
        })?;
        let cap = if self.size.is_some() { n } else { n.min(UNCHECKED_CAPACITY) };
        Ok((n, cap))
    }
}

impl<R: BufRead> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Source<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt)
    }
}

/// Opens a file to read, with its size where it is a regular file (a pipe's is unknown).
pub(crate) fn open(path: &Path) -> Result<(File, Option<u64>)> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::IsADirectory => is_a_directory(path),
        _ => IoError::new(path, format!("cannot open: {e}")),
    })?;
    let meta = file.metadata().map_err(|e| read_error(path, &e))?;
    if meta.is_dir() {
        return Err(is_a_directory(path));
    }
    Ok((file, meta.is_file().then_some(meta.len())))
}

fn is_a_directory(path: &Path) -> IoError {
    IoError::new(path, "is a directory, not a file")
}

/// A failed read. A directory opened as a file (which succeeds on Unix) fails here, and says so.
pub(crate) fn read_error(path: &Path, e: &io::Error) -> IoError {
    match e.kind() {
        io::ErrorKind::IsADirectory => is_a_directory(path),
        _ => IoError::new(path, format!("read failed: {e}")),
    }
}

/// The lines of a text file, numbered from 1, without their line breaks and without a UTF-8
/// byte-order mark at the start (Windows editors write one).
pub(crate) struct Lines<'a, R> {
    src: &'a mut Source<R>,
    path: &'a Path,
    buf: String,
    /// The current line's text within `buf`.
    range: std::ops::Range<usize>,
    /// The number of the line last returned.
    pub number: usize,
}

impl<'a, R: BufRead> Lines<'a, R> {
    pub fn new(src: &'a mut Source<R>, path: &'a Path) -> Self {
        Self { src, path, buf: String::new(), range: 0..0, number: 0 }
    }

    /// Reads the next line into `buf`; false at the end of the file.
    fn advance(&mut self) -> Result<bool> {
        let mut bytes = std::mem::take(&mut self.buf).into_bytes();
        bytes.clear();
        if self.src.read_until(b'\n', &mut bytes).map_err(|e| read_error(self.path, &e))? == 0 {
            return Ok(false);
        }
        self.number += 1;
        let start = if self.number == 1 && bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        // Bytes that are not UTF-8 (a Latin-1 comment, a material's name) become U+FFFD: a
        // number holding one fails to parse as it should, and the rest is read.
        self.buf = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let end = self.buf.trim_end_matches(['\n', '\r']).len();
        self.range = start..end.max(start);
        Ok(true)
    }

    fn text(&self) -> &str {
        &self.buf[self.range.clone()]
    }

    /// The next line and its number.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>> {
        Ok(if self.advance()? { Some((self.number, self.text())) } else { None })
    }

    /// The next line with something on it other than a `#` comment, trimmed, without the
    /// comment, and its number.
    pub fn next_content(&mut self) -> Result<Option<(usize, &str)>> {
        loop {
            if !self.advance()? {
                return Ok(None);
            }
            let line = self.text();
            let content = line.split('#').next().unwrap_or("").trim();
            if !content.is_empty() {
                let start = self.range.start + (content.as_ptr() as usize - line.as_ptr() as usize);
                self.range = start..start + content.len();
                return Ok(Some((self.number, self.text())));
            }
        }
    }

    pub fn source(&self) -> &Source<R> {
        self.src
    }

    /// The bytes after the lines read so far (a binary PLY's body follows its header).
    pub fn source_mut(&mut self) -> &mut Source<R> {
        self.src
    }
}

/// The names of coordinates 0, 1, 2 in messages.
pub(crate) const AXES: [&str; 3] = ["x", "y", "z"];

/// A coordinate (`name`d x, y, z, or 0.. for vectors) in the working precision T. Values that are not
/// finite are errors, and so are finite ones that T cannot hold (1e308 in f32) or rounds to 0
/// (1e-300 in f32): the message says which precision holds them. `text` is the value as written, where it was text.
pub(crate) fn coord<T: Real>(v: f64, name: &str, text: Option<&str>) -> std::result::Result<T, String> {
    let t = T::from_f64(v);
    let shown = || match text {
        Some(t) => t.to_string(),
        None if v.is_finite() && (v.abs() >= 1e16 || v.abs() < 1e-16) => format!("{v:e}"),
        None => v.to_string(),
    };
    if t.is_finite() {
        if let Some(text) = text.filter(|t| is_integer_literal(t)) {
            check_integer_text::<T>(t, text, name)?;
        }
        if t == T::ZERO && v != 0.0 {
            // Rounding to nothing would make such points all equal: an error, as for too large.
            return Err(format!(
                "coordinate {name} is {}, which {} rounds to 0 (smallest {:e}): --precision f64 holds it",
                shown(),
                T::NAME,
                f32::from_bits(1)
            ));
        }
        return Ok(t);
    }
    let shown = shown();
    if v.is_finite() {
        return Err(format!(
            "coordinate {name} is {shown}, which does not fit {} (largest {:e}): --precision f64 holds it",
            T::NAME,
            f32::MAX
        ));
    }
    let written_as_infinity = text.is_none_or(|t| t.to_ascii_lowercase().contains("inf"));
    if v.is_infinite() && !written_as_infinity {
        return Err(format!("coordinate {name} is {shown}, which does not fit even f64 (largest {:e})", f64::MAX));
    }
    Err(format!("coordinate {name} is {shown}; coordinates must be finite numbers"))
}

/// A coordinate stored as an integer (`.npy` int32/int64, PLY int properties): like [`coord`],
/// and an error, rather than a silent rounding, where T cannot hold the integer exactly.
pub(crate) fn coord_integer<T: Real>(v: i64, name: &str) -> std::result::Result<T, String> {
    let wide = v as f64;
    if wide as i128 != v as i128 {
        return Err(inexact_integer::<f64>(&v.to_string(), name));
    }
    let t: T = coord(wide, name, None)?;
    if t.to_f64() != wide {
        return Err(inexact_integer::<T>(&v.to_string(), name));
    }
    Ok(t)
}

/// Digits with an optional sign: written as an integer, so meant exactly.
fn is_integer_literal(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// An integer written in the file must come through unrounded (`16777217` in f32 would
/// silently become 16777216).
fn check_integer_text<T: Real>(t: T, text: &str, name: &str) -> std::result::Result<(), String> {
    // An integral f64 below 2^127 converts to i128 exactly; longer integers do not parse.
    match text.parse::<i128>() {
        Ok(exact) if t.to_f64() as i128 == exact => Ok(()),
        _ => Err(inexact_integer::<T>(text, name)),
    }
}

fn inexact_integer<T: Real>(shown: &str, name: &str) -> String {
    if T::NAME == "f32" {
        format!(
            "coordinate {name} is the integer {shown}, which f32 cannot hold exactly (integers are exact up to \
             2^24 = 16,777,216): --precision f64 holds integers up to 2^53 exactly"
        )
    } else {
        format!(
            "coordinate {name} is the integer {shown}, which f64 cannot hold exactly (integers are exact up to \
             2^53 = 9,007,199,254,740,992): shift or scale the data so that it fits"
        )
    }
}

/// Rows of points may have fewer values than the first (empty trailing columns) but not more:
/// a longer row is most likely two rows run together, and its extra values would be dropped
/// unseen. `width` is the first row's count (set by the first call).
pub(crate) fn check_width(width: &mut Option<usize>, values: usize, path: &Path, line: usize) -> Result<()> {
    match *width {
        None => *width = Some(values),
        Some(w) if values > w => {
            return Err(IoError::at(
                path,
                Location::Line(line),
                format!(
                "{values} values where the first row has {w}: two rows run together? Give every row the same columns"
            ),
            ))
        }
        Some(_) => {}
    }
    Ok(())
}

/// The first three fields of a text line as coordinates (OFF, OBJ and XYZ share this).
pub(crate) fn parse_xyz<T: Real>(fields: &[&str], path: &Path, line: usize) -> Result<[T; 3]> {
    let at = |m: String| IoError::at(path, Location::Line(line), m);
    if fields.len() < 3 {
        return Err(at(format!("{} columns, 3 are needed (x y z)", fields.len())));
    }
    let mut v = [T::ZERO; 3];
    for d in 0..3 {
        if fields[d].is_empty() {
            return Err(at(format!("{} (column {}) is empty", AXES[d], d + 1)));
        }
        let x: f64 = fields[d].parse().map_err(|_| at(format!("'{}' is not a number", fields[d])))?;
        v[d] = coord(x, AXES[d], Some(fields[d])).map_err(at)?;
    }
    Ok(v)
}
