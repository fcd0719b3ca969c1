//! Alltoall: block `j` of rank `i`'s send buffer ends up as block `i` of rank `j`'s receive
//! buffer, for blocks of `n` bytes.
//!
//! Algorithms (cost for `p` ranks and blocks of `n` bytes, with the model of the book's
//! cost chapter: `alpha` per CMA call, `beta` per byte, `l` per page pinned, `s` page size,
//! `gamma(c)` the slowdown of `c` readers pinning one process's pages at once):
//!
//! - [`AlltoallAlgorithm::Pairwise`]: at step `t` rank `r` reads its block from the send
//!   buffer of rank `r xor t` (`p` a power of two) or `(r - t) mod p`, so that while the
//!   ranks keep pace every source has one reader. No waits between steps:
//!   `(p - 1)(alpha + n beta + ceil(n/s) l gamma(1))`.
//! - [`AlltoallAlgorithm::PairwiseWrite`]: the mirror: rank `r` writes block `d` of its
//!   send buffer into rank `d`'s receive buffer, `d = r xor t` or `(r + t) mod p`. Same
//!   cost; the writer pins the target's pages.
//! - [`AlltoallAlgorithm::Bruck`]: `ceil(log2 p)` steps. The receive buffer first holds the
//!   send blocks rotated (block `(r + i) mod p` at position `i`); at step `k` rank `r`
//!   reads the blocks at the positions with bit `k` set from rank `(r - 2^k) mod p`, all in
//!   one vectored CMA call, into a scratch buffer (up to `p / 2` blocks), and copies
//!   them to the same positions once its own reader has taken them. A final local
//!   permutation (block reversal and rotation, in place) puts every block where it
//!   belongs. With `m = ceil(log2 p)` steps and `B <= (p / 2) m` blocks moved in all:
//!   `m alpha + B n beta + B ceil(n/s) l + (B + 2 p) n beta_m`, where `beta_m` is a local
//!   memory copy per byte (the unpacking and the final permutation). Fewer calls than
//!   pairwise (`m` against `p - 1`) for about `m / 2` times the bytes, so it can only win
//!   for small blocks and many ranks. It needs the scratch buffer because a rank's
//!   positions are read by one peer while it receives the same positions from another.
//! - [`AlltoallAlgorithm::Staged`]: copy-in/copy-out through the staging areas, in the
//!   pairwise order `(r + t) mod p` out, `(r - t) mod p` in: every rank copies the block
//!   for its step's destination into its own area in chunks of half an area, and copies
//!   its step's source's chunk out of the source's area. `progress` counts the chunks a
//!   rank produced, `ack` the chunks it consumed; both are cumulative and deterministic,
//!   so a producer knows which acknowledgment frees a half.
//!   `(p - 1) ceil(n / 32 KiB) lambda + 2 (p - 1) n beta_m` per rank (`lambda` one flag
//!   handoff): two memory copies per byte, no system call, no permission: the path for
//!   small blocks and for `cico`.
//!
//! By default ([`AlltoallAlgorithm::Auto`]) the cost model chooses (`tune::select`):
//! small blocks take the staged path (a CMA call costs more than copying that much
//! twice), larger blocks the pairwise read, which has no dependency between steps and no
//! contention. Bruck is chosen only explicitly: on the 2-core machine measured so far it
//! never beat the staged path for small blocks nor pairwise for large ones (see the book).
//!
//! Across nodes (`hier/alltoall.rs`): every leader gathers its node's send buffers, the
//! leaders exchange node-to-node blocks with rsmpi's `all_to_all_varcount_into`, and every
//! leader scatters the received blocks in its node. The leaders pack and unpack through
//! two scratch buffers of `k p n` bytes each (`k` ranks on the node), so that nodes need
//! not hold consecutive ranks.

use super::algorithm::Algorithm;
use super::allgather::lengths;
use super::staged_private;
use super::{alltoall_op, check, check_staged, whole_blocks, Ctx};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Round, Span};
use crate::tune::{select, Algo};

/// How [`Comm::all_to_all_into_with`](crate::Comm::all_to_all_into_with) moves the data.
///
/// # Examples
///
/// ```
/// use zcoll::AlltoallAlgorithm;
/// assert_eq!("pairwise".parse(), Ok(AlltoallAlgorithm::Pairwise));
/// assert_eq!(AlltoallAlgorithm::Bruck.to_string(), "bruck");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AlltoallAlgorithm {
    /// Let zcoll choose by size and transport (`ZCOLL_ALLTOALL_ALGORITHM` overrides).
    #[default]
    Auto,
    /// Every rank reads its block from one source's send buffer per step.
    Pairwise,
    /// Every rank writes one block into one destination's receive buffer per step.
    PairwiseWrite,
    /// `ceil(log2 p)` steps of packed reads, for small blocks and many ranks.
    Bruck,
    /// Copy-in/copy-out through the control segment, pairwise.
    Staged,
    /// Arrival-aware (PAP-Direct): every rank writes its blocks straight into the peers
    /// that have already arrived, and comes back to the late ones as they arrive.
    PapWrite,
    /// Arrival-aware, read-based: every rank reads its blocks from the senders that have
    /// already arrived.
    PapRead,
    /// Arrival-aware copy-in/copy-out: blocks go into the receivers' point-to-point FIFOs
    /// as soon as the receiver has arrived, for small blocks and the `cico` transport.
    PapStaged,
    /// Arrival-aware across nodes (PAP-Shm-Direct): gather at the node leader, exchange
    /// among leaders in completion order, copy out per source node as each lands. On one
    /// node it runs as [`PapWrite`](Self::PapWrite).
    PapShmDirect,
}

impl AlltoallAlgorithm {
    /// Whether this is one of the arrival-aware algorithms (`coll::pap`).
    /// How PAP-Direct moves the blocks of an arrival-aware algorithm inside a node
    /// (`PapShmDirect` writes, as `PapWrite` does); `Read` for any other.
    pub(crate) fn pap_mode(self) -> super::pap::Mode {
        use super::pap::Mode;
        match self {
            AlltoallAlgorithm::PapWrite | AlltoallAlgorithm::PapShmDirect => Mode::Write,
            AlltoallAlgorithm::PapStaged => Mode::Staged,
            _ => Mode::Read,
        }
    }

    pub(crate) fn arrival_aware(self) -> bool {
        matches!(
            self,
            AlltoallAlgorithm::PapWrite
                | AlltoallAlgorithm::PapRead
                | AlltoallAlgorithm::PapStaged
                | AlltoallAlgorithm::PapShmDirect
        )
    }
}

super::algorithm::vocabulary! {
AlltoallAlgorithm("ZCOLL_ALLTOALL_ALGORITHM"): "auto, pairwise, pairwise-write, bruck, staged, pap-write, pap-read, pap-staged or pap-shm-direct",
[
    Auto => "auto",
    Pairwise => "pairwise",
    PairwiseWrite => "pairwise-write",
    Bruck => "bruck",
    Staged => "staged",
    PapWrite => "pap-write",
    PapRead => "pap-read",
    PapStaged => "pap-staged",
    PapShmDirect => "pap-shm-direct",
]
    /// The model's choice for blocks of `n` bytes on `p` ranks.
    fn model(n: usize, p: usize) -> AlltoallAlgorithm {
        match select::choose(select::Coll::Alltoall, n, p) {
            Algo::AlltoallStaged => AlltoallAlgorithm::Staged,
            _ => AlltoallAlgorithm::Pairwise,
        }
    }

    fn on_cico(self) -> Self {
        // The arrival-aware ones keep their protocol, through the FIFOs.
        match self.arrival_aware() {
            true => AlltoallAlgorithm::PapStaged,
            false => AlltoallAlgorithm::Staged,
        }
    }
}

/// Alltoall among the ranks of the node: block `j` of `send` lands as block `me` of local
/// rank `j`'s `recv`.
///
/// # Errors
///
/// On every rank of the node: `LengthMismatch` if a send or receive buffer is not `p`
/// blocks of rank 0's block length, `Mismatch` if the algorithms differ; a transport
/// error or a peer's failure during the copies.
pub(crate) fn alltoall(
    ctx: &Ctx<'_>,
    send: &[u8],
    recv: &mut [u8],
    algorithm: AlltoallAlgorithm,
    elem: usize,
) -> Result<()> {
    let p = ctx.ctl.size();
    let n = send.len() / p;
    let requested = algorithm;
    let algorithm = algorithm.resolve(n, ctx.ctl.size(), ctx.transport, ctx.overrides);
    match algorithm {
        Ok(a) if a.arrival_aware() => {
            return super::pap::alltoall(ctx, send, recv, a.pap_mode(), a.code(), elem)
        }
        _ => {}
    }
    let code = algorithm.as_ref().map_or(0, |a| a.code());
    // `Auto`'s staged path beyond one phase (the model prices single copies as CMA
    // calls) where the node maps its ranks' heaps: the call publishes its buffers, and
    // once every record is in, every rank reads its blocks in place if every send buffer
    // turns out to be mapped (`switch_to_loads`), else goes through the staging areas.
    let switchable = requested == AlltoallAlgorithm::Auto
        && matches!(algorithm, Ok(AlltoallAlgorithm::Staged))
        && super::heap_switchable::<AlltoallAlgorithm>(ctx, send.len());
    let word = alltoall_op(code, elem)
        | staged_private(matches!(algorithm, Ok(AlltoallAlgorithm::Staged)) && !switchable);
    // Only the pairwise writers let peers write into the receive buffers.
    let call = Call::new(word, send, recv, matches!(algorithm, Ok(AlltoallAlgorithm::PairwiseWrite)));
    let check_lengths = |r: &Round<'_>| {
        let op = r.call(0).op;
        let whole = |first: usize| whole_blocks(first, r.size(), op);
        lengths(r, whole, whole)
    };
    // A staged alltoall whose send buffer fits in the staging area travels with the
    // arrival: one flag phase, every rank copies its block straight out of each peer's area.
    // A rank stages its peers' blocks in rank order, not its own, which it copies to
    // itself: staging that one too put one more block on every reader's path (as in the
    // one-phase scatter). A send buffer of the wrong length fails the verdict, and what
    // it staged is never read.
    if matches!(algorithm, Ok(AlltoallAlgorithm::Staged)) && send.len() <= ctx.ctl.one_phase_bytes() {
        let me = ctx.ctl.me();
        let peers = [&send[..me * n], &send[(me + 1) * n..]];
        let round = check_staged(ctx, call, &[], &peers, false, check_lengths)?;
        for r in 0..p {
            let block = &mut recv[r * n..(r + 1) * n];
            match r == me {
                true => copy_block(&send[me * n..(me + 1) * n], block),
                // Rank `r` staged every block but its own: ours is `me`'s among the rest.
                false => round.read_staged(r, (me - (me > r) as usize) * n, block),
            }
        }
        return round.finish(Ok(()));
    }
    let mut round = check(ctx, call, false, check_lengths)?;
    let algorithm = match algorithm {
        Ok(_) if switchable && switch_to_loads(&round) => Ok(AlltoallAlgorithm::Pairwise),
        Ok(a) if switchable => {
            // Staged after all: nobody touches anybody's buffers, so the call ends as a
            // private one would.
            round.leave_early();
            Ok(a)
        }
        a => a,
    };
    let moved = algorithm.and_then(|a| exchange(&round, a, send, recv, n));
    round.finish(moved)
}

/// Whether a switchable alltoall reads its blocks in place: every rank's send buffer is
/// reached with loads (a pure function of the records, so every rank decides alike).
fn switch_to_loads(round: &Round<'_>) -> bool {
    (0..round.size()).all(|r| round.loads(r, false))
}

/// Moves the blocks of a checked alltoall.
fn exchange(
    round: &Round<'_>,
    algorithm: AlltoallAlgorithm,
    send: &[u8],
    recv: &mut [u8],
    n: usize,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    if n == 0 {
        return Ok(());
    }
    if algorithm == AlltoallAlgorithm::Bruck && p > 1 {
        return bruck(round, send, recv, n);
    }
    copy_block(&send[me * n..(me + 1) * n], &mut recv[me * n..(me + 1) * n]);
    // The partner of step t: xor for a power of two, else a rotation (source r - t,
    // destination r + t).
    let xor = p.is_power_of_two();
    match algorithm {
        AlltoallAlgorithm::Pairwise => (1..p).try_for_each(|t| {
            let src = if xor { me ^ t } else { (me + p - t) % p };
            round.read_send(src, me * n, &mut recv[src * n..(src + 1) * n])
        }),
        AlltoallAlgorithm::PairwiseWrite => (1..p).try_for_each(|t| {
            let dst = if xor { me ^ t } else { (me + t) % p };
            round.write_recv(&send[dst * n..(dst + 1) * n], dst, me * n)
        }),
        _ => round.stage_pairwise(send, recv, |src, dst| Span { len: n, from: dst * n, to: src * n }),
    }
}

/// Bruck's alltoall, read-based. `progress = k + 1` says a rank's positions are ready for
/// step `k`; `ack = k + 1` that it has taken its step-`k` blocks from its source.
fn bruck(round: &Round<'_>, send: &[u8], recv: &mut [u8], n: usize) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let whole = p * n;
    // Position i holds the block for rank (me + i) mod p.
    copy_block(&send[me * n..whole], &mut recv[..whole - me * n]);
    copy_block(&send[..me * n], &mut recv[whole - me * n..whole]);
    round.post_progress(1);
    let steps = (p - 1).ilog2() + 1;
    // The positions with bit k set: runs of 2^k blocks every 2^(k+1).
    let runs = |k: u32| {
        let d = 1usize << k;
        (d..p).step_by(2 * d).map(move |i| (i * n, d.min(p - i) * n))
    };
    let most = (0..steps).map(|k| runs(k).map(|r| r.1).sum::<usize>()).max().unwrap_or(0);
    let mut scratch = vec![0u8; most];
    for k in 0..steps {
        let d = 1usize << k;
        let (src, dst) = ((me + p - d) % p, (me + d) % p);
        let ranges: Vec<(usize, usize)> = runs(k).collect();
        let taken = &mut scratch[..ranges.iter().map(|r| r.1).sum()];
        round.wait_progress(src, k + 1)?;
        round.read_v(&round.peer_result(src), src, &ranges, taken)?;
        round.post_ack(k + 1);
        // Our blocks at these positions go to `dst`: wait until it has taken them.
        round.wait_ack(dst, k + 1)?;
        let mut at = 0;
        for (offset, len) in ranges {
            copy_block(&taken[at..at + len], &mut recv[offset..offset + len]);
            at += len;
        }
        round.post_progress(k + 2);
    }
    // Position i now holds the block from rank (me - i) mod p; block i of the result is
    // position (me - i) mod p: reverse the blocks, then rotate right by me + 1 blocks.
    for i in 0..p / 2 {
        let (head, tail) = recv.split_at_mut((p - 1 - i) * n);
        head[i * n..(i + 1) * n].swap_with_slice(&mut tail[..n]);
    }
    recv[..whole].rotate_right((me + 1) % p * n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::TransportKind;

    #[test]
    fn cico_takes_the_staged_path() {
        for a in AlltoallAlgorithm::ALL {
            let staged =
                if a.arrival_aware() { AlltoallAlgorithm::PapStaged } else { AlltoallAlgorithm::Staged };
            assert_eq!(
                a.resolve(1 << 20, 4, TransportKind::Cico, &crate::coll::Overrides::default()),
                Ok(staged)
            );
            assert_eq!(a.resolve(1, 4, TransportKind::Cma, &crate::coll::Overrides::default()), Ok(a));
        }
    }
}
