//! Builds examples/c/server_loop.c and examples/cpp/server_loop.cpp with the system's `cc`
//! and `c++` against the static library cargo built for this test (`libnearkit_c.a`), runs a
//! few ticks of each, and checks every tick's contacts and sweeps (counts and a hash of every
//! field) against the same scene run through nearkit's Rust API.

#[path = "../examples/rust/scene.rs"]
mod scene;

use std::path::{Path, PathBuf};
use std::process::Command;

use nearkit_core::collide::{Body, BodyId, Collider, ContactKind, World};
use nearkit_core::{Mesh, Points};
use scene::{tick_line, Bodies, Fnv, BODIES};

const TICKS: u64 = 3;

/// The static library cargo built beside this test: in `target/<profile>/deps/` with the
/// test, where cargo puts a library's artifacts when it builds it for its tests (a fresh one
/// on every `cargo test`, as the library is an rlib too), or one folder up after a plain
/// `cargo build`.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [deps.join("libnearkit_c.a"), deps.parent().unwrap().join("libnearkit_c.a")];
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| {
        panic!("libnearkit_c.a is not in {candidates:?}: build it with `cargo test -p nearkit-capi` or `cargo build -p nearkit-capi`")
    })
}

fn build(compiler: &str, source: &str, flags: &[&str], out: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(compiler)
        .args(flags)
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(dir.join("include"))
        .arg(dir.join(source))
        .arg(static_library())
        // What `rustc --print native-static-libs` lists for the library.
        .args(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-o"])
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(output.status.success(), "{compiler} failed on {source}:\n{}", String::from_utf8_lossy(&output.stderr));
}

/// A program's tick lines and its run checksum.
fn run(program: &Path) -> (Vec<String>, String) {
    let output = Command::new(program).args([&TICKS.to_string(), "cpu", "--verbose"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} failed:\n{stdout}\n{}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let ticks = stdout.lines().filter(|l| l.starts_with("tick ")).map(String::from).collect();
    let checksum = stdout
        .lines()
        .find_map(|l| l.split("checksum ").nth(1))
        .unwrap_or_else(|| panic!("no checksum in the output of {}:\n{stdout}", program.display()));
    assert!(stdout.contains(" ms (poses, contacts read"), "no time in:\n{stdout}");
    (ticks, checksum.to_string())
}

/// The same through the Rust API.
fn reference() -> (Vec<String>, String) {
    let (vertices, triangles) = scene::terrain();
    let mesh = Mesh {
        vertices: Points::from_rows(&vertices.chunks(3).map(|v| [v[0], v[1], v[2]]).collect::<Vec<_>>()),
        triangles: triangles.chunks(3).map(|t| [t[0], t[1], t[2]]).collect(),
    };
    let mut world = World::new(1.0).unwrap();
    world.set_mesh(&mesh).unwrap();
    let mut bodies = Bodies::new(BODIES);
    for i in 0..BODIES {
        let body = Body::ellipsoid(bodies.centers[i], bodies.radii[i], bodies.orientations[i]);
        assert_eq!(world.add_body(body.with_layers(bodies.layer[i], bodies.mask[i])).unwrap(), BodyId(i as u32));
    }
    let ids: Vec<BodyId> = (0..BODIES as u32).map(BodyId).collect();
    let mut collider = Collider::cpu();
    let (mut lines, mut run) = (Vec::new(), Fnv::new());
    for tick in 0..TICKS {
        bodies.advance(tick);
        world.set_poses(&ids, &bodies.centers, &bodies.orientations).unwrap();
        let contacts = collider.contacts(&world).unwrap();
        let mut hash = Fnv::new();
        contacts.iter().for_each(|c| hash.contact(c));
        let body_body = contacts.iter().filter(|c| c.kind == ContactKind::Body).count();
        let hits = collider.sweeps(&world, &bodies.sweeps(tick)).unwrap();
        hits.iter().for_each(|h| hash.sweep(h));
        let hit_count = hits.iter().flatten().count();
        assert!(contacts.len() > 1000 && body_body > 50 && hit_count > 4, "a scene too sparse to test much");
        run.word(hash.0);
        lines.push(tick_line(tick, contacts.len(), body_body, hit_count, hash.0));
    }
    (lines, format!("{:016x}", run.0))
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nearkit-capi-examples");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_readme_example_runs() {
    let program = scratch().join("minimal");
    build("cc", "examples/c/minimal.c", &["-std=c99", "-pedantic"], &program);
    let output = Command::new(&program).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout, "body 0 touches triangle 0, depth 0.100\nthe ray hits body 0 at distance 4.100\n");
}

#[test]
fn c_and_cpp_programs_find_the_rust_apis_contacts() {
    let dir = scratch();
    let (c, cpp) = (dir.join("server_loop_c"), dir.join("server_loop_cpp"));
    build("cc", "examples/c/server_loop.c", &["-std=c99"], &c);
    build("c++", "examples/cpp/server_loop.cpp", &["-std=c++17"], &cpp);
    let want = reference();
    for program in [&c, &cpp] {
        let got = run(program);
        assert_eq!(got.0.len(), TICKS as usize, "{}", program.display());
        for (g, w) in got.0.iter().zip(&want.0) {
            assert_eq!(g, w, "{} differs from the Rust API", program.display());
        }
        assert_eq!(got.1, want.1, "{}: run checksum", program.display());
    }
}
