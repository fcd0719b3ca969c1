//! The deferred verdict (`src/sync/stage.rs`, `src/sync/control.rs`, `src/sync/round.rs`):
//! a rank that only gives in a one-phase round leaves it before its verdict, and learns
//! the verdict at its next call.
//!
//! A leaver (`Control::leave_staged`) first learns how the round before ended
//! (`Control::learn`: if it left that round too, it waits for every rank's end word of it,
//! `DONE`, Acquire, and reads every rank's `STATUS` and its copy of `OP`, Relaxed, all on
//! the record's second line), settles an owed wait unless
//! the round owed was one-phase, then stages its payload in half `epoch % 2` of its area,
//! publishes its record (`Control::publish_flagged`: the words and the copy of `OP`,
//! `FLAGS` with `FLAG_LEFT`, Relaxed; `STATUS = 0`, Relaxed; `STAMP`, Release; `arrive`,
//! Release), posts (`Control::post_done`) `STATUS = 0` (Relaxed), the end word `DONE`
//! (Release) and `done` (Release), and returns. If `learn` found that the
//! round before failed, it takes part in the round as a failed rank instead
//! (`Control::abandon`, with `FLAG_PREV_FAILED`) and stages nothing.
//!
//! A reader starts the round as a one-phase round (`Control::begin_staged`, through
//! `learn` too: a rank that took part in the whole round before, and saw a rank leave it,
//! failed it if its own status says so), arrives (`Control::arrive`: publish, wait for
//! every `STAMP`, Acquire), notes whether a rank left (`Round::previous`: `FLAG_LEFT`
//! sets `saw_leaver`) and fails the round at once if a record carries `FLAG_PREV_FAILED`.
//! Otherwise it judges every record (their `OP` and `SEND_LEN`), copies the leaver's payload out
//! (`Round::read_staged`) and finishes (`Round::finish`): a success posts `done` and
//! leaves; a failure ends the round (`Control::end`: `post_done`; every end word,
//! Acquire; the statuses).
//!
//! Two ranks run [`TWO`], one round after another:
//!
//! 1. a one-phase round in which both take part (`begin_staged`, rank 0 stages in half 1,
//!    rank 1 copies it out; both leave early);
//! 2. rank 0 leaves a one-phase round (half 0) with a private record, where rank 1
//!    publishes one that is not (a gatherv's leaf and root: the verdict in a round a rank
//!    left, and `learn`, compare the calls without the private bit); rank 1 reads it and
//!    succeeds;
//! 3. rank 0 leaves the next one back to back (half 1 again: `learn` must first wait for
//!    rank 1's `done` of round 2, hence of round 1, whose copy read that half); rank 1
//!    reads it, and fails the round (after its copy, as a failed step would);
//! 4. rank 0 would leave again: its `learn` finds rank 1's failure, so it abandons the
//!    round, with `FLAG_PREV_FAILED`; rank 1 knows it failed a round a rank had left, and
//!    sets the flag too; both fail this round (`PreviousFailed`);
//! 5. a plain round (not private: every rank waits for every `done`): it works.
//!
//! Every rank checks each round's outcome against the oracle (the failure seen by every
//! rank in the round after it, and only there), that every record it judges is of this
//! round (the model's `op` names its round), and every payload it copies; loom checks
//! that no half is restaged while a peer still reads it. A record `abandon` publishes
//! has no length (`send_len: 0`): a reader that judged it would fail the round on a
//! length mismatch, not with `PreviousFailed`.
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
//! [`Weakening::NoLearnWait`] (`learn` reads the statuses without waiting for
//! the end of the round the rank left), [`Weakening::DoneRelaxed`] (every end word and
//! `done` posted Relaxed), [`Weakening::StatusAfterDone`] (`STATUS` stored after the end
//! word and `done`),
//! [`Weakening::FlagsAfterStamp`] (the flag word, with `FLAG_LEFT` and
//! `FLAG_PREV_FAILED`, stored after the Release of the stamp), [`Weakening::PublishRelaxed`]
//! (the stamp that publishes the staged payload).

use crate::{spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// What rank 0 does in a round (every other rank takes part in every round as a reader).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A one-phase round in which rank 0 stages its payload and takes part to the end
    /// (`Control::begin_staged`).
    OnePhase,
    /// Rank 0 stages its payload and leaves (`Control::leave_staged`).
    Leave,
    /// Rank 0 leaves as in `Leave`, with a private record, while every other rank
    /// publishes a record that is not private (a gatherv's leaf leaves, its root publishes
    /// its buffer): the verdict (`coll::verdict`, in a round a rank left) and `learn`
    /// compare the calls without the private bit. The readers still leave early when
    /// they succeed (`Round::leave_early`: the bytes crossed through the staging area).
    LeaveAmongPublic,
    /// A plain round, not private (`Control::begin`, `Control::end`).
    Plain,
}

/// A run of the model: the ranks, rank 0's rounds in order, and the round rank 1 fails
/// (every other rank reads and succeeds).
pub struct Scenario {
    /// Threads, as local ranks.
    pub ranks: usize,
    /// Round `i + 1` is `plan[i]`.
    pub plan: &'static [Step],
    /// The round rank 1 fails (after copying the payload out), which rank 0 has left.
    pub fails: u64,
}

/// Two ranks: rank 0 leaves three one-phase rounds back to back after one it took part
/// in, and rank 1 fails the second it left.
pub const TWO: Scenario = Scenario {
    ranks: 2,
    plan: &[Step::OnePhase, Step::LeaveAmongPublic, Step::Leave, Step::Leave, Step::Plain],
    fails: 3,
};

/// Two ranks: three one-phase rounds in which both take part, rank 1 failing the second
/// alone after the verdict, then a plain one.
pub const ALONE: Scenario =
    Scenario { ranks: 2, plan: &[Step::OnePhase, Step::OnePhase, Step::OnePhase, Step::Plain], fails: 2 };

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

/// One rank's slot (the words the model needs) and its staging area, as two halves.
struct Rank {
    arrive: AtomicU64,
    done: AtomicU64,
    /// The call records, by epoch parity.
    call: [[AtomicU64; WORDS]; 2],
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

impl Scenario {
    /// The oracle: round `fails` fails on rank 1 only (rank 0 left it, any other rank
    /// succeeds in it), the round after fails on every rank, every other round works.
    fn expected(&self, me: usize, epoch: u64) -> Outcome {
        match epoch {
            e if e == self.fails && me == 1 => Outcome::Failed,
            e if e == self.fails + 1 => Outcome::PreviousFailed,
            _ => Outcome::Ok,
        }
    }

    /// The call rank `me` publishes for round `epoch` (the `op` word; it names its round,
    /// so that a record of another round is seen to differ): private unless the round is
    /// plain, or it is a reader's in a round rank 0 leaves among public records.
    fn op(&self, epoch: u64, me: usize) -> u64 {
        let private = match self.plan[epoch as usize - 1] {
            Step::Plain => false,
            Step::LeaveAmongPublic => me == 0,
            _ => true,
        };
        (private as u64) << 63 | epoch << 8 | 2
    }

    /// Whether a rank's finish of round `epoch` that succeeds posts `done` and leaves
    /// (a private round's `Round::finish`, or after `Round::leave_early`).
    fn quiet(&self, epoch: u64) -> bool {
        self.plan[epoch as usize - 1] != Step::Plain
    }
}

/// The payload rank 0 stages for round `epoch`.
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
    /// that parity, `call::ended`, Acquire).
    fn wait_ended(&self, epoch: u64) {
        let parity = (epoch % 2) as usize;
        for peer in self.node {
            self.wait(|| peer.call[parity][DONE].load(Ordering::Acquire) >> 1 >= epoch);
        }
    }

    /// `Control::post_done`: `STATUS` (Relaxed), then the end word `DONE` (Release), then
    /// `done` (Release): the end of a round in `leave_staged`, `abandon`, a quiet
    /// `Round::finish` and `Control::end`.
    fn post_done(&self, epoch: u64, failed: bool) {
        let record = &self.mine().call[(epoch % 2) as usize];
        let done = self.w.ordering(Weakening::DoneRelaxed, Ordering::Release);
        let end = epoch << 1 | failed as u64;
        if self.w == Weakening::StatusAfterDone {
            record[DONE].store(end, done);
            self.mine().done.store(epoch, done);
            record[STATUS].store(failed as u64, Ordering::Relaxed);
        } else {
            record[STATUS].store(failed as u64, Ordering::Relaxed);
            record[DONE].store(end, done);
            self.mine().done.store(epoch, done);
        }
    }

    /// `Control::learn`.
    fn learn(&mut self) {
        self.prev_failed = false;
        let prev = self.epoch;
        if prev == 0 {
            return;
        }
        let parity = (prev % 2) as usize;
        let word = |r: usize, i: usize| self.node[r].call[parity][i].load(Ordering::Relaxed);
        let failed = if self.left == prev {
            if self.w != Weakening::NoLearnWait {
                self.wait_ended(prev);
            }
            self.owed = 0;
            self.left = 0;
            // What every verdict compares first (the model's call is its `op`, without the
            // private bit; `learn` compares no length: a rooted call's root and leaves
            // publish different ones).
            let mine = word(self.me, OP_COPY) & !PRIVATE;
            let differs = |r: usize| word(r, OP_COPY) & !PRIVATE != mine;
            (0..self.node.len()).any(|r| word(r, STATUS) != 0 || differs(r))
        } else {
            self.saw_leaver == prev && word(self.me, STATUS) != 0
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

    /// `Control::stage_own` of rank 0's one payload word (the readers stage nothing).
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
        let record = &self.mine().call[(e % 2) as usize];
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
    fn abandon(&mut self) {
        let e = self.publish_flagged(0, 0);
        self.post_done(e, true);
        self.owed = e;
        self.owed_staged = false;
    }

    /// `Control::arrive`, with `Round::previous`: the round's epoch, or the round already
    /// ended as failed (`PreviousFailed`).
    fn arrive(&mut self) -> Result<u64, Outcome> {
        let e = self.publish_flagged(LEN, 0);
        let parity = (e % 2) as usize;
        for peer in self.node {
            self.wait(|| peer.call[parity][STAMP].load(Ordering::Acquire) >= e);
        }
        self.owed = 0;
        // `Round::previous`.
        let flags = self.node.iter().fold(0, |acc, r| acc | r.call[parity][FLAGS].load(Ordering::Relaxed));
        if flags & FLAG_LEFT != 0 {
            self.saw_leaver = e;
        }
        if flags & FLAG_PREV_FAILED != 0 {
            self.finish(e, false, Err(Outcome::PreviousFailed))?;
        }
        Ok(e)
    }

    /// `Control::begin_staged` (the readers stage nothing).
    fn begin_staged(&mut self) -> Result<u64, Outcome> {
        self.learn();
        if !self.owed_staged {
            self.settle();
        }
        if self.me == 0 {
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
        self.learn();
        if !self.owed_staged {
            self.settle();
        }
        if self.prev_failed {
            self.abandon();
            return Err(Outcome::PreviousFailed);
        }
        self.stage_own();
        let e = self.publish_flagged(LEN, FLAG_LEFT);
        self.post_done(e, false);
        self.owed = e;
        self.owed_staged = true;
        self.left = e;
        self.saw_leaver = e;
        Ok(())
    }

    /// `Round::finish` (a private round that succeeded posts `done` and leaves: the
    /// one-phase rounds), with `Control::end`.
    fn finish(&mut self, e: u64, staged: bool, result: Result<(), Outcome>) -> Result<(), Outcome> {
        let quiet = self.s.quiet(e);
        if quiet && result.is_ok() {
            self.post_done(e, false);
            self.owed = e;
            self.owed_staged = staged;
            return Ok(());
        }
        // `Control::end`.
        self.post_done(e, result.is_err());
        self.wait_ended(e);
        let parity = (e % 2) as usize;
        let peer_failed = (0..self.node.len())
            .any(|r| r != self.me && self.node[r].call[parity][STATUS].load(Ordering::Relaxed) != 0);
        result.and(if peer_failed { Err(Outcome::Failed) } else { Ok(()) })
    }

    /// The verdict (`coll::check`) over every record: each is of this round (else the
    /// model fails: a record not yet written, or already rewritten), and the lengths
    /// agree (else `LengthMismatch`, which fails the round). In a round a rank left
    /// (`FLAG_LEFT`), the calls are compared without the private bit.
    fn judge(&self, e: u64) -> Result<(), Outcome> {
        let mut lengths = Ok(());
        let parity = (e % 2) as usize;
        let left = self.node.iter().any(|r| r.call[parity][FLAGS].load(Ordering::Relaxed) & FLAG_LEFT != 0);
        let mask = if left { !PRIVATE } else { !0 };
        for (r, peer) in self.node.iter().enumerate() {
            let record = &peer.call[parity];
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

    /// `Round::read_staged` of rank 0's payload, checked.
    fn read_staged(&self, e: u64) {
        // SAFETY: rank 0 staged it before its stamp (seen with Acquire in `arrive`) and
        // refills this half only at `e + 2`.
        let got = self.node[0].stage[(e % 2) as usize].with(|p| unsafe { *p });
        assert_eq!(got, value(e), "rank {} read a payload of another round in round {e}", self.me);
    }

    /// One round of the plan, as this rank plays it.
    fn round(&mut self, step: Step) -> Outcome {
        let e = self.epoch + 1;
        let result = match (step, self.me) {
            (Step::Leave, 0) => self.leave_staged(),
            (Step::Plain, _) => self.begin().and_then(|e| {
                let verdict = self.judge(e);
                self.finish(e, false, verdict)
            }),
            (Step::LeaveAmongPublic, 0) => self.leave_staged(),
            (Step::OnePhase | Step::Leave | Step::LeaveAmongPublic, _) => self.begin_staged().and_then(|e| {
                let verdict = self.judge(e).and_then(|()| {
                    if self.me != 0 {
                        self.read_staged(e);
                    }
                    // Rank 1 fails round `fails` after its copy.
                    match e == self.s.fails && self.me == 1 {
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
            }),
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
    ));
    // `spin` without pruning: two threads only (see `crate::spin_pruned`).
    assert_eq!(s.ranks, 2);
    assert!(
        matches!(s.plan[s.fails as usize - 1], Step::Leave | Step::LeaveAmongPublic | Step::OnePhase)
            && s.plan.len() as u64 > s.fails + 1
    );
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

/// [`run_scenario`] of [`ALONE`].
pub fn run_alone(w: Weakening) {
    run_scenario(&ALONE, w)
}
