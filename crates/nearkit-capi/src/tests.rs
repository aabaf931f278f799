//! The C API called from Rust: results against nearkit's own API, and every failure's status
//! and message.

use std::ffi::CStr;
use std::ptr::{null, null_mut};

use nearkit_core::collide::{Body, BodyId, Collider, Sweep, World};
use nearkit_core::{Mesh, Points};

use crate::status::guard;
use crate::*;

fn last_error() -> String {
    unsafe { CStr::from_ptr(nk_last_error_message()) }.to_str().unwrap().to_string()
}

#[track_caller]
fn ok(s: NkStatus) {
    assert_eq!(s, NkStatus::Ok, "{}", last_error());
}

#[track_caller]
fn fails(s: NkStatus, want: NkStatus, message_has: &str) {
    assert_eq!(s, want, "message: {}", last_error());
    let m = last_error();
    assert!(m.contains(message_has), "message {m:?} lacks {message_has:?}");
}

/// A 4 × 4 m square of ground (2 triangles) at z = 0, as flat arrays.
fn ground() -> (Vec<f64>, Vec<u32>) {
    (vec![-2.0, -2.0, 0.0, 2.0, -2.0, 0.0, 2.0, 2.0, 0.0, -2.0, 2.0, 0.0], vec![0, 1, 2, 0, 2, 3])
}

fn new_world() -> *mut NkWorld {
    let mut w = null_mut();
    unsafe {
        ok(nk_world_new(1.0, &mut w));
        let (v, t) = ground();
        ok(nk_world_set_mesh(w, v.as_ptr(), 4, t.as_ptr(), 2));
    }
    w
}

fn cpu_collider() -> *mut NkCollider {
    let mut c = null_mut();
    unsafe { ok(nk_collider_new(NK_DEVICE_CPU, &mut c)) };
    c
}

fn contacts(c: *mut NkCollider, w: *const NkWorld) -> Vec<NkContact> {
    let (mut p, mut n) = (null(), 0usize);
    unsafe {
        ok(nk_collider_contacts(c, w, &mut p, &mut n));
        if n == 0 {
            return Vec::new();
        }
        std::slice::from_raw_parts(p, n).to_vec()
    }
}

#[test]
fn layout_is_what_the_header_says() {
    assert_eq!(std::mem::size_of::<NkContact>(), 56);
    assert_eq!(std::mem::offset_of!(NkContact, point), 32);
    assert_eq!(std::mem::size_of::<NkSweep>(), 13 * 8 + 8);
    assert_eq!(std::mem::size_of::<NkSweepResult>(), 72);
    assert_eq!(std::mem::size_of::<NkOverlap>(), 88);
    assert_eq!(std::mem::size_of::<NkOverlapHit>(), 12);
    assert_eq!(std::mem::size_of::<NkPlacement>(), 72);
    assert_eq!(std::mem::size_of::<NkBody>(), 112);
    assert_eq!(std::mem::size_of::<NkRay>(), 64);
    assert_eq!(std::mem::size_of::<NkRayHit>(), 72);
    assert_eq!(std::mem::offset_of!(NkRayHit, distance), 16);
    assert_eq!(std::mem::size_of::<NkStatus>(), std::mem::size_of::<std::ffi::c_int>());
}

/// `scene` (its mesh and bodies, in layer 1) as a world made through the C API.
fn world_of(scene: &nearkit_core::collide::scene::Scene) -> *mut NkWorld {
    unsafe {
        let mut w = null_mut();
        ok(nk_world_new(1.0, &mut w));
        let m = &scene.mesh;
        let v: Vec<f64> =
            (0..m.vertices.len()).flat_map(|i| [m.vertices.x[i], m.vertices.y[i], m.vertices.z[i]]).collect();
        let t: Vec<u32> = m.triangles.iter().flatten().copied().collect();
        ok(nk_world_set_mesh(w, v.as_ptr(), m.vertices.len(), t.as_ptr(), m.triangles.len()));
        for (i, b) in scene.bodies.iter().enumerate() {
            let mut id = u32::MAX;
            ok(nk_world_add_ellipsoid(w, b.center.as_ptr(), b.radii.as_ptr(), b.orientation.as_ptr(), 1, !0, &mut id));
            assert_eq!(id, i as u32);
        }
        w
    }
}

#[test]
fn a_tick_matches_the_rust_api() {
    let scene = nearkit_core::collide::scene::Scene::crater(600, 7);
    let mut reference = scene.world(1.0).unwrap();
    let mut rust = Collider::cpu();
    let w = world_of(&scene);
    let c = cpu_collider();
    for tick in 0..3 {
        scene.advance(&mut reference, tick);
        let b = reference.bodies();
        let ids: Vec<u32> = (0..b.len() as u32).collect();
        let centers: Vec<f64> = b.center.iter().flatten().copied().collect();
        let orientations: Vec<f64> = b.orientation.iter().flatten().copied().collect();
        unsafe { ok(nk_world_set_poses(w, ids.as_ptr(), centers.as_ptr(), orientations.as_ptr(), ids.len())) };
        let want: Vec<NkContact> = rust.contacts(&reference).unwrap().into_iter().map(NkContact::from).collect();
        let got = contacts(c, w);
        assert!(want.len() > 100, "only {} contacts", want.len());
        assert!(want.iter().any(|c| c.kind == NK_CONTACT_BODY) && want.iter().any(|c| c.kind == NK_CONTACT_TRIANGLE));
        assert!(
            got == want,
            "tick {tick}: the C API's {} contacts differ from the Rust API's {}",
            got.len(),
            want.len()
        );

        let sweeps: Vec<NkSweep> = (0..20)
            .map(|i| {
                let k = i * 29 % scene.bodies.len();
                let from = b.center[k];
                NkSweep {
                    radii: b.radii[k],
                    orientation: b.orientation[k],
                    from: [from[0], from[1], from[2] + 3.0],
                    to: [from[0] + 1.0, from[1], from[2] - 10.0],
                    mask: if i % 3 == 0 { u32::MAX } else { 1 },
                    ignore: if i % 2 == 0 { k as u32 } else { NK_NO_ID },
                }
            })
            .collect();
        let rust_sweeps: Vec<Sweep> = sweeps.iter().map(Sweep::from).collect();
        let want: Vec<NkSweepResult> =
            rust.sweeps(&reference, &rust_sweeps).unwrap().into_iter().map(NkSweepResult::from).collect();
        let mut got = vec![NkSweepResult::from(None); sweeps.len()];
        unsafe { ok(nk_collider_sweeps(c, w, sweeps.as_ptr(), sweeps.len(), got.as_mut_ptr())) };
        assert!(want.iter().filter(|r| r.hit).count() > 10);
        assert_eq!(got, want);
    }
    let mut n = 0;
    unsafe {
        ok(nk_world_body_count(w, &mut n));
        assert_eq!(n, 600);
        ok(nk_world_triangle_count(w, &mut n));
        assert_eq!(n, scene.mesh.triangles.len());
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
    }
}

#[test]
fn bodies_layers_velocity_and_removal() {
    let w = new_world();
    let c = cpu_collider();
    let mut reference = World::new(1.0).unwrap();
    let (v, t) = ground();
    let mesh = Mesh {
        vertices: Points::from_rows(&v.chunks(3).map(|p| [p[0], p[1], p[2]]).collect::<Vec<_>>()),
        triangles: t.chunks(3).map(|t| [t[0], t[1], t[2]]).collect(),
    };
    reference.set_mesh(&mesh).unwrap();
    let mut rust = Collider::cpu();
    unsafe {
        let (mut a, mut b, mut d) = (0, 0, 0);
        ok(nk_world_add_sphere(w, [0.0, 0.0, 0.4].as_ptr(), 0.5, 1, !0, &mut a));
        let body = NkBody {
            center: [0.6, 0.0, 0.5],
            radii: [0.5, 0.3, 0.2],
            orientation: [0.0, 0.0, 0.38, 0.92],
            velocity: [0.0, 0.0, 0.0],
            layer: 2,
            mask: !0,
        };
        ok(nk_world_add_body(w, &body, &mut b));
        ok(nk_world_add_ellipsoid(
            w,
            [1.0, 1.0, 3.0].as_ptr(),
            [0.3; 3].as_ptr(),
            [0.0, 0.0, 0.0, 2.0].as_ptr(),
            4,
            4,
            &mut d,
        ));
        assert_eq!((a, b, d), (0, 1, 2));
        reference.add_body(Body::sphere([0.0, 0.0, 0.4], 0.5)).unwrap();
        reference.add_body(body.into()).unwrap();
        reference.add_body(Body::ellipsoid([1.0, 1.0, 3.0], [0.3; 3], [0.0, 0.0, 0.0, 2.0]).with_layers(4, 4)).unwrap();
        let mut got = NkBody { layer: 0, ..body };
        ok(nk_world_get_body(w, 1, &mut got));
        assert_eq!(got, body);

        // Body 2 falls onto the ground (its mask 4 misses the mesh's layer 1 until it is set).
        ok(nk_world_set_velocity(w, 2, [0.0, 0.0, -1.0].as_ptr()));
        reference.set_velocity(BodyId(2), [0.0, 0.0, -1.0]).unwrap();
        ok(nk_world_integrate(w, 2.8));
        reference.integrate(2.8).unwrap();
        let check = |rust: &mut Collider, reference: &World| {
            let want: Vec<NkContact> = rust.contacts(reference).unwrap().into_iter().map(NkContact::from).collect();
            assert_eq!(contacts(c, w), want);
            want
        };
        assert!(!check(&mut rust, &reference).iter().any(|c| c.body == 2));
        ok(nk_world_set_mesh_layer(w, 5));
        reference.set_mesh_layer(5);
        assert!(check(&mut rust, &reference).iter().any(|c| c.body == 2 && c.kind == NK_CONTACT_TRIANGLE));
        // Bodies 0 and 1 overlap unless their layers keep them apart.
        assert!(check(&mut rust, &reference).iter().any(|c| c.body == 0 && c.kind == NK_CONTACT_BODY && c.other == 1));
        ok(nk_world_set_layers(w, 1, 2, !1));
        reference.set_layers(BodyId(1), 2, !1).unwrap();
        assert!(!check(&mut rust, &reference).iter().any(|c| c.kind == NK_CONTACT_BODY));

        ok(nk_world_set_pose(w, 0, [0.0, 0.0, 0.45].as_ptr(), [0.0, 0.0, 0.0, 1.0].as_ptr()));
        reference.set_pose(BodyId(0), [0.0, 0.0, 0.45], [0.0, 0.0, 0.0, 1.0]).unwrap();
        check(&mut rust, &reference);
        ok(nk_world_remove_body(w, 0));
        reference.remove_body(BodyId(0)).unwrap();
        assert!(!check(&mut rust, &reference).iter().any(|c| c.body == 0));
        let mut n = 0;
        ok(nk_world_body_count(w, &mut n));
        assert_eq!(n, 2);
        fails(nk_world_get_body(w, 0, &mut got), NkStatus::NoSuchBody, "there is no body 0");
        // The freed id is reused.
        ok(nk_world_add_sphere(w, [0.0; 3].as_ptr(), 1.0, 1, 1, &mut a));
        assert_eq!(a, 0);
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
    }
}

#[test]
fn failures_name_the_problem_and_change_nothing() {
    let w = new_world();
    let c = cpu_collider();
    let (mut id, mut n) = (7u32, 0usize);
    let center = [0.0, 0.0, 0.4];
    let q = [0.0, 0.0, 0.0, 1.0];
    unsafe {
        let mut w2 = null_mut();
        fails(nk_world_new(0.0, &mut w2), NkStatus::InvalidArgument, "nk_world_new: invalid argument: cell size");
        assert!(w2.is_null());
        fails(nk_world_new(1.0, null_mut()), NkStatus::NullPointer, "`out` is NULL");

        fails(nk_world_add_sphere(null_mut(), center.as_ptr(), 1.0, 1, 1, &mut id), NkStatus::NullPointer, "world");
        fails(nk_world_add_sphere(w, null(), 1.0, 1, 1, &mut id), NkStatus::NullPointer, "`center` is NULL");
        fails(nk_world_add_sphere(w, center.as_ptr(), 1.0, 1, 1, null_mut()), NkStatus::NullPointer, "out_id");
        fails(nk_world_add_sphere(w, center.as_ptr(), -1.0, 1, 1, &mut id), NkStatus::InvalidArgument, "radii");
        fails(
            nk_world_add_sphere(w, [f64::NAN, 0.0, 0.0].as_ptr(), 1.0, 1, 1, &mut id),
            NkStatus::InvalidArgument,
            "not finite",
        );
        fails(
            nk_world_add_ellipsoid(w, center.as_ptr(), [1.0; 3].as_ptr(), [0.0; 4].as_ptr(), 1, 1, &mut id),
            NkStatus::InvalidArgument,
            "quaternion",
        );
        let misaligned = [0u8; 64].as_ptr().wrapping_add(1).cast::<f64>();
        fails(nk_world_add_sphere(w, misaligned, 1.0, 1, 1, &mut id), NkStatus::InvalidArgument, "aligned");
        assert_eq!(id, 7, "a failed call wrote its output");
        ok(nk_world_body_count(w, &mut n));
        assert_eq!(n, 0);

        ok(nk_world_add_sphere(w, center.as_ptr(), 0.5, 1, !0, &mut id));
        fails(nk_world_set_pose(w, 3, center.as_ptr(), q.as_ptr()), NkStatus::NoSuchBody, "there is no body 3");
        fails(nk_world_remove_body(w, 3), NkStatus::NoSuchBody, "nk_world_remove_body: there is no body 3");
        fails(nk_world_set_velocity(w, 0, [f64::INFINITY; 3].as_ptr()), NkStatus::InvalidArgument, "velocity");
        fails(nk_world_integrate(w, f64::NAN), NkStatus::InvalidArgument, "dt");
        ok(nk_world_set_velocity(w, 0, [1.0e9, 0.0, 0.0].as_ptr()));
        fails(nk_world_integrate(w, 10.0), NkStatus::InvalidArgument, "body 0");
        ok(nk_world_set_velocity(w, 0, [0.0; 3].as_ptr()));

        // A batch is all or nothing.
        ok(nk_world_add_sphere(w, [3.0, 0.0, 0.4].as_ptr(), 0.5, 1, !0, &mut id));
        let ids = [0u32, 1];
        let centers = [0.0, 0.0, 9.0, 0.0, 0.0, f64::NAN];
        let qs = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        fails(
            nk_world_set_poses(w, ids.as_ptr(), centers.as_ptr(), qs.as_ptr(), 2),
            NkStatus::InvalidArgument,
            "pose 1",
        );
        fails(
            nk_world_set_poses(w, [0u32, 5].as_ptr(), [0.0, 0.0, 9.0, 0.0, 0.0, 1.0].as_ptr(), qs.as_ptr(), 2),
            NkStatus::NoSuchBody,
            "pose 1: there is no body 5",
        );
        fails(nk_world_set_poses(w, null(), centers.as_ptr(), qs.as_ptr(), 2), NkStatus::NullPointer, "ids");
        ok(nk_world_set_poses(w, null(), null(), null(), 0));
        let mut body = std::mem::zeroed::<NkBody>();
        ok(nk_world_get_body(w, 0, &mut body));
        assert_eq!(body.center, center, "a failed batch moved a body");

        let (v, t) = ground();
        fails(nk_world_set_mesh(w, v.as_ptr(), 3, t.as_ptr(), 2), NkStatus::InvalidArgument, "uses vertex 3");
        fails(nk_world_set_mesh(w, v.as_ptr(), 4, t.as_ptr(), 0), NkStatus::InvalidArgument, "no triangles");
        fails(nk_world_set_mesh(w, null(), 4, t.as_ptr(), 2), NkStatus::NullPointer, "vertices");

        let mut out = [null(); 1];
        let mut len = 5usize;
        fails(nk_collider_contacts(c, null(), out.as_mut_ptr(), &mut len), NkStatus::NullPointer, "world");
        assert_eq!(len, 0);
        fails(nk_collider_contacts(null_mut(), w, out.as_mut_ptr(), &mut len), NkStatus::NullPointer, "collider");
        fails(nk_collider_contacts(c, w, out.as_mut_ptr(), null_mut()), NkStatus::NullPointer, "`len`");
        let sweep =
            NkSweep { radii: [0.0; 3], orientation: q, from: center, to: [0.0; 3], mask: u32::MAX, ignore: NK_NO_ID };
        let mut r = NkSweepResult::from(None);
        fails(nk_collider_sweeps(c, w, &sweep, 1, &mut r), NkStatus::InvalidArgument, "radii");
        fails(nk_collider_sweeps(c, w, &sweep, 1, null_mut()), NkStatus::NullPointer, "results");
        ok(nk_collider_sweeps(c, w, null(), 0, null_mut()));

        let mut c2 = null_mut();
        fails(nk_collider_new(9, &mut c2), NkStatus::InvalidArgument, "unknown device 9");
        let options = NkColliderOptions { bodies_per_warp: 9, ..Default::default() };
        fails(nk_collider_new_with_options(&options, &mut c2), NkStatus::InvalidArgument, "bodies_per_warp");
        assert!(c2.is_null());

        // The collider still works after all that.
        assert_eq!(contacts(c, w).len(), 2);
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
        ok(nk_world_free(null_mut()));
        ok(nk_collider_free(null_mut()));
    }
}

#[test]
fn cuda_is_an_error_where_there_is_none() {
    let mut c = null_mut();
    let status = unsafe { nk_collider_new(NK_DEVICE_CUDA, &mut c) };
    let mut is_cuda = false;
    match status {
        NkStatus::Ok => unsafe {
            ok(nk_collider_is_cuda(c, &mut is_cuda));
            assert!(is_cuda);
            ok(nk_collider_free(c));
        },
        NkStatus::NoCuda => {
            assert!(c.is_null());
            assert!(
                last_error().starts_with("nk_collider_new: CUDA was asked for but is not usable"),
                "{}",
                last_error()
            );
        }
        s => panic!("{s:?}: {}", last_error()),
    }
    // AUTO falls back to the CPU.
    unsafe {
        ok(nk_collider_new(NK_DEVICE_AUTO, &mut c));
        let mut d = null();
        ok(nk_collider_describe(c, &mut d));
        let d = CStr::from_ptr(d).to_str().unwrap();
        ok(nk_collider_is_cuda(c, &mut is_cuda));
        assert_eq!(is_cuda, !d.starts_with("CPU"), "{d}");
        ok(nk_collider_free(c));
    }
}

#[test]
fn a_panic_is_caught_and_poisons_the_handle() {
    let status = guard("nk_test", || panic!("boom {}", 42));
    assert_eq!(status, NkStatus::Panic);
    assert!(last_error().starts_with("nk_test: internal error, a bug in nearkit"), "{}", last_error());
    assert!(last_error().contains("boom 42"));

    // A world whose call panicked half-way refuses further calls, except free.
    let w = new_world();
    unsafe {
        (*w).poisoned = true;
        let mut n = 0;
        fails(nk_world_body_count(w, &mut n), NkStatus::Poisoned, "poisoned");
        fails(nk_world_set_mesh_layer(w, 1), NkStatus::Poisoned, "poisoned");
        ok(nk_world_free(w));
    }
}

#[test]
fn messages_are_per_thread_and_statuses_have_names() {
    unsafe { fails(nk_world_remove_body(null_mut(), 0), NkStatus::NullPointer, "world") };
    let before = last_error();
    std::thread::spawn(|| {
        assert_eq!(last_error(), "");
        unsafe { fails(nk_world_new(-1.0, &mut null_mut()), NkStatus::InvalidArgument, "cell size") };
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), before);
    let name = |s: i32| unsafe { CStr::from_ptr(nk_status_name(s)) }.to_str().unwrap();
    assert_eq!(name(NkStatus::Ok as i32), "NK_STATUS_OK");
    assert_eq!(name(NkStatus::Poisoned as i32), "NK_STATUS_POISONED");
    assert_eq!(name(-3), "NK_STATUS_UNKNOWN");
    assert_eq!(unsafe { CStr::from_ptr(nk_version()) }.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

/// A heightfield set through C has the Rust world's contacts and sweeps; overlap queries
/// and ray casts give the Rust API's rows, totals and hits.
#[test]
fn heightfields_and_overlaps_match_the_rust_api() {
    let scene = nearkit_core::collide::scene::Scene::crater(500, 3);
    let (rows, cols) = (40, 50);
    let heights: Vec<f64> = (0..rows * cols).map(|i| ((i % cols) as f64 * 0.3).sin() * 0.5).collect();
    let origin = [-1.5, 2.0];
    let mut rust = World::new(1.0).unwrap();
    rust.set_heightfield(nearkit_core::collide::Heightfield::new(heights.clone(), rows, cols, 1.0, origin).unwrap())
        .unwrap();
    let w = new_world_without_mesh();
    unsafe { ok(nk_world_set_heightfield(w, heights.as_ptr(), rows, cols, 1.0, origin[0], origin[1])) };
    for b in scene.bodies.iter().filter(|b| b.center[0] < 45.0 && b.center[1] < 40.0) {
        let center = [b.center[0], b.center[1], (b.center[0] * 0.3).sin() * 0.5 + 0.3];
        let body = Body { center, ..*b };
        rust.add_body(body).unwrap();
        let mut id = 0;
        unsafe { ok(nk_world_add_body(w, &NkBody::from(body), &mut id)) };
    }
    let c = cpu_collider();
    let want: Vec<NkContact> = Collider::cpu().contacts(&rust).unwrap().into_iter().map(NkContact::from).collect();
    assert!(want.iter().filter(|c| c.kind == NK_CONTACT_HEIGHTFIELD).count() > 100);
    assert_eq!(contacts(c, w), want);
    let queries: Vec<NkOverlap> = (0..300)
        .map(|i| NkOverlap {
            center: [(i % 40) as f64, (i / 10) as f64, 0.2],
            radii: [0.4 + (i % 3) as f64, 0.5, 0.6],
            orientation: [0.0, 0.2 * (i % 5) as f64, 0.0, 1.0],
            mask: if i % 4 == 0 { 2 } else { u32::MAX },
            shape: if i % 3 == 0 { NK_OVERLAP_BOX } else { NK_OVERLAP_ELLIPSOID },
        })
        .collect();
    let limit = 5;
    let (mut hits, mut totals) = (vec![NkOverlapHit::default(); 300 * limit], vec![0u32; 300]);
    unsafe {
        ok(nk_collider_overlaps(c, w, queries.as_ptr(), 300, limit, hits.as_mut_ptr(), totals.as_mut_ptr()));
    }
    let rust_queries: Vec<nearkit_core::collide::Overlap> = queries
        .iter()
        .map(|q| {
            let make = if q.shape == NK_OVERLAP_BOX {
                nearkit_core::collide::Overlap::cuboid
            } else {
                nearkit_core::collide::Overlap::ellipsoid
            };
            make(q.center, q.radii, q.orientation).with_mask(q.mask)
        })
        .collect();
    let found = Collider::cpu().overlaps(&rust, &rust_queries, limit).unwrap();
    assert_eq!(totals, found.total);
    assert!(totals.iter().filter(|&&t| t as usize > limit).count() > 20);
    for i in 0..300 {
        let row: Vec<NkOverlapHit> = found
            .row_triangles(i)
            .map(|(k, id, triangle)| NkOverlapHit { kind: crate::collider::contact_kind_code(k), id, triangle })
            .collect();
        assert_eq!(&hits[i * limit..i * limit + row.len()], &row[..], "query {i}");
    }
    // Rays down and across onto the heightfield and its bodies.
    let rays: Vec<NkRay> = (0..400)
        .map(|i| NkRay {
            origin: [(i % 45) as f64 + 0.37, (i / 10) as f64 + 2.5, 4.0],
            direction: [((i % 7) as f64 - 3.0) * 0.3, 0.2, -1.0],
            max_distance: f64::INFINITY,
            mask: u32::MAX,
        })
        .collect();
    let rust_rays: Vec<nearkit_core::collide::Ray> = rays.iter().map(nearkit_core::collide::Ray::from).collect();
    let want: Vec<NkRayHit> =
        Collider::cpu().ray_casts(&rust, &rust_rays).unwrap().into_iter().map(NkRayHit::from).collect();
    assert!(want.iter().filter(|h| h.hit && h.kind == NK_CONTACT_HEIGHTFIELD).count() > 200);
    let mut got = vec![NkRayHit::from(None); rays.len()];
    unsafe { ok(nk_collider_ray_casts(c, w, rays.as_ptr(), rays.len(), got.as_mut_ptr())) };
    assert_eq!(got, want);
    unsafe {
        fails(
            nk_collider_overlaps(c, w, queries.as_ptr(), 300, 0, hits.as_mut_ptr(), totals.as_mut_ptr()),
            NkStatus::InvalidArgument,
            "limit",
        );
        let cone = [NkOverlap { shape: 7, ..queries[0] }];
        fails(
            nk_collider_overlaps(c, w, cone.as_ptr(), 1, 1, hits.as_mut_ptr(), totals.as_mut_ptr()),
            NkStatus::InvalidArgument,
            "shape 7",
        );
        fails(nk_world_set_heightfield(w, heights.as_ptr(), 1, 3, 1.0, 0.0, 0.0), NkStatus::InvalidArgument, "2 × 2");
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
    }
}

fn new_world_without_mesh() -> *mut NkWorld {
    let mut w = null_mut();
    unsafe { ok(nk_world_new(1.0, &mut w)) };
    w
}

#[test]
fn ray_casts_match_the_rust_api() {
    use nearkit_core::collide::Ray;
    let scene = nearkit_core::collide::scene::Scene::crater(400, 11);
    let reference = scene.world(1.0).unwrap();
    let w = world_of(&scene);
    let c = cpu_collider();
    // Rays down onto the terrain and its bodies, some sideways, some short, some masked off
    // the bodies.
    let b = reference.bodies();
    let rays: Vec<NkRay> = (0..500)
        .map(|i| {
            let k = i * 7 % b.len();
            let at = b.center[k];
            NkRay {
                origin: [at[0] + (i % 5) as f64 * 0.05 + if i % 3 == 0 { 3.0 } else { 0.0 }, at[1], at[2] + 5.0],
                direction: [((i % 3) as f64 - 1.0) * 0.02, 0.01, -1.0],
                max_distance: if i % 4 == 0 { 3.0 } else { f64::INFINITY },
                mask: if i % 6 == 0 { 1 << 31 } else { u32::MAX },
            }
        })
        .collect();
    let rust_rays: Vec<Ray> = rays.iter().map(Ray::from).collect();
    let mut rust = Collider::cpu();
    let want: Vec<NkRayHit> = rust.ray_casts(&reference, &rust_rays).unwrap().into_iter().map(NkRayHit::from).collect();
    let mut got = vec![NkRayHit::from(None); rays.len()];
    unsafe { ok(nk_collider_ray_casts(c, w, rays.as_ptr(), rays.len(), got.as_mut_ptr())) };
    let hit = |kind| want.iter().filter(|h| h.hit && h.kind == kind).count();
    assert!(
        hit(NK_CONTACT_BODY) > 50 && hit(NK_CONTACT_TRIANGLE) > 50,
        "{} {}",
        hit(NK_CONTACT_BODY),
        hit(NK_CONTACT_TRIANGLE)
    );
    assert!(want.iter().any(|h| !h.hit && h.id == NK_NO_ID && h.distance == f64::INFINITY));
    assert_eq!(got, want);

    let limit = 3;
    let mut hits = vec![NkRayHit::from(None); rays.len() * limit];
    let mut counts = vec![u32::MAX; rays.len()];
    unsafe {
        ok(nk_collider_ray_casts_all(c, w, rays.as_ptr(), rays.len(), limit, hits.as_mut_ptr(), counts.as_mut_ptr()))
    };
    let all = rust.ray_casts_all(&reference, &rust_rays, limit).unwrap();
    assert!(counts.iter().any(|&n| n as usize == limit));
    for i in 0..rays.len() {
        let row: Vec<NkRayHit> = all.row(i).iter().map(|h| NkRayHit::from(Some(*h))).collect();
        assert_eq!(counts[i] as usize, row.len(), "ray {i}");
        assert_eq!(&hits[i * limit..i * limit + row.len()], &row[..], "ray {i}");
        // A ray's first hit is its first in order.
        assert_eq!(row.first().copied().unwrap_or(NkRayHit::from(None)), got[i]);
    }

    // Bad rays are named, and nothing is written.
    let mut bad = rays.clone();
    bad[17].direction = [0.0; 3];
    let before = got.clone();
    unsafe {
        fails(
            nk_collider_ray_casts(c, w, bad.as_ptr(), bad.len(), got.as_mut_ptr()),
            NkStatus::InvalidArgument,
            "ray 17: direction",
        );
        assert_eq!(got, before);
        bad[17] = rays[17];
        bad[3].max_distance = f64::NAN;
        fails(
            nk_collider_ray_casts_all(c, w, bad.as_ptr(), bad.len(), 2, hits.as_mut_ptr(), counts.as_mut_ptr()),
            NkStatus::InvalidArgument,
            "ray 3: max_distance",
        );
        fails(
            nk_collider_ray_casts_all(c, w, rays.as_ptr(), rays.len(), 0, hits.as_mut_ptr(), counts.as_mut_ptr()),
            NkStatus::InvalidArgument,
            "limit 0",
        );
        fails(nk_collider_ray_casts(c, w, null(), 3, got.as_mut_ptr()), NkStatus::NullPointer, "rays");
        fails(nk_collider_ray_casts(c, w, rays.as_ptr(), 3, null_mut()), NkStatus::NullPointer, "results");
        ok(nk_collider_ray_casts(c, w, null(), 0, null_mut()));
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
    }
}

#[test]
fn instances_match_the_rust_api() {
    use nearkit_core::collide::{ContactKind, InstanceId, Placement, Ray, ShapeId};
    // A 2 m cube of 12 triangles, placed 30 times, turned; bodies and rays among them.
    let v: Vec<f64> = (0..8).flat_map(|k| [k & 1, (k >> 1) & 1, (k >> 2) & 1].map(|b| b as f64 * 2.0 - 1.0)).collect();
    let q = [[0u32, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]];
    let t: Vec<u32> = q.iter().flat_map(|f| [f[0], f[1], f[2], f[0], f[2], f[3]]).collect();
    let rows: Vec<[f64; 3]> = v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    let cube =
        Mesh { vertices: Points::from_rows(&rows), triangles: t.chunks(3).map(|c| [c[0], c[1], c[2]]).collect() };
    let mut reference = World::new(1.0).unwrap();
    let shape = reference.add_shape(&cube).unwrap();
    let w = new_world_without_mesh();
    let c = cpu_collider();
    let mut s = u32::MAX;
    unsafe { ok(nk_world_add_shape(w, v.as_ptr(), 8, t.as_ptr(), 12, &mut s)) };
    assert_eq!(s, shape.0);
    let placements: Vec<NkPlacement> = (0..30)
        .map(|k| NkPlacement {
            shape: s,
            position: [(k % 6) as f64 * 4.0, (k / 6) as f64 * 4.0, 0.0],
            orientation: [0.1 * k as f64, 0.3, -0.2, 1.0],
            layer: if k % 4 == 0 { 2 } else { 1 },
        })
        .collect();
    for p in &placements[..10] {
        let mut id = u32::MAX;
        unsafe { ok(nk_world_add_instance(w, p, &mut id)) };
        assert_eq!(InstanceId(id), reference.add_instance(Placement::from(p)).unwrap());
    }
    let mut ids = vec![u32::MAX; 20];
    unsafe { ok(nk_world_add_instances(w, placements[10..].as_ptr(), 20, ids.as_mut_ptr())) };
    let rest: Vec<Placement> = placements[10..].iter().map(Placement::from).collect();
    assert_eq!(ids, reference.add_instances(&rest).unwrap().iter().map(|i| i.0).collect::<Vec<_>>());
    for k in 0..200 {
        let b = Body::sphere([(k % 20) as f64 * 1.2 - 1.0, (k / 20) as f64 * 2.0 - 1.0, 0.5], 0.6).with_layers(1, 1);
        let mut id = 0;
        let nb = NkBody {
            center: b.center,
            radii: b.radii,
            orientation: b.orientation,
            velocity: [0.0; 3],
            layer: 1,
            mask: 1,
        };
        unsafe { ok(nk_world_add_body(w, &nb, &mut id)) };
        reference.add_body(b).unwrap();
    }
    // Move two in a batch, remove one.
    let moved = [
        NkPlacement { position: [1.0, 1.0, 0.25], ..placements[1] },
        NkPlacement { orientation: [0.0, 0.0, 0.0, 1.0], ..placements[2] },
    ];
    unsafe { ok(nk_world_set_instances(w, [1u32, 2].as_ptr(), moved.as_ptr(), 2)) };
    reference.set_instances(&[InstanceId(1), InstanceId(2)], &[(&moved[0]).into(), (&moved[1]).into()]).unwrap();
    unsafe { ok(nk_world_remove_instance(w, 5)) };
    reference.remove_instance(InstanceId(5)).unwrap();

    let mut rust = Collider::cpu();
    let want: Vec<NkContact> = rust.contacts(&reference).unwrap().into_iter().map(NkContact::from).collect();
    let got = contacts(c, w);
    assert!(got.iter().filter(|c| c.kind == NK_CONTACT_INSTANCE).count() > 50);
    assert!(got.iter().all(|c| c.kind != NK_CONTACT_INSTANCE || (c.other != 5 && c.triangle < 12)));
    assert_eq!(got, want);

    let rays: Vec<NkRay> = (0..300)
        .map(|i| NkRay {
            origin: [(i % 30) as f64 * 0.8 - 1.0, (i / 30) as f64 * 2.2 - 1.0, 5.0],
            direction: [0.05, 0.02, -1.0],
            max_distance: f64::INFINITY,
            mask: if i % 3 == 0 { 2 } else { u32::MAX },
        })
        .collect();
    let rust_rays: Vec<Ray> = rays.iter().map(Ray::from).collect();
    let want: Vec<NkRayHit> = rust.ray_casts(&reference, &rust_rays).unwrap().into_iter().map(NkRayHit::from).collect();
    let mut got = vec![NkRayHit::from(None); rays.len()];
    unsafe { ok(nk_collider_ray_casts(c, w, rays.as_ptr(), rays.len(), got.as_mut_ptr())) };
    assert!(got.iter().filter(|h| h.kind == NK_CONTACT_INSTANCE).count() > 30);
    assert_eq!(got, want);
    assert_eq!(reference.instance(InstanceId(3)).unwrap().shape, ShapeId(s));
    assert!(ContactKind::Instance > ContactKind::Body);

    unsafe {
        let bad = NkPlacement { position: [f64::NAN, 0.0, 0.0], ..placements[0] };
        let mut id = 0;
        fails(nk_world_add_instance(w, &bad, &mut id), NkStatus::InvalidArgument, "not finite");
        let bad = NkPlacement { shape: 9, ..placements[0] };
        fails(nk_world_add_instance(w, &bad, &mut id), NkStatus::InvalidArgument, "no shape 9");
        fails(
            nk_world_set_instances(w, [5u32].as_ptr(), placements.as_ptr(), 1),
            NkStatus::InvalidArgument,
            "no instance 5",
        );
        fails(nk_world_remove_shape(w, s), NkStatus::InvalidArgument, "remove its instances first");
        fails(nk_world_add_shape(w, v.as_ptr(), 8, t.as_ptr(), 0, &mut id), NkStatus::InvalidArgument, "no triangles");
        fails(nk_world_add_instance(w, null(), &mut id), NkStatus::NullPointer, "placement");
        let mut two = [0u32; 2];
        let pair = [placements[0], NkPlacement { orientation: [0.0; 4], ..placements[0] }];
        fails(nk_world_add_instances(w, pair.as_ptr(), 2, two.as_mut_ptr()), NkStatus::InvalidArgument, "placement 1");
        ok(nk_collider_free(c));
        ok(nk_world_free(w));
    }
}
