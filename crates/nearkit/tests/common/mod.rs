//! Brute-force references: every pair examined, in the query's own order
//! (squared distance, then a, then b).
#![allow(dead_code)]

use nearkit::generate::{generate, Distribution};
use nearkit::{
    shifted_sort_knn, ClosestPointOptions, ClosestPoints, Engine, Knn, KnnOptions, Mesh, MeshIndex, Nearest, Pair,
    PairsOptions, PointIndex, Points, Real, Result, Role, ShiftedSortOptions, VectorIndex, Vectors, NO_ID,
};

/// Runs each query as a caller of the public API does: an index built on the engine for the
/// data (B), then queried once.
pub struct On(pub Engine);

/// The CPU.
pub fn cpu() -> On {
    On(Engine::cpu())
}

impl On {
    pub fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        a.validate(Role::A)?;
        b.validate(Role::B)?;
        PointIndex::new(b, &self.0)?.closest_pairs(a, opts)
    }

    pub fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
        a.validate(Role::A)?;
        b.validate(Role::B)?;
        PointIndex::new(b, &self.0)?.nearest(a, max_distance)
    }

    pub fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        PointIndex::new(data, &self.0)?.knn(queries, opts)
    }

    pub fn closest_points<T: Real>(
        &self,
        mesh: &Mesh<T>,
        queries: &Points<T>,
        opts: &ClosestPointOptions<T>,
    ) -> Result<ClosestPoints<T>> {
        MeshIndex::new(mesh, &self.0)?.closest_points(queries, opts)
    }

    pub fn knn_vectors<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        opts: &KnnOptions<T>,
    ) -> Result<Knn<T>> {
        VectorIndex::new(data, &self.0)?.knn(queries, opts)
    }

    pub fn approx_knn<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        opts: &ShiftedSortOptions,
    ) -> Result<Knn<T>> {
        shifted_sort_knn(data, queries, opts, &self.0)
    }
}

/// Squared distance in the library's operation order, in precision `T`.
pub fn d2<T: Real>(a: &Points<T>, i: usize, b: &Points<T>, j: usize) -> T {
    let (dx, dy, dz) = (a.x[i] - b.x[j], a.y[i] - b.y[j], a.z[i] - b.z[j]);
    dx * dx + dy * dy + dz * dz
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

/// Vector sets of several dimensions and shapes: (name, data, queries). Ties are common in
/// the integer-grid sets; the 6-D sets are seed C's triangle embeddings of a random mesh.
pub fn vector_sets<T: Real>(seed: u64, n_data: usize, n_queries: usize) -> Vec<(String, Vectors<T>, Vectors<T>)> {
    use nearkit::Aabb6;
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut uniform = |d: usize, n: usize, int_range: Option<u32>| -> Vectors<T> {
        let cols = (0..d)
            .map(|_| {
                (0..n)
                    .map(|_| match int_range {
                        Some(r) => T::from_f64(rng.random_range(0..r) as f64),
                        None => T::from_f64(rng.random::<f64>() * 100.0 - 50.0),
                    })
                    .collect()
            })
            .collect();
        Vectors::new(cols).unwrap()
    };
    let mut out = vec![
        ("1-D uniform".to_string(), uniform(1, n_data, None), uniform(1, n_queries, None)),
        ("2-D integer grid".to_string(), uniform(2, n_data, Some(20)), uniform(2, n_queries, Some(20))),
        ("5-D uniform".to_string(), uniform(5, n_data, None), uniform(5, n_queries, None)),
        ("8-D integer grid".to_string(), uniform(8, n_data, Some(3)), uniform(8, n_queries, Some(3))),
    ];
    for dist in [Distribution::Clustered, Distribution::Duplicates] {
        let d: Points<T> = generate(dist, n_data, 1000.0, seed + 1);
        let q: Points<T> = generate(Distribution::Uniform, n_queries, 1000.0, seed + 2);
        out.push((format!("3-D {}", dist.name()), Vectors::from_points(&d), Vectors::from_points(&q)));
    }
    // A mesh on a sphere: triangles of nearby vertices (Morton-adjacent triples).
    let v: Points<T> = generate(Distribution::Sphere, n_data / 2 + 3, 100.0, seed + 3);
    let tree = nearkit::test_hooks::MortonTree::build(&v, 8);
    let sorted: Vec<u32> = tree.id.clone();
    let triangles: Vec<[u32; 3]> = (0..n_data)
        .map(|t| {
            let i = t % (sorted.len() - 2);
            [sorted[i], sorted[i + 1], sorted[i + 2]]
        })
        .collect();
    let mesh = Mesh { vertices: v, triangles };
    let q: Points<T> = generate(Distribution::Uniform, n_queries, 120.0, seed + 4);
    for e in [Aabb6::MinMax, Aabb6::MinExtent] {
        out.push((format!("6-D {e:?} triangles"), e.triangles(&mesh), e.queries(&q)));
    }
    out
}

/// Brute-force kNN of vectors in precision `T` (the library's operation order): per query the
/// k smallest (d2, id) with d2 <= r2 and id != the query's own index when `skip_self`.
pub fn brute_knn_vectors<T: Real>(
    data: &Vectors<T>,
    queries: &Vectors<T>,
    k: usize,
    r2: T,
    skip_self: bool,
) -> Vec<Vec<(T, u32)>> {
    let d = data.dim();
    (0..queries.len())
        .map(|q| {
            let qv = queries.get(q);
            let mut all: Vec<(T, u32)> = (0..data.len())
                .filter(|&i| !(skip_self && i == q))
                .map(|i| (nearkit::test_hooks::dist2_nd(d, &qv, &data.get(i)), i as u32))
                .filter(|&(d2, _)| d2 <= r2)
                .collect();
            all.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
            all.truncate(k);
            all
        })
        .collect()
}
