//! PLY: the `vertex` element's x, y, z and the `face` element's index lists (ascii, binary
//! little- and big-endian). Read here rather than by ply-rs so that every count in the file —
//! the header's element counts and each list's length — is checked against the bytes left
//! before anything is allocated for it, and errors name the line or record.

use std::io::{self, BufRead, Read};
use std::num::IntErrorKind;
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::input::{coord, coord_integer, read_error, Lines, Source, AXES};
use crate::{IoError, Location, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
}

impl Scalar {
    fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "char" | "int8" => Self::I8,
            "uchar" | "uint8" => Self::U8,
            "short" | "int16" => Self::I16,
            "ushort" | "uint16" => Self::U16,
            "int" | "int32" => Self::I32,
            "uint" | "uint32" => Self::U32,
            "float" | "float32" => Self::F32,
            "double" | "float64" => Self::F64,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    fn is_int(self) -> bool {
        !matches!(self, Self::F32 | Self::F64)
    }

    /// The values an integer type holds.
    fn range(self) -> (i64, i64) {
        match self {
            Self::I8 => (i8::MIN.into(), i8::MAX.into()),
            Self::U8 => (0, u8::MAX.into()),
            Self::I16 => (i16::MIN.into(), i16::MAX.into()),
            Self::U16 => (0, u16::MAX.into()),
            Self::I32 => (i32::MIN.into(), i32::MAX.into()),
            Self::U32 => (0, u32::MAX.into()),
            Self::F32 | Self::F64 => (i64::MIN, i64::MAX),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::I8 => "char",
            Self::U8 => "uchar",
            Self::I16 => "short",
            Self::U16 => "ushort",
            Self::I32 => "int",
            Self::U32 => "uint",
            Self::F32 => "float",
            Self::F64 => "double",
        }
    }

    /// One value from exactly `size()` bytes; every PLY integer is exact in f64.
    fn decode(self, b: &[u8], big: bool) -> f64 {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        if big {
            a[..b.len()].reverse();
        }
        match self {
            Self::I8 => a[0] as i8 as f64,
            Self::U8 => a[0] as f64,
            Self::I16 => i16::from_le_bytes([a[0], a[1]]) as f64,
            Self::U16 => u16::from_le_bytes([a[0], a[1]]) as f64,
            Self::I32 => i32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Self::U32 => u32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Self::F32 => f32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Self::F64 => f64::from_le_bytes(a),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Scalar(Scalar),
    /// A list: the type of its length, then of its items.
    List(Scalar, Scalar),
}

struct Property {
    name: String,
    kind: Kind,
}

struct Element {
    name: String,
    count: u64,
    /// The header line that declares it.
    line: usize,
    props: Vec<Property>,
}

impl Element {
    fn find(&self, name: &str) -> Option<usize> {
        self.props.iter().position(|p| p.name == name)
    }

    /// The fewest bytes one element takes: binary, its scalars and list lengths; ascii, a
    /// character and a separator a value.
    fn min_bytes(&self, ascii: bool) -> u64 {
        if ascii {
            return 2 * self.props.len() as u64;
        }
        self.props
            .iter()
            .map(|p| match p.kind {
                Kind::Scalar(t) | Kind::List(t, _) => t.size() as u64,
            })
            .sum()
    }

    /// The size of each element where it holds no lists.
    fn fixed_size(&self) -> Option<usize> {
        self.props
            .iter()
            .map(|p| match p.kind {
                Kind::Scalar(t) => Some(t.size()),
                Kind::List(..) => None,
            })
            .sum()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Ascii,
    Binary { big: bool },
}

pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Points<T>> {
    read_ply(src, path, false).map(|m| m.vertices)
}

pub fn read_mesh<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Mesh<T>> {
    read_ply(src, path, true)
}

fn read_header<R: BufRead>(lines: &mut Lines<R>, path: &Path) -> Result<(Encoding, Vec<Element>)> {
    let at = |line: usize, m: String| IoError::at(path, Location::Line(line), m);
    match lines.next_line()? {
        Some((_, l)) if l.trim() == "ply" => {}
        Some((n, l)) => {
            let shown: String = l.chars().take(40).collect();
            return Err(at(n, format!("not a PLY file: expected 'ply', found '{shown}'")));
        }
        None => return Err(IoError::new(path, "empty file: not a PLY file")),
    }
    let mut encoding = None;
    let mut elements: Vec<Element> = Vec::new();
    loop {
        let Some((n, l)) = lines.next_line()? else {
            return Err(IoError::new(path, "file ends inside the header: no 'end_header' line"));
        };
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.first().copied() {
            None | Some("comment") | Some("obj_info") => {}
            Some("format") => {
                encoding = Some(match (w.get(1).copied(), w.len()) {
                    (Some("ascii"), 3) => Encoding::Ascii,
                    (Some("binary_little_endian"), 3) => Encoding::Binary { big: false },
                    (Some("binary_big_endian"), 3) => Encoding::Binary { big: true },
                    _ => return Err(at(n, format!("unknown format line '{l}'"))),
                });
            }
            Some("element") => {
                let [_, name, count] = w[..] else {
                    return Err(at(n, format!("expected 'element <name> <count>', found '{l}'")));
                };
                let count = count
                    .parse()
                    .map_err(|_| at(n, format!("the count of element '{name}' ('{count}') is not a whole number")))?;
                if elements.iter().any(|e| e.name == name) {
                    return Err(at(n, format!("element '{name}' is declared twice")));
                }
                elements.push(Element { name: name.to_string(), count, line: n, props: Vec::new() });
            }
            Some("property") => {
                let Some(e) = elements.last_mut() else {
                    return Err(at(n, "a property before any element".into()));
                };
                let ty = |s: &str| Scalar::from_name(s).ok_or_else(|| at(n, format!("unknown property type '{s}'")));
                let (name, kind) = match w[..] {
                    [_, "list", count, item, name] => {
                        let count = ty(count)?;
                        if !count.is_int() {
                            return Err(at(n, format!("list '{name}' has a length of type '{}'", w[2])));
                        }
                        (name, Kind::List(count, ty(item)?))
                    }
                    [_, t, name] => (name, Kind::Scalar(ty(t)?)),
                    _ => return Err(at(n, format!("expected 'property <type> <name>', found '{l}'"))),
                };
                if e.find(name).is_some() {
                    return Err(at(n, format!("property '{name}' of element '{}' is declared twice", e.name)));
                }
                e.props.push(Property { name: name.to_string(), kind });
            }
            Some("end_header") => break,
            Some(_) => return Err(at(n, format!("unknown header line '{l}'"))),
        }
    }
    let encoding = encoding.ok_or_else(|| IoError::new(path, "the header has no 'format' line"))?;
    Ok((encoding, elements))
}

/// What the reader keeps of one element.
enum Role {
    /// Positions of x, y, z among the properties.
    Vertex([usize; 3]),
    /// Position of the vertex index list.
    Face(usize),
    Skip,
}

fn read_ply<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path, faces: bool) -> Result<Mesh<T>> {
    let mut lines = Lines::new(src, path);
    let (encoding, elements) = read_header(&mut lines, path)?;
    let ascii = encoding == Encoding::Ascii;
    let mut body = Body { lines, path, big: encoding == Encoding::Binary { big: true }, ascii };
    let mut points: Option<Points<T>> = None;
    let mut triangles = Vec::new();
    for e in &elements {
        let role = match e.name.as_str() {
            "vertex" => {
                let mut xyz = [0; 3];
                for (d, name) in AXES.iter().enumerate() {
                    xyz[d] = e
                        .find(name)
                        .ok_or_else(|| IoError::new(path, format!("the vertex element has no '{name}' property")))?;
                    if let Kind::List(..) = e.props[xyz[d]].kind {
                        return Err(IoError::new(path, format!("vertex property '{name}' is a list, not a number")));
                    }
                }
                Role::Vertex(xyz)
            }
            // Read (and checked) even for the points alone: a face that names a vertex the
            // file lacks says its counts are wrong.
            "face" => {
                if points.is_none() {
                    return Err(IoError::new(path, "the face element comes before the vertex element"));
                }
                let list = e
                    .find("vertex_indices")
                    .or_else(|| e.find("vertex_index"))
                    .ok_or_else(|| IoError::new(path, "the face element has no vertex_indices list"))?;
                if let Kind::Scalar(_) = e.props[list].kind {
                    return Err(IoError::new(path, "the face element's vertex_indices is a number, not a list"));
                }
                Role::Face(list)
            }
            _ => Role::Skip,
        };
        let what = match role {
            Role::Vertex(_) => ("vertices", "vertex"),
            Role::Face(_) => ("faces", "face"),
            Role::Skip => ("elements", "element"),
        };
        let min = e.min_bytes(ascii);
        if min == 0 {
            // No properties: nothing to read, however many there are.
            continue;
        }
        let (count, cap) = body.lines.source().check_count(path, Some(Location::Line(e.line)), e.count, what, min)?;
        match role {
            Role::Vertex(xyz) => {
                let mut p = Points::with_capacity(cap);
                let integer = xyz.map(|i| matches!(e.props[i].kind, Kind::Scalar(s) if s.is_int()));
                body.read_element(e, count, None, |values, _, texts, loc| {
                    let mut v = [T::ZERO; 3];
                    for d in 0..3 {
                        let c = if integer[d] {
                            coord_integer(values[xyz[d]] as i64, AXES[d])
                        } else {
                            coord(values[xyz[d]], AXES[d], texts.get(xyz[d]).copied())
                        };
                        v[d] = c.map_err(|m| (loc, m))?;
                    }
                    p.push(v[0], v[1], v[2]);
                    Ok(())
                })?;
                points = Some(p);
            }
            Role::Face(list) => {
                let nv = points.as_ref().map_or(0, |p| p.len());
                if faces {
                    triangles.reserve(cap);
                }
                let mut corners = Vec::new();
                body.read_element(e, count, Some(list), |_, idx, _, loc| {
                    if idx.len() < 3 {
                        return Err((loc, format!("a face has {} corners; at least 3 are needed", idx.len())));
                    }
                    corners.clear();
                    for &v in idx {
                        if !(v >= 0.0 && v.fract() == 0.0 && v < nv as f64 && v <= u32::MAX as f64) {
                            return Err((
                                loc,
                                format!("vertex index {v} is out of range (the file has {nv} vertices)"),
                            ));
                        }
                        corners.push(v as u32);
                    }
                    // A polygon becomes a fan of triangles around its first corner.
                    for j in (1..corners.len() - 1).filter(|_| faces) {
                        triangles.push([corners[0], corners[j], corners[j + 1]]);
                    }
                    Ok(())
                })?;
            }
            Role::Skip => body.skip_element(e, count)?,
        }
    }
    let vertices = points.ok_or_else(|| IoError::new(path, "no 'vertex' element in the PLY header"))?;
    body.check_end(elements.last())?;
    Ok(Mesh { vertices, triangles })
}

/// Where a problem with an element is: its line (ascii) or record (binary).
type Fail = (Location, String);

struct Body<'a, R> {
    lines: Lines<'a, R>,
    path: &'a Path,
    big: bool,
    ascii: bool,
}

impl<R: BufRead> Body<'_, R> {
    fn record(e: &Element, i: usize) -> Location {
        match e.name.as_str() {
            "vertex" => Location::Row(i),
            "face" => Location::Record("face", i),
            _ => Location::Record("element", i),
        }
    }

    /// Reads `count` elements, handing `f` each one's scalar values (lists as NaN) and the
    /// items of list `list`.
    fn read_element(
        &mut self,
        e: &Element,
        count: usize,
        list: Option<usize>,
        mut f: impl FnMut(&[f64], &[f64], &[&str], Location) -> std::result::Result<(), Fail>,
    ) -> Result<()> {
        let path = self.path;
        let fail = |(loc, m): Fail| IoError::at(path, loc, m);
        let mut values = vec![f64::NAN; e.props.len()];
        let mut items: Vec<f64> = Vec::new();
        let fixed = e.fixed_size();
        let mut record = vec![0u8; fixed.unwrap_or(0)];
        for i in 0..count {
            items.clear();
            if self.ascii {
                let Some((n, line)) = self.lines.next_content()? else {
                    return Err(IoError::new(path, format!("file ends after {i} of {count} '{}' elements", e.name)));
                };
                let loc = Location::Line(n);
                let mut texts = Vec::with_capacity(e.props.len());
                parse_ascii(line, e, list, &mut values, &mut texts, &mut items)
                    .map_err(|m| IoError::at(path, loc, m))?;
                f(&values, &items, &texts, loc).map_err(fail)?;
                continue;
            }
            let loc = Self::record(e, i);
            let ends = |_| IoError::at(path, loc, format!("file ends inside {} {i} of {count}", e.name));
            let src = self.lines.source_mut();
            if fixed.is_some() {
                src.read_exact(&mut record).map_err(|err| eof_or(err, path, ends))?;
                let mut at = 0;
                for (k, p) in e.props.iter().enumerate() {
                    if let Kind::Scalar(t) = p.kind {
                        values[k] = t.decode(&record[at..at + t.size()], self.big);
                        at += t.size();
                    }
                }
            } else {
                for (k, p) in e.props.iter().enumerate() {
                    match p.kind {
                        Kind::Scalar(t) => {
                            values[k] = read_scalar(src, t, self.big).map_err(|err| eof_or(err, path, ends))?
                        }
                        Kind::List(ct, it) => {
                            let len = read_scalar(src, ct, self.big).map_err(|err| eof_or(err, path, ends))?;
                            if len < 0.0 {
                                return Err(IoError::at(path, loc, format!("list '{}' has length {len}", p.name)));
                            }
                            let len = len as u64;
                            // Items are pushed as they are read, never reserved: this check
                            // only makes a wrong length the error it is.
                            let size = it.size() as u64;
                            if let Some(left) = src.remaining().filter(|&left| len * size > left) {
                                return Err(IoError::at(
                                    path,
                                    loc,
                                    format!(
                                        "list '{}' says {len} items, but the file has only {left} bytes left: \
                                         {size} bytes an item",
                                        p.name
                                    ),
                                ));
                            }
                            if list == Some(k) {
                                for _ in 0..len {
                                    items.push(read_scalar(src, it, self.big).map_err(|err| eof_or(err, path, ends))?);
                                }
                            } else {
                                skip(src, len * size).map_err(|err| eof_or(err, path, ends))?;
                            }
                        }
                    }
                }
            }
            f(&values, &items, &[], loc).map_err(fail)?;
        }
        Ok(())
    }

    /// Reads past `count` elements, checking their structure.
    fn skip_element(&mut self, e: &Element, count: usize) -> Result<()> {
        if let (false, Some(size)) = (self.ascii, e.fixed_size()) {
            let path = self.path;
            // Past the end of any file if it overflows: reading then fails as truncated.
            let bytes = (count as u64).saturating_mul(size as u64);
            return skip(self.lines.source_mut(), bytes).map_err(|err| {
                eof_or(err, path, |_| IoError::new(path, format!("file ends inside the {count} '{}' elements", e.name)))
            });
        }
        self.read_element(e, count, None, |_, _, _, _| Ok(()))
    }

    /// An error where the file goes on after the elements the header declares (`last`).
    fn check_end(&mut self, last: Option<&Element>) -> Result<()> {
        let path = self.path;
        let what =
            last.map_or("header".to_string(), |e| format!("{} '{}' elements the header declares", e.count, e.name));
        if self.ascii {
            if let Some((n, _)) = self.lines.next_content()? {
                return Err(IoError::at(path, Location::Line(n), format!("more lines after the {what}")));
            }
            return Ok(());
        }
        let src = self.lines.source_mut();
        let left = src.fill_buf().map_err(|err| read_error(path, &err))?.len();
        if left > 0 {
            let bytes = src.remaining().map_or(String::new(), |n| format!("{n} "));
            return Err(IoError::new(path, format!("{bytes}more bytes after the {what}")));
        }
        Ok(())
    }
}

/// One ascii element: the scalar values into `values` (unparsed where not needed: NaN), the
/// items of list `list` into `items`.
fn parse_ascii<'l>(
    line: &'l str,
    e: &Element,
    list: Option<usize>,
    values: &mut [f64],
    texts: &mut Vec<&'l str>,
    items: &mut Vec<f64>,
) -> std::result::Result<(), String> {
    let mut words = line.split_whitespace();
    let mut next = |what: &str| {
        words.next().ok_or_else(|| format!("too few values for a '{}' element: {what} is missing", e.name))
    };
    // A value of its type: an integer type's text a whole number in its range (a binary
    // file could hold no other).
    let number = |w: &str, t: Scalar, name: &str| {
        if !t.is_int() {
            return w.parse::<f64>().map_err(|_| format!("'{w}' is not a number"));
        }
        let (lo, hi) = t.range();
        match w.parse::<i64>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v as f64),
            Ok(_) => Err(format!("{w} does not fit {name}'s type {} ({lo} to {hi})", t.name())),
            Err(e) if matches!(e.kind(), IntErrorKind::PosOverflow | IntErrorKind::NegOverflow) => {
                Err(format!("{w} does not fit {name}'s type {} ({lo} to {hi})", t.name()))
            }
            Err(_) if w.parse::<f64>().is_ok() => {
                Err(format!("'{w}' is not a whole number ({name} is of integer type {})", t.name()))
            }
            Err(_) => Err(format!("'{w}' is not a number")),
        }
    };
    texts.clear();
    for (k, p) in e.props.iter().enumerate() {
        match p.kind {
            Kind::Scalar(t) => {
                let w = next(&p.name)?;
                values[k] = number(w, t, &p.name)?;
                texts.push(w);
            }
            Kind::List(ct, it) => {
                let w = next(&p.name)?;
                let len = number(w, ct, &format!("the length of list '{}'", p.name))?;
                if len < 0.0 {
                    return Err(format!("list '{}' has length {w}", p.name));
                }
                let item = format!("an item of list '{}'", p.name);
                for _ in 0..len as u64 {
                    let w = next(&item)?;
                    if list == Some(k) {
                        items.push(number(w, it, &item)?);
                    }
                }
                texts.push("");
            }
        }
    }
    if let Some(w) = words.next() {
        return Err(format!("'{w}' is more than the header's properties of a '{}' element", e.name));
    }
    Ok(())
}

fn read_scalar<R: Read>(src: &mut R, t: Scalar, big: bool) -> io::Result<f64> {
    let mut b = [0u8; 8];
    src.read_exact(&mut b[..t.size()])?;
    Ok(t.decode(&b[..t.size()], big))
}

fn skip<R: Read>(src: &mut R, bytes: u64) -> io::Result<()> {
    let copied = io::copy(&mut src.take(bytes), &mut io::sink())?;
    if copied < bytes {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// The end of the file where more was needed is `ends`; other failures are read errors.
fn eof_or(err: io::Error, path: &Path, ends: impl FnOnce(()) -> IoError) -> IoError {
    match err.kind() {
        io::ErrorKind::UnexpectedEof => ends(()),
        _ => read_error(path, &err),
    }
}
