//! From the calibration's measurements to a machine's parameters.

use super::fit::{self, Transfer};
use super::{CrossSocket, Params};

/// What one rank measured (see `coll::probe`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Samples {
    /// Uncontended transfers (local rank 1 only): copies and pin-only reads.
    pub(crate) transfers: Vec<Transfer>,
    /// Uncontended CMA writes (local rank 1 only).
    pub(crate) writes: Vec<Transfer>,
    /// `(c, seconds)`: this rank's median pin-only read of 1024 pages while `c` readers
    /// read one process at once (readers only).
    pub(crate) contended: Vec<(usize, f64)>,
    /// Seconds per byte of a local copy.
    pub(crate) memcpy_beta: f64,
    /// Seconds of one flag hand-off (local ranks 0 and 1).
    pub(crate) flag: Option<f64>,
    /// `(c, seconds)`: as `contended`, with `c` readers on other sockets than the process
    /// they read (readers on another socket only).
    pub(crate) cross: Vec<(usize, f64)>,
    /// The sockets the node's ranks are on between them (0 when some rank's is unknown).
    pub(crate) sockets: usize,
    /// The sockets of the machine.
    pub(crate) machine_sockets: usize,
}

impl Samples {
    /// The samples as numbers, to send over MPI.
    pub(crate) fn encode(&self) -> Vec<f64> {
        let mut v = vec![self.memcpy_beta, self.flag.unwrap_or(f64::NAN)];
        for list in [&self.transfers, &self.writes] {
            v.push(list.len() as f64);
            v.extend(list.iter().flat_map(|t| [t.bytes, t.pages, t.seconds]));
        }
        for levels in [&self.contended, &self.cross] {
            v.push(levels.len() as f64);
            v.extend(levels.iter().flat_map(|&(c, t)| [c as f64, t]));
        }
        v.extend([self.sockets as f64, self.machine_sockets as f64]);
        v
    }

    /// The inverse of [`encode`](Self::encode); `None` for a malformed vector.
    pub(crate) fn decode(v: &[f64]) -> Option<Samples> {
        let mut it = v.iter().copied();
        let memcpy_beta = it.next()?;
        let flag = it.next().filter(|f| !f.is_nan());
        let mut list = || {
            let n = it.next()? as usize;
            (0..n)
                .map(|_| Some(Transfer { bytes: it.next()?, pages: it.next()?, seconds: it.next()? }))
                .collect::<Option<Vec<_>>>()
        };
        let (transfers, writes) = (list()?, list()?);
        let mut levels = || {
            let m = it.next()? as usize;
            (0..m).map(|_| Some((it.next()? as usize, it.next()?))).collect::<Option<Vec<_>>>()
        };
        let (contended, cross) = (levels()?, levels()?);
        let (sockets, machine_sockets) = (it.next()? as usize, it.next()? as usize);
        Some(Samples { transfers, writes, contended, memcpy_beta, flag, cross, sockets, machine_sockets })
    }
}

/// The socket (physical package) of every CPU in `cpus` if they share one: where a
/// process bound to them runs. `None` when they span several or the kernel does not say.
pub(crate) fn socket_of(cpus: &[u64]) -> Option<usize> {
    socket_of_with(cpus, |cpu| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// [`socket_of`] with the package of each CPU from `package`.
fn socket_of_with(cpus: &[u64], package: impl Fn(usize) -> Option<usize>) -> Option<usize> {
    let mut set = (0..cpus.len() * 64).filter(|&i| cpus[i / 64] >> (i % 64) & 1 == 1);
    let first = package(set.next()?)?;
    set.all(|cpu| package(cpu) == Some(first)).then_some(first)
}

/// The sockets of this machine (distinct physical packages); 1 if the kernel does not say.
pub(crate) fn machine_sockets() -> usize {
    let mut ids: Vec<String> = std::fs::read_dir("/sys/devices/system/cpu")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("topology/physical_package_id")).ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len().max(1)
}

/// The mean over every rank's samples in `levels` of the time with `c` readers.
fn mean_of(all: &[Samples], c: usize, levels: impl Fn(&Samples) -> &Vec<(usize, f64)>) -> f64 {
    let ts: Vec<f64> = all.iter().flat_map(|s| levels(s).iter().filter(|x| x.0 == c).map(|x| x.1)).collect();
    ts.iter().sum::<f64>() / ts.len().max(1) as f64
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
    let writes: Vec<Transfer> = all.iter().flat_map(|s| s.writes.iter().copied()).collect();
    p.write_beta = None;
    match fit::per_byte(&writes, p.alpha, p.l) {
        Some(b) if b > 0.0 => p.write_beta = Some(b),
        Some(b) => notes.push(format!("write beta: fitted {b:e} s/B, not positive; writes priced as reads")),
        None => {}
    }
    // gamma(c) = (T(c) - alpha) / (T(1) - alpha), T(c) the mean read time with c readers.
    let mut levels: Vec<usize> = all.iter().flat_map(|s| s.contended.iter().map(|&(c, _)| c)).collect();
    levels.sort_unstable();
    levels.dedup();
    let mean = |c: usize| mean_of(all, c, |s| &s.contended);
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
    p.cross_socket = None;
    let sockets = all.first().map_or(0, |s| s.sockets);
    let cross: Vec<(f64, f64)> = match base {
        Some(b) if b > 0.0 && sockets > 1 => {
            let mut levels: Vec<usize> = all.iter().flat_map(|s| s.cross.iter().map(|&(c, _)| c)).collect();
            levels.sort_unstable();
            levels.dedup();
            levels.iter().map(|&c| (c as f64, (mean_of(all, c, |s| &s.cross) - p.alpha) / b)).collect()
        }
        _ => Vec::new(),
    };
    match (cross.len() >= 2).then(|| fit::gamma(&cross)).flatten() {
        Some((a, b)) => p.cross_socket = Some(CrossSocket { sockets, a, b }),
        None if sockets > 1 => notes.push(format!(
            "gamma across sockets: needs readers on another socket than local rank 0 at two \
             concurrency levels, measured {}; every pin priced with gamma",
            cross.len()
        )),
        None if all.first().is_some_and(|s| s.machine_sockets > 1) => notes.push(
            "gamma across sockets: this machine has several sockets, but the ranks ran on one \
             (map them over the sockets, e.g. mpiexec --map-by socket --bind-to core); every pin \
             priced with gamma"
                .into(),
        ),
        None => {}
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

/// The message sizes at which calibration times the broadcast to fit the round
/// constants and the staged copy cost: small messages, where the round protocol is most of
/// the time, and one to 64 chunks of the staging area.
pub(crate) const ROUND_SIZES: [usize; 8] = [8, 64, 512, 4096, 32 << 10, 128 << 10, 512 << 10, 2 << 20];

/// The largest message whose direct read measures the single copy's round: above it the
/// copy's own noise swamps the constant.
pub(crate) const COPY_ROUND_MAX: usize = 4096;

/// What the broadcasts timed for the round constants gave, `(bytes, seconds)` each (the
/// median over iterations of the slowest rank).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Rounds {
    /// The ranks of the node they ran on (0: not measured).
    pub(crate) p: usize,
    /// The staged broadcast, at every size of [`ROUND_SIZES`].
    pub(crate) staged: Vec<(f64, f64)>,
    /// The direct-read broadcast (a single copy), up to [`COPY_ROUND_MAX`].
    pub(crate) copy: Vec<(f64, f64)>,
}

/// Fits, from the broadcasts of `rounds`, the staged paths' per-byte cost (replacing the
/// local `memcpy_beta` where it is larger) and the round constants `sync_staged` and
/// `sync_copy`, and says what it did in `notes`. On more than two ranks what the model
/// adds per rank beyond the second (a flag per peer, and per chunk for every staged reader
/// after the first) is taken off first, so the constants mean two ranks.
pub(crate) fn fit_rounds(p: &mut Params, notes: &mut Vec<String>, rounds: &Rounds) {
    if rounds.staged.is_empty() {
        notes.push(
            "memcpy_beta, sync_staged, sync_copy: a local copy and built-in rounds (the broadcasts \
             that fit them need one node of 2 ranks or more)"
                .into(),
        );
        return;
    }
    let local = p.memcpy_beta;
    let chunk = super::model::STAGE_CHUNK;
    let extra = rounds.p.saturating_sub(2) as f64;
    let staged: Vec<(f64, f64)> = rounds
        .staged
        .iter()
        .map(|&(n, t)| (n, t - extra * p.flag * (1.0 + (n as usize).div_ceil(chunk) as f64)))
        .collect();
    match fit::staged(&staged, chunk as f64, p.flag) {
        Some((c, m)) => {
            if c > 0.0 {
                p.sync_staged = c;
            }
            if m > local {
                p.memcpy_beta = m;
            }
            notes.push(format!(
                "memcpy_beta: {} ({:.1} ps/B; a local memcpy: {:.1} ps/B); sync_staged: {}",
                if m > local { "fitted to the staged broadcast" } else { "a local memcpy, not less" },
                m * 1e12,
                local * 1e12,
                if c > 0.0 { format!("{:.2} us", c * 1e6) } else { "not positive, built-in kept".into() }
            ));
        }
        None => notes.push(format!(
            "memcpy_beta: a local memcpy ({:.1} ps/B); the staged broadcast fitted nothing; sync_staged built in",
            local * 1e12
        )),
    }
    let params = *p;
    // The direct read's data movement and its rounds' flags beyond two ranks, as the
    // model prices them, come off; what is left is the two-rank constant.
    let ranks = rounds.p.max(2);
    let copy = |n: f64| {
        params.moving(super::Algo::BcastDirectRead, ranks, n as usize) + params.sync(false, ranks)
            - params.sync_copy
    };
    match fit::constant(&rounds.copy, copy) {
        Some(c) if c > 0.0 => {
            p.sync_copy = c;
            notes.push(format!("sync_copy: {:.2} us, from the direct-read broadcast", c * 1e6));
        }
        fitted => notes.push(format!(
            "sync_copy: built in; the direct-read broadcast fitted {}",
            fitted.map_or("nothing".into(), |c| format!("{:.2} us", c * 1e6))
        )),
    }
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
    fn the_broadcasts_fit_the_rounds_and_the_staged_copy() {
        use crate::tune::Algo;
        let (mut params, mut notes) = (Params::DEFAULT, Vec::new());
        let flag = params.flag;
        let staged = |m: f64| -> Vec<(f64, f64)> {
            let t = |n: f64| 0.9e-6 + 2.0 * n * m + (n / 32768.0).ceil() * flag;
            [8.0, 512.0, 32768.0, 131072.0, 1048576.0].iter().map(|&n| (n, t(n))).collect()
        };
        let copy: Vec<(f64, f64)> =
            [8.0, 64.0, 4096.0].iter().map(|&n| (n, 2.2e-6 + params.transfer(n as usize, 1))).collect();
        fit_rounds(&mut params, &mut notes, &Rounds { p: 2, staged: staged(100e-12), copy: copy.clone() });
        assert!((params.memcpy_beta / 100e-12 - 1.0).abs() < 1e-6);
        assert!((params.sync_staged / 0.9e-6 - 1.0).abs() < 1e-6, "{}", params.sync_staged);
        assert!((params.sync_copy / 2.2e-6 - 1.0).abs() < 1e-6, "{}", params.sync_copy);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("memcpy_beta: fitted to the staged broadcast (100.0 ps/B"));
        // A staged cost below the local memcpy keeps the local one.
        fit_rounds(&mut params, &mut notes, &Rounds { p: 2, staged: staged(1e-12), copy });
        assert!((params.memcpy_beta / 100e-12 - 1.0).abs() < 1e-6, "kept");
        assert!(notes[2].contains("a local memcpy, not less (1.0 ps/B"), "{notes:?}");
        // Nothing measured (not two ranks on one node): every value kept, and said.
        let before = params;
        fit_rounds(&mut params, &mut notes, &Rounds::default());
        assert_eq!(params, before);
        assert!(notes.last().unwrap().contains("2 ranks or more"));
        // On four ranks the model's own per-rank terms come off first: timings made
        // by the model itself give back its constants.
        let truth = Params { sync_copy: 1.7e-6, sync_staged: 0.6e-6, memcpy_beta: 80e-12, ..Params::DEFAULT };
        let p4 = |algo, n: f64| (n, truth.predict(algo, 4, n as usize));
        let four = Rounds {
            p: 4,
            staged: [8.0, 512.0, 32768.0, 1048576.0].iter().map(|&n| p4(Algo::BcastStaged, n)).collect(),
            copy: [8.0, 4096.0].iter().map(|&n| p4(Algo::BcastDirectRead, n)).collect(),
        };
        let mut q = Params::DEFAULT;
        fit_rounds(&mut q, &mut notes, &four);
        for (got, want) in [(q.sync_copy, 1.7e-6), (q.sync_staged, 0.6e-6), (q.memcpy_beta, 80e-12)] {
            assert!((got / want - 1.0).abs() < 1e-6, "{got} vs {want}");
        }
    }

    #[test]
    fn a_process_has_a_socket_when_its_cpus_share_one() {
        let package = |cpu: usize| (cpu < 8).then_some(cpu / 4); // CPUs 0-3, 4-7; 8+ unknown
        let cpus = |list: &[usize]| {
            let mut m = vec![0u64; 2];
            list.iter().for_each(|&c| m[c / 64] |= 1 << (c % 64));
            m
        };
        assert_eq!(socket_of_with(&cpus(&[5]), package), Some(1));
        assert_eq!(socket_of_with(&cpus(&[0, 1, 2, 3]), package), Some(0));
        assert_eq!(socket_of_with(&cpus(&[3, 4]), package), None, "spans two");
        assert_eq!(socket_of_with(&cpus(&[2, 70]), package), None, "one unknown");
        assert_eq!(socket_of_with(&cpus(&[]), package), None);
        assert!(machine_sockets() >= 1);
    }

    #[test]
    fn samples_round_trip_through_numbers() {
        let s = Samples {
            transfers: vec![Transfer { bytes: 4096.0, pages: 1.0, seconds: 1e-6 }],
            writes: vec![Transfer { bytes: 8192.0, pages: 2.0, seconds: 3e-6 }],
            contended: vec![(1, 2e-5), (2, 5e-5)],
            memcpy_beta: 3e-11,
            flag: Some(2e-7),
            cross: vec![(1, 3e-5)],
            sockets: 2,
            machine_sockets: 4,
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
            reader1.writes.push(Transfer {
                bytes: n,
                pages: pages as f64,
                seconds: truth.alpha + 1.8 * truth.beta * n + truth.l * pages as f64,
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
        let write_beta = p.write_beta.expect("writes were measured");
        for (got, want) in [
            (p.alpha, truth.alpha),
            (p.beta, truth.beta),
            (p.l, truth.l),
            (p.a, truth.a),
            (p.b, truth.b),
            (write_beta, 1.8 * truth.beta),
        ] {
            assert!((got / want - 1.0).abs() < 0.02, "{got} vs {want}");
        }
        // A hand-off of milliseconds (a descheduled peer) is refused, and said.
        let mut slow = all.clone();
        slow[0].flag = Some(1.5e-3);
        let (q, notes) = fit_all(&slow, Params::DEFAULT);
        assert_eq!(q.flag, Params::DEFAULT.flag);
        assert!(notes.len() == 1 && notes[0].contains("1500.0 us"), "{notes:?}");
        assert_eq!(p.cross_socket, None, "one socket: no cross factor");
        // Ranks 2 and 4 on the other socket of two: the cross factor is fitted too.
        let truth_x = CrossSocket { sockets: 2, a: 0.9, b: 1.6 };
        let across =
            |c: usize| truth.alpha + truth.l * (truth_x.a * (c * c) as f64 + truth_x.b * c as f64) * 1024.0;
        let mut two = all.clone();
        two.iter_mut().for_each(|s| s.sockets = 2);
        two[1].cross = vec![(1, across(1)), (2, across(2))];
        two[3].cross = vec![(2, across(2))];
        let (px, notes) = fit_all(&two, Params::DEFAULT);
        assert!(notes.is_empty(), "{notes:?}");
        let x = px.cross_socket.expect("two levels across sockets");
        assert_eq!(x.sockets, 2);
        for (got, want) in [(x.a, truth_x.a), (x.b, truth_x.b)] {
            assert!((got / want - 1.0).abs() < 0.02, "{got} vs {want}");
        }
        // One level only: not fitted, and said.
        two[3].cross.clear();
        two[1].cross.truncate(1);
        let (px, notes) = fit_all(&two, Params::DEFAULT);
        assert!(
            px.cross_socket.is_none() && notes.len() == 1 && notes[0].contains("across sockets"),
            "{notes:?}"
        );
        // A machine of two sockets whose ranks all ran on one: said, with the remedy.
        let mut one = all.clone();
        one.iter_mut().for_each(|s| (s.sockets, s.machine_sockets) = (1, 2));
        let (_, notes) = fit_all(&one, Params::DEFAULT);
        assert!(notes.len() == 1 && notes[0].contains("--map-by socket"), "{notes:?}");
        // One rank alone: nothing but memcpy is measured, and the notes say so.
        let (_, notes) = fit_all(&[Samples { memcpy_beta: 1e-11, ..Samples::default() }], Params::DEFAULT);
        assert_eq!(notes.len(), 3, "{notes:?}");
    }
}
