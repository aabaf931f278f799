//! Radius queries on the CPU against brute force, on every input shape, in f32 and f64:
//! `within`, `count_within`, `pairs_within` and `pairs_within_other`, sorted and unsorted,
//! from r = 0 to beyond the data's extent, and exactly on the boundary.

mod common;

use common::*;
use nearkit::generate::{generate, Distribution};
use nearkit::{Device, Engine, Error, PointIndex, Points, RadiusOptions, Real, Within};

/// Brute force: for each query, every data point with d2 <= r2, by (d2, id).
fn brute_within<T: Real>(data: &Points<T>, queries: &Points<T>, r2: T, above: Option<()>) -> Vec<Vec<(T, u32)>> {
    (0..queries.len())
        .map(|q| {
            let mut row: Vec<(T, u32)> = (0..data.len())
                .filter(|&j| above.is_none() || j > q)
                .map(|j| (d2(queries, q, data, j), j as u32))
                .filter(|&(d, _)| d <= r2)
                .collect();
            row.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap().then(x.1.cmp(&y.1)));
            row
        })
        .collect()
}

/// `got` holds exactly the rows of `want` (distances as sqrt of d2), sorted or as sets.
fn check_rows<T: Real>(name: &str, got: &Within<T>, want: &[Vec<(T, u32)>], sorted: bool) {
    assert_eq!(got.rows(), want.len(), "{name}: rows");
    assert_eq!(got.offsets[0], 0, "{name}: first offset");
    assert_eq!(*got.offsets.last().unwrap() as usize, got.total(), "{name}: last offset");
    assert_eq!(got.ids.len(), got.distances.len(), "{name}: columns");
    for (q, w) in want.iter().enumerate() {
        let (ids, ds) = got.row(q);
        let mut row: Vec<(u32, T)> = ids.iter().copied().zip(ds.iter().copied()).collect();
        let want_row: Vec<(u32, T)> = w.iter().map(|&(d, id)| (id, d.sqrt())).collect();
        if !sorted {
            row.sort_by_key(|e| e.0);
            let mut w = want_row.clone();
            w.sort_by_key(|e| e.0);
            assert_eq!(row, w, "{name}: row {q} (as a set)");
        } else {
            assert_eq!(row, want_row, "{name}: row {q}");
        }
    }
}

/// Radii giving about `counts` neighbours per query for `n` points spread over a cube of side
/// `side`, plus 0 and one beyond the extent.
fn radii(n: usize, side: f64) -> Vec<f64> {
    let mut r: Vec<f64> = [2.0, 12.0, 60.0]
        .iter()
        .map(|&c| (c / n as f64 * side.powi(3) * 3.0 / (4.0 * std::f64::consts::PI)).cbrt())
        .collect();
    r.push(0.0);
    r.push(side * 10.0);
    r
}

fn all_checks<T: Real>(seed: u64) {
    for (name, queries, data) in point_sets::<T>(seed, 300, 700) {
        let index = PointIndex::build(&data, Device::Cpu).unwrap();
        let side = if name == "far-from-origin" { 100.0 } else { 1000.0 };
        for r in radii(data.len(), side) {
            let rt = T::from_f64(r);
            let want = brute_within(&data, &queries, rt * rt, None);
            for sorted in [true, false] {
                let opts = RadiusOptions { sorted, ..Default::default() };
                let got = index.within(&queries, rt, &opts).unwrap();
                check_rows(&format!("{name} within r={r} sorted={sorted}"), &got, &want, sorted);
                // Without distances: the same ids in the same rows, and no distances.
                let ids_only = index.within(&queries, rt, &RadiusOptions { distances: false, ..opts }).unwrap();
                assert_eq!((&ids_only.offsets, &ids_only.ids), (&got.offsets, &got.ids), "{name}: ids only r={r}");
                assert!(ids_only.distances.is_empty(), "{name}: ids only r={r}, yet distances");
                assert!(
                    ids_only.pairs().all(|(_, _, d)| d.to_f64().is_nan()),
                    "{name}: ids only r={r}, pairs' distances"
                );
            }
            let counts = index.count_within(&queries, rt).unwrap();
            let want_counts: Vec<u32> = want.iter().map(|w| w.len() as u32).collect();
            assert_eq!(counts, want_counts, "{name}: counts r={r}");

            let self_want = brute_within(&data, &data, rt * rt, Some(()));
            let got = index.pairs_within(rt, &RadiusOptions::default()).unwrap();
            check_rows(&format!("{name} pairs_within r={r}"), &got, &self_want, true);
            let pairs: Vec<(u32, u32)> = got.pairs().map(|(i, j, _)| (i, j)).collect();
            assert!(pairs.iter().all(|&(i, j)| i < j), "{name}: pairs i < j");
            assert_eq!(pairs.len(), got.total());
            let unsorted = RadiusOptions { sorted: false, ..Default::default() };
            let with_d = index.pairs_within(rt, &unsorted).unwrap();
            let ids_only = index.pairs_within(rt, &RadiusOptions { distances: false, ..unsorted }).unwrap();
            assert_eq!((&ids_only.offsets, &ids_only.ids), (&with_d.offsets, &with_d.ids), "{name}: pairs, ids only");
            assert!(ids_only.distances.is_empty() && ids_only.row(0).1.is_empty(), "{name}: pairs, ids only");

            // Rows of the indexed points, listing the other set's.
            let other_want = brute_within(&queries, &data, rt * rt, None);
            let got = index.pairs_within_other(&queries, rt, &RadiusOptions::default()).unwrap();
            check_rows(&format!("{name} pairs_within_other r={r}"), &got, &other_want, true);
        }
    }
}

#[test]
fn within_matches_brute_force_f32() {
    all_checks::<f32>(71);
}

#[test]
fn within_matches_brute_force_f64() {
    all_checks::<f64>(72);
}

#[test]
fn the_boundary_is_inclusive_and_exact() {
    // Integer coordinates: squared distances 25 are exact, so r = 5 takes them, and a point
    // whose squared distance is the next float above 25 is left out.
    let next_above_5 = f32::from_bits(5.0f32.to_bits() + 1);
    let data = Points::from_rows(&[
        [0.0f32, 0.0, 0.0],
        [3.0, 4.0, 0.0],
        [5.0, 0.0, 0.0],
        [0.0, 0.0, next_above_5],
        [0.0, 0.0, 5.0],
        [0.0, 0.0, 5.0],
    ]);
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    let rows = index.within(&Points::from_rows(&[[0.0f32, 0.0, 0.0]]), 5.0, &RadiusOptions::default()).unwrap();
    assert_eq!(rows.row(0).0, [0, 1, 2, 4, 5]);
    assert_eq!(rows.row(0).1, [0.0, 5.0, 5.0, 5.0, 5.0]);
    // r = 0 finds exact duplicates only.
    let rows = index.within(&Points::from_rows(&[[0.0f32, 0.0, 5.0]]), 0.0, &RadiusOptions::default()).unwrap();
    assert_eq!(rows.row(0).0, [4, 5]);
    let pairs = index.pairs_within(0.0, &RadiusOptions::default()).unwrap();
    assert_eq!(pairs.pairs().map(|(i, j, _)| (i, j)).collect::<Vec<_>>(), [(4, 5)]);
}

#[test]
fn long_rows_and_many_duplicates() {
    // Rows longer than every short-row path: 3,000 copies of one point and a cloud around it.
    let mut data = Points::with_capacity(4000);
    for i in 0..3000 {
        data.push(1.0f32, 2.0, 3.0);
        if i % 3 == 1 {
            data.push(1.0 + (i as f32) * 1e-3, 2.0, 3.0 - (i as f32) * 1e-3);
        }
    }
    let queries = Points::from_rows(&[[1.0f32, 2.0, 3.0], [1.5, 2.0, 2.5], [100.0, 0.0, 0.0]]);
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    for r in [0.0f32, 0.3, 2.0] {
        let want = brute_within(&data, &queries, r * r, None);
        let got = index.within(&queries, r, &RadiusOptions::default()).unwrap();
        check_rows(&format!("duplicates r={r}"), &got, &want, true);
    }
    let got = index.pairs_within(0.0, &RadiusOptions::default()).unwrap();
    assert_eq!(got.total(), 3000 * 2999 / 2, "pairs among 3,000 copies");
}

#[test]
fn bad_radii_and_limits_are_errors() {
    let data = Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0]]);
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    for r in [-1.0f32, f32::NAN, f32::INFINITY] {
        let e = index.within(&data, r, &RadiusOptions::default()).unwrap_err();
        assert!(matches!(e, Error::BadRadius(_)), "{r}: {e}");
        assert!(e.to_string().contains("radius"), "{e}");
        assert!(index.pairs_within(r, &RadiusOptions::default()).is_err());
        assert!(index.count_within(&data, r).is_err());
    }
    let e = index.within(&data, 5.0, &RadiusOptions { max_results: Some(3), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("max_results = 3"), "{e}");
    let got = index.within(&data, 5.0, &RadiusOptions { max_results: Some(4), ..Default::default() }).unwrap();
    assert_eq!(got.total(), 4);
    let e = index.within(&Points::<f32>::default(), 1.0, &RadiusOptions::default()).unwrap_err();
    assert!(matches!(e, Error::EmptySet { .. }), "{e}");
}

#[test]
fn far_from_one_coordinates_are_scaled_and_exact() {
    // Coordinates near 1e-30: their squared distances underflow f32 unless scaled.
    let unit = nearkit::generate::generate::<f64>(nearkit::generate::Distribution::Uniform, 400, 1.0, 9);
    let tiny = |p: &Points<f64>| -> Points<f32> {
        let c = |v: &Vec<f64>| v.iter().map(|&x| (x * 1e-30) as f32).collect();
        Points { x: c(&p.x), y: c(&p.y), z: c(&p.z) }
    };
    let data = tiny(&unit);
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    let got = index.pairs_within(2e-31, &RadiusOptions::default()).unwrap();
    // Reference in f64 (no underflow there), up to rounding at the boundary.
    let mut want = 0usize;
    let mut boundary = 0usize;
    for i in 0..data.len() {
        for j in i + 1..data.len() {
            let d = d2_f64(&data, i, &data, j).sqrt();
            if d <= 2e-31 {
                want += 1;
            }
            if (d / 2e-31 - 1.0).abs() < 1e-5 {
                boundary += 1;
            }
        }
    }
    assert!(want > 100, "the radius must catch pairs ({want})");
    assert!(got.total().abs_diff(want) <= boundary, "{} pairs, {want} in f64", got.total());
    for (i, j, d) in got.pairs() {
        let exact = d2_f64(&data, i as usize, &data, j as usize).sqrt();
        assert!((d as f64 / exact - 1.0).abs() < 1e-5, "pair ({i}, {j}): {d} vs {exact}");
    }
}

#[test]
fn within_each_delivers_the_same_rows_in_batches() {
    let data = nearkit::generate::generate::<f32>(nearkit::generate::Distribution::Clustered, 3000, 1000.0, 5);
    let queries = nearkit::generate::generate::<f32>(nearkit::generate::Distribution::Uniform, 1001, 1000.0, 6);
    let index = PointIndex::build(&data, Device::Cpu).unwrap();
    let whole = index.within(&queries, 60.0, &RadiusOptions::default()).unwrap();
    for batch in [1, 7, 1000, 5000] {
        let mut joined = Within { offsets: vec![0], ..Within::default() };
        let mut next = 0;
        index
            .within_each(&queries, 60.0, &RadiusOptions::default(), batch, |first, rows| {
                assert_eq!(first, next, "batches in order");
                next = first + rows.rows();
                let base = *joined.offsets.last().unwrap();
                joined.offsets.extend(rows.offsets[1..].iter().map(|o| base + o));
                joined.ids.extend(&rows.ids);
                joined.distances.extend(&rows.distances);
                Ok(())
            })
            .unwrap();
        assert_eq!(next, queries.len());
        assert_eq!(joined, whole, "batch {batch}");
    }
    let e = index.within_each(&queries, -1.0, &RadiusOptions::default(), 10, |_, _| Ok(())).unwrap_err();
    assert!(matches!(e, Error::BadRadius(_)));
}

/// Data on surfaces and in clusters, queries uniform in a larger box: most queries have no
/// point within r, and the coarse test that leaves their rows empty must never skip one that
/// has (queries r from a data point along an axis, on the boundary, included).
fn far_queries<T: Real>(seed: u64) {
    use nearkit::generate::{generate, Distribution};
    for dist in [Distribution::Sphere, Distribution::Plane, Distribution::Clustered] {
        let data = generate::<T>(dist, 2000, 1000.0, seed);
        let mut queries = generate::<T>(Distribution::Uniform, 3000, 1400.0, seed + 1);
        let shift = T::from_f64(200.0);
        for c in [&mut queries.x, &mut queries.y, &mut queries.z] {
            c.iter_mut().for_each(|v| *v = *v - shift);
        }
        let index = PointIndex::build(&data, Device::Cpu).unwrap();
        for r in [0.0, 1.0, 7.5, 30.0] {
            let rt = T::from_f64(r);
            let mut q = queries.clone();
            for i in 0..60 {
                let p = data.get(i * 7);
                for (axis, sign) in [(0, 1.0), (1, -1.0), (2, 1.0), (0, -1.0)] {
                    let mut v = p;
                    v[axis] = v[axis] + T::from_f64(sign) * rt;
                    q.push(v[0], v[1], v[2]);
                }
            }
            let want = brute_within(&data, &q, rt * rt, None);
            let got = index.within(&q, rt, &RadiusOptions::default()).unwrap();
            let name = format!("{} data, {} r={r}", dist.name(), T::NAME);
            check_rows(&name, &got, &want, true);
            assert!(want.iter().filter(|w| w.is_empty()).count() > 0, "{name}: some rows are empty");
            let counts: Vec<u32> = want.iter().map(|w| w.len() as u32).collect();
            assert_eq!(index.count_within(&q, rt).unwrap(), counts, "{name}: counts");
        }
    }
}

#[test]
fn queries_far_from_the_data_have_empty_rows_f32() {
    far_queries::<f32>(81);
}

#[test]
fn queries_far_from_the_data_have_empty_rows_f64() {
    far_queries::<f64>(82);
}

/// `within_rows` and `count_within_rows` (numpy's C order) answer as `within` and
/// `count_within` of the same points as columns; a partial row is refused.
#[test]
fn rows_give_the_rows_of_columns() {
    let data = generate::<f64>(Distribution::Clustered, 3000, 10.0, 5);
    let queries = generate::<f64>(Distribution::Uniform, 700, 10.0, 6);
    let rows: Vec<f64> = (0..queries.len()).flat_map(|i| queries.get(i)).collect();
    let index = PointIndex::new(&data, &Engine::cpu()).unwrap();
    for sorted in [true, false] {
        let opts = RadiusOptions { sorted, ..Default::default() };
        assert_eq!(index.within(&queries, 0.4, &opts).unwrap(), index.within_rows(&rows, 0.4, &opts).unwrap());
    }
    assert_eq!(index.count_within(&queries, 0.4).unwrap(), index.count_within_rows(&rows, 0.4).unwrap());
    assert!(index.within_rows(&rows[..rows.len() - 1], 0.4, &RadiusOptions::default()).is_err());
}
