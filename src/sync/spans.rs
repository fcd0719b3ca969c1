//! Copy-in/copy-out of spans of any length between every pair of ranks: the staged path of
//! the variable-count exchanges (allgatherv, alltoallv), where a rank both produces and
//! consumes and the pairs carry different numbers of bytes.
//!
//! Every rank derives the same global list of items from the span lengths alone: each span
//! cut into chunks of at most `chunk` bytes, chunk-major (chunk 0 of every pair, then chunk
//! 1, ...), and within a chunk index by step `s = 1, ..., p - 1` and source `src`, the pair
//! (`src`, `src + s`), so that at any moment the producers feed different consumers. A rank
//! walks the whole list in order, producing the items it is the source of into its own
//! staging area and consuming the items it is the destination of from their producer's
//! area. The `k`-th item a rank produces goes to slot `k % slots` of its area and is
//! published with `progress = k + 1`; the `k`-th item a rank consumes is acknowledged with
//! `ack = k + 1`; a producer refills a slot only once the consumer of the item it held has
//! acknowledged it. Both counts only grow within a round.
//!
//! No deadlock, whatever the lengths: a rank blocked at item `g` waits either for the
//! producer of `g` (which is at an item at most `g`, and if at `g` itself, is not waiting
//! for `g`'s consumer) or for the consumer of an item before `g`. Every wait thus points to
//! a rank at an earlier item, or at the same item but one wait further along, so the rank
//! at the earliest item can always go on.
//!
//! (`stage_pairwise` of the exchanges is cheaper to schedule, but it relies on every pair
//! carrying the same number of chunks, which variable counts do not give.)

use super::parts::{step, Slots};
use super::publish::{copy_for_peers, copy_from_peers};
use super::Round;
use crate::error::Result;

/// One chunk of one pair's span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Item {
    src: usize,
    dst: usize,
    /// Offset of the chunk inside the span.
    offset: usize,
    len: usize,
    /// The item's index among those its source produces.
    produced: usize,
    /// The item's index among those its destination consumes.
    consumed: usize,
}

/// The schedule every rank computes alike.
///
/// Invariant: every item's `len <= area.chunk`, so item `g` at its slot lies inside its
/// producer's staging area ([`Slots`]).
#[derive(Debug)]
struct Schedule {
    area: Slots,
    items: Vec<Item>,
}

impl Schedule {
    fn new(stage_bytes: usize, p: usize, len: impl Fn(usize, usize) -> usize) -> Schedule {
        let lens: Vec<usize> =
            (0..p * p).map(|i| if i / p == i % p { 0 } else { len(i / p, i % p) }).collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        let area = Slots::new(stage_bytes, longest);
        let chunk = area.chunk;
        let (mut produced, mut consumed) = (vec![0; p], vec![0; p]);
        let mut items = Vec::new();
        for j in 0..longest.div_ceil(chunk) {
            let offset = j * chunk;
            for s in 1..p {
                for src in 0..p {
                    let dst = (src + s) % p;
                    let n = lens[src * p + dst];
                    if n > offset {
                        items.push(Item {
                            src,
                            dst,
                            offset,
                            len: (n - offset).min(chunk),
                            produced: produced[src],
                            consumed: consumed[dst],
                        });
                        produced[src] += 1;
                        consumed[dst] += 1;
                    }
                }
            }
        }
        Schedule { area, items }
    }
}

impl Round<'_> {
    /// Moves, for every pair of distinct local ranks (`src`, `dst`), `len(src, dst)` bytes
    /// from `src`'s `send` at `from(dst)` to `dst`'s `recv` at `to(src)`, through the
    /// producers' staging areas. Every rank passes the same `len`; `from` and `to` are this
    /// rank's own offsets. Pairs of a rank with itself are skipped (the caller copies
    /// locally).
    ///
    /// A rank that produces anything must be free to overwrite its staging area: if it
    /// published metadata there, it reclaims it first.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting.
    ///
    /// # Panics
    ///
    /// If a span lies outside `send` or `recv` (the caller checked the lengths).
    pub(crate) fn stage_spans(
        &self,
        len: impl Fn(usize, usize) -> usize,
        send: &[u8],
        from: impl Fn(usize) -> usize,
        recv: &mut [u8],
        to: impl Fn(usize) -> usize,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.me());
        let plan = Schedule::new(self.ctl.stage_bytes(), p, len);
        // The items this rank produces, in order: the k-th waits for the ack of the
        // (k - slots)-th.
        let mine: Vec<usize> = (0..plan.items.len()).filter(|&g| plan.items[g].src == me).collect();
        let area = self.ctl.stage(me);
        for item in &plan.items {
            if item.src == me {
                let k = item.produced;
                if k >= plan.area.slots {
                    let before = &plan.items[mine[k - plan.area.slots]];
                    self.wait_ack(before.dst, step(before.consumed))?;
                }
                let piece = &send[from(item.dst) + item.offset..][..item.len];
                // SAFETY: slot `k` lies in our own area (`Schedule` invariant); the consumer
                // of the item it held last acknowledged it (Acquire above), and nobody reads
                // the slot again before we publish step `k + 1` below.
                unsafe { copy_for_peers(piece, area.add(plan.area.slot(k))) };
                self.post_progress(step(k));
            } else if item.dst == me {
                self.wait_progress(item.src, step(item.produced))?;
                let out = &mut recv[to(item.src) + item.offset..][..item.len];
                let theirs = self.ctl.stage(item.src);
                // SAFETY: the producer published this item in its slot with Release and we saw
                // its step with Acquire; it refills the slot only after our ack of the item,
                // published below, so the bytes are stable while we copy them.
                unsafe { copy_from_peers(theirs.add(plan.area.slot(item.produced)), out) };
                self.post_ack(step(item.consumed));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::super::Call;
    use super::*;

    #[test]
    fn schedules_count_per_producer_and_consumer() {
        // 3 ranks; 0 -> 1: 5000 bytes, 2 -> 1: 10 bytes, 1 -> 0: 0; a 8 KiB area.
        let len = |s: usize, d: usize| match (s, d) {
            (0, 1) => 5000,
            (2, 1) => 10,
            (1, 2) => 1,
            _ => 0,
        };
        let plan = Schedule::new(8192, 3, len);
        assert_eq!(plan.area, Slots { chunk: 4096, slots: 2 });
        let got: Vec<_> =
            plan.items.iter().map(|i| (i.src, i.dst, i.offset, i.len, i.produced, i.consumed)).collect();
        // Chunk 0 by step 1 (0->1, 1->2), step 2 (2->1), then chunk 1 (0->1).
        assert_eq!(
            got,
            [(0, 1, 0, 4096, 0, 0), (1, 2, 0, 1, 0, 0), (2, 1, 0, 10, 0, 1), (0, 1, 4096, 904, 1, 2)]
        );
        assert!(Schedule::new(8192, 1, |_, _| 7).items.is_empty());
    }

    /// An alltoallv with lengths that differ per pair (some zero, some many chunks), on
    /// threads standing in for ranks, with small areas so that slots are reused.
    #[test]
    fn staged_spans_deliver_every_byte_for_uneven_pairs() {
        let n = 4;
        let len = |s: usize, d: usize, round: usize| match (s * 7 + d * 3 + round) % 5 {
            0 => 0,
            1 => 1,
            2 => 4097,
            3 => 100,
            _ => 20_000 + s,
        };
        let byte = |s: usize, d: usize, i: usize| (s * 31 + d * 7 + i * 13 + i / 997) as u8;
        on_node(n, |ctl| {
            let me = ctl.me();
            for round in 0..6 {
                let len = |s: usize, d: usize| len(s, d, round);
                // Blocks packed in destination order in send, source order in recv.
                let offsets = |f: &dyn Fn(usize) -> usize| {
                    (0..n).scan(0, |at, r| Some(std::mem::replace(at, *at + f(r)))).collect::<Vec<_>>()
                };
                let sends = offsets(&|d| len(me, d));
                let recvs = offsets(&|s| len(s, me));
                let send: Vec<u8> =
                    (0..n).flat_map(|d| (0..len(me, d)).map(move |i| byte(me, d, i))).collect();
                let total: usize = (0..n).map(|s| len(s, me)).sum();
                let mut recv = vec![0xEEu8; total];
                let r = ctl.begin(&Call::default()).unwrap();
                let moved = r.stage_spans(len, &send, |d| sends[d], &mut recv, |s| recvs[s]);
                r.finish(moved).unwrap();
                for s in (0..n).filter(|&s| s != me) {
                    for i in 0..len(s, me) {
                        assert_eq!(recv[recvs[s] + i], byte(s, me, i), "round {round} from {s}");
                    }
                }
            }
        });
    }
}
