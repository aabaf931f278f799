//! The static mesh: its triangles' corners, planes and boxes, gridded once (a level per size
//! of triangle, `level_grid`). The world's mesh is one; so is each shape instances place.

use super::ellipsoid::{cross, dot, normalize, sub, V3};
use super::heightfield::MAX_TRIANGLES;
use super::level_grid::LevelGrid;
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;

/// The static mesh, gridded once (a level per size of triangle).
#[derive(Debug)]
pub(crate) struct StaticMesh {
    pub corners: Vec<[V3; 3]>,
    /// Unit normal and offset (n·corner) of each triangle's plane; a zero normal for a
    /// degenerate triangle. For a quick, conservative reject only.
    pub plane: Vec<[f64; 4]>,
    pub lo: Vec<V3>,
    pub hi: Vec<V3>,
    /// The triangles gridded with the world's cell as the finest level's cells.
    pub grid: LevelGrid,
}

impl StaticMesh {
    pub(crate) fn new(mesh: &Mesh<f64>, cell_size: f64) -> Result<Self> {
        mesh.validate()?;
        if mesh.triangles.len() >= MAX_TRIANGLES {
            return Err(Error::InvalidArgument(format!(
                "the mesh has {} triangles; a world's mesh holds fewer than 2^30",
                mesh.triangles.len()
            )));
        }
        let corners: Vec<[V3; 3]> = (0..mesh.triangles.len()).map(|t| mesh.corners(t)).collect();
        let lo: Vec<V3> = corners.iter().map(|c| std::array::from_fn(|a| c[0][a].min(c[1][a]).min(c[2][a]))).collect();
        let hi: Vec<V3> = corners.iter().map(|c| std::array::from_fn(|a| c[0][a].max(c[1][a]).max(c[2][a]))).collect();
        let grid = LevelGrid::build(&lo, &hi, cell_size)?;
        let plane = corners
            .iter()
            .map(|c| match normalize(cross(sub(c[1], c[0]), sub(c[2], c[0]))) {
                Some(n) => [n[0], n[1], n[2], dot(n, c[0])],
                None => [0.0; 4],
            })
            .collect();
        Ok(StaticMesh { corners, plane, lo, hi, grid })
    }
}
