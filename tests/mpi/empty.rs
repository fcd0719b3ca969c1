//! Every collective with empty buffers, of one-byte elements (an empty `Vec<u8>`'s address
//! is 1, which Open MPI reads as `MPI_IN_PLACE`), on one node, across virtual nodes and
//! with one rank per node: every call succeeds and writes nothing. The variable-count
//! collectives also run with some ranks' blocks empty and others not, against values
//! computed here. And every collective that moves elements, fixed and variable counts,
//! with five elements per block of a record of zero bytes.

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::Comm;

/// A record of one-byte fields: alignment 1, like `u8`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Rgb {
    c: [u8; 3],
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let none: &[u8] = &[];
    for root in [0, p - 1] {
        comm.broadcast_into(&mut Vec::<u8>::new(), root).unwrap_or_else(|e| panic!("bcast: {e}"));
        comm.broadcast_into(&mut Vec::<Rgb>::new(), root).unwrap_or_else(|e| panic!("bcast rgb: {e}"));
        match me == root {
            true => comm.scatter_into_root(none, &mut Vec::<u8>::new(), root),
            false => comm.scatter_into(&mut Vec::<u8>::new(), root),
        }
        .unwrap_or_else(|e| panic!("scatter: {e}"));
        match me == root {
            true => comm.gather_into_root(none, &mut Vec::<u8>::new(), root),
            false => comm.gather_into(none, root),
        }
        .unwrap_or_else(|e| panic!("gather: {e}"));
        match me == root {
            true => comm.reduce_into_root(none, &mut Vec::<u8>::new(), root, Builtin::Sum),
            false => comm.reduce_into(none, root, Builtin::Sum),
        }
        .unwrap_or_else(|e| panic!("reduce: {e}"));
    }
    comm.all_gather_into(none, &mut Vec::<u8>::new()).unwrap_or_else(|e| panic!("allgather: {e}"));
    comm.all_to_all_into(none, &mut Vec::<u8>::new()).unwrap_or_else(|e| panic!("alltoall: {e}"));
    comm.all_reduce_into(none, &mut Vec::<u8>::new(), Builtin::Sum)
        .unwrap_or_else(|e| panic!("allreduce: {e}"));
    comm.all_reduce_in_place(&mut Vec::<u8>::new(), Builtin::Max)
        .unwrap_or_else(|e| panic!("allreduce in place: {e}"));
    comm.barrier().unwrap();
    zero_sized(world, comm);

    // Variable counts: all empty, then rank r's block r % 2 * 3 bytes long (every other
    // rank's block empty), for every collective of the family; then both again with every
    // empty block's displacement far past the end of its buffer, which MPI allows (an
    // empty block selects nothing) and which must neither fail nor panic.
    for (odd_only, far) in [(false, false), (true, false), (false, true), (true, true)] {
        let count = |r: i32| if odd_only { r % 2 * 3 } else { 0 };
        let counts: Vec<i32> = (0..p).map(count).collect();
        let away = |c: i32, d: i32| if far && c == 0 { 1 << 20 } else { d };
        let displs: Vec<i32> = counts
            .iter()
            .scan(0, |s, &c| Some(std::mem::replace(s, *s + c)))
            .zip(&counts)
            .map(|(d, &c)| away(c, d))
            .collect();
        let total = counts.iter().sum::<i32>() as usize;
        let byte = |r: i32, i: usize| (r * 16 + i as i32) as u8;
        let all: Vec<u8> = (0..p).flat_map(|r| (0..count(r) as usize).map(move |i| byte(r, i))).collect();
        let mine: Vec<u8> = (0..count(me) as usize).map(|i| byte(me, i)).collect();
        let what = |c: &str| format!("{c} (odd ranks only: {odd_only}, empty blocks far: {far})");

        for root in [0, p - 1] {
            let mut recv = vec![0u8; count(me) as usize];
            match me == root {
                true => comm.scatter_varcount_into_root(&all, &counts, &displs, &mut recv, root),
                false => comm.scatter_varcount_into(&mut recv, root),
            }
            .unwrap_or_else(|e| panic!("{}: {e}", what("scatterv")));
            assert_eq!(recv, mine, "{}", what("scatterv"));

            let mut recv = vec![0u8; if me == root { total } else { 0 }];
            match me == root {
                true => comm.gather_varcount_into_root(&mine, &mut recv, &counts, &displs, root),
                false => comm.gather_varcount_into(&mine, root),
            }
            .unwrap_or_else(|e| panic!("{}: {e}", what("gatherv")));
            if me == root {
                assert_eq!(recv, all, "{}", what("gatherv"));
            }
        }

        let mut recv = vec![0u8; total];
        comm.all_gather_varcount_into(&mine, &mut recv, &counts, &displs)
            .unwrap_or_else(|e| panic!("{}: {e}", what("allgatherv")));
        assert_eq!(recv, all, "{}", what("allgatherv"));

        // Alltoallv: rank q sends its block to every rank; rank r receives count(q) from q.
        let send: Vec<u8> = (0..p).flat_map(|_| mine.iter().copied()).collect();
        let send_counts = vec![count(me); p as usize];
        let send_displs: Vec<i32> = (0..p).map(|r| away(count(me), r * count(me))).collect();
        let mut recv = vec![0u8; total];
        comm.all_to_all_varcount_into(&send, &send_counts, &send_displs, &mut recv, &counts, &displs)
            .unwrap_or_else(|e| panic!("{}: {e}", what("alltoallv")));
        assert_eq!(recv, all, "{}", what("alltoallv"));
    }
}

/// A record without fields: zero bytes.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Nothing {}

/// Elements of zero bytes: five per block move nothing, and every call succeeds.
fn zero_sized(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let n = 5;
    let block = vec![Nothing {}; n];
    let mut whole: Vec<Nothing> = vec![Nothing {}; n * p as usize];
    for root in [0, p - 1] {
        comm.broadcast_into(&mut vec![Nothing {}; n], root)
            .unwrap_or_else(|e| panic!("zero-sized bcast: {e}"));
        match me == root {
            true => comm.scatter_into_root(&whole, &mut vec![Nothing {}; n], root),
            false => comm.scatter_into(&mut vec![Nothing {}; n], root),
        }
        .unwrap_or_else(|e| panic!("zero-sized scatter: {e}"));
        match me == root {
            true => comm.gather_into_root(&block, &mut whole, root),
            false => comm.gather_into(&block, root),
        }
        .unwrap_or_else(|e| panic!("zero-sized gather: {e}"));
        let counts = vec![n as i32; p as usize];
        let displs: Vec<i32> = (0..p).map(|r| r * n as i32).collect();
        match me == root {
            true => comm.scatter_varcount_into_root(&whole, &counts, &displs, &mut vec![Nothing {}; n], root),
            false => comm.scatter_varcount_into(&mut vec![Nothing {}; n], root),
        }
        .unwrap_or_else(|e| panic!("zero-sized scatterv: {e}"));
        match me == root {
            true => comm.gather_varcount_into_root(&block, &mut whole, &counts, &displs, root),
            false => comm.gather_varcount_into(&block, root),
        }
        .unwrap_or_else(|e| panic!("zero-sized gatherv: {e}"));
    }
    comm.all_gather_into(&block, &mut whole).unwrap_or_else(|e| panic!("zero-sized allgather: {e}"));
    let send = whole.clone();
    comm.all_to_all_into(&send, &mut whole).unwrap_or_else(|e| panic!("zero-sized alltoall: {e}"));
    let counts = vec![n as i32; p as usize];
    let displs: Vec<i32> = (0..p).map(|r| r * n as i32).collect();
    comm.all_gather_varcount_into(&block, &mut whole, &counts, &displs)
        .unwrap_or_else(|e| panic!("zero-sized allgatherv: {e}"));
    comm.all_to_all_varcount_into(&send, &counts, &displs, &mut whole, &counts, &displs)
        .unwrap_or_else(|e| panic!("zero-sized alltoallv: {e}"));
    comm.barrier().unwrap();
}
