//! [`Control`]: one rank's view of the node's segment, and the end of every round (settle
//! what a private round owes, agree on the end). A round starts in `round.rs`
//! (`Control::begin`), beside the [`Round`](super::Round) it returns.

use super::call::{
    blamed, end_word, ended, failed_status, unheard, Call, Kind, DONE, OP, PASSED, PRIVATE, STAMP, STATUS,
    SUCCEEDED,
};
use super::fence::Births;
use super::fifo;
use super::layout::{Line, Slot, MAGIC, PAGE, SCRATCH_HALF};
use super::wait::{self, Peer, WaitPolicy};
use crate::error::{named, Error, Result};
use crate::segment::Segment;
use crate::transport::prefetch::{prefetch, prefetch_write};
use crate::transport::{Links, Read, RemoteBuf, TransportKind};
use crate::tune::Flags;
use std::cell::{Cell, RefCell, RefMut};
use std::sync::atomic::{AtomicU64, Ordering};

/// The typed view of a node's control segment, from one rank's side.
#[derive(Debug)]
pub(crate) struct Control {
    pub(super) seg: Segment,
    pub(super) me: usize,
    /// Every other local rank, as the waits name them.
    pub(super) others: Vec<Peer>,
    /// The user communicator's rank of each local rank (for errors).
    pub(super) ranks: Vec<i32>,
    pub(super) pids: Vec<libc::pid_t>,
    /// When each peer's process started, noted at set-up, so that a fence ([`Control::fence`])
    /// stops that process and no other that got its pid.
    pub(super) births: Births,
    pub(super) stage_bytes: usize,
    pub(super) epoch: Cell<u64>,
    /// A private round this rank left without waiting for every rank's `done` (0: none).
    pub(super) owed: Cell<u64>,
    /// The round owed was a one-phase round: its payload sits in the half of the staging
    /// area of its epoch's parity only (see `begin_staged`).
    pub(super) owed_staged: Cell<bool>,
    /// The last round this rank left right after arriving ([`Control::leave_staged`]),
    /// whose verdict it has not learnt yet (0: none).
    pub(super) left: Cell<u64>,
    /// The last round in which this rank saw a rank (itself included) leave before the
    /// verdict, or failed alone while the others could leave it with a success
    /// ([`Round::finish_alone`](super::Round::finish_alone)): if this rank failed that
    /// round, it says so in its next call record.
    pub(super) saw_leaver: Cell<u64>,
    /// What [`Control::learn`] found: the round before the next one failed and a rank
    /// left it early, so the next call record carries `FLAG_PREV_FAILED`.
    pub(super) prev_failed: Cell<bool>,
    pub(super) policy: WaitPolicy,
    /// How a round's arrivals are awaited: every rank polls every other (`Flat`), or up a
    /// tree of fan-in `k` and down from its root (`Tree(k)`). See [`Control::begin`].
    pub(super) arrival: Flags,
    /// This rank's position in the node's Bcast FIFO.
    pub(super) bcast_cursor: fifo::Cursor,
    /// This rank's position in its own point-to-point FIFO.
    pub(super) p2p_cursor: fifo::Cursor,
    /// Cache-sized scratch for the chunked reductions, reused by every call.
    pub(super) scratch: RefCell<Vec<Line>>,
    /// How this rank reaches peers' memory besides CMA.
    pub(super) links: Links,
    /// Bytes moved by single copies, by transport: cma, heap, xpmem.
    pub(super) traffic: [Cell<u64>; 3],
    /// The registration the current collective uses, while an exposure runs one.
    pub(super) exposed: RefCell<Option<Exposed>>,
}

/// A registration, as the rounds of one exposure's collective see it: the id, and every
/// rank's buffer with where it is mapped here.
#[derive(Debug)]
pub(super) struct Exposed {
    pub(super) id: u64,
    pub(super) bufs: Vec<(usize, usize, usize, TransportKind)>,
}

/// A buffer every local rank registered once (an exposure), with the mappings of the
/// peers' buffers held for as long as it lives: the registration cache.
#[derive(Debug)]
pub(crate) struct Registration<'c> {
    pub(super) id: u64,
    pub(super) bufs: Vec<RemoteBuf<'c, Read>>,
}

impl Registration<'_> {
    /// The id every rank of the node gave it (the epoch of the round that made it).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Control {
    /// Wraps a mapped segment. The creator (`init = true`) writes the header; the others
    /// check it.
    ///
    /// # Errors
    ///
    /// `Error::Segment` if the segment is too small or was laid out by another version.
    pub(crate) fn new(
        seg: Segment,
        me: usize,
        ranks: Vec<i32>,
        pids: Vec<libc::pid_t>,
        stage_bytes: usize,
        policy: WaitPolicy,
        init: bool,
    ) -> Result<Control> {
        let n = ranks.len();
        assert!(me < n && pids.len() == n && stage_bytes % PAGE == 0 && stage_bytes >= 2 * PAGE);
        let bad = |rank| Error::Segment { rank, op: "layout check", errno: crate::error::Errno::EINVAL };
        if seg.len() < Control::segment_len(n, stage_bytes) {
            return Err(bad(ranks[me]));
        }
        let mut ctl = Control {
            seg,
            me,
            others: Vec::new(),
            ranks,
            births: Births::of(&pids),
            pids,
            stage_bytes,
            epoch: Cell::new(0),
            owed: Cell::new(0),
            owed_staged: Cell::new(false),
            left: Cell::new(0),
            saw_leaver: Cell::new(0),
            prev_failed: Cell::new(false),
            policy,
            arrival: Flags::Flat,
            bcast_cursor: fifo::Cursor::default(),
            p2p_cursor: fifo::Cursor::default(),
            scratch: RefCell::new(vec![Line([0; 64]); 2 * SCRATCH_HALF / 64]),
            links: Links::default(),
            traffic: Default::default(),
            exposed: RefCell::new(None),
        };
        let head = ctl.head();
        let expect = [MAGIC, n as u64, stage_bytes as u64, std::mem::size_of::<Slot>() as u64];
        let fields = [&head.magic, &head.ranks, &head.stage_bytes, &head.slot_bytes];
        if init {
            for (f, v) in fields.iter().zip(expect) {
                f.store(v, Ordering::Relaxed);
            }
        } else if fields.iter().zip(expect).any(|(f, v)| f.load(Ordering::Relaxed) != v) {
            return Err(bad(ctl.ranks[me]));
        }
        ctl.others = (0..n).filter(|&r| r != me).map(|r| ctl.peer(r)).collect();
        Ok(ctl)
    }

    /// The node's wait policy (`ZCOLL_TIMEOUT`, `ZCOLL_YIELD_US`, fitted to its CPUs).
    pub(crate) fn policy(&self) -> &WaitPolicy {
        &self.policy
    }

    /// This rank's index on the node.
    pub(crate) fn me(&self) -> usize {
        self.me
    }

    /// Sets how this rank reaches its peers' memory (decided by the node at creation).
    /// Whether the node's ranks reach each other's shared-heap buffers with loads and
    /// stores (mapped heaps, or XPMEM attachments): where scratch buffers that peers copy
    /// belong.
    pub(crate) fn loads_heaps(&self) -> bool {
        self.links.heap.is_some() || self.links.xpmem.is_some()
    }

    pub(crate) fn set_links(&mut self, links: Links) {
        self.links = links;
    }

    /// Bytes this rank moved by single copies so far: through CMA, the heap, XPMEM.
    pub(crate) fn traffic(&self) -> [u64; 3] {
        [self.traffic[0].get(), self.traffic[1].get(), self.traffic[2].get()]
    }

    /// Runs `f`, whose collectives take the peers' buffers from `reg` instead of the
    /// addresses in their calls (and publish `reg`'s id, which every rank checks).
    ///
    /// # Errors
    ///
    /// `f`'s.
    pub(crate) fn with_registration<R>(
        &self,
        reg: &Registration<'_>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let bufs = reg
            .bufs
            .iter()
            .map(|b| {
                let (addr, len, ptr, kind) = b.parts();
                (addr, len, ptr as usize, kind)
            })
            .collect();
        let previous = self.exposed.replace(Some(Exposed { id: reg.id, bufs }));
        let r = f();
        *self.exposed.borrow_mut() = previous;
        r
    }

    /// The number of ranks on the node.
    pub(crate) fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The user communicator's rank of local rank `r`.
    pub(crate) fn rank_of(&self, r: usize) -> i32 {
        self.ranks[r]
    }

    /// The staging bytes per rank.
    pub(crate) fn stage_bytes(&self) -> usize {
        self.stage_bytes
    }

    /// The segment's size in bytes.
    pub(crate) fn segment_bytes(&self) -> usize {
        self.seg.len()
    }

    /// The rank's scratch: `2 * SCRATCH_HALF` bytes, 64-byte aligned.
    ///
    /// # Panics
    ///
    /// If it is already borrowed (one collective at a time uses it).
    pub(crate) fn scratch(&self) -> RefMut<'_, [u8]> {
        RefMut::map(self.scratch.borrow_mut(), |v| bytemuck::cast_slice_mut(v.as_mut_slice()))
    }

    /// This rank's reading positions: in the Bcast FIFO, and in its point-to-point FIFO.
    pub(crate) fn cursors(&self) -> (&fifo::Cursor, &fifo::Cursor) {
        (&self.bcast_cursor, &self.p2p_cursor)
    }

    /// Every other local rank, for the waits any of them can end.
    pub(super) fn others(&self) -> &[Peer] {
        &self.others
    }

    pub(super) fn peer(&self, r: usize) -> Peer {
        let departed = &self.slot(r).departed;
        // SAFETY: the word lies in this control's segment, mapped as long as the control
        // lives; its peers are used in its own waits (`others`, and `peer` in its methods).
        unsafe { Peer::with_departed(self.ranks[self.me], self.ranks[r], self.pids[r], departed) }
    }

    /// Says that this rank has dropped its communicator and will post nothing again: a
    /// peer that waits for it from now on fails (`PeerFailed`) instead of waiting for as
    /// long as this process lives, which is for ever where it panicked and its MPI
    /// finalize waits for those very peers. Called last, after every round this rank
    /// owes its peers has ended (`report_left`).
    pub(crate) fn depart(&self) {
        self.slot(self.me).departed.store(1, Ordering::Release);
    }

    pub(super) fn wait_ge(&self, r: usize, flag: impl Fn(&Slot) -> &AtomicU64, target: u64) -> Result<()> {
        self.wait_flag(r, flag, |v| v >= target)
    }

    pub(super) fn wait_flag(
        &self,
        r: usize,
        flag: impl Fn(&Slot) -> &AtomicU64,
        ready: impl Fn(u64) -> bool,
    ) -> Result<()> {
        let slot = self.slot(r);
        let ready = || ready(flag(slot).load(Ordering::Acquire));
        self.wait_on(r, ready, &|| self.standing(r))
    }

    /// Waits, as the wait policy says, until `ready()` is true, where local rank `r` is
    /// the one that makes it true; `state` says what for, in the report of a long wait.
    /// Most waits of a small call end at the first poll (a flag already set, or one cache
    /// line away), so that poll comes first, inline, and the description of the peer is
    /// made only past it: at two ranks, that is a tenth of a small call's instructions.
    ///
    /// # Errors
    ///
    /// As [`wait::wait_until_any_saying`].
    #[inline(always)]
    pub(super) fn wait_on(
        &self,
        r: usize,
        mut ready: impl FnMut() -> bool,
        state: &dyn Fn() -> String,
    ) -> Result<()> {
        if ready() {
            return Ok(());
        }
        wait::wait_until_any_saying(&self.policy, &[self.peer(r)], ready, state)
    }

    /// Where the node stands against this rank's current round, for the report of a long
    /// wait on local rank `r`: the collective and its sequence number on the node, every
    /// rank that has not entered it yet, and where `r` is.
    pub(super) fn standing(&self, r: usize) -> String {
        let epoch = self.epoch.get();
        let own = self.slot(self.me).record(epoch)[OP].load(Ordering::Relaxed);
        let name = Kind::of(own).map_or("an unknown collective", Kind::name);
        let outside: Vec<i32> = (0..self.size())
            .filter(|&q| self.slot(q).arrive.load(Ordering::Relaxed) < epoch)
            .map(|q| self.ranks[q])
            .collect();
        let (slot, rank) = (self.slot(r), self.ranks[r]);
        let (arrived, done) = (slot.arrive.load(Ordering::Relaxed), slot.done.load(Ordering::Relaxed));
        let at_r = if arrived < epoch {
            format!(
                "rank {rank} has not entered it (it finished call {done}): it is computing, \
                 blocked outside zcoll, or in a collective on another communicator"
            )
        } else if done < epoch {
            format!("rank {rank} is inside it too, still moving its data")
        } else {
            format!("rank {rank} has finished it")
        };
        let outside = match outside.as_slice() {
            [] => String::from("every rank has entered it"),
            ranks => format!("ranks not yet in it: {ranks:?}"),
        };
        format!("in {name}, collective call {epoch} of the node; {outside}; {at_r}")
    }

    /// Sets how the rounds await arrivals (the node decides once, the same on every rank).
    pub(crate) fn set_arrival(&mut self, how: Flags) {
        self.arrival = how;
    }

    /// How the rounds await arrivals.
    pub(crate) fn arrival(&self) -> Flags {
        self.arrival
    }

    /// Waits for every rank's `done` of the private round this rank left without waiting
    /// (if any): after it, no peer reads this rank's staging area for an earlier round.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn settle(&self) -> Result<()> {
        let owed = self.owed.replace(0);
        if owed == 0 {
            return Ok(());
        }
        // Our own `done` of `owed` was posted when we ended that round.
        (0..self.size()).filter(|&r| r != self.me).try_for_each(|r| self.wait_ge(r, |s| &s.done, owed))
    }

    /// Learns, before this rank publishes its next call, whether the round before it
    /// failed in a way some rank has not seen yet (the deferred verdict), and notes it for
    /// [`publish`](Control::publish), which then sets `FLAG_PREV_FAILED`: every rank's
    /// next round fails with `Error::PreviousFailed`.
    ///
    /// - A rank that left the round (`left`) waits for every rank's end of it, then
    ///   judges it ([`judge_left`](Control::judge_left)).
    /// - A rank that took part in the whole round failed it in a way it passes on if its
    ///   own status says so ([`unheard`]: it saw a rank leave the round, or failed it
    ///   alone, `Round::finish_alone`, where the others may have left it with a success;
    ///   and not with a `PreviousFailed`, which every rank of the round reported).
    ///
    /// Those are the same finding: a rank that took part judged every record, so its
    /// status fails where the leaver's comparison does. A rank that leaves the next round
    /// learns the same after it published ([`leave_staged`](Control::leave_staged)).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while the leaver waits.
    pub(super) fn learn(&self) -> Result<()> {
        self.prev_failed.set(false);
        let prev = self.epoch.get();
        if prev == 0 {
            return Ok(());
        }
        let leaver = self.left.get() == prev;
        if leaver {
            self.prefetch_ends(prev);
        }
        // Our own lines of the next round, in the state a store needs, while the peers'
        // lines travel (or while this rank works towards its publication): the
        // transfers overlap instead of following each other.
        self.warm_next();
        let failed = if leaver {
            // The end of `prev` on every rank, then its status and call: one line each
            // (`call::DONE`), which `end_word` posts right before `done`.
            self.wait_ends(prev)?;
            // Every rank has left `prev` (and so every round before it).
            self.owed.set(0);
            self.left.set(0);
            self.judge_left(prev, true)
        } else {
            self.failed_unheard(prev)
        };
        self.prev_failed.set(failed);
        Ok(())
    }

    /// Waits until every other rank has ended round `epoch` ([`wait_ended`]; this rank
    /// ended it before its next call began).
    ///
    /// [`wait_ended`]: Control::wait_ended
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(super) fn wait_ends(&self, epoch: u64) -> Result<()> {
        (0..self.size()).filter(|&r| r != self.me).try_for_each(|r| self.wait_ended(r, epoch))
    }

    /// Asks for every other rank's end line of round `epoch` at once (a prefetch: the waits for
    /// them then take them one by one, without a transfer each).
    pub(super) fn prefetch_ends(&self, epoch: u64) {
        for r in (0..self.size()).filter(|&r| r != self.me) {
            prefetch(word_at(&self.slot(r).record(epoch)[DONE]));
        }
    }

    /// Whether this rank's own status of round `epoch` is a failure a peer may not know
    /// of ([`unheard`]).
    pub(super) fn failed_unheard(&self, epoch: u64) -> bool {
        unheard(self.slot(self.me).record(epoch)[STATUS].load(Ordering::Relaxed))
    }

    /// Judges round `prev` once every rank has ended it, as the ranks that took part in it
    /// judge it for their next call: it failed if any rank's status is a failure that rank
    /// passes on ([`unheard`]), or, where this rank left it too (`left`), if any rank's
    /// call differs from this rank's in what every verdict compares first (collective and
    /// algorithm, root, `aux`; not the private bit, which a leaver sets where the others
    /// need not: a gatherv's root publishes its buffer).
    ///
    /// The second test matters when every rank left: nobody else judged the round. Then
    /// the calls differ in those words: in one collective with one root (`root`, and
    /// `aux`, its local rank) exactly one rank is the root, and a root that gives (bcast,
    /// scatter, scatterv) leaves while the others stay, or the others give (reduce,
    /// gather, gatherv) and leave while the root stays. Lengths are not compared: a rooted
    /// call's root and leaves publish different ones (a scatter root its whole buffer, a
    /// leaf nothing), and a leaver the others judged is judged by its status. A rank that
    /// took part in the round ran that comparison in its verdict, and its status says so.
    /// Where a status says that every rank failed `prev` already (a `PreviousFailed`),
    /// nothing is left to judge: no rank made the call, whatever each called.
    ///
    /// The records of `prev` are intact until every rank has ended `prev + 1`
    /// ([`RECORDS`](super::call::RECORDS)), which this rank has not yet.
    pub(super) fn judge_left(&self, prev: u64, left: bool) -> bool {
        let record = |r: usize| self.slot(r).record(prev);
        let (mut passed, mut failed) = (false, false);
        for r in 0..self.size() {
            let status = record(r)[STATUS].load(Ordering::Relaxed);
            passed |= unheard(status);
            failed |= status != SUCCEEDED;
        }
        // Only agreed failures (or none passed on): every rank failed `prev` already,
        // whatever it called; a call nobody else judged is compared only where this rank
        // left it too.
        if passed || failed || !left {
            return passed;
        }
        // A leaver's record is private where the others' need not be (a gatherv's root
        // publishes its buffer): the bit is not part of the call.
        let key = |(op, root, aux): (u64, i64, u64)| (op & !PRIVATE, root, aux);
        let mine = key(Call::compared(record(self.me)));
        (0..self.size()).any(|r| key(Call::compared(record(r))) != mine)
    }

    /// Asks for the lines this rank writes when it publishes its next call (both lines of
    /// its record of that round, its `arrive`, the head of its staging half of that
    /// parity) in the state a store needs ([`prefetch_write`]): a hint, which orders and
    /// publishes nothing.
    pub(super) fn warm_next(&self) {
        let next = self.epoch.get() + 1;
        let mine = self.slot(self.me);
        let record = mine.record(next);
        let half = self.stage(self.me).wrapping_add((next % 2) as usize * self.one_phase_bytes());
        prefetch_write([
            word_at(&record[STAMP]),
            word_at(&record[DONE]),
            word_at(&mine.arrive),
            half,
            half.wrapping_add(64),
        ]);
    }

    /// Ends round `epoch` on this rank: its status, the end word on the status's line
    /// (`call::DONE`), then `done`, each after everything this rank did in the round.
    /// Every end of a round goes through here, so a peer may wait for either word.
    pub(super) fn post_done(&self, epoch: u64, status: u64) {
        // A failure of a round this rank saw a rank leave (or failed alone) is passed on.
        let status = match status != SUCCEEDED && self.saw_leaver.get() == epoch {
            true => status | PASSED,
            false => status,
        };
        let mine = self.slot(self.me);
        let record = mine.record(epoch);
        record[STATUS].store(status, Ordering::Relaxed);
        // Release: the status, and everything this rank did in the round, before it.
        record[DONE].store(end_word(epoch, status), Ordering::Release);
        mine.done.store(epoch, Ordering::Release);
    }

    /// The [`STATUS`] of a round this rank fails with `e` (`None`: with no error of its
    /// own to say why, as a panic).
    pub(super) fn failed(&self, e: Option<&Error>) -> u64 {
        failed_status(e, self.ranks[self.me])
    }

    /// The rank to name in this rank's `PeerFailed` for round `epoch`, which local rank
    /// `r` has ended failed: the rank `r` blames in its status (so a failure passed on
    /// names where it began), or `r` itself where it blames this rank or ended the round
    /// with a success.
    pub(super) fn blame(&self, r: usize, epoch: u64) -> i32 {
        self.blame_key(r, epoch).map_or(self.ranks[r], named)
    }

    /// The [`failure_key`](crate::error::failure_key) of what local rank `r` blames for
    /// round `epoch`, as [`blame`](Self::blame) names it (`None`: `r` succeeded).
    fn blame_key(&self, r: usize, epoch: u64) -> Option<i64> {
        let status = self.slot(r).record(epoch)[STATUS].load(Ordering::Relaxed);
        let key = blamed(status)?;
        Some(match named(key) == self.ranks[self.me] {
            // Heard from `r` (see `failure_key`).
            true => 1 << 32 | i64::from(self.ranks[r] as u32),
            false => key,
        })
    }

    /// Waits until local rank `r` has ended round `epoch` (the `call::DONE` word of its
    /// record of that round, Acquire): as a wait for its `done`, but on the line that also
    /// holds its status and the copies of its call's compared words.
    pub(super) fn wait_ended(&self, r: usize, epoch: u64) -> Result<()> {
        self.wait_flag(r, |s| &s.record(epoch)[DONE], |v| ended(v, epoch))
    }

    /// Publishes this rank's `status` for `epoch`, waits for every rank's, and reports
    /// the failure the failed peers' statuses blame (`PeerFailed`), if any.
    ///
    /// Every live peer is awaited, even after one was found dead: a live peer may still be
    /// copying into this rank's buffers, and returning would hand them back to the caller
    /// while it writes. Only a dead peer (which copies nothing any more) or a timed-out
    /// one (which `Round::fence` stops first, where it may write into this rank) is left
    /// behind.
    pub(super) fn end(&self, epoch: u64, status: u64) -> Result<()> {
        self.post_done(epoch, status);
        let mut first = Ok(());
        // Not our own end, just posted: the peers poll that line now, and reading it back
        // costs as much as reading theirs.
        for r in (0..self.size()).filter(|&r| r != self.me) {
            if let Err(e) = self.wait_ended(r, epoch) {
                first = first.and(Err(e));
            }
        }
        first?;
        // The rank the failed peers blame: one a peer saw fail before one a peer only
        // heard of, then the lowest (`failure_key`), so that every rank names the same.
        match (0..self.size()).filter(|&r| r != self.me).filter_map(|r| self.blame_key(r, epoch)).min() {
            Some(key) => Err(Error::PeerFailed { rank: self.ranks[self.me], peer: named(key) }),
            None => Ok(()),
        }
    }
}

impl Control {
    /// Judges the last call on the node before it is dropped, since no next call will,
    /// and says on standard error if it failed where this rank could not see it, so that a
    /// failure is never lost with the communicator:
    /// - a call this rank left before its verdict ([`Control::leave_staged`]): the rank
    ///   waits (with the wait policy) until every rank has finished it, and judges it;
    /// - a private call this rank ended with a success without waiting for the others
    ///   (`owed`): a peer may have failed it alone after this rank left
    ///   ([`Round::finish_alone`](super::Round::finish_alone)); the rank waits for every
    ///   rank's end of it and reads their statuses (a failure its rank passes on,
    ///   [`unheard`]: not a `PreviousFailed`, which every rank reported). A peer that died
    ///   meanwhile is not reported here (the call's results on this rank are right, and
    ///   the death is the MPI job's to report).
    pub(crate) fn report_left(&self) {
        let epoch = self.epoch.get();
        if epoch == 0 {
            return;
        }
        let report = if self.left.get() == epoch {
            match self.learn() {
                Ok(()) if !self.prev_failed.get() => return,
                Ok(()) => String::from("which this rank left before its checks, failed on another rank"),
                Err(e) => format!("which this rank left before its checks, has no verdict ({e})"),
            }
        } else if self.owed.get() == epoch
            && self.slot(self.me).record(epoch)[STATUS].load(Ordering::Relaxed) == SUCCEEDED
        {
            if self.wait_ends(epoch).is_err() {
                return;
            }
            // A failure its rank passes on, which a next call would have reported here: not
            // one every rank reported (`PreviousFailed`), nor this rank's own.
            let record = |r: usize| self.slot(r).record(epoch);
            match (0..self.size())
                .find(|&r| r != self.me && unheard(record(r)[STATUS].load(Ordering::Relaxed)))
            {
                Some(r) => format!("which this rank ended with a success, failed on rank {}", self.ranks[r]),
                None => return,
            }
        } else {
            return;
        };
        let rank = self.ranks[self.me];
        crate::error::say(format_args!(
            "rank {rank}: the last collective call on this communicator (call {epoch} of the node), \
             {report}; the communicator was dropped before a next call could report it"
        ));
    }
}

/// The address of `w`, for a prefetch.
fn word_at(w: &AtomicU64) -> *const u8 {
    w.as_ptr() as *const u8
}
