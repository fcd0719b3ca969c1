//! A failed call leaves every receive buffer as it was, on every rank: one rank passes a
//! buffer of the wrong length, every rank gets an `Err`, and no rank's receive buffer
//! (nor a byte around it) has changed, on one node and across nodes.

use crate::common::{pattern, Guarded};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::Comm;

/// Runs `call` with every rank's receive buffer of `n` bytes (`n - 1` on rank `short`),
/// filled with a pattern; checks that it failed and that the buffer is untouched.
fn fails_untouched(
    world: &SimpleCommunicator,
    what: &str,
    n: usize,
    short: i32,
    call: impl FnOnce(&mut [u8]) -> zcoll::Result<()>,
) {
    let me = world.rank();
    let len = if me == short { n - 1 } else { n };
    let fill = |i: usize| pattern(0xfeed ^ me as u64, i);
    let mut recv = Guarded::<u8>::new(len, fill);
    let e = call(recv.get_mut()).err();
    assert!(e.is_some(), "{what}: rank {me} returned Ok");
    recv.unchanged(fill, &format!("{what}: rank {me}'s receive buffer after the failed call"));
}

/// [`fails_untouched`] for a call in which the ranks that only give (`gives`: the root
/// of a broadcast, a scatter or a scatterv, a non-root of a gather, gatherv or reduce) may
/// leave a small call before its verdict (the deferred verdict) and return `Ok`, their
/// buffer then holding `holds` (`None`: as it was; a scatter or scatterv root's own block); every other rank fails with
/// its buffer untouched, and if a rank left, the next call (a barrier) fails on every rank
/// with `PreviousFailed`.
#[allow(clippy::too_many_arguments)] // the case and its expectations, each needed
fn deferred_fails_untouched(
    world: &SimpleCommunicator,
    comm: &Comm,
    what: &str,
    n: usize,
    short: i32,
    gives: bool,
    holds: Option<&[u8]>,
    call: impl FnOnce(&mut [u8]) -> zcoll::Result<()>,
) {
    let me = world.rank();
    let len = if me == short { n - 1 } else { n };
    let fill = |i: usize| pattern(0xfeed ^ me as u64, i);
    let mut recv = Guarded::<u8>::new(len, fill);
    let left = match call(recv.get_mut()) {
        Ok(()) => {
            assert!(gives, "{what}: rank {me}, which does not only give, returned Ok");
            1u8
        }
        Err(_) => 0,
    };
    match (left, holds) {
        (1, Some(want)) => recv.holds(want, &format!("{what}: rank {me}'s buffer after leaving")),
        _ => recv.unchanged(fill, &format!("{what}: rank {me}'s receive buffer after the failed call")),
    }
    let mut any = 0u8;
    world.all_reduce_into(&left, &mut any, mpi::collective::SystemOperation::max());
    match (any, comm.barrier()) {
        (1, Err(zcoll::Error::PreviousFailed { .. })) | (0, Ok(())) => {}
        (any, next) => panic!("{what}: {any} ranks left the call; the next call gave {next:?}"),
    }
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    if p < 2 {
        return;
    }
    let me = world.rank();
    let short = p - 1;
    // Large enough for the single-copy and multi-root paths, not only the staged ones.
    for block in [24usize, 96 * 1024] {
        let whole = block * p as usize;
        let send: Vec<u8> = (0..whole).map(|i| pattern(me as u64, i)).collect();
        deferred_fails_untouched(world, comm, &format!("bcast {block}"), whole, short, me == 0, None, |r| {
            comm.broadcast_into(r, 0)
        });
        let own = &send[..block];
        deferred_fails_untouched(
            world,
            comm,
            &format!("scatter {block}"),
            block,
            short,
            me == 0,
            Some(own),
            |r| match me {
                0 => comm.scatter_into_root(&send, r, 0),
                _ => comm.scatter_into(r, 0),
            },
        );
        fails_untouched(world, &format!("allgather {block}"), whole, short, |r| {
            comm.all_gather_into(&send[..block], r)
        });
        fails_untouched(world, &format!("alltoall {block}"), whole, short, |r| {
            comm.all_to_all_into(&send, r)
        });
        fails_untouched(world, &format!("allreduce {block}"), whole, short, |r| {
            comm.all_reduce_into(&send, r, Builtin::BitXor)
        });
        deferred_fails_untouched(world, comm, &format!("gather {block}"), whole, 0, me != 0, None, |r| {
            match me {
                0 => comm.gather_into_root(&send[..block], r, 0),
                _ => comm.gather_into(&send[..block], 0),
            }
        });
        deferred_fails_untouched(world, comm, &format!("reduce {block}"), whole, 0, me != 0, None, |r| {
            match me {
                0 => comm.reduce_into_root(&send, r, 0, Builtin::BitXor),
                _ => comm.reduce_into(&send, 0, Builtin::BitXor),
            }
        });
        let counts = vec![block as i32; p as usize];
        let displs: Vec<i32> = (0..p).map(|r| r * block as i32).collect();
        fails_untouched(world, &format!("allgatherv {block}"), whole, short, |r| {
            comm.all_gather_varcount_into(&send[..block], r, &counts, &displs)
        });
        fails_untouched(world, &format!("alltoallv {block}"), whole, short, |r| {
            comm.all_to_all_varcount_into(&send, &counts, &displs, r, &counts, &displs)
        });
        deferred_fails_untouched(
            world,
            comm,
            &format!("scatterv {block}"),
            block,
            short,
            me == 0,
            Some(own),
            |r| match me {
                0 => comm.scatter_varcount_into_root(&send, &counts, &displs, r, 0),
                _ => comm.scatter_varcount_into(r, 0),
            },
        );
        deferred_fails_untouched(world, comm, &format!("gatherv {block}"), whole, 0, me != 0, None, |r| {
            match me {
                0 => comm.gather_varcount_into_root(&send[..block], r, &counts, &displs, 0),
                _ => comm.gather_varcount_into(&send[..block], 0),
            }
        });
    }
    comm.barrier().unwrap();
}
