//! A pipelined broadcast with message counters: the Blue Gene/P idea, chunk by chunk.
//!
//! ```text
//! scripts/mpiexec -n 3 target/release/examples/pipelined_bcast [bytes]
//! ZCOLL_NODE_SIZE=2 scripts/mpiexec -n 4 target/release/examples/pipelined_bcast [bytes]
//! ```
//!
//! `BcastAlgorithm::Pipelined { chunk }` turns the root's buffer into a *message
//! counter* (the book's chapter "Blue Gene/P FIFOs and message counters"): the root
//! publishes how many `chunk`-byte pieces of its buffer are ready, each reader reads every
//! piece as soon as the counter covers it (one single-copy read per piece) and adds one to
//! the root's completion counter when it has the whole buffer. Inside one node the whole
//! buffer is ready at once, so this is a direct read cut into chunks: the chunk trades
//! calls (`alpha` each) against nothing. Across nodes (the second command: virtual nodes
//! of 2 ranks) the node leader receives the message from the network one chunk at a time
//! and publishes each as it lands, so its node reads chunk `i` while chunk `i + 1` is on
//! the wire: the two legs overlap, which is what the chunk size tunes.
//!
//! The example broadcasts `bytes` (default 4 MiB) from the last rank with zcoll's default
//! (`Auto`), with the unchunked direct read, and pipelined with chunks of 4 KiB to 1 MiB;
//! it prints the median time of each (the slowest rank's, over 5 calls) and asserts after
//! every call that every rank holds exactly what rsmpi's own broadcast delivered.
//! Timings on a shared or oversubscribed machine are noisy; they are printed, never
//! asserted.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;
use zcoll::{BcastAlgorithm, ZeroCopy};

const REPS: usize = 5;

fn main() -> Result<(), zcoll::Error> {
    env_logger::init();
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let me = comm.rank();
    let root = comm.size() - 1;
    let bytes: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4 << 20);

    // The root's data, and the oracle: what rsmpi's broadcast delivers.
    let source: Vec<u8> = (0..bytes).map(|i| (i * 31 + i / 4096) as u8).collect();
    let mut oracle = if me == root { source.clone() } else { vec![0u8; bytes] };
    world.process_at_rank(root).broadcast_into(&mut oracle[..]);

    let mut algorithms = vec![("auto (the default)".to_owned(), BcastAlgorithm::Auto)];
    algorithms.push(("direct-read (unchunked)".to_owned(), BcastAlgorithm::DirectRead));
    for chunk in [4u32 << 10, 64 << 10, 256 << 10, 1 << 20] {
        let algorithm = BcastAlgorithm::Pipelined { chunk };
        algorithms.push((algorithm.to_string(), algorithm));
    }

    if me == 0 {
        println!("{}", comm.info());
        println!("broadcast of {bytes} bytes from rank {root} to {} ranks, median of {REPS}", comm.size());
        println!("{:<26} {:>12} {:>10}", "algorithm", "time us", "vs auto");
    }
    let mut buf = vec![0u8; bytes];
    let mut auto = None;
    for (name, algorithm) in &algorithms {
        let mut times = Vec::with_capacity(REPS);
        for rep in 0..REPS {
            // Non-roots start from zeros, so a call that moved nothing cannot pass.
            if me == root {
                buf.copy_from_slice(&source);
            } else {
                buf.fill(0);
            }
            comm.barrier()?;
            let start = Instant::now();
            comm.broadcast_into_with(&mut buf, root, *algorithm)?;
            let mine = start.elapsed().as_secs_f64();
            assert!(buf == oracle, "rank {me}: {name}, call {rep}, differs from rsmpi's broadcast");
            let mut slowest = 0.0f64;
            world.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
            times.push(slowest);
        }
        times.sort_by(f64::total_cmp);
        let median = times[REPS / 2];
        let base = *auto.get_or_insert(median);
        if me == 0 {
            println!("{name:<26} {:>12.1} {:>10.2}", median * 1e6, median / base);
        }
    }
    comm.barrier()?;
    if me == 0 {
        println!("every call delivered what rsmpi's broadcast delivers");
    }
    Ok(())
}
