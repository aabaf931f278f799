//! CSV points: x,y,z columns (more columns allowed, no row longer than the first), header
//! optional; `--columns` picks others.

use std::io::BufRead;
use std::path::Path;

use nearkit::{Points, Real};

use crate::input::{check_width, coord, read_error, Source, AXES};
use crate::{IoError, Location, ReadOptions, Result};

pub fn read<T: Real, R: BufRead>(src: &mut Source<R>, path: &Path, opts: &ReadOptions) -> Result<Points<T>> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(src);
    let mut points = Points::with_capacity(0);
    let mut cols: Option<[usize; 3]> = None;
    let mut record = csv::StringRecord::new();
    let mut first = true;
    let mut width = None;
    loop {
        let more = rdr.read_record(&mut record).map_err(|e| match e.kind() {
            csv::ErrorKind::Io(io) => read_error(path, io),
            _ => {
                let loc = e.position().map(|p| Location::Line(p.line() as usize));
                IoError::maybe_at(path, loc, format!("malformed CSV: {e}"))
            }
        })?;
        if !more {
            break;
        }
        let line = record.position().map(|p| p.line() as usize).unwrap_or(0);
        if record.iter().all(|f| f.is_empty()) {
            continue;
        }
        // Trailing empty fields (trailing commas) do not count.
        let values = record.len() - record.iter().rev().take_while(|f| f.is_empty()).count();
        check_width(&mut width, values, path, line)?;
        let header_row = first;
        if first {
            first = false;
            // Only a row of names is a header: a row with any number in it is data, so that
            // `0,0,zz` is an error rather than a first point silently taken for a header.
            let is_header = record.iter().all(|f| f.parse::<f64>().is_err());
            if is_header {
                cols = Some(pick_columns(path, line, Some(&record), opts)?);
                continue;
            }
            cols = Some(pick_columns(path, line, None, opts)?);
        }
        let c = cols.expect("set on the first record");
        let mut v = [T::ZERO; 3];
        for (d, &ci) in c.iter().enumerate() {
            let at = |m: String| IoError::at(path, Location::Line(line), m);
            let field = record.get(ci).ok_or_else(|| {
                at(format!("{} columns, but {} is column {} (0-based index {ci})", record.len(), AXES[d], ci + 1))
            })?;
            let parsed: f64 = field.parse().map_err(|_| {
                let hint = if header_row { " (a header row holds only names)" } else { "" };
                at(format!("column {}: '{field}' is not a number{hint}", ci + 1))
            })?;
            v[d] = coord(parsed, AXES[d], Some(field)).map_err(at)?;
        }
        points.push(v[0], v[1], v[2]);
    }
    Ok(points)
}

fn pick_columns(
    path: &Path,
    line: usize,
    header: Option<&csv::StringRecord>,
    opts: &ReadOptions,
) -> Result<[usize; 3]> {
    let Some(names) = &opts.columns else {
        if let Some(h) = header {
            // With a header, prefer columns named x, y, z; else the first three.
            let find = |n: &str| h.iter().position(|f| f.eq_ignore_ascii_case(n));
            if let (Some(x), Some(y), Some(z)) = (find("x"), find("y"), find("z")) {
                return Ok([x, y, z]);
            }
        }
        return Ok([0, 1, 2]);
    };
    let mut out = [0; 3];
    for (d, name) in names.iter().enumerate() {
        out[d] = match (name.parse::<usize>(), header) {
            (Ok(i), _) => i,
            (Err(_), Some(h)) => h.iter().position(|f| f == name).ok_or_else(|| {
                let have: Vec<_> = h.iter().collect();
                IoError::at(
                    path,
                    Location::Line(line),
                    format!("no column named '{name}' (columns: {})", have.join(", ")),
                )
            })?,
            (Err(_), None) => {
                return Err(IoError::at(
                    path,
                    Location::Line(line),
                    format!("column '{name}' given by name, but the file has no header row"),
                ))
            }
        };
    }
    Ok(out)
}
