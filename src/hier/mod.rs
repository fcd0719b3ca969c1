//! Two-level compositions for communicators that span several nodes: the intra-node legs
//! go through the node's segment and transport, the inter-node legs through rsmpi among
//! the node leaders (local rank 0 of every node) or, for the multi-root allreduce, along
//! the column communicators (local rank `j` of every node).
//!
//! When every node holds a single rank ([`Hierarchy::direct`]) there is no intra-node leg
//! to gain from: the collectives check their arguments across the communicator as usual
//! and then call rsmpi's own collective on the whole communicator.

mod allgather;
mod alltoall;
mod bcast;
mod pap;
mod reduce;
pub(crate) mod relay;
mod rooted;
mod varcount;

use crate::alloc::Scratch;
use crate::coll::relay::Claim;
use crate::coll::{self, Ctx};
use crate::error::{failure_key, named, Error, Result};
use crate::node::NodeComm;
use mpi::collective::SystemOperation;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::sync::atomic::AtomicBool;

/// What a call across nodes runs over: the parent communicator (the whole one) and this
/// rank's node ([`Ctx`]). Every collective of [`Hierarchy`] takes it first.
#[derive(Clone, Copy)]
pub(crate) struct Net<'a> {
    pub(crate) parent: &'a SimpleCommunicator,
    pub(crate) ctx: &'a Ctx<'a>,
}

/// Where this rank stands in a rooted call across nodes.
pub(crate) struct Stand {
    /// The root's node.
    pub(crate) root_node: usize,
    /// Whether this rank's node is the root's.
    pub(crate) here: bool,
    /// Whether this rank is its node's leader.
    pub(crate) leader: bool,
}

/// Where every rank of the communicator lives.
pub(crate) struct Hierarchy {
    /// The communicator of the node leaders, ordered by parent rank (on leaders only).
    leaders: Option<SimpleCommunicator>,
    /// This rank's column: the ranks with its local rank on every node that has one,
    /// ordered by parent rank. Column 0 holds the same ranks as `leaders`.
    column: SimpleCommunicator,
    /// The smallest node's size: the number of columns that reach every node.
    min_node_size: usize,
    /// For every rank of the parent: the index of its node (its leader's rank among the
    /// leaders).
    node_of: Vec<usize>,
    /// For every rank of the parent: its rank on its node.
    local_of: Vec<usize>,
    /// How many nodes.
    nodes: usize,
    /// This rank's node.
    my_node: usize,
    /// For every node: its leader's rank in the parent.
    leader_rank: Vec<i32>,
    /// Whether this rank's node failed its previous call after the leaders' exchange,
    /// which other nodes may have returned `Ok` from: its leader says so in the next
    /// call's exchange (the deferred verdict across nodes, `relay.rs`).
    pending: AtomicBool,
    /// The most elements one MPI call of a broadcast, reduction or scan carries
    /// ([`piece_from_env`]): longer ones go in pieces, since MPI counts are 32-bit.
    piece: usize,
}

/// The most elements an MPI count holds.
const MPI_MAX_COUNT: usize = mpi::Count::MAX as usize;

/// `ZCOLL_MPI_PIECE=n`: the most elements one MPI call of a broadcast, reduction or scan
/// across nodes carries; unset, the most an MPI count holds.
///
/// # Errors
///
/// `Error::Config` for anything but a whole number from 1 to 2^31 - 1.
pub(crate) fn piece_from_env() -> Result<usize> {
    match std::env::var("ZCOLL_MPI_PIECE") {
        Err(_) => Ok(MPI_MAX_COUNT),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=MPI_MAX_COUNT).contains(&n) => Ok(n),
            _ => Err(Error::Config {
                name: "ZCOLL_MPI_PIECE",
                value: v,
                expected: "a whole number from 1 to 2147483647",
            }),
        },
    }
}

impl Hierarchy {
    /// Learns the node of every rank, and splits `parent` into the leaders' communicator
    /// and the column communicators (one per local rank; column `j` holds local rank `j`
    /// of every node with more than `j` ranks). Collective over `parent`. `piece` is the
    /// most elements one MPI call of a broadcast, reduction or scan carries.
    pub(crate) fn new(parent: &SimpleCommunicator, node: &NodeComm, piece: usize) -> Hierarchy {
        let p = parent.size() as usize;
        let leader = node.ctl.rank_of(0);
        let mut leader_of = vec![0i32; p];
        parent.all_gather_into(&leader, &mut leader_of[..]);
        let mut leaders_sorted = leader_of.clone();
        leaders_sorted.sort_unstable();
        leaders_sorted.dedup();
        let node_of: Vec<usize> =
            leader_of.iter().map(|l| leaders_sorted.binary_search(l).expect("a leader is a rank")).collect();
        let mut seen = vec![0usize; leaders_sorted.len()];
        let local_of = node_of
            .iter()
            .map(|&n| {
                seen[n] += 1;
                seen[n] - 1
            })
            .collect();
        let is_leader = node.ctl.me() == 0;
        let color = if is_leader { Color::with_value(0) } else { Color::undefined() };
        let leaders = parent.split_by_color_with_key(color, parent.rank());
        let column = parent
            .split_by_color_with_key(Color::with_value(node.ctl.me() as i32), parent.rank())
            .expect("a split with a defined color returns a communicator");
        let my_node = node_of[parent.rank() as usize];
        let nodes = leaders_sorted.len();
        let min_node_size = seen.iter().copied().min().unwrap_or(1);
        let pending = AtomicBool::new(false);
        let leader_rank = leaders_sorted;
        // Every rank must cut a long call into the same pieces: the smallest asked for.
        let mut least = 0u64;
        parent.all_reduce_into(&(piece as u64), &mut least, SystemOperation::min());
        let piece = least as usize;
        Hierarchy {
            leaders,
            column,
            min_node_size,
            node_of,
            local_of,
            nodes,
            my_node,
            leader_rank,
            pending,
            piece,
        }
    }

    /// Forgets the hierarchy's MPI communicators without freeing them: for a drop on a
    /// thread MPI does not allow (see `Comm`'s docs). `self_comm` is a predefined handle,
    /// which rsmpi never frees.
    pub(crate) fn leak_handles(&mut self) {
        std::mem::forget(self.leaders.take());
        std::mem::forget(std::mem::replace(&mut self.column, SimpleCommunicator::self_comm()));
    }

    /// Whether every node holds a single rank: the collectives then gain nothing from
    /// the node level, and call rsmpi's own on the whole communicator (after the same
    /// checks).
    pub(crate) fn direct(&self) -> bool {
        self.nodes == self.node_of.len()
    }

    /// The size of the smallest node: the multi-root allreduce's partition count.
    pub(crate) fn min_node_size(&self) -> usize {
        self.min_node_size
    }

    /// The number of nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// This rank's node.
    pub(crate) fn my_node(&self) -> usize {
        self.my_node
    }

    /// The local rank of parent rank `r` on its node, or 0 for a rank that does not exist
    /// (the checks then reject the call on every rank).
    pub(crate) fn local_of(&self, r: i32) -> usize {
        usize::try_from(r).ok().and_then(|r| self.local_of.get(r).copied()).unwrap_or(0)
    }

    /// The communicator of the node leaders (node `k`'s leader is its rank `k`), on the
    /// leaders only.
    pub(crate) fn leaders(&self) -> Option<&SimpleCommunicator> {
        self.leaders.as_ref()
    }

    /// Where this rank (local rank `ctx.ctl.me()` of its node) stands in a call rooted at
    /// parent rank `root`.
    pub(crate) fn stand(&self, ctx: &Ctx<'_>, root: i32) -> Stand {
        let root_node = self.node_of(root);
        Stand { root_node, here: self.my_node == root_node, leader: ctx.ctl.me() == 0 }
    }

    /// The node of parent rank `r`, or 0 for a rank that does not exist.
    pub(crate) fn node_of(&self, r: i32) -> usize {
        usize::try_from(r).ok().and_then(|r| self.node_of.get(r).copied()).unwrap_or(0)
    }

    /// Checks across nodes that every rank calls `kind` with the same root and length, and
    /// asks for the same algorithm (`algo`, [`claim_asked`](coll::algorithm::claim_asked):
    /// the variable's choice included; 0 where there is no choice); the node-local checks
    /// then run as usual.
    pub(crate) fn check(
        &self,
        net: Net<'_>,
        kind: coll::Kind,
        root: i32,
        len: usize,
        algo: u64,
    ) -> Result<()> {
        self.check_tagged(net, Claim { kind, root, len, tag: 0, algo, recv: None })
    }

    /// [`check`](Self::check) of a whole `claim`: also that every rank passes the same
    /// `tag` (a reduction's operator and element type), and that every rank's output, where
    /// it has one (`recv`), is `len` bytes long: so that no node moves a byte when a rank
    /// of another node has a buffer of the wrong length.
    ///
    /// Across several nodes of more than one rank, the node's ranks compare their calls
    /// in a node round and only the leaders compare across nodes ([`relay`](Self::relay),
    /// with no payload); with one rank per node, one allreduce over `parent`.
    pub(crate) fn check_tagged(&self, net: Net<'_>, claim: Claim) -> Result<()> {
        let parent = net.parent;
        let Claim { kind, root, len, tag, algo, recv } = claim;
        if !self.direct() {
            let call = relay::Relay { claim, rooted: true, part: &[], from: 0..0, gathered: 0, handed: 0 };
            return self.relay(net, call, |_| Vec::new(), |_| Vec::new()).map(drop);
        }
        let short = recv.map_or(0, |r| r as i64 - len as i64);
        let mine = [kind as i64, root as i64, len as i64, tag as i64, algo as i64, short];
        if claims_agree(parent, mine) {
            let size = parent.size();
            return match root {
                r if (0..size).contains(&r) => Ok(()),
                _ => Err(Error::InvalidRoot { rank: parent.rank(), root, size }),
            };
        }
        Err(claims_differ(parent, mine).expect("a difference"))
    }

    /// [`check`](Self::check) of an unrooted call whose send length is `len`, then
    /// [`agree_shape`] of its receive length `recv` and its word. With one rank per node, a
    /// valid call takes one allreduce: the common words, with `word` for the tag and, for
    /// the last, whether this rank's lengths are not what `expected` makes of its own send
    /// length (rank 0's, once the lengths agree). A call they do not pass takes the two
    /// checks, which name the culprit.
    ///
    /// # Errors
    ///
    /// As `check`, then as `agree_shape`.
    #[allow(clippy::too_many_arguments)] // the check's words and the shape's
    pub(crate) fn check_shape(
        &self,
        net: Net<'_>,
        kind: coll::Kind,
        len: usize,
        algo: u64,
        recv: usize,
        word: u64,
        expected: impl Fn(usize) -> (usize, usize),
    ) -> Result<()> {
        let parent = net.parent;
        if self.direct() {
            let bad = expected(len) != (len, recv);
            let common = [kind as i64, 0, len as i64, 0, algo as i64, 0];
            if direct_check(
                parent,
                common,
                [kind as i64, 0, len as i64, word as i64, algo as i64, bad as i64],
            )? {
                return Ok(());
            }
        } else {
            self.check(net, kind, 0, len, algo)?;
        }
        agree_shape(parent, len, recv, word, expected)
    }

    /// Agrees across nodes on the outcome of a step every rank took (see [`agree`]).
    pub(crate) fn agree(&self, parent: &SimpleCommunicator, result: Result<()>) -> Result<()> {
        agree(parent, result)
    }
}

/// The words of a direct check: collective, root, length, tag, algorithm, and a word that
/// must be 0 on every rank (a receive buffer's length beyond the call's).
const CHECK_WORDS: usize = 6;

/// Whether every rank of `parent` gave the same `mine` and a last word of 0: one allreduce
/// of every word and its complement (`!v`, which reverses the order of every `i64`
/// without overflow), whose maxima are the greatest and the complement of the least.
fn claims_agree(parent: &SimpleCommunicator, mine: [i64; CHECK_WORDS]) -> bool {
    const N: usize = CHECK_WORDS;
    let mut both = [0i64; 2 * N];
    for (i, &v) in mine.iter().enumerate() {
        both[2 * i] = v;
        both[2 * i + 1] = !v;
    }
    let mut max = [0i64; 2 * N];
    parent.all_reduce_into(&both[..], &mut max[..], SystemOperation::max());
    (0..N).all(|i| max[2 * i] == !max[2 * i + 1]) && max[2 * (N - 1)] == 0
}

/// The checks of a call on a direct hierarchy that folds what it checks beyond the common
/// words (`common`, as [`Hierarchy::check_tagged`] gives them) into the words it passes
/// (`folded`): `true` where they agree on every rank (one allreduce). Else the common
/// words' error, after the one allgather every call's failed check takes next, so ranks
/// of different calls still meet in the same MPI calls; or `false` where only the folded
/// words differ: the caller's own checks then name the culprit.
fn direct_check(
    parent: &SimpleCommunicator,
    common: [i64; CHECK_WORDS],
    folded: [i64; CHECK_WORDS],
) -> Result<bool> {
    if claims_agree(parent, folded) {
        return Ok(true);
    }
    claims_differ(parent, common).map_or(Ok(false), Err)
}

/// After [`claims_agree`] found a difference: every rank's `mine` (one allgather), and the
/// first rank that differs from rank 0's, or whose last word is not 0, as an error naming
/// it and what differs; `None` if every rank's words agree after all (a rank that gave
/// other words to `claims_agree` than these).
fn claims_differ(parent: &SimpleCommunicator, mine: [i64; CHECK_WORDS]) -> Option<Error> {
    const N: usize = CHECK_WORDS;
    let mut all = vec![0i64; N * parent.size() as usize];
    parent.all_gather_into(&mine[..], &mut all[..]);
    let rank = parent.rank();
    // Every rank may agree on the same wrong output length: rank 0 is then the first
    // culprit.
    let (culprit, theirs) = all.chunks(N).enumerate().find(|(_, c)| *c != &all[..N] || c[5] != 0)?;
    let culprit = culprit as i32;
    let length = |found: i64| Error::LengthMismatch {
        rank,
        culprit,
        expected: all[2] as usize,
        found: found as usize,
    };
    Some(match (0..N).find(|&i| theirs[i] != all[i]).unwrap_or(5) {
        0 => Error::Mismatch { rank, culprit, what: "collective" },
        1 => Error::Mismatch { rank, culprit, what: "root" },
        2 => length(theirs[2]),
        3 => Error::Mismatch { rank, culprit, what: "operator or element type" },
        4 => Error::Mismatch { rank, culprit, what: "algorithm" },
        _ => length(theirs[2] + theirs[5]),
    })
}

/// Agrees over `parent` on the outcome of a step every rank took: this rank's own error,
/// or `PeerFailed` naming the rank that failed (the least [`failure_key`] of the ranks'
/// errors), or `Ok` on every rank.
pub(crate) fn agree(parent: &SimpleCommunicator, result: Result<()>) -> Result<()> {
    let mine = match &result {
        Ok(()) => i64::MAX,
        Err(e) => failure_key(e, parent.rank()),
    };
    let mut first = 0i64;
    parent.all_reduce_into(&mine, &mut first, SystemOperation::min());
    match (result, first) {
        (Err(e), _) => Err(e),
        (Ok(()), i64::MAX) => Ok(()),
        (Ok(()), key) => Err(Error::PeerFailed { rank: parent.rank(), peer: named(key) }),
    }
}

/// The ranks of every node, in local-rank order (ascending ranks of the communicator).
pub(super) struct Nodes {
    pub(super) members: Vec<Vec<usize>>,
}

/// A scratch buffer of `len` bytes that the node's ranks may copy from or into: in the
/// shared heap where they map each other's heaps (loads and stores, no CMA), else
/// ordinary memory; at least one byte, so that its address is a real one (use `..len`).
pub(crate) fn scratch(ctx: &Ctx<'_>, len: usize) -> Scratch<u8> {
    Scratch::zeroed(len.max(1), ctx.ctl.loads_heaps())
}

/// The displacements of consecutive `counts`.
pub(super) fn prefix(counts: &[i32]) -> Vec<i32> {
    counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect()
}

pub(super) fn too_big(parent: &SimpleCommunicator, bytes: usize) -> Error {
    Error::Unsupported {
        rank: parent.rank(),
        what: format!("a two-level exchange of {bytes} bytes at a node leader (MPI counts stop at 2 GiB)"),
    }
}

/// Checks across the communicator that every rank's send and receive lengths are
/// `expected(rank 0's send length)` and that every rank publishes the same op word (the
/// same algorithm and, for an alltoall, element size). A pure function of the gathered
/// values, so every rank reaches the same verdict.
fn agree_shape(
    parent: &SimpleCommunicator,
    send: usize,
    recv: usize,
    word: u64,
    expected: impl Fn(usize) -> (usize, usize),
) -> Result<()> {
    let size = parent.size() as usize;
    let mut all = vec![0u64; 3 * size];
    parent.all_gather_into(&[send as u64, recv as u64, word][..], &mut all[..]);
    let rank = parent.rank();
    let (send, recv) = expected(all[0] as usize);
    for (field, want) in [(0, send), (1, recv)] {
        if let Some(c) = (0..size).find(|&c| all[3 * c + field] != want as u64) {
            let found = all[3 * c + field] as usize;
            return Err(Error::LengthMismatch { rank, culprit: c as i32, expected: want, found });
        }
    }
    match (0..size).find(|&c| all[3 * c + 2] != all[2]) {
        Some(c) => {
            Err(Error::Mismatch { rank, culprit: c as i32, what: coll::differs_in(all[2], all[3 * c + 2]) })
        }
        None => Ok(()),
    }
}

impl Nodes {
    pub(super) fn of(hier: &Hierarchy, size: usize) -> Nodes {
        let mut members = vec![Vec::new(); hier.nodes()];
        for r in 0..size {
            members[hier.node_of(r as i32)].push(r);
        }
        Nodes { members }
    }
}

/// `Unsupported` if `total` bytes do not fit a 32-bit MPI count.
pub(crate) fn mpi_count(total: usize, me: i32) -> Result<()> {
    if total > mpi::Count::MAX as usize {
        let what = format!("{total} bytes in one collective across nodes (MPI counts are 32-bit)");
        return Err(Error::Unsupported { rank: me, what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displacements_are_prefix_sums() {
        assert_eq!(prefix(&[3, 0, 5, 2]), vec![0, 3, 3, 8]);
        assert!(prefix(&[]).is_empty());
    }
}
