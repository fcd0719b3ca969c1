//! Scatter and gather across nodes: the root's node leg, the leaders' network leg with
//! rsmpi, and every other node's leg.

use super::{Hierarchy, Net, Stand};
use crate::alloc::Scratch;
use crate::coll::algorithm::Algorithm;
use crate::coll::gather::{gather, GatherBufs};
use crate::coll::rooted::{judge, relay, Claim, Layout, Rooted};
use crate::coll::scatter::{scatter, ScatterBufs};
use crate::coll::Kind;
use crate::error::{Error, Result};
use crate::to_mpi::{self, Spot};
use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
impl Hierarchy {
    /// Scatter across nodes: the root's node moves the whole buffer to its leader, the leaders
    /// scatter node parts over MPI, every node scatters from its leader. With one rank per
    /// node, rsmpi's own scatter after the checks.
    ///
    /// # Errors
    ///
    /// As [`Hierarchy::rooted_check`](crate::hier::Hierarchy::rooted_check), then any rank's failure, on every rank.
    pub(crate) fn scatter(&self, net: Net<'_>, call: Rooted<ScatterBufs<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Rooted { bufs, root, local: root_local, elem, algorithm } = call;
        let p = parent.size() as usize;
        let asked = algorithm.claim(ctx.overrides);
        let block = self.rooted_check(net, Kind::Scatter, root, asked, bufs.claim(p, elem), "send")?;
        if self.direct() {
            // A variable zcoll cannot read is the same error as on the other paths.
            algorithm.readable(ctx.overrides)?;
            let at = parent.process_at_rank(root);
            match bufs {
                _ if block == 0 => {}
                ScatterBufs::Root { send, recv: Some(recv) } => at.scatter_into_root(send, recv),
                ScatterBufs::Root { send, recv: None } => {
                    at.scatter_into_root(send, &mut vec![0u8; block][..])
                }
                ScatterBufs::Leaf { recv } => at.scatter_into(recv),
            }
            return Ok(());
        }
        let root_send = match &bufs {
            ScatterBufs::Root { send, .. } => Some(*send),
            ScatterBufs::Leaf { .. } => None,
        };
        let layout = Layout::new(|r| self.node_of(r as i32), p, self.nodes(), block);
        let Stand { root_node, here, leader } = self.stand(ctx, root);
        let mut result = Ok(());

        // 1. The root's leader needs the whole buffer.
        let mut full = Scratch::empty();
        if here && root_local != 0 {
            if leader {
                full = Scratch::zeroed(p * block, ctx.ctl.loads_heaps());
            }
            result = relay(ctx, Kind::Scatter, root, root_local, 0, root_send.unwrap_or(&[]), &mut full);
        }

        // 2. Every leader gets its node's blocks.
        let mut part = Scratch::empty();
        if let Some(leaders) = self.leaders() {
            part = Scratch::zeroed(layout.counts[self.my_node()] as usize, ctx.ctl.loads_heaps());
            let mut spot = Spot::new();
            let from = leaders.process_at_rank(root_node as i32);
            if block == 0 {
                // Nothing to send: every block is empty on every rank.
            } else if here {
                let ranked = if root_local == 0 { root_send.unwrap_or(&[]) } else { &full[..] };
                let packed_store;
                let packed = if layout.identity {
                    ranked
                } else {
                    packed_store = layout.pack(ranked);
                    &packed_store[..]
                };
                let sends = Partition::new(to_mpi::send(packed), &layout.counts[..], &layout.displs[..]);
                from.scatter_varcount_into_root(&sends, to_mpi::recv(&mut part[..], &mut spot));
            } else {
                from.scatter_varcount_into(to_mpi::recv(&mut part[..], &mut spot));
            }
        }

        // 3. Every node scatters from its leader. A root that is not its node's leader and
        // scatters in place receives its own block into scratch: it is already in place.
        let mut own;
        let node_bufs = match bufs {
            ScatterBufs::Root { recv, .. } if leader => ScatterBufs::Root { send: &part, recv },
            ScatterBufs::Leaf { recv } if leader => ScatterBufs::Root { send: &part, recv: Some(recv) },
            ScatterBufs::Root { recv: Some(recv), .. } | ScatterBufs::Leaf { recv } => {
                ScatterBufs::Leaf { recv }
            }
            ScatterBufs::Root { recv: None, .. } => {
                own = vec![0u8; block];
                ScatterBufs::Leaf { recv: &mut own }
            }
        };
        result = result.and(scatter(ctx, Rooted { bufs: node_bufs, root, local: 0, elem, algorithm }));
        self.agree(parent, result)
    }

    /// Gather across nodes: every node gathers to its leader, the leaders gather node parts to
    /// the root's leader over MPI, which hands the whole buffer to the root through the node.
    ///
    /// # Errors
    ///
    /// As [`Hierarchy::rooted_check`](crate::hier::Hierarchy::rooted_check), then any rank's failure, on every rank.
    pub(crate) fn gather(&self, net: Net<'_>, call: Rooted<GatherBufs<'_>>) -> Result<()> {
        let Net { parent, ctx } = net;
        let Rooted { bufs, root, local: root_local, elem, algorithm } = call;
        let p = parent.size() as usize;
        let asked = algorithm.claim(ctx.overrides);
        let block = self.rooted_check(net, Kind::Gather, root, asked, bufs.claim(p, elem), "receive")?;
        if self.direct() {
            algorithm.readable(ctx.overrides)?;
            let at = parent.process_at_rank(root);
            match bufs {
                _ if block == 0 => {}
                GatherBufs::Root { send: Some(send), recv } => at.gather_into_root(send, recv),
                GatherBufs::Root { send: None, recv } => {
                    let own = recv[root as usize * block..][..block].to_vec();
                    at.gather_into_root(&own[..], recv)
                }
                GatherBufs::Leaf { send } => at.gather_into(send),
            }
            return Ok(());
        }
        let layout = Layout::new(|r| self.node_of(r as i32), p, self.nodes(), block);
        let Stand { root_node, here, leader } = self.stand(ctx, root);
        let (send, mut recv): (Option<&[u8]>, Option<&mut [u8]>) = match bufs {
            GatherBufs::Leaf { send } => (Some(send), None),
            GatherBufs::Root { send, recv } => (send, Some(recv)),
        };
        // 1. Every node gathers to its leader, into the node's part.
        let mut part = if leader {
            Scratch::zeroed(layout.counts[self.my_node()] as usize, ctx.ctl.loads_heaps())
        } else {
            Scratch::empty()
        };
        let mut result = {
            let own = match (send, recv.as_deref()) {
                (Some(s), _) => s,
                // In place: the root's block is where it belongs in its buffer.
                (None, Some(r)) => &r[root as usize * block..][..block],
                (None, None) => &[],
            };
            let node_bufs = match leader {
                true => GatherBufs::Root { send: Some(own), recv: &mut part },
                false => GatherBufs::Leaf { send: own },
            };
            gather(ctx, Rooted { bufs: node_bufs, root, local: 0, elem, algorithm })
        };

        // 2. The root's leader gets every node's part: straight into the root's buffer when it
        // is the root and the nodes hold consecutive ranks, else into scratch.
        let direct = here && root_local == 0 && layout.identity;
        let mut full = Scratch::empty();
        if let Some(leaders) = self.leaders() {
            let to = leaders.process_at_rank(root_node as i32);
            if block == 0 {
                // Nothing to send: every block is empty on every rank.
            } else if here {
                let target: &mut [u8] = match recv.as_deref_mut() {
                    Some(r) if direct => r,
                    _ => {
                        full = Scratch::zeroed(p * block, ctx.ctl.loads_heaps());
                        &mut full
                    }
                };
                let mut spot = Spot::new();
                let target = to_mpi::recv(target, &mut spot);
                let mut parts = PartitionMut::new(target, &layout.counts[..], &layout.displs[..]);
                to.gather_varcount_into_root(to_mpi::send(&part[..]), &mut parts);
            } else {
                to.gather_varcount_into(to_mpi::send(&part[..]));
            }
        }

        // 3. Back into rank order, and to the root if it is not the leader. An in-place root
        // gets its own block back unchanged.
        if here && leader && !direct && block > 0 {
            match recv.as_deref_mut() {
                Some(r) => layout.unpack(&full, r),
                None if !layout.identity => {
                    let mut ranked = Scratch::zeroed(p * block, ctx.ctl.loads_heaps());
                    layout.unpack(&full, &mut ranked);
                    full = ranked;
                }
                None => {}
            }
        }
        if here && root_local != 0 {
            let send: &[u8] = if leader { &full } else { &[] };
            let to = recv.unwrap_or(&mut []);
            result = result.and(relay(ctx, Kind::Gather, root, 0, root_local, send, to));
        }
        self.agree(parent, result)
    }

    /// The checks of a rooted collective across nodes, before any node-level round: the same
    /// collective and root everywhere ([`Hierarchy::check`]), then [`judge`] over every rank's
    /// claim, and `p * block` fits an MPI count. Returns the block length.
    ///
    /// # Errors
    ///
    /// `Mismatch`, `InvalidRoot`, `LengthMismatch`, `BufferSize` or `Unsupported`, the same on
    /// every rank.
    pub(crate) fn rooted_check(
        &self,
        net: Net<'_>,
        kind: Kind,
        root: i32,
        algo: u64,
        mine: Claim,
        which: &'static str,
    ) -> Result<usize> {
        let parent = net.parent;
        let me = parent.rank();
        let p = parent.size() as usize;
        // With one rank per node, a valid call takes one allreduce: the common words, the
        // block every rank holds for the root's (the root's own, or its buffer's share in
        // place) and a word that is 0 where this rank's role and the root's buffer fit.
        // Those agreeing on every rank is what `judge` accepts; anything else takes the
        // checks below, which name the culprit.
        if self.direct() {
            let role = mine.root != (me == root);
            let (block, fits) = match (mine.root, mine.in_place) {
                (false, _) => (mine.block, true),
                (true, false) => (mine.block, mine.block.checked_mul(p) == Some(mine.whole)),
                (true, true) => (mine.whole / p, mine.whole % p == 0),
            };
            let bad = (role || !fits) as i64;
            let common = [kind as i64, root as i64, 0, 0, algo as i64, 0];
            let passed = super::direct_check(
                parent,
                common,
                [kind as i64, root as i64, block as i64, 0, algo as i64, bad],
            )?;
            if !(0..p as i32).contains(&root) {
                return Err(Error::InvalidRoot { rank: me, root, size: p as i32 });
            }
            if passed {
                return fits_mpi(block, p, me);
            }
        } else {
            // Lengths are judged below, with the roles: the common check sees none.
            self.check(net, kind, root, 0, algo)?;
        }
        let words = [(mine.aux2() & 3) as i64, mine.block as i64, mine.whole as i64, mine.elem as i64];
        let mut all = vec![0i64; 4 * p];
        parent.all_gather_into(&words[..], &mut all[..]);
        let claims: Vec<Claim> = all
            .chunks(4)
            .map(|w| Claim {
                root: w[0] & 1 == 1,
                in_place: w[0] & 2 == 2,
                block: w[1] as usize,
                whole: w[2] as usize,
                elem: w[3] as usize,
            })
            .collect();
        let block = judge(p, |q| claims[q], root as usize, me, |q| q as i32, which)?;
        fits_mpi(block, p, me)
    }
}

/// `block`, unless `p` blocks of it exceed an MPI count: `Unsupported` then.
fn fits_mpi(block: usize, p: usize, me: i32) -> Result<usize> {
    let whole = block * p;
    if whole > i32::MAX as usize {
        let what = format!("{whole} bytes in one collective across nodes (MPI counts are 32-bit)");
        return Err(Error::Unsupported { rank: me, what });
    }
    Ok(block)
}
