//! `NkCollider`: where a world's contacts, sweeps, overlaps and ray casts are computed
//! (nearkit's `Collider`).

use std::ffi::{c_char, CString};

use nearkit_core::collide::{
    BodyId, Collider, ColliderOptions, Contact, ContactKind, Overlap, Ray, RayHit, Sweep, SweepResult,
};
use nearkit_core::{Device, Engine};

use crate::status::{guard, out_ok, put, slice, slice_mut, Fail, NkStatus, Outcome};
use crate::world::{world_ref, NkWorld};

/// Where a collider runs: one of the `NK_DEVICE_*` values.
pub type NkDevice = u32;
/// The CPU, all cores.
pub const NK_DEVICE_CPU: NkDevice = 0;
/// A CUDA GPU; `NK_STATUS_NO_CUDA` where none is usable.
pub const NK_DEVICE_CUDA: NkDevice = 1;
/// A CUDA GPU where one is usable, else the CPU.
pub const NK_DEVICE_AUTO: NkDevice = 2;

/// What an `NkContact`'s `other` names: one of the `NK_CONTACT_*` values. Contacts come
/// sorted by (body, kind, other), in the order of these values.
pub type NkContactKind = u32;
/// A triangle of the static mesh.
pub const NK_CONTACT_TRIANGLE: NkContactKind = 0;
/// A triangle of the heightfield terrain.
pub const NK_CONTACT_HEIGHTFIELD: NkContactKind = 1;
/// Another body.
pub const NK_CONTACT_BODY: NkContactKind = 2;
/// A triangle of an instance (`other`/`id`: the instance; `triangle`: its shape's triangle).
pub const NK_CONTACT_INSTANCE: NkContactKind = 3;

/// No triangle or body: `NkSweepResult.other` and `NkRayHit.id` when nothing is hit, and
/// `NkSweep.ignore` when the sweep ignores no body.
pub const NK_NO_ID: u32 = u32::MAX;

/// How a collider runs; `nk_collider_options_default` fills in the defaults. Apart from the
/// device, these are tuning and testing knobs: the contacts are the same whatever they are.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NkColliderOptions {
    /// `NK_DEVICE_CPU`, `NK_DEVICE_CUDA` or `NK_DEVICE_AUTO`.
    pub device: NkDevice,
    /// Which GPU, for `NK_DEVICE_CUDA` (0 is the first).
    pub gpu: u32,
    /// CPU: run the portable code even where the CPU has AVX2.
    pub portable_code: bool,
    /// CUDA: replay a tick as one captured CUDA graph.
    pub cuda_graphs: bool,
    /// CUDA: write the contacts straight into page-locked host memory.
    pub zero_copy: bool,
    /// Print each tick's phase times to stderr.
    pub profile: bool,
    /// CUDA: bodies a warp of the contact kernel takes (1 to 8); 0 picks from the bodies'
    /// sizes.
    pub bodies_per_warp: u32,
}

impl Default for NkColliderOptions {
    fn default() -> Self {
        let o = ColliderOptions::default();
        NkColliderOptions {
            device: NK_DEVICE_CPU,
            gpu: 0,
            portable_code: o.portable_code,
            cuda_graphs: o.cuda_graphs,
            zero_copy: o.zero_copy,
            profile: o.profile,
            bodies_per_warp: o.bodies_per_warp.map_or(0, |n| n as u32),
        }
    }
}

/// One overlap of a tick. For two bodies it is reported once, with `body` the smaller id.
/// `normal` (unit) moves `body` out of `other`, by `depth`; `point` is in world coordinates.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkContact {
    /// The body's id.
    pub body: u32,
    /// What `other` is: an `NK_CONTACT_*` value.
    pub kind: NkContactKind,
    /// The triangle's id, the other body's id or the instance's id.
    pub other: u32,
    /// The triangle touched in its own mesh: `other` for the mesh and the heightfield, the
    /// shape's triangle for an instance, `NK_NO_ID` for a body.
    pub triangle: u32,
    /// Unit normal that moves `body` out.
    pub normal: [f32; 3],
    /// How far `body` must move along `normal`.
    pub depth: f32,
    /// The contact point, in world coordinates.
    pub point: [f64; 3],
}

/// The code of a contact's kind.
#[inline(always)]
pub fn contact_kind_code(kind: ContactKind) -> NkContactKind {
    match kind {
        ContactKind::Triangle => NK_CONTACT_TRIANGLE,
        ContactKind::Heightfield => NK_CONTACT_HEIGHTFIELD,
        ContactKind::Body => NK_CONTACT_BODY,
        ContactKind::Instance => NK_CONTACT_INSTANCE,
    }
}

impl From<Contact> for NkContact {
    #[inline]
    fn from(c: Contact) -> NkContact {
        NkContact {
            body: c.body,
            kind: contact_kind_code(c.kind),
            other: c.other,
            triangle: c.triangle,
            normal: c.normal,
            depth: c.depth,
            point: c.point,
        }
    }
}

/// A swept query (a shape cast): a body of semi-axes `radii`, turned by `orientation` all the
/// way, moving its center from `from` to `to`, against the static mesh, the heightfield and
/// the bodies. It meets the mesh and the heightfield when `mask` meets the world's mesh
/// layer, and a body when `mask` meets the body's layer; it passes through body `ignore`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkSweep {
    /// Semi-axes; positive.
    pub radii: [f64; 3],
    /// Quaternion (x, y, z, w); not zero.
    pub orientation: [f64; 4],
    /// The center at the start.
    pub from: [f64; 3],
    /// The center at the end.
    pub to: [f64; 3],
    /// The layers it meets (`0xFFFFFFFF`: all).
    pub mask: u32,
    /// A body it passes through, or `NK_NO_ID`.
    pub ignore: u32,
}

impl From<&NkSweep> for Sweep {
    fn from(s: &NkSweep) -> Sweep {
        let sweep = Sweep::new(s.radii, s.orientation, s.from, s.to).with_mask(s.mask);
        if s.ignore == NK_NO_ID {
            sweep
        } else {
            sweep.ignoring(BodyId(s.ignore))
        }
    }
}

/// A sweep's first contact, at `from + toi * (to - from)`. On equal times the mesh comes
/// first, then the heightfield, then bodies, then instances, then the smaller id and triangle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkSweepResult {
    /// Whether the sweep touches anything. If not, `toi` is 1, `other` is `NK_NO_ID`, and
    /// `point` and `normal` are zero.
    pub hit: bool,
    /// What it touches: `NK_CONTACT_TRIANGLE` (a triangle of the mesh),
    /// `NK_CONTACT_HEIGHTFIELD`, `NK_CONTACT_BODY` or `NK_CONTACT_INSTANCE`.
    pub kind: NkContactKind,
    /// The triangle's, the body's or the instance's id.
    pub other: u32,
    /// The triangle touched in its own mesh (as `NkContact.triangle`).
    pub triangle: u32,
    /// Time of impact, 0 to 1 along the sweep.
    pub toi: f64,
    /// Where, in world coordinates.
    pub point: [f64; 3],
    /// The unit normal there that pushes the sweeping body back.
    pub normal: [f64; 3],
}

impl From<Option<SweepResult>> for NkSweepResult {
    fn from(r: Option<SweepResult>) -> NkSweepResult {
        match r {
            Some(r) => NkSweepResult {
                hit: true,
                kind: contact_kind_code(r.kind),
                other: r.other,
                triangle: r.triangle,
                toi: r.toi,
                point: r.point,
                normal: r.normal,
            },
            None => NkSweepResult {
                hit: false,
                kind: NK_CONTACT_TRIANGLE,
                other: NK_NO_ID,
                triangle: NK_NO_ID,
                toi: 1.0,
                point: [0.0; 3],
                normal: [0.0; 3],
            },
        }
    }
}

/// A collider (opaque; see `nk_collider_new`): the CPU or a GPU, holding the contact buffer
/// that `nk_collider_contacts` points into.
pub struct NkCollider {
    collider: Collider,
    /// The last tick's contacts.
    contacts: Vec<NkContact>,
    /// The sweeps of the last call, kept for their memory.
    sweeps: Vec<Sweep>,
    /// The rays of the last call, kept for their memory.
    rays: Vec<Ray>,
    description: CString,
    poisoned: bool,
}

/// Runs `f` on the collider behind a handle, poisoning it if `f` panics.
///
/// # Safety
/// `c` is NULL or a live handle from `nk_collider_new`, used by nothing else meanwhile.
unsafe fn with_collider<R>(c: *mut NkCollider, f: impl FnOnce(&mut NkCollider) -> Outcome<R>) -> Outcome<R> {
    // SAFETY: the caller's promise.
    let c = unsafe { c.as_mut() }.ok_or_else(|| Fail::null("collider"))?;
    if c.poisoned {
        return Err(Fail::new(NkStatus::Poisoned, "the collider was poisoned by an earlier panic; free it"));
    }
    c.poisoned = true;
    let r = f(c);
    c.poisoned = false;
    r
}

/// Fills `*out` with the default options (the CPU).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_options_default(out: *mut NkColliderOptions) -> NkStatus {
    guard("nk_collider_options_default", || {
        out_ok(out, "out")?;
        // SAFETY: checked.
        unsafe { put(out, NkColliderOptions::default()) };
        Ok(())
    })
}

/// Makes a collider on `device` with the default options; see
/// `nk_collider_new_with_options`.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_new(device: NkDevice, out: *mut *mut NkCollider) -> NkStatus {
    let options = NkColliderOptions { device, ..NkColliderOptions::default() };
    // SAFETY: forwarded.
    unsafe { new_collider("nk_collider_new", &options, out) }
}

/// Makes a collider as `options` say (NULL: the defaults) and puts it in `*out` (NULL on
/// failure); free it with `nk_collider_free`. `NK_DEVICE_CUDA` where no GPU is usable fails
/// with `NK_STATUS_NO_CUDA` (the message says why); `NK_DEVICE_AUTO` then takes the CPU. A
/// collider may be used with any world, and several colliders with one world.
///
/// # Safety
/// `options` is NULL or points to an `NkColliderOptions`; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_new_with_options(
    options: *const NkColliderOptions,
    out: *mut *mut NkCollider,
) -> NkStatus {
    // SAFETY: the caller's promise.
    let options = unsafe { options.as_ref() }.copied().unwrap_or_default();
    unsafe { new_collider("nk_collider_new_with_options", &options, out) }
}

unsafe fn new_collider(function: &'static str, o: &NkColliderOptions, out: *mut *mut NkCollider) -> NkStatus {
    guard(function, || {
        out_ok(out, "out")?;
        // SAFETY: checked.
        unsafe { put(out, std::ptr::null_mut()) };
        let device = match o.device {
            NK_DEVICE_CPU => Device::Cpu,
            NK_DEVICE_CUDA => Device::Cuda(o.gpu as usize),
            NK_DEVICE_AUTO => Device::Auto,
            d => {
                return Err(Fail::invalid(format!(
                    "unknown device {d}: use NK_DEVICE_CPU (0), NK_DEVICE_CUDA (1) or NK_DEVICE_AUTO (2)"
                )))
            }
        };
        if o.bodies_per_warp > 8 {
            return Err(Fail::invalid(format!(
                "bodies_per_warp must be 0 (pick) or 1 to 8, got {}",
                o.bodies_per_warp
            )));
        }
        let options = ColliderOptions {
            portable_code: o.portable_code,
            cuda_graphs: o.cuda_graphs,
            zero_copy: o.zero_copy,
            bodies_per_warp: (o.bodies_per_warp > 0).then_some(o.bodies_per_warp as usize),
            profile: o.profile,
        };
        let collider = Collider::new(&Engine::open(device)?, &options)?;
        let description = CString::new(collider.describe().replace('\0', " ")).unwrap_or_default();
        let handle = Box::new(NkCollider {
            collider,
            contacts: Vec::new(),
            sweeps: Vec::new(),
            rays: Vec::new(),
            description,
            poisoned: false,
        });
        unsafe { put(out, Box::into_raw(handle)) };
        Ok(())
    })
}

/// Frees a collider (NULL is allowed and does nothing), and with it its contact buffer.
///
/// # Safety
/// `collider` is NULL or a live handle from `nk_collider_new`, not used again after this.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_free(collider: *mut NkCollider) -> NkStatus {
    guard("nk_collider_free", || {
        if !collider.is_null() {
            // SAFETY: the caller hands the handle back.
            drop(unsafe { Box::from_raw(collider) });
        }
        Ok(())
    })
}

/// Whether the collider runs on a GPU, into `*out`.
///
/// # Safety
/// `collider` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_is_cuda(collider: *const NkCollider, out: *mut bool) -> NkStatus {
    guard("nk_collider_is_cuda", || unsafe {
        out_ok(out, "out")?;
        let c = collider.as_ref().ok_or_else(|| Fail::null("collider"))?;
        put(out, c.collider.is_cuda());
        Ok(())
    })
}

/// What the collider runs on (`CPU (N threads)` or the GPU's name), as a NUL-terminated
/// string into `*out`, owned by the collider and valid until it is freed.
///
/// # Safety
/// `collider` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_describe(collider: *const NkCollider, out: *mut *const c_char) -> NkStatus {
    guard("nk_collider_describe", || unsafe {
        out_ok(out, "out")?;
        let c = collider.as_ref().ok_or_else(|| Fail::null("collider"))?;
        put(out, c.description.as_ptr());
        Ok(())
    })
}

/// The tick: every contact of `world` now, sorted by (body, kind, other). `*out` receives a
/// pointer to `*len` contacts in the collider's own buffer, which stays valid and unchanged
/// until the next `nk_collider_contacts` call on this collider or its `nk_collider_free`,
/// whatever happens to the world meanwhile (copy what must outlive that). The buffer is
/// reused from tick to tick: it grows only when a tick has more contacts than any before.
/// `*out` may be NULL when `*len` is 0. On failure, `*out` is NULL and `*len` 0.
///
/// # Safety
/// `collider` and `world` are NULL or live handles; `out` and `len` are NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_contacts(
    collider: *mut NkCollider,
    world: *const NkWorld,
    out: *mut *const NkContact,
    len: *mut usize,
) -> NkStatus {
    guard("nk_collider_contacts", || unsafe {
        out_ok(out, "out")?;
        out_ok(len, "len")?;
        put(out, std::ptr::null());
        put(len, 0);
        let w = world_ref(world)?;
        let (ptr, n) = with_collider(collider, |c| {
            c.contacts.clear();
            let contacts = c.collider.contacts_packed(&w.world)?;
            c.contacts.try_reserve(contacts.len())?;
            c.contacts.extend(contacts.iter().map(NkContact::from));
            Ok((c.contacts.as_ptr(), c.contacts.len()))
        })?;
        put(out, ptr);
        put(len, n);
        Ok(())
    })
}

/// Each sweep's first hit on `world`'s static mesh: `results[i]` for `sweeps[i]`, i <
/// `count`. A world without a mesh gives no hits.
///
/// # Safety
/// `sweeps` and `results` are NULL (with `count` 0) or point to `count` values;
/// `collider` and `world` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_sweeps(
    collider: *mut NkCollider,
    world: *const NkWorld,
    sweeps: *const NkSweep,
    count: usize,
    results: *mut NkSweepResult,
) -> NkStatus {
    guard("nk_collider_sweeps", || unsafe {
        let input = slice(sweeps, count, "sweeps")?;
        let output = slice_mut(results, count, "results")?;
        let w = world_ref(world)?;
        with_collider(collider, |c| {
            c.sweeps.clear();
            c.sweeps.try_reserve(count)?;
            c.sweeps.extend(input.iter().map(Sweep::from));
            let hits = c.collider.sweeps(&w.world, &c.sweeps)?;
            if hits.len() != count {
                return Err(Fail::new(NkStatus::Panic, format!("{} results for {count} sweeps", hits.len())));
            }
            for (o, h) in output.iter_mut().zip(hits) {
                *o = h.into();
            }
            Ok(())
        })
    })
}

/// An overlap query: an ellipsoid (a sphere with equal radii) and the layers it looks for.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkOverlap {
    /// Its center.
    pub center: [f64; 3],
    /// Semi-axes (a box's half extents) along its own x, y and z; positive.
    pub radii: [f64; 3],
    /// Quaternion (x, y, z, w); the identity is (0, 0, 0, 1).
    pub orientation: [f64; 4],
    /// It overlaps the mesh and the heightfield when `mask` meets the world's mesh layer,
    /// and a body when `mask` meets the body's layer.
    pub mask: u32,
    /// `NK_OVERLAP_ELLIPSOID` (0: an ellipsoid, or a sphere) or `NK_OVERLAP_BOX`.
    pub shape: u32,
}

/// `NkOverlap.shape`: an ellipsoid of semi-axes `radii`.
pub const NK_OVERLAP_ELLIPSOID: u32 = 0;
/// `NkOverlap.shape`: a box of half extents `radii`.
pub const NK_OVERLAP_BOX: u32 = 1;

/// One thing an overlap query overlaps.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NkOverlapHit {
    /// An `NK_CONTACT_*` value.
    pub kind: NkContactKind,
    /// The triangle's, the body's or the instance's id.
    pub id: u32,
    /// The triangle in its own mesh (as `NkContact.triangle`).
    pub triangle: u32,
}

/// What each query overlaps (exact tests, an ellipsoid's the contacts'; touching is not
/// overlapping):
/// `hits[i * limit ..]` receives query i's first `min(totals[i], limit)` hits, sorted by
/// (kind, id), and `totals[i]` how many there are in all. `limit` is 1 to 64.
///
/// # Safety
/// `queries` and `totals` are NULL (with `count` 0) or point to `count` values, `hits` to
/// `count * limit`; `collider` and `world` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_overlaps(
    collider: *mut NkCollider,
    world: *const NkWorld,
    queries: *const NkOverlap,
    count: usize,
    limit: usize,
    hits: *mut NkOverlapHit,
    totals: *mut u32,
) -> NkStatus {
    guard("nk_collider_overlaps", || unsafe {
        let input = slice(queries, count, "queries")?;
        let cells =
            count.checked_mul(limit).ok_or_else(|| Fail::new(NkStatus::InvalidArgument, "count * limit overflows"))?;
        let out_hits = slice_mut(hits, cells, "hits")?;
        let out_totals = slice_mut(totals, count, "totals")?;
        let w = world_ref(world)?;
        with_collider(collider, |c| {
            let qs = input
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let make = match q.shape {
                        NK_OVERLAP_ELLIPSOID => Overlap::ellipsoid,
                        NK_OVERLAP_BOX => Overlap::cuboid,
                        s => {
                            return Err(nearkit_core::Error::InvalidArgument(format!(
                            "overlap query {i}: shape {s} is neither NK_OVERLAP_ELLIPSOID (0) nor NK_OVERLAP_BOX (1)"
                        )))
                        }
                    };
                    Ok(make(q.center, q.radii, q.orientation).with_mask(q.mask))
                })
                .collect::<nearkit_core::Result<Vec<Overlap>>>()?;
            let found = c.collider.overlaps(&w.world, &qs, limit)?;
            for i in 0..count {
                out_totals[i] = found.total[i];
                for (k, (kind, id, triangle)) in found.row_triangles(i).enumerate() {
                    out_hits[i * limit + k] = NkOverlapHit { kind: contact_kind_code(kind), id, triangle };
                }
            }
            Ok(())
        })
    })
}

/// A ray: the points `origin + t * direction / |direction|` for t from 0 to `max_distance`
/// (distances are in world units whatever the direction's length).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkRay {
    /// Where it starts.
    pub origin: [f64; 3],
    /// Which way it goes: finite and not zero.
    pub direction: [f64; 3],
    /// How far it reaches: 0 or more; `INFINITY` for no limit.
    pub max_distance: f64,
    /// It hits the mesh when `mask` meets the world's mesh layer, and a body when `mask`
    /// meets the body's layer; the heightfield as the mesh.
    pub mask: u32,
}

impl From<&NkRay> for Ray {
    fn from(r: &NkRay) -> Ray {
        Ray { origin: r.origin, direction: r.direction, max_distance: r.max_distance, mask: r.mask }
    }
}

/// Where a ray meets a triangle of the mesh or of the heightfield, or a body.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkRayHit {
    /// Whether the ray hits anything. If not, `id` is `NK_NO_ID`, `distance` is
    /// `INFINITY`, and `point` and `normal` are zero.
    pub hit: bool,
    /// What was hit: `NK_CONTACT_TRIANGLE`, `NK_CONTACT_HEIGHTFIELD`, `NK_CONTACT_BODY` or
    /// `NK_CONTACT_INSTANCE`.
    pub kind: NkContactKind,
    /// The triangle's index in the mesh or the heightfield, the body's id, or the instance's.
    pub id: u32,
    /// The triangle hit in its own mesh (as `NkContact.triangle`).
    pub triangle: u32,
    /// The distance from the ray's origin (0 for a ray that starts inside a body).
    pub distance: f64,
    /// The hit point, `origin + distance * unit direction`.
    pub point: [f64; 3],
    /// The unit surface normal there, facing the ray.
    pub normal: [f64; 3],
}

impl From<Option<RayHit>> for NkRayHit {
    fn from(h: Option<RayHit>) -> NkRayHit {
        match h {
            Some(h) => NkRayHit {
                hit: true,
                kind: contact_kind_code(h.kind),
                id: h.id,
                triangle: h.triangle,
                distance: h.distance,
                point: h.point,
                normal: h.normal,
            },
            None => NkRayHit {
                hit: false,
                kind: NK_CONTACT_TRIANGLE,
                id: NK_NO_ID,
                triangle: NK_NO_ID,
                distance: f64::INFINITY,
                point: [0.0; 3],
                normal: [0.0; 3],
            },
        }
    }
}

/// Each ray's first hit on the mesh, the heightfield and the bodies, exact (the same bits on
/// the CPU and a GPU): `results[i]` for `rays[i]`. Ties go to the mesh's triangles, then the
/// heightfield's, then bodies, then smaller ids. A
/// bad ray (not finite, a zero direction, a negative or NaN `max_distance`) fails the call,
/// naming it.
///
/// # Safety
/// `rays` and `results` are NULL (with `count` 0) or point to `count` values; `collider` and
/// `world` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_ray_casts(
    collider: *mut NkCollider,
    world: *const NkWorld,
    rays: *const NkRay,
    count: usize,
    results: *mut NkRayHit,
) -> NkStatus {
    guard("nk_collider_ray_casts", || unsafe {
        let input = slice(rays, count, "rays")?;
        let output = slice_mut(results, count, "results")?;
        let w = world_ref(world)?;
        with_collider(collider, |c| {
            c.rays.clear();
            c.rays.try_reserve(count)?;
            c.rays.extend(input.iter().map(Ray::from));
            let hits = c.collider.ray_casts(&w.world, &c.rays)?;
            if hits.len() != count {
                return Err(Fail::new(NkStatus::Panic, format!("{} results for {count} rays", hits.len())));
            }
            for (o, h) in output.iter_mut().zip(hits) {
                *o = h.into();
            }
            Ok(())
        })
    })
}

/// Each ray's hits in order, nearest first (by distance, then the mesh, the heightfield,
/// bodies, then smaller ids): `hits[i * limit ..]` receives ray i's first `counts[i]` hits, at most
/// `limit` (1 or more).
///
/// # Safety
/// `rays` and `counts` are NULL (with `count` 0) or point to `count` values, `hits` to
/// `count * limit`; `collider` and `world` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn nk_collider_ray_casts_all(
    collider: *mut NkCollider,
    world: *const NkWorld,
    rays: *const NkRay,
    count: usize,
    limit: usize,
    hits: *mut NkRayHit,
    counts: *mut u32,
) -> NkStatus {
    guard("nk_collider_ray_casts_all", || unsafe {
        if limit == 0 || limit > u32::MAX as usize {
            return Err(Fail::new(NkStatus::InvalidArgument, format!("limit {limit} must be 1 to 2^32 - 1")));
        }
        let input = slice(rays, count, "rays")?;
        let cells =
            count.checked_mul(limit).ok_or_else(|| Fail::new(NkStatus::InvalidArgument, "count * limit overflows"))?;
        let out_hits = slice_mut(hits, cells, "hits")?;
        let out_counts = slice_mut(counts, count, "counts")?;
        let w = world_ref(world)?;
        with_collider(collider, |c| {
            c.rays.clear();
            c.rays.try_reserve(count)?;
            c.rays.extend(input.iter().map(Ray::from));
            let found = c.collider.ray_casts_all(&w.world, &c.rays, limit)?;
            if found.len() != count {
                return Err(Fail::new(NkStatus::Panic, format!("{} rows for {count} rays", found.len())));
            }
            for i in 0..count {
                let row = found.row(i);
                out_counts[i] = row.len() as u32;
                for (k, h) in row.iter().enumerate() {
                    out_hits[i * limit + k] = Some(*h).into();
                }
            }
            Ok(())
        })
    })
}
