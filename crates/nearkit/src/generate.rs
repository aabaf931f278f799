//! Reproducible point generators for defaults, benchmarks and tests.
//!
//! Points are made in blocks of 65,536, each from its own seeded PCG stream, so the output
//! depends only on (distribution, count, range, seed) and not on the number of threads.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use crate::error::Error;
use crate::geometry::points::Points;
use crate::geometry::real::Real;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// A distribution of generated points, in the cube [0, range)³.
pub enum Distribution {
    /// Integer coordinates uniform in [0, range).
    UniformInt,
    /// Real coordinates uniform in [0, range).
    Uniform,
    /// 32 tight Gaussian clusters (sigma = range / 1000): most of the volume is empty.
    Clustered,
    /// On the surface of the sphere of diameter `range` centred in the cube.
    Sphere,
    /// On the plane z = range / 2.
    Plane,
    /// Integer points drawn from a pool of count/100 distinct ones: many exact duplicates.
    Duplicates,
}

impl Distribution {
    /// Every distribution.
    pub const ALL: [Distribution; 6] =
        [Self::UniformInt, Self::Uniform, Self::Clustered, Self::Sphere, Self::Plane, Self::Duplicates];
    /// Its name on the command line (`uniform-int`, `clustered`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::UniformInt => "uniform-int",
            Self::Uniform => "uniform",
            Self::Clustered => "clustered",
            Self::Sphere => "sphere",
            Self::Plane => "plane",
            Self::Duplicates => "duplicates",
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Distribution {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|d| d.name()).collect();
            Error::InvalidArgument(format!("unknown distribution '{s}': use one of {}", names.join(", ")))
        })
    }
}

/// The coordinate range of [`armies`]: 2^20.
pub const ARMY_RANGE: f64 = 1_048_576.0;

const BLOCK: usize = 1 << 16;

fn stream(seed: u64, block: u64) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ block.wrapping_add(0x5851_F42D))
}

fn gaussian(rng: &mut Pcg64Mcg) -> f64 {
    // Box–Muller; 1 - u keeps the logarithm finite.
    let u: f64 = rng.random();
    let v: f64 = rng.random();
    (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Whether [`generate`] can make points of `dist` in [0, range)³ in precision T as asked: an
/// error naming the problem where `range` is not finite and positive, is too large or too small
/// for T (the points would be infinite or all round to the same few values), or, for the
/// integer distributions, is not an integer that T holds exactly.
pub fn check_range<T: Real>(dist: Distribution, range: f64) -> Result<(), Error> {
    let shown = if range != 0.0 && (range.abs() >= 1e16 || range.abs() < 1e-4) {
        format!("{range:e}")
    } else {
        format!("{range}")
    };
    let bad = |why: String| Err(Error::InvalidArgument(format!("range {shown}: {why}")));
    if !(range.is_finite() && range > 0.0) {
        return bad("it must be a finite number > 0".into());
    }
    if matches!(dist, Distribution::UniformInt | Distribution::Duplicates) {
        let exact = 2f64.powi(T::MANTISSA_DIGITS as i32);
        if range.fract() != 0.0 {
            return bad(format!("{} makes integer coordinates: give an integer range", dist.name()));
        }
        if range > exact {
            return bad(format!(
                "{} cannot hold every integer below it exactly (2^{} at most)",
                T::NAME,
                T::MANTISSA_DIGITS
            ));
        }
        return Ok(());
    }
    if !T::from_f64(range).is_finite() {
        return bad(format!("{} cannot hold it (largest {:e})", T::NAME, f32::MAX));
    }
    // Points a 2^-MANTISSA_DIGITS part of the range apart must stay apart.
    if range * 2f64.powi(-(T::MANTISSA_DIGITS as i32)) < T::MIN_NORMAL.to_f64() {
        return bad(format!("too small for {}: its points would round together", T::NAME));
    }
    Ok(())
}

/// `count` points of the given distribution in the cube [0, range)^3 (a range that
/// [`check_range`] accepts).
pub fn generate<T: Real>(dist: Distribution, count: usize, range: f64, seed: u64) -> Points<T> {
    // Shared parameters (cluster centres, duplicate pool) come from a stream of their own.
    let mut setup = stream(seed, u64::MAX);
    let centres: Vec<[f64; 3]> =
        (0..32).map(|_| [0; 3].map(|_| range * (0.05 + 0.9 * setup.random::<f64>()))).collect();
    let pool: Vec<[f64; 3]> = (0..(count / 100).max(1))
        .map(|_| [0; 3].map(|_| (setup.random::<f64>() * range).floor().min(range - 1.0).max(0.0)))
        .collect();
    let sigma = range / 1000.0;

    let rows: Vec<[f64; 3]> = (0..count.div_ceil(BLOCK))
        .into_par_iter()
        .flat_map_iter(|blk| {
            let mut rng = stream(seed, blk as u64);
            let n = BLOCK.min(count - blk * BLOCK);
            let (centres, pool) = (&centres, &pool);
            (0..n).map(move |_| match dist {
                Distribution::UniformInt => [0; 3].map(|_| rng.random_range(0..range.max(1.0) as u64) as f64),
                Distribution::Uniform => [0; 3].map(|_| rng.random::<f64>() * range),
                Distribution::Clustered => {
                    let c = centres[rng.random_range(0..centres.len())];
                    [
                        c[0] + sigma * gaussian(&mut rng),
                        c[1] + sigma * gaussian(&mut rng),
                        c[2] + sigma * gaussian(&mut rng),
                    ]
                }
                Distribution::Sphere => {
                    let v = [gaussian(&mut rng), gaussian(&mut rng), gaussian(&mut rng)];
                    let len = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt().max(1e-300);
                    v.map(|c| range / 2.0 + range / 2.0 * c / len)
                }
                Distribution::Plane => [rng.random::<f64>() * range, rng.random::<f64>() * range, range / 2.0],
                Distribution::Duplicates => pool[rng.random_range(0..pool.len())],
            })
        })
        .collect();
    let mut p = Points::with_capacity(count);
    for r in rows {
        p.push(T::from_f64(r[0]), T::from_f64(r[1]), T::from_f64(r[2]));
    }
    p
}

/// Two armies of soldiers at integer positions uniform in [0, 2^20): A = 1,000,000 and
/// B = 400,000 (the default workload of `nearkit pairs`, whose 100 closest A–B pairs the
/// project's benchmarks time).
pub fn armies<T: Real>(seed: u64) -> (Points<T>, Points<T>) {
    (
        generate(Distribution::UniformInt, 1_000_000, ARMY_RANGE, seed),
        generate(Distribution::UniformInt, 400_000, ARMY_RANGE, seed.wrapping_add(1)),
    )
}
