//! Choosing an algorithm per call: the model's cheapest candidate for the collective,
//! the message size and the node size, with this machine's profile.
//!
//! The profile is read once per process (from [`Profile::path`]); without one, the
//! built-in parameters stand in and `info` says so. Decisions are cached per thread by
//! collective, power-of-two size class and node size, so a call pays a hash lookup.

use super::{Algo, Params, Profile};
use std::cell::RefCell;
use std::collections::HashMap;
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
}

impl Coll {
    /// Every collective the model chooses for.
    pub const ALL: [Coll; 6] =
        [Coll::Bcast, Coll::Scatter, Coll::Gather, Coll::Allgather, Coll::Alltoall, Coll::Allreduce];

    /// Its name, as the benchmarks spell it.
    pub fn name(self) -> &'static str {
        match self {
            Coll::Bcast => "bcast",
            Coll::Scatter => "scatter",
            Coll::Gather => "gather",
            Coll::Allgather => "allgather",
            Coll::Alltoall => "alltoall",
            Coll::Allreduce => "allreduce",
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
    Coll::ALL
        .iter()
        .flat_map(|&coll| {
            sizes.iter().map(move |&bytes| {
                let (algo, seconds) =
                    params.best(&candidates(coll, p), p, bytes).expect("every collective has candidates");
                Choice { coll, bytes, algo, seconds }
            })
        })
        .collect()
}

/// The parameters in force, and where they come from.
pub fn active() -> &'static (Params, String) {
    static ACTIVE: OnceLock<(Params, String)> = OnceLock::new();
    ACTIVE.get_or_init(|| {
        let path = Profile::path();
        match Profile::load(&path) {
            Ok(profile) => (profile.params, format!("profile {}", path.display())),
            Err(_) => (
                Params::DEFAULT,
                format!("built-in defaults (no profile at {}; run `zcoll tune`)", path.display()),
            ),
        }
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
    }
}

/// The model's choice for `coll`, `bytes` (per block, or the whole message for bcast and
/// allreduce) on `p` ranks, with `params`: evaluated at the top of the size's
/// power-of-two class, so that one decision serves the class.
pub(crate) fn choose_with(params: &Params, coll: Coll, bytes: usize, p: usize) -> Algo {
    let class = bytes.max(1).next_power_of_two();
    params.best(&candidates(coll, p), p, class).map(|(a, _)| a).expect("every collective has candidates")
}

/// [`choose_with`] the active parameters, cached.
pub(crate) fn choose(coll: Coll, bytes: usize, p: usize) -> Algo {
    thread_local! {
        static CACHE: RefCell<HashMap<(Coll, u32, usize), Algo>> = RefCell::new(HashMap::new());
    }
    let key = (coll, bytes.max(1).next_power_of_two().trailing_zeros(), p);
    CACHE.with(|c| *c.borrow_mut().entry(key).or_insert_with(|| choose_with(&active().0, coll, bytes, p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_messages_stage_and_large_ones_copy_once() {
        let p = Params::DEFAULT;
        assert_eq!(choose_with(&p, Coll::Bcast, 64, 2), Algo::BcastStaged);
        assert!(matches!(
            choose_with(&p, Coll::Bcast, 8 << 20, 2),
            Algo::BcastDirectRead | Algo::BcastDirectWrite
        ));
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

    #[test]
    fn the_cache_answers_what_the_model_answers() {
        for (coll, bytes, p) in [(Coll::Alltoall, 5000, 8), (Coll::Bcast, 1 << 22, 4), (Coll::Gather, 3, 2)] {
            assert_eq!(choose(coll, bytes, p), choose_with(&active().0, coll, bytes, p));
            assert_eq!(choose(coll, bytes, p), choose(coll, bytes, p));
        }
    }
}
