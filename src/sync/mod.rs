//! What lives in the control segment, and the protocol every collective follows.
//!
//! The segment holds a small header, one cache-line padded [`Slot`] per local rank, and
//! one staging area per local rank for copy-in/copy-out. A collective call is a
//! [`Round`]:
//!
//! 1. **Arrive.** The rank writes its [`Call`] (what it calls, the root, its buffers'
//!    addresses and lengths) into its slot, then publishes the round's epoch in its
//!    `arrive` flag, and waits until every local rank has arrived at this epoch.
//! 2. **Check.** Every rank reads every rank's `Call` and decides, by the same pure
//!    function of the same data, whether the call is valid. The ranks therefore agree on
//!    the verdict without another message.
//! 3. **Move.** The algorithm copies data, signalling steps through `progress`.
//! 4. **Finish.** The rank publishes its status and the epoch in `done`, waits for every
//!    local rank's `done`, and fails with `PeerFailed` if another rank failed. Only then
//!    may it return, so no peer touches its buffers after the call.
//!
//! A **private** call ([`PRIVATE`] in its `op`) shares no buffer: peers see its lengths,
//! never its addresses, and its data crosses only through the segment (staging areas,
//! FIFOs). Once such a round succeeded, nothing of the rank's can be touched any more and
//! every rank has reached the same verdict in step 2, so the rank posts `done` and returns
//! without waiting for the others' (one flag phase instead of two: a barrier is just the
//! arrive phase). The wait is owed, not dropped: the next round's arrive phase covers it
//! (every rank arrives at `e + 1` only after leaving `e`), and a step that writes into the
//! rank's own staging area before that phase (metadata, an eager round's board) first
//! settles it ([`Control::settle`]).
//!
//! Flags are sequence numbers that only grow, so nothing is ever reset between calls:
//! `arrive` and `done` hold the epoch (64 bits: they never wrap), `progress` and `ack`
//! hold the epoch's low 32 bits above a 32-bit step, compared as serial numbers
//! (RFC 1982), which is sound because no two ranks are ever more than two rounds apart. The `Call` record is double-buffered by epoch
//! parity: a rank can only overwrite the record of round `e` when it starts round `e + 2`,
//! which needs every rank to have arrived at `e + 1`, which they only do after finishing
//! round `e`.
//!
//! Every wait follows [`wait::WaitPolicy`].

#![allow(unsafe_code)]

mod arrival;
mod counter;
mod exchange;
pub(crate) mod fifo;
mod meta;
mod parts;
mod spans;
mod stage;
pub(crate) mod wait;

use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::transport::{self, heap, Links, Read, RemoteBuf, TransportKind, Write};
use crossbeam_utils::CachePadded;
pub(crate) use exchange::Span;
use std::cell::{Cell, RefCell, RefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use wait::{Peer, WaitPolicy};

/// Identifies the layout below; a rank built from another version refuses the segment.
const MAGIC: u64 = 0x7a63_6f6c_6c5f_0001;
/// The bits of a call record's flag word (word 6): `recv_writable`, whether `send` and
/// `recv` lie in the publisher's shared heap, and above them the id of the exposure the
/// call uses (0 for none).
const FLAG_WRITABLE: u64 = 1;
const FLAG_SEND_HEAP: u64 = 2;
const FLAG_RECV_HEAP: u64 = 4;
const EXPOSURE_SHIFT: u32 = 8;
/// A bit of [`Call::op`] (above what `coll` packs there): the call shares no buffer with
/// its peers, only lengths (see the module docs). A rank's verdict on it must depend only
/// on the published calls, and its data must move only through the segment.
pub(crate) const PRIVATE: u64 = 1 << 63;
/// Words in a call record.
const WORDS: usize = 10;
const STATUS: usize = WORDS - 1;

/// The segment's header, at offset 0.
#[repr(C)]
struct Head {
    magic: AtomicU64,
    ranks: AtomicU64,
    stage_bytes: AtomicU64,
    slot_bytes: AtomicU64,
}

/// One local rank's control block. Only its owner writes it; everyone reads it.
#[repr(C)]
pub(crate) struct Slot {
    arrive: CachePadded<AtomicU64>,
    done: CachePadded<AtomicU64>,
    progress: CachePadded<AtomicU64>,
    ack: CachePadded<AtomicU64>,
    /// The message counter's completion count: readers add to it, its owner waits on it.
    completed: CachePadded<AtomicU64>,
    call: [CachePadded<[AtomicU64; WORDS]>; 2],
}

/// What a rank publishes when it arrives at a collective.
///
/// `op` is chosen by `coll` (collective, algorithm and parameters packed in one word);
/// `sync` only transports it, like `aux` and `aux2`. `send`/`recv` are addresses in the
/// publishing process, with their lengths in bytes: `send` may be read by peers during
/// the round; `recv` may be written by peers only if `recv_writable` is set, which a rank
/// does only when its algorithm lets peers write into it (the address then comes from a
/// unique borrow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) op: u64,
    pub(crate) root: i64,
    pub(crate) send: usize,
    pub(crate) send_len: usize,
    pub(crate) recv: usize,
    pub(crate) recv_len: usize,
    pub(crate) recv_writable: bool,
    pub(crate) aux: u64,
    pub(crate) aux2: u64,
}

impl Call {
    fn words(&self) -> [u64; WORDS - 1] {
        [
            self.op,
            self.root as u64,
            self.send as u64,
            self.send_len as u64,
            self.recv as u64,
            self.recv_len as u64,
            self.recv_writable as u64,
            self.aux,
            self.aux2,
        ]
    }

    fn from_words(w: [u64; WORDS - 1]) -> Call {
        Call {
            op: w[0],
            root: w[1] as i64,
            send: w[2] as usize,
            send_len: w[3] as usize,
            recv: w[4] as usize,
            recv_len: w[5] as usize,
            recv_writable: w[6] & FLAG_WRITABLE != 0,
            aux: w[7],
            aux2: w[8],
        }
    }
}

/// The typed view of a node's control segment, from one rank's side.
#[derive(Debug)]
pub(crate) struct Control {
    seg: Segment,
    me: usize,
    /// Every other local rank, as the waits name them.
    others: Vec<Peer>,
    /// The user communicator's rank of each local rank (for errors).
    ranks: Vec<i32>,
    pids: Vec<libc::pid_t>,
    stage_bytes: usize,
    epoch: Cell<u64>,
    /// A private round this rank left without waiting for every rank's `done` (0: none).
    owed: Cell<u64>,
    policy: WaitPolicy,
    /// This rank's position in the node's Bcast FIFO.
    bcast_cursor: fifo::Cursor,
    /// This rank's position in its own point-to-point FIFO.
    p2p_cursor: fifo::Cursor,
    /// Cache-sized scratch for the chunked reductions, reused by every call.
    scratch: RefCell<Vec<Line>>,
    /// How this rank reaches peers' memory besides CMA.
    links: Links,
    /// Bytes moved by single copies, by transport: cma, heap, xpmem.
    traffic: [Cell<u64>; 3],
    /// The registration the current collective uses, while an exposure runs one.
    exposed: RefCell<Option<Exposed>>,
}

/// A registration, as the rounds of one exposure's collective see it: the id, and every
/// rank's buffer with where it is mapped here.
#[derive(Debug)]
struct Exposed {
    id: u64,
    bufs: Vec<(usize, usize, usize, TransportKind)>,
}

/// A buffer every local rank registered once (an exposure), with the mappings of the
/// peers' buffers held for as long as it lives: the registration cache.
#[derive(Debug)]
pub(crate) struct Registration<'c> {
    id: u64,
    bufs: Vec<RemoteBuf<'c, Read>>,
}

impl Registration<'_> {
    /// The id every rank of the node gave it (the epoch of the round that made it).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

/// A cache line of scratch: 64-byte aligned, so the scratch can be viewed as any
/// primitive element type.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Line([u8; 64]);

/// The scratch bytes per rank: two halves of [`SCRATCH_HALF`].
pub(crate) const SCRATCH_HALF: usize = 32 * 1024;

const fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

const PAGE: usize = 4096;
/// The bytes of one point-to-point ring, page aligned.
const P2P_RING: usize = round_up(fifo::ring_bytes(fifo::P2P_SLOTS, fifo::P2P_PAYLOAD), PAGE);
const SLOTS_OFFSET: usize = round_up(std::mem::size_of::<Head>(), 128);

impl Control {
    /// The segment size for `n` local ranks with `stage_bytes` of staging each: the
    /// header and slots, the staging areas, the Bcast FIFO, and one point-to-point FIFO
    /// per rank.
    pub(crate) fn segment_len(n: usize, stage_bytes: usize) -> usize {
        Control::p2p_offset(n, stage_bytes) + n * P2P_RING
    }

    fn stage_offset(n: usize) -> usize {
        round_up(SLOTS_OFFSET + n * std::mem::size_of::<Slot>(), PAGE)
    }

    fn bcast_offset(n: usize, stage_bytes: usize) -> usize {
        Control::stage_offset(n) + n * stage_bytes
    }

    fn p2p_offset(n: usize, stage_bytes: usize) -> usize {
        Control::bcast_offset(n, stage_bytes)
            + round_up(fifo::ring_bytes(fifo::BCAST_SLOTS, fifo::BCAST_PAYLOAD), PAGE)
    }

    /// Wraps a mapped segment. The creator (`init = true`) writes the header; the others
    /// check it.
    ///
    /// # Errors
    ///
    /// `Error::Segment` if the segment is too small or was laid out by another version.
    pub(crate) fn new(
        seg: Segment,
        me: usize,
        ranks: Vec<i32>,
        pids: Vec<libc::pid_t>,
        stage_bytes: usize,
        policy: WaitPolicy,
        init: bool,
    ) -> Result<Control> {
        let n = ranks.len();
        assert!(me < n && pids.len() == n && stage_bytes % PAGE == 0 && stage_bytes >= 2 * PAGE);
        let bad = |rank| Error::Segment { rank, op: "layout check", errno: crate::error::Errno::EINVAL };
        if seg.len() < Control::segment_len(n, stage_bytes) {
            return Err(bad(ranks[me]));
        }
        let others = (0..n)
            .filter(|&r| r != me)
            .map(|r| Peer { me: ranks[me], rank: ranks[r], pid: pids[r] })
            .collect();
        let ctl = Control {
            seg,
            me,
            others,
            ranks,
            pids,
            stage_bytes,
            epoch: Cell::new(0),
            owed: Cell::new(0),
            policy,
            bcast_cursor: fifo::Cursor::default(),
            p2p_cursor: fifo::Cursor::default(),
            scratch: RefCell::new(vec![Line([0; 64]); 2 * SCRATCH_HALF / 64]),
            links: Links::default(),
            traffic: Default::default(),
            exposed: RefCell::new(None),
        };
        let head = ctl.head();
        let expect = [MAGIC, n as u64, stage_bytes as u64, std::mem::size_of::<Slot>() as u64];
        let fields = [&head.magic, &head.ranks, &head.stage_bytes, &head.slot_bytes];
        if init {
            for (f, v) in fields.iter().zip(expect) {
                f.store(v, Ordering::Relaxed);
            }
        } else if fields.iter().zip(expect).any(|(f, v)| f.load(Ordering::Relaxed) != v) {
            return Err(bad(ctl.ranks[me]));
        }
        Ok(ctl)
    }

    /// This rank's index on the node.
    pub(crate) fn me(&self) -> usize {
        self.me
    }

    /// Sets how this rank reaches its peers' memory (decided by the node at creation).
    pub(crate) fn set_links(&mut self, links: Links) {
        self.links = links;
    }

    /// Bytes this rank moved by single copies so far: through CMA, the heap, XPMEM.
    pub(crate) fn traffic(&self) -> [u64; 3] {
        [self.traffic[0].get(), self.traffic[1].get(), self.traffic[2].get()]
    }

    /// Runs `f`, whose collectives take the peers' buffers from `reg` instead of the
    /// addresses in their calls (and publish `reg`'s id, which every rank checks).
    ///
    /// # Errors
    ///
    /// `f`'s.
    pub(crate) fn with_registration<R>(
        &self,
        reg: &Registration<'_>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let bufs = reg
            .bufs
            .iter()
            .map(|b| {
                let (addr, len, ptr, kind) = b.parts();
                (addr, len, ptr as usize, kind)
            })
            .collect();
        let previous = self.exposed.replace(Some(Exposed { id: reg.id, bufs }));
        let r = f();
        *self.exposed.borrow_mut() = previous;
        r
    }

    /// The number of ranks on the node.
    pub(crate) fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The user communicator's rank of local rank `r`.
    pub(crate) fn rank_of(&self, r: usize) -> i32 {
        self.ranks[r]
    }

    /// The staging bytes per rank.
    pub(crate) fn stage_bytes(&self) -> usize {
        self.stage_bytes
    }

    /// The segment's size in bytes.
    pub(crate) fn segment_bytes(&self) -> usize {
        self.seg.len()
    }

    fn head(&self) -> &Head {
        // SAFETY: the mapping is page aligned and at least `segment_len` bytes long, so a
        // `Head` (atomics only, valid when zero) fits at offset 0; it lives as long as
        // `self.seg`, and atomics may be shared across processes (they are lock-free).
        unsafe { &*(self.seg.as_ptr() as *const Head) }
    }

    fn slot(&self, r: usize) -> &Slot {
        assert!(r < self.size());
        // SAFETY: `segment_len` reserves `size()` slots after the header, each aligned to
        // 128 bytes (SLOTS_OFFSET and size_of::<Slot>() are multiples of 128); a `Slot` is
        // atomics only, valid when zero-filled, and shared by design.
        unsafe { &*(self.seg.as_ptr().add(SLOTS_OFFSET + r * std::mem::size_of::<Slot>()) as *const Slot) }
    }

    /// The staging area of local rank `r`: `stage_bytes` bytes, page aligned.
    fn stage(&self, r: usize) -> *mut u8 {
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

    /// The rank's scratch: `2 * SCRATCH_HALF` bytes, 64-byte aligned.
    ///
    /// # Panics
    ///
    /// If it is already borrowed (one collective at a time uses it).
    pub(crate) fn scratch(&self) -> RefMut<'_, [u8]> {
        RefMut::map(self.scratch.borrow_mut(), |v| bytemuck::cast_slice_mut(v.as_mut_slice()))
    }

    /// This rank's reading positions: in the Bcast FIFO, and in its point-to-point FIFO.
    pub(crate) fn cursors(&self) -> (&fifo::Cursor, &fifo::Cursor) {
        (&self.bcast_cursor, &self.p2p_cursor)
    }

    /// Every other local rank, for the waits any of them can end.
    fn others(&self) -> &[Peer] {
        &self.others
    }

    fn peer(&self, r: usize) -> Peer {
        Peer { me: self.ranks[self.me], rank: self.ranks[r], pid: self.pids[r] }
    }

    fn wait_ge(&self, r: usize, flag: impl Fn(&Slot) -> &AtomicU64, target: u64) -> Result<()> {
        self.wait_flag(r, flag, |v| v >= target)
    }

    fn wait_flag(
        &self,
        r: usize,
        flag: impl Fn(&Slot) -> &AtomicU64,
        ready: impl Fn(u64) -> bool,
    ) -> Result<()> {
        let slot = self.slot(r);
        wait::wait_until(&self.policy, self.peer(r), || ready(flag(slot).load(Ordering::Acquire)))
    }

    /// Starts a collective: publishes `call` and waits until every local rank has arrived.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting for an arrival.
    pub(crate) fn begin(&self, call: &Call) -> Result<Round<'_>> {
        let mut round = self.publish(call, 0);
        let (epoch, mine) = (round.epoch, self.slot(self.me));
        for r in 0..self.size() {
            if let Err(e) = self.wait_ge(r, |s| &s.arrive, epoch) {
                // We arrived, so a peer may already be copying: we cannot wait for it (the
                // wait just failed), so say we failed and are done, without waiting.
                round.finished = true;
                round.guard(&e);
                mine.call[(epoch % 2) as usize][STATUS].store(1, Ordering::Relaxed);
                mine.done.store(epoch, Ordering::Release);
                return Err(e);
            }
        }
        // Every rank arrived here only after posting `done` of the round before.
        self.owed.set(0);
        Ok(round)
    }

    /// Starts round `epoch + 1`: clears the first `board` words of this rank's staging area
    /// (see `arrival`), notes where this rank's completion counter stands, writes `call`
    /// and publishes the arrival. Nothing is awaited.
    fn publish(&self, call: &Call, board: usize) -> Round<'_> {
        let epoch = self.epoch.get() + 1;
        self.epoch.set(epoch);
        let mine = self.slot(self.me);
        for i in 0..board {
            self.board_word(self.me, i).store(0, Ordering::Relaxed);
        }
        // Peers add to our counter only after seeing this arrival, and every addition of
        // an earlier round was made before its author's `done`, which our previous
        // `finish` awaited: the value now is exactly this round's starting point.
        let base = mine.completed.load(Ordering::Acquire);
        let record = &mine.call[(epoch % 2) as usize];
        let private = call.op & PRIVATE != 0;
        let exposure = self.exposed.borrow().as_ref().map_or(0, |e| e.id << EXPOSURE_SHIFT);
        let mut words = call.words();
        let in_heap = |addr, len| len > 0 && heap::contains(addr) && heap::contains(addr + len - 1);
        words[6] = if private {
            // Lengths only: no address, so no peer can reach this rank's buffers.
            words[2] = 0;
            words[4] = 0;
            exposure
        } else {
            (call.recv_writable as u64)
                | if in_heap(call.send, call.send_len) { FLAG_SEND_HEAP } else { 0 }
                | if in_heap(call.recv, call.recv_len) { FLAG_RECV_HEAP } else { 0 }
                | exposure
        };
        for (w, v) in record.iter().zip(words) {
            w.store(v, Ordering::Relaxed);
        }
        record[STATUS].store(0, Ordering::Relaxed);
        mine.arrive.store(epoch, Ordering::Release);
        let writable = call.recv_writable && !private;
        Round {
            ctl: self,
            epoch,
            writable,
            finished: false,
            eager: false,
            quiet: private && exposure == 0,
            base,
        }
    }

    /// Waits for every rank's `done` of the private round this rank left without waiting
    /// (if any): after it, no peer reads this rank's staging area for an earlier round.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn settle(&self) -> Result<()> {
        let owed = self.owed.replace(0);
        if owed == 0 {
            return Ok(());
        }
        (0..self.size()).try_for_each(|r| self.wait_ge(r, |s| &s.done, owed))
    }

    /// Publishes this rank's status for `epoch`, waits for every rank's, and reports the
    /// first peer that failed.
    ///
    /// Every live peer is awaited, even after one was found dead: a live peer may still be
    /// copying into this rank's buffers, and returning would hand them back to the caller
    /// while it writes. Only a dead peer (which copies nothing any more) or a timed-out
    /// one (see `Round::guard`) is left behind.
    fn end(&self, epoch: u64, failed: bool) -> Result<()> {
        let mine = self.slot(self.me);
        mine.call[(epoch % 2) as usize][STATUS].store(failed as u64, Ordering::Relaxed);
        mine.done.store(epoch, Ordering::Release);
        let mut first = Ok(());
        for r in 0..self.size() {
            if let Err(e) = self.wait_ge(r, |s| &s.done, epoch) {
                first = first.and(Err(e));
            }
        }
        first?;
        for r in 0..self.size() {
            if r != self.me && self.slot(r).call[(epoch % 2) as usize][STATUS].load(Ordering::Relaxed) != 0 {
                return Err(Error::PeerFailed { rank: self.ranks[self.me], peer: self.ranks[r] });
            }
        }
        Ok(())
    }
}

/// A `progress`/`ack` value: the epoch's low 32 bits above the step.
fn stamp(epoch: u64, step: u32) -> u64 {
    (epoch as u32 as u64) << 32 | step as u64
}

/// Whether stamp `seen` is at or past stamp `want`: epochs compare as 32-bit serial
/// numbers, steps plainly.
fn reached(seen: u64, want: u64) -> bool {
    let ahead = ((seen >> 32) as u32).wrapping_sub((want >> 32) as u32) as i32;
    ahead > 0 || (ahead == 0 && seen as u32 >= want as u32)
}

/// One collective call in progress. Created by [`Control::begin`]; ended by
/// [`Round::finish`], which every path must reach (dropping it finishes it as failed).
pub(crate) struct Round<'c> {
    ctl: &'c Control,
    epoch: u64,
    /// Whether this rank published a buffer for peers to write.
    writable: bool,
    finished: bool,
    /// Started by [`Control::begin_eager`]: peers may not have arrived yet.
    eager: bool,
    /// A private call on no exposure: a success may leave without awaiting the others.
    quiet: bool,
    /// This rank's completion counter when it arrived (see `counter`).
    base: u64,
}

impl<'c> Round<'c> {
    /// This rank's index on the node.
    pub(crate) fn me(&self) -> usize {
        self.ctl.me
    }

    /// The number of ranks on the node.
    pub(crate) fn size(&self) -> usize {
        self.ctl.size()
    }

    /// The user communicator's rank of local rank `r`.
    pub(crate) fn rank_of(&self, r: usize) -> i32 {
        self.ctl.rank_of(r)
    }

    /// The call local rank `r` published for this round.
    pub(crate) fn call(&self, r: usize) -> Call {
        let record = &self.ctl.slot(r).call[(self.epoch % 2) as usize];
        let mut w = [0u64; WORDS - 1];
        for (v, a) in w.iter_mut().zip(record.iter()) {
            *v = a.load(Ordering::Relaxed);
        }
        Call::from_words(w)
    }

    /// The send buffer local rank `r` published, to read from.
    pub(crate) fn remote_send(&self, r: usize) -> RemoteBuf<'_, Read> {
        let c = self.published(r);
        // SAFETY: rank `r` published this range for this round (we saw its `arrive` with
        // Acquire in `begin` or in `published`; an empty range if not); it keeps the
        // buffer borrowed and does not return before every rank, us included, has posted
        // `done`, which we only do in `finish`, after which the handle's borrow of `self`
        // has ended.
        unsafe { RemoteBuf::new(self.ctl.pids[r], c.send, c.send_len) }
    }

    /// The flag word of local rank `r`'s call.
    fn flags(&self, r: usize) -> u64 {
        self.ctl.slot(r).call[(self.epoch % 2) as usize][6].load(Ordering::Relaxed)
    }

    /// The exposure local rank `r`'s call uses (0 for none).
    pub(crate) fn exposure_of(&self, r: usize) -> u64 {
        self.flags(r) >> EXPOSURE_SHIFT
    }

    /// Rank `r`'s registered buffer, if this round runs on an exposure.
    fn registered<A>(&self, r: usize, writable: bool) -> Option<RemoteBuf<'_, A>> {
        let exposed = self.ctl.exposed.borrow();
        let e = exposed.as_ref()?;
        let (addr, len, ptr, kind) = e.bufs[r];
        // Only a round of this exposure on every rank (which `coll::check` verifies
        // before any copy) may use it; the id is in our own call.
        debug_assert_eq!(self.exposure_of(self.me()), e.id);
        let len = if writable { len } else { 0 };
        // SAFETY: rank `r` registered this range when the exposure was made, and keeps it
        // borrowed until the exposure is withdrawn; it uses it in this round (every rank
        // publishes the exposure's id, checked before any copy) and does not return before
        // we post `done`. `ptr` maps the range here, held by the registration, which
        // `with_registration` keeps borrowed while this round runs.
        Some(unsafe { RemoteBuf::new(self.ctl.pids[r], addr, len).with_mapping(ptr as *mut u8, kind) })
    }

    /// Local rank `r`'s send buffer, to read from, mapped here where the node's links
    /// reach it (else a CMA buffer).
    pub(crate) fn peer_send(&self, r: usize) -> RemoteBuf<'_, Read> {
        if let Some(b) = self.registered(r, true) {
            return b;
        }
        let heap = self.flags(r) & FLAG_SEND_HEAP != 0;
        // SAFETY: `r` published the heap flag for this range (`begin` derives it from the
        // address); the rest is `remote_send`'s contract.
        unsafe { self.remote_send(r).map(&self.ctl.links, r, heap) }
    }

    /// Local rank `r`'s receive buffer, to read a result it made ready, mapped here where
    /// the links reach it.
    pub(crate) fn peer_result(&self, r: usize) -> RemoteBuf<'_, Read> {
        if let Some(b) = self.registered(r, true) {
            return b;
        }
        let heap = self.flags(r) & FLAG_RECV_HEAP != 0;
        // SAFETY: as in `peer_send`.
        unsafe { self.remote_recv_read(r).map(&self.ctl.links, r, heap) }
    }

    /// Local rank `r`'s receive buffer for peers to write (empty unless `r` marked it
    /// writable), mapped here where the links reach it.
    pub(crate) fn peer_recv(&self, r: usize) -> RemoteBuf<'_, Write> {
        if let Some(b) = self.registered(r, self.call(r).recv_writable) {
            return b;
        }
        let heap = self.flags(r) & FLAG_RECV_HEAP != 0;
        // SAFETY: as in `peer_send`.
        unsafe { self.remote_recv(r).map(&self.ctl.links, r, heap) }
    }

    fn count(&self, kind: TransportKind, bytes: usize) {
        let i = match kind {
            TransportKind::Heap => 1,
            TransportKind::Xpmem => 2,
            _ => 0,
        };
        let c = &self.ctl.traffic[i];
        c.set(c.get() + bytes as u64);
    }

    /// Copies `dst.len()` bytes at `offset` of `src`, local rank `peer`'s buffer.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming the transport and the peer.
    pub(crate) fn read<A>(
        &self,
        src: &RemoteBuf<'_, A>,
        peer: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::copy_fails() {
            return Err(self.transport_error(src.kind(), false, peer, crate::Errno::EIO));
        }
        transport::read(src, offset, dst)
            .map_err(|errno| self.transport_error(src.kind(), false, peer, errno))?;
        self.count(src.kind(), dst.len());
        Ok(())
    }

    /// Copies `src` into `dst`, local rank `peer`'s buffer, at `offset`.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming the transport and the peer.
    pub(crate) fn write(
        &self,
        src: &[u8],
        dst: &RemoteBuf<'_, Write>,
        peer: usize,
        offset: usize,
    ) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::copy_fails() {
            return Err(self.transport_error(dst.kind(), true, peer, crate::Errno::EIO));
        }
        transport::write(src, dst, offset)
            .map_err(|errno| self.transport_error(dst.kind(), true, peer, errno))?;
        self.count(dst.kind(), src.len());
        Ok(())
    }

    /// Copies the ranges `(offset, len)` of `src`, local rank `peer`'s buffer, in order,
    /// into `dst`, packed.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read); `EINVAL` if the lengths do not add up to `dst.len()`.
    pub(crate) fn read_v<A>(
        &self,
        src: &RemoteBuf<'_, A>,
        peer: usize,
        ranges: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::copy_fails() {
            return Err(self.transport_error(src.kind(), false, peer, crate::Errno::EIO));
        }
        transport::read_v(src, ranges, dst)
            .map_err(|errno| self.transport_error(src.kind(), false, peer, errno))?;
        self.count(src.kind(), dst.len());
        Ok(())
    }

    /// Reads `dst.len()` bytes at `offset` of local rank `r`'s send buffer ([`peer_send`]:
    /// loads where it is mapped here, else CMA).
    ///
    /// [`peer_send`]: Self::peer_send
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub(crate) fn read_send(&self, r: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read(&self.peer_send(r), r, offset, dst)
    }

    /// Reads `dst.len()` bytes at `offset` of local rank `r`'s receive buffer, a part it
    /// has declared final ([`peer_result`](Self::peer_result)).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub(crate) fn read_result(&self, r: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read(&self.peer_result(r), r, offset, dst)
    }

    /// Writes `src` at `offset` of local rank `r`'s receive buffer, which `r` published
    /// writable ([`peer_recv`](Self::peer_recv)).
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub(crate) fn write_recv(&self, src: &[u8], r: usize, offset: usize) -> Result<()> {
        self.write(src, &self.peer_recv(r), r, offset)
    }

    /// The calibration's copies (`coll::probe`), which time CMA itself, mapped or not:
    /// a read of local rank `r`'s send buffer (`write = false`, into `buf`) or a write of
    /// `buf` into its receive buffer, at offset 0.
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming CMA and the peer.
    pub(crate) fn cma_copy(&self, r: usize, write: bool, buf: &mut [u8]) -> Result<()> {
        let copied = match write {
            true => transport::cma::write(buf, &self.remote_recv(r), 0),
            false => transport::cma::read(&self.remote_send(r), 0, buf),
        };
        copied.map_err(|errno| self.transport_error(TransportKind::Cma, write, r, errno))
    }

    /// The calibration's pinning probe: one CMA read of a byte against the first `len`
    /// bytes of local rank `r`'s send buffer, which pins them all (`cma::pin_probe`).
    ///
    /// # Errors
    ///
    /// As [`cma_copy`](Self::cma_copy).
    pub(crate) fn cma_pin(&self, r: usize, len: usize) -> Result<()> {
        transport::cma::pin_probe(&self.remote_send(r), 0, len)
            .map(drop)
            .map_err(|errno| self.transport_error(TransportKind::Cma, false, r, errno))
    }

    fn transport_error(&self, kind: TransportKind, write: bool, peer: usize, errno: crate::Errno) -> Error {
        let op = match (kind, write) {
            (TransportKind::Heap, false) => "heap read",
            (TransportKind::Heap, true) => "heap write",
            (TransportKind::Xpmem, false) => "xpmem read",
            (TransportKind::Xpmem, true) => "xpmem write",
            (_, false) => "cma read",
            (_, true) => "cma write",
        };
        Error::Transport { rank: self.rank_of(self.me()), peer: self.rank_of(peer), op, errno }
    }

    /// Registers every rank's send buffer of this round for later rounds (an exposure):
    /// maps each peer's here and holds the mapping until the registration drops.
    pub(crate) fn register(&self) -> Registration<'c> {
        let ctl: &'c Control = self.ctl;
        let bufs = (0..self.size())
            .map(|r| {
                let c = self.call(r);
                let heap = self.flags(r) & FLAG_SEND_HEAP != 0;
                // SAFETY: `r` published this range in the round that makes the exposure and
                // keeps it borrowed for the exposure's life; the registration is only used
                // by rounds of that exposure (see `registered`). `heap` is what `r`
                // published. Our own buffer is described, never mapped.
                let b = unsafe { RemoteBuf::new(ctl.pids[r], c.send, c.send_len) };
                match r == self.me() {
                    true => b,
                    // SAFETY: as above.
                    false => unsafe { b.map(&ctl.links, r, heap) },
                }
            })
            .collect();
        Registration { id: self.epoch, bufs }
    }

    /// The rank's cache-sized scratch (see [`Control::scratch`]).
    pub(crate) fn scratch(&self) -> RefMut<'_, [u8]> {
        self.ctl.scratch()
    }

    /// The receive buffer local rank `r` published for peers to write. If `r` did not
    /// mark it writable, the handle is empty and every write through it fails.
    pub(crate) fn remote_recv(&self, r: usize) -> RemoteBuf<'_, Write> {
        let c = self.published(r);
        let len = if c.recv_writable { c.recv_len } else { 0 };
        // SAFETY: as in `remote_send`; `r` set `recv_writable` only for a range it lets
        // peers write during the round, whose address it took from a unique borrow (an
        // unmarked range gets length 0, which no copy can touch).
        unsafe { RemoteBuf::new(self.ctl.pids[r], c.recv, len) }
    }

    /// Publishes that this rank has completed `step` of this round.
    pub(crate) fn post_progress(&self, step: u32) {
        self.ctl.slot(self.ctl.me).progress.store(stamp(self.epoch, step), Ordering::Release);
    }

    /// Waits until local rank `r` has completed `step` of this round.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`; `PeerFailed` if `r` finished the round without reaching
    /// `step` (a copy or an operator failed there).
    pub(crate) fn wait_progress(&self, r: usize, step: u32) -> Result<()> {
        self.wait_step(r, |s| &s.progress, step)
    }

    /// Waits until `flag` of local rank `r` reaches `step` of this round, or `r` posts
    /// `done` without it: a rank that gives up on a round (its copy failed, its operator
    /// panicked) posts `done` and nothing more, so waiting on would never end. A rank
    /// waiting for a third one that gave up gives up in turn, so the failure reaches every
    /// waiter however the steps chain.
    fn wait_step(&self, r: usize, flag: impl Fn(&Slot) -> &AtomicU64, step: u32) -> Result<()> {
        let (slot, want) = (self.ctl.slot(r), stamp(self.epoch, step));
        let stepped = || reached(flag(slot).load(Ordering::Acquire), want);
        let mut gave_up = false;
        wait::wait_until(&self.ctl.policy, self.ctl.peer(r), || {
            stepped() || {
                gave_up = slot.done.load(Ordering::Acquire) >= self.epoch;
                gave_up
            }
        })?;
        // `done` is posted after every step a rank makes: look at the step once more.
        match gave_up && !stepped() {
            true => Err(Error::PeerFailed { rank: self.rank_of(self.me()), peer: self.rank_of(r) }),
            false => Ok(()),
        }
    }

    /// A second step counter, for ranks that are producer and consumer in one round:
    /// `progress` counts what a rank produced, `ack` what it consumed.
    pub(crate) fn post_ack(&self, step: u32) {
        self.ctl.slot(self.ctl.me).ack.store(stamp(self.epoch, step), Ordering::Release);
    }

    /// Waits until local rank `r` has acknowledged `step` of this round.
    ///
    /// # Errors
    ///
    /// As [`wait_progress`](Self::wait_progress).
    pub(crate) fn wait_ack(&self, r: usize, step: u32) -> Result<()> {
        self.wait_step(r, |s| &s.ack, step)
    }

    /// Ends the round: agrees with every local rank on the outcome. Returns `result` if it
    /// is an error, else the first peer's failure, else `Ok`.
    ///
    /// # Errors
    ///
    /// This rank's own error, `PeerFailed`, `PeerDied` or `Timeout`.
    pub(crate) fn finish(mut self, result: Result<()>) -> Result<()> {
        self.finished = true;
        if self.quiet && !self.eager && result.is_ok() {
            // A private round: nothing of ours is reachable, and every rank reached the
            // same verdict. Say we are done; the wait for the others' is owed (module docs).
            let mine = self.ctl.slot(self.ctl.me);
            mine.call[(self.epoch % 2) as usize][STATUS].store(0, Ordering::Relaxed);
            mine.done.store(self.epoch, Ordering::Release);
            self.ctl.owed.set(self.epoch);
            return Ok(());
        }
        let end = self.end(result.is_err());
        result.and(end)
    }

    fn end(&self, failed: bool) -> Result<()> {
        let end = self.ctl.end(self.epoch, failed);
        if let Err(e) = &end {
            self.guard(e);
        }
        end
    }

    /// Aborts the process if a wait timed out while a live peer may still write into our
    /// buffer: returning would let it write into memory we no longer own. (A dead peer
    /// writes nothing.) This is what a leaked MPI request does, too.
    fn guard(&self, e: &Error) {
        if self.writable && matches!(e, Error::Timeout { .. }) {
            eprintln!("zcoll: {e}; aborting, since the peer may still write into this process");
            std::process::abort();
        }
    }
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // A panic or an early return inside an algorithm: tell the peers, and wait until
            // none of them still touches our buffers.
            let _ = self.end(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` controls over one segment, as `n` ranks of one node would see it; each is
    /// moved to its own thread by the caller.
    pub(super) fn node(n: usize, stage_bytes: usize) -> Vec<Control> {
        let len = Control::segment_len(n, stage_bytes);
        let (first, name) = Segment::create(0, len).unwrap();
        let mut segs = vec![first];
        for r in 1..n {
            segs.push(Segment::open(r as i32, &name, len).unwrap());
        }
        Segment::unlink(&name);
        let pid = std::process::id() as libc::pid_t;
        let policy =
            WaitPolicy { timeout: Some(std::time::Duration::from_secs(20)), ..WaitPolicy::default() };
        segs.into_iter()
            .enumerate()
            .map(|(me, seg)| {
                Control::new(seg, me, (0..n as i32).collect(), vec![pid; n], stage_bytes, policy, me == 0)
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn step_stamps_survive_epoch_wrap_around() {
        for e in [1u64, 7, u32::MAX as u64 - 1, u32::MAX as u64, 1 << 32, (1 << 40) + 5] {
            assert!(reached(stamp(e, 3), stamp(e, 3)));
            assert!(reached(stamp(e, 4), stamp(e, 3)));
            assert!(!reached(stamp(e, 2), stamp(e, 3)));
            // The previous round's last step never satisfies this round's first.
            assert!(!reached(stamp(e - 1, u32::MAX), stamp(e, 0)));
            assert!(reached(stamp(e + 1, 0), stamp(e, u32::MAX)));
        }
        assert!(!reached(0, stamp(1, 0)));
    }

    #[test]
    fn slots_are_cache_line_multiples() {
        assert_eq!(std::mem::size_of::<Slot>() % 128, 0);
        assert_eq!(SLOTS_OFFSET % 128, 0);
        assert_eq!(Control::segment_len(4, 8192) % PAGE, 0);
    }

    #[test]
    fn a_foreign_layout_is_refused() {
        let mut ctls = node(2, 8192);
        let b = ctls.pop().unwrap();
        let a = ctls.pop().unwrap();
        a.head().magic.store(1, Ordering::Relaxed);
        let err = Control::new(b.seg, 1, vec![0, 1], b.pids, 8192, WaitPolicy::default(), false).unwrap_err();
        assert!(matches!(err, Error::Segment { rank: 1, op: "layout check", .. }));
    }

    #[test]
    fn rounds_exchange_calls_and_agree_on_failure() {
        let n = 4;
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = node(n, 8192)
                .into_iter()
                .map(|ctl| {
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for round in 0..200u64 {
                            let call = Call { op: 7, root: ctl.me() as i64, aux: round, ..Call::default() };
                            let r = ctl.begin(&call).unwrap();
                            for p in 0..n {
                                let c = r.call(p);
                                assert_eq!((c.op, c.root, c.aux), (7, p as i64, round));
                            }
                            // Rank 2 fails every tenth round; everyone must hear of it.
                            let mine = if round % 10 == 0 && ctl.me() == 2 {
                                Err(Error::Unsupported { rank: 2, what: "test".into() })
                            } else {
                                Ok(())
                            };
                            seen.push(r.finish(mine));
                        }
                        seen
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, seen) in outcomes.iter().enumerate() {
            for (round, outcome) in seen.iter().enumerate() {
                match (round % 10 == 0, me == 2, outcome) {
                    (false, _, Ok(())) => {}
                    (true, true, Err(Error::Unsupported { .. })) => {}
                    (true, false, Err(Error::PeerFailed { rank, peer: 2 })) => assert_eq!(*rank, me as i32),
                    other => panic!("rank {me} round {round}: {other:?}"),
                }
            }
        }
    }

    /// The peer of `a_peer_that_dies_mid_round_is_an_error`: local rank 1 of
    /// `ZCOLL_TEST_RANKS` (default 2), every other rank being a thread of the parent.
    /// Arrives, then exits without finishing the round.
    #[test]
    #[ignore = "run as a separate process by a_peer_that_dies_mid_round_is_an_error"]
    fn dying_peer() {
        let name = std::env::var("ZCOLL_TEST_SEGMENT").unwrap();
        let n = std::env::var("ZCOLL_TEST_RANKS").map_or(2, |v| v.parse().unwrap());
        let len = Control::segment_len(n, 8192);
        let seg = Segment::open(1, &name, len).unwrap();
        let parent = std::os::unix::process::parent_id() as libc::pid_t;
        let mut pids = vec![parent; n];
        pids[1] = std::process::id() as libc::pid_t;
        let ranks = (0..n as i32).collect();
        let ctl = Control::new(seg, 1, ranks, pids, 8192, WaitPolicy::default(), false).unwrap();
        let round = ctl.begin(&Call::default()).unwrap();
        std::mem::forget(round);
        std::process::exit(0);
    }

    /// Starts `dying_peer` as local rank 1 of `n` over a new segment; returns the child,
    /// the segment's name and the pids every rank uses (the child's at 1, ours elsewhere).
    fn spawn_dying_peer(n: usize) -> (std::process::Child, String, Vec<libc::pid_t>) {
        let len = Control::segment_len(n, 8192);
        let (seg, name) = Segment::create(0, len).unwrap();
        let me = std::process::id() as libc::pid_t;
        let ranks: Vec<i32> = (0..n as i32).collect();
        // Lay out the header before the peer looks at it.
        drop(Control::new(seg, 0, ranks, vec![me; n], 8192, WaitPolicy::default(), true).unwrap());
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "sync::tests::dying_peer", "--ignored", "--test-threads=1"])
            .env("ZCOLL_TEST_SEGMENT", &name)
            .env("ZCOLL_TEST_RANKS", n.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut pids = vec![me; n];
        pids[1] = child.id() as libc::pid_t;
        (child, name, pids)
    }

    /// A rank that finds one peer dead still waits for every live one before it returns:
    /// a live peer may be writing into its buffers. Ranks 2.. are "writing" for a while
    /// after the death; rank 0 must not return before they are done.
    #[test]
    fn a_dead_peer_does_not_end_the_wait_for_live_ones() {
        use std::sync::atomic::AtomicUsize;
        for n in [3, 5] {
            let (mut child, name, pids) = spawn_dying_peer(n);
            let len = Control::segment_len(n, 8192);
            let policy =
                WaitPolicy { timeout: Some(std::time::Duration::from_secs(60)), ..WaitPolicy::default() };
            let writing_done = AtomicUsize::new(0);
            let ctls: Vec<Control> = [0]
                .into_iter()
                .chain(2..n)
                .map(|r| {
                    let seg = Segment::open(r as i32, &name, len).unwrap();
                    Control::new(seg, r, (0..n as i32).collect(), pids.clone(), 8192, policy, false).unwrap()
                })
                .collect();
            let (writing_done, pids) = (&writing_done, &pids);
            std::thread::scope(|s| {
                for ctl in ctls {
                    s.spawn(move || {
                        let round = ctl.begin(&Call::default()).expect("every rank arrives");
                        if ctl.me() == 0 {
                            let e = round.finish(Ok(())).unwrap_err();
                            assert_eq!(e, Error::PeerDied { rank: 0, peer: 1, pid: pids[1] });
                            assert_eq!(
                                writing_done.load(Ordering::SeqCst),
                                n - 2,
                                "returned while a live peer was still writing"
                            );
                        } else {
                            // Outlive the dead rank by a while, as a long copy would.
                            while crate::sync::wait::alive(pids[1]) {
                                std::thread::sleep(std::time::Duration::from_millis(5));
                            }
                            std::thread::sleep(std::time::Duration::from_millis(200));
                            writing_done.fetch_add(1, Ordering::SeqCst);
                            let _ = round.finish(Ok(()));
                        }
                    });
                }
            });
            Segment::unlink(&name);
            assert!(child.wait().unwrap().success());
        }
    }

    /// A rank that gives up on a round (its copy failed, its operator panicked) posts
    /// `done` and no further step. Whoever waits for its step, and whoever waits for that
    /// waiter's step, gets an error at once instead of waiting for ever.
    #[test]
    fn a_rank_that_gives_up_mid_round_ends_every_wait() {
        for n in [3, 5] {
            let start = std::time::Instant::now();
            let outcomes: Vec<Result<()>> = std::thread::scope(|s| {
                let hs: Vec<_> = node(n, 8192)
                    .into_iter()
                    .map(|ctl| {
                        s.spawn(move || {
                            let me = ctl.me();
                            let round = ctl.begin(&Call::default()).unwrap();
                            // A chain: rank r moves on once rank r + 1 made its step (and
                            // acknowledged it); the last rank fails instead.
                            let moved = match me == n - 1 {
                                true => Err(Error::Unsupported { rank: me as i32, what: "injected".into() }),
                                false => round.wait_progress(me + 1, 1).and_then(|()| {
                                    round.post_progress(1);
                                    round.wait_ack(me + 1, 1)?;
                                    round.post_ack(1);
                                    Ok(())
                                }),
                            };
                            round.finish(moved)
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(start.elapsed() < std::time::Duration::from_secs(2), "{:?}", start.elapsed());
            for (me, outcome) in outcomes.into_iter().enumerate() {
                let want = match me == n - 1 {
                    true => Error::Unsupported { rank: me as i32, what: "injected".into() },
                    false => Error::PeerFailed { rank: me as i32, peer: me as i32 + 1 },
                };
                assert_eq!(outcome, Err(want), "rank {me} of {n}");
            }
        }
    }

    #[test]
    fn a_peer_that_dies_mid_round_is_an_error() {
        let len = Control::segment_len(2, 8192);
        let (mut child, name, pids) = spawn_dying_peer(2);
        let seg = Segment::open(0, &name, len).unwrap();
        let pid = pids[1];
        let policy =
            WaitPolicy { timeout: Some(std::time::Duration::from_secs(60)), ..WaitPolicy::default() };
        let ctl = Control::new(seg, 0, vec![0, 1], pids, 8192, policy, false).unwrap();
        let round = ctl.begin(&Call::default()).expect("the peer arrives before it dies");
        Segment::unlink(&name);
        assert_eq!(round.finish(Ok(())), Err(Error::PeerDied { rank: 0, peer: 1, pid }));
        assert!(child.wait().unwrap().success());
    }
}
