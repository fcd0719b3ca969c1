//! Broadcast a field from rank 0 with zcoll and check it against rsmpi's broadcast.
//!
//! ```text
//! mpiexec -n 4 target/release/examples/broadcast
//! ```
//!
//! Each rank receives 4 MiB with one copy per byte inside the node; the example
//! asserts that every rank holds exactly what rsmpi's own broadcast delivers.

use mpi::traits::*;
use zcoll::ZeroCopy;

fn main() -> Result<(), zcoll::Error> {
    // `RUST_LOG=zcoll=debug` prints which transport and algorithms zcoll chose, and why:
    // zcoll's `tracing` events reach a `log` logger while no tracing subscriber is set.
    env_logger::init();
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    if comm.rank() == 0 {
        println!("{}", comm.info());
    }

    let n = 1 << 19; // 4 MiB of f64
    let root = comm.size() - 1;
    let mut field = vec![0.0f64; n];
    if comm.rank() == root {
        field.iter_mut().enumerate().for_each(|(i, x)| *x = (i as f64).sqrt());
    }
    let mut oracle = field.clone();
    world.process_at_rank(root).broadcast_into(&mut oracle[..]);

    comm.broadcast_into(&mut field, root)?;
    assert_eq!(field, oracle, "rank {} differs from rsmpi's broadcast", comm.rank());
    assert_eq!(field[n - 1], ((n - 1) as f64).sqrt());

    comm.barrier()?;
    if comm.rank() == 0 {
        println!(
            "broadcast of {} MiB from rank {root} to {} ranks: same as rsmpi",
            (n * 8) >> 20,
            comm.size()
        );
    }
    Ok(())
}
