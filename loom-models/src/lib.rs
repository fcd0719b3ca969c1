//! Loom models of zcoll's shared-memory protocol (`src/sync/`), with threads standing in
//! for the ranks of a node.
//!
//! The real protocol runs on atomics in an `mmap`ed segment, where loom's atomics cannot
//! live, so each module here is a faithful copy of one protocol's steps: the same words,
//! the same stores and loads in the same order, with the same memory orderings. Every
//! model cites the functions of `src/sync/` it mirrors; a change of an ordering there
//! must be made here too. What a rank's process owns (its buffers, the payload bytes of a
//! staging area or a FIFO slot) is a [`loom::cell::UnsafeCell`], so that an access that
//! the protocol fails to order is reported by loom as a causality violation, and a value
//! read too early fails an assertion.
//!
//! Every model takes a weakening: [`Weakening::None`] runs the protocol as `src/sync/`
//! has it, and loom must find no failure in any interleaving (within the preemption bound
//! of [`check`]); each other variant weakens one ordering (or drops one wait) the
//! protocol's correctness rests on, and loom must find the interleaving that breaks it.
//! The tests (`tests/models.rs`) assert both.
//!
//! The models:
//!
//! - [`round`]: a full round, arrive (stamp and arrival), check (the same verdict from the
//!   same records on every rank), move (a peer's buffer read in place), finish (`done`
//!   and the statuses), over successive rounds with the records double-buffered by
//!   epoch parity;
//! - [`split`]: a broadcast round split at issue, the design for overlap at 64-256 KiB:
//!   both ranks arrive at issue, the root returns, a reader that finds every record
//!   published judges and copies at issue, and each `wait` finishes the round (with a
//!   mismatch found at issue reported by `wait`);
//! - [`private`]: private rounds left without waiting (the owed wait, `settle`) and
//!   one-phase rounds (`begin_staged`, `read_staged`, `leave_early`) in turn;
//! - [`deferred`]: the deferred verdict: a rank leaves one-phase rounds before their
//!   verdict (`leave_staged`), learns it at its next call (`learn`), and a failure fails
//!   the next round on every rank (`FLAG_PREV_FAILED`) and no other;
//! - [`bcast_fifo`]: the Bcast FIFO, the countdown of readers and the last reader
//!   freeing the slot;
//! - [`p2p_fifo`]: the point-to-point FIFO, several writers (`push` and `try_push`) and
//!   one reader;
//! - [`counter`]: the message counters, `progress` as readiness and the completion
//!   counter counted from the round's `base`, in eager rounds;
//! - [`claims`]: the claims that split a read-write broadcast's copy at run time, the
//!   reader's word opened at each arrival and claimed from both ends.

pub mod bcast_fifo;
pub mod claims;
pub mod counter;
pub mod deferred;
pub mod p2p_fifo;
pub mod private;
pub mod round;
pub mod split;

/// Which ordering of a model is weakened (or which wait is dropped). Each model accepts
/// [`Weakening::None`] and the variants its docs list; it panics on any other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weakening {
    /// The protocol as `src/sync/` has it.
    None,
    /// The Release store that publishes (a round's stamp, a packet's `seq`, a rank's
    /// `progress`) made Relaxed.
    PublishRelaxed,
    /// The Acquire load that polls for that publication made Relaxed.
    PollRelaxed,
    /// The Release store of `done` at the end of a round made Relaxed.
    DoneRelaxed,
    /// A one-phase round stages its payload without first settling the private round
    /// this rank left without waiting (`Control::begin_staged` without `settle`).
    NoSettle,
    /// A rank that left the round before reads the statuses of that round in `learn`
    /// without first waiting for every rank's `done` of it.
    NoLearnWait,
    /// A round's end stores `STATUS` after `done` (instead of before its Release).
    StatusAfterDone,
    /// A rank that fails a one-phase round alone, after the verdict, while the others may
    /// leave it with a success, does not note it for its next call
    /// (`Round::finish_alone` without `saw_leaver`).
    NoAloneNote,
    /// A call record's flag word (`FLAG_LEFT`, `FLAG_PREV_FAILED`) stored after the
    /// Release store of the record's stamp (instead of before it).
    FlagsAfterStamp,
    /// A FIFO reader's decrement of the slot's countdown made Relaxed (instead of AcqRel).
    CountdownRelaxed,
    /// The last FIFO reader's increment of `head` made Relaxed (instead of Release).
    HeadRelaxed,
    /// A reader's (or writer's) increment of the owner's completion counter made Relaxed.
    CompleteRelaxed,
    /// A giver that left a split round at issue ends it in `wait` without waiting for the
    /// readers' end words (the root of [`split`] touches its buffer again too early).
    GiverSkipsEnd,
    /// A claim made of a load and a store instead of one compare-and-swap.
    ClaimNotAtomic,
    /// The owner of a claim word does not open it when it arrives.
    NoOpen,
    /// The call records kept by epoch parity (two per rank) instead of modulo three.
    TwoRecords,
    /// A failure every rank of its round reported (`PreviousFailed`, agreed) counted as
    /// one some rank may not know of, to pass on to the next round.
    CountAgreed,
    /// A leaver that has no round to judge does not wait for the end of the round before
    /// (its next leave then restages a half a peer may still read).
    LeaveUnsettled,
    /// A leaver judges the round before only where it saw a rank leave it (not where a
    /// rank may have failed it alone while this rank left it early with a success).
    JudgeOnlyLeft,
}

impl Weakening {
    /// `strong`, unless this weakening is `which`: then Relaxed.
    pub(crate) fn ordering(self, which: Weakening, strong: Ordering) -> Ordering {
        if self == which {
            Ordering::Relaxed
        } else {
            strong
        }
    }
}

use loom::sync::atomic::Ordering;

/// The preemption bound of the models with three threads (the FIFOs, the counter with
/// two readers): every interleaving with at most this many preemptions is explored. Two
/// covers every reordering of two ranks around one flag; three costs these models ten
/// times as long (over two minutes for the set).
pub const PREEMPTIONS: usize = 2;

/// The preemption bound of the models with two threads (the rounds, the counter with one
/// reader), which stay cheap with one more.
pub const PREEMPTIONS_TWO_RANKS: usize = 3;

/// The branches (atomic operations and yields) one interleaving may take before loom
/// calls it a livelock.
pub const MAX_BRANCHES: usize = 20_000;

/// Runs `model` under loom with `preemptions` as the bound, over every interleaving
/// within it, and returns how many interleavings it ran.
///
/// # Panics
///
/// If any interleaving fails: a causality violation on an [`loom::cell::UnsafeCell`], a
/// failed assertion, a deadlock.
pub fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) -> usize {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    // The waits spin (with a yield per poll, as `spin` does), and every poll is a branch:
    // room for long waits, while a wait that never ends still fails.
    builder.max_branches = MAX_BRANCHES;
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model()
    });
    runs.load(std::sync::atomic::Ordering::Relaxed)
}

/// Waits until `ready()` holds: `sync::wait::wait_until_any`, whose spinning, yielding
/// and sleeping are all one yield here (loom then schedules another thread).
pub(crate) fn spin(mut ready: impl FnMut() -> bool) {
    while !ready() {
        loom::thread::yield_now();
    }
}

/// The polls after which a wait of `spin_pruned` stops loom's exploration of the rest
/// of that execution.
pub const POLLS: usize = 2;

/// Waits until `ready()` holds, like [`spin`], for models where two threads may wait on
/// a third: loom's scheduler then lets the two waiters hand the processor to each other
/// for ever (loom issue #53), an execution that never ends. After [`POLLS`] failed polls
/// the execution is finished without exploring its remaining alternatives
/// (`loom::skip_branch`); the waits and everything before them are still explored in
/// every interleaving.
pub(crate) fn spin_pruned(mut ready: impl FnMut() -> bool) {
    let mut polls = 0;
    while !ready() {
        polls += 1;
        if polls == POLLS {
            loom::skip_branch();
        }
        loom::thread::yield_now();
    }
}

/// A `progress`/`ack` value: the epoch's low 32 bits above the step (`sync::round::stamp`).
pub(crate) fn stamp(epoch: u64, step: u32) -> u64 {
    (epoch as u32 as u64) << 32 | step as u64
}

/// Whether stamp `seen` is at or past stamp `want` (`sync::round::reached`).
pub(crate) fn reached(seen: u64, want: u64) -> bool {
    let ahead = ((seen >> 32) as u32).wrapping_sub((want >> 32) as u32) as i32;
    ahead > 0 || (ahead == 0 && seen as u32 >= want as u32)
}
