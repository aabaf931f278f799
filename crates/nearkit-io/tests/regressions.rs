//! Files that once crashed a reader, were read wrongly, or got an unhelpful message: each now
//! gives the error (or the data) it should. The files are in tests/regressions/.

use std::path::{Path, PathBuf};

use nearkit::{Mesh, Points};
use nearkit_io::{
    read_mesh, read_mesh_from, read_points, read_points_from, refuse_overwriting_inputs, write_points, Format,
    ReadOptions,
};

fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions").join(name)
}

fn err_points<T: nearkit::Real>(name: &str) -> String {
    let path = file(name);
    let e = read_points::<T>(&path, &ReadOptions::default()).expect_err(name).to_string();
    assert!(e.contains(name), "'{e}' does not name the file");
    e
}

fn err_mesh(name: &str) -> String {
    let path = file(name);
    let e = read_mesh::<f64>(&path).expect_err(name).to_string();
    assert!(e.contains(name), "'{e}' does not name the file");
    e
}

fn assert_has(e: &str, needles: &[&str]) {
    for n in needles {
        assert!(e.contains(n), "'{e}' lacks '{n}'");
    }
}

/// The same file through a reader that does not know its size (the CLI's progress bar).
fn err_stream(name: &str, mesh: bool) -> String {
    let path = file(name);
    let format = Format::from_path(&path).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let e = if mesh {
        read_mesh_from::<f64, _>(f, format, &path).map(|_| ()).expect_err(name)
    } else {
        read_points_from::<f64, _>(f, format, &path, &ReadOptions::default()).map(|_| ()).expect_err(name)
    };
    e.to_string()
}

#[test]
fn huge_counts_are_errors_not_allocations() {
    // Once: "memory allocation of 4000000000000 bytes failed".
    let e = err_mesh("huge_header.off");
    assert_has(
        &e,
        &["line 2", "header says 1000000000000 vertices", "the file has only 26 bytes left", "6 bytes a vertex"],
    );
    assert_has(&err_stream("huge_header.off", true), &["file ends after 4 of 1000000000000 vertices"]);
    // Once: "capacity overflow".
    let e = err_points::<f64>("huge_shape.npy");
    assert_has(&e, &["6148914691236517206", "18446744073709551618 float64 values", "only 48 bytes left"]);
    assert_has(&err_stream("huge_shape.npy", false), &["6148914691236517206"]);
}

#[test]
fn what_is_not_a_triangle_mesh_is_rejected() {
    // Once: a face of two corners became a triangle.
    assert_has(&err_mesh("two_corners.obj"), &["line 4", "at least 3 corners", "has 2"]);
    // Once: line elements became triangles.
    assert_has(&err_mesh("only_lines.obj"), &["line 4", "'l' is a line"]);
    // Their vertices are still points.
    let p: Points<f64> = read_points(&file("only_lines.obj"), &ReadOptions::default()).unwrap();
    assert_eq!(p.len(), 3);
    // Once: read as the 2 triangles there are, though the header promises 5.
    assert_has(&err_mesh("miscounted.stl"), &["header says 5 triangles", "334 bytes", "the file has 184 bytes"]);
    assert_has(&err_stream("miscounted.stl", true), &["header says 5 triangles"]);
}

#[test]
fn a_mixed_first_row_is_data_not_a_header() {
    // Once: `0,0,zz` was taken for a header, the point silently dropped.
    let e = err_points::<f64>("header_zz.csv");
    assert_has(&e, &["line 1", "column 3", "'zz' is not a number"]);
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let m: Mesh<f64> = read_mesh(&file("bom.off")).unwrap();
    assert_eq!(m.vertices.len(), 3);
    assert_eq!(m.triangles, vec![[0, 1, 2]]);
    let d = tempfile::tempdir().unwrap();
    let bom = b"\xEF\xBB\xBF";
    let cases: [(&str, &[u8]); 5] = [
        ("b.xyz", b"1 2 3\n"),
        ("b.csv", b"x,y,z\n1,2,3\n"),
        ("b.obj", b"v 1 2 3\nv 0 0 0\nv 0 1 0\nf 1 2 3\n"),
        ("b.ply", b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\nend_header\n1 2 3\n"),
        ("b.stl", b"solid b\nfacet normal 0 0 1\nouter loop\nvertex 1 2 3\nvertex 0 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid b\n"),
    ];
    for (name, text) in cases {
        let path = d.path().join(name);
        std::fs::write(&path, [bom, text].concat()).unwrap();
        let p: Points<f64> = read_points(&path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.get(0), [1.0, 2.0, 3.0], "{name}");
    }
}

#[test]
fn a_value_too_big_for_f32_names_the_precision_that_holds_it() {
    let e = err_points::<f32>("f32_overflow.csv");
    assert_has(&e, &["line 3", "coordinate x is 1e308", "does not fit f32", "--precision f64"]);
    let p: Points<f64> = read_points(&file("f32_overflow.csv"), &ReadOptions::default()).unwrap();
    assert_eq!(p.get(1), [1e308, 0.0, 0.0]);
    // Beyond f64 too: said so, not "inf".
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("big.xyz");
    std::fs::write(&path, "1 2 1e400\n").unwrap();
    let e = read_points::<f64>(&path, &ReadOptions::default()).unwrap_err().to_string();
    assert_has(&e, &["line 1", "coordinate z is 1e400", "does not fit even f64"]);
}

#[test]
fn a_directory_is_named_as_one() {
    let d = tempfile::tempdir().unwrap();
    for name in ["points.csv", "mesh.off", "a.npy", "m.stl"] {
        let dir = d.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let e = read_points::<f32>(&dir, &ReadOptions::default()).unwrap_err().to_string();
        assert_has(&e, &[name, "is a directory, not a file"]);
        assert!(!e.contains("line 0"), "{e}");
        // The CLI opens the file itself, which succeeds for a directory on Unix.
        let f = std::fs::File::open(&dir).unwrap();
        let format = Format::from_path(&dir).unwrap();
        let e = read_points_from::<f32, _>(f, format, &dir, &ReadOptions::default()).unwrap_err().to_string();
        assert_has(&e, &[name, "is a directory, not a file"]);
    }
}

#[test]
fn binary_errors_name_the_record() {
    let d = tempfile::tempdir().unwrap();
    let mut bytes = vec![0u8; 80];
    bytes.extend_from_slice(&2u32.to_le_bytes());
    for t in 0..2 {
        for v in [0.0f32, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, if t == 1 { f32::NAN } else { 0.0 }] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&[0, 0]);
    }
    let path = d.path().join("nan.stl");
    std::fs::write(&path, &bytes).unwrap();
    let e = read_mesh::<f32>(&path).unwrap_err().to_string();
    assert_has(&e, &["triangle 1", "corner 3", "coordinate z is NaN"]);

    let ascii = "solid a\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\nendfacet\nendsolid a\n";
    let path = d.path().join("a.stl");
    std::fs::write(&path, ascii).unwrap();
    let e = read_mesh::<f32>(&path).unwrap_err().to_string();
    assert_has(&e, &["line 6", "expected 'vertex x y z'", "found 'endloop'"]);

    let ply = "ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
               property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n";
    let mut bytes = ply.as_bytes().to_vec();
    for v in [0.0f32, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.push(3);
    for i in [0i32, 1, 2] {
        bytes.extend_from_slice(&i.to_le_bytes());
    }
    let path = d.path().join("b.ply");
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(read_mesh::<f32>(&path).unwrap().triangles, vec![[0, 1, 2]]);
    // A list of 2^32 - 1 corners, with 12 bytes of face data left.
    let mut huge = ply.replace("list uchar int", "list uint int").into_bytes();
    huge.extend_from_slice(&bytes[ply.len()..ply.len() + 36]);
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 12]);
    std::fs::write(&path, &huge).unwrap();
    let e = read_mesh::<f32>(&path).unwrap_err().to_string();
    assert_has(&e, &["face 0", "list 'vertex_indices' says 4294967295 items", "only 12 bytes left"]);
}

#[test]
fn outputs_go_through_links_and_never_over_inputs() {
    let d = tempfile::tempdir().unwrap();
    let p = Points::<f64>::from_rows(&[[1.0, 2.0, 3.0]]);
    // Through a link: the target gets the data, the link stays a link.
    let target = d.path().join("target.csv");
    std::fs::write(&target, "old").unwrap();
    let link = d.path().join("link.csv");
    std::os::unix::fs::symlink("target.csv", &link).unwrap();
    write_points(&link, &p).unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x,y,z\n1,2,3\n");
    // A dangling link creates its target.
    let dangling = d.path().join("dangling.csv");
    std::os::unix::fs::symlink(d.path().join("new.csv"), &dangling).unwrap();
    write_points(&dangling, &p).unwrap();
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(d.path().join("new.csv")).unwrap(), "x,y,z\n1,2,3\n");

    // The same file by name, by another spelling, through a link, through a hard link.
    let hard = d.path().join("hard.csv");
    std::fs::hard_link(&target, &hard).unwrap();
    let other = d.path().join("other.csv");
    std::fs::write(&other, "x,y,z\n").unwrap();
    let dotted = d.path().join(".").join("target.csv");
    for out in [&target, &dotted, &link, &hard] {
        let e = refuse_overwriting_inputs(out, &[&other, &target]).unwrap_err().to_string();
        assert_has(&e, &["--out is one of the inputs", "choose another file"]);
    }
    refuse_overwriting_inputs(&d.path().join("fresh.csv"), &[&other, &target]).unwrap();
    refuse_overwriting_inputs(&other, &[&target]).unwrap();
    refuse_overwriting_inputs(Path::new("/dev/null"), &[Path::new("/dev/null")]).unwrap();
}

#[test]
fn a_full_disk_is_an_error_not_a_panic() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("full.csv");
    std::os::unix::fs::symlink("/dev/full", &out).unwrap();
    let p = Points::<f64>::from_rows(&[[1.0, 2.0, 3.0]]);
    let e = write_points(&out, &p).unwrap_err().to_string();
    assert_has(&e, &["full.csv", "cannot write"]);
    // A writer that fails part-way leaves no output and no temporary file behind.
    let out = d.path().join("partial.csv");
    let e = nearkit_io::write_atomically(&out, |w| {
        w.write_all(b"x,y,z\n")?;
        Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left"))
    })
    .unwrap_err()
    .to_string();
    assert_has(&e, &["partial.csv", "no space left"]);
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// Threads writing the same file at once: each write is whole (the last rename wins), and no
/// temporary file is left behind. Before, they shared one temporary name and could rename a
/// file another thread was still writing.
#[test]
fn writes_of_one_file_at_once_leave_one_whole_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("same.csv");
    let texts: Vec<Vec<u8>> = (0..8u8).map(|t| vec![b'a' + t; 10_000 + 40_000 * t as usize]).collect();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (out, texts) = (&out, &texts);
            s.spawn(move || {
                for _ in 0..20 {
                    nearkit_io::write_atomically(out, |w| {
                        // In pieces, so that the writes of the threads interleave.
                        for piece in texts[t].chunks(4096) {
                            w.write_all(piece)?;
                            w.flush()?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    let got = std::fs::read(out).unwrap();
                    assert!(texts.contains(&got), "a mixed or cut file of {} bytes", got.len());
                }
            });
        }
    });
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A file written into a fresh temporary folder (the audit's cases are small enough to be
/// written here rather than kept in tests/regressions/).
fn written(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn points<T: nearkit::Real>(p: &Path) -> std::result::Result<Points<T>, String> {
    read_points::<T>(p, &ReadOptions::default()).map_err(|e| e.to_string())
}

fn ply_binary(header_counts: (usize, usize), vertices: &[[f32; 3]], faces: &[[i32; 3]]) -> Vec<u8> {
    let mut b = format!(
        "ply\nformat binary_little_endian 1.0\nelement vertex {}\nproperty float x\nproperty float y\n\
         property float z\nelement face {}\nproperty list uchar int vertex_indices\nend_header\n",
        header_counts.0, header_counts.1
    )
    .into_bytes();
    for v in vertices {
        v.iter().for_each(|x| b.extend(x.to_le_bytes()));
    }
    for f in faces {
        b.push(3);
        f.iter().for_each(|i| b.extend(i.to_le_bytes()));
    }
    b
}

/// An audit's findings (session 58): files with counts that disagree with their data, values
/// their declared types cannot hold, and text read through f32, were read without a word.
#[test]
fn counts_types_and_text_are_taken_as_written_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // PLY: fewer elements declared than the file holds (ascii, binary), as points and as a mesh.
    let ascii = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\n\
                 element face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
    let p = written(d, "good.ply", ascii.as_bytes());
    assert_eq!(points::<f64>(&p).unwrap().len(), 3);
    let p = written(d, "face_short.ply", format!("{ascii}3 2 1 0\n").as_bytes());
    assert_has(&err_mesh_at(&p), &["line 14", "more lines after the 1 'face' elements the header declares"]);
    assert_has(&points::<f64>(&p).unwrap_err(), &["more lines after"]);
    let p = written(d, "vertex_short.ply", ascii.replace("vertex 3", "vertex 2").as_bytes());
    assert!(points::<f64>(&p).is_err(), "the third vertex line read as a face, or dropped");
    let tri = [[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let p = written(d, "binary_face_short.ply", &ply_binary((3, 1), &tri, &[[0, 1, 2], [2, 1, 0]]));
    assert_has(&points::<f64>(&p).unwrap_err(), &["13 more bytes after the 1 'face' elements"]);
    let p = written(d, "binary_vertex_long.ply", &ply_binary((4, 1), &tri, &[[0, 1, 2]]));
    assert!(points::<f64>(&p).is_err(), "a face's bytes read as a fourth vertex");
    let p = written(d, "binary_good.ply", &ply_binary((3, 1), &tri, &[[0, 1, 2]]));
    assert_eq!(points::<f32>(&p).unwrap().len(), 3);
    // PLY ascii values that their integer types cannot hold; a float property's integer text
    // beyond f32 (as CSV, OFF and XYZ refuse it).
    let int = |x: &str, ty: &str| {
        format!(
            "ply\nformat ascii 1.0\nelement vertex 1\nproperty {ty} x\nproperty {ty} y\nproperty {ty} z\nend_header\n{x} 0 0\n"
        )
    };
    let p = written(d, "fraction.ply", int("1.9", "int").as_bytes());
    assert_has(&points::<f64>(&p).unwrap_err(), &["'1.9' is not a whole number", "int"]);
    let p = written(d, "uchar.ply", int("300", "uchar").as_bytes());
    assert_has(&points::<f64>(&p).unwrap_err(), &["300 does not fit", "uchar"]);
    let p = written(d, "huge_int.ply", int("99999999999999999999", "int").as_bytes());
    assert_has(&points::<f64>(&p).unwrap_err(), &["99999999999999999999 does not fit"]);
    let p = written(d, "big_double.ply", int("16777217", "double").as_bytes());
    assert_has(&points::<f32>(&p).unwrap_err(), &["16777217", "--precision f64"]);
    assert_eq!(points::<f64>(&p).unwrap().x[0], 16777217.0);
    // OFF as points: vertex counts one too many or too few.
    let off = |nv: usize| format!("OFF\n{nv} 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n");
    assert_eq!(points::<f64>(&written(d, "good.off", off(3).as_bytes())).unwrap().len(), 3);
    for nv in [2, 4] {
        let p = written(d, &format!("nv{nv}.off"), off(nv).as_bytes());
        assert!(points::<f64>(&p).is_err(), "OFF with {nv} vertices declared read as points");
    }
    let p = written(d, "colour.off", b"COFF\n3 1 0\n0 0 0 1 1 1 1\n1 0 0 1 1 1 1\n0 1 0 1 1 1 1\n3 0 1 2\n");
    assert_eq!(read_mesh::<f64>(&p).unwrap().triangles.len(), 1);
    let p = written(d, "binary.off", b"OFF BINARY\n");
    assert_has(&points::<f64>(&p).unwrap_err(), &["binary OFF is not supported"]);
    // ascii STL: numbers as written (not through f32); keywords in any case.
    let stl = "SOLID t\nFACET NORMAL 0 0 1\nOUTER LOOP\nVERTEX 16777217 0 0\nVERTEX 0 1e-50 0\nVERTEX 0.1 0 1\n\
               ENDLOOP\nENDFACET\nENDSOLID t\n";
    let p = written(d, "upper.stl", stl.as_bytes());
    let m = read_mesh::<f64>(&p).unwrap();
    assert_eq!((m.vertices.x[0], m.vertices.y[1], m.vertices.x[2]), (16777217.0, 1e-50, 0.1));
    assert_has(&read_mesh::<f32>(&p).unwrap_err().to_string(), &["16777217"]);
    // XYZ: an empty field between commas is an error, not skipped.
    let p = written(d, "empty.xyz", b"0,0,0,7\n4,,0.5,9\n");
    assert_has(&points::<f64>(&p).unwrap_err(), &["line 2", "y (column 2) is empty"]);
    let p = written(d, "spaced.xyz", b"0, 0, 0\n4, 1, 0.5,\n");
    assert_eq!(points::<f64>(&p).unwrap().len(), 2);
    // A byte that is not UTF-8 in a comment does not refuse the file; in a number it is an error.
    let p = written(d, "latin1.ply", b"ply\nformat ascii 1.0\ncomment Cr\xe9\xe9\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\nend_header\n1 2 3\n");
    assert_eq!(points::<f64>(&p).unwrap().z[0], 3.0);
    let p = written(d, "latin1.xyz", b"0 0 0\n1 \xe90 0\n");
    assert_has(&points::<f64>(&p).unwrap_err(), &["line 2", "is not a number"]);
    // Columns are picked in CSV files only.
    let opts = ReadOptions { columns: Some(["1".into(), "2".into(), "3".into()]) };
    let p = written(d, "ids.xyz", b"9 0 0 0\n9 1 0 0\n");
    assert_has(&read_points::<f64>(&p, &opts).unwrap_err().to_string(), &[".csv files only"]);
}

fn err_mesh_at(p: &Path) -> String {
    read_mesh::<f64>(p).expect_err("an error").to_string()
}
