//! `Comm` is `Send`: a communicator moved to another thread works there under
//! `MPI_THREAD_MULTIPLE` (two communicators on two threads at once included), and is
//! refused there without it (every call `Unsupported`, `Comm::mpi` panics, the drop leaks
//! the MPI communicators), while the program goes on with a new communicator.

use crate::common::{pattern, quietly};
use mpi::collective::SystemOperation;
use mpi::environment::Threading;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::{Comm, Error};

/// The scenario: MPI initialized at the level `ZCOLL_TEST_THREADING` names.
pub(crate) fn run() {
    let want = match std::env::var("ZCOLL_TEST_THREADING").as_deref() {
        Ok("multiple") => Threading::Multiple,
        Ok("funneled") => Threading::Funneled,
        other => panic!("ZCOLL_TEST_THREADING: {other:?}"),
    };
    let (universe, got) = mpi::initialize_with_threading(want).expect("MPI initializes once");
    let world = universe.world();
    let comm = Comm::new(&world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    if want == Threading::Multiple {
        assert_eq!(got, Threading::Multiple, "this MPI does not provide MPI_THREAD_MULTIPLE");
        moved(&world, comm);
    } else {
        assert!(got < Threading::Multiple);
        refused(&world, comm);
    }
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// The sum over ranks of `pattern(seed, i) * (rank + 1)`, element by element, by rsmpi.
fn oracle(world: &SimpleCommunicator, n: usize, seed: u64) -> Vec<u64> {
    let mine = input(world.rank(), n, seed);
    let mut sum = vec![0u64; n];
    world.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
    sum
}

fn input(rank: i32, n: usize, seed: u64) -> Vec<u64> {
    (0..n).map(|i| u64::from(pattern(seed, i)) * (rank as u64 + 1)).collect()
}

/// Two communicators, each on a thread of its own, run allreduces at the same time; one
/// broadcast follows on each; then the threads drop them (and free their MPI
/// communicators there).
fn moved(world: &SimpleCommunicator, comm: Comm) {
    let me = world.rank();
    let other = comm.duplicate().expect("duplicate");
    let sizes = [1usize, 1000, 70_001];
    let run = |comm: Comm, seed: u64| {
        std::thread::spawn(move || {
            let mut results = Vec::new();
            for (k, &n) in sizes.iter().enumerate() {
                let mut sum = vec![0u64; n];
                comm.all_reduce_into(&input(me, n, seed + k as u64), &mut sum, Builtin::Sum)
                    .expect("allreduce");
                results.push(sum);
            }
            let mut buf = vec![if comm.rank() == 0 { seed } else { 0 }; 4097];
            comm.broadcast_into(&mut buf, 0).expect("broadcast");
            assert!(buf.iter().all(|&x| x == seed), "the broadcast on a moved communicator");
            results
        })
    };
    let (a, b) = (run(comm, 100), run(other, 200));
    let (a, b) = (a.join().expect("thread a"), b.join().expect("thread b"));
    for (k, &n) in sizes.iter().enumerate() {
        assert_eq!(a[k], oracle(world, n, 100 + k as u64), "thread a, n = {n}");
        assert_eq!(b[k], oracle(world, n, 200 + k as u64), "thread b, n = {n}");
    }
}

/// Without `MPI_THREAD_MULTIPLE`, a moved communicator refuses every call with
/// `Unsupported`, and `mpi()` panics; dropped on that thread it leaks its MPI
/// communicators. The program then builds a new one, which works.
fn refused(world: &SimpleCommunicator, comm: Comm) {
    let me = world.rank();
    std::thread::spawn(move || {
        let unsupported =
            |r: zcoll::Result<()>| matches!(r, Err(Error::Unsupported { rank, .. }) if rank == me);
        assert!(unsupported(comm.barrier()), "barrier on another thread");
        let mut sum = [0u64];
        assert!(unsupported(comm.all_reduce_into(&[1u64], &mut sum, Builtin::Sum)), "allreduce");
        assert!(unsupported(comm.broadcast_into(&mut sum, 0)), "broadcast");
        assert!(matches!(comm.duplicate(), Err(Error::Unsupported { .. })), "duplicate");
        assert!(quietly(|| comm.mpi().size()).is_none(), "Comm::mpi must panic here");
        assert_eq!(sum, [0], "a refused call wrote its buffer");
    })
    .join()
    .expect("the refusing thread");
    let again = Comm::new(world).expect("a new communicator after the refused one");
    let n = 10_000;
    let mut sum = vec![0u64; n];
    again.all_reduce_into(&input(me, n, 7), &mut sum, Builtin::Sum).unwrap();
    assert_eq!(sum, oracle(world, n, 7));
}
