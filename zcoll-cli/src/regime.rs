//! The machine's regime during a run: how long a message takes between the cores of
//! ranks 0 and 1, measured before and after the run.
//!
//! On the development machine (two vCPUs of a shared AMD EPYC host) the two cores'
//! distance changes under a running job, within minutes: a cache line's round trip between
//! them took about 120 ns for a while and about 500 ns for another (a ping-pong of one
//! line between two processes, one per core). Every small collective of zcoll and of the
//! MPI libraries hands a few lines from core to core, so in the far regime all of them
//! are two to three times slower, and by different factors (the protocol that moves more
//! lines loses more). A run's small-message cells say little without it, so `zcoll bench`
//! logs the round trip of a one-byte message of the MPI library between ranks 0 and 1,
//! before and after the run, and the comparison report shows it beside the load average.

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::Instant;

/// Round trips in one timed batch, and batches measured (the median is reported).
const BATCH: usize = 100;
const BATCHES: usize = 21;

/// The round trip of a one-byte message between ranks 0 and 1 of `world`, in
/// microseconds (the median of 21 batches of 100), on rank 0; `None` on
/// the other ranks and on a one-rank `world`. Only ranks 0 and 1 take part; the others
/// return at once.
pub fn ping_pong(world: &SimpleCommunicator) -> Option<f64> {
    if world.size() < 2 || world.rank() > 1 {
        return None;
    }
    let peer = world.process_at_rank(1 - world.rank());
    let mut batches = Vec::with_capacity(BATCHES);
    // One batch untimed first: the library sets up its connection on the first message.
    for b in 0..=BATCHES {
        let t = Instant::now();
        for _ in 0..BATCH {
            if world.rank() == 0 {
                peer.send(&0u8);
                peer.receive::<u8>();
            } else {
                peer.receive::<u8>();
                peer.send(&0u8);
            }
        }
        if b > 0 {
            batches.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
        }
    }
    batches.sort_by(f64::total_cmp);
    (world.rank() == 0).then(|| batches[BATCHES / 2])
}

/// The line a bench log carries: the round trip before and after the run.
pub fn line(before: f64, after: f64) -> String {
    format!(
        "# ping-pong 0<->1: {before:.2} us before the run, {after:.2} us after (round trip of a \
         one-byte message, median of {BATCHES} batches of {BATCH})"
    )
}

/// The round trips before and after a run, as its log's [`line()`] gives them.
pub fn of_log(log: &str) -> Option<(f64, f64)> {
    let rest = log.lines().find_map(|l| l.strip_prefix("# ping-pong 0<->1: "))?;
    let mut w = rest.split_whitespace();
    let before = w.next()?.parse().ok()?;
    let after = w.nth(4)?.parse().ok()?;
    Some((before, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_line_reads_back() {
        let log = format!("# zcoll bench\n{}\nbcast ...", line(0.42, 1.375));
        assert_eq!(of_log(&log), Some((0.42, 1.38)));
        assert_eq!(of_log("# zcoll bench\n"), None);
    }
}
