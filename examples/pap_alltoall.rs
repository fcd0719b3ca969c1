//! An alltoall under arrival imbalance: the process-arrival-pattern (PAP) algorithms
//! against the direct pairwise exchange.
//!
//! ```text
//! scripts/mpiexec -n 3 target/release/examples/pap_alltoall [block bytes] [delay ms]
//! ```
//!
//! Before each call the ranks sleep different amounts, in two patterns: **one straggler**
//! (the last rank arrives `delay` late, default 20 ms, the others together) and
//! **staggered** (rank `r` arrives `r * delay / (p - 1)` late). `pairwise` starts moving
//! data only once every rank has arrived (its round checks every rank's call first), so
//! the whole exchange happens after the last arrival. The arrival-aware variants
//! (`pap-write`, `pap-read`; the book's chapter "Process arrival patterns") check and
//! serve each peer as it arrives: the early ranks exchange their blocks among themselves
//! while the late one sleeps, and only the blocks to and from the last rank are left when
//! it arrives.
//!
//! Blocks are 4 MiB by default: the gain is the copying done before the last arrival, so
//! it shows with blocks large enough for copies to outweigh the wake-up of the ranks that
//! waited (one run at 3 ranks on the shared 2-core machine, one straggler: 12 ms of
//! exchange after the last arrival with `pairwise`, 3 ms with `pap-write`; noisy).
//!
//! For each pattern and algorithm the example prints two medians over 5 calls: the time
//! from the **last arrival to the last return** (what the imbalance leaves to do; the
//! ranks' clocks are the same machine's clock, so run it on one node) and the mean time a
//! rank spends **inside** the call (waiting included). With 2 ranks there is nothing to
//! overlap (each rank's one peer is the late one); PAP needs 3 ranks or more, and gains
//! most with large blocks and many ranks. After every call it asserts that every rank
//! received exactly what rsmpi's `all_to_all_into` delivers for the same send buffer.
//! Timings are printed, never asserted.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use zcoll::{AlltoallAlgorithm, ZeroCopy};

const REPS: usize = 5;

/// Seconds since the epoch on this machine's clock (the same clock for every rank of a
/// node, unlike `Instant`, which cannot be compared across processes).
fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs_f64()
}

fn main() -> Result<(), zcoll::Error> {
    env_logger::init();
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let (me, p) = (comm.rank() as usize, comm.size() as usize);
    let mut args = std::env::args().skip(1);
    let block: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(4 << 20) / 8;
    let delay_ms: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20.0);

    // Block q of this rank's send buffer goes to rank q; the oracle is rsmpi's alltoall.
    let send: Vec<u64> =
        (0..p * block).map(|i| (((me * p + i / block) << 32) | (i % block)) as u64).collect();
    let mut oracle = vec![0u64; p * block];
    world.all_to_all_into(&send[..], &mut oracle[..]);

    // How late rank r arrives, in ms, in each pattern.
    let one_straggler = |r: usize| if r + 1 == p && p > 1 { delay_ms } else { 0.0 };
    let staggered = |r: usize| if p > 1 { r as f64 * delay_ms / (p - 1) as f64 } else { 0.0 };
    let patterns: [(&str, &dyn Fn(usize) -> f64); 2] =
        [("one straggler", &one_straggler), ("staggered", &staggered)];
    let algorithms = [
        AlltoallAlgorithm::Pairwise,
        AlltoallAlgorithm::PapWrite,
        AlltoallAlgorithm::PapRead,
        AlltoallAlgorithm::Auto,
    ];
    if me == 0 {
        println!("{}", comm.info());
        println!(
            "alltoall of {} KiB blocks over {p} ranks, delay {delay_ms} ms; median of {REPS} calls",
            (block * 8) >> 10
        );
        println!(
            "{:<14} {:<10} {:>22} {:>20}",
            "arrivals", "algorithm", "last arrival->end us", "mean in call us"
        );
    }
    let mut recv = vec![0u64; p * block];
    for (pattern, late_ms) in &patterns {
        for algorithm in algorithms {
            let (mut after_last, mut inside) = (Vec::new(), Vec::new());
            for rep in 0..REPS {
                recv.fill(0);
                comm.barrier()?;
                std::thread::sleep(Duration::from_secs_f64(late_ms(me) / 1e3));
                let arrived = now();
                comm.all_to_all_into_with(&send, &mut recv, algorithm)?;
                let left = now();
                assert!(recv == oracle, "rank {me}: {algorithm}, {pattern}, call {rep}: not rsmpi's result");
                let (mut last_arrival, mut last_return, mut total_inside) = (0.0f64, 0.0f64, 0.0f64);
                world.all_reduce_into(&arrived, &mut last_arrival, SystemOperation::max());
                world.all_reduce_into(&left, &mut last_return, SystemOperation::max());
                world.all_reduce_into(&(left - arrived), &mut total_inside, SystemOperation::sum());
                after_last.push((last_return - last_arrival).max(0.0));
                inside.push(total_inside / p as f64);
            }
            after_last.sort_by(f64::total_cmp);
            inside.sort_by(f64::total_cmp);
            if me == 0 {
                println!(
                    "{pattern:<14} {:<10} {:>22.1} {:>20.1}",
                    algorithm.to_string(),
                    after_last[REPS / 2] * 1e6,
                    inside[REPS / 2] * 1e6
                );
            }
        }
    }
    comm.barrier()?;
    if me == 0 {
        println!("every call delivered what rsmpi's alltoall delivers");
    }
    Ok(())
}
