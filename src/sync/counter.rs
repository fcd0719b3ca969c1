//! Message counters (Blue Gene/P DCMF): a buffer that becomes ready piece by piece, read
//! by its peers as it grows.
//!
//! The owner of a buffer publishes its address in the round (`send`) and how much of it
//! is ready: `progress` = chunks ready, a sequence number like every step counter.
//! Readers keep their own count, copy each newly ready range straight out of the owner's
//! buffer (one copy), and when done add one to the owner's completion counter. The owner
//! may reuse its buffer once the completion counter has grown by its number of readers.
//!
//! The completion counter is never reset: it counts every completion the owner was ever
//! owed. The owner notes its value when it arrives at a round (`Round::base`): no peer
//! adds to it for this round before seeing that arrival, and every addition of earlier
//! rounds was made before its author posted `done`, which the owner's previous `finish`
//! awaited. So `counter - base` is exactly this round's completions, even after a round in
//! which a peer failed before completing (a running total of what was owed would then stay
//! ahead of the counter for ever). The arrival-aware alltoall uses the same counter as a
//! landing count: each writer adds one after writing its block into the owner's buffer.
//!
//! ```text
//!   owner:   fill c0 ─ ready=1 ─ fill c1 ─ ready=2 ─ fill c2 ─ ready=3 ─ wait completed >= owed + (n-1)
//!   reader:        └ wait ready>=1, read c0 ┘ wait ready>=2, read c1 ┘ ... read c2, completed += 1
//! ```

use super::wait;
use super::Round;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

impl Round<'_> {
    /// Publishes that the first `chunks` chunks of this rank's buffer are ready.
    pub(crate) fn post_ready(&self, chunks: u32) {
        self.post_progress(chunks);
    }

    /// Waits until local rank `owner` has published `chunks` ready chunks.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn wait_ready(&self, owner: usize, chunks: u32) -> Result<()> {
        self.wait_progress(owner, chunks)
    }

    /// Tells local rank `owner` that this rank has finished reading (or writing) its
    /// buffer. Only after seeing `owner` arrive at this round (its `progress`, or
    /// `arrived`): the owner counts from where its counter stood at its arrival.
    pub(crate) fn complete(&self, owner: usize) {
        self.ctl.slot(owner).completed.fetch_add(1, Ordering::Release);
    }

    /// The completions this rank's counter has received in this round.
    pub(crate) fn completions(&self) -> u64 {
        self.ctl.slot(self.ctl.me).completed.load(Ordering::Acquire).wrapping_sub(self.base)
    }

    /// Waits until `readers` peers have completed this round (in all), or until a peer has
    /// failed the round (it may never complete).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; `PeerFailed` for a peer that failed first.
    pub(crate) fn wait_completions(&self, readers: u64) -> Result<()> {
        let ctl = self.ctl;
        let mut failed = None;
        wait::wait_until_any(&ctl.policy, ctl.others(), || {
            failed = self.peer_failed();
            self.completions() >= readers || failed.is_some()
        })?;
        match failed {
            Some(peer) if self.completions() < readers => {
                Err(Error::PeerFailed { rank: ctl.rank_of(ctl.me), peer: ctl.rank_of(peer) })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::super::Call;

    /// Readers follow a counter that grows chunk by chunk, and the owner learns when all
    /// are done, round after round, with owners that change.
    #[test]
    fn readers_follow_the_counter_and_the_owner_learns_completion() {
        let n = 3;
        on_node(n, |ctl| {
            for round in 0..100u32 {
                let owner = (round % n as u32) as usize;
                let round_ = ctl.begin(&Call::default()).unwrap();
                let chunks = 1 + round % 7;
                if ctl.me() == owner {
                    for c in 1..=chunks {
                        round_.post_ready(c);
                    }
                    round_.wait_completions(n as u64 - 1).unwrap();
                } else {
                    for c in 1..=chunks {
                        round_.wait_ready(owner, c).unwrap();
                    }
                    round_.complete(owner);
                }
                round_.finish(Ok(())).unwrap();
            }
        });
    }
}
