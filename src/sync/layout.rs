//! Where things lie in the control segment: a header, one cache-line padded [`Slot`] per
//! local rank, one staging area per rank, the Bcast FIFO and one point-to-point FIFO per
//! rank; and the scratch lines each rank reuses. Every offset into the mapping is
//! computed here, and only here.

use super::call::{RECORDS, WORDS};
use super::{fifo, Control};
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;

/// Identifies the layout below; a rank built from another version refuses the segment.
pub(super) const MAGIC: u64 = 0x7a63_6f6c_6c5f_0007;

/// The segment's header, at offset 0.
#[repr(C)]
pub(super) struct Head {
    pub(super) magic: AtomicU64,
    pub(super) ranks: AtomicU64,
    pub(super) stage_bytes: AtomicU64,
    pub(super) slot_bytes: AtomicU64,
}

/// One local rank's control block. Only its owner writes it, but for the two counters its
/// peers add to (`completed`, `claimed`); everyone reads it.
#[repr(C)]
pub(crate) struct Slot {
    pub(super) arrive: CachePadded<AtomicU64>,
    /// With a tree of arrivals: the last round in which this rank's whole subtree had
    /// arrived (the root's: the whole node). See `Control::begin`.
    pub(super) gathered: CachePadded<AtomicU64>,
    pub(super) done: CachePadded<AtomicU64>,
    pub(super) progress: CachePadded<AtomicU64>,
    pub(super) ack: CachePadded<AtomicU64>,
    /// The message counter's completion count: readers add to it, its owner waits on it.
    pub(super) completed: CachePadded<AtomicU64>,
    /// The chunks of this rank's buffer claimed in a shared copy: the epoch above the
    /// counts claimed from the head (by this rank) and from the tail (by a peer). See
    /// `Round::claim`.
    pub(super) claimed: CachePadded<AtomicU64>,
    /// The call records, by epoch modulo [`RECORDS`] ([`Slot::record`]).
    pub(super) call: [CachePadded<[AtomicU64; WORDS]>; RECORDS],
    /// Non-zero once the rank has dropped its communicator (`Control::depart`): it will
    /// never post anything again, so a peer's wait for it fails instead of lasting as long
    /// as its process does (a rank that panicked is alive for as long as its MPI finalize
    /// waits for the others).
    pub(super) departed: CachePadded<AtomicU64>,
}

impl Slot {
    /// The call record of round `epoch` (or of a later round [`RECORDS`] apart).
    #[inline]
    pub(super) fn record(&self, epoch: u64) -> &[AtomicU64; WORDS] {
        &self.call[(epoch % RECORDS as u64) as usize]
    }
}

/// A cache line of scratch: 64-byte aligned, so the scratch can be viewed as any
/// primitive element type.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Line(pub(super) [u8; 64]);

/// The scratch bytes per rank: two halves of [`SCRATCH_HALF`].
pub(crate) const SCRATCH_HALF: usize = 32 * 1024;

const fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

pub(super) const PAGE: usize = 4096;
/// The bytes of one point-to-point ring, page aligned.
pub(super) const P2P_RING: usize = round_up(fifo::ring_bytes(fifo::P2P_SLOTS, fifo::P2P_PAYLOAD), PAGE);
pub(super) const SLOTS_OFFSET: usize = round_up(std::mem::size_of::<Head>(), 128);

impl Control {
    /// The segment size for `n` local ranks with `stage_bytes` of staging each: the
    /// header and slots, the staging areas, the Bcast FIFO, and one point-to-point FIFO
    /// per rank.
    pub(crate) fn segment_len(n: usize, stage_bytes: usize) -> usize {
        Control::p2p_offset(n, stage_bytes) + n * P2P_RING
    }

    pub(super) fn stage_offset(n: usize) -> usize {
        round_up(SLOTS_OFFSET + n * std::mem::size_of::<Slot>(), PAGE)
    }

    pub(super) fn bcast_offset(n: usize, stage_bytes: usize) -> usize {
        Control::stage_offset(n) + n * stage_bytes
    }

    pub(super) fn p2p_offset(n: usize, stage_bytes: usize) -> usize {
        Control::bcast_offset(n, stage_bytes)
            + round_up(fifo::ring_bytes(fifo::BCAST_SLOTS, fifo::BCAST_PAYLOAD), PAGE)
    }

    pub(super) fn head(&self) -> &Head {
        // SAFETY: the mapping is page aligned and at least `segment_len` bytes long, so a
        // `Head` (atomics only, valid when zero) fits at offset 0; it lives as long as
        // `self.seg`, and atomics may be shared across processes (they are lock-free).
        unsafe { &*(self.seg.as_ptr() as *const Head) }
    }

    pub(super) fn slot(&self, r: usize) -> &Slot {
        assert!(r < self.size());
        // SAFETY: `segment_len` reserves `size()` slots after the header, each aligned to
        // 128 bytes (SLOTS_OFFSET and size_of::<Slot>() are multiples of 128); a `Slot` is
        // atomics only, valid when zero-filled, and shared by design.
        unsafe { &*(self.seg.as_ptr().add(SLOTS_OFFSET + r * std::mem::size_of::<Slot>()) as *const Slot) }
    }

    /// The staging area of local rank `r`: `stage_bytes` bytes, page aligned.
    pub(super) fn stage(&self, r: usize) -> *mut u8 {
        assert!(r < self.size());
        // SAFETY: `segment_len` reserves `size()` staging areas of `stage_bytes` after the
        // slots, so the offset stays inside the mapping.
        unsafe { self.seg.as_ptr().add(Control::stage_offset(self.size()) + r * self.stage_bytes) }
    }

    /// The node's Bcast FIFO: every packet is read by every other local rank.
    pub(crate) fn bcast_fifo(&self) -> fifo::Fifo<'_> {
        let offset = Control::bcast_offset(self.size(), self.stage_bytes);
        // SAFETY: `segment_len` reserves the ring at this page-aligned offset, and every
        // rank uses it only as the Bcast FIFO.
        unsafe {
            fifo::Fifo::new(
                self,
                self.seg.as_ptr().add(offset),
                fifo::BCAST_SLOTS,
                fifo::BCAST_PAYLOAD,
                self.size() as u64 - 1,
            )
        }
    }

    /// Local rank `r`'s point-to-point FIFO: every packet is read by `r` alone.
    pub(crate) fn p2p_fifo(&self, r: usize) -> fifo::Fifo<'_> {
        assert!(r < self.size());
        let offset = Control::p2p_offset(self.size(), self.stage_bytes) + r * P2P_RING;
        // SAFETY: `segment_len` reserves one ring per rank at this page-aligned offset,
        // used only as `r`'s point-to-point FIFO.
        unsafe { fifo::Fifo::new(self, self.seg.as_ptr().add(offset), fifo::P2P_SLOTS, fifo::P2P_PAYLOAD, 1) }
    }
}
