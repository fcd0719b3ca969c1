//! Gatherv: rank `r`'s block lands at `displs[r]` of the root's buffer, `counts[r]`
//! elements long.
//!
//! The mirror of [`scatterv`](super::scatterv): the root publishes its counts and
//! displacements, every rank finds its block's place from them, and each block moves once,
//! straight from its rank's buffer into the root's. The receive blocks must not overlap
//! (checked on every rank), so no byte is written twice. The algorithms are the gather's
//! ([`GatherAlgorithm`]), over the `m` non-empty blocks of `n_r` bytes (`alpha` per CMA
//! call, `beta` per byte, `l` per page pinned, `s` the page size, `gamma(c)` the
//! contention of `c` processes pinning one process's pages):
//!
//! - `ParallelWrite`: every such rank writes its block into the root's buffer at once.
//!   `max_r (alpha + n_r beta + ceil(n_r / s) l gamma(m))`.
//! - `SequentialRead`: the root reads every block in turn.
//!   `sum_r (alpha + n_r beta + ceil(n_r / s) l)`.
//! - `ThrottledWrite { k }`: `k` writers at a time along the chain of non-empty blocks.
//! - `Staged`: copy-in/copy-out through the root's staging area; the writers wait until
//!   every rank has read the root's counts before they overwrite them with data.
//!
//! `Auto` (unless `ZCOLL_GATHERV_ALGORITHM` says otherwise) takes, for the whole call,
//! what the cost model chooses for a gather of the mean non-empty block the root receives
//! ([`super::varcount::auto_family`]), publishing the profile's fingerprint;
//! on `cico` everything is staged. Where that is the direct family (the leaves write), the
//! call settles it as the gather does: where the root reaches every non-empty block with
//! loads, the root reads them instead; where some block crosses with CMA, the family is
//! chosen again with a CMA write priced as such (`Params::over_cma`,
//! [`super::varcount::auto_family_over_cma`]). A staged family of
//! blocks too large to travel with their arrivals becomes the root's reads where it
//! reaches them all with loads. With the built-in parameters the model stages (its copies
//! in and out overlap), so `Vec` blocks are staged and heap blocks read with loads.
//!
//! Across nodes (`hier/varcount.rs`): every node gathers to its leader into a packed part,
//! the leaders gather the parts to the root's leader with rsmpi's
//! `gather_varcount_into_root` into a scratch buffer, which is handed to the root through
//! the node if it is not the leader, and the root unpacks it into its partition.

use super::rooted::{peers, Rooted, RootedBufs};
use super::varcount::{
    auto_family, auto_family_over_cma, chain, checked, fits, judge_round, partition_len, published, range,
    root_blocks, stages, write_partition, Claim, Family, Given, Moves, Side, AUTO_STAGE_MAX,
};
use super::{op, Ctx, Kind};
use crate::coll::gather::GatherAlgorithm;
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Filled, Round, Slots, Toward, PRIVATE};
use crate::transport::TransportKind;
use crate::tune::select;
use mpi::Count;
use std::ops::Range;

/// The variable that sets what `Auto` means for a gatherv (the gather's enum, its own
/// variable).
pub(crate) const GATHERV_VAR: &str = "ZCOLL_GATHERV_ALGORITHM";

/// What this rank asks for, before the arrive phase: `Auto` becomes what
/// `ZCOLL_GATHERV_ALGORITHM` names (if set), and everything is `Staged` on `cico`.
pub(crate) fn requested(
    a: GatherAlgorithm,
    transport: TransportKind,
    env: &super::Overrides,
) -> Result<GatherAlgorithm> {
    super::algorithm::requested(a, GATHERV_VAR, env, transport)
}

/// How an algorithm every rank asked for moves the blocks of `blocks` to `dst`.
fn family(a: GatherAlgorithm, blocks: &[Range<usize>], dst: usize) -> Family {
    match a {
        GatherAlgorithm::Auto => auto_family(select::Coll::Gather, blocks, dst),
        GatherAlgorithm::ParallelWrite => Family::Direct(usize::MAX),
        GatherAlgorithm::ThrottledWrite { k } => Family::Direct(k as usize),
        GatherAlgorithm::SequentialRead => Family::ByRoot,
        GatherAlgorithm::Staged => Family::Staged,
    }
}

/// What a rank passes to a node-level gatherv.
#[derive(Debug)]
pub(crate) enum GathervBufs<'a> {
    /// The root: its own block, the buffer of all blocks, and its partition (in elements,
    /// one entry per local rank).
    Root { send: &'a [u8], recv: &'a mut [u8], counts: &'a [Count], displs: &'a [Count] },
    /// Any other rank: its block.
    Leaf { send: &'a [u8] },
}

impl RootedBufs for GathervBufs<'_> {
    type Algorithm = GatherAlgorithm;
}

/// Gathers inside the node to local rank `dst`. See [`Rooted`] for the rest of the call.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn gatherv(ctx: &Ctx<'_>, call: Rooted<GathervBufs<'_>>) -> Result<()> {
    let Rooted { bufs, root, local: dst, elem, algorithm } = call;
    let p = ctx.ctl.size();
    let algorithm = requested(algorithm, ctx.transport, ctx.overrides);
    let (code, k) = published(&algorithm);
    let (is_root, send, recv, recv_len) = match &bufs {
        GathervBufs::Root { send, recv, .. } => (true, *send, recv.as_ptr() as usize, recv.len()),
        GathervBufs::Leaf { send } => (false, *send, 0, 0),
    };
    // The root lets peers write into its buffer if they may (the families that write).
    let writes = matches!(
        algorithm,
        Ok(GatherAlgorithm::Auto | GatherAlgorithm::ParallelWrite | GatherAlgorithm::ThrottledWrite { .. })
    );
    let call = Call {
        op: op(Kind::Gatherv, code, k),
        root: root as i64,
        send: send.as_ptr() as usize,
        send_len: send.len(),
        recv,
        recv_len,
        recv_writable: writes && is_root,
        aux: dst as u64,
        aux2: Claim { root: is_root, in_place: false, elem, block: send.len(), whole: recv_len }.aux2(),
    };
    let fit = fits(ctx, partition_len(p));
    // A leaf's block travels with its arrival where it fits and may be staged: the root
    // then copies it straight out of the leaf's area (see `one_phase`).
    let cap = (matches!(algorithm, Ok(GatherAlgorithm::Auto))).then_some(AUTO_STAGE_MAX);
    let staged: &[&[u8]] = match (&bufs, &algorithm) {
        (GathervBufs::Leaf { send }, Ok(GatherAlgorithm::Auto | GatherAlgorithm::Staged))
            if stages(ctx, cap, 0, send.len()) =>
        {
            &[send]
        }
        _ => &[],
    };
    // A leaf whose block travels with its arrival only gives: it leaves at once where it
    // can (the verdict deferred: `Control::leave_staged`), with a private record, and the
    // root copies its block out of its area whatever the family of the others (see
    // `root_blocks`). What a leaf can judge alone is judged in the call: a root outside
    // the communicator, counts that fit no staging area, and a leaf that is the root's
    // rank (it called the non-root method: no root would judge the round).
    if !staged.is_empty() && fit && ctx.ctl.me() != dst && ctx.may_leave(root) {
        return ctx.ctl.leave_staged(&Call { op: call.op | PRIVATE, ..call }, &[], staged);
    }
    // The root's partition, written straight into its area.
    let partition = Filled(partition_len(p), |out: &Slots<'_>| {
        if let GathervBufs::Root { counts, displs, .. } = &bufs {
            write_partition(out, 0, p, counts, displs);
        }
    });
    // Two calls of `checked`, so that each stages words of a type it knows.
    let mine = match &bufs {
        GathervBufs::Root { counts, displs, .. } => Some(Given { counts, displs }),
        GathervBufs::Leaf { .. } => None,
    };
    let judge = |r: &Round<'_>| judge_round(r, dst, Side::Recv, mine.as_ref());
    let mut round = match &bufs {
        GathervBufs::Root { .. } => {
            checked(ctx, call, fit.then_some(&partition), &staged, &[0u64; 0], true, judge)?
        }
        GathervBufs::Leaf { .. } => {
            checked(ctx, call, fit.then_some(&[0u64; 0]), &staged, &[0u64; 0], true, judge)?
        }
    };
    let a = match algorithm {
        Ok(a) => a,
        Err(e) => return round.finish(Err(e)),
    };
    // Every leaf left, its block staged with its arrival (at 2 ranks, every small call):
    // the root, alone in the round, copies the blocks out of their areas, whatever the
    // family, and plans no moves (`root_blocks`). Nobody touches a buffer of another
    // rank: the round ends as a private one does (`leave_early`), with no wait for the
    // leaves' `done` now.
    if peers(dst, p).all(|r| round.left(r)) {
        if let GathervBufs::Root { send, recv, counts, displs } = bufs {
            // The blocks from this rank's own partition, which it published: the same
            // numbers, not read back.
            let block = |r| range(&Given { counts, displs }, r, elem);
            copy_block(send, &mut recv[block(dst)]);
            for r in peers(dst, p) {
                let block = block(r);
                if !block.is_empty() {
                    round.read_staged(r, 0, &mut recv[block]);
                }
            }
        }
        round.leave_early();
        return round.finish(Ok(()));
    }
    let (blocks, moves) = {
        root_blocks(&round, dst, |blocks| match family(a, blocks, dst) {
            // `Auto`'s writes become the root's reads where it reaches every block with
            // loads, as the gather's (`gather::settle`), and the model's choice with CMA
            // writes priced as such where some block crosses with CMA; `Auto` is every
            // rank's request here (the checks compare the published codes, with the
            // parameters' fingerprint).
            Family::Direct(_) if a == GatherAlgorithm::Auto => match loads_all(&round, blocks, dst) {
                true => Family::ByRoot,
                false => auto_family_over_cma(select::Coll::Gather, blocks, dst),
            },
            // The staged path too, where no block travels with its arrival (copied twice,
            // where the root's loads copy each byte once).
            Family::Staged
                if a == GatherAlgorithm::Auto && !small(blocks, dst) && loads_all(&round, blocks, dst) =>
            {
                Family::ByRoot
            }
            f => f,
        })
    };
    if one_phase(ctx, &round, &moves, dst, cap) {
        if let GathervBufs::Root { send, recv, .. } = bufs {
            copy_block(send, &mut recv[blocks[dst].clone()]);
            for r in peers(dst, p).filter(|&r| !blocks[r].is_empty()) {
                round.read_staged(r, 0, &mut recv[blocks[r].clone()]);
            }
        }
        round.leave_early();
        return round.finish(Ok(()));
    }
    // Everything this rank needs from the root's area is in `blocks` and `moves` now.
    round.release_meta();
    match bufs {
        GathervBufs::Root { send, recv, .. } => {
            // The blocks of the leaves that left, out of their areas (no peer writes there).
            for r in peers(dst, p).filter(|&r| round.left(r) && !blocks[r].is_empty()) {
                round.read_staged(r, 0, &mut recv[blocks[r].clone()]);
            }
            // Our own block while the peers copy or write theirs: the checks found the
            // blocks disjoint, so no peer writes into it.
            copy_block(send, &mut recv[blocks[dst].clone()]);
            let moved = collect(&round, dst, &blocks, &moves, recv);
            round.finish(moved)
        }
        GathervBufs::Leaf { send } => {
            let moved = contribute(&round, dst, &blocks, &moves, send);
            round.finish(moved)
        }
    }
}

/// Whether some leaf's block of `blocks` (root `dst`) is small enough to travel with its
/// arrival when `Auto` stages it (`AUTO_STAGE_MAX`).
fn small(blocks: &[Range<usize>], dst: usize) -> bool {
    peers(dst, blocks.len()).any(|r| !blocks[r].is_empty() && blocks[r].len() <= AUTO_STAGE_MAX)
}

/// Whether the root `dst` reaches every non-empty block of `blocks` with loads (mapped
/// heaps, XPMEM): a pure function of the published records.
fn loads_all(round: &Round<'_>, blocks: &[Range<usize>], dst: usize) -> bool {
    peers(dst, round.size()).filter(|&r| !blocks[r].is_empty()).all(|r| round.loads(r, false))
}

/// Whether a checked gatherv moves in one phase: every non-empty block is staged (the
/// model's choice, or the caller's) and every leaf staged its block with its arrival
/// (published lengths say so alike on every rank), so the root copies the blocks out of
/// the leaves' areas and no rank's buffer is touched by a peer.
fn one_phase(ctx: &Ctx<'_>, round: &Round<'_>, moves: &Moves, dst: usize, cap: Option<usize>) -> bool {
    let staged = |r: usize| !moves.staged[r].is_empty();
    !moves.by_root
        && moves.direct.is_empty()
        && peers(dst, round.size()).all(|r| !staged(r) || stages(ctx, cap, 0, round.send_len(r)))
}

/// The root's side: what it copies itself.
fn collect(
    round: &Round<'_>,
    dst: usize,
    blocks: &[Range<usize>],
    moves: &Moves,
    recv: &mut [u8],
) -> Result<()> {
    if moves.by_root {
        // Not the leaves that left: their blocks came out of their areas.
        for r in peers(dst, round.size()).filter(|&r| !blocks[r].is_empty() && !round.left(r)) {
            round.read_send(r, 0, &mut recv[blocks[r].clone()])?;
        }
    }
    if moves.staging() {
        round.reclaim_meta()?;
        round.stage_parts(Toward::Hub, dst, &moves.staged, &[], recv)?;
    }
    Ok(())
}

/// A non-root's side: what it copies into the root.
fn contribute(
    round: &Round<'_>,
    dst: usize,
    blocks: &[Range<usize>],
    moves: &Moves,
    send: &[u8],
) -> Result<()> {
    let me = round.me();
    if !moves.staged[me].is_empty() {
        // The root's counts sit where our bytes go until every rank has read them.
        round.wait_meta_reclaimed(dst)?;
        return round.stage_parts(Toward::Hub, dst, &moves.staged, send, &mut []);
    }
    chain(round, &moves.direct, moves.k, || round.write_recv(send, dst, blocks[me].start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn requests_follow_transport_and_reject_k_zero() {
        use GatherAlgorithm::*;
        assert_eq!(
            requested(ParallelWrite, TransportKind::Cico, &crate::coll::Overrides::default()),
            Ok(Staged)
        );
        assert_eq!(
            requested(SequentialRead, TransportKind::Cma, &crate::coll::Overrides::default()),
            Ok(SequentialRead)
        );
        assert!(matches!(
            requested(ThrottledWrite { k: 0 }, TransportKind::Cma, &crate::coll::Overrides::default()),
            Err(Error::Config { .. })
        ));
        assert_eq!(family(ThrottledWrite { k: 2 }, &[], 0), Family::Direct(2));
        assert_eq!(family(SequentialRead, &[], 0), Family::ByRoot);
    }
}
