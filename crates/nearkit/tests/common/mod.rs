//! Brute-force references: every pair examined, in the query's own order
//! (squared distance, then a, then b).
#![allow(dead_code)]

use nearkit::generate::{generate, Distribution};
use nearkit::{Points, Real, NO_ID};

/// Squared distance in the library's operation order, in precision `T`.
pub fn d2<T: Real>(a: &Points<T>, i: usize, b: &Points<T>, j: usize) -> T {
    nearkit::real::dist2(a.x[i], a.y[i], a.z[i], b.x[j], b.y[j], b.z[j])
}

/// Squared distance computed in f64 from the input coordinates.
pub fn d2_f64<T: Real>(a: &Points<T>, i: usize, b: &Points<T>, j: usize) -> f64 {
    let dx = a.x[i].to_f64() - b.x[j].to_f64();
    let dy = a.y[i].to_f64() - b.y[j].to_f64();
    let dz = a.z[i].to_f64() - b.z[j].to_f64();
    dx * dx + dy * dy + dz * dz
}

/// Each A's nearest B within r2 (inclusive): (b, d2), ties by smaller b.
pub fn brute_nearest<T: Real>(a: &Points<T>, b: &Points<T>, r2: T) -> Vec<(u32, T)> {
    (0..a.len())
        .map(|i| {
            let mut best = (NO_ID, T::INFINITY);
            for j in 0..b.len() {
                let d = d2(a, i, b, j);
                if d <= r2 && (best.0 == NO_ID || d < best.1) {
                    best = (j as u32, d);
                }
            }
            best
        })
        .collect()
}

/// (d2, a, b) of seed A's meaning: each A's nearest B, then the k smallest.
pub fn brute_nearest_per_a<T: Real>(a: &Points<T>, b: &Points<T>, k: usize, r2: T) -> Vec<(T, u32, u32)> {
    let mut v: Vec<(T, u32, u32)> = brute_nearest(a, b, r2)
        .into_iter()
        .enumerate()
        .filter(|(_, (j, _))| *j != NO_ID)
        .map(|(i, (j, d))| (d, i as u32, j))
        .collect();
    sort_pairs(&mut v);
    v.truncate(k);
    v
}

/// The k globally smallest (d2, a, b) over all pairs.
pub fn brute_all_pairs<T: Real>(a: &Points<T>, b: &Points<T>, k: usize, r2: T) -> Vec<(T, u32, u32)> {
    let mut v = Vec::new();
    for i in 0..a.len() {
        for j in 0..b.len() {
            let d = d2(a, i, b, j);
            if d <= r2 {
                v.push((d, i as u32, j as u32));
            }
        }
    }
    sort_pairs(&mut v);
    v.truncate(k);
    v
}

pub fn sort_pairs<T: Real>(v: &mut [(T, u32, u32)]) {
    v.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap().then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
}

/// The shapes of input every query is tested on.
pub fn point_sets<T: Real>(seed: u64, na: usize, nb: usize) -> Vec<(String, Points<T>, Points<T>)> {
    let mut sets = Vec::new();
    for dist in Distribution::ALL {
        let range = if dist == Distribution::UniformInt { 1024.0 } else { 1000.0 };
        sets.push((
            dist.name().to_string(),
            generate::<T>(dist, na, range, seed),
            generate::<T>(dist, nb, range, seed + 1),
        ));
    }
    // Far from the origin: a small cube around (1e6, -2e6, 3e6) in f64, cast after the shift.
    let shift = |p: Points<f64>| {
        let mut q = Points::with_capacity(p.len());
        for i in 0..p.len() {
            q.push(T::from_f64(p.x[i] + 1e6), T::from_f64(p.y[i] - 2e6), T::from_f64(p.z[i] + 3e6));
        }
        q
    };
    sets.push((
        "far-from-origin".into(),
        shift(generate(Distribution::Uniform, na, 100.0, seed)),
        shift(generate(Distribution::Uniform, nb, 100.0, seed + 1)),
    ));
    // Very different sizes, both ways.
    sets.push((
        "one-vs-many".into(),
        generate(Distribution::Uniform, 1, 1000.0, seed),
        generate(Distribution::Uniform, nb * 4, 1000.0, seed + 1),
    ));
    sets.push((
        "many-vs-one".into(),
        generate(Distribution::Uniform, na * 4, 1000.0, seed),
        generate(Distribution::Uniform, 1, 1000.0, seed + 1),
    ));
    // A and B the same points: every nearest distance is 0, a pure tie-breaking test.
    let same = generate::<T>(Distribution::Clustered, na, 1000.0, seed);
    sets.push(("identical-sets".into(), same.clone(), same));
    sets
}
