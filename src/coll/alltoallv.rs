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
//! Across nodes ([`alltoallv_hier`]): every rank packs its blocks by destination node, the
//! leaders gather them, exchange node-to-node parts with rsmpi's
//! `all_to_all_varcount_into`, and scatter to every rank its incoming blocks, which it
//! unpacks into its partition. That costs a scratch copy of the outgoing and of the
//! incoming blocks at every rank, and four at the leaders.

use super::allgather::{gather_to_leader, Nodes};
use super::gatherv::{gatherv, GathervBufs};
use super::scatterv::{scatterv, ScattervBufs, BAD_CONFIG};
use super::varcount::{
    agree_faults, alltoallv_cross, alltoallv_local, auto_stages, bytes, checked, first_fault, fits,
    mpi_bytes, mpi_count, partition_len, partition_words, range, scratch, Given, Parts, Published,
    ALLTOALLV_STAGED_MAX,
};
use super::{op, Ctx, Kind};
use crate::coll::gather::GatherAlgorithm;
use crate::coll::scatter::ScatterAlgorithm;
use crate::error::{Error, Result};
use crate::hier::Hierarchy;
use crate::sync::{Call, Round};
use crate::to_mpi::{self, Spot};
use crate::transport::TransportKind;
use crate::tune::select;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
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

impl AlltoallvAlgorithm {
    /// Every algorithm that moves data (all but `Auto`).
    pub const ALL: [AlltoallvAlgorithm; 3] =
        [AlltoallvAlgorithm::Pairwise, AlltoallvAlgorithm::PairwiseWrite, AlltoallvAlgorithm::Staged];

    fn code(self) -> u8 {
        super::algorithm::code(self)
    }

    /// What this rank asks for, before the arrive phase: `Auto` becomes what
    /// `ZCOLL_ALLTOALLV_ALGORITHM` names (if set), and everything is `Staged` on `cico`.
    fn requested(self, transport: TransportKind, env: &super::Overrides) -> Result<AlltoallvAlgorithm> {
        let a = match self {
            AlltoallvAlgorithm::Auto => {
                env.choice("ZCOLL_ALLTOALLV_ALGORITHM")?.unwrap_or(AlltoallvAlgorithm::Auto)
            }
            a => a,
        };
        Ok(if transport == TransportKind::Cico { AlltoallvAlgorithm::Staged } else { a })
    }
}

super::algorithm::vocabulary! {
AlltoallvAlgorithm: "auto, pairwise, pairwise-write or staged",
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
    fn send(&self) -> Given<'_> {
        Given { counts: self.send_counts, displs: self.send_displs }
    }

    fn recv(&self) -> Given<'_> {
        Given { counts: self.recv_counts, displs: self.recv_displs }
    }
}

/// The element size a call published.
fn elem_of(c: &Call) -> usize {
    c.aux2 as usize
}

/// Alltoallv among the ranks of the node, the partitions with one entry per local rank.
///
/// # Errors
///
/// On every rank of the node: the checks' errors (see [`varcount`](super::varcount)),
/// `Mismatch` if the algorithms differ; a transport error or a peer's failure.
pub(crate) fn alltoallv(
    ctx: &Ctx<'_>,
    send: &[u8],
    recv: &mut [u8],
    sides: Sides<'_>,
    elem: usize,
    algorithm: AlltoallvAlgorithm,
) -> Result<()> {
    let p = ctx.ctl.size();
    let algorithm = algorithm.requested(ctx.transport, ctx.overrides);
    let code = algorithm.as_ref().map_or(BAD_CONFIG, |a| a.code());
    let mut meta = Vec::new();
    partition_words(&mut meta, p, sides.send_counts, sides.send_displs);
    partition_words(&mut meta, p, sides.recv_counts, sides.recv_displs);
    let call = Call {
        // `Auto` decides after the checks, from the counts and the profile: publish the
        // profile's fingerprint so that ranks with different profiles fail the check.
        op: op(
            Kind::Alltoallv,
            code,
            if algorithm == Ok(AlltoallvAlgorithm::Auto) { select::fingerprint() } else { 0 },
        ),
        root: 0,
        send: send.as_ptr() as usize,
        send_len: send.len(),
        recv: recv.as_mut_ptr() as usize,
        recv_len: recv.len(),
        // Only the pairwise writers let peers write into the receive buffers.
        recv_writable: algorithm == Ok(AlltoallvAlgorithm::PairwiseWrite),
        aux: 0,
        aux2: elem as u64,
    };
    let fit = fits(ctx, 2 * partition_len(p));
    let round = checked(ctx, call, fit.then_some(&meta[..]), false, |r| {
        let sends = |q| Published { round: r, owner: q, at: 0 };
        let recvs = |q| Published { round: r, owner: q, at: partition_len(p) };
        let elem = |q| elem_of(&r.call(q));
        let lens = |q| (r.call(q).send_len, r.call(q).recv_len);
        first_fault(
            p,
            |q| alltoallv_local(p, q, &sends(q), &recvs(q), elem(q), lens(q)),
            |dst| alltoallv_cross(p, &recvs(dst), elem(dst), |q| bytes(sends(q).block(dst).0, elem(q))),
        )
        .map_err(|(q, f)| f.error(r.rank_of(r.me()), r.rank_of(q), p))
    })?;
    let moved = algorithm.and_then(|a| exchange(&round, a, send, recv, sides, elem));
    round.finish(moved)
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
    let sends = |q| Published { round, owner: q, at: 0 };
    // Everything needed from the peers' areas, read before they may reuse them: the bytes of
    // every pair (for the staged schedule), and where this rank's blocks sit in the peers'
    // buffers.
    let staging = matches!(algorithm, AlltoallvAlgorithm::Staged | AlltoallvAlgorithm::Auto);
    let pairs: Vec<usize> = match staging {
        true => (0..p * p).map(|i| bytes(sends(i / p).block(i % p).0, elem_of(&round.call(i / p)))).collect(),
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
    // Where this rank's block sits in every peer's partition published from word `at`.
    let peer_offsets = |at: usize| -> Vec<usize> {
        (0..p).map(|q| range(&Published { round, owner: q, at }, me, elem_of(&round.call(q))).start).collect()
    };
    let (from, to) = match algorithm {
        AlltoallvAlgorithm::PairwiseWrite => (Vec::new(), peer_offsets(partition_len(p))),
        AlltoallvAlgorithm::Staged => (Vec::new(), Vec::new()),
        _ => (peer_offsets(0), Vec::new()),
    };
    round.release_meta();
    recv[inn(me)].copy_from_slice(&send[out(me)]);
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

/// Alltoallv across nodes: every rank packs its blocks by destination node, the leaders
/// gather them, exchange node-to-node parts over MPI, and scatter to every rank its
/// incoming blocks, which it unpacks.
///
/// # Errors
///
/// The checks' errors (the same on every rank), `Mismatch` if the algorithms differ,
/// `Unsupported` beyond 2 GiB at a leader; then any rank's failure, on every rank.
#[allow(clippy::too_many_arguments)] // the two levels, the buffers, their partitions, the algorithm
pub(crate) fn alltoallv_hier(
    hier: &Hierarchy,
    parent: &SimpleCommunicator,
    ctx: &Ctx<'_>,
    send: &[u8],
    recv: &mut [u8],
    sides: Sides<'_>,
    elem: usize,
    algorithm: AlltoallvAlgorithm,
) -> Result<()> {
    let p = parent.size() as usize;
    let me = parent.rank();
    hier.check(parent, Kind::Alltoallv, 0, 0)?;
    // Every rank judges its own numbers, and, as a receiver, what the others send it.
    let (mine_s, mine_r) = (sides.send(), sides.recv());
    let local = alltoallv_local(p, me as usize, &mine_s, &mine_r, elem, (send.len(), recv.len()));
    let row: Vec<u64> =
        (0..p).map(|r| if local.is_none() { bytes(sides.send_counts[r], elem) as u64 } else { 0 }).collect();
    let mut col = vec![0u64; p];
    parent.all_to_all_into(&row[..], &mut col[..]);
    let cross = match local {
        None => alltoallv_cross(p, &mine_r, elem, |q| col[q] as usize),
        Some(_) => None,
    };
    agree_faults(parent, local, cross)?;
    let word =
        algorithm.requested(ctx.transport, ctx.overrides).map_or(BAD_CONFIG as u64, |a| a.code() as u64);
    let (out_total, in_total): (u64, u64) = (row.iter().sum(), col.iter().sum());
    // Both partitions in bytes, for MPI's own when every node holds one rank.
    let direct = match (mpi_bytes(&mine_s, p, elem), mpi_bytes(&mine_r, p, elem)) {
        (Some(s), Some(r)) if hier.direct() => Some((s, r)),
        _ => None,
    };
    const W: usize = 4;
    let mut all = vec![0u64; W * p];
    parent.all_gather_into(&[word, out_total, in_total, direct.is_some() as u64][..], &mut all[..]);
    if let Some(c) = (0..p).find(|&c| all[W * c] != all[0]) {
        return Err(Error::Mismatch { rank: me, culprit: c as i32, what: "algorithm" });
    }
    algorithm.requested(ctx.transport, ctx.overrides)?;
    if let (Some(((sc, sd), (rc, rd))), true) = (direct, (0..p).all(|c| all[W * c + 3] == 1)) {
        let mut spot = Spot::new();
        let (send, recv) = (to_mpi::send(send), to_mpi::recv(recv, &mut spot));
        parent.all_to_all_varcount_into(&Partition::new(send, sc, sd), &mut PartitionMut::new(recv, rc, rd));
        return Ok(());
    }
    let nodes = Nodes::of(hier, p);
    for m in &nodes.members {
        mpi_count(m.iter().map(|&r| all[W * r + 1].max(all[W * r + 2]) as usize).sum(), me)?;
    }
    let k = ctx.ctl.size();
    let leader = ctx.ctl.me() == 0;
    let local_ranks: Vec<usize> = (0..k).map(|l| ctx.ctl.rank_of(l) as usize).collect();
    let node_major = || nodes.members.iter().flatten().copied();

    // 1. Every rank packs its blocks by destination, node by node; the leader learns every
    // local rank's row (bytes to each rank) and column (bytes from each rank).
    let mut out = scratch(out_total as usize);
    let mut at = 0;
    for r in node_major() {
        let block = range(&mine_s, r, elem);
        out[at..at + block.len()].copy_from_slice(&send[block.clone()]);
        at += block.len();
    }
    let mut mine = Vec::with_capacity(16 * p);
    for v in row.iter().chain(&col) {
        mine.extend_from_slice(&v.to_le_bytes());
    }
    let mut tables = vec![0u8; if leader { k * 16 * p } else { 0 }];
    let mut result = gather_to_leader(ctx, Kind::Alltoallv, &mine, &mut tables);
    let word_at = |l: usize, i: usize| {
        let w = &tables[l * 16 * p + 8 * i..][..8];
        u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize
    };
    let (row_of, col_of) = (|l: usize, r: usize| word_at(l, r), |l: usize, q: usize| word_at(l, p + q));

    // 2. The leader gathers the packed blocks: local rank a's at part[a].
    let outs: Vec<usize> = local_ranks.iter().map(|&r| all[W * r + 1] as usize).collect();
    let ins: Vec<usize> = local_ranks.iter().map(|&r| all[W * r + 2] as usize).collect();
    let prefix =
        |v: &[usize]| v.iter().scan(0, |s, &c| Some(std::mem::replace(s, *s + c))).collect::<Vec<usize>>();
    let (out_at, in_at) = (prefix(&outs), prefix(&ins));
    let node_out: usize = outs.iter().sum();
    let node_in: usize = ins.iter().sum();
    let mut part = if leader { scratch(node_out) } else { Vec::new() };
    result = result.and({
        let counts: Vec<Count> = outs.iter().map(|&c| c as Count).collect();
        let displs: Vec<Count> = out_at.iter().map(|&c| c as Count).collect();
        let bufs = match leader {
            true => GathervBufs::Root {
                send: &out[..out_total as usize],
                recv: &mut part[..node_out],
                counts: &counts,
                displs: &displs,
            },
            false => GathervBufs::Leaf { send: &out[..out_total as usize] },
        };
        gatherv(ctx, bufs, 0, 0, 1, GatherAlgorithm::Auto)
    });

    // 3. The leaders exchange node-to-node parts: to node B, for each local a, a's blocks
    // for B's ranks; from node B, for each of its ranks, its blocks for our ranks.
    let mut spread = Vec::new();
    if let Some(leaders) = hier.leaders() {
        let nb = nodes.members.len();
        // At least one byte of capacity: MPI refuses some dangling addresses.
        let mut packed = Vec::with_capacity(node_out.max(1));
        let mut send_counts = vec![0 as Count; nb];
        let mut cursor = out_at.clone();
        for (b, m) in nodes.members.iter().enumerate() {
            for a in 0..k {
                let n: usize = m.iter().map(|&r| row_of(a, r)).sum();
                packed.extend_from_slice(&part[cursor[a]..cursor[a] + n]);
                cursor[a] += n;
                send_counts[b] += n as Count;
            }
        }
        let recv_counts: Vec<Count> = nodes
            .members
            .iter()
            .map(|m| m.iter().map(|&q| (0..k).map(|b| col_of(b, q)).sum::<usize>() as Count).sum())
            .collect();
        let displs = |c: &[Count]| {
            c.iter().scan(0, |s, &x| Some(std::mem::replace(s, *s + x))).collect::<Vec<Count>>()
        };
        let (sd, rd) = (displs(&send_counts), displs(&recv_counts));
        let mut incoming = scratch(node_in);
        let mut spot = Spot::new();
        leaders.all_to_all_varcount_into(
            &Partition::new(to_mpi::send(&packed[..]), &send_counts[..], &sd[..]),
            &mut PartitionMut::new(
                to_mpi::recv(&mut incoming[..node_in], &mut spot),
                &recv_counts[..],
                &rd[..],
            ),
        );
        // For each local b, its incoming blocks in node-major source order.
        spread = scratch(node_in);
        let mut cursor = in_at.clone();
        let mut from = 0;
        for q in node_major() {
            for b in 0..k {
                let n = col_of(b, q);
                spread[cursor[b]..cursor[b] + n].copy_from_slice(&incoming[from..from + n]);
                cursor[b] += n;
                from += n;
            }
        }
    }

    // 4. The leader scatters every rank's incoming blocks; every rank unpacks them.
    let mut inn = scratch(in_total as usize);
    result = result.and({
        let counts: Vec<Count> = ins.iter().map(|&c| c as Count).collect();
        let displs: Vec<Count> = in_at.iter().map(|&c| c as Count).collect();
        let bufs = match leader {
            true => ScattervBufs::Root {
                send: &spread[..node_in],
                counts: &counts,
                displs: &displs,
                recv: &mut inn[..in_total as usize],
            },
            false => ScattervBufs::Leaf { recv: &mut inn[..in_total as usize] },
        };
        scatterv(ctx, bufs, 0, 0, 1, ScatterAlgorithm::Auto)
    });
    if result.is_ok() {
        let mut at = 0;
        for q in node_major() {
            let block = range(&mine_r, q, elem);
            let n = block.len();
            recv[block].copy_from_slice(&inn[at..at + n]);
            at += n;
        }
    }
    hier.agree(parent, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_cico_stages() {
        for a in std::iter::once(AlltoallvAlgorithm::Auto).chain(AlltoallvAlgorithm::ALL) {
            assert_eq!(a.to_string().parse(), Ok(a));
            assert_eq!(
                a.requested(TransportKind::Cico, &crate::coll::Overrides::default()),
                Ok(AlltoallvAlgorithm::Staged)
            );
        }
        assert_eq!("bruck".parse::<AlltoallvAlgorithm>(), Err(()));
    }
}
