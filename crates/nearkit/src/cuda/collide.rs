//! Launches collide.cu: the collision world on the device. The mesh and its grid are
//! uploaded once; body shapes and layers when they change; poses every tick they moved. The
//! body grid is rebuilt on the device each tick, and contacts come back sorted.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use super::radix_sort::{bits_for, exclusive_scan, sort_pairs};
use super::{cuda_err, grid, CudaBackend};
use crate::collide::hash_grid::bucket_count;
use crate::collide::world::{Contact, ContactKind, Sweep, SweepResult, Versions, World};
use crate::error::{Error, Result};

/// `struct HashGridView` of collide.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct HashGridView {
    start: u64,
    keys: u64,
    items: u64,
    mask: u64,
}

/// `struct MeshView` of collide.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct MeshView {
    corners: u64,
    lo: u64,
    hi: u64,
    lo_cell: u64,
    grid: HashGridView,
    n: u32,
}
// SAFETY: plain old data matching the C structs (pointers, a u64 mask, a u32, C padding).
unsafe impl DeviceRepr for HashGridView {}
unsafe impl DeviceRepr for MeshView {}

struct DeviceMesh {
    corners: CudaSlice<f64>,
    lo: CudaSlice<f64>,
    hi: CudaSlice<f64>,
    lo_cell: CudaSlice<i32>,
    start: CudaSlice<u32>,
    keys: CudaSlice<u64>,
    items: CudaSlice<u32>,
    mask: u64,
    n: u32,
}

impl DeviceMesh {
    fn upload(be: &CudaBackend, world: &World) -> Result<Self> {
        let s = &be.stream;
        let Some(m) = world.mesh() else {
            return Ok(DeviceMesh {
                corners: be.alloc::<f64>(1)?,
                lo: be.alloc::<f64>(1)?,
                hi: be.alloc::<f64>(1)?,
                lo_cell: be.alloc::<i32>(1)?,
                start: be.alloc::<u32>(2)?,
                keys: be.alloc::<u64>(1)?,
                items: be.alloc::<u32>(1)?,
                mask: 0,
                n: 0,
            });
        };
        let flat9: Vec<f64> = m.corners.iter().flat_map(|c| c.iter().flatten().copied()).collect();
        let flat3 = |v: &[[f64; 3]]| v.iter().flatten().copied().collect::<Vec<f64>>();
        let cells: Vec<i32> = m.lo_cell.iter().flatten().copied().collect();
        Ok(DeviceMesh {
            corners: s.clone_htod(&flat9).map_err(cuda_err)?,
            lo: s.clone_htod(&flat3(&m.lo)).map_err(cuda_err)?,
            hi: s.clone_htod(&flat3(&m.hi)).map_err(cuda_err)?,
            lo_cell: s.clone_htod(&cells).map_err(cuda_err)?,
            start: s.clone_htod(&m.grid.start).map_err(cuda_err)?,
            keys: s.clone_htod(&m.grid.keys).map_err(cuda_err)?,
            items: s.clone_htod(&m.grid.items).map_err(cuda_err)?,
            mask: m.grid.mask(),
            n: m.corners.len() as u32,
        })
    }

    fn view(&self, be: &CudaBackend) -> MeshView {
        let s = &be.stream;
        MeshView {
            corners: self.corners.device_ptr(s).0,
            lo: self.lo.device_ptr(s).0,
            hi: self.hi.device_ptr(s).0,
            lo_cell: self.lo_cell.device_ptr(s).0,
            grid: HashGridView {
                start: self.start.device_ptr(s).0,
                keys: self.keys.device_ptr(s).0,
                items: self.items.device_ptr(s).0,
                mask: self.mask,
            },
            n: self.n,
        }
    }
}

struct DeviceBodies {
    /// center x, y, z and quaternion x, y, z, w per body.
    pose: CudaSlice<f64>,
    radii: CudaSlice<f64>,
    layer: CudaSlice<u32>,
    mask: CudaSlice<u32>,
    alive: CudaSlice<u32>,
    n: usize,
}

/// A world's resident copy on one GPU. Switching a world between colliders is free: each
/// one uploads what changed since it last saw the world (by `World::versions`).
pub struct CudaCollider {
    be: Arc<CudaBackend>,
    held: Option<Versions>,
    mesh: Option<DeviceMesh>,
    bodies: Option<DeviceBodies>,
    pose_host: Vec<f64>,
    capacity: usize,
}

impl CudaCollider {
    pub fn new(be: Arc<CudaBackend>) -> Result<Self> {
        Ok(CudaCollider { be, held: None, mesh: None, bodies: None, pose_host: Vec::new(), capacity: 1 << 16 })
    }

    pub fn describe(&self) -> String {
        crate::backend::Backend::describe(&*self.be)
    }

    fn sync(&mut self, world: &World) -> Result<()> {
        let be = &*self.be;
        let s = &be.stream;
        let v = world.versions();
        let held = self.held.unwrap_or(Versions { mesh: u64::MAX, poses: u64::MAX, shapes: u64::MAX });
        if held.mesh != v.mesh || self.mesh.is_none() {
            self.mesh = Some(DeviceMesh::upload(be, world)?);
        }
        let b = world.bodies();
        let n = b.len();
        let resized = self.bodies.as_ref().is_none_or(|d| d.n != n);
        if resized || held.shapes != v.shapes {
            let radii: Vec<f64> = b.radii.iter().flatten().copied().collect();
            let alive: Vec<u32> = b.alive.iter().map(|&a| a as u32).collect();
            let pad = |v: Vec<f64>| if v.is_empty() { vec![0.0] } else { v };
            let pad32 = |v: &[u32]| if v.is_empty() { vec![0u32] } else { v.to_vec() };
            let pose = match self.bodies.take() {
                Some(d) if d.n == n => d.pose,
                _ => be.alloc_uninit::<f64>(7 * n)?,
            };
            self.bodies = Some(DeviceBodies {
                pose,
                radii: s.clone_htod(&pad(radii)).map_err(cuda_err)?,
                layer: s.clone_htod(&pad32(&b.layer)).map_err(cuda_err)?,
                mask: s.clone_htod(&pad32(&b.mask)).map_err(cuda_err)?,
                alive: s.clone_htod(&pad32(&alive)).map_err(cuda_err)?,
                n,
            });
        }
        if resized || held.poses != v.poses {
            self.pose_host.clear();
            self.pose_host.reserve(7 * n);
            for (i, (c, q)) in b.center.iter().zip(&b.orientation).enumerate() {
                if b.alive[i] {
                    crate::collide::check_center(*c)?;
                }
                self.pose_host.extend_from_slice(c);
                self.pose_host.extend_from_slice(q);
            }
            if n > 0 {
                let d = self.bodies.as_mut().expect("bodies uploaded above");
                s.memcpy_htod(&self.pose_host, &mut d.pose).map_err(cuda_err)?;
            }
        }
        self.held = Some(v);
        Ok(())
    }

    /// Every contact of the world, sorted by (body, kind, other), as `cpu::collide` gives.
    pub fn contacts(&mut self, world: &World) -> Result<Vec<Contact>> {
        let be_arc = self.be.clone();
        let be = &*be_arc;
        let _guard = be.busy.lock().unwrap();
        self.sync(world)?;
        let s = &be.stream;
        let n = world.bodies().len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let mesh = self.mesh.as_ref().expect("synced").view(be);
        let d = self.bodies.as_ref().expect("synced");
        let n32 = n as u32;
        let cell_size = world.cell_size();

        let mut bbox = be.alloc_uninit::<f64>(6 * n)?;
        let mut cells = be.alloc_uninit::<i32>(6 * n)?;
        let mut offset = be.alloc::<u32>(n + 1)?;
        let mut error = be.alloc::<u32>(1)?;
        let f = be.func("body_boxes")?;
        let mut l = s.launch_builder(&f);
        l.arg(&d.pose).arg(&d.radii).arg(&d.alive).arg(&n32).arg(&cell_size).arg(&mut bbox).arg(&mut cells);
        l.arg(&mut offset).arg(&mut error);
        unsafe { l.launch(grid(n, 128)) }.map_err(cuda_err)?;
        exclusive_scan(be, &mut offset, n + 1)?;
        let total = s.clone_dtoh(&offset.slice(n..n + 1)).map_err(cuda_err)?[0] as usize;
        let bad = s.clone_dtoh(&error).map_err(cuda_err)?[0];
        if bad != 0 {
            let c = world.bodies().center[bad as usize - 1];
            return Err(Error::InvalidArgument(format!(
                "body {} at {c:?} is beyond ±{} cells of {cell_size}, or spans too many: use larger cells",
                bad - 1,
                crate::collide::hash_grid::CELL_LIMIT - 1
            )));
        }

        // The body grid: entries in body order, then grouped by bucket.
        let buckets = bucket_count(total);
        let bmask = (buckets - 1) as u64;
        let total32 = total as u32;
        let mut entry_key = be.alloc_uninit::<u64>(total)?;
        let mut entry_body = be.alloc_uninit::<u32>(total)?;
        let mut entry_bucket = be.alloc_uninit::<u32>(total)?;
        let mut entry_rank = be.alloc_uninit::<u32>(total)?;
        let mut start = be.alloc::<u32>(buckets + 1)?;
        let f = be.func("body_entries")?;
        let mut l = s.launch_builder(&f);
        l.arg(&cells).arg(&offset).arg(&n32).arg(&bmask).arg(&mut entry_key).arg(&mut entry_body);
        l.arg(&mut entry_bucket).arg(&mut entry_rank).arg(&mut start);
        unsafe { l.launch(grid(n, 128)) }.map_err(cuda_err)?;
        exclusive_scan(be, &mut start, buckets + 1)?;
        let mut keys = be.alloc_uninit::<u64>(total)?;
        let mut items = be.alloc_uninit::<u32>(total)?;
        let f = be.func("grid_fill")?;
        let mut l = s.launch_builder(&f);
        l.arg(&entry_key).arg(&entry_body).arg(&entry_bucket).arg(&entry_rank).arg(&total32).arg(&start);
        l.arg(&mut keys).arg(&mut items);
        unsafe { l.launch(grid(total, 256)) }.map_err(cuda_err)?;
        let body_grid = HashGridView {
            start: start.device_ptr(s).0,
            keys: keys.device_ptr(s).0,
            items: items.device_ptr(s).0,
            mask: bmask,
        };

        // Narrow phase, grown and re-run if the contacts overflow.
        let mesh_layer = world.mesh_layer();
        let mut count = be.alloc::<u32>(1)?;
        let found = loop {
            let cap = self.capacity;
            let cap32 = cap as u32;
            let mut out_key = be.alloc_uninit::<u64>(cap)?;
            let mut out_index = be.alloc_uninit::<u32>(cap)?;
            let mut out = be.alloc_uninit::<f64>(7 * cap)?;
            s.memset_zeros(&mut count).map_err(cuda_err)?;
            let f = be.func("collide_entries")?;
            let mut l = s.launch_builder(&f);
            l.arg(&entry_key).arg(&entry_body).arg(&total32).arg(&d.pose).arg(&d.radii).arg(&d.layer).arg(&d.mask);
            l.arg(&bbox).arg(&cells).arg(&body_grid).arg(&mesh).arg(&mesh_layer).arg(&n32).arg(&mut count);
            l.arg(&cap32).arg(&mut out_key).arg(&mut out_index).arg(&mut out);
            unsafe { l.launch(grid(total, 128)) }.map_err(cuda_err)?;
            let c = s.clone_dtoh(&count).map_err(cuda_err)?[0] as usize;
            if c <= cap {
                break (c, out_key, out_index, out);
            }
            self.capacity = (c + c / 4).next_power_of_two();
        };
        let (c, mut out_key, mut out_index, out) = found;
        if c == 0 {
            return Ok(Vec::new());
        }
        let stride = mesh.n as u64 + n as u64;
        sort_pairs(be, &mut out_key, &mut out_index, c, bits_for((n as u64 * stride) as usize))?;
        let mut sorted = be.alloc_uninit::<f64>(7 * c)?;
        let c32 = c as u32;
        let f = be.func("gather_contacts")?;
        let mut l = s.launch_builder(&f);
        l.arg(&out_index).arg(&c32).arg(&out).arg(&mut sorted);
        unsafe { l.launch(grid(c, 256)) }.map_err(cuda_err)?;
        let key = s.clone_dtoh(&out_key.slice(0..c)).map_err(cuda_err)?;
        let data = s.clone_dtoh(&sorted.slice(0..7 * c)).map_err(cuda_err)?;
        let tris = mesh.n as u64;
        Ok(key
            .iter()
            .zip(data.chunks_exact(7))
            .map(|(&k, v)| {
                let (body, rest) = ((k / stride) as u32, k % stride);
                let (kind, other) =
                    if rest < tris { (ContactKind::Triangle, rest) } else { (ContactKind::Body, rest - tris) };
                Contact {
                    body,
                    kind,
                    other: other as u32,
                    normal: [v[0], v[1], v[2]],
                    depth: v[3],
                    point: [v[4], v[5], v[6]],
                }
            })
            .collect())
    }

    /// Each sweep's first hit on the static mesh, as `cpu::collide::sweeps` gives.
    pub fn sweeps(&mut self, world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
        for sw in sweeps {
            sw.check()?;
        }
        if world.mesh().is_none() || sweeps.is_empty() {
            return Ok(vec![None; sweeps.len()]);
        }
        let be_arc = self.be.clone();
        let be = &*be_arc;
        let _guard = be.busy.lock().unwrap();
        self.sync(world)?;
        let s = &be.stream;
        let n = sweeps.len();
        let flat: Vec<f64> =
            sweeps.iter().flat_map(|w| w.radii.into_iter().chain(w.orientation).chain(w.from).chain(w.to)).collect();
        let input = s.clone_htod(&flat).map_err(cuda_err)?;
        let mut tri = be.alloc_uninit::<u32>(n)?;
        let mut out = be.alloc_uninit::<f64>(7 * n)?;
        let mut error = be.alloc::<u32>(1)?;
        let mesh = self.mesh.as_ref().expect("synced").view(be);
        let (n32, cell_size) = (n as u32, world.cell_size());
        let f = be.func("sweep_queries")?;
        let mut l = s.launch_builder(&f);
        l.arg(&input).arg(&n32).arg(&cell_size).arg(&mesh).arg(&mut tri).arg(&mut out).arg(&mut error);
        unsafe { l.launch(grid(n, 128)) }.map_err(cuda_err)?;
        let bad = s.clone_dtoh(&error).map_err(cuda_err)?[0];
        if bad != 0 {
            return Err(Error::InvalidArgument(format!(
                "sweep {} leaves the grid's range (±{} cells): use larger cells",
                bad - 1,
                crate::collide::hash_grid::CELL_LIMIT - 1
            )));
        }
        let tri = s.clone_dtoh(&tri).map_err(cuda_err)?;
        let out = s.clone_dtoh(&out).map_err(cuda_err)?;
        Ok(tri
            .iter()
            .zip(out.chunks_exact(7))
            .map(|(&t, v)| {
                (t != crate::NO_ID).then(|| SweepResult {
                    toi: v[0],
                    triangle: t,
                    point: [v[1], v[2], v[3]],
                    normal: [v[4], v[5], v[6]],
                })
            })
            .collect())
    }
}
