//! The Blue Gene/P FIFOs (DCMF): lock-free rings of fixed-size packets in the segment.
//!
//! One mechanism serves two uses:
//!
//! - the **Bcast FIFO**, one per node: every packet is read by every other rank of the
//!   node (`readers = n - 1`);
//! - the **point-to-point FIFO**, one per rank: every packet is read by that rank alone
//!   (`readers = 1`), from any writer.
//!
//! A writer takes a ticket `t` with an atomic fetch-and-increment of `tail`, waits until
//! there is room (`t - head < slots`), writes the payload and its header (length, stream,
//! a word of metadata, the writer) into slot `t % slots`, sets the slot's countdown to
//! `readers`, and publishes `seq = t + 1`. A reader keeps a private cursor: it waits for
//! `seq == cursor + 1`, copies the payload, and decrements the countdown; the reader that
//! brings it to zero advances `head` by one.
//!
//! Why `head += 1` from whichever slot empties is enough, even when slots empty out of
//! order: every reader reads in ticket order and decrements only after its copy, so when
//! slot `j` reaches zero every slot before `j` already has. The slots at zero always form
//! a prefix, and `head`, the number of increments, never exceeds it: a writer that sees
//! `t - head < slots` reuses a slot whose every reader is done.
//!
//! Several streams can share a FIFO: every packet carries its stream, and a reader that
//! meets another stream's packet hands it to whoever demultiplexes.

use super::publish::{copy_for_peers, copy_from_peers};
use super::wait;
use super::{Control, Round};
use crate::error::{Error, Result};
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots in the node's Bcast FIFO.
pub(crate) const BCAST_SLOTS: usize = 16;
/// Payload bytes of a Bcast FIFO slot.
pub(crate) const BCAST_PAYLOAD: usize = 8192;
/// Slots in each rank's point-to-point FIFO.
pub(crate) const P2P_SLOTS: usize = 8;
/// Payload bytes of a point-to-point slot.
pub(crate) const P2P_PAYLOAD: usize = 4096;
/// Bytes before every payload (the packet header, padded to two cache lines).
const HEADER: usize = 128;

/// The two ends of a ring.
#[repr(C)]
struct Ends {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
}

/// The header of a packet, at the start of its slot.
#[repr(C)]
struct Packet {
    seq: AtomicU64,
    countdown: AtomicU64,
    len: AtomicU64,
    stream: AtomicU64,
    meta: AtomicU64,
    writer: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Packet>() <= HEADER && std::mem::size_of::<Ends>() % 128 == 0);

/// The bytes a ring of `slots` slots of `payload` bytes occupies.
pub(crate) const fn ring_bytes(slots: usize, payload: usize) -> usize {
    std::mem::size_of::<Ends>() + slots * (HEADER + payload)
}

/// What a reader learns of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Payload bytes.
    pub(crate) len: usize,
    /// The stream it belongs to.
    pub(crate) stream: u32,
    /// The writer's word of metadata (a message sequence number, an offset, ...).
    pub(crate) meta: u64,
    /// The local rank that wrote it.
    pub(crate) writer: usize,
}

/// A reader's private position in a ring, and the tickets it wrote itself and must skip.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    next: Cell<u64>,
    own: RefCell<Vec<u64>>,
}

/// A ring in the control segment, seen from one rank.
pub(crate) struct Fifo<'c> {
    ctl: &'c Control,
    base: *mut u8,
    slots: usize,
    payload: usize,
    readers: u64,
}

impl<'c> Fifo<'c> {
    /// # Safety
    ///
    /// `base` is the start of `ring_bytes(slots, payload)` bytes of `ctl`'s segment,
    /// 128-byte aligned, used for nothing but this ring by every rank.
    pub(super) unsafe fn new(
        ctl: &'c Control,
        base: *mut u8,
        slots: usize,
        payload: usize,
        readers: u64,
    ) -> Self {
        Fifo { ctl, base, slots, payload, readers }
    }

    /// The payload bytes of one packet.
    pub(crate) fn payload(&self) -> usize {
        self.payload
    }

    fn ends(&self) -> &Ends {
        // SAFETY: `base` starts the ring (the contract of `new`); `Ends` is atomics only,
        // valid when zero, 128-byte aligned like `base`, and lives as long as `ctl`.
        unsafe { &*(self.base as *const Ends) }
    }

    /// The header and the payload of the slot of ticket `t`.
    fn slot(&self, t: u64) -> (&Packet, *mut u8) {
        let offset = std::mem::size_of::<Ends>() + (t as usize % self.slots) * (HEADER + self.payload);
        // SAFETY: the slot lies inside the ring (`ring_bytes`), its header is atomics only
        // and 8-byte aligned (HEADER and the payloads are multiples of 128), and the payload
        // follows it.
        unsafe {
            let at = self.base.add(offset);
            (&*(at as *const Packet), at.add(HEADER))
        }
    }

    /// Appends one packet of at most `payload()` bytes. `cursor` is the writer's own
    /// reading position in this ring, if it also reads it (the Bcast FIFO), so that it
    /// skips its own packet later.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting for room.
    pub(crate) fn push(&self, stream: u32, meta: u64, data: &[u8], cursor: Option<&Cursor>) -> Result<()> {
        assert!(data.len() <= self.payload, "a packet is at most one slot");
        let ends = self.ends();
        let t = ends.tail.fetch_add(1, Ordering::Relaxed);
        wait::wait_until_any(&self.ctl.policy, self.ctl.others(), || {
            t - ends.head.load(Ordering::Acquire) < self.slots as u64
        })?;
        // SAFETY: ticket `t` is ours alone (fetch_add), and `head > t - slots` was seen
        // with Acquire, which orders us after every reader's copy of the slot's previous
        // packet.
        unsafe { self.write(t, stream, meta, data) };
        if let Some(cursor) = cursor {
            if cursor.next.get() == t {
                cursor.next.set(t + 1);
            } else {
                cursor.own.borrow_mut().push(t);
            }
        }
        Ok(())
    }

    /// Whether a packet could be appended now without waiting.
    pub(crate) fn has_room(&self) -> bool {
        let ends = self.ends();
        let tail = ends.tail.load(Ordering::Relaxed);
        tail.saturating_sub(ends.head.load(Ordering::Acquire)) < self.slots as u64
    }

    /// Appends one packet if the ring has room now, without waiting: the arrival-aware
    /// collectives never block on one receiver while others could take data. A ticket is
    /// taken (by compare-and-swap on `tail`) only when its slot is free, so a writer that
    /// gives up never leaves a ticket without a packet behind.
    ///
    /// Returns whether the packet was appended.
    pub(crate) fn try_push(&self, stream: u32, meta: u64, data: &[u8]) -> bool {
        assert!(data.len() <= self.payload, "a packet is at most one slot");
        let ends = self.ends();
        let mut t = ends.tail.load(Ordering::Relaxed);
        loop {
            // (A stale `t` behind `head` looks like room; the swap below then fails.)
            if t.saturating_sub(ends.head.load(Ordering::Acquire)) >= self.slots as u64 {
                return false;
            }
            match ends.tail.compare_exchange_weak(t, t + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => t = now,
            }
        }
        // SAFETY: ticket `t` is ours alone (the compare-and-swap moved `tail` past it), and
        // `head > t - slots` was seen with Acquire before the swap (`head` only grows).
        unsafe { self.write(t, stream, meta, data) };
        true
    }

    /// Writes the packet of ticket `t` and publishes it (`seq = t + 1`, Release).
    ///
    /// # Safety
    ///
    /// - Ticket `t` was taken by this rank from `tail`, so no other writer uses its slot.
    /// - `head > t - slots` was observed with Acquire: every reader of the slot's previous
    ///   packet has finished copying it, so nobody reads the payload while it is written.
    /// - `data.len() <= self.payload`.
    unsafe fn write(&self, t: u64, stream: u32, meta: u64, data: &[u8]) {
        let (packet, payload) = self.slot(t);
        // SAFETY: the slot's payload has `self.payload >= data.len()` bytes and nobody
        // reads it until `seq` is published below (the caller's contract).
        unsafe { copy_for_peers(data, payload) };
        packet.len.store(data.len() as u64, Ordering::Relaxed);
        packet.stream.store(stream as u64, Ordering::Relaxed);
        packet.meta.store(meta, Ordering::Relaxed);
        packet.writer.store(self.ctl.me() as u64, Ordering::Relaxed);
        packet.countdown.store(self.readers, Ordering::Relaxed);
        packet.seq.store(t + 1, Ordering::Release);
    }

    /// Whether tickets past `cursor` have been taken (packets published or about to be).
    pub(crate) fn behind(&self, cursor: &Cursor) -> bool {
        self.ends().tail.load(Ordering::Acquire) > self.next_ticket(cursor)
    }

    /// The header of the next packet at `cursor` if it is published, without taking it.
    pub(crate) fn peek(&self, cursor: &Cursor) -> Option<Header> {
        let t = self.next_ticket(cursor);
        let (packet, _) = self.slot(t);
        (packet.seq.load(Ordering::Acquire) == t + 1).then(|| Header {
            len: packet.len.load(Ordering::Relaxed) as usize,
            stream: packet.stream.load(Ordering::Relaxed) as u32,
            meta: packet.meta.load(Ordering::Relaxed),
            writer: packet.writer.load(Ordering::Relaxed) as usize,
        })
    }

    /// The ticket the reader at `cursor` takes next, past the packets it wrote itself
    /// (which it skips for good).
    fn next_ticket(&self, cursor: &Cursor) -> u64 {
        let mut t = cursor.next.get();
        let mut own = cursor.own.borrow_mut();
        while let Some(i) = own.iter().position(|&o| o == t) {
            own.swap_remove(i);
            t += 1;
        }
        cursor.next.set(t);
        t
    }

    /// Takes the next packet at `cursor` (skipping the reader's own), copies its payload
    /// into the front of `dst`, and returns its header.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting for a packet; `Unsupported` if the packet
    /// does not fit in `dst` (it is consumed all the same, so the ring stays consistent).
    pub(crate) fn pop(&self, cursor: &Cursor, dst: &mut [u8]) -> Result<Header> {
        let t = self.next_ticket(cursor);
        let (packet, payload) = self.slot(t);
        wait::wait_until_any(&self.ctl.policy, self.ctl.others(), || {
            packet.seq.load(Ordering::Acquire) == t + 1
        })?;
        let header = Header {
            len: packet.len.load(Ordering::Relaxed) as usize,
            stream: packet.stream.load(Ordering::Relaxed) as u32,
            meta: packet.meta.load(Ordering::Relaxed),
            writer: packet.writer.load(Ordering::Relaxed) as usize,
        };
        let fits = header.len <= dst.len().min(self.payload);
        if fits {
            // SAFETY: the writer published the packet with Release and we saw `seq` with
            // Acquire; the slot is not reused before our decrement below, so the payload
            // is stable while we copy `len <= payload` bytes of it.
            unsafe { copy_from_peers(payload, &mut dst[..header.len]) };
        }
        if packet.countdown.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ends().head.fetch_add(1, Ordering::Release);
        }
        cursor.next.set(t + 1);
        if !fits {
            return Err(Error::Unsupported {
                rank: self.ctl.rank_of(self.ctl.me()),
                what: format!("a {}-byte packet for a {}-byte buffer", header.len, dst.len()),
            });
        }
        Ok(header)
    }
}

/// The stream of broadcast data in the Bcast FIFO.
const BCAST_STREAM: u32 = 1;

impl Round<'_> {
    /// Broadcasts `buf` from local rank `src` through the node's Bcast FIFO, one packet per
    /// `BCAST_PAYLOAD` bytes: the root writes as far ahead as the ring has room, each
    /// reader copies every packet out, and the last reader of a packet frees its slot.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; `Protocol` if a packet is not the one expected (which
    /// only a bug or a foreign writer can cause).
    pub(crate) fn fifo_bcast(&self, src: usize, buf: &mut [u8]) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let fifo = self.ctl.bcast_fifo();
        let (cursor, _) = self.ctl.cursors();
        let payload = fifo.payload();
        if self.me() == src {
            for (i, packet) in buf.chunks(payload).enumerate() {
                fifo.push(BCAST_STREAM, i as u64, packet, Some(cursor))?;
            }
            return Ok(());
        }
        for (i, packet) in buf.chunks_mut(payload).enumerate() {
            let expected = Header { len: packet.len(), stream: BCAST_STREAM, meta: i as u64, writer: src };
            let got = fifo.pop(cursor, packet)?;
            if got != expected {
                return Err(Error::Protocol {
                    rank: self.rank_of(self.me()),
                    what: format!("Bcast FIFO packet {got:?} where {expected:?} was due"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::*;

    /// Every message reaches every reader exactly once and in order, over many laps of
    /// the ring, with writers that often find it full.
    #[test]
    fn bcast_fifo_delivers_everything_in_order_across_many_laps() {
        let n = 4;
        let messages = 40 * BCAST_SLOTS as u64;
        on_node(n, |ctl| {
            let fifo = ctl.bcast_fifo();
            let cursor = Cursor::default();
            let mut buf = vec![0u8; BCAST_PAYLOAD];
            // Rank 0 writes everything, as fast as the ring allows.
            for m in 0..messages {
                if ctl.me() == 0 {
                    let len = (m as usize * 37) % BCAST_PAYLOAD;
                    let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ m) as u8).collect();
                    fifo.push(1, m, &data, Some(&cursor)).unwrap();
                } else {
                    let h = fifo.pop(&cursor, &mut buf).unwrap();
                    assert_eq!((h.meta, h.writer, h.stream), (m, 0, 1));
                    assert_eq!(h.len, (m as usize * 37) % BCAST_PAYLOAD);
                    assert!(buf[..h.len].iter().enumerate().all(|(i, &b)| b == (i as u64 ^ m) as u8));
                }
            }
        });
    }

    /// Writers change and two streams interleave: every reader sees each stream's
    /// packets in order, and never its own.
    #[test]
    fn bcast_fifo_multiplexes_streams_from_changing_writers() {
        let n = 3;
        let rounds = 200u64;
        on_node(n, |ctl| {
            let fifo = ctl.bcast_fifo();
            let cursor = Cursor::default();
            let mut buf = [0u8; 16];
            let mut next = [0u64; 2];
            for round in 0..rounds {
                let writer = (round % n as u64) as usize;
                // The writer sends one packet on each stream; the order of the
                // streams alternates.
                if ctl.me() == writer {
                    for stream in [round % 2, 1 - round % 2] {
                        fifo.push(stream as u32, round, &round.to_le_bytes(), Some(&cursor)).unwrap();
                    }
                } else {
                    for _ in 0..2 {
                        let h = fifo.pop(&cursor, &mut buf).unwrap();
                        assert_ne!(h.writer, ctl.me());
                        let stream = h.stream as usize;
                        assert_eq!(h.meta, next[stream]);
                        assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), round);
                        next[stream] += 1;
                    }
                }
                if ctl.me() == writer {
                    next = [round + 1; 2];
                }
            }
        });
    }

    /// Many writers feed one rank's point-to-point FIFO: per writer, in order, each
    /// packet exactly once.
    #[test]
    fn p2p_fifo_keeps_each_writers_order() {
        let n = 4;
        let per_writer = 30 * P2P_SLOTS as u64;
        on_node(n, |ctl| {
            if ctl.me() == 0 {
                let fifo = ctl.p2p_fifo(0);
                let cursor = Cursor::default();
                let mut next = vec![0u64; n];
                let mut buf = [0u8; 8];
                for _ in 0..per_writer * (n as u64 - 1) {
                    let h = fifo.pop(&cursor, &mut buf).unwrap();
                    assert_eq!(h.meta, next[h.writer]);
                    assert_eq!(u64::from_le_bytes(buf), h.meta * 1000 + h.writer as u64);
                    next[h.writer] += 1;
                }
                assert!(next[1..].iter().all(|&c| c == per_writer));
            } else {
                let fifo = ctl.p2p_fifo(0);
                for m in 0..per_writer {
                    let v = m * 1000 + ctl.me() as u64;
                    fifo.push(0, m, &v.to_le_bytes(), None).unwrap();
                }
            }
        });
    }

    #[test]
    fn a_packet_too_large_for_the_buffer_is_an_error_and_is_consumed() {
        on_node(2, |ctl| {
            let fifo = ctl.p2p_fifo(1);
            if ctl.me() == 0 {
                fifo.push(0, 1, &[7u8; 100], None).unwrap();
                fifo.push(0, 2, &[8u8; 10], None).unwrap();
            } else {
                let cursor = Cursor::default();
                let mut small = [0u8; 50];
                assert!(matches!(fifo.pop(&cursor, &mut small), Err(Error::Unsupported { .. })));
                let h = fifo.pop(&cursor, &mut small).unwrap();
                assert_eq!((h.meta, h.len), (2, 10));
                assert_eq!(&small[..10], &[8u8; 10]);
            }
        });
    }
}
