//! The verdict of a call across nodes, carried by the node leaders: one network
//! collective (an allgather among the leaders of one fixed-size block each) between two
//! node rounds, with a small call's data in the same blocks.
//!
//! 1. **Gather-in** (`coll::relay::gather_in`): every rank of the node publishes its
//!    [`Claim`] and stages a small payload; the node judges the claims; the leader
//!    collects the payloads it needs (a broadcast's root's bytes, a reduction's inputs).
//! 2. **Exchange**: every leader contributes a block of [`BLOCK`] bytes: its claim, whether
//!    its node's previous call failed after the exchange (`pending`), its node's verdict
//!    (an error as four words) and up to [`CARRY`] bytes of payload. Every leader judges
//!    all blocks alike: a pending failure first (`PreviousFailed`), then the first node's
//!    error, then the claims across nodes ([`relay::judge`]), so every leader reaches the
//!    same verdict; on `Ok` it computes the hand-off payload from every node's payload.
//! 3. **Hand-off** (`coll::relay::hand_off`): the leader stages the verdict and the
//!    payload; every rank of the node copies them out, and only then, on `Ok`, touches
//!    its own receive buffer.
//!
//! A rank whose node fails after the exchange (in the hand-off, or in the data legs of a
//! large call) returns the error, but the other nodes may have returned `Ok`: its ranks
//! remember it (`pending`) and its leader says so in the next call's block, which fails
//! that call on every rank with `PreviousFailed` (the deferred verdict across nodes).

use super::{Hierarchy, Net};
use crate::coll::relay::{self, Claim, CLAIM_WORDS};
use crate::coll::Kind;
use crate::error::{Error, Result};
use crate::sync::copy_block;
use mpi::traits::*;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// The most payload bytes a node carries in the leaders' exchange: calls of up to this
/// many bytes move their data with their verdict, in one network collective.
pub(crate) const CARRY: usize = 512;
/// Words of an error in a block ([`encode`]).
const ERROR_WORDS: usize = 4;
/// Words of a block's header: the claim, `pending`, the node's error.
const HEADER: usize = CLAIM_WORDS + 1 + ERROR_WORDS;
/// The bytes every leader contributes to the exchange, whatever its call.
const BLOCK: usize = 8 * HEADER + CARRY;

/// The `what` of the `Mismatch` errors a verdict may carry, by index.
const WHATS: [&str; 7] = [
    "collective",
    "root",
    "operator or element type",
    "algorithm",
    "element type",
    "exposure",
    crate::coll::ELEMENT_SIZE,
];

/// `result` as words: 0 for `Ok`; the argument errors with their fields; any other error
/// as `PeerFailed` naming the rank that failed ([`Error::failed_rank`]: the peer a rank
/// found dead, stalled or failed, else the rank whose own step failed), so that a
/// verdict passed on (a leader's node error into the exchange, the exchange's verdict
/// into the hand-off) still names it, not the rank that passed it on.
fn encode(result: &Result<()>, me: i32) -> [u64; ERROR_WORDS] {
    let w = |x: i64| x as u64;
    match result {
        Ok(()) => [0; ERROR_WORDS],
        Err(Error::Mismatch { culprit, what, .. }) => {
            let index = WHATS.iter().position(|w| w == what).unwrap_or(0);
            [1, w(*culprit as i64), index as u64, 0]
        }
        Err(Error::LengthMismatch { culprit, expected, found, .. }) => {
            [2, w(*culprit as i64), *expected as u64, *found as u64]
        }
        Err(Error::InvalidRoot { root, size, .. }) => [3, w(*root as i64), w(*size as i64), 0],
        Err(Error::PreviousFailed { .. }) => [4, 0, 0, 0],
        Err(e) => [5, w(e.failed_rank().unwrap_or(me) as i64), 0, 0],
    }
}

/// The verdict [`encode`] wrote, as rank `rank` reports it.
fn decode(words: [u64; ERROR_WORDS], rank: i32) -> Result<()> {
    let [code, a, b, c] = words;
    Err(match code {
        0 => return Ok(()),
        1 => Error::Mismatch {
            rank,
            culprit: a as i32,
            what: WHATS.get(b as usize).copied().unwrap_or("collective"),
        },
        2 => Error::LengthMismatch { rank, culprit: a as i32, expected: b as usize, found: c as usize },
        3 => Error::InvalidRoot { rank, root: a as i32, size: b as i32 },
        4 => Error::PreviousFailed { rank },
        _ => Error::PeerFailed { rank, peer: a as i32 },
    })
}

fn words<const N: usize>(bytes: &[u8]) -> [u64; N] {
    std::array::from_fn(|i| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes")))
}

/// A call's part in [`Hierarchy::relay`].
pub(crate) struct Relay<'a> {
    /// What this rank calls.
    pub(crate) claim: Claim,
    /// Whether the claim's root must be a rank of the communicator.
    pub(crate) rooted: bool,
    /// What this rank stages in the gather-in.
    pub(crate) part: &'a [u8],
    /// Whose parts the leader collects (local ranks), the same on every rank.
    pub(crate) from: Range<usize>,
    /// The sum of their parts' lengths.
    pub(crate) gathered: usize,
    /// The length of the payload the hand-off brings this rank (a function of its claim
    /// and its node, so that equal claims mean equal lengths on the node).
    pub(crate) handed: usize,
}

impl Hierarchy {
    /// The verdict of a call across nodes (see the module docs), with its small data:
    /// `carry` turns what the leader gathered into its node's payload (at most
    /// [`CARRY`] bytes, the same length on every node once the claims agree), and
    /// `result`, on the leaders and only on a verdict of `Ok`, turns every node's
    /// payload (in node order) into the hand-off's. Returns the handed payload, of
    /// `call.handed` bytes, on every rank. Every rank of every node takes part in every
    /// step whatever its node decided; not for a [`direct`](Self::direct) hierarchy.
    ///
    /// # Errors
    ///
    /// On every rank alike: `PreviousFailed` if a node's previous call failed after its
    /// exchange; the first failing node's verdict (its argument errors as they are,
    /// others as `PeerFailed` naming the rank that failed there); the claims' verdict
    /// across nodes ([`relay::judge`]). A
    /// failure of the hand-off is this node's alone (and pending for the next call).
    pub(crate) fn relay(
        &self,
        net: Net<'_>,
        call: Relay<'_>,
        carry: impl FnOnce(&[u8]) -> Vec<u8>,
        result: impl FnOnce(&[&[u8]]) -> Vec<u8>,
    ) -> Result<Vec<u8>> {
        let Net { parent, ctx } = net;
        let rank = parent.rank();
        let pending = self.pending.swap(false, Ordering::Relaxed);
        let leader = ctx.ctl.me() == 0;
        let mut gathered = vec![0u8; if leader { call.gathered } else { 0 }];
        let node = relay::gather_in(ctx, &call.claim, call.part, call.rooted, call.from, &mut gathered);
        // A node whose round failed (on every rank of it alike) still takes the verdict
        // across nodes, with no payload, so that every rank returns the same error.
        let mut handed = vec![0u8; 8 * ERROR_WORDS + if node.is_ok() { call.handed } else { 0 }];
        if let Some(leaders) = &self.leaders {
            let mut block = vec![0u8; BLOCK];
            let header = call.claim.words().into_iter().chain([pending as u64]).chain(encode(&node, rank));
            for (i, w) in header.enumerate() {
                block[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
            }
            if node.is_ok() {
                let payload = carry(&gathered);
                copy_block(&payload, &mut block[8 * HEADER..8 * HEADER + payload.len()]);
            }
            let mut all = vec![0u8; BLOCK * self.nodes];
            leaders.all_gather_into(&block[..], &mut all[..]);
            let blocks: Vec<&[u8]> = all.chunks(BLOCK).collect();
            let verdict = self.verdict_of(rank, parent.size(), &blocks, call.rooted);
            handed[..8 * ERROR_WORDS].copy_from_slice(&bytemuck_words(encode(&verdict, rank)));
            if node.is_ok() && verdict.is_ok() {
                let payloads: Vec<&[u8]> = blocks.iter().map(|b| &b[8 * HEADER..]).collect();
                let out = result(&payloads);
                copy_block(&out, &mut handed[8 * ERROR_WORDS..8 * ERROR_WORDS + out.len()]);
            }
        }
        // (Its ranks may have claimed different collectives: the hand-off names one.)
        let kind = if node.is_ok() { call.claim.kind } else { Kind::Barrier };
        if let Err(e) = relay::hand_off(ctx, kind, &mut handed) {
            self.pending.store(true, Ordering::Relaxed);
            return Err(e);
        }
        decode(words(&handed), rank)?;
        // The leader's verdict includes its node's.
        node?;
        handed.drain(..8 * ERROR_WORDS);
        Ok(handed)
    }

    /// The verdict over every node's block, the same on every leader.
    fn verdict_of(&self, rank: i32, size: i32, blocks: &[&[u8]], rooted: bool) -> Result<()> {
        let header = |k: usize| words::<HEADER>(blocks[k]);
        if (0..blocks.len()).any(|k| header(k)[CLAIM_WORDS] != 0) {
            return Err(Error::PreviousFailed { rank });
        }
        let error = |k: usize| words::<ERROR_WORDS>(&blocks[k][8 * (CLAIM_WORDS + 1)..]);
        let claim = |k: usize| words::<CLAIM_WORDS>(blocks[k]);
        let leader = |k: usize| self.leader_rank[k];
        // Each node's first rank that differs from rank 0's call (the reference, as on
        // one node): its leader if the leader's claim differs, else the culprit its own
        // round named against its leader. The first of them in rank order is the culprit.
        let nodes = blocks.len();
        let against = |k: usize| {
            let pair = |i: usize| claim(if i == 0 { 0 } else { k });
            relay::judge(rank, 2, pair, |i| leader(if i == 0 { 0 } else { k }), size, false)
        };
        let culprits = (0..nodes).filter_map(|k| match against(k) {
            Err(e) => Some(e),
            Ok(()) => decode(error(k), rank).err().filter(|e| culprit(e).is_some()),
        });
        if let Some(e) = culprits.min_by_key(culprit) {
            return Err(e);
        }
        if let Some(k) = (0..nodes).find(|&k| error(k)[0] != 0) {
            return decode(error(k), rank);
        }
        relay::judge(rank, nodes, claim, leader, size, rooted)
    }
}

/// The rank an argument error blames.
fn culprit(e: &Error) -> Option<i32> {
    match e {
        Error::Mismatch { culprit, .. } | Error::LengthMismatch { culprit, .. } => Some(*culprit),
        _ => None,
    }
}

fn bytemuck_words(w: [u64; ERROR_WORDS]) -> [u8; 8 * ERROR_WORDS] {
    let mut out = [0u8; 8 * ERROR_WORDS];
    for (i, x) in w.iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;

    #[test]
    fn errors_cross_as_words() {
        let cases = [
            Ok(()),
            Err(Error::Mismatch { rank: 3, culprit: 5, what: "operator or element type" }),
            Err(Error::LengthMismatch { rank: 3, culprit: 2, expected: 8, found: 16 }),
            Err(Error::InvalidRoot { rank: 3, root: -1, size: 8 }),
            Err(Error::PreviousFailed { rank: 3 }),
        ];
        for case in cases {
            let again = decode(encode(&case, 3), 3);
            assert_eq!(again, case);
        }
        // A node's failure names the rank that failed, and still does once a leader
        // passes the verdict on to its node (decoded, then encoded again).
        let died = Err(Error::PeerDied { rank: 4, peer: 5, pid: 77 });
        let passed = decode(encode(&died, 4), 0);
        assert_eq!(passed, Err(Error::PeerFailed { rank: 0, peer: 5 }));
        assert_eq!(decode(encode(&passed, 0), 1), Err(Error::PeerFailed { rank: 1, peer: 5 }));
        let stalled = Err(Error::Timeout { rank: 4, peer: 6, seconds: 1.0 });
        assert_eq!(decode(encode(&stalled, 4), 1), Err(Error::PeerFailed { rank: 1, peer: 6 }));
        // A rank whose own step failed is the one that failed.
        let copy = Err(Error::Transport { rank: 4, peer: 5, op: "cma read", errno: Errno::EIO });
        assert_eq!(decode(encode(&copy, 4), 1), Err(Error::PeerFailed { rank: 1, peer: 4 }));
    }
}
