//! Every point format reads back what was written, in both precisions; results formats parse.

use std::path::Path;

use nearkit::generate::{generate, Distribution};
use nearkit::{Nearest, Pair, Points, NO_ID};
use nearkit_io::{read_points, write_nearest, write_pairs, write_points, ReadOptions};

fn round_trip<T: nearkit::Real>(dir: &Path, ext: &str) {
    let p: Points<T> = generate(Distribution::Uniform, 257, 100.0, 4);
    let path = dir.join(format!("p-{}.{ext}", T::NAME));
    write_points(&path, &p).unwrap();
    let q: Points<T> = read_points(&path, &ReadOptions::default()).unwrap();
    assert_eq!(p, q, "{ext} {}", T::NAME);
}

#[test]
fn points_round_trip() {
    let d = tempfile::tempdir().unwrap();
    for ext in ["csv", "npy", "ply", "xyz"] {
        round_trip::<f32>(d.path(), ext);
        round_trip::<f64>(d.path(), ext);
    }
}

#[test]
fn real_meshes_read() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let Ok(entries) = std::fs::read_dir(&data) else {
        eprintln!("skipped: {} not found", data.display());
        return;
    };
    for e in entries {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "off") {
            let p: Points<f32> = read_points(&path, &ReadOptions::default()).unwrap();
            assert!(p.len() > 1000, "{}", path.display());
        }
    }
}

#[test]
fn binary_ply_and_csv_columns() {
    let d = tempfile::tempdir().unwrap();
    let ply = d.path().join("bin.ply");
    let mut bytes = b"ply\nformat binary_little_endian 1.0\ncomment test\nelement vertex 2\nproperty double x\nproperty double y\nproperty double z\nproperty uchar red\nelement face 0\nproperty list uchar int vertex_indices\nend_header\n".to_vec();
    for (v, c) in [([1.5f64, 2.0, 3.0], 7u8), ([4.0, 5.0, 6.25], 9)] {
        for x in v {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        bytes.push(c);
    }
    std::fs::write(&ply, bytes).unwrap();
    let p: Points<f64> = read_points(&ply, &ReadOptions::default()).unwrap();
    assert_eq!(p, Points::from_rows(&[[1.5, 2.0, 3.0], [4.0, 5.0, 6.25]]));

    let csv = d.path().join("cols.csv");
    std::fs::write(&csv, "id,lon,lat,h\n0,1,2,3\n1,4,5,6\n").unwrap();
    let opts = ReadOptions { columns: Some(["lon".into(), "lat".into(), "h".into()]) };
    let p: Points<f32> = read_points(&csv, &opts).unwrap();
    assert_eq!(p, Points::from_rows(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]));
    let opts = ReadOptions { columns: Some(["3".into(), "2".into(), "1".into()]) };
    let p: Points<f32> = read_points(&csv, &opts).unwrap();
    assert_eq!(p, Points::from_rows(&[[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]]));
}

#[test]
fn result_files_are_well_formed() {
    let d = tempfile::tempdir().unwrap();
    let pairs = vec![Pair { a: 3, b: 1, distance: 0.5f32 }, Pair { a: 0, b: 2, distance: 1.25 }];
    let json = d.path().join("p.json");
    write_pairs(&json, &pairs).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(text.contains("\"rank\": 2") && text.contains("\"distance\": 1.25"), "{text}");
    let npy = d.path().join("p.npy");
    write_pairs(&npy, &pairs).unwrap();
    let back: Points<f64> = {
        // An N×4 array: read its first three columns through the N×3 reader's error path.
        match read_points::<f64>(&npy, &ReadOptions::default()) {
            Err(e) => {
                assert!(e.to_string().contains("[2, 4]"), "{e}");
                Points::default()
            }
            Ok(p) => p,
        }
    };
    assert!(back.is_empty());
    let nn = Nearest { b: vec![5, NO_ID], distance: vec![2.0f64, f64::INFINITY] };
    let csv = d.path().join("n.csv");
    write_nearest(&csv, &nn).unwrap();
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "a,b,distance\n0,5,2\n1,-1,inf\n");
}
