//! The Bcast FIFO (`src/sync/fifo.rs`): one writer, every other rank reads every packet,
//! the last reader of a packet frees its slot.
//!
//! A ring of [`SLOTS`] slots; the writer appends [`PACKETS`] packets, one more than the
//! ring holds, so the last one reuses the first slot once both readers are done with it.
//!
//! - `Fifo::push`: a ticket `t = tail.fetch_add(1, Relaxed)`; wait until
//!   `t - head.load(Acquire) < SLOTS`; then `Fifo::write`: the payload, the header words
//!   (Relaxed), `countdown = readers` (Relaxed), `seq = t + 1` (Release).
//! - `Fifo::pop`: wait until `seq.load(Acquire) == t + 1`; the header (Relaxed) and the
//!   payload; `countdown.fetch_sub(1, AcqRel)`, and the reader that brings it to zero
//!   does `head.fetch_add(1, Release)`.
//!
//! Every reader checks each packet's header and payload against what the writer wrote
//! for that ticket; loom checks that the writer never rewrites a slot a reader still
//! copies.
//!
//! Weakenings: [`Weakening::PublishRelaxed`] (`seq`), [`Weakening::PollRelaxed`] (the
//! reader's wait for `seq`), [`Weakening::CountdownRelaxed`] (the decrement: the last
//! reader then frees the slot without the first reader's copy being ordered before it).

use crate::{spin_pruned as spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Slots in the model's ring.
pub const SLOTS: u64 = 2;
/// Packets the writer appends.
pub const PACKETS: u64 = 3;
/// Readers of every packet (`n - 1` for a node of `n` ranks).
pub const READERS: u64 = 2;

/// A slot: the packet header (`fifo::Packet`, the words the model needs) and its payload.
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    countdown: AtomicU64,
    meta: AtomicU64,
    payload: UnsafeCell<u64>,
}

/// The ring: its two ends (`fifo::Ends`) and its slots.
struct Ring {
    head: AtomicU64,
    tail: AtomicU64,
    slots: [Slot; SLOTS as usize],
}

fn data(t: u64) -> u64 {
    0x1000 + t
}

fn push(ring: &Ring, meta: u64, payload: u64, w: Weakening) {
    let t = ring.tail.fetch_add(1, Ordering::Relaxed);
    spin(|| t - ring.head.load(Ordering::Acquire) < SLOTS);
    let slot = &ring.slots[(t % SLOTS) as usize];
    // SAFETY: ticket `t` is ours, and `head > t - SLOTS` (Acquire) orders every reader's
    // copy of the slot's previous packet before this write (what loom checks).
    slot.payload.with_mut(|p| unsafe { *p = payload });
    slot.meta.store(meta, Ordering::Relaxed);
    slot.countdown.store(READERS, Ordering::Relaxed);
    slot.seq.store(t + 1, w.ordering(Weakening::PublishRelaxed, Ordering::Release));
}

fn pop(ring: &Ring, cursor: &mut u64, w: Weakening) -> (u64, u64) {
    let t = *cursor;
    let slot = &ring.slots[(t % SLOTS) as usize];
    let poll = w.ordering(Weakening::PollRelaxed, Ordering::Acquire);
    spin(|| slot.seq.load(poll) == t + 1);
    let meta = slot.meta.load(Ordering::Relaxed);
    // SAFETY: published with Release, seen with Acquire; the slot is not reused before
    // our decrement below.
    let payload = slot.payload.with(|p| unsafe { *p });
    let countdown = w.ordering(Weakening::CountdownRelaxed, Ordering::AcqRel);
    if slot.countdown.fetch_sub(1, countdown) == 1 {
        ring.head.fetch_add(1, Ordering::Release);
    }
    *cursor = t + 1;
    (meta, payload)
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If a reader gets a packet other than the one due, or the writer rewrites a slot a
/// reader still copies; on a weakening this model does not have.
pub fn run(w: Weakening) {
    assert!(matches!(
        w,
        Weakening::None | Weakening::PublishRelaxed | Weakening::PollRelaxed | Weakening::CountdownRelaxed
    ));
    let ring = Arc::new(Ring { head: AtomicU64::new(0), tail: AtomicU64::new(0), slots: Default::default() });
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let ring = ring.clone();
            loom::thread::spawn(move || {
                let mut cursor = 0;
                for t in 0..PACKETS {
                    assert_eq!(pop(&ring, &mut cursor, w), (t, data(t)), "packet {t}");
                }
            })
        })
        .collect();
    for t in 0..PACKETS {
        push(&ring, t, data(t), w);
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(ring.head.load(Ordering::Relaxed), PACKETS, "every slot freed once");
}
