//! `TriangleBvh`: the index of a mesh's triangles for closest-point queries. Triangles are
//! sorted on the Morton curve of their centroids and a binary radix tree is built over the
//! codes (Karras 2012, as `MortonTree` does for points), so every node is a Morton cell's run
//! of triangles. Each internal node stores an `OrientedBox` of its triangles.
//!
//! Why oriented boxes: a query at distance D above a surface tilted against the axes reaches
//! every axis-aligned leaf box within about √(2·D·t) of its foot point (t the boxes'
//! thickness). A box along the patch's mean normal is as thin as the patch is flat, so its
//! bound is nearly the distance itself. Around the bunny (1.5× box queries) this cut the
//! triangles tested per query from 161 to about 55. Corners are stored per sorted triangle,
//! structure of arrays.

use rayon::prelude::*;

use crate::geometry::mesh::Mesh;
use crate::geometry::morton::MortonFrame;
use crate::geometry::real::Real;
use crate::geometry::vec3::{cross, dot, normalize, sub};
use crate::tree::radix::{radix_topology, sort_by_key};
use crate::tree::CHILD_POINT;

/// A node of at most this many triangles is scanned rather than descended.
pub const TRIANGLE_LEAF: usize = 4;

/// A node whose summed (area-weighted) normal is at least this share of its area is boxed
/// along that normal; a more curved one gets the principal axes of its corners.
pub(crate) const FLAT_ENOUGH: f64 = 0.7;

/// A box along three (near-)orthonormal axes: the corners of a node's triangles x satisfy
/// `lo[k] ≤ x·axis[k] ≤ hi[k]`. One record (16 values) so a node's bound is one load.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrientedBox<T> {
    /// `axes[k * 3 + a]`: component a of axis k.
    pub axes: [T; 9],
    pub lo: [T; 3],
    pub hi: [T; 3],
    pub pad: T,
}

impl<T: Real> OrientedBox<T> {
    /// A lower bound of the squared distance from `q` to the box. Rounding can raise it by a
    /// few ulps of |q|, which the search's slack covers. The CUDA kernel repeats it op for op.
    #[inline(always)]
    pub fn lower_bound(&self, q: [T; 3]) -> T {
        let mut s = T::ZERO;
        for k in 0..3 {
            let a = &self.axes[k * 3..k * 3 + 3];
            let p = q[0] * a[0] + q[1] * a[1] + q[2] * a[2];
            let g = (self.lo[k] - p).max(p - self.hi[k]).max(T::ZERO);
            s = s + g * g;
        }
        s
    }

    /// The box of the triangles at sorted positions `s..e`, computed in f64 on the axes as
    /// rounded to T, then widened outward by a few ulps so that the projections of its
    /// corners, rounded in T, still fall inside.
    fn of_triangles(corners: &[[Vec<T>; 3]; 3], s: usize, e: usize) -> Self {
        let at = |k: usize, t: usize| -> [f64; 3] { std::array::from_fn(|a| corners[k][a][t].to_f64()) };
        let frame = frame_of(&at, s, e);
        let axes: [T; 9] = std::array::from_fn(|i| T::from_f64(frame[i / 3][i % 3]));
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        // The largest |x|₁ of a corner: a projection rounded in T is off by a few ulps of it.
        let mut norm1 = 0.0f64;
        for t in s..e {
            for k in 0..3 {
                let x = at(k, t);
                norm1 = norm1.max(x[0].abs() + x[1].abs() + x[2].abs());
                for j in 0..3 {
                    let p = dot(x, std::array::from_fn(|a| axes[j * 3 + a].to_f64()));
                    lo[j] = lo[j].min(p);
                    hi[j] = hi[j].max(p);
                }
            }
        }
        let eps = if T::NAME == "f32" { f32::EPSILON as f64 } else { f64::EPSILON };
        let widen = |j: usize| (lo[j].abs() + hi[j].abs() + norm1) * eps * 4.0;
        Self {
            axes,
            lo: std::array::from_fn(|j| T::from_f64(lo[j] - widen(j))),
            hi: std::array::from_fn(|j| T::from_f64(hi[j] + widen(j))),
            pad: T::ZERO,
        }
    }
}

/// `u / |u|`; NaN for a zero vector, which `frame_of` then replaces by the box axes.
fn unit(u: [f64; 3]) -> [f64; 3] {
    normalize(u).unwrap_or([f64::NAN; 3])
}

/// Orthonormal axes for the triangles `s..e` (corner k of triangle t is `at(k, t)`): the mean
/// normal and the principal axes within its plane for a flat enough patch, else the
/// principal axes of the corners (the box axes when those are degenerate).
fn frame_of(at: &dyn Fn(usize, usize) -> [f64; 3], s: usize, e: usize) -> [[f64; 3]; 3] {
    let (mut nsum, mut area) = ([0.0f64; 3], 0.0f64);
    let (mut mean, mut m) = ([0.0f64; 3], 0.0f64);
    for t in s..e {
        let (a, b, c) = (at(0, t), at(1, t), at(2, t));
        let n = cross(sub(b, a), sub(c, a));
        area += dot(n, n).sqrt();
        for i in 0..3 {
            nsum[i] += n[i];
            mean[i] += a[i] + b[i] + c[i];
        }
        m += 3.0;
    }
    let mean = mean.map(|v| v / m);
    // Covariance of the corners about their mean.
    let mut cov = [[0.0f64; 3]; 3];
    for t in s..e {
        for k in 0..3 {
            let d = sub(at(k, t), mean);
            for i in 0..3 {
                for j in 0..3 {
                    cov[i][j] += d[i] * d[j];
                }
            }
        }
    }
    let nl = dot(nsum, nsum).sqrt();
    let axes = if nl > 0.0 && nl >= FLAT_ENOUGH * area {
        let n = nsum.map(|v| v / nl);
        // Any tangent u, then rotate (u, v) to the principal axes of the corners in the plane.
        let k = (0..3).min_by(|&i, &j| n[i].abs().total_cmp(&n[j].abs())).unwrap_or(0);
        let mut ax = [0.0; 3];
        ax[k] = 1.0;
        let u = unit(sub(ax, n.map(|v| v * dot(ax, n))));
        let v = cross(n, u);
        let quad = |x: [f64; 3], y: [f64; 3]| -> f64 {
            (0..3).map(|i| (0..3).map(|j| x[i] * cov[i][j] * y[j]).sum::<f64>()).sum()
        };
        let th = 0.5 * (2.0 * quad(u, v)).atan2(quad(u, u) - quad(v, v));
        let (c, sn) = (th.cos(), th.sin());
        let u2 = unit(std::array::from_fn(|i| u[i] * c + v[i] * sn));
        [u2, cross(n, u2), n]
    } else {
        principal_axes(cov)
    };
    if axes.iter().flatten().all(|v| v.is_finite()) {
        axes
    } else {
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    }
}

/// Eigenvectors of a symmetric 3×3 matrix by cyclic Jacobi rotations, orthonormalised.
fn principal_axes(mut a: [[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for _ in 0..12 {
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            if a[p][q].abs() <= 1e-300 {
                continue;
            }
            let th = 0.5 * (2.0 * a[p][q]).atan2(a[q][q] - a[p][p]);
            let (c, s) = (th.cos(), th.sin());
            // A ← Jᵀ A J with J the rotation in the (p, q) plane; V ← V J.
            for k in 0..3 {
                let (akp, akq) = (a[k][p], a[k][q]);
                a[k][p] = c * akp - s * akq;
                a[k][q] = s * akp + c * akq;
            }
            for k in 0..3 {
                let (apk, aqk) = (a[p][k], a[q][k]);
                a[p][k] = c * apk - s * aqk;
                a[q][k] = s * apk + c * aqk;
            }
            for row in v.iter_mut() {
                let (vp, vq) = (row[p], row[q]);
                row[p] = c * vp - s * vq;
                row[q] = s * vp + c * vq;
            }
        }
    }
    // Columns of v are the eigenvectors.
    let e0 = unit([v[0][0], v[1][0], v[2][0]]);
    let e1 = unit(sub([v[0][1], v[1][1], v[2][1]], e0.map(|x| x * dot([v[0][1], v[1][1], v[2][1]], e0))));
    [e0, e1, cross(e0, e1)]
}

#[derive(Clone, Debug, PartialEq)]
pub struct TriangleBvh<T> {
    /// `ids[s]`: the mesh triangle at sorted position `s`.
    pub ids: Vec<u32>,
    /// `corners[k][axis][s]`: corner k (0, 1, 2) of sorted triangle s.
    pub corners: [[Vec<T>; 3]; 3],
    /// Internal nodes (`n - 1`; node 0 is the root): children (`CHILD_POINT` marks a single
    /// triangle), the far end of the node's sorted range, and the box of its triangles.
    pub left: Vec<u32>,
    pub right: Vec<u32>,
    pub other_end: Vec<u32>,
    pub boxes: Vec<OrientedBox<T>>,
}

impl<T: Real> TriangleBvh<T> {
    /// The index of `mesh`, which must have been validated (`Mesh::validate`).
    pub fn build(mesh: &Mesh<T>) -> Self {
        let n = mesh.triangles.len();
        let (lo, hi) = mesh.vertices.bounds();
        let frame = MortonFrame::from_bounds(lo, hi);
        let third = T::from_f64(1.0 / 3.0);
        let keyed: Vec<(u64, u32)> = (0..n)
            .into_par_iter()
            .map(|t| {
                let c = mesh.corners(t);
                let m = |a: usize| (c[0][a] + c[1][a] + c[2][a]) * third;
                (frame.code(m(0), m(1), m(2)), t as u32)
            })
            .collect();
        let (keyed, _) = sort_by_key(keyed);
        let keys: Vec<u64> = keyed.iter().map(|&(k, _)| k).collect();
        let ids: Vec<u32> = keyed.into_iter().map(|(_, t)| t).collect();
        let corners: [[Vec<T>; 3]; 3] = std::array::from_fn(|k| {
            std::array::from_fn(|a| ids.iter().map(|&t| mesh.corners(t as usize)[k][a]).collect())
        });
        let (left, right, other_end) = radix_topology(&keys);
        // Each node's box straight from its range: the ranges' total length is n × depth.
        let boxes = other_end
            .par_iter()
            .enumerate()
            .map(|(i, &j)| OrientedBox::of_triangles(&corners, i.min(j as usize), i.max(j as usize) + 1))
            .collect();
        Self { ids, left, right, other_end, boxes, corners }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Sorted-triangle range `[start, end)` of internal node `i`.
    #[inline(always)]
    pub fn range(&self, i: usize) -> (usize, usize) {
        let j = self.other_end[i] as usize;
        (i.min(j), i.max(j) + 1)
    }

    /// Corners of the triangle at sorted position `s`.
    #[inline(always)]
    pub fn triangle(&self, s: usize) -> [[T; 3]; 3] {
        std::array::from_fn(|k| [self.corners[k][0][s], self.corners[k][1][s], self.corners[k][2][s]])
    }

    /// A lower bound of the squared distance from `q` to internal node `i`'s triangles.
    #[inline(always)]
    pub fn lower_bound(&self, i: usize, q: [T; 3]) -> T {
        self.boxes[i].lower_bound(q)
    }

    /// Whether child reference `c` is a single triangle (its sorted position) or a node.
    #[inline(always)]
    pub fn child(c: u32) -> Result<usize, usize> {
        if c & CHILD_POINT != 0 {
            Ok((c & !CHILD_POINT) as usize)
        } else {
            Err(c as usize)
        }
    }
}

/// Children per node of a `WideBvh`, and most triangles in one of its leaves: the GPU search
/// gives each query this many lanes, one child or one triangle each.
pub const WIDE: usize = 8;

/// A child reference of a `WideBvh` node: a node index, or (`WIDE_LEAF` set) a run of
/// `((c >> 28) & 7) + 1` sorted triangles from `c & WIDE_START`; `WIDE_EMPTY` for no child.
pub const WIDE_LEAF: u32 = 1 << 31;
pub const WIDE_START: u32 = (1 << 28) - 1;
pub const WIDE_EMPTY: u32 = u32::MAX;

/// The `TriangleBvh` collapsed to nodes of up to `WIDE` children (each binary node is expanded,
/// largest range first, until it has `WIDE` descendants), for the GPU: a node's children's
/// boxes lie together, so a query's lanes load them in one coalesced read.
#[derive(Clone, Debug, PartialEq)]
pub struct WideBvh<T> {
    /// `boxes[node * WIDE + c]`, `children[node * WIDE + c]`: child c of a node (node 0 is the
    /// root). An empty slot's box is all zeros.
    pub boxes: Vec<OrientedBox<T>>,
    pub children: Vec<u32>,
    /// Nodes on the longest root-to-leaf path: a depth-first search holds at most
    /// `1 + (WIDE - 1) · depth` entries.
    pub depth: usize,
}

impl<T: Real> WideBvh<T> {
    /// `None` when the mesh has 2^28 triangles or more (a leaf's start would not fit).
    pub fn of(bvh: &TriangleBvh<T>) -> Option<Self> {
        let n = bvh.len();
        if n as u64 > WIDE_START as u64 {
            return None;
        }
        #[derive(Clone, Copy)]
        enum Ref {
            Node(usize),
            Single(usize),
        }
        let range = |r: Ref| match r {
            Ref::Node(i) => bvh.range(i),
            Ref::Single(s) => (s, s + 1),
        };
        let expandable = |r: Ref| matches!(r, Ref::Node(_)) && range(r).1 - range(r).0 > WIDE;
        let empty = OrientedBox { axes: [T::ZERO; 9], lo: [T::ZERO; 3], hi: [T::ZERO; 3], pad: T::ZERO };
        let mut out = Self { boxes: Vec::new(), children: Vec::new(), depth: 1 };
        if n == 0 {
            out.boxes = vec![empty; WIDE];
            out.children = vec![WIDE_EMPTY; WIDE];
            return Some(out);
        }
        let root = if n == 1 { Ref::Single(0) } else { Ref::Node(0) };
        // Breadth first: (binary ref, depth); a node's index is its place in this queue.
        let mut queue = vec![(root, 1usize)];
        let mut next = 0;
        while next < queue.len() {
            let (r, depth) = queue[next];
            next += 1;
            out.depth = out.depth.max(depth);
            let mut frontier = vec![r];
            while frontier.len() < WIDE {
                let Some(k) = (0..frontier.len())
                    .filter(|&k| expandable(frontier[k]))
                    .max_by_key(|&k| (range(frontier[k]).1 - range(frontier[k]).0, usize::MAX - k))
                else {
                    break;
                };
                let Ref::Node(i) = frontier[k] else { unreachable!() };
                let kid = |c: u32| match TriangleBvh::<T>::child(c) {
                    Ok(s) => Ref::Single(s),
                    Err(j) => Ref::Node(j),
                };
                frontier.splice(k..k + 1, [kid(bvh.left[i]), kid(bvh.right[i])]);
            }
            for slot in 0..WIDE {
                let Some(&c) = frontier.get(slot) else {
                    out.boxes.push(empty);
                    out.children.push(WIDE_EMPTY);
                    continue;
                };
                let (s, e) = range(c);
                out.boxes.push(match c {
                    Ref::Node(i) => bvh.boxes[i],
                    Ref::Single(s) => OrientedBox::of_triangles(&bvh.corners, s, s + 1),
                });
                out.children.push(if expandable(c) {
                    queue.push((c, depth + 1));
                    (queue.len() - 1) as u32
                } else {
                    WIDE_LEAF | (((e - s - 1) as u32) << 28) | s as u32
                });
            }
        }
        Some(out)
    }
}
