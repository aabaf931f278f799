//! The one error type of the library: every failure names what went wrong and what to do.

use std::fmt;

/// Which input set a problem was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The query set of closest pairs.
    A,
    /// The indexed set of closest pairs.
    B,
    /// An indexed set.
    Data,
    /// A query set.
    Queries,
    /// A mesh's vertices.
    Vertices,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::A => "A",
            Role::B => "B",
            Role::Data => "data",
            Role::Queries => "queries",
            Role::Vertices => "vertices",
        })
    }
}

/// What went wrong; its message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A set with no points.
    #[error("point set {role} is empty: give at least one point")]
    EmptySet {
        /// Which set.
        role: Role,
    },
    /// A NaN or infinite coordinate.
    #[error("point set {role}, point {index}: coordinate {axis} is {value} (coordinates must be finite numbers)")]
    NonFinite {
        /// Which set.
        role: Role,
        /// The point's row.
        index: usize,
        /// `x`, `y` or `z` (or the axis number of a vector).
        axis: char,
        /// The value.
        value: f64,
    },
    /// More points than ids can name.
    #[error("point set {role} has {len} points; at most {max} are supported")]
    TooLarge {
        /// Which set.
        role: Role,
        /// Its size.
        len: usize,
        /// The most supported.
        max: usize,
    },
    /// k = 0.
    #[error("k must be at least 1 (got 0)")]
    ZeroK,
    /// A max distance that is negative or not finite.
    #[error("max distance must be a finite number >= 0 (got {0})")]
    BadMaxDistance(f64),
    /// A search radius that is negative or not finite.
    #[error("radius must be a finite number >= 0 (got {0})")]
    BadRadius(f64),
    /// Coordinate columns of different lengths.
    #[error("columns x, y, z have different lengths ({x}, {y}, {z})")]
    RaggedColumns {
        /// Length of x.
        x: usize,
        /// Length of y.
        y: usize,
        /// Length of z.
        z: usize,
    },
    /// Coordinates whose squared distances the working precision cannot compute without
    /// overflow or underflow, at any power-of-two scale.
    #[error("point set {role}: {detail}")]
    Magnitudes {
        /// Which set.
        role: Role,
        /// The range found and the one needed.
        detail: String,
    },
    /// A result larger than the memory the system can give.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// CUDA was asked for explicitly, but no driver, NVRTC or GPU is usable.
    #[error("CUDA was asked for but is not usable: {0}")]
    CudaUnavailable(String),
    /// The GPU or the driver failed.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// Any other bad input or option; the message names it.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// `Result` with nearkit's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
