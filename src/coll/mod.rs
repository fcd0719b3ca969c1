//! The collectives, one file each. A file holds its algorithms and nothing else: the
//! protocol is `sync`'s, the byte moving `transport`'s.
//!
//! Every collective starts with [`check`]: the ranks of the node publish their calls in a
//! round and each evaluates the same checks over all of them, so a bad argument on one
//! rank is the same `Err` on every rank, before any byte moves.

pub(crate) mod algorithm;
pub(crate) mod allgather;
pub(crate) mod allgatherv;
pub(crate) mod alltoall;
pub(crate) mod alltoallv;
pub(crate) mod barrier;
pub(crate) mod bcast;
pub(crate) mod expose;
pub(crate) mod gather;
pub(crate) mod gatherv;
pub(crate) mod legs;
pub(crate) mod pap;
pub(crate) mod probe;
pub(crate) mod reduce;
pub(crate) mod rooted;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod scatterv;
pub(crate) mod varcount;

use crate::error::{Error, Result};
pub(crate) use crate::sync::Kind;
use crate::sync::{Call, Control, Round};
use crate::transport::TransportKind;
pub(crate) use algorithm::Overrides;

/// What a collective call needs of the node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    /// The node's control segment.
    pub(crate) ctl: &'a Control,
    /// The node's transport.
    pub(crate) transport: TransportKind,
    /// The size of the user's communicator (roots are ranks in it).
    pub(crate) comm_size: i32,
    /// The algorithm variables, as they were when the `Comm` was built.
    pub(crate) overrides: &'a Overrides,
}

/// Packs a collective, its algorithm and the algorithm's parameter into `Call::op`.
pub(crate) fn op(kind: Kind, algorithm: u8, param: u32) -> u64 {
    kind as u64 | (algorithm as u64) << 8 | (param as u64) << 16
}

/// The bits of `Call::op` that hold [`type_tag`] (between the parameter and `PRIVATE`).
const TYPE_SHIFT: u32 = 48;
const TYPE_MASK: u64 = 0x7fff;

/// A fingerprint of the element type `T`, for the calls whose result depends on more
/// than its size (the reductions: `f64` and `u64` add differently). It hashes the type's
/// name, so every rank of one program agrees; ranks built from different programs agree
/// when their compilers name the type alike. Never 0, which the calls that move bytes
/// only publish.
pub(crate) fn type_tag<T>() -> u64 {
    // FNV-1a, folded to the 15 bits the call record has room for.
    let hash = std::any::type_name::<T>()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    ((hash ^ hash >> 15 ^ hash >> 30 ^ hash >> 45) & TYPE_MASK).max(1)
}

/// [`op`] with the element type's [`type_tag`]: the ranks' verdict then names an
/// element type that differs (`Mismatch`), as MPI's type signatures would.
pub(crate) fn typed_op<T>(kind: Kind, algorithm: u8, param: u32) -> u64 {
    op(kind, algorithm, param) | type_tag::<T>() << TYPE_SHIFT
}

/// A length that disagrees: local rank `culprit` has `found` bytes where `expected` are
/// needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BadLength {
    pub(crate) culprit: usize,
    pub(crate) expected: usize,
    pub(crate) found: usize,
}

/// Checks that `field` of every rank's call is `expected`; the first rank that is not
/// is the culprit.
pub(crate) fn all_equal(
    round: &Round<'_>,
    field: impl Fn(&Call) -> usize,
    expected: usize,
) -> std::result::Result<(), BadLength> {
    match (0..round.size()).map(|r| (r, field(&round.call(r)))).find(|&(_, f)| f != expected) {
        Some((culprit, found)) => Err(BadLength { culprit, expected, found }),
        None => Ok(()),
    }
}

/// The `op` bits of a call whose algorithm copies through the staging areas only
/// (`staged`): it shares no buffer with the peers, so it is a private round (see
/// [`PRIVATE`](crate::sync::PRIVATE)), one flag phase instead of two.
pub(crate) fn staged_private(staged: bool) -> u64 {
    if staged {
        crate::sync::PRIVATE
    } else {
        0
    }
}

/// Publishes `call`, then checks that every rank of the node called the same collective
/// with the same root (and `aux`), that the root is a rank of the communicator when
/// `rooted`, that the lengths are right (`lengths`, a pure function of the published
/// calls), and that the algorithms agree. Returns the round to move data in, or the
/// verdict every rank reaches.
///
/// # Errors
///
/// `Mismatch`, `InvalidRoot`, `LengthMismatch` (on every rank alike), or a wait's error.
pub(crate) fn check<'c>(
    ctx: &Ctx<'c>,
    call: Call,
    rooted: bool,
    lengths: impl Fn(&Round<'_>) -> std::result::Result<(), BadLength>,
) -> Result<Round<'c>> {
    judge(ctx, ctx.ctl.begin(&call)?, rooted, lengths)
}

/// [`check`] in one flag phase: `meta` (words the peers read with `Round::meta`) and then
/// `parts` (this rank's outgoing bytes, one after the other) travel with the arrival (see
/// `Control::begin_staged`), so once the verdict is in, every rank reads the peers'
/// words, and copies straight out of their areas with `Round::read_staged`. `lengths`
/// may read every rank's words.
///
/// # Errors
///
/// As [`check`].
pub(crate) fn check_staged<'c>(
    ctx: &Ctx<'c>,
    call: Call,
    meta: &[u64],
    parts: &[&[u8]],
    rooted: bool,
    lengths: impl Fn(&Round<'_>) -> std::result::Result<(), BadLength>,
) -> Result<Round<'c>> {
    judge(ctx, ctx.ctl.begin_staged(&call, meta, parts)?, rooted, lengths)
}

/// The most payload a one-phase call carries in its call record (`aux2`, on the cache
/// line that shows its arrival) rather than in a staging area: a lone `f64` or `u64`,
/// the commonest reduction and broadcast of all, then crosses in the one cache-line
/// transfer that brings the arrival and the call.
pub(crate) const INLINE_BYTES: usize = 8;

/// `bytes` (at most [`INLINE_BYTES`]) as the record word that carries them.
pub(crate) fn inline_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; INLINE_BYTES];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// Copies the bytes `word` carries ([`inline_word`]) into `dst`, at most
/// [`INLINE_BYTES`] long.
pub(crate) fn from_inline(word: u64, dst: &mut [u8]) {
    dst.copy_from_slice(&word.to_le_bytes()[..dst.len()]);
}

/// The verdict on a round every rank has arrived at: the round to move data in, or the
/// error, after ending the round with it.
fn judge<'c>(
    ctx: &Ctx<'c>,
    round: Round<'c>,
    rooted: bool,
    lengths: impl Fn(&Round<'_>) -> std::result::Result<(), BadLength>,
) -> Result<Round<'c>> {
    match verdict(ctx, &round, rooted, lengths) {
        Ok(()) => Ok(round),
        Err(e) => Err(round.finish(Err(e)).unwrap_err()),
    }
}

fn verdict(
    ctx: &Ctx<'_>,
    round: &Round<'_>,
    rooted: bool,
    lengths: impl Fn(&Round<'_>) -> std::result::Result<(), BadLength>,
) -> Result<()> {
    let rank = round.rank_of(round.me());
    let calls = || (0..round.size()).map(|r| (round.rank_of(r), round.call(r)));
    let first = round.call(0);
    let mismatch = |what, pred: &dyn Fn(&Call) -> bool| match calls().find(|(_, c)| !pred(c)) {
        Some((culprit, _)) => Err(Error::Mismatch { rank, culprit, what }),
        None => Ok(()),
    };
    mismatch("collective", &|c| c.op & 0xff == first.op & 0xff)?;
    if let Some(r) = (0..round.size()).find(|&r| round.exposure_of(r) != round.exposure_of(0)) {
        return Err(Error::Mismatch { rank, culprit: round.rank_of(r), what: "exposure" });
    }
    mismatch("root", &|c| c.root == first.root && c.aux == first.aux)?;
    if rooted && !(0..ctx.comm_size as i64).contains(&first.root) {
        return Err(Error::InvalidRoot { rank, root: first.root as i32, size: ctx.comm_size });
    }
    if let Err(BadLength { culprit, expected, found }) = lengths(round) {
        return Err(Error::LengthMismatch { rank, culprit: round.rank_of(culprit), expected, found });
    }
    let type_of = |c: &Call| c.op >> TYPE_SHIFT & TYPE_MASK;
    mismatch("element type", &|c| type_of(c) == type_of(&first))?;
    mismatch("algorithm", &|c| c.op == first.op)
}
