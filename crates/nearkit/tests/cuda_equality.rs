//! The CUDA backend must return bitwise the CPU backend's answers (and build the same tree).
//! Without a usable GPU these tests say so and pass, unless NEARKIT_REQUIRE_CUDA=1.

mod common;

use common::*;
use nearkit::collide::{Collider, ColliderOptions};
use nearkit::test_hooks::{self as hooks, GridOptions, MortonTree, DEFAULT_LEAF_SIZE};
use nearkit::{Device, DeviceKnn, Engine, KnnOptions, PairMode, PairsOptions, PointIndex, Points, Real, ShardedIndex};

fn gpu() -> Option<On> {
    match Engine::open(Device::Cuda(0)) {
        Ok(e) => Some(On(e)),
        Err(e) => {
            assert!(std::env::var("NEARKIT_REQUIRE_CUDA").as_deref() != Ok("1"), "NEARKIT_REQUIRE_CUDA=1 but: {e}");
            eprintln!("skipped: no usable GPU ({e})");
            None
        }
    }
}

/// GPU 0 with these CUDA options (small chunks and batches, to run every path on small sets).
fn cuda_engine(cuda: nearkit::CudaOptions) -> Engine {
    Engine::with_options(Device::Cuda(0), &nearkit::EngineOptions { cuda, ..Default::default() }).unwrap()
}

fn same_tree<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    // Small sets, and sets past the CPU build's bucket pass and its parallel chunks.
    let sets = point_sets::<T>(seed, 10, 3000).into_iter().chain(point_sets::<T>(seed, 10, 150_000));
    for (name, _, b) in sets {
        let cpu = MortonTree::build(&b, DEFAULT_LEAF_SIZE);
        let dev = hooks::tree_on_device(&gpu.0, &b).unwrap();
        assert_eq!(cpu.frame, dev.frame, "{name}: frame");
        assert_eq!(cpu.key_table, dev.key_table, "{name}: key table");
        assert_eq!(cpu.id, dev.id, "{name}: ids");
        assert_eq!(
            (&cpu.left, &cpu.right, &cpu.other_end),
            (&dev.left, &dev.right, &dev.other_end),
            "{name}: topology"
        );
        assert_eq!(cpu.min_id, dev.min_id, "{name}: min ids");
        for d in 0..3 {
            let bits = |v: &Vec<T>| v.iter().map(|x| x.ordered_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&cpu.lo[d]), bits(&dev.lo[d]), "{name}: lo[{d}]");
            assert_eq!(bits(&cpu.hi[d]), bits(&dev.hi[d]), "{name}: hi[{d}]");
        }
        assert_eq!(cpu, dev, "{name}");
    }
}

fn same_answers<T: Real>(seed: u64, na: usize, nb: usize) {
    let Some(gpu) = gpu() else { return };
    for (name, a, b) in point_sets::<T>(seed, na, nb) {
        for mode in [PairMode::NearestPerA, PairMode::AllPairs] {
            for k in [1, 10, 100, 3000] {
                for max_distance in [None, Some(T::from_f64(4.0))] {
                    let opts = PairsOptions { k, mode, max_distance };
                    let c = cpu().closest_pairs(&a, &b, &opts).unwrap();
                    let g = gpu.closest_pairs(&a, &b, &opts).unwrap();
                    assert_eq!(c, g, "{name}: {mode} k={k} max={max_distance:?}");
                }
            }
        }
        let c = cpu().nearest(&a, &b, None).unwrap();
        let g = gpu.nearest(&a, &b, None).unwrap();
        assert_eq!(c, g, "{name}: nearest");
        // Resident: A, B and the answers on the device (in chunks where the test asks for them).
        let engine = &gpu.0;
        let (da, db) = (engine.upload(&a).unwrap(), engine.upload(&b).unwrap());
        for max_distance in [None, Some(T::from_f64(0.5))] {
            let c = cpu().nearest(&a, &b, max_distance).unwrap();
            let index = PointIndex::from_device(&db, engine).unwrap();
            let g = index.nearest_device(&da, max_distance).unwrap();
            assert_eq!(g.len(), a.len(), "{name}: resident nearest rows");
            assert_eq!(c, g.download(engine).unwrap(), "{name}: resident nearest, max {max_distance:?}");
        }
        // And both against brute force, so "equal" cannot mean "equally wrong".
        let want = brute_nearest_per_a(&a, &b, 100, T::INFINITY);
        let got = gpu.closest_pairs(&a, &b, &PairsOptions { k: 100, ..Default::default() }).unwrap();
        assert_eq!(
            got.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>(),
            want.iter().map(|w| (w.1, w.2)).collect::<Vec<_>>(),
            "{name}"
        );
    }
}

#[test]
fn gpu_builds_the_cpu_tree_f32() {
    same_tree::<f32>(21);
}

#[test]
fn gpu_builds_the_cpu_tree_f64() {
    same_tree::<f64>(22);
}

#[test]
fn gpu_matches_cpu_f32() {
    same_answers::<f32>(31, 2000, 1500);
}

#[test]
fn gpu_matches_cpu_f64() {
    same_answers::<f64>(32, 2000, 1500);
}

#[test]
fn gpu_matches_cpu_in_small_chunks() {
    // Chunking of A (inputs bigger than GPU memory) must not change any answer.
    // Read per call by the CUDA backend; other tests seeing it would only chunk too.
    std::env::set_var("NEARKIT_CUDA_CHUNK", "777");
    same_answers::<f32>(41, 3000, 1000);
    // kNN graphs across chunks: a self id must be the query's index in the whole set, through
    // the grid (40,000 queries) and through the tree (1,500).
    if let Some(gpu) = gpu() {
        for n in [40_000, 1_500] {
            for (name, data, _) in point_sets::<f32>(42, n, 10) {
                let opts = KnnOptions { k: 8, max_distance: None, exclude_self: true, ..Default::default() };
                let c = cpu().knn(&data, &data, &opts).unwrap();
                assert_eq!(c, gpu.knn(&data, &data, &opts).unwrap(), "{name}: chunked graph of {n}");
            }
        }
    }
    std::env::remove_var("NEARKIT_CUDA_CHUNK");
}

#[test]
fn gpu_matches_cpu_on_seed_a() {
    let Some(gpu) = gpu() else { return };
    let (a, b) = nearkit::generate::armies::<f32>(5);
    for mode in [PairMode::NearestPerA, PairMode::AllPairs] {
        let opts = PairsOptions { k: 100, mode, max_distance: None };
        assert_eq!(cpu().closest_pairs(&a, &b, &opts).unwrap(), gpu.closest_pairs(&a, &b, &opts).unwrap(), "{mode}");
    }
    assert_eq!(cpu().nearest(&a, &b, None).unwrap(), gpu.nearest(&a, &b, None).unwrap());
}

fn same_knn<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    for (name, queries, data) in point_sets::<T>(seed, 1500, 2000) {
        for opts in [
            KnnOptions { k: 1, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 8, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 40, max_distance: Some(T::from_f64(5.0)), exclude_self: false, ..Default::default() },
        ] {
            let c = cpu().knn(&data, &queries, &opts).unwrap();
            let g = gpu.knn(&data, &queries, &opts).unwrap();
            assert_eq!(c, g, "{name}: knn {opts:?}");
        }
        let opts = KnnOptions { k: 6, max_distance: None, exclude_self: true, ..Default::default() };
        assert_eq!(cpu().knn(&data, &data, &opts).unwrap(), gpu.knn(&data, &data, &opts).unwrap(), "{name}: graph");
        // Resident: data, queries and results on the device.
        let opts = KnnOptions { k: 8, max_distance: None, exclude_self: false, ..Default::default() };
        let cpu = cpu().knn(&data, &queries, &opts).unwrap();
        let engine = &gpu.0;
        let (dd, dq) = (engine.upload(&data).unwrap(), engine.upload(&queries).unwrap());
        let mut out = DeviceKnn::new(engine, queries.len(), cpu.k).unwrap();
        let k = PointIndex::from_device(&dd, engine).unwrap().knn_device(&dq, &opts, &mut out).unwrap();
        assert_eq!(k, cpu.k, "{name}: resident k");
        let got = out.to_host(engine, queries.len(), k).unwrap();
        assert_eq!(got.ids, cpu.ids, "{name}: resident ids");
        assert!(
            got.distances.iter().zip(&cpu.distances).all(|(a, b)| a.ordered_bits() == b.ordered_bits()),
            "{name}: resident distances"
        );
    }
}

#[test]
fn gpu_knn_matches_cpu_f32() {
    same_knn::<f32>(61);
}

#[test]
fn gpu_knn_matches_cpu_f64() {
    same_knn::<f64>(62);
}

/// Enough queries that both backends take the candidate grid: the same lists, the same answers.
fn same_knn_grid<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    for (name, queries, data) in point_sets::<T>(seed, 40_000, 3000) {
        let tree = MortonTree::build(&data, DEFAULT_LEAF_SIZE);
        for opts in [
            KnnOptions { k: 1, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 8, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 13, max_distance: Some(T::from_f64(30.0)), exclude_self: false, ..Default::default() },
            KnnOptions { k: 32, max_distance: None, exclude_self: false, ..Default::default() },
        ] {
            let k = opts.k.min(data.len());
            let r2 = opts.max_distance.map_or(T::INFINITY, |r| r * r);
            let cpu_grid = hooks::CandidateGrid::for_queries(&tree, queries.len(), k, r2, &GridOptions::default());
            let gpu_grid = hooks::knn_grid_on_device(&gpu.0, &data, queries.len(), k, r2).unwrap();
            assert_eq!(cpu_grid, gpu_grid, "{name}: grid {opts:?}");
            let c = cpu().knn(&data, &queries, &opts).unwrap();
            let g = gpu.knn(&data, &queries, &opts).unwrap();
            assert_eq!(c, g, "{name}: knn through the grid {opts:?}");
        }
        if queries.len() == 40_000 {
            let opts = KnnOptions { k: 7, max_distance: None, exclude_self: true, ..Default::default() };
            let c = cpu().knn(&queries, &queries, &opts).unwrap();
            assert_eq!(c, gpu.knn(&queries, &queries, &opts).unwrap(), "{name}: graph through the grid");
        }
    }
}

#[test]
fn gpu_knn_grid_matches_cpu_f32() {
    same_knn_grid::<f32>(63);
}

#[test]
fn gpu_knn_grid_matches_cpu_f64() {
    same_knn_grid::<f64>(64);
}

fn same_vector_knn<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    for (name, data, queries) in common::vector_sets::<T>(seed, 2000, 1500) {
        for opts in [
            KnnOptions { k: 1, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 8, max_distance: None, exclude_self: false, ..Default::default() },
            KnnOptions { k: 20, max_distance: Some(T::from_f64(8.0)), exclude_self: false, ..Default::default() },
            KnnOptions { k: 40, max_distance: None, exclude_self: false, ..Default::default() },
        ] {
            let c = cpu().knn_vectors(&data, &queries, &opts).unwrap();
            let g = gpu.knn_vectors(&data, &queries, &opts).unwrap();
            assert_eq!(c, g, "{name}: exact {opts:?}");
        }
        let opts = KnnOptions { k: 6, max_distance: None, exclude_self: true, ..Default::default() };
        assert_eq!(cpu().knn_vectors(&data, &data, &opts).unwrap(), gpu.knn_vectors(&data, &data, &opts).unwrap());
        for opts in [
            nearkit::ShiftedSortOptions { k: 8, shifts: 1, window: 4 },
            nearkit::ShiftedSortOptions { k: 8, shifts: 4, window: 8 },
            nearkit::ShiftedSortOptions { k: 16, shifts: 3, window: 16 },
            nearkit::ShiftedSortOptions { k: 50, shifts: 2, window: 40 },
        ] {
            let c = cpu().approx_knn(&data, &queries, &opts).unwrap();
            let g = gpu.approx_knn(&data, &queries, &opts).unwrap();
            assert_eq!(c, g, "{name}: shifted sort {opts:?}");
        }
    }
}

#[test]
fn gpu_vector_knn_matches_cpu_f32() {
    same_vector_knn::<f32>(71);
}

#[test]
fn gpu_vector_knn_matches_cpu_f64() {
    same_vector_knn::<f64>(72);
}

/// Many triangle-box queries: the 6-D candidate grid is built alike and answers alike.
fn same_aabb6_grid<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    let sets = common::vector_sets::<T>(seed, 3000, 40_000);
    for (name, data, queries) in sets.into_iter().filter(|s| s.0.starts_with("6-D")) {
        let tree = hooks::VectorTree::build(&data);
        for (k, r) in [(1, None), (8, None), (20, Some(10.0))] {
            let r2 = r.map_or(T::INFINITY, |r: f64| T::from_f64(r) * T::from_f64(r));
            let cpu_grid = hooks::embedded_grid(&tree, &queries, k, r2, &GridOptions::default()).map(|g| g.0);
            assert!(cpu_grid.is_some(), "{name}: the grid should be used");
            let gpu_grid = hooks::aabb6_grid_on_device(&gpu.0, &data, &queries, k, r2).unwrap();
            assert!(cpu_grid == gpu_grid, "{name} k={k}: grids differ");
            let opts = KnnOptions { k, max_distance: r.map(T::from_f64), exclude_self: false, ..Default::default() };
            let c = cpu().knn_vectors(&data, &queries, &opts).unwrap();
            assert_eq!(c, gpu.knn_vectors(&data, &queries, &opts).unwrap(), "{name}: knn through the grid {opts:?}");
        }
    }
}

#[test]
fn gpu_aabb6_grid_matches_cpu_f32() {
    same_aabb6_grid::<f32>(81);
}

#[test]
fn gpu_aabb6_grid_matches_cpu_f64() {
    same_aabb6_grid::<f64>(82);
}

/// Closest points on meshes of several shapes (degenerate triangles included): CUDA == CPU.
fn same_closest_points<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    use nearkit::{ClosestPointOptions, Mesh};
    let sphere = Mesh::<T>::uv_sphere(30, 60, 10.0, [1.0, 2.0, 3.0]);
    let soup = {
        let p: nearkit::Points<T> =
            nearkit::generate::generate(nearkit::generate::Distribution::Clustered, 3000, 100.0, seed);
        let mut tris: Vec<[u32; 3]> = (0..1000u32).map(|t| [3 * t, 3 * t + 1, 3 * t + 2]).collect();
        tris.extend([[0, 0, 1], [5, 5, 5], [0, 1, 0]]); // degenerate ones
        Mesh { vertices: p, triangles: tris }
    };
    // Tiny meshes (a root that is a leaf, one node, two levels) and exact ties (every
    // triangle twice, so the smaller id must win).
    let first = |n: usize| Mesh { vertices: soup.vertices.clone(), triangles: soup.triangles[..n].to_vec() };
    let twice = {
        let mut m = first(300);
        m.triangles.extend(m.triangles.clone());
        m
    };
    let meshes = [
        ("sphere", sphere),
        ("one triangle", first(1)),
        ("5 triangles", first(5)),
        ("9 triangles", first(9)),
        ("70 triangles", first(70)),
        ("doubled triangles", twice),
        ("clustered soup", soup),
    ];
    for (name, mesh) in meshes {
        let (lo, hi) = mesh.vertices.bounds();
        let q = {
            let u: nearkit::Points<T> =
                nearkit::generate::generate(nearkit::generate::Distribution::Uniform, 20_011, 1.0, seed + 1);
            let mut q = nearkit::Points::with_capacity(u.len());
            for i in 0..u.len() {
                let p = u.get(i);
                let at = |a: usize| {
                    let (l, h) = (lo[a].to_f64(), hi[a].to_f64());
                    T::from_f64(l - 0.5 * (h - l) + p[a].to_f64() * 2.0 * (h - l))
                };
                q.push(at(0), at(1), at(2));
            }
            q
        };
        // The GPU takes queries 32 to a warp: 20,011 ends in a partial warp, as do 1 and 45.
        let few = |n: usize| {
            let mut p = nearkit::Points::with_capacity(n);
            (0..n).for_each(|i| p.push(q.x[i], q.y[i], q.z[i]));
            p
        };
        let mut cases = vec![(None, q.clone()), (Some(2.0), q.clone()), (None, few(1)), (Some(2.0), few(45))];
        if name == "sphere" {
            // Results of more than 8 pieces of 4 MB: the download's staging slots are reused.
            let many = nearkit::generate::generate(nearkit::generate::Distribution::Uniform, 1_100_003, 30.0, seed + 2);
            cases.push((None, many));
        }
        for (r, q) in cases {
            let opts = ClosestPointOptions { max_distance: r.map(T::from_f64) };
            let c = cpu().closest_points(&mesh, &q, &opts).unwrap();
            let g = gpu.closest_points(&mesh, &q, &opts).unwrap();
            let r = (r, q.len());
            let bits = |v: &[T]| v.iter().map(|x| x.ordered_bits()).collect::<Vec<_>>();
            assert_eq!(c.triangle, g.triangle, "{name} {r:?}: triangles");
            assert_eq!(bits(&c.distance), bits(&g.distance), "{name} {r:?}: distances");
            for (a, b) in [(&c.point.x, &g.point.x), (&c.point.y, &g.point.y), (&c.point.z, &g.point.z)] {
                assert_eq!(bits(a), bits(b), "{name} {r:?}: points");
            }
            for k in 0..3 {
                assert_eq!(bits(&c.bary[k]), bits(&g.bary[k]), "{name} {r:?}: barycentrics");
            }
        }
    }
}

/// The mesh index built on the GPU has the host build's shape (children, sorted triangles,
/// ids, stack), and every box holds the triangles under it, as rounded in T.
fn same_mesh_index<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    use nearkit::test_hooks::{WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
    use nearkit::Mesh;
    let soup = |n: u32, seed: u64| {
        let p: Points<T> =
            nearkit::generate::generate(nearkit::generate::Distribution::Clustered, 3 * n as usize, 100.0, seed);
        let mut tris: Vec<[u32; 3]> = (0..n).map(|t| [3 * t, 3 * t + 1, 3 * t + 2]).collect();
        tris.extend([[0, 0, 1], [5, 5, 5], [0, 1, 0]]); // degenerate ones
        Mesh { vertices: p, triangles: tris }
    };
    let first = |m: &Mesh<T>, n: usize| Mesh { vertices: m.vertices.clone(), triangles: m.triangles[..n].to_vec() };
    let small = soup(1000, seed);
    let twice = {
        let mut m = first(&small, 300);
        m.triangles.extend(m.triangles.clone());
        m
    };
    let meshes = [
        ("sphere", Mesh::<T>::uv_sphere(60, 120, 10.0, [1.0, 2.0, 3.0])),
        ("one triangle", first(&small, 1)),
        ("two triangles", first(&small, 2)),
        ("9 triangles", first(&small, 9)),
        ("70 triangles", first(&small, 70)),
        ("doubled triangles", twice),
        ("clustered soup", small),
        ("large clustered soup", soup(200_000, seed + 1)),
    ];
    for (name, mesh) in meshes {
        let [host, dev] = hooks::mesh_index_host_and_device(&gpu.0, &mesh).unwrap();
        let bits = |v: &[T]| v.iter().map(|x| x.ordered_bits()).collect::<Vec<_>>();
        assert_eq!(host.1, dev.1, "{name}: children");
        assert_eq!(bits(&host.2), bits(&dev.2), "{name}: triangles");
        assert_eq!(host.3, dev.3, "{name}: ids");
        assert_eq!(host.4, dev.4, "{name}: stack");
        assert_eq!(host.0.len(), dev.0.len(), "{name}: boxes");
        // Each slot's sorted range, children before parents (nodes are numbered breadth first).
        let (children, tris) = (&dev.1, &dev.2);
        let mut range = vec![(0usize, 0usize); children.len()];
        for slot in (0..children.len()).rev() {
            let c = children[slot];
            range[slot] = if c == WIDE_EMPTY {
                (0, 0)
            } else if c & WIDE_LEAF != 0 {
                let s = (c & WIDE_START) as usize;
                (s, s + ((c >> 28) & 7) as usize + 1)
            } else {
                let kids = &range[c as usize * WIDE..(c as usize + 1) * WIDE];
                let used = kids.iter().filter(|r| r.1 > r.0);
                (used.clone().map(|r| r.0).min().unwrap(), used.map(|r| r.1).max().unwrap())
            };
        }
        for (built, boxes) in [("host", &host.0), ("device", &dev.0)] {
            for (slot, &(s, e)) in range.iter().enumerate() {
                let b = &boxes[slot * 16..slot * 16 + 16];
                for t in s..e {
                    for k in 0..3 {
                        let x = &tris[t * 12 + 3 * k..t * 12 + 3 * k + 3];
                        for j in 0..3 {
                            let p = x[0] * b[3 * j] + x[1] * b[3 * j + 1] + x[2] * b[3 * j + 2];
                            assert!(
                                b[9 + j] <= p && p <= b[12 + j],
                                "{name}, {built}: slot {slot} misses triangle {t}"
                            );
                        }
                    }
                }
            }
        }
        let same =
            (0..range.len()).filter(|&i| bits(&host.0[i * 16..i * 16 + 16]) == bits(&dev.0[i * 16..i * 16 + 16]));
        eprintln!("{name}: {} slots, {} boxes bitwise the host's", range.len(), same.count());
    }
}

#[test]
fn gpu_built_mesh_index_matches_host_build_f32() {
    same_mesh_index::<f32>(93);
}

#[test]
fn gpu_built_mesh_index_matches_host_build_f64() {
    same_mesh_index::<f64>(94);
}

#[test]
fn gpu_closest_points_match_cpu_f32() {
    same_closest_points::<f32>(91);
}

#[test]
fn gpu_closest_points_match_cpu_f64() {
    same_closest_points::<f64>(92);
}

/// `knn_into` a reused (page-locked) buffer on the GPU gives the CPU's `knn`, as it grows and
/// shrinks, and after the same buffer held a CPU result.
#[test]
fn gpu_knn_into_a_reused_buffer_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    // Chunks of 777 queries: each one's copy runs while the next is searched.
    let small_chunks = cuda_engine(nearkit::CudaOptions { chunk_points: 777, ..Default::default() });
    let mut out = nearkit::KnnBuffer::<f32>::new();
    for (name, a, b) in point_sets::<f32>(97, 3000, 5000) {
        let (on_gpu, on_cpu) = (PointIndex::new(&b, &gpu.0).unwrap(), PointIndex::new(&b, &cpu().0).unwrap());
        let in_chunks = PointIndex::new(&b, &small_chunks).unwrap();
        for k in [8, 1, 16] {
            let want = on_cpu.knn(&a, &KnnOptions::k(k)).unwrap();
            on_gpu.knn_into(&a, &KnnOptions::k(k), &mut out).unwrap();
            assert_eq!(out.to_knn(), want, "{name} k={k}");
            in_chunks.knn_into(&a, &KnnOptions::k(k), &mut out).unwrap();
            assert_eq!(out.to_knn(), want, "{name} k={k}, chunks of 777");
            on_cpu.knn_into(&a, &KnnOptions::k(k), &mut out).unwrap();
            assert_eq!(out.to_knn(), want, "{name} k={k}, CPU into the same buffer");
        }
    }
}

/// Coordinates far from 1, which the index scales by a power of two: the GPU answers as the CPU.
fn same_far_from_one<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    use nearkit::{ClosestPointOptions, Mesh, Points};
    let exps: [i32; 2] = if T::NAME == "f32" { [-100, 90] } else { [-1000, 950] };
    let scale = |p: &Points<T>, e: i32| {
        let f =
            |c: &Vec<T>| c.iter().map(|&v| T::from_f64(v.to_f64() * 2f64.powi(e / 2) * 2f64.powi(e - e / 2))).collect();
        Points { x: f(&p.x), y: f(&p.y), z: f(&p.z) }
    };
    for (name, a, b) in point_sets::<T>(seed, 2000, 3000) {
        for e in exps {
            let (a, b) = (scale(&a, e), scale(&b, e));
            let what = format!("{name} ×2^{e}");
            for mode in [PairMode::NearestPerA, PairMode::AllPairs] {
                let opts = PairsOptions { k: 100, mode, max_distance: None };
                assert_eq!(
                    cpu().closest_pairs(&a, &b, &opts).unwrap(),
                    gpu.closest_pairs(&a, &b, &opts).unwrap(),
                    "{what}"
                );
            }
            assert_eq!(cpu().nearest(&a, &b, None).unwrap(), gpu.nearest(&a, &b, None).unwrap(), "{what}: nearest");
            let opts = KnnOptions::k(8);
            assert_eq!(cpu().knn(&b, &a, &opts).unwrap(), gpu.knn(&b, &a, &opts).unwrap(), "{what}: knn");
        }
    }
    let sphere = Mesh::<T>::uv_sphere(30, 60, 10.0, [1.0, 2.0, 3.0]);
    let q: Points<T> = nearkit::generate::generate(nearkit::generate::Distribution::Uniform, 5000, 30.0, seed);
    for e in exps {
        let mesh = Mesh { vertices: scale(&sphere.vertices, e), triangles: sphere.triangles.clone() };
        let q = scale(&q, e);
        let opts = ClosestPointOptions::default();
        let (c, g) = (cpu().closest_points(&mesh, &q, &opts).unwrap(), gpu.closest_points(&mesh, &q, &opts).unwrap());
        assert_eq!(c, g, "sphere ×2^{e}");
    }
}

#[test]
fn gpu_matches_cpu_far_from_one_f32() {
    same_far_from_one::<f32>(95);
}

#[test]
fn gpu_matches_cpu_far_from_one_f64() {
    same_far_from_one::<f64>(96);
}

/// The collision world: contacts and sweeps on the GPU equal the CPU's, bit for bit, while
/// the world moves and the two colliders take turns on it.
/// A body dropped from 5 m above it to 4 m below, 3 m along x.
fn dropped_body(b: &nearkit::collide::Body) -> nearkit::collide::Sweep {
    let c = b.center;
    nearkit::collide::Sweep::new(b.radii, b.orientation, [c[0], c[1], c[2] + 5.0], [c[0] + 3.0, c[1], c[2] - 4.0])
}

/// Sweep results equal bit for bit, or the first that differs named.
fn same_sweeps(cpu: &[Option<nearkit::collide::SweepResult>], gpu: &[Option<nearkit::collide::SweepResult>]) {
    assert_eq!(cpu.len(), gpu.len());
    let differ = cpu.iter().zip(gpu).filter(|(a, b)| a != b).count();
    if let Some(i) = (0..cpu.len()).find(|&i| cpu[i] != gpu[i]) {
        panic!("{differ} of {} sweeps differ; the first, {i}: CPU {:?}, GPU {:?}", cpu.len(), cpu[i], gpu[i]);
    }
}

#[test]
fn gpu_collision_world_matches_cpu() {
    use nearkit::collide::scene::Scene;
    use nearkit::collide::Sweep;
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let scene = Scene::crater(4000, 7);
    let mut world = scene.world(1.0).unwrap();
    for tick in 0..6 {
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        assert!(a.len() > 1000, "tick {tick}: {} contacts", a.len());
        if a != b {
            let differ: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
            let tri = differ.iter().find(|(x, _)| x.kind == nearkit::collide::ContactKind::Triangle);
            let body = differ.iter().find(|(x, _)| x.kind == nearkit::collide::ContactKind::Body);
            panic!(
                "tick {tick}: {} vs {} contacts, {} differ; first triangle {tri:?}; first body {body:?}",
                a.len(),
                b.len(),
                differ.len()
            );
        }
        scene.advance(&mut world, tick);
        if tick == 2 {
            world.remove_body(nearkit::collide::BodyId(17)).unwrap();
        }
    }
    let sweeps: Vec<Sweep> = scene
        .bodies
        .iter()
        .take(2000)
        .enumerate()
        .map(|(i, b)| {
            let s = Sweep::new(b.radii, b.orientation, b.center, [b.center[0] + 3.0, b.center[1], b.center[2] - 2.0]);
            // Bodies too (each ignoring its own), or the mesh only, or the bodies only.
            match i % 4 {
                0 => s.with_mask(1).ignoring(nearkit::collide::BodyId(i as u32)),
                1 => s.ignoring(nearkit::collide::BodyId(i as u32)),
                2 => s,
                _ => s.with_mask(0),
            }
        })
        .collect();
    let (a, b) = (cpu.sweeps(&world, &sweeps).unwrap(), cuda.sweeps(&world, &sweeps).unwrap());
    assert!(a.iter().filter(|h| h.is_some()).count() > 500);
    let on_bodies = a.iter().filter(|h| h.is_some_and(|h| h.kind == nearkit::collide::ContactKind::Body)).count();
    assert!(on_bodies > 100, "{on_bodies} sweeps hit a body first");
    same_sweeps(&a, &b);
    // The same after the bodies moved (the GPU grids them again).
    scene.advance(&mut world, 7);
    same_sweeps(&cpu.sweeps(&world, &sweeps).unwrap(), &cuda.sweeps(&world, &sweeps).unwrap());
}

/// The narrow phase alone, on random inputs: bit for bit.
#[test]
fn gpu_narrow_phase_matches_cpu() {
    use hooks::{contact_ellipsoid_ellipsoid, contact_ellipsoid_triangle, Shape};
    use rand::{Rng, SeedableRng};
    let Some(gpu) = gpu() else { return };
    let mut r = rand_pcg::Pcg64::seed_from_u64(9);
    let mut v = |lo: f64, hi: f64| r.random_range(lo..hi);
    let pairs: Vec<[f64; 17]> = (0..20000)
        .map(|_| {
            let mut p = [0.0; 17];
            for k in 0..17 {
                p[k] = match k {
                    0..=2 | 7..=9 => v(0.2, 2.0),
                    14..=16 => v(-2.5, 2.5),
                    _ => v(-1.0, 1.0),
                };
            }
            p
        })
        .collect();
    let tris: Vec<[f64; 16]> = (0..20000)
        .map(|_| {
            let mut p = [0.0; 16];
            for k in 0..16 {
                p[k] = match k {
                    0..=2 => v(0.2, 2.0),
                    3..=6 => v(-1.0, 1.0),
                    _ => v(-2.0, 2.0),
                };
            }
            p
        })
        .collect();
    let got = hooks::narrow_phase_on_device(&gpu.0, &pairs, &tris).unwrap();
    let mut hits = 0;
    for (k, p) in pairs.iter().enumerate() {
        let a = Shape::new([p[0], p[1], p[2]], [p[3], p[4], p[5], p[6]]);
        let b = Shape::new([p[7], p[8], p[9]], [p[10], p[11], p[12], p[13]]);
        let want = contact_ellipsoid_ellipsoid(&a, &b, [p[14], p[15], p[16]]);
        hits += want.is_some() as usize;
        assert_eq!(got[k], want, "pair {k}: {p:?}");
    }
    for (k, p) in tris.iter().enumerate() {
        let a = Shape::new([p[0], p[1], p[2]], [p[3], p[4], p[5], p[6]]);
        let want = contact_ellipsoid_triangle(&a, [[p[7], p[8], p[9]], [p[10], p[11], p[12]], [p[13], p[14], p[15]]]);
        hits += want.is_some() as usize;
        assert_eq!(got[pairs.len() + k], want, "triangle {k}: {p:?}");
    }
    assert!(hits > 5000, "{hits} hits");
}

/// The CUDA collider's rarer paths, against the CPU's contacts: bodies with more contacts
/// than a warp keeps in shared memory (done again through global memory), bodies spanning more
/// than 32 cells, a pile of bodies in a few cells (long bucket lists, many body pairs), layers
/// and masks, removed bodies, and buffers that must grow on the first tick.
#[test]
fn gpu_collision_world_matches_cpu_on_rare_paths() {
    use nearkit::collide::scene::Scene;
    use nearkit::collide::{Body, BodyId, ContactKind};
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let scene = Scene::crater(600, 11);
    let mut world = scene.world(1.0).unwrap();
    // Big ellipsoids on the terrain: hundreds of triangles and cells each.
    for k in 0..6 {
        let c = scene.bodies[k * 50].center;
        let q = [0.1 * k as f64, 0.3, -0.2, 1.0];
        world.add_body(Body::ellipsoid(c, [5.0 + k as f64, 3.0, 2.0], q)).unwrap();
    }
    // A pile: 120 small bodies within about two cells, most touching dozens of others.
    let c0 = scene.bodies[3].center;
    for k in 0..120u32 {
        let f = |m: u32| ((k * m) % 17) as f64 / 17.0 - 0.5;
        let c = [c0[0] + 1.6 * f(7), c0[1] + 1.6 * f(11), c0[2] + 0.5 + 1.2 * f(5)];
        world.add_body(Body::ellipsoid(c, [0.3, 0.25, 0.4], [f(3), f(13), 0.2, 1.0])).unwrap();
    }
    // Layers: some bodies miss the mesh, some miss each other.
    let n = world.bodies().len() as u32;
    for id in (0..n).step_by(7) {
        world.set_layers(BodyId(id), 2, 2).unwrap();
    }
    for id in (3..n).step_by(11) {
        world.set_layers(BodyId(id), 4, 1 | 4).unwrap();
    }
    world.remove_body(BodyId(605)).unwrap();
    for tick in 0..4 {
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        let most = (0..n).map(|i| a.iter().filter(|c| c.body == i).count()).max().unwrap();
        assert!(most > 80, "tick {tick}: at most {most} contacts a body");
        assert!(a.iter().filter(|c| c.kind == ContactKind::Body).count() > 500);
        assert!(a == b, "tick {tick}: {} vs {} contacts", a.len(), b.len());
        // Everything moves a little (the pile shakes, the big bodies turn).
        let (centers, orientations) = world.poses_mut();
        for (i, (c, q)) in centers.iter_mut().zip(orientations.iter_mut()).enumerate() {
            c[i % 3] += 0.03 * (tick as f64 + 1.0);
            q[0] += 0.01;
        }
    }
}

/// The generated elevation model (30 m triangles on coarse levels of the mesh's grid) at
/// 1 m cells, with bodies crowded onto a few triangles of a centimetre and a kilometre laid
/// over it: contacts and sweeps bit for bit, over ticks.
#[test]
fn gpu_collision_world_matches_cpu_on_triangles_of_every_size() {
    use nearkit::collide::scene::{dem_terrain, Scene};
    use nearkit::collide::Sweep;
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let mut mesh = dem_terrain();
    let (lo, hi) = mesh.vertices.bounds();
    let mid = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0, (lo[2] + hi[2]) / 2.0];
    for k in 0..2000u32 {
        let v = mesh.vertices.len() as u32;
        let s = if k % 500 == 0 { 900.0 } else { 0.01 * (1 + k % 5) as f64 };
        let c = [mid[0] + (k % 50) as f64 * 0.7, mid[1] + (k / 50) as f64 * 0.7, mid[2] + (k % 7) as f64 * 0.3];
        mesh.vertices.push(c[0], c[1], c[2]);
        mesh.vertices.push(c[0] + s, c[1], c[2] + s * 0.1);
        mesh.vertices.push(c[0], c[1] + s, c[2] - s * 0.1);
        mesh.triangles.push([v, v + 1, v + 2]);
    }
    let scene = Scene::on_surface("sizes", mesh, 30_000, (0.2, 0.8), 4);
    let mut world = scene.world(1.0).unwrap();
    for tick in 0..3 {
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        assert!(a.len() > 20_000, "tick {tick}: {} contacts", a.len());
        assert!(a == b, "tick {tick}: {} vs {} contacts", a.len(), b.len());
        scene.advance(&mut world, tick);
    }
    let sweeps: Vec<Sweep> = scene.bodies.iter().step_by(3).map(dropped_body).collect();
    let (a, b) = (cpu.sweeps(&world, &sweeps).unwrap(), cuda.sweeps(&world, &sweeps).unwrap());
    assert!(a.iter().filter(|h| h.is_some()).count() > 5000);
    same_sweeps(&a, &b);
}

/// The generated elevation model kept as a heightfield (with an origin off zero), a mesh of
/// ramps over it, bodies whose masks miss the terrain: contacts and sweeps bit for bit.
#[test]
fn gpu_collision_world_matches_cpu_on_a_heightfield() {
    use nearkit::collide::scene::{dem_heightfield, Scene};
    use nearkit::collide::{Heightfield, Sweep};
    use nearkit::{Mesh, Points};
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let dem = dem_heightfield();
    let terrain =
        Heightfield::new(dem.heights().to_vec(), dem.rows(), dem.cols(), dem.spacing(), [-5000.25, 1234.5]).unwrap();
    let mut scene = Scene::on_heightfield("dem", terrain, 30_000, (0.2, 0.8), 5);
    for (k, b) in scene.bodies.iter_mut().enumerate() {
        if k % 7 == 0 {
            *b = b.with_layers(2, 2);
        }
    }
    let mut world = scene.world(1.0).unwrap();
    let (x, y) = (scene.bodies[0].center[0], scene.bodies[0].center[1]);
    let ramps = Mesh {
        vertices: Points::from_rows(&[
            [x - 300.0, y - 300.0, -400.0],
            [x + 300.0, y - 300.0, 400.0],
            [x - 300.0, y + 300.0, 0.0],
            [x + 300.0, y + 300.0, 100.0],
        ]),
        triangles: vec![[0, 1, 2], [1, 3, 2]],
    };
    world.set_mesh(&ramps).unwrap();
    for tick in 0..3 {
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        let on_terrain = a.iter().filter(|c| c.kind == nearkit::collide::ContactKind::Heightfield).count();
        assert!(on_terrain > 15_000, "tick {tick}: {on_terrain} heightfield contacts");
        assert!(a == b, "tick {tick}: {} vs {} contacts", a.len(), b.len());
        scene.advance(&mut world, tick);
    }
    let sweeps: Vec<Sweep> = scene.bodies.iter().step_by(3).map(dropped_body).collect();
    let (a, b) = (cpu.sweeps(&world, &sweeps).unwrap(), cuda.sweeps(&world, &sweeps).unwrap());
    assert!(a.iter().filter(|h| h.is_some()).count() > 8000);
    same_sweeps(&a, &b);
}

/// Overlap queries on the GPU equal the CPU's: on the crater (mesh) and on the DEM
/// (heightfield), with bodies, masks and a limit that cuts rows; after a tick and after the
/// world moved (the GPU reuses or rebuilds the tick's body grid).
#[test]
fn gpu_overlap_queries_match_cpu() {
    use nearkit::collide::scene::Scene;
    use nearkit::collide::{Overlap, OVERLAP_LIMIT_MAX};
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    for (k, scene) in [Scene::crater(4000, 21), Scene::dem(20_000, 22)].into_iter().enumerate() {
        let mut world = scene.world(1.0).unwrap();
        let queries: Vec<Overlap> = scene
            .bodies
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let q = match i % 4 {
                    0 => Overlap::sphere(b.center, 0.3 + (i % 13) as f64 * 0.25),
                    1 => Overlap::ellipsoid(b.center, [1.5, 0.4, 0.9], [0.3, 0.1, -0.2, 1.0]),
                    2 => Overlap::cuboid(b.center, [1.5, 0.4, 0.9], [0.3, 0.1, -0.2, 1.0]),
                    _ => Overlap::cuboid(b.center, [0.2 + (i % 11) as f64 * 0.2, 0.7, 0.5], [0.0, 0.0, 0.0, 1.0]),
                };
                if i % 7 == 0 {
                    q.with_mask(2)
                } else {
                    q
                }
            })
            .collect();
        for step in 0..3 {
            if step == 1 {
                cuda.contacts(&world).unwrap();
            }
            if step == 2 {
                scene.advance(&mut world, 0);
            }
            for limit in [OVERLAP_LIMIT_MAX, 2] {
                let (a, b) =
                    (cpu.overlaps(&world, &queries, limit).unwrap(), cuda.overlaps(&world, &queries, limit).unwrap());
                assert!(a.ids.len() > queries.len(), "scene {k}: {} hits", a.ids.len());
                assert!(a == b, "scene {k}, step {step}, limit {limit}: {} vs {} hits", a.ids.len(), b.ids.len());
            }
        }
    }
}

/// A big world (80,000 bodies: many look-back tiles, buffers that grow), and bad centers.
#[test]
fn gpu_collision_world_matches_cpu_on_a_big_world() {
    use nearkit::collide::scene::{crater_terrain, Scene};
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let scene = Scene::on_surface("big", crater_terrain(300, 300), 80_000, (0.1, 0.5), 3);
    let mut world = scene.world(1.0).unwrap();
    for tick in 0..3 {
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        assert!(a.len() > 50_000, "tick {tick}: {} contacts", a.len());
        assert!(a == b, "tick {tick}: {} vs {} contacts", a.len(), b.len());
        scene.advance(&mut world, tick);
    }
    // A center the grid cannot hold is refused by both, naming the body; the device checks
    // centers itself (the host does not), so this checks that path. Then both recover.
    let keep = world.poses_mut().0[54_321];
    for (bad, says) in [([f64::NAN, 0.0, 0.0], "not finite"), ([1e12, 0.0, 0.0], "larger cells")] {
        world.poses_mut().0[54_321] = bad;
        for c in [&mut cpu, &mut cuda] {
            let e = c.contacts(&world).unwrap_err().to_string();
            assert!(e.contains("body 54321") && e.contains(says), "{e}");
        }
    }
    world.poses_mut().0[54_321] = keep;
    let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
    assert!(a.len() > 50_000 && a == b, "after the errors: {} vs {} contacts", a.len(), b.len());
}

/// The device's exclusive scan (one block, or tiles by decoupled look-back) against a host
/// loop, at sizes around its tile and single-block limits and large enough for many tiles,
/// one after another with one state buffer (each scan must leave it clean for the next).
#[test]
fn gpu_exclusive_scan_matches_host() {
    let Some(gpu) = gpu() else { return };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let sizes = [1usize, 4095, 4096, 8192, 8193, 12_289, 100_003, 1_000_000, 3_000_017, 8193, 100_003];
    let arrays: Vec<Vec<u32>> = sizes
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 7) as u32
                })
                .collect()
        })
        .collect();
    let got = hooks::exclusive_scans_on_device(&gpu.0, &arrays).unwrap();
    for (values, got) in arrays.iter().zip(got) {
        let mut sum = 0u32;
        let want: Vec<u32> = values
            .iter()
            .map(|&v| {
                let s = sum;
                sum += v;
                s
            })
            .collect();
        assert_eq!(got, want, "n = {}", values.len());
    }
}

/// The device's radix sort against a stable host sort: sizes around its tile (4,096 keys) and
/// many tiles; keys random, of few values (long runs of ties, so stability
/// shows), all equal, and descending; 1, 2, 4 and 8 passes.
#[test]
fn gpu_radix_sort_matches_stable_host_sort() {
    let Some(gpu) = gpu() else { return };
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for &n in &[1usize, 2, 4095, 4096, 4097, 12_289, 100_003, 1_000_000] {
        for shape in ["random", "few", "equal", "descending"] {
            let keys: Vec<u64> = (0..n)
                .map(|i| match shape {
                    "random" => next(),
                    "few" => next() % 5 * 0x0101_0101_0101_0101,
                    "equal" => 0x00ff_00ff_00ff_00ff,
                    _ => u64::MAX - i as u64 * 0x0001_0003_0005_0007,
                })
                .collect();
            let values: Vec<u32> = (0..n).map(|_| next() as u32).collect();
            for bits in [8u32, 16, 30, 63, 64] {
                // Callers' keys fit in `bits`.
                let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
                let keys: Vec<u64> = keys.iter().map(|k| k & mask).collect();
                let (got_keys, got_values) = hooks::sort_pairs_on_device(&gpu.0, &keys, &values, bits).unwrap();
                let mut want: Vec<(u64, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
                want.sort_by_key(|&(k, _)| k);
                let (want_keys, want_values): (Vec<u64>, Vec<u32>) = want.into_iter().unzip();
                assert!(got_keys == want_keys && got_values == want_values, "n = {n}, {shape}, {bits} bits");
            }
        }
    }
}

/// Radius queries: rows, counts and pairs bitwise the CPU's, sorted and unsorted, with rows
/// of every sorting path (in the thread, a block, the device sort), in small query chunks,
/// and through the batches a result too big for one pass takes.
fn same_radius<T: Real>(seed: u64) {
    use nearkit::RadiusOptions;
    let Some(gpu) = gpu() else { return };
    let small_chunks =
        cuda_engine(nearkit::CudaOptions { chunk_points: 777, radius_batch: Some(20_000), ..Default::default() });
    let mut sets = point_sets::<T>(seed, 600, 2000);
    // A few rows longer than a block sorts (4,096): the device sort's path.
    let many = nearkit::generate::generate::<T>(nearkit::generate::Distribution::Clustered, 4200, 1000.0, seed);
    let few = Points::new(many.x[..8].to_vec(), many.y[..8].to_vec(), many.z[..8].to_vec()).unwrap();
    sets.push(("long rows".into(), few, many));
    for (name, queries, data) in sets {
        let c = PointIndex::new(&data, &Engine::cpu()).unwrap();
        let g = PointIndex::new(&data, &gpu.0).unwrap();
        let gs = PointIndex::new(&data, &small_chunks).unwrap();
        let side = if name == "far-from-origin" { 100.0 } else { 1000.0 };
        // About 1, 15 and 200 neighbours a query on uniform data, none but duplicates, and all.
        for r in [0.05, 0.12, 0.3, 0.0, 20.0].map(|f| T::from_f64(f * side)) {
            for sorted in [true, false] {
                let opts = RadiusOptions { sorted, ..Default::default() };
                let want = c.within(&queries, r, &opts).unwrap();
                assert_eq!(want, g.within(&queries, r, &opts).unwrap(), "{name}: within r={r} sorted={sorted}");
                assert_eq!(want, gs.within(&queries, r, &opts).unwrap(), "{name}: within in chunks r={r}");
                // Rows up as they are (numpy's C order), in one chunk and in many.
                let (rows, _) = row_pieces(&queries);
                assert_eq!(want, g.within_rows(&rows, r, &opts).unwrap(), "{name}: within_rows r={r}");
                assert_eq!(want, gs.within_rows(&rows, r, &opts).unwrap(), "{name}: within_rows in chunks r={r}");
                let dq = gpu.0.upload(&queries).unwrap();
                let dev = g.within_device(&dq, r, &opts).unwrap();
                assert_eq!(want, dev.to_host(&gpu.0).unwrap(), "{name}: within_device r={r}");
                let want = c.pairs_within(r, &opts).unwrap();
                assert_eq!(want, g.pairs_within(r, &opts).unwrap(), "{name}: pairs_within r={r} sorted={sorted}");
                assert_eq!(want, gs.pairs_within(r, &opts).unwrap(), "{name}: pairs_within in batches r={r}");
                let dev = g.pairs_within_device(r, &opts).unwrap();
                assert_eq!(want, dev.to_host(&gpu.0).unwrap(), "{name}: pairs_within_device r={r}");
                let want = c.pairs_within_other(&queries, r, &opts).unwrap();
                assert_eq!(want, g.pairs_within_other(&queries, r, &opts).unwrap(), "{name}: pairs_within_other r={r}");
                // Ids alone: the distances stay on the device.
                let ids_only = RadiusOptions { distances: false, ..opts };
                let want = c.within(&queries, r, &ids_only).unwrap();
                assert!(want.distances.is_empty());
                assert_eq!(want, g.within(&queries, r, &ids_only).unwrap(), "{name}: within ids only r={r}");
                assert_eq!(want, gs.within(&queries, r, &ids_only).unwrap(), "{name}: within ids only in chunks");
                let want = c.pairs_within(r, &ids_only).unwrap();
                assert_eq!(want, g.pairs_within(r, &ids_only).unwrap(), "{name}: pairs_within ids only r={r}");
                assert_eq!(want, gs.pairs_within(r, &ids_only).unwrap(), "{name}: pairs_within ids only in batches");
            }
            assert_eq!(c.count_within(&queries, r).unwrap(), g.count_within(&queries, r).unwrap(), "{name}: counts");
            let (rows, _) = row_pieces(&queries);
            assert_eq!(
                c.count_within(&queries, r).unwrap(),
                g.count_within_rows(&rows, r).unwrap(),
                "{name}: counts of rows"
            );
            let limit = RadiusOptions { max_results: Some(10), ..Default::default() };
            let (ce, ge) = (c.within(&queries, r, &limit).is_err(), g.within(&queries, r, &limit).is_err());
            assert_eq!(ce, ge, "{name}: the limit");
        }
    }
}

/// A bad query row is refused with the CPU's error, whichever way the rows go up.
#[test]
fn gpu_within_rows_refuses_bad_rows_as_the_cpu_does() {
    use nearkit::RadiusOptions;
    let Some(gpu) = gpu() else { return };
    let data = nearkit::generate::generate::<f32>(nearkit::generate::Distribution::Uniform, 5000, 1.0, 3);
    let (c, g) = (PointIndex::new(&data, &Engine::cpu()).unwrap(), PointIndex::new(&data, &gpu.0).unwrap());
    for (at, axis) in [(0, 0), (777, 1), (2999, 2)] {
        let mut rows: Vec<f32> = (0..3 * 3000).map(|i| (i % 97) as f32 / 97.0).collect();
        rows[3 * at + axis] = f32::NAN;
        let err = |r: nearkit::Result<nearkit::Within<f32>>| r.err().map(|e| e.to_string()).expect("refused");
        let opts = RadiusOptions::default();
        let want = err(c.within_rows(&rows, 0.1, &opts));
        assert!(want.contains(&at.to_string()), "{want}");
        assert_eq!(want, err(g.within_rows(&rows, 0.1, &opts)), "row {at}");
        let counts = |r: nearkit::Result<Vec<u32>>| r.err().map(|e| e.to_string()).expect("refused");
        assert_eq!(counts(c.count_within_rows(&rows, 0.1)), counts(g.count_within_rows(&rows, 0.1)), "row {at}");
    }
    assert!(g.within_rows(&[0.5f32; 4], 0.1, &RadiusOptions::default()).is_err(), "not rows of three");
}

#[test]
fn gpu_radius_matches_cpu_f32() {
    same_radius::<f32>(81);
}

#[test]
fn gpu_radius_matches_cpu_f64() {
    same_radius::<f64>(82);
}

/// Ray casts: first hits and sorted hits on the GPU equal the CPU's bit for bit (and a brute
/// force's), on the crater scene with hard rays (grazing the terrain's vertices, from inside
/// bodies, along the axes, of zero length, behind layer masks), after the world moves and
/// after its mesh changes, and on worlds of one triangle and one body, or nothing.
#[test]
fn gpu_ray_casts_match_cpu() {
    use nearkit::collide::scene::Scene;
    use nearkit::collide::{Body, BodyId, Ray, RayHit, World};
    use rand::{Rng, SeedableRng};
    let Some(gpu) = gpu() else { return };
    let bits = |h: &RayHit| (h.distance.to_bits(), h.kind, h.id, h.point.map(f64::to_bits), h.normal.map(f64::to_bits));
    let same = |a: &[RayHit], b: &[RayHit]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y));
    let mut r = rand_pcg::Pcg64::seed_from_u64(61);
    let scene = Scene::crater(4000, 13);
    let mut world = scene.world(1.0).unwrap();
    for id in (0..4000).step_by(5) {
        world.set_layers(BodyId(id), 2, u32::MAX).unwrap();
    }
    let make_rays = |r: &mut rand_pcg::Pcg64, world: &World, n: usize| -> Vec<Ray> {
        let b = world.bodies();
        (0..n)
            .map(|k| {
                let d = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..0.5)];
                let mask = [u32::MAX, 1, 2, 0][k % 4];
                let max = [f64::INFINITY, 40.0, 3.0, 0.0][k % 7 % 4];
                let any = [r.random_range(0.0..108.0), r.random_range(0.0..90.0), r.random_range(-8.0..6.0)];
                let (origin, direction) = match k % 5 {
                    0 | 1 => (any, d),
                    2 => {
                        // At a vertex of the terrain (grazing), from 1 to 10 m away.
                        let c = world.triangle(r.random_range(0..world.triangle_count())).unwrap()[k % 3];
                        let back = r.random_range(1.0..10.0);
                        (std::array::from_fn(|a| c[a] - back * d[a]), d)
                    }
                    3 => (b.center[r.random_range(0..b.len())], d),
                    _ => (any.map(|v| v.round()), [[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]][k % 3]),
                };
                Ray { origin, direction, max_distance: max, mask }
            })
            .collect()
    };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    for round in 0..3 {
        let rays = make_rays(&mut r, &world, 100_000);
        let (a, b) = (cpu.ray_casts(&world, &rays).unwrap(), cuda.ray_casts(&world, &rays).unwrap());
        // Into a vector kept from call to call, longer and shorter batches in turn.
        let mut kept = Vec::new();
        for n in [rays.len(), 777, 30_001] {
            cuda.ray_casts_into(&world, &rays[..n], &mut kept).unwrap();
            assert!(kept == a[..n], "round {round}: {n} rays into a kept vector");
        }
        let hit = a.iter().filter(|h| h.is_some()).count();
        assert!(hit > 15_000, "round {round}: {hit} rays hit");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(same(x.as_slice(), y.as_slice()), "round {round}, ray {i} {:?}: CPU {x:?}, GPU {y:?}", rays[i]);
        }
        for limit in [1, 4, usize::MAX] {
            let (a, b) =
                (cpu.ray_casts_all(&world, &rays, limit).unwrap(), cuda.ray_casts_all(&world, &rays, limit).unwrap());
            assert_eq!(a.offsets, b.offsets, "round {round}, limit {limit}: rows");
            assert!(same(&a.hits, &b.hits), "round {round}, limit {limit}: hits");
        }
        for (i, ray) in rays.iter().enumerate().step_by(100) {
            let want = hooks::ray_hits_brute_force(&world, ray).unwrap();
            assert!(same(b[i].as_slice(), &want[..want.len().min(1)]), "round {round}, ray {i}: brute force");
        }
        scene.advance(&mut world, round);
        if round == 1 {
            world.remove_body(BodyId(99)).unwrap();
            world.set_mesh(&nearkit::collide::scene::crater_terrain(50, 60)).unwrap();
        }
    }
    // One triangle and one body (trees of one leaf), then nothing at all.
    let mut small = World::new(1.0).unwrap();
    let tri = Points::from_rows(&[[0.0f64, 0.0, 0.0], [4.0, 0.0, 0.0], [0.0, 4.0, 0.0]]);
    small.set_mesh(&nearkit::Mesh { vertices: tri, triangles: vec![[0, 1, 2]] }).unwrap();
    small.add_body(Body::sphere([1.0, 1.0, 2.0], 0.5)).unwrap();
    let rays: Vec<Ray> = make_rays(&mut r, &small, 20_000)
        .into_iter()
        .map(|ray| Ray { origin: ray.origin.map(|v| v / 20.0), ..ray })
        .collect();
    let (a, b) = (cpu.ray_casts(&small, &rays).unwrap(), cuda.ray_casts(&small, &rays).unwrap());
    assert!(a.iter().filter(|h| h.is_some()).count() > 100);
    assert!(a.iter().zip(&b).all(|(x, y)| same(x.as_slice(), y.as_slice())), "one triangle, one body");
    let empty = World::new(1.0).unwrap();
    assert!(cuda.ray_casts(&empty, &rays).unwrap().iter().all(Option::is_none));
    assert!(cuda.ray_casts_all(&empty, &rays, 3).unwrap().hits.is_empty());

    // A heightfield (the generated DEM, 10 × 12 km) with bodies on it, then with another
    // heightfield in its place: rays level and steep, short and long, at its samples.
    let scene = Scene::dem(2000, 17);
    let mut world = scene.world(1.0).unwrap();
    for round in 0..2 {
        let h = world.heightfield().unwrap().clone();
        let (lo, hi) = h.bounds();
        let b = world.bodies();
        let rays: Vec<Ray> = (0..60_000)
            .map(|k| {
                let mut o = [r.random_range(lo[0]..hi[0]), r.random_range(lo[1]..hi[1]), hi[2] + 10.0];
                let d = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-0.3..0.05)];
                let max = [f64::INFINITY, 500.0, 40.0][k % 3];
                let mask = [u32::MAX, 1, 2][k % 7 % 3];
                match k % 4 {
                    0 => Ray { origin: o, direction: d, max_distance: max, mask },
                    1 => {
                        // At a sample (grazing the triangles around it).
                        let p = h.vertex(r.random_range(0..h.rows()), r.random_range(0..h.cols()));
                        let back = r.random_range(1.0..60.0);
                        Ray {
                            origin: std::array::from_fn(|a| p[a] - back * d[a]),
                            direction: d,
                            max_distance: max,
                            mask,
                        }
                    }
                    2 => {
                        o = b.center[r.random_range(0..b.len())];
                        Ray { origin: o, direction: d, max_distance: max, mask }
                    }
                    _ => Ray { origin: o, direction: [0.0, 0.0, -1.0], max_distance: f64::INFINITY, mask },
                }
            })
            .collect();
        let (a, g) = (cpu.ray_casts(&world, &rays).unwrap(), cuda.ray_casts(&world, &rays).unwrap());
        let on_terrain = a.iter().flatten().filter(|h| h.kind == nearkit::collide::ContactKind::Heightfield).count();
        assert!(on_terrain > 20_000, "heightfield round {round}: {on_terrain} rays hit the terrain");
        for (i, (x, y)) in a.iter().zip(&g).enumerate() {
            assert!(same(x.as_slice(), y.as_slice()), "heightfield, ray {i} {:?}: CPU {x:?}, GPU {y:?}", rays[i]);
        }
        for limit in [1, 5, usize::MAX] {
            let (x, y) =
                (cpu.ray_casts_all(&world, &rays, limit).unwrap(), cuda.ray_casts_all(&world, &rays, limit).unwrap());
            assert_eq!(x.offsets, y.offsets, "heightfield round {round}, limit {limit}: rows");
            assert!(same(&x.hits, &y.hits), "heightfield round {round}, limit {limit}: hits");
        }
        for (i, ray) in rays.iter().enumerate().step_by(600) {
            let want = hooks::ray_hits_brute_force(&world, ray).unwrap();
            assert!(same(g[i].as_slice(), &want[..want.len().min(1)]), "heightfield, ray {i}: brute force");
        }
        let moved = nearkit::collide::Heightfield::new(
            h.heights().iter().map(|v| v + 3.0).collect(),
            h.rows(),
            h.cols(),
            h.spacing(),
            [-150.5, 90.25],
        )
        .unwrap();
        world.set_heightfield(moved).unwrap();
    }
}

/// Points another library holds on the GPU, as rows at any strides: imported, they index and
/// query as the same points from host memory do, bit for bit; a NaN is found and named, and
/// an address that is not GPU memory is refused.
fn same_imported<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    let engine = &gpu.0;
    for (name, queries, data) in point_sets::<T>(seed, 5000, 3000) {
        let opts = KnnOptions { k: 8, max_distance: None, exclude_self: false, ..Default::default() };
        let want = cpu().knn(&data, &queries, &opts).unwrap();
        // Row-major (n, 3), column-major (n, 3) and every other row of an (2n, 4) array.
        let layouts = |p: &Points<T>| -> Vec<(Vec<T>, (isize, isize))> {
            let n = p.len();
            let rows: Vec<T> = (0..n).flat_map(|i| [p.x[i], p.y[i], p.z[i]]).collect();
            let cols: Vec<T> = p.x.iter().chain(&p.y).chain(&p.z).copied().collect();
            let mut padded = vec![T::ZERO; 8 * n];
            for i in 0..n {
                padded[8 * i..8 * i + 3].copy_from_slice(&[p.x[i], p.y[i], p.z[i]]);
            }
            vec![(rows, (3, 1)), (cols, (1, n as isize)), (padded, (8, 1))]
        };
        for ((d, ds), (q, qs)) in layouts(&data).into_iter().zip(layouts(&queries)) {
            let (fd, fq) = (hooks::foreign_array(engine, &d).unwrap(), hooks::foreign_array(engine, &q).unwrap());
            // SAFETY: the arrays hold the rows the strides describe, and live through the calls.
            let dd = unsafe { engine.import_rows::<T>(fd.address(), data.len(), ds, nearkit::Role::Data) }.unwrap();
            let dq =
                unsafe { engine.import_rows::<T>(fq.address(), queries.len(), qs, nearkit::Role::Queries) }.unwrap();
            let mut out = DeviceKnn::new(engine, queries.len(), want.k).unwrap();
            let k = PointIndex::from_device(&dd, engine).unwrap().knn_device(&dq, &opts, &mut out).unwrap();
            let got = out.to_host(engine, queries.len(), k).unwrap();
            assert_eq!(got.ids, want.ids, "{name} {ds:?}: ids");
            assert!(
                got.distances.iter().zip(&want.distances).all(|(a, b)| a.ordered_bits() == b.ordered_bits()),
                "{name} {ds:?}: distances"
            );
        }
    }
    // A NaN in row 777's y.
    let mut rows: Vec<T> = (0..3000).map(|i| T::from_f64(i as f64)).collect();
    rows[777 * 3 + 1] = T::from_f64(f64::NAN);
    let f = hooks::foreign_array(engine, &rows).unwrap();
    // SAFETY: 1000 rows of 3.
    let e = unsafe { engine.import_rows::<T>(f.address(), 1000, (3, 1), nearkit::Role::Data) }.err().unwrap();
    assert!(matches!(e, nearkit::Error::NonFinite { index: 777, axis: 'y', .. }), "{e}");
    // Host memory is not the GPU's.
    // SAFETY: refused before anything is read.
    let e = unsafe { engine.import_rows::<T>(rows.as_ptr() as u64, 1000, (3, 1), nearkit::Role::Data) }.err().unwrap();
    assert!(e.to_string().contains("not CUDA device memory"), "{e}");
}

#[test]
fn gpu_imported_rows_match_host_points_f32() {
    same_imported::<f32>(91);
}

#[test]
fn gpu_imported_rows_match_host_points_f64() {
    same_imported::<f64>(92);
}

/// Rows `[x0, y0, z0, …]` of a point set, cut into three uneven pieces.
fn row_pieces<T: Real>(p: &Points<T>) -> (Vec<T>, [usize; 2]) {
    let rows: Vec<T> = (0..p.len()).flat_map(|i| [p.x[i], p.y[i], p.z[i]]).collect();
    let n = p.len();
    (rows, [3 * (n / 7), 3 * (n / 2)])
}

fn same_sharded<T: Real>(seed: u64) {
    let Some(gpu) = gpu() else { return };
    // One GPU listed several times runs every step of the plan (cuts, peer pulls, re-runs); a
    // host with several GPUs also runs them across its GPUs.
    let all: Vec<Engine> = (0..Device::cuda_count()).map(|g| Engine::open(Device::Cuda(g)).unwrap()).collect();
    let sets: Vec<Vec<Engine>> = vec![vec![gpu.0.clone()], vec![gpu.0.clone(); 2], vec![gpu.0.clone(); 3], all];
    for (name, a, b) in point_sets::<T>(seed, 20_000, 30_000).into_iter().chain(point_sets::<T>(seed, 7, 5)) {
        let (b_rows, [s, t]) = row_pieces(&b);
        let (a_rows, [u, v]) = row_pieces(&a);
        let b_pieces = [&b_rows[..s], &b_rows[s..t], &b_rows[t..]];
        let a_pieces = [&a_rows[..u], &a_rows[u..v], &a_rows[v..]];
        for max_distance in [None, Some(T::from_f64(4.0)), Some(T::ZERO)] {
            let want = cpu().nearest(&a, &b, max_distance).unwrap();
            if a.len() * b.len() <= 1 << 22 {
                let r2 = max_distance.map_or(T::INFINITY, |r| r * r);
                let brute: Vec<u32> = brute_nearest(&a, &b, r2).iter().map(|w| w.0).collect();
                assert_eq!(want.b, brute, "{name}: the CPU against brute force");
            }
            for engines in &sets {
                let index = ShardedIndex::from_rows(&b_pieces, engines).unwrap();
                let got = index.nearest_rows(&a_pieces, max_distance).unwrap();
                let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
                assert_eq!(want.b, got.b, "{name}: {} GPUs, max {max_distance:?}: ids", engines.len());
                assert_eq!(bits(&want.distance), bits(&got.distance), "{name}: {} GPUs: distances", engines.len());
            }
        }
    }
}

/// `PointIndex::nearest_rows_into` on a GPU (rows up as they are, in one chunk and in many)
/// and on the CPU: the bits of `nearest`, ids widened on the way.
fn same_nearest_rows<T: Real>(seed: u64) {
    use nearkit::{PointIndex, NO_ID};
    use std::mem::MaybeUninit;
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    let Some(gpu) = gpu() else { return };
    let engines = [gpu.0.clone(), Engine::open(Device::Cpu).unwrap()];
    for (name, a, b) in point_sets::<T>(seed, 20_000, 30_000).into_iter().chain(point_sets::<T>(seed, 7, 5)) {
        let (rows, _) = row_pieces(&a);
        for max_distance in [None, Some(T::from_f64(4.0)), Some(T::ZERO)] {
            let want = cpu().nearest(&a, &b, max_distance).unwrap();
            // In chunks of 777 rows, each sorted and searched apart.
            let got = hooks::nearest_rows_in_chunks(&gpu.0, &b, &rows, max_distance, 777).unwrap();
            assert_eq!((&want.b, bits(&want.distance)), (&got.b, bits(&got.distance)), "{name}: chunks of 777");
            for engine in &engines {
                let index = PointIndex::new(&b, engine).unwrap();
                let n = a.len();
                let (mut d, mut ids) = (vec![MaybeUninit::<T>::uninit(); n], vec![MaybeUninit::<i64>::uninit(); n]);
                index
                    .nearest_rows_into(
                        &rows,
                        max_distance,
                        &mut d,
                        &mut ids,
                        |b| if b == NO_ID { -1 } else { b as i64 },
                    )
                    .unwrap();
                // SAFETY: `nearest_rows_into` wrote every place.
                let (d, ids): (Vec<T>, Vec<i64>) = unsafe {
                    (d.iter().map(|v| v.assume_init()).collect(), ids.iter().map(|v| v.assume_init()).collect())
                };
                let want_ids: Vec<i64> = want.b.iter().map(|&b| if b == NO_ID { -1 } else { b as i64 }).collect();
                let on = engine.describe();
                assert_eq!(want_ids, ids, "{name} on {on}, max {max_distance:?}: ids");
                assert_eq!(bits(&want.distance), bits(&d), "{name} on {on}, max {max_distance:?}: distances");
            }
        }
    }
}

#[test]
fn gpu_nearest_rows_match_cpu_f32() {
    same_nearest_rows::<f32>(63);
}

#[test]
fn gpu_nearest_rows_match_cpu_f64() {
    same_nearest_rows::<f64>(64);
}

#[test]
fn gpu_sharded_index_matches_cpu_f32() {
    same_sharded::<f32>(61);
}

#[test]
fn gpu_sharded_index_matches_cpu_f64() {
    same_sharded::<f64>(62);
}

#[test]
fn gpu_sharded_index_refuses_bad_rows() {
    let Some(gpu) = gpu() else { return };
    let engines = vec![gpu.0.clone(); 2];
    let mut rows = vec![0.5f32; 3 * 100];
    rows[3 * 77 + 1] = f32::NAN;
    let err = ShardedIndex::from_rows(&[&rows[..30], &rows[30..]], &engines).err().expect("a NaN is refused");
    assert!(err.to_string().contains("77"), "the error names the row: {err}");
    assert!(ShardedIndex::<f32>::from_rows(&[&[]], &engines).is_err(), "no rows");
    assert!(ShardedIndex::from_rows(&[&[1.0f32, 2.0]], &engines).is_err(), "not rows of three");
}

/// A closed 4 × 3 × 3 m box (12 triangles) about its origin, its floor at z = 0.
fn shed() -> nearkit::Mesh<f64> {
    let v: Vec<[f64; 3]> = (0..8)
        .map(|k| {
            [
                if k & 1 != 0 { 2.0 } else { -2.0 },
                if k & 2 != 0 { 1.5 } else { -1.5 },
                if k & 4 != 0 { 3.0 } else { 0.0 },
            ]
        })
        .collect();
    let q = [[0u32, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]];
    nearkit::Mesh {
        vertices: Points::from_rows(&v),
        triangles: q.iter().flat_map(|f| [[f[0], f[1], f[2]], [f[0], f[2], f[3]]]).collect(),
    }
}

/// Rays against mesh instances alone and beside a mesh and bodies: the CPU's hits bit for bit
/// (triangles too), and the brute force's, through instances that overlap, stand on the same
/// spot (ties broken by the smaller instance id), are moved, removed and re-shaped, in layers.
#[test]
fn gpu_ray_casts_on_instances_match_cpu() {
    use nearkit::collide::{Body, InstanceId, Placement, Ray, RayHit, World};
    use rand::{Rng, SeedableRng};
    let Some(gpu) = gpu() else { return };
    let bits = |h: &RayHit| {
        (h.distance.to_bits(), h.kind, h.id, h.triangle, h.point.map(f64::to_bits), h.normal.map(f64::to_bits))
    };
    let same = |a: &[RayHit], b: &[RayHit]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y));
    let mut r = rand_pcg::Pcg64::seed_from_u64(71);
    let mut world = World::new(1.0).unwrap();
    // A closed box (shared edges: ties between its triangles), a rough patch, a soup of
    // random triangles (some degenerate), and a shape of degenerate triangles only.
    let closed = shed();
    let heights: Vec<f64> = (0..100).map(|k| ((k * 37 % 11) as f64 - 5.0) * 0.08).collect();
    let patch = nearkit::collide::scene::heightfield(&heights, 10, 10, 0.7);
    let soup_points: Vec<[f64; 3]> =
        (0..300).map(|_| std::array::from_fn(|_| r.random_range(-3.0..3.0f64).round() * 0.5)).collect();
    let mut soup_tris: Vec<[u32; 3]> = (0..100).map(|k| [3 * k, 3 * k + 1, 3 * k + 2]).collect();
    soup_tris.push([0, 0, 1]);
    let soup = nearkit::Mesh { vertices: Points::from_rows(&soup_points), triangles: soup_tris };
    let flat = nearkit::Mesh {
        vertices: Points::from_rows(&[[0.0f64, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]),
        triangles: vec![[0, 1, 2]],
    };
    let shapes = [closed, patch, soup, flat].map(|m| world.add_shape(&m).unwrap());
    let place = |r: &mut rand_pcg::Pcg64, k: usize| {
        let c: [f64; 3] = std::array::from_fn(|_| r.random_range(0.0..40.0f64).round());
        let o: [f64; 4] = match k % 3 {
            0 => [0.0, 0.0, 0.0, 1.0],
            _ => std::array::from_fn(|_| r.random_range(-1.0..1.0)),
        };
        let p = Placement::new(shapes[k % 4], c, o);
        if k % 5 == 0 {
            p.with_layer(2)
        } else {
            p
        }
    };
    let mut placements: Vec<Placement> = (0..400).map(|k| place(&mut r, k)).collect();
    // Pairs on the same spot: every hit on one is a tie with the other.
    for k in (0..400).step_by(10) {
        placements[k + 1] = placements[k];
    }
    let mut ids: Vec<InstanceId> = world.add_instances(&placements).unwrap();
    for k in 0..20 {
        world.add_body(Body::sphere([k as f64 * 2.0, 20.0, 20.0], 0.7)).unwrap();
    }
    let make_rays = |r: &mut rand_pcg::Pcg64, world: &World, n: usize| -> Vec<Ray> {
        let centers: Vec<[f64; 3]> =
            world.instance_ids().iter().map(|&i| world.instance(i).unwrap().position).collect();
        (0..n)
            .map(|k| {
                let origin: [f64; 3] = match k % 3 {
                    0 => std::array::from_fn(|_| r.random_range(-5.0..45.0)),
                    // At an instance's centre (inside the box, on a vertex of the soup).
                    1 => centers[r.random_range(0..centers.len())],
                    _ => std::array::from_fn(|_| r.random_range(-5.0..45.0f64).round()),
                };
                let direction = match k % 4 {
                    3 => [[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]][k % 3],
                    _ => std::array::from_fn(|_| r.random_range(-1.0..1.0)),
                };
                let mask = [u32::MAX, 1, 2, 0][k % 4 / 2 + k % 2];
                let max_distance = [f64::INFINITY, 30.0, 3.0, 0.0][k % 7 % 4];
                Ray { origin, direction, max_distance, mask }
            })
            .collect()
    };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    for round in 0..4 {
        let rays = make_rays(&mut r, &world, 60_000);
        let (a, b) = (cpu.ray_casts(&world, &rays).unwrap(), cuda.ray_casts(&world, &rays).unwrap());
        let on_instances = a.iter().filter(|h| h.is_some_and(|h| h.kind == nearkit::collide::ContactKind::Instance));
        assert!(on_instances.count() > 5_000, "round {round}");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(same(x.as_slice(), y.as_slice()), "round {round}, ray {i} {:?}: CPU {x:?}, GPU {y:?}", rays[i]);
        }
        for limit in [1, 3, usize::MAX] {
            let (a, b) =
                (cpu.ray_casts_all(&world, &rays, limit).unwrap(), cuda.ray_casts_all(&world, &rays, limit).unwrap());
            assert_eq!(a.offsets, b.offsets, "round {round}, limit {limit}: rows");
            assert!(same(&a.hits, &b.hits), "round {round}, limit {limit}: hits");
        }
        for (i, ray) in rays.iter().enumerate().step_by(97) {
            let want = hooks::ray_hits_brute_force(&world, ray).unwrap();
            assert!(same(b[i].as_slice(), &want[..want.len().min(1)]), "round {round}, ray {i}: brute force");
        }
        match round {
            0 => {
                // Some moved, some re-shaped.
                let moved: Vec<Placement> = (0..60).map(|k| place(&mut r, k + 1)).collect();
                world.set_instances(&ids[100..160], &moved).unwrap();
            }
            1 => {
                // Some removed (free slots between live ones), a shape no longer placed removed,
                // a new one added, and the static mesh.
                for id in ids.drain(200..260).step_by(2) {
                    world.remove_instance(id).unwrap();
                }
                let survivors: Vec<InstanceId> = world
                    .instance_ids()
                    .into_iter()
                    .filter(|&i| world.instance(i).unwrap().shape == shapes[3])
                    .collect();
                for i in survivors {
                    world.remove_instance(i).unwrap();
                }
                world.remove_shape(shapes[3]).unwrap();
                let tri = Points::from_rows(&[[0.0f64, 0.0, 0.0], [9.0, 0.0, 0.0], [0.0, 9.0, 0.5]]);
                let big = world.add_shape(&nearkit::Mesh { vertices: tri, triangles: vec![[0, 1, 2]] }).unwrap();
                world.add_instance(Placement::new(big, [10.0, 10.0, 10.0], [0.3, 0.1, 0.0, 1.0])).unwrap();
                world.set_mesh(&nearkit::collide::scene::crater_terrain(50, 60)).unwrap();
            }
            _ => {}
        }
    }
}

/// A world with mesh instances (the crater and its bodies, plus 300 placed buildings, some
/// in layer 2, some moved each step): contacts, sweeps, overlap queries and rays are the
/// CPU's bits on the CUDA collider.
#[test]
fn gpu_collision_world_with_instances_matches_cpu() {
    use nearkit::collide::scene::Scene;
    use nearkit::collide::{ContactKind, InstanceId, Overlap, Placement, Ray};
    let Some(gpu) = gpu() else { return };
    let mut cuda = Collider::new(&gpu.0, &ColliderOptions::default()).unwrap();
    let mut cpu = Collider::cpu();
    let scene = Scene::crater(4000, 31);
    let mut world = scene.world(1.0).unwrap();
    let shape = world.add_shape(&shed()).unwrap();
    // And a 4 × 4 m patch of rough ground (98 triangles: searched by its grid, not scanned).
    let heights: Vec<f64> = (0..64).map(|k| ((k * 37 % 11) as f64 - 5.0) * 0.05).collect();
    let patch = world.add_shape(&nearkit::collide::scene::heightfield(&heights, 8, 8, 0.6)).unwrap();
    let ids: Vec<InstanceId> = (0..300)
        .map(|k| {
            let c = scene.bodies[k * 13].center;
            let a = k as f64 * 0.37;
            let s = if k % 2 == 0 { shape } else { patch };
            let p = Placement::new(s, [c[0], c[1], c[2] - 1.0], [0.1 * a.cos(), 0.0, a.sin(), a.cos()]);
            world.add_instance(if k % 5 == 0 { p.with_layer(2) } else { p }).unwrap()
        })
        .collect();
    // Some masked to layer 2 (the instances placed there only), some of the overlap queries
    // boxes.
    let sweeps: Vec<_> = scene
        .bodies
        .iter()
        .take(2000)
        .enumerate()
        .map(|(i, b)| if i % 3 == 0 { dropped_body(b).with_mask(2) } else { dropped_body(b) })
        .collect();
    let queries: Vec<Overlap> = scene
        .bodies
        .iter()
        .take(2000)
        .enumerate()
        .map(|(i, b)| {
            let q = if i % 2 == 0 {
                Overlap::sphere(b.center, 0.5 + (i % 7) as f64 * 0.3)
            } else {
                Overlap::cuboid(b.center, [1.5, 0.4, 0.9], [0.3, 0.1, -0.2, 1.0])
            };
            if i % 4 == 1 {
                q.with_mask(2)
            } else {
                q
            }
        })
        .collect();
    let rays: Vec<Ray> = scene
        .bodies
        .iter()
        .take(3000)
        .enumerate()
        .map(|(i, b)| {
            let c = b.center;
            let r = Ray::new([c[0], c[1], c[2] + 6.0], [(i % 5) as f64 * 0.1 - 0.2, 0.05, -1.0], f64::INFINITY);
            if i % 4 == 0 {
                r.with_mask(2)
            } else {
                r
            }
        })
        .collect();
    for step in 0..3 {
        if step > 0 {
            scene.advance(&mut world, step);
            let moved: Vec<Placement> = ids[..40]
                .iter()
                .map(|&id| {
                    let p = world.instance(id).unwrap();
                    Placement { position: [p.position[0] + 0.3, p.position[1], p.position[2]], ..p }
                })
                .collect();
            world.set_instances(&ids[..40], &moved).unwrap();
        }
        let (a, b) = (cpu.contacts(&world).unwrap(), cuda.contacts(&world).unwrap());
        assert!(a.iter().filter(|c| c.kind == ContactKind::Instance).count() > 500, "step {step}");
        assert!(a == b, "step {step}: contacts ({} vs {})", a.len(), b.len());
        same_sweeps(&cpu.sweeps(&world, &sweeps).unwrap(), &cuda.sweeps(&world, &sweeps).unwrap());
        for limit in [64, 3] {
            assert!(cpu.overlaps(&world, &queries, limit).unwrap() == cuda.overlaps(&world, &queries, limit).unwrap());
        }
        let (a, b) = (cpu.ray_casts(&world, &rays).unwrap(), cuda.ray_casts(&world, &rays).unwrap());
        assert!(a.iter().filter(|h| h.is_some_and(|h| h.kind == ContactKind::Instance)).count() > 100);
        assert!(a == b, "step {step}: first hits");
        assert!(cpu.ray_casts_all(&world, &rays, 4).unwrap() == cuda.ray_casts_all(&world, &rays, 4).unwrap());
    }
}

/// Host point sets checked on their way up (`PointIndex::new`, `nearest` and `closest_pairs`
/// on a GPU: one pass copies them into the staging buffers and finds their magnitudes): the
/// CPU's answers and the CPU's errors, for sets sent in one transfer, in one buffer-full, and
/// in several (a column split between two buffers), with a bad value in each column.
fn same_checked_uploads<T: Real>(seed: u64) {
    use nearkit::generate::{generate, Distribution};
    let Some(gpu) = gpu() else { return };
    let (c, g) = (Engine::cpu(), &gpu.0);
    for (na, nb) in [(40_000, 30_000), (300_000, 100_000), (1_600_000, 700_000)] {
        let a = generate::<T>(Distribution::Uniform, na, 1.0, seed);
        let b = generate::<T>(Distribution::Clustered, nb, 1.0, seed + 1);
        let (ci, gi) = (PointIndex::new(&b, &c).unwrap(), PointIndex::new(&b, g).unwrap());
        assert_eq!(ci.nearest(&a, None).unwrap(), gi.nearest(&a, None).unwrap(), "{na} x {nb}: nearest");
        let opts = PairsOptions { k: 100, ..Default::default() };
        assert_eq!(ci.closest_pairs(&a, &opts).unwrap(), gi.closest_pairs(&a, &opts).unwrap(), "{na} x {nb}: pairs");
        // A bad value late in z and another earlier in y: the error names the y (the first bad
        // column), whichever buffer-full holds either.
        for bad in [T::from_f64(f64::NAN), T::INFINITY, -T::INFINITY] {
            let mut p = a.clone();
            p.z[na - 3] = bad;
            p.y[na / 2 + 1] = bad;
            let err = |r: nearkit::Result<()>| r.err().map(|e| e.to_string()).expect("refused");
            let want = err(PointIndex::new(&p, &c).map(drop));
            assert_eq!(want, err(PointIndex::new(&p, g).map(drop)), "{na}: data");
            assert!(want.contains(&format!("{}", na / 2 + 1)), "{want}");
            let want = err(ci.nearest(&p, None).map(drop));
            assert_eq!(want, err(gi.nearest(&p, None).map(drop)), "{na}: queries");
            assert_eq!(
                err(ci.closest_pairs(&p, &opts).map(drop)),
                err(gi.closest_pairs(&p, &opts).map(drop)),
                "{na}: A"
            );
            p.y[na / 2 + 1] = T::ZERO;
            p.x[0] = bad;
            assert_eq!(err(ci.nearest(&p, None).map(drop)), err(gi.nearest(&p, None).map(drop)), "{na}: x first");
        }
    }
    let empty = Points::<T>::default();
    let err = |r: nearkit::Result<PointIndex<T>>| r.err().map(|e| e.to_string()).expect("refused");
    assert_eq!(err(PointIndex::new(&empty, &c)), err(PointIndex::new(&empty, g)), "no points");
}

#[test]
fn gpu_checks_uploaded_points_as_the_cpu_does_f32() {
    same_checked_uploads::<f32>(71);
}

#[test]
fn gpu_checks_uploaded_points_as_the_cpu_does_f64() {
    same_checked_uploads::<f64>(72);
}
