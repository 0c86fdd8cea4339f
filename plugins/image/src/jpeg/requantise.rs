//! Coefficients from the file's tables to the new quality's, on the output's
//! block grid: luma as it is, chroma halved in the DCT domain where the
//! output subsamples more than the input (below quality 90 chroma is halved
//! both ways, from 90 it is kept whole, as libjpeg and ImageMagick choose
//! and as the pixel path writes).

use std::sync::OnceLock;

use super::{Block, Component, Frame, ZIGZAG, nonzero};

/// Annex K's luminance and chrominance tables, natural order.
const LUMA: [u16; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
    92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const CHROMA: [u16; 64] = [
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
];

/// `base` scaled to `quality` as libjpeg scales it (and jpeg-encoder, the
/// pixel path's), zigzag order, each in 1..=255 (baseline).
fn table(base: &[u16; 64], quality: u8) -> [u16; 64] {
    let q = u32::from(quality.clamp(1, 100));
    let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
    std::array::from_fn(|k| ((u32::from(base[ZIGZAG[k]]) * scale + 50) / 100).clamp(1, 255) as u16)
}

/// The frame at `quality`: `None` for a layout this does not map (chroma
/// sampled finer than luma, or an output that would need it upsampled).
pub fn requantise(src: &Frame, quality: u8) -> Option<Frame> {
    let luma = src.components.first()?;
    if luma.h != src.hmax || luma.v != src.vmax {
        return None;
    }
    // The output's luma sampling: 2×2 where chroma is halved, else 1×1.
    let t: u8 = if quality < 90 && src.components.len() == 3 {
        2
    } else {
        1
    };
    let mcux = src.width.div_ceil(8 * u32::from(t)) as usize;
    let mcuy = src.height.div_ceil(8 * u32::from(t)) as usize;
    let tables = [table(&LUMA, quality), table(&CHROMA, quality)];
    let mut components = Vec::with_capacity(src.components.len());
    for (i, c) in src.components.iter().enumerate() {
        let (h, v, tq) = if i == 0 { (t, t, 0) } else { (1, 1, 1) };
        // The input's samples per output sample, each way: 1, or 2 where
        // chroma is halved here.
        let (dx, dy) = if i == 0 {
            (1, 1)
        } else {
            (factor(c.h, t, luma.h)?, factor(c.v, t, luma.v)?)
        };
        let (bw, bh) = (mcux * usize::from(h), mcuy * usize::from(v));
        let table = tables[tq];
        let blocks = resample(c, bw, bh, dx, dy, &table)?;
        components.push(Component {
            id: i as u8 + 1,
            h,
            v,
            tq,
            coded_w: src.width.div_ceil(u32::from(t / h)).div_ceil(8) as usize,
            coded_h: src.height.div_ceil(u32::from(t / v)).div_ceil(8) as usize,
            bw,
            bh,
            blocks,
            table,
        });
    }
    Some(Frame {
        width: src.width,
        height: src.height,
        hmax: components[0].h,
        vmax: components[0].v,
        mcux,
        mcuy,
        components,
    })
}

/// `own × t / luma` where it is 1 or 2.
fn factor(own: u8, t: u8, luma: u8) -> Option<usize> {
    let n = own * t;
    (n.is_multiple_of(luma) && matches!(n / luma, 1 | 2)).then(|| usize::from(n / luma))
}

/// The component's blocks on a `bw`×`bh` grid, `dx`×`dy` input blocks to
/// each output block, quantised by `to`. Blocks past the input's grid (the
/// output's MCUs may be larger) repeat its last row or column.
fn resample(
    c: &Component,
    bw: usize,
    bh: usize,
    dx: usize,
    dy: usize,
    to: &[u16; 64],
) -> Option<Vec<Block>> {
    if c.blocks.is_empty() || c.bw == 0 || c.bh == 0 {
        return None;
    }
    let at = |x: usize, y: usize| &c.blocks[y.min(c.bh - 1) * c.bw + x.min(c.bw - 1)];
    let mut out = Vec::with_capacity(bw * bh);
    let inverse: [f32; 64] = std::array::from_fn(|k| 1.0 / f32::from(to[k]));
    if dx == 1 && dy == 1 {
        let scale: [f32; 64] = std::array::from_fn(|k| f32::from(c.table[k]) * inverse[k]);
        for y in 0..bh {
            for x in 0..bw {
                let b = at(x, y);
                let mut o = [0i16; 64];
                // Whole rows of lanes (wasm SIMD): cheaper than finding the
                // non-zero ones.
                for ((o, &v), &s) in o.iter_mut().zip(b).zip(&scale) {
                    *o = quantised(f32::from(v) * s);
                }
                out.push(o);
            }
        }
        return Some(out);
    }
    // Most coefficients are zero: of the input's only the non-zero ones
    // are visited; the output's are quantised in natural order, then put
    // in zigzag order.
    let mut inverse_natural = [0f32; 64];
    for (k, &z) in ZIGZAG.iter().enumerate() {
        inverse_natural[z] = inverse[k];
    }
    let (nh, nv) = (8 / dx, 8 / dy);
    // The zigzag positions kept, and where each goes in the stack.
    let mut kept = 0u64;
    let mut place = [(0u8, 0u8); 64];
    for (k, &z) in ZIGZAG.iter().enumerate() {
        let (v, u) = (z / 8, z % 8);
        if v < nv && u < nh {
            kept |= 1 << k;
            place[k] = (v as u8, u as u8);
        }
    }
    let halve = Halve::get();
    for y in 0..bh {
        for x in 0..bw {
            // The input blocks' lowest frequencies (all of them along a
            // dimension kept whole), stacked: `s[row][col]`.
            let mut s = [[0f32; 8]; 8];
            for j in 0..dy {
                for i in 0..dx {
                    let b = at(x * dx + i, y * dy + j);
                    let mut bits = nonzero(b) & kept;
                    while bits != 0 {
                        let k = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let (v, u) = place[k];
                        s[j * nv + usize::from(v)][i * nh + usize::from(u)] =
                            f32::from(b[k]) * f32::from(c.table[k]);
                    }
                }
            }
            let g = halve.apply(&s, dx == 2, dy == 2);
            let mut natural = [0i16; 64];
            for ((q, &v), &i) in natural.iter_mut().zip(&g).zip(&inverse_natural) {
                *q = quantised(v * i);
            }
            out.push(std::array::from_fn(|k| natural[ZIGZAG[k] & 63]));
        }
    }
    Some(out)
}

/// A coefficient rounded (half away from zero) and kept within what
/// baseline coding holds for 8-bit samples (AC ±1023; DC ±1023, so a
/// difference stays within 11 bits). Written so that LLVM makes wasm SIMD
/// of it (a float `round_ties_even` and `clamp` then `as i16` stays scalar,
/// with NaN checks per lane: a quarter of a compress, docs/benchmarks.md).
#[inline]
fn quantised(v: f32) -> i16 {
    ((v + 0.5f32.copysign(v)) as i32).clamp(-1023, 1023) as i16
}

/// Two neighbouring blocks' DCT coefficients, the lowest four of each along
/// one dimension, to the coefficients of the block of their samples halved
/// along it: `m[out][4 q + in]`. JPEG's DCT is the orthonormal one; an
/// 8-point signal's lowest four coefficients scaled by 1/√2 are the 4-point
/// coefficients of its samples halved, which the 4-point inverse turns to
/// samples and the 8-point forward DCT, placed at `4 q`, to the output's.
struct Halve {
    m: [[f32; 8]; 8],
}

impl Halve {
    fn get() -> &'static Halve {
        static HALVE: OnceLock<Halve> = OnceLock::new();
        HALVE.get_or_init(|| {
            let basis = |n: usize, k: usize, x: usize| {
                let c = if k == 0 { (0.5f64).sqrt() } else { 1.0 };
                let angle = (2 * x + 1) as f64 * k as f64 * std::f64::consts::PI / (2 * n) as f64;
                (2.0 / n as f64).sqrt() * c * angle.cos()
            };
            let mut m = [[0f32; 8]; 8];
            for (o, row) in m.iter_mut().enumerate() {
                for (col, cell) in row.iter_mut().enumerate() {
                    let (q, i) = (col / 4, col % 4);
                    let sum: f64 = (0..4)
                        .map(|x| basis(8, o, 4 * q + x) * basis(4, i, x) * (0.5f64).sqrt())
                        .sum();
                    *cell = sum as f32;
                }
            }
            Halve { m }
        })
    }

    /// `s` (rows: vertical frequencies) halved along the dimensions asked:
    /// `m s mᵀ`, `m s` or `s mᵀ`; zero entries and rows are skipped, and
    /// most are zero.
    fn apply(&self, s: &[[f32; 8]; 8], across: bool, down: bool) -> [f32; 64] {
        let m = &self.m;
        // Along rows: t[r] = s[r] mᵀ.
        let mut t = [[0f32; 8]; 8];
        let mut rows = 0u8;
        for (r, row) in s.iter().enumerate() {
            if across {
                for (c, &v) in row.iter().enumerate() {
                    if v != 0.0 {
                        for (o, out) in t[r].iter_mut().enumerate() {
                            *out += v * m[o][c];
                        }
                        rows |= 1 << r;
                    }
                }
            } else if row.iter().any(|&v| v != 0.0) {
                t[r] = *row;
                rows |= 1 << r;
            }
        }
        let mut g = [0f32; 64];
        if !down {
            for (r, row) in t.iter().enumerate() {
                g[r * 8..r * 8 + 8].copy_from_slice(row);
            }
            return g;
        }
        // Down columns: g = m t, from the non-zero rows of t.
        while rows != 0 {
            let r = rows.trailing_zeros() as usize;
            rows &= rows - 1;
            for o in 0..8 {
                let w = m[o][r];
                for (u, &v) in t[r].iter().enumerate() {
                    g[o * 8 + u] += w * v;
                }
            }
        }
        g
    }
}
