use std::fmt;
use std::path::{Path, PathBuf};

/// A file problem, naming the file and, where it applies, the line or row.
#[derive(Debug)]
pub struct IoError {
    pub path: PathBuf,
    pub location: Option<Location>,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a text file.
    Line(usize),
    /// 0-based point (row) of a binary file.
    Row(usize),
    /// 0-based record of a binary file that is not a point, e.g. `triangle 7` of an STL.
    Record(&'static str, usize),
}

impl IoError {
    pub fn new(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), location: None, message: message.into() }
    }
    pub fn at(path: &Path, location: Location, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), location: Some(location), message: message.into() }
    }
    /// At `location` where there is one.
    pub fn maybe_at(path: &Path, location: Option<Location>, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), location, message: message.into() }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        match self.location {
            Some(Location::Line(l)) => write!(f, ", line {l}")?,
            Some(Location::Row(r)) => write!(f, ", row {r}")?,
            Some(Location::Record(kind, i)) => write!(f, ", {kind} {i}")?,
            None => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for IoError {}

pub type Result<T> = std::result::Result<T, IoError>;
