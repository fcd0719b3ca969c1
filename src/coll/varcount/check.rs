//! Publishing and judging partitions: the faults every rank finds alike in the
//! published counts and displacements, before any byte moves.

use crate::coll::algorithm::{self, Algorithm};
pub(crate) use crate::coll::rooted::Claim;
use crate::coll::rooted::{Judged, ROLE};
use crate::coll::Ctx;
use crate::error::{Error, Result};
use crate::sync::{Call, Meta, Payload, Round, Slots};
use crate::tune::select;
use mpi::Count;
use std::ops::Range;

/// Which buffer a partition cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Send,
    Recv,
}

impl Side {
    fn buffer(self) -> &'static str {
        match self {
            Side::Send => "send",
            Side::Recv => "receive",
        }
    }

    fn array(self, displacements: bool) -> &'static str {
        match (self, displacements) {
            (Side::Send, false) => "send counts",
            (Side::Send, true) => "send displacements",
            (Side::Recv, false) => "receive counts",
            (Side::Recv, true) => "receive displacements",
        }
    }
}

/// What is wrong with one rank's call, without naming ranks: the checks are pure functions
/// that return the first `(culprit, Fault)`, turned into an [`Error`] by [`Fault::error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It called the root's method and is not the root, or the reverse.
    Role,
    /// Its count (or displacement) array for `side` has `found` entries, not one per rank.
    Entries { side: Side, displacements: bool, found: usize },
    /// Block `index` of its `side` partition has a negative count or displacement.
    Negative { side: Side, index: usize, displacement: bool },
    /// Block `index` of its receive partition overlaps an earlier non-empty block.
    Overlap { index: usize },
    /// Its `side` buffer has `found` elements where its partition needs `expected`.
    Bounds { side: Side, expected: usize, found: usize },
    /// It passes `found` bytes where its partner's numbers say `expected`.
    Length { expected: usize, found: usize },
}

impl Fault {
    /// The error rank `me` reports for this fault of rank `culprit`, `p` ranks in all.
    pub(crate) fn error(self, me: i32, culprit: i32, p: usize) -> Error {
        match self {
            Fault::Role => Error::Mismatch { rank: me, culprit, what: ROLE },
            Fault::Entries { side, displacements, found } => {
                Error::BufferSize { rank: culprit, which: side.array(displacements), expected: p, found }
            }
            Fault::Negative { side, index, displacement } => Error::InvalidPartition {
                rank: me,
                culprit,
                which: side.buffer(),
                index,
                reason: if displacement { "negative displacement" } else { "negative count" },
            },
            Fault::Overlap { index } => Error::InvalidPartition {
                rank: me,
                culprit,
                which: Side::Recv.buffer(),
                index,
                reason: "overlaps another block",
            },
            Fault::Bounds { side, expected, found } => {
                Error::BufferSize { rank: culprit, which: side.buffer(), expected, found }
            }
            Fault::Length { expected, found } => Error::LengthMismatch { rank: me, culprit, expected, found },
        }
    }

    /// The fault as four words, to exchange over MPI.
    pub(crate) fn encode(this: Option<Fault>) -> [i64; 4] {
        let side = |s: Side| (s == Side::Recv) as i64;
        match this {
            None => [0, 0, 0, 0],
            Some(Fault::Role) => [1, 0, 0, 0],
            Some(Fault::Entries { side: s, displacements, found }) => {
                [2, side(s) | (displacements as i64) << 1, found as i64, 0]
            }
            Some(Fault::Negative { side: s, index, displacement }) => {
                [3, side(s) | (displacement as i64) << 1, index as i64, 0]
            }
            Some(Fault::Overlap { index }) => [4, 0, index as i64, 0],
            Some(Fault::Bounds { side: s, expected, found }) => [5, side(s), expected as i64, found as i64],
            Some(Fault::Length { expected, found }) => [6, 0, expected as i64, found as i64],
        }
    }

    /// The inverse of [`encode`](Self::encode).
    pub(crate) fn decode(w: &[i64]) -> Option<Fault> {
        let side = if w[1] & 1 == 1 { Side::Recv } else { Side::Send };
        let flag = w[1] & 2 == 2;
        Some(match w[0] {
            1 => Fault::Role,
            2 => Fault::Entries { side, displacements: flag, found: w[2] as usize },
            3 => Fault::Negative { side, index: w[2] as usize, displacement: flag },
            4 => Fault::Overlap { index: w[2] as usize },
            5 => Fault::Bounds { side, expected: w[2] as usize, found: w[3] as usize },
            6 => Fault::Length { expected: w[2] as usize, found: w[3] as usize },
            _ => return None,
        })
    }
}

/// The metadata words of one partition: the two array lengths, then `(count, displ)` for
/// each of `p` ranks (zeros past a short array, which the checks reject anyway).
pub(crate) fn partition_words(out: &mut impl Extend<u64>, p: usize, counts: &[Count], displs: &[Count]) {
    out.extend((0..partition_len(p)).map(|i| partition_word(counts, displs, i)));
}

/// [`partition_words`] written straight into a staging area from word `at` (`Filled`):
/// what a call publishes on every call, with no buffer of words built first.
#[inline]
pub(crate) fn write_partition(out: &Slots<'_>, at: usize, p: usize, counts: &[Count], displs: &[Count]) {
    out.set(at, partition_word(counts, displs, 0));
    match (counts.get(..p), displs.get(..p)) {
        // The common case, as one zip of the two arrays: this runs on every call.
        (Some(c), Some(d)) => out.set_from(at + 1, c.iter().zip(d).map(|(&c, &d)| block_word(c, d))),
        _ => out.set_from(at + 1, (1..p + 1).map(|i| partition_word(counts, displs, i))),
    }
}

/// Word `i` of a partition's metadata words: the two array lengths for `i = 0`, else
/// block `i - 1`'s ([`block_word`]), zeros past a short array.
fn partition_word(counts: &[Count], displs: &[Count], i: usize) -> u64 {
    let clamp = |n: usize| n.min(u32::MAX as usize) as u64;
    match i.checked_sub(1) {
        None => clamp(counts.len()) | clamp(displs.len()) << 32,
        Some(r) => block_word(counts.get(r).copied().unwrap_or(0), displs.get(r).copied().unwrap_or(0)),
    }
}

/// The metadata word of one block: its count (low 32 bits) and displacement (high 32 bits).
fn block_word(count: Count, displ: Count) -> u64 {
    count as u32 as u64 | (displ as u32 as u64) << 32
}

/// The number of metadata words of one partition for `p` ranks.
pub(crate) fn partition_len(p: usize) -> usize {
    1 + p
}

/// A partition as the checks see it: the array lengths, and block `r`'s count and
/// displacement in elements.
pub(crate) trait Parts {
    /// The lengths of the count and displacement arrays.
    fn entries(&self) -> (usize, usize);
    /// `(count, displacement)` of block `r`.
    fn block(&self, r: usize) -> (Count, Count);
}

/// A partition published in the staging area of local rank `owner`, from word `at`.
pub(crate) struct Published<'r, 'c> {
    pub(crate) round: &'r Round<'c>,
    pub(crate) owner: usize,
    pub(crate) at: usize,
}

impl Parts for Published<'_, '_> {
    fn entries(&self) -> (usize, usize) {
        let w = self.round.meta(self.owner, self.at);
        ((w & 0xffff_ffff) as usize, (w >> 32) as usize)
    }

    fn block(&self, r: usize) -> (Count, Count) {
        let w = self.round.meta(self.owner, self.at + 1 + r);
        (w as u32 as Count, (w >> 32) as u32 as Count)
    }
}

/// A partition as the words [`partition_words`] makes (received over MPI).
pub(crate) struct Words<'a>(pub(crate) &'a [u64]);

impl Parts for Words<'_> {
    fn entries(&self) -> (usize, usize) {
        ((self.0[0] & 0xffff_ffff) as usize, (self.0[0] >> 32) as usize)
    }

    fn block(&self, r: usize) -> (Count, Count) {
        let w = self.0[1 + r];
        (w as u32 as Count, (w >> 32) as u32 as Count)
    }
}

/// One rank's call of a variable-count exchange (allgatherv, alltoallv) as it goes down
/// the layers: its buffers, its partitions (`P`: [`Given`] for an allgatherv, `Sides` for
/// an alltoallv, which name the collective's algorithm enum), the element size and the
/// algorithm asked for.
pub(crate) struct Exchange<'a, P: Exchanged> {
    pub(crate) send: &'a [u8],
    pub(crate) recv: &'a mut [u8],
    pub(crate) parts: P,
    pub(crate) elem: usize,
    pub(crate) algorithm: P::Algorithm,
}

/// The partitions of one variable-count exchange, which name its algorithm enum.
pub(crate) trait Exchanged {
    /// The collective's algorithms.
    type Algorithm;
}

/// A partition given as arrays (this rank's own, checked).
pub(crate) struct Given<'a> {
    pub(crate) counts: &'a [Count],
    pub(crate) displs: &'a [Count],
}

impl Parts for Given<'_> {
    fn entries(&self) -> (usize, usize) {
        (self.counts.len(), self.displs.len())
    }

    fn block(&self, r: usize) -> (Count, Count) {
        (self.counts[r], self.displs[r])
    }
}

/// Bytes of `count` elements of `elem` bytes (saturating: such a block fits no buffer).
pub(crate) fn bytes(count: Count, elem: usize) -> usize {
    (count.max(0) as usize).saturating_mul(elem)
}

/// The byte counts and displacements of the `p` blocks of `parts` (elements of `elem`
/// bytes), for a call of MPI's own on bytes when every node holds one rank; `None` if one
/// does not fit an MPI count (the two-level path, which packs, then runs instead).
pub(crate) fn mpi_bytes(parts: &impl Parts, p: usize, elem: usize) -> Option<(Vec<Count>, Vec<Count>)> {
    let block = |r| {
        let b = range(parts, r, elem);
        Some((Count::try_from(b.len()).ok()?, Count::try_from(b.start).ok()?))
    };
    (0..p).map(block).collect::<Option<Vec<_>>>().map(|v| v.into_iter().unzip())
}

/// The byte range of block `r` of a partition checked by [`check_partition`]; `0..0` for
/// an empty block, whose displacement the checks leave free (MPI lets it point anywhere,
/// and a range starting past the buffer would be an out-of-bounds slice).
pub(crate) fn range(parts: &impl Parts, r: usize, elem: usize) -> Range<usize> {
    let (c, d) = parts.block(r);
    match bytes(c, elem) {
        0 => 0..0,
        len => {
            let start = bytes(d, elem);
            start..start + len
        }
    }
}

/// Checks one partition of `p` blocks over a buffer of `len` bytes with elements of
/// `elem` bytes: one entry per rank, nothing negative, every non-empty block inside the
/// buffer (every block, for elements of zero bytes), and (for a receive buffer) no two
/// non-empty blocks overlapping.
///
/// # Errors
///
/// The first fault found, in that order.
#[inline]
pub(crate) fn check_partition(
    p: usize,
    parts: &impl Parts,
    elem: usize,
    len: usize,
    side: Side,
) -> std::result::Result<(), Fault> {
    let (nc, nd) = parts.entries();
    if nc != p {
        return Err(Fault::Entries { side, displacements: false, found: nc });
    }
    if nd != p {
        return Err(Fault::Entries { side, displacements: true, found: nd });
    }
    let mut end = 0usize;
    for r in 0..p {
        let (c, d) = parts.block(r);
        if c < 0 || d < 0 {
            return Err(Fault::Negative { side, index: r, displacement: c >= 0 });
        }
        if c > 0 {
            end = end.max(d as usize + c as usize);
        }
    }
    // Elements of zero bytes touch no byte of any buffer: every block fits.
    if elem > 0 && end.saturating_mul(elem) > len {
        return Err(Fault::Bounds { side, expected: end, found: len / elem });
    }
    if side == Side::Recv && !ascending(p, parts) {
        let mut blocks: Vec<(usize, usize, usize)> = (0..p)
            .map(|r| (parts.block(r), r))
            .filter(|&((c, _), _)| c > 0)
            .map(|((c, d), r)| (d as usize, d as usize + c as usize, r))
            .collect();
        blocks.sort_unstable();
        if let Some(w) = blocks.windows(2).find(|w| w[1].0 < w[0].1) {
            return Err(Fault::Overlap { index: w[1].2 });
        }
    }
    Ok(())
}

/// Whether the non-empty blocks of `parts` (valid counts and displacements) lie in rank
/// order, each starting at or after the end of the one before: then no two overlap. The
/// common layout, checked in one pass with no allocation; any other is sorted.
fn ascending(p: usize, parts: &impl Parts) -> bool {
    let mut end = 0usize;
    (0..p).all(|r| {
        let (c, d) = parts.block(r);
        let fits = c <= 0 || d as usize >= end;
        if c > 0 {
            end = d as usize + c as usize;
        }
        fits
    })
}

/// The code published for a rank whose algorithm could not be read: it never equals a
/// valid one, so the others see an algorithm mismatch rather than wait for it.
pub(crate) const BAD_CONFIG: u8 = 0xfe;

/// The algorithm code and parameter a variable-count call publishes for what it
/// `requested`. `Auto` decides after the checks, from every rank's counts and the profile,
/// so it publishes the profile's fingerprint as its parameter: ranks with different
/// profiles then fail the check. A rank whose variable could not be read publishes
/// [`BAD_CONFIG`].
pub(crate) fn published<A: Algorithm>(requested: &Result<A>) -> (u8, u32) {
    match requested.as_ref().map(|&a| algorithm::wire(a)) {
        // Code 0 is `Auto`.
        Ok((0, _)) => (0, select::fingerprint()),
        Ok(wire) => wire,
        Err(_) => (BAD_CONFIG, 0),
    }
}

/// The bit of an allgatherv's or alltoallv's `aux2` (above its element size) by which a
/// rank says, with its arrival, that its own call is bad: it judged its own partitions
/// before arriving ([`allgatherv_local`], [`alltoallv_local`]) and published the fault's
/// words ([`fault_words`]) in place of its partitions. The verdict then reads one flag per
/// rank ([`judge_flags`]), not every rank's partitions.
pub(crate) const OWN_FAULT: u64 = 1 << 63;

/// The element size an allgatherv or alltoallv call published (in `aux2`, below
/// [`OWN_FAULT`]).
pub(crate) fn elem_of(c: &Call) -> usize {
    (c.aux2 & !OWN_FAULT) as usize
}

/// The `aux2` of an allgatherv or alltoallv call: its element size, and [`OWN_FAULT`] if
/// its own checks found `fault`.
pub(crate) fn aux2_of(elem: usize, fault: Option<Fault>) -> u64 {
    elem as u64 | if fault.is_some() { OWN_FAULT } else { 0 }
}

/// The metadata words of a rank whose own call is bad: the fault ([`Fault::encode`]), which
/// the verdict decodes to name it on every rank.
pub(crate) fn fault_words(fault: Fault) -> [u64; 4] {
    Fault::encode(Some(fault)).map(|w| w as u64)
}

/// The verdict of an allgatherv or alltoallv on its ranks' own checks: the first rank that
/// published [`OWN_FAULT`], with the fault it published in its metadata. One flag per rank,
/// read from the records the verdict reads anyway; the partitions of the others are not
/// read. A pure function of the records: every rank reaches the same verdict.
///
/// # Errors
///
/// The first rank's fault, as the error this rank reports.
pub(crate) fn judge_flags(r: &Round<'_>) -> Result<()> {
    let Some(q) = (0..r.size()).find(|&q| r.aux2(q) & OWN_FAULT != 0) else {
        return Ok(());
    };
    let words: [i64; 4] = std::array::from_fn(|i| r.meta(q, i) as i64);
    // The words are always a fault's (`fault_words`); `Role` only for a record no rank wrote.
    let fault = Fault::decode(&words).unwrap_or(Fault::Role);
    Err(fault.error(r.rank_of(r.me()), r.rank_of(q), r.size()))
}

/// The pairwise verdict of an exchange over `p` ranks whose own calls passed: the first
/// rank whose count for a partner differs from what that partner sends it (`cross`). The
/// multi-phase paths judge it on every rank before any byte moves (`p` checks of `p`
/// counts each); the one-phase paths let each rank judge its own counts where it reads the
/// blocks.
///
/// # Errors
///
/// The first fault, as the error rank `me` reports.
pub(crate) fn judge_pairs(
    p: usize,
    rank_of: impl Fn(usize) -> i32,
    me: usize,
    cross: impl Fn(usize) -> Option<Fault>,
) -> Result<()> {
    first_fault(p, |_| None, cross).map_err(|(q, f)| f.error(rank_of(me), rank_of(q), p))
}

/// The checks of a rooted variable-count call over `p` ranks whose root is `root`: the
/// roles, the root's partition (of its `side` buffer), and every rank's block against the
/// root's count for it. A pure function: every rank reaches the same verdict.
///
/// # Errors
///
/// The first `(culprit, fault)`.
pub(crate) fn judge_rooted(
    p: usize,
    root: usize,
    claim: impl Fn(usize) -> Claim,
    parts: &impl Parts,
    side: Side,
) -> std::result::Result<(), (usize, Fault)> {
    if let Some(q) = (0..p).find(|&q| claim(q).root != (q == root)) {
        return Err((q, Fault::Role));
    }
    let r = claim(root);
    check_partition(p, parts, r.elem, r.whole, side).map_err(|f| (root, f))?;
    for q in 0..p {
        let expected = bytes(parts.block(q).0, r.elem);
        let found = claim(q).block;
        if found != expected {
            return Err((q, Fault::Length { expected, found }));
        }
    }
    Ok(())
}

/// [`judge_rooted`] over the records of a round whose root, local rank `root`, published
/// its partition of its `side` buffer: every rank's block is the length of its buffer on
/// the other side, the root's whole buffer the one on `side`. The root passes its own
/// partition (`mine`), the same numbers it published, which it does not read back. Each
/// claim is read from the three record words it is made of.
///
/// # Errors
///
/// The first fault, as the error this rank reports.
pub(crate) fn judge_round(r: &Round<'_>, root: usize, side: Side, mine: Option<&Given<'_>>) -> Result<()> {
    let claim = |q| {
        let (block, whole) = match side {
            Side::Recv => (r.send_len(q), r.recv_len(q)),
            Side::Send => (r.recv_len(q), r.send_len(q)),
        };
        Claim::from_words(r.aux2(q), block, whole)
    };
    let verdict = match mine.filter(|_| r.me() == root) {
        Some(mine) => judge_rooted(r.size(), root, claim, mine, side),
        None => judge_rooted(r.size(), root, claim, &Published { round: r, owner: root, at: 0 }, side),
    };
    verdict.map_err(|(q, f)| f.error(r.rank_of(r.me()), r.rank_of(q), r.size()))
}

/// The verdict of an exchange over `p` ranks: the first rank with a fault of its own
/// (`local`), else the first rank whose numbers disagree with its partners' (`cross`,
/// asked only when no rank has a local fault). A pure function of what every rank sees.
///
/// # Errors
///
/// The first `(culprit, fault)`.
pub(crate) fn first_fault(
    p: usize,
    local: impl Fn(usize) -> Option<Fault>,
    cross: impl Fn(usize) -> Option<Fault>,
) -> std::result::Result<(), (usize, Fault)> {
    if let Some(e) = (0..p).find_map(|q| local(q).map(|f| (q, f))) {
        return Err(e);
    }
    (0..p).find_map(|q| cross(q).map(|f| (q, f))).map_or(Ok(()), Err)
}

/// The faults of rank `q` of an allgatherv alone: its receive partition (`parts`, of a
/// buffer of `recv_len` bytes), and its own block's count against its send length.
pub(crate) fn allgatherv_local(
    p: usize,
    q: usize,
    parts: &impl Parts,
    elem: usize,
    recv_len: usize,
    send_len: usize,
) -> Option<Fault> {
    check_partition(p, parts, elem, recv_len, Side::Recv).err().or_else(|| {
        let expected = bytes(parts.block(q).0, elem);
        (expected != send_len).then_some(Fault::Length { expected, found: send_len })
    })
}

/// The fault of a rank against its partners: its count for every rank `r` (in `parts`,
/// its partition of what it receives) against the bytes `r` sends it, `sent(r)`. In an
/// allgatherv `sent(r)` is `r`'s send length; in an alltoallv, `r`'s send count for
/// this rank.
pub(crate) fn cross_fault(
    p: usize,
    parts: &impl Parts,
    elem: usize,
    sent: impl Fn(usize) -> usize,
) -> Option<Fault> {
    (0..p).find_map(|r| {
        let found = bytes(parts.block(r).0, elem);
        (found != sent(r)).then(|| Fault::Length { expected: sent(r), found })
    })
}

/// The faults of rank `q` of an alltoallv alone: its two partitions, and what it sends
/// itself against what it receives from itself.
#[inline]
pub(crate) fn alltoallv_local(
    p: usize,
    q: usize,
    send: &impl Parts,
    recv: &impl Parts,
    elem: usize,
    lens: (usize, usize),
) -> Option<Fault> {
    check_partition(p, send, elem, lens.0, Side::Send)
        .and_then(|()| check_partition(p, recv, elem, lens.1, Side::Recv))
        .err()
        .or_else(|| {
            let (expected, found) = (bytes(send.block(q).0, elem), bytes(recv.block(q).0, elem));
            (expected != found).then_some(Fault::Length { expected, found })
        })
}

/// [`check_staged`](crate::coll::check_staged) with a judge that may fail with any error (reported after the
/// common checks of collective and root, before the algorithm's); `None` for `meta` when
/// the partitions do not fit the staging area, which is `Unsupported` on every rank.
/// `tail` goes to the end of the area, away from `meta` and `parts`
/// ([`Control::begin_staged_with`](crate::sync::Control::begin_staged_with)).
///
/// # Errors
///
/// As `check_staged` and `judge`, the same on every rank.
pub(crate) fn checked<'c>(
    ctx: &Ctx<'c>,
    call: Call,
    meta: Option<&(impl Meta + ?Sized)>,
    parts: &(impl Payload + ?Sized),
    tail: &(impl Meta + ?Sized),
    rooted: bool,
    judge: impl Fn(&Round<'_>) -> Result<()>,
) -> Result<Round<'c>> {
    let judged = Judged::default();
    let round = match meta {
        Some(meta) => ctx.ctl.begin_staged_with(&call, meta, parts, tail)?,
        None => ctx.ctl.begin_staged(&call, &[], &[])?,
    };
    let checked = crate::coll::judge(ctx, round, rooted, |r| {
        let verdict = match meta {
            Some(_) => judge(r),
            None => Err(Error::Unsupported {
                rank: r.rank_of(r.me()),
                what: format!(
                    "{} ranks on a node in a variable-count collective (the counts do not fit the \
                     staging area)",
                    r.size()
                ),
            }),
        };
        judged.keep(verdict)
    });
    judged.outcome(checked)
}

/// The largest payload a rank of a rooted variable-count call whose algorithm is `Auto`
/// stages with its arrival: beyond it the model rarely stages, and a payload staged in
/// vain costs a copy. Measured at 2 ranks (cores near, 2 runs), the one-phase staged
/// gatherv and scatterv beat every single-copy algorithm up to 24 KiB (16 KiB: 2.9-3.1
/// against 4.2-5.2 us), where an 8 KiB limit made `Auto` take the slower staged path of
/// several phases from 8 KiB on.
pub(crate) const AUTO_STAGE_MAX: usize = 20 * 1024;

/// Whether a rank that publishes `words` metadata words stages a payload of `bytes` with
/// them ([`checked`]'s `parts`): whether both fit the half of the staging area a round
/// stages in, and the payload is at most `cap` (`Auto`'s limit; `None` for an algorithm
/// the caller named). A pure function of published numbers, so every rank can tell
/// whether each peer staged.
pub(crate) fn stages(ctx: &Ctx<'_>, cap: Option<usize>, words: usize, bytes: usize) -> bool {
    bytes <= cap.unwrap_or(usize::MAX)
        && words.saturating_mul(8).saturating_add(bytes) <= ctx.ctl.one_phase_bytes()
}

/// The bytes of the blocks that partition `parts` (elements of `elem` bytes) gives every
/// rank but `skip` in a buffer of `len` bytes, which a rank stages with its arrival;
/// `None` where an entry is missing or a non-empty block lies outside the buffer (the
/// checks then fail the call). An empty block is empty wherever its displacement points.
pub(crate) fn staged_bytes(
    len: usize,
    parts: &Given<'_>,
    p: usize,
    skip: usize,
    elem: usize,
) -> Option<usize> {
    (0..p).filter(|&r| r != skip).try_fold(0usize, |sum, r| {
        match (parts.counts.get(r), parts.displs.get(r)) {
            (Some(&c), Some(_)) if c <= 0 => Some(sum),
            (Some(_), Some(_)) => {
                let block = range(parts, r, elem);
                (block.end <= len).then(|| sum + block.len())
            }
            _ => None,
        }
    })
}

/// Whether `words` metadata words fit every rank's staging area.
pub(crate) fn fits(ctx: &Ctx<'_>, words: usize) -> bool {
    words <= ctx.ctl.meta_words()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn given<'a>(counts: &'a [Count], displs: &'a [Count]) -> Given<'a> {
        Given { counts, displs }
    }

    #[test]
    fn partitions_are_judged_in_order() {
        let ok = |c: &[Count], d: &[Count], len, side| check_partition(c.len(), &given(c, d), 4, len, side);
        // Gaps, any order, zero blocks anywhere (even past the end).
        assert_eq!(ok(&[2, 0, 3], &[6, 100, 0], 32, Side::Recv), Ok(()));
        assert_eq!(
            check_partition(3, &given(&[1, 2], &[0, 1, 2]), 4, 64, Side::Send),
            Err(Fault::Entries { side: Side::Send, displacements: false, found: 2 })
        );
        assert_eq!(
            check_partition(2, &given(&[1, 2], &[0, 1, 2]), 4, 64, Side::Recv),
            Err(Fault::Entries { side: Side::Recv, displacements: true, found: 3 })
        );
        assert_eq!(
            ok(&[1, -1], &[0, 1], 64, Side::Send),
            Err(Fault::Negative { side: Side::Send, index: 1, displacement: false })
        );
        assert_eq!(
            ok(&[0, 1], &[-1, 1], 64, Side::Send),
            Err(Fault::Negative { side: Side::Send, index: 0, displacement: true })
        );
        // 8 elements needed, 7 there (28 bytes of 4-byte elements).
        assert_eq!(
            ok(&[2, 3], &[6, 0], 28, Side::Send),
            Err(Fault::Bounds { side: Side::Send, expected: 8, found: 7 })
        );
        // Overlapping sends are allowed, overlapping receives are not.
        assert_eq!(ok(&[3, 3], &[0, 2], 64, Side::Send), Ok(()));
        assert_eq!(ok(&[3, 3], &[2, 0], 64, Side::Recv), Err(Fault::Overlap { index: 0 }));
        assert_eq!(ok(&[3, 3, 0], &[0, 3, 1], 64, Side::Recv), Ok(()));
    }

    /// An independent oracle of [`check_partition`]'s `Ok`: every array has `p` entries,
    /// nothing is negative, every non-empty block lies inside the buffer, and (receive)
    /// no two non-empty blocks share an element.
    fn valid(p: usize, counts: &[Count], displs: &[Count], elem: usize, len: usize, side: Side) -> bool {
        if counts.len() != p || displs.len() != p || counts.iter().chain(displs).any(|&x| x < 0) {
            return false;
        }
        let blocks: Vec<(u128, u128)> = (0..p)
            .filter(|&r| counts[r] > 0)
            .map(|r| (displs[r] as u128, displs[r] as u128 + counts[r] as u128))
            .collect();
        let inside = blocks.iter().all(|&(_, end)| end * elem as u128 <= len as u128);
        let apart = |i: usize, j: usize| blocks[i].1 <= blocks[j].0 || blocks[j].1 <= blocks[i].0;
        let disjoint = (0..blocks.len()).all(|i| (0..i).all(|j| apart(i, j)));
        inside && (side == Side::Send || disjoint)
    }

    /// A receive partition of `p` blocks laid out without overlap, in a shuffled order
    /// with gaps, and the buffer length (in elements) that holds it exactly.
    fn laid_out() -> impl Strategy<Value = (Vec<Count>, Vec<Count>, usize)> {
        (1usize..8)
            .prop_flat_map(|p| {
                (
                    proptest::collection::vec(0 as Count..50, p),
                    proptest::collection::vec(0 as Count..5, p),
                    Just((0..p).collect::<Vec<usize>>()).prop_shuffle(),
                )
            })
            .prop_map(|(counts, gaps, order)| {
                let mut displs = vec![0; counts.len()];
                let mut at = 0;
                for r in order {
                    at += gaps[r];
                    displs[r] = at;
                    at += counts[r];
                }
                (counts, displs, at as usize)
            })
    }

    proptest! {
        /// The words a partition writes straight into an area (`write_partition`, from
        /// any word) are the array lengths, then each block's count and displacement as
        /// 32-bit halves, zeros past a short array; `partition_words` gives the same.
        #[test]
        fn partition_words_are_written_in_place(
            p in 0usize..6,
            counts in proptest::collection::vec(any::<Count>(), 0..7),
            displs in proptest::collection::vec(any::<Count>(), 0..7),
            at in 0usize..3,
        ) {
            let mut oracle = vec![counts.len() as u64 | (displs.len() as u64) << 32];
            for r in 0..p {
                let (c, d) = (counts.get(r).copied().unwrap_or(0), displs.get(r).copied().unwrap_or(0));
                oracle.push(u64::from(c as u32) | u64::from(d as u32) << 32);
            }
            let area: Vec<std::sync::atomic::AtomicU64> =
                (0..at + partition_len(p)).map(|_| std::sync::atomic::AtomicU64::new(u64::MAX)).collect();
            write_partition(&Slots::over(&area), at, p, &counts, &displs);
            let written: Vec<u64> = area[at..].iter().map(|w| w.load(std::sync::atomic::Ordering::Relaxed)).collect();
            prop_assert_eq!(&written, &oracle);
            prop_assert!(area[..at].iter().all(|w| w.load(std::sync::atomic::Ordering::Relaxed) == u64::MAX));
            let mut words = Vec::new();
            partition_words(&mut words, p, &counts, &displs);
            prop_assert_eq!(words, oracle);
        }

        /// Any counts and displacements, any buffer: the check never panics, and accepts
        /// exactly what the oracle accepts; the same verdict from the published words.
        #[test]
        fn partitions_are_accepted_exactly_when_valid(
            p in 1usize..6,
            counts in proptest::collection::vec(-3 as Count..40, 0..7),
            displs in proptest::collection::vec(prop_oneof![-3 as Count..60, Just(Count::MAX)], 0..7),
            elem in 0usize..9,
            len in 0usize..400,
            recv: bool,
        ) {
            let side = if recv { Side::Recv } else { Side::Send };
            let verdict = check_partition(p, &given(&counts, &displs), elem, len, side);
            prop_assert_eq!(verdict.is_ok(), valid(p, &counts, &displs, elem, len, side), "{:?}", verdict);
            let mut words = Vec::new();
            partition_words(&mut words, p, &counts, &displs);
            prop_assert_eq!(check_partition(p, &Words(&words), elem, len, side), verdict);
        }

        /// A valid layout passes; moving one block onto another is `InvalidPartition` for
        /// a receive buffer (a send buffer may overlap), and a negative entry is
        /// `InvalidPartition` on either side, naming the first one.
        #[test]
        fn overlaps_and_negatives_are_invalid_partitions(
            (counts, displs, end) in laid_out(),
            elem in 1usize..9,
            pick in any::<proptest::sample::Index>(),
            onto in any::<proptest::sample::Index>(),
            negative in -100 as Count..0,
            displacement: bool,
        ) {
            let p = counts.len();
            let len = end * elem;
            for side in [Side::Send, Side::Recv] {
                prop_assert_eq!(check_partition(p, &given(&counts, &displs), elem, len, side), Ok(()));
            }
            // Block `a` moved to start inside block `b`.
            let full: Vec<usize> = (0..p).filter(|&r| counts[r] > 0).collect();
            if full.len() >= 2 {
                let a = full[pick.index(full.len())];
                let others: Vec<usize> = full.iter().copied().filter(|&r| r != a).collect();
                let b = others[onto.index(others.len())];
                let mut moved = displs.clone();
                moved[a] = displs[b] + (counts[b] - 1).min(counts[a] - 1).max(0) / 2;
                let room = (0..p).filter(|&r| counts[r] > 0).map(|r| (moved[r] + counts[r]) as usize).max().unwrap();
                let len = room * elem;
                prop_assert_eq!(check_partition(p, &given(&counts, &moved), elem, len, Side::Send), Ok(()));
                let fault = check_partition(p, &given(&counts, &moved), elem, len, Side::Recv);
                prop_assert!(matches!(fault, Err(Fault::Overlap { .. })), "{:?}", fault);
                let e = fault.unwrap_err().error(0, 1, p);
                prop_assert!(matches!(e, Error::InvalidPartition { reason: "overlaps another block", .. }), "{}", e);
            }
            let index = pick.index(p);
            let (mut c, mut d) = (counts.clone(), displs.clone());
            if displacement { d[index] = negative } else { c[index] = negative }
            let expected = Fault::Negative { side: Side::Recv, index, displacement };
            let fault = check_partition(p, &given(&c, &d), elem, len, Side::Recv);
            prop_assert_eq!(fault, Err(expected));
            let named = matches!(expected.error(0, 1, p), Error::InvalidPartition { index: i, .. } if i == index);
            prop_assert!(named, "the error names block {}", index);
        }

        /// A buffer one element short of the furthest block is refused, naming the
        /// elements needed.
        #[test]
        fn a_buffer_too_short_is_refused((counts, displs, _) in laid_out(), elem in 1usize..9, recv: bool) {
            let end = (0..counts.len()).filter(|&r| counts[r] > 0).map(|r| (displs[r] + counts[r]) as usize).max();
            prop_assume!(end.is_some());
            let end = end.unwrap();
            let side = if recv { Side::Recv } else { Side::Send };
            let fault = check_partition(counts.len(), &given(&counts, &displs), elem, end * elem - 1, side);
            prop_assert_eq!(fault, Err(Fault::Bounds { side, expected: end, found: end - 1 }));
        }
    }

    #[test]
    fn published_words_round_trip() {
        let mut w = Vec::new();
        partition_words(&mut w, 3, &[5, 0, Count::MAX], &[-1, 7, 0]);
        assert_eq!(w.len(), partition_len(3));
        assert_eq!(w[0], 3 | 3 << 32);
        let block = |i: usize| (w[1 + i] as u32 as Count, (w[1 + i] >> 32) as u32 as Count);
        assert_eq!([block(0), block(1), block(2)], [(5, -1), (0, 7), (Count::MAX, 0)]);
        let faults = [
            None,
            Some(Fault::Role),
            Some(Fault::Entries { side: Side::Recv, displacements: true, found: 9 }),
            Some(Fault::Negative { side: Side::Send, index: 3, displacement: false }),
            Some(Fault::Overlap { index: 2 }),
            Some(Fault::Bounds { side: Side::Recv, expected: 10, found: 9 }),
            Some(Fault::Length { expected: 4, found: 8 }),
        ];
        for f in faults {
            assert_eq!(Fault::decode(&Fault::encode(f)), f);
        }
    }

    #[test]
    fn rooted_judge_names_the_culprit() {
        let claims = |blocks: [usize; 3], root: usize, whole: usize| {
            move |q: usize| Claim { root: q == root, in_place: false, elem: 2, block: blocks[q], whole }
        };
        let parts = given(&[1, 0, 3], &[3, 9, 0]);
        assert_eq!(judge_rooted(3, 1, claims([2, 0, 6], 1, 8), &parts, Side::Send), Ok(()));
        assert_eq!(
            judge_rooted(3, 1, claims([2, 0, 4], 1, 8), &parts, Side::Send),
            Err((2, Fault::Length { expected: 6, found: 4 }))
        );
        assert_eq!(
            judge_rooted(3, 1, claims([2, 0, 6], 1, 6), &parts, Side::Send),
            Err((1, Fault::Bounds { side: Side::Send, expected: 4, found: 3 }))
        );
        let two_roots = |q: usize| Claim { root: q != 2, ..claims([2, 0, 6], 1, 8)(q) };
        assert_eq!(judge_rooted(3, 1, two_roots, &parts, Side::Send), Err((0, Fault::Role)));
    }
}
