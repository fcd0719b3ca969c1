//! A pencil transpose: an `N x M` array distributed by rows becomes distributed by
//! columns, with `all_to_all_varcount_into`, and is checked against the same transpose done
//! with rsmpi's `all_to_all_varcount_into`.
//!
//! ```text
//! mpiexec -n 3 target/release/examples/pencil_transpose
//! ```
//!
//! `N` and `M` are not multiples of the number of ranks, so the rows and columns split
//! unevenly and every pair of ranks exchanges a block of its own size. Each rank packs the
//! part of its rows that every other rank's columns cover (one block per destination),
//! the blocks are exchanged (inside a node with one copy per byte), and each rank unpacks
//! what it received into its columns, stored transposed (one row per original column).

use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
use mpi::Count;
use zcoll::ZeroCopy;

const N: usize = 301;
const M: usize = 457;

/// The first index of part `r` of `n` items cut into `p` parts, the first `n % p` parts one
/// longer.
fn start(n: usize, p: usize, r: usize) -> usize {
    r * (n / p) + r.min(n % p)
}

/// The value of element `(i, j)` of the array.
fn value(i: usize, j: usize) -> f64 {
    (i * M + j) as f64 + 0.25
}

fn main() -> Result<(), zcoll::Error> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let (me, p) = (comm.rank() as usize, comm.size() as usize);
    let rows = |r: usize| start(N, p, r)..start(N, p, r + 1);
    let cols = |r: usize| start(M, p, r)..start(M, p, r + 1);

    // This rank's rows, row-major, and what it sends every rank: the block of its rows
    // under that rank's columns, packed row by row.
    let mine: Vec<f64> = rows(me).flat_map(|i| (0..M).map(move |j| value(i, j))).collect();
    let mut send = Vec::with_capacity(mine.len());
    for r in 0..p {
        for i in 0..rows(me).len() {
            send.extend_from_slice(&mine[i * M + cols(r).start..i * M + cols(r).end]);
        }
    }
    let counts = |n: &dyn Fn(usize) -> usize| -> Vec<Count> { (0..p).map(|r| n(r) as Count).collect() };
    let displs = |c: &[Count]| -> Vec<Count> {
        c.iter().scan(0, |s, &x| Some(std::mem::replace(s, *s + x))).collect()
    };
    let send_counts = counts(&|r| rows(me).len() * cols(r).len());
    let recv_counts = counts(&|q| rows(q).len() * cols(me).len());
    let (send_displs, recv_displs) = (displs(&send_counts), displs(&recv_counts));

    let mut recv = vec![0.0f64; N * cols(me).len()];
    comm.all_to_all_varcount_into(&send, &send_counts, &send_displs, &mut recv, &recv_counts, &recv_displs)?;
    let mut oracle = vec![0.0f64; recv.len()];
    world.all_to_all_varcount_into(
        &Partition::new(&send[..], &send_counts[..], &send_displs[..]),
        &mut PartitionMut::new(&mut oracle[..], &recv_counts[..], &recv_displs[..]),
    );
    assert_eq!(recv, oracle, "rank {me} received other blocks than rsmpi delivers");

    // Unpack: from rank q, its rows under our columns; store our columns transposed.
    let width = cols(me).len();
    let mut transposed = vec![0.0f64; width * N];
    for q in 0..p {
        let block = &recv[recv_displs[q] as usize..][..recv_counts[q] as usize];
        for (a, i) in rows(q).enumerate() {
            for jj in 0..width {
                transposed[jj * N + i] = block[a * width + jj];
            }
        }
    }
    for (jj, j) in cols(me).enumerate() {
        for i in 0..N {
            assert_eq!(transposed[jj * N + i], value(i, j), "rank {me}: element ({i}, {j})");
        }
    }

    comm.barrier()?;
    if me == 0 {
        println!("pencil transpose of a {N} x {M} array over {p} ranks (rows to columns): same as rsmpi");
    }
    Ok(())
}
