//! The contention that the CMA collectives are designed around, in numbers.
//!
//! `c` ranks read a buffer of another process with `process_vm_readv` at the same time,
//! either all from ONE process (one-to-all, as a direct-read broadcast or a parallel-read
//! scatter does) or each from a DIFFERENT process. The kernel pins the target's pages
//! for every read under the target's memory-map lock, so concurrent readers of one
//! process serialise on it while readers of different processes do not. The example
//! prints the time per read for each `c` and both patterns, twice: for full copies of the
//! buffer, and for pinning alone (one byte into a local buffer against the whole remote
//! buffer: the kernel pins up to 1024 remote pages before it copies that byte, so the
//! time is the pinning). It checks every byte read.
//!
//! ```text
//! mpiexec -n 8 target/release/examples/contention [bytes]
//! ```
//!
//! With fewer cores than readers, the readers also share cores, which slows both
//! patterns alike; the ratio between them is the contention.

use mpi::traits::*;
use std::time::Instant;

const REPEAT: usize = 20;

fn main() {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let (me, p) = (world.rank() as usize, world.size() as usize);
    let bytes: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4 << 20);

    // Every rank owns a buffer with its own pattern; everyone learns every pid and address.
    let mine: Vec<u8> = (0..bytes).map(|i| (i * 7 + me * 13) as u8).collect();
    let local = [std::process::id() as u64, mine.as_ptr() as u64];
    let mut all = vec![0u64; 2 * p];
    world.all_gather_into(&local[..], &mut all[..]);
    let peer = |r: usize| (all[2 * r] as libc::pid_t, all[2 * r + 1] as usize);

    let mut full = vec![0u8; bytes];
    let mut one_byte = [0u8; 1];
    for (what, dst) in [("copy", &mut full[..]), ("pin only", &mut one_byte[..])] {
        if me == 0 {
            println!("{what}: {bytes}-byte remote buffer, {REPEAT} reads per reader, {p} ranks");
            println!("{:>3}  {:>16}  {:>16}  {:>8}", "c", "one-to-all us", "disjoint us", "ratio");
        }
        // Readers are the upper c ranks; the targets are rank 0 (one-to-all), or ranks
        // 0..c, one per reader (disjoint), which needs 2c ranks.
        for c in 1..p {
            let reader = me >= p - c;
            let one = time_reads(&world, dst, reader.then_some(0), bytes, peer);
            let disjoint =
                (2 * c <= p).then(|| time_reads(&world, dst, reader.then(|| me - (p - c)), bytes, peer));
            if me == 0 {
                match disjoint {
                    Some(d) => println!("{c:>3}  {one:>16.1}  {d:>16.1}  {:>8.2}", one / d),
                    None => println!("{c:>3}  {one:>16.1}  {:>16}  {:>8}", "-", "-"),
                }
            }
        }
    }
    if p == 1 {
        println!("one rank: nothing to read from (run with at least 2 ranks)");
    }
    world.barrier();
    drop(mine);
}

/// Every rank with `Some(target)` reads `dst.len()` bytes from the target's `bytes`-byte
/// buffer `REPEAT` times, all readers at once; returns the slowest reader's mean time per
/// read in microseconds.
fn time_reads(
    world: &impl Communicator,
    dst: &mut [u8],
    target: Option<usize>,
    bytes: usize,
    peer: impl Fn(usize) -> (libc::pid_t, usize),
) -> f64 {
    world.barrier();
    let mut mean = 0.0f64;
    if let Some(t) = target {
        let (pid, addr) = peer(t);
        let start = Instant::now();
        for _ in 0..REPEAT {
            read(pid, addr, bytes, dst);
        }
        mean = start.elapsed().as_secs_f64() * 1e6 / REPEAT as f64;
        assert!(
            dst.iter().enumerate().all(|(i, &b)| b == (i * 7 + t * 13) as u8),
            "read wrong bytes from rank {t}"
        );
    }
    let mut slowest = 0.0f64;
    world.all_reduce_into(&mean, &mut slowest, mpi::collective::SystemOperation::max());
    // Keep the targets' buffers alive until every reader is done.
    world.barrier();
    slowest
}

/// Fills `dst` from the `remote_len`-byte buffer at `addr` of process `pid`, looping on
/// partial transfers.
fn read(pid: libc::pid_t, addr: usize, remote_len: usize, dst: &mut [u8]) {
    let mut done = 0;
    while done < dst.len() {
        let n = (dst.len() - done).min(cma_sys::MAX_RW_COUNT);
        let local = cma_sys::iovec { iov_base: dst[done..].as_mut_ptr().cast(), iov_len: n };
        let remote_n = (remote_len - done).min(cma_sys::MAX_RW_COUNT);
        let remote = cma_sys::iovec { iov_base: (addr + done) as *mut libc::c_void, iov_len: remote_n };
        // SAFETY: `local` covers `n` bytes of `dst`, which we borrow mutably; the remote
        // range lies in the target's buffer, which it keeps alive until the barrier after
        // all reads, and which the kernel checks against the target's mappings.
        let r = unsafe { cma_sys::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        assert!(r > 0, "process_vm_readv: {}", cma_sys::Errno::last());
        done += r as usize;
    }
}
