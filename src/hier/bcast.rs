//! Broadcast and barrier across nodes.

use super::{Hierarchy, Net};
use crate::coll::{self, bcast::BcastAlgorithm};
use crate::error::Result;
use crate::to_mpi::{self, Spot};
use mpi::traits::*;

impl Hierarchy {
    /// Broadcast over several nodes: the root's node first; then the leaders over MPI in
    /// chunks, while every other node reads behind its leader through its message counter
    /// (the pipelined broadcast), so the network leg and the node's copies overlap. With
    /// one rank per node, rsmpi's broadcast after the checks.
    pub(crate) fn bcast(
        &self,
        net: Net<'_>,
        buf: &mut [u8],
        root: i32,
        algorithm: BcastAlgorithm,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
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

    /// Barrier over several nodes: node barrier, leader barrier, node barrier (with one
    /// rank per node, rsmpi's barrier).
    pub(crate) fn barrier(&self, net: Net<'_>) -> Result<()> {
        let Net { parent, ctx } = net;
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
