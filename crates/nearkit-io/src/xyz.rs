//! XYZ: one point per line, `x y z` separated by spaces, tabs or commas; extra columns
//! (normals, colours) are ignored, `#` starts a comment.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Points, Real};

use crate::{parse_xyz, read_line, Result};

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
        let v = parse_xyz::<T>(&f, path, line)?;
        p.push(v[0], v[1], v[2]);
        lines.push(line);
    }
    Ok((p, lines))
}
