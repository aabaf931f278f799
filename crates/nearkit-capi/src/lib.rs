//! The C API of nearkit's collision world: `libnearkit_c.a` / `libnearkit_c.so` and
//! `include/nearkit.h` (generated from this crate by cbindgen; C99 and C++).
//!
//! - `NkWorld` (nearkit's `World`): the static triangle mesh and the ellipsoid bodies; add,
//!   remove and move them (`nk_world_*`).
//! - `NkCollider` (nearkit's `Collider`): the CPU or a CUDA GPU; every contact of a tick
//!   (`nk_collider_contacts`), batched sweeps (`nk_collider_sweeps`), overlap queries
//!   (`nk_collider_overlaps`) and ray casts (`nk_collider_ray_casts`, `..._all`).
//!
//! Conventions, for every `nk_` function:
//!
//! - It returns an [`NkStatus`]; on failure `nk_last_error_message()` says why (a message per
//!   thread) and the call changed nothing. Results go to output pointers.
//! - No Rust panic crosses into C: a panic (a bug) becomes `NK_STATUS_PANIC` and poisons the
//!   handles the call was given (`NK_STATUS_POISONED` from then on; free them). Rust's
//!   default panic hook also prints the panic to stderr. (A build with `panic = "abort"`
//!   aborts instead.)
//! - Pointers are checked for NULL (and alignment); an array may be NULL when its count is 0.
//!   Arrays of points are flat: x, y, z doubles, and quaternions x, y, z, w.
//! - Handles are not thread-safe: use each from one thread at a time (any thread). Calls
//!   that take a `const` handle only read it, and may run beside each other on one handle.
//! - Memory nearkit cannot get is `NK_STATUS_OUT_OF_MEMORY` where this crate allocates (the
//!   contact buffer, copies of inputs); deeper in the library it aborts, as Rust does.
//!
//! ```c
//! NkWorld* world; NkCollider* collider; const NkContact* contacts; size_t n; uint32_t id;
//! nk_world_new(1.0, &world);
//! nk_world_set_mesh(world, vertices, vertex_count, triangles, triangle_count);
//! double c[3] = {0, 0, 1}, r[3] = {0.5, 0.3, 0.8}, q[4] = {0, 0, 0, 1};
//! nk_world_add_ellipsoid(world, c, r, q, 1, 0xffffffffu, &id);
//! if (nk_collider_new(NK_DEVICE_CPU, &collider) != NK_STATUS_OK) puts(nk_last_error_message());
//! nk_collider_contacts(collider, world, &contacts, &n);   // valid until the next call
//! ```

#![warn(missing_docs)]
// `!(x > 0)` and the like are meant: a NaN must fail the test, not pass it.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

mod collider;
mod status;
mod world;

use std::ffi::c_char;

pub use collider::{
    contact_kind_code, nk_collider_contacts, nk_collider_describe, nk_collider_free, nk_collider_is_cuda,
    nk_collider_new, nk_collider_new_with_options, nk_collider_options_default, nk_collider_overlaps,
    nk_collider_ray_casts, nk_collider_ray_casts_all, nk_collider_sweeps, NkCollider, NkColliderOptions, NkContact,
    NkContactKind, NkDevice, NkOverlap, NkOverlapHit, NkRay, NkRayHit, NkSweep, NkSweepResult, NK_CONTACT_BODY,
    NK_CONTACT_HEIGHTFIELD, NK_CONTACT_INSTANCE, NK_CONTACT_TRIANGLE, NK_DEVICE_AUTO, NK_DEVICE_CPU, NK_DEVICE_CUDA,
    NK_NO_ID, NK_OVERLAP_BOX, NK_OVERLAP_ELLIPSOID,
};
pub use status::NkStatus;
pub use world::{
    nk_world_add_body, nk_world_add_ellipsoid, nk_world_add_instance, nk_world_add_instances, nk_world_add_shape,
    nk_world_add_sphere, nk_world_body_count, nk_world_free, nk_world_get_body, nk_world_integrate, nk_world_new,
    nk_world_remove_body, nk_world_remove_instance, nk_world_remove_shape, nk_world_set_heightfield,
    nk_world_set_instances, nk_world_set_layers, nk_world_set_mesh, nk_world_set_mesh_layer, nk_world_set_pose,
    nk_world_set_poses, nk_world_set_velocity, nk_world_triangle_count, NkBody, NkPlacement, NkWorld,
};

/// The message of the last call that failed on this thread, NUL-terminated (empty if none
/// has). It is owned by the library and valid until the next `nk_` call on this thread.
#[no_mangle]
pub extern "C" fn nk_last_error_message() -> *const c_char {
    status::last_error_message()
}

/// The name of a status (`"NK_STATUS_OK"`, ...), a static string; `"NK_STATUS_UNKNOWN"` for
/// a value that is none.
#[no_mangle]
pub extern "C" fn nk_status_name(status: i32) -> *const c_char {
    use NkStatus::*;
    [Ok, InvalidArgument, NullPointer, NoSuchBody, OutOfMemory, NoCuda, CudaError, Panic, Poisoned]
        .into_iter()
        .find(|s| *s as i32 == status)
        .map_or(c"NK_STATUS_UNKNOWN".as_ptr(), |s| s.name().as_ptr())
}

/// This library's version (`"0.1.0"`), a static string.
#[no_mangle]
pub extern "C" fn nk_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests;
