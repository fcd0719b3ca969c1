//! A broadcast round split at issue (the design of `book/src/nonblocking.md`, "What Open
//! MPI hides"): the round of [`crate::round`], cut between a request's issue and its
//! `wait`, with the caller computing in between.
//!
//! Two ranks run [`ROUNDS`] broadcasts from rank 0, each as one request issued on an
//! empty queue (no earlier call pending, so round order is issue order on both ranks)
//! and waited before the next is issued.
//!
//! - **Issue, both ranks:** fill the buffer (the root) and **arrive** as
//!   `Control::publish` does: the record's words (Relaxed), `STATUS = 0`, the `STAMP`
//!   (Release), `arrive` (Release). The root, a giver whose peer reads its buffer in
//!   place, then returns.
//! - **Issue, the reader:** one poll of every rank's `STAMP` (Acquire, no wait). If every
//!   record is published it judges them (`coll::check`'s judge, the same verdict every
//!   rank reaches from the same records), copies the root's buffer into its own after a
//!   good verdict, and posts its end word (`Control::post_done`: `STATUS`, then `DONE`
//!   and `done` with Release); a mismatch found here is only noted, and reported by
//!   `wait`. Else it returns with the round still to run.
//! - **Compute:** neither rank touches its buffer (the scope's borrow; here a yield).
//! - **Wait, the reader:** if the issue did not run the round, waits for every stamp,
//!   judges, copies, posts its end word, as the blocking round does; then waits for
//!   every rank's end word (`Control::wait_ended`, Acquire) and reads the statuses.
//! - **Wait, the root:** waits for every stamp, judges, posts its end word, waits for
//!   every rank's end word and reads the statuses. Only then does it touch its buffer
//!   again (the next round refills it).
//!
//! In round `MISMATCH` (the second) rank 1 calls another collective: both `wait`s must return the
//! same error, whichever rank arrived first. Loom explores both orders: the reader's
//! issue poll sees the root's stamp (the copy at issue) or does not (the copy in `wait`).
//!
//! [`run_staged`] is the variant for 64 KiB, where the broadcast is staged: the root
//! arrives at issue, then copies its message into its staging area chunk by chunk
//! (`Round::stage_bcast`: the two halves, a step posted after each with
//! `Round::post_progress`, Release, before any verdict), and leaves; the reader, after a
//! good verdict (at issue or in `wait`), waits for each step (`wait_progress`, Acquire)
//! and copies the chunk out of the root's area. The root restages only after its `wait`
//! has seen the reader's end word. There [`Weakening::PublishRelaxed`] weakens the
//! step's store (not the stamp's), and the others are as below.
//!
//! Weakenings: [`Weakening::PublishRelaxed`] (the root's stamp: the reader's copy at
//! issue may read the buffer before its fill), [`Weakening::PollRelaxed`] (the reader's
//! poll at issue), [`Weakening::DoneRelaxed`] (the reader's end word posted at issue: the
//! root's refill may race its copy), [`Weakening::GiverSkipsEnd`] (the root's `wait`
//! returns without waiting for the reader's end word, the unsound "leave at issue and
//! never come back").

use crate::round::{judge, DONE, OP, STAMP, STATUS};
use crate::{spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Ranks in the model: the root (0) and one reader (1).
pub const RANKS: usize = 2;
/// Rounds each rank runs: three, so that a call record is rewritten.
pub const ROUNDS: u64 = 3;
/// The round in which rank 1 calls another collective.
const MISMATCH: u64 = 2;
/// The broadcast's root.
const ROOT: usize = 0;

/// How many reader rounds ran their check and copy at issue, and how many in `wait`,
/// over every run so far: the test asserts that loom explored both.
pub static PATHS: [std::sync::atomic::AtomicUsize; 2] =
    [std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0)];

/// One rank's slot and the buffer of its process (the root's send buffer, the reader's
/// receive buffer).
struct Rank {
    arrive: AtomicU64,
    done: AtomicU64,
    call: [[AtomicU64; 4]; 2],
    buf: UnsafeCell<u64>,
    /// The two halves of the rank's staging area ([`run_staged`]).
    stage: [UnsafeCell<u64>; 2],
    /// `progress`: the steps of the round posted so far (`stamp(epoch, step)`).
    progress: AtomicU64,
}

fn value(epoch: u64) -> u64 {
    (epoch << 8) | 0x5a
}

fn op(rank: usize, epoch: u64) -> u64 {
    if epoch == MISMATCH && rank == 1 {
        0xba
    } else {
        0xb0 + epoch
    }
}

/// The orderings of one run.
#[derive(Clone, Copy)]
struct Orders {
    publish: Ordering,
    poll: Ordering,
    done: Ordering,
    end_wait: bool,
    /// The staged variant, and the ordering of its steps.
    staged: bool,
    step: Ordering,
}

/// `Control::publish`.
fn arrive(mine: &Rank, me: usize, epoch: u64, o: Orders) {
    let record = &mine.call[(epoch % 2) as usize];
    record[OP].store(op(me, epoch), Ordering::Relaxed);
    record[STATUS].store(0, Ordering::Relaxed);
    record[STAMP].store(epoch, o.publish);
    mine.arrive.store(epoch, Ordering::Release);
}

/// Whether every rank's record of round `epoch` is published (one poll, no wait).
fn published(node: &[Rank], epoch: u64, o: Orders) -> bool {
    node.iter().all(|peer| peer.call[(epoch % 2) as usize][STAMP].load(o.poll) >= epoch)
}

/// The check and the move of one rank, then its end word: what the reader runs at issue
/// when every record is there, and every rank in `wait` otherwise.
fn check_move_post(node: &[Rank], me: usize, epoch: u64, o: Orders) -> Result<(), usize> {
    let parity = (epoch % 2) as usize;
    let ops: Vec<u64> = node.iter().map(|r| r.call[parity][OP].load(Ordering::Relaxed)).collect();
    let verdict = judge(&ops);
    let expected = if epoch == MISMATCH { Err(1) } else { Ok(()) };
    assert_eq!(verdict, expected, "rank {me}, round {epoch}: records {ops:x?}");
    if verdict.is_ok() && me != ROOT && o.staged {
        let mut got = 0;
        for (c, half) in node[ROOT].stage.iter().enumerate() {
            // Round::wait_progress.
            let want = crate::stamp(epoch, c as u32 + 1);
            spin(|| crate::reached(node[ROOT].progress.load(Ordering::Acquire), want));
            // SAFETY: the root posted this chunk's step (seen with Acquire) after
            // writing it, and restages it only after our end word (seen with Acquire).
            let chunk = half.with(|p| unsafe { *p });
            assert_eq!(chunk, value(epoch) + c as u64, "rank {me} copied a chunk of another round");
            got = chunk - c as u64;
        }
        // SAFETY: our own buffer, lent to this request; nothing else touches it.
        node[me].buf.with_mut(|p| unsafe { *p = got });
    } else if verdict.is_ok() && me != ROOT {
        // SAFETY: the root published its buffer for this round (its stamp, seen with
        // Acquire) and touches it again only after our end word (seen with Acquire).
        let got = node[ROOT].buf.with(|p| unsafe { *p });
        assert_eq!(got, value(epoch), "rank {me} read the root's buffer of another round");
        // SAFETY: our own buffer, lent to this request; nothing else touches it.
        node[me].buf.with_mut(|p| unsafe { *p = got });
    }
    // Control::post_done.
    let record = &node[me].call[parity];
    record[STATUS].store(verdict.is_err() as u64, Ordering::Relaxed);
    record[DONE].store(epoch << 1 | verdict.is_err() as u64, o.done);
    node[me].done.store(epoch, o.done);
    verdict
}

/// `Control::wait_ended` and the statuses: the rest of `wait`.
fn end(node: &[Rank], me: usize, epoch: u64, verdict: Result<(), usize>, o: Orders) -> bool {
    let parity = (epoch % 2) as usize;
    if !o.end_wait && me == ROOT {
        return verdict.is_err();
    }
    for peer in node {
        spin(|| peer.call[parity][DONE].load(Ordering::Acquire) >> 1 >= epoch);
    }
    let failed = node.iter().any(|peer| peer.call[parity][STATUS].load(Ordering::Relaxed) != 0);
    assert_eq!(failed, verdict.is_err(), "rank {me}, round {epoch}: the statuses disagree");
    failed
}

fn rank(node: &[Rank], me: usize, o: Orders) {
    let mine = &node[me];
    for epoch in 1..=ROUNDS {
        // ---- issue ----
        if me == ROOT {
            // SAFETY: our own buffer; the reader reads it only between our stamp and its
            // end word, which our previous `wait` awaited (this is what loom checks).
            mine.buf.with_mut(|p| unsafe { *p = value(epoch) });
        }
        arrive(mine, me, epoch, o);
        if me == ROOT && o.staged {
            // Round::stage_bcast's root, before any verdict: its own area only.
            for (c, half) in mine.stage.iter().enumerate() {
                // SAFETY: our own staging area; the reader copies it only between this
                // chunk's step and its end word, which our previous `wait` awaited.
                half.with_mut(|p| unsafe { *p = value(epoch) + c as u64 });
                mine.progress.store(crate::stamp(epoch, c as u32 + 1), o.step);
            }
        }
        let at_issue = (me != ROOT && published(node, epoch, o)).then(|| check_move_post(node, me, epoch, o));
        if me != ROOT {
            PATHS[at_issue.is_none() as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // ---- compute: the buffers are borrowed by the request ----
        loom::thread::yield_now();
        // ---- wait ----
        let verdict = match at_issue {
            Some(v) => v,
            None => {
                for peer in node {
                    spin(|| peer.call[(epoch % 2) as usize][STAMP].load(o.poll) >= epoch);
                }
                check_move_post(node, me, epoch, o)
            }
        };
        let failed = end(node, me, epoch, verdict, o);
        assert_eq!(failed, epoch == MISMATCH, "rank {me}, round {epoch}: wait's result");
        if !failed && me != ROOT {
            // SAFETY: our own buffer, given back by `wait`.
            let got = mine.buf.with(|p| unsafe { *p });
            assert_eq!(got, value(epoch), "rank {me}, round {epoch}: the broadcast's data");
        }
    }
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If the protocol, weakened by `w`, lets the reader copy another round's data, lets the
/// root refill its buffer while the reader copies it, or lets the ranks disagree on a
/// round's result; on a weakening this model does not have.
pub fn run(w: Weakening) {
    model(w, false);
}

/// Runs the staged variant once (inside [`crate::check`]).
///
/// # Panics
///
/// As [`run`], and if the reader copies a chunk the root has not staged yet.
pub fn run_staged(w: Weakening) {
    model(w, true);
}

fn model(w: Weakening, staged: bool) {
    assert!(matches!(
        w,
        Weakening::None
            | Weakening::PublishRelaxed
            | Weakening::PollRelaxed
            | Weakening::DoneRelaxed
            | Weakening::GiverSkipsEnd
    ));
    // Staged, the weakened publication is the step's (the stamp's is `run`'s).
    let (stamp_w, step_w) = match staged {
        true => (Weakening::None, w),
        false => (w, Weakening::None),
    };
    let o = Orders {
        publish: stamp_w.ordering(Weakening::PublishRelaxed, Ordering::Release),
        staged,
        step: step_w.ordering(Weakening::PublishRelaxed, Ordering::Release),
        poll: w.ordering(Weakening::PollRelaxed, Ordering::Acquire),
        done: w.ordering(Weakening::DoneRelaxed, Ordering::Release),
        end_wait: w != Weakening::GiverSkipsEnd,
    };
    let node: Arc<Vec<Rank>> = Arc::new(
        (0..RANKS)
            .map(|_| Rank {
                arrive: AtomicU64::new(0),
                done: AtomicU64::new(0),
                call: Default::default(),
                buf: UnsafeCell::new(0),
                stage: Default::default(),
                progress: AtomicU64::new(0),
            })
            .collect(),
    );
    let reader = {
        let node = node.clone();
        loom::thread::spawn(move || rank(&node, 1, o))
    };
    rank(&node, ROOT, o);
    reader.join().unwrap();
}
