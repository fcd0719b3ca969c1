//! `scan_into`, `exclusive_scan_into` and `reduce_scatter_block_into` against rsmpi's,
//! with every built-in operator and a non-commutative user operator (the 2x2 matrix
//! product, written once in rsmpi's `(invec, inoutvec)` shape for both libraries).

use crate::common::op_mpi;
use crate::reduce::{mat_mul, mat_of, Mat2};
use mpi::collective::UserOperation as MpiUserOperation;
use mpi::datatype::{DynBuffer, DynBufferMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::{Builtin, UserOperation};
use zcoll::{Comm, Error};

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let pu = p as usize;
    for n in [0usize, 1, 7, 5000, 70_001] {
        let value = |r: i32, i: usize| ((i as i64 * 31 + r as i64 * 17) % 9) - 3;
        let send: Vec<i64> = (0..n).map(|i| value(me, i)).collect();
        let block: Vec<i64> = (0..n * pu).map(|i| value(me, i)).collect();
        for op in Builtin::ALL {
            let what = |c: &str| format!("{c} {op:?} n={n}");
            let scan = |g: &mut [i64]| comm.scan_into(&send, g, op);
            let (got, want) = both(n, 7, scan, |w| world.scan_into(&send[..], w, op_mpi(op)), &what("scan"));
            assert_eq!(got, want, "{}", what("scan"));

            let exscan = |g: &mut [i64]| comm.exclusive_scan_into(&send, g, op);
            let theirs = |w: &mut [i64]| world.exclusive_scan_into(&send[..], w, op_mpi(op));
            let (got, want) = both(n, 7, exscan, theirs, &what("exscan"));
            match me {
                0 => assert!(got.iter().all(|&x| x == 7), "{}: rank 0's output changed", what("exscan")),
                _ => assert_eq!(got, want, "{}", what("exscan")),
            }

            let rsb = |g: &mut [i64]| comm.reduce_scatter_block_into(&block, g, op);
            let theirs = |w: &mut [i64]| world.reduce_scatter_block_into(&block[..], w, op_mpi(op));
            let (got, want) = both(n, 7, rsb, theirs, &what("reduce_scatter_block"));
            assert_eq!(got, want, "{}", what("reduce_scatter_block"));
        }

        // The non-commutative product, ported from rsmpi.
        let body = |invec: &[Mat2], inoutvec: &mut [Mat2]| {
            for (a, b) in invec.iter().zip(inoutvec.iter_mut()) {
                *b = mat_mul(*a, *b);
            }
        };
        let theirs = MpiUserOperation::associative(|x: DynBuffer<'_>, y: DynBufferMut<'_>| {
            body(x.downcast().unwrap(), y.downcast().unwrap());
        });
        let ours = UserOperation::associative(body);
        let mats: Vec<Mat2> = (0..n).map(|i| mat_of(me, i)).collect();
        let zero = bytemuck::Zeroable::zeroed();
        let what = format!("scan of the matrix product n={n}");
        let scan = |g: &mut [Mat2]| comm.scan_into(&mats, g, &ours);
        let (got, want) = both(n, zero, scan, |w| world.scan_into(&mats[..], w, &theirs), &what);
        assert_eq!(got, want, "{what}");
        let exscan = |g: &mut [Mat2]| comm.exclusive_scan_into(&mats, g, &ours);
        let mpi_exscan = |w: &mut [Mat2]| world.exclusive_scan_into(&mats[..], w, &theirs);
        let (got, want) = both(n, zero, exscan, mpi_exscan, &format!("exclusive {what}"));
        if me > 0 {
            assert_eq!(got, want, "exclusive scan of the matrix product n={n}");
        }
        let mats_all: Vec<Mat2> = (0..n * pu).map(|i| mat_of(me, i)).collect();
        let rsb = |g: &mut [Mat2]| comm.reduce_scatter_block_into(&mats_all, g, &ours);
        let mpi_rsb = |w: &mut [Mat2]| world.reduce_scatter_block_into(&mats_all[..], w, &theirs);
        let (got, want) =
            both(n, zero, rsb, mpi_rsb, &format!("reduce_scatter_block of the matrix product n={n}"));
        assert_eq!(got, want, "reduce_scatter_block of the matrix product n={n}");
    }

    // Bad input: the same error on every rank, the outputs untouched.
    let send = vec![1i64; 100];
    let mut recv = vec![5i64; if me == p - 1 { 99 } else { 100 }];
    let e = comm.scan_into(&send, &mut recv, Builtin::Sum).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. } | Error::PeerFailed { .. }), "{e}");
    assert!(recv.iter().all(|&x| x == 5), "a failed scan wrote its output");
    if p > 1 {
        let mut out = vec![5i64; 3];
        let e = comm.reduce_scatter_block_into(&send[..3 * pu + 1], &mut out, Builtin::Sum).unwrap_err();
        assert!(matches!(e, Error::LengthMismatch { .. } | Error::PeerFailed { .. }), "{e}");
        // Named as the send that is not `p` blocks of the receive: its length, against `p`
        // receives (not a receive against a fractional block), on one node or several.
        if let Error::LengthMismatch { expected, found, .. } = e {
            assert_eq!((expected, found), (24 * pu, 8 * (3 * pu + 1)), "{e}");
        }
        assert!(out.iter().all(|&x| x == 5), "a failed reduce-scatter wrote its output");
    }
    comm.barrier().unwrap();
}

/// One call on `n` outputs, every one starting as `start`, by zcoll (`ours`, which must
/// succeed) and by rsmpi (`theirs`, not called for `n = 0`): (zcoll's, rsmpi's).
fn both<T: Clone>(
    n: usize,
    start: T,
    ours: impl FnOnce(&mut [T]) -> zcoll::Result<()>,
    theirs: impl FnOnce(&mut [T]),
    what: &str,
) -> (Vec<T>, Vec<T>) {
    let mut got = vec![start.clone(); n];
    ours(&mut got).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut want = vec![start; n];
    if n > 0 {
        theirs(&mut want);
    }
    (got, want)
}
