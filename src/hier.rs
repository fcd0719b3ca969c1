//! Two-level compositions for communicators that span several nodes: the intra-node legs
//! go through the node's segment and transport, the inter-node legs through rsmpi among
//! the node leaders (local rank 0 of every node) or, for the multi-root allreduce, along
//! the column communicators (local rank `j` of every node).
//!
//! When every node holds a single rank ([`Hierarchy::direct`]) there is no intra-node leg
//! to gain from: the collectives check their arguments across the communicator as usual
//! and then call rsmpi's own collective on the whole communicator.

use crate::coll::{self, bcast::BcastAlgorithm, Ctx};
use crate::error::{Error, Result};
use crate::node::NodeComm;
use crate::op::Operator;
use crate::pod::Pod;
use crate::to_mpi::{self, Spot};
use mpi::collective::SystemOperation;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

/// Allreduces of fewer bytes than this take the leader path: their time is the latency of
/// the node rounds and of one MPI call, which the multi-root path does not shorten.
pub(crate) const MULTI_ROOT_MIN_BYTES: usize = 16 * 1024;

/// Where every rank of the communicator lives.
pub(crate) struct Hierarchy {
    /// The communicator of the node leaders, ordered by parent rank (on leaders only).
    leaders: Option<SimpleCommunicator>,
    /// This rank's column: the ranks with its local rank on every node that has one,
    /// ordered by parent rank. Column 0 holds the same ranks as `leaders`.
    column: SimpleCommunicator,
    /// The smallest node's size: the number of columns that reach every node.
    min_node_size: usize,
    /// For every rank of the parent: the index of its node (its leader's rank among the
    /// leaders).
    node_of: Vec<usize>,
    /// For every rank of the parent: its rank on its node.
    local_of: Vec<usize>,
    /// How many nodes.
    nodes: usize,
    /// This rank's node.
    my_node: usize,
}

impl Hierarchy {
    /// Learns the node of every rank, and splits `parent` into the leaders' communicator
    /// and the column communicators (one per local rank; column `j` holds local rank `j`
    /// of every node with more than `j` ranks). Collective over `parent`.
    pub(crate) fn new(parent: &SimpleCommunicator, node: &NodeComm) -> Hierarchy {
        let p = parent.size() as usize;
        let leader = node.ctl.rank_of(0);
        let mut leader_of = vec![0i32; p];
        parent.all_gather_into(&leader, &mut leader_of[..]);
        let mut leaders_sorted = leader_of.clone();
        leaders_sorted.sort_unstable();
        leaders_sorted.dedup();
        let node_of: Vec<usize> =
            leader_of.iter().map(|l| leaders_sorted.binary_search(l).expect("a leader is a rank")).collect();
        let mut seen = vec![0usize; leaders_sorted.len()];
        let local_of = node_of
            .iter()
            .map(|&n| {
                seen[n] += 1;
                seen[n] - 1
            })
            .collect();
        let is_leader = node.ctl.me() == 0;
        let color = if is_leader { Color::with_value(0) } else { Color::undefined() };
        let leaders = parent.split_by_color_with_key(color, parent.rank());
        let column = parent
            .split_by_color_with_key(Color::with_value(node.ctl.me() as i32), parent.rank())
            .expect("a split with a defined color returns a communicator");
        let my_node = node_of[parent.rank() as usize];
        let nodes = leaders_sorted.len();
        let min_node_size = seen.iter().copied().min().unwrap_or(1);
        Hierarchy { leaders, column, min_node_size, node_of, local_of, nodes, my_node }
    }

    /// Whether every node holds a single rank: the collectives then gain nothing from
    /// the node level, and call rsmpi's own on the whole communicator (after the same
    /// checks).
    pub(crate) fn direct(&self) -> bool {
        self.nodes == self.node_of.len()
    }

    /// The size of the smallest node: the multi-root allreduce's partition count.
    pub(crate) fn min_node_size(&self) -> usize {
        self.min_node_size
    }

    /// The number of nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// This rank's node.
    pub(crate) fn my_node(&self) -> usize {
        self.my_node
    }

    /// The local rank of parent rank `r` on its node, or 0 for a rank that does not exist
    /// (the checks then reject the call on every rank).
    pub(crate) fn local_of(&self, r: i32) -> usize {
        usize::try_from(r).ok().and_then(|r| self.local_of.get(r).copied()).unwrap_or(0)
    }

    /// The communicator of the node leaders (node `k`'s leader is its rank `k`), on the
    /// leaders only.
    pub(crate) fn leaders(&self) -> Option<&SimpleCommunicator> {
        self.leaders.as_ref()
    }

    /// The node of parent rank `r`, or 0 for a rank that does not exist.
    pub(crate) fn node_of(&self, r: i32) -> usize {
        usize::try_from(r).ok().and_then(|r| self.node_of.get(r).copied()).unwrap_or(0)
    }

    /// Checks across nodes that every rank calls `kind` with the same root and length;
    /// the node-local checks then run as usual.
    pub(crate) fn check(
        &self,
        parent: &SimpleCommunicator,
        kind: coll::Kind,
        root: i32,
        len: usize,
    ) -> Result<()> {
        self.check_tagged(parent, kind, root, len, 0, None)
    }

    /// [`check`](Self::check), that every rank passes the same `tag` (a reduction's
    /// operator and element type), and that every rank's output, where it has one
    /// (`recv`), is `len` bytes long: so that no node moves a byte when a rank of another
    /// node has a buffer of the wrong length.
    pub(crate) fn check_tagged(
        &self,
        parent: &SimpleCommunicator,
        kind: coll::Kind,
        root: i32,
        len: usize,
        tag: u64,
        recv: Option<usize>,
    ) -> Result<()> {
        const N: usize = 5;
        let short = recv.map_or(0, |r| r as i64 - len as i64);
        let mine = [kind as i64, root as i64, len as i64, tag as i64, short];
        let mut both = [0i64; 2 * N];
        for (i, &v) in mine.iter().enumerate() {
            both[2 * i] = v;
            both[2 * i + 1] = v.wrapping_neg();
        }
        let mut max = [0i64; 2 * N];
        parent.all_reduce_into(&both[..], &mut max[..], SystemOperation::max());
        if (0..N).all(|i| max[2 * i] == max[2 * i + 1].wrapping_neg()) && max[2 * 4] == 0 {
            let size = parent.size();
            return match root {
                r if (0..size).contains(&r) => Ok(()),
                _ => Err(Error::InvalidRoot { rank: parent.rank(), root, size }),
            };
        }
        // Someone disagrees: find the first rank that differs from rank 0.
        let mut all = vec![0i64; N * parent.size() as usize];
        parent.all_gather_into(&mine[..], &mut all[..]);
        let rank = parent.rank();
        // Every rank may agree on the same wrong output length: rank 0 is then the first
        // culprit.
        let (culprit, theirs) =
            all.chunks(N).enumerate().find(|(_, c)| *c != &all[..N] || c[4] != 0).expect("a difference");
        let culprit = culprit as i32;
        let length = |found: i64| Error::LengthMismatch {
            rank,
            culprit,
            expected: all[2] as usize,
            found: found as usize,
        };
        Err(match (0..N).find(|&i| theirs[i] != all[i]).unwrap_or(4) {
            0 => Error::Mismatch { rank, culprit, what: "collective" },
            1 => Error::Mismatch { rank, culprit, what: "root" },
            2 => length(theirs[2]),
            3 => Error::Mismatch { rank, culprit, what: "operator or element type" },
            _ => length(theirs[2] + theirs[4]),
        })
    }

    /// Agrees across nodes on the outcome of a step every rank took (see [`agree`]).
    pub(crate) fn agree(&self, parent: &SimpleCommunicator, result: Result<()>) -> Result<()> {
        agree(parent, result)
    }

    /// Broadcast over several nodes: the root's node first; then the leaders over MPI in
    /// chunks, while every other node reads behind its leader through its message counter
    /// (the pipelined broadcast), so the network leg and the node's copies overlap. With
    /// one rank per node, rsmpi's broadcast after the checks.
    pub(crate) fn bcast(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        buf: &mut [u8],
        root: i32,
        algorithm: BcastAlgorithm,
    ) -> Result<()> {
        self.check(parent, coll::Kind::Bcast, root, buf.len())?;
        if self.direct() {
            if !buf.is_empty() {
                parent.process_at_rank(root).broadcast_into(buf);
            }
            return Ok(());
        }
        let root_node = self.node_of[root as usize];
        let chunk = algorithm.feed_chunk();
        let from_network = |piece: &mut [u8]| {
            if let Some(leaders) = &self.leaders {
                let mut spot = Spot::new();
                leaders.process_at_rank(root_node as i32).broadcast_into(to_mpi::recv(piece, &mut spot));
            }
            Ok(())
        };
        let result = if root_node == self.my_node {
            let result = coll::bcast::bcast(ctx, buf, root, self.local_of(root), algorithm, None);
            // The leader now holds the data: send it on, in the chunks the others expect.
            let mut send = from_network;
            buf.chunks_mut(chunk).try_for_each(&mut send).and(result)
        } else {
            let mut receive = from_network;
            coll::bcast::bcast(ctx, buf, root, 0, algorithm, Some(&mut receive))
        };
        self.agree(parent, result)
    }

    /// Allreduce over several nodes, by one of three paths that every rank chooses alike
    /// (from the length, the operator and the shape, all checked equal first):
    ///
    /// - one rank per node ([`direct`](Self::direct)) and a built-in operator: rsmpi's own
    ///   `all_reduce_into` on the whole communicator, after the checks (which here also
    ///   compare every `recv` length with the `send` lengths, across the communicator);
    /// - multi-root, for [`MULTI_ROOT_MIN_BYTES`] and more with every node holding at
    ///   least `m >= 2` ranks (`m` the smallest node's size) and a commutative operator:
    ///   (a) the node's partitioned reduce-scatter into `m` partitions (local rank `j < m`
    ///   ends with the node's partition `j`), (b) every owner of partition `j` combines it
    ///   with the other nodes' along column `j`, all `m` columns at once (one MPI
    ///   allreduce of `n / m` elements each; a user operator gathers the column's
    ///   partitions and folds them in column order), (c) the node's allgatherv of the
    ///   partitions (every rank reads them from their owners). Every owner makes its MPI
    ///   call even when its node's step failed, and the final agreement reports the
    ///   failure everywhere;
    /// - otherwise through the leaders: the node reduces, the leaders combine the node
    ///   results over MPI (a user operator as in the multi-root path, in node order, which
    ///   is rank order only when every node holds consecutive ranks: a non-commutative
    ///   user operator needs that), and each leader broadcasts the result to its node.
    ///   Leaders use scratch of `n` elements (and of `nodes * n` for a user operator).
    ///
    /// # Errors
    ///
    /// On every rank: the checks' errors (`LengthMismatch`, `Mismatch`, `Unsupported` for
    /// an operator that does not apply to `T` or a non-commutative user operator across
    /// interleaved nodes); then any rank's failure, on every rank.
    pub(crate) fn all_reduce<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        bufs: crate::coll::reduce::Bufs<'_, T>,
        oper: &O,
        algorithm: crate::coll::reduce::ReduceAlgorithm,
    ) -> Result<()> {
        use crate::coll::reduce::{self as red, Bufs};
        let n = bufs.input_len();
        let recv = match &bufs {
            Bufs::Apart(_, r) => r.len(),
            _ => n,
        };
        self.check_reduction(parent, coll::Kind::Allreduce, 0, n, Some(recv), oper)?;
        if let (true, Some(builtin)) = (self.direct(), oper.builtin()) {
            return self.all_reduce_mpi(parent, bufs, builtin);
        }
        if self.multi_root(n * std::mem::size_of::<T>(), oper) {
            return self.all_reduce_multi_root(parent, ctx, bufs, oper, algorithm);
        }
        let out: &mut [T] = match bufs {
            Bufs::Apart(s, r) => {
                let result = red::reduce(ctx, Bufs::Apart(s, &mut *r), None, oper, algorithm);
                return self.combine_and_share(parent, ctx, r, n, oper, result);
            }
            Bufs::InPlace(b) => b,
            Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
        };
        let result = red::reduce(ctx, Bufs::InPlace(&mut *out), None, oper, algorithm);
        self.combine_and_share(parent, ctx, out, n, oper, result)
    }

    /// Reduce to `root` over several nodes. With one rank per node and a built-in
    /// operator, rsmpi's own reduce after the checks; otherwise through
    /// [`all_reduce`](Self::all_reduce) (multi-root for large messages), into scratch on
    /// every rank but the root.
    ///
    /// # Errors
    ///
    /// As `all_reduce`, and `InvalidRoot` or `Mismatch` for a bad root.
    pub(crate) fn reduce<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        bufs: crate::coll::reduce::Bufs<'_, T>,
        root: i32,
        oper: &O,
        algorithm: crate::coll::reduce::ReduceAlgorithm,
    ) -> Result<()> {
        use crate::coll::reduce::Bufs;
        let n = bufs.input_len();
        let size = std::mem::size_of::<T>();
        if let (true, Some(builtin)) = (self.direct(), oper.builtin()) {
            self.check_reduction(parent, coll::Kind::Reduce, root, n, recv_of(&bufs), oper)?;
            if n > 0 {
                let at = parent.process_at_rank(root);
                match bufs {
                    Bufs::Apart(s, r) => at.reduce_into_root(s, r, builtin.mpi()),
                    Bufs::InPlace(b) => at.reduce_into_root(&b.to_vec()[..], b, builtin.mpi()),
                    Bufs::SendOnly(s) => at.reduce_into(s, builtin.mpi()),
                }
            }
            return Ok(());
        }
        let recv = recv_of(&bufs).map(|r| r * size);
        self.check_tagged(parent, coll::Kind::Reduce, root, n * size, 0, recv)?;
        match bufs {
            Bufs::SendOnly(send) => {
                let mut scratch = send.to_vec();
                self.all_reduce(parent, ctx, Bufs::InPlace(&mut scratch), oper, algorithm)
            }
            other => self.all_reduce(parent, ctx, other, oper, algorithm),
        }
    }

    /// The checks every reduction across nodes starts with: the same collective, root,
    /// length (`n` elements), operator and element type everywhere; an operator that
    /// applies to `T`; a non-commutative user operator only over consecutive nodes.
    fn check_reduction<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        kind: coll::Kind,
        root: i32,
        n: usize,
        recv: Option<usize>,
        oper: &O,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let tag = oper.code() | (size as u64) << 16 | coll::type_tag::<T>() << 48;
        self.check_tagged(parent, kind, root, n * size, tag, recv.map(|r| r.saturating_mul(size)))?;
        // Every rank passes the same operator and type (checked above), so every rank
        // reaches the same verdict here, before MPI (which would abort) sees the operator.
        if !oper.apply(&mut [], &[]) {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: format!("this operator on {size}-byte elements"),
            });
        }
        let contiguous = self.node_of.windows(2).all(|w| w[0] <= w[1]);
        if !oper.commutative() && oper.builtin().is_none() && !contiguous {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: "a non-commutative operator across nodes that do not hold consecutive ranks".into(),
            });
        }
        Ok(())
    }

    /// Whether an allreduce of `bytes` with `oper` takes the multi-root path: the same
    /// verdict on every rank, since it depends only on what the checks made equal.
    fn multi_root<T: Pod, O: Operator<T>>(&self, bytes: usize, oper: &O) -> bool {
        let n = bytes / std::mem::size_of::<T>().max(1);
        self.min_node_size > 1
            && bytes >= MULTI_ROOT_MIN_BYTES
            && n <= i32::MAX as usize
            && (oper.commutative() || oper.builtin().is_some())
    }

    /// The direct allreduce, once the checks (every `recv` as long as the `send`s) have
    /// passed: rsmpi's own.
    fn all_reduce_mpi<T: Pod>(
        &self,
        parent: &SimpleCommunicator,
        bufs: crate::coll::reduce::Bufs<'_, T>,
        builtin: crate::op::Builtin,
    ) -> Result<()> {
        use crate::coll::reduce::Bufs;
        if bufs.input_len() > 0 {
            match bufs {
                Bufs::Apart(s, r) => parent.all_reduce_into(s, r, builtin.mpi()),
                Bufs::InPlace(b) => parent.all_reduce_into(&b.to_vec()[..], b, builtin.mpi()),
                Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
            }
        }
        Ok(())
    }

    /// The multi-root allreduce of [`Hierarchy::all_reduce`]: reduce-scatter on the node,
    /// one allreduce per partition along the columns, allgatherv on the node.
    fn all_reduce_multi_root<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        bufs: crate::coll::reduce::Bufs<'_, T>,
        oper: &O,
        algorithm: crate::coll::reduce::ReduceAlgorithm,
    ) -> Result<()> {
        use crate::coll::reduce::{partition, reduce_scatter, Bufs};
        let n = bufs.input_len();
        let m = self.min_node_size;
        // (a) Local rank j < m ends with the node's partition j in its output.
        let (result, out): (Result<()>, &mut [T]) = match bufs {
            Bufs::Apart(s, r) => (reduce_scatter(ctx, Bufs::Apart(s, &mut *r), m, oper, algorithm), r),
            Bufs::InPlace(b) => (reduce_scatter(ctx, Bufs::InPlace(&mut *b), m, oper, algorithm), b),
            Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
        };
        let parts: Vec<std::ops::Range<usize>> =
            (0..ctx.ctl.size()).map(|j| if j < m { partition::<T>(n, m, j) } else { 0..0 }).collect();
        let mine = parts[ctx.ctl.me()].clone();
        // (b) Every owner takes part in its column's allreduce whatever happened on its
        // node (an output of the wrong length, which the node's checks rejected, sends
        // zeros): the other nodes' owners are waiting for it. Empty partitions are empty
        // on every node, and skipped everywhere.
        let mut reduced = vec![T::zeroed(); mine.len()];
        if !mine.is_empty() {
            let zeros;
            let own: &[T] = match out.get(mine.clone()) {
                Some(own) => own,
                None => {
                    zeros = vec![T::zeroed(); mine.len()];
                    &zeros
                }
            };
            combine(&self.column, own, &mut reduced, oper);
        }
        // (c) Every rank reads the partitions from their owners.
        let counts: Vec<mpi::Count> = parts.iter().map(|r| r.len() as mpi::Count).collect();
        let displs: Vec<mpi::Count> = parts.iter().map(|r| r.start as mpi::Count).collect();
        let spread = coll::allgatherv::allgatherv(
            ctx,
            bytemuck::cast_slice(&reduced),
            bytemuck::cast_slice_mut(out),
            &counts,
            &displs,
            std::mem::size_of::<T>(),
            coll::allgatherv::AllgathervAlgorithm::Auto,
        );
        self.agree(parent, result.and(spread))
    }

    /// The leaders' and the second node leg of the leader path of
    /// [`Hierarchy::all_reduce`]; `n` is the input's length (`out` may differ when the
    /// node's checks failed: the leader then still combines `n` elements).
    fn combine_and_share<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        out: &mut [T],
        n: usize,
        oper: &O,
        mut result: Result<()>,
    ) -> Result<()> {
        if let Some(leaders) = &self.leaders {
            let mine = if out.len() == n { out.to_vec() } else { vec![T::zeroed(); n] };
            let mut combined = vec![T::zeroed(); n];
            combine(leaders, &mine, &mut combined, oper);
            if out.len() == n {
                out.copy_from_slice(&combined);
            }
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        result = result.and(coll::bcast::bcast(ctx, bytes, 0, 0, BcastAlgorithm::Auto, None));
        self.agree(parent, result)
    }

    /// `scan`, `exclusive_scan` or `reduce_scatter_block` over several nodes, after the
    /// checks across the whole communicator: with one rank per node and a built-in
    /// operator, rsmpi's own; otherwise every rank gathers every rank's input over rsmpi
    /// and folds the ones it needs in rank order (simple, and `p` inputs of memory per
    /// rank: a two-level prefix over node totals would be lighter).
    ///
    /// # Errors
    ///
    /// As the checks of [`all_reduce`](Self::all_reduce), on every rank.
    pub(crate) fn scan<T: Pod, O: Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        which: coll::scan::Which,
        send: &[T],
        recv: &mut [T],
        oper: &O,
    ) -> Result<()> {
        use coll::scan::Which;
        let (p, me) = (parent.size() as usize, parent.rank() as usize);
        let kind = match which {
            Which::Scan => coll::Kind::Scan,
            Which::Exscan => coll::Kind::Exscan,
            Which::ReduceScatterBlock => coll::Kind::ReduceScatterBlock,
        };
        // The output must be as long as the input (a p-th of it for the reduce-scatter,
        // which therefore claims p times its output).
        let claimed = match which {
            Which::ReduceScatterBlock => recv.len().saturating_mul(p),
            _ => recv.len(),
        };
        self.check_reduction(parent, kind, 0, send.len(), Some(claimed), oper)?;
        let n = recv.len();
        if n == 0 {
            return Ok(());
        }
        if let (true, Some(builtin)) = (self.direct(), oper.builtin()) {
            let mut spot = Spot::new();
            let op = builtin.mpi();
            match which {
                Which::Scan => parent.scan_into(to_mpi::send(send), to_mpi::recv(recv, &mut spot), op),
                Which::ReduceScatterBlock => {
                    parent.reduce_scatter_block_into(to_mpi::send(send), to_mpi::recv(recv, &mut spot), op)
                }
                Which::Exscan => {
                    // MPI leaves rank 0's output undefined; zcoll leaves it as it was.
                    let mut out = recv.to_vec();
                    parent.exclusive_scan_into(to_mpi::send(send), &mut out[..], op);
                    if me > 0 {
                        recv.copy_from_slice(&out);
                    }
                }
            }
            return Ok(());
        }
        let mut all = vec![T::zeroed(); send.len() * p];
        parent.all_gather_into(to_mpi::send(send), &mut all[..]);
        let (ranks, at) = match which {
            Which::Scan => (0..me + 1, 0),
            Which::Exscan => (0..me, 0),
            Which::ReduceScatterBlock => (0..p, me * n),
        };
        let mut ranks = ranks.map(|r| &all[r * send.len() + at..r * send.len() + at + n]);
        if let Some(first) = ranks.next() {
            recv.copy_from_slice(first);
            for x in ranks {
                oper.apply(recv, x);
            }
        }
        Ok(())
    }

    /// Barrier over several nodes: node barrier, leader barrier, node barrier (with one
    /// rank per node, rsmpi's barrier).
    pub(crate) fn barrier(&self, parent: &SimpleCommunicator, ctx: &Ctx<'_>) -> Result<()> {
        self.check(parent, coll::Kind::Barrier, 0, 0)?;
        if self.direct() {
            parent.barrier();
            return Ok(());
        }
        let mut result = coll::barrier::barrier(ctx);
        if let Some(leaders) = &self.leaders {
            leaders.barrier();
        }
        result = result.and(coll::barrier::barrier(ctx));
        self.agree(parent, result)
    }
}

/// Combines every member's `mine` into `out` over `comm` with `oper`: MPI's own operator
/// for a built-in one; otherwise every member gathers every contribution and folds them
/// in `comm`'s rank order, so that every member computes bitwise the same result.
fn combine<T: Pod, O: Operator<T>>(comm: &SimpleCommunicator, mine: &[T], out: &mut [T], oper: &O) {
    let mut spot = Spot::new();
    match oper.builtin() {
        Some(b) => comm.all_reduce_into(to_mpi::send(mine), to_mpi::recv(out, &mut spot), b.mpi()),
        None => {
            let mut all = vec![T::zeroed(); mine.len() * comm.size() as usize];
            comm.all_gather_into(to_mpi::send(mine), to_mpi::recv(&mut all[..], &mut spot));
            if !mine.is_empty() {
                let mut members = all.chunks(mine.len());
                out.copy_from_slice(members.next().expect("one member at least"));
                for x in members {
                    oper.apply(out, x);
                }
            }
        }
    }
}

/// Agrees over `parent` on the outcome of a step every rank took: this rank's own error,
/// or `PeerFailed` naming the first rank that failed, or `Ok` on every rank.
pub(crate) fn agree(parent: &SimpleCommunicator, result: Result<()>) -> Result<()> {
    let mine = if result.is_err() { parent.rank() } else { i32::MAX };
    let mut first = 0i32;
    parent.all_reduce_into(&mine, &mut first, SystemOperation::min());
    match (result, first) {
        (Err(e), _) => Err(e),
        (Ok(()), i32::MAX) => Ok(()),
        (Ok(()), peer) => Err(Error::PeerFailed { rank: parent.rank(), peer }),
    }
}

/// The output length (in elements) a rank of a reduction claims: its receive buffer, or
/// its input in place; `None` for a rank that only sends.
fn recv_of<T>(bufs: &crate::coll::reduce::Bufs<'_, T>) -> Option<usize> {
    use crate::coll::reduce::Bufs;
    match bufs {
        Bufs::Apart(_, r) => Some(r.len()),
        Bufs::InPlace(b) => Some(b.len()),
        Bufs::SendOnly(_) => None,
    }
}
