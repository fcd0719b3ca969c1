//! Alltoall across nodes: the node's blocks gathered at its leader, exchanged among the
//! leaders with rsmpi, scattered in every node; or PAP-Shm-Direct (`pap.rs`).

use super::{mpi_count, prefix, too_big, Hierarchy, Net, Nodes};
use crate::alloc::Scratch;
use crate::coll::algorithm::Algorithm;
use crate::coll::alltoall::AlltoallAlgorithm;
use crate::coll::legs::{gather_to_leader, scatter_from_leader};
use crate::coll::{alltoall_op, whole_blocks, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::to_mpi::{self, Spot};
use crate::transport::TransportKind;
use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
impl Hierarchy {
    /// Alltoall over several nodes: gather the send buffers at the leaders, exchange
    /// node-to-node blocks among the leaders with rsmpi, scatter in every node; with one
    /// rank per node, rsmpi's own alltoall after the checks; PAP-Shm-Direct for the
    /// arrival-aware algorithms, after the same checks.
    ///
    /// # Errors
    ///
    /// On every rank: `Mismatch`, `LengthMismatch` as the single-node call (checked across
    /// the whole communicator), `Unsupported` if a leader's share exceeds the 2 GiB an MPI
    /// count can hold; a transport error or a peer's failure, agreed across nodes.
    pub(crate) fn alltoall(
        &self,
        net: Net<'_>,
        send: &[u8],
        recv: &mut [u8],
        algorithm: AlltoallAlgorithm,
        elem: usize,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        let size = parent.size() as usize;
        // Resolved once for the whole call, without the transport and with the communicator's
        // size (nodes may differ in both), so every node takes the same path: the node legs
        // below are fixed rounds, not the node's own alltoall.
        let resolved = algorithm.resolve(send.len() / size, size, TransportKind::Cma, ctx.overrides);
        let pap = resolved.as_ref().ok().filter(|a| a.arrival_aware()).copied();
        // Ranks must agree on what they asked for (their variables included: the claim).
        // The element size in the word: ranks that differ in it fail on the word, so the
        // blocks every rank judges below are whole elements of one size.
        let word = alltoall_op(algorithm.code(), elem);
        let whole = |first: usize| whole_blocks(first, size, word);
        let shape = |first: usize| (whole(first), whole(first));
        // The arrival-aware ones too: their legs are messages between the leaders, which a
        // rank in any other call would never answer (a hang, not an error); the checks are
        // the first collective of every call across nodes.
        self.check_shape(
            net,
            Kind::Alltoall,
            send.len(),
            algorithm.claim(ctx.overrides),
            recv.len(),
            word,
            shape,
        )?;
        if let Some(a) = pap {
            return self.pap_alltoall(net, send, recv, a, elem);
        }
        resolved?;
        if self.direct() {
            mpi_count(send.len(), parent.rank())?;
            if !send.is_empty() {
                parent.all_to_all_into(send, recv);
            }
            return Ok(());
        }
        let n = send.len() / size;
        if n == 0 {
            return Ok(());
        }
        let nodes = Nodes::of(self, size);
        let row = size * n;
        let largest = nodes.members.iter().map(Vec::len).max().unwrap_or(0) * row;
        if largest > i32::MAX as usize {
            return Err(too_big(parent, largest));
        }
        let k = ctx.ctl.size();
        let leader = ctx.ctl.me() == 0;
        // At the leader: every local rank's send buffer, one row each.
        let mut rows = vec![0u8; if leader { k * row } else { 0 }];
        let mut result = gather_to_leader(ctx, Kind::Alltoall, send, &mut rows);
        // What the node's ranks read from the leader: in the shared heap where they map it.
        let mut out = Scratch::empty();
        if let Some(leaders) = self.leaders() {
            // Pack by destination node: for node B, for our local rank a, for b in B: a -> b.
            let mut packed = Scratch::zeroed(k * row, ctx.ctl.loads_heaps());
            let mut at = 0;
            for m in &nodes.members {
                for a in 0..k {
                    for &b in m {
                        copy_block(&rows[a * row + b * n..a * row + (b + 1) * n], &mut packed[at..at + n]);
                        at += n;
                    }
                }
            }
            let sends: Vec<i32> = nodes.members.iter().map(|m| (k * m.len() * n) as i32).collect();
            let recvs = sends.clone();
            let (sdispls, rdispls) = (prefix(&sends), prefix(&recvs));
            // From node A: for a in A, for our local rank b: a -> b. It reuses `rows`.
            let mut spot = Spot::new();
            leaders.all_to_all_varcount_into(
                &Partition::new(to_mpi::send(&packed[..]), &sends[..], &sdispls[..]),
                &mut PartitionMut::new(to_mpi::recv(&mut rows[..], &mut spot), &recvs[..], &rdispls[..]),
            );
            // Unpack into one row per local rank, in source order. It reuses `packed`.
            out = packed;
            for (m, &at) in nodes.members.iter().zip(&rdispls) {
                for (i, &a) in m.iter().enumerate() {
                    for b in 0..k {
                        let from = at as usize + (i * k + b) * n;
                        copy_block(&rows[from..from + n], &mut out[b * row + a * n..b * row + (a + 1) * n]);
                    }
                }
            }
        }
        // Every rank takes part, whatever happened before, so that no rank is left waiting.
        let spread = scatter_from_leader(ctx, Kind::Alltoall, &out, recv);
        result = result.and(spread);
        self.agree(parent, result)
    }
}
