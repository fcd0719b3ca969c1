//! Broadcast and barrier across nodes.

use super::relay::{Relay, CARRY};
use super::{Hierarchy, Net, Stand};
use crate::coll::algorithm::Algorithm;
use crate::coll::relay::Claim;
use crate::coll::{self, bcast::BcastAlgorithm};
use crate::error::Result;
use crate::sync::copy_block;
use crate::to_mpi::{self, Spot};
use mpi::traits::*;

impl Hierarchy {
    /// Broadcast over several nodes. Its verdict and, up to [`CARRY`] bytes, its data
    /// travel in one exchange among the leaders ([`relay`](Self::relay)): the root's node
    /// hands the root's bytes to its leader in the gather-in, every leader takes them
    /// from the root leader's block, and hands them to its node with the verdict. Larger
    /// ones, once the same exchange has judged them: the root's node first; then the
    /// leaders over MPI in chunks, while every other node reads behind its leader through
    /// its message counter (the pipelined broadcast), so the network leg and the node's
    /// copies overlap. With one rank per node, rsmpi's broadcast after the checks.
    pub(crate) fn bcast(
        &self,
        net: Net<'_>,
        buf: &mut [u8],
        root: i32,
        algorithm: BcastAlgorithm,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        if self.direct() {
            self.check(net, coll::Kind::Bcast, root, buf.len(), algorithm.claim(ctx.overrides))?;
            // A variable zcoll cannot read is the same error as on the other paths (the
            // checks made sure that every rank reads it alike).
            algorithm.readable(ctx.overrides)?;
            for piece in buf.chunks_mut(self.piece) {
                parent.process_at_rank(root).broadcast_into(piece);
            }
            return Ok(());
        }
        let len = buf.len();
        let small = len <= CARRY;
        let Stand { root_node, here, .. } = self.stand(ctx, root);
        let src = if here { self.local_of(root) } else { 0 };
        let mine = here && ctx.ctl.me() == src;
        let carried = small && here;
        let call = Relay {
            claim: Claim {
                kind: coll::Kind::Bcast,
                root,
                len,
                tag: 0,
                algo: algorithm.claim(ctx.overrides),
                recv: None,
            },
            rooted: true,
            part: if carried && mine { &*buf } else { &[] },
            from: if carried { src..src + 1 } else { 0..0 },
            gathered: if carried { len } else { 0 },
            handed: if small { len } else { 0 },
        };
        let data = self.relay(net, call, <[u8]>::to_vec, |nodes| match small {
            true => nodes[root_node][..len].to_vec(),
            false => Vec::new(),
        })?;
        // Every rank's claim agreed, the variable's reading included: its error is every
        // rank's, before any byte lands (else the root's node alone would find it and the
        // other nodes see their leader fail).
        algorithm.readable(ctx.overrides)?;
        if small {
            if !mine {
                copy_block(&data, buf);
            }
            return Ok(());
        }
        let chunk = algorithm.feed_chunk();
        // Each chunk goes to MPI in pieces of at most `self.piece` bytes (a `pipelined:k`
        // chunk may exceed an MPI count).
        let from_network = |chunk: &mut [u8]| {
            if let Some(leaders) = &self.leaders {
                let mut spot = Spot::new();
                let at = leaders.process_at_rank(root_node as i32);
                match chunk.is_empty() {
                    true => at.broadcast_into(to_mpi::recv(chunk, &mut spot)),
                    false => chunk.chunks_mut(self.piece).for_each(|piece| at.broadcast_into(piece)),
                }
            }
            Ok(())
        };
        let result = if here {
            let result = coll::bcast::bcast(ctx, buf, root, self.local_of(root), algorithm, None);
            // The leader now holds the data: send it on, in the chunks the others expect.
            let mut send = from_network;
            buf.chunks_mut(chunk).try_for_each(&mut send).and(result)
        } else {
            let mut receive = from_network;
            coll::bcast::bcast(ctx, buf, root, 0, algorithm, Some(&mut receive))
        };
        // A large call agrees on its outcome: a failure on the root's node leaves its
        // leader sending stale bytes, which other nodes must not return as `Ok`.
        self.agree(parent, result)
    }

    /// Barrier over several nodes: the node's gather-in (the leader has seen every rank
    /// of its node arrive), the leaders' exchange (every leader has seen every other's),
    /// the hand-off ([`relay`](Self::relay), with no payload). With one rank per node,
    /// the checks' allreduce over the whole communicator, which no rank leaves before
    /// every rank has entered it.
    pub(crate) fn barrier(&self, net: Net<'_>) -> Result<()> {
        self.check(net, coll::Kind::Barrier, 0, 0, 0)
    }
}
