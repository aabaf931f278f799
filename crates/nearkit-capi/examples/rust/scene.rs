//! The game-server scene of `examples/c/server_loop.c` and `examples/cpp/server_loop.cpp`,
//! in Rust: the same terrain, bodies, moves and sweeps, and the same per-tick lines, so that
//! `tests/examples.rs` can check the C and C++ programs' contacts against the Rust API's, and
//! `examples/rust/server_loop.rs` can time the same loop through the Rust API.
//!
//! Everything is integer arithmetic (positions in units of 2^-16 m) turned into doubles
//! exactly, so C, C++ and Rust make the very same inputs whatever their compilers do with
//! floating point. Keep the three copies in step.

#![allow(dead_code)]

use nearkit_core::collide::{BodyId, Contact, ContactKind, Sweep, SweepResult};

/// Terrain squares along x and along y (1 m each, two triangles).
pub const QUADS: usize = 96;
/// Bodies.
pub const BODIES: usize = 4000;
/// Sweeps a tick.
pub const SWEEPS: usize = 16;
/// Positions are integers in these units of a metre.
const UNIT: f64 = 65536.0;
const SEED: u64 = 0x006e_6561_726b_6974;
/// A coarse height every this many vertices, interpolated between.
const COARSE: usize = 16;

/// splitmix64 of (SEED, a, b, c): the scene's only source of numbers.
pub fn hash(a: u64, b: u64, c: u64) -> u64 {
    let mut z = SEED
        .wrapping_add(a.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(b.wrapping_mul(0xd1b5_4a32_d192_ed03))
        .wrapping_add(c.wrapping_mul(0x8cb9_2ba7_2f3d_8dd3));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An integer in [0, n).
fn rnd(a: u64, b: u64, c: u64, n: u64) -> i64 {
    (hash(a, b, c) % n) as i64
}

/// Height of vertex (row, col), in units: value noise (coarse random heights, bilinear
/// between) up to 4 m, plus up to 3 cm of roughness.
fn height(row: usize, col: usize) -> i64 {
    let g = |i: usize, j: usize| rnd(1, i as u64, j as u64, 1024);
    let (i, fr) = (row / COARSE, (row % COARSE) as i64);
    let (j, fc) = (col / COARSE, (col % COARSE) as i64);
    let n = COARSE as i64;
    g(i, j) * (n - fr) * (n - fc)
        + g(i + 1, j) * fr * (n - fc)
        + g(i, j + 1) * (n - fr) * fc
        + g(i + 1, j + 1) * fr * fc
        + rnd(2, row as u64, col as u64, 2048)
}

/// Metres from units (exact).
fn metres(v: i64) -> f64 {
    v as f64 / UNIT
}

/// The terrain: (QUADS + 1)² vertices as x, y, z, and 2 QUADS² triangles (vertex indices).
pub fn terrain() -> (Vec<f64>, Vec<u32>) {
    let cols = QUADS + 1;
    let mut vertices = Vec::with_capacity(3 * cols * cols);
    for r in 0..cols {
        for c in 0..cols {
            vertices.extend([c as f64, r as f64, metres(height(r, c))]);
        }
    }
    let mut triangles = Vec::with_capacity(6 * QUADS * QUADS);
    for r in 0..QUADS {
        for c in 0..QUADS {
            let v = (r * cols + c) as u32;
            let (right, up) = (v + 1, v + cols as u32);
            triangles.extend([v, right, up + 1, v, up + 1, up]);
        }
    }
    (vertices, triangles)
}

/// The bodies' state, in integers, and the poses handed to the world.
pub struct Bodies {
    pub anchor: Vec<[i64; 3]>,
    pub center: Vec<[i64; 3]>,
    pub quat: Vec<[i64; 4]>,
    pub radii: Vec<[f64; 3]>,
    pub layer: Vec<u32>,
    pub mask: Vec<u32>,
    /// Centers in metres (x, y, z).
    pub centers: Vec<[f64; 3]>,
    /// Quaternions (x, y, z, w).
    pub orientations: Vec<[f64; 4]>,
}

impl Bodies {
    /// `n` ellipsoids of radii 0.2–0.8 m, up to 1 m above random places of the terrain.
    pub fn new(n: usize) -> Bodies {
        let mut b = Bodies {
            anchor: Vec::new(),
            center: Vec::new(),
            quat: Vec::new(),
            radii: Vec::new(),
            layer: Vec::new(),
            mask: Vec::new(),
            centers: Vec::new(),
            orientations: Vec::new(),
        };
        let one = UNIT as i64;
        for i in 0..n as u64 {
            let radii = [0, 1, 2].map(|k| metres(13107 + rnd(3, i, k, 39322)));
            let x = 2 * one + rnd(4, i, 0, (QUADS as u64 - 4) * one as u64);
            let y = 2 * one + rnd(4, i, 1, (QUADS as u64 - 4) * one as u64);
            let (row, col) = (((y + one / 2) / one) as usize, ((x + one / 2) / one) as usize);
            let z = height(row, col) + rnd(4, i, 2, one as u64);
            let q = [0, 1, 2].map(|k| rnd(5, i, k, 257) - 128);
            b.anchor.push([x, y, z]);
            b.center.push([x, y, z]);
            b.quat.push([q[0], q[1], q[2], 32 + rnd(5, i, 3, 97)]);
            b.radii.push(radii);
            b.layer.push(1 << (i % 3));
            b.mask.push(if i % 7 == 6 { !2 } else { u32::MAX });
        }
        b.centers = vec![[0.0; 3]; n];
        b.orientations = vec![[0.0; 4]; n];
        b.update_poses();
        b
    }

    fn update_poses(&mut self) {
        for i in 0..self.center.len() {
            self.centers[i] = self.center[i].map(metres);
            self.orientations[i] = self.quat[i].map(|v| v as f64 / 128.0);
        }
    }

    /// Tick `tick`'s move: each body steps up to 3 cm along each axis, drawn back to its
    /// anchor by a sixteenth of the way, and turns a little.
    pub fn advance(&mut self, tick: u64) {
        for i in 0..self.center.len() {
            let a = 1000 + tick;
            for k in 0..3 {
                let step = rnd(a, i as u64, k as u64, 4097) - 2048;
                let c = self.center[i][k];
                self.center[i][k] = c + step - (c - self.anchor[i][k]) / 16;
            }
            for k in 0..4 {
                let (lo, hi) = if k == 3 { (32, 128) } else { (-128, 128) };
                self.quat[i][k] = (self.quat[i][k] + rnd(a, i as u64, 3 + k as u64, 9) - 4).clamp(lo, hi);
            }
        }
        self.update_poses();
    }

    /// Tick `tick`'s sweeps: random bodies dropped from 2 m above to 8 m below, drifting up
    /// to 2 m sideways (every fourth goes up instead), against the terrain and the other
    /// bodies.
    pub fn sweeps(&self, tick: u64) -> Vec<Sweep> {
        let one = UNIT as i64;
        (0..SWEEPS as u64)
            .map(|s| {
                let a = 2000 + tick;
                let j = rnd(a, s, 0, self.center.len() as u64) as usize;
                let c = self.center[j];
                let (dx, dy) = (rnd(a, s, 1, 4 * one as u64 + 1) - 2 * one, rnd(a, s, 2, 4 * one as u64 + 1) - 2 * one);
                Sweep::new(
                    self.radii[j],
                    self.orientations[j],
                    [metres(c[0]), metres(c[1]), metres(c[2] + 2 * one)],
                    [metres(c[0] + dx), metres(c[1] + dy), metres(c[2] + (if s % 4 == 3 { 8 } else { -8 }) * one)],
                )
                .ignoring(BodyId(j as u32))
            })
            .collect()
    }
}

/// FNV-1a over 64-bit words.
pub struct Fnv(pub u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    #[inline(always)]
    pub fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x0000_0100_0000_01b3);
    }

    /// A contact, field by field (the kind as the C API's code).
    #[inline(always)]
    pub fn contact(&mut self, c: &Contact) {
        #[allow(unreachable_patterns)]
        let kind = match c.kind {
            ContactKind::Triangle => 0,
            ContactKind::Body => 2,
            _ => 1,
        };
        for w in [c.body as u64, kind, c.other as u64] {
            self.word(w);
        }
        for v in c.normal {
            self.word(v.to_bits() as u64);
        }
        self.word(c.depth.to_bits() as u64);
        for v in c.point {
            self.word(v.to_bits());
        }
    }

    /// A sweep's result.
    pub fn sweep(&mut self, r: &Option<SweepResult>) {
        match r {
            None => self.word(0),
            Some(r) => {
                self.word(1);
                self.word(r.other as u64);
                self.word(r.toi.to_bits());
                for v in r.point.iter().chain(&r.normal) {
                    self.word(v.to_bits());
                }
            }
        }
    }
}

/// One tick's line, as the C and C++ programs print it with `--verbose`.
pub fn tick_line(tick: u64, contacts: usize, body_body: usize, hits: usize, hash: u64) -> String {
    format!("tick {tick}: {contacts} contacts ({body_body} body-body), {hits} of {SWEEPS} sweeps hit, hash {hash:016x}")
}
