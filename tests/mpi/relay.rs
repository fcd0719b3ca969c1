//! The calls across nodes whose verdict the node leaders carry (bcast, allreduce, reduce,
//! barrier: one exchange among the leaders, with the data up to 512 bytes).
//!
//! - Good calls at sizes around the carried limit (0, 8, 512, 520, 4096 and 65536
//!   bytes), every root, separate and in-place buffers, against rsmpi's own collective
//!   (built-in operators) or a fold computed independently in rank order (a
//!   non-commutative user operator, 2x2 matrix products); the barrier with marker files.
//! - Bad calls (another length, root, operator, output length or collective on one
//!   rank: a node's leader, or the last rank), small and large: the same `Err` on every
//!   rank, naming the first rank that differs from rank 0, every buffer as it was; then a
//!   good call.
//! - With one rank per node (the checks across the communicator, then the MPI library's
//!   reduction or zcoll's fold): wrapping `u8` sums against a fold computed
//!   independently, `f64` sums and `i32` minima against rsmpi's, 0 to 520 elements; and
//!   an allreduce or reduce whose length, operator, element type or root differs on one
//!   rank, or whose root is not a rank: the same `Err` on every rank, every buffer as it
//!   was.
//! - A failure after the leaders' exchange (with the `fault-injection` feature, on nodes
//!   of two ranks or more): a copy fails on one node in a large broadcast's node leg;
//!   the call fails on every rank (a large call agrees on its outcome) and the next works.

use crate::common::check_barrier;
use crate::reduce::{mat_mul, mat_of, Mat2};
use bytemuck::Zeroable;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::{Builtin, UserOp};
use zcoll::{Comm, Error};

/// Element counts of `u64`: 0, 8, 512, 520, 4096 and 65536 bytes.
const COUNTS: [usize; 6] = [0, 1, 64, 65, 512, 8192];

fn data(rank: i32, i: usize, n: usize) -> Vec<u64> {
    (0..n).map(|j| (rank as u64 + 1).wrapping_mul(1_000_003) ^ (i * 7919 + j) as u64).collect()
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    let k: i32 = std::env::var("ZCOLL_NODE_SIZE").map_or(p, |k| k.parse().expect("ZCOLL_NODE_SIZE"));
    good(world, comm);
    if k == 1 {
        direct(world, comm);
    }
    check_barrier(world, comm, "zcoll-relay-barrier", &[0, 3, 0, 1]);
    // The leader of the second node (or rank 1 on one node), and the last rank.
    let culprits = [k.min(p - 1), p - 1];
    for (c, &bad) in culprits.iter().enumerate() {
        for n in [1usize, 512] {
            bad_calls(world, comm, bad, n, c * 100 + n);
        }
    }
    // Where the second node has two ranks or more, its second rank fails a copy in a
    // large broadcast's node leg.
    #[cfg(feature = "fault-injection")]
    if k >= 2 && p >= k + 2 {
        failed_node_leg(world, comm, k + 1);
    }
    good(world, comm);
}

/// Every reworked call at every size and root, against rsmpi or an independent fold.
fn good(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    for (i, &n) in COUNTS.iter().enumerate() {
        for root in [0, p - 1, p / 2] {
            let what = format!("{n} u64 from root {root}");
            // Broadcast.
            let mut buf = if me == root { data(root, i, n) } else { vec![0xEE; n] };
            comm.broadcast_into(&mut buf[..], root).unwrap_or_else(|e| panic!("bcast {what}: {e}"));
            assert!(buf == data(root, i, n), "bcast {what}: wrong data on rank {me}");
            // Allreduce, apart and in place, against rsmpi's.
            let send = data(me, i, n);
            let mut want = vec![0u64; n];
            if n > 0 {
                world.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
            }
            let mut got = vec![7u64; n];
            comm.all_reduce_into(&send, &mut got, Builtin::Sum)
                .unwrap_or_else(|e| panic!("allreduce {what}: {e}"));
            assert!(got == want, "allreduce {what}: wrong sums on rank {me}");
            let mut inplace = send.clone();
            comm.all_reduce_in_place(&mut inplace, Builtin::Sum)
                .unwrap_or_else(|e| panic!("in place {what}: {e}"));
            assert!(inplace == want, "allreduce in place {what}: wrong sums on rank {me}");
            // Reduce to the root, apart and in place.
            let mut out = vec![7u64; n];
            let r = match me == root {
                true => comm.reduce_into_root(&send, &mut out, root, Builtin::Sum),
                false => comm.reduce_into(&send, root, Builtin::Sum),
            };
            r.unwrap_or_else(|e| panic!("reduce {what}: {e}"));
            let expected = if me == root { want.clone() } else { vec![7u64; n] };
            assert!(out == expected, "reduce {what}: wrong result on rank {me}");
            let mut inplace = send.clone();
            let r = match me == root {
                true => comm.reduce_in_place_root(&mut inplace, root, Builtin::Sum),
                false => comm.reduce_into(&send, root, Builtin::Sum),
            };
            r.unwrap_or_else(|e| panic!("reduce in place {what}: {e}"));
            let expected = if me == root { want.clone() } else { send.clone() };
            assert!(inplace == expected, "reduce in place {what}: wrong result on rank {me}");
            // A non-commutative user operator: the product in rank order.
            let m = n / 2;
            let mats: Vec<Mat2> = (0..m).map(|j| mat_of(me, i * 31 + j)).collect();
            let fold: Vec<Mat2> = (0..m)
                .map(|j| (1..p).fold(mat_of(0, i * 31 + j), |acc, r| mat_mul(acc, mat_of(r, i * 31 + j))))
                .collect();
            let op = UserOp::non_commutative(|acc: &mut [Mat2], x: &[Mat2]| {
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = mat_mul(*a, *b);
                }
            });
            let mut prod = vec![Mat2::zeroed(); m];
            comm.all_reduce_into(&mats, &mut prod, &op).unwrap_or_else(|e| panic!("matmul {what}: {e}"));
            assert!(prod == fold, "allreduce matmul {what}: wrong product on rank {me}");
            let mut prod = vec![Mat2::zeroed(); m];
            let r = match me == root {
                true => comm.reduce_into_root(&mats, &mut prod, root, &op),
                false => comm.reduce_into(&mats, root, &op),
            };
            r.unwrap_or_else(|e| panic!("reduce matmul {what}: {e}"));
            let expected = if me == root { fold } else { vec![Mat2::zeroed(); m] };
            assert!(prod == expected, "reduce matmul {what}: wrong product on rank {me}");
        }
    }
}

/// One bad call of each kind, `bad` the rank that differs, with `n` u64 per rank: every
/// rank gets the same error and keeps its buffers; then a good call works.
fn bad_calls(world: &SimpleCommunicator, comm: &Comm, bad: i32, n: usize, i: usize) {
    let (me, p) = (world.rank(), world.size());
    let culprit = bad;
    let odd = me == bad;
    let unchanged = |what: &str, before: &[u64], after: &[u64]| {
        assert!(before == after, "{what}: a failed call changed a buffer on rank {me}");
    };
    // A broadcast whose length differs.
    let len = if odd { n + 1 } else { n };
    let mut buf = data(me, i, len);
    let e = comm.broadcast_into(&mut buf[..], 0).expect_err("bcast length");
    let (expected, found) = (8 * n, 8 * (n + 1));
    assert_eq!(e, Error::LengthMismatch { rank: me, culprit, expected, found }, "bcast length, {n} u64");
    unchanged("bcast length", &data(me, i, len), &buf);
    // A broadcast whose root differs.
    let mut buf = data(me, i, n);
    let root = if odd { 0 } else { p - 1 };
    let e = comm.broadcast_into(&mut buf[..], root).expect_err("bcast root");
    assert_eq!(e, Error::Mismatch { rank: me, culprit, what: "root" }, "bcast root, {n} u64");
    unchanged("bcast root", &data(me, i, n), &buf);
    // An allreduce whose operator differs.
    let send = data(me, i, n);
    let mut out = vec![5u64; n];
    let op = if odd { Builtin::Max } else { Builtin::Sum };
    let e = comm.all_reduce_into(&send, &mut out, op).expect_err("allreduce operator");
    assert_eq!(
        e,
        Error::Mismatch { rank: me, culprit, what: "operator or element type" },
        "operator, {n} u64"
    );
    unchanged("allreduce operator", &vec![5u64; n], &out);
    // A reduce whose root's output is too long (the root is the odd rank).
    let mut out = vec![5u64; n + 1];
    let e = match odd {
        true => comm.reduce_into_root(&send, &mut out, bad, Builtin::Sum),
        false => comm.reduce_into(&send, bad, Builtin::Sum),
    }
    .expect_err("reduce output");
    let want = Error::LengthMismatch { rank: me, culprit: bad, expected: 8 * n, found: 8 * (n + 1) };
    assert_eq!(e, want, "reduce output, {n} u64");
    unchanged("reduce output", &vec![5u64; n + 1], &out);
    // One rank calls a barrier, the others an allreduce.
    let mut out = vec![5u64; n];
    let e = match odd {
        true => comm.barrier(),
        false => comm.all_reduce_into(&send, &mut out, Builtin::Sum),
    }
    .expect_err("collective");
    assert_eq!(e, Error::Mismatch { rank: me, culprit, what: "collective" }, "collective, {n} u64");
    unchanged("collective", &vec![5u64; n], &out);
    // And a good call.
    let mut want = vec![0u64; n];
    world.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
    comm.all_reduce_into(&send, &mut out, Builtin::Sum).expect("an allreduce after the bad calls");
    assert!(out == want, "the allreduce after the bad calls: wrong sums on rank {me}");
}

/// Rank `bad` (not a leader) fails a copy in a large broadcast's node leg, after the
/// leaders' exchange: a call larger than the exchange's payload agrees on its outcome, so
/// every rank fails it and the next call works, with no `PreviousFailed`. `bad` reports
/// its own error; every other rank names `bad`: not the rank of its node that found it
/// failed, nor (on its node) the peer whose failed round it saw.
#[cfg(feature = "fault-injection")]
fn failed_node_leg(world: &SimpleCommunicator, comm: &Comm, bad: i32) {
    let me = world.rank();
    let n = 1 << 16;
    let root = 0;
    let mut buf = if me == root { data(root, 9, n) } else { vec![0xEE; n] };
    if me == bad {
        zcoll::fault::fail_copy(1);
    }
    let r = comm.broadcast_into(&mut buf[..], root);
    zcoll::fault::fail_copy(0);
    match r {
        Err(Error::PeerFailed { rank, peer }) => {
            assert!(rank == me && me != bad && peer == bad, "rank {me}: {r:?}")
        }
        Err(e) => assert!(me == bad && e.rank() == Some(me), "rank {me}: {e}"),
        Ok(()) => panic!("rank {me}: Ok from a broadcast whose copy failed on rank {bad}"),
    }
    // The next call works on every rank.
    let send = data(me, 3, 4);
    let mut out = vec![5u64; 4];
    let mut want = vec![0u64; 4];
    world.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
    comm.all_reduce_into(&send, &mut out, Builtin::Sum).expect("the call after a failed broadcast");
    assert_eq!(out, want);
}

/// One rank per node: small reductions of other element types against rsmpi or an
/// independent fold, and bad reductions whose every field differs in turn on the last
/// rank (at 1, 64 and 65 elements).
fn direct(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    for n in [0usize, 1, 3, 64, 65, 520] {
        // u8 sums wrap around, as the node's kernels do (an AVX MPI saturates them).
        let send: Vec<u8> = (0..n).map(|j| (200 + 13 * me as usize + j) as u8).collect();
        let want: Vec<u8> = (0..n)
            .map(|j| (0..p).fold(0u8, |acc, r| acc.wrapping_add((200 + 13 * r as usize + j) as u8)))
            .collect();
        let mut got = vec![9u8; n];
        comm.all_reduce_into(&send, &mut got, Builtin::Sum).expect("u8 allreduce");
        assert!(got == want, "u8 allreduce of {n}: wrong sums on rank {me}");
        let mut got = vec![9u8; n];
        match me == p - 1 {
            true => comm.reduce_into_root(&send, &mut got, p - 1, Builtin::Sum),
            false => comm.reduce_into(&send, p - 1, Builtin::Sum),
        }
        .expect("u8 reduce");
        let expected = if me == p - 1 { want } else { vec![9u8; n] };
        assert!(got == expected, "u8 reduce of {n}: wrong result on rank {me}");
        // f64 sums of whole numbers (exact in any order) and i32 minima, against rsmpi.
        let send: Vec<f64> = (0..n).map(|j| (me as usize * 1000 + j) as f64 - 7.0).collect();
        let mut want = vec![0f64; n];
        world.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
        let mut got = send.clone();
        comm.all_reduce_in_place(&mut got, Builtin::Sum).expect("f64 allreduce");
        assert!(got == want, "f64 allreduce of {n}: wrong sums on rank {me}");
        let send: Vec<i32> = (0..n).map(|j| ((me * 7919 + j as i32) % 101) - 50).collect();
        let mut want = vec![0i32; n];
        world.all_reduce_into(&send[..], &mut want[..], SystemOperation::min());
        let mut got = vec![3i32; n];
        comm.all_reduce_into(&send, &mut got, SystemOperation::min()).expect("i32 allreduce");
        assert!(got == want, "i32 allreduce of {n}: wrong minima on rank {me}");
    }
    let bad = p - 1;
    let odd = me == bad;
    for n in [1usize, 64, 65] {
        let what = format!("{n} u64");
        let send = data(me, n, n);
        let untouched = |label: &str, out: &[u64], len: usize| {
            assert!(out == vec![5u64; len], "{label}, {what}: a failed call changed a buffer on rank {me}");
        };
        // An allreduce whose length differs on the last rank.
        let len = if odd { n + 1 } else { n };
        let (mine, mut out) = (data(me, n, len), vec![5u64; len]);
        let e = comm.all_reduce_into(&mine, &mut out, Builtin::Sum).expect_err("allreduce length");
        let want = Error::LengthMismatch { rank: me, culprit: bad, expected: 8 * n, found: 8 * (n + 1) };
        assert_eq!(e, want, "allreduce length, {what}");
        untouched("allreduce length", &out, len);
        // An allreduce whose element type differs (i64 for u64, the same size).
        let mut out = vec![5u64; n];
        let e = match odd {
            true => {
                let (mine, mut theirs) = (vec![1i64; n], vec![5i64; n]);
                let e = comm.all_reduce_into(&mine, &mut theirs, Builtin::Sum);
                assert!(theirs == vec![5i64; n], "element type, {what}: a buffer changed on rank {me}");
                e
            }
            false => comm.all_reduce_into(&send, &mut out, Builtin::Sum),
        }
        .expect_err("allreduce element type");
        assert_eq!(e, Error::Mismatch { rank: me, culprit: bad, what: "operator or element type" }, "{what}");
        untouched("allreduce element type", &out, n);
        // A reduce whose root differs.
        let root = if odd { 1 } else { 0 };
        let mut out = vec![5u64; n];
        let e = match me == root {
            true => comm.reduce_into_root(&send, &mut out, root, Builtin::Max),
            false => comm.reduce_into(&send, root, Builtin::Max),
        }
        .expect_err("reduce root");
        assert_eq!(e, Error::Mismatch { rank: me, culprit: bad, what: "root" }, "reduce root, {what}");
        untouched("reduce root", &out, n);
        // A reduce whose operator differs.
        let mut out = vec![5u64; n];
        let op = if odd { Builtin::BitXor } else { Builtin::BitOr };
        let e = match me == 0 {
            true => comm.reduce_into_root(&send, &mut out, 0, op),
            false => comm.reduce_into(&send, 0, op),
        }
        .expect_err("reduce operator");
        assert_eq!(e, Error::Mismatch { rank: me, culprit: bad, what: "operator or element type" }, "{what}");
        untouched("reduce operator", &out, n);
        // A reduce to a root that is no rank, on every rank.
        let e = comm.reduce_into(&send, p, Builtin::Sum).expect_err("reduce to no rank");
        assert_eq!(e, Error::InvalidRoot { rank: me, root: p, size: p }, "reduce to no rank, {what}");
    }
}
