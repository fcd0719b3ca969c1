//! Process-arrival-pattern aware collectives (Qian and Afsahi): alltoall inside a node
//! (PAP-Direct, read, write and copy-in/copy-out: `direct`), alltoall across nodes
//! (PAP-Shm-Direct: `shm_direct`), and what they share with the arrival-aware broadcast
//! (in `bcast`): entering without waiting, the checks per peer, `settle`.
//!
//! Real applications reach a collective at different times. A fixed exchange order makes
//! every early process wait, step after step, for the slowest peer of that step. Here a
//! rank that arrives does all the work it can with the peers already there, and comes
//! back to the others as they arrive.
//!
//! # Entering without waiting
//!
//! Every algorithm here starts its round with `Control::begin_eager`: the rank publishes
//! its call (buffers, lengths, algorithm) and its arrival, and returns at once. A peer's
//! arrival is a non-blocking check (`Round::arrived`); every wait goes through the node's
//! wait policy, for "any of these peers arrived, or any of these events".
//!
//! # Checks when nobody waits for everybody
//!
//! The ordinary collectives check every rank's call before any byte moves. Here that
//! would mean waiting for the last arrival, so the checks move to each peer:
//!
//! 1. A rank first checks its own call (`self_ok`: the send and receive buffers are both
//!    `p` blocks of the same size). A rank whose own call is wrong moves no data at all
//!    and does not publish its receive buffer as writable, so nobody can write into it.
//! 2. Before touching a peer (writing into it, reading from it, pushing packets to it,
//!    gathering from it), a rank checks that the peer has arrived and that its call is
//!    `compatible` with its own: the same op word (collective and algorithm), root and
//!    aux words, and the same lengths. Compatibility is an equivalence among self-
//!    consistent calls, so two ranks exchange data only if they agree with each other,
//!    and a peer that disagrees with one rank disagrees with every rank of that rank's
//!    class. Data therefore only ever moves between ranks that agree, and only inside the
//!    buffers they published.
//! 3. When a rank meets an incompatible peer, or sees that a peer has already given up
//!    (`Round::peer_failed`), it stops moving data.
//! 4. At the end every rank waits for every arrival and computes the verdict of the
//!    ordinary collectives (`coll::verdict`) over every call: a pure function of the same
//!    data, so every rank reaches the same verdict, and the finish phase (which waits for
//!    everyone's `done`) makes the outcome agreed. If all pairs are compatible the verdict
//!    is `Ok`; if any pair is not, it is an error (the same one on every rank, naming the
//!    same culprit), whatever the order of arrival: the culprit may arrive last.
//!
//! What is weaker than in the ordinary collectives: on a failed call, a rank's receive
//! buffer may already hold blocks from the compatible peers that arrived before the
//! mismatch was seen. Every send buffer is untouched, and so is the receive buffer of a
//! rank whose call agrees with nobody's (a rank copies even its own block only once the
//! verdict is in); see the book's arrival chapter for the rest.
//!
//! # Alltoall inside a node (PAP-Direct)
//!
//! Rank `r` serves its peers in the order `(r + i) mod p`, `i = 1 .. p - 1`, but only the
//! ones that have arrived: it sweeps the list, serves every arrived peer, drops it from
//! the list, and waits (for any arrival) only when no listed peer is there. One late peer
//! never keeps it from serving the others. Costs for `p` ranks and blocks of `n` bytes,
//! with the model of the alltoall chapter (`alpha` per CMA call, `beta` per byte, `l` per
//! page pinned, `s` page size, `beta_m` a memory copy per byte):
//!
//! - `pap-write` ([`AlltoallAlgorithm::PapWrite`](crate::AlltoallAlgorithm::PapWrite)): receivers publish their receive
//!   buffers as writable; a rank writes block `q` of its send buffer into rank `q`'s
//!   receive buffer with one CMA write, then adds one to `q`'s completion counter (a
//!   message counter, `sync::counter`). A rank's data is complete when its counter has
//!   grown by `p - 1` in this round. `(p - 1)(alpha + n beta + ceil(n/s) l)` per rank,
//!   plus the waiting for the last arrival's blocks, which no algorithm avoids.
//! - `pap-read` ([`AlltoallAlgorithm::PapRead`](crate::AlltoallAlgorithm::PapRead)): a rank reads its block from the send
//!   buffer of every arrived sender. Same cost; no counter, since a reader knows when it
//!   has read everything.
//! - `pap-staged` ([`AlltoallAlgorithm::PapStaged`](crate::AlltoallAlgorithm::PapStaged)): copy-in/copy-out for small blocks
//!   and the `cico` transport. A rank pushes its block for `q` into `q`'s point-to-point
//!   FIFO (`sync::fifo`, 4 KiB packets, 8 slots) as soon as `q` has arrived, as far as
//!   the ring has room, without ever waiting for room; every rank meanwhile takes the
//!   packets that have landed in its own FIFO, whichever writer they come from: the data
//!   arriving is itself the signal. `2 (p - 1) n beta_m + (p - 1) ceil(n / 4 KiB) lambda`.
//!
//! # Alltoall across nodes (PAP-Shm-Direct)
//!
//! With several nodes (or virtual nodes) every PAP variant runs the three phases of
//! PAP-Shm-Direct, inside one eager round per node:
//!
//! 1. **Gather.** The node leader (local rank 0) reads, from each local rank as it
//!    arrives, the blocks that rank sends to the other nodes, straight into one packed
//!    outgoing buffer per destination node (one vectored CMA read per rank and node). The
//!    blocks between ranks of the same node never go through the leader: each rank reads
//!    them from its arrived local peers' send buffers (PAP-read inside the node).
//! 2. **Exchange.** Every leader posts, at arrival, a receive for a small header from
//!    every other leader. Once its node is gathered it sends every other leader a header
//!    (every local rank's op word and lengths) and the data, all nonblocking. It services
//!    the requests in the order they complete: a header that agrees posts the receive for
//!    its data straight into the leader's inbox; data that lands sets that source node's
//!    flag on the leader's landing board. Nothing waits for a particular leader.
//! 3. **Scatter.** Every local rank watches the board and, for each source node whose
//!    flag is set, reads its blocks out of the leader's inbox (one vectored CMA read per
//!    source node), in whatever order the nodes land.
//!
//! The headers carry every rank's shape, so every leader computes the same verdict over
//! the whole communicator; a final allreduce (the outcome has to be agreed anyway, and
//! nobody can finish before the last arrival's data) hands it to every rank, with the
//! first failed rank. On `cico` nodes the local legs go through the point-to-point FIFOs
//! instead of CMA. What it cannot catch: ranks that call something else at this point
//! (another collective, a non-PAP alltoall algorithm), which take another path over MPI
//! that starts with a synchronizing check this one never calls. No rank synchronizes at
//! entry, so the two sides wait for each other; with `ZCOLL_TIMEOUT` set the leaders'
//! wait ends and the process aborts (an MPI request cannot be abandoned), without it the
//! job hangs, as MPI itself does on such a program. PAP variants that disagree are
//! caught: the headers carry every rank's op word.

mod direct;
pub(crate) mod packets;

pub(crate) use direct::alltoall;

/// How PAP-Direct moves a block inside a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A rank reads its block from the sender's buffer (`pap-read`).
    Read,
    /// The sender writes into the published receive buffer (`pap-write`, and
    /// `pap-shm-direct` on one node).
    Write,
    /// Copy-in/copy-out through the point-to-point FIFOs (`pap-staged`).
    Staged,
}

use super::{verdict, BadLength, Ctx};
use crate::error::Result;
use crate::sync::{Call, Round};

/// The stream of PAP packets in the point-to-point FIFOs: data for the receive buffer.
pub(crate) const TO_RECV: u32 = 0x9a9_0001;
/// The stream of PAP packets for a leader's outgoing buffers (the gather leg on `cico`).
pub(crate) const TO_OUTBOX: u32 = 0x9a9_0002;
/// The stream of PAP packets a leader scatters from its inbox (on `cico`).
pub(crate) const TO_SCATTER: u32 = 0x9a9_0003;

/// Whether a call agrees with itself: both buffers are `p` blocks of one size, in whole
/// elements of the size its op word carries.
fn self_ok(call: &Call, p: usize) -> bool {
    call.send_len == call.recv_len && super::whole_blocks(call.send_len, p, call.op) == call.send_len
}

/// Serves every peer in `pending` that has arrived, in order, and drops it from `pending`
/// once served; peers not there yet stay for a later pass. `serve` returns `Ok(false)`
/// for a peer it will not touch (its call disagrees), which ends the pass with
/// `Ok(false)`: the verdict names the culprit, and nothing more moves.
///
/// # Errors
///
/// `serve`'s first error.
#[inline]
pub(crate) fn serve_arrived(
    round: &Round<'_>,
    pending: &mut Vec<usize>,
    mut serve: impl FnMut(usize) -> Result<bool>,
) -> Result<bool> {
    let mut i = 0;
    while i < pending.len() {
        let q = pending[i];
        if !round.arrived(q) {
            i += 1;
            continue;
        }
        if !serve(q)? {
            return Ok(false);
        }
        pending.remove(i);
    }
    Ok(true)
}

/// Whether two ranks may exchange data: the same collective, algorithm, root, aux words
/// and lengths. An equivalence relation among self-consistent calls.
pub(crate) fn compatible(a: &Call, b: &Call) -> bool {
    (a.op, a.root, a.aux, a.aux2, a.send_len, a.recv_len, a.recv_writable)
        == (b.op, b.root, b.aux, b.aux2, b.send_len, b.recv_len, b.recv_writable)
}

/// Ends an eager round: waits for every arrival, computes the ordinary verdict over every
/// call (the same on every rank), and finishes with it, or with the data phase's result.
pub(crate) fn settle(
    ctx: &Ctx<'_>,
    round: Round<'_>,
    moved: Result<()>,
    rooted: bool,
    lengths: impl Fn(&Round<'_>) -> std::result::Result<(), BadLength>,
) -> Result<()> {
    let agreed = round.all_arrived().and_then(|()| verdict(ctx, &round, rooted, lengths));
    round.finish(agreed.and(moved))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_is_equality_of_what_the_checks_compare() {
        let a = Call { op: 6, send: 1, send_len: 8, recv: 2, recv_len: 8, ..Call::default() };
        assert!(self_ok(&a, 4) && !self_ok(&a, 3));
        // Addresses differ between ranks; nothing else may.
        assert!(compatible(&a, &Call { send: 7, recv: 9, ..a }));
        for b in [Call { op: 7, ..a }, Call { recv_len: 4, ..a }, Call { recv_writable: true, ..a }] {
            assert!(!compatible(&a, &b), "{b:?}");
        }
    }
}
