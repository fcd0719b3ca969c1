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
//! A shared copy into a rank's buffer (the read-write broadcast: its owner reads the
//! buffer's chunks from the head, a peer writes them from the tail; the two-rank reduce
//! to a root on mapped buffers: the root folds from the head, its peer from the tail into
//! the root's output) is split at run time by claims on the owner's `claimed` word
//! ([`Round::claim`]), so that whichever copies faster copies more, and every chunk is
//! copied once.
//!
//! ```text
//!   owner:   fill c0 ─ ready=1 ─ fill c1 ─ ready=2 ─ fill c2 ─ ready=3 ─ wait completed >= owed + (n-1)
//!   reader:        └ wait ready>=1, read c0 ┘ wait ready>=2, read c1 ┘ ... read c2, completed += 1
//! ```

use super::wait;
use super::Round;
use crate::error::{Error, Result};
use std::ops::Range;
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
                Err(Error::PeerFailed { rank: ctl.rank_of(ctl.me), peer: ctl.blame(peer, self.epoch) })
            }
            _ => Ok(()),
        }
    }
}

/// Which end of a buffer a claim takes its chunk from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The first unclaimed chunk: the buffer's owner.
    Head,
    /// The last unclaimed chunk: a peer.
    Tail,
}

impl Round<'_> {
    /// Claims `want(left)` (at least one, at most `left`) of the next unclaimed units of
    /// local rank `owner`'s buffer of `units` units in this round, from `end`, where
    /// `left` units are unclaimed; `None` once every unit is claimed, or where `owner` did
    /// not open its claims for this round.
    ///
    /// The owner's `claimed` word holds the epoch's low 32 bits above two 16-bit counts,
    /// the units claimed from the head and from the tail. The owner opens it (this round's
    /// epoch, no unit claimed: [`claims_open`]) when it publishes a call whose buffer
    /// peers may write, before its arrival, which every claimant awaits; a word of another
    /// epoch is closed (a claimant still in a round its owner has left claims nothing).
    /// Each claim is one compare-and-swap of the whole word, so a unit goes to exactly one
    /// claimant. The claim orders nothing about the bytes: the copy of a claimed range is
    /// published as the claimant's other copies are (the round's end word).
    ///
    /// # Panics
    ///
    /// If `units` does not fit in 16 bits.
    pub(crate) fn claim(
        &self,
        owner: usize,
        units: usize,
        end: End,
        want: impl Fn(usize) -> usize,
    ) -> Option<Range<usize>> {
        assert!(units <= CLAIM_MAX, "{units} units do not fit a claim word");
        let word = &self.ctl.slot(owner).claimed;
        let open = claims_open(self.epoch);
        let mut seen = word.load(Ordering::Relaxed);
        loop {
            if seen >> 32 != open >> 32 {
                return None;
            }
            let (head, tail) = ((seen >> 16) as u16 as usize, seen as u16 as usize);
            let left = units.saturating_sub(head + tail);
            if left == 0 {
                return None;
            }
            let take = want(left).clamp(1, left);
            let (range, head, tail) = match end {
                End::Head => (head..head + take, head + take, tail),
                End::Tail => (units - tail - take..units - tail, head, tail + take),
            };
            let next = open | (head as u64) << 16 | tail as u64;
            match word.compare_exchange_weak(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(range),
                Err(now) => seen = now,
            }
        }
    }
}

/// A `claimed` word opened for round `epoch`: no unit claimed yet (see [`Round::claim`]).
pub(super) fn claims_open(epoch: u64) -> u64 {
    (epoch as u32 as u64) << 32
}

/// The most units a claim word counts (see [`Round::claim`]).
pub(crate) const CLAIM_MAX: usize = u16::MAX as usize;

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

    /// Every unit of a claimed buffer goes to exactly one claimant, round after round,
    /// with the owner claiming from the head and two peers from the tail in wants of
    /// every size; a word its owner did not open for the round (a call no peer may write)
    /// gives nothing, though it was open two rounds before.
    #[test]
    fn claims_hand_out_every_unit_once() {
        use super::End;
        use std::sync::atomic::{AtomicU8, Ordering};
        let n = 3;
        let rounds = 200;
        let units = |round: usize| round % 37;
        // Every seventh round the owner publishes a call no peer may write.
        let opened = |round: usize| round % 7 != 3;
        let seen: Vec<Vec<AtomicU8>> =
            (0..rounds).map(|round| (0..units(round)).map(|_| AtomicU8::new(0)).collect()).collect();
        on_node(n, |ctl| {
            for (round, seen) in seen.iter().enumerate() {
                // Rank 0 owns every other pair of rounds' buffer, rank 1 the rest: a word
                // is left from two rounds before, and claimed again once its owner opens it.
                let owner = (round / 2) % 2;
                let call = Call { recv_writable: ctl.me() == owner && opened(round), ..Call::default() };
                let round_ = ctl.begin(&call).unwrap();
                let (end, want) = match ctl.me() == owner {
                    true => (End::Head, round % 5),
                    false => (End::Tail, 1 + ctl.me()),
                };
                while let Some(r) = round_.claim(owner, units(round), end, |left| want.min(left / 2)) {
                    for u in r {
                        seen[u].fetch_add(1, Ordering::Relaxed);
                    }
                }
                round_.finish(Ok(())).unwrap();
            }
        });
        for (round, seen) in seen.iter().enumerate() {
            for (u, count) in seen.iter().enumerate() {
                assert_eq!(count.load(Ordering::Relaxed), opened(round) as u8, "round {round}, unit {u}");
            }
        }
    }
}
