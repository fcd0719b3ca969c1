//! Zero-copy with ordinary `Vec`s: one line installs `zcoll::ShmAlloc` as the global
//! allocator, so every large allocation of the program lands in the node's shared heap,
//! which the other ranks of the node map. A broadcast and an allreduce on plain `Vec`s
//! then copy with loads and stores: no system call, no page pinning.
//!
//! ```text
//! mpiexec -n 4 target/release/examples/global_alloc
//! ```
//!
//! The example checks both results against rsmpi's own collectives, and checks with
//! `Comm::traffic` that no byte went through Cross Memory Attach wherever the ranks map
//! each other's heaps (`Info::heap`).

use mpi::collective::SystemOperation;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::ZeroCopy;

/// The one line: allocations of 64 KiB or more come from the shared heap, the rest from
/// the system allocator (and everything from it where the heap cannot be created).
#[global_allocator]
static ALLOC: zcoll::ShmAlloc = zcoll::ShmAlloc::new();

fn main() -> Result<(), zcoll::Error> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let (me, p) = (comm.rank(), comm.size());

    let n = 1 << 18; // 2 MiB of f64: well above the 64 KiB threshold
    let before = comm.traffic();

    // A broadcast of a plain Vec.
    let mut field = vec![0.0f64; n];
    if me == 0 {
        field.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64 * 0.5);
    }
    let mut oracle = field.clone();
    world.process_at_rank(0).broadcast_into(&mut oracle[..]);
    comm.broadcast_into(&mut field, 0)?;
    assert_eq!(field, oracle, "rank {me}: the broadcast differs from rsmpi's");

    // An allreduce of plain Vecs.
    let mine: Vec<u64> = (0..n as u64).map(|i| i * (me as u64 + 1)).collect();
    let mut sum = vec![0u64; n];
    comm.all_reduce_into(&mine, &mut sum, Builtin::Sum)?;
    let mut want = vec![0u64; n];
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::sum());
    assert_eq!(sum, want, "rank {me}: the allreduce differs from rsmpi's");

    // Where the ranks map each other's heaps, the copies were loads and stores.
    let moved = comm.traffic();
    let (cma, loads) = (moved.cma - before.cma, moved.heap + moved.xpmem - before.heap - before.xpmem);
    if comm.info().heap && comm.info().nodes == 1 && p > 1 {
        assert_eq!(cma, 0, "rank {me}: {cma} bytes went through CMA");
        assert!(loads > 0, "rank {me}: nothing was copied with loads and stores");
    }
    comm.barrier()?;
    if me == 0 {
        println!("global_alloc: {p} ranks, Vecs in the shared heap: {loads} bytes by loads and stores, {cma} by CMA");
    }
    Ok(())
}
