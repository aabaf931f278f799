//! Four bodies' shapes, boxes and Σ at once, in AVX2 (f64 lanes): the start of every tick,
//! where each body's rotation, unit-ball map (nine divisions) and box (three square roots)
//! are made anew from its pose.
//!
//! Every operation is the scalar code's IEEE operation (`Shape::new`, `Shape::half_extents`,
//! `Shape::sigma`, `body_box`), in its order and without fused multiply-add, so each lane
//! gives the scalar bits. (No closures here: they would not inherit AVX2, and the intrinsics
//! would become calls.)

use std::arch::x86_64::*;

use super::avx2_f64::{add, lanes, load, ml, sb, splat};
use super::candidate_lists::ShapeBox;

use crate::collide::ellipsoid::{Shape, BOX_SLACK, V3};

/// (Shape::new(radii, q), body_box, sigma) for four bodies.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn shapes(radii: &[V3; 4], q: &[[f64; 4]; 4], center: &[V3; 4]) -> [ShapeBox; 4] {
    let mut raw = [[0.0f64; 4]; 10];
    for l in 0..4 {
        for k in 0..4 {
            raw[k][l] = q[l][k];
        }
        for k in 0..3 {
            raw[4 + k][l] = radii[l][k];
            raw[7 + k][l] = center[l][k];
        }
    }
    let (x, y, z, w) = (load(&raw[0]), load(&raw[1]), load(&raw[2]), load(&raw[3]));
    let rad = [load(&raw[4]), load(&raw[5]), load(&raw[6])];
    // `rotation`.
    let n2 = add(add(add(ml(x, x), ml(y, y)), ml(z, z)), ml(w, w));
    let s = _mm256_div_pd(splat(2.0), n2);
    let one = splat(1.0);
    let rot = [
        [sb(one, ml(s, add(ml(y, y), ml(z, z)))), ml(s, sb(ml(x, y), ml(z, w))), ml(s, add(ml(x, z), ml(y, w)))],
        [ml(s, add(ml(x, y), ml(z, w))), sb(one, ml(s, add(ml(x, x), ml(z, z)))), ml(s, sb(ml(y, z), ml(x, w)))],
        [ml(s, sb(ml(x, z), ml(y, w))), ml(s, add(ml(y, z), ml(x, w))), sb(one, ml(s, add(ml(x, x), ml(y, y))))],
    ];
    // unit[j][i] = rot[i][j] / radii[j].
    let mut unit = [[splat(0.0); 3]; 3];
    for j in 0..3 {
        for i in 0..3 {
            unit[j][i] = _mm256_div_pd(rot[i][j], rad[j]);
        }
    }
    // `half_extents`, widened by BOX_SLACK, around the center.
    let mut lo = [splat(0.0); 3];
    let mut hi = [splat(0.0); 3];
    for i in 0..3 {
        let (a, b, c) = (ml(rot[i][0], rad[0]), ml(rot[i][1], rad[1]), ml(rot[i][2], rad[2]));
        let e = ml(_mm256_sqrt_pd(add(add(ml(a, a), ml(b, b)), ml(c, c))), splat(BOX_SLACK));
        let cen = load(&raw[7 + i]);
        lo[i] = sb(cen, e);
        hi[i] = add(cen, e);
    }
    // `sigma`: (r[i][0]·s²₀·r[k][0] + r[i][1]·s²₁·r[k][1]) + r[i][2]·s²₂·r[k][2].
    let s2 = [ml(rad[0], rad[0]), ml(rad[1], rad[1]), ml(rad[2], rad[2])];
    let pairs = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)];
    let mut sigma = [splat(0.0); 6];
    for (m, &(i, k)) in pairs.iter().enumerate() {
        let t0 = ml(ml(rot[i][0], s2[0]), rot[k][0]);
        let t1 = ml(ml(rot[i][1], s2[1]), rot[k][1]);
        let t2 = ml(ml(rot[i][2], s2[2]), rot[k][2]);
        sigma[m] = add(add(t0, t1), t2);
    }
    let mut out =
        [(Shape { rot: [[0.0; 3]; 3], radii: [0.0; 3], unit: [[0.0; 3]; 3] }, ([0.0; 3], [0.0; 3]), [0.0; 6]); 4];
    for i in 0..3 {
        for j in 0..3 {
            let (r, u) = (lanes(rot[i][j]), lanes(unit[i][j]));
            for l in 0..4 {
                out[l].0.rot[i][j] = r[l];
                out[l].0.unit[i][j] = u[l];
            }
        }
        let (lo, hi) = (lanes(lo[i]), lanes(hi[i]));
        for l in 0..4 {
            out[l].1 .0[i] = lo[l];
            out[l].1 .1[i] = hi[l];
        }
    }
    for m in 0..6 {
        let v = lanes(sigma[m]);
        for l in 0..4 {
            out[l].2[m] = v[l];
        }
    }
    for l in 0..4 {
        out[l].0.radii = radii[l];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Lane by lane, the scalar bits, for random poses (unnormalised and identity
    /// quaternions among them).
    #[test]
    fn matches_the_scalar_shapes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        for round in 0..5_000 {
            let radii: [V3; 4] = std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(0.05..3.0)));
            let q: [[f64; 4]; 4] = std::array::from_fn(|l| {
                if (round + l) % 9 == 0 {
                    [0.0, 0.0, 0.0, 1.0]
                } else {
                    std::array::from_fn(|_| rng.random_range(-2.0..2.0))
                }
            });
            let c: [V3; 4] = std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-5e4..5e4)));
            // SAFETY: the CPU has AVX2.
            let got = unsafe { shapes(&radii, &q, &c) };
            for l in 0..4 {
                let s = Shape::new(radii[l], q[l]);
                let bx = crate::collide::ellipsoid::body_box(&s, c[l]);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let (g, gb, gs) = &got[l];
                assert_eq!(bits(g.rot.as_flattened()), bits(s.rot.as_flattened()), "rot, round {round}");
                assert_eq!(bits(g.unit.as_flattened()), bits(s.unit.as_flattened()), "unit, round {round}");
                assert_eq!(bits(&gb.0), bits(&bx.0), "lo, round {round}");
                assert_eq!(bits(&gb.1), bits(&bx.1), "hi, round {round}");
                assert_eq!(bits(gs), bits(&s.sigma()), "sigma, round {round}");
            }
        }
    }
}
