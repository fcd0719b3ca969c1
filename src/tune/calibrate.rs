//! From the calibration's measurements to a machine's parameters.

use super::fit::{self, Transfer};
use super::Params;

/// What one rank measured (see `coll::probe`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Samples {
    /// Uncontended transfers (local rank 1 only): copies and pin-only reads.
    pub(crate) transfers: Vec<Transfer>,
    /// `(c, seconds)`: this rank's median pin-only read of 1024 pages while `c` readers
    /// read one process at once (readers only).
    pub(crate) contended: Vec<(usize, f64)>,
    /// Seconds per byte of a local copy.
    pub(crate) memcpy_beta: f64,
    /// Seconds of one flag hand-off (local ranks 0 and 1).
    pub(crate) flag: Option<f64>,
}

impl Samples {
    /// The samples as numbers, to send over MPI.
    pub(crate) fn encode(&self) -> Vec<f64> {
        let mut v = vec![self.memcpy_beta, self.flag.unwrap_or(f64::NAN), self.transfers.len() as f64];
        v.extend(self.transfers.iter().flat_map(|t| [t.bytes, t.pages, t.seconds]));
        v.push(self.contended.len() as f64);
        v.extend(self.contended.iter().flat_map(|&(c, t)| [c as f64, t]));
        v
    }

    /// The inverse of [`encode`](Self::encode); `None` for a malformed vector.
    pub(crate) fn decode(v: &[f64]) -> Option<Samples> {
        let mut it = v.iter().copied();
        let memcpy_beta = it.next()?;
        let flag = it.next().filter(|f| !f.is_nan());
        let n = it.next()? as usize;
        let transfers = (0..n)
            .map(|_| Some(Transfer { bytes: it.next()?, pages: it.next()?, seconds: it.next()? }))
            .collect::<Option<Vec<_>>>()?;
        let m = it.next()? as usize;
        let contended =
            (0..m).map(|_| Some((it.next()? as usize, it.next()?))).collect::<Option<Vec<_>>>()?;
        Some(Samples { transfers, contended, memcpy_beta, flag })
    }
}

/// A flag hand-off slower than this measured the scheduler (a peer that was not running),
/// not a cache line moving between cores, which takes well under a microsecond.
const FLAG_MAX: f64 = 5e-6;

/// Fits the parameters to every rank's samples; what could not be measured keeps the
/// value of `start` and is said in the notes.
pub(crate) fn fit_all(all: &[Samples], start: Params) -> (Params, Vec<String>) {
    let mut p = start;
    let mut notes = Vec::new();
    let transfers: Vec<Transfer> = all.iter().flat_map(|s| s.transfers.iter().copied()).collect();
    match fit::transfer(&transfers) {
        Some((alpha, beta, l)) if alpha > 0.0 && beta > 0.0 && l > 0.0 => {
            (p.alpha, p.beta, p.l) = (alpha, beta, l);
        }
        _ => notes.push("alpha, beta, l: not determined (needs 2 ranks); defaults kept".into()),
    }
    // gamma(c) = (T(c) - alpha) / (T(1) - alpha), T(c) the mean read time with c readers.
    let mut levels: Vec<usize> = all.iter().flat_map(|s| s.contended.iter().map(|&(c, _)| c)).collect();
    levels.sort_unstable();
    levels.dedup();
    let mean = |c: usize| {
        let ts: Vec<f64> =
            all.iter().flat_map(|s| s.contended.iter().filter(|x| x.0 == c).map(|x| x.1)).collect();
        ts.iter().sum::<f64>() / ts.len().max(1) as f64
    };
    let base = levels.first().filter(|&&c| c == 1).map(|_| mean(1) - p.alpha);
    let gammas: Vec<(f64, f64)> = match base {
        Some(b) if b > 0.0 => levels.iter().map(|&c| (c as f64, (mean(c) - p.alpha) / b)).collect(),
        _ => Vec::new(),
    };
    match (gammas.len() >= 2).then(|| fit::gamma(&gammas)).flatten() {
        Some((a, b)) => (p.a, p.b) = (a, b),
        None => notes.push(format!(
            "gamma: needs readers at two concurrency levels (3 ranks or more), measured {}; a = {}, b = {} kept",
            gammas.len(),
            p.a,
            p.b
        )),
    }
    let betas: Vec<f64> = all.iter().map(|s| s.memcpy_beta).filter(|b| *b > 0.0).collect();
    if !betas.is_empty() {
        p.memcpy_beta = betas.iter().sum::<f64>() / betas.len() as f64;
    }
    match all.iter().find_map(|s| s.flag) {
        Some(f) if f > 0.0 && f <= FLAG_MAX => p.flag = f,
        Some(f) => notes.push(format!(
            "flag latency: measured {:.1} us, the scheduler rather than a cache line moving (a peer \
             descheduled on a busy machine?); {:.2} us kept",
            f * 1e6,
            p.flag * 1e6
        )),
        None => notes.push("flag latency: needs 2 ranks; default kept".into()),
    }
    p.s = page_size() as f64;
    (p, notes)
}

/// The base page size.
pub(crate) fn page_size() -> usize {
    // The pin-only probe reads whole pages; 4 KiB on every target zcoll builds for unless
    // the kernel says otherwise.
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("KernelPageSize:")).and_then(|l| {
                l.split_whitespace().nth(1).and_then(|k| k.parse::<usize>().ok()).map(|k| k * 1024)
            })
        })
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_through_numbers() {
        let s = Samples {
            transfers: vec![Transfer { bytes: 4096.0, pages: 1.0, seconds: 1e-6 }],
            contended: vec![(1, 2e-5), (2, 5e-5)],
            memcpy_beta: 3e-11,
            flag: Some(2e-7),
        };
        assert_eq!(Samples::decode(&s.encode()), Some(s));
        assert_eq!(Samples::decode(&[1.0]), None);
    }

    #[test]
    fn synthetic_measurements_are_fitted_and_gaps_are_noted() {
        let truth = Params { alpha: 0.5e-6, beta: 5e-11, l: 60e-9, a: 0.3, b: 0.7, ..Params::DEFAULT };
        let pinned = |c: usize| truth.alpha + truth.l * truth.gamma(c) * 1024.0;
        let mut reader1 = Samples { memcpy_beta: 3e-11, flag: Some(1e-7), ..Samples::default() };
        for pages in [1usize, 4, 16, 64, 256, 1024] {
            let n = pages as f64 * 4096.0;
            reader1.transfers.push(Transfer {
                bytes: n,
                pages: pages as f64,
                seconds: truth.alpha + truth.beta * n + truth.l * pages as f64,
            });
            reader1.transfers.push(Transfer {
                bytes: 1.0,
                pages: pages as f64,
                seconds: truth.alpha + truth.beta + truth.l * pages as f64,
            });
        }
        reader1.contended = (1..=4).map(|c| (c, pinned(c))).collect();
        let others: Vec<Samples> = (2..=4)
            .map(|r| Samples { contended: (r..=4).map(|c| (c, pinned(c))).collect(), ..Samples::default() })
            .collect();
        let all: Vec<Samples> = std::iter::once(reader1).chain(others).collect();
        let (p, notes) = fit_all(&all, Params::DEFAULT);
        assert!(notes.is_empty(), "{notes:?}");
        for (got, want) in
            [(p.alpha, truth.alpha), (p.beta, truth.beta), (p.l, truth.l), (p.a, truth.a), (p.b, truth.b)]
        {
            assert!((got / want - 1.0).abs() < 0.02, "{got} vs {want}");
        }
        // A hand-off of milliseconds (a descheduled peer) is refused, and said.
        let mut slow = all.clone();
        slow[0].flag = Some(1.5e-3);
        let (q, notes) = fit_all(&slow, Params::DEFAULT);
        assert_eq!(q.flag, Params::DEFAULT.flag);
        assert!(notes.len() == 1 && notes[0].contains("1500.0 us"), "{notes:?}");
        // One rank alone: nothing but memcpy is measured, and the notes say so.
        let (_, notes) = fit_all(&[Samples { memcpy_beta: 1e-11, ..Samples::default() }], Params::DEFAULT);
        assert_eq!(notes.len(), 3, "{notes:?}");
    }
}
