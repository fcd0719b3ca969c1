//! [`Round`]: one collective call in progress, from its start ([`Control::begin`]: publish
//! the call, await the arrivals) to `finish`: the peers' published buffers, the one road
//! by which a collective copies them (`read`, `write`, `read_v` and their shorthands), and
//! the step counters.

use super::call::{
    EXPOSURE_SHIFT, FLAGS, FLAG_LEFT, FLAG_PREV_FAILED, FLAG_RECV_HEAP, FLAG_SEND_HEAP, PRIVATE, STAMP,
    STATUS, SUCCEEDED,
};
use super::control::Registration;
use super::counter::claims_open;
use super::fence::Fence;
use super::layout::Slot;
use super::{Call, Control};
use crate::error::{Error, Result};
use crate::transport::prefetch::prefetch;
use crate::transport::{self, heap, Read, RemoteBuf, TransportKind, Write};
use crate::tune::Flags;
use std::cell::RefMut;
use std::sync::atomic::{AtomicU64, Ordering};

/// A `progress`/`ack` value: the epoch's low 32 bits above the step.
pub(super) fn stamp(epoch: u64, step: u32) -> u64 {
    (epoch as u32 as u64) << 32 | step as u64
}

/// Whether stamp `seen` is at or past stamp `want`: epochs compare as 32-bit serial
/// numbers, steps plainly.
pub(super) fn reached(seen: u64, want: u64) -> bool {
    let ahead = ((seen >> 32) as u32).wrapping_sub((want >> 32) as u32) as i32;
    ahead > 0 || (ahead == 0 && seen as u32 >= want as u32)
}

/// The most lines of a peer's staged payload that a one-phase round's arrival asks for
/// ([`Control::arrive_staged`]): 512 bytes, the top of the sizes where one trip between
/// the cores is most of a call. Measured at 2 ranks against asking for two lines only
/// (twelve alternated runs, each call's time against Open MPI's in the same run, since
/// the cores' distance changed between runs): scatterv, gatherv, allgatherv and alltoallv
/// of 256 and 512 bytes 3-12% faster, a broadcast of 512 bytes 19%, the rest level
/// within the runs' spread.
const STAGED_LINES: usize = 8;

/// The start of a round: what [`Control`] does to open one.
impl Control {
    /// Starts a collective: publishes `call` and waits until every local rank has arrived.
    ///
    /// Flat, each rank polls every other rank's stamp: `p - 1` cache lines per rank. With
    /// a tree of fan-in `k` (local rank `r`'s children are `k r + 1 ..= k r + k`), each
    /// rank waits for its children's `gathered`, then publishes its own (its subtree has
    /// arrived), and every rank but the root waits for the root's, which says that the
    /// whole node has: `k` lines per level up and one down. Either way a rank that
    /// returns `Ok` has seen, through a chain of Release stores and Acquire loads, every
    /// rank's call record of this round and everything each rank did before arriving.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting for an arrival; with a tree, `PeerFailed`
    /// naming the awaited rank when it gave up (a rank below it died or timed out).
    pub(crate) fn begin(&self, call: &Call) -> Result<Round<'_>> {
        self.learn_or_abandon(call)?;
        self.arrive(call)
    }

    /// [`learn`](Control::learn), or, if its wait fails, take part in the round as a
    /// failed rank ([`abandon`](Control::abandon)), so that no live peer waits for this
    /// rank's arrival and the epochs stay in step.
    ///
    /// # Errors
    ///
    /// `learn`'s.
    pub(super) fn learn_or_abandon(&self, call: &Call) -> Result<()> {
        self.learn().inspect_err(|e| {
            self.abandon(&Call { send_len: 0, recv_len: 0, recv_writable: false, ..*call }, Some(e));
        })
    }

    /// The second half of [`begin`](Control::begin), once this rank knows how the round
    /// before ended: publish, await the arrivals, fail the round on every rank if the
    /// round before failed after a rank had left it (`FLAG_PREV_FAILED`).
    pub(super) fn arrive(&self, call: &Call) -> Result<Round<'_>> {
        self.arrive_staged(call, false)
    }

    /// [`arrive`](Control::arrive); with `staged`, a one-phase round's
    /// ([`begin_staged`](Control::begin_staged)): while a flat wait polls a rank's stamp,
    /// it also asks for the first two lines of what that rank staged, so that the payload
    /// crosses between the caches with the stamp instead of one trip after it; once it
    /// sees the stamp, it asks for the lines after them that this rank may read (its
    /// receive length and a line of metadata, up to [`STAGED_LINES`]), all at once, so that
    /// they cross in one trip rather than one after the copy found the first two. (Asked
    /// while polling, those would be taken from the writer's cache as it fills them.)
    pub(super) fn arrive_staged(&self, call: &Call, staged: bool) -> Result<Round<'_>> {
        let mut round = self.publish(call, 0);
        let epoch = round.epoch;
        let lines = (call.recv_len.div_ceil(64) + 1).min(STAGED_LINES);
        let arrived = match self.arrival {
            Flags::Tree(k) if self.size() > 2 => self.gather_arrivals(epoch, k.max(2)),
            _ => {
                let at = (epoch % 2) as usize * self.one_phase_bytes();
                // Our own stamp is in: only the peers' are awaited.
                (0..self.size()).filter(|&r| r != self.me).try_for_each(|r| {
                    let stamp = &self.slot(r).record(epoch)[STAMP];
                    let staged_at = self.stage(r).wrapping_add(at);
                    let ready = || {
                        let seen = stamp.load(Ordering::Acquire) >= epoch;
                        if staged {
                            prefetch(staged_at);
                            prefetch(staged_at.wrapping_add(64));
                            if seen {
                                (2..lines).for_each(|k| prefetch(staged_at.wrapping_add(64 * k)));
                            }
                        }
                        seen
                    };
                    self.wait_on(r, ready, &|| self.standing(r))
                })
            }
        };
        if let Err(e) = arrived {
            // We arrived, so a peer may already be copying: we cannot wait for it (the
            // wait just failed), so say we failed and are done, without waiting (unless
            // a peer may write into our buffer: `fence_arrival`). With a tree, `done`
            // without `gathered` is also how the ranks above and below us learn that we
            // gave up.
            round.finished = true;
            let e = match round.writable {
                true => round.fence_arrival(e),
                false => e,
            };
            self.post_done(epoch, self.failed(Some(&e)));
            return Err(e);
        }
        // Every rank arrived here only after posting `done` of the round before.
        self.owed.set(0);
        match round.previous() {
            Ok(()) => Ok(round),
            Err(e) => Err(round.finish(Err(e)).unwrap_err()),
        }
    }

    /// The tree of [`begin`](Control::begin): up through this rank's children, then down
    /// from the root.
    fn gather_arrivals(&self, epoch: u64, k: usize) -> Result<()> {
        let first = self.me * k + 1;
        for child in first..(first + k).min(self.size()) {
            self.wait_gathered(child, epoch)?;
        }
        // Release: our record, and (through our Acquire loads of the children's) every
        // record of our subtree, are visible to whoever sees this.
        self.slot(self.me).gathered.store(epoch, Ordering::Release);
        match self.me {
            0 => Ok(()),
            _ => self.wait_gathered(0, epoch),
        }
    }

    /// Waits until local rank `r` says that its subtree has arrived at `epoch`, or until
    /// it gave up on `epoch` (its `done` without its `gathered`: a rank below it died or
    /// timed out, or its own wait failed), which fails this rank's arrival too.
    fn wait_gathered(&self, r: usize, epoch: u64) -> Result<()> {
        let slot = self.slot(r);
        let gathered = || slot.gathered.load(Ordering::Acquire) >= epoch;
        let mut gave_up = false;
        let ready = || {
            gathered() || {
                gave_up = slot.done.load(Ordering::Acquire) >= epoch;
                gave_up
            }
        };
        self.wait_on(r, ready, &|| self.standing(r))?;
        // `gathered` is posted before `done`: look at it once more.
        match gave_up && !gathered() {
            true => Err(Error::PeerFailed { rank: self.ranks[self.me], peer: self.blame(r, epoch) }),
            false => Ok(()),
        }
    }

    /// Starts round `epoch + 1`: clears the first `board` words of this rank's staging area
    /// (see `arrival`), notes where this rank's completion counter stands, writes `call`
    /// and publishes the arrival. Nothing is awaited.
    pub(super) fn publish(&self, call: &Call, board: usize) -> Round<'_> {
        self.publish_flagged(call, board, 0)
    }

    /// [`publish`](Control::publish) with `extra` bits in the flag word (`FLAG_LEFT`), and
    /// `FLAG_PREV_FAILED` where [`learn`](Control::learn) found the round before failed.
    pub(super) fn publish_flagged(&self, call: &Call, board: usize, extra: u64) -> Round<'_> {
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Arrive);
        let epoch = self.epoch.get() + 1;
        self.epoch.set(epoch);
        let mine = self.slot(self.me);
        for i in 0..board {
            self.board_word(self.me, i).store(0, Ordering::Relaxed);
        }
        // Peers add to our counter only after seeing this arrival, and every addition of
        // an earlier round was made before its author's `done`, which our previous
        // `finish` awaited: the value now is exactly this round's starting point.
        let base = mine.completed.load(Ordering::Acquire);
        let record = mine.record(epoch);
        let private = call.op & PRIVATE != 0;
        let exposure = self.exposed.borrow().as_ref().map_or(0, |e| e.id << EXPOSURE_SHIFT);
        let flags = if private {
            // Lengths only (`store` writes no address): no peer can reach our buffers.
            exposure
        } else {
            (call.recv_writable as u64)
                | if heap::holds(call.send, call.send_len) { FLAG_SEND_HEAP } else { 0 }
                | if heap::holds(call.recv, call.recv_len) { FLAG_RECV_HEAP } else { 0 }
                | exposure
        };
        // A buffer peers may write may be split by claims (`Round::claim`): open them for
        // this round before the arrival, which every claimant awaits.
        if call.recv_writable && !private {
            mine.claimed.store(claims_open(epoch), Ordering::Relaxed);
        }
        let prev = if self.prev_failed.replace(false) { FLAG_PREV_FAILED } else { 0 };
        let flags = flags | extra | prev;
        call.store(record, flags);
        record[STATUS].store(0, Ordering::Relaxed);
        // The stamp first (what `begin` waits for: it shares a cache line with the words
        // the verdict reads), then `arrive` (what every other wait on an arrival reads).
        record[STAMP].store(epoch, Ordering::Release);
        mine.arrive.store(epoch, Ordering::Release);
        let writable = call.recv_writable && !private;
        Round {
            ctl: self,
            epoch,
            writable,
            finished: false,
            eager: false,
            staged: false,
            quiet: private && exposure == 0,
            base,
            own: (call.head(flags), flags),
        }
    }

    /// Takes part in the next round without waiting for anyone, and fails it: publishes
    /// `call`, the arrival, and a failed `done`, and returns. For a rank that unwinds a
    /// panic with a collective step pending (an exposure's withdrawal): its peers' round
    /// ends with `PeerFailed` (or a mismatch) instead of waiting for a rank that will
    /// never arrive. Nothing of this rank's may be touched in that round (`call` publishes
    /// no buffer); the wait for the others' `done` is owed, as after a private round. The
    /// status blames what `e` blames (a peer found dead before the round, say), or this
    /// rank where there is no error (a panic).
    pub(crate) fn abandon(&self, call: &Call, e: Option<&Error>) {
        debug_assert!(call.send_len == 0 && call.recv_len == 0 && !call.recv_writable);
        let mut round = self.publish(call, 0);
        round.finished = true;
        self.post_done(round.epoch, self.failed(e));
        self.owed.set(round.epoch);
        self.owed_staged.set(false);
    }
}

/// One collective call in progress. Created by [`Control::begin`]; ended by
/// [`Round::finish`], which every path must reach (dropping it finishes it as failed).
pub(crate) struct Round<'c> {
    pub(super) ctl: &'c Control,
    pub(super) epoch: u64,
    /// Whether this rank published a buffer for peers to write.
    pub(super) writable: bool,
    pub(super) finished: bool,
    /// Started by [`Control::begin_eager`]: peers may not have arrived yet.
    pub(super) eager: bool,
    /// A private call on no exposure: a success may leave without awaiting the others.
    pub(super) quiet: bool,
    /// Started by [`Control::begin_staged`]: every rank's payload is in the half of its
    /// staging area of this epoch's parity.
    pub(super) staged: bool,
    /// This rank's completion counter when it arrived (see `counter`).
    pub(super) base: u64,
    /// This rank's record of the round as the peers read it, and its flag word, kept
    /// here so that [`call`](Round::call) and the flags of this rank are not read back
    /// from the record: the peers poll its stamp on that line, and reading it back right
    /// after publishing cost about as much as reading a peer's (at 2 ranks, 0.03-0.06 us
    /// a call in alltoall, allreduce and barrier).
    pub(super) own: (Call, u64),
}

impl<'c> Round<'c> {
    /// This rank's index on the node.
    pub(crate) fn me(&self) -> usize {
        self.ctl.me
    }

    /// The number of ranks on the node.
    pub(crate) fn size(&self) -> usize {
        self.ctl.size()
    }

    /// The user communicator's rank of local rank `r`.
    pub(crate) fn rank_of(&self, r: usize) -> i32 {
        self.ctl.rank_of(r)
    }

    /// The call local rank `r` published for this round, as the verdict reads it: every
    /// word but the addresses, which are 0 here ([`Call::load_head`]: one cache line per
    /// peer); the copies reach the buffers through [`published`](Round::published). This
    /// rank's own is the copy it kept when it published (`own`), not read back.
    pub(crate) fn call(&self, r: usize) -> Call {
        if r == self.ctl.me {
            return self.own.0;
        }
        Call::load_head(self.ctl.slot(r).record(self.epoch))
    }

    /// Whether every rank made this rank's call in what every verdict compares first
    /// (collective, algorithm and parameters, root, `aux`, exposure), word for word
    /// ([`Call::compare`]), but for the private bit of a round some rank left (a leaver's
    /// record is private where the others' may not be): the verdict's common case,
    /// without reading the peers' whole records.
    pub(crate) fn all_agree(&self) -> bool {
        let (mut exact, mut left) = (true, false);
        for r in (0..self.size()).filter(|&r| r != self.ctl.me) {
            match Call::compare(self.ctl.slot(r).record(self.epoch), &self.own.0, self.own.1) {
                None => return false,
                Some((e, l)) => (exact, left) = (exact && e, left || l),
            }
        }
        exact || left
    }

    /// The send length local rank `r` published for this round.
    pub(crate) fn send_len(&self, r: usize) -> usize {
        self.lens(r).0
    }

    /// The receive length local rank `r` published for this round.
    pub(crate) fn recv_len(&self, r: usize) -> usize {
        self.lens(r).1
    }

    /// The `aux2` word local rank `r` published for this round.
    pub(crate) fn aux2(&self, r: usize) -> u64 {
        match r == self.ctl.me {
            true => self.own.0.aux2,
            false => Call::aux2(self.ctl.slot(r).record(self.epoch)),
        }
    }

    /// The send and receive lengths local rank `r` published for this round.
    pub(crate) fn lens(&self, r: usize) -> (usize, usize) {
        match r == self.ctl.me {
            true => (self.own.0.send_len, self.own.0.recv_len),
            false => Call::lens(self.ctl.slot(r).record(self.epoch)),
        }
    }

    /// The call local rank `r` published for this round, with its addresses.
    pub(super) fn record(&self, r: usize) -> Call {
        Call::load(self.ctl.slot(r).record(self.epoch))
    }

    /// The send buffer local rank `r` published, to read from.
    pub(crate) fn remote_send(&self, r: usize) -> RemoteBuf<'_, Read> {
        let c = self.published(r);
        // SAFETY: rank `r` published this range for this round (we saw its `arrive` with
        // Acquire in `begin` or in `published`; an empty range if not); it keeps the
        // buffer borrowed and does not return before every rank, us included, has posted
        // `done`, which we only do in `finish`, after which the handle's borrow of `self`
        // has ended.
        unsafe { RemoteBuf::new(self.ctl.pids[r], c.send, c.send_len) }
    }

    /// The flag word of local rank `r`'s call.
    pub(super) fn flags(&self, r: usize) -> u64 {
        if r == self.ctl.me {
            return self.own.1;
        }
        self.ctl.slot(r).record(self.epoch)[FLAGS].load(Ordering::Relaxed)
    }

    /// Whether local rank `r` left this round right after arriving
    /// ([`Control::leave_staged`]): it judges nothing, reads nothing of this round and
    /// posts no step; its record is private (lengths only) and its bytes are what it
    /// staged.
    pub(crate) fn left(&self, r: usize) -> bool {
        self.flags(r) & FLAG_LEFT != 0
    }

    /// Whether every rank reaches local rank `r`'s send buffer (or, with `recv`, its
    /// receive buffer) with loads and stores: the node maps every peer's address space
    /// (XPMEM), or its shared heaps and `r` published the buffer as lying in its heap. The
    /// same answer on every rank, from `r`'s published flags and the node's links.
    pub(crate) fn loads(&self, r: usize, recv: bool) -> bool {
        let flag = if recv { FLAG_RECV_HEAP } else { FLAG_SEND_HEAP };
        self.ctl.links.xpmem.is_some() || (self.ctl.links.heap.is_some() && self.flags(r) & flag != 0)
    }

    /// The deferred verdict, once every rank's record of this round is visible: notes
    /// whether a rank left this round before its verdict (so that this rank, should it
    /// fail the round, says so in its next call), and fails if a rank says that the round
    /// before failed after a rank had left it ([`Control::learn`]).
    ///
    /// # Errors
    ///
    /// `PreviousFailed`, on every rank alike (a pure function of the records).
    pub(super) fn previous(&self) -> Result<()> {
        let flags = (0..self.size()).fold(0, |acc, r| acc | self.flags(r));
        if flags & FLAG_LEFT != 0 {
            self.ctl.saw_leaver.set(self.epoch);
        }
        match flags & FLAG_PREV_FAILED {
            0 => Ok(()),
            _ => Err(Error::PreviousFailed { rank: self.rank_of(self.me()) }),
        }
    }

    /// The exposure local rank `r`'s call uses (0 for none).
    pub(crate) fn exposure_of(&self, r: usize) -> u64 {
        self.flags(r) >> EXPOSURE_SHIFT
    }

    /// Rank `r`'s registered buffer, if this round runs on an exposure.
    pub(super) fn registered<A>(&self, r: usize, writable: bool) -> Option<RemoteBuf<'_, A>> {
        let exposed = self.ctl.exposed.borrow();
        let e = exposed.as_ref()?;
        let (addr, len, ptr, kind) = e.bufs[r];
        // Only a round of this exposure on every rank (which `coll::check` verifies
        // before any copy) may use it; the id is in our own call.
        debug_assert_eq!(self.exposure_of(self.me()), e.id);
        let len = if writable { len } else { 0 };
        // SAFETY: rank `r` registered this range when the exposure was made, and keeps it
        // borrowed until the exposure is withdrawn; it uses it in this round (every rank
        // publishes the exposure's id, checked before any copy) and does not return before
        // we post `done`. `ptr` maps the range here, held by the registration, which
        // `with_registration` keeps borrowed while this round runs.
        Some(unsafe { RemoteBuf::new(self.ctl.pids[r], addr, len).with_mapping(ptr as *mut u8, kind) })
    }

    /// Local rank `r`'s send buffer, to read from, mapped here where the node's links
    /// reach it (else a CMA buffer).
    pub(crate) fn peer_send(&self, r: usize) -> RemoteBuf<'_, Read> {
        if let Some(b) = self.registered(r, true) {
            return b;
        }
        let heap = self.flags(r) & FLAG_SEND_HEAP != 0;
        // SAFETY: `r` published the heap flag for this range (`begin` derives it from the
        // address); the rest is `remote_send`'s contract.
        unsafe { self.remote_send(r).map(&self.ctl.links, r, heap) }
    }

    /// Local rank `r`'s receive buffer, to read a result it made ready, mapped here where
    /// the links reach it.
    pub(crate) fn peer_result(&self, r: usize) -> RemoteBuf<'_, Read> {
        if let Some(b) = self.registered(r, true) {
            return b;
        }
        let heap = self.flags(r) & FLAG_RECV_HEAP != 0;
        // SAFETY: as in `peer_send`.
        unsafe { self.remote_recv_read(r).map(&self.ctl.links, r, heap) }
    }

    /// Local rank `r`'s receive buffer for peers to write (empty unless `r` marked it
    /// writable), mapped here where the links reach it.
    pub(crate) fn peer_recv(&self, r: usize) -> RemoteBuf<'_, Write> {
        if let Some(b) = self.registered(r, self.call(r).recv_writable) {
            return b;
        }
        let heap = self.flags(r) & FLAG_RECV_HEAP != 0;
        // SAFETY: as in `peer_send`.
        unsafe { self.remote_recv(r).map(&self.ctl.links, r, heap) }
    }

    pub(super) fn count(&self, kind: TransportKind, bytes: usize) {
        let i = match kind {
            TransportKind::Heap => 1,
            TransportKind::Xpmem => 2,
            _ => 0,
        };
        let c = &self.ctl.traffic[i];
        c.set(c.get() + bytes as u64);
    }

    /// Copies `dst.len()` bytes at `offset` of `src`, local rank `peer`'s buffer.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming the transport and the peer.
    pub(crate) fn read<A>(
        &self,
        src: &RemoteBuf<'_, A>,
        peer: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let n = dst.len();
        self.copy(src.kind(), false, peer, n, || transport::read(src, offset, dst))
    }

    /// Copies `src` into `dst`, local rank `peer`'s buffer, at `offset`.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming the transport and the peer.
    pub(crate) fn write(
        &self,
        src: &[u8],
        dst: &RemoteBuf<'_, Write>,
        peer: usize,
        offset: usize,
    ) -> Result<()> {
        self.copy(dst.kind(), true, peer, src.len(), || transport::write(src, dst, offset))
    }

    /// Copies the ranges `(offset, len)` of `src`, local rank `peer`'s buffer, in order,
    /// into `dst`, packed.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read); `EINVAL` if the lengths do not add up to `dst.len()`.
    pub(crate) fn read_v<A>(
        &self,
        src: &RemoteBuf<'_, A>,
        peer: usize,
        ranges: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<()> {
        let n = dst.len();
        self.copy(src.kind(), false, peer, n, || transport::read_v(src, ranges, dst))
    }

    /// Runs one single copy of `bytes` with local rank `peer` through `kind`: the test-only
    /// fault hook, the error naming transport and peer, and the traffic count.
    pub(super) fn copy(
        &self,
        kind: TransportKind,
        write: bool,
        peer: usize,
        bytes: usize,
        copy: impl FnOnce() -> std::result::Result<(), crate::error::Errno>,
    ) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Copy);
        #[cfg(feature = "fault-injection")]
        if crate::fault::copy_fails() {
            return Err(self.transport_error(kind, write, peer, crate::error::Errno::EIO));
        }
        copy().map_err(|errno| self.transport_error(kind, write, peer, errno))?;
        self.count(kind, bytes);
        Ok(())
    }

    /// Reads `dst.len()` bytes at `offset` of local rank `r`'s send buffer ([`peer_send`]:
    /// loads where it is mapped here, else CMA).
    ///
    /// [`peer_send`]: Self::peer_send
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub(crate) fn read_send(&self, r: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read(&self.peer_send(r), r, offset, dst)
    }

    /// Reads `dst.len()` bytes at `offset` of local rank `r`'s receive buffer, a part it
    /// has declared final ([`peer_result`](Self::peer_result)).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub(crate) fn read_result(&self, r: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read(&self.peer_result(r), r, offset, dst)
    }

    /// Writes `src` at `offset` of local rank `r`'s receive buffer, which `r` published
    /// writable ([`peer_recv`](Self::peer_recv)).
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub(crate) fn write_recv(&self, src: &[u8], r: usize, offset: usize) -> Result<()> {
        self.write(src, &self.peer_recv(r), r, offset)
    }

    /// The calibration's copies (`coll::probe`), which time CMA itself, mapped or not:
    /// a read of local rank `r`'s send buffer (`write = false`, into `buf`) or a write of
    /// `buf` into its receive buffer, at offset 0.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming CMA and the peer.
    pub(crate) fn cma_copy(&self, r: usize, write: bool, buf: &mut [u8]) -> Result<()> {
        let copied = match write {
            true => transport::cma::write(buf, &self.remote_recv(r), 0),
            false => transport::cma::read(&self.remote_send(r), 0, buf),
        };
        copied.map_err(|errno| self.transport_error(TransportKind::Cma, write, r, errno))
    }

    /// The calibration's pinning probe: one CMA read of a byte against the first `len`
    /// bytes of local rank `r`'s send buffer, which pins them all (`cma::pin_probe`).
    ///
    /// # Errors
    ///
    /// As [`cma_copy`](Self::cma_copy).
    pub(crate) fn cma_pin(&self, r: usize, len: usize) -> Result<()> {
        transport::cma::pin_probe(&self.remote_send(r), 0, len)
            .map(drop)
            .map_err(|errno| self.transport_error(TransportKind::Cma, false, r, errno))
    }

    /// The error of a failed copy from or to local rank `peer`: `PeerDied` where the
    /// kernel says that its process is gone (`ESRCH`: it exited while this rank copied,
    /// which the liveness checks of the waits would report the same way), else
    /// `Transport`.
    pub(super) fn transport_error(
        &self,
        kind: TransportKind,
        write: bool,
        peer: usize,
        errno: crate::error::Errno,
    ) -> Error {
        if errno == crate::error::Errno::ESRCH {
            return Error::PeerDied {
                rank: self.rank_of(self.me()),
                peer: self.rank_of(peer),
                pid: self.ctl.pids[peer],
            };
        }
        let op = match (kind, write) {
            (TransportKind::Heap, false) => "heap read",
            (TransportKind::Heap, true) => "heap write",
            (TransportKind::Xpmem, false) => "xpmem read",
            (TransportKind::Xpmem, true) => "xpmem write",
            (_, false) => "cma read",
            (_, true) => "cma write",
        };
        Error::Transport { rank: self.rank_of(self.me()), peer: self.rank_of(peer), op, errno }
    }

    /// Registers every rank's send buffer of this round for later rounds (an exposure):
    /// maps each peer's here and holds the mapping until the registration drops.
    pub(crate) fn register(&self) -> Registration<'c> {
        let ctl: &'c Control = self.ctl;
        let bufs = (0..self.size())
            .map(|r| {
                let c = self.record(r);
                let heap = self.flags(r) & FLAG_SEND_HEAP != 0;
                // SAFETY: `r` published this range in the round that makes the exposure and
                // keeps it borrowed for the exposure's life; the registration is only used
                // by rounds of that exposure (see `registered`). `heap` is what `r`
                // published. Our own buffer is described, never mapped.
                let b = unsafe { RemoteBuf::new(ctl.pids[r], c.send, c.send_len) };
                match r == self.me() {
                    true => b,
                    // SAFETY: as above.
                    false => unsafe { b.map(&ctl.links, r, heap) },
                }
            })
            .collect();
        Registration { id: self.epoch, bufs }
    }

    /// The rank's cache-sized scratch (see [`Control::scratch`]).
    pub(crate) fn scratch(&self) -> RefMut<'_, [u8]> {
        self.ctl.scratch()
    }

    /// The receive buffer local rank `r` published for peers to write. If `r` did not
    /// mark it writable, the handle is empty and every write through it fails.
    pub(crate) fn remote_recv(&self, r: usize) -> RemoteBuf<'_, Write> {
        let c = self.published(r);
        let len = if c.recv_writable { c.recv_len } else { 0 };
        // SAFETY: as in `remote_send`; `r` set `recv_writable` only for a range it lets
        // peers write during the round, whose address it took from a unique borrow (an
        // unmarked range gets length 0, which no copy can touch).
        unsafe { RemoteBuf::new(self.ctl.pids[r], c.recv, len) }
    }

    /// Publishes that this rank has completed `step` of this round.
    pub(crate) fn post_progress(&self, step: u32) {
        self.post_step(|s| &s.progress, step);
    }

    /// Publishes `step` of this round in this rank's `flag` (a fault-injection site: a
    /// copy phase).
    fn post_step(&self, flag: impl Fn(&Slot) -> &AtomicU64, step: u32) {
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Copy);
        flag(self.ctl.slot(self.ctl.me)).store(stamp(self.epoch, step), Ordering::Release);
    }

    /// Waits until local rank `r` has completed `step` of this round.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; `PeerFailed` if `r` finished the round without reaching
    /// `step` (a copy or an operator failed there).
    pub(crate) fn wait_progress(&self, r: usize, step: u32) -> Result<()> {
        self.wait_step(r, |s| &s.progress, step)
    }

    /// Waits until `flag` of local rank `r` reaches `step` of this round, or `r` posts
    /// `done` without it: a rank that gives up on a round (its copy failed, its operator
    /// panicked) posts `done` and nothing more, so waiting on would never end. A rank
    /// waiting for a third one that gave up gives up in turn, so the failure reaches every
    /// waiter however the steps chain.
    pub(super) fn wait_step(&self, r: usize, flag: impl Fn(&Slot) -> &AtomicU64, step: u32) -> Result<()> {
        let (slot, want) = (self.ctl.slot(r), stamp(self.epoch, step));
        let stepped = || reached(flag(slot).load(Ordering::Acquire), want);
        let mut gave_up = false;
        let ready = || {
            stepped() || {
                gave_up = slot.done.load(Ordering::Acquire) >= self.epoch;
                gave_up
            }
        };
        self.ctl.wait_on(r, ready, &|| format!("waiting for step {step}; {}", self.ctl.standing(r)))?;
        // `done` is posted after every step a rank makes: look at the step once more.
        match gave_up && !stepped() {
            true => {
                Err(Error::PeerFailed { rank: self.rank_of(self.me()), peer: self.ctl.blame(r, self.epoch) })
            }
            false => Ok(()),
        }
    }

    /// A second step counter, for ranks that are producer and consumer in one round:
    /// `progress` counts what a rank produced, `ack` what it consumed.
    pub(crate) fn post_ack(&self, step: u32) {
        self.post_step(|s| &s.ack, step);
    }

    /// Waits until local rank `r` has acknowledged `step` of this round.
    ///
    /// # Errors
    ///
    /// As [`wait_progress`](Self::wait_progress).
    pub(crate) fn wait_ack(&self, r: usize, step: u32) -> Result<()> {
        self.wait_step(r, |s| &s.ack, step)
    }

    /// Ends the round: agrees with every local rank on the outcome. Returns `result` if it
    /// is an error, else the first peer's failure, else `Ok`.
    ///
    /// # Errors
    ///
    /// This rank's own error, `PeerFailed`, `PeerDied` or `Timeout`.
    pub(crate) fn finish(mut self, result: Result<()>) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Finish);
        self.finished = true;
        if self.quiet && !self.eager && result.is_ok() {
            // A private round: nothing of ours is reachable, and every rank reached the
            // same verdict. Say we are done; the wait for the others' is owed (module docs).
            self.ctl.post_done(self.epoch, SUCCEEDED);
            self.ctl.owed.set(self.epoch);
            self.ctl.owed_staged.set(self.staged);
            return Ok(());
        }
        let status = match &result {
            Ok(()) => SUCCEEDED,
            Err(e) => self.ctl.failed(Some(e)),
        };
        let end = self.end(status);
        result.and(end)
    }

    /// Ends the round with `status` ([`Control::end`]), fencing where peers may write
    /// into this rank and the end fails.
    pub(super) fn end(&self, status: u64) -> Result<()> {
        match self.ctl.end(self.epoch, status) {
            Err(e) if self.writable => Err(self.fence(e)),
            end => end,
        }
    }

    /// The end of a round in which peers may write into this rank's buffer failed with
    /// `e`: makes sure that no peer still can before the rank returns. Every peer that has
    /// not posted `done` (its wait timed out, or it died) is fenced ([`Control::fence`]):
    /// a live one is killed, and the rank returns `Error::Fenced` naming the first it
    /// killed (else `e`). Should a kill not be confirmed, the rank aborts its process:
    /// returning would let the peer write into memory the caller may have freed. (This is
    /// what a leaked MPI request does, too.)
    pub(super) fn fence(&self, e: Error) -> Error {
        let me = self.me();
        let mut killed = None;
        for r in (0..self.size()).filter(|&r| r != me) {
            let slot = self.ctl.slot(r);
            let done = || slot.done.load(Ordering::Acquire) >= self.epoch;
            if done() {
                continue;
            }
            match self.ctl.fence(r, done) {
                Fence::Passed | Fence::Dead => {}
                Fence::Killed => killed = killed.or(Some(r)),
                Fence::Unconfirmed => self.abort(&e, r),
            }
        }
        match killed {
            Some(r) => self.fenced(r),
            None => e,
        }
    }

    /// The arrival of a round in which peers may write into this rank's buffer failed
    /// with `e` (a peer timed out or died before arriving): makes sure that no peer ever
    /// writes into it. No rank passes its arrival while one rank has not arrived, so it
    /// is enough that the first rank missing stays missing: it is fenced, and if it is
    /// dead without having arrived, nobody copies in this round. If it arrived after all
    /// (just as the wait gave up), the others may be copying: the rank then ends the round
    /// as failed, awaiting every `done` and fencing as [`fence`](Self::fence) does.
    pub(super) fn fence_arrival(&self, e: Error) -> Error {
        let arrived =
            |r: usize| self.ctl.slot(r).record(self.epoch)[STAMP].load(Ordering::Acquire) >= self.epoch;
        if let Some(x) = (0..self.size()).find(|&r| !arrived(r)) {
            match self.ctl.fence(x, || arrived(x)) {
                Fence::Killed if !arrived(x) => return self.fenced(x),
                Fence::Dead if !arrived(x) => return e,
                Fence::Unconfirmed => self.abort(&e, x),
                _ => {}
            }
        }
        match self.ctl.end(self.epoch, self.ctl.failed(Some(&e))) {
            Ok(()) => e,
            Err(end) => self.fence(end),
        }
    }

    /// The error of a round whose wait for local rank `r` ended with `r` killed.
    fn fenced(&self, r: usize) -> Error {
        let seconds = self.ctl.policy.timeout.map_or(0.0, |t| t.as_secs_f64());
        Error::Fenced { rank: self.rank_of(self.me()), peer: self.rank_of(r), pid: self.ctl.pids[r], seconds }
    }

    /// The last resort: local rank `r` may still write into this process, and it could
    /// not be stopped.
    fn abort(&self, e: &Error, r: usize) -> ! {
        crate::error::say(format_args!(
            "{e}; aborting, since rank {} (pid {}) may still write into this process and \
             could not be stopped (no pidfd, or it did not exit within ZCOLL_TIMEOUT of SIGKILL)",
            self.rank_of(r),
            self.ctl.pids[r]
        ));
        std::process::abort();
    }
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // A panic or an early return inside an algorithm: tell the peers, and wait until
            // none of them still touches our buffers. In a one-phase round that shares no
            // buffer (a small allreduce, whose ranks each fold every staged input), the
            // peers need nothing of ours after the arrivals and end with a success without
            // waiting for our end: they may have returned `Ok`, so the failure is passed on,
            // as `finish_alone`'s, and the next call fails on every rank. (Where peers wait
            // for our steps, they see the failure in this call.)
            if self.quiet && !self.eager && self.staged {
                self.ctl.saw_leaver.set(self.epoch);
            }
            let _ = self.end(self.ctl.failed(None));
        }
    }
}
