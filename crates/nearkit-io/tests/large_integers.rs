//! Integers the working precision cannot hold exactly are refused, never silently rounded:
//! above 2^24 in f32 (16,777,217 would become 16,777,216) and above 2^53 in f64.

use std::path::{Path, PathBuf};

use nearkit::Points;
use nearkit_io::{read_points, ReadOptions};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn npy(descr: &str, values: &[u8], rows: usize) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, 3), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(values);
    out
}

fn err<T: nearkit::Real>(path: &Path) -> String {
    read_points::<T>(path, &ReadOptions::default()).unwrap_err().to_string()
}

#[test]
fn csv_integers_beyond_f32_are_refused_in_f32_and_kept_in_f64() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "a.csv", b"0,0,0\n16777217,0,0\n");
    let e = err::<f32>(&p);
    assert!(e.contains("16777217") && e.contains("--precision f64") && e.contains("line 2"), "{e}");
    let f: Points<f64> = read_points(&p, &ReadOptions::default()).unwrap();
    assert_eq!(f.x[1], 16777217.0);
    // Exact integers above 2^24 (powers of two, even ones below 2^25) pass in f32.
    let p = write(d.path(), "b.csv", b"16777216,16777218,-33554432\n");
    let f: Points<f32> = read_points(&p, &ReadOptions::default()).unwrap();
    assert_eq!(f.get(0), [16777216.0, 16777218.0, -33554432.0]);
    // Decimals round as floating point always does; only integers are held to exactness.
    let p = write(d.path(), "c.csv", b"0.1,16777217.5,1e20\n");
    assert!(read_points::<f32>(&p, &ReadOptions::default()).is_ok());
}

#[test]
fn csv_integers_beyond_f64_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "a.xyz", b"9007199254740993 0 0\n");
    let e = err::<f64>(&p);
    assert!(e.contains("9007199254740993") && e.contains("2^53"), "{e}");
    let p = write(d.path(), "b.csv", b"9007199254740992,0,1000000000000000000000000000000000000000000\n");
    let e = err::<f64>(&p);
    assert!(e.contains("coordinate z"), "{e}");
    let p = write(d.path(), "c.csv", b"9007199254740992,-9007199254740994,0\n");
    assert!(read_points::<f64>(&p, &ReadOptions::default()).is_ok());
}

#[test]
fn npy_integers_are_checked_against_the_precision() {
    let d = tempfile::tempdir().unwrap();
    let i32s: Vec<u8> = [0i32, 0, 0, 5, 16777217, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let p = write(d.path(), "a.npy", &npy("<i4", &i32s, 2));
    let e = err::<f32>(&p);
    assert!(e.contains("row 1") && e.contains("16777217"), "{e}");
    let f: Points<f64> = read_points(&p, &ReadOptions::default()).unwrap();
    assert_eq!(f.y[1], 16777217.0);

    let big = (1i64 << 53) + 1;
    let i64s: Vec<u8> = [0i64, 0, 0, 0, 0, big].iter().flat_map(|v| v.to_le_bytes()).collect();
    let p = write(d.path(), "b.npy", &npy("<i8", &i64s, 2));
    let e = err::<f64>(&p);
    assert!(e.contains("row 1") && e.contains(&big.to_string()), "{e}");
    let ok: Vec<u8> = [1i64 << 60, 0, -(1 << 53), 0, 0, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    let p = write(d.path(), "c.npy", &npy("<i8", &ok, 2));
    let f: Points<f64> = read_points(&p, &ReadOptions::default()).unwrap();
    assert_eq!(f.x[0], (1u64 << 60) as f64);
}

#[test]
fn ply_integer_properties_are_checked_in_f32() {
    let d = tempfile::tempdir().unwrap();
    let text = "ply\nformat ascii 1.0\nelement vertex 2\nproperty int x\nproperty int y\nproperty int z\nend_header\n\
                0 0 0\n1 2 16777217\n";
    let p = write(d.path(), "a.ply", text.as_bytes());
    let e = err::<f32>(&p);
    assert!(e.contains("16777217"), "{e}");
    let f: Points<f64> = read_points(&p, &ReadOptions::default()).unwrap();
    assert_eq!(f.z[1], 16777217.0);
}
