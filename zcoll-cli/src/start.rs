//! How the ranks start a timed call together, and how long it took.
//!
//! A call timed on each rank from its own exit of an `MPI_Barrier` counts, besides the
//! call, the barrier's *exit skew*: the ranks do not leave a barrier at once. Measured at
//! 2 ranks bound to the 2 cores of the development machine (20000 barriers, the
//! difference of the two ranks' exits on one clock): MPICH 4.0.2 (ch4) lets rank 0 leave
//! about 0.31 us before rank 1 (median; rank 0 left first every time), Open MPI 4.1.4
//! leaves them about 0.05 us apart, either first. Rank 0 then spends that 0.31 us of
//! every synchronising call waiting for rank 1 (and a call rooted at rank 0 finds its
//! reader late, its data already there): in the MPICH build's runs zcoll's 2-rank
//! barrier and 8-byte allreduce timed 0.73-0.79 us against 0.29-0.48 in Open MPI's (the
//! same code), and MPICH's own calls carry the same 0.3 us.
//!
//! Where every rank reads one clock (all the ranks on one host: the monotonic clock is
//! the host's), the ranks start at one instant instead ([`Start::Clock`]): once every
//! rank is in (a barrier: a rank may still be checking the last call's result), rank 0
//! names an instant a little ahead on that clock ([`lead`]) and sends it to every rank,
//! every rank enters a second barrier, spins until the instant after it, and times its
//! call from there. A barrier stays the last MPI call before the timed one, so the
//! message leaves no state of its own in the library for the timed call to meet. (Named
//! before the first barrier, the instant had passed for a rank still checking a 128 KiB
//! allgatherv's result in half the calls, and those calls timed its lateness: 55 us
//! instead of 26.) Across hosts the clocks differ, and each rank times from its own exit
//! of the barrier ([`Start::Barrier`]).

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use nix::time::{clock_gettime, ClockId};
use std::sync::atomic::{AtomicU64, Ordering};

/// How far ahead rank 0 sets the common start on `p` ranks, in nanoseconds, once every
/// rank is in: room for the messages that name it and the barrier after them (a
/// fraction of a microsecond each on an idle node), so that every rank is there before
/// it passes. A rank that arrives later
/// still times from the instant (its call then looks as slow as if it had been preempted
/// there) and is counted in [`late_starts`].
pub fn lead(p: usize) -> u64 {
    10_000 + 1_000 * p as u64
}

/// How the ranks start each timed call.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// At one instant of the host's monotonic clock, named by rank 0 a little ahead and
    /// awaited after a barrier (the ranks must share one host).
    Clock,
    /// Each rank at its own exit of an `MPI_Barrier` (which counts the barrier's exit skew).
    Barrier,
}

/// Starts taken, and those at which this rank arrived after the common instant.
static STARTS: AtomicU64 = AtomicU64::new(0);
static LATE: AtomicU64 = AtomicU64::new(0);

impl Start {
    /// The start `asked` for (`None`: [`Start::Clock`] where every rank of `world` shares
    /// one host, else [`Start::Barrier`]). A collective call: every rank of `world` makes
    /// it.
    ///
    /// # Errors
    ///
    /// [`Start::Clock`] asked for ranks on several hosts (on every rank).
    pub fn decide(world: &SimpleCommunicator, asked: Option<Start>) -> Result<Start, String> {
        let one_host = world.split_shared(world.rank()).size() == world.size();
        let mut all = [one_host as u8];
        world.all_reduce_into(&[one_host as u8], &mut all[..], mpi::collective::SystemOperation::min());
        match (asked, all[0] == 1) {
            (Some(Start::Clock), false) => {
                Err("--start clock: the ranks are on several hosts, whose clocks differ".into())
            }
            (Some(s), _) => Ok(s),
            (None, true) => Ok(Start::Clock),
            (None, false) => Ok(Start::Barrier),
        }
    }

    /// Starts a timed call on every rank of `world` (a collective call), this rank
    /// `delay` seconds after the others (an imbalance; 0 for none): returns when this
    /// rank is to call, with the instant its time runs from.
    pub fn begin(self, world: &SimpleCommunicator, delay: f64) -> Stamp {
        let delay = (delay.max(0.0) * 1e9) as u64;
        match self {
            Start::Clock => {
                // Every rank in first (else the instant may pass before a busy rank comes),
                // then the instant, then a barrier again: the last MPI call before the
                // timed one is a barrier, as with `Barrier`, whatever state the instant's
                // message leaves in the library.
                world.barrier();
                let at = match world.rank() {
                    0 => {
                        let at = now() + lead(world.size() as usize);
                        (1..world.size()).for_each(|r| world.process_at_rank(r).send(&at));
                        at
                    }
                    _ => world.process_at_rank(0).receive::<u64>().0,
                };
                world.barrier();
                let at = at + delay;
                STARTS.fetch_add(1, Ordering::Relaxed);
                if now() > at {
                    LATE.fetch_add(1, Ordering::Relaxed);
                }
                while now() < at {
                    std::hint::spin_loop();
                }
                Stamp(at)
            }
            Start::Barrier => {
                world.barrier();
                let at = now() + delay;
                while now() < at {
                    std::hint::spin_loop();
                }
                Stamp(at)
            }
        }
    }

    /// What the start is, for a benchmark's header.
    pub fn describe(self, p: usize) -> String {
        match self {
            Start::Clock => format!(
                "every call starts at one instant of the host's clock, which rank 0 names {} us \
                 ahead once every rank is in and the ranks await after a second barrier",
                lead(p) / 1000
            ),
            Start::Barrier => "every call starts at each rank's exit of a barrier".into(),
        }
    }
}

/// The instant a timed call started from (nanoseconds of the monotonic clock).
#[derive(Clone, Copy, Debug)]
pub struct Stamp(u64);

impl Stamp {
    /// Seconds since the start.
    pub fn elapsed(self) -> f64 {
        now().saturating_sub(self.0) as f64 * 1e-9
    }

    /// The start, in nanoseconds of the host's monotonic clock.
    pub fn nanos(self) -> u64 {
        self.0
    }
}

/// This process's [`Start::Clock`] starts so far, and how many of them it reached after
/// the instant had passed.
pub fn late_starts() -> (u64, u64) {
    (STARTS.load(Ordering::Relaxed), LATE.load(Ordering::Relaxed))
}

/// Nanoseconds of the monotonic clock, which every process of a host reads alike.
fn now() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("the monotonic clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_monotonic_and_counts_nanoseconds() {
        let a = now();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(2) {}
        let b = now();
        assert!(b - a >= 2_000_000, "{a} then {b}");
        assert!(b - a < 2_000_000_000, "{a} then {b}");
        assert!(Stamp(a).elapsed() >= 0.002);
    }
}
