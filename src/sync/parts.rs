//! Copy-in/copy-out of per-rank parts through one rank's staging area: the scatter and
//! gather of the `cico` path, and the node-internal relay of the two-level versions.
//!
//! One rank, the hub, owns the staging area used. In a scatter the hub copies each peer's
//! part into it and that peer alone copies it out; in a gather every peer copies its part
//! in and the hub copies them all out. The area is cut into `slots` slots of `chunk` bytes,
//! `chunk` being the longest part rounded up to a cache line but at most half the area: small
//! parts all fit at once (a scatter of 1 KiB blocks to 60 ranks never waits), long ones
//! are pipelined through at least two slots.
//!
//! Both sides derive the same list of items `(peer, offset, length)` from the part lengths
//! alone, chunk-major (chunk 0 of every peer, then chunk 1, ...) with the peers in order
//! starting after the hub, so every peer progresses at once. Item `g` lives in slot
//! `g % slots`. Its producer publishes `progress = g + 1` once the item is in its slot, its
//! consumer `ack = g + 1` once it has copied it out, and the slot is refilled with item
//! `g + slots` only after that ack. A producer's items and a consumer's items are both
//! increasing in `g`, so these cumulative step counts only grow within the round, as the
//! monotonic counters require.

use super::publish::{copy_for_peers, copy_from_peers};
use super::Round;
use crate::error::Result;
use std::ops::Range;

/// One chunk of one peer's part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Item {
    peer: usize,
    offset: usize,
    len: usize,
}

/// A staging area of `stage_bytes` cut into `slots` slots of `chunk` bytes, for items of
/// at most `longest` bytes: `chunk` is `longest` rounded up to a cache line but at most half
/// the area, so short items all fit at once and long ones go through at least two slots
/// in turn. The staged scatter and gather here and the staged spans (`spans`) cut their
/// areas alike.
///
/// Invariant: `slots * chunk <= stage_bytes`, so an item of at most `chunk` bytes at
/// `slot(k)` lies inside the area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slots {
    pub(super) chunk: usize,
    pub(super) slots: usize,
}

impl Slots {
    pub(super) fn new(stage_bytes: usize, longest: usize) -> Slots {
        let chunk = longest.max(1).next_multiple_of(64).min(stage_bytes / 2);
        Slots { chunk, slots: stage_bytes / chunk }
    }

    /// The byte offset in the area of the slot of the `k`-th item through it.
    pub(super) fn slot(&self, k: usize) -> usize {
        (k % self.slots) * self.chunk
    }
}

/// The step number the `k`-th item a rank produces (or consumes) is published (or
/// acknowledged) with.
pub(super) fn step(k: usize) -> u32 {
    u32::try_from(k + 1).expect("fewer than 2^32 staged chunks in one round")
}

/// The schedule both sides of a staged scatter or gather compute alike.
///
/// Invariant: every item's `len <= area.chunk`, so the bytes of item `g` at
/// `area.slot(g)` lie inside the staging area ([`Slots`]).
#[derive(Debug)]
struct Plan {
    area: Slots,
    items: Vec<Item>,
}

impl Plan {
    /// The schedule for parts of `len(r)` bytes, for every local rank `r` but `hub`, through
    /// a staging area of `stage_bytes`.
    fn new(stage_bytes: usize, size: usize, hub: usize, len: impl Fn(usize) -> usize) -> Plan {
        // The peers in order from the hub's next, with their part lengths (an iterator, not
        // a list: this runs per call, and small parts need no allocation but `items`).
        let peers = || (1..size).map(|i| (hub + i) % size).map(|r| (r, len(r)));
        let longest = peers().map(|(_, n)| n).max().unwrap_or(0);
        let area = Slots::new(stage_bytes, longest);
        let chunk = area.chunk;
        let mut items = Vec::with_capacity(size.saturating_sub(1) * longest.div_ceil(chunk));
        for j in 0..longest.div_ceil(chunk) {
            let offset = j * chunk;
            items.extend(peers().filter(|&(_, n)| n > offset).map(|(peer, n)| Item {
                peer,
                offset,
                len: (n - offset).min(chunk),
            }));
        }
        Plan { area, items }
    }
}

/// Which way [`Round::stage_parts`] moves the parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Toward {
    /// From the hub to every other rank: a scatter. Local rank `r` receives
    /// `send[parts[r]]` of the hub into its `recv`; on the hub `recv` is unused, on the
    /// others `send` is unused and `recv` has `parts[me].len()` bytes.
    Peers,
    /// From every other rank to the hub: a gather. Local rank `r`'s `send` lands in
    /// `recv[parts[r]]` of the hub; on the hub `send` is unused and `recv[parts[hub]]` is
    /// left alone, on the others `recv` is unused and `send` has `parts[me].len()` bytes.
    Hub,
}

impl Round<'_> {
    /// Moves parts between `hub` and every other local rank through `hub`'s staging area,
    /// as `toward` says. Every local rank calls it with the same `toward` and `parts` (one
    /// range per local rank, in the hub's buffer; `parts[hub]` is ignored).
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting.
    ///
    /// # Panics
    ///
    /// If the buffers do not match `parts` (the callers check the lengths first).
    pub(crate) fn stage_parts(
        &self,
        toward: Toward,
        hub: usize,
        parts: &[Range<usize>],
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        assert_eq!(parts.len(), self.size());
        let plan = Plan::new(self.ctl.stage_bytes(), self.size(), hub, |r| parts[r].len());
        let area = self.ctl.stage(hub);
        let me = self.me();
        // The hub moves every item, at its peer's part of its buffer; a peer its own items,
        // at their offset in its part.
        let (at_hub, at_peer) = (|i: &Item| parts[i.peer].start + i.offset, |i: &Item| i.offset);
        let fits = |len: usize| parts.iter().enumerate().all(|(r, p)| r == hub || p.end <= len);
        match (toward, me == hub) {
            (Toward::Peers, true) => {
                assert!(fits(send.len()));
                self.produce(&plan, area, |_| true, |g| plan.items[g].peer, send, at_hub)
            }
            (Toward::Peers, false) => {
                assert_eq!(recv.len(), parts[me].len());
                self.consume(&plan, area, |i| i.peer == me, |_| hub, recv, at_peer)
            }
            (Toward::Hub, true) => {
                assert!(fits(recv.len()));
                self.consume(&plan, area, |_| true, |i| i.peer, recv, at_hub)
            }
            (Toward::Hub, false) => {
                assert_eq!(send.len(), parts[me].len());
                self.produce(&plan, area, |i| i.peer == me, |_| hub, send, at_peer)
            }
        }
    }

    /// One side of a staged move through the hub's staging area `area`, laid out by `plan`:
    /// copies the items `mine` selects into their slots, item `g` from `send[at(item)..]`.
    /// Before reusing a slot it waits until `consumer(g - slots)`, the consumer of the
    /// slot's previous item, acknowledged that item; each item is published with its step.
    fn produce(
        &self,
        plan: &Plan,
        area: *mut u8,
        mine: impl Fn(&Item) -> bool,
        consumer: impl Fn(usize) -> usize,
        send: &[u8],
        at: impl Fn(&Item) -> usize,
    ) -> Result<()> {
        for (g, item) in plan.items.iter().enumerate().filter(|(_, i)| mine(i)) {
            if g >= plan.area.slots {
                let before = g - plan.area.slots;
                self.wait_ack(consumer(before), step(before))?;
            }
            let from = &send[at(item)..][..item.len];
            // SAFETY: slot `g` lies in the hub's staging area (`Plan` invariant); the slot's
            // previous item, `g - slots`, was acknowledged by its consumer (Acquire above), and
            // the consumer of item `g` reads it only after our step below: nobody else
            // touches the slot while we write it.
            unsafe { copy_for_peers(from, area.add(plan.area.slot(g))) };
            self.post_progress(step(g));
        }
        Ok(())
    }

    /// The other side of [`produce`](Self::produce): copies the items `mine` selects out of
    /// their slots into `recv[at(item)..]`, item `g` once `producer(item)` published it, and
    /// acknowledges each.
    fn consume(
        &self,
        plan: &Plan,
        area: *mut u8,
        mine: impl Fn(&Item) -> bool,
        producer: impl Fn(&Item) -> usize,
        recv: &mut [u8],
        at: impl Fn(&Item) -> usize,
    ) -> Result<()> {
        for (g, item) in plan.items.iter().enumerate().filter(|(_, i)| mine(i)) {
            self.wait_progress(producer(item), step(g))?;
            let to = &mut recv[at(item)..][..item.len];
            // SAFETY: slot `g` lies in the hub's staging area (`Plan` invariant); its producer
            // published item `g` with Release and we saw the step with Acquire; nobody
            // refills the slot before our ack of `g`, published below, so the bytes are
            // stable while we copy them into our own buffer.
            unsafe { copy_from_peers(area.add(plan.area.slot(g)), to) };
            self.post_ack(step(g));
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
    fn plans_are_chunk_major_and_fit_the_area() {
        // 3 ranks, hub 1, parts of 10_000 and 3 bytes, a 8 KiB area: 4 KiB chunks.
        let lens = [10_000, 0, 3];
        let plan = Plan::new(8192, 3, 1, |r| lens[r]);
        assert_eq!(plan.area, Slots { chunk: 4096, slots: 2 });
        let peers: Vec<(usize, usize, usize)> =
            plan.items.iter().map(|i| (i.peer, i.offset, i.len)).collect();
        assert_eq!(peers, [(2, 0, 3), (0, 0, 4096), (0, 4096, 4096), (0, 8192, 1808)]);
        // Small parts share the area: one slot each, no wait.
        let plan = Plan::new(65536, 8, 0, |_| 100);
        assert_eq!((plan.area, plan.items.len()), (Slots { chunk: 128, slots: 512 }, 7));
        // Nothing to move.
        assert!(Plan::new(8192, 4, 0, |_| 0).items.is_empty());
        assert!(Plan::new(8192, 1, 0, |_| 5).items.is_empty());
    }

    /// Scatters then gathers blocks of several sizes (one part longer than the others, to
    /// exercise unequal parts), on threads standing in for ranks.
    #[test]
    fn staged_scatter_and_gather_deliver_every_byte() {
        let n = 4;
        let sizes = [0usize, 1, 63, 4095, 4097, 3 * 4096 + 5, 40_000];
        on_node(n, |ctl| {
            for (i, &block) in sizes.iter().enumerate() {
                let hub = i % n;
                let me = ctl.me();
                let len = |r: usize| block + (r == 2) as usize * 7;
                let mut parts = Vec::new();
                let mut at = 0;
                for r in 0..n {
                    parts.push(at..at + len(r));
                    at += len(r);
                }
                let byte = |r: usize, j: usize| (j * 13 + r * 101 + i) as u8;
                let whole: Vec<u8> = (0..n).flat_map(|r| (0..len(r)).map(move |j| byte(r, j))).collect();

                let mut mine = vec![0xEE; len(me)];
                let round = ctl.begin(&Call::default()).unwrap();
                let send: &[u8] = if me == hub { &whole } else { &[] };
                let moved = round.stage_parts(Toward::Peers, hub, &parts, send, &mut mine);
                round.finish(moved).unwrap();
                if me != hub {
                    assert!(mine.iter().enumerate().all(|(j, &b)| b == byte(me, j)), "scatter {block}");
                }

                let mut back = vec![0xEE; at];
                let round = ctl.begin(&Call::default()).unwrap();
                let moved = if me == hub {
                    round.stage_parts(Toward::Hub, hub, &parts, &[], &mut back)
                } else {
                    round.stage_parts(Toward::Hub, hub, &parts, &mine, &mut [])
                };
                round.finish(moved).unwrap();
                if me == hub {
                    for r in 0..n {
                        let got = &back[parts[r].clone()];
                        if r == hub {
                            assert!(got.iter().all(|&b| b == 0xEE), "the hub's part was written");
                        } else {
                            assert!(got.iter().enumerate().all(|(j, &b)| b == byte(r, j)), "gather");
                        }
                    }
                }
            }
        });
    }
}
