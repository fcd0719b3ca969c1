//! The point-to-point FIFO (`src/sync/fifo.rs`): several writers, one reader (the rank
//! that owns the ring, `readers = 1`).
//!
//! A ring of [`SLOTS`] slots; two writers append [`PER_WRITER`] packets each, so the ring
//! laps. Writer 1 uses `Fifo::push` (a ticket by `tail.fetch_add(1, Relaxed)`, then a
//! wait for `t - head.load(Acquire) < SLOTS`); writer 2 uses `Fifo::try_push` (a ticket
//! only when its slot is free: `head.load(Acquire)`, then
//! `tail.compare_exchange_weak(t, t + 1, Relaxed, Relaxed)`), retrying while the ring is
//! full. Both then `Fifo::write`: payload, header (Relaxed), `countdown = 1`
//! (Relaxed), `seq = t + 1` (Release). The reader (`Fifo::pop`) waits for
//! `seq.load(Acquire) == t + 1`, copies, `countdown.fetch_sub(1, AcqRel)`, and frees the
//! slot with `head.fetch_add(1, Release)`.
//!
//! The reader checks that every writer's packets arrive each once, in the writer's order,
//! with the writer's payload; loom checks that no writer rewrites a slot the reader
//! still copies.
//!
//! Weakenings: [`Weakening::PublishRelaxed`] (`seq`), [`Weakening::HeadRelaxed`] (the
//! reader's `head.fetch_add`: a writer then reuses the slot without the reader's copy
//! ordered before its write).

use crate::{spin_pruned as spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Slots in the model's ring.
pub const SLOTS: u64 = 2;
/// Packets each of the two writers appends.
pub const PER_WRITER: u64 = 2;

/// A slot: the packet header (the words the model needs) and its payload.
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    countdown: AtomicU64,
    meta: AtomicU64,
    writer: AtomicU64,
    payload: UnsafeCell<u64>,
}

/// The ring: its two ends and its slots.
struct Ring {
    head: AtomicU64,
    tail: AtomicU64,
    slots: [Slot; SLOTS as usize],
}

fn data(writer: u64, m: u64) -> u64 {
    writer << 16 | m
}

/// `Fifo::write`: the packet of ticket `t`, published.
fn write(ring: &Ring, t: u64, writer: u64, m: u64, w: Weakening) {
    let slot = &ring.slots[(t % SLOTS) as usize];
    // SAFETY: ticket `t` is ours, and `head > t - SLOTS` was seen with Acquire (what loom
    // checks).
    slot.payload.with_mut(|p| unsafe { *p = data(writer, m) });
    slot.meta.store(m, Ordering::Relaxed);
    slot.writer.store(writer, Ordering::Relaxed);
    slot.countdown.store(1, Ordering::Relaxed);
    slot.seq.store(t + 1, w.ordering(Weakening::PublishRelaxed, Ordering::Release));
}

/// `Fifo::push`.
fn push(ring: &Ring, writer: u64, m: u64, w: Weakening) {
    let t = ring.tail.fetch_add(1, Ordering::Relaxed);
    spin(|| t - ring.head.load(Ordering::Acquire) < SLOTS);
    write(ring, t, writer, m, w);
}

/// `Fifo::try_push`: whether the packet was appended.
fn try_push(ring: &Ring, writer: u64, m: u64, w: Weakening) -> bool {
    let mut t = ring.tail.load(Ordering::Relaxed);
    loop {
        if t.saturating_sub(ring.head.load(Ordering::Acquire)) >= SLOTS {
            return false;
        }
        match ring.tail.compare_exchange_weak(t, t + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => t = now,
        }
    }
    write(ring, t, writer, m, w);
    true
}

/// `Fifo::pop`: the writer, the meta word and the payload of the next packet.
fn pop(ring: &Ring, cursor: &mut u64, w: Weakening) -> (u64, u64, u64) {
    let t = *cursor;
    let slot = &ring.slots[(t % SLOTS) as usize];
    spin(|| slot.seq.load(Ordering::Acquire) == t + 1);
    let (writer, meta) = (slot.writer.load(Ordering::Relaxed), slot.meta.load(Ordering::Relaxed));
    // SAFETY: published with Release, seen with Acquire; not reused before our decrement.
    let payload = slot.payload.with(|p| unsafe { *p });
    if slot.countdown.fetch_sub(1, Ordering::AcqRel) == 1 {
        ring.head.fetch_add(1, w.ordering(Weakening::HeadRelaxed, Ordering::Release));
    }
    *cursor = t + 1;
    (writer, meta, payload)
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If the reader gets a packet twice, out of its writer's order or torn, or a writer
/// rewrites a slot the reader still copies; on a weakening this model does not have.
pub fn run(w: Weakening) {
    assert!(matches!(w, Weakening::None | Weakening::PublishRelaxed | Weakening::HeadRelaxed));
    let ring = Arc::new(Ring { head: AtomicU64::new(0), tail: AtomicU64::new(0), slots: Default::default() });
    let writers: Vec<_> = [1u64, 2]
        .into_iter()
        .map(|writer| {
            let ring = ring.clone();
            loom::thread::spawn(move || {
                for m in 0..PER_WRITER {
                    match writer {
                        1 => push(&ring, writer, m, w),
                        _ => spin(|| try_push(&ring, writer, m, w)),
                    }
                }
            })
        })
        .collect();
    let (mut cursor, mut next) = (0, [0u64; 3]);
    for _ in 0..2 * PER_WRITER {
        let (writer, meta, payload) = pop(&ring, &mut cursor, w);
        let i = writer as usize;
        assert!((1..=2).contains(&i), "a packet of no writer");
        assert_eq!(meta, next[i], "writer {writer}'s packets out of order");
        assert_eq!(payload, data(writer, meta), "a torn packet");
        next[i] += 1;
    }
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(ring.head.load(Ordering::Relaxed), 2 * PER_WRITER);
}
