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

    /// The communicator of the node leaders, ordered by node (on leaders only).
    pub(crate) fn leaders(&self) -> Option<&SimpleCommunicator> {
        self.leaders.as_ref()
    }

    /// The node of parent rank `r` (a rank of the communicator).
    pub(crate) fn node_of(&self, r: usize) -> usize {
        self.node_of[r]
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
        let mine = [kind as i64, root as i64, len as i64];
        let both = [mine[0], -mine[0], mine[1], -mine[1], mine[2], -mine[2]];
        let mut max = [0i64; 6];
        parent.all_reduce_into(&both[..], &mut max[..], SystemOperation::max());
        if (0..3).all(|i| max[2 * i] == -max[2 * i + 1]) {
            let size = parent.size();
            return match root {
                r if (0..size).contains(&r) => Ok(()),
                _ => Err(Error::InvalidRoot { rank: parent.rank(), root, size }),
            };
        }
        // Someone disagrees: find the first rank that differs from rank 0.
        let mut all = vec![0i64; 3 * parent.size() as usize];
        parent.all_gather_into(&mine[..], &mut all[..]);
        let rank = parent.rank();
        let (culprit, theirs) =
            all.chunks(3).enumerate().find(|(_, c)| *c != &all[..3]).expect("a difference");
        let culprit = culprit as i32;
        Err(match (0..3).find(|&i| theirs[i] != all[i]) {
            Some(0) => Error::Mismatch { rank, culprit, what: "collective" },
            Some(1) => Error::Mismatch { rank, culprit, what: "root" },
            _ => {
                Error::LengthMismatch { rank, culprit, expected: all[2] as usize, found: theirs[2] as usize }
            }
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

    /// Broadcast over several nodes: the root's node first, then the leaders over MPI,
    /// then every other node from its leader.
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
        let mut result = Ok(());
        if root_node == self.my_node {
            result = coll::bcast::bcast(ctx, buf, root, self.local_of(root), algorithm);
        }
        if let Some(leaders) = &self.leaders {
            leaders.process_at_rank(root_node as i32).broadcast_into(buf);
        }
        if root_node != self.my_node {
            result = coll::bcast::bcast(ctx, buf, root, 0, algorithm);
        }
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
