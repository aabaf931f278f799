//! Every mesh format reads the same small mesh (a unit square as a quad plus a triangle);
//! bad meshes get an error naming the problem; the real meshes read whole.

use std::path::Path;

use nearkit::{Mesh, Points};
use nearkit_io::{read_mesh, read_points, ReadOptions};

/// Corners 0..4 of a square, a fifth vertex above it; a quad (two triangles) and one triangle.
fn expected() -> Mesh<f64> {
    Mesh {
        vertices: Points::from_rows(&[
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.5, 0.5, 2.0],
        ]),
        triangles: vec![[0, 1, 2], [0, 2, 3], [0, 1, 4]],
    }
}

const OFF: &str = "OFF\n5 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0.5 2\n4 0 1 2 3\n3 0 1 4\n";
const OBJ: &str = "# square and a triangle\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 0.5 2\nf 1 2 3 4\nf 1 2 5\n";
const PLY: &str = "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\nproperty float z\n\
element face 2\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0.5 2\n\
4 0 1 2 3\n3 0 1 4\n";

fn write(dir: &Path, name: &str, text: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn text_meshes_read_alike() {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in [("m.off", OFF), ("m.obj", OBJ), ("m.ply", PLY)] {
        let path = write(d.path(), name, text.as_bytes());
        let m: Mesh<f64> = read_mesh(&path).unwrap();
        assert_eq!(m, expected(), "{name}");
        let p: Points<f32> = read_points(&path, &ReadOptions::default()).unwrap();
        assert_eq!(p.len(), 5, "{name}");
    }
}

/// STL has no shared vertices: the reader merges equal corners, so compare geometry.
#[test]
fn stl_ascii_and_binary_read_alike() {
    let d = tempfile::tempdir().unwrap();
    let e = expected();
    let tris: Vec<stl_io::Triangle> = (0..e.triangles.len())
        .map(|t| stl_io::Triangle {
            normal: stl_io::Vector::new([0.0, 0.0, 1.0]),
            vertices: e.corners(t).map(|c| stl_io::Vector::new(c.map(|v| v as f32))),
        })
        .collect();
    let bin = d.path().join("m.stl");
    stl_io::write_stl(&mut std::fs::File::create(&bin).unwrap(), tris.iter()).unwrap();
    let mut ascii = String::from("solid m\n");
    for t in &tris {
        ascii += "facet normal 0 0 1\nouter loop\n";
        for v in &t.vertices {
            ascii += &format!("vertex {} {} {}\n", v[0], v[1], v[2]);
        }
        ascii += "endloop\nendfacet\n";
    }
    ascii += "endsolid m\n";
    let asc = write(d.path(), "a.stl", ascii.as_bytes());
    for path in [bin, asc] {
        let m: Mesh<f64> = read_mesh(&path).unwrap();
        assert_eq!(m.vertices.len(), 5, "{}", path.display());
        assert_eq!(m.triangles.len(), 3);
        for t in 0..3 {
            assert_eq!(m.corners(t), e.corners(t), "{} triangle {t}", path.display());
        }
    }
}

#[test]
fn bad_meshes_are_named() {
    let d = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 6] = [
        ("i.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n", "vertex index 7 is out of range"),
        ("n.off", "OFF\n3 1 0\n0 0 0\nnan 0 0\n0 1 0\n3 0 1 2\n", "line 4"),
        ("f.off", "OFF\n3 0 0\n0 0 0\n1 0 0\n0 1 0\n", "no faces"),
        ("t.off", "OFF\n3 2 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "2 faces"),
        ("i.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", "OBJ"),
        ("x.ply", "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n", "out of range"),
    ];
    for (name, text, needle) in cases {
        let path = write(d.path(), name, text.as_bytes());
        let err = read_mesh::<f32>(&path).unwrap_err().to_string();
        assert!(err.contains(needle), "{name}: '{err}' lacks '{needle}'");
        assert!(err.contains(name), "{name}: '{err}' does not name the file");
    }
    let path = write(d.path(), "p.csv", b"0,0,0\n");
    assert!(read_mesh::<f32>(&path).unwrap_err().to_string().contains("not a mesh format"));
}

#[test]
fn real_meshes_read_whole() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/bunny00.off");
    if !path.exists() {
        eprintln!("skipped: {} not found", path.display());
        return;
    }
    let m: Mesh<f32> = read_mesh(&path).unwrap();
    m.validate().unwrap();
    assert_eq!(m.vertices.len(), 37_706);
    assert_eq!(m.triangles.len(), 75_408);
    let cut = m.cut_to(19_851);
    assert_eq!(cut.vertices.len(), 19_851);
    cut.validate().unwrap();
    assert!(cut.triangles.len() > 30_000, "{} triangles", cut.triangles.len());
}
