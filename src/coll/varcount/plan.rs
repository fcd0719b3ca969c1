//! How a variable-count call moves its bytes: the choice of `Auto`, the throttled chain
//! over the ranks that move bytes, and the layout of packed node parts.

use super::{bytes, range, Claim, Parts, Published};
use crate::error::Result;
use crate::sync::Round;
use crate::tune::{select, Algo};
use mpi::Count;
use std::ops::Range;

/// The mean block from which `Auto` never stages an allgatherv (see [`auto_stages`]).
pub(crate) const ALLGATHERV_STAGED_MAX: usize = 16 * 1024;
/// The mean block from which `Auto` never stages an alltoallv (see [`auto_stages`]).
pub(crate) const ALLTOALLV_STAGED_MAX: usize = 1024;

/// Whether `Auto` stages every block of an allgatherv or alltoallv whose blocks between
/// distinct ranks average `mean` bytes on `p` ranks: the cost model's choice for the
/// fixed-size collective `coll` with that block, and never from `max` bytes up. Below
/// `max` every block travels with its rank's arrival (one phase); above it the staged
/// path moves spans on a deadlock-free schedule that the model does not describe and
/// that costs several times more per byte than the fixed-size one. Measured at 2 ranks
/// (2 runs with the cores near), the one-phase allgatherv beats the ring of reads from 8
/// to 16 KiB blocks (2.2-3.6 against 3.6-5.4 us) and loses from 24 KiB (7.3-8.7 against
/// 5.4-9.5); with the cores far apart (3 runs, load 6.6) it still wins at 8 and 12 KiB
/// (10.9 against 14.2 us, 6.2 against 6.7) but loses at 16 KiB (16.6 against 12.7), hence
/// [`ALLGATHERV_STAGED_MAX`]; the alltoallv's [`ALLTOALLV_STAGED_MAX`] is older and
/// lower. Every rank computes `mean`
/// from the published counts, and the published [`select::fingerprint`] guarantees the
/// same parameters, so every rank decides alike. One path for the whole call: a mix of
/// staged and single-copy blocks would pay both paths' synchronisation.
pub(crate) fn auto_stages(coll: select::Coll, mean: usize, p: usize, max: usize) -> bool {
    mean < max && select::choose(coll, mean, p).is_staged()
}

/// The family `Auto` moves the blocks of a scatterv (`coll` = `Scatter`) or gatherv
/// (`Gather`) with: the cost model's choice for the fixed-size collective whose block is
/// the mean of the non-empty blocks between the root and the others. One family for the
/// whole call (a mix of staged and single-copy blocks pays both paths' rounds). Every rank
/// computes the blocks from the root's published partition, and the published
/// [`select::fingerprint`] guarantees the same parameters, so every rank decides alike.
pub(crate) fn auto_family(coll: select::Coll, blocks: &[Range<usize>], root: usize) -> Family {
    auto_family_with(coll, blocks, root, select::choose)
}

/// [`auto_family`] with a CMA write priced as such (`select::choose_over_cma`): the family
/// of a gatherv whose `Auto` chose the writes and whose blocks cross with CMA. Every rank
/// decides alike, as in [`auto_family`].
pub(crate) fn auto_family_over_cma(coll: select::Coll, blocks: &[Range<usize>], root: usize) -> Family {
    auto_family_with(coll, blocks, root, select::choose_over_cma)
}

/// [`auto_family`] with the model's choice from `choose(coll, bytes, p)`.
fn auto_family_with(
    coll: select::Coll,
    blocks: &[Range<usize>],
    root: usize,
    choose: impl Fn(select::Coll, usize, usize) -> Algo,
) -> Family {
    // The sum and count of the non-empty blocks, without allocating: this runs per call.
    let (sum, count) = blocks
        .iter()
        .enumerate()
        .filter(|&(r, b)| r != root && !b.is_empty())
        .fold((0usize, 0usize), |(sum, count), (_, b)| (sum + b.len(), count + 1));
    let Some(mean) = sum.checked_div(count) else {
        return Family::Staged; // nothing moves between ranks
    };
    match choose(coll, mean, blocks.len()) {
        Algo::ScatterStaged | Algo::GatherStaged => Family::Staged,
        Algo::ScatterThrottledRead(k) | Algo::GatherThrottledWrite(k) => Family::Direct(k),
        Algo::ScatterSequentialWrite | Algo::GatherSequentialRead => Family::ByRoot,
        _ => Family::Direct(usize::MAX),
    }
}

/// Runs `io` as member `pos` of `chain` (the ranks that move bytes, in order), `k` at a
/// time: member `pos` starts once member `pos - k` has finished, then tells member
/// `pos + k` through its `progress` (step 1). The signal is posted even if `io` fails, so
/// no successor waits for ever. Ranks outside the chain (zero-length blocks) neither wait
/// nor are waited for.
///
/// # Errors
///
/// `io`'s error, or a wait's.
pub(crate) fn chain(
    round: &Round<'_>,
    chain: &[usize],
    k: usize,
    io: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let Some(pos) = chain.iter().position(|&r| r == round.me()) else {
        return Ok(());
    };
    let waited = if pos >= k { round.wait_progress(chain[pos - k], 1) } else { Ok(()) };
    let done = waited.and_then(|()| io());
    if pos.saturating_add(k) < chain.len() {
        round.post_progress(1);
    }
    done
}

/// How the blocks of a rooted variable-count call move inside a node, once the algorithm
/// is settled: the parts staged through the root's area (empty ranges for the others),
/// the ranks that copy with CMA themselves in chain order and how many at a time, and
/// whether the root copies every block itself.
#[derive(Debug, Default)]
pub(crate) struct Moves {
    pub(crate) staged: Blocks,
    pub(crate) direct: smallvec::SmallVec<[usize; 16]>,
    pub(crate) k: usize,
    pub(crate) by_root: bool,
}

/// How a rooted variable-count call moves blocks, by family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// Every non-empty block through the root's staging area.
    Staged,
    /// Every non-root copies its own block, `k` at a time (`usize::MAX`: all at once).
    Direct(usize),
    /// The root copies every block, one after the other.
    ByRoot,
}

/// A byte range per rank: on the stack up to 16 ranks, so that a small call allocates
/// nothing.
pub(crate) type Blocks = smallvec::SmallVec<[Range<usize>; 16]>;

/// The blocks of a checked rooted call, as byte ranges in the buffer of its root, local
/// rank `root`, from the partition the root published; and how the family `family`
/// picks for the blocks that are still to move moves them: a rank that left the round
/// ([`Round::left`], a gatherv's leaf) staged its block with its arrival, which the root
/// copies out whatever the family, so `family` and the moves see it as empty.
pub(crate) fn root_blocks(
    round: &Round<'_>,
    root: usize,
    family: impl FnOnce(&[Range<usize>]) -> Family,
) -> (Blocks, Moves) {
    let p = round.size();
    let parts = Published { round, owner: root, at: 0 };
    let elem = root_elem(round, root);
    let blocks: Blocks = (0..p).map(|r| range(&parts, r, elem)).collect();
    let moving: Blocks =
        (0..p).map(|r| if r != root && round.left(r) { 0..0 } else { blocks[r].clone() }).collect();
    let moves = Moves::new(family(&moving), p, root, |r| moving[r].clone());
    (blocks, moves)
}

/// Where rank `me`'s block lies among the blocks a rooted call's root, local rank `root`,
/// staged with its arrival (every block but its own, in rank order): the bytes of the
/// blocks before it, from the partition the root published. What a leaf of a one-phase
/// scatterv needs, without the plan of every rank's moves ([`root_blocks`]): `O(me)` loads
/// of published words, no allocation. The partition passed the verdict (no negative count).
pub(crate) fn staged_before(round: &Round<'_>, root: usize, me: usize) -> usize {
    let parts = Published { round, owner: root, at: 0 };
    let elem = root_elem(round, root);
    (0..me).filter(|&r| r != root).map(|r| bytes(parts.block(r).0, elem)).sum()
}

/// The element size the root, local rank `root`, published in its claim (its `aux2`).
fn root_elem(round: &Round<'_>, root: usize) -> usize {
    Claim::from_words(round.aux2(root), 0, 0).elem
}

/// Block `r`'s byte range in the buffer of a rooted call's root, local rank `root`, from
/// the partition it published (checked by the verdict): [`root_blocks`] for one block.
pub(crate) fn root_block(round: &Round<'_>, root: usize, r: usize) -> Range<usize> {
    let parts = Published { round, owner: root, at: 0 };
    range(&parts, r, root_elem(round, root))
}

impl Moves {
    /// The moves of a call whose block `r` is `block(r)` (byte ranges in the root's
    /// buffer), `p` ranks, root `root`.
    pub(crate) fn new(family: Family, p: usize, root: usize, block: impl Fn(usize) -> Range<usize>) -> Moves {
        let peers = || (1..p).map(move |i| (root + i) % p).filter(|&r| !block(r).is_empty());
        let mut m = Moves {
            staged: Blocks::from_elem(0..0, p),
            direct: Default::default(),
            k: usize::MAX,
            by_root: false,
        };
        match family {
            Family::Staged => peers().for_each(|r| m.staged[r] = block(r)),
            Family::Direct(k) => {
                m.direct = peers().collect();
                m.k = k;
            }
            Family::ByRoot => m.by_root = true,
        }
        m
    }

    /// Whether anything goes through the staging area.
    pub(crate) fn staging(&self) -> bool {
        self.staged.iter().any(|r| !r.is_empty())
    }
}

/// Where every rank's block sits in the buffers the leaders exchange in a two-level call:
/// node by node (in node order), each node's ranks in rank order, blocks packed end to end.
#[derive(Debug)]
pub(crate) struct Packed {
    /// The offset of every rank's block in the packed buffer, in bytes.
    pub(crate) at: Vec<usize>,
    /// Every rank's block length, in bytes.
    pub(crate) len: Vec<usize>,
    /// Bytes of each node's blocks, for MPI.
    pub(crate) counts: Vec<Count>,
    /// Where each node's blocks start, for MPI.
    pub(crate) displs: Vec<Count>,
}

impl Packed {
    /// The layout of blocks of `len[r]` bytes for rank `r`, on node `node_of(r)` of
    /// `nodes`. The total must fit an MPI count (checked by the callers).
    pub(crate) fn new(len: Vec<usize>, node_of: impl Fn(usize) -> usize, nodes: usize) -> Packed {
        let p = len.len();
        let mut order: Vec<usize> = (0..p).collect();
        order.sort_by_key(|&r| node_of(r)); // stable: rank order inside a node
        let mut at = vec![0; p];
        let mut counts = vec![0 as Count; nodes];
        let mut offset = 0;
        for &r in &order {
            at[r] = offset;
            offset += len[r];
            counts[node_of(r)] += len[r] as Count;
        }
        let displs = counts
            .iter()
            .scan(0, |s, &c| {
                let d = *s;
                *s += c;
                Some(d)
            })
            .collect();
        Packed { at, len, counts, displs }
    }

    /// Block `r`'s range in the packed buffer.
    pub(crate) fn block(&self, r: usize) -> Range<usize> {
        self.at[r]..self.at[r] + self.len[r]
    }

    /// Block `r`'s range in its node's part of the packed buffer.
    pub(crate) fn in_node(&self, r: usize, node: usize) -> Range<usize> {
        let base = self.displs[node] as usize;
        self.at[r] - base..self.at[r] - base + self.len[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_skip_empty_blocks() {
        let blocks = [0..10, 10..10, 20..20_000, 5..6];
        let m = Moves::new(Family::Staged, 4, 0, |r| blocks[r].clone());
        assert_eq!(m.staged[..], [0..0, 0..0, 20..20_000, 5..6]);
        assert!(m.direct.is_empty() && !m.by_root);
        let m = Moves::new(Family::Direct(2), 4, 2, |r| blocks[r].clone());
        assert_eq!((m.direct.as_slice(), m.k), (&[3, 0][..], 2));
        assert!(!m.staging());
        assert!(Moves::new(Family::Staged, 4, 3, |r| blocks[r].clone()).staging());
    }

    #[test]
    fn auto_takes_the_models_family_for_the_mean_block() {
        use select::Coll::{Gather, Scatter};
        // The mean of the non-empty blocks other than the root's: 1000 and 3000 bytes.
        let blocks = [0..1_000_000, 0..1000, 0..0, 0..3000];
        let family = |coll, algo: Algo| {
            auto_family_with(coll, &blocks, 0, |c, bytes, p| {
                assert_eq!((c, bytes, p), (coll, 2000, 4));
                algo
            })
        };
        assert_eq!(family(Scatter, Algo::ScatterStaged), Family::Staged);
        assert_eq!(family(Scatter, Algo::ScatterParallelRead), Family::Direct(usize::MAX));
        assert_eq!(family(Scatter, Algo::ScatterThrottledRead(3)), Family::Direct(3));
        assert_eq!(family(Scatter, Algo::ScatterSequentialWrite), Family::ByRoot);
        assert_eq!(family(Gather, Algo::GatherStaged), Family::Staged);
        assert_eq!(family(Gather, Algo::GatherParallelWrite), Family::Direct(usize::MAX));
        assert_eq!(family(Gather, Algo::GatherThrottledWrite(2)), Family::Direct(2));
        assert_eq!(family(Gather, Algo::GatherSequentialRead), Family::ByRoot);
        // Only the root's block, or nothing: nothing moves between ranks, nothing asked.
        let never = |_: select::Coll, _: usize, _: usize| -> Algo { unreachable!("nothing to decide") };
        assert_eq!(auto_family_with(Scatter, &[0..8, 0..0], 0, never), Family::Staged);
        assert_eq!(auto_family_with(Gather, &[], 0, never), Family::Staged);
    }

    #[test]
    fn packed_layout_groups_nodes() {
        // Ranks 0 and 2 on node 0, 1 and 3 on node 1.
        let node_of = [0, 1, 0, 1];
        let l = Packed::new(vec![3, 0, 5, 2], |r| node_of[r], 2);
        assert_eq!(l.at, [0, 8, 3, 8]);
        assert_eq!((l.counts.as_slice(), l.displs.as_slice()), (&[8, 2][..], &[0, 8][..]));
        assert_eq!((l.block(2), l.in_node(3, 1)), (3..8, 0..2));
    }
}
