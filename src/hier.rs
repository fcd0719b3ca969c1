//! Two-level compositions for communicators that span several nodes: the intra-node legs
//! go through the node's segment and transport, the inter-node legs through rsmpi among
//! the node leaders (local rank 0 of every node).

use crate::coll::{self, bcast::BcastAlgorithm, Ctx};
use crate::error::{Error, Result};
use crate::node::NodeComm;
use mpi::collective::SystemOperation;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

/// Where every rank of the communicator lives.
pub(crate) struct Hierarchy {
    /// The communicator of the node leaders, ordered by parent rank (on leaders only).
    leaders: Option<SimpleCommunicator>,
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
    /// Learns the node of every rank. Collective over `parent`.
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
        let my_node = node_of[parent.rank() as usize];
        Hierarchy { leaders, node_of, local_of, nodes: leaders_sorted.len(), my_node }
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
        self.check_tagged(parent, kind, root, len, 0)
    }

    /// [`check`](Self::check), and that every rank passes the same `tag` (a reduction's
    /// operator and element type).
    pub(crate) fn check_tagged(
        &self,
        parent: &SimpleCommunicator,
        kind: coll::Kind,
        root: i32,
        len: usize,
        tag: u64,
    ) -> Result<()> {
        const N: usize = 4;
        let mine = [kind as i64, root as i64, len as i64, tag as i64];
        let mut both = [0i64; 2 * N];
        for (i, &v) in mine.iter().enumerate() {
            both[2 * i] = v;
            both[2 * i + 1] = v.wrapping_neg();
        }
        let mut max = [0i64; 2 * N];
        parent.all_reduce_into(&both[..], &mut max[..], SystemOperation::max());
        if (0..N).all(|i| max[2 * i] == max[2 * i + 1].wrapping_neg()) {
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
        let (culprit, theirs) =
            all.chunks(N).enumerate().find(|(_, c)| *c != &all[..N]).expect("a difference");
        let culprit = culprit as i32;
        Err(match (0..N).find(|&i| theirs[i] != all[i]) {
            Some(0) => Error::Mismatch { rank, culprit, what: "collective" },
            Some(1) => Error::Mismatch { rank, culprit, what: "root" },
            Some(2) => {
                Error::LengthMismatch { rank, culprit, expected: all[2] as usize, found: theirs[2] as usize }
            }
            _ => Error::Mismatch { rank, culprit, what: "operator or element type" },
        })
    }

    /// Agrees across nodes on the outcome of a step every rank took.
    pub(crate) fn agree(&self, parent: &SimpleCommunicator, result: Result<()>) -> Result<()> {
        let mine = if result.is_err() { parent.rank() } else { i32::MAX };
        let mut first = 0i32;
        parent.all_reduce_into(&mine, &mut first, SystemOperation::min());
        match (result, first) {
            (Err(e), _) => Err(e),
            (Ok(()), i32::MAX) => Ok(()),
            (Ok(()), peer) => Err(Error::PeerFailed { rank: parent.rank(), peer }),
        }
    }

    /// Broadcast over several nodes: the root's node first; then the leaders over MPI in
    /// chunks, while every other node reads behind its leader through its message counter
    /// (the pipelined broadcast), so the network leg and the node's copies overlap.
    pub(crate) fn bcast(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        buf: &mut [u8],
        root: i32,
        algorithm: BcastAlgorithm,
    ) -> Result<()> {
        self.check(parent, coll::Kind::Bcast, root, buf.len())?;
        let root_node = self.node_of[root as usize];
        let chunk = algorithm.feed_chunk();
        let from_network = |piece: &mut [u8]| {
            if let Some(leaders) = &self.leaders {
                leaders.process_at_rank(root_node as i32).broadcast_into(piece);
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

    /// Allreduce over several nodes: the node reduces (zero-copy, partitioned), the
    /// leaders combine the node results over MPI, and each leader broadcasts the result
    /// to its node. A built-in operator goes to MPI as MPI's own; a user operator is
    /// combined by gathering every node's result at every leader and folding them in
    /// node order, which is rank order only when every node holds consecutive ranks (a
    /// non-commutative user operator needs that). Leaders use scratch of `n` elements
    /// (and of `nodes * n` for a user operator).
    pub(crate) fn all_reduce<T: crate::Pod, O: crate::op::Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        bufs: crate::coll::reduce::Bufs<'_, T>,
        oper: &O,
        algorithm: crate::ReduceAlgorithm,
    ) -> Result<()> {
        use crate::coll::reduce::{self as red, Bufs};
        let n = match &bufs {
            Bufs::Apart(s, _) | Bufs::SendOnly(s) => s.len(),
            Bufs::InPlace(b) => b.len(),
        };
        let tag = oper.code() | (std::mem::size_of::<T>() as u64) << 16;
        self.check_tagged(parent, coll::Kind::Allreduce, 0, n * std::mem::size_of::<T>(), tag)?;
        // Every rank passes the same operator and type (checked above), so every rank
        // reaches the same verdict here, before MPI (which would abort) sees the operator.
        if !oper.apply(&mut [], &[]) {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: format!("this operator on {}-byte elements", std::mem::size_of::<T>()),
            });
        }
        let contiguous = self.node_of.windows(2).all(|w| w[0] <= w[1]);
        if !oper.commutative() && oper.builtin().is_none() && !contiguous {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: "a non-commutative operator across nodes that do not hold consecutive ranks".into(),
            });
        }
        let out: &mut [T] = match bufs {
            Bufs::Apart(s, r) => {
                let result = red::reduce(ctx, Bufs::Apart(s, &mut *r), None, oper, algorithm);
                self.combine_and_share(parent, ctx, r, oper, result)?;
                return Ok(());
            }
            Bufs::InPlace(b) => b,
            Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
        };
        let result = red::reduce(ctx, Bufs::InPlace(&mut *out), None, oper, algorithm);
        self.combine_and_share(parent, ctx, out, oper, result)
    }

    /// The leaders' and the second node leg of [`Hierarchy::all_reduce`].
    fn combine_and_share<T: crate::Pod, O: crate::op::Operator<T>>(
        &self,
        parent: &SimpleCommunicator,
        ctx: &Ctx<'_>,
        out: &mut [T],
        oper: &O,
        mut result: Result<()>,
    ) -> Result<()> {
        if let Some(leaders) = &self.leaders {
            let mine = out.to_vec();
            match oper.builtin() {
                Some(b) => leaders.all_reduce_into(&mine[..], &mut *out, b.mpi()),
                None => {
                    let mut all = vec![T::zeroed(); mine.len() * self.nodes];
                    leaders.all_gather_into(&mine[..], &mut all[..]);
                    if !mine.is_empty() {
                        let mut nodes = all.chunks(mine.len());
                        out.copy_from_slice(nodes.next().expect("one node at least"));
                        for node in nodes {
                            oper.apply(out, node);
                        }
                    }
                }
            }
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        result = result.and(coll::bcast::bcast(ctx, bytes, 0, 0, BcastAlgorithm::Auto, None));
        self.agree(parent, result)
    }

    /// Barrier over several nodes: node barrier, leader barrier, node barrier.
    pub(crate) fn barrier(&self, parent: &SimpleCommunicator, ctx: &Ctx<'_>) -> Result<()> {
        self.check(parent, coll::Kind::Barrier, 0, 0)?;
        let mut result = coll::barrier::barrier(ctx);
        if let Some(leaders) = &self.leaders {
            leaders.barrier();
        }
        result = result.and(coll::barrier::barrier(ctx));
        self.agree(parent, result)
    }
}
