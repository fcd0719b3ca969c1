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
pub(crate) enum Coll {
    Bcast,
    Scatter,
    Gather,
    Allgather,
    Alltoall,
    Allreduce,
}

/// The parameters in force, and where they come from.
pub(crate) fn active() -> &'static (Params, String) {
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
pub(crate) fn candidates(coll: Coll, p: usize) -> Vec<Algo> {
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
