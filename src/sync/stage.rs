//! Copy-in/copy-out through the staging areas of the segment.
//!
//! A broadcast streams the root's buffer through the root's staging area in chunks of
//! half the area, double-buffered: the root fills half `c % 2` with chunk `c` once every
//! reader has consumed chunk `c - 2`, and publishes `progress = c + 1`; a reader copies
//! chunk `c` out once the root's progress reaches `c + 1`, and publishes its own
//! `progress = c + 1`. Two copies per byte, no permission needed, and the area is never
//! larger than a few pages, whatever the message size.

use super::call::{FLAG_LEFT, SUCCEEDED};
use super::meta::Meta;
use super::publish::{copy_for_peers, copy_from_peers};
use super::{Call, Control, Round, PRIVATE, SCRATCH_HALF};
use crate::error::{Error, Result};
use crate::tune::Flags;

impl Control {
    /// The most bytes a rank can stage for a one-phase round ([`begin_staged`]): half its
    /// staging area.
    ///
    /// [`begin_staged`]: Control::begin_staged
    pub(crate) fn one_phase_bytes(&self) -> usize {
        self.stage_bytes / 2
    }

    /// Starts a round in one flag phase: writes `meta` (see `meta`), then copies `parts`,
    /// one after the other, into this rank's staging area, then arrives
    /// ([`begin`](Control::begin)). The payload
    /// travels with the arrival: a peer that sees it may copy the bytes out at once (with
    /// [`Round::read_staged`]), with no step counter between the verdict and the copy.
    ///
    /// Round `e` stages in half `e % 2` of the area. A reader of round `e - 1` (the other
    /// half) may still be copying out, but the half of round `e - 2` is free: every rank
    /// left round `e - 2` before it arrived at `e - 1`, which this rank has seen. So
    /// after a one-phase round nothing is awaited before the next one stages. After any
    /// other round left early, whose copies may use the whole area, this rank first waits
    /// for every rank's `done` of it (`settle`); a rank that cannot (a dead peer) still
    /// takes part in the round, as a failed one, so no live peer waits for its arrival.
    ///
    /// # Errors
    ///
    /// As [`begin`](Control::begin); `PeerDied` or `Timeout` while settling.
    ///
    /// # Panics
    ///
    /// If `meta` and `parts` hold more than [`one_phase_bytes`](Control::one_phase_bytes).
    pub(crate) fn begin_staged(&self, call: &Call, meta: &[u64], parts: &[&[u8]]) -> Result<Round<'_>> {
        self.begin_staged_with(call, &meta, &parts, &[0u64; 0])
    }

    /// [`begin_staged`](Control::begin_staged) with `tail`: metadata words that only some
    /// paths read, kept away from the lines of the words and payload every reader takes
    /// (and from the lines the arrival's wait prefetches): at the end of the half the round
    /// stages in, from word [`Round::tail_at`]`(tail.words())`. The words may be computed
    /// straight into the area ([`Filled`](super::meta::Filled)) and the payload listed by a
    /// closure ([`Listed`]), so that a call copies them once.
    ///
    /// # Errors
    ///
    /// As [`begin_staged`](Control::begin_staged).
    ///
    /// # Panics
    ///
    /// If `meta`, `parts` and `tail` hold more than
    /// [`one_phase_bytes`](Control::one_phase_bytes).
    pub(crate) fn begin_staged_with(
        &self,
        call: &Call,
        meta: &(impl Meta + ?Sized),
        parts: &(impl Payload + ?Sized),
        tail: &(impl Meta + ?Sized),
    ) -> Result<Round<'_>> {
        self.learn_or_abandon(call)?;
        if !self.owed_staged.get() {
            if let Err(e) = self.settle() {
                self.abandon(&Call { send_len: 0, recv_len: 0, recv_writable: false, ..*call }, Some(&e));
                return Err(e);
            }
        }
        self.stage_own(meta, parts, tail);
        let mut round = self.arrive_staged(call, true)?;
        round.staged = true;
        Ok(round)
    }

    /// Starts and ends a one-phase round in which this rank only gives (the root of a
    /// broadcast, a scatter or a scatterv, a non-root of a reduce, a gather or a gatherv,
    /// whose bytes fit half its staging area or its record's `aux2`): it stages its bytes,
    /// arrives, and returns without waiting for any verdict (a *deferred* verdict: the
    /// readers judge the round, and a rank that fails it says so in its next call record,
    /// which fails that round on every rank). Several ranks may leave one round (every
    /// giver of a reduce). The record carries `FLAG_LEFT`.
    ///
    /// Only after it published does the rank wait for every rank's end of the round before
    /// (unless it saw them already), so that the peers see its payload one line transfer
    /// after its call starts. It then judges that round ([`Control::judge_left`]), whatever
    /// it saw of it (a peer may have failed it alone while this rank left it early with a
    /// success): if it failed, this call fails with `PreviousFailed`, as it does on every
    /// rank (a rank that stays learns it before it publishes and sets
    /// `FLAG_PREV_FAILED`, which fails the round for every rank that judges it), and its
    /// status says that every rank knows. A rank that failed the round before itself, in a
    /// way a peer may not know, fails this one before it publishes anything
    /// ([`abandon`](Control::abandon), with `FLAG_PREV_FAILED`).
    ///
    /// Half `epoch % 2` of its area is free: it last held round `epoch - 2`, which every
    /// rank has ended (this rank awaited their arrivals at `epoch - 1`, or, if it left
    /// that round, their ends of `epoch - 2` before returning). Its record of the round is
    /// free as [`RECORDS`](super::call::RECORDS) says. A rank that only gives therefore
    /// runs at most two rounds ahead of the slowest, which has ended the round before the
    /// one this rank left last.
    ///
    /// Sound only where every peer judges the round from the records alone and copies
    /// nothing of this rank's but what it staged or its record carries: a private call, on
    /// a node whose arrivals are awaited flat (a tree needs every rank to pass its
    /// subtree's arrival up), on a communicator that is this node alone (two-level calls
    /// agree across nodes before they return), and on no exposure. The caller checks the
    /// first and the last two ([`may_leave`](Control::may_leave) the rest).
    ///
    /// # Errors
    ///
    /// `PreviousFailed`; `PeerDied` or `Timeout` while waiting for the round before.
    ///
    /// # Panics
    ///
    /// If `meta` and `parts` hold more than [`one_phase_bytes`](Control::one_phase_bytes).
    pub(crate) fn leave_staged(&self, call: &Call, meta: &[u64], parts: &[&[u8]]) -> Result<()> {
        self.leave_staged_with(call, &meta, &parts)
    }

    /// [`leave_staged`](Control::leave_staged) with the words and the payload given as in
    /// [`begin_staged_with`](Control::begin_staged_with).
    ///
    /// # Errors
    ///
    /// As [`leave_staged`](Control::leave_staged).
    ///
    /// # Panics
    ///
    /// If `meta` and `parts` hold more than [`one_phase_bytes`](Control::one_phase_bytes).
    pub(crate) fn leave_staged_with(
        &self,
        call: &Call,
        meta: &(impl Meta + ?Sized),
        parts: &(impl Payload + ?Sized),
    ) -> Result<()> {
        debug_assert!(call.op & PRIVATE != 0 && self.may_leave());
        let prev = self.epoch.get();
        let left = self.left.get() == prev;
        let unstaged = Call { send_len: 0, recv_len: 0, recv_writable: false, ..*call };
        if prev != 0 && self.failed_unheard(prev) {
            // This rank failed the round before in a way it passes on (a peer may have
            // left it with a success): take part as a failed rank (with
            // `FLAG_PREV_FAILED`, which fails the round on every rank that judges it).
            self.left.set(0);
            self.prev_failed.set(true);
            let e = Error::PreviousFailed { rank: self.ranks[self.me] };
            self.abandon(&unstaged, Some(&e));
            return Err(e);
        }
        // The end of the round before on every rank, unless this rank saw it (or settles
        // it below, a round not one-phase): awaited after publishing, since its next leave
        // restages that round's half and the judgement reads its records. Ask for the
        // end lines now, so that they cross while it stages and publishes.
        let unseen = prev != 0 && self.owed.get() == prev && self.owed_staged.get();
        if unseen {
            self.prefetch_ends(prev);
        }
        self.warm_next();
        if !self.owed_staged.get() {
            if let Err(e) = self.settle() {
                self.abandon(&unstaged, Some(&e));
                return Err(e);
            }
        }
        self.stage_own(meta, parts, &[0u64; 0]);
        let mut round = self.publish_flagged(call, 0, FLAG_LEFT);
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Finish);
        round.finished = true;
        let epoch = round.epoch;
        let ended = match unseen {
            true => self.wait_ends(prev),
            false => Ok(()),
        };
        // A rank may have failed it after a rank left it, or alone while this rank left
        // it early with a success, and pass it on: judge it, whatever this rank saw of it.
        let outcome = ended.and_then(|()| match prev != 0 && self.judge_left(prev, left) {
            true => Err(Error::PreviousFailed { rank: self.ranks[self.me] }),
            false => Ok(()),
        });
        self.left.set(epoch);
        self.saw_leaver.set(epoch);
        self.post_done(epoch, outcome.as_ref().map_or_else(|e| self.failed(Some(e)), |()| SUCCEEDED));
        self.owed.set(epoch);
        self.owed_staged.set(true);
        outcome
    }

    /// Whether this rank may leave a round right after arriving ([`leave_staged`]): the
    /// node awaits arrivals flat, and no exposure runs.
    ///
    /// [`leave_staged`]: Control::leave_staged
    pub(crate) fn may_leave(&self) -> bool {
        let flat = matches!(self.arrival, Flags::Flat) || self.size() <= 2;
        flat && self.size() > 1 && self.exposed.borrow().is_none()
    }

    /// Copies `meta`, then `parts`, into half `epoch + 1 % 2` of this rank's staging area,
    /// for the round it is about to publish, and `tail` at the end of that half.
    fn stage_own(
        &self,
        meta: &(impl Meta + ?Sized),
        parts: &(impl Payload + ?Sized),
        tail: &(impl Meta + ?Sized),
    ) {
        let half = self.one_phase_bytes();
        let epoch = self.epoch.get() + 1;
        // Panics unless the words fit the half, so `start + 8 * meta <= limit`.
        self.write_meta(epoch, meta, tail);
        let start = (epoch % 2) as usize * half;
        // The payload ends where the tail starts.
        let limit = start + half - 8 * tail.words();
        let mut at = start + 8 * meta.words();
        let area = self.stage(self.me);
        parts.each(|part| {
            assert!(part.len() <= limit - at, "the payload does not fit half a staging area");
            // SAFETY: the range lies in half `epoch % 2` of our own staging area, between
            // the metadata words and the tail (asserted above, and `at <= limit` holds
            // from the start on). Nobody reads that half now: it last held round
            // `epoch - 2`'s payload, which every rank has ended (it arrived at
            // `epoch - 1` after that, as we saw; or, where we left `epoch - 1`, we awaited
            // their ends of `epoch - 2` before returning from it), or a round left early
            // that `settle` waited for. The peers read it only after they see the arrival
            // that `begin` publishes with Release, which orders these bytes before it.
            unsafe { copy_for_peers(part, area.add(at)) };
            at += part.len();
        });
    }
}

/// The payload a rank stages with its arrival, after its metadata words
/// ([`Control::begin_staged_with`]): parts given as slices, or listed by a closure
/// ([`Listed`]), so that a call collects no list of them first.
pub(crate) trait Payload {
    /// Calls `f` with every part, in order.
    fn each(&self, f: impl FnMut(&[u8]));
}

impl Payload for &[&[u8]] {
    #[inline]
    fn each(&self, mut f: impl FnMut(&[u8])) {
        self.iter().for_each(|part| f(part));
    }
}

/// A payload whose parts the closure `.0` passes, in order, to the function it is given.
pub(crate) struct Listed<F>(pub(crate) F);

impl<F: Fn(&mut dyn FnMut(&[u8]))> Payload for Listed<F> {
    #[inline]
    fn each(&self, mut f: impl FnMut(&[u8])) {
        (self.0)(&mut f)
    }
}

impl Round<'_> {
    /// Copies `dst.len()` bytes at `offset` of what local rank `r` staged before it arrived
    /// ([`Control::begin_staged`]: its metadata words, then its payload, so a payload
    /// starts at 8 bytes a metadata word). Meaningful only in a round started that way,
    /// once the verdict says that `r` made the same call (so staged the same way), and only
    /// until this rank posts `done`: `r` refills this half only two rounds later.
    ///
    /// # Panics
    ///
    /// If the round was not started by `begin_staged`, or the range leaves the payload's
    /// half of the area.
    pub(crate) fn read_staged(&self, r: usize, offset: usize, dst: &mut [u8]) {
        let half = self.ctl.one_phase_bytes();
        assert!(self.staged && offset.checked_add(dst.len()).is_some_and(|end| end <= half));
        #[cfg(feature = "fault-injection")]
        crate::fault::at(crate::fault::Phase::Copy);
        let at = (self.epoch % 2) as usize * half + offset;
        // SAFETY: the range lies in half `epoch % 2` of `r`'s staging area (asserted above).
        // `r` wrote it before its arrival (Release), which `begin` saw (Acquire), and leaves
        // it alone until round `epoch + 2`, which it stages only once we have ended
        // `epoch` (it awaits our arrival at `epoch + 1`, or, leaving `epoch + 1`, our end
        // of `epoch`), after this copy: the bytes are stable while we copy them.
        unsafe { copy_from_peers(self.ctl.stage(r).add(at), dst) };
    }
}

impl Round<'_> {
    /// Lets a successful [`finish`](Round::finish) leave without waiting for the others'
    /// `done`, as a private round does, in a round that published buffers: sound only
    /// where every rank decided, by the same function of the same published records, that
    /// its data crosses through the staging areas alone in this round ([`read_staged`]),
    /// so that no peer touches any rank's buffers. A round on an exposure still waits.
    ///
    /// [`read_staged`]: Round::read_staged
    pub(crate) fn leave_early(&mut self) {
        self.quiet = self.ctl.exposed.borrow().is_none();
    }

    /// Ends, failed with `e`, a round that this rank alone judged bad after the verdict,
    /// where every other rank may [`leave_early`](Round::leave_early) with a success (a
    /// one-phase allgatherv or alltoallv whose reader finds that a sender's count differs
    /// from its own): the deferred verdict. The rank notes the failure as it does for a
    /// round a rank left before its verdict (`saw_leaver`), so that its next call carries
    /// `FLAG_PREV_FAILED` ([`Control::learn`]) and fails on every rank with
    /// `PreviousFailed`. It still ends the round as any failure does (its `STATUS`, then
    /// every rank's `done`).
    ///
    /// # Errors
    ///
    /// `e`, always.
    pub(crate) fn finish_alone(self, e: Error) -> Result<()> {
        self.ctl.saw_leaver.set(self.epoch);
        self.finish(Err(e))
    }

    /// Broadcasts `buf` from local rank `root` through `root`'s staging area. Every local
    /// rank calls it with a buffer of the same length (checked by the caller).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting.
    pub(crate) fn stage_bcast(&self, root: usize, buf: &mut [u8]) -> Result<()> {
        let chunk = self.ctl.stage_bytes() / 2;
        let area = self.ctl.stage(root);
        let chunks = buf.len().div_ceil(chunk);
        for (c, piece) in buf.chunks_mut(chunk).enumerate() {
            let half = (c % 2) * chunk;
            let step = c as u32 + 1;
            if self.me() == root {
                if c >= 2 {
                    for r in (0..self.size()).filter(|&r| r != root) {
                        self.wait_progress(r, step - 2)?;
                    }
                }
                // SAFETY: the half is `chunk` bytes inside our own staging area; every
                // reader has finished copying the chunk it held (progress >= c - 1, read
                // with Acquire above), and no reader copies it again before we publish
                // `step` below, so nothing reads it while we write.
                unsafe { copy_for_peers(piece, area.add(half)) };
                self.post_progress(step);
            } else {
                self.wait_progress(root, step)?;
                // SAFETY: the root published chunk `c` with Release and we saw `step` with
                // Acquire; it does not overwrite this half before we publish `step`, so the
                // bytes are stable while we copy them into our own buffer.
                unsafe { copy_from_peers(area.add(half), piece) };
                self.post_progress(step);
            }
        }
        debug_assert!(chunks == 0 || self.ctl.stage_bytes() >= 2 * chunk);
        Ok(())
    }
}

/// Where [`Round::stage_reduce`] hands a consumer one rank's chunk from.
pub(crate) enum Chunk<'a> {
    /// The bytes of the chunk: this rank's own, kept in its scratch, or a peer's, copied
    /// out of the peer's staging area into the scratch.
    Bytes(&'a [u8]),
    /// This rank's own chunk, not copied anywhere: the consumer takes it from its input
    /// (or, in place and first, finds it in its output already).
    Own,
    /// The chunk that comes first in the fold, a peer's, still in the peer's staging
    /// area: `copy(dst)` copies it into `dst`, which must be as long as the chunk, so
    /// that it lands straight in the output.
    Peer(&'a dyn Fn(&mut [u8])),
}

/// What a staged reduction does with the `len` bytes at `offset` of one rank's input:
/// `first` for the chunk the fold starts from (copied into the output), the others folded
/// into it.
pub(crate) type Combine<'f> = &'f mut dyn FnMut(usize, usize, bool, Chunk<'_>) -> Result<()>;

/// How [`Round::stage_reduce`] folds: whether the consumers' output is their input (in
/// place), and whether two ranks may fold in either order (an operator whose result does
/// not depend on it, bit for bit).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FoldOrder {
    pub(crate) in_place: bool,
    pub(crate) commutes: bool,
}

impl Round<'_> {
    /// A reduction through the staging areas. Every rank that another consumer reads
    /// publishes its `len`-byte input, chunk by chunk, in its own staging area
    /// (`fill(offset, dst)` writes the input's bytes at `offset` into `dst`, a scratch the
    /// size of the chunk); every rank for which `consumes(rank)` holds then takes chunk
    /// `offset` of every rank and hands it to `combine`, in rank order, or at two ranks
    /// whose fold commutes in the order that copies least: out of place the peer's chunk
    /// first, straight into the output, then its own from its input ([`Chunk::Own`]); in
    /// place its own first, already in the output. A rank that is the only consumer and
    /// needs no copy of its own chunk fills nothing. Chunks are at most half a staging
    /// area, cut at element boundaries (`elem` bytes), and double-buffered: a rank refills
    /// a half once every consumer has acknowledged the chunk it held. For a chunk, `fill`
    /// runs before any `combine`, so the output may be the input (in place).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; the first error `combine` returns.
    pub(crate) fn stage_reduce(
        &self,
        len: usize,
        elem: usize,
        consumes: impl Fn(usize) -> bool,
        order: FoldOrder,
        fill: &mut dyn FnMut(usize, &mut [u8]),
        combine: Combine<'_>,
    ) -> Result<()> {
        let half = self.ctl.stage_bytes() / 2;
        let elem = elem.max(1);
        let chunk = (half.min(SCRATCH_HALF) / elem) * elem;
        let (p, me) = (self.size(), self.me());
        let area = self.ctl.stage(me);
        let consumers: Vec<usize> = (0..p).filter(|&r| consumes(r)).collect();
        // Where this rank is the only consumer (the root of a reduce), nobody reads its
        // area: its chunks go straight from `fill` to `combine`, or from its input.
        let read_by_peers = consumers.iter().any(|&r| r != me);
        let ranks: Vec<usize> = match (p, order.commutes, order.in_place) {
            (2, true, false) => vec![1 - me, me],
            (2, true, true) => vec![me, 1 - me],
            _ => (0..p).collect(),
        };
        // A copy of this rank's chunk is needed to publish it, or in place where another
        // rank's chunk lands in the output first.
        let filled = read_by_peers || (order.in_place && ranks[0] != me);
        let mut scratch = self.ctl.scratch();
        let (taken, mine) = scratch.split_at_mut(SCRATCH_HALF);
        for (c, offset) in (0..len).step_by(chunk.max(1)).enumerate() {
            let n = chunk.min(len - offset);
            let at = (c % 2) * half;
            let step = c as u32 + 1;
            if c >= 2 {
                for &r in &consumers {
                    self.wait_ack(r, step - 2)?;
                }
            }
            if filled {
                fill(offset, &mut mine[..n]);
            }
            if read_by_peers {
                // SAFETY: the half lies in our own staging area; every consumer
                // acknowledged the chunk it held (ack >= c - 1, seen with Acquire), and
                // nobody reads it again before we publish `step`.
                unsafe { copy_for_peers(&mine[..n], area.add(at)) };
            }
            self.post_progress(step);
            if !consumes(me) {
                continue;
            }
            for (i, &r) in ranks.iter().enumerate() {
                let first = i == 0;
                if r == me {
                    // Our own chunk: in place and first, in the output already; else the
                    // copy, still in our cache (the staged copy went past it), where we
                    // made one.
                    let own = match filled && !(first && order.in_place) {
                        true => Chunk::Bytes(&mine[..n]),
                        false => Chunk::Own,
                    };
                    combine(offset, n, first, own)?;
                    continue;
                }
                self.wait_progress(r, step)?;
                let from = self.ctl.stage(r).wrapping_add(at);
                if first {
                    let copy = |dst: &mut [u8]| {
                        assert_eq!(dst.len(), n, "a staged chunk lands whole");
                        // SAFETY: `r` published chunk `c` in this half with Release (seen
                        // with Acquire) and does not overwrite it before we acknowledge
                        // it below; `dst` is `n` bytes, the chunk's length.
                        unsafe { copy_from_peers(from, dst) }
                    };
                    combine(offset, n, true, Chunk::Peer(&copy))?;
                } else {
                    // SAFETY: as for the first chunk; `n <= SCRATCH_HALF`, the size of
                    // `taken`.
                    unsafe { copy_from_peers(from, &mut taken[..n]) };
                    combine(offset, n, false, Chunk::Bytes(&taken[..n]))?;
                }
            }
            self.post_ack(step);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{node, on_node};
    use super::super::{Call, PRIVATE};
    use std::time::Duration;

    /// A private call publishes lengths but no address, and a rank that succeeds leaves
    /// without waiting for the others: rank 0 returns from `finish` while rank 1 is still
    /// inside the round (a full finish would wait for rank 1 for ever here).
    #[test]
    fn a_private_round_hides_its_buffers_and_leaves_without_waiting() {
        let (tx, rx) = std::sync::mpsc::channel();
        let buf = [7u8; 64];
        let call = Call { op: PRIVATE, send: buf.as_ptr() as usize, send_len: 64, ..Call::default() };
        std::thread::scope(|s| {
            let mut ctls = node(2, 8192).into_iter();
            let (a, b) = (ctls.next().unwrap(), ctls.next().unwrap());
            s.spawn(move || {
                let round = a.begin(&call).unwrap();
                round.finish(Ok(())).unwrap();
                tx.send(()).unwrap();
            });
            s.spawn(move || {
                let round = b.begin(&call).unwrap();
                assert_eq!((round.call(0).send, round.call(0).send_len), (0, 64));
                assert_eq!(round.remote_send(0).parts().1, 0);
                let left = rx.recv_timeout(Duration::from_secs(10));
                round.finish(Ok(())).unwrap();
                assert!(left.is_ok(), "rank 0 waited in finish of a private round");
            });
        });
    }

    /// Private staged broadcasts (the root leaves while readers still copy its last
    /// chunks) alternate with rounds that write metadata into every rank's staging area
    /// before arriving: the metadata waits for the copies, so no byte is torn.
    #[test]
    fn private_broadcasts_and_metadata_rounds_never_mix() {
        let n = 3;
        on_node(n, |ctl| {
            let me = ctl.me();
            for i in 0..300usize {
                let root = i % n;
                let len = 1 + (i * 4099) % 20_000;
                let fill = |j: usize| (j * 13 + i) as u8;
                let mut buf: Vec<u8> = if me == root { (0..len).map(fill).collect() } else { vec![0; len] };
                let round = ctl.begin(&Call { op: PRIVATE, ..Call::default() }).unwrap();
                let moved = round.stage_bcast(root, &mut buf);
                round.finish(moved).unwrap();
                assert!(buf.iter().enumerate().all(|(j, &b)| b == fill(j)), "round {i}");
                if i % 3 == 2 {
                    let meta: Vec<u64> = (0..512).map(|w| (i << 20 | me << 16 | w) as u64).collect();
                    let r = ctl.begin_staged(&Call::default(), &meta, &[]).unwrap();
                    for peer in 0..n {
                        assert_eq!(r.meta(peer, 511), (i << 20 | peer << 16 | 511) as u64);
                    }
                    r.finish(Ok(())).unwrap();
                }
            }
        });
    }

    /// One-phase rounds (the payload staged before the arrival) back to back, and between
    /// them pipelined staged broadcasts and metadata rounds, which also write the areas:
    /// every rank of every round reads exactly what its peers staged for that round, so
    /// no area is refilled while a peer still copies it out.
    #[test]
    fn one_phase_rounds_read_what_was_staged_for_them() {
        let n = 3;
        on_node(n, |ctl| {
            let me = ctl.me();
            let byte = |i: usize, r: usize, j: usize| (i * 7 + r * 31 + j) as u8;
            for i in 0..400usize {
                let len = 1 + (i * 613) % 4096;
                let mine: Vec<u8> = (0..len).map(|j| byte(i, me, j)).collect();
                let call = Call { op: PRIVATE, send_len: len, ..Call::default() };
                let round = ctl.begin_staged(&call, &[], &[&mine[..len / 2], &mine[len / 2..]]).unwrap();
                for r in 0..n {
                    let mut got = vec![0u8; len];
                    round.read_staged(r, 0, &mut got);
                    assert!(got.iter().enumerate().all(|(j, &b)| b == byte(i, r, j)), "round {i}");
                }
                round.finish(Ok(())).unwrap();
                if i % 5 == 3 {
                    let mut buf = if me == 0 { mine.clone() } else { vec![0; len] };
                    let round = ctl.begin(&call).unwrap();
                    let moved = round.stage_bcast(0, &mut buf);
                    round.finish(moved).unwrap();
                    assert!(buf.iter().enumerate().all(|(j, &b)| b == byte(i, 0, j)));
                }
                if i % 7 == 5 {
                    let meta: Vec<u64> = (0..512).map(|w| (i << 20 | me << 16 | w) as u64).collect();
                    let r = ctl.begin_staged(&Call::default(), &meta, &[]).unwrap();
                    assert_eq!(r.meta((me + 1) % n, 511), (i << 20 | ((me + 1) % n) << 16 | 511) as u64);
                    r.finish(Ok(())).unwrap();
                }
            }
        });
    }

    /// The deferred verdict, with threads as ranks: the root of each one-phase broadcast
    /// leaves right after staging (`leave_staged`), the readers copy what it staged. Every
    /// seventh round the readers fail the round (as a bad call's verdict would fail it on
    /// every rank that judges it), while the root has returned `Ok`: the next round then
    /// fails on every rank with `PreviousFailed`, whether it is another broadcast whose root
    /// leaves or a plain round, and the round after it succeeds. Every eleventh round every
    /// rank names itself the root and leaves, so nobody judges the round: each rank learns
    /// at its next call that the calls differed, and that call fails everywhere. Here the
    /// broadcasts alternate with plain rounds.
    #[test]
    fn a_deferred_verdict_reaches_every_rank_at_the_next_call() {
        deferred_rounds(3, |i| i % 2 == 1, |i| i % 3);
    }

    /// [`a_deferred_verdict_reaches_every_rank_at_the_next_call`] with the broadcasts back
    /// to back, their root the same for runs of rounds: a root that leaves again judges
    /// the round it left after publishing the next, and a reader that leaves next judges
    /// the round it read.
    #[test]
    fn a_deferred_verdict_of_rounds_left_back_to_back() {
        deferred_rounds(3, |_| false, |i| (i / 3 + i / 17) % 3);
        deferred_rounds(4, |i| i % 13 == 6, |i| (i / 2 + i / 5) % 4);
    }

    /// The rounds of the deferred verdict's tests on `n` threads: round `i` is plain where
    /// `plain(i)`, else a broadcast from `root(i)` (see
    /// [`a_deferred_verdict_reaches_every_rank_at_the_next_call`]).
    fn deferred_rounds(n: usize, plain: impl Fn(usize) -> bool + Sync, root: impl Fn(usize) -> usize + Sync) {
        use crate::error::Error;
        let byte = |i: usize, j: usize| (i * 7 + j * 13) as u8;
        on_node(n, |ctl| {
            let me = ctl.me();
            // Rounds after a failure whose root left: they must fail with `PreviousFailed`.
            let mut doomed = false;
            for i in 0..300usize {
                let outcome = if i % 11 == 10 {
                    // Every rank its own root: the calls differ, nobody judges.
                    let call = Call {
                        op: PRIVATE | 2,
                        root: me as i64,
                        aux: me as u64,
                        send_len: 8,
                        ..Call::default()
                    };
                    ctl.leave_staged(&call, &[], &[&[me as u8; 8]]).map(|()| true)
                } else if plain(i) {
                    ctl.begin(&Call { op: 9, ..Call::default() })
                        .and_then(|r| r.finish(Ok(())))
                        .map(|()| true)
                } else {
                    let root = root(i);
                    let len = 1 + (i * 37) % 3000;
                    let call = Call {
                        op: PRIVATE | 2,
                        root: root as i64,
                        aux: root as u64,
                        send_len: len,
                        ..Call::default()
                    };
                    if me == root {
                        let buf: Vec<u8> = (0..len).map(|j| byte(i, j)).collect();
                        ctl.leave_staged(&call, &[], &[&buf[..len / 3], &buf[len / 3..]]).map(|()| true)
                    } else {
                        ctl.begin_staged(&call, &[], &[]).and_then(|round| {
                            let mut got = vec![0u8; len];
                            round.read_staged(root, 0, &mut got);
                            assert!(got.iter().enumerate().all(|(j, &b)| b == byte(i, j)), "round {i}");
                            let fails = i % 7 == 0;
                            let verdict = match fails {
                                true => Err(Error::Unsupported { rank: me as i32, what: "test".into() }),
                                false => Ok(()),
                            };
                            round.finish(verdict).map(|()| true).or_else(|e| match (fails, e) {
                                (true, Error::Unsupported { .. }) => Ok(false),
                                (_, e) => Err(e),
                            })
                        })
                    }
                };
                match (doomed, outcome) {
                    (true, Err(Error::PreviousFailed { rank })) => assert_eq!(rank, me as i32, "round {i}"),
                    (false, Ok(_)) => {}
                    other => panic!("rank {me}, round {i}: {other:?}"),
                }
                // The next round is doomed if this one failed (or, for all-roots rounds,
                // was bad) while a rank had left it.
                doomed = !doomed && (i % 11 == 10 || (!plain(i) && i % 7 == 0));
            }
        });
    }

    #[test]
    fn staged_broadcast_delivers_every_byte_for_odd_sizes() {
        let n = 3;
        let sizes = [0usize, 1, 4095, 4096, 4097, 8192 * 3 + 5, 100_000];
        on_node(n, |ctl| {
            for (i, &len) in sizes.iter().enumerate() {
                let root = i % n;
                let mut buf: Vec<u8> = if ctl.me() == root {
                    (0..len).map(|j| (j * 31 + i) as u8).collect()
                } else {
                    vec![0xAA; len]
                };
                let round = ctl.begin(&Call::default()).unwrap();
                let moved = round.stage_bcast(root, &mut buf);
                round.finish(moved).unwrap();
                assert!(buf.iter().enumerate().all(|(j, &b)| b == (j * 31 + i) as u8), "len {len}");
            }
        });
    }
}
