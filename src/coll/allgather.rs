//! Allgather: every rank's block of `n` bytes ends up, in rank order, in every rank's
//! receive buffer.
//!
//! Algorithms (cost for `p` ranks and blocks of `n` bytes, with the model of the book's
//! cost chapter: `alpha` per CMA call, `beta` per byte, `l` per page pinned, `s` page size,
//! `gamma(c)` the slowdown of `c` readers pinning one process's pages at once):
//!
//! - [`AllgatherAlgorithm::RingNeighbor`]`(j)`: at step `t` rank `r` reads, from rank
//!   `(r - j) mod p`'s receive buffer, the block that rank received at step `t - 1` (its
//!   own block at step 1). Each buffer has one reader: `(p - 1)(alpha + n beta +
//!   ceil(n/s) l)`, but each step waits for the neighbour's previous one (a chain of
//!   `p - 1` dependent copies). Any `j` with `gcd(p, j) = 1` visits every block.
//! - [`AllgatherAlgorithm::RingSourceRead`]: at step `t` rank `r` reads block
//!   `(r - t) mod p` straight from its owner's send buffer. No waits between steps, and
//!   while the ranks keep pace every owner has one reader per step:
//!   `(p - 1)(alpha + n beta + ceil(n/s) l gamma(1))`.
//! - [`AllgatherAlgorithm::RingSourceWrite`]: the mirror: rank `r` writes its block into
//!   rank `(r + t) mod p`'s receive buffer at step `t`. Same cost; the writer pins the
//!   target's pages.
//! - [`AllgatherAlgorithm::RecursiveDoubling`]: `log2 p` steps; at step `k` a rank reads
//!   the `2^k` blocks its partner `r xor 2^k` holds, one contiguous range of the partner's
//!   receive buffer. `log2 p alpha + (p - 1) n beta + (p - 1) ceil(n/s) l`: fewest calls for
//!   contiguous data. For `p` not a power of two, with `q = 2^floor(log2 p)`, rank
//!   `r < p - q` first reads rank `r + q`'s block and stands for it, and rank `r + q` reads
//!   the whole result from rank `r` at the end: two more steps (`2 alpha + (p - 1) n beta`
//!   on those ranks), and two ranges per step.
//! - [`AllgatherAlgorithm::Bruck`]: `ceil(log2 p)` steps; at step `k` rank `r` reads the
//!   first `min(2^k, p - 2^k)` blocks of rank `(r + 2^k) mod p`, kept in rotated order (the
//!   own block first) in the receive buffer itself.
//!   `ceil(log2 p) alpha + (p - 1) n beta + (p - 1) ceil(n/s) l`, plus a final local
//!   rotation of `p n` bytes. The rotation is done in place (`slice::rotate_right`), so no
//!   scratch buffer is needed, but it must wait until the ranks that read from this buffer
//!   have finished: one more wait than recursive doubling, and every `p` works alike.
//! - [`AllgatherAlgorithm::Staged`]: copy-in/copy-out through the staging areas of the
//!   control segment, in levels of half an area: every rank copies a chunk of its block
//!   into its own area, then copies the same chunk of every peer's block out of theirs.
//!   `ceil(n / 32 KiB)` synchronizations, two memory copies per byte (`n` in,
//!   `(p - 1) n` out per rank), no system call and no permission: the path for small
//!   blocks and for the `cico` transport.
//!
//! By default ([`AllgatherAlgorithm::Auto`]) the cost model chooses (`tune::select`):
//! small blocks take the staged path, since one CMA call (about 0.45 us, plus pinning)
//! costs more than copying a few KiB twice; larger blocks take ring-source read, the one
//! single-copy algorithm with no dependency between steps and one reader per source, or
//! recursive doubling where the model predicts fewer start-ups win.
//!
//! Across nodes (`hier/allgather.rs`): the node's blocks are gathered at its leader, the
//! leaders exchange node blocks with rsmpi's `all_gather_varcount_into`, and every leader
//! broadcasts the full result in its node. Nodes need not hold consecutive ranks, so the
//! leaders pack and unpack through scratch buffers: `k n` bytes for the node's blocks and
//! `p n` for the exchange.

use super::algorithm::Algorithm;
use super::staged_private;
use super::{
    all_equal, check, check_staged, from_inline, inline_word, op, BadLength, Ctx, Kind, INLINE_BYTES,
};
use crate::error::{Error, Result};
use crate::sync::copy_block;
use crate::sync::{Call, Round};
use crate::tune::{select, Algo};

/// How [`Comm::all_gather_into_with`](crate::Comm::all_gather_into_with) moves the data.
///
/// # Examples
///
/// ```
/// use zcoll::AllgatherAlgorithm;
/// assert_eq!("ring-neighbor:3".parse(), Ok(AllgatherAlgorithm::RingNeighbor(3)));
/// assert_eq!("bruck".parse(), Ok(AllgatherAlgorithm::Bruck));
/// assert_eq!(AllgatherAlgorithm::RingNeighbor(1).to_string(), "ring-neighbor:1");
/// assert_eq!(AllgatherAlgorithm::RecursiveDoubling.to_string(), "recursive-doubling");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AllgatherAlgorithm {
    /// Let zcoll choose by size and transport (`ZCOLL_ALLGATHER_ALGORITHM` overrides).
    #[default]
    Auto,
    /// A ring in which every rank reads from its `j`-th left neighbour's receive buffer
    /// the block that neighbour received one step before; `j` must be coprime with the
    /// number of ranks of the node.
    RingNeighbor(u32),
    /// Every rank reads block `r - t` from its owner's send buffer at step `t`.
    RingSourceRead,
    /// Every rank writes its block into rank `r + t`'s receive buffer at step `t`.
    RingSourceWrite,
    /// `log2 p` steps reading doubling ranges from the partner's receive buffer.
    RecursiveDoubling,
    /// `ceil(log2 p)` steps reading rotated ranges, then a local rotation.
    Bruck,
    /// Copy-in/copy-out through the control segment.
    Staged,
}

impl AllgatherAlgorithm {
    /// The op word a call with this algorithm publishes (the ring's `j` included, so that
    /// ranks with different `j` disagree).
    pub(crate) fn op(self) -> u64 {
        let j = match self {
            AllgatherAlgorithm::RingNeighbor(j) => j,
            _ => 0,
        };
        op(Kind::Allgather, self.code(), j)
    }
}

super::algorithm::vocabulary! {
AllgatherAlgorithm("ZCOLL_ALLGATHER_ALGORITHM"): "auto, ring-neighbor[:j], ring-source-read, ring-source-write, recursive-doubling, bruck or staged",
[
    Auto => "auto",
    RingNeighbor(1) => "ring-neighbor",
    RingSourceRead => "ring-source-read",
    RingSourceWrite => "ring-source-write",
    RecursiveDoubling => "recursive-doubling",
    Bruck => "bruck",
    Staged => "staged",
]
    /// The model's choice for blocks of `n` bytes on `p` ranks.
    fn model(n: usize, p: usize) -> AllgatherAlgorithm {
        match select::choose(select::Coll::Allgather, n, p) {
            Algo::AllgatherStaged => AllgatherAlgorithm::Staged,
            Algo::AllgatherRecursiveDoubling => AllgatherAlgorithm::RecursiveDoubling,
            _ => AllgatherAlgorithm::RingSourceRead,
        }
    }
}

/// The lengths of an exchange: every rank's send is `send(first)` bytes and its receive
/// buffer `recv(first)`, where `first` is rank 0's send length.
pub(super) fn lengths(
    round: &Round<'_>,
    send: impl Fn(usize) -> usize,
    recv: impl Fn(usize) -> usize,
) -> std::result::Result<(), BadLength> {
    let first = round.send_len(0);
    all_equal(round, Round::send_len, send(first))?;
    all_equal(round, Round::recv_len, recv(first))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The block of an allgather in place whose buffer is `len` bytes of `elem`-byte elements
/// on `p` ranks: whole elements, so that a buffer that is not `p` blocks of them (3 `u64`s
/// on 2 ranks, although their 24 bytes are 2 blocks) fails the verdict, which compares
/// every receive length with `p` blocks.
pub(crate) fn in_place_block(len: usize, p: usize, elem: usize) -> usize {
    let elem = elem.max(1);
    len / p.max(1) / elem * elem
}

/// Allgather among the ranks of the node: `send` (or, with `None`, the block already at
/// `recv[me * n..]`) lands at `recv[r * n..]` of every local rank `r`.
///
/// # Errors
///
/// On every rank of the node: `LengthMismatch` if the blocks differ or a receive buffer is
/// not `p` blocks, `Mismatch` if the algorithms differ, `Unsupported` for a ring whose `j`
/// is not coprime with `p`; a transport error or a peer's failure during the copies.
pub(crate) fn allgather(
    ctx: &Ctx<'_>,
    send: Option<&[u8]>,
    recv: &mut [u8],
    algorithm: AllgatherAlgorithm,
    elem: usize,
) -> Result<()> {
    let (p, me) = (ctx.ctl.size(), ctx.ctl.me());
    let n = send.map_or_else(|| in_place_block(recv.len(), p, elem), <[u8]>::len);
    let algorithm = algorithm.resolve(n, ctx.ctl.size(), ctx.transport, ctx.overrides);
    let recv_addr = recv.as_mut_ptr() as usize;
    let prestaged = matches!(algorithm, Ok(AllgatherAlgorithm::Staged)) && n <= ctx.ctl.one_phase_bytes();
    // A receive buffer too short for this rank's block fails the verdict: stage nothing.
    let own: &[u8] = send.or_else(|| recv.get(me * n..(me + 1) * n)).unwrap_or(&[]);
    // A block of a few bytes travels in the call record, on the line that shows the
    // arrival: no staging line to fetch after the stamp. Every rank decides alike from
    // its block's length, which the verdict compares before anyone reads.
    let inline = prestaged && n <= INLINE_BYTES;
    let call = Call {
        op: algorithm.as_ref().map_or(op(Kind::Allgather, 0, 0), |a| a.op())
            | staged_private(matches!(algorithm, Ok(AllgatherAlgorithm::Staged))),
        root: 0,
        // In place, peers read this rank's block where it already is.
        send: send.map_or(recv_addr + me * n, |s| s.as_ptr() as usize),
        send_len: n,
        recv: recv_addr,
        recv_len: recv.len(),
        // Only the ring-source writers let peers write into the receive buffers.
        recv_writable: matches!(algorithm, Ok(AllgatherAlgorithm::RingSourceWrite)),
        aux: 0,
        aux2: if inline { inline_word(own) } else { 0 },
    };
    let check_lengths = |r: &Round<'_>| lengths(r, |n| n, |n| r.size().saturating_mul(n));
    // A staged allgather whose block fits in the staging area travels with the arrival:
    // one flag phase, every rank copies each block straight out of its owner's area.
    if prestaged {
        let parts: &[&[u8]] = if inline { &[] } else { &[own] };
        let round = check_staged(ctx, call, &[], parts, false, check_lengths)?;
        if let Some(send) = send {
            copy_block(send, &mut recv[me * n..(me + 1) * n]);
        }
        for r in (0..p).filter(|&r| r != me) {
            match inline {
                true => from_inline(round.aux2(r), &mut recv[r * n..(r + 1) * n]),
                false => round.read_staged(r, 0, &mut recv[r * n..(r + 1) * n]),
            }
        }
        return round.finish(Ok(()));
    }
    let round = check(ctx, call, false, check_lengths)?;
    let moved = algorithm.and_then(|a| gather_all(&round, a, send, recv, n));
    round.finish(moved)
}

/// Moves the blocks of a checked allgather.
fn gather_all(
    round: &Round<'_>,
    algorithm: AllgatherAlgorithm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    n: usize,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    if let AllgatherAlgorithm::RingNeighbor(j) = algorithm {
        if gcd(j as usize % p, p) != 1 {
            return Err(Error::Unsupported {
                rank: round.rank_of(me),
                what: format!(
                    "allgather ring-neighbor:{j} on a node of {p} ranks (j must be coprime with {p})"
                ),
            });
        }
    }
    if n == 0 {
        return Ok(());
    }
    if algorithm == AllgatherAlgorithm::Bruck && p > 1 {
        return bruck(round, send, recv, n);
    }
    if let Some(send) = send {
        copy_block(send, &mut recv[me * n..(me + 1) * n]);
    }
    if p == 1 {
        return Ok(());
    }
    match algorithm {
        AllgatherAlgorithm::RingNeighbor(j) => {
            let j = j as usize % p;
            let left = (me + p - j) % p;
            for t in 1..p {
                // The block `left` received at step t - 1 (its own at step 1).
                let b = (me + p - t * j % p) % p;
                let out = &mut recv[b * n..(b + 1) * n];
                if t == 1 {
                    round.read_send(left, 0, out)?;
                } else {
                    round.wait_progress(left, t as u32 - 1)?;
                    round.read_result(left, b * n, out)?;
                }
                round.post_progress(t as u32);
            }
            Ok(())
        }
        AllgatherAlgorithm::RingSourceRead => (1..p).try_for_each(|t| {
            let src = (me + p - t) % p;
            round.read_send(src, 0, &mut recv[src * n..(src + 1) * n])
        }),
        AllgatherAlgorithm::RingSourceWrite => {
            let mine = send.unwrap_or(&recv[me * n..(me + 1) * n]);
            (1..p).try_for_each(|t| {
                let dst = (me + t) % p;
                round.write_recv(mine, dst, me * n)
            })
        }
        AllgatherAlgorithm::RecursiveDoubling => recursive_doubling(round, recv, n),
        _ => round.stage_allgather(&mut recv[..p * n], n),
    }
}

/// Recursive doubling among the first `q = 2^floor(log2 p)` ranks, each standing for
/// itself and for rank `r + q` if that exists. `progress = k + 1` says a rank holds the
/// blocks of its group at level `k` (and of the group's extra ranks).
fn recursive_doubling(round: &Round<'_>, recv: &mut [u8], n: usize) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let levels = p.ilog2();
    let q = 1usize << levels;
    if me >= q {
        // An extra rank: its representative reads its block, and it reads the rest at the
        // end.
        let rep = me - q;
        round.wait_progress(rep, levels + 1)?;
        let theirs = round.peer_result(rep);
        let (before, after) = recv[..p * n].split_at_mut(me * n);
        round.read(&theirs, rep, 0, before)?;
        return round.read(&theirs, rep, (me + 1) * n, &mut after[n..]);
    }
    if me + q < p {
        let extra = me + q;
        round.read_send(extra, 0, &mut recv[extra * n..(extra + 1) * n])?;
    }
    round.post_progress(1);
    for k in 0..levels {
        let partner = me ^ (1 << k);
        let (g, size) = (partner >> k << k, 1usize << k);
        round.wait_progress(partner, k + 1)?;
        let theirs = round.peer_result(partner);
        round.read(&theirs, partner, g * n, &mut recv[g * n..(g + size) * n])?;
        let (lo, hi) = (g + q, (g + size + q).min(p));
        if lo < hi {
            round.read(&theirs, partner, lo * n, &mut recv[lo * n..hi * n])?;
        }
        round.post_progress(k + 2);
    }
    Ok(())
}

/// Bruck: the receive buffer holds block `(me + i) mod p` at position `i` until the final
/// rotation. `progress = k + 1` says a rank holds its first `2^k` positions.
fn bruck(round: &Round<'_>, send: Option<&[u8]>, recv: &mut [u8], n: usize) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    match send {
        Some(send) => copy_block(send, &mut recv[..n]),
        None => recv.copy_within(me * n..(me + 1) * n, 0),
    }
    round.post_progress(1);
    let steps = (p - 1).ilog2() + 1;
    for k in 0..steps {
        let d = 1usize << k;
        let src = (me + d) % p;
        let count = d.min(p - d);
        round.wait_progress(src, k + 1)?;
        round.read_result(src, 0, &mut recv[d * n..(d + count) * n])?;
        round.post_progress(k + 2);
    }
    // Rank me - 2^k read our first positions at its step k: wait for all of them before
    // moving anything.
    for k in 0..steps {
        round.wait_progress((me + p - (1 << k) % p) % p, k + 2)?;
    }
    recv[..p * n].rotate_right(me * n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::TransportKind;

    #[test]
    fn cico_takes_the_staged_path_and_auto_asks_the_model() {
        for a in AllgatherAlgorithm::ALL {
            assert_eq!(
                a.resolve(1 << 20, 4, TransportKind::Cico, &crate::coll::Overrides::default()),
                Ok(AllgatherAlgorithm::Staged)
            );
            assert_eq!(a.resolve(1, 4, TransportKind::Cma, &crate::coll::Overrides::default()), Ok(a));
        }
        for n in [1usize, 4096, 1 << 20] {
            let want = match select::choose(select::Coll::Allgather, n, 4) {
                Algo::AllgatherStaged => AllgatherAlgorithm::Staged,
                Algo::AllgatherRecursiveDoubling => AllgatherAlgorithm::RecursiveDoubling,
                _ => AllgatherAlgorithm::RingSourceRead,
            };
            let none = crate::coll::Overrides::default();
            assert_eq!(AllgatherAlgorithm::Auto.resolve(n, 4, TransportKind::Cma, &none), Ok(want));
        }
    }
}
