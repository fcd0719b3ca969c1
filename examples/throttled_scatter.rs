//! A throttled scatter: contention on the root's pages, measured beside the cost model's
//! prediction.
//!
//! ```text
//! scripts/mpiexec -n 3 target/release/examples/throttled_scatter [block bytes]
//! scripts/mpiexec -n 8 target/release/examples/throttled_scatter 1048576
//! ```
//!
//! In a single-copy scatter every non-root reads its block out of the root's buffer. The
//! kernel pins the root's pages for each read under the root's memory-map lock, so `c`
//! readers of one process slow each other down by `gamma(c) = a c^2 + b c` (the CMA
//! paper's contention model; `examples/contention.rs` measures it directly).
//! `throttled-read:k` lets only `k` ranks read at a time (the `i`-th reader starts when
//! reader `i - k` is done): `k = 1` has no contention and no parallelism,
//! `k = p - 1` is `parallel-read`, and the model's optimum lies between (the book's
//! chapter "Scatter").
//!
//! The example scatters blocks of `block bytes` (default 1 MiB) from rank 0 with every
//! `k` from 1 to `p - 1`, with `parallel-read`, `sequential-write`, `staged` and the
//! default (`auto`), and prints for each the median time (the slowest rank's, over 5
//! calls) beside what the cost model predicts with this machine's profile (`zcoll tune`
//! writes one; without it the built-in parameters) through the public `zcoll::tune` API.
//! The model assumes a rank per core: with more ranks than cores, or other jobs on the
//! machine, the measurement also holds the scheduler's share. After every call it asserts
//! that each rank holds the block rsmpi's own scatter delivers. Timings are printed,
//! never asserted.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;
use zcoll::tune::select::{self, Coll};
use zcoll::tune::Algo;
use zcoll::{ScatterAlgorithm, ZeroCopy};

const REPS: usize = 5;

fn main() -> Result<(), zcoll::Error> {
    env_logger::init();
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let (me, p) = (comm.rank() as usize, comm.size() as usize);
    let root = 0;
    let block: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);

    // The root's buffer (block r for rank r) and the oracle: rsmpi's scatter of it.
    let send: Vec<u8> =
        if me == root { (0..p * block).map(|i| (i * 7 + i / block) as u8).collect() } else { Vec::new() };
    let mut oracle = vec![0u8; block];
    let mpi_root = world.process_at_rank(root as i32);
    if me == root {
        mpi_root.scatter_into_root(&send[..], &mut oracle[..]);
    } else {
        mpi_root.scatter_into(&mut oracle[..]);
    }

    // Each algorithm beside its model counterpart; `auto` beside the model's choice.
    let (params, source) = select::active();
    let choice = params.best(&select::candidates(Coll::Scatter, p), p, block);
    let mut rows = vec![(ScatterAlgorithm::Auto, choice.map(|(algo, _)| algo))];
    rows.push((ScatterAlgorithm::ParallelRead, Some(Algo::ScatterParallelRead)));
    rows.push((ScatterAlgorithm::SequentialWrite, Some(Algo::ScatterSequentialWrite)));
    for k in 1..p.max(2) {
        rows.push((ScatterAlgorithm::ThrottledRead { k: k as u32 }, Some(Algo::ScatterThrottledRead(k))));
    }
    rows.push((ScatterAlgorithm::Staged, Some(Algo::ScatterStaged)));

    if me == 0 {
        println!("{}", comm.info());
        println!("model parameters: {source}");
        if let Some((algo, seconds)) = choice {
            println!(
                "the model's choice for {block}-byte blocks on {p} ranks: {algo:?} ({:.1} us)",
                seconds * 1e6
            );
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if p > cores {
            println!("{p} ranks on {cores} cores: readers share cores, which the model does not price");
        }
        println!("scatter of {block}-byte blocks from rank {root} to {p} ranks, median of {REPS}");
        println!("{:<20} {:>12} {:>12} {:>8}", "algorithm", "measured us", "model us", "ratio");
    }
    let mut recv = vec![0u8; block];
    for (algorithm, model) in rows {
        let mut times = Vec::with_capacity(REPS);
        for rep in 0..REPS {
            recv.fill(0);
            comm.barrier()?;
            let start = Instant::now();
            if me == root {
                comm.scatter_into_root_with(&send, &mut recv, root as i32, algorithm)?;
            } else {
                comm.scatter_into_with(&mut recv, root as i32, algorithm)?;
            }
            let mine = start.elapsed().as_secs_f64();
            assert!(recv == oracle, "rank {me}: {algorithm}, call {rep}: not the block rsmpi delivers");
            let mut slowest = 0.0f64;
            world.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
            times.push(slowest);
        }
        times.sort_by(f64::total_cmp);
        let measured = times[REPS / 2];
        if me == 0 {
            let label = algorithm.to_string();
            match model.map(|algo| params.predict(algo, p, block)) {
                Some(predicted) if predicted > 0.0 => println!(
                    "{label:<20} {:>12.1} {:>12.1} {:>8.2}",
                    measured * 1e6,
                    predicted * 1e6,
                    measured / predicted
                ),
                _ => println!("{label:<20} {:>12.1} {:>12} {:>8}", measured * 1e6, "-", "-"),
            }
        }
    }
    comm.barrier()?;
    if me == 0 {
        println!("every call delivered the blocks rsmpi's scatter delivers");
    }
    Ok(())
}
