//! The two node rounds of a call across nodes whose checks the node leaders carry
//! (`hier`'s verdict): the **gather-in**, in which every rank of the node publishes what
//! it calls (a [`Claim`]) and stages a small payload, the node judges the claims, and
//! local rank 0 (the leader) collects the payloads; and the **hand-off**, in which the
//! leader stages what it learnt from the other nodes (the verdict and a small result)
//! and every other rank copies it out. Both are one-phase private rounds
//! (`Control::begin_staged`): the payload travels with the arrival, and nothing of a
//! rank's buffers is published.

use super::{op, Ctx, Kind};
use crate::error::{Error, Result};
use crate::sync::{Call, Round, PRIVATE};
use std::ops::Range;

/// The algorithm code of a gather-in round in its call's `op` word (no algorithm
/// vocabulary has as many variants).
const GATHER_IN: u8 = 0xf0;
/// The algorithm code of a hand-off round.
const HAND_OFF: u8 = 0xf1;

/// The number of words a [`Claim`] takes ([`Claim::words`]).
pub(crate) const CLAIM_WORDS: usize = 6;

/// What a rank calls, as every other rank must call it: the collective, the root (0 for
/// the unrooted ones), the input's byte length, a tag (a reduction's operator and
/// element type, else 0), the algorithm the caller asked for (`algorithm::claim_asked`, its
/// variable's choice included: every rank must ask for the same, and a node's own round compares only what its ranks
/// resolved it to) and the output's byte length where the rank has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) kind: Kind,
    pub(crate) root: i32,
    pub(crate) len: usize,
    pub(crate) tag: u64,
    pub(crate) algo: u64,
    pub(crate) recv: Option<usize>,
}

impl Claim {
    /// The claim as the words the node's round and the leaders' exchange carry.
    pub(crate) fn words(&self) -> [u64; CLAIM_WORDS] {
        let recv = self.recv.map_or(u64::MAX, |r| r as u64);
        [self.kind as u64, self.root as i64 as u64, self.len as u64, self.tag, self.algo, recv]
    }
}

/// The verdict over `n` claims in [`Claim::words`] form (`claim(i)`), as rank `rank`
/// reports it; `rank_of(i)` names claimant `i` in the communicator of `comm_size` ranks.
/// The reference is claim 0: the first claim that differs from it in collective, root,
/// length, tag or algorithm, or whose output is not as long as its input, is the culprit, and its
/// first differing field names the error. A pure function of the claims, so every rank
/// that judges the same claims reaches the same verdict.
///
/// # Errors
///
/// `Mismatch` (`"collective"`, `"root"`, `"operator or element type"`, `"algorithm"`),
/// `LengthMismatch` (an input or output length), `InvalidRoot` (a `rooted` call whose
/// common root is not a rank of `comm_size`).
pub(crate) fn judge(
    rank: i32,
    n: usize,
    claim: impl Fn(usize) -> [u64; CLAIM_WORDS],
    rank_of: impl Fn(usize) -> i32,
    comm_size: i32,
    rooted: bool,
) -> Result<()> {
    let first = claim(0);
    let bad = |c: &[u64; CLAIM_WORDS]| c[..5] != first[..5] || (c[5] != u64::MAX && c[5] != c[2]);
    if let Some((i, theirs)) = (0..n).map(|i| (i, claim(i))).find(|(_, c)| bad(c)) {
        let culprit = rank_of(i);
        let length = |found: u64| Error::LengthMismatch {
            rank,
            culprit,
            expected: first[2] as usize,
            found: found as usize,
        };
        return Err(match (0..5).find(|&f| theirs[f] != first[f]) {
            Some(0) => Error::Mismatch { rank, culprit, what: "collective" },
            Some(1) => Error::Mismatch { rank, culprit, what: "root" },
            Some(2) => length(theirs[2]),
            Some(3) => Error::Mismatch { rank, culprit, what: "operator or element type" },
            Some(_) => Error::Mismatch { rank, culprit, what: "algorithm" },
            None => length(theirs[5]),
        });
    }
    let root = first[1] as i64;
    if rooted && !(0..comm_size as i64).contains(&root) {
        return Err(Error::InvalidRoot { rank, root: root as i32, size: comm_size });
    }
    Ok(())
}

/// Whether every rank of `round` published the `op` and the payload length of local
/// rank 0, the reference (the first that differs is the culprit).
fn same_call(round: &Round<'_>) -> Result<()> {
    let rank = round.rank_of(round.me());
    let culprit = |r: usize| round.rank_of(r);
    let Call { op, send_len: len, .. } = round.call(0);
    match (0..round.size()).find(|&r| round.call(r).op != op) {
        Some(r) => Err(Error::Mismatch { rank, culprit: culprit(r), what: "collective" }),
        None => match (0..round.size()).find(|&r| round.send_len(r) != len) {
            Some(r) => {
                let found = round.send_len(r);
                Err(Error::LengthMismatch { rank, culprit: culprit(r), expected: len, found })
            }
            None => Ok(()),
        },
    }
}

/// The gather-in: every rank of the node publishes `claim` and stages `part` (the
/// caller makes `part`'s length a function of the claim and of the rank's place in the
/// call, so that equal claims mean the lengths every rank expects). The node judges the
/// claims ([`judge`], a `rooted` call's root checked against the communicator); on
/// `Ok`, the leader copies the parts of local ranks `from`, one after the other, into
/// `into` (whose length must be their sum). Every rank passes the same `from`. A
/// barrier for the node's leader: it returns only once every rank of the node has
/// arrived.
///
/// # Errors
///
/// The node's verdict (on every rank of the node alike), or a wait's error.
///
/// # Panics
///
/// If the claim's words and `part` do not fit half a staging area.
pub(crate) fn gather_in(
    ctx: &Ctx<'_>,
    claim: &Claim,
    part: &[u8],
    rooted: bool,
    from: Range<usize>,
    into: &mut [u8],
) -> Result<()> {
    let code = op(claim.kind, GATHER_IN, 0) | PRIVATE;
    let call = Call { op: code, root: claim.root as i64, send_len: part.len(), ..Call::default() };
    let round = ctx.ctl.begin_staged(&call, &claim.words(), &[part])?;
    let rank = round.rank_of(round.me());
    let reference = round.call(0).op;
    let verdict = match (0..round.size()).find(|&r| round.call(r).op != reference) {
        Some(r) => Err(Error::Mismatch { rank, culprit: round.rank_of(r), what: "collective" }),
        None => {
            let words = |r: usize| std::array::from_fn(|i| round.meta(r, i));
            judge(rank, round.size(), words, |r| round.rank_of(r), ctx.comm_size, rooted)
        }
    };
    let moved = verdict.and_then(|()| {
        if round.me() != 0 {
            return Ok(());
        }
        let mut at = 0;
        for r in from {
            let len = round.send_len(r);
            let Some(dst) = into.get_mut(at..at + len) else {
                return Err(Error::Protocol { rank, what: format!("local rank {r} staged {len} bytes") });
            };
            round.read_staged(r, 8 * CLAIM_WORDS, dst);
            at += len;
        }
        Ok(())
    });
    round.finish(moved)
}

/// The hand-off: the leader (local rank 0) stages `buf`, every other rank of the node
/// copies it into its own `buf` of the same length (checked on the node, with the
/// collective `kind`).
///
/// # Errors
///
/// `Mismatch` or `LengthMismatch` on every rank of the node, or a wait's error.
///
/// # Panics
///
/// If `buf` does not fit half a staging area.
pub(crate) fn hand_off(ctx: &Ctx<'_>, kind: Kind, buf: &mut [u8]) -> Result<()> {
    let code = op(kind, HAND_OFF, 0) | PRIVATE;
    let call = Call { op: code, send_len: buf.len(), ..Call::default() };
    let leader = ctx.ctl.me() == 0;
    let round = match leader {
        true => ctx.ctl.begin_staged(&call, &[], &[&*buf])?,
        false => ctx.ctl.begin_staged(&call, &[], &[])?,
    };
    let moved = same_call(&round).map(|()| {
        if !leader {
            round.read_staged(0, 0, buf);
        }
    });
    round.finish(moved)
}
