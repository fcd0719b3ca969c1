//! The message counters (`src/sync/counter.rs`, with the eager rounds of
//! `src/sync/arrival.rs` and the end of `src/sync/control.rs`).
//!
//! An owner (local rank 0) and its readers run eager rounds
//! (`Control::begin_eager`: the arrival is published, nothing is awaited). In each:
//!
//! - everyone arrives (`Control::publish`): notes its completion counter as the round's
//!   `base` (`completed.load(Acquire)`), then `arrive` (Release);
//! - the owner fills its buffer chunk by chunk, publishing each with `post_ready`
//!   (`progress`, Release), then waits until its counter has grown by its number of readers over
//!   `base` (`Round::wait_completions`, Acquire); then it reads what each reader
//!   landed in its receive buffer and reuses its send buffer, as the counter allows;
//! - a reader waits for the owner's arrival (`Round::arrived`, Acquire), reads each chunk
//!   once it is ready (`Round::wait_ready`, Acquire), lands a word in the owner's
//!   receive buffer, and completes (`Round::complete`: `completed.fetch_add(1,
//!   Release)`);
//! - everyone finishes (`Control::end`: `done`, Release, then every `done`, Acquire).
//!
//! The owner checks that `completed - base` is exactly this round's completions (the
//! counter is never reset); the readers check every chunk; loom checks that the owner
//! reuses nothing a reader still copies.
//!
//! Weakenings: [`Weakening::PublishRelaxed`] (`progress`),
//! [`Weakening::CompleteRelaxed`] (the completion's `fetch_add`).

use crate::{reached, spin_pruned as spin, stamp, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Chunks of the owner's buffer (at most).
const CHUNKS: u32 = 2;

/// One rank's slot (the words the model needs).
#[derive(Default)]
struct Slot {
    arrive: AtomicU64,
    done: AtomicU64,
    progress: AtomicU64,
    completed: AtomicU64,
}

/// The node: every slot, and the owner's buffers.
struct Node {
    slots: Vec<Slot>,
    send: [UnsafeCell<u64>; CHUNKS as usize],
    recv: Vec<UnsafeCell<u64>>,
    rounds: u64,
    chunks: u32,
}

fn chunk(epoch: u64, c: u32) -> u64 {
    epoch << 8 | c as u64
}

fn landing(epoch: u64, reader: usize) -> u64 {
    epoch << 16 | reader as u64
}

/// `Control::end` (every status is good here).
fn end(node: &Node, me: usize, epoch: u64) {
    node.slots[me].done.store(epoch, Ordering::Release);
    for slot in &node.slots {
        spin(|| slot.done.load(Ordering::Acquire) >= epoch);
    }
}

fn owner(node: &Node, w: Weakening) {
    let mine = &node.slots[0];
    let readers = node.recv.len() as u64;
    for epoch in 1..=node.rounds {
        let base = mine.completed.load(Ordering::Acquire);
        mine.arrive.store(epoch, Ordering::Release);
        for c in 1..=node.chunks {
            // SAFETY: our own buffer; every reader of the last round finished (what loom
            // checks).
            node.send[c as usize - 1].with_mut(|p| unsafe { *p = chunk(epoch, c) });
            mine.progress.store(stamp(epoch, c), w.ordering(Weakening::PublishRelaxed, Ordering::Release));
        }
        spin(|| mine.completed.load(Ordering::Acquire).wrapping_sub(base) >= readers);
        let completions = mine.completed.load(Ordering::Acquire).wrapping_sub(base);
        assert_eq!(completions, readers, "round {epoch}: completions of another round counted");
        for (r, cell) in node.recv.iter().enumerate() {
            // SAFETY: reader `r + 1` landed it before its completion (seen with Acquire).
            let got = cell.with(|p| unsafe { *p });
            assert_eq!(got, landing(epoch, r + 1), "round {epoch}: reader {}'s word missing", r + 1);
        }
        // Reuse the buffer, as the completions allow.
        // SAFETY: every reader completed (what loom checks).
        node.send[0].with_mut(|p| unsafe { *p = 0 });
        end(node, 0, epoch);
    }
}

fn reader(node: &Node, me: usize, w: Weakening) {
    let owner = &node.slots[0];
    let mine = &node.slots[me];
    let complete = w.ordering(Weakening::CompleteRelaxed, Ordering::Release);
    for epoch in 1..=node.rounds {
        let _base = mine.completed.load(Ordering::Acquire);
        mine.arrive.store(epoch, Ordering::Release);
        spin(|| owner.arrive.load(Ordering::Acquire) >= epoch);
        for c in 1..=node.chunks {
            spin(|| reached(owner.progress.load(Ordering::Acquire), stamp(epoch, c)));
            // SAFETY: the owner published the chunk (Release, seen with Acquire) and keeps
            // it until our completion.
            let got = node.send[c as usize - 1].with(|p| unsafe { *p });
            assert_eq!(got, chunk(epoch, c), "reader {me}: chunk {c} of round {epoch}");
        }
        // SAFETY: the owner reads its receive buffer only after our completion.
        node.recv[me - 1].with_mut(|p| unsafe { *p = landing(epoch, me) });
        owner.completed.fetch_add(1, complete);
        end(node, me, epoch);
    }
}

/// Runs the model once (inside [`crate::check`]) with one reader over two rounds of two
/// chunks: the counter carries over from one round to the next.
///
/// # Panics
///
/// If a reader reads a chunk not ready, the owner counts a completion of another round
/// or reuses a buffer a reader still uses; on a weakening this model does not have.
pub fn run(w: Weakening) {
    run_with(1, 2, 2, w);
}

/// Runs the model once with two readers over one round of one chunk: two completions
/// to count.
///
/// # Panics
///
/// As [`run`].
pub fn run_two_readers(w: Weakening) {
    run_with(2, 1, 1, w);
}

fn run_with(readers: usize, rounds: u64, chunks: u32, w: Weakening) {
    assert!(matches!(w, Weakening::None | Weakening::PublishRelaxed | Weakening::CompleteRelaxed));
    let node = Arc::new(Node {
        slots: (0..=readers).map(|_| Slot::default()).collect(),
        send: Default::default(),
        recv: (0..readers).map(|_| UnsafeCell::new(0)).collect(),
        rounds,
        chunks,
    });
    let readers: Vec<_> = (1..=readers)
        .map(|me| {
            let node = node.clone();
            loom::thread::spawn(move || reader(&node, me, w))
        })
        .collect();
    owner(&node, w);
    for r in readers {
        r.join().unwrap();
    }
}
