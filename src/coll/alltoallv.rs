//! Alltoallv: rank `q`'s send block for rank `r` (`send_counts[r]` elements from
//! `send_displs[r]` of `q`'s send buffer) lands in rank `r`'s receive buffer at
//! `recv_displs[q]`, `recv_counts[q]` elements long.
//!
//! Every rank publishes both its partitions in its staging area (see
//! [`varcount`](super::varcount)); the checks make sure that every pair agrees on the
//! length of what it exchanges. Each block then moves once, straight from the sender's send
//! buffer into the receiver's receive buffer. Algorithms (`alpha` per CMA call, `beta` per
//! byte, `l` per page pinned, `s` the page size, `n_qr` the bytes from `q` to `r`):
//!
//! - [`AlltoallvAlgorithm::Pairwise`]: at step `t` rank `r` reads its block from rank
//!   `r xor t` (`p` a power of two) or `(r - t) mod p`, so that while the ranks keep pace
//!   every source has one reader; empty blocks are skipped. No waits. Per rank
//!   `sum_{q != r, n_qr > 0} (alpha + n_qr beta + ceil(n_qr / s) l)`.
//! - [`AlltoallvAlgorithm::PairwiseWrite`]: the mirror: rank `q` writes its block for
//!   `q xor t` or `(q + t) mod p` into that rank's receive buffer, at the place its
//!   published receive displacements say.
//! - [`AlltoallvAlgorithm::Staged`]: copy-in/copy-out through the staging areas, one span
//!   per pair, scheduled so that any lengths pass without deadlock (see `sync::spans`).
//!   Two memory copies per byte, no system call, no permission.
//!
//! `Auto` (unless `ZCOLL_ALLTOALLV_ALGORITHM` says otherwise) takes the path the cost
//! model picks for an alltoall of the mean block between distinct ranks
//! (`tune::select`), staging only below [`ALLTOALLV_STAGED_MAX`]: every pair staged, or
//! every pair read pairwise; everything is staged on `cico`.
//!
//! Across nodes (`hier/varcount.rs`): every rank packs its blocks by destination node, the
//! leaders gather them, exchange node-to-node parts with rsmpi's
//! `all_to_all_varcount_into`, and scatter to every rank its incoming blocks, which it
//! unpacks into its partition. That costs a scratch copy of the outgoing and of the
//! incoming blocks at every rank, and four at the leaders.

use super::algorithm::Algorithm;
use super::varcount::{
    alltoallv_local, auto_stages, aux2_of, bytes, checked, cross_fault, elem_of, fault_words, fits,
    judge_flags, judge_pairs, partition_len, published, range, stages, write_partition, Exchange, Exchanged,
    Fault, Given, Parts, Published, ALLTOALLV_STAGED_MAX,
};
use super::{op, Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Filled, Listed, Round, Slots};
use crate::tune::select;
use mpi::Count;

/// How [`Comm::all_to_all_varcount_into_with`](crate::Comm::all_to_all_varcount_into_with)
/// moves the blocks inside a node.
///
/// `ZCOLL_ALLTOALLV_ALGORITHM=name` sets what `Auto` means.
///
/// # Examples
///
/// ```
/// use zcoll::AlltoallvAlgorithm;
/// assert_eq!("pairwise-write".parse(), Ok(AlltoallvAlgorithm::PairwiseWrite));
/// assert_eq!(AlltoallvAlgorithm::Pairwise.to_string(), "pairwise");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AlltoallvAlgorithm {
    /// Small blocks staged, large ones read pairwise (everything staged on `cico`).
    #[default]
    Auto,
    /// Every rank reads its block from one source's send buffer per step.
    Pairwise,
    /// Every rank writes one block into one destination's receive buffer per step.
    PairwiseWrite,
    /// Copy-in/copy-out through the control segment.
    Staged,
}

super::algorithm::vocabulary! {
AlltoallvAlgorithm("ZCOLL_ALLTOALLV_ALGORITHM"): "auto, pairwise, pairwise-write or staged",
[
    Auto => "auto",
    Pairwise => "pairwise",
    PairwiseWrite => "pairwise-write",
    Staged => "staged",
]}

/// One rank's two partitions, as arrays.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sides<'a> {
    pub(crate) send_counts: &'a [Count],
    pub(crate) send_displs: &'a [Count],
    pub(crate) recv_counts: &'a [Count],
    pub(crate) recv_displs: &'a [Count],
}

impl Sides<'_> {
    pub(crate) fn send(&self) -> Given<'_> {
        Given { counts: self.send_counts, displs: self.send_displs }
    }

    pub(crate) fn recv(&self) -> Given<'_> {
        Given { counts: self.recv_counts, displs: self.recv_displs }
    }
}

impl Exchanged for Sides<'_> {
    type Algorithm = AlltoallvAlgorithm;
}

/// Alltoallv among the ranks of the node, the partitions with one entry per local rank.
///
/// # Errors
///
/// On every rank of the node: the checks' errors (see [`varcount`](super::varcount)),
/// `Mismatch` if the algorithms differ; a transport error or a peer's failure.
pub(crate) fn alltoallv(ctx: &Ctx<'_>, call: Exchange<'_, Sides<'_>>) -> Result<()> {
    let Exchange { send, recv, parts: sides, elem, algorithm } = call;
    let (p, me) = (ctx.ctl.size(), ctx.ctl.me());
    let algorithm = algorithm.requested(ctx.transport, ctx.overrides);
    let (code, k) = published(&algorithm);
    // This rank judges its own call before it arrives, and publishes its partitions and
    // where its staged blocks lie, or the fault in their place with the flag in `aux2`
    // (`judge_flags`).
    let own = alltoallv_local(p, me, &sides.send(), &sides.recv(), elem, (send.len(), recv.len()));
    // Only the pairwise writers let peers write into the receive buffers.
    let writable = matches!(algorithm, Ok(AlltoallvAlgorithm::PairwiseWrite));
    let call =
        Call { aux2: aux2_of(elem, own), ..Call::new(op(Kind::Alltoallv, code, k), send, recv, writable) };
    let fit = fits(ctx, meta_len(p));
    // The blocks for the peers travel with the arrival, in rank order, where they fit and
    // may be staged (see `one_phase`); a rank whose own call passed has every block inside
    // its send buffer.
    let cap = (matches!(algorithm, Ok(AlltoallvAlgorithm::Auto))).then(|| auto_cap(p));
    // Only a rank whose own call passed has one count per rank.
    let peers = if own.is_none() { peers_bytes(&sides.send(), p, me, elem) } else { 0 };
    let staged =
        matches!((own, &algorithm), (None, Ok(AlltoallvAlgorithm::Auto | AlltoallvAlgorithm::Staged)))
            && stages(ctx, cap, meta_len(p), peers);
    // The metadata words proper are the map of what this rank stages, which a one-phase
    // reader reads beside the payload that follows them; the partitions, which only the
    // paths beyond one phase read, go to the end of the area (`parts_at`), so that a
    // one-phase reader of small blocks takes one cache line of each sender's area and no
    // line it reads, nor the next, is written with words it does not read. All are
    // written straight into the area, and the blocks copied from the send buffer.
    let map = Filled(map_len(p), |out: &Slots<'_>| staged_map(out, &sides.send(), p, me, elem, staged));
    let tail = Filled(2 * partition_len(p), |out: &Slots<'_>| {
        write_partition(out, 0, p, sides.send_counts, sides.send_displs);
        write_partition(out, partition_len(p), p, sides.recv_counts, sides.recv_displs);
    });
    // An empty block stages nothing, wherever its displacement points.
    let blocks = Listed(|f: &mut dyn FnMut(&[u8])| {
        if staged {
            let full = |d: usize| d != me && sides.send_counts[d] > 0;
            (0..p).filter(|&d| full(d)).for_each(|d| f(&send[range(&sides.send(), d, elem)]));
        }
    });
    // Two calls of `checked`, so that each stages words of a type it knows.
    let mut round = match own.map(fault_words) {
        None => checked(ctx, call, fit.then_some(&map), &blocks, &tail, false, judge_flags)?,
        Some(words) => checked(ctx, call, fit.then_some(&words), &blocks, &[0u64; 0], false, judge_flags)?,
    };
    let algorithm = match algorithm {
        Ok(a) => a,
        Err(e) => return round.finish(Err(e)),
    };
    let inn = |s: usize| range(&sides.recv(), s, elem);
    if one_phase(&round, algorithm, staged.then_some(peers)) {
        // Each rank judges its own counts against what the senders published for it where
        // it reads their blocks, before it writes a byte: a rank whose count differs fails
        // alone, and the others learn it at their next call (`finish_alone`).
        let block = |src: usize| {
            let w = round.meta(src, 1 + me);
            ((w & 0xffff_ffff) as usize, (w >> 32) as usize)
        };
        if let Some(src) = (0..p).find(|&src| src != me && block(src).0 != inn(src).len()) {
            let rank = round.rank_of(me);
            let fault = Fault::Length { expected: block(src).0, found: inn(src).len() };
            return round.finish_alone(fault.error(rank, rank, p));
        }
        copy_block(&send[range(&sides.send(), me, elem)], &mut recv[inn(me)]);
        for src in (0..p).filter(|&src| src != me) {
            round.read_staged(src, 8 * map_len(p) + block(src).1, &mut recv[inn(src)]);
        }
        round.leave_early();
        return round.finish(Ok(()));
    }
    // Beyond one phase every rank judges every pair before any byte moves.
    let sends = |q| Published { round: &round, owner: q, at: parts_at(&round) };
    let elem_q = |q| elem_of(&round.call(q));
    let pairs = judge_pairs(
        p,
        |q| round.rank_of(q),
        me,
        |dst| {
            let recvs = Published { round: &round, owner: dst, at: parts_at(&round) + partition_len(p) };
            cross_fault(p, &recvs, elem_q(dst), |q| bytes(sends(q).block(dst).0, elem_q(q)))
        },
    );
    if let Err(e) = pairs {
        return round.finish(Err(e));
    }
    let moved = exchange(&round, algorithm, send, recv, sides, elem);
    round.finish(moved)
}

/// The metadata words of an alltoallv on `p` ranks: the map of what it stages
/// ([`staged_map`]) and its two partitions.
fn meta_len(p: usize) -> usize {
    map_len(p) + 2 * partition_len(p)
}

/// The words of the map of what a rank stages ([`staged_map`]), first in its area; its
/// payload follows them.
fn map_len(p: usize) -> usize {
    1 + p
}

/// The bit of the first word of an alltoallv's map ([`staged_map`]) by which its rank says
/// that it staged its blocks for the peers with its arrival.
const STAGED: u64 = 1 << 63;

/// The word at which a rank's two partitions start in its area: at its end, as the tail
/// of its metadata (`Control::begin_staged_with`). Only for a rank whose own call passed
/// (no fault words in place of its map).
fn parts_at(round: &Round<'_>) -> usize {
    round.tail_at(2 * partition_len(round.size()))
}

/// Writes the map of the blocks rank `me` sends its peers (`send`, elements of `elem`
/// bytes), as it stages them with its arrival: the bytes of all of them (with [`STAGED`]
/// if it `staged` them), then for each rank `d` the bytes for `d` (low 32 bits) and where
/// they start in the payload (high 32 bits), in rank order without `me`'s own. A
/// one-phase reader reads one word per sender: its block's length, to judge against its
/// own count, and where to copy it from, without adding up the sender's other counts.
/// Only read where every rank staged (at most half a staging area each, so no number is
/// clamped). Only for a rank whose own call passed (one count per rank).
fn staged_map(out: &Slots<'_>, send: &Given<'_>, p: usize, me: usize, elem: usize, staged: bool) {
    let clamp = |n: usize| n.min(u32::MAX as usize) as u64;
    let mut at = 0usize;
    let words = send.counts[..p].iter().enumerate().map(|(d, &count)| {
        let len = if d == me { 0 } else { bytes(count, elem) };
        let word = clamp(len) | clamp(at) << 32;
        at = at.saturating_add(len);
        word
    });
    out.set_from(1, words);
    out.set(0, clamp(at) | if staged { STAGED } else { 0 });
}

/// The bytes of the blocks rank `me` sends its peers, as its send partition `send`
/// (checked) says.
fn peers_bytes(send: &Given<'_>, p: usize, me: usize, elem: usize) -> usize {
    let all = send.counts[..p].iter().fold(0usize, |sum, &c| sum.saturating_add(bytes(c, elem)));
    all - bytes(send.counts[me], elem)
}

/// The bytes rank `i / p` sends rank `i % p`, for every pair, as the published send
/// partitions say.
fn pair_bytes(round: &Round<'_>) -> Vec<usize> {
    let p = round.size();
    let sends = |q| Published { round, owner: q, at: parts_at(round) };
    (0..p * p).map(|i| bytes(sends(i / p).block(i % p).0, elem_of(&round.call(i / p)))).collect()
}

/// Whether a checked alltoallv moves in one phase: every block is staged (the caller's
/// choice, or `Auto`'s) and every rank staged its blocks for the peers with its arrival
/// (which the published maps tell alike on every rank: [`STAGED`]), so every rank copies
/// its blocks straight out of the peers' areas and no rank's buffer is touched by a peer.
/// One word per peer, on the line of the payload; this rank's own word is `mine` (the
/// bytes it staged, `None` if it staged nothing), which it knows without reading it back:
/// a line it just wrote for its peers, which they may be pulling into their caches, costs
/// as much to read back as a peer's (0.06 us a call at 2 ranks).
fn one_phase(round: &Round<'_>, algorithm: AlltoallvAlgorithm, mine: Option<usize>) -> bool {
    let (p, me) = (round.size(), round.me());
    if !matches!(algorithm, AlltoallvAlgorithm::Staged | AlltoallvAlgorithm::Auto) || p == 1 {
        return false;
    }
    let Some(mine) = mine else { return false };
    let word = |s: usize| round.meta(s, 0);
    let peers = || (0..p).filter(|&s| s != me);
    if peers().any(|s| word(s) & STAGED == 0) {
        return false;
    }
    let mean = (mine + peers().map(|s| (word(s) & !STAGED) as usize).sum::<usize>()) / (p * (p - 1));
    algorithm == AlltoallvAlgorithm::Staged
        || auto_stages(select::Coll::Alltoall, mean, p, ONE_PHASE_STAGED_MAX)
}

/// The mean block between distinct ranks from which `Auto` never moves an alltoallv in
/// one phase. Far above [`ALLTOALLV_STAGED_MAX`], the limit of the multi-phase staged
/// exchange: one phase costs about what the fixed-size staged alltoall costs (at 2 ranks,
/// 0.7 us at 4 KiB and 1.2 us at 16 KiB, where reading every block with a single copy
/// took 2.8 and 3.5 us). Past it, or where a rank's blocks do not fit half its staging
/// area beside its counts, the single copies win.
const ONE_PHASE_STAGED_MAX: usize = 32 * 1024;

/// The most bytes a rank of an `Auto` alltoallv on `p` ranks stages for its peers with
/// its arrival: what `Auto` moves in one phase at most on average
/// ([`ONE_PHASE_STAGED_MAX`] a pair), so that a call `Auto` moves with single copies
/// rarely stages in vain.
fn auto_cap(p: usize) -> usize {
    ONE_PHASE_STAGED_MAX * p.saturating_sub(1)
}

/// Moves the blocks of a checked alltoallv.
fn exchange(
    round: &Round<'_>,
    algorithm: AlltoallvAlgorithm,
    send: &[u8],
    recv: &mut [u8],
    sides: Sides<'_>,
    elem: usize,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let (mine_s, mine_r) = (sides.send(), sides.recv());
    let (out, inn) = (|d: usize| range(&mine_s, d, elem), |s: usize| range(&mine_r, s, elem));
    // Everything needed from the peers' areas, read before they may reuse them: the bytes of
    // every pair (for the staged schedule), and where this rank's blocks sit in the peers'
    // buffers.
    let staging = matches!(algorithm, AlltoallvAlgorithm::Staged | AlltoallvAlgorithm::Auto);
    let pairs: Vec<usize> = match staging {
        true => pair_bytes(round),
        false => Vec::new(),
    };
    // `Auto` decides here, from every pair's bytes: the same on every rank.
    let algorithm = match algorithm {
        AlltoallvAlgorithm::Auto if p > 1 => {
            let between: usize = (0..p * p).filter(|i| i / p != i % p).map(|i| pairs[i]).sum();
            match auto_stages(select::Coll::Alltoall, between / (p * (p - 1)), p, ALLTOALLV_STAGED_MAX) {
                true => AlltoallvAlgorithm::Staged,
                false => AlltoallvAlgorithm::Pairwise,
            }
        }
        a => a,
    };
    // Where this rank's block sits in every peer's partition published `at` words after
    // the start of its partitions.
    let peer_offsets = |at: usize| -> Vec<usize> {
        let part = |q| Published { round, owner: q, at: parts_at(round) + at };
        (0..p).map(|q| range(&part(q), me, elem_of(&round.call(q))).start).collect()
    };
    let (from, to) = match algorithm {
        AlltoallvAlgorithm::PairwiseWrite => (Vec::new(), peer_offsets(partition_len(p))),
        AlltoallvAlgorithm::Staged => (Vec::new(), Vec::new()),
        _ => (peer_offsets(0), Vec::new()),
    };
    round.release_meta();
    copy_block(&send[out(me)], &mut recv[inn(me)]);
    if p == 1 {
        return Ok(());
    }
    let staged = algorithm == AlltoallvAlgorithm::Staged;
    let len = |s: usize, d: usize| if staged { pairs[s * p + d] } else { 0 };
    if staged && (0..p * p).any(|i| i / p != i % p && len(i / p, i % p) > 0) {
        if (0..p).any(|d| d != me && len(me, d) > 0) {
            round.reclaim_meta()?;
        }
        round.stage_spans(len, send, |d| out(d).start, recv, |s| inn(s).start)?;
    }
    let xor = p.is_power_of_two();
    match algorithm {
        AlltoallvAlgorithm::PairwiseWrite => (1..p).try_for_each(|t| {
            let dst = if xor { me ^ t } else { (me + t) % p };
            if out(dst).is_empty() {
                return Ok(());
            }
            round.write_recv(&send[out(dst)], dst, to[dst])
        }),
        AlltoallvAlgorithm::Pairwise | AlltoallvAlgorithm::Auto => (1..p).try_for_each(|t| {
            let src = if xor { me ^ t } else { (me + p - t) % p };
            if inn(src).is_empty() {
                return Ok(());
            }
            round.read_send(src, from[src], &mut recv[inn(src)])
        }),
        AlltoallvAlgorithm::Staged => Ok(()),
    }
}
