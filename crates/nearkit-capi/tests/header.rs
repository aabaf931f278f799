//! include/nearkit.h is what cbindgen makes of the crate now, and it compiles as C99 and C++.

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen failed on the crate");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn the_checked_in_header_is_up_to_date() {
    let path = crate_dir().join("include/nearkit.h");
    let fresh = generate();
    if std::env::var_os("NEARKIT_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    if old != fresh {
        let line = old
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(old.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is out of date with the crate's source (first difference at line {}).\n\
             Regenerate it with:\n    NEARKIT_BLESS=1 cargo test -p nearkit-capi --test header\n\
             and commit the new header.",
            path.display(),
            line + 1
        );
    }
}

/// Compiles a file that includes the header and uses a few of its names.
fn compile(compiler: &str, args: &[&str], source: &str, ext: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nearkit-capi-header");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("uses_header.{ext}"));
    std::fs::write(&file, source).unwrap();
    let out = Command::new(compiler)
        .args(args)
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-c")
        .arg(&file)
        .arg("-o")
        .arg(dir.join(format!("uses_header_{ext}.o")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed on the header:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const USES: &str = r#"
#include "nearkit.h"
#include <stdio.h>
int demo(void) {
    NkWorld* world = NULL;
    NkCollider* collider = NULL;
    const NkContact* contacts = NULL;
    size_t n = 0;
    uint32_t id = 0;
    double c[3] = {0, 0, 1}, r[3] = {1, 1, 1}, q[4] = {0, 0, 0, 1};
    NkSweep s = {{1, 1, 1}, {0, 0, 0, 1}, {0, 0, 5}, {0, 0, -5}, 0xFFFFFFFFu, NK_NO_ID};
    NkSweepResult hit;
    NkStatus st = nk_world_new(1.0, &world);
    if (st != NK_STATUS_OK) { puts(nk_last_error_message()); return 1; }
    nk_world_add_ellipsoid(world, c, r, q, 1, 0xffffffffu, &id);
    nk_collider_new(NK_DEVICE_CPU, &collider);
    nk_collider_contacts(collider, world, &contacts, &n);
    nk_collider_sweeps(collider, world, &s, 1, &hit);
    printf("%s %zu %u %d\n", nk_status_name(st), n, contacts ? contacts[0].kind : NK_CONTACT_BODY, (int)hit.hit);
    nk_collider_free(collider);
    return nk_world_free(world) == NK_STATUS_OK ? 0 : 1;
}
"#;

#[test]
fn the_header_compiles_as_c99_and_cpp() {
    compile("cc", &["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"], USES, "c");
    compile("c++", &["-std=c++11", "-Wall", "-Wextra", "-pedantic", "-Werror"], USES, "cpp");
}
