//! The scenes `nearkit collide` and `nearkit raycast` build: generated ones by name, or a
//! mesh or heightfield file, with bodies on them.

use std::path::{Path, PathBuf};

use nearkit::collide::scene::Scene;
use nearkit::collide::{InstanceId, Placement, World};
use nearkit::{Mesh, Points};

use crate::common::{CliError, CliResult};

/// What the scene options say.
pub struct SceneSpec<'a> {
    /// crater, dem, relief:ROWSxCOLS, stress or mesh:FILE.
    pub scene: &'a str,
    /// Bodies (default: each scene's own).
    pub bodies: Option<usize>,
    /// The size a mesh file is scaled to (0: its own units), and the flag that gives it.
    pub mesh_size: (f64, &'static str),
    /// A heightfield's spacing (relief, .npy).
    pub spacing: f64,
    /// Heightfields given as triangle meshes.
    pub as_mesh: bool,
    pub seed: u64,
}

/// The scene (see `SceneSpec`).
pub fn build(args: &SceneSpec) -> CliResult<Scene> {
    let count = |default: usize| args.bodies.unwrap_or(default);
    match args.scene {
        "crater" => Ok(Scene::crater(count(4000), args.seed)),
        "stress" => Ok(Scene::stress(count(1_000_000), args.seed)),
        "dem" if args.as_mesh => {
            Ok(Scene::on_surface("dem", nearkit::collide::scene::dem_terrain(), count(20_000), (0.2, 0.8), args.seed))
        }
        "dem" => Ok(Scene::dem(count(20_000), args.seed)),
        s if s.starts_with("relief:") => {
            let size = s.trim_start_matches("relief:");
            let parsed = size.split_once('x').and_then(|(r, c)| Some((r.parse().ok()?, c.parse().ok()?)));
            let Some((rows, cols)) = parsed else {
                return Err(CliError(format!(
                    "scene '{s}': give the samples as relief:ROWSxCOLS, e.g. relief:4096x4096"
                )));
            };
            if !(args.spacing.is_finite() && args.spacing > 0.0) {
                return Err(CliError(format!("--spacing must be a positive number, got {}", args.spacing)));
            }
            let terrain = nearkit::collide::scene::relief_heightfield(rows, cols, args.spacing)?;
            if args.as_mesh {
                Ok(Scene::on_surface(s, terrain.to_mesh(), count(20_000), (0.2, 0.8), args.seed))
            } else {
                Ok(Scene::on_heightfield(s, terrain, count(20_000), (0.2, 0.8), args.seed))
            }
        }
        s => {
            let Some(file) = s.strip_prefix("mesh:").map(PathBuf::from) else {
                return Err(CliError(format!(
                    "unknown scene '{s}': use crater, dem, relief:ROWSxCOLS, stress or mesh:FILE"
                )));
            };
            let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            if file.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
                if !(args.spacing.is_finite() && args.spacing > 0.0) {
                    return Err(CliError(format!("--spacing must be a positive number, got {}", args.spacing)));
                }
                let terrain = nearkit_io::read_heightfield(&file, args.spacing)?;
                if args.as_mesh {
                    Ok(Scene::on_surface(&name, terrain.to_mesh(), count(4000), (0.2, 0.8), args.seed))
                } else {
                    Ok(Scene::on_heightfield(&name, terrain, count(4000), (0.2, 0.8), args.seed))
                }
            } else {
                let mesh = nearkit_io::read_mesh::<f64>(&file)?;
                let (size, flag) = args.mesh_size;
                if !(size.is_finite() && size >= 0.0) {
                    return Err(CliError(format!("{flag} must be a number >= 0, got {size}")));
                }
                if size > 0.0 {
                    Ok(Scene::on_mesh(&name, &mesh, size, count(4000), args.seed))
                } else {
                    Ok(Scene::on_surface(&name, mesh, count(4000), (0.2, 0.8), args.seed))
                }
            }
        }
    }
}

/// A 10 × 6 m building about its origin: a box of 4 m walls (its floor at z = 0) under a
/// gabled roof rising to 6 m (18 triangles).
fn building() -> Mesh<f64> {
    let (x, y, wall, ridge) = (5.0, 3.0, 4.0, 6.0);
    let v = [
        [-x, -y, 0.0],
        [x, -y, 0.0],
        [x, y, 0.0],
        [-x, y, 0.0],
        [-x, -y, wall],
        [x, -y, wall],
        [x, y, wall],
        [-x, y, wall],
        [-x, 0.0, ridge],
        [x, 0.0, ridge],
    ];
    let triangles = vec![
        [0, 2, 1],
        [0, 3, 2],
        [0, 1, 5],
        [0, 5, 4],
        [1, 2, 6],
        [1, 6, 5],
        [2, 3, 7],
        [2, 7, 6],
        [3, 0, 4],
        [3, 4, 7],
        [4, 5, 9],
        [4, 9, 8],
        [7, 8, 9],
        [7, 9, 6],
        [4, 8, 7],
        [5, 6, 9],
    ];
    Mesh { vertices: Points::from_rows(&v), triangles }
}

/// `--instances`: `count` copies of a shape (`shape_file`, or a building) at bodies' places
/// (spread over the bodies in id order), turned about z by a seeded random angle.
pub fn place_instances(
    world: &mut World,
    count: usize,
    shape_file: Option<&Path>,
    seed: u64,
) -> CliResult<Vec<InstanceId>> {
    if count == 0 {
        if shape_file.is_some() {
            return Err(CliError("--instance-shape needs --instances N".into()));
        }
        return Ok(Vec::new());
    }
    let mesh = match shape_file {
        Some(path) => nearkit_io::read_mesh::<f64>(path)?,
        None => building(),
    };
    let shape = world.add_shape(&mesh)?;
    let b = world.bodies();
    let alive: Vec<usize> = (0..b.len()).filter(|&i| b.alive[i]).collect();
    if alive.is_empty() {
        return Err(CliError("--instances places shapes among the bodies: give --bodies 1 or more".into()));
    }
    let mut seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let placements: Vec<Placement> = (0..count)
        .map(|k| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let angle = (seed >> 11) as f64 / (1u64 << 53) as f64 * std::f64::consts::TAU;
            let c = b.center[alive[k * alive.len() / count]];
            Placement::new(shape, [c[0], c[1], c[2] - 1.0], [0.0, 0.0, (angle / 2.0).sin(), (angle / 2.0).cos()])
        })
        .collect();
    Ok(world.add_instances(&placements)?)
}
