//! Matrix products, the encoder's time: `out = a · B + bias`, with B packed
//! once into panels of [`NR`] columns (each `k × NR`, a row of the panel per
//! step of the sum) so the inner loop reads it in order. A call runs in
//! blocks of [`MC`] rows of `a` (kept in the cache while every panel passes)
//! and [`KC`] steps of the sum (a panel's part kept in the first-level
//! cache), a tile of [`MR`] × [`NR`] sums in registers.
//!
//! In wasm the tile is eight SIMD accumulators, a product and a sum per
//! lane (relaxed SIMD's fused multiply-add was tried: 3 % quicker, within
//! this machine's noise, and Winch cannot compile it, so a new version of
//! the plugin would wait for Cranelift; docs/benchmarks.md). Outside wasm
//! (the unit tests) it is plain loops.

/// Columns of a panel (two 4-lane vectors).
pub const NR: usize = 8;
/// Rows of a tile.
const MR: usize = 4;
/// Rows of `a` per block.
const MC: usize = 64;
/// Steps of the sum per block.
const KC: usize = 256;

/// B (`k × n`) in panels of [`NR`] columns, the last one padded with zeros.
#[derive(Default)]
pub struct Packed {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl Packed {
    /// B = Wᵀ for a linear layer's weight as stored: `n` rows (outputs) of
    /// `k` (inputs).
    pub fn transposed(w: &[f32], n: usize, k: usize) -> Packed {
        assert_eq!(w.len(), n * k, "a weight of {n} × {k}");
        let mut packed = Packed::default();
        packed.fill(k, n, |kk, j| w[j * k + kk]);
        packed
    }

    /// Packs B from `get(row, column)` (`k × n`), reusing this buffer.
    pub fn fill(&mut self, k: usize, n: usize, get: impl Fn(usize, usize) -> f32) {
        let panels = n.div_ceil(NR);
        self.k = k;
        self.n = n;
        self.data.clear();
        self.data.resize(panels * k * NR, 0.0);
        for p in 0..panels {
            let panel = &mut self.data[p * k * NR..(p + 1) * k * NR];
            for j in p * NR..n.min((p + 1) * NR) {
                let c = j - p * NR;
                for kk in 0..k {
                    panel[kk * NR + c] = get(kk, j);
                }
            }
        }
    }

    /// Rows of B: the length of each sum.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of B.
    pub fn n(&self) -> usize {
        self.n
    }

    fn panel(&self, p: usize) -> &[f32] {
        &self.data[p * self.k * NR..(p + 1) * self.k * NR]
    }
}

/// `out[r·ldc + j] = Σ a[r·lda + kk] · B[kk][j] + bias[j]` for `r < rows`,
/// `j < B.n`, `kk < B.k` (bias zero when none). Other entries of `out` are
/// left as they are, so `a` and `out` may be views into wider rows.
#[inline(never)] // its own entry in a profile
pub fn matmul(
    a: &[f32],
    lda: usize,
    rows: usize,
    b: &Packed,
    bias: Option<&[f32]>,
    out: &mut [f32],
    ldc: usize,
) {
    let (k, n) = (b.k, b.n);
    if rows == 0 || n == 0 {
        return;
    }
    assert!(lda >= k && ldc >= n, "rows narrower than the product");
    assert!(
        a.len() >= (rows - 1) * lda + k,
        "a is shorter than {rows} rows"
    );
    assert!(
        out.len() >= (rows - 1) * ldc + n,
        "out is shorter than {rows} rows"
    );
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "a bias per column");
    }
    for r0 in (0..rows).step_by(MC) {
        let block = MC.min(rows - r0);
        // One pass when k is 0: the bias alone.
        for k0 in (0..k.max(1)).step_by(KC) {
            let kc = KC.min(k - k0);
            for p in 0..n.div_ceil(NR) {
                let panel = &b.panel(p)[k0 * NR..(k0 + kc) * NR];
                let (j0, nr) = (p * NR, NR.min(n - p * NR));
                for t0 in (r0..r0 + block).step_by(MR) {
                    let mr = MR.min(r0 + block - t0);
                    let mut acc = [[0f32; NR]; MR];
                    for (r, row) in acc.iter_mut().enumerate().take(mr) {
                        if k0 == 0 {
                            if let Some(bias) = bias {
                                row[..nr].copy_from_slice(&bias[j0..j0 + nr]);
                            }
                        } else {
                            let at = (t0 + r) * ldc + j0;
                            row[..nr].copy_from_slice(&out[at..at + nr]);
                        }
                    }
                    // Rows past the end repeat the last one (their sums
                    // are dropped): the kernel always runs MR rows.
                    let starts: [usize; MR] =
                        std::array::from_fn(|r| (t0 + r.min(mr - 1)) * lda + k0);
                    tile(a, starts, kc, panel, &mut acc);
                    for (r, row) in acc.iter().enumerate().take(mr) {
                        let at = (t0 + r) * ldc + j0;
                        out[at..at + nr].copy_from_slice(&row[..nr]);
                    }
                }
            }
        }
    }
}

/// `acc[r][c] += Σ_{kk < kc} a[starts[r] + kk] · panel[kk·NR + c]`.
#[cfg(target_arch = "wasm32")]
fn tile(a: &[f32], starts: [usize; MR], kc: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    for s in starts {
        assert!(s + kc <= a.len(), "a row past the end of a");
    }
    assert!(panel.len() >= kc * NR, "a panel shorter than the sum");
    // SAFETY: every read is within `a` (each row's `kc` values, checked
    // above) or `panel` (`kc · NR` values, checked above); wasm loads need
    // no alignment; the accumulators are this function's own arrays.
    unsafe { simd::tile(a.as_ptr(), starts, kc, panel.as_ptr(), acc) }
}

#[cfg(not(target_arch = "wasm32"))]
fn tile(a: &[f32], starts: [usize; MR], kc: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    for (row, start) in acc.iter_mut().zip(starts) {
        for (kk, &x) in a[start..start + kc].iter().enumerate() {
            for (sum, &w) in row.iter_mut().zip(&panel[kk * NR..(kk + 1) * NR]) {
                *sum += x * w;
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use super::{MR, NR};
    use core::arch::wasm32::*;

    /// The tile's kernel; the caller has checked every read's bounds.
    ///
    /// Eight steps of the sum per turn of the loop: each turn starts with a
    /// check of the call's fuel and epoch whose slow path calls into the
    /// host, and Cranelift keeps the accumulators in memory across it, so
    /// one step a turn spent more time moving them than multiplying. A
    /// row's four values are read as one vector and each is spread to every
    /// lane by a shuffle (a register operation, where a 32-bit splat load
    /// was three).
    pub unsafe fn tile(
        a: *const f32,
        starts: [usize; MR],
        kc: usize,
        panel: *const f32,
        acc: &mut [[f32; NR]; MR],
    ) {
        unsafe {
            let rows = starts.map(|s| a.add(s));
            let mut c = [[f32x4_splat(0.0); 2]; MR];
            for (c, row) in c.iter_mut().zip(acc.iter()) {
                c[0] = v128_load(row.as_ptr() as *const v128);
                c[1] = v128_load(row.as_ptr().add(4) as *const v128);
            }
            // One step with lane `l` of each row's vector `x`, panel row `at`.
            macro_rules! step {
                ($x:expr, $l:literal, $at:expr) => {{
                    let b0 = v128_load(panel.add($at * NR) as *const v128);
                    let b1 = v128_load(panel.add($at * NR + 4) as *const v128);
                    for (c, x) in c.iter_mut().zip($x) {
                        let x = i32x4_shuffle::<$l, $l, $l, $l>(x, x);
                        c[0] = f32x4_add(f32x4_mul(x, b0), c[0]);
                        c[1] = f32x4_add(f32x4_mul(x, b1), c[1]);
                    }
                }};
            }
            // Four steps from `k`.
            macro_rules! four {
                ($k:expr) => {{
                    let k = $k;
                    let x = rows.map(|r| v128_load(r.add(k) as *const v128));
                    step!(x, 0, k);
                    step!(x, 1, k + 1);
                    step!(x, 2, k + 2);
                    step!(x, 3, k + 3);
                }};
            }
            let mut kk = 0;
            while kk + 8 <= kc {
                four!(kk);
                four!(kk + 4);
                kk += 8;
            }
            if kk + 4 <= kc {
                four!(kk);
                kk += 4;
            }
            while kk < kc {
                let x = rows.map(|r| f32x4_splat(*r.add(kk)));
                step!(x, 0, kk);
                kk += 1;
            }
            for (c, row) in c.iter().zip(acc.iter_mut()) {
                v128_store(row.as_mut_ptr() as *mut v128, c[0]);
                v128_store(row.as_mut_ptr().add(4) as *mut v128, c[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bert::tests::values;

    fn naive(a: &[f32], lda: usize, rows: usize, b: &[f32], k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0f32; rows * n];
        for r in 0..rows {
            for j in 0..n {
                out[r * n + j] = (0..k).map(|kk| a[r * lda + kk] * b[kk * n + j]).sum();
            }
        }
        out
    }

    #[test]
    fn products_match_the_definition_at_every_edge() {
        // Sizes below, at and past a tile, a panel, a row block and a sum block.
        for (rows, k, n) in [
            (1, 1, 1),
            (3, 5, 7),
            (4, 8, 8),
            (5, 9, 17),
            (67, 300, 13),
            (130, 520, 24),
        ] {
            let lda = k + 3;
            let a = values(rows * lda, 1);
            let b = values(k * n, 2);
            let bias = values(n, 3);
            let mut packed = Packed::default();
            packed.fill(k, n, |kk, j| b[kk * n + j]);
            let ldc = n + 2;
            let mut out = vec![7f32; rows * ldc];
            matmul(&a, lda, rows, &packed, Some(&bias), &mut out, ldc);
            let want = naive(&a, lda, rows, &b, k, n);
            for r in 0..rows {
                for j in 0..n {
                    let (got, want) = (out[r * ldc + j], want[r * n + j] + bias[j]);
                    assert!(
                        (got - want).abs() < 1e-3,
                        "{rows}×{k}×{n} at ({r}, {j}): {got} against {want}"
                    );
                }
                assert_eq!(
                    &out[r * ldc + n..r * ldc + ldc],
                    &[7.0, 7.0],
                    "past the columns: untouched"
                );
            }
        }
    }

    #[test]
    fn a_weight_is_packed_transposed() {
        // W is 2 outputs × 3 inputs: y = x Wᵀ.
        let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let packed = Packed::transposed(&w, 2, 3);
        let mut out = [0f32; 2];
        matmul(&[1.0, 0.0, -1.0], 3, 1, &packed, None, &mut out, 2);
        assert_eq!(out, [-2.0, -2.0]);
    }

    #[test]
    fn no_sum_leaves_the_bias() {
        let packed = Packed::transposed(&[], 3, 0);
        let mut out = [9f32; 6];
        matmul(&[], 0, 2, &packed, Some(&[1.0, 2.0, 3.0]), &mut out, 3);
        assert_eq!(out, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    }
}
