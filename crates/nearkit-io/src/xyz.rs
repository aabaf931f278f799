//! XYZ: one point per line, `x y z` separated by spaces, tabs or commas; extra columns
//! (normals, colours) are ignored, `#` starts a comment.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Points, Real};

use crate::{read_line, IoError, Location, Result};

pub fn read<T: Real, R: BufRead>(r: &mut R, path: &Path) -> Result<(Points<T>, Vec<usize>)> {
    let mut buf = String::new();
    let mut p = Points::with_capacity(0);
    let mut lines = Vec::new();
    let mut line = 0usize;
    while read_line(r, &mut buf, path)? > 0 {
        line += 1;
        let content = buf.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let f: Vec<&str> = content.split(|c: char| c.is_whitespace() || c == ',').filter(|s| !s.is_empty()).collect();
        if f.len() < 3 {
            return Err(IoError::at(path, Location::Line(line), format!("{} columns, 3 are needed (x y z)", f.len())));
        }
        let mut v = [T::ZERO; 3];
        for d in 0..3 {
            v[d] = T::from_f64(
                f[d].parse::<f64>()
                    .map_err(|_| IoError::at(path, Location::Line(line), format!("'{}' is not a number", f[d])))?,
            );
        }
        p.push(v[0], v[1], v[2]);
        lines.push(line);
    }
    Ok((p, lines))
}
