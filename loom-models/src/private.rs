//! Private rounds and one-phase rounds (`src/sync/control.rs`, `src/sync/round.rs`,
//! `src/sync/stage.rs`).
//!
//! A private round that succeeded posts `done` and returns without waiting for the
//! others' (`Round::finish` with `quiet`); the wait is owed (`Control::owed`), and a step
//! that writes the rank's own staging area before the next arrival settles it first
//! (`Control::settle`). A one-phase round (`Control::begin_staged`) writes its payload
//! into half `epoch % 2` of the rank's staging area before its stamp is published; peers
//! copy it out right after they see the stamp (`Round::read_staged`), and the round is
//! left early too (`Round::leave_early`); the half of round `e - 2` is free without any
//! wait (every rank left `e - 2` before arriving at `e - 1`, which `begin` saw), so after
//! a one-phase round (`owed_staged`) `begin_staged` does not settle.
//!
//! Two ranks run, in order:
//!
//! 1. a private staged broadcast from rank 0 (`Round::stage_bcast`, one chunk, in half
//!    0 of rank 0's area: the root writes it and posts `progress` with Release, the
//!    reader waits with Acquire and copies it out), left without waiting;
//! 2. a one-phase round: it stages into half 0 again, so rank 0 must first settle round
//!    1, whose reader may still be copying half 0;
//! 3. a one-phase round in half 1, no settle (round 2 was one-phase);
//! 4. a one-phase round in half 0, no settle: the half of round 2 is free.
//!
//! Every rank checks each byte it copies out against the value its peer staged for that
//! round, and loom checks that no half is written while a peer still reads it.
//!
//! Weakenings: [`Weakening::NoSettle`] (round 2 stages without settling),
//! [`Weakening::PublishRelaxed`] (the stamp that publishes the staged payload),
//! [`Weakening::DoneRelaxed`] (the `done` of a round left early, which `settle` reads).

use crate::{reached, spin, stamp, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Ranks in the model.
pub const RANKS: usize = 2;

/// One rank's slot (the words the model needs) and its staging area, as two halves.
struct Rank {
    arrive: AtomicU64,
    done: AtomicU64,
    progress: AtomicU64,
    /// The record's stamp, by epoch parity (`call[parity][STAMP]`).
    stamp: [AtomicU64; 2],
    stage: [UnsafeCell<u64>; 2],
}

/// One rank's `Control`: its node, index, epoch and what it owes.
struct Control<'n> {
    node: &'n [Rank],
    me: usize,
    epoch: u64,
    owed: u64,
    owed_staged: bool,
    w: Weakening,
}

fn value(rank: usize, epoch: u64) -> u64 {
    (epoch << 8) | rank as u64
}

impl Control<'_> {
    /// `Control::publish` and the wait of `Control::begin`.
    fn begin(&mut self) -> u64 {
        self.epoch += 1;
        let (e, mine) = (self.epoch, &self.node[self.me]);
        mine.stamp[(e % 2) as usize].store(e, self.w.ordering(Weakening::PublishRelaxed, Ordering::Release));
        mine.arrive.store(e, Ordering::Release);
        for peer in self.node {
            spin(|| peer.stamp[(e % 2) as usize].load(Ordering::Acquire) >= e);
        }
        self.owed = 0;
        e
    }

    /// `Control::settle`: every rank's `done` of the round left without waiting.
    fn settle(&mut self) {
        let owed = std::mem::replace(&mut self.owed, 0);
        if owed != 0 {
            for peer in self.node {
                spin(|| peer.done.load(Ordering::Acquire) >= owed);
            }
        }
    }

    /// `Control::begin_staged` with one payload word.
    fn begin_staged(&mut self) -> u64 {
        if !self.owed_staged && self.w != Weakening::NoSettle {
            self.settle();
        }
        let e = self.epoch + 1;
        // SAFETY: half `e % 2` of our own area: nobody reads it now (what loom checks).
        self.node[self.me].stage[(e % 2) as usize].with_mut(|p| unsafe { *p = value(self.me, e) });
        let begun = self.begin();
        debug_assert_eq!(begun, e);
        e
    }

    /// `Round::read_staged` of every peer, checked.
    fn read_staged(&self, e: u64) {
        for (r, peer) in self.node.iter().enumerate() {
            // SAFETY: `r` staged it before its stamp (seen with Acquire in `begin`) and
            // refills this half only at `e + 2`.
            let got = peer.stage[(e % 2) as usize].with(|p| unsafe { *p });
            assert_eq!(got, value(r, e), "rank {} read rank {r}'s stage of another round", self.me);
        }
    }

    /// `Round::finish` of a quiet round (private, or left early): `done`, nothing awaited.
    fn finish_quiet(&mut self, staged: bool) {
        let done = self.w.ordering(Weakening::DoneRelaxed, Ordering::Release);
        self.node[self.me].done.store(self.epoch, done);
        self.owed = self.epoch;
        self.owed_staged = staged;
    }

    /// A private `Round::stage_bcast` of one chunk from local rank `root`.
    fn stage_bcast(&self, e: u64, root: usize) {
        let mine = &self.node[self.me];
        if self.me == root {
            // SAFETY: half 0 of our own area; every earlier reader is settled (checked).
            mine.stage[0].with_mut(|p| unsafe { *p = value(root, e) });
            mine.progress.store(stamp(e, 1), Ordering::Release);
        } else {
            let src = &self.node[root];
            spin(|| reached(src.progress.load(Ordering::Acquire), stamp(e, 1)));
            // SAFETY: the root published the chunk with Release, seen with Acquire.
            let got = src.stage[0].with(|p| unsafe { *p });
            assert_eq!(got, value(root, e), "rank {} copied a torn chunk", self.me);
            mine.progress.store(stamp(e, 1), Ordering::Release);
        }
    }
}

fn rank(node: &[Rank], me: usize, w: Weakening) {
    let mut ctl = Control { node, me, epoch: 0, owed: 0, owed_staged: false, w };
    // 1: a private staged broadcast, left without waiting.
    let e = ctl.begin();
    ctl.stage_bcast(e, 0);
    ctl.finish_quiet(false);
    // 2, 3, 4: one-phase rounds, each left early.
    for _ in 0..3 {
        let e = ctl.begin_staged();
        ctl.read_staged(e);
        ctl.finish_quiet(true);
    }
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If the protocol, weakened by `w`, lets a rank read a staged payload of another round
/// or write a half a peer still reads; on a weakening this model does not have.
pub fn run(w: Weakening) {
    assert!(matches!(
        w,
        Weakening::None | Weakening::NoSettle | Weakening::PublishRelaxed | Weakening::DoneRelaxed
    ));
    let node: Arc<Vec<Rank>> = Arc::new(
        (0..RANKS)
            .map(|_| Rank {
                arrive: AtomicU64::new(0),
                done: AtomicU64::new(0),
                progress: AtomicU64::new(0),
                stamp: Default::default(),
                stage: Default::default(),
            })
            .collect(),
    );
    let peers: Vec<_> = (1..RANKS)
        .map(|me| {
            let node = node.clone();
            loom::thread::spawn(move || rank(&node, me, w))
        })
        .collect();
    rank(&node, 0, w);
    for p in peers {
        p.join().unwrap();
    }
}
