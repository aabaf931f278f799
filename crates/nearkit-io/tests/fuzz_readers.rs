//! Every reader, fed broken versions of small valid files — every truncation, random bit and
//! byte flips, header counts replaced by huge values — returns Ok or Err: it never panics, and
//! never asks for memory out of proportion to the file. Each case runs through the readers
//! that know the file's size and those that do not (the CLI's), in both precisions.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::io::{Cursor, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use nearkit_io::{
    npy_columns, read_heightfield, read_mesh, read_mesh_from, read_mesh_from_sized, read_points, read_points_from,
    read_points_from_sized, read_vectors, Format, ReadOptions,
};

// ---- The allocation watch -------------------------------------------------------------------

/// Records the largest single request each thread makes while a case runs; refuses any request
/// over HARD_LIMIT outright (the process then aborts, after naming the case).
struct Watch;

#[global_allocator]
static WATCH: Watch = Watch;

/// No reader may ask for this much at once for files of a few hundred bytes.
const HARD_LIMIT: usize = 256 << 20;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static CASE: RefCell<String> = const { RefCell::new(String::new()) };
}

impl Watch {
    /// True where the request may go ahead.
    fn note(size: usize) -> bool {
        let watching = WATCHING.try_with(|w| w.get()).unwrap_or(false);
        if !watching {
            return true;
        }
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        if size <= HARD_LIMIT {
            return true;
        }
        // Name the case before the abort that follows; stderr writes without allocating.
        let _ = WATCHING.try_with(|w| w.set(false));
        let mut err = std::io::stderr();
        let _ = err.write_all(b"\nallocation of ");
        let _ = err.write_all(decimal(size, &mut [0; 20]));
        let _ = err.write_all(b" bytes requested by case: ");
        let _ = CASE.try_with(|c| c.try_borrow().map(|c| err.write_all(c.as_bytes())));
        let _ = err.write_all(b"\n");
        false
    }
}

fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::note(layout.size()) {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::note(layout.size()) {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !Self::note(new_size) {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

// ---- Valid samples, with the places that hold counts ------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Enc {
    Text,
    U8,
    U16Le,
    U32Le,
    I32Le,
    I32Be,
    U32Be,
}

/// A count (or index) in a sample: where it is and how it is written.
#[derive(Clone, Copy, Debug)]
struct Site {
    at: usize,
    len: usize,
    enc: Enc,
}

#[derive(Default)]
struct Sample {
    name: &'static str,
    ext: &'static str,
    /// Whether it is a triangle mesh (and read as one too).
    mesh: bool,
    /// Whether it is an N×d .npy for read_vectors and read_heightfield.
    array: bool,
    bytes: Vec<u8>,
    sites: Vec<Site>,
}

impl Sample {
    fn new(name: &'static str, ext: &'static str, mesh: bool) -> Self {
        Self { name, ext, mesh, ..Default::default() }
    }
    fn raw(mut self, b: impl AsRef<[u8]>) -> Self {
        self.bytes.extend_from_slice(b.as_ref());
        self
    }
    fn count(mut self, v: i64, enc: Enc) -> Self {
        let b = encode(v, enc);
        self.sites.push(Site { at: self.bytes.len(), len: b.len(), enc });
        self.bytes.extend_from_slice(&b);
        self
    }
    fn append(mut self, other: Sample) -> Self {
        let base = self.bytes.len();
        self.sites.extend(other.sites.into_iter().map(|s| Site { at: s.at + base, ..s }));
        self.bytes.extend_from_slice(&other.bytes);
        self
    }
}

fn encode(v: i64, enc: Enc) -> Vec<u8> {
    match enc {
        Enc::Text => v.to_string().into_bytes(),
        Enc::U8 => vec![v as u8],
        Enc::U16Le => (v as u16).to_le_bytes().to_vec(),
        Enc::U32Le => (v as u32).to_le_bytes().to_vec(),
        Enc::I32Le => (v as i32).to_le_bytes().to_vec(),
        Enc::I32Be => (v as i32).to_be_bytes().to_vec(),
        Enc::U32Be => (v as u32).to_be_bytes().to_vec(),
    }
}

/// Huge values for a count written as `enc`.
fn huge(enc: Enc) -> Vec<Vec<u8>> {
    match enc {
        Enc::Text => [
            "2147483648",
            "4294967296",
            "1099511627776",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "6148914691236517206",
            "-1",
            "99999999999999999999999999",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect(),
        Enc::U8 => vec![vec![255], vec![128]],
        Enc::U16Le => vec![vec![0xff, 0xff], vec![0, 0x80]],
        Enc::U32Le | Enc::U32Be | Enc::I32Le | Enc::I32Be => {
            let be = matches!(enc, Enc::U32Be | Enc::I32Be);
            [0x8000_0000u32, 0xffff_ffff, 0x7fff_ffff, 0x1000_0000]
                .iter()
                .map(|v| if be { v.to_be_bytes().to_vec() } else { v.to_le_bytes().to_vec() })
                .collect()
        }
    }
}

fn f32s(v: &[f32], big: bool) -> Vec<u8> {
    v.iter().flat_map(|x| if big { x.to_be_bytes() } else { x.to_le_bytes() }).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const SQUARE: [f32; 15] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.5, 2.0];

fn text_samples() -> Vec<Sample> {
    use Enc::Text;
    vec![
        Sample::new("csv with header", "csv", false).raw("x,y,z\n0.5,1,2\n3,4,5e-1\n-1,0,7\n"),
        Sample::new("csv without header", "csv", false).raw("# points\n1,2,3,red\n4, 5 ,6,blue\n\"7\",8,9\n"),
        Sample::new("xyz", "xyz", false).raw("# points\n1 2 3 0 0 1\n4\t5\t6 0 0 1\n7,8,9\n"),
        Sample::new("off", "off", true)
            .raw("OFF\n")
            .count(5, Text)
            .raw(" ")
            .count(2, Text)
            .raw(" ")
            .count(0, Text)
            .raw("\n0 0 0\n1 0 0\n1 1 0\n0 1 0 # corner\n0.5 0.5 2\n")
            .count(4, Text)
            .raw(" 0 1 2 3\n")
            .count(3, Text)
            .raw(" 0 1 ")
            .count(4, Text)
            .raw("\n"),
        Sample::new("obj", "obj", true)
            .raw("# square\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 0.5 2\nvn 0 0 1\nf ")
            .count(1, Text)
            .raw("/1/1 2//1 3 4\nf 1 2 ")
            .count(5, Text)
            .raw("\nf -1 -2 ")
            .count(-3, Text)
            .raw("\n"),
    ]
}

fn ply_samples() -> Vec<Sample> {
    use Enc::*;
    let ascii = Sample::new("ply ascii", "ply", true)
        .raw("ply\nformat ascii 1.0\ncomment c\nelement vertex ")
        .count(5, Text)
        .raw("\nproperty float x\nproperty float y\nproperty float z\nelement face ")
        .count(2, Text)
        .raw("\nproperty list uchar int vertex_indices\nelement edge ")
        .count(1, Text)
        .raw("\nproperty int vertex1\nproperty int vertex2\nend_header\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0.5 2\n")
        .count(4, Text)
        .raw(" 0 1 2 3\n3 0 1 ")
        .count(4, Text)
        .raw("\n0 1\n");
    let mut le = Sample::new("ply binary little-endian", "ply", true)
        .raw("ply\nformat binary_little_endian 1.0\nelement vertex ")
        .count(5, Text)
        .raw("\nproperty double x\nproperty double y\nproperty double z\nproperty uchar red\nelement face ")
        .count(2, Text)
        .raw("\nproperty list uchar int vertex_indices\nproperty uchar flags\nend_header\n");
    for v in SQUARE.chunks(3) {
        le = le.raw(f64s(&v.iter().map(|&x| x as f64).collect::<Vec<_>>())).raw([7]);
    }
    le = le.count(4, U8);
    for i in [0, 1, 2, 3] {
        le = le.count(i, I32Le);
    }
    le = le.raw([0]).count(3, U8).count(0, I32Le).count(1, I32Le).count(4, I32Le).raw([1]);
    let mut be = Sample::new("ply binary big-endian", "ply", true)
        .raw("ply\nformat binary_big_endian 1.0\nelement extra ")
        .count(1, Text)
        .raw("\nproperty list uchar float values\nelement vertex ")
        .count(5, Text)
        .raw("\nproperty float x\nproperty float y\nproperty float z\nelement face ")
        .count(1, Text)
        .raw("\nproperty list int uint vertex_indices\nend_header\n")
        .count(2, U8)
        .raw(f32s(&[1.0, 2.0], true))
        .raw(f32s(&SQUARE, true))
        .count(3, I32Be);
    for i in [0, 1, 4] {
        be = be.count(i, U32Be);
    }
    vec![ascii, le, be]
}

fn stl_samples() -> Vec<Sample> {
    let tris = [[0usize, 1, 2], [0, 2, 3], [0, 1, 4]];
    let corner = |i: usize| &SQUARE[3 * i..3 * i + 3];
    let mut ascii = String::from("solid s\n");
    for t in &tris {
        ascii += "  facet normal 0 0 1\n    outer loop\n";
        for &c in t {
            let v = corner(c);
            ascii += &format!("      vertex {} {} {}\n", v[0], v[1], v[2]);
        }
        ascii += "    endloop\n  endfacet\n";
    }
    ascii += "endsolid s\n";
    let binary = |name: &'static str, header: &[u8]| {
        let mut header = header.to_vec();
        header.resize(80, b' ');
        let mut s = Sample::new(name, "stl", true).raw(header).count(3, Enc::U32Le);
        for t in &tris {
            s = s.raw(f32s(&[0.0, 0.0, 1.0], false));
            for &c in t {
                s = s.raw(f32s(corner(c), false));
            }
            s = s.raw([0, 0]);
        }
        s
    };
    // The second's header starts like an ascii STL's.
    let (bin, solid) = (binary("stl binary", b"binary"), binary("stl binary named solid", b"solid binary"));
    vec![Sample::new("stl ascii", "stl", true).raw(ascii), bin, solid]
}

/// A version-1 .npy: the header length and the shape are sites.
fn npy(name: &'static str, descr: &str, fortran: bool, shape: &[i64], data: Vec<u8>, array: bool) -> Sample {
    let mut dict = Sample::new(name, "npy", false)
        .raw(format!("{{'descr': '{descr}', 'fortran_order': {}, 'shape': (", if fortran { "True" } else { "False" }));
    for &d in shape {
        dict = dict.count(d, Enc::Text).raw(", ");
    }
    dict = dict.raw("), }");
    while (10 + dict.bytes.len() + 1) % 16 != 0 {
        dict = dict.raw(" ");
    }
    dict = dict.raw("\n");
    let len = dict.bytes.len() as i64;
    let mut s = Sample::new(name, "npy", false).raw(b"\x93NUMPY\x01\x00").count(len, Enc::U16Le).append(dict).raw(data);
    s.array = array;
    s
}

fn npy_samples() -> Vec<Sample> {
    let ints: Vec<u8> = [1i32, 2, 3, 4, 5, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    let longs: Vec<u8> = [1i64, -2, 3, 4, 5, 1 << 40].iter().flat_map(|v| v.to_be_bytes()).collect();
    let wide: Vec<f64> = (0..15).map(|i| i as f64 * 0.5).collect();
    vec![
        npy(
            "npy float64",
            "<f8",
            false,
            &[4, 3],
            f64s(&SQUARE[..12].iter().map(|&x| x as f64).collect::<Vec<_>>()),
            true,
        ),
        npy("npy float32 fortran", "<f4", true, &[3, 3], f32s(&SQUARE[..9], false), true),
        npy("npy int32", "<i4", false, &[2, 3], ints, true),
        npy("npy int64 big-endian", ">i8", false, &[2, 3], longs, true),
        npy("npy 3x5 vectors", "<f8", false, &[3, 5], f64s(&wide), true),
    ]
}

// ---- Mutations ---------------------------------------------------------------------------------

/// splitmix64: a seeded stream of numbers, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes that steer text parsers somewhere new.
const TEXT_BYTES: &[u8] = b"0123456789-+.eE \t\n\r#/,'\"(){}[]:xyzfvlLNaNinf\0\xff";

/// The broken versions of one sample, each with a description.
fn mutations(s: &Sample, seed: u64) -> Vec<(String, Vec<u8>)> {
    let b = &s.bytes;
    let mut out = vec![("as written".to_string(), b.clone())];
    for n in 0..b.len() {
        out.push((format!("cut to {n} bytes"), b[..n].to_vec()));
    }
    let mut rng = Rng(seed);
    for _ in 0..250 {
        let (i, bit) = (rng.below(b.len()), rng.below(8));
        let mut m = b.clone();
        m[i] ^= 1 << bit;
        out.push((format!("bit {bit} of byte {i} flipped"), m));
    }
    for _ in 0..200 {
        let (i, v) = (rng.below(b.len()), rng.next() as u8);
        let mut m = b.clone();
        m[i] = v;
        out.push((format!("byte {i} set to {v}"), m));
    }
    for _ in 0..200 {
        let (i, v) = (rng.below(b.len()), TEXT_BYTES[rng.below(TEXT_BYTES.len())]);
        let mut m = b.clone();
        m[i] = v;
        out.push((format!("byte {i} set to {:?}", v as char), m));
    }
    for _ in 0..50 {
        let mut m = b.clone();
        let flips = 2 + rng.below(4);
        for _ in 0..flips {
            let i = rng.below(m.len());
            m[i] ^= 1 << rng.below(8);
        }
        out.push((format!("{flips} random bits flipped (draw {})", rng.0), m));
    }
    for (k, site) in s.sites.iter().enumerate() {
        for v in huge(site.enc) {
            let mut m = b[..site.at].to_vec();
            m.extend_from_slice(&v);
            m.extend_from_slice(&b[site.at + site.len..]);
            let shown = match site.enc {
                Enc::Text => String::from_utf8_lossy(&v).into_owned(),
                _ => v.iter().map(|b| format!("{b:02x}")).collect(),
            };
            out.push((format!("count {k} ({:?} at byte {}) set to {shown}", site.enc, site.at), m));
        }
    }
    out
}

// ---- Running the cases -------------------------------------------------------------------------

/// Runs `f` on one case: a panic or an outsized allocation is a failure, described.
fn run_case(case: &str, file_len: usize, f: impl FnOnce()) -> Option<String> {
    CASE.with(|c| {
        let mut c = c.borrow_mut();
        c.clear();
        c.push_str(case);
    });
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    WATCHING.with(|w| w.set(false));
    let largest = LARGEST.with(|l| l.get());
    let limit = 64 * file_len + (1 << 20);
    match result {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Some(format!("{case}: panicked: {msg}"))
        }
        Ok(()) if largest > limit => {
            Some(format!("{case}: asked for {largest} bytes at once; the limit for {file_len} bytes is {limit}"))
        }
        Ok(()) => None,
    }
}

/// Feeds every mutation of every sample to every reader that takes its format.
fn fuzz(samples: Vec<Sample>, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = ReadOptions::default();
    let mut failures = Vec::new();
    let mut cases = 0;
    for (k, s) in samples.iter().enumerate() {
        let path = PathBuf::from(format!("fuzz.{}", s.ext));
        let format = Format::from_path(&path).unwrap();
        // The valid sample reads whole.
        let p = read_points_from_sized::<f64, _>(Cursor::new(&s.bytes), s.bytes.len() as u64, format, &path, &opts);
        if s.name != "npy 3x5 vectors" {
            assert!(p.as_ref().is_ok_and(|p| p.len() >= 2), "{}: {:?}", s.name, p.map(|p| p.len()));
        }
        if s.mesh {
            let m = read_mesh_from::<f32, _>(Cursor::new(&s.bytes), format, &path);
            assert!(m.as_ref().is_ok_and(|m| !m.triangles.is_empty()), "{}: {:?}", s.name, m.map(|m| m.triangles));
        }
        for (what, bytes) in mutations(s, seed + k as u64) {
            let len = bytes.len();
            let case = |reader: &str| format!("{} {what}, {reader}", s.name);
            let sized = len as u64;
            let mut run = |reader: &str, f: &dyn Fn()| {
                cases += 1;
                failures.extend(run_case(&case(reader), len, f));
            };
            run("read_points_from_sized f64", &|| {
                let _ = read_points_from_sized::<f64, _>(Cursor::new(&bytes), sized, format, &path, &opts);
            });
            run("read_points_from f32", &|| {
                let _ = read_points_from::<f32, _>(Cursor::new(&bytes), format, &path, &opts);
            });
            if s.mesh {
                run("read_mesh_from_sized f32", &|| {
                    let _ = read_mesh_from_sized::<f32, _>(Cursor::new(&bytes), sized, format, &path);
                });
                run("read_mesh_from f64", &|| {
                    let _ = read_mesh_from::<f64, _>(Cursor::new(&bytes), format, &path);
                });
            }
            // The path-based readers on the truncations and the inflated counts, and the
            // array readers that take only a path.
            let on_disk = what.starts_with("cut") || what.starts_with("count") || what == "as written";
            if on_disk || s.array {
                let file = dir.path().join(format!("case.{}", s.ext));
                std::fs::write(&file, &bytes).unwrap();
                run("read_points", &|| {
                    let _ = read_points::<f32>(&file, &opts);
                });
                if s.mesh {
                    run("read_mesh", &|| {
                        let _ = read_mesh::<f64>(&file);
                    });
                }
                if s.array {
                    run("read_vectors", &|| {
                        let _ = read_vectors::<f32>(&file, &opts);
                    });
                    run("npy_columns", &|| {
                        let _ = npy_columns(&file);
                    });
                    run("read_heightfield", &|| {
                        let _ = read_heightfield(&file, 1.0);
                    });
                }
            }
        }
    }
    assert!(cases > 1000, "only {cases} cases");
    if !failures.is_empty() {
        let shown: Vec<&str> = failures.iter().take(40).map(String::as_str).collect();
        panic!("{} of {cases} cases failed:\n{}", failures.len(), shown.join("\n"));
    }
    eprintln!("{cases} cases, all Ok or Err");
}

#[test]
fn text_formats() {
    fuzz(text_samples(), 1);
}

#[test]
fn ply_meshes() {
    fuzz(ply_samples(), 100);
}

#[test]
fn stl_meshes() {
    fuzz(stl_samples(), 200);
}

#[test]
fn npy_arrays() {
    fuzz(npy_samples(), 300);
}

/// The watch itself: an outsized request is seen.
#[test]
fn the_watch_sees_large_requests() {
    let failure = run_case("a 4 MiB vector for a 10-byte file", 10, || {
        std::hint::black_box(vec![0u8; 4 << 20]);
    });
    assert!(failure.is_some_and(|f| f.contains("asked for 4194304 bytes")));
    assert!(run_case("a small vector", 10, || drop(std::hint::black_box(vec![0u8; 100]))).is_none());
}
