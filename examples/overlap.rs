//! A 1D stencil update overlapped with an allreduce, in an immediate scope.
//!
//! ```text
//! mpiexec -n 3 target/release/examples/overlap
//! ```
//!
//! Each rank holds a periodic field of integers. Every step it starts a persistent
//! allreduce of a histogram of the field (the global statistic of the step), computes the
//! stencil `next[i] = (u[i-1] + 2 u[i] + u[i+1]) / 4` while the allreduce runs, then
//! waits. The example asserts that every histogram equals rsmpi's allreduce of the same
//! data and that the field equals the stencil computed without overlap, and prints how
//! long the steps took with and without the overlap.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;
use zcoll::op::Builtin;
use zcoll::ZeroCopy;

const N: usize = 1 << 16;
const BINS: usize = 1 << 15;
const STEPS: usize = 20;

fn stencil(u: &[u64], next: &mut [u64]) {
    let n = u.len();
    for i in 0..n {
        next[i] = (u[(i + n - 1) % n] + 2 * u[i] + u[(i + 1) % n]) / 4;
    }
}

fn histogram(u: &[u64], hist: &mut [u64]) {
    hist.fill(0);
    for &x in u {
        hist[(x as usize) % hist.len()] += 1;
    }
}

fn main() -> Result<(), zcoll::Error> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let mut comm = world.zero_copy()?;
    let me = comm.rank() as u64;
    let start: Vec<u64> = (0..N as u64).map(|i| (i * 7919 + me * 104_729) % 1_000_003).collect();

    // The reference: the same steps without overlap, histograms by rsmpi.
    let mut u = start.clone();
    let mut next = vec![0u64; N];
    let mut want = Vec::with_capacity(STEPS);
    let mut local = vec![0u64; BINS];
    for _ in 0..STEPS {
        histogram(&u, &mut local);
        let mut global = vec![0u64; BINS];
        world.all_reduce_into(&local[..], &mut global[..], SystemOperation::sum());
        want.push(global);
        stencil(&u, &mut next);
        std::mem::swap(&mut u, &mut next);
    }
    let reference = u;

    // Blocking zcoll, to compare the time with.
    let (mut u, mut global) = (start.clone(), vec![0u64; BINS]);
    comm.barrier()?;
    let t = Instant::now();
    for _ in 0..STEPS {
        histogram(&u, &mut local);
        comm.all_reduce_into(&local, &mut global, Builtin::Sum)?;
        stencil(&u, &mut next);
        std::mem::swap(&mut u, &mut next);
    }
    let blocking = t.elapsed();

    // Overlapped: one scope, one persistent allreduce started every step.
    let mut u = start;
    let mut got = Vec::with_capacity(STEPS);
    comm.barrier()?;
    let t = Instant::now();
    comm.immediate_scope(|s| {
        let mut sum = s.all_reduce_init(&mut local, &mut global, Builtin::Sum);
        for _ in 0..STEPS {
            sum.with_buffers(|(local, _)| histogram(&u, local));
            let req = sum.start();
            stencil(&u, &mut next); // runs while the allreduce moves the histograms
            req.wait()?;
            sum.with_buffers(|(_, global)| got.push(global.to_vec()));
            std::mem::swap(&mut u, &mut next);
        }
        Ok::<(), zcoll::Error>(())
    })?;
    let overlapped = t.elapsed();

    assert_eq!(got, want, "rank {me}: a histogram differs from rsmpi's allreduce");
    assert_eq!(u, reference, "rank {me}: the field differs from the stencil without overlap");
    if me == 0 {
        println!(
            "{STEPS} steps of a {N}-cell stencil with an allreduce of {} KiB on {} ranks: \
             {:.2} ms blocking, {:.2} ms overlapped ({}); results as rsmpi's",
            BINS * 8 / 1024,
            comm.size(),
            blocking.as_secs_f64() * 1e3,
            overlapped.as_secs_f64() * 1e3,
            comm.info().progress,
        );
    }
    Ok(())
}
