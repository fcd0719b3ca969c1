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
//! ([`auto_family`](super::varcount::auto_family)), publishing the profile's fingerprint;
//! on `cico` everything is staged.
//!
//! Across nodes ([`gatherv_hier`]): every node gathers to its leader into a packed part,
//! the leaders gather the parts to the root's leader with rsmpi's
//! `gather_varcount_into_root` into a scratch buffer, which is handed to the root through
//! the node if it is not the leader, and the root unpacks it into its partition.

use super::rooted::{peers, relay, zero_k};
use super::scatterv::BAD_CONFIG;
use super::varcount::{
    auto_family, bytes, chain, checked, fits, judge_rooted, mpi_bytes, mpi_count, partition_len,
    partition_words, range, scratch, Claim, Family, Moves, Packed, Parts, Published, Side, Words,
};
use super::{op, Ctx, Kind};
use crate::coll::gather::GatherAlgorithm;
use crate::error::Result;
use crate::hier::Hierarchy;
use crate::sync::{Call, Round};
use crate::to_mpi::{self, Spot};
use crate::transport::TransportKind;
use crate::tune::select;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use std::ops::Range;

/// What this rank asks for, before the arrive phase: `Auto` becomes what
/// `ZCOLL_GATHERV_ALGORITHM` names (if set), and everything is `Staged` on `cico`.
fn requested(
    a: GatherAlgorithm,
    transport: TransportKind,
    env: &super::Overrides,
) -> Result<GatherAlgorithm> {
    let a = match a {
        GatherAlgorithm::Auto => env.choice("ZCOLL_GATHERV_ALGORITHM")?.unwrap_or(GatherAlgorithm::Auto),
        GatherAlgorithm::ThrottledWrite { k: 0 } => return Err(zero_k("GatherAlgorithm::ThrottledWrite")),
        a => a,
    };
    Ok(if transport == TransportKind::Cico { GatherAlgorithm::Staged } else { a })
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

/// Gathers inside the node to local rank `dst`. `root` is the root as the user gave it
/// (published for the checks); `elem` the element size.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn gatherv(
    ctx: &Ctx<'_>,
    bufs: GathervBufs<'_>,
    root: i32,
    dst: usize,
    elem: usize,
    algorithm: GatherAlgorithm,
) -> Result<()> {
    let p = ctx.ctl.size();
    let algorithm = requested(algorithm, ctx.transport, ctx.overrides);
    let (code, k) = match algorithm {
        // `Auto` decides from the published counts: ranks must share the parameters.
        Ok(GatherAlgorithm::Auto) => (0, select::fingerprint()),
        Ok(a) => a.code(),
        Err(_) => (BAD_CONFIG, 0),
    };
    let mut meta = Vec::new();
    let (is_root, send, recv, recv_len) = match &bufs {
        GathervBufs::Root { send, recv, counts, displs } => {
            partition_words(&mut meta, p, counts, displs);
            (true, *send, recv.as_ptr() as usize, recv.len())
        }
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
        aux2: Claim { root: is_root, elem, block: send.len(), whole: recv_len }.aux2(),
    };
    let fit = fits(ctx, partition_len(p));
    let round = checked(ctx, call, fit.then_some(&meta[..]), true, |r| {
        let parts = Published { round: r, owner: dst, at: 0 };
        let claim = |q| Claim::from_call(&r.call(q), |c| (c.send_len, c.recv_len));
        judge_rooted(r.size(), dst, claim, &parts, Side::Recv)
            .map_err(|(q, f)| f.error(r.rank_of(r.me()), r.rank_of(q), r.size()))
    })?;
    let (blocks, moves) = match algorithm {
        Ok(a) => {
            let parts = Published { round: &round, owner: dst, at: 0 };
            let elem = Claim::from_call(&round.call(dst), |_| (0, 0)).elem;
            let blocks: Vec<Range<usize>> = (0..p).map(|r| range(&parts, r, elem)).collect();
            let moves = Moves::new(family(a, &blocks, dst), p, dst, |r| blocks[r].clone());
            (blocks, moves)
        }
        Err(e) => return round.finish(Err(e)),
    };
    // Everything this rank needs from the root's area is in `blocks` and `moves` now.
    round.release_meta();
    match bufs {
        GathervBufs::Root { send, recv, .. } => {
            let moved = collect(&round, dst, &blocks, &moves, recv);
            let outcome = round.finish(moved);
            // Our own block last: peers may write into `recv` until the round is over.
            if outcome.is_ok() {
                recv[blocks[dst].clone()].copy_from_slice(send);
            }
            outcome
        }
        GathervBufs::Leaf { send } => {
            let moved = contribute(&round, dst, &blocks, &moves, send);
            round.finish(moved)
        }
    }
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
        for r in peers(dst, round.size()).filter(|&r| !blocks[r].is_empty()) {
            round.read_send(r, 0, &mut recv[blocks[r].clone()])?;
        }
    }
    if moves.staging() {
        round.reclaim_meta()?;
        round.stage_gather(dst, &moves.staged, &[], recv)?;
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
        return round.stage_gather(dst, &moves.staged, send, &mut []);
    }
    chain(round, &moves.direct, moves.k, || round.write_recv(send, dst, blocks[me].start))
}

/// Gatherv across nodes: every node gathers to its leader, the leaders gather node parts
/// to the root's leader over MPI, which hands them to the root through the node; the root
/// unpacks them into its partition.
///
/// # Errors
///
/// The checks' errors (the same on every rank), then any rank's failure, on every rank.
pub(crate) fn gatherv_hier(
    hier: &Hierarchy,
    parent: &SimpleCommunicator,
    ctx: &Ctx<'_>,
    bufs: GathervBufs<'_>,
    root: i32,
    elem: usize,
    algorithm: GatherAlgorithm,
) -> Result<()> {
    let p = parent.size() as usize;
    let me = parent.rank();
    hier.check(parent, Kind::Gatherv, root, 0)?;
    let (send, root_recv) = match bufs {
        GathervBufs::Root { send, recv, counts, displs } => (send, Some((recv, counts, displs))),
        GathervBufs::Leaf { send } => (send, None),
    };
    let whole = root_recv.as_ref().map_or(0, |r| r.0.len());
    let mine = [root_recv.is_some() as i64, elem as i64, send.len() as i64, whole as i64];
    let mut all = vec![0i64; 4 * p];
    parent.all_gather_into(&mine[..], &mut all[..]);
    let claim = |q: usize| Claim {
        root: all[4 * q] == 1,
        elem: all[4 * q + 1] as usize,
        block: all[4 * q + 2] as usize,
        whole: all[4 * q + 3] as usize,
    };
    let mut words = vec![0u64; partition_len(p)];
    if let Some((_, counts, displs)) = &root_recv {
        words.clear();
        partition_words(&mut words, p, counts, displs);
    }
    parent.process_at_rank(root).broadcast_into(&mut words[..]);
    let parts = Words(&words);
    judge_rooted(p, root as usize, claim, &parts, Side::Recv).map_err(|(q, f)| f.error(me, q as i32, p))?;
    let elem_root = claim(root as usize).elem;
    let len: Vec<usize> = (0..p).map(|r| bytes(parts.block(r).0, elem_root)).collect();
    let total: usize = len.iter().sum();
    mpi_count(total, me)?;
    // One rank per node: MPI's own, on the root's partition in bytes (every rank has it),
    // once every rank could read its algorithm (a bad variable fails the call everywhere).
    if let (true, Some((counts, displs))) = (hier.direct(), mpi_bytes(&parts, p, elem_root)) {
        hier.agree(parent, requested(algorithm, ctx.transport, ctx.overrides).map(drop))?;
        let send = to_mpi::send(send);
        let at = parent.process_at_rank(root);
        match root_recv {
            Some((recv, _, _)) => {
                let mut spot = Spot::new();
                let recv = to_mpi::recv(recv, &mut spot);
                at.gather_varcount_into_root(send, &mut PartitionMut::new(recv, counts, displs))
            }
            None => at.gather_varcount_into(send),
        }
        return Ok(());
    }
    let layout = Packed::new(len, |r| hier.node_of(r as i32), hier.nodes());
    let (root_node, root_local) = (hier.node_of(root), hier.local_of(root));
    let node = hier.my_node();
    let here = node == root_node;
    let leader = ctx.ctl.me() == 0;

    // 1. Every node gathers to its leader, in bytes, into the node's part.
    let n = layout.counts[node] as usize;
    let mut part = if leader { scratch(n) } else { Vec::new() };
    let mut result = {
        let size = ctx.ctl.size();
        let ranks: Vec<usize> = (0..size).map(|l| ctx.ctl.rank_of(l) as usize).collect();
        let counts: Vec<Count> = ranks.iter().map(|&r| layout.len[r] as Count).collect();
        let displs: Vec<Count> = ranks.iter().map(|&r| layout.in_node(r, node).start as Count).collect();
        let node_bufs = if leader {
            GathervBufs::Root { send, recv: &mut part[..n], counts: &counts, displs: &displs }
        } else {
            GathervBufs::Leaf { send }
        };
        gatherv(ctx, node_bufs, root, 0, 1, algorithm)
    };

    // 2. The root's leader gets every node's part, packed.
    let mut full = Vec::new();
    if let Some(leaders) = hier.leaders() {
        let to = leaders.process_at_rank(root_node as i32);
        if total == 0 {
            // Nothing to send anywhere.
        } else if here {
            full = scratch(total);
            let mut parts =
                mpi::datatype::PartitionMut::new(&mut full[..total], &layout.counts[..], &layout.displs[..]);
            to.gather_varcount_into_root(to_mpi::send(&part[..n]), &mut parts);
        } else {
            to.gather_varcount_into(to_mpi::send(&part[..n]));
        }
    }

    // 3. To the root, through the node if it is not the leader, and into its partition.
    if here && root_local != 0 {
        let mut into = if root_recv.is_some() { scratch(total) } else { Vec::new() };
        let from: &[u8] = if leader { &full[..total] } else { &[] };
        let m = if root_recv.is_some() { total } else { 0 };
        result = result.and(relay(ctx, Kind::Gatherv, root, 0, root_local, from, &mut into[..m]));
        full = into;
    }
    if let (Some((recv, _, _)), Ok(())) = (root_recv, &result) {
        for r in 0..p {
            recv[range(&parts, r, elem_root)].copy_from_slice(&full[layout.block(r)]);
        }
    }
    hier.agree(parent, result)
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
