//! A collective round: arrive, check, move, finish (`src/sync/control.rs`,
//! `src/sync/round.rs`, `src/sync/call.rs`).
//!
//! Two ranks run [`ROUNDS`] rounds back to back. In each, a rank
//!
//! 1. fills its send buffer (the user's, in its own process) and **arrives**
//!    (`Control::publish`): its call record, in half `epoch % 2` of its slot's records
//!    (`Call::store`, Relaxed words), `STATUS = 0` (Relaxed), then the record's `STAMP`
//!    (Release), then `arrive` (Release);
//! 2. waits for every rank's `STAMP >= epoch` (`Control::begin` through `wait_ge`,
//!    Acquire) and **checks**: every rank judges every record (`Call::load`, Relaxed), so
//!    all reach the same verdict; in round 2 rank 1 calls another collective, and both
//!    must see the same mismatch;
//! 3. **moves**, only after a good verdict: reads every peer's send buffer in place (a
//!    CMA read or a load through a mapping, `Round::read_send`) and writes its own value
//!    into every peer's receive buffer (`Round::write_recv`);
//! 4. **finishes** (`Control::end`): `Control::post_done` (`STATUS`, Relaxed; the end word
//!    `DONE`, Release; `done`, Release), waits for every rank's end word of the round
//!    (`Control::wait_ended`, Acquire), reads the peers' statuses (Relaxed). Only then may
//!    it touch its buffers again: the next round refills its send buffer, and it reads
//!    what the peers wrote into its receive buffer.
//!
//! Weakenings: [`Weakening::PublishRelaxed`] (the stamp), [`Weakening::PollRelaxed`] (the
//! wait for it), [`Weakening::DoneRelaxed`] (the end word and `done`).

use crate::{spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Ranks in the model.
pub const RANKS: usize = 2;
/// Rounds each rank runs: three, so that a call record is rewritten (round 3 reuses
/// round 1's half).
pub const ROUNDS: u64 = 3;
/// The round in which rank 1 calls another collective.
const MISMATCH: u64 = 2;

/// The words of a record that the model keeps (`call::STAMP`, `call::OP`,
/// `call::STATUS`, `call::DONE`).
pub(crate) const STAMP: usize = 0;
pub(crate) const OP: usize = 1;
pub(crate) const STATUS: usize = 2;
pub(crate) const DONE: usize = 3;

/// One rank's slot (`layout::Slot`) and the buffers of its process.
struct Rank {
    arrive: AtomicU64,
    done: AtomicU64,
    call: [[AtomicU64; 4]; 2],
    /// The user's send buffer.
    send: UnsafeCell<u64>,
    /// The user's receive buffer, one word per writing peer.
    recv: [UnsafeCell<u64>; RANKS],
}

fn value(rank: usize, epoch: u64) -> u64 {
    (epoch << 8) | rank as u64
}

/// The collective rank `rank` calls in round `epoch` (the `op` word `coll` packs).
fn op(rank: usize, epoch: u64) -> u64 {
    if epoch == MISMATCH && rank == 1 {
        0xba
    } else {
        0xa0 + epoch
    }
}

/// The verdict (`coll::check`'s pure judge): the first rank whose call differs from
/// rank 0's, if any.
pub(crate) fn judge(ops: &[u64]) -> Result<(), usize> {
    match ops.iter().position(|&o| o != ops[0]) {
        None => Ok(()),
        Some(r) => Err(r),
    }
}

fn rank(node: &[Rank], me: usize, w: Weakening) {
    let publish = w.ordering(Weakening::PublishRelaxed, Ordering::Release);
    let poll = w.ordering(Weakening::PollRelaxed, Ordering::Acquire);
    let done = w.ordering(Weakening::DoneRelaxed, Ordering::Release);
    let mine = &node[me];
    for epoch in 1..=ROUNDS {
        let parity = (epoch % 2) as usize;
        // SAFETY: our own buffer; peers read it only between our arrival and their `done`
        // of the round, which the previous round's `end` awaited (this is what loom checks).
        mine.send.with_mut(|p| unsafe { *p = value(me, epoch) });
        // Control::publish.
        let record = &mine.call[parity];
        record[OP].store(op(me, epoch), Ordering::Relaxed);
        record[STATUS].store(0, Ordering::Relaxed);
        record[STAMP].store(epoch, publish);
        mine.arrive.store(epoch, Ordering::Release);
        // Control::begin: every rank's stamp.
        for peer in node {
            spin(|| peer.call[parity][STAMP].load(poll) >= epoch);
        }
        // coll::check: the same judge over the same records.
        let ops: Vec<u64> = node.iter().map(|r| r.call[parity][OP].load(Ordering::Relaxed)).collect();
        let verdict = judge(&ops);
        let expected = if epoch == MISMATCH { Err(1) } else { Ok(()) };
        assert_eq!(verdict, expected, "rank {me}, round {epoch}: records {ops:x?}");
        if verdict.is_ok() {
            // The move: read every peer's send buffer, write into every peer's receive
            // buffer.
            for (r, peer) in node.iter().enumerate().filter(|&(r, _)| r != me) {
                // SAFETY: the peer published the buffer for this round (its stamp, seen
                // with Acquire) and does not touch it before our `done`.
                let got = peer.send.with(|p| unsafe { *p });
                assert_eq!(got, value(r, epoch), "rank {me} read rank {r}'s buffer of another round");
                // SAFETY: as above, for the receive buffer the peer published writable.
                peer.recv[me].with_mut(|p| unsafe { *p = value(me, epoch) });
            }
        }
        // Control::end.
        record[STATUS].store(verdict.is_err() as u64, Ordering::Relaxed);
        record[DONE].store(epoch << 1 | verdict.is_err() as u64, done);
        mine.done.store(epoch, done);
        for peer in node {
            spin(|| peer.call[parity][DONE].load(Ordering::Acquire) >> 1 >= epoch);
        }
        let failed = node.iter().any(|peer| peer.call[parity][STATUS].load(Ordering::Relaxed) != 0);
        assert_eq!(failed, verdict.is_err(), "rank {me}, round {epoch}: the statuses disagree");
        if verdict.is_ok() {
            for r in (0..RANKS).filter(|&r| r != me) {
                // SAFETY: every peer posted its end word (seen with Acquire) after its write.
                let got = mine.recv[r].with(|p| unsafe { *p });
                assert_eq!(got, value(r, epoch), "rank {me}: rank {r}'s write is missing");
            }
        }
    }
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If the protocol, weakened by `w`, lets a rank see another round's data or touch a
/// buffer a peer still uses; on a weakening this model does not have.
pub fn run(w: Weakening) {
    assert!(matches!(
        w,
        Weakening::None | Weakening::PublishRelaxed | Weakening::PollRelaxed | Weakening::DoneRelaxed
    ));
    let node: Arc<Vec<Rank>> = Arc::new(
        (0..RANKS)
            .map(|_| Rank {
                arrive: AtomicU64::new(0),
                done: AtomicU64::new(0),
                call: Default::default(),
                send: UnsafeCell::new(0),
                recv: Default::default(),
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
