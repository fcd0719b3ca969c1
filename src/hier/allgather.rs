//! Allgather across nodes: gather at the leaders, allgather among the leaders with
//! rsmpi, broadcast in every node.

use super::{prefix, too_big, Hierarchy, Net, Nodes};
use crate::coll::algorithm::Algorithm;
use crate::coll::allgather::{in_place_block, AllgatherAlgorithm};
use crate::coll::bcast::{bcast, BcastAlgorithm};
use crate::coll::legs::gather_to_leader;
use crate::coll::Kind;
use crate::error::Result;
use crate::sync::copy_block;
use crate::to_mpi::{self, Spot};
use mpi::datatype::PartitionMut;
use mpi::traits::*;
impl Hierarchy {
    /// Allgather over several nodes: gather at the leaders, allgather among the leaders with
    /// rsmpi, broadcast in every node; with one rank per node, rsmpi's own allgather after
    /// the checks. `send = None` is in place.
    ///
    /// # Errors
    ///
    /// On every rank: `Mismatch`, `LengthMismatch` as the single-node call (checked across
    /// the whole communicator), `Unsupported` if a leader's share exceeds the 2 GiB an MPI
    /// count can hold; a transport error or a peer's failure, agreed across nodes.
    pub(crate) fn allgather(
        &self,
        net: Net<'_>,
        send: Option<&[u8]>,
        recv: &mut [u8],
        algorithm: AllgatherAlgorithm,
        elem: usize,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        let size = parent.size() as usize;
        let n = self.allgather_checks(net, send.map(<[u8]>::len), recv.len(), algorithm, elem)?;
        if n == 0 {
            return Ok(());
        }
        if self.direct() {
            match send {
                Some(send) => parent.all_gather_into(send, recv),
                None => {
                    let own = recv[parent.rank() as usize * n..][..n].to_vec();
                    parent.all_gather_into(&own[..], recv)
                }
            }
            return Ok(());
        }
        let nodes = Nodes::of(self, size);
        let me = parent.rank() as usize;
        let leader = ctx.ctl.me() == 0;
        let mut block = vec![0u8; if leader { ctx.ctl.size() * n } else { 0 }];
        let mine = send.unwrap_or(&recv[me * n..(me + 1) * n]);
        let mut result = gather_to_leader(ctx, Kind::Allgather, mine, &mut block);
        if let Some(leaders) = self.leaders() {
            let counts: Vec<i32> = nodes.members.iter().map(|m| (m.len() * n) as i32).collect();
            let displs = prefix(&counts);
            let mut all = vec![0u8; size * n];
            let mut spot = Spot::new();
            leaders.all_gather_varcount_into(
                to_mpi::send(&block[..]),
                &mut PartitionMut::new(to_mpi::recv(&mut all[..], &mut spot), &counts[..], &displs[..]),
            );
            for (m, &at) in nodes.members.iter().zip(&displs) {
                for (i, &g) in m.iter().enumerate() {
                    let from = at as usize + i * n;
                    copy_block(&all[from..from + n], &mut recv[g * n..(g + 1) * n]);
                }
            }
        }
        // Every rank takes part, whatever happened before, so that no rank is left waiting.
        let spread = bcast(ctx, recv, ctx.ctl.rank_of(0), 0, BcastAlgorithm::Auto, None);
        result = result.and(spread);
        self.agree(parent, result)
    }

    /// The checks of an allgather across nodes, before any node-level round (`send = None` is
    /// in place, its block whole `elem`-byte elements): the same collective and block length
    /// everywhere, `recv` holding `size()` blocks, the same algorithm, one this node can run,
    /// and all blocks within an MPI count. Returns the block length.
    ///
    /// # Errors
    ///
    /// `Mismatch`, `LengthMismatch`, the same on every rank; then the algorithm's `Config` or
    /// `Unsupported`; `Unsupported` beyond 2 GiB in all.
    pub(crate) fn allgather_checks(
        &self,
        net: Net<'_>,
        send: Option<usize>,
        recv: usize,
        algorithm: AllgatherAlgorithm,
        elem: usize,
    ) -> Result<usize> {
        let Net { parent, ctx } = net;
        let size = parent.size() as usize;
        let n = send.unwrap_or_else(|| in_place_block(recv, size, elem));
        // Ranks must agree on what they asked for; each node then resolves it for its own
        // size, and nodes of different sizes may well choose differently.
        let word = algorithm.op();
        let claim = algorithm.claim(ctx.overrides);
        let algorithm = algorithm.resolve(n, ctx.ctl.size(), ctx.transport, ctx.overrides);
        self.check_shape(net, Kind::Allgather, n, claim, recv, word, |n| (n, size.saturating_mul(n)))?;
        algorithm?;
        if size * n > i32::MAX as usize {
            return Err(too_big(parent, size * n));
        }
        Ok(n)
    }
}
