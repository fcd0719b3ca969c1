//! Choosing an algorithm per call: the model's cheapest candidate for the collective,
//! the message size and the node size, with this machine's profile.
//!
//! The profile is read once per process (from [`Profile::path`]); without one, the
//! built-in parameters stand in and `info` says so. Decisions are cached per process by
//! collective, power-of-two size class and node size, so a call pays an array load.

use super::{Algo, Params, Profile};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The collectives the model chooses for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Coll {
    /// `broadcast_into` (size: the message).
    Bcast,
    /// `scatter_into_root` (size: one block).
    Scatter,
    /// `gather_into_root` (size: one block).
    Gather,
    /// `all_gather_into` (size: one block).
    Allgather,
    /// `all_to_all_into` (size: one block).
    Alltoall,
    /// `all_reduce_into` (size: the message).
    Allreduce,
    /// `reduce_into_root` (size: the message).
    Reduce,
}

impl Coll {
    /// Every collective the model chooses for.
    pub const ALL: [Coll; 7] = [
        Coll::Bcast,
        Coll::Scatter,
        Coll::Gather,
        Coll::Allgather,
        Coll::Alltoall,
        Coll::Allreduce,
        Coll::Reduce,
    ];

    /// Its name, as the benchmarks spell it.
    pub fn name(self) -> &'static str {
        match self {
            Coll::Bcast => "bcast",
            Coll::Scatter => "scatter",
            Coll::Gather => "gather",
            Coll::Allgather => "allgather",
            Coll::Alltoall => "alltoall",
            Coll::Allreduce => "allreduce",
            Coll::Reduce => "reduce",
        }
    }
}

/// One line of a plan: what the model picks for a collective and size, and its cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The collective.
    pub coll: Coll,
    /// Bytes (per block, or the message for bcast and allreduce).
    pub bytes: usize,
    /// The algorithm, with its parameter (`k`).
    pub algo: Algo,
    /// Predicted seconds.
    pub seconds: f64,
}

/// What the model would choose on a node of `p` ranks with `params`, for every
/// collective and each of `sizes`: the planning tool for nodes larger than this one.
///
/// # Examples
///
/// ```
/// use zcoll::tune::{select::{plan, Coll}, Params};
/// let lines = plan(&Params::DEFAULT, 64, &[8, 1 << 20]);
/// assert_eq!(lines.len(), 2 * Coll::ALL.len());
/// assert!(lines.iter().all(|c| c.seconds > 0.0));
/// ```
pub fn plan(params: &Params, p: usize, sizes: &[usize]) -> Vec<Choice> {
    plan_among(params, p, sizes, |_| true)
}

/// [`plan`] among the candidates `keep` accepts: `|a| !a.is_staged()` plans among the
/// single-copy algorithms only, the set the Cluster '17 paper compares. A collective left
/// with no candidate has no line.
///
/// # Examples
///
/// ```
/// use zcoll::tune::{select::plan_among, Params};
/// let lines = plan_among(&Params::DEFAULT, 8, &[8], |a| !a.is_staged());
/// assert!(lines.iter().all(|c| !c.algo.is_staged()));
/// ```
pub fn plan_among(params: &Params, p: usize, sizes: &[usize], keep: impl Fn(Algo) -> bool) -> Vec<Choice> {
    let mut lines = Vec::new();
    for coll in Coll::ALL {
        let mine: Vec<Algo> = candidates(coll, p).into_iter().filter(|&a| keep(a)).collect();
        for &bytes in sizes {
            if let Some((algo, seconds)) = params.best(&mine, p, bytes) {
                lines.push(Choice { coll, bytes, algo, seconds });
            }
        }
    }
    lines
}

/// The parameters in force, and where they come from.
pub fn active() -> &'static (Params, String) {
    &loaded().0
}

/// What a user should hear about the profile, once: a profile that exists but cannot be
/// read, or profiles of this CPU made under another kernel, which are not used.
pub(crate) fn warning() -> Option<&'static str> {
    loaded().1.as_deref()
}

fn loaded() -> &'static ((Params, String), Option<String>) {
    static LOADED: OnceLock<((Params, String), Option<String>)> = OnceLock::new();
    LOADED.get_or_init(|| {
        let path = Profile::path();
        match Profile::load(&path) {
            Ok(profile) => ((profile.params, format!("profile {}", path.display())), None),
            Err(e) => {
                let defaults = (
                    Params::DEFAULT,
                    format!("built-in defaults (no profile at {}; run `zcoll tune`)", path.display()),
                );
                let named = std::env::var_os("ZCOLL_PROFILE").is_some();
                (defaults, warning_for(&path, &e, named))
            }
        }
    })
}

/// What to say when the profile at `path` could not be loaded (`e`): that it exists but
/// is not used, that the file `ZCOLL_PROFILE` names (`named`) is not there, or that a
/// profile of this CPU made under another kernel is not used; nothing when there is
/// simply no profile at the default place.
fn warning_for(path: &std::path::Path, e: &crate::error::Error, named: bool) -> Option<String> {
    match path.exists() {
        true => Some(format!("the profile {} is not used: {e}", path.display())),
        false if named => Some(format!(
            "ZCOLL_PROFILE names {}, which does not exist: the built-in defaults are used",
            path.display()
        )),
        false => others_of_this_cpu(path).map(|other| {
            format!(
                "the profile {} is not used: it was made under another kernel than this one ({}); \
                 run `zcoll tune` to fit this one",
                other.display(),
                crate::tune::Machine::this().kernel
            )
        }),
    }
}

/// A profile beside `path` for the same CPU and core count (the key without the
/// kernel), if any.
fn others_of_this_cpu(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let name = path.file_name()?.to_str()?;
    let kernel = crate::tune::Machine::this().kernel;
    let prefix = name.strip_suffix(".toml")?.strip_suffix(&super::profile::clean(&kernel))?;
    std::fs::read_dir(path.parent()?)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p != path && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
}

/// A fingerprint of the parameters in force: a variable-count call with `Auto` decides
/// its algorithm from the published counts after its checks, so it publishes this in its
/// call record, and ranks that loaded different profiles (and could decide differently)
/// fail the check with an algorithm mismatch instead.
pub(crate) fn fingerprint() -> u32 {
    static PRINT: OnceLock<u32> = OnceLock::new();
    *PRINT.get_or_init(|| {
        // FNV-1a over every field (Debug prints each f64 exactly), folded to 32 bits.
        let h = format!("{:?}", active().0)
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3));
        (h ^ h >> 32) as u32
    })
}

/// The candidates for `coll` on a node of `p` ranks.
pub fn candidates(coll: Coll, p: usize) -> Vec<Algo> {
    let ks = || [2usize, 3, 4, 6, 8, 16, 32].into_iter().filter(move |&k| k < p.saturating_sub(1));
    match coll {
        Coll::Bcast => {
            let mut c = vec![
                Algo::BcastDirectRead,
                Algo::BcastDirectWrite,
                Algo::BcastScatterAllgather,
                Algo::BcastStaged,
                Algo::BcastReadWrite,
            ];
            c.extend(ks().map(Algo::BcastKnomial));
            c
        }
        Coll::Scatter => {
            let mut c = vec![Algo::ScatterParallelRead, Algo::ScatterSequentialWrite, Algo::ScatterStaged];
            c.extend(ks().map(Algo::ScatterThrottledRead));
            c
        }
        Coll::Gather => {
            let mut c = vec![Algo::GatherParallelWrite, Algo::GatherSequentialRead, Algo::GatherStaged];
            c.extend(ks().map(Algo::GatherThrottledWrite));
            c
        }
        Coll::Allgather => vec![Algo::AllgatherRing, Algo::AllgatherRecursiveDoubling, Algo::AllgatherStaged],
        Coll::Alltoall => vec![Algo::AlltoallPairwise, Algo::AlltoallStaged],
        Coll::Allreduce => vec![Algo::AllreducePartitioned, Algo::AllreduceStaged],
        Coll::Reduce => vec![Algo::ReducePartitioned, Algo::ReduceStaged, Algo::ReduceRootRead],
    }
}

/// The model's choice for `coll`, `bytes` (per block, or the whole message for bcast and
/// allreduce) on `p` ranks, with `params`: evaluated at the top of the size's
/// power-of-two class, so that one decision serves the class.
pub(crate) fn choose_with(params: &Params, coll: Coll, bytes: usize, p: usize) -> Algo {
    let class = bytes.max(1).next_power_of_two();
    params.best(&candidates(coll, p), p, class).map(|(a, _)| a).expect("every collective has candidates")
}

/// [`choose_with`] the active parameters, cached in a table indexed by the
/// collective and the size class (no hashing: a call pays one array load, where a
/// `HashMap` cost 60 ns in situ, a tenth of a small staged collective). A slot holds the
/// node size it was decided for beside the packed algorithm, in one word, and is decided
/// again for another node size. The hit path is a dozen instructions: a slot of
/// `(usize, Algo)` with the miss inlined cost 60, which made `Auto` 0.02 us slower than
/// the algorithm it chose at 8 bytes.
#[inline(always)] // the hit path: a few instructions, at every call with `Auto`
pub(crate) fn choose(coll: Coll, bytes: usize, p: usize) -> Algo {
    cached(false, coll, bytes, p)
}

/// [`choose`] with the parameters for copies that cross with CMA ([`Params::over_cma`]:
/// a write dearer than a read): what a gather or gatherv whose `Auto` chose a write runs
/// once the arrival shows that its blocks cross with CMA. Cached alike, in a table of its
/// own.
#[inline(always)]
pub(crate) fn choose_over_cma(coll: Coll, bytes: usize, p: usize) -> Algo {
    cached(true, coll, bytes, p)
}

/// The hit path of [`choose`] and (with `cma`) [`choose_over_cma`].
#[inline(always)]
fn cached(cma: bool, coll: Coll, bytes: usize, p: usize) -> Algo {
    let class = bytes.max(1).next_power_of_two().trailing_zeros() as usize;
    let cached = DECIDED[cma as usize][coll as usize][class].load(Ordering::Relaxed);
    if cached >> P_SHIFT == p as u64 {
        if let Some(algo) = Algo::unpack(cached & ((1 << P_SHIFT) - 1)) {
            return algo;
        }
    }
    decide(cma, coll, bytes, p, class)
}

/// One word per collective and size class.
type Table = [[AtomicU64; CLASSES]; Coll::ALL.len()];

/// The decisions, one word per collective and size class, shared by the process's
/// threads (the parameters are the process's): a hit is a plain load, and a word is
/// stored whole, so a thread reads an old decision or a new one, each valid. The first
/// table holds [`choose`]'s, the second [`choose_over_cma`]'s.
static DECIDED: [Table; 2] =
    [const { [const { [const { AtomicU64::new(0) }; CLASSES] }; Coll::ALL.len()] }; 2];

/// Where a slot of [`DECIDED`] keeps the node size: the top 16 bits, above the packed
/// algorithm (a tag below 2^16, `k` below 2^32).
const P_SHIFT: u32 = 48;

/// The miss path of [`cached`], apart so that the hit path stays a few instructions
/// with no frame to set up.
#[cold]
#[inline(never)]
fn decide(cma: bool, coll: Coll, bytes: usize, p: usize, class: usize) -> Algo {
    let params = match cma {
        true => active().0.over_cma(),
        false => active().0,
    };
    let algo = choose_with(&params, coll, bytes, p);
    if let (Some(word), true) = (algo.pack(), p < 1 << (64 - P_SHIFT)) {
        DECIDED[cma as usize][coll as usize][class].store((p as u64) << P_SHIFT | word, Ordering::Relaxed);
    }
    algo
}

/// Power-of-two size classes: one per bit of a `usize`.
const CLASSES: usize = usize::BITS as usize + 1;

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile that cannot be read, and one of this CPU made under another kernel, are
    /// named in the warning; no profile at all is no warning.
    #[test]
    fn unused_profiles_are_reported() {
        let dir = std::env::temp_dir().join(format!("zcoll-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let this = crate::tune::Machine::this();
        let path = dir.join(format!("{}.toml", this.key()));
        let missing = Profile::load(&path).unwrap_err();
        assert_eq!(warning_for(&path, &missing, false), None);
        let w = warning_for(&path, &missing, true).expect("a named profile that is missing is named");
        assert!(w.contains("ZCOLL_PROFILE") && w.contains("does not exist"), "{w}");
        let other = crate::tune::Machine { kernel: "0.0.1-elsewhere".into(), ..this.clone() };
        let other_path = dir.join(format!("{}.toml", other.key()));
        std::fs::write(&other_path, "").unwrap();
        let w = warning_for(&path, &missing, false).expect("the other kernel's profile is named");
        assert!(w.contains(&other.key()) && w.contains("another kernel"), "{w}");
        std::fs::write(&path, "not toml [").unwrap();
        let bad = Profile::load(&path).unwrap_err();
        let w = warning_for(&path, &bad, false).expect("an unreadable profile is named");
        assert!(w.contains("is not used"), "{w}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn small_messages_stage_and_large_ones_copy_once() {
        let p = Params::DEFAULT;
        assert_eq!(choose_with(&p, Coll::Bcast, 64, 2), Algo::BcastStaged);
        // At 2 ranks a large broadcast copies once per byte, the root's core sharing the
        // copy with the reader's; a mid-size one still stages (the extra synchronization
        // and the dearer writes of the shared copy do not pay there).
        assert_eq!(choose_with(&p, Coll::Bcast, 8 << 20, 2), Algo::BcastReadWrite);
        assert_eq!(choose_with(&p, Coll::Bcast, 256 << 10, 2), Algo::BcastReadWrite);
        assert_eq!(choose_with(&p, Coll::Bcast, 64 << 10, 2), Algo::BcastStaged);
        // On many ranks the root's share of p - 1 writes is no gain over a tree.
        assert_ne!(choose_with(&p, Coll::Bcast, 8 << 20, 16), Algo::BcastReadWrite);
        assert_eq!(choose_with(&p, Coll::Allreduce, 64, 4), Algo::AllreduceStaged);
        assert_eq!(choose_with(&p, Coll::Allreduce, 16 << 20, 4), Algo::AllreducePartitioned);
    }

    #[test]
    fn moderate_contention_throttles_large_scatters_on_many_ranks() {
        // gamma(8) ~ 11, gamma(63) ~ 258: 63 parallel readers pin far slower than 8
        // waves of 8, and parallel copies beat the root's serial staging copies.
        let p = Params { a: 0.05, b: 0.95, ..Params::DEFAULT };
        assert!(matches!(choose_with(&p, Coll::Scatter, 1 << 20, 64), Algo::ScatterThrottledRead(_)));
        // Under very strong contention even the root's serial copies into the staging
        // area win.
        let strong = Params { a: 1.0, b: 0.0, ..Params::DEFAULT };
        assert_eq!(choose_with(&strong, Coll::Scatter, 1 << 20, 64), Algo::ScatterStaged);
    }

    /// The paper's three machines (`profiles/`: Table IV and the assumptions their
    /// comments name), with the node size of full subscription, one rank per core.
    fn papers() -> [(&'static str, Params, usize); 3] {
        let load = |text: &str| Profile::from_toml(text).expect("a profile in profiles/ parses").params;
        [
            ("knl", load(include_str!("../../profiles/knl-68c.toml")), 68),
            ("broadwell", load(include_str!("../../profiles/broadwell-28c.toml")), 28),
            ("power8", load(include_str!("../../profiles/power8-20c.toml")), 20),
        ]
    }

    /// The single-copy choice (the paper's algorithm set) for `coll` at each size.
    fn single_copy(coll: Coll, params: &Params, p: usize, sizes: &[usize]) -> Vec<Algo> {
        plan_among(params, p, sizes, |a| !a.is_staged())
            .into_iter()
            .filter(|c| c.coll == coll)
            .map(|c| c.algo)
            .collect()
    }

    fn k_of(a: Algo) -> Option<usize> {
        match a {
            Algo::ScatterThrottledRead(k) | Algo::GatherThrottledWrite(k) => Some(k),
            _ => None,
        }
    }

    const MEDIUM_LARGE: [usize; 4] = [65536, 1 << 20, 4 << 20, 16 << 20];

    #[test]
    fn the_root_reads_a_reduce_at_two_ranks_only() {
        // Two ranks, the built-in parameters, the partitioned reduce's write priced as a
        // CMA write (as a reduce to a root is chosen) or not: the staged root's two passes
        // at memcpy speed (the peer's chunk copied into the output, its own folded in)
        // beat the root's one read of n bytes and one fold, and the partitioned reduce's
        // read and write of n / 2 each, at every size. (Where every buffer is mapped, the
        // call then turns into the root's reads with loads, `loads_everywhere`.)
        for d in [Params::DEFAULT, Params::DEFAULT.over_cma()] {
            for n in [8, 512, 4096, 16 << 10, 32 << 10, 64 << 10, 512 << 10, 2 << 20, 8 << 20] {
                assert_eq!(choose_with(&d, Coll::Reduce, n, 2), Algo::ReduceStaged, "{n}");
            }
        }
        // Where CMA is cheap against memcpy, the root's reads win at two ranks from some
        // size on: a read and a fold against two copies.
        let cheap = Params { alpha: 0.1e-6, beta: 1.0 / 60e9, l: 5e-9, ..Params::DEFAULT };
        assert_eq!(choose_with(&cheap, Coll::Reduce, 8 << 20, 2), Algo::ReduceRootRead);
        // From 3 ranks on the root's (p - 1) n serial reads lose to p - 1 concurrent
        // reads of n / p per rank, on every machine, with the paper's Table IV
        // parameters too (and the node size of full subscription).
        let mut machines: Vec<(&str, Params, usize)> = vec![("default", Params::DEFAULT, 64)];
        machines.extend(papers());
        for (name, params, full) in machines {
            for params in [params, params.over_cma()] {
                for p in [3, 4, 5, 8, 16, full] {
                    for n in (0..=24).map(|s| 1usize << s) {
                        let a = choose_with(&params, Coll::Reduce, n, p);
                        assert_ne!(a, Algo::ReduceRootRead, "{name}, {p} ranks, {n} B");
                        if n >= 64 << 10 {
                            assert_eq!(a, Algo::ReducePartitioned, "{name}, {p} ranks, {n} B");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_papers_machines_throttle_as_the_paper_found() {
        // The paper (Sec. IV-A, IV-B): throttle factors of 4 to 8 for medium and large
        // messages on Knights Landing and Broadwell, a larger factor on Power8.
        let [knl, broadwell, power8] = papers();
        for coll in [Coll::Scatter, Coll::Gather] {
            let k = single_copy(coll, &knl.1, knl.2, &MEDIUM_LARGE);
            assert!(k.iter().all(|&a| matches!(k_of(a), Some(4..=8))), "knl {coll:?}: {k:?}");
            // Broadwell: 3 or 4. zcoll's chain leaves the root out, so 27 readers make 9
            // waves of 3 against 7 of 4 (the paper counts ceil(28 / k): 10 against 7);
            // the two are within 2% of each other.
            let (p, params) = (broadwell.2, &broadwell.1);
            for (&n, a) in MEDIUM_LARGE.iter().zip(single_copy(coll, params, p, &MEDIUM_LARGE)) {
                assert!(matches!(k_of(a), Some(3..=8)), "broadwell {coll:?} {n}: {a:?}");
                let four = match coll {
                    Coll::Scatter => Algo::ScatterThrottledRead(4),
                    _ => Algo::GatherThrottledWrite(4),
                };
                assert!(params.predict(four, p, n) < 1.02 * params.predict(a, p, n), "{n}");
            }
            // Power8: the largest concurrency, all 19 readers at once.
            let all = single_copy(coll, &power8.1, power8.2, &MEDIUM_LARGE);
            assert!(
                all.iter().all(|&a| matches!(a, Algo::ScatterParallelRead | Algo::GatherParallelWrite)),
                "power8 {coll:?}: {all:?}"
            );
        }
    }

    #[test]
    fn small_blocks_throttle_in_zcoll_and_in_the_papers_own_formulas() {
        // The paper measured the parallel read fastest for small scatters; neither its
        // formulas with its Table IV nor zcoll's model say so on Knights Landing and
        // Broadwell: gamma(67) = 0.11 x 67^2 + 1.6 x 67 = 601 makes one page read by 67
        // at once cost 1.43 + 0.25 x 601 = 152 us, against 9 waves of 8 readers at
        // 1.43 + 1.2 + 0.25 x 19.84 = 7.6 us each.
        let ks = [2, 3, 4, 5, 6, 8, 10, 12, 16, 32];
        for (name, params, p) in papers().into_iter().take(2) {
            for n in [8, 512] {
                let zcoll = single_copy(Coll::Scatter, &params, p, &[n])[0];
                assert!(matches!(k_of(zcoll), Some(4..=16)), "{name} {n}: {zcoll:?}");
                let (k, _) = crate::tune::paper::scatter_choice(&params, p, n, &ks);
                assert!(k > 1, "{name} {n}: the paper's formulas choose k = {k}");
            }
        }
        // With the staging area among the candidates, it wins the small blocks.
        for (name, params, p) in papers() {
            assert_eq!(choose_with(&params, Coll::Scatter, 8, p), Algo::ScatterStaged, "{name}");
            assert_eq!(choose_with(&params, Coll::Gather, 8, p), Algo::GatherStaged, "{name}");
        }
    }

    #[test]
    fn the_broadcast_validation_agrees_with_the_papers_formulas() {
        // Fig. 12 of the paper: direct read and direct write on Knights Landing (68) and
        // Broadwell (28). zcoll's model (rounds included; its own counting of p - 1
        // transfers and p - 1 readers) stays within 15% of the paper's formulas from
        // 64 KiB, where the rounds no longer dominate.
        let [knl, broadwell, _] = papers();
        for (name, params, p) in [knl, broadwell] {
            for n in [65536, 1 << 20, 16 << 20] {
                let pairs = [
                    (Algo::BcastDirectRead, crate::tune::paper::parallel(&params, p, n)),
                    (Algo::BcastDirectWrite, crate::tune::paper::sequential(&params, p, n)),
                ];
                for (algo, paper) in pairs {
                    let ratio = params.predict(algo, p, n) / paper;
                    assert!((0.85..1.15).contains(&ratio), "{name} {algo:?} {n}: {ratio}");
                }
            }
        }
    }

    #[test]
    fn the_cache_answers_what_the_model_answers() {
        // Node sizes alternate on the same slots: each is decided again, never confused.
        for p in [8, 2, 64, 8, 70_000, 64] {
            for coll in Coll::ALL {
                for bytes in [0, 3, 5000, 1 << 22] {
                    let model = choose_with(&active().0, coll, bytes, p);
                    assert_eq!(choose(coll, bytes, p), model, "{coll:?} {bytes} {p}");
                    assert_eq!(choose(coll, bytes, p), model, "{coll:?} {bytes} {p}, cached");
                }
            }
        }
    }

    #[test]
    fn every_candidate_packs_into_a_word_and_back() {
        for p in [2, 9, 64, 200] {
            for coll in Coll::ALL {
                for algo in candidates(coll, p) {
                    let word = algo.pack().unwrap();
                    assert!(word != 0 && word >> P_SHIFT == 0, "{algo:?}: {word:#x}");
                    assert_eq!(Algo::unpack(word), Some(algo));
                }
            }
        }
        assert_eq!(Algo::unpack(0), None);
        assert_eq!(Algo::BcastKnomial(1 << 40).pack(), None);
    }
}
