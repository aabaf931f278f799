//! `NkWorld`: the static mesh and the ellipsoid bodies (nearkit's `World`).

use nearkit_core::collide::{Body, BodyId, Heightfield, InstanceId, Placement, ShapeId, World};
use nearkit_core::{Mesh, Points};

use crate::status::{array, guard, out_ok, put, slice, slice_mut, Fail, NkStatus, Outcome};

/// A collision world: a static triangle mesh and ellipsoid bodies (opaque; see
/// `nk_world_new`). Coordinates are doubles, in metres by convention.
pub struct NkWorld {
    pub(crate) world: World,
    /// Set while a call runs; still set after a panic in it.
    pub(crate) poisoned: bool,
}

/// A body as `nk_world_add_body` takes it and `nk_world_get_body` gives it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkBody {
    /// The center (x, y, z), in world coordinates.
    pub center: [f64; 3],
    /// Semi-axes along the body's own x, y and z; positive.
    pub radii: [f64; 3],
    /// Quaternion (x, y, z, w) turning the body's axes into the world's; need not be of unit
    /// length, but not zero. The identity is (0, 0, 0, 1).
    pub orientation: [f64; 4],
    /// The velocity `nk_world_integrate` moves the body by.
    pub velocity: [f64; 3],
    /// The layer bits the body is in.
    pub layer: u32,
    /// The layers it collides with: two bodies collide when each one's layer meets the
    /// other's mask; a body collides with the mesh when its mask meets the mesh's layer.
    pub mask: u32,
}

impl From<NkBody> for Body {
    fn from(b: NkBody) -> Body {
        Body { velocity: b.velocity, ..Body::ellipsoid(b.center, b.radii, b.orientation).with_layers(b.layer, b.mask) }
    }
}

impl From<Body> for NkBody {
    fn from(b: Body) -> NkBody {
        NkBody {
            center: b.center,
            radii: b.radii,
            orientation: b.orientation,
            velocity: b.velocity,
            layer: b.layer,
            mask: b.mask,
        }
    }
}

/// The world behind a handle, to read.
///
/// # Safety
/// `w` is NULL or a live handle from `nk_world_new`, not written during `'a`.
pub(crate) unsafe fn world_ref<'a>(w: *const NkWorld) -> Outcome<&'a NkWorld> {
    // SAFETY: the caller's promise.
    let w = unsafe { w.as_ref() }.ok_or_else(|| Fail::null("world"))?;
    if w.poisoned {
        return Err(Fail::new(NkStatus::Poisoned, "the world was poisoned by an earlier panic; free it"));
    }
    Ok(w)
}

/// Runs `f` on the world behind a handle, poisoning it if `f` panics.
///
/// # Safety
/// `w` is NULL or a live handle from `nk_world_new`, used by nothing else meanwhile.
unsafe fn with_world<R>(w: *mut NkWorld, f: impl FnOnce(&mut NkWorld) -> Outcome<R>) -> Outcome<R> {
    // SAFETY: the caller's promise.
    unsafe { world_ref(w) }?;
    let w = unsafe { &mut *w };
    w.poisoned = true;
    let r = f(w);
    w.poisoned = false;
    r
}

/// The id, if it names a live body.
fn alive(world: &World, id: u32) -> Outcome<BodyId> {
    if world.bodies().alive.get(id as usize).copied().unwrap_or(false) {
        Ok(BodyId(id))
    } else {
        Err(Fail::new(NkStatus::NoSuchBody, format!("there is no body {id} (never added, or removed)")))
    }
}

/// The checks `World::set_pose` makes, made up front so that a batch is all or nothing.
fn check_pose(i: usize, center: &[f64; 3], q: &[f64; 4]) -> Outcome {
    if !center.iter().all(|v| v.is_finite()) {
        return Err(Fail::invalid(format!("pose {i}: center {center:?} is not finite")));
    }
    let n2: f64 = q.iter().map(|v| v * v).sum();
    if !(n2.is_finite() && n2 > 1e-12) {
        return Err(Fail::invalid(format!(
            "pose {i}: orientation {q:?} is not a usable quaternion (x, y, z, w); the identity is (0, 0, 0, 1)"
        )));
    }
    Ok(())
}

/// Makes an empty world whose broad-phase grid has cubic cells of `cell_size` (1 m suits
/// human-sized bodies; cells should be about the size of a body). `*out` receives the handle
/// (NULL on failure); free it with `nk_world_free`.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_new(cell_size: f64, out: *mut *mut NkWorld) -> NkStatus {
    guard("nk_world_new", || {
        out_ok(out, "out")?;
        // SAFETY: checked.
        unsafe { put(out, std::ptr::null_mut()) };
        let world = World::new(cell_size)?;
        let handle = Box::new(NkWorld { world, poisoned: false });
        unsafe { put(out, Box::into_raw(handle)) };
        Ok(())
    })
}

/// Frees a world (NULL is allowed and does nothing). Colliders that ran on it stay valid.
///
/// # Safety
/// `world` is NULL or a live handle from `nk_world_new`, not used again after this.
#[no_mangle]
pub unsafe extern "C" fn nk_world_free(world: *mut NkWorld) -> NkStatus {
    guard("nk_world_free", || {
        if !world.is_null() {
            // SAFETY: the caller hands the handle back.
            drop(unsafe { Box::from_raw(world) });
        }
        Ok(())
    })
}

/// Sets the static triangle mesh: `vertex_count` vertices as x, y, z doubles
/// (`3 * vertex_count` values) and `triangle_count` triangles as three 0-based vertex indices
/// each (`3 * triangle_count` values). Degenerate triangles are allowed. The arrays are
/// copied; a mesh set before is replaced. Triangle ids in contacts are positions in
/// `triangles`.
///
/// # Safety
/// `vertices` and `triangles` point to that many values.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_mesh(
    world: *mut NkWorld,
    vertices: *const f64,
    vertex_count: usize,
    triangles: *const u32,
    triangle_count: usize,
) -> NkStatus {
    guard("nk_world_set_mesh", || unsafe {
        with_world(world, |w| {
            let mesh = mesh_of(vertices, vertex_count, triangles, triangle_count)?;
            w.world.set_mesh(&mesh)?;
            Ok(())
        })
    })
}

/// A mesh copied from C arrays (see `nk_world_set_mesh`).
///
/// # Safety
/// `vertices` and `triangles` are NULL (with count 0) or point to that many values.
unsafe fn mesh_of(
    vertices: *const f64,
    vertex_count: usize,
    triangles: *const u32,
    triangle_count: usize,
) -> Result<Mesh<f64>, Fail> {
    // SAFETY: the caller's promise.
    let v = unsafe { slice(vertices.cast::<[f64; 3]>(), vertex_count, "vertices")? };
    // SAFETY: the caller's promise.
    let t = unsafe { slice(triangles.cast::<[u32; 3]>(), triangle_count, "triangles")? };
    let mut columns = [Vec::new(), Vec::new(), Vec::new()];
    for (a, col) in columns.iter_mut().enumerate() {
        col.try_reserve_exact(v.len())?;
        col.extend(v.iter().map(|p| p[a]));
    }
    let mut tris = Vec::new();
    tris.try_reserve_exact(t.len())?;
    tris.extend_from_slice(t);
    let [x, y, z] = columns;
    Ok(Mesh { vertices: Points::new(x, y, z)?, triangles: tris })
}

/// Where an instance is: shape `shape` (from `nk_world_add_shape`), its origin at
/// `position`, turned by quaternion `orientation` (x, y, z, w; not zero), its triangles in
/// `layer` (bodies and queries meet them when their mask meets it).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NkPlacement {
    /// The shape placed.
    pub shape: u32,
    /// Where the shape's origin goes, in world coordinates.
    pub position: [f64; 3],
    /// Quaternion (x, y, z, w) turning the shape's axes into the world's.
    pub orientation: [f64; 4],
    /// The layer bits of its triangles (1 by default elsewhere).
    pub layer: u32,
}

impl From<&NkPlacement> for Placement {
    fn from(p: &NkPlacement) -> Placement {
        Placement::new(ShapeId(p.shape), p.position, p.orientation).with_layer(p.layer)
    }
}

/// Adds a shape: a mesh in its own frame (arrays as for `nk_world_set_mesh`, copied), which
/// instances place in the world; it is gridded once however many instances place it. Its id
/// goes to `*out_shape`.
///
/// # Safety
/// `vertices` and `triangles` point to that many values; `out_shape` is writable; `world` is
/// NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_shape(
    world: *mut NkWorld,
    vertices: *const f64,
    vertex_count: usize,
    triangles: *const u32,
    triangle_count: usize,
    out_shape: *mut u32,
) -> NkStatus {
    guard("nk_world_add_shape", || unsafe {
        out_ok(out_shape, "out_shape")?;
        with_world(world, |w| {
            let mesh = mesh_of(vertices, vertex_count, triangles, triangle_count)?;
            let id = w.world.add_shape(&mesh)?;
            put(out_shape, id.0);
            Ok(())
        })
    })
}

/// Removes a shape that no instance places.
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_remove_shape(world: *mut NkWorld, shape: u32) -> NkStatus {
    guard("nk_world_remove_shape", || unsafe {
        with_world(world, |w| {
            w.world.remove_shape(ShapeId(shape))?;
            Ok(())
        })
    })
}

/// Places a shape (only the instances' top level is rebuilt); its id goes to `*out_id`.
/// Contacts, hits and overlaps with its triangles are of kind `NK_CONTACT_INSTANCE`.
///
/// # Safety
/// `placement` points to one value; `out_id` is writable; `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_instance(
    world: *mut NkWorld,
    placement: *const NkPlacement,
    out_id: *mut u32,
) -> NkStatus {
    guard("nk_world_add_instance", || unsafe {
        out_ok(out_id, "out_id")?;
        let p = slice(placement, 1, "placement")?;
        with_world(world, |w| {
            let id = w.world.add_instance(Placement::from(&p[0]))?;
            put(out_id, id.0);
            Ok(())
        })
    })
}

/// Places `count` shapes at once (one rebuild of the top level); their ids go to
/// `out_ids`. On a bad placement (named) none is placed.
///
/// # Safety
/// `placements` and `out_ids` are NULL (with `count` 0) or point to `count` values; `world`
/// is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_instances(
    world: *mut NkWorld,
    placements: *const NkPlacement,
    count: usize,
    out_ids: *mut u32,
) -> NkStatus {
    guard("nk_world_add_instances", || unsafe {
        let ps = slice(placements, count, "placements")?;
        let out = slice_mut(out_ids, count, "out_ids")?;
        with_world(world, |w| {
            let ps: Vec<Placement> = ps.iter().map(Placement::from).collect();
            for (o, id) in out.iter_mut().zip(w.world.add_instances(&ps)?) {
                *o = id.0;
            }
            Ok(())
        })
    })
}

/// New placements for `count` instances at once; on a bad id or placement nothing changes.
///
/// # Safety
/// `ids` and `placements` are NULL (with `count` 0) or point to `count` values; `world` is
/// NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_instances(
    world: *mut NkWorld,
    ids: *const u32,
    placements: *const NkPlacement,
    count: usize,
) -> NkStatus {
    guard("nk_world_set_instances", || unsafe {
        let ids = slice(ids, count, "ids")?;
        let ps = slice(placements, count, "placements")?;
        with_world(world, |w| {
            let ids: Vec<InstanceId> = ids.iter().map(|&i| InstanceId(i)).collect();
            let ps: Vec<Placement> = ps.iter().map(Placement::from).collect();
            w.world.set_instances(&ids, &ps)?;
            Ok(())
        })
    })
}

/// Removes an instance; its id is free for reuse.
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_remove_instance(world: *mut NkWorld, id: u32) -> NkStatus {
    guard("nk_world_remove_instance", || unsafe {
        with_world(world, |w| {
            w.world.remove_instance(InstanceId(id))?;
            Ok(())
        })
    })
}

/// Sets the terrain, kept as heights: `rows` × `cols` heights, row-major (rows along y),
/// `spacing` apart, sample (0, 0) at (`origin_x`, `origin_y`). Its contacts are of kind
/// `NK_CONTACT_HEIGHTFIELD`; square (r, c), q = r·(cols − 1) + c, holds triangles 2q
/// (v, v + 1, v + cols + 1) and 2q + 1 (v, v + cols + 1, v + cols), v = r·cols + c. The
/// heights are copied; a heightfield set before is replaced. It may sit beside a mesh.
///
/// # Safety
/// `heights` points to `rows * cols` values; `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_heightfield(
    world: *mut NkWorld,
    heights: *const f64,
    rows: usize,
    cols: usize,
    spacing: f64,
    origin_x: f64,
    origin_y: f64,
) -> NkStatus {
    guard("nk_world_set_heightfield", || unsafe {
        with_world(world, |w| {
            let n =
                rows.checked_mul(cols).ok_or_else(|| Fail::new(NkStatus::InvalidArgument, "rows * cols overflows"))?;
            let h = slice(heights, n, "heights")?;
            let mut v = Vec::new();
            v.try_reserve_exact(n)?;
            v.extend_from_slice(h);
            w.world.set_heightfield(Heightfield::new(v, rows, cols, spacing, [origin_x, origin_y])?)?;
            Ok(())
        })
    })
}

/// Sets the mesh's layer bits (default 1): bodies whose mask meets them collide with it.
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_mesh_layer(world: *mut NkWorld, layer: u32) -> NkStatus {
    guard("nk_world_set_mesh_layer", || unsafe {
        with_world(world, |w| {
            w.world.set_mesh_layer(layer);
            Ok(())
        })
    })
}

/// The number of triangles of the static mesh (0 without one), into `*out`.
///
/// # Safety
/// `world` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_triangle_count(world: *const NkWorld, out: *mut usize) -> NkStatus {
    guard("nk_world_triangle_count", || unsafe {
        out_ok(out, "out")?;
        put(out, world_ref(world)?.world.triangle_count());
        Ok(())
    })
}

/// Adds a body and puts its id in `*out_id` (ids of removed bodies are reused, lowest
/// first).
///
/// # Safety
/// `body` is NULL or points to an `NkBody`; `out_id` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_body(world: *mut NkWorld, body: *const NkBody, out_id: *mut u32) -> NkStatus {
    guard("nk_world_add_body", || unsafe {
        out_ok(out_id, "out_id")?;
        let body = *body.as_ref().ok_or_else(|| Fail::null("body"))?;
        let id = with_world(world, |w| Ok(w.world.add_body(body.into())?))?;
        put(out_id, id.0);
        Ok(())
    })
}

/// Adds a sphere of `radius` at `center` (3 doubles) in `layer`, colliding with `mask`, and
/// puts its id in `*out_id`.
///
/// # Safety
/// `center` is NULL or points to 3 doubles; `out_id` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_sphere(
    world: *mut NkWorld,
    center: *const f64,
    radius: f64,
    layer: u32,
    mask: u32,
    out_id: *mut u32,
) -> NkStatus {
    guard("nk_world_add_sphere", || unsafe {
        out_ok(out_id, "out_id")?;
        let center = array(center, "center")?;
        let body = Body::sphere(center, radius).with_layers(layer, mask);
        let id = with_world(world, |w| Ok(w.world.add_body(body)?))?;
        put(out_id, id.0);
        Ok(())
    })
}

/// Adds an ellipsoid of semi-axes `radii` (3 doubles, along its own axes), turned by the
/// quaternion `orientation` (x, y, z, w: 4 doubles), at `center` (3 doubles), in `layer`,
/// colliding with `mask`, and puts its id in `*out_id`.
///
/// # Safety
/// `center`, `radii` and `orientation` are NULL or point to 3, 3 and 4 doubles; `out_id` is
/// NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_add_ellipsoid(
    world: *mut NkWorld,
    center: *const f64,
    radii: *const f64,
    orientation: *const f64,
    layer: u32,
    mask: u32,
    out_id: *mut u32,
) -> NkStatus {
    guard("nk_world_add_ellipsoid", || unsafe {
        out_ok(out_id, "out_id")?;
        let body =
            Body::ellipsoid(array(center, "center")?, array(radii, "radii")?, array(orientation, "orientation")?)
                .with_layers(layer, mask);
        let id = with_world(world, |w| Ok(w.world.add_body(body)?))?;
        put(out_id, id.0);
        Ok(())
    })
}

/// Removes a body; its id becomes free for reuse.
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_remove_body(world: *mut NkWorld, id: u32) -> NkStatus {
    guard("nk_world_remove_body", || unsafe {
        with_world(world, |w| {
            let id = alive(&w.world, id)?;
            Ok(w.world.remove_body(id)?)
        })
    })
}

/// Copies body `id` into `*out`.
///
/// # Safety
/// `world` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_get_body(world: *const NkWorld, id: u32, out: *mut NkBody) -> NkStatus {
    guard("nk_world_get_body", || unsafe {
        out_ok(out, "out")?;
        let w = world_ref(world)?;
        let body = w.world.body(alive(&w.world, id)?).ok_or_else(|| Fail::new(NkStatus::NoSuchBody, "no body"))?;
        put(out, body.into());
        Ok(())
    })
}

/// Moves and turns one body: `center` (3 doubles), `orientation` (x, y, z, w: 4 doubles).
///
/// # Safety
/// `center` and `orientation` are NULL or point to 3 and 4 doubles.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_pose(
    world: *mut NkWorld,
    id: u32,
    center: *const f64,
    orientation: *const f64,
) -> NkStatus {
    guard("nk_world_set_pose", || unsafe {
        let (center, orientation) = (array(center, "center")?, array(orientation, "orientation")?);
        with_world(world, |w| {
            let id = alive(&w.world, id)?;
            Ok(w.world.set_pose(id, center, orientation)?)
        })
    })
}

/// The per-tick batch update: body `ids[i]` moves to `centers[3i..3i+3]` and turns to
/// `orientations[4i..4i+4]` (x, y, z, w), for i < `count`. All or nothing: if any id or pose
/// is bad, no body moves. The arrays are read in place (nothing is copied).
///
/// # Safety
/// `ids`, `centers` and `orientations` are NULL (with `count` 0) or point to `count`,
/// `3 * count` and `4 * count` values.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_poses(
    world: *mut NkWorld,
    ids: *const u32,
    centers: *const f64,
    orientations: *const f64,
    count: usize,
) -> NkStatus {
    guard("nk_world_set_poses", || unsafe {
        let ids = slice(ids, count, "ids")?;
        // [f64; 3] and [f64; 4] are laid out as 3 and 4 consecutive doubles.
        let centers = slice(centers.cast::<[f64; 3]>(), count, "centers")?;
        let orientations = slice(orientations.cast::<[f64; 4]>(), count, "orientations")?;
        with_world(world, |w| {
            // Everything is checked first, so that a bad pose moves no body; then the poses
            // are written through `World::poses_mut` (what `World::set_poses` does, without
            // checking them twice).
            let alive = &w.world.bodies().alive;
            for (i, ((&id, c), q)) in ids.iter().zip(centers).zip(orientations).enumerate() {
                check_pose(i, c, q)?;
                if !alive.get(id as usize).copied().unwrap_or(false) {
                    let message = format!("pose {i}: there is no body {id} (never added, or removed)");
                    return Err(Fail::new(NkStatus::NoSuchBody, message));
                }
            }
            let (all_centers, all_orientations) = w.world.poses_mut();
            for ((&id, c), q) in ids.iter().zip(centers).zip(orientations) {
                all_centers[id as usize] = *c;
                all_orientations[id as usize] = *q;
            }
            Ok(())
        })
    })
}

/// Sets the velocity (3 doubles) that `nk_world_integrate` moves body `id` by.
///
/// # Safety
/// `velocity` is NULL or points to 3 doubles.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_velocity(world: *mut NkWorld, id: u32, velocity: *const f64) -> NkStatus {
    guard("nk_world_set_velocity", || unsafe {
        let velocity = array(velocity, "velocity")?;
        with_world(world, |w| {
            let id = alive(&w.world, id)?;
            Ok(w.world.set_velocity(id, velocity)?)
        })
    })
}

/// Sets body `id`'s layer bits and the layers it collides with.
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_set_layers(world: *mut NkWorld, id: u32, layer: u32, mask: u32) -> NkStatus {
    guard("nk_world_set_layers", || unsafe {
        with_world(world, |w| {
            let id = alive(&w.world, id)?;
            Ok(w.world.set_layers(id, layer, mask)?)
        })
    })
}

/// Moves every body by its velocity over `dt` seconds. `NK_STATUS_INVALID_ARGUMENT`, with no
/// body moved, when `dt` is not finite or a body would leave the grid's range (the message
/// names the body).
///
/// # Safety
/// `world` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nk_world_integrate(world: *mut NkWorld, dt: f64) -> NkStatus {
    guard("nk_world_integrate", || unsafe { with_world(world, |w| Ok(w.world.integrate(dt)?)) })
}

/// The number of bodies alive, into `*out`.
///
/// # Safety
/// `world` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nk_world_body_count(world: *const NkWorld, out: *mut usize) -> NkStatus {
    guard("nk_world_body_count", || unsafe {
        out_ok(out, "out")?;
        put(out, world_ref(world)?.world.body_count());
        Ok(())
    })
}
