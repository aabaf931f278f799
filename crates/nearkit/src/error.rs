//! The one error type of the library: every failure names what went wrong and what to do.

use std::fmt;

/// Which input set a problem was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    A,
    B,
    Data,
    Queries,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::A => "A",
            Role::B => "B",
            Role::Data => "data",
            Role::Queries => "queries",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("point set {role} is empty: give at least one point")]
    EmptySet { role: Role },
    #[error("point set {role}, point {index}: coordinate {axis} is {value} (coordinates must be finite numbers)")]
    NonFinite { role: Role, index: usize, axis: char, value: f64 },
    #[error("point set {role} has {len} points; at most {max} are supported")]
    TooLarge { role: Role, len: usize, max: usize },
    #[error("k must be at least 1 (got 0)")]
    ZeroK,
    #[error("max distance must be a finite number >= 0 (got {0})")]
    BadMaxDistance(f64),
    #[error("columns x, y, z have different lengths ({x}, {y}, {z})")]
    RaggedColumns { x: usize, y: usize, z: usize },
    #[error("CUDA was asked for but is not usable: {0}")]
    CudaUnavailable(String),
    #[error("CUDA error: {0}")]
    Cuda(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
