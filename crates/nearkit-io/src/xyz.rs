//! XYZ: one point per line, `x y z` separated by spaces, tabs or commas (`x, y, z`); extra columns
//! (normals, colours) are ignored, but no line may have more than the first (two rows run
//! together), `#` starts a comment.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Points, Real};

use crate::input::{check_width, parse_xyz, Lines, Source};
use crate::Result;

pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path) -> Result<Points<T>> {
    let mut p = Points::with_capacity(0);
    let mut lines = Lines::new(src, path);
    let mut width = None;
    while let Some((line, content)) = lines.next_content()? {
        // Commas separate fields one by one (an empty field is an error, not skipped: the
        // values after it would take the wrong columns); runs of whitespace count as one.
        let f: Vec<&str> = if content.contains(',') {
            let mut f: Vec<&str> = content.split(',').map(str::trim).collect();
            while f.len() > 1 && f.last() == Some(&"") {
                f.pop();
            }
            f
        } else {
            content.split_whitespace().collect()
        };
        check_width(&mut width, f.len(), path, line)?;
        let v = parse_xyz::<T>(&f, path, line)?;
        p.push(v[0], v[1], v[2]);
    }
    Ok(p)
}
