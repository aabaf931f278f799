//! `nearkit collide`: runs a collision world tick after tick and measures it.

use crate::{note, out};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use nearkit::collide::scene::Scene;
use nearkit::collide::{BodyId, Collider, ColliderOptions, Contact, ContactKind, InstanceId, Placement, Sweep, World};
use nearkit::{Device, Engine};

use super::scene::{self, SceneSpec};
use crate::common::{check_memory, check_out, engine_options, ms, parse_with, thousands, CliError, CliResult};
use crate::progress::{count_bar, Spinner};

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  nearkit collide                                  built-in: crater terrain, 4,000 ellipsoids
  nearkit collide --scene crater --device cpu --ticks 500
  nearkit collide --scene mesh:bunny00.off --bodies 20000
  nearkit collide --scene mesh:terrain.npy         a heightfield: 2-D array of heights, 1 m apart
  nearkit collide --scene stress                   1M bodies on a 1M-triangle terrain
  nearkit collide --scene dem                      20,000 bodies on a 10 km terrain of 30 m triangles
  nearkit collide --scene mesh:dem.npy --spacing 30   your own elevation model, 30 m apart
  nearkit collide --scene relief:4096x4096 --bodies 100000   a 4 km terrain kept as heights
  nearkit collide --switch-every 10                CPU and CUDA take turns; contacts must agree
  nearkit collide --instances 500 --moving-instances 20   500 placed buildings, 20 turning each tick
  nearkit collide --instances 100 --instance-shape bunny.ply   your own mesh, placed 100 times
  nearkit collide --contacts-out c.csv --scene-out last/

Every tick the bodies take a random step (the same steps on every device), then every
body–triangle and body–body overlap is found: exact ellipsoid tests, no tolerance. Times are
per tick, end to end (the GPU's include uploading the poses and downloading the contacts,
packed: 36 bytes each); the random walk itself is not timed. Contacts come sorted by (body, kind, other), a body pair
once with the smaller id as `body`; the normal moves `body` out by `depth`.")]
pub struct CollideArgs {
    /// crater (19,440 triangles), dem (a generated 344 × 403 elevation model, 30 m apart:
    /// 276,000 triangles), relief:ROWSxCOLS (a generated one of any size, --spacing apart),
    /// stress (1M triangles), or mesh:FILE (.ply, .off, .obj,
    /// .stl, or a 2-D .npy heightfield).
    #[arg(long, default_value = "crater")]
    pub scene: String,
    /// Number of bodies (default: 4,000; 20,000 for dem and relief; 1,000,000 for stress).
    #[arg(long)]
    pub bodies: Option<usize>,
    /// Ticks to run and time.
    #[arg(long, default_value_t = 100)]
    pub ticks: u64,
    /// Where to run: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto", value_parser = parse_with::<Device>)]
    pub device: Device,
    /// Alternate CPU and CUDA every N ticks, and check at each switch that both find the
    /// same contacts.
    #[arg(long)]
    pub switch_every: Option<u64>,
    /// Grid cell size in metres.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub cell_size: f64,
    /// A mesh scene is scaled so its longest side is this many metres (0: keep its units).
    /// Heightfields are never scaled; their samples are --spacing apart.
    #[arg(long, default_value_t = 50.0, allow_negative_numbers = true)]
    pub mesh_size: f64,
    /// Spacing of a .npy heightfield's samples, in metres.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub spacing: f64,
    /// Also time this many swept queries (shape casts): the bodies in turn, each moving 1.5 m
    /// along x, 0.5 m along y and 1.3 m down, against the terrain and the other bodies.
    #[arg(long, default_value_t = 0)]
    pub sweeps: usize,
    /// Place this many copies of a shape (--instance-shape) among the bodies, each at a
    /// random body's place, turned about z at random. Their triangles are kept once, in the
    /// shape's frame.
    #[arg(long, default_value_t = 0)]
    pub instances: usize,
    /// The shape --instances places: a mesh file (.ply, .off, .obj, .stl, in metres about its
    /// own origin). Default: a generated 10 × 6 m building, 4 m walls under a gabled roof.
    #[arg(long)]
    pub instance_shape: Option<PathBuf>,
    /// Turn this many of the instances a little every tick (moving platforms, doors): only
    /// the instances' top level is rebuilt; its time is printed apart.
    #[arg(long, default_value_t = 0)]
    pub moving_instances: usize,
    /// Write the last tick's contacts as CSV (tick,body,kind,other,triangle,nx,ny,nz,depth,px,py,pz).
    #[arg(long)]
    pub contacts_out: Option<PathBuf>,
    /// Write the last tick's scene into this folder: mesh.ply and bodies.csv.
    #[arg(long)]
    pub scene_out: Option<PathBuf>,
    /// Seed of the scene and the random walk.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print nothing but the summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print each tick's phase times to stderr.
    #[arg(long)]
    pub profile: bool,
    /// CPU: run the portable code even where the CPU has AVX2 (the same contacts).
    #[arg(long, help_heading = "Tuning (the contacts are the same)")]
    pub portable: bool,
    /// Give heightfields (dem, .npy) to the world as triangle meshes rather than as heights:
    /// the same contacts, of kind triangle instead of heightfield.
    #[arg(long, help_heading = "Tuning (the contacts are the same)")]
    pub as_mesh: bool,
    /// CUDA: launch a tick's kernels one by one instead of replaying a captured CUDA graph.
    #[arg(long, help_heading = "Tuning (the contacts are the same)")]
    pub no_cuda_graphs: bool,
    /// CUDA: copy a tick's contacts down after it instead of having its last kernel write
    /// them to host memory.
    #[arg(long, help_heading = "Tuning (the contacts are the same)")]
    pub no_zero_copy: bool,
    /// CUDA: bodies a warp of the contact kernel takes, 1 to 8 (default: from the bodies' sizes).
    #[arg(long, help_heading = "Tuning (the contacts are the same)")]
    pub bodies_per_warp: Option<usize>,
}

impl CollideArgs {
    fn collider_options(&self) -> ColliderOptions {
        ColliderOptions {
            portable_code: self.portable,
            cuda_graphs: !self.no_cuda_graphs,
            zero_copy: !self.no_zero_copy,
            bodies_per_warp: self.bodies_per_warp,
            profile: self.profile,
        }
    }
}

fn build_scene(args: &CollideArgs) -> CliResult<Scene> {
    if args.bodies == Some(0) {
        return Err(CliError("--bodies must be at least 1".into()));
    }
    scene::build(&SceneSpec {
        scene: &args.scene,
        bodies: args.bodies,
        mesh_size: (args.mesh_size, "--mesh-size"),
        spacing: args.spacing,
        as_mesh: args.as_mesh,
        seed: args.seed,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn first_difference(a: &[Contact], b: &[Contact]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("first difference at contact {i}: {:?} vs {:?}", a[i], b[i]),
        None => format!("{} contacts vs {}", a.len(), b.len()),
    }
}

/// The collider(s) to run: one on `--device`, or a CPU and a CUDA one taking turns; and a
/// description of them.
fn open_colliders(args: &CollideArgs) -> CliResult<(Collider, Option<Collider>, String)> {
    let opts = args.collider_options();
    let engine_opts = engine_options(false);
    if args.switch_every.is_some() {
        let cuda = Engine::with_options(Device::Cuda(0), &engine_opts)
            .map_err(|e| CliError(format!("--switch-every needs a usable CUDA GPU: {e}")))?;
        let cpu = Collider::new(&Engine::cpu(), &opts)?;
        return Ok((cpu, Some(Collider::new(&cuda, &opts)?), "cpu and cuda, taking turns".to_string()));
    }
    let engine = Engine::with_options(args.device, &engine_opts)?;
    if let (Some(n), false) = (engine.note(), args.quiet) {
        note!("note: {n}");
    }
    let c = Collider::new(&engine, &opts)?;
    let d = c.describe();
    Ok((c, None, d))
}

/// What the timed ticks found.
#[derive(Default)]
struct TickStats {
    /// Milliseconds per tick.
    times: Vec<f64>,
    triangle_contacts: Vec<usize>,
    body_contacts: Vec<usize>,
    instance_contacts: Vec<usize>,
    /// Milliseconds per tick spent moving instances (`--moving-instances`).
    moves: Vec<f64>,
    /// Switches at which the CPU and CUDA contacts were compared (and agreed).
    checks: usize,
    /// The last tick's contacts, when they are to be written.
    last: Vec<Contact>,
}

/// Runs and times `--ticks` ticks (the bodies' random walk between them is not timed),
/// taking turns between the colliders and comparing them at each switch if asked.
fn run_ticks(
    args: &CollideArgs,
    scene: &Scene,
    world: &mut World,
    placed: &[InstanceId],
    first: &mut Collider,
    mut second: Option<&mut Collider>,
) -> CliResult<TickStats> {
    let bar = count_bar(args.ticks, "ticks", args.quiet);
    let mut stats = TickStats::default();
    let moving = &placed[..args.moving_instances.min(placed.len())];
    for tick in 0..args.ticks {
        scene.advance(world, tick);
        if !moving.is_empty() {
            let start = Instant::now();
            turn_instances(world, moving, tick)?;
            stats.moves.push(start.elapsed().as_secs_f64() * 1e3);
        }
        let on_second = args.switch_every.is_some_and(|n| (tick / n) % 2 == 1);
        let check_now = args.switch_every.is_some_and(|n| tick % n == 0);
        let keep = check_now || (tick + 1 == args.ticks && args.contacts_out.is_some());
        let snapshot = {
            let active = if on_second { second.as_deref_mut().expect("opened") } else { &mut *first };
            let start = Instant::now();
            let contacts = active.contacts_packed(world)?;
            stats.times.push(start.elapsed().as_secs_f64() * 1e3);
            let (on_bodies, on_instances) = (contacts.count(ContactKind::Body), contacts.count(ContactKind::Instance));
            stats.triangle_contacts.push(contacts.len() - on_bodies - on_instances);
            stats.body_contacts.push(on_bodies);
            stats.instance_contacts.push(on_instances);
            keep.then(|| contacts.to_vec())
        };
        if check_now {
            let mine = snapshot.as_ref().expect("kept");
            let other = if on_second { &mut *first } else { second.as_deref_mut().expect("opened") };
            let check = other.contacts(world)?;
            if &check != mine {
                return Err(CliError(format!(
                    "tick {tick}: CPU and CUDA contacts differ ({})",
                    first_difference(mine, &check)
                )));
            }
            stats.checks += 1;
        }
        if let Some(s) = snapshot {
            stats.last = s;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(stats)
}

fn print_stats(ticks: u64, stats: &TickStats) -> CliResult {
    let mut sorted = stats.times.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
    out!(
        "{} ticks: per tick p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms (mean {:.3} ms)",
        ticks,
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.9),
        percentile(&sorted, 0.99),
        sorted[sorted.len() - 1],
        stats.times.iter().sum::<f64>() / stats.times.len() as f64
    );
    out!(
        "contacts per tick: {:.0} body–triangle, {:.0} body–body (last tick {} and {})",
        mean(&stats.triangle_contacts),
        mean(&stats.body_contacts),
        thousands(*stats.triangle_contacts.last().unwrap()),
        thousands(*stats.body_contacts.last().unwrap())
    );
    if stats.instance_contacts.iter().any(|&n| n > 0) {
        out!("contacts per tick with instances: {:.0}", mean(&stats.instance_contacts));
    }
    if !stats.moves.is_empty() {
        let mut m = stats.moves.clone();
        m.sort_by(f64::total_cmp);
        out!(
            "moving instances (untimed above): p50 {:.3} ms, max {:.3} ms per tick",
            percentile(&m, 0.5),
            m[m.len() - 1]
        );
    }
    if stats.checks > 0 {
        out!("CPU and CUDA agreed bit for bit at {} switches", stats.checks);
    }
    Ok(())
}

/// `--instances` (see `scene::place_instances`).
fn place_instances(args: &CollideArgs, world: &mut World) -> CliResult<Vec<InstanceId>> {
    if args.instances == 0 && args.moving_instances > 0 {
        return Err(CliError("--moving-instances needs --instances N".into()));
    }
    scene::place_instances(world, args.instances, args.instance_shape.as_deref(), args.seed)
}

/// `--moving-instances`: each of `ids` turns 1° about z a tick, in one batch.
fn turn_instances(world: &mut World, ids: &[InstanceId], tick: u64) -> CliResult {
    let half = (tick as f64 + 1.0).to_radians() / 2.0;
    let placements: Vec<Placement> = ids
        .iter()
        .map(|&id| {
            let p = world.instance(id).expect("placed");
            Placement { orientation: [0.0, 0.0, half.sin(), half.cos()], ..p }
        })
        .collect();
    world.set_instances(ids, &placements)?;
    Ok(())
}

/// Times `count` swept queries: the bodies in turn, each moving 1.5 m along x, 0.5 m along y
/// and 1.3 m down, against the terrain and the other bodies.
fn time_sweeps(world: &World, collider: &mut Collider, count: usize) -> CliResult {
    let b = world.bodies();
    let alive: Vec<usize> = (0..b.len()).filter(|&i| b.alive[i]).collect();
    if alive.is_empty() {
        return Err(CliError("--sweeps moves the bodies: give --bodies 1 or more".into()));
    }
    let sweeps: Vec<Sweep> = (0..count)
        .map(|k| {
            let i = alive[k % alive.len()];
            let c = b.center[i];
            Sweep::new(b.radii[i], b.orientation[i], c, [c[0] + 1.5, c[1] + 0.5, c[2] - 1.3]).ignoring(BodyId(i as u32))
        })
        .collect();
    collider.sweeps(world, &sweeps)?; // warm-up (uploads)
    let start = Instant::now();
    let hits = collider.sweeps(world, &sweeps)?;
    let t = start.elapsed();
    let on = |kind: ContactKind| hits.iter().filter(|h| h.is_some_and(|h| h.kind == kind)).count();
    let instances = match on(ContactKind::Instance) {
        0 => String::new(),
        n => format!(", {} an instance", thousands(n)),
    };
    out!(
        "{} swept queries in {} ({:.1} M/s): {} hit the mesh or terrain first, {} a body{instances}",
        thousands(sweeps.len()),
        ms(t),
        sweeps.len() as f64 / t.as_secs_f64() / 1e6,
        thousands(hits.iter().filter(|h| h.is_some()).count() - on(ContactKind::Body) - on(ContactKind::Instance)),
        thousands(on(ContactKind::Body))
    );
    Ok(())
}

/// `--contacts-out` must be CSV, no output may overwrite an input (the scene's mesh, the
/// instances' shape) or another output; checked before the ticks run.
fn check_outputs(args: &CollideArgs) -> CliResult {
    let inputs = [args.scene.strip_prefix("mesh:").map(Path::new), args.instance_shape.as_deref()];
    if let Some(path) = &args.contacts_out {
        if path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() != Some("csv") {
            return Err(CliError(format!(
                "{}: contacts are written as CSV (tick,body,kind,other,triangle,nx,ny,nz,depth,px,py,pz): name the file .csv",
                path.display()
            )));
        }
        check_out(path, &inputs)?;
    }
    if let Some(dir) = &args.scene_out {
        if dir.exists() && !dir.is_dir() {
            return Err(CliError(format!("{}: --scene-out names a file; give a folder", dir.display())));
        }
        for name in ["mesh.ply", "bodies.csv"] {
            let file = dir.join(name);
            check_out(&file, &inputs)?;
            if let Some(contacts) = args.contacts_out.as_deref().filter(|c| nearkit_io::same_file(c, &file)) {
                return Err(CliError(format!(
                    "{}: --contacts-out is a file --scene-out writes ({name}): choose another name",
                    contacts.display()
                )));
            }
        }
    }
    Ok(())
}

/// `--contacts-out` and `--scene-out`, all or none: a failed write leaves every file there
/// was as it was.
fn write_outputs(args: &CollideArgs, scene: &Scene, world: &World, last: &[Contact]) -> CliResult {
    let terrain = scene.heightfield.as_ref().map(|h| h.to_mesh());
    let files = args.scene_out.as_ref().map(|dir| (dir.join("mesh.ply"), dir.join("bodies.csv")));
    let mut parts: Vec<nearkit_io::Part> = Vec::new();
    if let Some(path) = &args.contacts_out {
        parts.push((path, Box::new(|p: &Path| nearkit_io::write_contacts(p, args.ticks - 1, last))));
    }
    let mut created = None;
    if let (Some(dir), Some((mesh, bodies))) = (&args.scene_out, &files) {
        if !dir.exists() {
            created = Some(dir);
        }
        std::fs::create_dir_all(dir).map_err(|e| CliError(format!("{}: cannot create: {e}", dir.display())))?;
        let m = terrain.as_ref().unwrap_or(&scene.mesh);
        parts.push((mesh, Box::new(move |p: &Path| nearkit_io::write_mesh_ply(p, m))));
        parts.push((bodies, Box::new(|p: &Path| nearkit_io::write_bodies(p, world))));
    }
    if let Err(e) = nearkit_io::write_together(parts) {
        // A folder made for a scene that could not be written goes too.
        if let Some(dir) = created {
            let _ = std::fs::remove_dir_all(dir);
        }
        return Err(e.into());
    }
    if !args.quiet {
        if let Some(path) = &args.contacts_out {
            note!("wrote {} contacts to {}", thousands(last.len()), path.display());
        }
        if let Some((mesh, bodies)) = &files {
            note!("wrote {} and {}", mesh.display(), bodies.display());
        }
    }
    Ok(())
}

pub fn run(args: &CollideArgs) -> CliResult {
    if args.ticks == 0 {
        return Err(CliError("--ticks must be at least 1".into()));
    }
    if args.switch_every == Some(0) {
        return Err(CliError("--switch-every must be at least 1".into()));
    }
    check_outputs(args)?;
    // A body's state, its scene data and the colliders' per-body arrays.
    let bodies = args.bodies.unwrap_or(match args.scene.as_str() {
        "stress" => 1_000_000,
        s if s == "dem" || s.starts_with("relief:") => 20_000,
        _ => 4000,
    });
    check_memory(&format!("--bodies {bodies}"), bodies, 256)?;
    let sweep = std::mem::size_of::<Sweep>() + std::mem::size_of::<nearkit::collide::SweepResult>();
    check_memory(&format!("--sweeps {}", args.sweeps), args.sweeps, sweep as u64)?;
    let spinner = Spinner::start("building the scene", args.quiet);
    let scene = build_scene(args)?;
    let mut world: World = scene.world(args.cell_size)?;
    let placed = place_instances(args, &mut world)?;
    spinner.finish();
    let (mut first, mut second, device) = open_colliders(args)?;
    let instances = match placed.first() {
        Some(&id) => {
            let shape = world.instance(id).expect("placed").shape;
            format!(
                ", {} instances of {} triangles",
                thousands(placed.len()),
                thousands(world.shape_triangle_count(shape)?)
            )
        }
        None => String::new(),
    };
    out!(
        "scene {}: {} triangles, {} bodies{instances}, {} m cells; device {}",
        scene.name,
        thousands(world.triangle_count() + world.heightfield().map_or(0, |h| h.triangle_count())),
        thousands(world.body_count()),
        args.cell_size,
        device
    );
    // One untimed tick: uploads the mesh, compiles nothing new, warms the allocators.
    first.contacts(&world)?;
    if let Some(s) = second.as_mut() {
        s.contacts(&world)?;
    }
    let stats = run_ticks(args, &scene, &mut world, &placed, &mut first, second.as_mut())?;
    print_stats(args.ticks, &stats)?;
    if args.sweeps > 0 {
        time_sweeps(&world, &mut first, args.sweeps)?;
    }
    write_outputs(args, &scene, &world, &stats.last)
}
