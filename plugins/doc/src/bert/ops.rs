//! The encoder's element-wise steps: layer normalisation, softmax, GELU, and
//! the exponential and error functions they need, written as plain loops
//! over independent values so that the compiler makes SIMD of them (wasm's
//! 4 lanes: `.cargo/config.toml` enables them for the guests). The two
//! functions are polynomial approximations good to a few units in the last
//! place of an `f32` (the unit tests bound them), not libm's calls: the
//! softmax of a 256-token chunk takes ~4.7 million exponentials.

/// Each row of `width` values: `(x - mean) / sqrt(variance + eps) · g + b`.
pub fn layer_norm(x: &mut [f32], width: usize, g: &[f32], b: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(width) {
        let mean = sum(row) / width as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// Each row of `width` values becomes `softmax(scale · row)`.
#[inline(never)] // its own entry in a profile
pub fn softmax_rows(x: &mut [f32], width: usize, scale: f32) {
    for row in x.chunks_exact_mut(width) {
        let max = row
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        for v in row.iter_mut() {
            *v = exp((*v - max) * scale);
        }
        let inv = 1.0 / sum(row);
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

/// GELU, the exact form: `x/2 · (1 + erf(x / √2))`.
#[inline(never)] // its own entry in a profile
pub fn gelu(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// `x += y`, element by element.
pub fn add(x: &mut [f32], y: &[f32]) {
    for (x, y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// A sum in eight partial sums (a vectorisable order).
pub fn sum(x: &[f32]) -> f32 {
    let mut parts = [0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (p, v) in parts.iter_mut().zip(c) {
            *p += v;
        }
    }
    parts.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// `e^x` for `x ≤ 88`; 0 below -87 (where an `f32`'s normal range ends).
/// `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, then `2^n · e^r`, `e^r` by its
/// Taylor polynomial to the 7th power (remainder under 6e-9 of it).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75; // ln 2 in two parts: n·LN2_HI is exact
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    let e = p * scale;
    if x <= -87.0 { 0.0 } else { e }
}

/// The error function, Abramowitz and Stegun's 7.1.26 (absolute error under
/// 1.5e-7, 5e-7 in `f32`'s arithmetic): `1 - (a1·t + … + a5·t⁵)·e^(-x²)`,
/// `t = 1 / (1 + p·|x|)`, odd.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152,
        1.061_405_4,
    ];
    let ax = x.abs();
    let t = 1.0 / (1.0 + P * ax);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let y = 1.0 - poly * exp(-ax * ax);
    y.copysign(x)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// erf by its series in f64 (accurate to ~1e-12 for |x| ≤ 4).
    pub(in crate::bert) fn erf_series(x: f64) -> f64 {
        if x.abs() > 5.0 {
            return x.signum();
        }
        let (mut term, mut total, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 {
            n += 1.0;
            term *= -x * x / n;
            total += term / (2.0 * n + 1.0);
        }
        total * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn exp_is_within_a_few_ulps() {
        let mut worst = 0f64;
        for i in -86_900..=88_000 {
            let x = i as f32 / 1000.0;
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn erf_is_within_its_bound() {
        let mut worst = 0f64;
        for i in -6_000..=6_000 {
            let x = i as f32 / 1000.0;
            worst = worst.max((erf(x) as f64 - erf_series(x as f64)).abs());
        }
        assert!(worst < 5e-7, "absolute error {worst}");
        assert_eq!(erf(0.0), 0.0);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let mut x = vec![1.0, 2.0, 3.0, -1000.0, 0.5, 0.5, 0.5, 0.5];
        softmax_rows(&mut x, 4, 1.0);
        assert!((sum(&x[..4]) - 1.0).abs() < 1e-6 && (sum(&x[4..]) - 1.0).abs() < 1e-6);
        assert!(x[2] > x[1] && x[1] > x[0] && x[3] == 0.0);
        let want = (2f64).exp() / (1f64.exp() + 2f64.exp() + 3f64.exp());
        assert!((x[1] as f64 - want).abs() < 1e-6);
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, 4, &[1.0; 4], &[0.5; 4], 0.0);
        assert!((sum(&x) - 2.0).abs() < 1e-6, "mean 0 plus the bias: {x:?}");
        let var: f32 = x.iter().map(|v| (v - 0.5) * (v - 0.5)).sum::<f32>() / 4.0;
        assert!((var - 1.0).abs() < 1e-5);
    }

    #[test]
    fn gelu_matches_its_definition() {
        let mut x: Vec<f32> = (-40..=40).map(|i| i as f32 / 8.0).collect();
        let want: Vec<f64> = x
            .iter()
            .map(|&v| 0.5 * v as f64 * (1.0 + erf_series(v as f64 / 2f64.sqrt())))
            .collect();
        gelu(&mut x);
        for (got, want) in x.iter().zip(want) {
            assert!((*got as f64 - want).abs() < 1e-6, "{got} against {want}");
        }
    }
}
