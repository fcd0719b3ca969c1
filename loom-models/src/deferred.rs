//! The deferred verdict (`src/sync/stage.rs`, `src/sync/control.rs`, `src/sync/round.rs`):
//! a rank that only gives in a one-phase round leaves it before its verdict, and judges
//! the round before it in the same call, after publishing.
//!
//! A leaver (`Control::leave_staged`) first looks at what it knows without waiting (if
//! its own status of the round before is a failure it passes on, it takes part in this
//! round as a failed rank instead, `Control::abandon` with `FLAG_PREV_FAILED`, and stages
//! nothing), settles an owed wait unless the round owed was one-phase, then stages its
//! payload in half `epoch % 2` of its area and publishes its record
//! (`Control::publish_flagged`: the words and the copy of `OP`, `FLAGS` with `FLAG_LEFT`,
//! Relaxed; `STATUS = 0`, Relaxed; `STAMP`, Release; `arrive`, Release). Only then does it
//! wait for every rank's end word (`DONE`, Acquire) of the round before, if it has not
//! seen them yet, and judge that round (`Control::judge_left`: every rank's `STATUS`, and,
//! where it left that round too, every copy of `OP`, Relaxed, on the record's second
//! line). A status counts where its rank passes the failure on to its next call
//! (`PASSED`: it saw a rank leave the round, or failed it alone) and not every rank
//! reported it (`AGREED`, a `PreviousFailed`). It posts (`Control::post_done`) its status
//! (a success, or an agreed failure: that round failed, so this one fails on every rank),
//! the end word `DONE` (Release) and `done` (Release), and returns.
//!
//! The records are kept by epoch modulo 3: a leaver reads the records of the round before
//! after it published its own, while a reader that finished that round may already
//! publish the next, so the record of round `e` must stay until every rank has ended
//! `e + 1`. The staging halves stay by parity: a rank stages `e` only once every rank has
//! ended `e - 2`, the last round that used that half.
//!
//! A reader starts the round as a one-phase round (`Control::begin_staged`, through
//! `learn`: a rank that left the round before waits for every end word of it and judges
//! it; a rank that took part in the whole round before, and saw a rank leave it, failed
//! it if its own status says so), arrives (`Control::arrive`: publish, wait for every
//! `STAMP`, Acquire), notes whether a rank left (`Round::previous`: `FLAG_LEFT` sets
//! `saw_leaver`) and fails the round at once if a record carries `FLAG_PREV_FAILED`.
//! Otherwise it judges every record (their `OP` and `SEND_LEN`), copies the leaver's
//! payload out (`Round::read_staged`) and finishes (`Round::finish`): a success posts
//! `done` and leaves; a failure ends the round (`Control::end`: `post_done`; every end
//! word, Acquire; the statuses).
//!
//! [`TWO`] runs two ranks, one round after another:
//!
//! 1. a one-phase round in which both take part (`begin_staged`, rank 0 stages in half 1,
//!    rank 1 copies it out; both leave early);
//! 2. rank 0 leaves a one-phase round (half 0) with a private record, where rank 1
//!    publishes one that is not (a gatherv's leaf and root: the verdict in a round a rank
//!    left, and the leaver's judgement, compare the calls without the private bit); rank 1
//!    reads it and succeeds; rank 0 waits for the end of round 1 after publishing
//!    (nobody left round 1: there is nothing to judge, but half 1 is its next);
//! 3. rank 0 leaves the next one back to back (half 1 again); rank 1 reads it, and fails
//!    the round (after its copy, as a failed step would);
//! 4. rank 0 leaves again: it publishes, then finds rank 1's failure of round 3, and fails
//!    this round with an agreed status; rank 1 knows it failed a round a rank had left,
//!    and sets `FLAG_PREV_FAILED`; both fail this round (`PreviousFailed`);
//! 5. rank 0 leaves again: the failures of round 4 are agreed, so the round works (no
//!    failure passed on from call to call);
//! 6. rank 0 leaves once more and judges round 5, which worked, by its calls too, while
//!    rank 1, which read round 6, may already publish round 7;
//! 7. a plain round (not private: every rank waits for every `done`): it works.
//!
//! [`SWAP`] runs the leave passing from rank to rank: rank 0 leaves round 1, which rank 1
//! fails; rank 1 would leave round 2, knows its own failure before it publishes, and
//! abandons; rank 0, which left round 1 and reads round 2, learns it before it publishes:
//! both fail round 2. Rank 1 then leaves round 3, and rank 0, which read round 3 without
//! leaving it, leaves round 4 and judges round 3 after publishing; a plain round ends it.
//!
//! Every rank checks each round's outcome against the oracle (the failure seen by every
//! rank in the round after it, and only there), that every record it judges is of this
//! round (the model's `op` names its round), and every payload it copies; loom checks
//! that no half is restaged while a peer still reads it. A record `abandon` publishes
//! has no length (`send_len: 0`): a reader that judged it would fail the round on a
//! length mismatch, not with `PreviousFailed`.
//!
//! [`ALONE_LEAVE`] is [`ALONE`] with rank 0 leaving the rounds after the failed one: it
//! saw no leaver in that round and left it early with a success, and still finds the
//! failure when it judges it after publishing, as rank 1 flags its next record.
//!
//! [`ALONE`] runs the failure the one-phase allgatherv and alltoallv defer: in a
//! one-phase round in which both take part (no rank leaves before the verdict), rank 1
//! finds after the verdict that its own counts differ from its partner's and fails alone
//! (`Round::finish_alone`: it notes the round in `saw_leaver`, then ends it as failed),
//! while rank 0 leaves early with a success. Rank 0 learns nothing in its `learn` (it
//! neither left the round nor saw a leaver); the failure reaches it through rank 1's
//! next record alone, with `FLAG_PREV_FAILED`, and the round after fails on both ranks.
//!
//! With two ranks, the rank that failed a round knows it itself; `FLAG_PREV_FAILED`
//! carries the failure to the leaver's record and back. A third rank that succeeds in the
//! failed round and learns of it through the flag alone is not modelled: three threads
//! over even two such rounds run for longer than minutes.
//!
//! Weakenings: [`Weakening::NoAloneNote`] (of [`ALONE`]: `finish_alone` without the note),
//! [`Weakening::NoLearnWait`] (the leaver reads the statuses of the round before without
//! waiting for its end), [`Weakening::DoneRelaxed`] (every end word and `done` posted
//! Relaxed), [`Weakening::StatusAfterDone`] (`STATUS` stored after the end word and
//! `done`), [`Weakening::FlagsAfterStamp`] (the flag word, with `FLAG_LEFT` and
//! `FLAG_PREV_FAILED`, stored after the Release of the stamp),
//! [`Weakening::PublishRelaxed`] (the stamp that publishes the staged payload),
//! [`Weakening::TwoRecords`] (the records kept by parity), [`Weakening::CountAgreed`] (an
//! agreed failure counted as one to pass on), [`Weakening::LeaveUnsettled`] (a leaver
//! that left a round early with a success does not wait for its end),
//! [`Weakening::JudgeOnlyLeft`] (of [`ALONE_LEAVE`]: a leaver judges the round before only
//! where it saw a rank leave it).

use crate::{spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// What the ranks do in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A one-phase round in which rank 0 stages its payload and every rank takes part to
    /// the end (`Control::begin_staged`).
    OnePhase,
    /// The rank stages its payload and leaves (`Control::leave_staged`); every other rank
    /// reads it.
    Leave(usize),
    /// Rank 0 leaves as in `Leave`, with a private record, while every other rank
    /// publishes a record that is not private (a gatherv's leaf leaves, its root publishes
    /// its buffer): the verdict (`coll::verdict`, in a round a rank left) and the
    /// leaver's judgement compare the calls without the private bit. The readers still
    /// leave early when they succeed (`Round::leave_early`: the bytes crossed through the
    /// staging area).
    LeaveAmongPublic,
    /// A plain round, not private (`Control::begin`, `Control::end`).
    Plain,
}

impl Step {
    /// The rank that stages a payload in this round, if any.
    fn giver(self) -> Option<usize> {
        match self {
            Step::OnePhase | Step::LeaveAmongPublic => Some(0),
            Step::Leave(r) => Some(r),
            Step::Plain => None,
        }
    }

    /// The rank that leaves this round, if any.
    fn leaver(self) -> Option<usize> {
        match self {
            Step::Leave(r) => Some(r),
            Step::LeaveAmongPublic => Some(0),
            _ => None,
        }
    }
}

/// A run of the model: the ranks, the rounds in order, and the round a reader fails (and
/// which reader).
pub struct Scenario {
    /// Threads, as local ranks.
    pub ranks: usize,
    /// Round `i + 1` is `plan[i]`.
    pub plan: &'static [Step],
    /// The round that `failer` fails (after copying the payload out), and every other
    /// rank reads and succeeds in.
    pub fails: u64,
    /// The rank that fails round `fails`: a reader of it.
    pub failer: usize,
}

/// Two ranks: rank 0 leaves five one-phase rounds back to back after one it took part
/// in, and rank 1 fails the second it left.
pub const TWO: Scenario = Scenario {
    ranks: 2,
    plan: &[
        Step::OnePhase,
        Step::LeaveAmongPublic,
        Step::Leave(0),
        Step::Leave(0),
        Step::Leave(0),
        Step::Leave(0),
        Step::Plain,
    ],
    fails: 3,
    failer: 1,
};

/// Two ranks taking turns to leave: rank 1 fails the first round, which rank 0 left.
pub const SWAP: Scenario = Scenario {
    ranks: 2,
    plan: &[Step::Leave(0), Step::Leave(1), Step::Leave(1), Step::Leave(0), Step::Plain],
    fails: 1,
    failer: 1,
};

/// Two ranks: three one-phase rounds in which both take part, rank 1 failing the second
/// alone after the verdict, then a plain one.
pub const ALONE: Scenario = Scenario {
    ranks: 2,
    plan: &[Step::OnePhase, Step::OnePhase, Step::OnePhase, Step::Plain],
    fails: 2,
    failer: 1,
};

/// [`ALONE`], with rank 0 leaving the two rounds after the one rank 1 failed alone: it
/// saw no leaver in that one, and must still judge it after publishing.
pub const ALONE_LEAVE: Scenario = Scenario {
    ranks: 2,
    plan: &[Step::OnePhase, Step::OnePhase, Step::Leave(0), Step::Leave(0), Step::Plain],
    fails: 2,
    failer: 1,
};

/// The words of a record the model keeps (`call::STAMP`, `call::OP`, `call::SEND_LEN`,
/// `call::FLAGS`, `call::STATUS`, `call::DONE`, `call::OP_COPY`).
const STAMP: usize = 0;
const OP: usize = 1;
const SEND_LEN: usize = 2;
const FLAGS: usize = 3;
const STATUS: usize = 4;
const DONE: usize = 5;
const OP_COPY: usize = 6;
/// Words of a record in the model.
const WORDS: usize = 7;

/// `call::PRIVATE`, a bit of the `op` word.
const PRIVATE: u64 = 1 << 63;

/// `call::FLAG_LEFT`, `call::FLAG_PREV_FAILED`.
const FLAG_LEFT: u64 = 8;
const FLAG_PREV_FAILED: u64 = 16;

/// A `STATUS`: `call::SUCCEEDED`, a failure (`call::FAILED`), one every rank of the
/// round reported (`call::AGREED`, with `FAILED`), and one its rank passes on to its
/// next call (`call::PASSED`: it saw a rank leave the round, or failed it alone).
const SUCCEEDED: u64 = 0;
const FAILED: u64 = 1;
const AGREED: u64 = 2;
const PASSED: u64 = 4;

/// `call::RECORDS`: how many records a rank keeps, by epoch.
const RECORDS: usize = 3;

/// One rank's slot (the words the model needs) and its staging area, as two halves.
struct Rank {
    arrive: AtomicU64,
    done: AtomicU64,
    /// The call records, by epoch modulo [`RECORDS`].
    call: [[AtomicU64; WORDS]; RECORDS],
    stage: [UnsafeCell<u64>; 2],
}

/// How a round ended on a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The round worked.
    Ok,
    /// The rank's own verdict failed the round, or a peer's status did.
    Failed,
    /// `Error::PreviousFailed`: the round before failed after a rank had left it.
    PreviousFailed,
}

impl Outcome {
    /// The `STATUS` a rank posts for a round that ended so (`Control::failed`: a
    /// `PreviousFailed` is agreed).
    fn status(self) -> u64 {
        match self {
            Outcome::Ok => SUCCEEDED,
            Outcome::Failed => FAILED,
            Outcome::PreviousFailed => FAILED | AGREED,
        }
    }
}

impl Scenario {
    /// The oracle: round `fails` fails on `failer` only (another rank left it, any other
    /// rank succeeds in it), the round after fails on every rank, every other round works.
    fn expected(&self, me: usize, epoch: u64) -> Outcome {
        match epoch {
            e if e == self.fails && me == self.failer => Outcome::Failed,
            e if e == self.fails + 1 => Outcome::PreviousFailed,
            _ => Outcome::Ok,
        }
    }

    /// The call rank `me` publishes for round `epoch` (the `op` word; it names its round,
    /// so that a record of another round is seen to differ): private unless the round is
    /// plain, or it is a reader's in a round rank 0 leaves among public records.
    fn op(&self, epoch: u64, me: usize) -> u64 {
        let private = match self.step(epoch) {
            Step::Plain => false,
            Step::LeaveAmongPublic => me == 0,
            _ => true,
        };
        (private as u64) << 63 | epoch << 8 | 2
    }

    fn step(&self, epoch: u64) -> Step {
        self.plan[epoch as usize - 1]
    }

    /// Whether a rank's finish of round `epoch` that succeeds posts `done` and leaves
    /// (a private round's `Round::finish`, or after `Round::leave_early`).
    fn quiet(&self, epoch: u64) -> bool {
        self.step(epoch) != Step::Plain
    }
}

/// The payload staged for round `epoch`.
fn value(epoch: u64) -> u64 {
    epoch << 8 | 0xb
}

/// The length every rank publishes for its buffer (`Call::send_len`).
const LEN: u64 = 8;

/// One rank's `Control`: its node, index, epoch, and the deferred verdict's state.
struct Control<'n> {
    s: &'n Scenario,
    node: &'n [Rank],
    me: usize,
    epoch: u64,
    owed: u64,
    owed_staged: bool,
    left: u64,
    saw_leaver: u64,
    prev_failed: bool,
    w: Weakening,
}

impl<'n> Control<'n> {
    fn mine(&self) -> &'n Rank {
        &self.node[self.me]
    }

    /// `Slot::record`: the record of round `epoch`.
    fn record(&self, r: usize, epoch: u64) -> &'n [AtomicU64; WORDS] {
        let records = if self.w == Weakening::TwoRecords { 2 } else { RECORDS };
        &self.node[r].call[(epoch % records as u64) as usize]
    }

    /// `call::unheard`: a failure that its rank passes on to its next call, and that a
    /// rank of the round may not know of.
    fn unheard(&self, status: u64) -> bool {
        let agreed = if self.w == Weakening::CountAgreed { 0 } else { AGREED };
        status & (FAILED | PASSED) == FAILED | PASSED && status & agreed == 0
    }

    /// `wait::wait_until_any` ([`spin`]: two ranks, so no two waiters can hand the
    /// processor to each other for ever).
    fn wait(&self, ready: impl FnMut() -> bool) {
        spin(ready)
    }

    /// Waits for every rank's `done >= epoch` (`wait_ge`, Acquire).
    fn wait_done(&self, epoch: u64) {
        for peer in self.node {
            self.wait(|| peer.done.load(Ordering::Acquire) >= epoch);
        }
    }

    /// Waits for every rank's end word of round `epoch` (`Control::wait_ended`: `DONE` of
    /// that round's record, `call::ended`, Acquire).
    fn wait_ended(&self, epoch: u64) {
        for r in 0..self.node.len() {
            let record = self.record(r, epoch);
            self.wait(|| record[DONE].load(Ordering::Acquire) >> 1 >= epoch);
        }
    }

    /// `Control::post_done`: `STATUS` (Relaxed, a failure marked `PASSED` where the rank
    /// saw a leaver in the round or failed it alone), then the end word `DONE` (Release),
    /// then `done` (Release): the end of a round in `leave_staged`, `abandon`, a quiet
    /// `Round::finish` and `Control::end`.
    fn post_done(&self, epoch: u64, status: u64) {
        let status = match status != SUCCEEDED && self.saw_leaver == epoch {
            true => status | PASSED,
            false => status,
        };
        let record = self.record(self.me, epoch);
        let done = self.w.ordering(Weakening::DoneRelaxed, Ordering::Release);
        let end = epoch << 1 | (status != SUCCEEDED) as u64;
        if self.w == Weakening::StatusAfterDone {
            record[DONE].store(end, done);
            self.mine().done.store(epoch, done);
            record[STATUS].store(status, Ordering::Relaxed);
        } else {
            record[STATUS].store(status, Ordering::Relaxed);
            record[DONE].store(end, done);
            self.mine().done.store(epoch, done);
        }
    }

    /// `Control::judge_left`: whether round `prev`, which a rank left, failed in a way
    /// some rank may not know of, from every rank's status and call. With `left`, this
    /// rank left it too: the calls must agree (nobody else may have judged them).
    fn judge_left(&self, prev: u64, left: bool) -> bool {
        let word = |r: usize, i: usize| self.record(r, prev)[i].load(Ordering::Relaxed);
        // What every verdict compares first (the model's call is its `op`, without the
        // private bit; no length: a rooted call's root and leaves publish different ones).
        let mine = word(self.me, OP_COPY) & !PRIVATE;
        let differs = |r: usize| left && word(r, OP_COPY) & !PRIVATE != mine;
        let statuses = (0..self.node.len()).map(|r| word(r, STATUS));
        match statuses.fold((false, false), |(u, f), s| (u || self.unheard(s), f || s != SUCCEEDED)) {
            (true, _) => true,
            // Only agreed failures: every rank failed `prev` already.
            (false, true) => false,
            (false, false) => (0..self.node.len()).any(differs),
        }
    }

    /// `Control::learn`, before a round this rank takes part in to its verdict.
    fn learn(&mut self) {
        self.prev_failed = false;
        let prev = self.epoch;
        if prev == 0 {
            return;
        }
        let failed = if self.left == prev {
            if self.w != Weakening::NoLearnWait {
                self.wait_ended(prev);
            }
            self.owed = 0;
            self.left = 0;
            self.judge_left(prev, true)
        } else {
            self.unheard(self.record(self.me, prev)[STATUS].load(Ordering::Relaxed))
        };
        self.prev_failed = failed;
    }

    /// `Control::settle`.
    fn settle(&mut self) {
        let owed = std::mem::replace(&mut self.owed, 0);
        if owed != 0 {
            self.wait_done(owed);
        }
    }

    /// `Control::stage_own` of this rank's one payload word.
    fn stage_own(&self) {
        let e = self.epoch + 1;
        // SAFETY: half `e % 2` of our own area: nobody reads it now (what loom checks).
        self.mine().stage[(e % 2) as usize].with_mut(|p| unsafe { *p = value(e) });
    }

    /// `Control::publish_flagged` (`publish` with `extra = 0`) of this round's call, with
    /// `send_len` (0 for `abandon`).
    fn publish_flagged(&mut self, send_len: u64, extra: u64) -> u64 {
        self.epoch += 1;
        let e = self.epoch;
        let record = self.record(self.me, e);
        let prev = if std::mem::replace(&mut self.prev_failed, false) { FLAG_PREV_FAILED } else { 0 };
        let flags = extra | prev;
        // `Call::store`: Relaxed words.
        record[OP].store(self.s.op(e, self.me), Ordering::Relaxed);
        record[OP_COPY].store(self.s.op(e, self.me), Ordering::Relaxed);
        record[SEND_LEN].store(send_len, Ordering::Relaxed);
        if self.w != Weakening::FlagsAfterStamp {
            record[FLAGS].store(flags, Ordering::Relaxed);
        }
        record[STATUS].store(0, Ordering::Relaxed);
        record[STAMP].store(e, self.w.ordering(Weakening::PublishRelaxed, Ordering::Release));
        if self.w == Weakening::FlagsAfterStamp {
            record[FLAGS].store(flags, Ordering::Relaxed);
        }
        self.mine().arrive.store(e, Ordering::Release);
        e
    }

    /// `Control::abandon`: takes part in the next round as a failed rank, awaiting nobody,
    /// with a call that publishes no length.
    fn abandon(&mut self, outcome: Outcome) {
        let e = self.publish_flagged(0, 0);
        self.post_done(e, outcome.status());
        self.owed = e;
        self.owed_staged = false;
    }

    /// `Control::arrive`, with `Round::previous`: the round's epoch, or the round already
    /// ended as failed (`PreviousFailed`).
    fn arrive(&mut self) -> Result<u64, Outcome> {
        let e = self.publish_flagged(LEN, 0);
        for r in 0..self.node.len() {
            let record = self.record(r, e);
            self.wait(|| record[STAMP].load(Ordering::Acquire) >= e);
        }
        self.owed = 0;
        // `Round::previous`.
        let flags =
            (0..self.node.len()).fold(0, |acc, r| acc | self.record(r, e)[FLAGS].load(Ordering::Relaxed));
        if flags & FLAG_LEFT != 0 {
            self.saw_leaver = e;
        }
        if flags & FLAG_PREV_FAILED != 0 {
            self.finish(e, false, Err(Outcome::PreviousFailed))?;
        }
        Ok(e)
    }

    /// `Control::begin_staged` (only the round's giver stages).
    fn begin_staged(&mut self) -> Result<u64, Outcome> {
        self.learn();
        if !self.owed_staged {
            self.settle();
        }
        if self.s.step(self.epoch + 1).giver() == Some(self.me) {
            self.stage_own();
        }
        self.arrive()
    }

    /// `Control::begin`.
    fn begin(&mut self) -> Result<u64, Outcome> {
        self.learn();
        self.arrive()
    }

    /// `Control::leave_staged`.
    fn leave_staged(&mut self) -> Result<(), Outcome> {
        let prev = self.epoch;
        // What this rank knows without waiting: its own failure of the round before, which
        // it passes on.
        if prev != 0 && self.unheard(self.record(self.me, prev)[STATUS].load(Ordering::Relaxed)) {
            self.left = 0;
            self.prev_failed = true;
            self.abandon(Outcome::PreviousFailed);
            return Err(Outcome::PreviousFailed);
        }
        if !self.owed_staged {
            self.settle();
        }
        self.stage_own();
        let e = self.publish_flagged(LEN, FLAG_LEFT);
        // The end of the round before on every rank, unless this rank saw it: its next
        // leave restages that round's half, and the judgement reads its records.
        if self.owed == prev && prev != 0 {
            let skip = match self.left == prev {
                true => self.w == Weakening::NoLearnWait,
                false => self.w == Weakening::LeaveUnsettled,
            };
            if !skip {
                self.wait_ended(prev);
            }
        }
        // A rank may have failed it after a rank left it, or alone while this rank left
        // it early with a success, and pass it on: judge it, whatever this rank saw.
        let judge = prev != 0 && (self.w != Weakening::JudgeOnlyLeft || self.saw_leaver == prev);
        let failed = judge && self.judge_left(prev, self.left == prev);
        let outcome = if failed { Outcome::PreviousFailed } else { Outcome::Ok };
        self.left = e;
        self.saw_leaver = e;
        self.post_done(e, outcome.status());
        self.owed = e;
        self.owed_staged = true;
        match outcome {
            Outcome::Ok => Ok(()),
            o => Err(o),
        }
    }

    /// `Round::finish` (a private round that succeeded posts `done` and leaves: the
    /// one-phase rounds), with `Control::end`.
    fn finish(&mut self, e: u64, staged: bool, result: Result<(), Outcome>) -> Result<(), Outcome> {
        let quiet = self.s.quiet(e);
        if quiet && result.is_ok() {
            self.post_done(e, SUCCEEDED);
            self.owed = e;
            self.owed_staged = staged;
            return Ok(());
        }
        // `Control::end`.
        self.post_done(e, result.err().map_or(SUCCEEDED, Outcome::status));
        self.wait_ended(e);
        let peer_failed = (0..self.node.len())
            .any(|r| r != self.me && self.record(r, e)[STATUS].load(Ordering::Relaxed) != SUCCEEDED);
        result.and(if peer_failed { Err(Outcome::Failed) } else { Ok(()) })
    }

    /// The verdict (`coll::check`) over every record: each is of this round (else the
    /// model fails: a record not yet written, or already rewritten), and the lengths
    /// agree (else `LengthMismatch`, which fails the round). In a round a rank left
    /// (`FLAG_LEFT`), the calls are compared without the private bit.
    fn judge(&self, e: u64) -> Result<(), Outcome> {
        let mut lengths = Ok(());
        let left =
            (0..self.node.len()).any(|r| self.record(r, e)[FLAGS].load(Ordering::Relaxed) & FLAG_LEFT != 0);
        let mask = if left { !PRIVATE } else { !0 };
        for r in 0..self.node.len() {
            let record = self.record(r, e);
            let got = record[OP].load(Ordering::Relaxed) & mask;
            assert_eq!(
                got,
                self.s.op(e, self.me) & mask,
                "rank {} judged rank {r}'s record of another round in round {e}",
                self.me
            );
            if record[SEND_LEN].load(Ordering::Relaxed) != LEN {
                lengths = Err(Outcome::Failed);
            }
        }
        lengths
    }

    /// `Round::read_staged` of the giver's payload, checked.
    fn read_staged(&self, giver: usize, e: u64) {
        // SAFETY: the giver staged it before its stamp (seen with Acquire in `arrive`) and
        // refills this half only at `e + 2`.
        let got = self.node[giver].stage[(e % 2) as usize].with(|p| unsafe { *p });
        assert_eq!(got, value(e), "rank {} read a payload of another round in round {e}", self.me);
    }

    /// One round of the plan, as this rank plays it.
    fn round(&mut self, step: Step) -> Outcome {
        let e = self.epoch + 1;
        let result = if step.leaver() == Some(self.me) {
            self.leave_staged()
        } else if step == Step::Plain {
            self.begin().and_then(|e| {
                let verdict = self.judge(e);
                self.finish(e, false, verdict)
            })
        } else {
            self.begin_staged().and_then(|e| {
                let giver = step.giver().expect("a one-phase round has a giver");
                let verdict = self.judge(e).and_then(|()| {
                    if self.me != giver {
                        self.read_staged(giver, e);
                    }
                    // The failer fails round `fails` after its copy.
                    match e == self.s.fails && self.me == self.s.failer {
                        true => Err(Outcome::Failed),
                        false => Ok(()),
                    }
                });
                // A failure in a round every rank took part in is this rank's alone
                // (`Round::finish_alone`): it notes the round, as one a rank left.
                if verdict.is_err() && step == Step::OnePhase && self.w != Weakening::NoAloneNote {
                    self.saw_leaver = e;
                }
                self.finish(e, true, verdict)
            })
        };
        assert_eq!(self.epoch, e, "rank {} skipped a round", self.me);
        result.err().unwrap_or(Outcome::Ok)
    }
}

fn rank(s: &Scenario, node: &[Rank], me: usize, w: Weakening) {
    let mut ctl = Control {
        s,
        node,
        me,
        epoch: 0,
        owed: 0,
        owed_staged: false,
        left: 0,
        saw_leaver: 0,
        prev_failed: false,
        w,
    };
    for (i, &step) in s.plan.iter().enumerate() {
        let e = i as u64 + 1;
        let got = ctl.round(step);
        assert_eq!(got, s.expected(me, e), "rank {me}, round {e} ({step:?})");
    }
}

/// Runs scenario `s` once (inside [`crate::check`]).
///
/// # Panics
///
/// If the protocol, weakened by `w`, lets a round end otherwise than the oracle says (a
/// failure lost, or seen where there is none), a rank judge a record or read a payload of
/// another round, or a rank restage a half a peer still reads; on a weakening this model
/// does not have.
pub fn run_scenario(s: &'static Scenario, w: Weakening) {
    assert!(matches!(
        w,
        Weakening::None
            | Weakening::NoAloneNote
            | Weakening::NoLearnWait
            | Weakening::DoneRelaxed
            | Weakening::StatusAfterDone
            | Weakening::FlagsAfterStamp
            | Weakening::PublishRelaxed
            | Weakening::TwoRecords
            | Weakening::CountAgreed
            | Weakening::LeaveUnsettled
            | Weakening::JudgeOnlyLeft
    ));
    // `spin` without pruning: two threads only (see `crate::spin_pruned`).
    assert_eq!(s.ranks, 2);
    let failed = s.step(s.fails);
    assert!(failed != Step::Plain && failed.leaver() != Some(s.failer) && s.plan.len() as u64 > s.fails + 1);
    let node: Arc<Vec<Rank>> = Arc::new(
        (0..s.ranks)
            .map(|_| Rank {
                arrive: AtomicU64::new(0),
                done: AtomicU64::new(0),
                call: Default::default(),
                stage: Default::default(),
            })
            .collect(),
    );
    let peers: Vec<_> = (1..s.ranks)
        .map(|me| {
            let node = node.clone();
            loom::thread::spawn(move || rank(s, &node, me, w))
        })
        .collect();
    rank(s, &node, 0, w);
    for p in peers {
        p.join().unwrap();
    }
}

/// [`run_scenario`] of [`TWO`].
pub fn run(w: Weakening) {
    run_scenario(&TWO, w)
}

/// [`run_scenario`] of [`SWAP`].
pub fn run_swap(w: Weakening) {
    run_scenario(&SWAP, w)
}

/// [`run_scenario`] of [`ALONE`].
pub fn run_alone(w: Weakening) {
    run_scenario(&ALONE, w)
}

/// [`run_scenario`] of [`ALONE_LEAVE`].
pub fn run_alone_leave(w: Weakening) {
    run_scenario(&ALONE_LEAVE, w)
}
