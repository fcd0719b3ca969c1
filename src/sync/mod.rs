//! What lives in the control segment, and the protocol every collective follows.
//!
//! The segment holds a small header, one cache-line padded [`Slot`](layout::Slot) per local rank, and
//! one staging area per local rank for copy-in/copy-out. A collective call is a
//! [`Round`]:
//!
//! 1. **Arrive.** The rank writes its [`Call`] (what it calls, the root, its buffers'
//!    addresses and lengths) into its slot, then publishes the round's epoch in its
//!    `arrive` flag, and waits until every local rank has arrived at this epoch.
//! 2. **Check.** Every rank reads every rank's `Call` and decides, by the same pure
//!    function of the same data, whether the call is valid. The ranks therefore agree on
//!    the verdict without another message.
//! 3. **Move.** The algorithm copies data, signalling steps through `progress`.
//! 4. **Finish.** The rank publishes its status and the epoch in `done`, waits for every
//!    local rank's `done`, and fails with `PeerFailed` if another rank failed. Only then
//!    may it return, so no peer touches its buffers after the call.
//!
//! A **private** call ([`PRIVATE`] in its `op`) shares no buffer: peers see its lengths,
//! never its addresses, and its data crosses only through the segment (staging areas,
//! FIFOs). Once such a round succeeded, nothing of the rank's can be touched any more and
//! every rank has reached the same verdict in step 2, so the rank posts `done` and returns
//! without waiting for the others' (one flag phase instead of two: a barrier is just the
//! arrive phase). The wait is owed, not dropped: the next round's arrive phase covers it
//! (every rank arrives at `e + 1` only after leaving `e`), and a step that writes into the
//! rank's own staging area before that phase (metadata, an eager round's board) first
//! settles it ([`Control::settle`]).
//!
//! A rank that only gives in a one-phase round (the root of a small broadcast or scatter,
//! a non-root of a small reduce or gather) may
//! **leave it before its verdict** ([`Control::leave_staged`]): it stages its bytes,
//! publishes its call marked as left, and returns. The verdict is deferred: the readers
//! judge the round, and a rank that fails it marks its next call record, which fails that
//! next round on every rank (`Error::PreviousFailed`). The leaver judges the round it
//! left at its next call, once every rank has ended it: before it publishes if it stays
//! in that call ([`Control::learn`]); if it leaves that one too, after it published (so
//! that its peers see its bytes at once), as every rank that leaves a call judges the one
//! before it. A leaver is therefore at most two
//! rounds ahead of the slowest rank, and a failure every rank reported
//! (`PreviousFailed`) is not passed on again.
//!
//! Flags are sequence numbers that only grow, so nothing is ever reset between calls:
//! `arrive` and `done` hold the epoch (64 bits: they never wrap), `progress` and `ack`
//! hold the epoch's low 32 bits above a 32-bit step, compared as serial numbers
//! (RFC 1982), which is sound because no two ranks are ever more than a few rounds apart.
//! The `Call` record is kept three times, by epoch modulo 3 (`call::RECORDS`): the record
//! of round `e` is read until every rank has ended `e + 1` (a leaver of `e + 1` judges
//! `e` after publishing), and a rank starts `e + 3` only once every rank has ended
//! `e + 1`. The staging areas' halves alternate by parity: a rank stages round `e` only
//! once every rank has ended `e - 2`.
//!
//! Every wait follows [`wait::WaitPolicy`].
//!
//! The files: `layout` (where everything lies in the segment), `call` (the call record),
//! `control` (a rank's view of the segment; arriving and ending a round), `round` (a
//! round in progress: the peers' buffers, the copies, the step counters), `fence`
//! (stopping a timed-out peer that may still write into this rank's buffers), and the
//! protocols built on them (`stage`, `parts`, `spans`, `exchange`, `fifo`, `counter`,
//! `arrival`, `meta`), and `publish`, the one copy into a staging area that peers read.

#![allow(unsafe_code)]

mod arrival;
mod call;
mod control;
mod counter;
mod exchange;
mod fence;
pub(crate) mod fifo;
mod fragments;
mod layout;
mod meta;
mod parts;
mod publish;
mod round;
mod spans;
mod stage;
#[cfg(test)]
mod tests;
pub(crate) mod wait;

/// The one copy of a block between two buffers of this rank (streaming stores for large
/// ones), and of a layout's bytes (prefetching strided fragments): a collective's own
/// block goes through them, as its peers' blocks go through the transports' copies.
pub(crate) use crate::transport::copy::{copy_block, copy_runs, STREAM_LARGE};
use call::STATUS;
pub(crate) use call::{Call, Kind, PRIVATE};
pub(crate) use control::{Control, Registration};
pub(crate) use counter::{End, CLAIM_MAX};
pub(crate) use exchange::Span;
pub(crate) use layout::SCRATCH_HALF;
pub(crate) use meta::{Filled, Meta, Slots};
pub(crate) use parts::Toward;
pub(crate) use round::Round;
use round::{reached, stamp};
pub(crate) use stage::{Chunk, FoldOrder, Listed, Payload};
