//! Least-squares fits of the model's parameters to measurements.
//!
//! The paper fitted with Levenberg-Marquardt; the model is linear in every parameter
//! once the regressors are chosen, so ordinary least squares (normal equations, solved
//! by Gaussian elimination with partial pivoting) finds the same optimum exactly.

/// Solves the least-squares problem `min |X w - y|^2` for `K` unknowns; `None` if the
/// regressors do not determine them (a singular normal matrix).
pub fn least_squares<const K: usize>(rows: &[([f64; K], f64)]) -> Option<[f64; K]> {
    let mut m = [[0.0f64; K]; K];
    let mut v = [0.0f64; K];
    for (x, y) in rows {
        for i in 0..K {
            v[i] += x[i] * y;
            for (j, mij) in m[i].iter_mut().enumerate() {
                *mij += x[i] * x[j];
            }
        }
    }
    // Scale each unknown so that the pivots are comparable (bytes and pages differ by
    // orders of magnitude).
    let scale: [f64; K] = std::array::from_fn(|i| m[i][i].sqrt().max(f64::MIN_POSITIVE));
    for i in 0..K {
        v[i] /= scale[i];
        for j in 0..K {
            m[i][j] /= scale[i] * scale[j];
        }
    }
    for col in 0..K {
        let pivot = (col..K).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        v.swap(col, pivot);
        let (pivot_row, pivot_v) = (m[col], v[col]);
        for (row, (mr, vr)) in m.iter_mut().zip(v.iter_mut()).enumerate() {
            if row != col {
                let f = mr[col] / pivot_row[col];
                for (x, px) in mr.iter_mut().zip(pivot_row).skip(col) {
                    *x -= f * px;
                }
                *vr -= f * pivot_v;
            }
        }
    }
    Some(std::array::from_fn(|i| v[i] / m[i][i] / scale[i]))
}

/// One timed transfer: bytes copied, pages pinned, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    /// Bytes copied.
    pub bytes: f64,
    /// Pages pinned.
    pub pages: f64,
    /// Seconds it took.
    pub seconds: f64,
}

/// Fits `t = alpha + beta * bytes + l * pages` to uncontended transfers. Pin-only samples
/// (one byte copied against many pages pinned) are what separate `l` from `beta`. The
/// timings span orders of magnitude and their noise is relative, so every sample is
/// weighted by `1 / t`: the fit minimises relative errors.
pub fn transfer(samples: &[Transfer]) -> Option<(f64, f64, f64)> {
    let rows: Vec<([f64; 3], f64)> = samples
        .iter()
        .filter(|s| s.seconds > 0.0)
        .map(|s| ([1.0 / s.seconds, s.bytes / s.seconds, s.pages / s.seconds], 1.0))
        .collect();
    least_squares(&rows).map(|[alpha, beta, l]| (alpha, beta, l))
}

/// Fits the per-byte cost alone, `t = alpha + beta * bytes + l * pages` with `alpha` and
/// `l` known (from [`transfer`]), to copies of another kind (CMA writes), relative errors
/// weighted alike: `None` without a sample that copies bytes.
///
/// # Examples
///
/// ```
/// use zcoll::tune::fit::{per_byte, Transfer};
/// let t = |bytes: f64, pages: f64| Transfer { bytes, pages, seconds: 1e-6 + 9e-11 * bytes + 1e-7 * pages };
/// let beta = per_byte(&[t(4096.0, 1.0), t(1048576.0, 256.0)], 1e-6, 1e-7).unwrap();
/// assert!((beta / 9e-11 - 1.0).abs() < 1e-9);
/// ```
pub fn per_byte(samples: &[Transfer], alpha: f64, l: f64) -> Option<f64> {
    let rows: Vec<([f64; 1], f64)> = samples
        .iter()
        .filter(|s| s.seconds > 0.0 && s.bytes > 0.0)
        .map(|s| ([s.bytes / s.seconds], (s.seconds - alpha - l * s.pages) / s.seconds))
        .collect();
    if rows.is_empty() {
        return None;
    }
    least_squares(&rows).map(|[beta]| beta)
}

/// Fits `gamma(c) = a c^2 + b c` to measured slowdowns `(c, gamma)`, relative errors
/// weighted alike (as [`transfer`]).
pub fn gamma(samples: &[(f64, f64)]) -> Option<(f64, f64)> {
    let rows: Vec<([f64; 2], f64)> =
        samples.iter().filter(|s| s.1 > 0.0).map(|&(c, g)| ([c * c / g, c / g], 1.0)).collect();
    least_squares(&rows).map(|[a, b]| (a, b))
}

/// Fits the per-byte cost `m` of the copy-in/copy-out paths to timings `(bytes, seconds)`
/// of the staged broadcast between two ranks, `t = c + 2 n m + ceil(n / chunk) flag`,
/// with `flag` known (the hand-off ping-pong) and a constant `c` (the call's round
/// protocol, the model's `sync_staged`) fitted beside `m`; relative errors weighted alike
/// (as [`transfer`]). Returns `(c, m)`; `None` unless `m` comes out positive.
///
/// A local `memcpy` underestimates `m`: in a staged collective the reader copies lines
/// another core has just written, and every one of them crosses between the cores.
///
/// # Examples
///
/// ```
/// let (c, m, flag, chunk) = (1e-6, 60e-12, 0.1e-6, 32768.0);
/// let t = |n: f64| c + 2.0 * n * m + (n / chunk).ceil() * flag;
/// let samples: Vec<(f64, f64)> = [64.0, 65536.0, 262144.0, 1048576.0].iter().map(|&n| (n, t(n))).collect();
/// let (fc, fm) = zcoll::tune::fit::staged(&samples, chunk, flag).unwrap();
/// assert!((fm / m - 1.0).abs() < 1e-6 && (fc / c - 1.0).abs() < 1e-6);
/// ```
pub fn staged(samples: &[(f64, f64)], chunk: f64, flag: f64) -> Option<(f64, f64)> {
    let rows: Vec<([f64; 2], f64)> = samples
        .iter()
        .filter(|s| s.1 > 0.0 && s.0 > 0.0)
        .map(|&(n, t)| ([1.0 / t, 2.0 * n / t], (t - (n / chunk).ceil() * flag) / t))
        .collect();
    least_squares(&rows).map(|[c, m]| (c, m)).filter(|&(_, m)| m > 0.0)
}

/// The constant `c` of `t = c + known(n)` from timings `(n, t)`: the median of the
/// residuals `t - known(n)`, so that a few timings the scheduler stretched do not move
/// it. `None` without samples.
///
/// # Examples
///
/// ```
/// let samples = [(8.0, 2.5e-6), (64.0, 2.6e-6), (512.0, 40e-6), (1024.0, 2.7e-6), (4096.0, 2.9e-6)];
/// let c = zcoll::tune::fit::constant(&samples, |n| 1e-6 + n * 1e-10).unwrap();
/// assert!((c - (2.6e-6 - 1e-6 - 64.0 * 1e-10)).abs() < 1e-12, "the outlier at 512 B is ignored");
/// ```
pub fn constant(samples: &[(f64, f64)], known: impl Fn(f64) -> f64) -> Option<f64> {
    let mut residuals: Vec<f64> = samples.iter().map(|&(n, t)| t - known(n)).collect();
    residuals.sort_by(f64::total_cmp);
    let k = residuals.len();
    (k > 0)
        .then(|| if k % 2 == 1 { residuals[k / 2] } else { (residuals[k / 2 - 1] + residuals[k / 2]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deterministic jitter of at most `pct` percent.
    fn jitter(i: usize, pct: f64) -> f64 {
        1.0 + pct / 100.0 * (((i * 7919) % 201) as f64 / 100.0 - 1.0)
    }

    #[test]
    fn recovers_transfer_parameters_from_noisy_synthetic_data() {
        let (alpha, beta, l) = (0.45e-6, 1.0 / 20e9, 50e-9);
        let mut samples = Vec::new();
        for (i, pages) in [1usize, 4, 16, 64, 256, 1024].into_iter().enumerate() {
            let bytes = (pages * 4096) as f64;
            // A full copy of the pages, and a pin-only read of them.
            samples.push(Transfer {
                bytes,
                pages: pages as f64,
                seconds: (alpha + beta * bytes + l * pages as f64) * jitter(i, 1.0),
            });
            samples.push(Transfer {
                bytes: 1.0,
                pages: pages as f64,
                seconds: (alpha + beta + l * pages as f64) * jitter(i + 50, 1.0),
            });
        }
        let (a, b, p) = transfer(&samples).unwrap();
        assert!((a / alpha - 1.0).abs() < 0.05, "alpha {a}");
        assert!((b / beta - 1.0).abs() < 0.05, "beta {b}");
        assert!((p / l - 1.0).abs() < 0.05, "l {p}");
    }

    #[test]
    fn recovers_gamma_and_refuses_an_undetermined_fit() {
        let (a, b) = (0.4, 0.6);
        let samples: Vec<(f64, f64)> =
            (1..=8).map(|c| (c as f64, (a * (c * c) as f64 + b * c as f64) * jitter(c, 2.0))).collect();
        let (fa, fb) = gamma(&samples).unwrap();
        assert!((fa / a - 1.0).abs() < 0.05, "a {fa}");
        assert!((fb / b - 1.0).abs() < 0.1, "b {fb}");
        // One concurrency level cannot separate a from b.
        assert_eq!(gamma(&[(2.0, 2.8), (2.0, 2.8)]), None);
    }

    #[test]
    fn recovers_the_staged_copy_cost_under_noise_and_refuses_nonsense() {
        let (m, flag, chunk) = (55e-12, 0.2e-6, 32768.0);
        let samples: Vec<(f64, f64)> = [16384usize, 65536, 262144, 1 << 20, 4 << 20]
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let n = n as f64;
                (n, (1.5e-6 + 2.0 * n * m + (n / chunk).ceil() * flag) * jitter(i, 3.0))
            })
            .collect();
        let (c, fitted) = staged(&samples, chunk, flag).unwrap();
        assert!((fitted / m - 1.0).abs() < 0.05, "m {fitted}");
        assert!((c / 1.5e-6 - 1.0).abs() < 0.25, "c {c}");
        // Times that fall with size fit a negative cost: refused.
        assert_eq!(staged(&[(1000.0, 2e-6), (1e6, 1e-6)], chunk, 0.0), None);
        assert_eq!(staged(&[(1000.0, 2e-6)], chunk, 0.0), None, "one size cannot separate c from m");
    }

    #[test]
    fn the_constant_is_the_median_residual() {
        let known = |n: f64| 1e-6 + n * 2e-10;
        let clean: Vec<(f64, f64)> =
            [8.0, 64.0, 512.0, 4096.0].iter().map(|&n| (n, known(n) + 1.2e-6)).collect();
        assert!((constant(&clean, known).unwrap() - 1.2e-6).abs() < 1e-15);
        // Two stretched timings of five do not move it.
        let mut noisy = clean.clone();
        noisy.push((16.0, known(16.0) + 1.3e-6));
        noisy[1].1 += 4e-3;
        noisy[3].1 += 2e-3;
        let c = constant(&noisy, known).unwrap();
        assert!((c - 1.3e-6).abs() < 1e-12, "{c}");
        assert_eq!(constant(&[], known), None);
    }

    /// Whether `got` is within `tol` of `want`, relatively.
    fn near(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol * want.abs()
    }

    proptest! {
        /// Exact timings made from any plausible machine give back its parameters, and
        /// the fitted model reproduces every timing.
        #[test]
        fn fitted_transfer_parameters_reproduce_synthetic_data(
            alpha in 1e-7f64..1e-5,
            beta in 1e-11f64..1e-9,
            l in 1e-8f64..1e-6,
            pages in proptest::collection::btree_set(1usize..4096, 2..6),
        ) {
            let t = |bytes: f64, pages: f64| Transfer { bytes, pages, seconds: alpha + beta * bytes + l * pages };
            let samples: Vec<Transfer> = pages
                .iter()
                .flat_map(|&n| [t(n as f64 * 4096.0, n as f64), t(1.0, n as f64)])
                .collect();
            let (a, b, p) = transfer(&samples).unwrap();
            prop_assert!(near(a, alpha, 1e-4) && near(b, beta, 1e-4) && near(p, l, 1e-4), "{:?}", (a, b, p));
            for s in &samples {
                prop_assert!(near(a + b * s.bytes + p * s.pages, s.seconds, 1e-6));
            }
            prop_assert!(near(per_byte(&samples, alpha, l).unwrap(), beta, 1e-6));
        }

        /// The contention factor is recovered from two concurrency levels or more.
        #[test]
        fn fitted_gamma_reproduces_synthetic_data(
            a in 0.0f64..2.0,
            b in 0.1f64..2.0,
            levels in proptest::collection::btree_set(1usize..64, 2..8),
        ) {
            let g = |c: f64| a * c * c + b * c;
            let samples: Vec<(f64, f64)> = levels.iter().map(|&c| (c as f64, g(c as f64))).collect();
            let (fa, fb) = gamma(&samples).unwrap();
            prop_assert!((fa - a).abs() <= 1e-6 * (a + b) && near(fb, b, 1e-6), "{:?}", (fa, fb));
        }

        /// The staged copy's constant and per-byte cost are recovered from two sizes or
        /// more, whatever the chunk and the flag.
        #[test]
        fn fitted_staged_cost_reproduces_synthetic_data(
            c in 1e-7f64..1e-5,
            m in 1e-12f64..1e-10,
            flag in 0.0f64..1e-6,
            chunk in (1usize..16).prop_map(|k| (k * 4096) as f64),
            sizes in proptest::collection::btree_set(1usize..1 << 24, 2..6),
        ) {
            // Sizes as a calibration takes them, spread over at least a factor of two:
            // from two nearly equal sizes (9496164 and 9497343 bytes, say) the constant is
            // an extrapolation over 8000 times their distance, which the rounding of the
            // timings alone moves by more than the tolerance.
            let (least, most) = (*sizes.first().unwrap(), *sizes.last().unwrap());
            prop_assume!(most >= 2 * least);
            let t = |n: f64| c + 2.0 * n * m + (n / chunk).ceil() * flag;
            let samples: Vec<(f64, f64)> = sizes.iter().map(|&n| (n as f64, t(n as f64))).collect();
            let (fc, fm) = staged(&samples, chunk, flag).unwrap();
            prop_assert!(near(fc, c, 1e-4) && near(fm, m, 1e-4), "{:?}", (fc, fm));
        }
    }

    #[test]
    fn exact_data_is_fitted_exactly() {
        let rows: Vec<([f64; 2], f64)> = (0..5).map(|i| ([1.0, i as f64], 3.0 + 2.0 * i as f64)).collect();
        let [c, m] = least_squares(&rows).unwrap();
        assert!((c - 3.0).abs() < 1e-9 && (m - 2.0).abs() < 1e-9);
    }
}
