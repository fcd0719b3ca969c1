//! Broadcast: the root's buffer ends up in every rank's buffer.
//!
//! Algorithms (cost for `p` ranks and `n` bytes, with the model of the book's broadcast
//! chapter: `alpha` per CMA call, `beta` per byte, `l` per page pinned, `s` page size,
//! `gamma(c)` the slowdown of `c` concurrent readers pinning one process):
//!
//! - [`BcastAlgorithm::DirectRead`]: the root publishes its address; every other rank
//!   reads the whole buffer with one CMA read. `alpha + n beta + (n / s) l gamma(p - 1)`:
//!   one copy per byte, but all `p - 1` readers pin the root's pages at once.
//! - [`BcastAlgorithm::DirectWrite`]: every non-root publishes its address; the root
//!   writes the buffer into each in turn. `(p - 1)(alpha + n beta + (n / s) l)`: no
//!   contention (the kernel pins one receiver's pages at a time, and each receiver's
//!   pages only once), but the root does all the copies sequentially.
//! - [`BcastAlgorithm::KnomialRead`] with radix `k`: a k-nomial tree rooted at the root;
//!   a rank reads the whole buffer from its parent once the parent holds it, and the
//!   children of one parent read in waves of at most `k - 1` (a wave starts when the
//!   previous wave of the same parent is done), so no process ever has more than
//!   `k - 1` readers. `ceil(log_k p) (alpha + n beta + (n / s) l gamma(k - 1))`
//!   along the critical path (one wave per level), with `k = p` being direct read.
//! - [`BcastAlgorithm::ScatterAllgather`]: the buffer is cut into `p` chunks (page
//!   multiples when they are at least a page); every rank reads its own chunk from the
//!   root (disjoint pages: no contention), then reads each other chunk from the rank that
//!   owns it, in ring order so that each owner has one reader per step.
//!   `p alpha + 2 n beta (p - 1) / p + (n / s) l (1 + (p - 1) / p)`, bandwidth-optimal for
//!   large messages on many ranks.
//! - [`BcastAlgorithm::Pipelined`]: message counters (Blue Gene/P): the root publishes
//!   how many chunks of its buffer are ready; readers read each chunk as soon as it is,
//!   and tell the root when they are done. Inside one node every chunk is ready at once
//!   (direct read in chunks); across nodes the node leader's chunks arrive from the
//!   network one by one, and the node reads behind it, overlapping the two legs.
//!   `alpha ceil(n / chunk) + n beta + ...` after the first chunk's latency.
//! - [`BcastAlgorithm::Fifo`]: copy-in/copy-out through the node's Bcast FIFO (Blue
//!   Gene/P): the root writes 8 KiB packets as far ahead as the 16-slot ring allows, every
//!   reader copies each out, the last one frees the slot. No system call; by name only
//!   (the staging pipeline's streamed copies beat it).
//! - [`BcastAlgorithm::Staged`]: copy-in/copy-out through the root's staging area in the
//!   control segment, pipelined in two half-area chunks. Two copies per byte, no system
//!   call, no permission: the path for large messages on the `cico` transport.
//! - [`BcastAlgorithm::ArrivalAware`]: no tree fixed in advance: a reader reads each
//!   chunk, as soon as it arrives, from the root or from any reader that already holds
//!   the chunk, so a late non-root delays nobody (see `coll::pap`).
//! - [`BcastAlgorithm::ReadWrite`]: direct read and direct write at once. Every reader
//!   reads its buffer from the head of the root's while the root writes it into each
//!   reader from the tail, in turn, each side claiming a range before it copies, so the
//!   root's core, idle in a direct read, copies too, as much as its speed earns it. Where
//!   the root's writes run as fast as the reads, it writes the last `t = n / p` bytes
//!   of each: `max(alpha + (n - t) beta + ((n - t) / s) l gamma(p - 1),
//!   (p - 1)(alpha + t beta_w + (t / s) l))` with `beta_w` the price of a byte written
//!   into a peer, plus one more synchronization (the root's writes need the readers'
//!   arrivals). At 2 ranks each core then copies half the message; where the writes run
//!   slower, the root takes less, down to about a direct read.
//!
//! `Auto` takes the cost model's choice, priced for CMA. Where it chose the staging
//! pipeline for a message beyond one phase and the node maps its ranks' shared heaps, the
//! call publishes the root's buffer, and the readers read it in place with loads if it
//! lies in the root's heap (an XPMEM node reaches every buffer so): a direct read, one
//! copy per byte and no system call, where staging copies every byte twice.

use super::algorithm::Algorithm;
use super::pap::{compatible, settle};
use super::{all_equal, check, check_staged, from_inline, inline_word, op, Ctx, Kind, INLINE_BYTES};
use crate::error::Result;
use crate::sync::{Call, End, Round, CLAIM_MAX, PRIVATE};
use crate::transport::{RemoteBuf, TransportKind, Write};
use crate::tune::{select, Algo};
use std::ops::Range;

/// The radix of [`BcastAlgorithm::KnomialRead`] when a name gives none.
pub(crate) const DEFAULT_RADIX: u32 = 4;

/// The chunk of [`BcastAlgorithm::Pipelined`] when a name gives none: large enough that
/// a network message per chunk costs little, small enough that the node starts early.
pub(crate) const DEFAULT_CHUNK: u32 = 256 * 1024;

/// Fills a chunk of the buffer at the source (with data from the network): the
/// pipelined broadcast calls it on each chunk, in order, before publishing it.
pub(crate) type Feed<'f> = &'f mut dyn FnMut(&mut [u8]) -> Result<()>;

/// How [`Comm::broadcast_into_with`](crate::Comm::broadcast_into_with) moves the data.
///
/// The names (for `ZCOLL_BCAST_ALGORITHM` and the benchmarks) are `auto`,
/// `direct-read`, `direct-write`, `knomial-read[:k]`, `scatter-allgather`,
/// `pipelined[:chunk bytes]`, `fifo`, `staged`, `arrival-aware` and `read-write`.
///
/// # Examples
///
/// ```
/// use zcoll::BcastAlgorithm;
/// assert_eq!("direct-read".parse::<BcastAlgorithm>(), Ok(BcastAlgorithm::DirectRead));
/// assert_eq!("knomial-read:3".parse::<BcastAlgorithm>(), Ok(BcastAlgorithm::KnomialRead { k: 3 }));
/// assert_eq!(BcastAlgorithm::KnomialRead { k: 2 }.to_string(), "knomial-read:2");
/// assert!("knomial-read:1".parse::<BcastAlgorithm>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BcastAlgorithm {
    /// Let zcoll choose by size, node size and transport (`ZCOLL_BCAST_ALGORITHM`
    /// overrides).
    #[default]
    Auto,
    /// Every non-root rank reads the root's buffer with one single-copy read.
    DirectRead,
    /// The root writes its buffer into every other rank's, one after the other.
    DirectWrite,
    /// A k-nomial tree of single-copy reads, at most `k - 1` readers per process at a
    /// time (`k >= 2`).
    KnomialRead {
        /// The radix.
        k: u32,
    },
    /// Scatter the buffer in `p` chunks, then gather every chunk from its owner.
    ScatterAllgather,
    /// Readers follow the root's message counter chunk by chunk (`chunk` bytes, at least
    /// one page).
    Pipelined {
        /// The chunk in bytes.
        chunk: u32,
    },
    /// Copy-in/copy-out through the node's Bcast FIFO.
    Fifo,
    /// Copy-in/copy-out through the root's staging area, pipelined.
    Staged,
    /// Readers read each chunk, as they arrive, from the root or any reader that holds it.
    ArrivalAware,
    /// Every reader reads its buffer from the head of the root's while the root writes it
    /// into each reader from the tail, until they meet: the root's core copies too, as
    /// much as its writes' speed earns it.
    ReadWrite,
}

impl BcastAlgorithm {
    /// The chunk a feed fills at a time: the pipelined algorithm's, else the default.
    /// Every node leader of a broadcast derives the same value from the same algorithm,
    /// so their network messages match.
    pub(crate) fn feed_chunk(self) -> usize {
        match self {
            BcastAlgorithm::Pipelined { chunk } => chunk as usize,
            _ => DEFAULT_CHUNK as usize,
        }
    }
}

super::algorithm::vocabulary! {
    BcastAlgorithm("ZCOLL_BCAST_ALGORITHM"): "auto, direct-read, direct-write, knomial-read[:k], scatter-allgather, pipelined[:bytes], fifo, staged, arrival-aware or read-write",
    [
        Auto => "auto",
        DirectRead => "direct-read",
        DirectWrite => "direct-write",
        KnomialRead { k: DEFAULT_RADIX } => "knomial-read",
        ScatterAllgather => "scatter-allgather",
        Pipelined { chunk: DEFAULT_CHUNK } => "pipelined",
        Fifo => "fifo",
        Staged => "staged",
        ArrivalAware => "arrival-aware",
        ReadWrite => "read-write",
    ]
    /// The cost model's choice for `len` bytes on `p` ranks; its copy-in/copy-out choice
    /// is the staging pipeline. The Bcast FIFO was the choice from 4 KiB to its ring's
    /// 128 KiB until the staged copies streamed (`sync::publish`): its 8 KiB packets are
    /// written with ordinary stores, and took 31 us for 64 KiB where the staging pipeline
    /// takes 6 when the two cores sit far apart.
    fn model(len: usize, p: usize) -> BcastAlgorithm {
        match select::choose(select::Coll::Bcast, len, p) {
            Algo::BcastDirectWrite => BcastAlgorithm::DirectWrite,
            Algo::BcastKnomial(k) => BcastAlgorithm::KnomialRead { k: k as u32 },
            Algo::BcastScatterAllgather => BcastAlgorithm::ScatterAllgather,
            Algo::BcastStaged => BcastAlgorithm::Staged,
            Algo::BcastReadWrite => BcastAlgorithm::ReadWrite,
            _ => BcastAlgorithm::DirectRead,
        }
    }

    fn min_param(self) -> u32 {
        match self {
            BcastAlgorithm::Pipelined { .. } => PAGE as u32,
            _ => 2,
        }
    }

    fn on_cico(self) -> Self {
        // The FIFO is copy-in/copy-out already.
        match self {
            BcastAlgorithm::Fifo => BcastAlgorithm::Fifo,
            _ => BcastAlgorithm::Staged,
        }
    }
}

/// Broadcasts `buf` from local rank `src` to the node. `root` is the root as the user
/// gave it (a rank of the whole communicator), published for the checks. With `feed`,
/// the source's buffer is not ready yet: `feed` fills it chunk by chunk, and the node
/// reads behind it (the pipelined algorithm; on `cico` nodes the source feeds the whole
/// buffer first).
///
/// # Errors
///
/// The checks' errors, a transport error, a feed's error, or a peer's failure, on every
/// rank of the node.
pub(crate) fn bcast(
    ctx: &Ctx<'_>,
    buf: &mut [u8],
    root: i32,
    src: usize,
    algorithm: BcastAlgorithm,
    mut feed: Option<Feed<'_>>,
) -> Result<()> {
    let feed_chunk = algorithm.feed_chunk();
    let requested = algorithm;
    let algorithm = match (feed.is_some(), ctx.transport, algorithm) {
        (
            true,
            TransportKind::Cma | TransportKind::Heap | TransportKind::Xpmem,
            BcastAlgorithm::Pipelined { chunk },
        ) => Ok(BcastAlgorithm::Pipelined { chunk }),
        (true, TransportKind::Cma | TransportKind::Heap | TransportKind::Xpmem, _) => {
            Ok(BcastAlgorithm::Pipelined { chunk: DEFAULT_CHUNK })
        }
        (true, _, _) => Ok(BcastAlgorithm::Staged),
        (false, transport, a) => a.resolve(buf.len(), ctx.ctl.size(), transport, ctx.overrides),
    };
    let (code, param) = algorithm.as_ref().map(|a| a.wire()).unwrap_or((0, 0));
    if matches!(algorithm, Ok(BcastAlgorithm::ArrivalAware)) {
        return arrival_aware(ctx, buf, root, src, op(Kind::Bcast, code, param));
    }
    let len = buf.len();
    // Only the direct-write and read-write receivers let a peer write into their buffer.
    let written = matches!(algorithm, Ok(BcastAlgorithm::DirectWrite | BcastAlgorithm::ReadWrite))
        && ctx.ctl.me() != src;
    // `Auto`'s staging pipeline beyond one phase (the model prices the readers' copies as
    // CMA reads) where the node maps its ranks' heaps: the call publishes its buffer, and
    // once every record is in, the readers read the root's buffer in place if it turns out
    // to be mapped (`switch_to_loads`), else it goes through the staging area as chosen.
    let switchable = requested == BcastAlgorithm::Auto
        && feed.is_none()
        && matches!(algorithm, Ok(BcastAlgorithm::Staged))
        && super::heap_switchable::<BcastAlgorithm>(ctx, len);
    // Copies through the segment share no buffer: a private call (one flag phase).
    let private = feed.is_none()
        && matches!(algorithm, Ok(BcastAlgorithm::Staged | BcastAlgorithm::Fifo))
        && !switchable;
    // A staged broadcast that fits in the root's staging area travels with the root's
    // arrival: one flag phase, readers copy out right after the verdict; a few bytes
    // travel in the call record itself.
    let prestaged =
        private && matches!(algorithm, Ok(BcastAlgorithm::Staged)) && len <= ctx.ctl.one_phase_bytes();
    let inline = prestaged && len <= INLINE_BYTES;
    let call = Call {
        root: root as i64,
        aux: src as u64,
        aux2: if inline && ctx.ctl.me() == src { inline_word(buf) } else { 0 },
        ..Call::in_place(op(Kind::Bcast, code, param) | if private { PRIVATE } else { 0 }, buf, written)
    };
    let lengths = |r: &Round<'_>| {
        let expected = r.call(src.min(r.size() - 1)).send_len;
        all_equal(r, Round::send_len, expected)
    };
    // Its root leaves at once where it can (the verdict deferred: `Control::leave_staged`);
    // the readers judge the round. A root outside the communicator (which names local
    // rank 0 as `src`) is judged in the call, like every argument a rank can check alone.
    if prestaged && ctx.ctl.me() == src && ctx.may_leave(root) {
        let parts: &[&[u8]] = if inline { &[] } else { &[&*buf] };
        return ctx.ctl.leave_staged(&call, &[], parts);
    }
    let mut round = match prestaged {
        true if ctx.ctl.me() == src && !inline => check_staged(ctx, call, &[], &[&*buf], true, lengths)?,
        true => check_staged(ctx, call, &[], &[], true, lengths)?,
        false => check(ctx, call, true, lengths)?,
    };
    let algorithm = match algorithm {
        Ok(_) if switchable && switch_to_loads(&round, src) => Ok(BcastAlgorithm::DirectRead),
        Ok(a) if switchable => {
            // Staged after all: nobody touches anybody's buffer, so the call ends as a
            // private one would.
            round.leave_early();
            Ok(a)
        }
        a => a,
    };
    let moved = algorithm.and_then(|algorithm| {
        if round.size() == 1 {
            return Ok(());
        }
        match algorithm {
            BcastAlgorithm::DirectRead if round.me() != src => read_from(&round, src, 0, buf),
            BcastAlgorithm::DirectWrite if round.me() == src => (0..round.size())
                .filter(|&r| r != src)
                .try_for_each(|r| round.write(buf, &round.peer_recv(r), r, 0)),
            BcastAlgorithm::DirectRead | BcastAlgorithm::DirectWrite => Ok(()),
            BcastAlgorithm::ReadWrite => read_write(&round, src, buf),
            BcastAlgorithm::KnomialRead { k } => knomial_read(&round, src, buf, k as usize),
            BcastAlgorithm::ScatterAllgather => scatter_allgather(&round, src, buf),
            BcastAlgorithm::Pipelined { chunk } => pipelined(&round, src, buf, chunk as usize, feed.take()),
            BcastAlgorithm::Fifo => round.fifo_bcast(src, buf),
            BcastAlgorithm::Staged if prestaged => {
                match (round.me() == src, inline) {
                    (true, _) => {}
                    (false, true) => from_inline(round.aux2(src), buf),
                    (false, false) => round.read_staged(src, 0, buf),
                }
                Ok(())
            }
            BcastAlgorithm::Staged | BcastAlgorithm::Auto | BcastAlgorithm::ArrivalAware => match feed.take()
            {
                Some(feed) if round.me() == src => {
                    feed_all(buf, feed_chunk, feed).and_then(|()| round.stage_bcast(src, buf))
                }
                _ => round.stage_bcast(src, buf),
            },
        }
    });
    // A source on a node of one still has to take its data off the network.
    let moved = match (moved, feed) {
        (Ok(()), Some(feed)) if round.size() == 1 => feed_all(buf, feed_chunk, feed),
        (moved, _) => moved,
    };
    round.finish(moved)
}

/// Whether a switchable broadcast reads the root's buffer in place: every reader reaches it
/// with loads (a pure function of the records, so every rank decides alike). Measured at
/// 2 ranks with heap buffers, direct read against the staging pipeline: 4.7 against 11.2
/// us at 128 KiB.
fn switch_to_loads(round: &Round<'_>, src: usize) -> bool {
    round.loads(src, false)
}

/// Feeds the whole buffer, chunk by chunk.
fn feed_all(buf: &mut [u8], chunk: usize, feed: Feed<'_>) -> Result<()> {
    buf.chunks_mut(chunk).try_for_each(feed)
}

/// The message-counter broadcast: the source publishes `progress = c` once `c` chunks are
/// ready (feeding each first, if it has a feed), readers read each chunk as soon as it is
/// ready and complete the source's counter at the end; the source returns its buffer to
/// the caller only when all `p - 1` have completed.
fn pipelined(
    round: &Round<'_>,
    src: usize,
    buf: &mut [u8],
    chunk: usize,
    feed: Option<Feed<'_>>,
) -> Result<()> {
    let p = round.size();
    if round.me() == src {
        match feed {
            Some(feed) => {
                for (c, piece) in buf.chunks_mut(chunk).enumerate() {
                    feed(piece)?;
                    round.post_ready(c as u32 + 1);
                }
            }
            None => round.post_ready(buf.len().div_ceil(chunk) as u32),
        }
        return round.wait_completions(p as u64 - 1);
    }
    for (c, piece) in buf.chunks_mut(chunk).enumerate() {
        round.wait_ready(src, c as u32 + 1)?;
        read_from(round, src, c * chunk, piece)?;
    }
    round.complete(src);
    Ok(())
}

/// The read-write broadcast: every reader copies its buffer out of the root's from the
/// head, while the root copies it into the readers from the tail, one reader after the
/// other. Each range is claimed first ([`Round::claim`] on the reader's word), so it is
/// copied once, by whichever side reached it, and the split is found at run time: a
/// reader claims half of what is left, the root [`rw_root_chunk`] bytes at a time, so
/// the side that copies faster copies more. A store into a line that another core holds
/// costs a trip between the cores, which on some machines (and at times on a shared one)
/// makes the root's writes several times slower than the readers' reads; the root then
/// takes little, and the call costs about a direct read, where a fixed half would cost
/// the root's slow half.
///
/// A reader returns only after the round's end, which waits for the root's end word,
/// posted after its writes.
fn read_write(round: &Round<'_>, src: usize, buf: &mut [u8]) -> Result<()> {
    let n = buf.len();
    let unit = claim_unit(n);
    let units = n.div_ceil(unit);
    let bytes = |r: Range<usize>| r.start * unit..(r.end * unit).min(n);
    if round.me() != src {
        while let Some(r) = round.claim(round.me(), units, End::Head, |left| left.div_ceil(2)) {
            let r = bytes(r);
            read_from(round, src, r.start, &mut buf[r])?;
        }
        return Ok(());
    }
    let mut readers: smallvec::SmallVec<[(usize, RemoteBuf<'_, Write>); 16]> =
        (0..round.size()).filter(|&r| r != src).map(|r| (r, round.peer_recv(r))).collect();
    while !readers.is_empty() {
        let mut i = 0;
        while i < readers.len() {
            let (r, dst) = (readers[i].0, &readers[i].1);
            let want = rw_root_chunk(dst.kind() != TransportKind::Cma).div_ceil(unit);
            match round.claim(r, units, End::Tail, |_| want) {
                Some(c) => {
                    let c = bytes(c);
                    round.write(&buf[c.clone()], dst, r, c.start)?;
                    i += 1;
                }
                None => {
                    readers.swap_remove(i);
                }
            }
        }
    }
    Ok(())
}

/// The unit in which a read-write broadcast of `n` bytes claims: a page, or as many as
/// keep the count within a claim word. The same on every rank, from the length alone.
fn claim_unit(n: usize) -> usize {
    n.div_ceil(CLAIM_MAX).next_multiple_of(PAGE).max(PAGE)
}

/// The root's claim in a read-write broadcast, where it reaches the reader's buffer with
/// stores or not: what its writes may run past the readers' end (a claim it is still
/// copying when they have taken the rest), yet large enough that its claims cost little.
/// Measured at 2 ranks, where the root's writes ran at times 4-10 times slower than the
/// reader's reads: 8 KiB with loads; 128 KiB through CMA, a system call per claim (64 KiB
/// cost 10-20% at 256 KiB to 1 MiB when both ran at full speed).
fn rw_root_chunk(loads: bool) -> usize {
    match loads {
        true => 8 * 1024,
        false => 128 * 1024,
    }
}

/// Reads `dst.len()` bytes at `offset` of local rank `peer`'s published buffer: with
/// loads where it is mapped here (its shared heap, an XPMEM window), else with CMA.
fn read_from(round: &Round<'_>, peer: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
    round.read(&round.peer_send(peer), peer, offset, dst)
}

/// The k-nomial read tree. Ranks are numbered relative to the root (`v`); the parent of
/// `v` clears its lowest non-zero base-`k` digit, at place `place`. The children of one
/// parent at place `place * k` read before those at `place`, so a child waits for its
/// parent to hold the data and for the previous wave of its parent's children to be done.
/// `progress` 1 means "I hold the whole buffer".
fn knomial_read(round: &Round<'_>, src: usize, buf: &mut [u8], k: usize) -> Result<()> {
    let p = round.size();
    let v = (round.me() + p - src) % p;
    if v != 0 {
        let mut place = 1;
        while (v / place) % k == 0 {
            place *= k;
        }
        let parent_v = v - (v / place % k) * place;
        let parent = (parent_v + src) % p;
        round.wait_progress(parent, 1)?;
        let up = place * k;
        if parent_v % (up * k) == 0 {
            for sibling_v in (1..k).map(|j| parent_v + j * up).take_while(|&s| s < p) {
                round.wait_progress((sibling_v + src) % p, 1)?;
            }
        }
        read_from(round, parent, 0, buf)?;
    }
    round.post_progress(1);
    Ok(())
}

/// Scatter-allgather: chunk `v` belongs to the rank `v` places after the root, which
/// reads it from the root first (`progress` 1 means "I hold my chunk"); then every rank
/// reads chunk `v - s` from its owner at step `s`.
fn scatter_allgather(round: &Round<'_>, src: usize, buf: &mut [u8]) -> Result<()> {
    let p = round.size();
    let n = buf.len();
    let v = (round.me() + p - src) % p;
    let chunk = match n.div_ceil(p) {
        c if c >= PAGE => c.div_ceil(PAGE) * PAGE,
        c => c.max(1),
    };
    let range = |v: usize| (v * chunk).min(n)..((v + 1) * chunk).min(n);
    if v != 0 {
        let mine = range(v);
        read_from(round, src, mine.start, &mut buf[mine])?;
    }
    round.post_progress(1);
    if v == 0 {
        return Ok(());
    }
    for s in 1..p {
        let owner_v = (v + p - s) % p;
        let r = range(owner_v);
        if r.is_empty() {
            continue;
        }
        let owner = (owner_v + src) % p;
        round.wait_progress(owner, 1)?;
        read_from(round, owner, r.start, &mut buf[r])?;
    }
    Ok(())
}

/// The page size the chunks are cut at.
const PAGE: usize = 4096;

/// The chunk of the arrival-aware broadcast: the unit a reader takes from one holder.
pub(crate) const BCAST_CHUNK: usize = 256 * 1024;

fn arrival_aware(ctx: &Ctx<'_>, buf: &mut [u8], root: i32, src: usize, word: u64) -> Result<()> {
    let len = buf.len();
    let call = Call { root: root as i64, aux: src as u64, ..Call::in_place(word, buf, false) };
    let round = ctx.ctl.begin_eager(&call, 0)?;
    let valid_root = (0..ctx.comm_size).contains(&root);
    let moved = if round.me() == src || round.size() == 1 || len == 0 || !valid_root {
        Ok(())
    } else {
        read_arriving(&round, src, buf)
    };
    settle(ctx, round, moved, true, |r| {
        let expected = r.call(src.min(r.size() - 1)).send_len;
        all_equal(r, Round::send_len, expected)
    })
}

/// A reader's part of the arrival-aware broadcast.
fn read_arriving(round: &Round<'_>, src: usize, buf: &mut [u8]) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let mine = round.call(me);
    let ok = |h: usize| round.arrived(h) && compatible(&mine, &round.call(h));
    for (c, piece) in buf.chunks_mut(BCAST_CHUNK).enumerate() {
        let step = c as u32 + 1;
        let holder = loop {
            if round.arrived(src) && !ok(src) {
                // The verdict names the culprit.
                return Ok(());
            }
            let holders: Vec<usize> =
                (0..p).filter(|&h| h != me && ok(h) && (h == src || round.progressed(h, step))).collect();
            if !holders.is_empty() {
                break holders[(me + c) % holders.len()];
            }
            if round.peer_failed().is_some() {
                return Ok(());
            }
            round.wait_for(|| round.arrived(src) || round.peer_failed().is_some())?;
        };
        round.read_send(holder, c * BCAST_CHUNK, piece)?;
        round.post_progress(step);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{claim_unit, CLAIM_MAX, PAGE};

    /// Whatever the length, a read-write broadcast's units are whole pages and fit a
    /// claim word, and cover the buffer.
    #[test]
    fn claim_units_fit_the_word() {
        for n in [
            0,
            1,
            PAGE - 1,
            PAGE,
            PAGE + 1,
            1 << 20,
            CLAIM_MAX * PAGE,
            CLAIM_MAX * PAGE + 1,
            1 << 40,
            usize::MAX / 2,
        ] {
            let unit = claim_unit(n);
            assert_eq!(unit % PAGE, 0, "n={n}");
            assert!(n.div_ceil(unit) <= CLAIM_MAX, "n={n}");
            assert!(n.div_ceil(unit) * unit >= n, "n={n}");
        }
        assert_eq!(claim_unit(1 << 20), PAGE);
    }
}
