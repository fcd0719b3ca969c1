//! Allgatherv: every rank's block, of its own length, lands in every rank's receive buffer,
//! at the place that rank's own partition gives it (`counts[r]` elements from
//! `displs[r]` for rank `r`'s block).
//!
//! Every rank publishes its receive partition in its staging area (see
//! [`varcount`](super::varcount)); the checks make sure that every rank's count for rank
//! `r` is exactly `r`'s send length. Each block then moves once, straight from its owner's
//! send buffer into every other rank's receive buffer. Algorithms (`alpha` per CMA call,
//! `beta` per byte, `l` per page pinned, `s` the page size, blocks of `n_r` bytes, `m`
//! non-empty blocks):
//!
//! - [`AllgathervAlgorithm::RingSourceRead`]: at step `t` rank `r` reads block `(r - t) mod p`
//!   from its owner's send buffer; empty blocks are skipped. No waits; while the ranks keep
//!   pace every owner has one reader per step. Per rank
//!   `sum_{q != r, n_q > 0} (alpha + n_q beta + ceil(n_q / s) l)`.
//! - [`AllgathervAlgorithm::RingSourceWrite`]: the mirror: rank `r` writes its block into
//!   rank `(r + t) mod p`'s receive buffer, at the place that rank's partition says (read
//!   from its published displacements). `(p - 1)(alpha + n_r beta + ceil(n_r / s) l)`.
//! - [`AllgathervAlgorithm::Staged`]: copy-in/copy-out through the staging areas, one span
//!   per pair, scheduled so that any lengths pass without deadlock (see `sync::spans`).
//!   Two memory copies per byte, no system call, no permission.
//!
//! `Auto` (unless `ZCOLL_ALLGATHERV_ALGORITHM` says otherwise) takes the path the cost
//! model picks for an allgather of the mean block (`tune::select`), staging only below
//! [`ALLGATHERV_STAGED_MAX`]: every block staged, or every block read in ring order;
//! everything is staged on `cico`.
//!
//! Across nodes (`hier/varcount.rs`): every node gathers its blocks at its leader, the
//! leaders exchange node parts with rsmpi's `all_gather_varcount_into`, every leader
//! broadcasts the packed result in its node, and every rank unpacks it into its partition.
//! Every rank holds a scratch copy of all blocks for that last step.

use super::algorithm::Algorithm;
use super::varcount::{
    allgatherv_local, auto_stages, aux2_of, checked, cross_fault, elem_of, fault_words, fits, judge_flags,
    judge_pairs, partition_len, published, range, stages, write_partition, Exchange, Exchanged, Fault, Given,
    Published, ALLGATHERV_STAGED_MAX,
};
use super::{op, Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Filled, Round, Slots};
use crate::tune::select;

/// How [`Comm::all_gather_varcount_into_with`](crate::Comm::all_gather_varcount_into_with)
/// moves the blocks inside a node.
///
/// `ZCOLL_ALLGATHERV_ALGORITHM=name` sets what `Auto` means.
///
/// # Examples
///
/// ```
/// use zcoll::AllgathervAlgorithm;
/// assert_eq!("ring-source-read".parse(), Ok(AllgathervAlgorithm::RingSourceRead));
/// assert_eq!(AllgathervAlgorithm::Staged.to_string(), "staged");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AllgathervAlgorithm {
    /// Small blocks staged, large ones read in ring order (everything staged on `cico`).
    #[default]
    Auto,
    /// Every rank reads block `r - t` from its owner's send buffer at step `t`.
    RingSourceRead,
    /// Every rank writes its block into rank `r + t`'s receive buffer at step `t`.
    RingSourceWrite,
    /// Copy-in/copy-out through the control segment.
    Staged,
}

super::algorithm::vocabulary! {
AllgathervAlgorithm("ZCOLL_ALLGATHERV_ALGORITHM"): "auto, ring-source-read, ring-source-write or staged",
[
    Auto => "auto",
    RingSourceRead => "ring-source-read",
    RingSourceWrite => "ring-source-write",
    Staged => "staged",
]}

impl Exchanged for Given<'_> {
    type Algorithm = AllgathervAlgorithm;
}

/// Allgatherv among the ranks of the node: `send` lands at `recv[counts[me]` elements from
/// `displs[me]]` of the caller, and at the block for this rank of every other rank's
/// partition. `counts` and `displs` have one entry per local rank.
///
/// # Errors
///
/// On every rank of the node: the checks' errors (see [`varcount`](super::varcount)),
/// `Mismatch` if the algorithms differ; a transport error or a peer's failure.
pub(crate) fn allgatherv(ctx: &Ctx<'_>, call: Exchange<'_, Given<'_>>) -> Result<()> {
    let Exchange { send, recv, parts: Given { counts, displs }, elem, algorithm } = call;
    let (p, me) = (ctx.ctl.size(), ctx.ctl.me());
    let mine = Given { counts, displs };
    let algorithm = algorithm.requested(ctx.transport, ctx.overrides);
    let (code, k) = published(&algorithm);
    // This rank judges its own call before it arrives, and publishes its partition, or the
    // fault in its place with the flag in `aux2` (`judge_flags`).
    let own = allgatherv_local(p, me, &mine, elem, recv.len(), send.len());
    // Only the ring-source writers let peers write into the receive buffers.
    let writable = matches!(algorithm, Ok(AllgathervAlgorithm::RingSourceWrite));
    let call =
        Call { aux2: aux2_of(elem, own), ..Call::new(op(Kind::Allgatherv, code, k), send, recv, writable) };
    let fit = fits(ctx, partition_len(p));
    // The block travels with the arrival where it fits and may be staged (`one_phase`).
    let cap = (matches!(algorithm, Ok(AllgathervAlgorithm::Auto))).then_some(ALLGATHERV_STAGED_MAX);
    let staged: &[&[u8]] = match algorithm {
        Ok(AllgathervAlgorithm::Auto | AllgathervAlgorithm::Staged)
            if own.is_none() && stages(ctx, cap, partition_len(p), send.len()) =>
        {
            &[send]
        }
        _ => &[],
    };
    // The partition goes to the end of the area (the tail), written straight there: only
    // the paths beyond one phase read it, so the block staged at the start crosses in as
    // few cache lines as an allgather's.
    let partition = Filled(partition_len(p), |out: &Slots<'_>| write_partition(out, 0, p, counts, displs));
    // Two calls of `checked`, so that each stages words of a type it knows.
    let mut round = match own.map(fault_words) {
        None => checked(ctx, call, fit.then_some(&[0u64; 0]), &staged, &partition, false, judge_flags)?,
        Some(words) => checked(ctx, call, fit.then_some(&words), &staged, &[0u64; 0], false, judge_flags)?,
    };
    let algorithm = match algorithm {
        Ok(a) => a,
        Err(e) => return round.finish(Err(e)),
    };
    let send_len = |q: usize| round.send_len(q);
    if one_phase(ctx, &round, algorithm) {
        // Each rank judges its own counts against the senders' lengths where it reads
        // their blocks, before it writes a byte: a rank whose count differs fails alone,
        // and the others learn it at their next call (`finish_alone`).
        let at = |r: usize| range(&mine, r, elem);
        if let Some(src) = (0..p).find(|&src| at(src).len() != send_len(src)) {
            let rank = round.rank_of(me);
            let fault = Fault::Length { expected: send_len(src), found: at(src).len() };
            return round.finish_alone(fault.error(rank, rank, p));
        }
        copy_block(send, &mut recv[at(me)]);
        for src in (0..p).filter(|&src| src != me) {
            round.read_staged(src, 0, &mut recv[at(src)]);
        }
        round.leave_early();
        return round.finish(Ok(()));
    }
    // Beyond one phase every rank judges every pair before any byte moves.
    let pairs = judge_pairs(
        p,
        |q| round.rank_of(q),
        me,
        |q| cross_fault(p, &published_at(&round, q), elem_of(&round.call(q)), send_len),
    );
    if let Err(e) = pairs {
        return round.finish(Err(e));
    }
    let moved = exchange(&round, algorithm, send, recv, &mine, elem);
    round.finish(moved)
}

/// Whether a checked allgatherv moves in one phase: every block is staged (the caller's
/// choice, or `Auto`'s, see [`auto_stages`]) and every rank staged its block with its
/// arrival (which the published lengths tell alike on every rank), so every rank copies
/// the blocks straight out of their owners' areas and no rank's buffer is touched by a
/// peer.
fn one_phase(ctx: &Ctx<'_>, round: &Round<'_>, algorithm: AllgathervAlgorithm) -> bool {
    let p = round.size();
    let send_len = |r: usize| round.send_len(r);
    let cap = (algorithm == AllgathervAlgorithm::Auto).then_some(ALLGATHERV_STAGED_MAX);
    let staged = match algorithm {
        AllgathervAlgorithm::Staged => true,
        AllgathervAlgorithm::Auto => auto_stages(
            select::Coll::Allgather,
            (0..p).map(send_len).sum::<usize>() / p,
            p,
            ALLGATHERV_STAGED_MAX,
        ),
        _ => false,
    };
    staged && (0..p).all(|r| send_len(r) == 0 || stages(ctx, cap, partition_len(p), send_len(r)))
}

/// The partition local rank `q` published, at the end of its area (the tail). Only for a
/// rank whose own call passed (no fault words in its place).
fn published_at<'r, 'c>(round: &'r Round<'c>, q: usize) -> Published<'r, 'c> {
    Published { round, owner: q, at: round.tail_at(partition_len(round.size())) }
}

/// Moves the blocks of a checked allgatherv.
fn exchange(
    round: &Round<'_>,
    algorithm: AllgathervAlgorithm,
    send: &[u8],
    recv: &mut [u8],
    mine: &Given<'_>,
    elem: usize,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let at = |r: usize| range(mine, r, elem);
    let send_len: Vec<usize> = (0..p).map(|r| round.send_len(r)).collect();
    // Where this rank's block goes in every peer's buffer (for the writers).
    let targets: Vec<usize> = match algorithm {
        AllgathervAlgorithm::RingSourceWrite => {
            (0..p).map(|q| range(&published_at(round, q), me, elem_of(&round.call(q))).start).collect()
        }
        _ => Vec::new(),
    };
    round.release_meta();
    copy_block(send, &mut recv[at(me)]);
    if p == 1 {
        return Ok(());
    }
    let auto_staged = algorithm == AllgathervAlgorithm::Auto
        && auto_stages(select::Coll::Allgather, send_len.iter().sum::<usize>() / p, p, ALLGATHERV_STAGED_MAX);
    let staged = |_: usize| match algorithm {
        AllgathervAlgorithm::Staged => true,
        AllgathervAlgorithm::Auto => auto_staged,
        _ => false,
    };
    if (0..p).any(|r| staged(r) && send_len[r] > 0) {
        if staged(me) && send_len[me] > 0 {
            round.reclaim_meta()?;
        }
        let len = |src: usize, _| if staged(src) { send_len[src] } else { 0 };
        round.stage_spans(len, send, |_| 0, recv, |src| at(src).start)?;
    }
    match algorithm {
        AllgathervAlgorithm::RingSourceWrite if !send.is_empty() => (1..p).try_for_each(|t| {
            let dst = (me + t) % p;
            round.write_recv(send, dst, targets[dst])
        }),
        AllgathervAlgorithm::RingSourceRead | AllgathervAlgorithm::Auto => (1..p).try_for_each(|t| {
            let src = (me + p - t) % p;
            if staged(src) || send_len[src] == 0 {
                return Ok(());
            }
            round.read_send(src, 0, &mut recv[at(src)])
        }),
        _ => Ok(()),
    }
}
