//! `Collider`: where a world's contacts are computed, the CPU or a GPU, chosen at run time.

use super::cpu::{sweeps as cpu_sweeps, CpuCollider};
use super::cuda::CudaCollider;
use super::overlap::{overlaps_cpu, Overlap, Overlaps};
use super::ray_cast::{Ray, RayCaster, RayHit, RayHits};
use super::world::{Contact, Contacts, InstancePart, PackedContact, Sweep, SweepResult, World};
use crate::device::Engine;
use crate::error::Result;

/// How a collider runs. Tuning and testing only: the contacts are the same whatever they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColliderOptions {
    /// CPU: run the portable code even where the CPU has AVX2.
    pub portable_code: bool,
    /// CUDA: replay a tick as one captured CUDA graph, instead of launching its kernels one by
    /// one.
    pub cuda_graphs: bool,
    /// CUDA: the tick's last kernel writes the contacts straight into page-locked host memory,
    /// instead of a copy after the tick.
    pub zero_copy: bool,
    /// CUDA: bodies a warp of the contact kernel takes (1 to 8); `None` picks about 32 cells'
    /// worth from the bodies' sizes.
    pub bodies_per_warp: Option<usize>,
    /// Print each tick's (and each GPU ray batch's) phase times to stderr.
    pub profile: bool,
}

impl Default for ColliderOptions {
    fn default() -> Self {
        Self { portable_code: false, cuda_graphs: true, zero_copy: true, bodies_per_warp: None, profile: false }
    }
}

/// Where contacts are computed. The world is the same for both; switching between ticks is
/// allowed (a CUDA collider uploads what changed since it last ran). It also casts rays
/// into the world, keeping what it built for them (the mesh's tree) from call to call.
pub struct Collider(Backend, RayCaster);

enum Backend {
    Cpu(Box<CpuCollider>),
    Cuda(Box<CudaCollider>),
}

impl Collider {
    /// A collider on the engine's device (the CPU, or its GPU).
    pub fn new(engine: &Engine, opts: &ColliderOptions) -> Result<Collider> {
        Ok(match engine.gpu() {
            None => Collider(
                Backend::Cpu(Box::new(CpuCollider::new(opts.portable_code, opts.profile))),
                RayCaster::new(None, opts.portable_code),
            ),
            Some(gpu) => Collider(
                Backend::Cuda(Box::new(CudaCollider::new(gpu.clone(), opts)?)),
                RayCaster::new(Some(gpu), false).with_profile(opts.profile),
            ),
        })
    }

    /// A CPU collider with the default options.
    pub fn cpu() -> Collider {
        Collider(Backend::Cpu(Box::new(CpuCollider::new(false, false))), RayCaster::new(None, false))
    }

    /// `CPU (N threads)` or the GPU's description.
    pub fn describe(&self) -> String {
        match &self.0 {
            Backend::Cpu(_) => format!("CPU ({} threads)", rayon::current_num_threads()),
            Backend::Cuda(c) => c.describe(),
        }
    }

    /// Whether this collider runs on a GPU.
    pub fn is_cuda(&self) -> bool {
        matches!(self.0, Backend::Cuda(_))
    }

    /// Every contact, sorted by (body, kind, other): a view of this collider's buffer, valid
    /// until its next tick. This is the fast path (nothing is copied or unpacked).
    pub fn contacts_packed<'a>(&'a mut self, world: &'a World) -> Result<Contacts<'a>> {
        let (packed, parts): (&[PackedContact], &[InstancePart]) = match &mut self.0 {
            Backend::Cpu(c) => c.contacts(world)?,
            Backend::Cuda(c) => c.contacts_packed(world)?,
        };
        Ok(Contacts::new(packed, parts, world))
    }

    /// Every contact, sorted by (body, kind, other), unpacked.
    pub fn contacts(&mut self, world: &World) -> Result<Vec<Contact>> {
        Ok(self.contacts_packed(world)?.to_vec())
    }

    /// Each query's overlaps (mesh, heightfield and instances' triangles, bodies), sorted by
    /// (kind, id, triangle), the first `limit` (1 to `OVERLAP_LIMIT_MAX`) kept; the same on
    /// every backend.
    pub fn overlaps(&mut self, world: &World, queries: &[Overlap], limit: usize) -> Result<Overlaps> {
        match &mut self.0 {
            Backend::Cpu(_) => overlaps_cpu(world, queries, limit),
            Backend::Cuda(c) => c.overlaps(world, queries, limit),
        }
    }

    /// Each sweep's first hit on the static mesh, the heightfield, a body or an instance (see
    /// [`SweepResult`] for the order of equal times).
    pub fn sweeps(&mut self, world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
        match &mut self.0 {
            Backend::Cpu(_) => cpu_sweeps(world, sweeps),
            Backend::Cuda(c) => c.sweeps(world, sweeps),
        }
    }

    /// Each ray's first hit on the static mesh, the heightfield, a body or an instance
    /// (`None`: it hits nothing within its `max_distance`); at equal distances the mesh comes
    /// first, then the heightfield, then bodies, then instances, then the smaller id and
    /// triangle. Exact (a brute force over every triangle and body finds the same), and the same
    /// bits on the CPU and CUDA. See [`Ray`] for what a ray hits, and [`RayHit`] for what a
    /// hit holds.
    pub fn ray_casts(&mut self, world: &World, rays: &[Ray]) -> Result<Vec<Option<RayHit>>> {
        let mut out = Vec::new();
        self.1.first_hits_into(world, rays, &mut out)?;
        Ok(out)
    }

    /// [`Collider::ray_casts`] into `out` (cleared first): a server casting every tick keeps
    /// one vector, whose memory is then reused instead of found afresh (on a GPU, the rays and
    /// hits also go through page-locked buffers the collider keeps). On an error `out` is
    /// left empty.
    pub fn ray_casts_into(&mut self, world: &World, rays: &[Ray], out: &mut Vec<Option<RayHit>>) -> Result<()> {
        let r = self.1.first_hits_into(world, rays, out);
        if r.is_err() {
            out.clear();
        }
        r
    }

    /// Every ray's hits within its `max_distance`, sorted by (distance, kind, id), at most
    /// `limit` a ray (its nearest), in rows (see [`RayHits`]).
    pub fn ray_casts_all(&mut self, world: &World, rays: &[Ray], limit: usize) -> Result<RayHits> {
        self.1.all_hits(world, rays, limit)
    }
}
