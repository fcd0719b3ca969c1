//! A conjugate-gradient solver whose dot products go through `Comm::all_reduce_into`.
//!
//! ```text
//! scripts/mpiexec -n 3 target/release/examples/cg [interior points]
//! ```
//!
//! It solves the 1-D Poisson problem `-u'' = 2` on `(0, 1)` with `u(0) = u(1) = 0`,
//! discretised with second differences on `N` interior points (default 240, `h = 1 / (N +
//! 1)`): the tridiagonal, symmetric positive definite system `A u = b` with `A =
//! tridiag(-1, 2, -1)` and `b_i = 2 h^2`. Second differences are exact on quadratics, so
//! the discrete solution is the analytic one, `u(x) = x (1 - x)`, at the grid points. The
//! rows are split over the ranks in consecutive blocks. Each iteration of CG needs:
//!
//! - one matrix-vector product, for which a rank needs the last entry of the direction
//!   on the rank before it and the first on the rank after it: every rank contributes its
//!   two boundary values to one `all_gather_into` of `2 p` numbers;
//! - two dot products (`p . Ap` and `r . r`), each a local partial sum followed by an
//!   `all_reduce_into` of one `f64` with `Builtin::Sum`. These small allreduces are the
//!   latency-bound calls that zcoll serves through the control segment, without a
//!   system call.
//!
//! Every rank holds the same scalars (zcoll folds the partial sums in rank order, so the
//! sum is bitwise the same everywhere), so every rank takes the same number of
//! iterations. The example checks the result three ways, none of them through zcoll:
//!
//! - the true residual `|b - A x| / |b|`, recomputed from `x` (not the recurrence's `r`)
//!   and summed with rsmpi's `all_reduce_into`, is below `1e-10`;
//! - `x` equals, within `1e-9`, a serial solve of the whole system by the Thomas
//!   algorithm (tridiagonal Gaussian elimination) on every rank;
//! - `x` equals, within `1e-9`, the analytic solution `x (1 - x)`.
//!
//! See the book's chapter "Reduce and allreduce".

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;
use zcoll::op::Builtin;
use zcoll::{Comm, ZeroCopy};

/// The first row of part `r` of `n` rows cut into `p` parts, the first `n % p` parts one
/// longer.
fn start(n: usize, p: usize, r: usize) -> usize {
    r * (n / p) + r.min(n % p)
}

/// The grid point of row `i` (0-based) of `n` interior points.
fn point(i: usize, n: usize) -> f64 {
    (i + 1) as f64 / (n + 1) as f64
}

/// The right-hand side of every row: `h^2 f` with `f = 2`.
fn rhs(n: usize) -> f64 {
    let h = 1.0 / (n + 1) as f64;
    2.0 * h * h
}

/// The global dot product of two distributed vectors: a local sum, then zcoll's allreduce.
fn dot(comm: &Comm, a: &[f64], b: &[f64]) -> Result<f64, zcoll::Error> {
    let local = [a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>()];
    let mut global = [0.0];
    comm.all_reduce_into(&local, &mut global, Builtin::Sum)?;
    Ok(global[0])
}

/// `y = A v` on this rank's rows, with `A = tridiag(-1, 2, -1)`: the entry before the
/// first row is the last one of the rank before, the entry after the last row the first
/// one of the rank after (zero outside the domain). Every rank holds at least one row.
fn matvec(comm: &Comm, v: &[f64], y: &mut [f64]) -> Result<(), zcoll::Error> {
    let (me, p) = (comm.rank() as usize, comm.size() as usize);
    let mine = [v[0], v[v.len() - 1]];
    let mut ends = vec![0.0; 2 * p];
    comm.all_gather_into(&mine, &mut ends)?;
    let left = if me > 0 { ends[2 * me - 1] } else { 0.0 };
    let right = if me + 1 < p { ends[2 * me + 2] } else { 0.0 };
    let m = v.len();
    for i in 0..m {
        let before = if i > 0 { v[i - 1] } else { left };
        let after = if i + 1 < m { v[i + 1] } else { right };
        y[i] = 2.0 * v[i] - before - after;
    }
    Ok(())
}

/// The serial oracle: solves `tridiag(-1, 2, -1) x = b` by the Thomas algorithm.
fn thomas(b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let (mut c, mut d) = (vec![0.0; n], vec![0.0; n]);
    for i in 0..n {
        let (sub, diag) = (if i > 0 { -1.0 } else { 0.0 }, 2.0);
        let prev_c = if i > 0 { c[i - 1] } else { 0.0 };
        let prev_d = if i > 0 { d[i - 1] } else { 0.0 };
        let denom = diag - sub * prev_c;
        c[i] = -1.0 / denom;
        d[i] = (b[i] - sub * prev_d) / denom;
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = d[i] - if i + 1 < n { c[i] * x[i + 1] } else { 0.0 };
    }
    x
}

fn main() -> Result<(), zcoll::Error> {
    env_logger::init();
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy()?;
    let (me, p) = (comm.rank() as usize, comm.size() as usize);
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(240).max(p);
    let rows = start(n, p, me)..start(n, p, me + 1);
    let m = rows.len();

    // CG from x = 0: r = b, d = r.
    let b: Vec<f64> = vec![rhs(n); m];
    let mut x = vec![0.0; m];
    let mut r = b.clone();
    let mut d = r.clone();
    let mut ad = vec![0.0; m];
    let bb = dot(&comm, &b, &b)?;
    let mut rr = bb;
    let tolerance = 1e-12 * bb.sqrt();
    let started = Instant::now();
    let mut iterations = 0;
    while rr.sqrt() > tolerance && iterations < 10 * n {
        matvec(&comm, &d, &mut ad)?;
        let alpha = rr / dot(&comm, &d, &ad)?;
        x.iter_mut().zip(&d).for_each(|(x, d)| *x += alpha * d);
        r.iter_mut().zip(&ad).for_each(|(r, ad)| *r -= alpha * ad);
        let rr_next = dot(&comm, &r, &r)?;
        let beta = rr_next / rr;
        d.iter_mut().zip(&r).for_each(|(d, r)| *d = r + beta * *d);
        rr = rr_next;
        iterations += 1;
    }
    let seconds = started.elapsed().as_secs_f64();

    // Oracle 1: the true residual, recomputed from x and summed by rsmpi, not zcoll.
    let mut ax = vec![0.0; m];
    matvec(&comm, &x, &mut ax)?;
    let local = b.iter().zip(&ax).map(|(b, ax)| (b - ax) * (b - ax)).sum::<f64>();
    let local_b = b.iter().map(|b| b * b).sum::<f64>();
    let (mut residual, mut norm_b) = (0.0f64, 0.0f64);
    world.all_reduce_into(&local, &mut residual, SystemOperation::sum());
    world.all_reduce_into(&local_b, &mut norm_b, SystemOperation::sum());
    let relative = (residual / norm_b).sqrt();
    assert!(relative < 1e-10, "rank {me}: relative residual {relative:e} after {iterations} iterations");
    // zcoll's sum and rsmpi's agree (not bitwise: they may add in another order).
    assert!((bb - norm_b).abs() <= 1e-12 * norm_b, "|b|^2: zcoll {bb} against rsmpi {norm_b}");

    // Oracle 2: a serial Thomas solve of the whole system, on every rank.
    let all_b: Vec<f64> = vec![rhs(n); n];
    let serial = thomas(&all_b);
    let mut worst_serial = 0.0f64;
    let mut worst_exact = 0.0f64;
    for (x, i) in x.iter().zip(rows.clone()) {
        worst_serial = worst_serial.max((x - serial[i]).abs());
        worst_exact = worst_exact.max((x - point(i, n) * (1.0 - point(i, n))).abs());
    }
    assert!(worst_serial < 1e-9, "rank {me}: CG differs from the serial solve by {worst_serial:e}");
    // Oracle 3: the analytic solution, which the discretisation reproduces exactly.
    assert!(worst_exact < 1e-9, "rank {me}: CG differs from x (1 - x) by {worst_exact:e}");

    let mut slowest = 0.0f64;
    world.all_reduce_into(&seconds, &mut slowest, SystemOperation::max());
    if me == 0 {
        println!("{}", comm.info());
        println!(
            "CG on {n} points over {p} ranks: {iterations} iterations ({} allreduces of one f64), {:.1} ms",
            2 * iterations + 1,
            slowest * 1e3
        );
        println!(
            "relative residual {relative:.1e}; max |x - serial solve| {worst_serial:.1e}; \
             max |x - x (1 - x)| {worst_exact:.1e} on rank 0"
        );
    }
    Ok(())
}
