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
            let mut got = vec![7i64; n];
            comm.scan_into(&send, &mut got, op).unwrap_or_else(|e| panic!("{}: {e}", what("scan")));
            let mut want = vec![7i64; n];
            if n > 0 {
                world.scan_into(&send[..], &mut want[..], op_mpi(op));
            }
            assert_eq!(got, want, "{}", what("scan"));

            let mut got = vec![7i64; n];
            comm.exclusive_scan_into(&send, &mut got, op)
                .unwrap_or_else(|e| panic!("{}: {e}", what("exscan")));
            let mut want = vec![7i64; n];
            if n > 0 {
                world.exclusive_scan_into(&send[..], &mut want[..], op_mpi(op));
            }
            match me {
                0 => assert!(got.iter().all(|&x| x == 7), "{}: rank 0's output changed", what("exscan")),
                _ => assert_eq!(got, want, "{}", what("exscan")),
            }

            let mut got = vec![7i64; n];
            comm.reduce_scatter_block_into(&block, &mut got, op)
                .unwrap_or_else(|e| panic!("{}: {e}", what("reduce_scatter_block")));
            let mut want = vec![7i64; n];
            if n > 0 {
                world.reduce_scatter_block_into(&block[..], &mut want[..], op_mpi(op));
            }
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
        let mut got = vec![zero; n];
        comm.scan_into(&mats, &mut got, &ours).unwrap();
        let mut want = vec![zero; n];
        if n > 0 {
            world.scan_into(&mats[..], &mut want[..], &theirs);
        }
        assert_eq!(got, want, "scan of the matrix product n={n}");
        let mut got = vec![zero; n];
        comm.exclusive_scan_into(&mats, &mut got, &ours).unwrap();
        let mut want = vec![zero; n];
        if n > 0 {
            world.exclusive_scan_into(&mats[..], &mut want[..], &theirs);
        }
        if me > 0 {
            assert_eq!(got, want, "exclusive scan of the matrix product n={n}");
        }
        let mats_all: Vec<Mat2> = (0..n * pu).map(|i| mat_of(me, i)).collect();
        let mut got = vec![zero; n];
        comm.reduce_scatter_block_into(&mats_all, &mut got, &ours).unwrap();
        let mut want = vec![zero; n];
        if n > 0 {
            world.reduce_scatter_block_into(&mats_all[..], &mut want[..], &theirs);
        }
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
        assert!(out.iter().all(|&x| x == 5), "a failed reduce-scatter wrote its output");
    }
    comm.barrier().unwrap();
}
