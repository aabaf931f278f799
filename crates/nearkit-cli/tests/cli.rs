//! The `nearkit` binary as a user meets it: results, and a clear one-line error with exit
//! code 2 (and no output file) for every kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nearkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nearkit")).args(args).output().expect("run nearkit")
}

fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a command that must fail: exit code 2, one line on stderr containing every `needle`,
/// and no output file.
fn fails(args: &[&str], needles: &[&str], out: Option<&Path>) {
    let o = nearkit(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: exit code; stderr: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("note:") && !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line of error expected, got: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' missing from: {err}");
    }
    if let Some(p) = out {
        assert!(!p.exists(), "{args:?}: output file left behind");
    }
}

#[test]
fn pairs_from_files_match_a_hand_computed_answer() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.csv", b"x,y,z\n0,0,0\n10,0,0\n20,0,0\n");
    let b = write(d.path(), "b.xyz", b"# x y z\n0 0 3\n10 4 0\n");
    let out = d.path().join("pairs.csv");
    let o = nearkit(&["pairs", "--a", s(&a), "--b", s(&b), "-k", "2", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "rank,a,b,distance\n1,0,0,3\n2,1,1,4\n");
    // k above |A|: every A once, and a note.
    let o = nearkit(&["pairs", "--a", s(&a), "--b", s(&b), "-k", "10", "--device", "cpu"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("returning 3 rows"));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 4);
}

#[test]
fn nearest_writes_every_a_with_minus_one_beyond_max_distance() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.csv", b"0,0,0\n100,0,0\n");
    let b = write(d.path(), "b.csv", b"1,0,0\n");
    let out = d.path().join("nn.csv");
    let o =
        nearkit(&["nearest", "--a", s(&a), "--b", s(&b), "--out", s(&out), "--max-distance", "5", "--device", "cpu"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a,b,distance\n0,0,1\n1,-1,inf\n");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let good = write(d.path(), "good.csv", b"0,0,0\n1,1,1\n");
    let out = d.path().join("out.csv");
    let o = out.as_path();
    let nan = write(d.path(), "nan.csv", b"x,y,z\n0,0,0\n1,nan,1\n");
    fails(
        &["pairs", "--a", s(&nan), "--b", s(&good), "--out", s(o)],
        &["nan.csv", "line 3", "coordinate y is nan", "must be finite"],
        Some(o),
    );
    let inf = write(d.path(), "inf.xyz", b"0 0 0\n1 1 inf\n");
    fails(&["pairs", "--a", s(&good), "--b", s(&inf), "--out", s(o)], &["inf.xyz", "line 2", "finite"], Some(o));
    let empty = write(d.path(), "empty.csv", b"");
    fails(&["pairs", "--a", s(&empty), "--b", s(&good), "--out", s(o)], &["empty.csv", "no points"], Some(o));
    let header_only = write(d.path(), "header.csv", b"x,y,z\n");
    fails(&["pairs", "--a", s(&header_only), "--b", s(&good)], &["header.csv", "no points"], None);
    fails(&["pairs", "--a", s(&good), "--b", s(&good), "-k", "0", "--out", s(o)], &["k must be at least 1"], Some(o));
    let short = write(d.path(), "short.csv", b"0,0,0\n1,2\n");
    fails(&["pairs", "--a", s(&short), "--b", s(&good), "--out", s(o)], &["short.csv", "line 2", "column 3"], Some(o));
    let text = write(d.path(), "text.csv", b"0,0,0\n1,two,3\n");
    fails(&["pairs", "--a", s(&text), "--b", s(&good)], &["text.csv", "line 2", "'two' is not a number"], None);
    let unknown = write(d.path(), "points.txt2", b"0 0 0\n");
    fails(&["pairs", "--a", s(&unknown), "--b", s(&good)], &["points.txt2", "unknown extension"], None);
    fails(&["pairs", "--a", s(&good), "--b", "/no/such/file.csv"], &["/no/such/file.csv", "cannot open"], None);
    fails(
        &["pairs", "--a", s(&good), "--b", s(&good), "--out", &format!("{}/out.parquet", d.path().display())],
        &["out.parquet"],
        None,
    );
    fails(&["pairs", "--a", s(&good)], &["give both --a and --b"], None);
    fails(&["pairs", "--a", s(&good), "--b", s(&good), "--max-distance", "-1"], &["max-distance"], None);
    // A truncated binary file: a valid .npy header promising more rows than there are.
    let npy = d.path().join("full.npy");
    let o2 = nearkit(&["gen", "points", "--count", "100", "--out", s(&npy)]);
    assert!(o2.status.success());
    let bytes = std::fs::read(&npy).unwrap();
    let cut = write(d.path(), "cut.npy", &bytes[..bytes.len() - 50]);
    fails(
        &["pairs", "--a", s(&cut), "--b", s(&good), "--out", s(o)],
        &["cut.npy", "300 float32 values", "bytes left"],
        Some(o),
    );
    let wrong_shape = write(d.path(), "wrong.npy", &npy_2d(2, 2, |r, c| (2 * r + c + 1) as f64));
    fails(&["pairs", "--a", s(&wrong_shape), "--b", s(&good)], &["wrong.npy", "N×3"], None);
    let ply = write(d.path(), "cut.ply", b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n1 1 1\n");
    fails(&["pairs", "--a", s(&ply), "--b", s(&good)], &["cut.ply"], None);
    let off = write(d.path(), "bad.off", b"OFF\n3 1 0\n0 0 0\n1 1 1\n");
    fails(&["pairs", "--a", s(&off), "--b", s(&good)], &["bad.off", "header says 3 vertices", "bytes left"], None);
    fails(&["pairs", "--device", "tpu"], &["unknown device 'tpu'"], None);
}

#[test]
fn help_teaches_with_examples() {
    for cmd in
        [&["pairs", "--help"][..], &["nearest", "--help"], &["gen", "points", "--help"], &["bench", "pairs", "--help"]]
    {
        let o = nearkit(cmd);
        assert!(o.status.success());
        assert!(String::from_utf8_lossy(&o.stdout).contains("Examples:"), "{cmd:?}");
    }
}

#[test]
fn gen_is_reproducible_and_reads_back() {
    let d = tempfile::tempdir().unwrap();
    for ext in ["npy", "csv", "ply", "xyz"] {
        let p1 = d.path().join(format!("p1.{ext}"));
        let p2 = d.path().join(format!("p2.{ext}"));
        for p in [&p1, &p2] {
            let o = nearkit(&[
                "gen",
                "points",
                "--count",
                "500",
                "--distribution",
                "clustered",
                "--seed",
                "9",
                "--out",
                s(p),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap(), "{ext}");
        let o = nearkit(&["pairs", "--a", s(&p1), "--b", s(&p2), "-k", "1", "--device", "cpu"]);
        assert!(o.status.success(), "{ext}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains(" 0.0000"), "{ext}: identical sets pair at distance 0");
    }
}

#[test]
fn knn_writes_every_neighbour_and_the_graph_excludes_self() {
    let d = tempfile::tempdir().unwrap();
    let data = write(d.path(), "data.csv", b"0,0,0\n1,0,0\n3,0,0\n");
    let queries = write(d.path(), "q.xyz", b"0.9 0 0\n");
    let out = d.path().join("nn.csv");
    let o =
        nearkit(&["knn", "--data", s(&data), "--queries", s(&queries), "-k", "2", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("query,rank,id,distance\n0,1,1,0.1"), "{text}");
    assert!(text.contains("\n0,2,0,0.9"), "{text}");
    let o = nearkit(&["knn", "--data", s(&data), "--exclude-self", "-k", "5", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("using k = 2"));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "query,rank,id,distance\n0,1,1,1\n0,2,2,3\n1,1,0,1\n1,2,2,2\n2,1,1,2\n2,2,0,3\n"
    );
    fails(&["knn", "--data", s(&data), "--queries", s(&queries), "-k", "0"], &["k must be at least 1"], None);
    fails(&["knn", "--data", s(&data)], &["--exclude-self"], None);
}

#[test]
fn bench_knn_runs_a_small_sweep() {
    let o = nearkit(&["bench", "knn", "--device", "cpu", "--min-log2", "8", "--max-log2", "9", "--runs", "1", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("2^8") && out.contains("2^9"), "{out}");
}

#[test]
fn knn_searches_vectors_triangle_boxes_and_the_shifted_sort() {
    let d = tempfile::tempdir().unwrap();
    // Two triangles: one around x = 0, one around x = 10.
    let mesh = write(d.path(), "m.off", b"OFF\n6 2 0\n0 0 0\n1 0 0\n0 1 0\n10 0 0\n11 0 0\n10 1 0\n3 0 1 2\n3 3 4 5\n");
    let q = write(d.path(), "q.csv", b"10.2,0.2,0.5\n0.1,0.1,-1\n");
    let out = d.path().join("t.csv");
    for e in ["min-max", "min-extent"] {
        let o = nearkit(&[
            "knn",
            "--data",
            s(&mesh),
            "--queries",
            s(&q),
            "--triangles-as-aabb6",
            e,
            "-k",
            "1",
            "--device",
            "cpu",
            "--out",
            s(&out),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("\n0,1,1,") && text.contains("\n1,1,0,"), "{e}: {text}");
    }
    // The shifted sort with a window over all the data is the exact answer.
    let data = write(d.path(), "data.csv", b"0,0,0\n1,0,0\n3,0,0\n7,1,0\n2,2,2\n");
    let (exact, approx) = (d.path().join("e.csv"), d.path().join("a.csv"));
    let base = ["knn", "--data", s(&data), "--queries", s(&q), "-k", "3", "--device", "cpu"];
    assert!(nearkit(&[&base[..], &["--out", s(&exact)]].concat()).status.success());
    let o = nearkit(&[&base[..], &["--approx", "--shifts", "2", "--window", "5", "--out", s(&approx)]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&exact).unwrap(), std::fs::read_to_string(&approx).unwrap());
    // 2-D vectors from an N×2 .npy.
    let v = write(d.path(), "v.npy", &npy_2d(2, 2, |r, c| (2 * r + c + 1) as f64));
    let o = nearkit(&["knn", "--data", s(&v), "--queries", s(&v), "-k", "1", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&out).unwrap().contains("\n0,1,0,0\n"));
    fails(&["knn", "--data", s(&v), "--queries", s(&q)], &["2-D", "3-D"], None);
    fails(
        &["knn", "--data", s(&data), "--queries", s(&q), "--triangles-as-aabb6", "min-max"],
        &["not a mesh format"],
        None,
    );
    fails(
        &["knn", "--data", s(&mesh), "--queries", s(&q), "--triangles-as-aabb6", "max"],
        &["min-max or min-extent"],
        None,
    );
    fails(&["knn", "--data", s(&data), "--queries", s(&q), "--approx", "--window", "0"], &["window must be"], None);
    // The 6-D benchmark with its approximation and triangle check.
    let o = nearkit(&[
        "bench",
        "knn",
        "--device",
        "cpu",
        "--data",
        s(&mesh),
        "--aabb6",
        "min-max",
        "--approx",
        "1:2",
        "--min-log2",
        "6",
        "--max-log2",
        "6",
        "--runs",
        "1",
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("exact 6-D") && text.contains("shifted 1x2") && text.contains("truly closest"), "{text}");
}

#[test]
fn closest_point_writes_every_query() {
    let d = tempfile::tempdir().unwrap();
    // The unit square in z = 0 as two triangles; a query above its middle, one beyond a corner.
    let mesh = write(d.path(), "sq.obj", b"v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3\nf 1 3 4\n");
    let q = write(d.path(), "q.csv", b"0.75,0.25,2\n-3,-4,0\n");
    let out = d.path().join("cp.csv");
    let o = nearkit(&["closest-point", "--mesh", s(&mesh), "--queries", s(&q), "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "query,triangle,distance,x,y,z,u,v,w");
    assert!(lines[1].starts_with("0,0,2,0.75,0.25,0,"), "{text}");
    assert!(lines[2].starts_with("1,0,5,0,0,0,1,0,0"), "{text}");
    // Beyond the max distance: triangle -1.
    let o = nearkit(&[
        "closest-point",
        "--mesh",
        s(&mesh),
        "--queries",
        s(&q),
        "--max-distance",
        "3",
        "--device",
        "cpu",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success());
    assert!(std::fs::read_to_string(&out).unwrap().contains("\n1,-1,inf,"));
    let npz = d.path().join("cp.npz");
    let o = nearkit(&["closest-point", "--mesh", s(&mesh), "--queries", s(&q), "--device", "cpu", "--out", s(&npz)]);
    assert!(o.status.success() && npz.exists());
    let bad = write(d.path(), "bad.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n");
    fails(&["closest-point", "--mesh", s(&bad), "--queries", s(&q)], &["bad.off", "out of range"], None);
    fails(&["closest-point", "--queries", s(&q)], &["--mesh"], None);
}

#[test]
fn closest_point_signs_inside_negative_and_refuses_open_meshes() {
    let d = tempfile::tempdir().unwrap();
    // A tetrahedron, closed, and the same with a face missing.
    let tet = b"OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n";
    let mesh = write(d.path(), "tet.off", tet);
    let open = write(d.path(), "open.off", b"OFF\n4 3 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n");
    let q = write(d.path(), "q.csv", b"0.1,0.1,0.1\n2,2,2\n");
    let out = d.path().join("s.csv");
    let o = nearkit(&[
        "closest-point",
        "--mesh",
        s(&mesh),
        "--queries",
        s(&q),
        "--signed",
        "--device",
        "cpu",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].split(',').nth(2).unwrap().starts_with("-0.1"), "{text}");
    assert!(!lines[2].split(',').nth(2).unwrap().starts_with('-'), "{text}");
    fails(
        &["closest-point", "--mesh", s(&open), "--queries", s(&q), "--signed", "--device", "cpu"],
        &["not closed"],
        None,
    );
}

#[test]
fn bench_closest_point_runs_and_compares_with_the_6d_boxes() {
    let o = nearkit(&["bench", "closest-point", "--device", "cpu", "--queries-log2", "8", "--runs", "1", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("end to end") && out.contains("6-D MinMax") && out.contains("6-D MinExtent"), "{out}");
}

/// A 2-D float64 .npy (rows × cols), C order.
fn npy_2d(rows: usize, cols: usize, v: impl Fn(usize, usize) -> f64) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for r in 0..rows {
        for c in 0..cols {
            out.extend_from_slice(&v(r, c).to_le_bytes());
        }
    }
    out
}

#[test]
fn collide_runs_scenes_and_writes_contacts_and_the_scene() {
    let d = tempfile::tempdir().unwrap();
    let contacts = d.path().join("c.csv");
    let scene = d.path().join("last");
    let o = nearkit(&[
        "collide",
        "--device",
        "cpu",
        "--ticks",
        "3",
        "--bodies",
        "500",
        "--sweeps",
        "200",
        "--contacts-out",
        s(&contacts),
        "--scene-out",
        s(&scene),
        "-q",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("19,440 triangles") && out.contains("per tick p50"), "{out}");
    let text = std::fs::read_to_string(&contacts).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("tick,body,kind,other,triangle,nx,ny,nz,depth,px,py,pz"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() > 500, "{} contacts", rows.len());
    assert!(rows.iter().all(|r| r.len() == 12 && r[0] == "2" && (r[2] == "triangle" || r[2] == "body")));
    assert!(rows.iter().all(|r| (r[2] == "body") == r[4].is_empty()));
    assert!(rows.iter().any(|r| r[2] == "body"));
    let bodies = std::fs::read_to_string(scene.join("bodies.csv")).unwrap();
    assert_eq!(bodies.lines().count(), 501);
    let mesh = std::fs::read(scene.join("mesh.ply")).unwrap();
    assert!(mesh.starts_with(b"ply\nformat binary_little_endian"));
    // The written mesh reads back as the scene's terrain.
    let o = nearkit(&[
        "collide",
        "--device",
        "cpu",
        "--ticks",
        "1",
        "--bodies",
        "50",
        "--mesh-size",
        "0",
        "--scene",
        &format!("mesh:{}", s(&scene.join("mesh.ply"))),
    ]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("19,440 triangles"), "{}", String::from_utf8_lossy(&o.stderr));
    // A heightfield from a 2-D array.
    let hf = write(d.path(), "hf.npy", &npy_2d(20, 30, |r, c| ((r * c) as f64 * 0.1).sin()));
    let o = nearkit(&[
        "collide",
        "--device",
        "cpu",
        "--ticks",
        "2",
        "--bodies",
        "100",
        "--scene",
        &format!("mesh:{}", s(&hf)),
    ]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("1,102 triangles"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn collide_refuses_bad_input() {
    let d = tempfile::tempdir().unwrap();
    fails(&["collide", "--scene", "moon"], &["unknown scene", "crater"], None);
    fails(&["collide", "--ticks", "0"], &["--ticks"], None);
    fails(&["collide", "--bodies", "0"], &["--bodies"], None);
    fails(&["collide", "--cell-size", "-1", "--device", "cpu"], &["cell size"], None);
    let bad = write(d.path(), "bad.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n");
    fails(&["collide", "--scene", &format!("mesh:{}", s(&bad))], &["bad.off"], None);
    let flat = write(d.path(), "flat.npy", &npy_2d(1, 5, |_, _| 0.0));
    fails(&["collide", "--scene", &format!("mesh:{}", s(&flat))], &["flat.npy", "2-D array"], None);
    let nan = write(d.path(), "nan.npy", &npy_2d(3, 3, |r, _| if r == 1 { f64::NAN } else { 0.0 }));
    fails(&["collide", "--scene", &format!("mesh:{}", s(&nan))], &["nan.npy", "not finite"], None);
}

/// No input is ever overwritten: `--out` naming an input (by any spelling) is refused before
/// any work, and the input is left as it was.
#[test]
fn out_never_overwrites_an_input() {
    let d = tempfile::tempdir().unwrap();
    let a_text = b"0,0,0\n1,1,1\n";
    let a = write(d.path(), "a.csv", a_text);
    let b = write(d.path(), "b.csv", b"5,5,5\n1,1,1.5\n");
    let mesh = write(d.path(), "m.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n");
    let other_spelling = d.path().join(".").join("a.csv");
    let cases: Vec<Vec<&str>> = vec![
        vec!["pairs", "--a", s(&a), "--b", s(&b), "--out", s(&a)],
        vec!["pairs", "--a", s(&a), "--b", s(&b), "--out", s(&other_spelling)],
        vec!["nearest", "--a", s(&a), "--b", s(&b), "--out", s(&b)],
        vec!["knn", "--data", s(&a), "--queries", s(&b), "-k", "1", "--out", s(&a)],
        vec!["closest-point", "--mesh", s(&mesh), "--queries", s(&a), "--out", s(&a)],
    ];
    for args in cases {
        fails(&args, &["is one of the inputs"], None);
        assert_eq!(std::fs::read(&a).unwrap(), a_text);
    }
    #[cfg(unix)]
    {
        let link = d.path().join("link.csv");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        fails(&["pairs", "--a", s(&a), "--b", s(&b), "--out", s(&link)], &["is one of the inputs"], None);
        assert_eq!(std::fs::read(&a).unwrap(), a_text);
    }
    // The scene's mesh is where --scene-out would write its mesh.ply.
    let ply = b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\n\
element face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
    let mesh = write(d.path(), "mesh.ply", ply);
    let scene = format!("mesh:{}", s(&mesh));
    fails(&["collide", "--scene", &scene, "--ticks", "1", "--scene-out", s(d.path())], &["one of the inputs"], None);
    assert_eq!(std::fs::read(&mesh).unwrap(), ply);
    // So is the instances' shape, and neither output may be the other.
    let base = ["collide", "--ticks", "1", "--bodies", "10", "--device", "cpu"];
    fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        base.iter().chain(more).copied().collect()
    }
    fails(
        &with(&base, &["--instances", "2", "--instance-shape", s(&mesh), "--scene-out", s(d.path())]),
        &["one of the inputs"],
        None,
    );
    assert_eq!(std::fs::read(&mesh).unwrap(), ply);
    let scene_dir = d.path().join("scene");
    let contacts = scene_dir.join("bodies.csv");
    fails(
        &with(&base, &["--contacts-out", s(&contacts), "--scene-out", s(&scene_dir)]),
        &["--contacts-out is a file --scene-out writes"],
        Some(&contacts),
    );
}

/// Input that a precision or a format cannot hold as written is refused, not silently changed:
/// values f32 rounds to 0 or to infinity, rows longer than the first (two rows run together),
/// faces past an OFF header's count; and `gen` refuses ranges it cannot honour.
#[test]
fn inputs_are_taken_as_written_or_refused() {
    let d = tempfile::tempdir().unwrap();
    let tiny = write(d.path(), "tiny.csv", b"0,0,0\n3e-300,0,0\n1e-300,0,0\n");
    fails(
        &["knn", "--data", s(&tiny), "--exclude-self", "-k", "1", "--device", "cpu"],
        &["tiny.csv", "line 2", "rounds to 0"],
        None,
    );
    let o = nearkit(&[
        "knn",
        "--data",
        s(&tiny),
        "--exclude-self",
        "-k",
        "2",
        "--device",
        "cpu",
        "--precision",
        "f64",
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let good = write(d.path(), "good.csv", b"0,0,0\n1,1,1\n");
    fails(
        &["within", "--data", s(&good), "--queries", s(&good), "-r", "1e300", "--device", "cpu"],
        &["--radius 1e300 does not fit f32"],
        None,
    );
    fails(
        &["knn", "--data", s(&good), "-k", "1", "--max-distance", "1e39", "--device", "cpu"],
        &["--max-distance 1e39 does not fit f32"],
        None,
    );
    let merged = write(d.path(), "merged.csv", b"0,0,0\n1,1,1\n2,2,2,3,3,3\n");
    fails(
        &["knn", "--data", s(&merged), "--exclude-self", "-k", "1", "--device", "cpu"],
        &["merged.csv", "line 3", "6 values"],
        None,
    );
    // Trailing commas are no extra values; shorter rows (empty trailing columns) are fine.
    let commas = write(d.path(), "commas.csv", b"x,y,z,w\n0,0,0,1,\n1,1,1\n");
    let o = nearkit(&["knn", "--data", s(&commas), "--exclude-self", "-k", "1", "--device", "cpu", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let xyz = write(d.path(), "merged.xyz", b"0 0 0\n1 1 1\n1 1 1 2\n");
    fails(
        &["knn", "--data", s(&xyz), "--exclude-self", "-k", "1", "--device", "cpu"],
        &["merged.xyz", "line 3", "4 values"],
        None,
    );
    let off = write(d.path(), "more.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n3 0 2 1\n");
    fails(
        &["closest-point", "--mesh", s(&off), "--queries", s(&good), "--device", "cpu"],
        &["more.off", "line 7", "1 faces the header declares"],
        None,
    );
    let out = d.path().join("g.npy");
    for (args, needle) in [
        (&["--range", "1e39", "--distribution", "uniform"][..], "f32 cannot hold it"),
        (&["--range", "1e300"], "cannot hold every integer"),
        (&["--range", "1e-300", "--distribution", "uniform"], "too small for f32"),
        (&["--range", "2.5"], "give an integer range"),
        (&["--range", "1e-300", "--distribution", "sphere", "--precision", "f64"], "too small for f64"),
    ] {
        let mut a = vec!["gen", "points", "--count", "3", "--out", s(&out)];
        a.extend_from_slice(args);
        fails(&a, &["--range", needle], Some(&out));
    }
    fails(&["raycast", "--limit", "0", "--rays", "10", "-q"], &["--limit must be at least 1"], None);
}

/// Writing to a closed pipe ends quietly with status 141; to a full disk, exit 2 and a message.
#[cfg(unix)]
#[test]
fn stdout_errors_are_not_panics() {
    use std::io::Read;
    use std::process::Stdio;
    let d = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..200_000 {
        text.push_str(&format!("{},{},{}\n", i % 1000, i / 1000, i % 7));
    }
    let a = write(d.path(), "a.csv", text.as_bytes());
    let args = ["pairs", "--a", s(&a), "--b", s(&a), "-k", "200000", "--device", "cpu", "-q"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_nearkit"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take()); // as `| head -c 64` does
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(err.is_empty(), "{err}");
    if Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_nearkit")).args(args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("cannot write to standard output") && !err.contains("panicked"), "{err}");
    }
}

/// Parameters that size memory are checked against it before anything is allocated.
#[test]
fn huge_parameters_are_refused_before_allocating() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("g.npy");
    fails(&["gen", "points", "--count", "1000000000000", "--out", s(&out)], &["--count", "memory"], Some(&out));
    fails(&["collide", "--bodies", "1000000000", "--ticks", "1"], &["--bodies", "memory"], None);
    fails(&["collide", "--sweeps", "1000000000000", "--ticks", "1"], &["--sweeps", "memory"], None);
    fails(&["bench", "pairs", "--a-count", "1000000000000", "--device", "cpu"], &["--a-count", "memory"], None);
    let a = write(d.path(), "a.csv", b"0,0,0\n1,1,1\n2,2,2\n3,3,3\n");
    let many = (0..20_000).map(|i| format!("{i},0,0\n")).collect::<String>();
    let q = write(d.path(), "q.csv", many.as_bytes());
    let k = "1000000000000000";
    let out = d.path().join("k.csv");
    // k is clamped to the data's size, so this is fine...
    let o = nearkit(&["knn", "--data", s(&a), "--queries", s(&q), "-k", k, "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // ...and a result too large for memory is an error, not an abort.
    let o = nearkit(&["knn", "--data", s(&q), "--queries", s(&q), "-k", k, "--device", "cpu", "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) {
        assert!(err.contains("out of memory") && !err.contains("panicked"), "{err}");
    } else {
        assert!(o.status.success(), "{err}"); // 20,000² neighbours fit on this machine
    }
}

#[test]
fn collide_outputs_are_checked_before_the_ticks() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("c.json");
    fails(&["collide", "--ticks", "1", "--contacts-out", s(&json)], &["CSV", ".csv"], Some(&json));
    let file = write(d.path(), "scene", b"not a folder");
    fails(&["collide", "--ticks", "1", "--scene-out", s(&file)], &["names a file"], None);
    assert_eq!(std::fs::read(&file).unwrap(), b"not a folder");
}

/// Integers f32 cannot hold are refused with the fix; f64 answers exactly. Points 1e20 apart
/// in f32 answer right (the index scales them by a power of two).
#[test]
fn large_integers_and_extreme_magnitudes() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.csv", b"16777217,0,0\n");
    let b = write(d.path(), "b.csv", b"16777215,0,0\n16777218,0,0\n");
    let out = d.path().join("p.csv");
    fails(&["pairs", "--a", s(&a), "--b", s(&b), "--out", s(&out)], &["16777217", "--precision f64"], Some(&out));
    let o = nearkit(&["pairs", "--a", s(&a), "--b", s(&b), "--precision", "f64", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "rank,a,b,distance\n1,0,1,1\n");

    let a = write(d.path(), "a2.csv", b"2e20,0,0\n");
    let b = write(d.path(), "b2.csv", b"0,0,0\n3e20,0,0\n");
    let o = nearkit(&["pairs", "--a", s(&a), "--b", s(&b), "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let row: Vec<f64> = text.lines().nth(1).unwrap().split(',').map(|v| v.parse().unwrap()).collect();
    assert_eq!(row[2], 1.0, "{text}");
    assert!((row[3] / 1e20 - 1.0).abs() < 1e-6, "{text}");
    let wide = write(d.path(), "w.csv", b"1e-20,0,0\n1e20,0,0\n");
    fails(&["pairs", "--a", s(&a), "--b", s(&wide), "--out", s(&out)], &["f64"], None);
}

#[test]
fn within_writes_rows_pairs_and_counts() {
    let d = tempfile::tempdir().unwrap();
    // Integer coordinates: distances 5 are exact, so r = 5 takes them (inclusive).
    let data = write(d.path(), "d.csv", b"0,0,0\n3,4,0\n5,0,0\n0,0,6\n3,4,0\n");
    let q = write(d.path(), "q.csv", b"0,0,0\n100,0,0\n");
    let out = d.path().join("rows.csv");
    let o =
        nearkit(&["within", "--data", s(&data), "--queries", s(&q), "-r", "5", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "query,id,distance\n0,0,0\n0,1,5\n0,2,5\n0,4,5\n");
    let out = d.path().join("pairs.csv");
    let o = nearkit(&["within", "--data", s(&data), "--pairs", "-r", "5", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = "i,j,distance\n0,1,5\n0,2,5\n0,4,5\n1,4,0\n1,2,4.472136\n2,4,4.472136\n";
    assert_eq!(std::fs::read_to_string(&out).unwrap(), want);
    // Ids alone: the same rows, in the same order, without the distance column.
    for (set, want) in [
        (vec!["--pairs"], "i,j\n0,1\n0,2\n0,4\n1,4\n1,2\n2,4\n"),
        (vec!["--queries", s(&q)], "query,id\n0,0\n0,1\n0,2\n0,4\n"),
    ] {
        let mut argv = vec!["within", "--data", s(&data), "-r", "5", "--no-distances", "--device", "cpu"];
        argv.extend(set.iter().chain(&["--out", s(&out)]));
        let o = nearkit(&argv);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), want);
    }
    let out = d.path().join("counts.csv");
    let o = nearkit(&[
        "within",
        "--data",
        s(&data),
        "--queries",
        s(&q),
        "-r",
        "6",
        "--count-only",
        "--device",
        "cpu",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "query,count\n0,5\n1,0\n");
    let out = d.path().join("rows.npz");
    let o =
        nearkit(&["within", "--data", s(&data), "--queries", s(&q), "-r", "5", "--device", "cpu", "--out", s(&out)]);
    assert!(o.status.success());
    assert!(std::fs::metadata(&out).unwrap().len() > 200);

    let bad = d.path().join("bad.csv");
    fails(&["within", "--data", s(&data), "--queries", s(&q), "-r", "-1", "--out", s(&bad)], &["radius"], Some(&bad));
    fails(&["within", "--data", s(&data), "--queries", s(&q), "-r", "nan", "--out", s(&bad)], &["radius"], Some(&bad));
    fails(&["within", "--data", s(&data), "-r", "1", "--out", s(&bad)], &["--pairs"], Some(&bad));
    fails(&["within", "--data", s(&data), "--queries", s(&q), "--out", s(&bad)], &["radius"], Some(&bad));
    fails(
        &["within", "--data", s(&data), "--queries", s(&q), "-r", "1e30", "--max-results", "3", "--out", s(&bad)],
        &["max_results = 3"],
        Some(&bad),
    );
    fails(&["within", "--data", s(&data), "--pairs", "-r", "1", "--out", s(&data)], &["input"], None);
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "0,0,0\n3,4,0\n5,0,0\n0,0,6\n3,4,0\n");
}

#[test]
fn bench_within_runs_small() {
    let o = nearkit(&[
        "bench",
        "within",
        "--device",
        "cpu",
        "--count",
        "3000",
        "--neighbours",
        "5",
        "--runs",
        "1",
        "--workloads",
        "uniform,clustered",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("pairs within r, unsorted") && out.contains("ids only") && out.contains("clustered"), "{out}");
}

#[test]
fn raycast_reports_its_hits_with_a_checksum_that_the_limit_one_rows_share() {
    let run = |extra: &[&str]| {
        let mut args = vec!["raycast", "--device", "cpu", "--rays", "20000", "--batches", "2", "-q"];
        if !extra.contains(&"--bodies") {
            args.extend_from_slice(&["--bodies", "300"]);
        }
        args.extend_from_slice(extra);
        let o = nearkit(&args);
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let checksum = |out: &str| out.split("checksum ").nth(1).map(|c| c.trim().to_string()).unwrap();
    let first = run(&[]);
    assert!(first.contains("19,440 triangles, 300 bodies") && first.contains("M rays/s"), "{first}");
    assert_eq!(checksum(&first), checksum(&run(&["--limit", "1"])), "first hits are the rows cut at 1");
    assert_ne!(checksum(&first), checksum(&run(&["--limit", "3"])));
    let hits = |out: &str| -> usize {
        let before = out.split(" of 20,000 rays hit").next().unwrap();
        before.rsplit('\n').next().unwrap().replace(',', "").parse().unwrap()
    };
    let above = run(&["--from-above"]);
    assert!(hits(&above) > 19_000, "{above}");
    // Placed buildings: hit, and the rows cut at 1 still the first hits.
    let placed = run(&["--instances", "200"]);
    assert!(placed.contains("300 bodies, 200 instances") && placed.contains("on instances"), "{placed}");
    assert_ne!(checksum(&placed), checksum(&first));
    assert_eq!(checksum(&placed), checksum(&run(&["--instances", "200", "--limit", "1"])));
    // A mesh file: one square, in its own units.
    let d = tempfile::tempdir().unwrap();
    let square = write(d.path(), "sq.off", b"OFF\n4 2 0\n0 0 0\n10 0 0\n10 10 0\n0 10 0\n3 0 1 2\n3 0 2 3\n");
    let out = run(&["--mesh", s(&square), "--size", "0", "--bodies", "5", "--from-above"]);
    assert!(out.contains("sq.off: 2 triangles, 5 bodies") && hits(&out) > 12_000, "{out}");
    // No bodies; and a heightfield (.npy), kept as heights or given as a mesh: the same hits.
    let out = run(&["--mesh", s(&square), "--size", "0", "--bodies", "0", "--from-above"]);
    assert!(out.contains("2 triangles, 0 bodies"), "{out}");
    let dem = write(d.path(), "dem.npy", &npy_2d(30, 40, |r, c| (c as f64 * 0.3).sin() + (r as f64 * 0.2).cos()));
    let scene = format!("mesh:{}", dem.display());
    let native = run(&["--scene", &scene, "--spacing", "2.5", "--bodies", "20"]);
    let as_mesh = run(&["--scene", &scene, "--spacing", "2.5", "--bodies", "20", "--as-mesh"]);
    assert!(native.contains("a heightfield of 2,262 triangles") && native.contains("on the heightfield"), "{native}");
    assert!(as_mesh.contains("2,262 triangles, 20 bodies"), "{as_mesh}");
    assert_eq!(hits(&native), hits(&as_mesh));
    assert!(hits(&native) > 5_000, "{native}");
}

#[test]
fn raycast_refuses_bad_input() {
    let d = tempfile::tempdir().unwrap();
    fails(&["raycast", "--rays", "0"], &["--rays"], None);
    fails(&["raycast", "--device", "cpu", "--rays", "10", "--max-distance", "-1"], &["--max-distance"], None);
    let bad = write(d.path(), "bad.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n");
    fails(&["raycast", "--mesh", s(&bad)], &["bad.off"], None);
    fails(&["raycast", "--instances", "5", "--bodies", "0"], &["--bodies"], None);
    fails(&["raycast", "--instance-shape", s(&bad)], &["--instances"], None);
}

/// `collide`'s outputs are written all or none: when one cannot be written (here a folder
/// stands where bodies.csv goes), the files there were stay as they were, and no half-written
/// or temporary file is left.
#[test]
fn collide_outputs_are_written_all_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("scene");
    std::fs::create_dir_all(scene.join("bodies.csv")).unwrap();
    let mesh = write(&scene, "mesh.ply", b"my earlier mesh");
    let contacts = write(dir.path(), "contacts.csv", b"earlier contacts");
    let args = ["collide", "--bodies", "50", "--ticks", "2", "--device", "cpu", "-q", "--scene-out", s(&scene)];
    let out = nearkit(&[&args[..], &["--contacts-out", s(&contacts)]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bodies.csv: is a directory"));
    assert_eq!(std::fs::read(&mesh).unwrap(), b"my earlier mesh");
    assert_eq!(std::fs::read(&contacts).unwrap(), b"earlier contacts");
    let names = |d: &Path| std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect::<Vec<_>>();
    assert_eq!(names(&scene).len(), 2, "{:?}", names(&scene));
    assert_eq!(names(dir.path()).len(), 2, "{:?}", names(dir.path()));
    std::fs::remove_dir(scene.join("bodies.csv")).unwrap();
    let out = nearkit(&[&args[..], &["--contacts-out", s(&contacts)]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&contacts).unwrap().starts_with("tick,body,kind"));
    assert!(std::fs::read(&mesh).unwrap().starts_with(b"ply"));
}
