//! What a query asks for and what it returns; shared by both backends.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result, Role};
use crate::points::Points;
use crate::real::Real;

/// How `closest_pairs` pairs A with B.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PairMode {
    /// Each A's nearest B, then the k closest of those: an A appears at most once, a B may
    /// repeat (seed A's "closest enemy pairs").
    #[default]
    NearestPerA,
    /// The k globally closest A–B pairs: an A may appear several times.
    AllPairs,
}

impl FromStr for PairMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "nearest-per-a" => Ok(Self::NearestPerA),
            "all-pairs" => Ok(Self::AllPairs),
            _ => Err(Error::InvalidArgument(format!("unknown pair mode '{s}': use nearest-per-a or all-pairs"))),
        }
    }
}

impl fmt::Display for PairMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NearestPerA => "nearest-per-a",
            Self::AllPairs => "all-pairs",
        })
    }
}

/// One A–B pair of a result. Its rank is its position in the result (0-based).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair<T> {
    pub a: u32,
    pub b: u32,
    /// Euclidean distance: the square root of the squared distance the order is decided on.
    pub distance: T,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairsOptions<T> {
    pub k: usize,
    pub mode: PairMode,
    /// Keep only pairs with squared distance <= `max_distance²` (both in the working precision).
    pub max_distance: Option<T>,
}

impl<T: Real> Default for PairsOptions<T> {
    fn default() -> Self {
        Self { k: 100, mode: PairMode::NearestPerA, max_distance: None }
    }
}

/// Every A's nearest B: `b[i]` is `NO_ID` (and `distance[i]` infinite) when no B lies within
/// the max distance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Nearest<T> {
    pub b: Vec<u32>,
    pub distance: Vec<T>,
}

/// Checks inputs shared by all queries and returns the squared search radius.
pub(crate) fn check_inputs<T: Real>(a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<T> {
    a.validate(Role::A)?;
    b.validate(Role::B)?;
    radius2(max_distance)
}

/// The squared search radius of an optional max distance (which must be finite and >= 0).
pub(crate) fn radius2<T: Real>(max_distance: Option<T>) -> Result<T> {
    match max_distance {
        None => Ok(T::INFINITY),
        Some(r) if r.is_finite() && r >= T::ZERO => Ok(r * r),
        Some(r) => Err(Error::BadMaxDistance(r.to_f64())),
    }
}

/// A candidate pair ordered by (squared distance, a, b): the one total order every result uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Candidate {
    pub d2_bits: u64,
    pub a: u32,
    pub b: u32,
}

impl Candidate {
    pub fn new<T: Real>(d2: T, a: u32, b: u32) -> Self {
        Self { d2_bits: d2.ordered_bits(), a, b }
    }
}

/// Keeps the k smallest candidates seen, in bounded memory (at most 2k held at once).
#[derive(Clone, Debug)]
pub(crate) struct TopK {
    k: usize,
    items: Vec<Candidate>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        Self { k, items: Vec::new() }
    }

    pub fn push(&mut self, c: Candidate) {
        self.items.push(c);
        if self.items.len() >= 2 * self.k.max(1024) {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        if self.items.len() > self.k {
            self.items.select_nth_unstable(self.k);
            self.items.truncate(self.k);
        }
    }

    pub fn merge(mut self, other: TopK) -> TopK {
        for c in other.items {
            self.push(c);
        }
        self
    }

    /// The k smallest, ascending.
    pub fn into_sorted(mut self) -> Vec<Candidate> {
        self.shrink();
        self.items.sort_unstable();
        self.items
    }
}

/// Turns sorted candidates into pairs (squared distance -> distance).
pub(crate) fn to_pairs<T: Real>(c: &[Candidate], d2_of: impl Fn(u64) -> T) -> Vec<Pair<T>> {
    c.iter().map(|c| Pair { a: c.a, b: c.b, distance: d2_of(c.d2_bits).sqrt() }).collect()
}

/// What `knn` asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KnnOptions<T> {
    pub k: usize,
    /// Only neighbours with squared distance <= `max_distance²` (in the working precision).
    pub max_distance: Option<T>,
    /// Queries and data are the same set: query i does not list data point i (a kNN graph).
    pub exclude_self: bool,
}

impl<T: Real> Default for KnnOptions<T> {
    fn default() -> Self {
        Self { k: 8, max_distance: None, exclude_self: false }
    }
}

/// For each query its `k` nearest data points, ascending by (distance, id), row-major:
/// query `q`'s neighbours are `ids[q*k..(q+1)*k]`. Missing neighbours (beyond the max
/// distance) are `NO_ID` with an infinite distance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Knn<T> {
    pub k: usize,
    pub ids: Vec<u32>,
    pub distances: Vec<T>,
}

/// Checks knn inputs; returns (effective k, squared radius).
pub(crate) fn check_knn<T: Real>(data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<(usize, T)> {
    data.validate(Role::Data)?;
    queries.validate(Role::Queries)?;
    knn_limits(data.len(), queries.len(), opts)
}

/// Effective k and squared radius of a kNN query over `n_data` points (also for data already
/// on a device). k is clamped to the number of data points a query can have as neighbours.
pub(crate) fn knn_limits<T: Real>(n_data: usize, n_queries: usize, opts: &KnnOptions<T>) -> Result<(usize, T)> {
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    if opts.exclude_self && n_data != n_queries {
        return Err(Error::InvalidArgument(format!(
            "exclude-self needs the queries to be the data itself ({n_data} data points, {n_queries} queries)"
        )));
    }
    let available = n_data - usize::from(opts.exclude_self);
    Ok((opts.k.min(available).max(1), radius2(opts.max_distance)?))
}
