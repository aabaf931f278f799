//! Candidate lists kept from tick to tick (Verlet lists) for the CPU collider.
//!
//! Each body holds a *fat box*: its box widened by a margin. With it go the triangles whose
//! boxes overlap the fat box, and the bodies whose fat boxes overlap it. While a body's box stays
//! inside its fat box, those lists still hold every triangle and body its box can overlap, so a
//! tick tests only them. A body that leaves its fat box gets a new one and new lists. Bodies
//! move centimetres a tick, so a tick re-lists a small part of them, and the rest cost no grid
//! work at all.
//!
//! Placed instances' triangles are listed the same way, with their world corners, for the fat
//! box and the body's layer mask; when an instance is added, moved or removed, the lists are
//! dropped, and made afresh once the instances stand still for a tick.
//!
//! Exactness: a list is a superset of what the box test passes (the box lies inside the fat
//! box, and box overlap is monotone in the boxes), and the exact tests decide. So the contacts
//! are those a fresh grid gives, bit for bit, whatever the lists' history.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use rayon::prelude::*;

use crate::collide::box_f32::box_f32;
use crate::collide::ellipsoid::V3;
use crate::collide::hash_grid::{boxes_overlap, bucket_of, cell_key, owns_pair, CellRange};
use crate::collide::level_grid::LevelGrid;
use crate::collide::world::{body_error, InstancePart, StaticMesh, World};
use crate::error::Result;

/// A body's box: (lo, hi).
pub type BodyBox = (V3, V3);

/// A triangle of a placed instance: (instance, triangle) and its world corners.
pub type PlacedTriangle = (InstancePart, [V3; 3]);

/// A body's shape, box and Σ, made at the start of a tick.
pub(crate) type ShapeBox = (crate::collide::ellipsoid::Shape, BodyBox, [f64; 6]);

/// The margin of a fat box, as a share of the grid cell and of the body's largest half extent.
/// Wider boxes are left less often but list more.
const MARGIN_OF_CELL: f64 = 0.1;
const MARGIN_OF_BODY: f64 = 0.4;

#[derive(Clone, Copy, Debug)]
pub struct FatBox {
    pub lo: V3,
    pub hi: V3,
    pub cells: CellRange,
}

/// What the narrow phase's first tests read of a triangle, in one cache line: its box in f32,
/// rounded outwards (so the test passes whatever the f64 test passes), and its plane.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub struct TriangleFilter {
    pub lo: [f32; 3],
    pub hi: [f32; 3],
    /// Unit normal and offset (`StaticMesh::plane`).
    pub plane: [f64; 4],
}

#[inline(always)]
fn inside(b: &BodyBox, f: &FatBox) -> bool {
    (0..3).all(|a| f.lo[a] <= b.0[a] && b.1[a] <= f.hi[a])
}

/// What the lists were made for: any change (a body added or removed, layers, the mesh, the
/// cell size, another world) starts them afresh.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Made {
    world: u64,
    mesh: u64,
    shapes: u64,
    cell_size: u64,
    bodies: usize,
}

/// Hashes a cell key with `hash_grid::bucket_of` (the keys are already well spread integers).
#[derive(Default)]
struct CellHasher(u64);

impl Hasher for CellHasher {
    fn finish(&self) -> u64 {
        bucket_of(self.0, u64::MAX) as u64
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[derive(Default)]
pub struct CandidateLists {
    made: Option<Made>,
    pub fat: Vec<Option<FatBox>>,
    /// Body i's triangles, ascending.
    pub triangles: Vec<Vec<u32>>,
    /// Body i's neighbours, lower and higher ids alike, in no order.
    pub bodies: Vec<Vec<u32>>,
    /// The lists' own grid cell: about twice a body's box, so that a fat box enters few
    /// cells (the world's cells suit the exact tests' candidates, not the re-listing).
    cell: f64,
    /// The mesh's triangles gridded with `cell` as the finest level's cells.
    mesh_grid: LevelGrid,
    /// Each triangle's box and plane for the narrow phase's first tests.
    pub triangle_filter: Vec<TriangleFilter>,
    /// The bodies whose fat boxes enter each cell.
    cells: HashMap<u64, Vec<u32>, BuildHasherDefault<CellHasher>>,
    moving: Vec<bool>,
    /// Body i's triangles of placed instances under its fat box, for the layer mask
    /// `instance_mask[i]`: ((instance, triangle), world corners), in that order.
    instance_parts: Vec<Vec<PlacedTriangle>>,
    /// The mask each body's instances' list was made for (`None`: no list).
    instance_mask: Vec<Option<u32>>,
    /// The world and instances' version the instances' lists were made for, and the one the
    /// last update saw.
    instances_made: Option<(u64, u64)>,
    instances_seen: Option<(u64, u64)>,
    /// Bodies re-listed by the last update (for profiling).
    pub relisted: usize,
}

impl CandidateLists {
    /// Brings the lists up to date with this tick's boxes (`None`: no body in that slot).
    /// After an error (a fat box beyond the grid's range) the lists start afresh next time.
    pub fn update(&mut self, world: &World, boxes: &[Option<BodyBox>]) -> Result<()> {
        let done = self.try_update(world, boxes);
        if done.is_err() {
            self.made = None;
        }
        done
    }

    /// Body `i`'s listed triangles of placed instances, when they were listed for `mask`.
    pub fn instance_parts(&self, i: usize, mask: u32) -> Option<&[PlacedTriangle]> {
        (self.instances_made.is_some() && self.instance_mask.get(i) == Some(&Some(mask)) && self.fat[i].is_some())
            .then(|| &self.instance_parts[i][..])
    }

    fn try_update(&mut self, world: &World, boxes: &[Option<BodyBox>]) -> Result<()> {
        self.start_afresh_if_the_world_changed(world, boxes)?;
        let movers = self.movers(boxes);
        if !movers.is_empty() {
            self.take_out(&movers);
            self.put_in(world, boxes, &movers)?;
            self.relist(world, &movers)?;
        }
        self.relist_instances(world, &movers);
        Ok(())
    }

    /// The instances' lists of the movers; of every body once the instances changed and then
    /// stood still for a tick; none while they keep changing (moving platforms, doors: each
    /// tick then searches the instances afresh, as listing every body each tick costs more).
    fn relist_instances(&mut self, world: &World, movers: &[u32]) {
        let instances = world.instances();
        let now = Some((world.id(), world.versions().instances));
        let n = self.fat.len();
        let all: Vec<u32>;
        let who = if instances.is_empty() {
            self.instances_made = None;
            return;
        } else if self.instances_made == now && self.instance_parts.len() == n {
            movers
        } else if self.instances_seen != now {
            self.instances_seen = now;
            self.instances_made = None;
            return;
        } else {
            self.instance_parts = vec![Vec::new(); n];
            self.instance_mask = vec![None; n];
            all = (0..n as u32).filter(|&i| self.fat[i as usize].is_some()).collect();
            &all[..]
        };
        self.instances_made = None;
        let (fat, masks) = (&self.fat, &world.bodies().mask);
        let fresh: Vec<Option<Vec<PlacedTriangle>>> = who
            .par_iter()
            .with_min_len(16)
            .map(|&i| {
                let f = fat[i as usize].as_ref()?;
                let mut out = Vec::new();
                // A fat box beyond the instances' range: no list (the tick searches afresh
                // for the body's own box, and reports an error there).
                instances.overlapping(&f.lo, &f.hi, masks[i as usize], |inst, t, c| out.push(([inst, t], c))).ok()?;
                out.sort_unstable_by_key(|x| x.0);
                Some(out)
            })
            .collect();
        for (&i, list) in who.iter().zip(fresh) {
            let i = i as usize;
            self.instance_mask[i] = list.as_ref().map(|_| masks[i]);
            self.instance_parts[i] = list.unwrap_or_default();
        }
        self.instances_made = now;
    }

    /// When the mesh, the shapes, the cell size or the number of bodies changed since the
    /// lists were made (or in another world): empty lists, and the mesh gridded afresh at
    /// the lists' own cell size.
    fn start_afresh_if_the_world_changed(&mut self, world: &World, boxes: &[Option<BodyBox>]) -> Result<()> {
        let n = boxes.len();
        let v = world.versions();
        let made = Made {
            world: world.id(),
            mesh: v.mesh,
            shapes: v.shapes,
            cell_size: world.cell_size().to_bits(),
            bodies: n,
        };
        if self.made == Some(made) {
            return Ok(());
        }
        self.made = Some(made);
        self.fat = vec![None; n];
        self.triangles = vec![Vec::new(); n];
        self.bodies = vec![Vec::new(); n];
        self.cells.clear();
        let extents: Vec<f64> =
            boxes.iter().flatten().map(|(lo, hi)| (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max)).collect();
        let mean = extents.iter().sum::<f64>() / extents.len().max(1) as f64;
        self.cell = world.cell_size().max(2.0 * mean);
        self.mesh_grid = match world.mesh() {
            Some(m) => LevelGrid::build(&m.lo, &m.hi, self.cell)?,
            None => LevelGrid::default(),
        };
        self.triangle_filter = match world.mesh() {
            Some(m) => (0..m.lo.len())
                .into_par_iter()
                .with_min_len(4096)
                .map(|t| {
                    let (lo, hi) = box_f32(&m.lo[t], &m.hi[t]);
                    TriangleFilter { lo, hi, plane: m.plane[t] }
                })
                .collect(),
            None => Vec::new(),
        };
        Ok(())
    }

    /// The bodies out of their fat boxes (or new, or gone). When most bodies moved far (a
    /// teleport, a new scene), every body, after emptying the lists: starting afresh is
    /// cheaper than taking each one out of the cells and its neighbours' lists.
    fn movers(&mut self, boxes: &[Option<BodyBox>]) -> Vec<u32> {
        let n = boxes.len();
        let fat = &self.fat;
        let mut movers: Vec<u32> = (0..n as u32)
            .into_par_iter()
            .with_min_len(1024)
            .filter(|&i| match (&boxes[i as usize], &fat[i as usize]) {
                (Some(b), Some(f)) => !inside(b, f),
                (None, None) => false,
                _ => true,
            })
            .collect();
        if movers.len() > n / 2 {
            self.fat.iter_mut().for_each(|f| *f = None);
            self.triangles.iter_mut().for_each(Vec::clear);
            self.bodies.iter_mut().for_each(Vec::clear);
            self.cells.clear();
            movers = (0..n as u32).filter(|&i| boxes[i as usize].is_some()).collect();
        }
        self.relisted = movers.len();
        movers
    }

    /// Takes the movers out of the cells and out of their neighbours' lists.
    fn take_out(&mut self, movers: &[u32]) {
        self.moving.clear();
        self.moving.resize(self.fat.len(), false);
        for &i in movers {
            let i = i as usize;
            self.moving[i] = true;
            if let Some(f) = self.fat[i].take() {
                for c in f.cells.cells() {
                    if let Some(list) = self.cells.get_mut(&cell_key(c)) {
                        if let Some(at) = list.iter().position(|&x| x as usize == i) {
                            list.swap_remove(at);
                        }
                    }
                }
                for j in std::mem::take(&mut self.bodies[i]) {
                    let list = &mut self.bodies[j as usize];
                    if let Some(at) = list.iter().position(|&x| x as usize == i) {
                        list.swap_remove(at);
                    }
                }
            }
        }
    }

    /// The movers' new fat boxes (their boxes widened by a margin), into the cells.
    fn put_in(&mut self, world: &World, boxes: &[Option<BodyBox>], movers: &[u32]) -> Result<()> {
        let cell_size = self.cell;
        for &i in movers {
            let i = i as usize;
            if let Some((lo, hi)) = boxes[i] {
                let h = (0..3).map(|a| 0.5 * (hi[a] - lo[a])).fold(0.0, f64::max);
                let m = MARGIN_OF_CELL * world.cell_size() + MARGIN_OF_BODY * h;
                let (lo, hi) = (lo.map(|x| x - m), hi.map(|x| x + m));
                let cells = CellRange::of_box(lo, hi, cell_size).map_err(|e| body_error(i, e))?;
                let f = FatBox { lo, hi, cells };
                for c in f.cells.cells() {
                    self.cells.entry(cell_key(c)).or_default().push(i as u32);
                }
                self.fat[i] = Some(f);
            }
        }
        Ok(())
    }

    /// The movers' new lists, and the movers added to their new neighbours' lists. A pair
    /// of fat boxes is found in the cell of its intersection's low corner only.
    fn relist(&mut self, world: &World, movers: &[u32]) -> Result<()> {
        let (fat, cells) = (&self.fat, &self.cells);
        let mesh = world.mesh().map(|m| (&**m, &self.mesh_grid));
        let fresh: Vec<(Vec<u32>, Vec<u32>)> = movers
            .par_iter()
            .with_min_len(16)
            .map(|&i| match &fat[i as usize] {
                Some(f) => {
                    let tris = match mesh {
                        Some((m, g)) => triangles_of(m, g, f).map_err(|e| body_error(i as usize, e))?,
                        None => Vec::new(),
                    };
                    Ok((tris, bodies_of(i, f, fat, cells)))
                }
                None => Ok((Vec::new(), Vec::new())),
            })
            .collect::<Result<_>>()?;
        for (&i, (tris, near)) in movers.iter().zip(fresh) {
            for &j in &near {
                if !self.moving[j as usize] {
                    self.bodies[j as usize].push(i);
                }
            }
            self.triangles[i as usize] = tris;
            self.bodies[i as usize] = near;
        }
        Ok(())
    }
}

/// The triangles whose boxes overlap fat box `f`, ascending.
fn triangles_of(m: &StaticMesh, grid: &LevelGrid, f: &FatBox) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    grid.overlapping(&f.lo, &f.hi, &m.lo, &m.hi, |t| out.push(t))?;
    out.sort_unstable();
    Ok(out)
}

/// The other bodies whose fat boxes overlap body i's.
fn bodies_of(
    i: u32,
    f: &FatBox,
    fat: &[Option<FatBox>],
    cells: &HashMap<u64, Vec<u32>, BuildHasherDefault<CellHasher>>,
) -> Vec<u32> {
    let mut out = Vec::new();
    for cell in f.cells.cells() {
        for &j in cells.get(&cell_key(cell)).map_or(&[][..], |v| &v[..]) {
            if j == i {
                continue;
            }
            let g = fat[j as usize].as_ref().expect("bodies in cells have fat boxes");
            if boxes_overlap(&f.lo, &f.hi, &g.lo, &g.hi) && owns_pair(cell, f.cells.lo, g.cells.lo) {
                out.push(j);
            }
        }
    }
    out
}
