//! `nearkit raycast`: casts batches of rays into a collision world and measures them.

use crate::{note, out};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use nearkit::collide::scene::Scene;
use nearkit::collide::{Collider, ColliderOptions, ContactKind, Ray, RayHit, World};
use nearkit::{Device, Engine};
use rayon::prelude::*;

use super::scene::{self, SceneSpec};
use crate::common::{check_memory, engine_options, ms, parse_with, thousands, CliError, CliResult};
use crate::progress::Spinner;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit raycast                                  built-in: crater terrain, 4,000 ellipsoids, 1M rays
  nearkit raycast --mesh bunny00.off --size 50 --bodies 4000 --rays 1000000
  nearkit raycast --scene dem --from-above         a 10 × 12 km terrain kept as heights
  nearkit raycast --scene mesh:dem.npy --spacing 30   your own elevation model
  nearkit raycast --from-above --device cpu        rays from above the scene, downwards
  nearkit raycast --limit 8                        every hit of each ray, up to 8, nearest first
  nearkit raycast --instances 500                  and 500 placed buildings (mesh instances)

Rays start at random points in the scene's box (the terrain's and bodies' box, 2 m higher) and go in random
directions (uniform on the sphere), with no length limit unless --max-distance says; with
--from-above they start 1 m above the box at random (x, y) and go down, within 30° of
vertical. Each batch is one call: every ray's first hit on the mesh, the heightfield, a body or an
instance (or, with
--limit, its hits in order), exact and the same bits on every device; the checksum (of every
hit's distance, kind, id, point and normal) shows it. The first call, which builds the mesh's
tree (and on a GPU uploads it and the heights), is timed apart; each batch includes the transfers and
unpacking the hits, and, with --moving, building the bodies' tree (the collider keeps it while
the bodies do not change). First hits go into one vector kept from batch to batch
(`Collider::ray_casts_into`), as a server casting every tick would keep it.")]
pub struct RaycastArgs {
    /// crater (19,440 triangles, 108 × 90 m), dem (a generated 344 × 403 elevation model, 30 m
    /// apart, kept as heights), relief:ROWSxCOLS (a generated one of any size, --spacing
    /// apart), stress (1M triangles), or mesh:FILE (.ply, .off, .obj, .stl, or a 2-D .npy
    /// heightfield).
    #[arg(long, default_value = "crater", conflicts_with = "mesh")]
    pub scene: String,
    /// A mesh file (.ply, .off, .obj, .stl): the same as --scene mesh:FILE.
    #[arg(long)]
    pub mesh: Option<PathBuf>,
    /// Spacing of a heightfield's samples (relief, .npy), in metres.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub spacing: f64,
    /// Give heightfields (dem, relief, .npy) to the world as triangle meshes rather than as
    /// heights: the same hits, of kind triangle instead of heightfield.
    #[arg(long)]
    pub as_mesh: bool,
    /// The mesh is scaled so that its longest side is this many metres (0: keep its units).
    #[arg(long, default_value_t = 50.0, allow_negative_numbers = true)]
    pub size: f64,
    /// Ellipsoids (radii 0.2–0.8 m) near the mesh's surface.
    #[arg(long, default_value_t = 4000)]
    pub bodies: usize,
    /// Place this many copies of a shape (a 10 × 6 m building, 16 triangles, unless
    /// --instance-shape) at bodies' places, each turned about z at random.
    #[arg(long, default_value_t = 0)]
    pub instances: usize,
    /// The shape --instances places: a mesh file (.ply, .off, .obj, .stl, in metres about its
    /// own origin).
    #[arg(long)]
    pub instance_shape: Option<PathBuf>,
    /// Rays per batch.
    #[arg(long, default_value_t = 1_000_000)]
    pub rays: usize,
    /// Batches to time.
    #[arg(long, default_value_t = 5)]
    pub batches: usize,
    /// How far rays reach (default: no limit).
    #[arg(long, allow_negative_numbers = true)]
    pub max_distance: Option<f64>,
    /// Rays from above the scene, downwards, instead of from random points in random directions.
    #[arg(long)]
    pub from_above: bool,
    /// Every hit of each ray, up to this many, nearest first (instead of the first hit only).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Mark every body moved before each batch, as a server's tick would: the bodies' tree is
    /// then built (and on a GPU uploaded) in every batch, not only when they change.
    #[arg(long)]
    pub moving: bool,
    /// Seed of the scene and the rays.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to run: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto", value_parser = parse_with::<Device>)]
    pub device: Device,
    /// The world's grid cell size in metres (its collision grid; ray casts do not use it).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub cell_size: f64,
    /// Print each GPU batch's phase times (host and device) to stderr.
    #[arg(long)]
    pub profile: bool,
    /// Print nothing but the summary.
    #[arg(long, short)]
    pub quiet: bool,
}

fn build_scene(args: &RaycastArgs) -> CliResult<Scene> {
    let from_file = args.mesh.as_ref().map(|f| format!("mesh:{}", f.display()));
    scene::build(&SceneSpec {
        scene: from_file.as_deref().unwrap_or(&args.scene),
        bodies: Some(args.bodies),
        mesh_size: (args.size, "--size"),
        spacing: args.spacing,
        as_mesh: args.as_mesh,
        seed: args.seed,
    })
}

/// A uniform number in [0, 1) from (seed, i, k): splitmix64, so rays are drawn in parallel
/// and the same on every machine.
fn unit(seed: u64, i: u64, k: u64) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(i.wrapping_mul(0xd1b5_4a32_d192_ed03))
        .wrapping_add(k.wrapping_mul(0x8cb9_2ba7_2f3d_8dd3));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The benchmark's rays (see the command's help).
fn make_rays(args: &RaycastArgs, lo: [f64; 3], hi: [f64; 3]) -> Vec<Ray> {
    let max = args.max_distance.unwrap_or(f64::INFINITY);
    let seed = args.seed ^ 0x5eed_4a75;
    (0..args.rays as u64)
        .into_par_iter()
        .map(|i| {
            let u = |k: u64| unit(seed, i, k);
            let mut o: [f64; 3] = std::array::from_fn(|a| lo[a] + (hi[a] - lo[a]) * u(a as u64));
            let direction = if args.from_above {
                o[2] = hi[2] + 1.0;
                // Within 30° of straight down: a uniform point of the spherical cap.
                let z = 1.0 - u(3) * (1.0 - 30f64.to_radians().cos());
                let (s, phi) = ((1.0 - z * z).sqrt(), std::f64::consts::TAU * u(4));
                [s * phi.cos(), s * phi.sin(), -z]
            } else {
                let z = 2.0 * u(3) - 1.0;
                let (s, phi) = ((1.0 - z * z).sqrt(), std::f64::consts::TAU * u(4));
                [s * phi.cos(), s * phi.sin(), z]
            };
            Ray::new(o, direction, max)
        })
        .collect()
}

/// FNV-1a over every hit's bits (distance, kind, id, an instance's triangle, point, normal),
/// a marker for none.
fn checksum<'a>(rows: impl Iterator<Item = &'a [RayHit]>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |v: u64| {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for row in rows {
        eat(row.len() as u64);
        for x in row {
            eat(x.distance.to_bits());
            eat(kind_code(x.kind) << 32 | x.id as u64);
            if x.kind == ContactKind::Instance {
                eat(x.triangle as u64);
            }
            x.point.iter().chain(&x.normal).for_each(|v| eat(v.to_bits()));
        }
    }
    h
}

/// A kind's number in the checksum and in `Batch::hits` (bodies 1, as before heightfields).
fn kind_code(k: ContactKind) -> u64 {
    match k {
        ContactKind::Triangle => 0,
        ContactKind::Body => 1,
        ContactKind::Heightfield => 2,
        ContactKind::Instance => 3,
    }
}

/// What one batch found.
struct Batch {
    time: Duration,
    /// Rays with a hit; hits on the mesh, on bodies, on the heightfield, on instances.
    rays_hit: usize,
    hits: [usize; 4],
    checksum: u64,
}

/// One batch: `first` is the vector of first hits kept from batch to batch, as a server
/// casting every tick would keep it.
fn run_batch(
    collider: &mut Collider,
    world: &World,
    rays: &[Ray],
    limit: Option<usize>,
    first: &mut Vec<Option<RayHit>>,
) -> CliResult<Batch> {
    let start = Instant::now();
    let batch = |time: Duration, rows: &mut dyn Iterator<Item = &[RayHit]>| {
        let (mut rays_hit, mut hits) = (0, [0usize; 4]);
        let mut all = Vec::new();
        for row in rows {
            rays_hit += !row.is_empty() as usize;
            for h in row {
                hits[kind_code(h.kind) as usize] += 1;
            }
            all.push(row);
        }
        Batch { time, rays_hit, hits, checksum: checksum(all.into_iter()) }
    };
    Ok(match limit {
        None => {
            collider.ray_casts_into(world, rays, first)?;
            batch(start.elapsed(), &mut first.iter().map(|h| h.as_slice()))
        }
        Some(limit) => {
            let all = collider.ray_casts_all(world, rays, limit)?;
            batch(start.elapsed(), &mut (0..all.len()).map(|i| all.row(i)))
        }
    })
}

pub fn run(args: &RaycastArgs) -> CliResult {
    if args.rays == 0 || args.batches == 0 {
        return Err(CliError("--rays and --batches must be at least 1".into()));
    }
    if args.limit == Some(0) {
        return Err(CliError("--limit must be at least 1 (leave it out for the first hit only)".into()));
    }
    if let Some(m) = args.max_distance {
        if m.is_nan() || m < 0.0 {
            return Err(CliError(format!("--max-distance must be a number >= 0 (got {m})")));
        }
    }
    // A ray, its first hit and the collider's copies of both.
    check_memory(&format!("--rays {}", args.rays), args.rays, 256)?;
    check_memory(&format!("--bodies {}", args.bodies), args.bodies, 256)?;
    let spinner = Spinner::start("building the scene", args.quiet);
    let scene = build_scene(args)?;
    let mut world = scene.world(args.cell_size)?;
    let placed = scene::place_instances(&mut world, args.instances, args.instance_shape.as_deref(), args.seed)?;
    let (mut lo, mut hi) = scene.mesh.vertices.bounds();
    if let Some(h) = &scene.heightfield {
        let (hlo, hhi) = h.bounds();
        if scene.mesh.triangles.is_empty() {
            (lo, hi) = (hlo, hhi);
        }
        for a in 0..3 {
            lo[a] = lo[a].min(hlo[a]);
            hi[a] = hi[a].max(hhi[a]);
        }
    }
    for b in &scene.bodies {
        for a in 0..3 {
            lo[a] = lo[a].min(b.center[a]);
            hi[a] = hi[a].max(b.center[a]);
        }
    }
    hi[2] += 2.0;
    let rays = make_rays(args, lo, hi);
    spinner.finish();
    let engine = Engine::with_options(args.device, &engine_options(false))?;
    if let (Some(n), false) = (engine.note(), args.quiet) {
        note!("note: {n}");
    }
    let opts = ColliderOptions { profile: args.profile, ..Default::default() };
    let mut collider = Collider::new(&engine, &opts)?;
    out!(
        "scene {}: {} triangles{}, {} bodies{}; {} rays {} a batch; device {}",
        scene.name,
        thousands(scene.mesh.triangles.len()),
        scene
            .heightfield
            .as_ref()
            .map(|h| format!(", a heightfield of {} triangles", thousands(h.triangle_count())))
            .unwrap_or_default(),
        thousands(world.body_count()),
        if placed.is_empty() { String::new() } else { format!(", {} instances", thousands(placed.len())) },
        thousands(rays.len()),
        if args.from_above { "from above" } else { "from random points, random directions," },
        collider.describe()
    );
    let mut kept = Vec::new();
    let first = run_batch(&mut collider, &world, &rays, args.limit, &mut kept)?;
    let mut batches = Vec::with_capacity(args.batches);
    for _ in 0..args.batches {
        if args.moving {
            // The same poses, marked changed.
            world.poses_mut();
        }
        let b = run_batch(&mut collider, &world, &rays, args.limit, &mut kept)?;
        if b.checksum != first.checksum {
            return Err(CliError(format!(
                "a batch's checksum {:016x} differs from the first's {:016x}",
                b.checksum, first.checksum
            )));
        }
        batches.push(b);
    }
    let mut times: Vec<Duration> = batches.iter().map(|b| b.time).collect();
    times.sort();
    let p50 = times[times.len() / 2];
    out!("first call (builds the mesh's tree; on a GPU, uploads it and the heights): {}", ms(first.time));
    out!(
        "{} batches: per batch p50 {}, min {}, max {}; {:.2} M rays/s",
        args.batches,
        ms(p50),
        ms(times[0]),
        ms(times[times.len() - 1]),
        rays.len() as f64 / p50.as_secs_f64() / 1e6
    );
    // On a GPU, the pinned bus's time for a batch's bytes, measured now: each ray goes up as
    // 7 f64 and a mask, and its first hit comes down as a tag and 7 f64 (and, where there are
    // instances, a triangle).
    let ray_bytes = if placed.is_empty() { 60 } else { 64 };
    if args.limit.is_none() {
        if let Some(f) = engine.bus_floor(ray_bytes * rays.len())? {
            let floor = f.pinned_up + f.pinned_down;
            out!(
                "transfer floor (pinned, {} up and down, measured now): {}; p50 / floor = {:.2}",
                crate::common::bytes((ray_bytes * rays.len()) as u128),
                ms(floor),
                p50.as_secs_f64() / floor.as_secs_f64()
            );
        }
    }
    let what = if args.limit.is_some() { "hits" } else { "first hits" };
    out!(
        "{} of {} rays hit something; {what}: {} on triangles, {}{} on bodies{}; checksum {:016x}",
        thousands(first.rays_hit),
        thousands(rays.len()),
        thousands(first.hits[0]),
        if first.hits[2] > 0 { format!("{} on the heightfield, ", thousands(first.hits[2])) } else { String::new() },
        thousands(first.hits[1]),
        if placed.is_empty() { String::new() } else { format!(", {} on instances", thousands(first.hits[3])) },
        first.checksum
    );
    Ok(())
}
