//! The Cluster '17 paper's own cost formulas, evaluated as it writes them, beside which
//! zcoll's model ([`Params::predict`]) can be read.
//!
//! The paper prices every algorithm of one node with `T(n, c) = alpha + n beta + l gamma_c
//! ceil(n / s)` and `gamma_c = a c^2 + b c` (its Table IV), counting `p` steps where a
//! root serves `p - 1` peers and evaluating the contention of `p - 1` concurrent readers
//! at `gamma_p`. The small-message collectives it adds to each formula (`T^sm_bcast`,
//! `T^sm_gather`: the exchange of addresses and the completion) are common to the
//! algorithms compared and are left out here. These functions exist to compare: zcoll
//! chooses with [`Params::predict`].

use super::Params;

/// A transfer of `n` bytes with the contention factor `gamma`, as the paper writes it.
fn t(params: &Params, n: usize, gamma: f64) -> f64 {
    params.alpha + n as f64 * params.beta + params.l * gamma * (n as f64 / params.s).ceil()
}

/// The paper's `gamma_c = a c^2 + b c`, with no special case at `c = 1`.
pub fn gamma(params: &Params, c: usize) -> f64 {
    let c = c as f64;
    params.a * c * c + params.b * c
}

/// Scatter by parallel reads, gather by parallel writes, broadcast by direct reads:
/// `alpha + n beta + l gamma_p ceil(n / s)`.
pub fn parallel(params: &Params, p: usize, n: usize) -> f64 {
    t(params, n, gamma(params, p))
}

/// Scatter by sequential writes, gather by sequential reads, broadcast by direct
/// writes: `p (alpha + n beta + l ceil(n / s))`.
pub fn sequential(params: &Params, p: usize, n: usize) -> f64 {
    p as f64 * t(params, n, 1.0)
}

/// Throttled reads or writes with factor `k`: `ceil(p / k) (alpha + n beta + l gamma_k
/// ceil(n / s))`.
pub fn throttled(params: &Params, p: usize, k: usize, n: usize) -> f64 {
    p.div_ceil(k.max(1)) as f64 * t(params, n, gamma(params, k))
}

/// The k-nomial broadcast: `ceil(log_k p) (alpha + n beta + l gamma_k ceil(n / s))`.
pub fn knomial(params: &Params, p: usize, k: usize, n: usize) -> f64 {
    let (mut levels, mut reach) = (0usize, 1usize);
    while reach < p {
        reach = reach.saturating_mul(k.max(2));
        levels += 1;
    }
    levels as f64 * t(params, n, gamma(params, k))
}

/// The ring allgather (and the pairwise alltoall) of `n` bytes per rank: `(p - 1) (alpha
/// + n beta + l ceil(n / s))`.
pub fn ring(params: &Params, p: usize, n: usize) -> f64 {
    p.saturating_sub(1) as f64 * t(params, n, 1.0)
}

/// The broadcast of its model-validation figure (Fig. 12): a sequential-write scatter of
/// `n / p` bytes per rank, then a ring allgather of them.
pub fn scatter_allgather(params: &Params, p: usize, n: usize) -> f64 {
    let m = n.div_ceil(p.max(1));
    sequential(params, p, m) + ring(params, p, m)
}

/// What the paper's formulas choose for a scatter (or, the same formulas, a gather) of
/// `n` bytes per rank on `p` ranks among parallel reads, sequential writes and throttled
/// reads with each of `ks`: `0` for the parallel read, `1` for the sequential write, else
/// the throttle factor; and its time.
pub fn scatter_choice(params: &Params, p: usize, n: usize, ks: &[usize]) -> (usize, f64) {
    let mut best = (0, parallel(params, p, n));
    for (k, t) in [(1, sequential(params, p, n))]
        .into_iter()
        .chain(ks.iter().filter(|&&k| k > 1 && k < p).map(|&k| (k, throttled(params, p, k, n))))
    {
        if t < best.1 {
            best = (k, t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table IV's Broadwell: alpha 0.98 us, 13.2 GB/s, l 0.11 us, 4 KiB, 0.18 c^2 + 0.83 c.
    const BDW: Params =
        Params { alpha: 0.98e-6, beta: 1.0 / 13.2e9, l: 0.11e-6, a: 0.18, b: 0.83, ..Params::DEFAULT };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
    }

    #[test]
    fn the_formulas_by_hand_on_broadwell() {
        // 1 MiB = 256 pages; n beta = 1048576 / 13.2e9 = 79.437 us.
        let nb = 1048576.0 / 13.2e9;
        // gamma_28 = 0.18 * 784 + 0.83 * 28 = 141.12 + 23.24 = 164.36.
        assert!(close(gamma(&BDW, 28), 164.36));
        // Parallel: 0.98 + 79.437 + 0.11 * 164.36 * 256 us = 4708.4 us.
        assert!(close(parallel(&BDW, 28, 1 << 20), 0.98e-6 + nb + 0.11e-6 * 164.36 * 256.0));
        // Sequential: 28 (0.98 + 79.437 + 0.11 * 256) us = 3042.2 us.
        assert!(close(sequential(&BDW, 28, 1 << 20), 28.0 * (0.98e-6 + nb + 0.11e-6 * 256.0)));
        // Throttled k = 4: ceil(28/4) = 7 waves; gamma_4 = 2.88 + 3.32 = 6.2.
        assert!(close(throttled(&BDW, 28, 4, 1 << 20), 7.0 * (0.98e-6 + nb + 0.11e-6 * 6.2 * 256.0)));
        // k-nomial k = 4 on 28: ceil(log4 28) = 3 levels.
        assert!(close(knomial(&BDW, 28, 4, 1 << 20), 3.0 * (0.98e-6 + nb + 0.11e-6 * 6.2 * 256.0)));
        // Ring of 8 B: 27 (0.98 + 8/13.2e9 s + 0.11) us.
        assert!(close(ring(&BDW, 28, 8), 27.0 * (0.98e-6 + 8.0 / 13.2e9 + 0.11e-6)));
        // Scatter-allgather of 1 MiB: 37450 B chunks (10 pages): 28 + 27 transfers.
        let chunk = 0.98e-6 + 37450.0 / 13.2e9 + 0.11e-6 * 10.0;
        assert!(close(scatter_allgather(&BDW, 28, 1 << 20), 55.0 * chunk));
    }
}
