//! Closest A–B pairs: each A's nearest B, and the k closest pairs.
//!
//! What the query asks for and returns, and the total order of its candidates; `cpu` and
//! `cuda` run the same plan (see `cpu`) over the `MortonTree` of B.

pub(crate) mod cpu;
pub(crate) mod cuda;

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::geometry::real::Real;

/// How `closest_pairs` pairs A with B.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PairMode {
    /// Each A's nearest B, then the k closest of those: an A appears at most once, a B may
    /// repeat (the "closest enemy pairs" of two armies).
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
    /// The A (query) point.
    pub a: u32,
    /// The B (indexed) point.
    pub b: u32,
    /// Euclidean distance: the square root of the squared distance the order is decided on.
    pub distance: T,
}

/// What a closest-pairs query asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairsOptions<T> {
    /// How many pairs.
    pub k: usize,
    /// Nearest-per-A or all pairs.
    pub mode: PairMode,
    /// Keep only pairs with squared distance <= `max_distance²` (both in the working precision).
    pub max_distance: Option<T>,
}

impl<T: Real> Default for PairsOptions<T> {
    fn default() -> Self {
        Self { k: 100, mode: PairMode::NearestPerA, max_distance: None }
    }
}

impl<T: Real> PairsOptions<T> {
    /// The `k` closest, everything else as default.
    pub fn k(k: usize) -> Self {
        Self { k, ..Self::default() }
    }
}

/// Every A's nearest B: `b[i]` is `NO_ID` (and `distance[i]` infinite) when no B lies within
/// the max distance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Nearest<T> {
    /// Each A's nearest B (`NO_ID` for none).
    pub b: Vec<u32>,
    /// Its distance (infinite for none).
    pub distance: Vec<T>,
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
