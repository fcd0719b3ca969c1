//! The variable-count collectives across nodes: the counts checked across the whole
//! communicator, then rsmpi's own call (one rank per node) or the node legs around the
//! leaders' exchange.

use super::{mpi_count, scratch, Hierarchy, Net, Nodes, Stand};
use crate::alloc::Scratch;
use crate::coll::algorithm::{claim_asked, readable, Algorithm};
use crate::coll::alltoallv::Sides;
use crate::coll::bcast::{bcast, BcastAlgorithm};
use crate::coll::gather::GatherAlgorithm;
use crate::coll::gatherv::GATHERV_VAR;
use crate::coll::gatherv::{gatherv, GathervBufs};
use crate::coll::legs::gather_to_leader;
use crate::coll::rooted::{relay, Rooted};
use crate::coll::scatter::ScatterAlgorithm;
use crate::coll::scatterv::{scatterv, ScattervBufs, SCATTERV_VAR};
use crate::coll::varcount::first_fault;
use crate::coll::varcount::{
    allgatherv_local, alltoallv_local, bytes, cross_fault, judge_rooted, mpi_bytes, partition_len,
    partition_words, range, Claim, Exchange, Fault, Given, Packed, Parts, Side, Words,
};
use crate::coll::{Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::to_mpi::{self, Spot};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
use mpi::Count;
impl Hierarchy {
    /// Scatterv across nodes: the root packs its blocks node by node and hands them to its
    /// leader, the leaders scatter node parts over MPI, every node scatters from its leader.
    ///
    /// # Errors
    ///
    /// The checks' errors (the same on every rank), then any rank's failure, on every rank.
    pub(crate) fn scatterv(&self, net: Net<'_>, call: Rooted<ScattervBufs<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Rooted { bufs, root, local: root_local, elem, algorithm } = call;
        let p = parent.size() as usize;
        let (root_send, recv) = match bufs {
            ScattervBufs::Root { send, counts, displs, recv } => (Some((send, counts, displs)), recv),
            ScattervBufs::Leaf { recv } => (None, recv),
        };
        let whole = root_send.map(|(send, counts, displs)| (send.len(), counts, displs));
        let RootedCounts { words, elem_root, len, total } = self.rooted_counts(
            net,
            (Kind::Scatterv, claim_asked(algorithm, SCATTERV_VAR, ctx.overrides)),
            root,
            elem,
            recv.len(),
            whole,
            Side::Send,
        )?;
        let parts = Words(&words);
        // One rank per node: MPI's own, on the root's partition in bytes (every rank has it),
        // once every rank could read its algorithm (a bad variable fails the call everywhere).
        if let (true, Some((counts, displs))) = (self.direct(), mpi_bytes(&parts, p, elem_root)) {
            // The checks compared what every rank's variable makes of `Auto`: its error, if
            // any, is every rank's.
            readable(algorithm, SCATTERV_VAR, ctx.overrides)?;
            let mut spot = Spot::new();
            let recv = to_mpi::recv(recv, &mut spot);
            let at = parent.process_at_rank(root);
            match root_send {
                Some((send, _, _)) => {
                    at.scatter_varcount_into_root(&Partition::new(to_mpi::send(send), counts, displs), recv)
                }
                None => at.scatter_varcount_into(recv),
            }
            return Ok(());
        }
        let layout = Packed::new(len, |r| self.node_of(r as i32), self.nodes());
        let node = self.my_node();
        let Stand { root_node, here, leader } = self.stand(ctx, root);
        let mut result = Ok(());

        // 1. The root packs its blocks node by node; its leader gets them.
        let mut full = Scratch::empty();
        if let Some((send, _, _)) = root_send {
            full = scratch(ctx, total);
            for r in 0..p {
                copy_block(&send[range(&parts, r, elem_root)], &mut full[layout.block(r)]);
            }
        }
        if here && root_local != 0 {
            let mut to = if leader { scratch(ctx, total) } else { Scratch::empty() };
            let from: &[u8] = if root_send.is_some() { &full[..total] } else { &[] };
            let n = if leader { total } else { 0 };
            result = relay(ctx, Kind::Scatterv, root, root_local, 0, from, &mut to[..n]);
            full = to;
        }

        // 2. Every leader gets its node's part.
        let mut part = Scratch::empty();
        if let Some(leaders) = self.leaders() {
            let n = layout.counts[node] as usize;
            part = scratch(ctx, n);
            let mut spot = Spot::new();
            let from = leaders.process_at_rank(root_node as i32);
            if total == 0 {
                // Nothing to send anywhere.
            } else if here {
                let sends =
                    mpi::datatype::Partition::new(&full[..total], &layout.counts[..], &layout.displs[..]);
                from.scatter_varcount_into_root(&sends, to_mpi::recv(&mut part[..n], &mut spot));
            } else {
                from.scatter_varcount_into(to_mpi::recv(&mut part[..n], &mut spot));
            }
        }

        // 3. Every node scatters from its leader, in bytes.
        let (counts, displs) = node_partition(ctx, &layout, node);
        let node_bufs = if leader {
            let n = layout.counts[node] as usize;
            ScattervBufs::Root { send: &part[..n], counts: &counts, displs: &displs, recv }
        } else {
            ScattervBufs::Leaf { recv }
        };
        result = result.and(scatterv(ctx, Rooted { bufs: node_bufs, root, local: 0, elem: 1, algorithm }));
        self.agree(parent, result)
    }

    /// Gatherv across nodes: every node gathers to its leader, the leaders gather node parts
    /// to the root's leader over MPI, which hands them to the root through the node; the root
    /// unpacks them into its partition.
    ///
    /// # Errors
    ///
    /// The checks' errors (the same on every rank), then any rank's failure, on every rank.
    pub(crate) fn gatherv(&self, net: Net<'_>, call: Rooted<GathervBufs<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Rooted { bufs, root, local: root_local, elem, algorithm } = call;
        let p = parent.size() as usize;
        let (send, root_recv) = match bufs {
            GathervBufs::Root { send, recv, counts, displs } => (send, Some((recv, counts, displs))),
            GathervBufs::Leaf { send } => (send, None),
        };
        let whole = root_recv.as_ref().map(|(recv, counts, displs)| (recv.len(), *counts, *displs));
        let RootedCounts { words, elem_root, len, total } = self.rooted_counts(
            net,
            (Kind::Gatherv, claim_asked(algorithm, GATHERV_VAR, ctx.overrides)),
            root,
            elem,
            send.len(),
            whole,
            Side::Recv,
        )?;
        let parts = Words(&words);
        // One rank per node: MPI's own, on the root's partition in bytes (every rank has it),
        // once every rank could read its algorithm (a bad variable fails the call everywhere).
        if let (true, Some((counts, displs))) = (self.direct(), mpi_bytes(&parts, p, elem_root)) {
            // As the scatterv's: the variable's error, if any, is every rank's.
            readable(algorithm, GATHERV_VAR, ctx.overrides)?;
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
        let layout = Packed::new(len, |r| self.node_of(r as i32), self.nodes());
        let node = self.my_node();
        let Stand { root_node, here, leader } = self.stand(ctx, root);

        // 1. Every node gathers to its leader, in bytes, into the node's part.
        let n = layout.counts[node] as usize;
        let (part, mut result) = gather_part(ctx, &layout, node, send, root, algorithm);

        // 2. The root's leader gets every node's part, packed.
        let mut full = Scratch::empty();
        if let Some(leaders) = self.leaders() {
            let to = leaders.process_at_rank(root_node as i32);
            if total == 0 {
                // Nothing to send anywhere.
            } else if here {
                full = scratch(ctx, total);
                let mut parts = mpi::datatype::PartitionMut::new(
                    &mut full[..total],
                    &layout.counts[..],
                    &layout.displs[..],
                );
                to.gather_varcount_into_root(to_mpi::send(&part[..n]), &mut parts);
            } else {
                to.gather_varcount_into(to_mpi::send(&part[..n]));
            }
        }

        // 3. To the root, through the node if it is not the leader, and into its partition.
        if here && root_local != 0 {
            let mut into = if root_recv.is_some() { scratch(ctx, total) } else { Scratch::empty() };
            let from: &[u8] = if leader { &full[..total] } else { &[] };
            let m = if root_recv.is_some() { total } else { 0 };
            result = result.and(relay(ctx, Kind::Gatherv, root, 0, root_local, from, &mut into[..m]));
            full = into;
        }
        if let (Some((recv, _, _)), Ok(())) = (root_recv, &result) {
            for r in 0..p {
                copy_block(&full[layout.block(r)], &mut recv[range(&parts, r, elem_root)]);
            }
        }
        self.agree(parent, result)
    }

    /// Allgatherv across nodes: every node gathers its blocks at its leader, the leaders
    /// exchange node parts over MPI, every leader broadcasts the packed blocks in its node,
    /// and every rank unpacks them.
    ///
    /// # Errors
    ///
    /// The checks' errors (the same on every rank), `Mismatch` if the algorithms differ,
    /// `Unsupported` beyond 2 GiB in all; then any rank's failure, on every rank.
    pub(crate) fn allgatherv(&self, net: Net<'_>, call: Exchange<'_, Given<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Exchange { send, recv, parts: Given { counts, displs }, elem, algorithm } = call;
        let p = parent.size() as usize;
        let me = parent.rank();
        self.check(net, Kind::Allgatherv, 0, 0, algorithm.claim(ctx.overrides))?;
        // Every rank's send length; then every rank judges its own numbers, and the verdicts
        // are gathered. (The checks compared what every rank asks for; what a node then runs
        // depends on its transport, which may differ from node to node.)
        let mut lens = vec![0u64; p];
        parent.all_gather_into(&(send.len() as u64), &mut lens[..]);
        let send_len = |r: usize| lens[r] as usize;
        let mine = Given { counts, displs };
        let q = me as usize;
        let local = allgatherv_local(p, q, &mine, elem, recv.len(), send.len());
        let cross = if local.is_none() { cross_fault(p, &mine, elem, send_len) } else { None };
        agree_faults(parent, local, cross, &[])?;
        algorithm.readable(ctx.overrides)?;
        let total: usize = (0..p).map(send_len).sum();
        mpi_count(total, me)?;
        // One rank per node: MPI's own, on the partition in bytes (the same on every rank).
        if let (true, Some((counts, displs))) = (self.direct(), mpi_bytes(&mine, p, elem)) {
            let mut spot = Spot::new();
            let recv = to_mpi::recv(recv, &mut spot);
            parent.all_gather_varcount_into(to_mpi::send(send), &mut PartitionMut::new(recv, counts, displs));
            return Ok(());
        }
        let layout = Packed::new((0..p).map(send_len).collect(), |r| self.node_of(r as i32), self.nodes());
        let node = self.my_node();

        // 1. Every node gathers its blocks at its leader, in bytes.
        let n = layout.counts[node] as usize;
        let (part, mut result) = gather_part(ctx, &layout, node, send, 0, GatherAlgorithm::Auto);

        // 2. The leaders exchange node parts; 3. every leader broadcasts them in its node.
        let mut full = scratch(ctx, total);
        if let Some(leaders) = self.leaders() {
            if total > 0 {
                let mut parts = mpi::datatype::PartitionMut::new(
                    &mut full[..total],
                    &layout.counts[..],
                    &layout.displs[..],
                );
                leaders.all_gather_varcount_into(to_mpi::send(&part[..n]), &mut parts);
            }
        }
        result =
            result.and(bcast(ctx, &mut full[..total], ctx.ctl.rank_of(0), 0, BcastAlgorithm::Auto, None));

        // 4. Every rank unpacks into its partition.
        if result.is_ok() {
            for r in 0..p {
                copy_block(&full[layout.block(r)], &mut recv[range(&mine, r, elem)]);
            }
        }
        self.agree(parent, result)
    }

    /// Alltoallv across nodes: every rank packs its blocks by destination node, the leaders
    /// gather them, exchange node-to-node parts over MPI, and scatter to every rank its
    /// incoming blocks, which it unpacks.
    ///
    /// # Errors
    ///
    /// The checks' errors (the same on every rank), `Mismatch` if the algorithms differ,
    /// `Unsupported` beyond 2 GiB at a leader; then any rank's failure, on every rank.
    pub(crate) fn alltoallv(&self, net: Net<'_>, call: Exchange<'_, Sides<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Exchange { send, recv, parts: sides, elem, algorithm } = call;
        let p = parent.size() as usize;
        let me = parent.rank();
        self.check(net, Kind::Alltoallv, 0, 0, algorithm.claim(ctx.overrides))?;
        // Every rank judges its own numbers, and, as a receiver, what the others send it.
        let (mine_s, mine_r) = (sides.send(), sides.recv());
        let local = alltoallv_local(p, me as usize, &mine_s, &mine_r, elem, (send.len(), recv.len()));
        let row: Vec<u64> = (0..p)
            .map(|r| if local.is_none() { bytes(sides.send_counts[r], elem) as u64 } else { 0 })
            .collect();
        let mut col = vec![0u64; p];
        parent.all_to_all_into(&row[..], &mut col[..]);
        let cross = match local {
            None => cross_fault(p, &mine_r, elem, |q| col[q] as usize),
            Some(_) => None,
        };
        let (out_total, in_total): (u64, u64) = (row.iter().sum(), col.iter().sum());
        // Both partitions in bytes, for MPI's own when every node holds one rank (where
        // this rank's partitions passed their own checks; a call that fails them goes no
        // further).
        let direct = match self.direct() && local.is_none() {
            true => mpi_bytes(&mine_s, p, elem).zip(mpi_bytes(&mine_r, p, elem)),
            false => None,
        };
        // These words travel with the verdict, in its allgather. (The checks compared what
        // every rank asks for; what a node then runs depends on its transport, which may
        // differ from node to node.)
        const W: usize = 3;
        let extra = [out_total, in_total, direct.is_some() as u64].map(|v| v as i64);
        let all: Vec<u64> =
            agree_faults(parent, local, cross, &extra)?.into_iter().map(|v| v as u64).collect();
        algorithm.readable(ctx.overrides)?;
        if let (Some(((sc, sd), (rc, rd))), true) = (direct, (0..p).all(|c| all[W * c + 2] == 1)) {
            let mut spot = Spot::new();
            let (send, recv) = (to_mpi::send(send), to_mpi::recv(recv, &mut spot));
            parent.all_to_all_varcount_into(
                &Partition::new(send, sc, sd),
                &mut PartitionMut::new(recv, rc, rd),
            );
            return Ok(());
        }
        let nodes = Nodes::of(self, p);
        for m in &nodes.members {
            mpi_count(m.iter().map(|&r| all[W * r].max(all[W * r + 1]) as usize).sum(), me)?;
        }
        let k = ctx.ctl.size();
        let leader = ctx.ctl.me() == 0;
        let local_ranks: Vec<usize> = (0..k).map(|l| ctx.ctl.rank_of(l) as usize).collect();
        let node_major = || nodes.members.iter().flatten().copied();

        // 1. Every rank packs its blocks by destination, node by node; the leader learns every
        // local rank's row (bytes to each rank) and column (bytes from each rank).
        let mut out = scratch(ctx, out_total as usize);
        let mut at = 0;
        for r in node_major() {
            let block = range(&mine_s, r, elem);
            copy_block(&send[block.clone()], &mut out[at..at + block.len()]);
            at += block.len();
        }
        // The leader reads it: in the shared heap where it maps it.
        let mut mine = Scratch::zeroed(16 * p, ctx.ctl.loads_heaps());
        for (w, v) in mine.chunks_exact_mut(8).zip(row.iter().chain(&col)) {
            w.copy_from_slice(&v.to_le_bytes());
        }
        let mut tables = Scratch::zeroed(if leader { k * 16 * p } else { 0 }, ctx.ctl.loads_heaps());
        let mut result = gather_to_leader(ctx, Kind::Alltoallv, &mine, &mut tables);
        let word_at = |l: usize, i: usize| {
            let w = &tables[l * 16 * p + 8 * i..][..8];
            u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize
        };
        let (row_of, col_of) = (|l: usize, r: usize| word_at(l, r), |l: usize, q: usize| word_at(l, p + q));

        // 2. The leader gathers the packed blocks: local rank a's at part[a].
        let outs: Vec<usize> = local_ranks.iter().map(|&r| all[W * r] as usize).collect();
        let ins: Vec<usize> = local_ranks.iter().map(|&r| all[W * r + 1] as usize).collect();
        let prefix = |v: &[usize]| {
            v.iter().scan(0, |s, &c| Some(std::mem::replace(s, *s + c))).collect::<Vec<usize>>()
        };
        let (out_at, in_at) = (prefix(&outs), prefix(&ins));
        let node_out: usize = outs.iter().sum();
        let node_in: usize = ins.iter().sum();
        let mut part = if leader { scratch(ctx, node_out) } else { Scratch::empty() };
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
            gatherv(ctx, Rooted { bufs, root: 0, local: 0, elem: 1, algorithm: GatherAlgorithm::Auto })
        });

        // 3. The leaders exchange node-to-node parts: to node B, for each local a, a's blocks
        // for B's ranks; from node B, for each of its ranks, its blocks for our ranks.
        let mut spread = Scratch::empty();
        if let Some(leaders) = self.leaders() {
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
            let mut incoming = scratch(ctx, node_in);
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
            spread = scratch(ctx, node_in);
            let mut cursor = in_at.clone();
            let mut from = 0;
            for q in node_major() {
                for b in 0..k {
                    let n = col_of(b, q);
                    copy_block(&incoming[from..from + n], &mut spread[cursor[b]..cursor[b] + n]);
                    cursor[b] += n;
                    from += n;
                }
            }
        }

        // 4. The leader scatters every rank's incoming blocks; every rank unpacks them.
        let mut inn = scratch(ctx, in_total as usize);
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
            scatterv(ctx, Rooted { bufs, root: 0, local: 0, elem: 1, algorithm: ScatterAlgorithm::Auto })
        });
        if result.is_ok() {
            let mut at = 0;
            for q in node_major() {
                let block = range(&mine_r, q, elem);
                let n = block.len();
                copy_block(&inn[at..at + n], &mut recv[block]);
                at += n;
            }
        }
        self.agree(parent, result)
    }
}
/// Every rank's `(local, cross)` faults gathered over MPI (four words each, as
/// [`Fault::encode`] makes them), judged as [`first_fault`] judges them, as the error
/// rank `me` reports. Every rank's `extra` words (as many on every rank) travel in the
/// same allgather: without a fault, they are returned, rank after rank.
pub(crate) fn agree_faults(
    parent: &mpi::topology::SimpleCommunicator,
    local: Option<Fault>,
    cross: Option<Fault>,
    extra: &[i64],
) -> Result<Vec<i64>> {
    let p = parent.size() as usize;
    let w = 8 + extra.len();
    let mut mine = Vec::with_capacity(w);
    mine.extend_from_slice(&Fault::encode(local));
    mine.extend_from_slice(&Fault::encode(cross));
    mine.extend_from_slice(extra);
    let mut all = vec![0i64; w * p];
    parent.all_gather_into(&mine[..], &mut all[..]);
    let at = |q: usize, half: usize| Fault::decode(&all[w * q + 4 * half..w * q + 4 * half + 4]);
    first_fault(p, |q| at(q, 0), |q| at(q, 1)).map_err(|(q, f)| f.error(parent.rank(), q as i32, p))?;
    Ok(all.chunks(w).flat_map(|c| c[8..].iter().copied()).collect())
}

/// What the checks of a variable-count rooted call leave for the moves: the root's
/// partition as words ([`Words`]), the root's element size, and every rank's block and
/// their sum, in bytes.
struct RootedCounts {
    words: Vec<u64>,
    elem_root: usize,
    len: Vec<usize>,
    total: usize,
}

impl Hierarchy {
    /// The node-level checks of a scatterv or gatherv (`kind`, whose caller asked for
    /// the algorithm `algo`), over the whole communicator: every rank's claim (its element
    /// size `elem`, its own block of `block` bytes and, on the root, the length of the
    /// partitioned buffer `whole` with its `counts` and `displs`) and the root's partition
    /// travel in one allreduce (the most of every word: each rank fills its own claim's
    /// words and the root the partition's, the others give 0 there), and every rank judges
    /// them alike, so the verdict is the same everywhere. With the checks before it, two
    /// collectives where an allgather and a broadcast made three.
    ///
    /// # Errors
    ///
    /// As [`judge_rooted`] judges, for rank `parent.rank()`; `Unsupported` past an MPI count.
    #[allow(clippy::too_many_arguments)] // the call, its root and one rank's claim
    fn rooted_counts(
        &self,
        net: Net<'_>,
        (kind, algo): (Kind, u64),
        root: i32,
        elem: usize,
        block: usize,
        whole: Option<(usize, &[Count], &[Count])>,
        side: Side,
    ) -> Result<RootedCounts> {
        let parent = net.parent;
        let p = parent.size() as usize;
        let me = parent.rank();
        self.check(net, kind, root, 0, algo)?;
        // The root's partition first (only the root's: a rank that called the root's method
        // in error gives zeros there, and its claim says what it did), then the claims.
        let at = partition_len(p);
        let mut mine = Vec::with_capacity(at + 4 * p);
        match whole {
            Some((_, counts, displs)) if me == root => partition_words(&mut mine, p, counts, displs),
            _ => mine.resize(at, 0),
        }
        mine.resize(at + 4 * p, 0);
        let slot = at + 4 * me as usize;
        mine[slot..slot + 4].copy_from_slice(&[
            whole.is_some() as u64,
            elem as u64,
            block as u64,
            whole.map_or(0, |w| w.0) as u64,
        ]);
        let mut all = vec![0u64; mine.len()];
        parent.all_reduce_into(&mine[..], &mut all[..], SystemOperation::max());
        let claim = |q: usize| Claim {
            root: all[at + 4 * q] == 1,
            in_place: false,
            elem: all[at + 4 * q + 1] as usize,
            block: all[at + 4 * q + 2] as usize,
            whole: all[at + 4 * q + 3] as usize,
        };
        let words = all[..at].to_vec();
        let parts = Words(&words);
        judge_rooted(p, root as usize, claim, &parts, side).map_err(|(q, f)| f.error(me, q as i32, p))?;
        let elem_root = claim(root as usize).elem;
        let len: Vec<usize> = (0..p).map(|r| bytes(parts.block(r).0, elem_root)).collect();
        let total: usize = len.iter().sum();
        mpi_count(total, me)?;
        Ok(RootedCounts { words, elem_root, len, total })
    }
}

/// The node's part of `layout` as the node-level collectives take it: for every local
/// rank, the length and the offset, in bytes, of its block inside node `node`'s part.
fn node_partition(ctx: &Ctx<'_>, layout: &Packed, node: usize) -> (Vec<Count>, Vec<Count>) {
    let ranks = (0..ctx.ctl.size()).map(|l| ctx.ctl.rank_of(l) as usize);
    ranks.map(|r| (layout.len[r] as Count, layout.in_node(r, node).start as Count)).unzip()
}

/// Every node gathers its ranks' `send` at its leader, in bytes, into the node's part of
/// `layout` (returned on the leader, empty elsewhere), with the node's gatherv rooted at
/// `root`.
fn gather_part(
    ctx: &Ctx<'_>,
    layout: &Packed,
    node: usize,
    send: &[u8],
    root: i32,
    algorithm: GatherAlgorithm,
) -> (Scratch<u8>, Result<()>) {
    let n = layout.counts[node] as usize;
    let leader = ctx.ctl.me() == 0;
    let mut part = if leader { scratch(ctx, n) } else { Scratch::empty() };
    let (counts, displs) = node_partition(ctx, layout, node);
    let bufs = match leader {
        true => GathervBufs::Root { send, recv: &mut part[..n], counts: &counts, displs: &displs },
        false => GathervBufs::Leaf { send },
    };
    let result = gatherv(ctx, Rooted { bufs, root, local: 0, elem: 1, algorithm });
    (part, result)
}
