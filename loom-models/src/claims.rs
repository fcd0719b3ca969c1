//! The claims that split a shared copy at run time (`src/sync/counter.rs`,
//! `Round::claim`, with the opening of the word in `Control::publish_flagged` of
//! `src/sync/round.rs`), as the read-write broadcast uses them (`coll::bcast`).
//!
//! A root (local rank 0) and a reader (local rank 1) run rounds of a read-write
//! broadcast of two units (`UNITS`) into the reader's buffer. In each:
//!
//! - the reader arrives (`Control::publish_flagged`): it opens its `claimed` word for the
//!   round (`claims_open`: the epoch with no unit claimed, Relaxed), then `arrive`
//!   (Release);
//! - the root arrives, and waits for the reader's arrival (Acquire), as its round's start
//!   does;
//! - each claims units one at a time (`Round::claim`: a compare-and-swap of the whole
//!   word, Relaxed; a word of another epoch is closed), the reader from the head, the root
//!   from the tail, and copies each claimed unit into the reader's buffer (here: writes
//!   the round's value);
//! - both end the round (`Control::end`: `done`, Release, then every `done`, Acquire),
//!   and the reader then checks every unit of its buffer.
//!
//! Loom checks that no unit is written by both (a causality violation on the buffer's
//! cell), and the reader's check that every unit was written in the round. Two rounds:
//! the word carries over, claimed out, from the first to the second.
//!
//! Weakenings: [`Weakening::ClaimNotAtomic`] (a claim as a load and a store: both sides
//! take the same unit), [`Weakening::NoOpen`] (the reader does not open its word: a
//! closed word gives nobody anything, and nobody copies), [`Weakening::DoneRelaxed`] (the
//! root's writes not ordered before the reader's check).

use crate::{spin, Weakening};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Units of the reader's buffer.
const UNITS: usize = 2;

/// Rounds run.
const ROUNDS: u64 = 2;

/// One rank's slot (the words the model needs).
#[derive(Default)]
struct Slot {
    arrive: AtomicU64,
    done: AtomicU64,
    claimed: AtomicU64,
}

/// The node: both slots, and the reader's buffer.
struct Node {
    slots: [Slot; 2],
    buf: [UnsafeCell<u64>; UNITS],
}

/// What unit `u` holds after round `epoch`.
fn value(epoch: u64, u: usize) -> u64 {
    epoch << 8 | u as u64
}

/// `claims_open`: the word of round `epoch` with no unit claimed.
fn open(epoch: u64) -> u64 {
    (epoch as u32 as u64) << 32
}

/// `Round::claim` with a `want` of one unit, from the head (`tail` false) or the tail.
fn claim(word: &AtomicU64, epoch: u64, tail: bool, w: Weakening) -> Option<usize> {
    let open = open(epoch);
    let mut seen = word.load(Ordering::Relaxed);
    loop {
        if seen >> 32 != open >> 32 {
            return None;
        }
        let (head, back) = ((seen >> 16) as u16 as usize, seen as u16 as usize);
        if head + back >= UNITS {
            return None;
        }
        let (unit, next) = match tail {
            false => (head, open | ((head + 1) as u64) << 16 | back as u64),
            true => (UNITS - 1 - back, open | (head as u64) << 16 | (back + 1) as u64),
        };
        if w == Weakening::ClaimNotAtomic {
            word.store(next, Ordering::Relaxed);
            return Some(unit);
        }
        match word.compare_exchange(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(unit),
            Err(now) => seen = now,
        }
    }
}

/// `Control::end` (every status is good here).
fn end(node: &Node, me: usize, epoch: u64, w: Weakening) {
    node.slots[me].done.store(epoch, w.ordering(Weakening::DoneRelaxed, Ordering::Release));
    for slot in &node.slots {
        spin(|| slot.done.load(Ordering::Acquire) >= epoch);
    }
}

/// Copies claimed units into the reader's buffer until none is left.
fn copy(node: &Node, epoch: u64, tail: bool, w: Weakening) {
    while let Some(u) = claim(&node.slots[1].claimed, epoch, tail, w) {
        // SAFETY: the unit is ours alone in this round (what loom checks), and the reader
        // reads its buffer only after our end.
        node.buf[u].with_mut(|p| unsafe { *p = value(epoch, u) });
    }
}

fn root(node: &Node, w: Weakening) {
    for epoch in 1..=ROUNDS {
        node.slots[0].arrive.store(epoch, Ordering::Release);
        spin(|| node.slots[1].arrive.load(Ordering::Acquire) >= epoch);
        copy(node, epoch, true, w);
        end(node, 0, epoch, w);
    }
}

fn reader(node: &Node, w: Weakening) {
    let mine = &node.slots[1];
    for epoch in 1..=ROUNDS {
        if w != Weakening::NoOpen {
            mine.claimed.store(open(epoch), Ordering::Relaxed);
        }
        mine.arrive.store(epoch, Ordering::Release);
        copy(node, epoch, false, w);
        end(node, 1, epoch, w);
        for (u, cell) in node.buf.iter().enumerate() {
            // SAFETY: the root wrote its units before its end (seen with Acquire).
            let got = cell.with(|p| unsafe { *p });
            assert_eq!(got, value(epoch, u), "round {epoch}: unit {u} not copied");
        }
    }
}

/// Runs the model once (inside [`crate::check`]).
///
/// # Panics
///
/// If a unit is copied by both sides or by neither, or read before its copy; on a
/// weakening this model does not have.
pub fn run(w: Weakening) {
    assert!(matches!(
        w,
        Weakening::None | Weakening::ClaimNotAtomic | Weakening::NoOpen | Weakening::DoneRelaxed
    ));
    let node = Arc::new(Node { slots: Default::default(), buf: Default::default() });
    let other = node.clone();
    let reader = loom::thread::spawn(move || reader(&other, w));
    root(&node, w);
    reader.join().unwrap();
}
