//! STL (ascii and binary): triangles, with equal corners (equal in the working precision)
//! merged into shared vertices in the order they first appear. A binary STL stores f32, so
//! f64 reads of it are f32 values widened; an ascii STL's numbers are read as written.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::Path;

use nearkit::{Mesh, Points, Real};

use crate::input::{coord, read_error, Source, AXES};
use crate::{IoError, Location, Result};

/// The header and the triangle count of a binary STL.
const BINARY_HEADER: u64 = 84;
/// Normal, three corners (12 f32) and the attribute count (u16).
const TRIANGLE_BYTES: u64 = 50;

pub fn read_mesh<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Mesh<T>> {
    // Telling ascii from binary needs the size; STL files are read whole anyway.
    let mut bytes = Vec::new();
    src.read_to_end(&mut bytes).map_err(|e| read_error(path, &e))?;
    if bytes.is_empty() {
        return Err(IoError::new(path, "empty file: not an STL"));
    }
    // A binary STL may start with "solid" too; one whose size matches its count is binary.
    let binary_fits = binary_count(&bytes).is_some_and(|n| binary_size(n) == bytes.len() as u64);
    if !binary_fits && looks_ascii(&bytes) {
        read_ascii(&bytes, path)
    } else {
        read_binary(&bytes, path)
    }
}

fn binary_count(bytes: &[u8]) -> Option<u32> {
    let b = bytes.get(80..84)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn binary_size(triangles: u32) -> u64 {
    BINARY_HEADER + TRIANGLE_BYTES * u64::from(triangles)
}

/// Ascii STL starts with `solid`; binary data almost always holds a zero byte early on.
fn looks_ascii(bytes: &[u8]) -> bool {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = &text[text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(text.len())..];
    text.get(..5).is_some_and(|w| w.eq_ignore_ascii_case(b"solid"))
        && text.get(5).is_none_or(|b| b.is_ascii_whitespace())
        && !bytes[..bytes.len().min(1024)].contains(&0)
}

/// Shares equal corners (the same values in T) between triangles.
struct Builder<T> {
    index: HashMap<[u64; 3], u32>,
    vertices: Points<T>,
    triangles: Vec<[u32; 3]>,
}

impl<T: Real> Builder<T> {
    fn new(triangles: usize) -> Self {
        Self { index: HashMap::new(), vertices: Points::with_capacity(0), triangles: Vec::with_capacity(triangles) }
    }

    /// A triangle of corners already checked to fit T (`coord`).
    fn push(&mut self, corners: [[T; 3]; 3]) -> std::result::Result<(), String> {
        let mut t = [0u32; 3];
        for (c, v) in corners.iter().enumerate() {
            let next = u32::try_from(self.vertices.len()).map_err(|_| "more vertices than a mesh can index")?;
            let i = *self.index.entry(v.map(|x| x.to_f64().to_bits())).or_insert(next);
            if i == next {
                self.vertices.push(v[0], v[1], v[2]);
            }
            t[c] = i;
        }
        self.triangles.push(t);
        Ok(())
    }

    fn finish(self) -> Mesh<T> {
        Mesh { vertices: self.vertices, triangles: self.triangles }
    }
}

fn read_binary<T: Real>(bytes: &[u8], path: &Path) -> Result<Mesh<T>> {
    let len = bytes.len() as u64;
    let text_hint = if bytes[..bytes.len().min(BINARY_HEADER as usize)].contains(&0) {
        ""
    } else {
        " (an ascii STL starts with 'solid')"
    };
    let Some(n) = binary_count(bytes) else {
        return Err(IoError::new(
            path,
            format!("{len} bytes: too short for a binary STL, which has an 84-byte header and count{text_hint}"),
        ));
    };
    if binary_size(n) != len {
        return Err(IoError::new(
            path,
            format!(
                "header says {n} triangles, which take {} bytes, but the file has {len} bytes: \
                 a binary STL is 84 bytes and 50 a triangle{text_hint}",
                binary_size(n)
            ),
        ));
    }
    let mut mesh = Builder::new(n as usize);
    let f = |at: usize| f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    for t in 0..n as usize {
        // The normal (first 12 bytes) is recomputed by whoever needs it.
        let at = BINARY_HEADER as usize + t * TRIANGLE_BYTES as usize + 12;
        let fail = |m: String| IoError::at(path, Location::Record("triangle", t), m);
        let mut corners = [[T::ZERO; 3]; 3];
        for (c, corner) in corners.iter_mut().enumerate() {
            for a in 0..3 {
                corner[a] = coord(f64::from(f(at + 12 * c + 4 * a)), AXES[a], None)
                    .map_err(|m| fail(format!("corner {}: {m}", c + 1)))?;
            }
        }
        mesh.push(corners).map_err(fail)?;
    }
    Ok(mesh.finish())
}

fn read_ascii<T: Real>(bytes: &[u8], path: &Path) -> Result<Mesh<T>> {
    let at = |line: usize, m: String| IoError::at(path, Location::Line(line), m);
    // Non-blank lines, split into words, with their numbers.
    let lines = &mut bytes.split(|&b| b == b'\n').enumerate().filter_map(|(i, l)| {
        let l = if i == 0 { l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l) } else { l };
        match std::str::from_utf8(l) {
            Ok(s) => {
                let words: Vec<&str> = s.split_whitespace().collect();
                (!words.is_empty()).then_some(Ok((i + 1, words)))
            }
            Err(e) => Some(Err(at(i + 1, format!("not text: byte {} of the line is not UTF-8", e.valid_up_to() + 1)))),
        }
    });
    let mut mesh = Builder::new(0);
    let (n, words) = next_words(lines, path, "solid")?;
    if !words[0].eq_ignore_ascii_case("solid") {
        return Err(at(n, format!("expected 'solid', found '{}'", words[0])));
    }
    loop {
        let (n, words) = next_words(lines, path, "facet' or 'endsolid")?;
        match words[0].to_ascii_lowercase().as_str() {
            "facet" => {}
            // Another solid may follow; else the file is done.
            "endsolid" => match lines.next().transpose()? {
                None => break,
                Some((_, w)) if w[0].eq_ignore_ascii_case("solid") => continue,
                Some((n, w)) => {
                    return Err(at(n, format!("expected 'solid' or the end of the file, found '{}'", w[0])))
                }
            },
            w => return Err(at(n, format!("expected 'facet' or 'endsolid', found '{w}'"))),
        }
        expect_line(lines, path, "outer loop")?;
        let mut corners = [[T::ZERO; 3]; 3];
        for corner in &mut corners {
            let (n, words) = next_words(lines, path, "vertex")?;
            if !words[0].eq_ignore_ascii_case("vertex") || words.len() != 4 {
                let found = words.join(" ");
                return Err(at(n, format!("expected 'vertex x y z' (a facet has 3), found '{found}'")));
            }
            for a in 0..3 {
                corner[a] = stl_float(words[a + 1], AXES[a]).map_err(|m| at(n, m))?;
            }
        }
        expect_line(lines, path, "endloop")?;
        let n = expect_line(lines, path, "endfacet")?;
        mesh.push(corners).map_err(|m| at(n, m))?;
    }
    Ok(mesh.finish())
}

fn next_words<'a>(
    lines: &mut impl Iterator<Item = Result<(usize, Vec<&'a str>)>>,
    path: &Path,
    want: &str,
) -> Result<(usize, Vec<&'a str>)> {
    lines.next().ok_or_else(|| IoError::new(path, format!("file ends where '{want}' was expected")))?
}

/// The next line must be `want`; returns its number.
fn expect_line<'a>(
    lines: &mut impl Iterator<Item = Result<(usize, Vec<&'a str>)>>,
    path: &Path,
    want: &str,
) -> Result<usize> {
    let (n, words) = next_words(lines, path, want)?;
    if !words.join(" ").eq_ignore_ascii_case(want) {
        return Err(IoError::at(path, Location::Line(n), format!("expected '{want}', found '{}'", words.join(" "))));
    }
    Ok(n)
}

/// A coordinate of an ascii STL, as written, in T (`coord`'s checks).
fn stl_float<T: Real>(w: &str, name: &str) -> std::result::Result<T, String> {
    let x: f64 = w.parse().map_err(|_| format!("'{w}' is not a number"))?;
    coord::<T>(x, name, Some(w))
}
