//! The deferred verdict. The root of a broadcast small enough to travel with its arrival
//! leaves the call at once, before any rank has judged it. A bad call then returns `Ok`
//! on that root, and every rank learns of the failure at its next call on the
//! communicator, which fails on every rank with `Error::PreviousFailed` and does nothing;
//! the call after that works again.
//!
//! The scenario: good one-phase broadcasts back to back (roots repeated and rotating,
//! against rsmpi); then each kind of bad broadcast (a short buffer, a reader naming
//! another root, every rank naming itself the root, a reader calling an allreduce) with
//! each kind of next call (a barrier, an allreduce, a one-phase broadcast whose root
//! leaves too, a large broadcast, and a one-phase broadcast from the bad call's own root
//! after two good ones from it, so that the root leaves three calls in a row and judges
//! the bad one as it leaves the next), then a good broadcast. `ZCOLL_EXPECT_LEAVE=1` says the
//! job must defer (one node, flat arrivals), `0` that it must not (virtual nodes, a tree
//! of arrivals), which the cases assert. The `deferred-drop` scenario drops a
//! communicator right after a bad call its root left: the root reports it on standard
//! error.

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
    // A good call after all that, checked against rsmpi.
    next_call(world, comm, 3, 2000).expect("a large broadcast at the end");
}

/// Call `kind` of the next calls (a barrier, an allreduce, a one-phase broadcast from
/// rank 1, a broadcast of 1 MiB from rank 0, a one-phase broadcast from rank 0); when it
/// succeeds, its result is checked.
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
    println!("ZCOLL-RANK-OK {me}");
}
