//! The game-server loop of `examples/c/server_loop.c`, through nearkit's Rust API: the
//! baseline the C API's time is measured against (BENCH_NOTES.md).
//!
//! ```sh
//! cargo run --release -p nearkit-capi --example server_loop -- [ticks] [cpu|cuda|auto] [--verbose]
//! ```

mod scene;

use std::time::{Duration, Instant};

use nearkit_core::collide::{Body, BodyId, Collider, ColliderOptions, ContactKind, World};
use nearkit_core::{Device, Engine, Mesh, Points};
use scene::{tick_line, Bodies, Fnv, BODIES, SWEEPS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut ticks, mut device, mut verbose) = (1000u64, Device::Cpu, false);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "-v" | "--verbose" => verbose = true,
            "cpu" | "cuda" | "auto" => device = arg.parse()?,
            n => ticks = n.parse().map_err(|_| format!("unknown argument {n:?}"))?,
        }
    }

    let (vertices, triangles) = scene::terrain();
    let mesh = Mesh {
        vertices: Points::from_rows(&vertices.chunks(3).map(|v| [v[0], v[1], v[2]]).collect::<Vec<_>>()),
        triangles: triangles.chunks(3).map(|t| [t[0], t[1], t[2]]).collect(),
    };
    let mut world = World::new(1.0)?;
    world.set_mesh(&mesh)?;
    world.set_mesh_layer(1);
    let mut bodies = Bodies::new(BODIES);
    let mut ids = Vec::with_capacity(BODIES);
    for i in 0..BODIES {
        let body = Body::ellipsoid(bodies.centers[i], bodies.radii[i], bodies.orientations[i]);
        ids.push(world.add_body(body.with_layers(bodies.layer[i], bodies.mask[i]))?);
    }
    let ids: Vec<BodyId> = ids;
    let mut collider = Collider::new(&Engine::open(device)?, &ColliderOptions::default())?;
    println!(
        "server_loop (Rust API): {} bodies, {} triangles, {}, {ticks} ticks",
        world.body_count(),
        world.triangle_count(),
        collider.describe()
    );

    let (mut api, mut whole, mut phase) = (Duration::ZERO, Duration::ZERO, [Duration::ZERO; 4]);
    let (mut run, mut total) = (Fnv::new(), 0usize);
    for tick in 0..ticks {
        let t0 = Instant::now();
        bodies.advance(tick);
        let sweeps = bodies.sweeps(tick);
        let t1 = Instant::now();
        world.set_poses(&ids, &bodies.centers, &bodies.orientations)?;
        let ta = Instant::now();
        let mut hash = Fnv::new();
        let contacts = collider.contacts_packed(&world)?;
        let tb = Instant::now();
        let mut body_body = 0;
        for c in contacts.iter() {
            hash.contact(&c);
            body_body += (c.kind == ContactKind::Body) as usize;
        }
        let n = contacts.len();
        let tc = Instant::now();
        let hits = collider.sweeps(&world, &sweeps)?;
        for h in &hits {
            hash.sweep(h);
        }
        let t2 = Instant::now();
        api += t2 - t1;
        whole += t2 - t0;
        for (p, d) in phase.iter_mut().zip([ta - t1, tb - ta, tc - tb, t2 - tc]) {
            *p += d;
        }
        total += n;
        run.word(hash.0);
        if verbose {
            println!("{}", tick_line(tick, n, body_body, hits.iter().flatten().count(), hash.0));
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1e3 / ticks.max(1) as f64;
    println!("contacts per tick: {:.1} (mean); checksum {:016x}", total as f64 / ticks.max(1) as f64, run.0);
    println!(
        "time per tick: {:.3} ms (poses, contacts read, {SWEEPS} sweeps), {:.3} ms (with moving the bodies)",
        per(api),
        per(whole)
    );
    println!(
        "phases per tick: poses {:.3} ms, contacts {:.3} ms, reading them {:.3} ms, sweeps {:.3} ms",
        per(phase[0]),
        per(phase[1]),
        per(phase[2]),
        per(phase[3])
    );
    Ok(())
}
