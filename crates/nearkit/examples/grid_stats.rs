//! Tuning aid for `CandidateGrid`: list lengths, scan lengths and times for one data set.
//! `cargo run --release --example grid_stats -- FILE.off [log2 queries] [k] [cells...]`

use std::time::Instant;

use nearkit::cpu::search;
use nearkit::generate::{generate, Distribution};
use nearkit::grid::{CandidateGrid, GridFrame};
use nearkit::tree::{MortonTree, DEFAULT_LEAF_SIZE, NO_ID};
use nearkit::Points;
use rayon::prelude::*;

fn read_off(path: &str) -> Points<f32> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut it = text.split_whitespace();
    assert_eq!(it.next(), Some("OFF"));
    let n: usize = it.next().unwrap().parse().unwrap();
    it.next();
    it.next();
    let mut p = Points::with_capacity(n);
    for _ in 0..n {
        let v: Vec<f32> = (0..3).map(|_| it.next().unwrap().parse().unwrap()).collect();
        p.push(v[0], v[1], v[2]);
    }
    p
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = if args.len() > 1 && args[1] != "sphere" {
        read_off(&args[1])
    } else {
        generate(Distribution::Sphere, 19_851, 1.0, 11)
    };
    let log2: u32 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(20);
    let k: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(8);
    let cells: Vec<usize> = if args.len() > 4 {
        args[4..].iter().map(|s| s.parse().unwrap()).collect()
    } else {
        vec![1 << 14, 1 << 16, 1 << 17, 1 << 18]
    };
    let (lo, hi) = data.bounds();
    let nq = 1usize << log2;
    let unit = generate::<f32>(Distribution::Uniform, nq, 1.0, 7);
    let q: Vec<[f32; 3]> = (0..nq)
        .map(|i| {
            let p = unit.get(i);
            std::array::from_fn(|d| lo[d] + p[d] * (hi[d] - lo[d]))
        })
        .collect();
    let t = Instant::now();
    let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
    println!("{} points, tree {:?}", data.len(), t.elapsed());
    let t = Instant::now();
    let reference: Vec<Vec<(f32, u32)>> = q
        .par_iter()
        .map_init(Vec::new, |b, &p| {
            search::knn(&tree, p, k, f32::INFINITY, NO_ID, b);
            b.clone()
        })
        .collect();
    println!("tree search {nq} queries: {:?}", t.elapsed());
    let (tlo, thi) = ([tree.lo[0][0], tree.lo[1][0], tree.lo[2][0]], [tree.hi[0][0], tree.hi[1][0], tree.hi[2][0]]);
    for &c in &cells {
        let frame = GridFrame::plan(tlo, thi, c).unwrap();
        let t = Instant::now();
        let g = CandidateGrid::build(&tree, frame, k, f32::INFINITY);
        let build = t.elapsed();
        let lens: Vec<u32> = g
            .start
            .iter()
            .step_by(nearkit::grid::BUCKETS)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        let maxl = *lens.iter().max().unwrap();
        let t = Instant::now();
        let res: Vec<Vec<(f32, u32)>> = q
            .par_iter()
            .map_init(
                || vec![(0f32, NO_ID); k],
                |b, &p| {
                    assert!(g.knn(&tree, p, f32::INFINITY, NO_ID, b));
                    b.clone()
                },
            )
            .collect();
        let query = t.elapsed();
        let ok = res == reference;
        // Entries scanned per query (same skip rule as CandidateGrid::knn), over a sample.
        let mut scanned = Vec::new();
        for (qi, &p) in q.iter().enumerate().step_by(97) {
            let (c, e) = g.frame.locate(p).unwrap();
            let bd = reference[qi][k - 1].0;
            let mut s = 0;
            for b in c * nearkit::grid::BUCKETS..(c + 1) * nearkit::grid::BUCKETS {
                let gg = g.floor[b] - e;
                if gg > 0.0 && gg * gg > bd * 1.00001 {
                    continue;
                }
                s += g.start[b + 1] - g.start[b];
            }
            scanned.push(s);
        }
        scanned.sort();
        let ns = scanned.len();
        println!(
            "  scanned (with final bound) mean {:.1} p50 {} p90 {} p99 {}",
            scanned.iter().sum::<u32>() as f64 / ns as f64,
            scanned[ns / 2],
            scanned[ns * 9 / 10],
            scanned[ns * 99 / 100]
        );
        println!(
            "cells {:>8} dims {:?} entries {:>10} avg list {:>7.1} max {:>6}  build {:>8.1?} query {:>8.1?} equal {ok}",
            g.frame.cells(),
            g.frame.dims,
            g.len(),
            g.len() as f64 / g.frame.cells() as f64,
            maxl,
            build,
            query
        );
    }
}
