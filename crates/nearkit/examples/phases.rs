//! Times the phases of a closest-pairs query on seed A's workload (a tuning aid).
use nearkit::cpu::search;
use nearkit::generate::seed_a_armies;
use nearkit::tree::{MortonTree, NO_ID};
use rayon::prelude::*;
use std::time::Instant;

fn main() {
    let (a0, b) = seed_a_armies::<f32>(2026);
    for leaf in [4u32, 8, 16, 32] {
        let t = Instant::now();
        let tree = MortonTree::build(&b, leaf);
        let build = t.elapsed();
        let t = Instant::now();
        let mut order: Vec<(u64, u32)> =
            (0..a0.len()).into_par_iter().map(|i| (tree.frame.code(a0.x[i], a0.y[i], a0.z[i]), i as u32)).collect();
        order.par_sort_unstable();
        let a: Vec<[f32; 3]> = order.par_iter().map(|&(_, i)| a0.get(i as usize)).collect();
        let sort = t.elapsed();
        let t = Instant::now();
        let mut bounds: Vec<f32> = a.par_iter().map(|&q| search::window_upper_bound(&tree, q, 4)).collect();
        let bt = t.elapsed();
        let (_, kth, _) = bounds.select_nth_unstable_by(99, |x, y| x.partial_cmp(y).unwrap());
        let tau = *kth;
        let t = Instant::now();
        let found: usize = a.par_iter().map(|&q| (search::nearest(&tree, q, tau, NO_ID).1 != NO_ID) as usize).sum();
        let et = t.elapsed();
        let t = Instant::now();
        let _: Vec<_> = a.par_iter().map(|&q| search::nearest(&tree, q, f32::INFINITY, NO_ID)).collect();
        let full = t.elapsed();
        println!("leaf {leaf}: build {build:?} sortA {sort:?} bound {bt:?} tau {} exact {et:?} cands {found} | full join {full:?}", tau.sqrt());
    }
}
