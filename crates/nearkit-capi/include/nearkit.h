/*
 * nearkit: the C API of the collision world (C99 and C++).
 *
 * Build: cargo build --release -p nearkit-capi, which makes target/release/libnearkit_c.a and
 * libnearkit_c.so. Link the static library with -lgcc_s -lutil -lrt -lpthread -lm -ldl after it.
 *
 * Conventions:
 * - Every function that can fail returns an NkStatus; on failure nk_last_error_message()
 *   says why (a message per thread) and the call changed nothing. Results go to output
 *   pointers, which are checked before any work is done.
 * - Pointers are checked for NULL and alignment; an array may be NULL when its count is 0.
 *   Points are 3 doubles (x, y, z), quaternions 4 (x, y, z, w), ids uint32_t.
 * - No Rust panic crosses into C: one (a bug) becomes NK_STATUS_PANIC and poisons the
 *   handles the call was given (NK_STATUS_POISONED from then on; free them).
 * - Handles are not thread-safe: use each from one thread at a time (any thread). Calls
 *   that take a const handle only read it and may run beside each other on one handle.
 */

#ifndef NEARKIT_H
#define NEARKIT_H

/* Generated from crates/nearkit-capi/src by cbindgen: do not edit. Regenerate with
 *   NEARKIT_BLESS=1 cargo test -p nearkit-capi --test header */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// No triangle or body: `NkSweepResult.other` and `NkRayHit.id` when nothing is hit, and
// `NkSweep.ignore` when the sweep ignores no body.
#define NK_NO_ID UINT32_MAX

// `NkOverlap.shape`: an ellipsoid of semi-axes `radii`.
#define NK_OVERLAP_ELLIPSOID 0

// `NkOverlap.shape`: a box of half extents `radii`.
#define NK_OVERLAP_BOX 1

// What a call did. Every `nk_` function that can fail returns one; on anything but
// `NK_STATUS_OK`, `nk_last_error_message()` says what went wrong and what to do, and the
// call changed nothing (its outputs are left as they were, except that a failed `*_new`
// sets its handle output to NULL).
typedef enum NkStatus {
    // Success.
    NK_STATUS_OK = 0,
    // A bad value: a non-finite coordinate, a radius that is not positive, a triangle that
    // names a missing vertex, an unknown device, a misaligned array, and so on.
    NK_STATUS_INVALID_ARGUMENT = 1,
    // A pointer that must not be NULL was NULL.
    NK_STATUS_NULL_POINTER = 2,
    // A body id that names no body (never added, or removed).
    NK_STATUS_NO_SUCH_BODY = 3,
    // The memory for a result could not be had.
    NK_STATUS_OUT_OF_MEMORY = 4,
    // CUDA was asked for, but no driver, NVRTC or GPU is usable here.
    NK_STATUS_NO_CUDA = 5,
    // The GPU or its driver failed.
    NK_STATUS_CUDA_ERROR = 6,
    // An internal error (a Rust panic, caught): a bug in nearkit. The handles the call was
    // given may be inconsistent; later calls on them return `NK_STATUS_POISONED`.
    NK_STATUS_PANIC = 7,
    // The handle was left unusable by an earlier `NK_STATUS_PANIC`; only freeing it works.
    NK_STATUS_POISONED = 8,
} NkStatus;

// A collider (opaque; see `nk_collider_new`): the CPU or a GPU, holding the contact buffer
// that `nk_collider_contacts` points into.
typedef struct NkCollider NkCollider;

// A collision world: a static triangle mesh and ellipsoid bodies (opaque; see
// `nk_world_new`). Coordinates are doubles, in metres by convention.
typedef struct NkWorld NkWorld;

// Where a collider runs: one of the `NK_DEVICE_*` values.
typedef uint32_t NkDevice;

// How a collider runs; `nk_collider_options_default` fills in the defaults. Apart from the
// device, these are tuning and testing knobs: the contacts are the same whatever they are.
typedef struct NkColliderOptions {
    // `NK_DEVICE_CPU`, `NK_DEVICE_CUDA` or `NK_DEVICE_AUTO`.
    NkDevice device;
    // Which GPU, for `NK_DEVICE_CUDA` (0 is the first).
    uint32_t gpu;
    // CPU: run the portable code even where the CPU has AVX2.
    bool portable_code;
    // CUDA: replay a tick as one captured CUDA graph.
    bool cuda_graphs;
    // CUDA: write the contacts straight into page-locked host memory.
    bool zero_copy;
    // Print each tick's phase times to stderr.
    bool profile;
    // CUDA: bodies a warp of the contact kernel takes (1 to 8); 0 picks from the bodies'
    // sizes.
    uint32_t bodies_per_warp;
} NkColliderOptions;

// What an `NkContact`'s `other` names: one of the `NK_CONTACT_*` values. Contacts come
// sorted by (body, kind, other), in the order of these values.
typedef uint32_t NkContactKind;

// One overlap of a tick. For two bodies it is reported once, with `body` the smaller id.
// `normal` (unit) moves `body` out of `other`, by `depth`; `point` is in world coordinates.
typedef struct NkContact {
    // The body's id.
    uint32_t body;
    // What `other` is: an `NK_CONTACT_*` value.
    NkContactKind kind;
    // The triangle's id, the other body's id or the instance's id.
    uint32_t other;
    // The triangle touched in its own mesh: `other` for the mesh and the heightfield, the
    // shape's triangle for an instance, `NK_NO_ID` for a body.
    uint32_t triangle;
    // Unit normal that moves `body` out.
    float normal[3];
    // How far `body` must move along `normal`.
    float depth;
    // The contact point, in world coordinates.
    double point[3];
} NkContact;

// A swept query (a shape cast): a body of semi-axes `radii`, turned by `orientation` all the
// way, moving its center from `from` to `to`, against the static mesh, the heightfield and
// the bodies. It meets the mesh and the heightfield when `mask` meets the world's mesh
// layer, and a body when `mask` meets the body's layer; it passes through body `ignore`.
typedef struct NkSweep {
    // Semi-axes; positive.
    double radii[3];
    // Quaternion (x, y, z, w); not zero.
    double orientation[4];
    // The center at the start.
    double from[3];
    // The center at the end.
    double to[3];
    // The layers it meets (`0xFFFFFFFF`: all).
    uint32_t mask;
    // A body it passes through, or `NK_NO_ID`.
    uint32_t ignore;
} NkSweep;

// A sweep's first contact, at `from + toi * (to - from)`. On equal times the mesh comes
// first, then the heightfield, then bodies, then instances, then the smaller id and triangle.
typedef struct NkSweepResult {
    // Whether the sweep touches anything. If not, `toi` is 1, `other` is `NK_NO_ID`, and
    // `point` and `normal` are zero.
    bool hit;
    // What it touches: `NK_CONTACT_TRIANGLE` (a triangle of the mesh),
    // `NK_CONTACT_HEIGHTFIELD`, `NK_CONTACT_BODY` or `NK_CONTACT_INSTANCE`.
    NkContactKind kind;
    // The triangle's, the body's or the instance's id.
    uint32_t other;
    // The triangle touched in its own mesh (as `NkContact.triangle`).
    uint32_t triangle;
    // Time of impact, 0 to 1 along the sweep.
    double toi;
    // Where, in world coordinates.
    double point[3];
    // The unit normal there that pushes the sweeping body back.
    double normal[3];
} NkSweepResult;

// An overlap query: an ellipsoid (a sphere with equal radii) and the layers it looks for.
typedef struct NkOverlap {
    // Its center.
    double center[3];
    // Semi-axes (a box's half extents) along its own x, y and z; positive.
    double radii[3];
    // Quaternion (x, y, z, w); the identity is (0, 0, 0, 1).
    double orientation[4];
    // It overlaps the mesh and the heightfield when `mask` meets the world's mesh layer,
    // and a body when `mask` meets the body's layer.
    uint32_t mask;
    // `NK_OVERLAP_ELLIPSOID` (0: an ellipsoid, or a sphere) or `NK_OVERLAP_BOX`.
    uint32_t shape;
} NkOverlap;

// One thing an overlap query overlaps.
typedef struct NkOverlapHit {
    // An `NK_CONTACT_*` value.
    NkContactKind kind;
    // The triangle's, the body's or the instance's id.
    uint32_t id;
    // The triangle in its own mesh (as `NkContact.triangle`).
    uint32_t triangle;
} NkOverlapHit;

// A ray: the points `origin + t * direction / |direction|` for t from 0 to `max_distance`
// (distances are in world units whatever the direction's length).
typedef struct NkRay {
    // Where it starts.
    double origin[3];
    // Which way it goes: finite and not zero.
    double direction[3];
    // How far it reaches: 0 or more; `INFINITY` for no limit.
    double max_distance;
    // It hits the mesh when `mask` meets the world's mesh layer, and a body when `mask`
    // meets the body's layer; the heightfield as the mesh.
    uint32_t mask;
} NkRay;

// Where a ray meets a triangle of the mesh or of the heightfield, or a body.
typedef struct NkRayHit {
    // Whether the ray hits anything. If not, `id` is `NK_NO_ID`, `distance` is
    // `INFINITY`, and `point` and `normal` are zero.
    bool hit;
    // What was hit: `NK_CONTACT_TRIANGLE`, `NK_CONTACT_HEIGHTFIELD`, `NK_CONTACT_BODY` or
    // `NK_CONTACT_INSTANCE`.
    NkContactKind kind;
    // The triangle's index in the mesh or the heightfield, the body's id, or the instance's.
    uint32_t id;
    // The triangle hit in its own mesh (as `NkContact.triangle`).
    uint32_t triangle;
    // The distance from the ray's origin (0 for a ray that starts inside a body).
    double distance;
    // The hit point, `origin + distance * unit direction`.
    double point[3];
    // The unit surface normal there, facing the ray.
    double normal[3];
} NkRayHit;

// Where an instance is: shape `shape` (from `nk_world_add_shape`), its origin at
// `position`, turned by quaternion `orientation` (x, y, z, w; not zero), its triangles in
// `layer` (bodies and queries meet them when their mask meets it).
typedef struct NkPlacement {
    // The shape placed.
    uint32_t shape;
    // Where the shape's origin goes, in world coordinates.
    double position[3];
    // Quaternion (x, y, z, w) turning the shape's axes into the world's.
    double orientation[4];
    // The layer bits of its triangles (1 by default elsewhere).
    uint32_t layer;
} NkPlacement;

// A body as `nk_world_add_body` takes it and `nk_world_get_body` gives it.
typedef struct NkBody {
    // The center (x, y, z), in world coordinates.
    double center[3];
    // Semi-axes along the body's own x, y and z; positive.
    double radii[3];
    // Quaternion (x, y, z, w) turning the body's axes into the world's; need not be of unit
    // length, but not zero. The identity is (0, 0, 0, 1).
    double orientation[4];
    // The velocity `nk_world_integrate` moves the body by.
    double velocity[3];
    // The layer bits the body is in.
    uint32_t layer;
    // The layers it collides with: two bodies collide when each one's layer meets the
    // other's mask; a body collides with the mesh when its mask meets the mesh's layer.
    uint32_t mask;
} NkBody;

// The CPU, all cores.
#define NK_DEVICE_CPU 0

// A CUDA GPU; `NK_STATUS_NO_CUDA` where none is usable.
#define NK_DEVICE_CUDA 1

// A CUDA GPU where one is usable, else the CPU.
#define NK_DEVICE_AUTO 2

// A triangle of the static mesh.
#define NK_CONTACT_TRIANGLE 0

// A triangle of the heightfield terrain.
#define NK_CONTACT_HEIGHTFIELD 1

// Another body.
#define NK_CONTACT_BODY 2

// A triangle of an instance (`other`/`id`: the instance; `triangle`: its shape's triangle).
#define NK_CONTACT_INSTANCE 3

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The message of the last call that failed on this thread, NUL-terminated (empty if none
// has). It is owned by the library and valid until the next `nk_` call on this thread.
const char *nk_last_error_message(void);

// The name of a status (`"NK_STATUS_OK"`, ...), a static string; `"NK_STATUS_UNKNOWN"` for
// a value that is none.
const char *nk_status_name(int32_t status);

// This library's version (`"0.1.0"`), a static string.
const char *nk_version(void);

// Fills `*out` with the default options (the CPU).
//
// # Safety
// `out` is NULL or valid for a write.
enum NkStatus nk_collider_options_default(struct NkColliderOptions *out);

// Makes a collider on `device` with the default options; see
// `nk_collider_new_with_options`.
//
// # Safety
// `out` is NULL or valid for a write.
enum NkStatus nk_collider_new(NkDevice device, struct NkCollider **out);

// Makes a collider as `options` say (NULL: the defaults) and puts it in `*out` (NULL on
// failure); free it with `nk_collider_free`. `NK_DEVICE_CUDA` where no GPU is usable fails
// with `NK_STATUS_NO_CUDA` (the message says why); `NK_DEVICE_AUTO` then takes the CPU. A
// collider may be used with any world, and several colliders with one world.
//
// # Safety
// `options` is NULL or points to an `NkColliderOptions`; `out` is NULL or valid for a write.
enum NkStatus nk_collider_new_with_options(const struct NkColliderOptions *options,
                                           struct NkCollider **out);

// Frees a collider (NULL is allowed and does nothing), and with it its contact buffer.
//
// # Safety
// `collider` is NULL or a live handle from `nk_collider_new`, not used again after this.
enum NkStatus nk_collider_free(struct NkCollider *collider);

// Whether the collider runs on a GPU, into `*out`.
//
// # Safety
// `collider` is NULL or a live handle; `out` is NULL or valid for a write.
enum NkStatus nk_collider_is_cuda(const struct NkCollider *collider, bool *out);

// What the collider runs on (`CPU (N threads)` or the GPU's name), as a NUL-terminated
// string into `*out`, owned by the collider and valid until it is freed.
//
// # Safety
// `collider` is NULL or a live handle; `out` is NULL or valid for a write.
enum NkStatus nk_collider_describe(const struct NkCollider *collider, const char **out);

// The tick: every contact of `world` now, sorted by (body, kind, other). `*out` receives a
// pointer to `*len` contacts in the collider's own buffer, which stays valid and unchanged
// until the next `nk_collider_contacts` call on this collider or its `nk_collider_free`,
// whatever happens to the world meanwhile (copy what must outlive that). The buffer is
// reused from tick to tick: it grows only when a tick has more contacts than any before.
// `*out` may be NULL when `*len` is 0. On failure, `*out` is NULL and `*len` 0.
//
// # Safety
// `collider` and `world` are NULL or live handles; `out` and `len` are NULL or valid for a
// write.
enum NkStatus nk_collider_contacts(struct NkCollider *collider,
                                   const struct NkWorld *world,
                                   const struct NkContact **out,
                                   size_t *len);

// Each sweep's first hit on `world`'s static mesh: `results[i]` for `sweeps[i]`, i <
// `count`. A world without a mesh gives no hits.
//
// # Safety
// `sweeps` and `results` are NULL (with `count` 0) or point to `count` values;
// `collider` and `world` are NULL or live handles.
enum NkStatus nk_collider_sweeps(struct NkCollider *collider,
                                 const struct NkWorld *world,
                                 const struct NkSweep *sweeps,
                                 size_t count,
                                 struct NkSweepResult *results);

// What each query overlaps (exact tests, an ellipsoid's the contacts'; touching is not
// overlapping):
// `hits[i * limit ..]` receives query i's first `min(totals[i], limit)` hits, sorted by
// (kind, id), and `totals[i]` how many there are in all. `limit` is 1 to 64.
//
// # Safety
// `queries` and `totals` are NULL (with `count` 0) or point to `count` values, `hits` to
// `count * limit`; `collider` and `world` are NULL or live handles.
enum NkStatus nk_collider_overlaps(struct NkCollider *collider,
                                   const struct NkWorld *world,
                                   const struct NkOverlap *queries,
                                   size_t count,
                                   size_t limit,
                                   struct NkOverlapHit *hits,
                                   uint32_t *totals);

// Each ray's first hit on the mesh, the heightfield and the bodies, exact (the same bits on
// the CPU and a GPU): `results[i]` for `rays[i]`. Ties go to the mesh's triangles, then the
// heightfield's, then bodies, then smaller ids. A
// bad ray (not finite, a zero direction, a negative or NaN `max_distance`) fails the call,
// naming it.
//
// # Safety
// `rays` and `results` are NULL (with `count` 0) or point to `count` values; `collider` and
// `world` are NULL or live handles.
enum NkStatus nk_collider_ray_casts(struct NkCollider *collider,
                                    const struct NkWorld *world,
                                    const struct NkRay *rays,
                                    size_t count,
                                    struct NkRayHit *results);

// Each ray's hits in order, nearest first (by distance, then the mesh, the heightfield,
// bodies, then smaller ids): `hits[i * limit ..]` receives ray i's first `counts[i]` hits, at most
// `limit` (1 or more).
//
// # Safety
// `rays` and `counts` are NULL (with `count` 0) or point to `count` values, `hits` to
// `count * limit`; `collider` and `world` are NULL or live handles.
enum NkStatus nk_collider_ray_casts_all(struct NkCollider *collider,
                                        const struct NkWorld *world,
                                        const struct NkRay *rays,
                                        size_t count,
                                        size_t limit,
                                        struct NkRayHit *hits,
                                        uint32_t *counts);

// Makes an empty world whose broad-phase grid has cubic cells of `cell_size` (1 m suits
// human-sized bodies; cells should be about the size of a body). `*out` receives the handle
// (NULL on failure); free it with `nk_world_free`.
//
// # Safety
// `out` is NULL or valid for a write.
enum NkStatus nk_world_new(double cell_size, struct NkWorld **out);

// Frees a world (NULL is allowed and does nothing). Colliders that ran on it stay valid.
//
// # Safety
// `world` is NULL or a live handle from `nk_world_new`, not used again after this.
enum NkStatus nk_world_free(struct NkWorld *world);

// Sets the static triangle mesh: `vertex_count` vertices as x, y, z doubles
// (`3 * vertex_count` values) and `triangle_count` triangles as three 0-based vertex indices
// each (`3 * triangle_count` values). Degenerate triangles are allowed. The arrays are
// copied; a mesh set before is replaced. Triangle ids in contacts are positions in
// `triangles`.
//
// # Safety
// `vertices` and `triangles` point to that many values.
enum NkStatus nk_world_set_mesh(struct NkWorld *world,
                                const double *vertices,
                                size_t vertex_count,
                                const uint32_t *triangles,
                                size_t triangle_count);

// Adds a shape: a mesh in its own frame (arrays as for `nk_world_set_mesh`, copied), which
// instances place in the world; it is gridded once however many instances place it. Its id
// goes to `*out_shape`.
//
// # Safety
// `vertices` and `triangles` point to that many values; `out_shape` is writable; `world` is
// NULL or a live handle.
enum NkStatus nk_world_add_shape(struct NkWorld *world,
                                 const double *vertices,
                                 size_t vertex_count,
                                 const uint32_t *triangles,
                                 size_t triangle_count,
                                 uint32_t *out_shape);

// Removes a shape that no instance places.
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_remove_shape(struct NkWorld *world, uint32_t shape);

// Places a shape (only the instances' top level is rebuilt); its id goes to `*out_id`.
// Contacts, hits and overlaps with its triangles are of kind `NK_CONTACT_INSTANCE`.
//
// # Safety
// `placement` points to one value; `out_id` is writable; `world` is NULL or a live handle.
enum NkStatus nk_world_add_instance(struct NkWorld *world,
                                    const struct NkPlacement *placement,
                                    uint32_t *out_id);

// Places `count` shapes at once (one rebuild of the top level); their ids go to
// `out_ids`. On a bad placement (named) none is placed.
//
// # Safety
// `placements` and `out_ids` are NULL (with `count` 0) or point to `count` values; `world`
// is NULL or a live handle.
enum NkStatus nk_world_add_instances(struct NkWorld *world,
                                     const struct NkPlacement *placements,
                                     size_t count,
                                     uint32_t *out_ids);

// New placements for `count` instances at once; on a bad id or placement nothing changes.
//
// # Safety
// `ids` and `placements` are NULL (with `count` 0) or point to `count` values; `world` is
// NULL or a live handle.
enum NkStatus nk_world_set_instances(struct NkWorld *world,
                                     const uint32_t *ids,
                                     const struct NkPlacement *placements,
                                     size_t count);

// Removes an instance; its id is free for reuse.
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_remove_instance(struct NkWorld *world, uint32_t id);

// Sets the terrain, kept as heights: `rows` × `cols` heights, row-major (rows along y),
// `spacing` apart, sample (0, 0) at (`origin_x`, `origin_y`). Its contacts are of kind
// `NK_CONTACT_HEIGHTFIELD`; square (r, c), q = r·(cols − 1) + c, holds triangles 2q
// (v, v + 1, v + cols + 1) and 2q + 1 (v, v + cols + 1, v + cols), v = r·cols + c. The
// heights are copied; a heightfield set before is replaced. It may sit beside a mesh.
//
// # Safety
// `heights` points to `rows * cols` values; `world` is NULL or a live handle.
enum NkStatus nk_world_set_heightfield(struct NkWorld *world,
                                       const double *heights,
                                       size_t rows,
                                       size_t cols,
                                       double spacing,
                                       double origin_x,
                                       double origin_y);

// Sets the mesh's layer bits (default 1): bodies whose mask meets them collide with it.
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_set_mesh_layer(struct NkWorld *world, uint32_t layer);

// The number of triangles of the static mesh (0 without one), into `*out`.
//
// # Safety
// `world` is NULL or a live handle; `out` is NULL or valid for a write.
enum NkStatus nk_world_triangle_count(const struct NkWorld *world, size_t *out);

// Adds a body and puts its id in `*out_id` (ids of removed bodies are reused, lowest
// first).
//
// # Safety
// `body` is NULL or points to an `NkBody`; `out_id` is NULL or valid for a write.
enum NkStatus nk_world_add_body(struct NkWorld *world, const struct NkBody *body, uint32_t *out_id);

// Adds a sphere of `radius` at `center` (3 doubles) in `layer`, colliding with `mask`, and
// puts its id in `*out_id`.
//
// # Safety
// `center` is NULL or points to 3 doubles; `out_id` is NULL or valid for a write.
enum NkStatus nk_world_add_sphere(struct NkWorld *world,
                                  const double *center,
                                  double radius,
                                  uint32_t layer,
                                  uint32_t mask,
                                  uint32_t *out_id);

// Adds an ellipsoid of semi-axes `radii` (3 doubles, along its own axes), turned by the
// quaternion `orientation` (x, y, z, w: 4 doubles), at `center` (3 doubles), in `layer`,
// colliding with `mask`, and puts its id in `*out_id`.
//
// # Safety
// `center`, `radii` and `orientation` are NULL or point to 3, 3 and 4 doubles; `out_id` is
// NULL or valid for a write.
enum NkStatus nk_world_add_ellipsoid(struct NkWorld *world,
                                     const double *center,
                                     const double *radii,
                                     const double *orientation,
                                     uint32_t layer,
                                     uint32_t mask,
                                     uint32_t *out_id);

// Removes a body; its id becomes free for reuse.
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_remove_body(struct NkWorld *world, uint32_t id);

// Copies body `id` into `*out`.
//
// # Safety
// `world` is NULL or a live handle; `out` is NULL or valid for a write.
enum NkStatus nk_world_get_body(const struct NkWorld *world, uint32_t id, struct NkBody *out);

// Moves and turns one body: `center` (3 doubles), `orientation` (x, y, z, w: 4 doubles).
//
// # Safety
// `center` and `orientation` are NULL or point to 3 and 4 doubles.
enum NkStatus nk_world_set_pose(struct NkWorld *world,
                                uint32_t id,
                                const double *center,
                                const double *orientation);

// The per-tick batch update: body `ids[i]` moves to `centers[3i..3i+3]` and turns to
// `orientations[4i..4i+4]` (x, y, z, w), for i < `count`. All or nothing: if any id or pose
// is bad, no body moves. The arrays are read in place (nothing is copied).
//
// # Safety
// `ids`, `centers` and `orientations` are NULL (with `count` 0) or point to `count`,
// `3 * count` and `4 * count` values.
enum NkStatus nk_world_set_poses(struct NkWorld *world,
                                 const uint32_t *ids,
                                 const double *centers,
                                 const double *orientations,
                                 size_t count);

// Sets the velocity (3 doubles) that `nk_world_integrate` moves body `id` by.
//
// # Safety
// `velocity` is NULL or points to 3 doubles.
enum NkStatus nk_world_set_velocity(struct NkWorld *world, uint32_t id, const double *velocity);

// Sets body `id`'s layer bits and the layers it collides with.
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_set_layers(struct NkWorld *world,
                                  uint32_t id,
                                  uint32_t layer,
                                  uint32_t mask);

// Moves every body by its velocity over `dt` seconds. `NK_STATUS_INVALID_ARGUMENT`, with no
// body moved, when `dt` is not finite or a body would leave the grid's range (the message
// names the body).
//
// # Safety
// `world` is NULL or a live handle.
enum NkStatus nk_world_integrate(struct NkWorld *world, double dt);

// The number of bodies alive, into `*out`.
//
// # Safety
// `world` is NULL or a live handle; `out` is NULL or valid for a write.
enum NkStatus nk_world_body_count(const struct NkWorld *world, size_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* NEARKIT_H */
