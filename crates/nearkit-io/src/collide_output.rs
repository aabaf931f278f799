//! Files of `nearkit collide`: contacts as CSV, and a tick's scene (the mesh as binary
//! `.ply`, the bodies as CSV).

use std::path::Path;

use nearkit::collide::{Contact, World};
use nearkit::Mesh;

use crate::output::write_atomically;
use crate::Result;

/// `tick,body,kind,other,triangle,nx,ny,nz,depth,px,py,pz`, one row per contact (`triangle`
/// is empty for a body).
pub fn write_contacts(path: &Path, tick: u64, contacts: &[Contact]) -> Result<()> {
    write_atomically(path, |w| {
        writeln!(w, "tick,body,kind,other,triangle,nx,ny,nz,depth,px,py,pz")?;
        for c in contacts {
            let [nx, ny, nz] = c.normal;
            let [px, py, pz] = c.point;
            let (kind, other, depth) = (c.kind.name(), c.other, c.depth);
            let triangle = if c.triangle == nearkit::NO_ID { String::new() } else { c.triangle.to_string() };
            writeln!(w, "{tick},{},{kind},{other},{triangle},{nx},{ny},{nz},{depth},{px},{py},{pz}", c.body)?;
        }
        Ok(())
    })
}

/// A mesh as binary little-endian `.ply` (double vertices, int faces).
pub fn write_mesh_ply(path: &Path, mesh: &Mesh<f64>) -> Result<()> {
    write_atomically(path, |w| {
        let (nv, nf) = (mesh.vertices.len(), mesh.triangles.len());
        write!(
            w,
            "ply\nformat binary_little_endian 1.0\ncomment written by nearkit\nelement vertex {nv}\n\
             property double x\nproperty double y\nproperty double z\nelement face {nf}\n\
             property list uchar int vertex_indices\nend_header\n"
        )?;
        for i in 0..nv {
            for v in mesh.vertices.get(i) {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        for t in &mesh.triangles {
            w.write_all(&[3u8])?;
            for &v in t {
                w.write_all(&(v as i32).to_le_bytes())?;
            }
        }
        Ok(())
    })
}

/// `id,cx,cy,cz,rx,ry,rz,qx,qy,qz,qw,layer,mask` for every live body.
pub fn write_bodies(path: &Path, world: &World) -> Result<()> {
    write_atomically(path, |w| {
        writeln!(w, "id,cx,cy,cz,rx,ry,rz,qx,qy,qz,qw,layer,mask")?;
        let b = world.bodies();
        for i in (0..b.len()).filter(|&i| b.alive[i]) {
            let ([cx, cy, cz], [rx, ry, rz], [qx, qy, qz, qw]) = (b.center[i], b.radii[i], b.orientation[i]);
            writeln!(w, "{i},{cx},{cy},{cz},{rx},{ry},{rz},{qx},{qy},{qz},{qw},{},{}", b.layer[i], b.mask[i])?;
        }
        Ok(())
    })
}
