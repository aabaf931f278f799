//! A collision world for a game server (seed B): ellipsoid bodies moving every tick against
//! a static triangle mesh and each other.
//!
//! - [`World`] holds the mesh and the bodies (structure of arrays); add, remove, move them.
//! - A [`Collider`] (CPU or CUDA, switchable between ticks) finds every contact of a world,
//!   or the first hit of swept bodies; both give the same contacts, bit for bit.
//! - Broad phase: a hashed uniform grid ([`hash_grid`]); the CPU collider keeps per-body
//!   candidate lists from tick to tick on top of it (`cpu::candidate_lists`). Narrow phase, exact:
//!   [`contact_ellipsoid_triangle`], [`contact_ellipsoid_ellipsoid`],
//!   [`sweep_ellipsoid_triangle`]. Everything is f64, with positions relative to the body,
//!   so a world 100 km across keeps sub-millimetre precision.
//!
//! ```
//! use nearkit::collide::{Body, Collider, World};
//! use nearkit::{Device, Mesh, Points};
//! let mut world = World::new(1.0).unwrap();
//! let ground = Mesh {
//!     vertices: Points::from_rows(&[[-10.0, -10.0, 0.0], [10.0, -10.0, 0.0], [0.0, 10.0, 0.0]]),
//!     triangles: vec![[0, 1, 2]],
//! };
//! world.set_mesh(&ground).unwrap();
//! world.add_body(Body::sphere([0.0, 0.0, 0.4], 0.5)).unwrap();
//! let (mut collider, _) = Collider::open(Device::Cpu).unwrap();
//! let contacts = collider.contacts(&world).unwrap();
//! assert_eq!(contacts.len(), 1);
//! assert!((contacts[0].depth - 0.1).abs() < 1e-12);
//! ```

// `!(x < 1)` and the like are meant: a NaN must fail the test, not pass it.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod box_f32;
pub mod contact_ellipsoid_ellipsoid;
pub mod contact_ellipsoid_triangle;
pub mod ellipsoid;
pub mod hash_grid;
pub mod scene;
pub mod sweep_ellipsoid_triangle;
pub mod world;

pub use contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
pub use contact_ellipsoid_triangle::{contact_ellipsoid_triangle, ContactGeometry};
pub use ellipsoid::Shape;
pub use sweep_ellipsoid_triangle::{sweep_ellipsoid_triangle, SweepHit};
pub use world::{Body, BodyId, Contact, ContactKind, Contacts, PackedContact, Sweep, SweepResult, World};

use crate::device::Device;
use crate::error::{Error, Result};

pub(crate) fn check_center(body: usize, c: ellipsoid::V3) -> Result<()> {
    if c.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("body {body}: its center {c:?} is not finite")))
    }
}

/// Where contacts are computed. The world is the same for both; switching between ticks is
/// allowed (the CUDA collider re-uploads what changed since it last ran).
pub enum Collider {
    Cpu(Box<crate::cpu::collide::CpuCollider>),
    Cuda(Box<crate::cuda::CudaCollider>),
}

impl Collider {
    /// `auto` picks CUDA when usable (the note says why not otherwise).
    pub fn open(device: Device) -> Result<(Collider, Option<String>)> {
        match crate::device::Engine::open(device)? {
            (crate::device::Engine::Cpu(_), note) => Ok((Collider::cpu(), note)),
            (crate::device::Engine::Cuda(be), note) => {
                Ok((Collider::Cuda(Box::new(crate::cuda::CudaCollider::new(be)?)), note))
            }
        }
    }

    pub fn cpu() -> Collider {
        Collider::Cpu(Box::default())
    }

    pub fn describe(&self) -> String {
        match self {
            Collider::Cpu(_) => format!("CPU ({} threads)", rayon::current_num_threads()),
            Collider::Cuda(c) => c.describe(),
        }
    }

    /// Every contact, sorted by (body, kind, other): a view of this collider's buffer, valid
    /// until its next tick. This is the fast path (nothing is copied or unpacked).
    pub fn contacts_packed<'a>(&'a mut self, world: &'a World) -> Result<Contacts<'a>> {
        let packed: &[PackedContact] = match self {
            Collider::Cpu(c) => c.contacts(world)?,
            Collider::Cuda(c) => c.contacts_packed(world)?,
        };
        Ok(Contacts::new(packed, world))
    }

    /// Every contact, sorted by (body, kind, other), unpacked.
    pub fn contacts(&mut self, world: &World) -> Result<Vec<Contact>> {
        Ok(self.contacts_packed(world)?.to_vec())
    }

    /// Each sweep's first hit on the static mesh.
    pub fn sweeps(&mut self, world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
        match self {
            Collider::Cpu(_) => crate::cpu::collide::sweeps(world, sweeps),
            Collider::Cuda(c) => c.sweeps(world, sweeps),
        }
    }
}
