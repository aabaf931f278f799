//! Morton (Z-order) codes: 21 bits per axis interleaved into 63 bits (`morton3_64`), and
//! d-dimensional codes of up to 128 bits (`morton_nd_128`: 21 bits per axis up to 6-D).

use crate::geometry::real::Real;

/// Bits per axis of a 3-D 64-bit Morton code.
pub const MORTON3_BITS: u32 = 21;
const MORTON3_MAX: u32 = (1 << MORTON3_BITS) - 1;

/// Spreads the low 21 bits of `v` so that bit `i` lands on bit `3 i`.
#[inline(always)]
pub fn spread3_21(v: u32) -> u64 {
    let mut x = (v & MORTON3_MAX) as u64;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// Interleaves three 21-bit cell coordinates: x in bit 0, y in bit 1, z in bit 2.
#[inline(always)]
pub fn morton3_64(ix: u32, iy: u32, iz: u32) -> u64 {
    spread3_21(ix) | (spread3_21(iy) << 1) | (spread3_21(iz) << 2)
}

/// Maps world coordinates onto the 2^21 cells per axis of a cube anchored at `origin`.
///
/// One scale for all three axes keeps cells cubic. The GPU computes the identical frame
/// (same operations, same rounding), so both backends build the same tree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MortonFrame<T> {
    pub origin: [T; 3],
    pub scale: T,
}

impl<T: Real> MortonFrame<T> {
    pub fn from_bounds(lo: [T; 3], hi: [T; 3]) -> Self {
        let extent = (hi[0] - lo[0]).max(hi[1] - lo[1]).max(hi[2] - lo[2]);
        let scale = if extent > T::ZERO { T::from_f64((1u64 << MORTON3_BITS) as f64) / extent } else { T::ZERO };
        Self { origin: lo, scale }
    }

    /// The cell of one coordinate, clamped into the grid (queries may lie outside it).
    #[inline(always)]
    pub fn cell(&self, v: T, axis: usize) -> u32 {
        let t = (v - self.origin[axis]) * self.scale;
        let t = t.max(T::ZERO).min(T::from_f64(MORTON3_MAX as f64));
        t.to_f64() as u32
    }

    #[inline(always)]
    pub fn code(&self, x: T, y: T, z: T) -> u64 {
        morton3_64(self.cell(x, 0), self.cell(y, 1), self.cell(z, 2))
    }
}

/// Bits per axis of a d-dimensional code: 21 up to 6-D (126 bits), then as many as fit 128.
pub const fn morton_nd_bits(d: usize) -> u32 {
    let b = 128 / d as u32;
    if b < 21 {
        b
    } else {
        21
    }
}

/// `SPREAD[d - 1][byte]`: the 8 bits of `byte` moved to bits 0, d, 2d, …
static SPREAD: [[u128; 256]; 8] = {
    let mut t = [[0u128; 256]; 8];
    let mut d = 1;
    while d <= 8 {
        let mut v = 0;
        while v < 256 {
            let mut out = 0u128;
            let mut i = 0;
            while i < 8 {
                if v >> i & 1 == 1 {
                    out |= 1u128 << (i * d);
                }
                i += 1;
            }
            t[d - 1][v] = out;
            v += 1;
        }
        d += 1;
    }
    t
};

/// Interleaves `d` cell coordinates of `morton_nd_bits(d)` bits each: bit `i` of axis `a`
/// lands on bit `i·d + a`. For d = 3 this equals `morton3_64`.
#[inline(always)]
pub fn morton_nd_128(cells: &[u32]) -> u128 {
    let d = cells.len();
    let table = &SPREAD[d - 1];
    let mut key = 0u128;
    for (a, &c) in cells.iter().enumerate() {
        // At 8-D (16 bits per axis) there is no third byte, and shifting by 128 would overflow.
        let third = if 16 * d < 128 { table[(c >> 16 & 0xff) as usize] << (16 * d) } else { 0 };
        let spread = table[(c & 0xff) as usize] | table[(c >> 8 & 0xff) as usize] << (8 * d) | third;
        key |= spread << a;
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_matches_bit_by_bit_definition() {
        let slow = |x: u32, y: u32, z: u32| {
            let mut c = 0u64;
            for i in 0..21 {
                c |= (((x >> i) & 1) as u64) << (3 * i);
                c |= (((y >> i) & 1) as u64) << (3 * i + 1);
                c |= (((z >> i) & 1) as u64) << (3 * i + 2);
            }
            c
        };
        let mut s = 12345u64;
        for _ in 0..10_000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (x, y, z) =
                ((s >> 5) as u32 & MORTON3_MAX, (s >> 26) as u32 & MORTON3_MAX, (s >> 43) as u32 & MORTON3_MAX);
            assert_eq!(morton3_64(x, y, z), slow(x, y, z));
        }
        assert_eq!(morton3_64(MORTON3_MAX, MORTON3_MAX, MORTON3_MAX), (1u64 << 63) - 1);
    }

    #[test]
    fn frame_clamps_outside_points() {
        let f = MortonFrame::from_bounds([0.0f32; 3], [1.0; 3]);
        assert_eq!(f.cell(-5.0, 0), 0);
        assert_eq!(f.cell(7.0, 1), MORTON3_MAX);
        assert_eq!(f.cell(1.0, 2), MORTON3_MAX);
    }

    #[test]
    fn nd_codes_interleave_bit_by_bit() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for d in 1..=8 {
            let bits = morton_nd_bits(d);
            for _ in 0..200 {
                let cells: Vec<u32> = (0..d)
                    .map(|_| {
                        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        (rng >> 33) as u32 & ((1 << bits) - 1)
                    })
                    .collect();
                let mut slow = 0u128;
                for i in 0..bits as usize {
                    for a in 0..d {
                        slow |= ((cells[a] >> i & 1) as u128) << (i * d + a);
                    }
                }
                assert_eq!(morton_nd_128(&cells), slow, "d = {d}");
                if d == 3 {
                    assert_eq!(morton_nd_128(&cells), morton3_64(cells[0], cells[1], cells[2]) as u128);
                }
            }
        }
    }
}
