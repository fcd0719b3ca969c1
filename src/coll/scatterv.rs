//! Scatterv: block `r` of the root's buffer, `counts[r]` elements from `displs[r]`, ends
//! up in rank `r`'s buffer.
//!
//! The root publishes its counts and displacements in its staging area (see
//! [`varcount`](super::varcount)); every rank computes every block's place from them, so
//! each block moves once, straight from the root's buffer into its rank's buffer. The
//! algorithms are the scatter's ([`ScatterAlgorithm`]), with the same cost model (`alpha`
//! per CMA call, `beta` per byte, `l` per page pinned, `s` the page size, `gamma(c)` the
//! contention of `c` processes pinning one process's pages), over blocks of `n_r` bytes
//! and only the `m` ranks whose block is not empty:
//!
//! - `ParallelRead`: every such rank reads its block at once.
//!   `max_r (alpha + n_r beta + ceil(n_r / s) l gamma(m))`.
//! - `SequentialWrite`: the root writes every block in turn.
//!   `sum_r (alpha + n_r beta + ceil(n_r / s) l)`.
//! - `ThrottledRead { k }`: `k` readers at a time, a reader starting when the reader `k`
//!   places before it in the chain of non-empty blocks has finished (empty blocks are not
//!   in the chain, so they neither wait nor hold anyone up). About
//!   `sum over groups of max_r (alpha + n_r beta + ceil(n_r / s) l gamma(k))`.
//! - `Staged`: copy-in/copy-out through the root's staging area, blocks packed in slots of
//!   the largest block (rounded to a cache line, at most half the area). `2 sum_r n_r`
//!   bytes of memory copies, no system call.
//!
//! `Auto` (unless `ZCOLL_SCATTERV_ALGORITHM` says otherwise) takes, for the whole call,
//! what the cost model chooses for a scatter of the mean non-empty block the root sends
//! ([`super::varcount::auto_family`]); on the `cico` transport everything is
//! staged. The choice is a pure function of the published counts and the profile, whose
//! fingerprint `Auto` publishes, so every rank makes it alike.
//!
//! A root whose counts and peers' blocks travel with its arrival (`Auto` up to
//! `AUTO_STAGE_MAX` bytes of blocks, or `Staged`) leaves before the verdict on a one-node
//! communicator with flat arrivals (`Control::leave_staged`), once it has checked its
//! partition and its own block alone; its leaves then copy their blocks out of its area
//! whatever the family.
//!
//! Across nodes (`hier/varcount.rs`): the root packs its blocks node by node into a scratch
//! buffer (handed to its leader through the node if it is not the leader), the leaders
//! scatter node parts with rsmpi's `scatter_varcount_into_root`, and every node scatters
//! from its leader. That costs a scratch copy at the root and a scratch part at every
//! leader.

use super::rooted::{peers, Rooted, RootedBufs};
use super::varcount::{
    auto_family, bytes, chain, check_partition, checked, fits, judge_round, partition_len, published, range,
    root_block, root_blocks, staged_before, staged_bytes, stages, write_partition, Claim, Family, Given,
    Moves, Side, AUTO_STAGE_MAX,
};
use super::{op, Ctx, Kind};
use crate::coll::scatter::ScatterAlgorithm;
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Filled, Listed, Round, Slots, Toward, PRIVATE};
use crate::transport::TransportKind;
use crate::tune::select;
use mpi::Count;
use std::ops::Range;

/// The variable that sets what `Auto` means for a scatterv (the scatter's enum, its own
/// variable).
pub(crate) const SCATTERV_VAR: &str = "ZCOLL_SCATTERV_ALGORITHM";

/// What this rank asks for, before the arrive phase: `Auto` becomes what
/// `ZCOLL_SCATTERV_ALGORITHM` names (if set), and everything is `Staged` on `cico`.
pub(crate) fn requested(
    a: ScatterAlgorithm,
    transport: TransportKind,
    env: &super::Overrides,
) -> Result<ScatterAlgorithm> {
    super::algorithm::requested(a, SCATTERV_VAR, env, transport)
}

/// How an algorithm every rank asked for moves the blocks of `blocks` from `src`.
fn family(a: ScatterAlgorithm, blocks: &[Range<usize>], src: usize) -> Family {
    match a {
        ScatterAlgorithm::Auto => auto_family(select::Coll::Scatter, blocks, src),
        ScatterAlgorithm::ParallelRead => Family::Direct(usize::MAX),
        ScatterAlgorithm::ThrottledRead { k } => Family::Direct(k as usize),
        ScatterAlgorithm::SequentialWrite => Family::ByRoot,
        ScatterAlgorithm::Staged => Family::Staged,
    }
}

/// What a rank passes to a node-level scatterv.
#[derive(Debug)]
pub(crate) enum ScattervBufs<'a> {
    /// The root: the buffer of all blocks, its partition (in elements, one entry per local
    /// rank), and where its own block goes.
    Root { send: &'a [u8], counts: &'a [Count], displs: &'a [Count], recv: &'a mut [u8] },
    /// Any other rank: where its block goes.
    Leaf { recv: &'a mut [u8] },
}

impl RootedBufs for ScattervBufs<'_> {
    type Algorithm = ScatterAlgorithm;
}

/// Scatters inside the node from local rank `src`. See [`Rooted`] for the rest of the call.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn scatterv(ctx: &Ctx<'_>, call: Rooted<ScattervBufs<'_>>) -> Result<()> {
    let Rooted { bufs, root, local: src, elem, algorithm } = call;
    let p = ctx.ctl.size();
    let algorithm = requested(algorithm, ctx.transport, ctx.overrides);
    let (code, k) = published(&algorithm);
    let (is_root, send, send_len, recv) = match &bufs {
        ScattervBufs::Root { send, recv, .. } => (true, send.as_ptr() as usize, send.len(), &**recv),
        ScattervBufs::Leaf { recv } => (false, 0, 0, &**recv),
    };
    let call = Call {
        op: op(Kind::Scatterv, code, k),
        root: root as i64,
        send,
        send_len,
        recv: recv.as_ptr() as usize,
        recv_len: recv.len(),
        // Only the receivers of a sequential write (which `Auto` may choose) let a peer
        // write into their buffer.
        recv_writable: matches!(algorithm, Ok(ScatterAlgorithm::SequentialWrite | ScatterAlgorithm::Auto))
            && !is_root,
        aux: src as u64,
        aux2: Claim { root: is_root, in_place: false, elem, block: recv.len(), whole: send_len }.aux2(),
    };
    let fit = fits(ctx, partition_len(p));
    // The root stages the peers' blocks, in rank order, with its arrival where they fit
    // (see `one_phase`); not at all where its partition is not valid (the checks fail).
    let cap = (matches!(algorithm, Ok(ScatterAlgorithm::Auto))).then_some(AUTO_STAGE_MAX);
    let staged = match (&bufs, &algorithm) {
        (
            ScattervBufs::Root { send, counts, displs, .. },
            Ok(ScatterAlgorithm::Auto | ScatterAlgorithm::Staged),
        ) => staged_bytes(send.len(), &Given { counts, displs }, p, src, elem)
            .is_some_and(|bytes| p > 1 && stages(ctx, cap, partition_len(p), bytes)),
        _ => false,
    };
    // The root's partition and the blocks it stages, written straight into its area (the
    // blocks only where `staged`: every one of them then lies inside its buffer).
    let partition = Filled(partition_len(p), |out: &Slots<'_>| {
        if let ScattervBufs::Root { counts, displs, .. } = &bufs {
            write_partition(out, 0, p, counts, displs);
        }
    });
    let blocks = Listed(|f: &mut dyn FnMut(&[u8])| {
        if let (ScattervBufs::Root { send, counts, displs, .. }, true) = (&bufs, staged) {
            let parts = Given { counts, displs };
            (0..p).filter(|&r| r != src && counts[r] > 0).for_each(|r| f(&send[range(&parts, r, elem)]));
        }
    });
    // A root whose blocks travel with its arrival only gives: it leaves at once where it
    // can (the verdict deferred: `Control::leave_staged`), with a private record, and the
    // leaves copy their blocks out of its area whatever the family (see below). What the
    // root can judge alone is judged in the call: a root outside the communicator, counts
    // that fit no staging area, its partition (`staged` is empty where an entry is
    // missing or a block lies outside its buffer; the rest here) and its own block's
    // length. The leaves judge the rest and learn nothing of the root's verdict: a bad
    // call fails on them, returns `Ok` on the root, and fails on every rank at the next
    // call (`PreviousFailed`).
    let leave = match &bufs {
        ScattervBufs::Root { send, counts, displs, recv } => {
            staged
                && fit
                && ctx.ctl.me() == src
                && check_partition(p, &Given { counts, displs }, elem, send.len(), Side::Send).is_ok()
                && bytes(counts[src], elem) == recv.len()
                && ctx.may_leave(root)
        }
        ScattervBufs::Leaf { .. } => false,
    };
    if leave {
        ctx.ctl.leave_staged_with(&Call { op: call.op | PRIVATE, ..call }, &partition, &blocks)?;
        // Our own block once we have left: nobody waits for it.
        if let ScattervBufs::Root { send, counts, displs, recv } = bufs {
            copy_block(&send[range(&Given { counts, displs }, src, elem)], recv);
        }
        return Ok(());
    }
    // Two calls of `checked`, so that each stages words of a type it knows.
    let mine = match &bufs {
        ScattervBufs::Root { counts, displs, .. } => Some(Given { counts, displs }),
        ScattervBufs::Leaf { .. } => None,
    };
    let judge = |r: &Round<'_>| judge_round(r, src, Side::Send, mine.as_ref());
    let mut round = match &bufs {
        ScattervBufs::Root { .. } => {
            checked(ctx, call, fit.then_some(&partition), &blocks, &[0u64; 0], true, judge)?
        }
        ScattervBufs::Leaf { .. } => {
            checked(ctx, call, fit.then_some(&[0u64; 0]), &blocks, &[0u64; 0], true, judge)?
        }
    };
    let algorithm = match algorithm {
        Ok(a) => a,
        Err(e) => return round.finish(Err(e)),
    };
    // A root that left staged every peer's block with its arrival (it leaves only then):
    // every leaf copies its block out of the root's area, whatever the family, so nobody
    // plans the moves (`root_blocks`: every rank's range and the family, several hundred
    // instructions on the leaf's critical path at 2 ranks).
    let plan = match round.left(src) {
        true => None,
        false => Some(root_blocks(&round, src, |blocks| family(algorithm, blocks, src))),
    };
    let Some((blocks, moves)) = plan.filter(|(blocks, moves)| !one_phase(ctx, moves, blocks, src, cap))
    else {
        match bufs {
            ScattervBufs::Root { send, recv, .. } => copy_block(&send[root_block(&round, src, src)], recv),
            ScattervBufs::Leaf { recv } => {
                let before = staged_before(&round, src, round.me());
                round.read_staged(src, 8 * partition_len(p) + before, recv);
            }
        }
        round.leave_early();
        return round.finish(Ok(()));
    };
    let moved = move_blocks(&round, bufs, src, &blocks, &moves);
    round.finish(moved)
}

/// Whether a checked scatterv moves in one phase: every non-empty block is staged (the
/// model's choice, or the caller's), and the peers' blocks fit beside the root's
/// partition in its area, so the root staged them with its arrival (every rank tells
/// alike from the published partition) and every leaf copies its block straight out.
fn one_phase(ctx: &Ctx<'_>, moves: &Moves, blocks: &[Range<usize>], src: usize, cap: Option<usize>) -> bool {
    let peers_bytes = (0..blocks.len()).filter(|&r| r != src).map(|r| blocks[r].len()).sum();
    !moves.by_root && moves.direct.is_empty() && stages(ctx, cap, partition_len(blocks.len()), peers_bytes)
}

fn move_blocks(
    round: &Round<'_>,
    bufs: ScattervBufs<'_>,
    src: usize,
    blocks: &[Range<usize>],
    moves: &Moves,
) -> Result<()> {
    // Everything this rank needs from the root's area is in `blocks` and `moves` now.
    round.release_meta();
    let (me, p) = (round.me(), round.size());
    match bufs {
        ScattervBufs::Root { send, recv, .. } => {
            copy_block(&send[blocks[src].clone()], recv);
            if moves.by_root {
                for r in peers(src, p).filter(|&r| !blocks[r].is_empty()) {
                    round.write_recv(&send[blocks[r].clone()], r, 0)?;
                }
            }
            if moves.staging() {
                round.reclaim_meta()?;
                round.stage_parts(Toward::Peers, src, &moves.staged, send, &mut [])?;
            }
            Ok(())
        }
        ScattervBufs::Leaf { recv } if !moves.staged[me].is_empty() => {
            round.stage_parts(Toward::Peers, src, &moves.staged, &[], recv)
        }
        ScattervBufs::Leaf { recv } => {
            chain(round, &moves.direct, moves.k, || round.read_send(src, blocks[me].start, recv))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn requests_follow_transport_and_reject_k_zero() {
        use ScatterAlgorithm::*;
        assert_eq!(ParallelRead.to_string().parse::<ScatterAlgorithm>(), Ok(ParallelRead));
        assert_eq!(
            requested(SequentialWrite, TransportKind::Cico, &crate::coll::Overrides::default()),
            Ok(Staged)
        );
        assert_eq!(
            requested(ThrottledRead { k: 2 }, TransportKind::Cma, &crate::coll::Overrides::default()),
            Ok(ThrottledRead { k: 2 })
        );
        assert!(matches!(
            requested(ThrottledRead { k: 0 }, TransportKind::Cma, &crate::coll::Overrides::default()),
            Err(Error::Config { .. })
        ));
        assert_eq!(family(ThrottledRead { k: 3 }, &[], 0), Family::Direct(3));
    }
}
