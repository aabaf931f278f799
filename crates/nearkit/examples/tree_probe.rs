//! A device probe (BENCHMARKS.md, session 48): where the GPU's top 100 (1M × 400K integer
//! points, f32) spends its time. `cargo run --release -p nearkit --example tree_probe -- MODE
//! REPS`, MODE one of `build` (the tree of 400K and of 1M points, resident), `enqueue` (the
//! same, with when the build's kernels are queued), `host` (checks, bounds and uploads of
//! host points), `pairs` (top 100 and every A's nearest B, resident and end to end), `split`
//! (end to end cut at the index and the query), `all`.
use nearkit::generate::{generate, Distribution};
use nearkit::*;
fn ms(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let reps: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(20);
    let e = Engine::with_options(Device::Cuda(0), &EngineOptions::default()).unwrap();
    let b = generate::<f32>(Distribution::UniformInt, 400_000, 1_000_000.0, 2);
    let a = generate::<f32>(Distribution::UniformInt, 1_000_000, 1_000_000.0, 1);
    let db = e.upload(&b).unwrap();
    let da = e.upload(&a).unwrap();
    let opts = PairsOptions::<f32>::default();
    let best = |f: &mut dyn FnMut()| {
        let mut v = Vec::new();
        for _ in 0..reps {
            let t = std::time::Instant::now();
            f();
            e.synchronize().unwrap();
            v.push(ms(t));
        }
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        format!("min {:.3} p50 {:.3}", v[0], v[v.len() / 2])
    };
    if mode == "all" || mode == "build" || mode == "enqueue" {
        for (name, d) in [("400K", &db), ("1M", &da)] {
            let (mut q, mut t) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let t0 = std::time::Instant::now();
                let ix = PointIndex::from_device(d, &e).unwrap();
                q.push(ms(t0));
                e.synchronize().unwrap();
                t.push(ms(t0));
                drop(ix);
            }
            q.sort_by(|x, y| x.partial_cmp(y).unwrap());
            t.sort_by(|x, y| x.partial_cmp(y).unwrap());
            println!("build {name}: enqueued after p50 {:.3} ms, done after p50 {:.3} ms", q[reps / 2], t[reps / 2]);
        }
    }
    if mode == "all" || mode == "build" {
        println!("build 400K: {}", best(&mut || drop(PointIndex::from_device(&db, &e).unwrap())));
        println!("build 1M: {}", best(&mut || drop(PointIndex::from_device(&da, &e).unwrap())));
    }
    if mode == "all" || mode == "host" {
        use rayon::prelude::*;
        println!("rayon threads {}", rayon::current_num_threads());
        println!(
            "validate A: {}",
            best(&mut || {
                let _ = a.validate(Role::A).unwrap();
            })
        );
        println!(
            "bounds A: {}",
            best(&mut || {
                let _ = a.bounds();
            })
        );
        println!(
            "empty par_iter 64: {}",
            best(&mut || (0..64).into_par_iter().for_each(|i| {
                std::hint::black_box(i);
            }))
        );
        println!(
            "copy 12 MB par (256K parts): {}",
            best(&mut || {
                let v: Vec<f32> = a.x.par_chunks(65536).flat_map_iter(|c| c.iter().copied()).collect();
                std::hint::black_box(v);
            })
        );
        println!("upload A: {}", best(&mut || drop(e.upload(&a).unwrap())));
        println!("upload B: {}", best(&mut || drop(e.upload(&b).unwrap())));
        let rows: Vec<f32> = (0..a.len()).flat_map(|i| a.get(i)).collect();
        println!("upload_rows A: {}", best(&mut || drop(e.upload_rows(&rows, Role::A).unwrap())));
    }
    if mode == "split" {
        let (mut t1, mut t2, mut t3) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            let t0 = std::time::Instant::now();
            let ix = PointIndex::new(&b, &e).unwrap();
            t1.push(ms(t0));
            e.synchronize().unwrap();
            t2.push(ms(t0));
            let t = std::time::Instant::now();
            drop(ix.closest_pairs(&a, &opts).unwrap());
            t3.push(ms(t));
        }
        for v in [&mut t1, &mut t2, &mut t3] {
            v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        }
        println!(
            "new(B) returns {:.3}, B's tree done {:.3}, closest_pairs(A) after that {:.3} (p50 ms)",
            t1[reps / 2],
            t2[reps / 2],
            t3[reps / 2]
        );
    }
    if mode == "all" || mode == "pairs" {
        let ix = PointIndex::from_device(&db, &e).unwrap();
        println!("top100 query only (resident): {}", best(&mut || drop(ix.closest_pairs_device(&da, &opts).unwrap())));
        println!(
            "top100 resident incl build: {}",
            best(&mut || drop(PointIndex::from_device(&db, &e).unwrap().closest_pairs_device(&da, &opts).unwrap()))
        );
        println!(
            "top100 end to end: {}",
            best(&mut || drop(PointIndex::new(&b, &e).unwrap().closest_pairs(&a, &opts).unwrap()))
        );
        println!("upload A+B: {}", best(&mut || drop((e.upload(&a).unwrap(), e.upload(&b).unwrap()))));
        println!(
            "nearest end to end: {}",
            best(&mut || drop(PointIndex::new(&b, &e).unwrap().nearest(&a, None).unwrap()))
        );
    }
}
