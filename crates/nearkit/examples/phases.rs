//! Times the phases of a closest-pairs query on seed A's workload (a tuning aid).
use std::time::Instant;
use nearkit::cpu::search;
use nearkit::generate::seed_a_armies;
use nearkit::tree::{MortonTree, NO_ID};
use rayon::prelude::*;

fn main() {
    let (a, b) = seed_a_armies::<f32>(2026);
    for leaf in [4u32, 8, 16, 32] {
        let t = Instant::now();
        let tree = MortonTree::build(&b, leaf);
        let build = t.elapsed();
        let t = Instant::now();
        let mut bounds: Vec<f32> = (0..a.len()).into_par_iter().map(|i| search::window_upper_bound(&tree, a.get(i), 4)).collect();
        let bt = t.elapsed();
        let (_, kth, _) = bounds.select_nth_unstable_by(99, |x, y| x.partial_cmp(y).unwrap());
        let tau = *kth;
        let t = Instant::now();
        let found: usize = (0..a.len()).into_par_iter().map(|i| (search::nearest(&tree, a.get(i), tau, NO_ID).1 != NO_ID) as usize).sum();
        let et = t.elapsed();
        let t = Instant::now();
        let _: Vec<_> = (0..a.len()).into_par_iter().map(|i| search::nearest(&tree, a.get(i), f32::INFINITY, NO_ID)).collect();
        let full = t.elapsed();
        println!("leaf {leaf}: build {build:?} bound {bt:?} tau {} exact {et:?} cands {found} | full join {full:?}", tau.sqrt());
    }
}
