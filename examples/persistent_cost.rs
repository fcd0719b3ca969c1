//! What a persistent broadcast costs per start, against the blocking call and against an
//! `Exposure` (the registration cache a persistent handle could hold).
//!
//! ```text
//! mpiexec -n 2 target/release/examples/persistent_cost [iters, default 100]
//! ```
//!
//! For each size and each kind of buffer (an ordinary `Vec`, copied with CMA, and a buffer
//! in the shared heap, `Comm::alloc`, read with loads), rounds of three blocks of `iters`
//! broadcasts from rank 0, in an order rotated every round: the blocking
//! `broadcast_into`, `Exposure::broadcast`, and `broadcast_init`'s `start().wait()`.
//! Rank 0 prints, per size, the median over the rounds of each block's time per call over
//! the blocking block's of the same round, with the range. Every block's last broadcast
//! is checked on every rank.

use std::time::Instant;
use zcoll::{Comm, ZeroCopy};

const ROUNDS: usize = 7;

/// One block of `iters` broadcasts of `buf` by variant `v`; the time per call in us.
fn block(comm: &mut Comm, buf: &mut [u8], v: usize, iters: usize, tag: u8) -> Result<f64, zcoll::Error> {
    if comm.rank() == 0 {
        buf.fill(tag);
    }
    comm.barrier()?;
    let t = Instant::now();
    match v {
        0 => (0..iters).try_for_each(|_| comm.broadcast_into(buf, 0))?,
        1 => {
            let mut exposed = comm.expose(buf)?;
            let t = Instant::now(); // the registration is not timed
            (0..iters).try_for_each(|_| exposed.broadcast(0))?;
            let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
            exposed.withdraw()?;
            assert!(buf.iter().all(|&x| x == tag), "exposure broadcast");
            return Ok(us);
        }
        _ => {
            let us = comm.immediate_scope(|s| {
                let mut h = s.broadcast_init(&mut *buf, 0);
                let t = Instant::now(); // the scope and its worker's start are not timed
                (0..iters).try_for_each(|_| h.start().wait())?;
                Ok::<f64, zcoll::Error>(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
            })?;
            assert!(buf.iter().all(|&x| x == tag), "persistent broadcast");
            return Ok(us);
        }
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
    assert!(buf.iter().all(|&x| x == tag), "broadcast variant {v}");
    Ok(us)
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() -> Result<(), zcoll::Error> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let iters: usize = std::env::args().nth(1).map_or(100, |s| s.parse().expect("iters"));
    let mut comm = world.zero_copy()?;
    if comm.rank() == 0 {
        println!("| buffer | bytes | blocking us | exposure / blocking | persistent / blocking |");
        println!("|---|---|---|---|---|");
    }
    for heap in [false, true] {
        for bytes in [8usize, 4 << 10, 64 << 10, 1 << 20] {
            let iters = if bytes >= 64 << 10 { iters / 10 } else { iters };
            let mut vec_buf = vec![0u8; bytes];
            let mut heap_buf = comm.alloc::<u8>(bytes)?;
            let (mut us, mut ex, mut pe) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..ROUNDS {
                let mut t = [0.0; 3];
                for k in 0..3 {
                    let v = (round + k) % 3;
                    let tag = (round * 3 + k) as u8 + 1;
                    let buf: &mut [u8] = if heap { &mut heap_buf } else { &mut vec_buf };
                    t[v] = block(&mut comm, buf, v, iters, tag)?;
                }
                us.push(t[0]);
                ex.push(t[1] / t[0]);
                pe.push(t[2] / t[0]);
            }
            if comm.rank() == 0 {
                let (u, e, p) = (median(us), median(ex), median(pe));
                println!(
                    "| {} | {bytes} | {:.3} [{:.3}, {:.3}] | {:.2} [{:.2}, {:.2}] | {:.2} [{:.2}, {:.2}] |",
                    if heap { "heap" } else { "Vec" },
                    u.0,
                    u.1,
                    u.2,
                    e.0,
                    e.1,
                    e.2,
                    p.0,
                    p.1,
                    p.2
                );
            }
        }
    }
    Ok(())
}
