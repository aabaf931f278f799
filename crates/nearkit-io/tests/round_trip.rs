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

/// An `.npy` array parsed by hand (format 1.0, little-endian): its descriptor, shape and bytes.
fn parse_npy(bytes: &[u8]) -> (String, Vec<u64>, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "magic and version");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + len) % 64, 0, "the data start on a 64-byte boundary");
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(header.ends_with('\n') && header.contains("'fortran_order': False"), "{header}");
    let descr = header.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap().to_string();
    let shape = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = shape.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    (descr, shape, bytes[10 + len..].to_vec())
}

/// Every array of an `.npz`, by name.
fn read_npz(path: &Path) -> std::collections::HashMap<String, (String, Vec<u64>, Vec<u8>)> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut f = zip.by_index(i).unwrap();
            let name = f.name().trim_end_matches(".npy").to_string();
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            (name, parse_npy(&b))
        })
        .collect()
}

fn le<V: Copy, const N: usize>(values: &[V], bytes: impl Fn(V) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| bytes(v)).collect()
}

#[test]
fn npz_results_hold_their_arrays_bit_for_bit() {
    let d = tempfile::tempdir().unwrap();
    // kNN rows of 3 over more values than one write block, a missing neighbour among them.
    let n = 400_000;
    let ids: Vec<u32> = (0..3 * n as u32).map(|i| if i == 7 { NO_ID } else { i * 2 }).collect();
    let distances: Vec<f32> = (0..3 * n).map(|i| i as f32 * 0.25).collect();
    let knn = nearkit::Knn { k: 3, ids: ids.clone(), distances: distances.clone() };
    let path = d.path().join("k.npz");
    nearkit_io::write_knn(&path, &knn).unwrap();
    let a = read_npz(&path);
    let want_ids: Vec<i32> = ids.iter().map(|&i| if i == NO_ID { -1 } else { i as i32 }).collect();
    assert_eq!(a["ids"], ("<i4".into(), vec![n as u64, 3], le(&want_ids, i32::to_le_bytes)));
    assert_eq!(a["distances"], ("<f4".into(), vec![n as u64, 3], le(&distances, f32::to_le_bytes)));

    // Radius rows as pairs, in f64.
    let rows = nearkit::Within { offsets: vec![0, 2, 2, 3], ids: vec![5, 6, 9], distances: vec![0.5f64, 1.5, 2.5] };
    let path = d.path().join("w.npz");
    nearkit_io::write_within(&path, &rows, nearkit_io::WithinLayout::Pairs, true).unwrap();
    let a = read_npz(&path);
    assert_eq!(a["offsets"], ("<i8".into(), vec![4], le(&[0i64, 2, 2, 3], i64::to_le_bytes)));
    assert_eq!(a["i"], ("<i4".into(), vec![3], le(&[0i32, 0, 2], i32::to_le_bytes)));
    assert_eq!(a["j"], ("<i4".into(), vec![3], le(&[5i32, 6, 9], i32::to_le_bytes)));
    assert_eq!(a["distances"], ("<f8".into(), vec![3], le(&[0.5f64, 1.5, 2.5], f64::to_le_bytes)));
    // The same rows found without distances: ids alone.
    let ids_only = nearkit::Within { distances: Vec::new(), ..rows.clone() };
    nearkit_io::write_within(&path, &ids_only, nearkit_io::WithinLayout::Pairs, false).unwrap();
    let b = read_npz(&path);
    assert_eq!((&b["i"], &b["j"], b.contains_key("distances")), (&a["i"], &a["j"], false));
    let csv = d.path().join("w.csv");
    nearkit_io::write_within(&csv, &ids_only, nearkit_io::WithinLayout::Rows, false).unwrap();
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "query,id\n0,5\n0,6\n2,9\n");
    assert!(nearkit_io::write_within(&csv, &ids_only, nearkit_io::WithinLayout::Rows, true).is_err());

    let path = d.path().join("c.npz");
    nearkit_io::write_counts(&path, &[3, 0, 7]).unwrap();
    assert_eq!(read_npz(&path)["counts"], ("<i8".into(), vec![3], le(&[3i64, 0, 7], i64::to_le_bytes)));
}

#[test]
fn npy_results_hold_their_values() {
    let d = tempfile::tempdir().unwrap();
    let nn = Nearest { b: vec![4, NO_ID], distance: vec![0.5f32, f32::INFINITY] };
    let path = d.path().join("n.npy");
    write_nearest(&path, &nn).unwrap();
    let (descr, shape, data) = parse_npy(&std::fs::read(&path).unwrap());
    assert_eq!((descr.as_str(), shape), ("<f8", vec![2, 3]));
    let v: Vec<f64> = data.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(v[..3], [0.0, 4.0, 0.5]);
    assert_eq!((v[3], v[5]), (1.0, f64::INFINITY));
}

#[cfg(unix)]
#[test]
fn npz_into_what_cannot_seek_is_made_in_memory() {
    // A link to /dev/null: written through, as `write_atomically` does for such targets.
    let d = tempfile::tempdir().unwrap();
    let link = d.path().join("sink.npz");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    nearkit_io::write_counts(&link, &[1, 2, 3]).unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
}
