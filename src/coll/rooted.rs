//! What scatter and gather share: the checks of a rooted collective, the throttled chain,
//! the choice of an algorithm from the environment, and the pieces of the two-level
//! versions (the relay through a node, the layout of node parts among the leaders, the
//! checks across nodes).

use super::{check, check_staged, op, BadLength, Ctx, Kind};
use crate::error::{Error, Result};
use crate::sync::copy_block;
use crate::sync::{Call, Round, Toward};
use crate::transport::TransportKind;
use std::cell::Cell;
use std::ops::Range;

/// The throttling factor of the default and of a bare `throttled-read` in the environment.
pub(crate) const DEFAULT_K: u32 = 4;

pub(crate) use crate::error::ROLE;

/// One rank's call of a rooted collective (scatter, gather, scatterv, gatherv) as it goes
/// down the layers: its buffers, the root as the user gave it (a rank of the whole
/// communicator, published for the checks), the local rank the blocks leave from or
/// arrive at on this node (the root's; in a node leg across nodes, the leader's), the
/// element size and the algorithm asked for.
pub(crate) struct Rooted<B: RootedBufs> {
    pub(crate) bufs: B,
    pub(crate) root: i32,
    pub(crate) local: usize,
    pub(crate) elem: usize,
    pub(crate) algorithm: B::Algorithm,
}

/// The buffers of one rooted collective, which name its algorithm enum.
pub(crate) trait RootedBufs {
    /// The collective's algorithms.
    type Algorithm;
}

/// How the calls of a rooted collective measure: every rank's block, and the root's buffer
/// that holds all blocks (named `which` in `BufferSize`).
#[derive(Clone, Copy)]
pub(crate) struct Measure {
    pub(crate) block: fn(&Call) -> usize,
    pub(crate) whole: fn(&Call) -> usize,
    pub(crate) which: &'static str,
}

/// A bit of `Call::aux2` beside a [`Claim`]: `Auto` (no override) chose this rank's
/// algorithm, so the call may change it after the arrival, from the published records
/// (the gather's switch away from a write, `gather::settle`). Not part of the claim: the
/// checks ignore it.
pub(crate) const AUTO_CHOSE: u64 = 1 << 63;

/// Where two bits of `Call::aux2` beside [`AUTO_CHOSE`] say what this rank's model runs
/// instead of the write it chose where the blocks cross with CMA (`gather::OverCma`). Not
/// part of the claim either.
pub(crate) const OVER_CMA_SHIFT: u32 = 61;

/// The bits of `Call::aux2` that are not the [`Claim`]'s.
const NOT_CLAIM: u64 = AUTO_CHOSE | 3 << OVER_CMA_SHIFT;

/// What one rank's call of a rooted collective says, as the checks see it; the
/// variable-count ones (scatterv, gatherv) say the same, never in place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    /// It called the root's method.
    pub(crate) root: bool,
    /// It is the root and called the in-place method (its `block` means nothing then).
    pub(crate) in_place: bool,
    /// Its block, in bytes.
    pub(crate) block: usize,
    /// The root's buffer of all blocks, in bytes.
    pub(crate) whole: usize,
    /// Its element size, for errors counted in elements.
    pub(crate) elem: usize,
}

impl Claim {
    /// The flags and element size, as published in `Call::aux2`.
    pub(crate) fn aux2(&self) -> u64 {
        self.root as u64 | (self.in_place as u64) << 1 | (self.elem as u64) << 2
    }

    /// The claim in a call record, with the block and buffer lengths `measure` picks.
    pub(crate) fn from_call(c: &Call, measure: impl Fn(&Call) -> (usize, usize)) -> Claim {
        let (block, whole) = measure(c);
        Claim::from_words(c.aux2, block, whole)
    }

    /// The claim of a call whose `aux2` is `aux2`, with these block and buffer lengths.
    pub(crate) fn from_words(aux2: u64, block: usize, whole: usize) -> Claim {
        let elem = ((aux2 & !NOT_CLAIM) >> 2) as usize;
        Claim { root: aux2 & 1 == 1, in_place: aux2 & 2 == 2, block, whole, elem }
    }
}

/// The checks of a rooted collective beyond the common ones, over the claims of `p` ranks
/// (`claim(root)` is the root's, `rank_of` names ranks in errors): exactly the root
/// called the root's method; the root's buffer holds one block per rank; every block is
/// as long as the root's (for an in-place root, whose buffer is all it passed: as long as
/// every other). A pure function, so every rank reaches the same verdict. Returns the
/// block length.
///
/// # Errors
///
/// `Mismatch` with [`ROLE`], `BufferSize` naming the root, or `LengthMismatch` (in bytes).
pub(crate) fn judge(
    p: usize,
    claim: impl Fn(usize) -> Claim,
    root: usize,
    me: i32,
    rank_of: impl Fn(usize) -> i32,
    which: &'static str,
) -> Result<usize> {
    if let Some(q) = (0..p).find(|&q| claim(q).root != (q == root)) {
        return Err(Error::Mismatch { rank: me, culprit: rank_of(q), what: ROLE });
    }
    let r = claim(root);
    let others = || (0..p).filter(|&q| q != root);
    let uneven = |block: usize| {
        others()
            .map(|q| (q, claim(q).block))
            .find(|&(_, b)| b != block)
            .map(|(q, found)| Error::LengthMismatch { rank: me, culprit: rank_of(q), expected: block, found })
    };
    let block = match (r.in_place, others().next()) {
        (true, None) => r.whole,
        (true, Some(first)) => {
            let block = claim(first).block;
            if let Some(e) = uneven(block) {
                return Err(e);
            }
            block
        }
        (false, _) => r.block,
    };
    if block.checked_mul(p) != Some(r.whole) {
        let elem = r.elem.max(1);
        let expected = block.saturating_mul(p) / elem;
        return Err(Error::BufferSize { rank: rank_of(root), which, expected, found: r.whole / elem });
    }
    match uneven(block) {
        Some(e) => Err(e),
        None => Ok(block),
    }
}

/// [`check`] for rooted collectives whose root is local rank `src`, with [`judge`] after
/// the common checks of collective and root, and before the algorithm's. With `staged`,
/// the call is private and this rank's outgoing bytes travel with its arrival (see
/// [`check_staged`]).
///
/// # Errors
///
/// As [`check`] and [`judge`], on every rank alike.
pub(crate) fn rooted_check<'c>(
    ctx: &Ctx<'c>,
    call: Call,
    staged: Option<&[&[u8]]>,
    src: usize,
    m: Measure,
) -> Result<Round<'c>> {
    let judged = Judged::default();
    let lengths = |r: &Round<'_>| {
        // The three words a claim is made of, not the whole record.
        let claim = |q| {
            let c =
                Call { send_len: r.send_len(q), recv_len: r.recv_len(q), aux2: r.aux2(q), ..Call::default() };
            Claim::from_call(&c, |c| ((m.block)(c), (m.whole)(c)))
        };
        let src = src.min(r.size() - 1);
        judged.keep(judge(r.size(), claim, src, r.rank_of(r.me()), |q| r.rank_of(q), m.which).map(drop))
    };
    let checked = match staged {
        Some(parts) => check_staged(ctx, call, &[], parts, true, lengths),
        None => check(ctx, call, true, lengths),
    };
    judged.outcome(checked)
}

/// The verdict of a collective's own judge (its lengths, roles, partitions), kept while
/// the round's common checks (collective, root, algorithm) run, so that it is reported
/// after those and before the algorithm's.
#[derive(Default)]
pub(crate) struct Judged(Cell<Option<Error>>);

impl Judged {
    /// Keeps the error of `verdict`, if any; the common length checks have nothing to
    /// add (`Ok`) and go on.
    pub(crate) fn keep(&self, verdict: Result<()>) -> std::result::Result<(), BadLength> {
        if let Err(e) = verdict {
            self.0.set(Some(e));
        }
        Ok(())
    }

    /// What the call returns once the common checks gave `checked`: a round that passed
    /// them ends with the kept error, on every rank; where the algorithms differ, they may
    /// differ only because the arguments do, so the kept error is reported instead.
    pub(crate) fn outcome<'c>(self, checked: Result<Round<'c>>) -> Result<Round<'c>> {
        match (checked, self.0.take()) {
            (Ok(round), Some(e)) => Err(round.finish(Err(e)).unwrap_err()),
            (Err(Error::Mismatch { what: "algorithm", .. }), Some(e)) => Err(e),
            (checked, _) => checked,
        }
    }
}

/// Block `r` of `size` blocks of `block` bytes, for every `r`: the parts of a staged
/// scatter or gather.
pub(crate) fn blocks(size: usize, block: usize) -> Vec<Range<usize>> {
    (0..size).map(|r| r * block..(r + 1) * block).collect()
}

/// The local ranks other than `root`, starting after it: the order of the throttled chain.
pub(crate) fn peers(root: usize, size: usize) -> impl Iterator<Item = usize> {
    (1..size).map(move |i| (root + i) % size)
}

/// Runs `io` as one of `k` concurrent movers: this rank, the `i`-th after `root`, starts
/// once the `(i - k)`-th has finished, then tells the `(i + k)`-th by its `progress`.
/// The signal is posted even if `io` fails, so no successor waits for ever.
pub(crate) fn throttled(
    round: &Round<'_>,
    root: usize,
    k: u32,
    io: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let size = round.size();
    let i = (round.me() + size - root - 1) % size;
    let k = k.max(1) as usize;
    let waited = if i >= k { round.wait_progress((root + 1 + i - k) % size, 1) } else { Ok(()) };
    let done = waited.and_then(|()| io());
    round.post_progress(1);
    done
}

/// The algorithm code of a relay round.
const RELAY: u8 = 0xff;

/// Copies `send` of local rank `from` into `recv` of local rank `to`, in a round of its own
/// that every rank of the node joins (with empty buffers): the `to` rank reads with CMA, or
/// the bytes are staged through `from`'s area on the `cico` transport. `kind` and `root`
/// are those of the collective it is part of.
///
/// # Errors
///
/// `LengthMismatch` if the two lengths differ, a transport error, or a peer's failure.
pub(crate) fn relay(
    ctx: &Ctx<'_>,
    kind: Kind,
    root: i32,
    from: usize,
    to: usize,
    send: &[u8],
    recv: &mut [u8],
) -> Result<()> {
    assert_ne!(from, to);
    let me = ctx.ctl.me();
    let call = Call {
        op: op(kind, RELAY, 0),
        root: root as i64,
        send: send.as_ptr() as usize,
        send_len: if me == from { send.len() } else { 0 },
        recv: recv.as_ptr() as usize,
        recv_len: if me == to { recv.len() } else { 0 },
        recv_writable: false,
        aux: from as u64,
        aux2: to as u64,
    };
    let round = check(ctx, call, true, |r| {
        let (expected, found) = (r.send_len(from), r.recv_len(to));
        if expected == found {
            Ok(())
        } else {
            Err(BadLength { culprit: to, expected, found })
        }
    })?;
    let moved = match ctx.transport {
        TransportKind::Cico => {
            let mut parts = vec![0..0; round.size()];
            parts[to] = 0..round.send_len(from);
            let recv = if me == to { recv } else { &mut [] };
            round.stage_parts(Toward::Peers, from, &parts, send, recv)
        }
        _ if me == to => round.read_send(from, 0, recv),
        _ => Ok(()),
    };
    round.finish(moved)
}

/// Where every rank's block sits in the buffer the leaders exchange: node by node (in
/// node order), each node's ranks in rank order.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The parent rank of the block at each position of the packed buffer.
    order: Vec<usize>,
    block: usize,
    /// Bytes of each node's blocks in the packed buffer, for MPI.
    pub(crate) counts: Vec<i32>,
    /// Where each node's blocks start in the packed buffer, for MPI.
    pub(crate) displs: Vec<i32>,
    /// Whether the packed order is the rank order (then no packing is needed).
    pub(crate) identity: bool,
}

impl Layout {
    /// The layout for `p` ranks in `nodes` nodes, rank `r` on node `node_of(r)`, with
    /// blocks of `block` bytes. `p * block` must fit an MPI count (checked by
    /// `Hierarchy::rooted_check`).
    pub(crate) fn new(node_of: impl Fn(usize) -> usize, p: usize, nodes: usize, block: usize) -> Layout {
        let mut order: Vec<usize> = (0..p).collect();
        order.sort_by_key(|&r| node_of(r)); // stable: rank order inside a node
        let mut counts = vec![0i32; nodes];
        for r in 0..p {
            counts[node_of(r)] += block as i32;
        }
        let displs = counts
            .iter()
            .scan(0i32, |at, &c| {
                let d = *at;
                *at += c;
                Some(d)
            })
            .collect();
        let identity = order.iter().enumerate().all(|(i, &r)| i == r);
        Layout { order, block, counts, displs, identity }
    }

    /// The blocks of `ranked` (rank order) in packed order.
    pub(crate) fn pack(&self, ranked: &[u8]) -> Vec<u8> {
        let b = self.block;
        self.order.iter().flat_map(|&r| &ranked[r * b..(r + 1) * b]).copied().collect()
    }

    /// Puts the blocks of `packed` back in rank order into `ranked`.
    pub(crate) fn unpack(&self, packed: &[u8], ranked: &mut [u8]) {
        let b = self.block;
        for (i, &r) in self.order.iter().enumerate() {
            copy_block(&packed[i * b..(i + 1) * b], &mut ranked[r * b..(r + 1) * b]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_names_the_rank_at_fault() {
        let leaf = |block| Claim { block, elem: 4, ..Claim::default() };
        let root = |block, whole, in_place| Claim { root: true, in_place, block, whole, elem: 4 };
        let names = |q: usize| 10 + q as i32;
        let judge = |claims: &[Claim]| judge(claims.len(), |q| claims[q], 1, 7, names, "send");
        assert_eq!(judge(&[leaf(8), root(8, 24, false), leaf(8)]), Ok(8));
        assert_eq!(judge(&[leaf(8), root(0, 24, true), leaf(8)]), Ok(8));
        assert_eq!(
            judge(&[leaf(8), leaf(8), leaf(8)]),
            Err(Error::Mismatch { rank: 7, culprit: 11, what: ROLE })
        );
        assert_eq!(
            judge(&[root(8, 24, false), root(8, 24, false), leaf(8)]),
            Err(Error::Mismatch { rank: 7, culprit: 10, what: ROLE })
        );
        // The root's buffer, in elements, naming the root.
        let short = Error::BufferSize { rank: 11, which: "send", expected: 6, found: 5 };
        assert_eq!(judge(&[leaf(8), root(8, 20, false), leaf(8)]), Err(short.clone()));
        assert_eq!(judge(&[leaf(8), root(0, 20, true), leaf(8)]), Err(short));
        // A block of another length, in bytes, against the root's (or, in place, the others').
        let long = Error::LengthMismatch { rank: 7, culprit: 12, expected: 8, found: 12 };
        assert_eq!(judge(&[leaf(8), root(8, 24, false), leaf(12)]), Err(long.clone()));
        assert_eq!(judge(&[leaf(8), root(0, 24, true), leaf(12)]), Err(long));
        // One rank in place: its buffer is its block.
        assert_eq!(super::judge(1, |_| root(0, 12, true), 0, 0, names, "send"), Ok(12));
    }

    #[test]
    fn layouts_pack_nodes_in_rank_order() {
        // Ranks 0 and 2 on node 0, 1 and 3 on node 1, 4 alone on node 2.
        let node_of = [0, 1, 0, 1, 2];
        let l = Layout::new(|r| node_of[r], 5, 3, 2);
        assert_eq!(l.order, [0, 2, 1, 3, 4]);
        assert_eq!(
            (l.counts.as_slice(), l.displs.as_slice(), l.identity),
            (&[4, 4, 2][..], &[0, 4, 8][..], false)
        );
        let ranked: Vec<u8> = (0..10).collect();
        let packed = l.pack(&ranked);
        assert_eq!(packed, [0, 1, 4, 5, 2, 3, 6, 7, 8, 9]);
        let mut back = vec![0; 10];
        l.unpack(&packed, &mut back);
        assert_eq!(back, ranked);
        // Consecutive nodes: the packed order is the rank order.
        let l = Layout::new(|r| r / 2, 5, 3, 3);
        assert!(l.identity);
        assert_eq!((l.counts.as_slice(), l.displs.as_slice()), (&[6, 6, 3][..], &[0, 6, 12][..]));
    }
}
