//! The scenes `nearkit collide` and `nearkit raycast` build: generated ones by name, or a
//! mesh or heightfield file, with bodies on them.

use std::path::PathBuf;

use nearkit::collide::scene::Scene;

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
            if file.extension().and_then(|e| e.to_str()) == Some("npy") {
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
