//! The deferred verdict. A rank that only gives in a call small enough to travel with its
//! arrival (the root of a broadcast, a scatter or a scatterv, a non-root of a reduce, a
//! gather or a gatherv) leaves the call at once, before any rank has judged it. A bad call then returns `Ok`
//! on that rank, and every rank learns of the failure at its next call on the
//! communicator, which fails on every rank with `Error::PreviousFailed` and does nothing;
//! the call after that works again.
//!
//! The scenario: good one-phase broadcasts back to back (roots repeated and rotating,
//! against rsmpi); then each kind of bad broadcast (a short buffer, a reader naming
//! another root, every rank naming itself the root, a reader calling an allreduce) with
//! each kind of next call (a barrier, an allreduce, a one-phase broadcast whose root
//! leaves too, a large broadcast, and a one-phase broadcast from the bad call's own root
//! after two good ones from it, so that the root leaves three calls in a row and judges
//! the bad one as it leaves the next), then a good broadcast. Then the same for the
//! other givers ([`GIVERS`]): bad reduces (a giver's input of another length, a giver
//! naming another root or another operator, the root's output too short, every rank
//! reducing to its neighbour so that every rank leaves, an operator refused on the
//! element type, which no rank may leave), bad gathers and bad scatters (a block of
//! another length, another root, a root's buffer of the wrong size, which a scatter's
//! root checks alone before leaving), bad gathervs (a leaf's block against the root's
//! count, another root, the root's counts an entry short or a displacement negative,
//! every rank rooting at its neighbour), bad scattervs (a leaf's block against the root's
//! count, another root, the root's counts an entry short, its buffer short or its own
//! block long, the last three of which the root checks alone before leaving), and calls
//! in which the ranks give in different collectives (reduces beside gathers, a scatter's
//! root beside gathers to it, a scatterv's root beside gathervs to it, so that every rank
//! leaves), each followed by each kind of next call (the above, and a small reduce,
//! gather, scatter, gatherv and scatterv, whose givers leave too), checked
//! rank by rank: a rank returns `Ok` exactly where it gives and passed its own checks. `ZCOLL_EXPECT_LEAVE=1` says the
//! job must defer (one node, flat arrivals), `0` that it must not (virtual nodes, a tree
//! of arrivals), which the cases assert. The `deferred-drop` scenario drops a
//! communicator right after a bad call its root left: the root reports it on standard
//! error; then one right after a small allgatherv one rank failed alone: the ranks that
//! returned `Ok` report it; then one right after a call that every rank failed with
//! `PreviousFailed`: nobody reports anything.

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::{Comm, Error};

/// What a rank does in a bad broadcast: its root, its buffer's length, or an allreduce.
type Bad = fn(me: i32, p: i32) -> Part;

enum Part {
    Bcast { root: i32, len: usize },
    Allreduce,
}

const BADS: [(&str, Bad); 4] = [
    ("a reader's buffer is short", |me, p| Part::Bcast { root: 0, len: if me == 1 % p { 99 } else { 100 } }),
    ("a reader names another root", |me, p| Part::Bcast {
        root: if me == p - 1 { 1 % p } else { 0 },
        len: 100,
    }),
    ("every rank names itself the root", |me, _| Part::Bcast { root: me, len: 100 }),
    ("a reader calls an allreduce", |me, p| match me == p - 1 {
        true => Part::Allreduce,
        false => Part::Bcast { root: 0, len: 100 },
    }),
];

/// The bytes `root` broadcasts in call `i`.
fn bytes(i: usize, root: i32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7 + root as usize * 101) as u8).collect()
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    // Good broadcasts back to back: the same root several times running (each call then
    // waits for the readers of the one before), and rotating roots.
    for i in 0..400usize {
        let root = if i % 6 < 3 { 0 } else { (i % p as usize) as i32 };
        let len = (i * 97) % 5000;
        let mut buf = if me == root { bytes(i, root, len) } else { vec![0xEE; len] };
        comm.broadcast_into(&mut buf[..], root).unwrap_or_else(|e| panic!("broadcast {i}: {e}"));
        let mut want = bytes(i, root, len);
        if len > 0 {
            world.process_at_rank(root).broadcast_into(&mut want[..]);
        }
        assert!(buf == want, "broadcast {i} of {len} bytes from {root}: wrong bytes");
    }
    assert!(p >= 2, "a bad broadcast needs two ranks");
    let expect = std::env::var("ZCOLL_EXPECT_LEAVE").ok();
    for (c, (name, bad)) in BADS.iter().enumerate() {
        for next in 0..5 {
            let what = format!("{name}, then next call {next}");
            let i = 1000 + c * 10 + next;
            if next == 4 {
                // Two good one-phase broadcasts from rank 0, which leaves each after
                // judging the one before (`Control::learn`).
                for k in 0..2 {
                    next_call(world, comm, 4, i + 100 + k)
                        .unwrap_or_else(|e| panic!("{what}: good call {k}: {e}"));
                }
            }
            // The bad call.
            let (result, root, unchanged) = match bad(me, p) {
                Part::Bcast { root, len } => {
                    let mut buf = if me == root { bytes(i, root, len) } else { vec![0xEE; len] };
                    let before = buf.clone();
                    let r = comm.broadcast_into(&mut buf[..], root);
                    (r, Some(root), buf == before)
                }
                Part::Allreduce => {
                    let mut out = [7u64; 4];
                    let r = comm.all_reduce_into(&[1u64; 4], &mut out, SystemOperation::sum());
                    (r, None, out == [7u64; 4])
                }
            };
            assert!(unchanged, "{what}: the bad call changed a buffer");
            let left = match (&result, root) {
                (Ok(()), Some(root)) if root == me => 1u8,
                (Ok(()), _) => panic!("{what}: a rank that is not a root returned Ok"),
                (
                    Err(Error::LengthMismatch { .. } | Error::Mismatch { .. } | Error::PeerFailed { .. }),
                    _,
                ) => 0,
                (Err(e), _) => panic!("{what}: {e}"),
            };
            let mut any = 0u8;
            world.all_reduce_into(&left, &mut any, SystemOperation::max());
            match expect.as_deref() {
                Some("1") => assert_eq!(any, 1, "{what}: no root left the call early"),
                Some("0") => assert_eq!(any, 0, "{what}: a root left the call, where none may"),
                _ => {}
            }
            // The next call: fails on every rank if a rank left the bad one, else works.
            let got = next_call(world, comm, next, i + 1);
            match (any, got) {
                (1, Err(Error::PreviousFailed { rank })) => assert_eq!(rank, me),
                (0, Ok(())) => {}
                (any, got) => panic!("{what}: {any} ranks left early; the next call gave {got:?}"),
            }
            // And then calls work again.
            next_call(world, comm, 2, i + 2).unwrap_or_else(|e| panic!("{what}: the call after: {e}"));
        }
    }
    givers(world, comm, expect.as_deref());
    // A good call after all that, checked against rsmpi.
    next_call(world, comm, 3, 2000).expect("a large broadcast at the end");
}

/// What a rank does in a bad reduce, gather or scatter ([`GIVERS`]).
enum Giver {
    /// A reduce of `len` `u64`s (`f64`s with `float`) to `root` with `op` (`max`: `Max`,
    /// else `Sum`; `xor`: `BitXor`); `out` is the root's output length.
    Reduce { root: i32, len: usize, out: usize, max: bool, float: bool, xor: bool },
    /// A gather of `block` `u32`s to `root`, whose buffer holds `whole`.
    Gather { root: i32, block: usize, whole: usize },
    /// A scatter of `block` `u32`s from `root`, whose buffer holds `whole`.
    Scatter { root: i32, block: usize, whole: usize },
    /// A gatherv of `block` `u32`s to `root`, whose counts say `B + r` for rank `r`
    /// (`entries` of them), blocks end to end, the first displacement `first`.
    Gatherv { root: i32, block: usize, entries: usize, first: i32 },
    /// A scatterv of `block` `u32`s from `root`, whose counts say `B + r` for rank `r`
    /// (`entries` of them), blocks end to end from `first` in a buffer that holds them
    /// all (`short`: one element less).
    Scatterv { root: i32, block: usize, entries: usize, first: i32, short: bool },
}

impl Giver {
    /// Whether rank `me` only gives in its own view of the call and passes every check it
    /// can make alone: where leaving is allowed, it leaves and returns `Ok`.
    fn leaves(&self, me: i32, p: i32) -> bool {
        match *self {
            Giver::Reduce { root, float, xor, .. } => me != root && !(float && xor),
            Giver::Gather { root, .. } | Giver::Gatherv { root, .. } => me != root,
            Giver::Scatter { root, block, whole } => me == root && whole == block * p as usize,
            // A scatterv root checks its partition and its own block's length alone.
            Giver::Scatterv { root, block, entries, first, short } => {
                me == root && entries == p as usize && first >= 0 && !short && block == B + me as usize
            }
        }
    }
}

/// A normal block length, in elements.
const B: usize = 6;

type BadGiver = fn(me: i32, p: i32) -> Giver;

/// The bad calls of the givers: mismatched lengths, roots, operations and buffer sizes.
const GIVERS: [(&str, BadGiver); 26] = [
    ("reduce: a giver's input is longer", |me, p| Giver::Reduce {
        root: 0,
        len: if me == 1 % p { B + 1 } else { B },
        out: B,
        max: false,
        float: false,
        xor: false,
    }),
    ("reduce: a giver names another root", |me, p| Giver::Reduce {
        root: if me == p - 1 { 1 % p } else { 0 },
        len: B,
        out: B,
        max: false,
        float: false,
        xor: false,
    }),
    ("reduce: a giver names another operation", |me, p| Giver::Reduce {
        root: 0,
        len: B,
        out: B,
        max: me == p - 1,
        float: false,
        xor: false,
    }),
    ("reduce: the root's output is short", |_, _| Giver::Reduce {
        root: 0,
        len: 1,
        out: 0,
        max: false,
        float: false,
        xor: false,
    }),
    ("reduce: every rank names its neighbour the root", |me, p| Giver::Reduce {
        root: (me + 1) % p,
        len: B,
        out: B,
        max: false,
        float: false,
        xor: false,
    }),
    ("reduce: an operator refused on the type", |_, _| Giver::Reduce {
        root: 0,
        len: B,
        out: B,
        max: false,
        float: true,
        xor: true,
    }),
    ("gather: a giver's block is longer", |me, p| Giver::Gather {
        root: 0,
        block: if me == 1 % p { B + 1 } else { B },
        whole: B * p as usize,
    }),
    ("gather: a giver names another root", |me, p| Giver::Gather {
        root: if me == p - 1 { 1 % p } else { 0 },
        block: B,
        whole: B * p as usize,
    }),
    ("gather: the root's buffer is short", |_, p| Giver::Gather {
        root: 0,
        block: B,
        whole: B * p as usize - 1,
    }),
    ("gather: every rank names its neighbour the root", |me, p| Giver::Gather {
        root: (me + 1) % p,
        block: B,
        whole: B * p as usize,
    }),
    ("gatherv: a leaf's block disagrees with the root's count", |me, p| Giver::Gatherv {
        root: 0,
        block: B + me as usize + (me == p - 1) as usize,
        entries: p as usize,
        first: 0,
    }),
    ("gatherv: a leaf names another root", |me, p| Giver::Gatherv {
        root: if me == p - 1 { 1 % p } else { 0 },
        block: B + me as usize,
        entries: p as usize,
        first: 0,
    }),
    ("gatherv: the root's counts miss an entry", |me, p| Giver::Gatherv {
        root: 0,
        block: B + me as usize,
        entries: p as usize - 1,
        first: 0,
    }),
    ("gatherv: a root's displacement is negative", |me, p| Giver::Gatherv {
        root: 0,
        block: B + me as usize,
        entries: p as usize,
        first: -1,
    }),
    ("gatherv: every rank names its neighbour the root", |me, p| Giver::Gatherv {
        root: (me + 1) % p,
        block: B + me as usize,
        entries: p as usize,
        first: 0,
    }),
    ("scatter: a leaf's block is shorter", |me, p| Giver::Scatter {
        root: 0,
        block: if me == p - 1 { B - 1 } else { B },
        whole: B * p as usize,
    }),
    ("scatter: a leaf names another root", |me, p| Giver::Scatter {
        root: if me == p - 1 { 1 % p } else { 0 },
        block: B,
        whole: B * p as usize,
    }),
    ("scatter: the root's buffer is long", |_, p| Giver::Scatter {
        root: 0,
        block: B,
        whole: B * p as usize + 1,
    }),
    ("scatterv: a leaf's block disagrees with the root's count", |me, p| Giver::Scatterv {
        root: 0,
        block: B + me as usize + (me == p - 1) as usize,
        entries: p as usize,
        first: 0,
        short: false,
    }),
    ("scatterv: a leaf names another root", |me, p| Giver::Scatterv {
        root: if me == p - 1 { 1 % p } else { 0 },
        block: B + me as usize,
        entries: p as usize,
        first: 0,
        short: false,
    }),
    ("scatterv: the root's counts miss an entry", |me, p| Giver::Scatterv {
        root: 0,
        block: B + me as usize,
        entries: p as usize - 1,
        first: 0,
        short: false,
    }),
    ("scatterv: the root's buffer is short", |me, p| Giver::Scatterv {
        root: 0,
        block: B + me as usize,
        entries: p as usize,
        first: 0,
        short: true,
    }),
    ("scatterv: the root's own block is long", |me, p| Giver::Scatterv {
        root: 0,
        block: B + me as usize + (me == 0) as usize,
        entries: p as usize,
        first: 0,
        short: false,
    }),
    // Different collectives in one call, each rank a giver of its own: every rank leaves.
    ("mixed: reduces and gathers, each to the next rank", |me, p| match me % 2 {
        0 => Giver::Reduce { root: (me + 1) % p, len: B, out: B, max: false, float: false, xor: false },
        _ => Giver::Gather { root: (me + 1) % p, block: B, whole: B * p as usize },
    }),
    ("mixed: rank 0 scatters, the others gather to it", |me, p| match me {
        0 => Giver::Scatter { root: 0, block: B, whole: B * p as usize },
        _ => Giver::Gather { root: 0, block: B, whole: B * p as usize },
    }),
    ("mixed: rank 0 scatters varcounts, the others gatherv to it", |me, p| match me {
        0 => Giver::Scatterv { root: 0, block: B, entries: p as usize, first: 0, short: false },
        _ => Giver::Gatherv { root: 0, block: B + me as usize, entries: p as usize, first: 0 },
    }),
];

/// The elements rank `r` gives in call `i`.
fn words(i: usize, r: i32, len: usize) -> Vec<u32> {
    (0..len).map(|j| (i * 131 + j * 17 + r as usize * 1009) as u32).collect()
}

/// Runs every bad call of [`GIVERS`] with every kind of next call (0 to 9 of
/// [`next_call`]); `expect` is `ZCOLL_EXPECT_LEAVE`.
fn givers(world: &SimpleCommunicator, comm: &Comm, expect: Option<&str>) {
    let (me, p) = (world.rank(), world.size());
    for (c, (name, bad)) in GIVERS.iter().enumerate() {
        for next in 0..10 {
            let what = format!("{name}, then next call {next}");
            let i = 3000 + c * 10 + next;
            if next == 4 {
                // Two good calls of the same collective first, whose givers leave them
                // back to back before the bad one (each judged as the next is left).
                let kind = match bad(0, p) {
                    Giver::Reduce { .. } => 5,
                    Giver::Gather { .. } => 6,
                    Giver::Scatter { .. } => 7,
                    Giver::Gatherv { .. } => 8,
                    Giver::Scatterv { .. } => 9,
                };
                for k in 0..2 {
                    next_call(world, comm, kind, i + 100 + k)
                        .unwrap_or_else(|e| panic!("{what}: good call {k}: {e}"));
                }
            }
            let part = bad(me, p);
            let leaves = part.leaves(me, p);
            let result = bad_giver(comm, &part, i, me, &what);
            let left = match result {
                Ok(()) => {
                    assert!(leaves, "{what}: rank {me}, which does not leave, returned Ok");
                    1u8
                }
                Err(
                    Error::LengthMismatch { .. }
                    | Error::Mismatch { .. }
                    | Error::BufferSize { .. }
                    | Error::InvalidPartition { .. }
                    | Error::InvalidRoot { .. }
                    | Error::Unsupported { .. }
                    | Error::PeerFailed { .. },
                ) => 0,
                Err(e) => panic!("{what}: {e}"),
            };
            // Where ranks may leave, each giver that passed its own checks left.
            if expect == Some("1") {
                assert_eq!(left == 1, leaves, "{what}: rank {me}: {result:?}");
            }
            let mut any = 0u8;
            world.all_reduce_into(&left, &mut any, SystemOperation::max());
            if expect == Some("0") {
                assert_eq!(any, 0, "{what}: a rank left the call, where none may");
            }
            let got = next_call(world, comm, next, i + 1);
            match (any, got) {
                (1, Err(Error::PreviousFailed { rank })) => assert_eq!(rank, me),
                (0, Ok(())) => {}
                (any, got) => panic!("{what}: {any} ranks left early; the next call gave {got:?}"),
            }
            next_call(world, comm, 2, i + 2).unwrap_or_else(|e| panic!("{what}: the call after: {e}"));
        }
    }
}

/// Makes the bad call `part` (call `i`); checks that a rank that failed has its buffers
/// as they were, and that a rank that left holds what it must (nothing changed, or a
/// scatter root's own block).
fn bad_giver(comm: &Comm, part: &Giver, i: usize, me: i32, what: &str) -> zcoll::Result<()> {
    match *part {
        Giver::Reduce { root, len, out, max, float, xor } => {
            let op = match (max, xor) {
                (_, true) => zcoll::op::Builtin::BitXor,
                (true, _) => zcoll::op::Builtin::Max,
                _ => zcoll::op::Builtin::Sum,
            };
            let send: Vec<u64> = words(i, me, len).into_iter().map(u64::from).collect();
            let mut recv = vec![0xEEu64; out];
            let r = match (me == root, float) {
                (true, false) => comm.reduce_into_root(&send, &mut recv, root, op),
                (false, false) => comm.reduce_into(&send, root, op),
                (true, true) => {
                    let send: Vec<f64> = send.iter().map(|&x| x as f64).collect();
                    let mut out = vec![0.5f64; out];
                    let r = comm.reduce_into_root(&send, &mut out, root, op);
                    assert!(out.iter().all(|&x| x == 0.5), "{what}: a failed call changed a buffer");
                    r
                }
                (false, true) => {
                    let send: Vec<f64> = send.iter().map(|&x| x as f64).collect();
                    comm.reduce_into(&send, root, op)
                }
            };
            assert!(recv.iter().all(|&x| x == 0xEE), "{what}: rank {me}: a bad reduce changed a buffer");
            r
        }
        Giver::Gather { root, block, whole } => {
            let send = words(i, me, block);
            let mut recv = vec![0xEEu32; if me == root { whole } else { 0 }];
            let r = match me == root {
                true => comm.gather_into_root(&send, &mut recv, root),
                false => comm.gather_into(&send, root),
            };
            assert!(recv.iter().all(|&x| x == 0xEE), "{what}: rank {me}: a bad gather changed a buffer");
            r
        }
        Giver::Gatherv { root, block, entries, first } => {
            let send = words(i, me, block);
            let (counts, displs) = varcounts(entries, first);
            let whole = counts.iter().map(|&c| c as usize).sum::<usize>();
            let mut recv = vec![0xEEu32; if me == root { whole } else { 0 }];
            let r = match me == root {
                true => comm.gather_varcount_into_root(&send, &mut recv, &counts, &displs, root),
                false => comm.gather_varcount_into(&send, root),
            };
            assert!(recv.iter().all(|&x| x == 0xEE), "{what}: rank {me}: a bad gatherv changed a buffer");
            r
        }
        Giver::Scatterv { root, block, entries, first, short } => {
            let (counts, displs) = varcounts(entries, first);
            let end = (0..entries).map(|r| (displs[r] + counts[r]).max(0) as usize).max().unwrap_or(0);
            let send = words(i, me, if me == root { end - short as usize } else { 0 });
            let mut recv = vec![0xEEu32; block];
            let r = match me == root {
                true => comm.scatter_varcount_into_root(&send, &counts, &displs, &mut recv, root),
                false => comm.scatter_varcount_into(&mut recv, root),
            };
            match (&r, me == root) {
                // The root that left holds its own block.
                (Ok(()), true) => {
                    let at = displs[root as usize] as usize;
                    let own = at..at + counts[root as usize] as usize;
                    assert!(recv == send[own], "{what}: rank {me}: the root's own block");
                }
                _ => assert!(
                    recv.iter().all(|&x| x == 0xEE),
                    "{what}: rank {me}: a bad scatterv changed a buffer"
                ),
            }
            r
        }
        Giver::Scatter { root, block, whole } => {
            let send = words(i, me, if me == root { whole } else { 0 });
            let mut recv = vec![0xEEu32; block];
            let r = match me == root {
                true => comm.scatter_into_root(&send, &mut recv, root),
                false => comm.scatter_into(&mut recv, root),
            };
            match (&r, me == root) {
                // The root that left holds its own block.
                (Ok(()), true) => {
                    let own = root as usize * block..(root as usize + 1) * block;
                    assert!(recv == send[own], "{what}: rank {me}: the root's own block");
                }
                _ => assert!(
                    recv.iter().all(|&x| x == 0xEE),
                    "{what}: rank {me}: a bad scatter changed a buffer"
                ),
            }
            r
        }
    }
}

/// The counts `B + r` of ranks `0..entries`, blocks end to end from `first`.
fn varcounts(entries: usize, first: i32) -> (Vec<mpi::Count>, Vec<mpi::Count>) {
    let counts: Vec<mpi::Count> = (0..entries).map(|r| (B + r) as mpi::Count).collect();
    let displs = (0..entries).map(|r| first + counts[..r].iter().sum::<mpi::Count>()).collect();
    (counts, displs)
}

/// Call `kind` of the next calls (a barrier, an allreduce, a one-phase broadcast from
/// rank 1, a broadcast of 1 MiB from rank 0, a one-phase broadcast from rank 0, a small
/// reduce to rank 0, a small gather to rank 0, a small scatter from the last rank, a small
/// gatherv to rank 0, a small scatterv from the last rank); when
/// it succeeds, its result is checked.
fn next_call(world: &SimpleCommunicator, comm: &Comm, kind: usize, i: usize) -> zcoll::Result<()> {
    let (me, p) = (world.rank(), world.size());
    match kind {
        0 => comm.barrier(),
        1 => {
            let mut out = [0u64; 3];
            comm.all_reduce_into(&[me as u64 + 1; 3], &mut out, SystemOperation::sum())?;
            let sum = (p as u64) * (p as u64 + 1) / 2;
            assert_eq!(out, [sum; 3], "allreduce {i}");
            Ok(())
        }
        5 => {
            let send: Vec<u64> = (0..B as u64).map(|j| (me as u64 + 1) * (j + i as u64)).collect();
            let sum: Vec<u64> =
                (0..B as u64).map(|j| (j + i as u64) * (p as u64) * (p as u64 + 1) / 2).collect();
            match me {
                0 => {
                    let mut out = vec![0u64; B];
                    comm.reduce_into_root(&send, &mut out, 0, SystemOperation::sum())?;
                    assert_eq!(out, sum, "reduce {i}");
                }
                _ => comm.reduce_into(&send, 0, SystemOperation::sum())?,
            }
            Ok(())
        }
        6 => {
            let send = words(i, me, B);
            match me {
                0 => {
                    let mut out = vec![0u32; B * p as usize];
                    comm.gather_into_root(&send, &mut out, 0)?;
                    let want: Vec<u32> = (0..p).flat_map(|r| words(i, r, B)).collect();
                    assert_eq!(out, want, "gather {i}");
                }
                _ => comm.gather_into(&send, 0)?,
            }
            Ok(())
        }
        8 => {
            let send = words(i, me, B + me as usize);
            let (counts, displs) = varcounts(p as usize, 0);
            match me {
                0 => {
                    let mut out = vec![0u32; counts.iter().sum::<mpi::Count>() as usize];
                    comm.gather_varcount_into_root(&send, &mut out, &counts, &displs, 0)?;
                    let want: Vec<u32> = (0..p).flat_map(|r| words(i, r, B + r as usize)).collect();
                    assert_eq!(out, want, "gatherv {i}");
                }
                _ => comm.gather_varcount_into(&send, 0)?,
            }
            Ok(())
        }
        9 => {
            let last = p - 1;
            let (counts, displs) = varcounts(p as usize, 0);
            let whole = counts.iter().sum::<mpi::Count>() as usize;
            let send = words(i, me, if me == last { whole } else { 0 });
            let mut out = vec![0u32; B + me as usize];
            match me == last {
                true => comm.scatter_varcount_into_root(&send, &counts, &displs, &mut out, last)?,
                false => comm.scatter_varcount_into(&mut out, last)?,
            }
            let at = displs[me as usize] as usize;
            assert_eq!(out, words(i, last, whole)[at..at + B + me as usize], "scatterv {i}");
            Ok(())
        }
        7 => {
            let last = p - 1;
            let send = words(i, me, if me == last { B * p as usize } else { 0 });
            let mut out = vec![0u32; B];
            match me == last {
                true => comm.scatter_into_root(&send, &mut out, last)?,
                false => comm.scatter_into(&mut out, last)?,
            }
            let at = me as usize * B;
            assert_eq!(out, words(i, last, B * p as usize)[at..at + B], "scatter {i}");
            Ok(())
        }
        _ => {
            let (root, len) = match kind {
                2 => (1 % p, 300),
                3 => (0, 1 << 20),
                _ => (0, 40),
            };
            let mut buf = if me == root { bytes(i, root, len) } else { vec![0xEE; len] };
            comm.broadcast_into(&mut buf[..], root)?;
            assert!(buf == bytes(i, root, len), "broadcast {i} of {len} bytes from {root}: wrong bytes");
            Ok(())
        }
    }
}

/// A communicator dropped right after a bad broadcast whose root left it: the root
/// learns the verdict as the communicator goes, and says so on standard error (the
/// launching test looks for the line).
pub(crate) fn drop_report(world: &SimpleCommunicator) {
    let me = world.rank();
    let comm = Comm::new(world).expect("Comm::new");
    let mut buf = vec![1u8; if me == 1 { 99 } else { 100 }];
    let r = comm.broadcast_into(&mut buf[..], 0);
    assert_eq!(r.is_ok(), me == 0, "rank {me}: {r:?}");
    drop(comm);
    // A small allgatherv (one phase) whose last rank expects one element more from rank
    // 0: that rank fails alone, the others return `Ok` with the right result and, as the
    // communicator goes, read its failure.
    let (p, last) = (world.size() as usize, world.size() - 1);
    let comm = Comm::new(world).expect("Comm::new");
    let send = [me as u32 * 10, me as u32 * 10 + 1];
    let mut counts = vec![2; p];
    if me == last {
        counts[0] = 3;
    }
    let displs: Vec<_> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect();
    let mut recv = vec![u32::MAX; counts.iter().sum::<i32>() as usize];
    let r = comm.all_gather_varcount_into(&send, &mut recv, &counts, &displs);
    if me == last {
        assert!(matches!(r, Err(Error::LengthMismatch { .. })), "rank {me}: {r:?}");
        assert!(recv.iter().all(|&x| x == u32::MAX), "rank {me}: a failed call wrote its buffer");
    } else {
        assert_eq!(r, Ok(()), "rank {me}");
        let want: Vec<u32> = (0..p as u32).flat_map(|q| [q * 10, q * 10 + 1]).collect();
        assert_eq!(recv, want, "rank {me}");
    }
    drop(comm);
    // A bad broadcast its root left (rank 1's buffer is short), then a call rooted at rank
    // 1, which knows its failure: every rank fails that call with `PreviousFailed`, and
    // the communicator dropped after it has nothing left to report.
    let comm = Comm::new(world).expect("Comm::new");
    let mut buf = vec![1u8; if me == 1 { 99 } else { 100 }];
    let r = comm.broadcast_into(&mut buf[..], 0);
    assert_eq!(r.is_ok(), me == 0, "rank {me}: {r:?}");
    let mut small = [me as u8; 8];
    let r = comm.broadcast_into(&mut small[..], 1 % world.size());
    assert!(matches!(r, Err(Error::PreviousFailed { .. })), "rank {me}: {r:?}");
    drop(comm);
    println!("ZCOLL-RANK-OK {me}");
}
