//! Rounds for arrival-aware collectives: enter without waiting for the others, then act
//! on each peer as it arrives.
//!
//! [`Control::begin`] waits until every local rank has arrived before it returns, which is
//! what the checks of an ordinary collective need, and exactly what an arrival-aware one
//! must not do: a rank that arrives early should serve the peers that are already there
//! instead of waiting for the last one. [`Control::begin_eager`] publishes the call and
//! the arrival the same way, and returns at once. The round then offers:
//!
//! - [`Round::arrived`]: a non-blocking check of a peer's `arrive >= epoch`. Only after
//!   it holds may the peer's call be read or its buffers used; the `remote_*` handles of
//!   an eager round are empty for a peer that has not arrived.
//! - [`Round::wait_for`]: one wait, with the node's policy (liveness of every peer and
//!   `ZCOLL_TIMEOUT`), for whatever condition the algorithm has (any of a set of peers
//!   arrived, a packet in a FIFO, a counter).
//! - [`Round::peer_failed`]: a peer that has already given up on this round (its `done`
//!   carries a failure), so that no one waits for blocks it will never send.
//! - [`Round::all_arrived`]: waits for every arrival, before the verdict over every call.
//! - A landing board: `board` words at the start of the rank's own staging area, cleared
//!   before the arrival is published, each set to the epoch when an event `i` has happened
//!   ([`Round::post_board`], [`Round::board`]): one done flag per source, in any order,
//!   which a single monotonic step counter cannot express.
//!
//! The double-buffered call records stay sound: a rank overwrites the record of round `e`
//! when it publishes round `e + 2`, which it does only after `finish` of round `e + 1`,
//! which waited for every rank's `done` of `e + 1`; nobody reads a record of round `e`
//! after its own `finish` of round `e`.

use super::wait;
use super::{fifo, reached, stamp, Call, Control, Round, STATUS};
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering};

impl Control {
    /// Starts a collective without waiting for the other ranks: publishes `call` (after
    /// clearing the first `board` words of this rank's staging area) and returns. It first
    /// settles a private round left without waiting ([`Control::settle`]): peers of an
    /// eager round may use this rank's staging area before everyone has arrived.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while settling or learning how the round before ended
    /// (`Control::learn`); nothing is published then.
    ///
    /// # Panics
    ///
    /// If the board does not fit in the staging area.
    pub(crate) fn begin_eager(&self, call: &Call, board: usize) -> Result<Round<'_>> {
        assert!(board * 8 <= self.stage_bytes, "a board of {board} words");
        self.learn()?;
        self.settle()?;
        let mut round = self.publish(call, board);
        round.eager = true;
        Ok(round)
    }

    /// Word `i` of local rank `r`'s board.
    pub(super) fn board_word(&self, r: usize, i: usize) -> &AtomicU64 {
        assert!((i + 1) * 8 <= self.stage_bytes);
        // SAFETY: the staging area is page aligned and `stage_bytes` long, so word `i` is
        // aligned and inside the mapping, which lives as long as `self`; any bit pattern
        // is a valid `AtomicU64`, and atomics may be shared across processes. Other rounds
        // copy plain bytes through the same area, but never concurrently with a board:
        // every round is separated from the next by `finish` (or, after a private round,
        // by `begin_eager`'s settle), which orders all accesses.
        unsafe { &*(self.stage(r).add(i * 8) as *const AtomicU64) }
    }

    /// Consumes every packet left in this rank's point-to-point FIFO by earlier rounds (a
    /// round that failed before its receiver took everything). Call it before arriving:
    /// writers push to a rank only after seeing its arrival, and every writer of an earlier
    /// round finished pushing before its `done`, which this rank's last `finish` awaited.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` if a leftover packet is not published (which only a writer
    /// that died mid-push can cause).
    pub(crate) fn drain_p2p(&self) -> Result<()> {
        let fifo = self.p2p_fifo(self.me);
        let (_, cursor) = self.cursors();
        let mut sink = vec![0u8; fifo.payload()];
        while fifo.behind(cursor) {
            fifo.pop(cursor, &mut sink)?;
        }
        Ok(())
    }
}

impl Round<'_> {
    /// Whether local rank `r` has arrived at this round (its call may be read).
    pub(crate) fn arrived(&self, r: usize) -> bool {
        self.ctl.slot(r).arrive.load(Ordering::Acquire) >= self.epoch
    }

    /// Rank `r`'s call if its buffers may be used now: always in an ordinary round, in an
    /// eager one once `r` has arrived. An empty call (every length 0) otherwise.
    pub(super) fn published(&self, r: usize) -> Call {
        if self.eager && !self.arrived(r) {
            return Call::default();
        }
        match self.record(r) {
            // A private call publishes no buffer (its addresses are 0): nothing to reach.
            c if c.op & super::PRIVATE != 0 => Call { send_len: 0, recv_len: 0, recv_writable: false, ..c },
            c => c,
        }
    }

    /// Waits until `ready()` holds, with the node's wait policy; every other local rank's
    /// liveness is checked in turn while sleeping.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn wait_for(&self, ready: impl FnMut() -> bool) -> Result<()> {
        let ctl = self.ctl;
        wait::wait_until_any(&ctl.policy, ctl.others(), ready)
    }

    /// Waits until every local rank has arrived, then applies the deferred verdict of
    /// the round before (`Round::previous`).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; `PreviousFailed` on every rank alike.
    pub(crate) fn all_arrived(&self) -> Result<()> {
        (0..self.size()).try_for_each(|r| self.ctl.wait_ge(r, |s| &s.arrive, self.epoch))?;
        // The deferred verdict of the round before (as `begin` applies it).
        self.previous()
    }

    /// The first local rank that has already finished this round with a failure.
    pub(crate) fn peer_failed(&self) -> Option<usize> {
        let ctl = self.ctl;
        (0..ctl.size()).filter(|&r| r != ctl.me).find(|&r| {
            let slot = ctl.slot(r);
            slot.done.load(Ordering::Acquire) >= self.epoch
                && slot.record(self.epoch)[STATUS].load(Ordering::Relaxed) != 0
        })
    }

    /// Whether local rank `r` has posted `progress >= step` in this round (non-blocking).
    pub(crate) fn progressed(&self, r: usize, step: u32) -> bool {
        reached(self.ctl.slot(r).progress.load(Ordering::Acquire), stamp(self.epoch, step))
    }

    /// Sets word `i` of this rank's board: event `i` has happened in this round.
    pub(crate) fn post_board(&self, i: usize) {
        self.ctl.board_word(self.ctl.me, i).store(self.epoch, Ordering::Release);
    }

    /// Whether local rank `owner` has set word `i` of its board in this round. False
    /// until `owner` has arrived (it clears the board first).
    pub(crate) fn board(&self, owner: usize, i: usize) -> bool {
        self.arrived(owner) && self.ctl.board_word(owner, i).load(Ordering::Acquire) == self.epoch
    }

    /// The node's point-to-point FIFO of local rank `r`, and this rank's reading cursor in
    /// its own.
    pub(crate) fn p2p(&self, r: usize) -> (fifo::Fifo<'_>, &fifo::Cursor) {
        (self.ctl.p2p_fifo(r), self.ctl.cursors().1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::*;
    use crate::error::Error;

    /// Ranks arrive one after the other, each late by a few milliseconds: an early rank
    /// sees the others arrive one by one, a board flag set after its arrival, and the
    /// completion count of this round only; every round still agrees at `finish`.
    #[test]
    fn eager_rounds_see_arrivals_as_they_happen() {
        let n = 4;
        on_node(n, |ctl| {
            for round in 0..30u64 {
                let me = ctl.me();
                // Rank (round % n) is late.
                if me == (round as usize) % n {
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                let call = Call { op: 9, aux: round, ..Call::default() };
                let r = ctl.begin_eager(&call, 4).unwrap();
                assert!(r.arrived(me));
                let mut seen = vec![false; n];
                seen[me] = true;
                while !seen.iter().all(|&x| x) {
                    r.wait_for(|| (0..n).any(|q| !seen[q] && r.arrived(q))).unwrap();
                    let now: Vec<usize> = (0..n).filter(|&q| !seen[q] && r.arrived(q)).collect();
                    for q in now {
                        assert_eq!(r.call(q).aux, round);
                        r.complete(q);
                        seen[q] = true;
                    }
                }
                r.post_board(me % 4);
                let next = (me + 1) % n;
                r.wait_for(|| r.board(next, next % 4)).unwrap();
                r.wait_completions(n as u64 - 1).unwrap();
                assert_eq!(r.completions(), n as u64 - 1);
                r.finish(Ok(())).unwrap();
            }
        });
    }

    /// A peer that fails before completing is seen as failed: the wait for completions
    /// ends with `PeerFailed` instead of hanging, and the next round counts from zero.
    #[test]
    fn a_failed_peer_ends_the_wait_for_its_completion() {
        let n = 3;
        on_node(n, |ctl| {
            for round in 0..20u32 {
                let r = ctl.begin_eager(&Call::default(), 0).unwrap();
                let me = ctl.me();
                let outcome = if round % 2 == 0 && me == 2 {
                    Err(Error::Unsupported { rank: 2, what: "test".into() })
                } else if me == 0 {
                    let waited = r.wait_completions(n as u64 - 1);
                    if round % 2 == 0 {
                        assert_eq!(waited, Err(Error::PeerFailed { rank: 0, peer: 2 }));
                    } else {
                        assert_eq!(waited, Ok(()));
                        assert_eq!(r.completions(), n as u64 - 1);
                    }
                    Ok(())
                } else {
                    // A completion is for the owner's current round: only after
                    // seeing it arrive.
                    r.wait_for(|| r.arrived(0)).unwrap();
                    r.complete(0);
                    Ok(())
                };
                let end = r.finish(outcome);
                assert_eq!(end.is_err(), round % 2 == 0);
            }
        });
    }

    /// The `remote_*` handles of an eager round are empty until the peer has arrived.
    #[test]
    fn handles_of_a_peer_not_yet_arrived_are_empty() {
        let gate = std::sync::Barrier::new(2);
        on_node(2, |ctl| {
            let buf = [7u8 + ctl.me() as u8; 32];
            let call = Call { send: buf.as_ptr() as usize, send_len: 32, ..Call::default() };
            let mut out = [0u8; 1];
            if ctl.me() == 1 {
                gate.wait();
            }
            let r = ctl.begin_eager(&call, 0).unwrap();
            if ctl.me() == 0 {
                assert!(!r.arrived(1));
                assert!(crate::transport::cma::read(&r.remote_send(1), 0, &mut out).is_err());
                gate.wait();
                r.wait_for(|| r.arrived(1)).unwrap();
                crate::transport::cma::read(&r.remote_send(1), 31, &mut out).unwrap();
                assert_eq!(out, [8]);
            }
            r.finish(Ok(())).unwrap();
        });
    }
}
