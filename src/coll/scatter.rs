//! Scatter: block `r` of the root's buffer ends up in rank `r`'s buffer.
//!
//! Algorithms, with the cost model of the CMA paper (Cluster '17): for `p` ranks on the
//! node and blocks of `n` bytes, `alpha` per CMA call, `beta` per byte copied, `l` per page
//! pinned, `s` the page size, and `gamma(c) = a c^2 + b c` the slowdown of `c` processes
//! pinning the pages of one process at once (`gamma(1) = 1`):
//!
//! - [`ScatterAlgorithm::ParallelRead`]: the root publishes its buffer; every other rank
//!   reads its own block with one CMA read, all at once.
//!   `alpha + n beta + ceil(n / s) l gamma(p - 1)`: one copy per byte and full parallelism,
//!   but `p - 1` readers contend for the root's page tables.
//! - [`ScatterAlgorithm::SequentialWrite`]: every non-root publishes its receive buffer;
//!   the root writes each block in turn. `(p - 1)(alpha + n beta + ceil(n / s) l)`: no
//!   contention, no parallelism.
//! - [`ScatterAlgorithm::ThrottledRead`] with factor `k`: as parallel read, but only `k`
//!   readers at a time: the `i`-th reader (counting from the root's successor) starts
//!   when reader `i - k` has finished, a point-to-point signal through its `progress`
//!   counter. `ceil((p - 1) / k)(alpha + n beta + ceil(n / s) l gamma(k))`, plus one
//!   wake-up latency per group. `k = 1` is a sequential read; `k >= p - 1` is parallel read.
//! - [`ScatterAlgorithm::Staged`]: copy-in/copy-out through the root's staging area in the
//!   control segment: the root copies block `r` in, rank `r` alone copies it out. Blocks up
//!   to half the area share it in cache-line-rounded slots, so small blocks need no wait;
//!   larger ones are pipelined in two halves. Two memory copies per byte, no system call,
//!   no permission: the path for small blocks and for the `cico` transport.
//!
//! # The default
//!
//! The cost model chooses (`tune::select`). Small blocks take the staged path: a CMA call
//! costs about 0.45 us, as much as copying several KiB twice through shared memory.
//! Larger blocks are read by parallel, sequential or throttled read with the `k` the model
//! predicts fastest. Throttled
//! read costs about `(p - 1)/k (alpha + n beta) + (p - 1) ceil(n / s) l (a k + b)`: the
//! copies want `k` large, the contention wants `k` small, and the optimum is
//! `k = sqrt(s beta / (a l))`. With this machine's figures (20 GB/s, 50 ns per page pinned,
//! two readers of one process 2.8x slower than one, so `a = 0.4, b = 0.6`) that is about 3.2;
//! 3 and 4 are within a few percent, and 4 keeps small nodes on the parallel read. A later
//! model fitted per machine replaces these thresholds.
//!
//! # Several nodes
//!
//! Across nodes (`hier/rooted.rs`): the root's node first moves the whole buffer to its leader (if the root
//! is not the leader), the leader sends every other node its blocks with an MPI scatterv
//! among the leaders, and every node scatters from its leader. Nodes found by the
//! shared-memory split need not hold consecutive ranks, so the root's leader packs the
//! blocks node by node in a scratch buffer when the ranks are not in node order (and sends
//! the user's buffer as it is when they are).

use super::algorithm::Algorithm;
use super::rooted::{blocks, peers, rooted_check, throttled, Claim, Measure, Rooted, RootedBufs, DEFAULT_K};
use super::staged_private;
use super::{op, Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Round, Toward};
use crate::tune::{select, Algo};

/// How [`Comm::scatter_into_root_with`](crate::Comm::scatter_into_root_with) and its
/// siblings move the blocks inside a node.
///
/// `ZCOLL_SCATTER_ALGORITHM=name[:k]` sets what `Auto` means (`throttled-read:3`).
///
/// # Examples
///
/// ```
/// use zcoll::ScatterAlgorithm;
/// assert_eq!("throttled-read:3".parse(), Ok(ScatterAlgorithm::ThrottledRead { k: 3 }));
/// assert_eq!("throttled-read".parse(), Ok(ScatterAlgorithm::ThrottledRead { k: 4 }));
/// assert_eq!(ScatterAlgorithm::ParallelRead.to_string(), "parallel-read");
/// assert_eq!(ScatterAlgorithm::ThrottledRead { k: 2 }.to_string(), "throttled-read:2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ScatterAlgorithm {
    /// Let zcoll choose by block size, node size and transport.
    #[default]
    Auto,
    /// Every non-root reads its block from the root's buffer, all at once.
    ParallelRead,
    /// The root writes every block into its rank's buffer, one after the other.
    SequentialWrite,
    /// Every non-root reads its block, `k` at a time (`k >= 1`).
    ThrottledRead {
        /// How many ranks read at once.
        k: u32,
    },
    /// Copy-in/copy-out through the root's staging area in the control segment.
    Staged,
}

super::algorithm::vocabulary! {
ScatterAlgorithm("ZCOLL_SCATTER_ALGORITHM"): "auto, parallel-read, sequential-write, throttled-read[:k] or staged",
[
    Auto => "auto",
    ParallelRead => "parallel-read",
    SequentialWrite => "sequential-write",
    ThrottledRead { k: DEFAULT_K } => "throttled-read",
    Staged => "staged",
]
    /// The model's choice for blocks of `block` bytes to each of `ranks` ranks.
    fn model(block: usize, ranks: usize) -> ScatterAlgorithm {
        match select::choose(select::Coll::Scatter, block, ranks) {
            Algo::ScatterStaged => ScatterAlgorithm::Staged,
            Algo::ScatterSequentialWrite => ScatterAlgorithm::SequentialWrite,
            Algo::ScatterThrottledRead(k) => ScatterAlgorithm::ThrottledRead { k: k as u32 },
            _ => ScatterAlgorithm::ParallelRead,
        }
    }
}

/// What a rank passes to a node-level scatter.
#[derive(Debug)]
pub(crate) enum ScatterBufs<'a> {
    /// The root (the source of this node's scatter): every block in local-rank order, and
    /// where its own block goes (`None`: it stays where it is, in place).
    Root { send: &'a [u8], recv: Option<&'a mut [u8]> },
    /// Any other rank: where its block goes.
    Leaf { recv: &'a mut [u8] },
}

impl RootedBufs for ScatterBufs<'_> {
    type Algorithm = ScatterAlgorithm;
}

impl ScatterBufs<'_> {
    /// The block length this rank asks for, with `ranks` ranks in the scatter.
    pub(crate) fn block(&self, ranks: usize) -> usize {
        match self {
            ScatterBufs::Root { recv: Some(r), .. } | ScatterBufs::Leaf { recv: r } => r.len(),
            ScatterBufs::Root { send, recv: None } => send.len() / ranks.max(1),
        }
    }

    /// What this rank claims, for the checks across nodes (`Hierarchy::rooted_check`), with `ranks`
    /// ranks in the scatter and elements of `elem` bytes.
    pub(crate) fn claim(&self, ranks: usize, elem: usize) -> Claim {
        let root_send = match self {
            ScatterBufs::Root { send, .. } => Some(*send),
            ScatterBufs::Leaf { .. } => None,
        };
        Claim {
            root: root_send.is_some(),
            in_place: matches!(self, ScatterBufs::Root { recv: None, .. }),
            block: self.block(ranks),
            whole: root_send.map_or(0, <[u8]>::len),
            elem,
        }
    }
}

/// Scatters inside the node from local rank `src`. See [`Rooted`] for the rest of the call.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn scatter(ctx: &Ctx<'_>, call: Rooted<ScatterBufs<'_>>) -> Result<()> {
    let Rooted { bufs, root, local: src, elem, algorithm } = call;
    let size = ctx.ctl.size();
    let claim = bufs.claim(size, elem);
    let block = claim.block;
    let algorithm = algorithm.resolve(block, size, ctx.transport, ctx.overrides);
    let (code, k) = algorithm.as_ref().map(|a| a.wire()).unwrap_or((0, 0));
    let (send, recv) = match &bufs {
        ScatterBufs::Root { send, recv } => {
            (send.as_ptr() as usize, recv.as_ref().map_or(0, |r| r.as_ptr() as usize))
        }
        ScatterBufs::Leaf { recv } => (0, recv.as_ptr() as usize),
    };
    let call = Call {
        op: op(Kind::Scatter, code, k) | staged_private(matches!(algorithm, Ok(ScatterAlgorithm::Staged))),
        root: root as i64,
        send,
        send_len: claim.whole,
        recv,
        recv_len: block,
        // Only the receivers of a sequential write let a peer write into their buffer.
        recv_writable: matches!(algorithm, Ok(ScatterAlgorithm::SequentialWrite)) && !claim.root,
        aux: src as u64,
        aux2: claim.aux2(),
    };
    let measure = Measure { block: |c| c.recv_len, whole: |c| c.send_len, which: "send" };
    // A staged scatter whose blocks all fit in the staging area travels with the root's
    // arrival: one flag phase, every rank copies its block straight out of the root's area.
    if matches!(algorithm, Ok(ScatterAlgorithm::Staged))
        && block.saturating_mul(size) <= ctx.ctl.one_phase_bytes()
    {
        let root_send = match &bufs {
            ScatterBufs::Root { send, .. } => Some(*send),
            ScatterBufs::Leaf { .. } => None,
        };
        // The peers' blocks, in rank order: the root's own is its own copy, and staging it
        // too cost a copy of one more block on the path of every leaf (at 2 ranks and 2
        // KiB, twice the bytes). A send buffer of the wrong length fails the verdict:
        // stage nothing then.
        let staged: [&[u8]; 2] = match root_send.filter(|s| Some(s.len()) == block.checked_mul(size)) {
            Some(s) => [&s[..src * block], &s[(src + 1) * block..]],
            None => [&[], &[]],
        };
        // The root only gives: where its buffer holds exactly one block per rank (what it
        // can check alone, as a root outside the communicator), it leaves at once where it
        // can (the verdict deferred: `Control::leave_staged`), and the leaves judge the
        // round. Its own block is its own copy, made once it has left.
        if root_send.is_some_and(|s| block.checked_mul(size) == Some(s.len()))
            && ctx.ctl.me() == src
            && ctx.may_leave(root)
        {
            ctx.ctl.leave_staged(&call, &[], &staged)?;
            if let ScatterBufs::Root { send, recv: Some(recv) } = bufs {
                copy_block(&send[src * block..(src + 1) * block], recv);
            }
            return Ok(());
        }
        let round = rooted_check(ctx, call, Some(&staged), src, measure)?;
        match bufs {
            ScatterBufs::Root { send, recv: Some(recv) } => {
                copy_block(&send[src * block..(src + 1) * block], recv)
            }
            ScatterBufs::Root { recv: None, .. } => {}
            ScatterBufs::Leaf { recv } => {
                let me = round.me();
                round.read_staged(src, (me - (me > src) as usize) * block, recv)
            }
        }
        return round.finish(Ok(()));
    }
    let round = rooted_check(ctx, call, None, src, measure)?;
    let moved = algorithm.and_then(|a| move_blocks(&round, a, bufs, src, block));
    round.finish(moved)
}

fn move_blocks(
    round: &Round<'_>,
    algorithm: ScatterAlgorithm,
    bufs: ScatterBufs<'_>,
    src: usize,
    block: usize,
) -> Result<()> {
    let (me, size) = (round.me(), round.size());
    let part = |r: usize| r * block..(r + 1) * block;
    match bufs {
        ScatterBufs::Root { send, recv } => {
            let moved = match algorithm {
                ScatterAlgorithm::SequentialWrite => {
                    peers(src, size).try_for_each(|r| round.write_recv(&send[part(r)], r, 0))
                }
                ScatterAlgorithm::Staged => {
                    round.stage_parts(Toward::Peers, src, &blocks(size, block), send, &mut [])
                }
                _ => Ok(()),
            };
            // The root's own block last: no peer waits for it, and copied first it
            // delayed every staged or written block (a third copy on the critical path
            // of a staged scatter to one peer).
            if let Some(recv) = recv {
                copy_block(&send[part(src)], recv);
            }
            moved
        }
        ScatterBufs::Leaf { recv } => {
            let read = |recv: &mut [u8]| round.read_send(src, part(me).start, recv);
            match algorithm {
                ScatterAlgorithm::ParallelRead => read(recv),
                ScatterAlgorithm::ThrottledRead { k } => throttled(round, src, k, || read(recv)),
                ScatterAlgorithm::Staged => {
                    round.stage_parts(Toward::Peers, src, &blocks(size, block), &[], recv)
                }
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_size_ranks_and_transport() {
        use crate::coll::Overrides;
        use crate::transport::TransportKind::*;
        use ScatterAlgorithm::*;
        let none = Overrides::default();
        // The model chooses on CMA nodes (tune::select's tests cover its choices); a cico
        // node always stages.
        let want = match select::choose(select::Coll::Scatter, 64, 8) {
            Algo::ScatterStaged => Staged,
            Algo::ScatterSequentialWrite => SequentialWrite,
            Algo::ScatterThrottledRead(k) => ThrottledRead { k: k as u32 },
            _ => ParallelRead,
        };
        assert_eq!(Auto.resolve(64, 8, Cma, &none), Ok(want));
        assert_eq!(Auto.resolve(1 << 20, 8, Cico, &none), Ok(Staged));
        assert_eq!(SequentialWrite.resolve(1, 8, Cico, &none), Ok(Staged));
        assert_eq!(ThrottledRead { k: 2 }.resolve(1, 8, Cma, &none), Ok(ThrottledRead { k: 2 }));
        assert!(matches!(
            ThrottledRead { k: 0 }.resolve(1, 8, Cma, &none),
            Err(crate::error::Error::Config { .. })
        ));
        // The variable, as read when the `Comm` was built, decides what `Auto` means.
        let set = Overrides::with(&[("ZCOLL_SCATTER_ALGORITHM", "throttled-read:3")]);
        assert_eq!(Auto.resolve(64, 8, Cma, &set), Ok(ThrottledRead { k: 3 }));
        assert_eq!(Staged.resolve(64, 8, Cma, &set), Ok(Staged), "an explicit choice wins");
        let bad = Overrides::with(&[("ZCOLL_SCATTER_ALGORITHM", "throttled-read:0")]);
        assert!(matches!(Auto.resolve(64, 8, Cma, &bad), Err(crate::error::Error::Config { .. })));
    }
}
