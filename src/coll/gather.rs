//! Gather: rank `r`'s block ends up at block `r` of the root's buffer.
//!
//! The mirror of [`scatter`](super::scatter), with the same cost model (`p` ranks on the
//! node, blocks of `n` bytes, `alpha` per CMA call, `beta` per byte, `l` per page pinned,
//! `s` the page size, `gamma(c) = a c^2 + b c` the contention of `c` processes pinning the
//! pages of one process):
//!
//! - [`GatherAlgorithm::ParallelWrite`]: the root publishes its receive buffer as
//!   writable; every other rank writes its block into it with one CMA write, all at once.
//!   `alpha + n beta + ceil(n / s) l gamma(p - 1)`.
//! - [`GatherAlgorithm::SequentialRead`]: every non-root publishes its block; the root
//!   reads them in turn. `(p - 1)(alpha + n beta + ceil(n / s) l)`: no contention, no
//!   parallelism.
//! - [`GatherAlgorithm::ThrottledWrite`] with factor `k`: as parallel write, `k` writers
//!   at a time, the `i`-th writer after the root starting when the `(i - k)`-th has
//!   finished. `ceil((p - 1) / k)(alpha + n beta + ceil(n / s) l gamma(k))`.
//! - [`GatherAlgorithm::Staged`]: copy-in/copy-out through the root's staging area: every
//!   rank copies its block in (in parallel, into slots of its own), the root copies them
//!   out. Two memory copies per byte, no system call, no permission.
//!
//! The default is the cost model's choice (`tune::select`), as for the scatter: staged for
//! small blocks or on the `cico` transport, else parallel, sequential or throttled write
//! with the `k` the model predicts fastest. The model chooses before the arrival, pricing a
//! write like a read, and a write so chosen, or the staged path above the one-phase size,
//! is settled after the arrival, from the published records (`settle`): blocks of 1 MiB
//! or more into a root's buffer in its shared heap become a parallel write with stores (the
//! root copies its own block meanwhile, so at 2 ranks both cores copy); smaller blocks the
//! root reaches with loads (shared heap, XPMEM) become sequential reads, since stores into
//! lines still in the owner's cache cost several times its loads and the root's loads
//! copy each byte once; where the blocks cross with CMA, a write becomes what the model
//! chooses with a CMA write priced at `write_beta` (`CMA_WRITE` times `beta` unless
//! measured: `Params::over_cma`), which every rank computed before the arrival and the
//! root's record carries (the one writer's `process_vm_writev` took 1.3 to 3 times the
//! root's `process_vm_readv` of the same block here). With the built-in parameters the
//! model stages at every size (its copy in and the root's copy out overlap), so `Vec`
//! blocks are staged and heap blocks read with loads, or written from 1 MiB. In every
//! write the root copies its own block while the others write theirs.
//!
//! Across nodes (`hier/rooted.rs`): every node gathers to its leader, the leaders gather
//! node parts to the root's leader over MPI (a gatherv into a scratch buffer, unpacked into
//! rank order when the nodes do not hold consecutive ranks), and the root's leader hands
//! the whole buffer to the root through the node if it is not the root itself.

use super::algorithm::Algorithm;
use super::rooted::{
    blocks, peers, rooted_check, throttled, Claim, Measure, Rooted, RootedBufs, AUTO_CHOSE, DEFAULT_K,
    OVER_CMA_SHIFT,
};
use super::staged_private;
use super::{op, Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Round, Toward, PRIVATE};
use crate::transport::heap;
use crate::tune::{select, Algo};

/// How [`Comm::gather_into_root_with`](crate::Comm::gather_into_root_with) and its
/// siblings move the blocks inside a node.
///
/// `ZCOLL_GATHER_ALGORITHM=name[:k]` sets what `Auto` means (`throttled-write:2`).
///
/// # Examples
///
/// ```
/// use zcoll::GatherAlgorithm;
/// assert_eq!("throttled-write:2".parse(), Ok(GatherAlgorithm::ThrottledWrite { k: 2 }));
/// assert_eq!(GatherAlgorithm::SequentialRead.to_string(), "sequential-read");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum GatherAlgorithm {
    /// Let zcoll choose by block size, node size and transport.
    #[default]
    Auto,
    /// Every non-root writes its block into the root's buffer, all at once.
    ParallelWrite,
    /// The root reads every rank's block, one after the other.
    SequentialRead,
    /// Every non-root writes its block, `k` at a time (`k >= 1`).
    ThrottledWrite {
        /// How many ranks write at once.
        k: u32,
    },
    /// Copy-in/copy-out through the root's staging area in the control segment.
    Staged,
}

super::algorithm::vocabulary! {
GatherAlgorithm("ZCOLL_GATHER_ALGORITHM"): "auto, parallel-write, sequential-read, throttled-write[:k] or staged",
[
    Auto => "auto",
    ParallelWrite => "parallel-write",
    SequentialRead => "sequential-read",
    ThrottledWrite { k: DEFAULT_K } => "throttled-write",
    Staged => "staged",
]
    /// The model's choice for blocks of `block` bytes from each of `ranks` ranks.
    fn model(block: usize, ranks: usize) -> GatherAlgorithm {
        match select::choose(select::Coll::Gather, block, ranks) {
            Algo::GatherStaged => GatherAlgorithm::Staged,
            Algo::GatherSequentialRead => GatherAlgorithm::SequentialRead,
            Algo::GatherThrottledWrite(k) => GatherAlgorithm::ThrottledWrite { k: k as u32 },
            _ => GatherAlgorithm::ParallelWrite,
        }
    }
}

/// What a rank passes to a node-level gather.
#[derive(Debug)]
pub(crate) enum GatherBufs<'a> {
    /// The root (the destination of this node's gather): its own block (`None`: already in
    /// place in `recv`), and the buffer for every block in local-rank order.
    Root { send: Option<&'a [u8]>, recv: &'a mut [u8] },
    /// Any other rank: its block.
    Leaf { send: &'a [u8] },
}

impl RootedBufs for GatherBufs<'_> {
    type Algorithm = GatherAlgorithm;
}

impl GatherBufs<'_> {
    /// The block length this rank gives, with `ranks` ranks in the gather.
    pub(crate) fn block(&self, ranks: usize) -> usize {
        match self {
            GatherBufs::Root { send: Some(s), .. } | GatherBufs::Leaf { send: s } => s.len(),
            GatherBufs::Root { send: None, recv } => recv.len() / ranks.max(1),
        }
    }

    /// What this rank claims, for the checks across nodes (`Hierarchy::rooted_check`), with `ranks`
    /// ranks in the gather and elements of `elem` bytes.
    pub(crate) fn claim(&self, ranks: usize, elem: usize) -> Claim {
        Claim {
            root: matches!(self, GatherBufs::Root { .. }),
            in_place: matches!(self, GatherBufs::Root { send: None, .. }),
            block: self.block(ranks),
            whole: match self {
                GatherBufs::Root { recv, .. } => recv.len(),
                GatherBufs::Leaf { .. } => 0,
            },
            elem,
        }
    }
}

/// Gathers inside the node to local rank `dst`. See [`Rooted`] for the rest of the call.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn gather(ctx: &Ctx<'_>, call: Rooted<GatherBufs<'_>>) -> Result<()> {
    let Rooted { bufs, root, local: dst, elem, algorithm } = call;
    let size = ctx.ctl.size();
    let claim = bufs.claim(size, elem);
    let block = claim.block;
    let requested = algorithm;
    let algorithm = algorithm.resolve(block, size, ctx.transport, ctx.overrides);
    let (code, k) = algorithm.as_ref().map(|a| a.wire()).unwrap_or((0, 0));
    // A write `Auto` chose is settled once the arrival shows how the root reaches the
    // blocks (see `settle`): said in `aux2`, with what the model runs instead where they
    // cross with CMA.
    // The staged path above the one-phase size too, where the root may reach the blocks
    // with loads: the call then publishes its buffers (no private round).
    let writes =
        matches!(algorithm, Ok(GatherAlgorithm::ParallelWrite | GatherAlgorithm::ThrottledWrite { .. }));
    let no_override = matches!(ctx.overrides.choice::<GatherAlgorithm>(GatherAlgorithm::VAR), Ok(None));
    let switchable = requested == GatherAlgorithm::Auto
        && (writes && no_override
            || matches!(algorithm, Ok(GatherAlgorithm::Staged))
                && super::heap_switchable::<GatherAlgorithm>(ctx, block));
    let auto = match switchable {
        true => AUTO_CHOSE | (OverCma::of(block, size) as u64) << OVER_CMA_SHIFT,
        false => 0,
    };
    let (send, recv) = match &bufs {
        GatherBufs::Root { send, recv } => (send.map_or(0, |s| s.as_ptr() as usize), recv.as_ptr() as usize),
        GatherBufs::Leaf { send } => (send.as_ptr() as usize, 0),
    };
    // Only the root of a (throttled) parallel write lets peers write into its buffer; so
    // does the root of a switchable call whose receive buffer lies in the shared heap,
    // which `settle` may turn into a parallel write after the arrival.
    let writable = writes
        || switchable
            && block >= HEAP_WRITE_MIN
            && matches!(&bufs, GatherBufs::Root { recv, .. }
                if ctx.ctl.loads_heaps() && heap::holds(recv.as_ptr() as usize, recv.len()));
    let call = Call {
        op: op(Kind::Gather, code, k)
            | staged_private(matches!(algorithm, Ok(GatherAlgorithm::Staged)) && !switchable),
        root: root as i64,
        send,
        send_len: block,
        recv,
        recv_len: claim.whole,
        recv_writable: writable && claim.root,
        aux: dst as u64,
        aux2: claim.aux2() | auto,
    };
    let measure = Measure { block: |c| c.send_len, whole: |c| c.recv_len, which: "receive" };
    // A staged gather whose block fits in the staging area travels with the arrivals: one
    // flag phase, the root copies every block straight out of its owner's area.
    if matches!(algorithm, Ok(GatherAlgorithm::Staged)) && block <= ctx.ctl.one_phase_bytes() {
        let own: &[u8] = match &bufs {
            GatherBufs::Leaf { send } => send,
            GatherBufs::Root { .. } => &[],
        };
        // A leaf only gives: it leaves at once where it can (the verdict deferred:
        // `Control::leave_staged`), and the root judges the round. A root outside the
        // communicator is judged in the call, and so is a leaf that is the root's rank
        // (it called the non-root method: no root would judge the round). The call is
        // private: the staged path of a block this small is never switched.
        if matches!(bufs, GatherBufs::Leaf { .. })
            && call.op & PRIVATE != 0
            && ctx.ctl.me() != dst
            && ctx.may_leave(root)
        {
            return ctx.ctl.leave_staged(&call, &[], &[own]);
        }
        let round = rooted_check(ctx, call, Some(&[own]), dst, measure)?;
        if let GatherBufs::Root { send, recv } = bufs {
            if let Some(send) = send {
                copy_block(send, &mut recv[dst * block..(dst + 1) * block]);
            }
            for r in peers(dst, size) {
                round.read_staged(r, 0, &mut recv[r * block..(r + 1) * block]);
            }
        }
        return round.finish(Ok(()));
    }
    let mut round = rooted_check(ctx, call, None, dst, measure)?;
    let algorithm = match algorithm {
        Ok(chosen) if switchable => Ok(settle(&round, dst, block, chosen)),
        a => a,
    };
    if switchable && matches!(algorithm, Ok(GatherAlgorithm::Staged)) {
        // Staged after all, as every rank settled from the same records: nobody touches
        // anybody's buffers, so the call ends as a private one would.
        round.leave_early();
    }
    match (algorithm, bufs) {
        (Ok(a), GatherBufs::Root { send, recv }) => {
            // Our own block first, while the peers copy theirs in (or write them: into
            // blocks of their own, never ours).
            if let Some(send) = send {
                copy_block(send, &mut recv[dst * block..(dst + 1) * block]);
            }
            let moved = collect(&round, a, dst, block, recv);
            round.finish(moved)
        }
        (Ok(a), GatherBufs::Leaf { send }) => {
            let moved = contribute(&round, a, dst, block, send);
            round.finish(moved)
        }
        (Err(e), _) => round.finish(Err(e)),
    }
}

/// The block from which a switchable gather into a root's heap buffer settles to a
/// parallel write ([`settle`]): a block this large fills the root's receive buffer past a
/// core's private cache (1 MiB of L2 on the development machine), so the writers' stores
/// find few of its lines in the root's cache.
const HEAP_WRITE_MIN: usize = 1 << 20;

/// What a gather whose `Auto` chose a write runs where its blocks cross with CMA: the
/// model's choice with the CMA write priced (`select::choose_over_cma`), published in two
/// bits of `aux2` (at [`OVER_CMA_SHIFT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OverCma {
    /// What `Auto` chose stays the cheapest.
    Write = 0,
    /// The root reads every block in turn.
    Read = 1,
    /// Through the root's staging area.
    Staged = 2,
}

impl OverCma {
    /// The model's choice for blocks of `block` bytes on `ranks` ranks, with CMA writes
    /// priced as such.
    fn of(block: usize, ranks: usize) -> OverCma {
        match select::choose_over_cma(select::Coll::Gather, block, ranks) {
            Algo::GatherSequentialRead => OverCma::Read,
            Algo::GatherStaged => OverCma::Staged,
            _ => OverCma::Write,
        }
    }

    /// What local rank `r` published.
    fn published(round: &Round<'_>, r: usize) -> OverCma {
        match round.aux2(r) >> OVER_CMA_SHIFT & 3 {
            1 => OverCma::Read,
            2 => OverCma::Staged,
            _ => OverCma::Write,
        }
    }
}

/// What a gather runs whose `Auto` chose `chosen` on this rank (a write, or the staged path
/// apart from the arrival): the same, unless every rank published it as switchable
/// (`AUTO_CHOSE`). Then:
///
/// - Blocks of [`HEAP_WRITE_MIN`] bytes or more, into a root's receive buffer that every
///   rank reaches with stores (the root's shared heap, published writable): a parallel
///   write. Each rank stores its block while the root copies its own, so at 2 ranks the
///   two cores copy one block each where sequential reads leave the leaf idle: 146 to 207
///   against 275 to 338 us at 2 MiB, 730 to 780 against 1310 to 1340 at 8 MiB (heap
///   buffers, five alternating runs).
/// - Smaller blocks the root reaches with loads (mapped heaps, XPMEM): sequential reads.
///   A store into a peer's mapping takes each line from the owner's cache first (book,
///   "Loads beat stores across cores"), and while the root's receive buffer still fits
///   its cache that costs the writes most: in this machine's slow mode the parallel write
///   of 64 to 512 KiB blocks took 4 to 5 times the reads (206 against 48 us at 512 KiB),
///   though it won in the fast mode. The staged path copies every byte twice.
/// - Elsewhere (some block crosses with CMA) what the root published as its model's
///   choice with CMA writes priced as such ([`OverCma`]; the staged path stays staged): at
///   2 ranks with `Vec` buffers, the root's `process_vm_readv` of a 512 KiB block took
///   56 us where the leaf's `process_vm_writev` took 74 in the fast mode, 96 against 264
///   in the slow one.
///
/// A pure function of the published records, so every rank decides alike.
fn settle(round: &Round<'_>, dst: usize, block: usize, chosen: GatherAlgorithm) -> GatherAlgorithm {
    let size = round.size();
    if !(0..size).all(|r| round.aux2(r) & AUTO_CHOSE != 0) {
        return chosen;
    }
    if block >= HEAP_WRITE_MIN && round.loads(dst, true) && round.call(dst).recv_writable {
        return GatherAlgorithm::ParallelWrite;
    }
    if peers(dst, size).all(|r| round.loads(r, false)) {
        return GatherAlgorithm::SequentialRead;
    }
    match OverCma::published(round, dst) {
        OverCma::Write => chosen,
        OverCma::Read => GatherAlgorithm::SequentialRead,
        OverCma::Staged => GatherAlgorithm::Staged,
    }
}

/// The root's side: what it copies itself.
fn collect(
    round: &Round<'_>,
    algorithm: GatherAlgorithm,
    dst: usize,
    block: usize,
    recv: &mut [u8],
) -> Result<()> {
    let size = round.size();
    match algorithm {
        GatherAlgorithm::SequentialRead => {
            peers(dst, size).try_for_each(|r| round.read_send(r, 0, &mut recv[r * block..(r + 1) * block]))
        }
        GatherAlgorithm::Staged => round.stage_parts(Toward::Hub, dst, &blocks(size, block), &[], recv),
        _ => Ok(()),
    }
}

/// A non-root's side: what it copies into the root.
fn contribute(
    round: &Round<'_>,
    algorithm: GatherAlgorithm,
    dst: usize,
    block: usize,
    send: &[u8],
) -> Result<()> {
    let me = round.me();
    let write = || round.write_recv(send, dst, me * block);
    match algorithm {
        GatherAlgorithm::ParallelWrite => write(),
        GatherAlgorithm::ThrottledWrite { k } => throttled(round, dst, k, write),
        GatherAlgorithm::Staged => {
            round.stage_parts(Toward::Hub, dst, &blocks(round.size(), block), send, &mut [])
        }
        _ => Ok(()),
    }
}
