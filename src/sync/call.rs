//! The call record: what a rank publishes when it arrives at a collective, and the bits
//! of its words.

use crate::error::{failure_key, Error};
use std::sync::atomic::{AtomicU64, Ordering};

/// The bits of a call record's flag word ([`FLAGS`]): `recv_writable`, whether `send` and
/// `recv` lie in the publisher's shared heap, the deferred verdict's two bits, and above
/// them the id of the exposure the call uses (0 for none).
pub(super) const FLAG_WRITABLE: u64 = 1;
pub(super) const FLAG_SEND_HEAP: u64 = 2;
pub(super) const FLAG_RECV_HEAP: u64 = 4;
/// The publisher left the round right after arriving, before any verdict
/// ([`Control::leave_staged`](super::Control::leave_staged)): it learns the round's
/// outcome at its next call.
pub(super) const FLAG_LEFT: u64 = 8;
/// The round before this one failed, and a rank had left it before its verdict: every
/// rank fails this one with `Error::PreviousFailed` (the deferred verdict).
pub(super) const FLAG_PREV_FAILED: u64 = 16;
pub(super) const EXPOSURE_SHIFT: u32 = 8;
/// A bit of [`Call::op`] (above what `coll` packs there): the call shares no buffer with
/// its peers, only lengths (see the module docs). A rank's verdict on it must depend only
/// on the published calls, and its data must move only through the segment.
pub(crate) const PRIVATE: u64 = 1 << 63;
/// Where each word lies in a call record. The first cache line of the record holds the
/// round's stamp and everything the verdict reads, so one cache-line transfer shows a peer
/// both that a rank arrived and what it called; the addresses (which a private call does
/// not publish, and which only the copies read) and the status come after.
pub(super) const STAMP: usize = 0;
pub(super) const OP: usize = 1;
const ROOT: usize = 2;
const SEND_LEN: usize = 3;
const RECV_LEN: usize = 4;
pub(super) const FLAGS: usize = 5;
const AUX: usize = 6;
const AUX2: usize = 7;
const SEND: usize = 8;
const RECV: usize = 9;
/// The round's outcome on this rank: [`SUCCEEDED`], or a [`failed_status`] naming whom
/// it blames.
pub(super) const STATUS: usize = 10;
/// The end of the round on this rank, on the status's line: `epoch << 1 | failed`,
/// posted (Release) right before the slot's `done` ([`Control::post_done`]). A rank that
/// waits for a peer's end of a round and then reads its status and call (the leaver's
/// [`Control::learn`], [`Control::end`]) waits on this word instead of `done`: the end,
/// the status and the copies of the words `learn` compares then cross between the caches
/// in one line, where `done`, the status and the record's head took three.
///
/// [`Control::post_done`]: super::Control::post_done
/// [`Control::learn`]: super::Control::learn
/// [`Control::end`]: super::Control::end
pub(super) const DONE: usize = 11;
/// Copies of `OP`, `ROOT` and `AUX` on the status's line, written with them: what the
/// leaver's `learn` compares, read without the record's head.
const OP_COPY: usize = 12;
const ROOT_COPY: usize = 13;
const AUX_COPY: usize = 14;
/// Words in a call record.
pub(super) const WORDS: usize = 15;
/// The records a rank keeps, by epoch modulo this: the record of round `e` is read until
/// every rank has ended round `e + 1` (a rank that left `e` and leaves `e + 1` judges `e`
/// after it published `e + 1`, [`Control::leave_staged`]), and a rank publishes round
/// `e + 3` only once every rank has ended `e + 1` (it awaited their arrivals at `e + 2`,
/// or, leaving `e + 2`, their ends of `e + 1`).
///
/// [`Control::leave_staged`]: super::Control::leave_staged
pub(super) const RECORDS: usize = 3;
const _: () = assert!(AUX2 < 8, "the verdict's words share the stamp's cache line");
const _: () = assert!(
    STATUS >= 8 && DONE >= 8 && OP_COPY >= 8 && AUX_COPY < 16,
    "the end, the status and the copies share the record's second cache line"
);

/// The collectives, as published in the low byte of a call record's [`Call::op`]. They
/// live here, with the record, so that a long wait can name the call it is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Barrier = 1,
    Bcast = 2,
    Reduce = 7,
    Allreduce = 8,
    Probe = 15,
    Scan = 16,
    Exscan = 17,
    ReduceScatterBlock = 18,
    Scatter = 3,
    Gather = 4,
    Scatterv = 9,
    Gatherv = 10,
    Allgatherv = 11,
    Alltoallv = 12,
    Allgather = 5,
    Alltoall = 6,
    /// Registering an exposure, and withdrawing it.
    Expose = 20,
    Withdraw = 21,
    /// The layout collectives' direct copies (`coll::layout`; which one is the parameter).
    Layout = 22,
}

impl Kind {
    /// The collective's name, as the hang report prints it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "bcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Probe => "probe",
            Kind::Scan => "scan",
            Kind::Exscan => "exscan",
            Kind::ReduceScatterBlock => "reduce_scatter_block",
            Kind::Scatter => "scatter",
            Kind::Gather => "gather",
            Kind::Scatterv => "scatterv",
            Kind::Gatherv => "gatherv",
            Kind::Allgatherv => "allgatherv",
            Kind::Alltoallv => "alltoallv",
            Kind::Allgather => "allgather",
            Kind::Alltoall => "alltoall",
            Kind::Expose => "expose",
            Kind::Withdraw => "withdraw",
            Kind::Layout => "layout",
        }
    }

    /// The collective whose code is the low byte of `op`, if any.
    pub(crate) fn of(op: u64) -> Option<Kind> {
        [
            Kind::Barrier,
            Kind::Bcast,
            Kind::Reduce,
            Kind::Allreduce,
            Kind::Probe,
            Kind::Scan,
            Kind::Exscan,
            Kind::ReduceScatterBlock,
            Kind::Scatter,
            Kind::Gather,
            Kind::Scatterv,
            Kind::Gatherv,
            Kind::Allgatherv,
            Kind::Alltoallv,
            Kind::Allgather,
            Kind::Alltoall,
            Kind::Expose,
            Kind::Withdraw,
            Kind::Layout,
        ]
        .into_iter()
        .find(|k| *k as u64 == op & 0xff)
    }
}

/// What a rank publishes when it arrives at a collective.
///
/// `op` is chosen by `coll` (collective, algorithm and parameters packed in one word);
/// `sync` only transports it, like `aux` and `aux2`. `send`/`recv` are addresses in the
/// publishing process, with their lengths in bytes: `send` may be read by peers during
/// the round; `recv` may be written by peers only if `recv_writable` is set, which a rank
/// does only when its algorithm lets peers write into it (the address then comes from a
/// unique borrow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) op: u64,
    pub(crate) root: i64,
    pub(crate) send: usize,
    pub(crate) send_len: usize,
    pub(crate) recv: usize,
    pub(crate) recv_len: usize,
    pub(crate) recv_writable: bool,
    pub(crate) aux: u64,
    pub(crate) aux2: u64,
}

impl Call {
    /// The call of a rank that publishes `send` and `recv`, peers allowed to write into
    /// `recv` if `recv_writable` (its address comes from a unique borrow); `root`, `aux`
    /// and `aux2` are 0, for the caller to set.
    #[inline]
    pub(crate) fn new(op: u64, send: &[u8], recv: &mut [u8], recv_writable: bool) -> Call {
        Call {
            op,
            send: send.as_ptr() as usize,
            send_len: send.len(),
            recv: recv.as_mut_ptr() as usize,
            recv_len: recv.len(),
            recv_writable,
            ..Call::default()
        }
    }

    /// [`Call::new`] for a rank whose one buffer `buf` is both what it sends and where it
    /// receives (a broadcast's).
    #[inline]
    pub(crate) fn in_place(op: u64, buf: &mut [u8], recv_writable: bool) -> Call {
        Call { send: buf.as_ptr() as usize, send_len: buf.len(), ..Call::new(op, &[], buf, recv_writable) }
    }

    /// Writes the call into `record` (not its stamp nor its status), with `flags` as the
    /// flag word; a private call's addresses are written as 0.
    pub(super) fn store(&self, record: &[AtomicU64; WORDS], flags: u64) {
        let private = self.op & PRIVATE != 0;
        let words = [
            (OP, self.op),
            (ROOT, self.root as u64),
            (SEND_LEN, self.send_len as u64),
            (RECV_LEN, self.recv_len as u64),
            (FLAGS, flags),
            (AUX, self.aux),
            (AUX2, self.aux2),
            (SEND, if private { 0 } else { self.send as u64 }),
            (RECV, if private { 0 } else { self.recv as u64 }),
            (OP_COPY, self.op),
            (ROOT_COPY, self.root as u64),
            (AUX_COPY, self.aux),
        ];
        for (i, v) in words {
            record[i].store(v, Ordering::Relaxed);
        }
    }

    /// The call in `record`, which its author published before a stamp or arrival this
    /// rank saw with Acquire, with its addresses: for the copies, which reach the buffers.
    /// A private call's addresses are not even read: they are 0.
    pub(super) fn load(record: &[AtomicU64; WORDS]) -> Call {
        let head = Call::load_head(record);
        match head.op & PRIVATE {
            0 => Call {
                send: record[SEND].load(Ordering::Relaxed) as usize,
                recv: record[RECV].load(Ordering::Relaxed) as usize,
                ..head
            },
            _ => head,
        }
    }

    /// What [`load_head`](Call::load_head) reads back from a record this call was
    /// [`store`](Call::store)d in with `flags`, computed without reading it: the author's
    /// own view of its record ([`Round::call`](super::Round::call)).
    pub(super) fn head(&self, flags: u64) -> Call {
        Call { send: 0, recv: 0, recv_writable: flags & FLAG_WRITABLE != 0, ..*self }
    }

    /// How the call in `record` compares with `own` (published with `flags`) in the words
    /// every verdict compares first: collective, algorithm and parameters (`op`, but for
    /// its private bit), `root`, `aux` and the exposure (in the flag word), read straight
    /// from the record, four loads where [`load_head`](Call::load_head) makes eight.
    /// `None` where they differ; else whether the private bits agree too, and whether the
    /// record's author left the round ([`FLAG_LEFT`]).
    pub(super) fn compare(record: &[AtomicU64; WORDS], own: &Call, flags: u64) -> Option<(bool, bool)> {
        let w = |i: usize| record[i].load(Ordering::Relaxed);
        let (op, theirs) = (w(OP), w(FLAGS));
        let same = (op ^ own.op) & !PRIVATE == 0
            && w(ROOT) == own.root as u64
            && w(AUX) == own.aux
            && theirs >> EXPOSURE_SHIFT == flags >> EXPOSURE_SHIFT;
        same.then_some((op == own.op, theirs & FLAG_LEFT != 0))
    }

    /// The `aux2` word of the call in `record`.
    pub(super) fn aux2(record: &[AtomicU64; WORDS]) -> u64 {
        record[AUX2].load(Ordering::Relaxed)
    }

    /// The send and receive lengths of the call in `record`.
    pub(super) fn lens(record: &[AtomicU64; WORDS]) -> (usize, usize) {
        let w = |i: usize| record[i].load(Ordering::Relaxed) as usize;
        (w(SEND_LEN), w(RECV_LEN))
    }

    /// The words of the call in `record` that a verdict reads, all on the stamp's cache
    /// line, with the addresses as 0: they lie on the record's second line, which only a
    /// copy needs ([`load`](Call::load)). A verdict that read them would fetch that line
    /// from the author's cache, one more transfer after the stamp's, in every call that
    /// publishes buffers, even one whose bytes then cross through the staging areas alone.
    pub(super) fn load_head(record: &[AtomicU64; WORDS]) -> Call {
        let w = |i: usize| record[i].load(Ordering::Relaxed);
        Call {
            op: w(OP),
            root: w(ROOT) as i64,
            send: 0,
            send_len: w(SEND_LEN) as usize,
            recv: 0,
            recv_len: w(RECV_LEN) as usize,
            recv_writable: w(FLAGS) & FLAG_WRITABLE != 0,
            aux: w(AUX),
            aux2: w(AUX2),
        }
    }
}

/// The end of round `epoch` as posted in a record's [`DONE`] word, for a round this rank
/// ended with `status` ([`STATUS`]).
pub(super) fn end_word(epoch: u64, status: u64) -> u64 {
    epoch << 1 | (status != SUCCEEDED) as u64
}

/// The [`STATUS`] of a round that a rank ended with a success.
pub(super) const SUCCEEDED: u64 = 0;
/// The bit of a failed round's [`STATUS`]; below it, the [`failure_key`] of the rank's
/// error, which names the rank it blames (a peer it found dead, stalled or failed, or
/// itself). So a rank that only sees a round fail names the rank that failed first-hand,
/// not the peer that passed the failure on.
const FAILED: u64 = 1 << 40;
/// Beside [`FAILED`]: the round failed with `Error::PreviousFailed`, which every rank of
/// the round reports (the deferred verdict fails the round after a failure on every rank
/// alike), so no rank has to be told of it at the next call ([`unheard`]). Without the
/// bit, a failure would pass from call to call for as long as a rank leaves each one.
const AGREED: u64 = 1 << 41;
/// Beside [`FAILED`]: the rank saw a rank leave the round before its verdict, or failed
/// it alone while the others could leave it with a success
/// (`Control::saw_leaver`), so it says so in its next call record
/// (`FLAG_PREV_FAILED`), which fails that call on every rank. A giver that leaves the next
/// call judges the round by this bit too, so it fails that call exactly where the others
/// do.
pub(super) const PASSED: u64 = 1 << 42;

/// The [`STATUS`] of a round that rank `me` ended with the error `e` (`None`: its own
/// step failed with no error to say so, as a panic).
pub(super) fn failed_status(e: Option<&Error>, me: i32) -> u64 {
    let key = e.map_or(i64::from(me as u32), |e| failure_key(e, me));
    let agreed = if matches!(e, Some(Error::PreviousFailed { .. })) { AGREED } else { 0 };
    FAILED | agreed | key as u64
}

/// Whether [`STATUS`] `status` is a failure that its rank passes on to its next call
/// ([`PASSED`]) and that a rank of the round may not know of (not [`AGREED`]): the
/// deferred verdict fails the next round on every rank.
pub(super) fn unheard(status: u64) -> bool {
    status & (FAILED | PASSED | AGREED) == FAILED | PASSED
}

/// The [`failure_key`] that a failed round's [`STATUS`] carries, or `None` for a round
/// that succeeded.
pub(super) fn blamed(status: u64) -> Option<i64> {
    (status != SUCCEEDED).then_some((status & (FAILED - 1)) as i64)
}

/// Whether a record's [`DONE`] word says that its author ended round `epoch` (or a
/// later one kept in the same record).
pub(super) fn ended(word: u64, epoch: u64) -> bool {
    word >> 1 >= epoch
}

impl Call {
    /// What the leaver's [`Control::learn`](super::Control::learn) compares of the call in
    /// `record` (`op`, `root`, `aux`), from their copies on the status's line, which it
    /// has just fetched to read the end and the status.
    pub(super) fn compared(record: &[AtomicU64; WORDS]) -> (u64, i64, u64) {
        let w = |i: usize| record[i].load(Ordering::Relaxed);
        (w(OP_COPY), w(ROOT_COPY) as i64, w(AUX_COPY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A call read back from its record is the call written, but for the addresses of
        /// a private call, which are never published; the flag word is kept whole.
        #[test]
        fn a_record_reads_back_what_was_stored(
            op: u64, root: i64, send: usize, send_len: usize, recv: usize, recv_len: usize,
            recv_writable: bool, aux: u64, aux2: u64, other_flags in 0u64..1 << 20,
        ) {
            let call = Call { op, root, send, send_len, recv, recv_len, recv_writable, aux, aux2 };
            let record: [AtomicU64; WORDS] = Default::default();
            let flags = (other_flags & !FLAG_WRITABLE) | recv_writable as u64;
            call.store(&record, flags);
            let private = op & PRIVATE != 0;
            let expected = if private { Call { send: 0, recv: 0, ..call } } else { call };
            prop_assert_eq!(Call::load(&record), expected);
            prop_assert_eq!(Call::load_head(&record), Call { send: 0, recv: 0, ..call });
            prop_assert_eq!(Call::load_head(&record), call.head(flags));
            let left = flags & FLAG_LEFT != 0;
            prop_assert_eq!(Call::compare(&record, &call, flags), Some((true, left)));
            let other = Call { op: op ^ PRIVATE, ..call };
            prop_assert_eq!(Call::compare(&record, &other, flags), Some((false, left)));
            let other = Call { op: op ^ 1, ..call };
            prop_assert_eq!(Call::compare(&record, &other, flags), None);
            prop_assert_eq!(Call::compare(&record, &call, flags ^ 1 << EXPOSURE_SHIFT), None);
            prop_assert_eq!(Call::lens(&record), (send_len, recv_len));
            prop_assert_eq!(Call::aux2(&record), aux2);
            prop_assert_eq!(record[FLAGS].load(Ordering::Relaxed), flags);
            prop_assert_eq!(Call::compared(&record), (op, root, aux));
            // The stamp and the status are not the record's to write.
            prop_assert_eq!(record[STAMP].load(Ordering::Relaxed), 0);
            prop_assert_eq!(record[STATUS].load(Ordering::Relaxed), 0);
            prop_assert_eq!(record[DONE].load(Ordering::Relaxed), 0);
        }
    }
}
