//! A pencil transpose: an `N x M` array distributed by rows becomes distributed by
//! columns, stored transposed, with one `all_to_all_layouts_into` and no hand packing;
//! every element is checked against its independently computed value.
//!
//! ```text
//! mpiexec -n 3 target/release/examples/pencil_transpose
//! ```
//!
//! `N` and `M` are not multiples of the number of ranks, so the rows and columns split
//! unevenly and every pair of ranks exchanges a block of its own size. Each rank names, as
//! a layout per destination, the block of its rows under that rank's columns (a
//! subarray), and, per source, where that source's block lands in its transposed columns
//! (columns of the received block become rows). Inside a node the blocks are copied
//! between the layouts; no rank packs or unpacks anything itself.

use zcoll::{Layout, ZeroCopy};

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

    // This rank's rows, row-major; rank r gets the block of them under its columns.
    let mine: Vec<f64> = rows(me).flat_map(|i| (0..M).map(move |j| value(i, j))).collect();
    let here = rows(me).len();
    let send: Vec<Layout> = (0..p)
        .map(|r| Layout::subarray(&[here, M], &[here, cols(r).len()], &[0, cols(r).start]))
        .collect::<Result<_, _>>()?;

    // Our columns, transposed: row jj holds column cols(me).start + jj, all N rows of it.
    // Rank q's block arrives row by row (its rows i, our columns jj); element (i, jj) goes
    // to jj * N + i: one column of the transposed array per received row.
    let width = cols(me).len();
    let column = Layout::vector(width, 1, N as isize)?.resized(1)?;
    let recv: Vec<Layout> = (0..p)
        .map(|q| Layout::indexed_of(&[rows(q).len()], &[rows(q).start as isize], &column))
        .collect::<Result<_, _>>()?;

    let mut transposed = vec![0.0f64; width * N];
    comm.all_to_all_layouts_into(&mine, &send, &mut transposed, &recv)?;
    for (jj, j) in cols(me).enumerate() {
        for i in 0..N {
            assert_eq!(transposed[jj * N + i], value(i, j), "rank {me}: element ({i}, {j})");
        }
    }

    comm.barrier()?;
    if me == 0 {
        println!(
            "pencil transpose of a {N} x {M} array over {p} ranks (rows to columns): every element checked"
        );
    }
    Ok(())
}
