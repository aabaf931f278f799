//! A collision world for a game server: ellipsoid bodies moving every tick against
//! a static triangle mesh, a heightfield terrain, mesh instances and each other.
//!
//! - [`World`] holds the mesh, a [`Heightfield`] (a terrain kept as its heights), shapes
//!   placed as rigid instances (`instance`: each shape's grid and tree in its own frame, a
//!   tree over the instances' boxes) and the bodies (structure of arrays); add, remove, move
//!   them.
//! - A [`Collider`] (CPU or CUDA, switchable between ticks) finds every contact of a world,
//!   or the first hit of swept bodies; both give the same contacts, bit for bit.
//! - Broad phase: hashed uniform grids, for the bodies (`hash_grid`) and, a level per size of
//!   triangle, for the mesh (`level_grid`); a heightfield finds its triangles by arithmetic
//!   (`heightfield`). The CPU collider keeps per-body
//!   candidate lists from tick to tick on top of it (`cpu::candidate_lists`). Narrow phase,
//!   exact: `contact_ellipsoid_triangle`, `contact_ellipsoid_ellipsoid`,
//!   `sweep_ellipsoid_triangle`, `sweep_ellipsoid_ellipsoid`. Everything is f64, with positions relative to the body, so a
//!   world 100 km across keeps sub-millimetre precision.
//! - `cpu` and `cuda` (with `collide.cu` beside it) are the two colliders; `collider` picks
//!   one; `scene` makes the benchmark scenes.
//!
//! ```
//! use nearkit::collide::{Body, Collider, World};
//! use nearkit::{Mesh, Points};
//! let mut world = World::new(1.0).unwrap();
//! let ground = Mesh {
//!     vertices: Points::from_rows(&[[-10.0, -10.0, 0.0], [10.0, -10.0, 0.0], [0.0, 10.0, 0.0]]),
//!     triangles: vec![[0, 1, 2]],
//! };
//! world.set_mesh(&ground).unwrap();
//! world.add_body(Body::sphere([0.0, 0.0, 0.4], 0.5)).unwrap();
//! let mut collider = Collider::cpu();
//! let contacts = collider.contacts(&world).unwrap();
//! assert_eq!(contacts.len(), 1);
//! assert!((contacts[0].depth - 0.1).abs() < 1e-12);
//! ```

// `!(x < 1)` and the like are meant: a NaN must fail the test, not pass it.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub(crate) mod body_grid;
pub(crate) mod box_f32;
pub(crate) mod box_tree;
mod collider;
pub(crate) mod contact_ellipsoid_ellipsoid;
pub(crate) mod contact_ellipsoid_triangle;
pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod ellipsoid;
pub(crate) mod hash_grid;
mod heightfield;
pub(crate) mod instance;
pub(crate) mod level_grid;
mod overlap;
pub(crate) mod overlap_cuboid;
pub(crate) mod ray_cast;
pub mod scene;
mod static_mesh;
pub(crate) mod sweep_ellipsoid_ellipsoid;
pub(crate) mod sweep_ellipsoid_triangle;
mod world;

pub use collider::{Collider, ColliderOptions};
pub use heightfield::Heightfield;
pub use instance::{InstanceId, Placement, ShapeId};
pub use overlap::{Overlap, OverlapShape, Overlaps, OVERLAP_LIMIT_MAX};
pub use ray_cast::{Ray, RayHit, RayHits};
pub use world::{Body, BodyId, Contact, ContactKind, Contacts, Sweep, SweepResult, World, NO_ID};
