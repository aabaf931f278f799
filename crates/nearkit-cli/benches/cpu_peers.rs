//! nearkit's CPU path against kiddo (a Rust k-d tree, SIMD leaves), in one process on the
//! same points at the same precision (f32 by default, `--f64`), every core for both.
//!
//!     cargo bench -p nearkit-cli --bench cpu_peers -- [--runs 5] [--f64] [--mesh bunny00.off]
//!
//! Workloads (issue 21's): the top-100 closest pairs of 1M × 400K integer points (kiddo: every
//! A's nearest B, then the 100 smallest), every A's nearest B, and kNN (k = 8) of 2^20
//! queries over 20,000 uniform points and over the first 19,851 vertices of `--mesh`. Each
//! side builds its index from the arrays inside the timing. kiddo's answers are checked
//! against nearkit's (ids where distances differ, else distances).

use std::num::NonZero;
use std::time::{Duration, Instant};

use kiddo::immutable::float::kdtree::ImmutableKdTree;
use kiddo::SquaredEuclidean;
use nearkit::generate::{armies, generate, Distribution};
use nearkit::{Device, KnnOptions, PairsOptions, PointIndex, Points, Real};
use rayon::prelude::*;

/// kiddo's tree with u32 items and buckets of 32 (its default).
type Tree<T> = ImmutableKdTree<T, u32, 3, 32>;

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

fn rows<T: Real>(p: &Points<T>) -> Vec<[T; 3]> {
    (0..p.len()).map(|i| p.get(i)).collect()
}

fn show(what: &str, nearkit: Duration, kiddo: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<52} nearkit {:>9.1} ms   kiddo {:>9.1} ms   kiddo / nearkit {:>5.2}×",
        ms(nearkit),
        ms(kiddo),
        ms(kiddo) / ms(nearkit)
    );
}

/// Every A's nearest B by kiddo: (squared distance, id) per A.
fn kiddo_nearest<T>(a: &[[T; 3]], tree: &Tree<T>) -> Vec<(T, u32)>
where
    T: Real + kiddo::float::kdtree::Axis + kiddo::float_leaf_slice::leaf_slice::LeafSliceFloat<u32>,
    T: kiddo::float_leaf_slice::leaf_slice::LeafSliceFloatChunk<u32, 3>,
{
    a.par_iter()
        .map(|q| {
            let n = tree.nearest_one::<SquaredEuclidean>(q);
            (n.distance, n.item)
        })
        .collect()
}

fn run<T>(runs: usize, mesh: Option<&std::path::Path>)
where
    T: Real + kiddo::float::kdtree::Axis + kiddo::float_leaf_slice::leaf_slice::LeafSliceFloat<u32>,
    T: kiddo::float_leaf_slice::leaf_slice::LeafSliceFloatChunk<u32, 3>,
{
    println!("{} threads, {}, medians of {runs} runs after a warm-up", rayon::current_num_threads(), T::NAME);
    let (a, b) = armies::<T>(1);
    let (ra, rb) = (rows(&a), rows(&b));

    // Top-100 closest pairs (each A's nearest B, then the 100 smallest).
    let mut top = Vec::new();
    let nk = median(runs, || {
        top = PointIndex::build(&b, Device::Cpu).unwrap().closest_pairs(&a, &PairsOptions::k(100)).unwrap();
    });
    let mut kiddo_top = Vec::new();
    let kt = median(runs, || {
        let tree = Tree::<T>::new_from_slice(&rb);
        let mut all: Vec<(T, u32, u32)> =
            kiddo_nearest(&ra, &tree).into_iter().enumerate().map(|(i, (d, j))| (d, i as u32, j)).collect();
        let k = 100.min(all.len());
        all.select_nth_unstable_by(k - 1, |x, y| x.partial_cmp(y).unwrap());
        all.truncate(k);
        all.sort_by(|x, y| x.partial_cmp(y).unwrap());
        kiddo_top = all;
    });
    let same = top.iter().zip(&kiddo_top).all(|(p, k)| p.distance == k.0.sqrt());
    show(&format!("top-100 pairs, 1M × 400K ints (same distances: {same})"), nk, kt);

    // Where nearkit's time goes: the index of B alone, and the query on a built index.
    let build = median(runs, || drop(PointIndex::build(&b, Device::Cpu).unwrap()));
    let index = PointIndex::build(&b, Device::Cpu).unwrap();
    let query = median(runs, || drop(index.nearest(&a, None).unwrap()));
    let kiddo_build = median(runs, || drop(Tree::<T>::new_from_slice(&rb)));
    println!(
        "  (index of B: nearkit {:.1} ms, kiddo {:.1} ms; nearkit's all-nearest query on a built index {:.1} ms)",
        build.as_secs_f64() * 1e3,
        kiddo_build.as_secs_f64() * 1e3,
        query.as_secs_f64() * 1e3
    );

    // Every A's nearest B.
    let mut nn = None;
    let nk = median(runs, || nn = Some(PointIndex::build(&b, Device::Cpu).unwrap().nearest(&a, None).unwrap()));
    let mut kn = Vec::new();
    let kt = median(runs, || kn = kiddo_nearest(&ra, &Tree::<T>::new_from_slice(&rb)));
    let nn = nn.unwrap();
    let same = nn.distance.iter().zip(&kn).filter(|(d, k)| **d == k.0.sqrt()).count();
    show(&format!("every A's nearest B, 1M × 400K ({same} of {} same distances)", a.len()), nk, kt);

    // kNN, k = 8, 2^20 queries uniform in the data's box.
    let mut sets = vec![("20,000 uniform points".to_string(), generate::<T>(Distribution::Uniform, 20_000, 1000.0, 7))];
    if let Some(path) = mesh {
        match nearkit_io::read_mesh::<T>(path) {
            Ok(m) => sets.push((format!("first 19,851 vertices of {}", path.display()), m.cut_to(19_851).vertices)),
            Err(e) => println!("(no mesh workload: {e})"),
        }
    }
    for (name, data) in sets {
        let (lo, hi) = data.bounds();
        let unit = generate::<T>(Distribution::Uniform, 1 << 20, 1.0, 11);
        let mut q = Points::with_capacity(unit.len());
        for i in 0..unit.len() {
            let u = unit.get(i);
            q.push(lo[0] + u[0] * (hi[0] - lo[0]), lo[1] + u[1] * (hi[1] - lo[1]), lo[2] + u[2] * (hi[2] - lo[2]));
        }
        let (rd, rq) = (rows(&data), rows(&q));
        let mut knn = None;
        let nk = median(runs, || {
            knn = Some(PointIndex::build(&data, Device::Cpu).unwrap().knn(&q, &KnnOptions::k(8)).unwrap())
        });
        let k8 = NonZero::new(8).unwrap();
        let mut kk: Vec<Vec<T>> = Vec::new();
        let kt = median(runs, || {
            let tree = Tree::<T>::new_from_slice(&rd);
            kk = rq
                .par_iter()
                .map(|p| tree.nearest_n::<SquaredEuclidean>(p, k8).into_iter().map(|n| n.distance).collect())
                .collect();
        });
        let knn = knn.unwrap();
        let same = kk
            .iter()
            .enumerate()
            .filter(|(i, d)| d.iter().zip(&knn.distances[i * 8..]).all(|(x, y)| x.sqrt() == *y))
            .count();
        show(&format!("kNN k=8, 2^20 × {name} ({same} rows same)"), nk, kt);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let runs = value("--runs").and_then(|r| r.parse().ok()).unwrap_or(5);
    let mesh = value("--mesh").map(std::path::PathBuf::from);
    if args.iter().any(|a| a == "--f64") {
        run::<f64>(runs, mesh.as_deref());
    } else {
        run::<f32>(runs, mesh.as_deref());
    }
}
