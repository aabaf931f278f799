//! `Heightfield`: a terrain kept as its grid of heights, never as triangles. A 4,096 × 4,096
//! elevation model is 128 MiB of heights here, where its 33.5 million triangles with their
//! boxes and grid entries would take gigabytes.
//!
//! Its triangles are numbered as `scene::heightfield` makes them, so a heightfield and the
//! same terrain given as a mesh have the same contacts, bit for bit (kind aside): each square
//! (r, c) of the grid, q = r·(cols − 1) + c, holds triangles 2q (v, v + 1, v + cols + 1) and
//! 2q + 1 (v, v + cols + 1, v + cols), v = r·cols + c, counter-clockwise seen from above. A
//! box finds its candidate triangles by arithmetic: the squares under it (`squares`).
//! `heightfield.cu` repeats what the kernels need of it (on a `HeightfieldView`).

use crate::collide::ellipsoid::V3;
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;
use crate::runtime::cuda::launch::{c_definitions, c_struct};
use crate::runtime::cuda::CudaSource;
use rayon::prelude::*;

/// Device functions of heightfields, for the collider's and the ray caster's kernels (after
/// `triangle.cuh`, whose `V3` they use).
pub(crate) static HEIGHTFIELD: CudaSource = CudaSource {
    file: "heightfield.cu",
    text: include_str!("heightfield.cu"),
    constants: || vec![("MAX_TILE_LEVELS", MAX_TILE_LEVELS.to_string()), ("TILE_BITS", TILE_BITS.to_string())],
    structs: c_definitions!(HeightfieldView),
};

c_struct! {
    /// `struct HeightfieldView` of heightfield.cu: a heightfield on the device.
    pub(crate) struct HeightfieldView as "HeightfieldView" {
        /// rows × cols, row-major.
        heights: u64 = "const double*",
        spacing: f64 = "double",
        origin: [f64; 2] = "double[2]",
        /// The lowest and highest heights.
        lowest: f64 = "double",
        highest: f64 = "double",
        /// The tiles' lowest and highest heights, level after level (`Heightfield::tiles`);
        /// 0 where the kernels do not need them.
        tiles: u64 = "const double*",
        /// Where each level's tiles start in `tiles` (in tiles), and their columns.
        tile_start: [u32; MAX_TILE_LEVELS] = "u32[NK_MAX_TILE_LEVELS]",
        tile_cols: [u32; MAX_TILE_LEVELS] = "u32[NK_MAX_TILE_LEVELS]",
        /// 0 for no heightfield.
        rows: u32 = "u32",
        cols: u32 = "u32",
        /// Levels of tiles.
        tile_levels: u32 = "u32",
        pad: u32 = "u32",
    }
}

impl HeightfieldView {
    /// No heightfield.
    pub(crate) fn none() -> Self {
        HeightfieldView {
            heights: 0,
            spacing: 1.0,
            origin: [0.0; 2],
            lowest: 0.0,
            highest: 0.0,
            tiles: 0,
            tile_start: [0; MAX_TILE_LEVELS],
            tile_cols: [0; MAX_TILE_LEVELS],
            rows: 0,
            cols: 0,
            tile_levels: 0,
            pad: 0,
        }
    }

    /// `h`, whose heights and tiles' heights are at device addresses `heights` and `tiles`.
    pub(crate) fn of(h: &Heightfield, heights: u64, tiles: u64) -> Self {
        HeightfieldView {
            heights,
            spacing: h.spacing,
            origin: h.origin,
            lowest: h.lowest,
            highest: h.highest,
            tiles,
            tile_start: std::array::from_fn(|l| h.tile_levels.get(l).map_or(0, |v| v.0 as u32)),
            tile_cols: std::array::from_fn(|l| h.tile_levels.get(l).map_or(0, |v| v.1 as u32)),
            rows: h.rows as u32,
            cols: h.cols as u32,
            tile_levels: h.tile_levels.len() as u32,
            pad: 0,
        }
    }
}

/// Triangle ids of a heightfield stay below this: a contact's id carries its kind in the two
/// bits above (`world::KIND_HEIGHTFIELD`, `world::KIND_BODY`).
pub const MAX_TRIANGLES: usize = 1 << 30;

/// A terrain as a row-major grid of heights: sample (r, c) is at (x0 + c·spacing,
/// y0 + r·spacing, heights[r·cols + c]).
#[derive(Clone, Debug, PartialEq)]
pub struct Heightfield {
    heights: Vec<f64>,
    rows: usize,
    cols: usize,
    spacing: f64,
    origin: [f64; 2],
    /// The lowest and highest heights.
    lowest: f64,
    highest: f64,
    /// The lowest and highest heights of the samples of each tile, level after level, each
    /// level row-major: a tile of level l (from 1) is 8^l × 8^l squares. What lets a ray skip
    /// the parts of its path above or below the terrain.
    tiles: Vec<[f64; 2]>,
    /// Where each level starts in `tiles`, and its columns of tiles.
    tile_levels: Vec<(usize, usize)>,
}

/// A tile of level l is `1 << (TILE_BITS · l)` squares a side.
pub(crate) const TILE_BITS: u32 = 3;
/// Levels of tiles at most: 8^10 squares a side is more than a heightfield has.
pub(crate) const MAX_TILE_LEVELS: usize = 10;

/// The squares under a box: columns c0..=c1 and rows r0..=r1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Squares {
    pub c0: u32,
    pub c1: u32,
    pub r0: u32,
    pub r1: u32,
}

impl Squares {
    /// Whether square (r, c) is one of these.
    #[inline(always)]
    pub fn holds(&self, r: u32, c: u32) -> bool {
        self.r0 <= r && r <= self.r1 && self.c0 <= c && c <= self.c1
    }
}

impl Heightfield {
    /// `rows` × `cols` heights (row-major, at least 2 × 2, finite), `spacing` apart, sample
    /// (0, 0) at `origin` (x, y). Every sample's x and y must be finite, and neighbouring
    /// samples' distinct in f64.
    pub fn new(heights: Vec<f64>, rows: usize, cols: usize, spacing: f64, origin: [f64; 2]) -> Result<Self> {
        if rows < 2 || cols < 2 {
            return Err(Error::InvalidArgument(format!(
                "a heightfield needs at least 2 × 2 samples, got {rows} × {cols}"
            )));
        }
        if rows.checked_mul(cols) != Some(heights.len()) {
            return Err(Error::InvalidArgument(format!(
                "a heightfield of {rows} × {cols} samples needs {} heights, got {}",
                rows.saturating_mul(cols),
                heights.len()
            )));
        }
        if 2 * (rows - 1) * (cols - 1) >= MAX_TRIANGLES {
            return Err(Error::InvalidArgument(format!(
                "a heightfield of {rows} × {cols} samples has more than 2^30 triangles: split it"
            )));
        }
        if !(spacing.is_finite() && spacing > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "heightfield spacing must be a positive number, got {spacing}"
            )));
        }
        if !origin.iter().all(|v| v.is_finite()) {
            return Err(Error::InvalidArgument(format!("heightfield origin {origin:?} is not finite")));
        }
        if let Some(i) = heights.iter().position(|h| !h.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "height at row {}, column {} is {}: heights must be finite",
                i / cols,
                i % cols,
                heights[i]
            )));
        }
        for (axis, n) in [(0, cols), (1, rows)] {
            let at = |k: usize| origin[axis] + k as f64 * spacing;
            if let Some(k) = (0..n - 1).find(|&k| !(at(k + 1) > at(k) && at(k + 1).is_finite())) {
                return Err(Error::InvalidArgument(format!(
                    "heightfield spacing {spacing} does not fit its origin {origin:?}: samples {k} and {} along {} \
                     would be at {} and {} (too far from 0 for the spacing, or beyond f64's range)",
                    k + 1,
                    ["x", "y"][axis],
                    at(k),
                    at(k + 1)
                )));
            }
        }
        let lowest = heights.iter().copied().fold(f64::INFINITY, f64::min);
        let highest = heights.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (tiles, tile_levels) = tile_pyramid(&heights, rows, cols);
        Ok(Heightfield { heights, rows, cols, spacing, origin, lowest, highest, tiles, tile_levels })
    }

    /// Rows of samples.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of samples.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Distance between neighbouring samples.
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// Where sample (0, 0) lies (x, y).
    pub fn origin(&self) -> [f64; 2] {
        self.origin
    }

    /// The heights, row-major.
    pub fn heights(&self) -> &[f64] {
        &self.heights
    }

    /// The box of its samples: its corners' x and y, its lowest and highest heights.
    pub fn bounds(&self) -> (V3, V3) {
        let far = self.vertex(self.rows - 1, self.cols - 1);
        ([self.origin[0], self.origin[1], self.lowest], [far[0], far[1], self.highest])
    }

    /// The lowest and highest heights of the tiles of level `level` (from 1) holding the
    /// squares `s`.
    #[inline(always)]
    pub(crate) fn tile_heights(&self, level: usize, s: &Squares) -> [f64; 2] {
        let shift = TILE_BITS * level as u32;
        let (start, cols) = self.tile_levels[level - 1];
        let mut b = [f64::INFINITY, f64::NEG_INFINITY];
        for i in s.r0 >> shift..=s.r1 >> shift {
            for j in s.c0 >> shift..=s.c1 >> shift {
                let t = self.tiles[start + i as usize * cols + j as usize];
                b = [b[0].min(t[0]), b[1].max(t[1])];
            }
        }
        b
    }

    /// Levels of tiles: the last has one tile.
    pub(crate) fn tile_levels(&self) -> usize {
        self.tile_levels.len()
    }

    /// The tiles' lowest and highest heights, level after level (`tile_heights`).
    pub(crate) fn tiles(&self) -> &[[f64; 2]] {
        &self.tiles
    }

    /// Two per square.
    pub fn triangle_count(&self) -> usize {
        2 * (self.rows - 1) * (self.cols - 1)
    }

    /// Sample (r, c) as a point (the CUDA collider computes it alike, op for op).
    #[inline(always)]
    pub fn vertex(&self, r: usize, c: usize) -> V3 {
        [
            self.origin[0] + c as f64 * self.spacing,
            self.origin[1] + r as f64 * self.spacing,
            self.heights[r * self.cols + c],
        ]
    }

    /// The corners of triangle `t` (< `triangle_count()`).
    #[inline(always)]
    pub fn triangle(&self, t: u32) -> [V3; 3] {
        let q = (t / 2) as usize;
        let (r, c) = (q / (self.cols - 1), q % (self.cols - 1));
        if t % 2 == 0 {
            [self.vertex(r, c), self.vertex(r, c + 1), self.vertex(r + 1, c + 1)]
        } else {
            [self.vertex(r, c), self.vertex(r + 1, c + 1), self.vertex(r + 1, c)]
        }
    }

    /// The two triangles of square (r, c), 2q and 2q + 1, as `triangle` gives them.
    #[inline(always)]
    pub(crate) fn square(&self, r: usize, c: usize) -> [[V3; 3]; 2] {
        let (a, b) = (self.vertex(r, c), self.vertex(r, c + 1));
        let (d, e) = (self.vertex(r + 1, c + 1), self.vertex(r + 1, c));
        [[a, b, d], [a, d, e]]
    }

    /// The same terrain as a triangle mesh (the same triangles, in the same order).
    pub fn to_mesh(&self) -> Mesh<f64> {
        let mut vertices = Points::with_capacity(self.rows * self.cols);
        for r in 0..self.rows {
            for c in 0..self.cols {
                let p = self.vertex(r, c);
                vertices.push(p[0], p[1], p[2]);
            }
        }
        let cols = self.cols as u32;
        let mut triangles = Vec::with_capacity(self.triangle_count());
        for r in 0..self.rows as u32 - 1 {
            for c in 0..cols - 1 {
                let v = r * cols + c;
                triangles.push([v, v + 1, v + cols + 1]);
                triangles.push([v, v + cols + 1, v + cols]);
            }
        }
        Mesh { vertices, triangles }
    }

    /// The squares whose sides' x and y ranges, as `vertex` computes them, meet the box
    /// [lo, hi]; `None` when the box is beside the terrain. Samples lie in order along each
    /// axis, so these are a run of columns and a run of rows: the division's guess, moved
    /// while a neighbouring square still meets the box (or its own does not).
    #[inline(always)]
    pub(crate) fn squares(&self, lo: &V3, hi: &V3) -> Option<Squares> {
        let span = |lo: f64, hi: f64, origin: f64, n: usize| -> Option<(u32, u32)> {
            let last = (n - 2) as f64;
            let at = |k: f64| origin + k * self.spacing;
            let mut a = ((lo - origin) / self.spacing).floor().clamp(0.0, last);
            let mut b = ((hi - origin) / self.spacing).floor().clamp(0.0, last);
            while a > 0.0 && at(a) >= lo {
                a -= 1.0;
            }
            while a < last && at(a + 1.0) < lo {
                a += 1.0;
            }
            while b < last && at(b + 1.0) <= hi {
                b += 1.0;
            }
            while b > 0.0 && at(b) > hi {
                b -= 1.0;
            }
            (at(a + 1.0) >= lo && at(b) <= hi && a <= b).then_some((a as u32, b as u32))
        };
        let (c0, c1) = span(lo[0], hi[0], self.origin[0], self.cols)?;
        let (r0, r1) = span(lo[1], hi[1], self.origin[1], self.rows)?;
        Some(Squares { c0, c1, r0, r1 })
    }

    /// Offers `f` each triangle (ascending) of the squares under the box [lo, hi] whose
    /// box meets it, with its corners.
    #[inline]
    pub(crate) fn overlapping(&self, lo: &V3, hi: &V3, mut f: impl FnMut(u32, [V3; 3])) {
        let Some(s) = self.squares(lo, hi) else { return };
        let cols1 = (self.cols - 1) as u32;
        for r in s.r0..=s.r1 {
            for c in s.c0..=s.c1 {
                for k in 0..2 {
                    let t = 2 * (r * cols1 + c) + k;
                    let corners = self.triangle(t);
                    let meets = (0..3).all(|a| {
                        let tlo = corners[0][a].min(corners[1][a]).min(corners[2][a]);
                        let thi = corners[0][a].max(corners[1][a]).max(corners[2][a]);
                        lo[a] <= thi && tlo <= hi[a]
                    });
                    if meets {
                        f(t, corners);
                    }
                }
            }
        }
    }
}

/// The tiles of every level (`Heightfield::tiles`) and where each level starts and its
/// columns: level 1 from the samples, each next from eight by eight tiles of the one before,
/// up to a level of one tile.
fn tile_pyramid(heights: &[f64], rows: usize, cols: usize) -> (Vec<[f64; 2]>, Vec<(usize, usize)>) {
    let t = 1usize << TILE_BITS;
    let (mut trows, mut tcols) = ((rows - 1).div_ceil(t), (cols - 1).div_ceil(t));
    let mut tiles: Vec<[f64; 2]> = (0..trows * tcols)
        .into_par_iter()
        .with_min_len(64)
        .map(|k| {
            let (i, j) = (k / tcols, k % tcols);
            let mut b = [f64::INFINITY, f64::NEG_INFINITY];
            for r in i * t..=((i + 1) * t).min(rows - 1) {
                for &h in &heights[r * cols + j * t..=r * cols + ((j + 1) * t).min(cols - 1)] {
                    b = [b[0].min(h), b[1].max(h)];
                }
            }
            b
        })
        .collect();
    let mut levels = vec![(0, tcols)];
    while trows * tcols > 1 {
        let (start, below_rows, below_cols) = (levels.last().expect("one").0, trows, tcols);
        (trows, tcols) = (trows.div_ceil(t), tcols.div_ceil(t));
        let next: Vec<[f64; 2]> = (0..trows * tcols)
            .map(|k| {
                let (i, j) = (k / tcols, k % tcols);
                let mut b = [f64::INFINITY, f64::NEG_INFINITY];
                for r in i * t..((i + 1) * t).min(below_rows) {
                    for c in j * t..((j + 1) * t).min(below_cols) {
                        let x = tiles[start + r * below_cols + c];
                        b = [b[0].min(x[0]), b[1].max(x[1])];
                    }
                }
                b
            })
            .collect();
        levels.push((tiles.len(), tcols));
        tiles.extend(next);
    }
    // Fewer than 2^30 squares: a side of at most 2^30, 8^10 squares.
    assert!(levels.len() <= MAX_TILE_LEVELS, "{} levels of tiles", levels.len());
    (tiles, levels)
}
