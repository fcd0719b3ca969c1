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
pub(crate) mod layout;
pub(crate) mod legs;
pub(crate) mod pap;
pub(crate) mod probe;
pub(crate) mod reduce;
pub(crate) mod relay;
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

impl Ctx<'_> {
    /// Whether the user's communicator is this node alone: a call's outcome on the node
    /// is then its outcome everywhere, and a rank may leave a round before its verdict
    /// (`Control::leave_staged`), which a two-level call, agreed across nodes, may not.
    pub(crate) fn alone(&self) -> bool {
        self.comm_size as usize == self.ctl.size()
    }

    /// Whether a rank that only gives in a one-phase private call rooted at `root` may
    /// leave it before its verdict (`Control::leave_staged`): the root is a rank of the
    /// communicator (an outside root is judged in the call, like every argument a rank
    /// can check alone), the communicator is this node alone, and the node allows it
    /// (`Control::may_leave`). The caller checks the rest: that this rank gives, and
    /// what else it can judge alone.
    pub(crate) fn may_leave(&self, root: i32) -> bool {
        (0..self.comm_size).contains(&root) && self.alone() && self.ctl.may_leave()
    }
}

/// The parameter that [`op`] packed into an op word (an alltoall's element size).
fn param(op: u64) -> u64 {
    op >> 16 & 0xffff_ffff
}

/// Packs a collective, its algorithm and the algorithm's parameter into `Call::op`.
pub(crate) fn op(kind: Kind, algorithm: u8, param: u32) -> u64 {
    kind as u64 | (algorithm as u64) << 8 | (param as u64) << 16
}

/// The op word of an alltoall with algorithm code `algorithm` over elements of `elem`
/// bytes: the element size is its parameter (clamped to 32 bits, at least 1), so that
/// every rank judges the blocks in whole elements of rank 0's type ([`whole_blocks`]), a
/// pure function of the published records. Ranks whose element sizes differ publish
/// different words, which fails the verdict.
pub(crate) fn alltoall_op(algorithm: u8, elem: usize) -> u64 {
    op(Kind::Alltoall, algorithm, elem.clamp(1, u32::MAX as usize) as u32)
}

/// The bytes that `p` equal blocks of whole elements take, of rank 0's `first` bytes, where
/// rank 0 published the alltoall word `op` ([`alltoall_op`]): a send buffer of 3 `u64`s on
/// 2 ranks is not 2 blocks, although its 24 bytes are.
pub(crate) fn whole_blocks(first: usize, p: usize, op: u64) -> usize {
    let unit = p.saturating_mul(param(op).max(1) as usize);
    // A mask where it can (every call judges this, and a division costs tens of cycles).
    match unit.is_power_of_two() {
        true => first & !(unit - 1),
        false => first / unit * unit,
    }
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

/// Checks that `field` of every rank's call ([`Round::send_len`] or
/// [`Round::recv_len`]) is `expected`; the first rank that is not is the culprit.
pub(crate) fn all_equal<'c>(
    round: &Round<'c>,
    field: impl Fn(&Round<'c>, usize) -> usize,
    expected: usize,
) -> std::result::Result<(), BadLength> {
    match (0..round.size()).map(|r| (r, field(round, r))).find(|&(_, f)| f != expected) {
        Some((culprit, found)) => Err(BadLength { culprit, expected, found }),
        None => Ok(()),
    }
}

/// Whether `Auto`'s staged choice for a call whose rank stages `bytes` may turn into
/// single copies with loads once the records are in: the node maps its ranks' heaps, the
/// call does not fit a one-phase round (one that does is private: it publishes no
/// address, and its `Vec` buffers pay for the second record line an address costs: 10%
/// at 16-32 KiB with the cores far apart), and no override (`A::VAR`) names the
/// algorithm. The same on every rank (the node's links, the call's size, and the rank's
/// environment, whose algorithm the checks compare).
#[inline]
pub(crate) fn heap_switchable<A: algorithm::Algorithm>(ctx: &Ctx<'_>, bytes: usize) -> bool {
    bytes > ctx.ctl.one_phase_bytes()
        && ctx.ctl.loads_heaps()
        && matches!(ctx.overrides.choice::<A>(A::VAR), Ok(None))
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
    // The common case, word for word against this rank's own call (a leaver's private
    // bit aside, as below): every rank made the same call, so only the root's range and
    // the lengths remain, judged as `verdict_of` judges them then.
    let me = round.me();
    if round.all_agree() {
        let root = round.call(me).root;
        if rooted && !(0..ctx.comm_size as i64).contains(&root) {
            return Err(Error::InvalidRoot {
                rank: round.rank_of(me),
                root: root as i32,
                size: ctx.comm_size,
            });
        }
        return lengths(round).map_err(|BadLength { culprit, expected, found }| Error::LengthMismatch {
            rank: round.rank_of(me),
            culprit: round.rank_of(culprit),
            expected,
            found,
        });
    }
    // A rank that left the round published a private record (lengths only) where its
    // peers may publish buffers (the leaves of a gatherv): in a round some rank left,
    // the bit says how a rank takes part, not what it calls, and is not compared.
    let left = (0..round.size()).any(|r| round.left(r));
    let call = |r: usize| {
        let c = round.call(r);
        let op = if left { c.op & !crate::sync::PRIVATE } else { c.op };
        (round.rank_of(r), Call { op, ..c }, round.exposure_of(r))
    };
    verdict_of(round.rank_of(round.me()), round.size(), call, ctx.comm_size, rooted, || lengths(round))
}

/// The common checks over the `p` calls of a round, as rank `rank` (a rank of the user's
/// communicator) reports them: `call(r)` is local rank `r`'s rank, call record and
/// exposure id. A pure function of the published calls, so every rank reaches the same
/// verdict; `lengths` runs only once the collective, exposure and root agree.
///
/// # Errors
///
/// `Mismatch` (collective, exposure, root, element type, a reduction's operator,
/// algorithm, in that order),
/// `InvalidRoot` for a `rooted` call whose root is not a rank of `comm_size`, or
/// `LengthMismatch` from `lengths`.
fn verdict_of(
    rank: i32,
    p: usize,
    call: impl Fn(usize) -> (i32, Call, u64),
    comm_size: i32,
    rooted: bool,
    lengths: impl FnOnce() -> std::result::Result<(), BadLength>,
) -> Result<()> {
    let (_, first, exposure) = call(0);
    let out_of_range = |root: i64| rooted && !(0..comm_size as i64).contains(&root);
    let bad_length = |BadLength { culprit, expected, found }| Error::LengthMismatch {
        rank,
        culprit: call(culprit).0,
        expected,
        found,
    };
    // The common case first, in one pass over the records: every rank made the same call
    // (collective, algorithm, element type, parameters, root and exposure alike), so only
    // the root's range and the lengths remain to judge. Any difference takes the checks
    // below, in their order, which name the culprit.
    let same = |(_, c, x): (i32, Call, u64)| {
        c.op == first.op && c.root == first.root && c.aux == first.aux && x == exposure
    };
    if (1..p).map(&call).all(same) {
        if out_of_range(first.root) {
            return Err(Error::InvalidRoot { rank, root: first.root as i32, size: comm_size });
        }
        return lengths().map_err(bad_length);
    }
    let mismatch =
        |what, pred: &dyn Fn(&Call, u64) -> bool| match (0..p).map(&call).find(|(_, c, x)| !pred(c, *x)) {
            Some((culprit, _, _)) => Err(Error::Mismatch { rank, culprit, what }),
            None => Ok(()),
        };
    mismatch("collective", &|c, _| c.op & 0xff == first.op & 0xff)?;
    mismatch("exposure", &|_, x| x == exposure)?;
    mismatch("root", &|c, _| c.root == first.root && c.aux == first.aux)?;
    if out_of_range(first.root) {
        return Err(Error::InvalidRoot { rank, root: first.root as i32, size: comm_size });
    }
    lengths().map_err(bad_length)?;
    let type_of = |c: &Call| c.op >> TYPE_SHIFT & TYPE_MASK;
    mismatch("element type", &|c, _| type_of(c) == type_of(&first))?;
    // A reduction's parameter starts with its operator's code: name it, not the algorithm
    // word it is part of.
    let reductions = [Kind::Reduce, Kind::Allreduce, Kind::Scan, Kind::Exscan, Kind::ReduceScatterBlock];
    if reductions.iter().any(|&k| first.op & 0xff == k as u64) {
        let operator = |c: &Call| c.op >> 16 & 0xffff;
        mismatch("operator", &|c, _| operator(c) == operator(&first))?;
    }
    // An alltoall's parameter is its element size: ranks whose elements differ in size
    // (equal in bytes, else the lengths failed above) chose no other algorithm.
    mismatch(ELEMENT_SIZE, &|c, _| differs_in(first.op, c.op) != ELEMENT_SIZE)?;
    mismatch("algorithm", &|c, _| c.op == first.op)
}

/// The `what` of a `Mismatch` between alltoalls whose elements differ in size.
pub(crate) const ELEMENT_SIZE: &str = "element size";

/// What two op words of one collective that differ in their algorithm or parameter differ
/// in, as a `Mismatch` names it: an alltoall's element size (its parameter,
/// [`alltoall_op`]) where that differs, else the algorithm.
pub(crate) fn differs_in(first: u64, other: u64) -> &'static str {
    match first & 0xff == Kind::Alltoall as u64 && param(first) != param(other) {
        true => ELEMENT_SIZE,
        false => "algorithm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The user's rank of local rank `r` in these tests.
    fn rank_of(r: usize) -> i32 {
        10 + r as i32
    }

    /// One rank's call and exposure, each field drawn from a few values so that the
    /// ranks' calls often differ: collective, algorithm, parameter, element type, root,
    /// `aux`, exposure, send length.
    fn call() -> impl Strategy<Value = (Call, u64)> {
        (0usize..3, 0u8..2, 0u32..2, 1u64..3, -1i64..4, 0u64..2, 0u64..2, 0usize..2).prop_map(
            |(kind, algorithm, param, ty, root, aux, exposure, send_len)| {
                let kind = [Kind::Bcast, Kind::Reduce, Kind::Barrier][kind];
                let op = op(kind, algorithm, param) | ty << TYPE_SHIFT;
                (Call { op, root, aux, send_len, ..Call::default() }, exposure)
            },
        )
    }

    /// [`verdict_of`] as local rank `me` reaches it, with every send length checked
    /// against rank 0's.
    fn verdict(me: usize, calls: &[(Call, u64)], comm_size: i32, rooted: bool) -> Result<()> {
        let lengths = || match (0..calls.len()).find(|&r| calls[r].0.send_len != calls[0].0.send_len) {
            Some(culprit) => {
                Err(BadLength { culprit, expected: calls[0].0.send_len, found: calls[culprit].0.send_len })
            }
            None => Ok(()),
        };
        let call = |r: usize| (rank_of(r), calls[r].0, calls[r].1);
        verdict_of(rank_of(me), calls.len(), call, comm_size, rooted, lengths)
    }

    /// The verdict without the rank that reports it.
    fn anonymous(v: Result<()>) -> Result<()> {
        v.map_err(|e| match e {
            Error::Mismatch { culprit, what, .. } => Error::Mismatch { rank: 0, culprit, what },
            Error::InvalidRoot { root, size, .. } => Error::InvalidRoot { rank: 0, root, size },
            Error::LengthMismatch { culprit, expected, found, .. } => {
                Error::LengthMismatch { rank: 0, culprit, expected, found }
            }
            e => e,
        })
    }

    /// An alltoall whose ranks pass elements of other sizes, in buffers of equal bytes, is
    /// named for its element size, not for an algorithm nobody chose.
    #[test]
    fn an_alltoall_of_another_element_size_is_named_so() {
        let calls = [alltoall_op(0, 4), alltoall_op(0, 1)]
            .map(|op| (Call { op, send_len: 8, recv_len: 8, ..Call::default() }, 0));
        let got = verdict(0, &calls, 2, false);
        assert_eq!(got, Err(Error::Mismatch { rank: rank_of(0), culprit: rank_of(1), what: "element size" }));
        // Another algorithm with the same element size is still the algorithm.
        let calls = [alltoall_op(0, 4), alltoall_op(1, 4)]
            .map(|op| (Call { op, send_len: 8, recv_len: 8, ..Call::default() }, 0));
        let got = verdict(0, &calls, 2, false);
        assert_eq!(got, Err(Error::Mismatch { rank: rank_of(0), culprit: rank_of(1), what: "algorithm" }));
    }

    proptest! {
        /// Whole blocks are the largest multiple of `p` elements in `first` bytes, masked
        /// or divided alike.
        #[test]
        fn whole_blocks_are_whole_elements(first in 0usize..1 << 40, p in 1usize..70, elem in 0usize..40) {
            let unit = p * elem.max(1);
            prop_assert_eq!(whole_blocks(first, p, alltoall_op(0, elem)), first / unit * unit);
        }

        /// Whatever the ranks call, every rank reaches the same verdict, reported as its own.
        #[test]
        fn every_rank_reaches_the_same_verdict(
            calls in proptest::collection::vec(call(), 1..6),
            comm_size in 1i32..4,
            rooted: bool,
        ) {
            let first = verdict(0, &calls, comm_size, rooted);
            for me in 0..calls.len() {
                let mine = verdict(me, &calls, comm_size, rooted);
                prop_assert_eq!(anonymous(mine.clone()), anonymous(first.clone()));
                if let Err(e) = mine {
                    prop_assert_eq!(e.rank(), Some(rank_of(me)));
                }
            }
        }

        /// Ranks that call alike pass; one rank that differs in one field is named, with
        /// that field, on every rank.
        #[test]
        fn one_rank_that_differs_is_named(
            (common, exposure) in call(),
            p in 2usize..6,
            odd in 0usize..6,
            field in 0usize..7,
            me in 0usize..6,
        ) {
            let (odd, me) = (odd % p, me % p);
            let common = Call { root: common.root.rem_euclid(3), ..common };
            let mut calls = vec![(common, exposure); p];
            prop_assert_eq!(verdict(me, &calls, 3, true), Ok(()));
            let (c, x) = &mut calls[odd];
            let what = match field {
                0 => { c.op ^= 0x1; "collective" }
                1 => { *x ^= 1; "exposure" }
                2 => { c.root = (c.root + 1) % 3; "root" }
                3 => { c.op ^= 1 << TYPE_SHIFT; "element type" }
                4 => { c.op ^= 1 << 8; "algorithm" }
                // The parameter: a reduction's operator, another collective's algorithm
                // parameter.
                5 => {
                    c.op ^= 1 << 16;
                    if c.op & 0xff == Kind::Reduce as u64 { "operator" } else { "algorithm" }
                }
                _ => { c.send_len += 1; "length" }
            };
            // The culprit is the first rank that differs from rank 0.
            let culprit = if odd == 0 { 1 } else { odd };
            let expected = match what {
                "length" => Error::LengthMismatch {
                    rank: rank_of(me),
                    culprit: rank_of(culprit),
                    expected: calls[0].0.send_len,
                    found: calls[culprit].0.send_len,
                },
                what => Error::Mismatch { rank: rank_of(me), culprit: rank_of(culprit), what },
            };
            prop_assert_eq!(verdict(me, &calls, 3, true), Err(expected));
        }

        /// A rooted call whose root is not a rank of the communicator is `InvalidRoot`,
        /// even when every rank names it.
        #[test]
        fn a_root_outside_the_communicator_is_refused(
            (common, exposure) in call(),
            p in 1usize..5,
            root in prop_oneof![i64::MIN..0, 3i64..i64::MAX],
        ) {
            let calls = vec![(Call { root, ..common }, exposure); p];
            let refused = Error::InvalidRoot { rank: rank_of(0), root: root as i32, size: 3 };
            prop_assert_eq!(verdict(0, &calls, 3, true), Err(refused));
            prop_assert_eq!(verdict(0, &calls, 3, false), Ok(()));
        }
    }
}
