//! Reductions against rsmpi's `all_reduce_into` (built-in operators) and against a
//! result computed independently (a non-commutative user operator).

use crate::common::op_mpi;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::{Builtin, Operator, UserOp};
use zcoll::{Comm, Error, InterNode, Pod, ReduceAlgorithm};

/// A 2x2 matrix of wrapping integers: its product is not commutative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
pub(crate) struct Mat2 {
    m: [i64; 4],
}

pub(crate) fn mat_mul(a: Mat2, b: Mat2) -> Mat2 {
    let (a, b) = (a.m, b.m);
    let f = |x: i64, y: i64, z: i64, w: i64| x.wrapping_mul(y).wrapping_add(z.wrapping_mul(w));
    Mat2 {
        m: [
            f(a[0], b[0], a[1], b[2]),
            f(a[0], b[1], a[1], b[3]),
            f(a[2], b[0], a[3], b[2]),
            f(a[2], b[1], a[3], b[3]),
        ],
    }
}

pub(crate) fn mat_of(rank: i32, i: usize) -> Mat2 {
    let r = rank as i64;
    let i = i as i64;
    Mat2 { m: [1 + (r + i) % 3, r - i % 5, (i * 7 + r) % 4, 1 + r * 2 - i % 3] }
}

/// The algorithms of an allreduce: all but `RootRead`, a reduce's only.
fn algorithms() -> [ReduceAlgorithm; 3] {
    [ReduceAlgorithm::Auto, ReduceAlgorithm::Partitioned, ReduceAlgorithm::Staged]
}

/// The algorithms of a reduce to a root: `Auto` and every one that moves data.
fn reduce_algorithms() -> impl Iterator<Item = ReduceAlgorithm> {
    std::iter::once(ReduceAlgorithm::Auto).chain(ReduceAlgorithm::ALL)
}

/// Values for rank `r`, element `i`, of a type built from an `i64`.
trait Sample: Pod + PartialEq + std::fmt::Debug {
    fn sample(r: i32, i: usize, seed: u64) -> Self;
    /// How far apart two results may be (0 for integers).
    fn close(a: Self, b: Self, p: i32) -> bool;
}

impl Sample for i32 {
    fn sample(r: i32, i: usize, seed: u64) -> Self {
        ((i as u64 * 2654435761 + seed * 97 + r as u64 * 40503) % 2001) as i32 - 1000
    }
    fn close(a: Self, b: Self, _: i32) -> bool {
        a == b
    }
}

impl Sample for u64 {
    fn sample(r: i32, i: usize, seed: u64) -> Self {
        (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (seed << 7) ^ (r as u64 * 0x1234_5678_9abc)
    }
    fn close(a: Self, b: Self, _: i32) -> bool {
        a == b
    }
}

impl Sample for f64 {
    fn sample(r: i32, i: usize, seed: u64) -> Self {
        (i32::sample(r, i, seed) as f64) / 7.0 + 0.5
    }
    fn close(a: Self, b: Self, p: i32) -> bool {
        // Samples are at most ~143 in magnitude. Summing p of them in another order moves
        // the result by at most p ulps of the largest partial sum (p * 143), whatever the
        // cancellation; a product or min/max, by p ulps of the result.
        let scale = a.abs().max(b.abs()).max(p as f64 * 143.0);
        a == b || (a - b).abs() <= 4.0 * p as f64 * f64::EPSILON * scale
    }
}

/// Allreduce (in place and not) and reduce (every root cycling, in place and not) of
/// `n` elements with `op`, against rsmpi's allreduce; also checks that every rank holds
/// bitwise the same allreduce result.
fn check_reduce<T: Sample + zcoll::op::Reducible>(
    world: &SimpleCommunicator,
    comm: &Comm,
    n: usize,
    op: Builtin,
    seed: u64,
) {
    let (me, p) = (world.rank(), world.size());
    let send: Vec<T> = (0..n).map(|i| T::sample(me, i, seed)).collect();
    let mut oracle = vec![T::zeroed(); n];
    if n > 0 {
        world.all_reduce_into(&send[..], &mut oracle[..], op_mpi(op));
    }
    let agree = |got: &[T], what: &str| {
        for (i, (a, b)) in got.iter().zip(&oracle).enumerate() {
            assert!(T::close(*a, *b, p), "{what} {op:?} n={n}: rank {me} element {i}: {a:?} vs rsmpi {b:?}");
        }
    };
    for algo in algorithms() {
        let mut recv = vec![T::zeroed(); n];
        comm.all_reduce_into_with(&send, &mut recv, op, algo)
            .unwrap_or_else(|e| panic!("allreduce {algo}: {e}"));
        agree(&recv, &format!("allreduce {algo}"));
        // Bitwise the same on every rank.
        let sum = recv
            .iter()
            .fold(0u64, |h, x| bytemuck::bytes_of(x).iter().fold(h, |h, &b| h.rotate_left(5) ^ b as u64));
        let mut sums = vec![0u64; p as usize];
        world.all_gather_into(&sum, &mut sums[..]);
        assert!(sums.iter().all(|&s| s == sums[0]), "allreduce {algo}: ranks differ bitwise");
    }
    let mut inplace = send.clone();
    comm.all_reduce_in_place(&mut inplace, op).unwrap();
    agree(&inplace, "allreduce in place");

    let root = (seed % p as u64) as i32;
    for algo in reduce_algorithms() {
        if me == root {
            let mut recv = vec![T::zeroed(); n];
            comm.reduce_with(&send, Some(&mut recv), root, op, algo).unwrap();
            agree(&recv, &format!("reduce {algo}"));
        } else {
            comm.reduce_with(&send, None, root, op, algo).unwrap();
        }
    }
    if me == root {
        let mut buf = send.clone();
        comm.reduce_in_place_root(&mut buf, root, op).unwrap();
        agree(&buf, "reduce in place");
    } else {
        comm.reduce_into(&send, root, op).unwrap();
    }
    assert!(send.iter().enumerate().all(|(i, x)| *x == T::sample(me, i, seed)), "an input changed");
}

/// What `Info::inter_node` must say for `p` ranks in virtual nodes of `ZCOLL_NODE_SIZE`
/// (unset: one node here).
fn expected_inter_node(p: i32) -> InterNode {
    let k = std::env::var("ZCOLL_NODE_SIZE").ok().and_then(|k| k.parse::<i32>().ok()).unwrap_or(p).max(1);
    match (p + k - 1) / k {
        1 => InterNode::OneNode,
        _ if k == 1 => InterNode::DirectMpi,
        // Every node holds k ranks but the last, which holds the rest.
        _ => InterNode::Hierarchical { columns: if p % k == 0 { k } else { p % k } as usize },
    }
}

pub(crate) fn reduce(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    assert_eq!(comm.info().inter_node, expected_inter_node(p), "{}", comm.info());
    let mut seed = 0;
    for n in [0usize, 1, 7, 1000, 4097, 100_003] {
        for op in Builtin::ALL {
            seed += 1;
            check_reduce::<i32>(world, comm, n, op, seed);
            check_reduce::<u64>(world, comm, n, op, seed);
            if matches!(op, Builtin::Sum | Builtin::Prod | Builtin::Min | Builtin::Max) {
                check_reduce::<f64>(world, comm, n, op, seed);
            }
        }
    }
    // Large: 16 MiB of f64 and 8 MiB of i32, summed.
    check_reduce::<f64>(world, comm, 2 << 20, Builtin::Sum, 1000);
    check_reduce::<i32>(world, comm, (2 << 20) + 5, Builtin::Max, 1001);

    // Odd lengths around and above the multi-root threshold (16 KiB), and several MiB.
    for (n, seed) in [(4095usize, 2000), (4099, 2001), (65_537, 2002), ((1 << 20) + 3, 2003)] {
        check_reduce::<i32>(world, comm, n, Builtin::Sum, seed);
    }
    check_reduce::<u64>(world, comm, (3 << 19) + 1, Builtin::BitXor, 2004);

    // A commutative user operator: gathered and folded along the columns (multi-root) or
    // at the leaders; compared with rsmpi's sum.
    let wrapping_sum = UserOp::commutative(|acc: &mut [u64], x: &[u64]| {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = a.wrapping_add(*b);
        }
    });
    for n in [3usize, 5000, 300_001] {
        let send: Vec<u64> = (0..n).map(|i| u64::sample(me, i, 77)).collect();
        let mut oracle = vec![0u64; n];
        world.all_reduce_into(&send[..], &mut oracle[..], SystemOperation::sum());
        for algo in algorithms() {
            let mut recv = vec![0u64; n];
            comm.all_reduce_into_with(&send, &mut recv, &wrapping_sum, algo).unwrap();
            assert!(recv == oracle, "commutative user operator {algo} n={n}");
        }
        let mut inplace = send.clone();
        comm.all_reduce_in_place(&mut inplace, &wrapping_sum).unwrap();
        assert!(inplace == oracle, "commutative user operator in place n={n}");
    }

    // A non-commutative user operator folds in rank order.
    let matmul = UserOp::non_commutative(|acc: &mut [Mat2], x: &[Mat2]| {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = mat_mul(*a, *b);
        }
    });
    assert!(!matmul.commutative());
    for n in [1usize, 33, 5000, 70_000] {
        let send: Vec<Mat2> = (0..n).map(|i| mat_of(me, i)).collect();
        let expect: Vec<Mat2> =
            (0..n).map(|i| (1..p).fold(mat_of(0, i), |acc, r| mat_mul(acc, mat_of(r, i)))).collect();
        for algo in algorithms() {
            let mut recv = vec![Mat2 { m: [0; 4] }; n];
            comm.all_reduce_into_with(&send, &mut recv, &matmul, algo).unwrap();
            assert_eq!(recv, expect, "user operator {algo} n={n}");
        }
        // The reduce to every root, with every algorithm and in place (rank order
        // whichever rank the root is: its own input is not folded first).
        for root in 0..p {
            for algo in reduce_algorithms() {
                let mut recv = vec![Mat2 { m: [0; 4] }; if me == root { n } else { 0 }];
                comm.reduce_with(&send, (me == root).then_some(&mut recv[..]), root, &matmul, algo).unwrap();
                assert!(me != root || recv == expect, "user operator reduce {algo} to {root} n={n}");
            }
            let mut buf = send.clone();
            match me == root {
                true => comm.reduce_in_place_root(&mut buf, root, &matmul).unwrap(),
                false => comm.reduce_into(&send, root, &matmul).unwrap(),
            }
            assert!(me != root || buf == expect, "user operator reduce in place to {root} n={n}");
        }
    }

    ported_from_rsmpi(world, comm);
    written_for_elements(world, comm);
    odd_element_sizes(world, comm);
    narrow_sums(world, comm);
    unsigned_extremes(world, comm);

    // Bad input: the same error on every rank, buffers untouched.
    let send = vec![1.5f64; 100];
    let mut recv = vec![0.0f64; 100];
    // `RootRead` reduces to a root only: an allreduce refuses it on every rank, whatever
    // runs there (a `cico` node runs every algorithm staged; with one rank per node,
    // MPI's allreduce would run). Across nodes, 8 elements are refused after the verdict
    // that travels with them, 100 and 4096 (32 KiB) after the checks of the leaders' and
    // the multi-root paths. The output is not zeros, which a failed call that wrote zeros
    // (what the leaders combine where every node failed) would leave looking untouched.
    for n in [8, 100, 4096] {
        let send = vec![1.5f64; n];
        let mut recv = vec![7.0f64; n];
        let e =
            comm.all_reduce_into_with(&send, &mut recv, Builtin::Sum, ReduceAlgorithm::RootRead).unwrap_err();
        assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}");
        assert!(recv.iter().all(|&x| x == 7.0), "a refused allreduce of {n} wrote its output");
        let mut buf = vec![7.0f64; n];
        let e = comm.all_reduce_in_place(&mut buf, Builtin::Sum).err();
        assert!(e.is_none(), "an allreduce after a refused one: {e:?}");
        assert!(buf.iter().all(|&x| x == 7.0 * p as f64), "the allreduce after a refused one");
    }
    let e = comm.all_reduce_into(&send, &mut recv, Builtin::BitXor).unwrap_err();
    assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}");
    if p > 1 {
        let e = comm
            .all_reduce_into(&send, &mut recv, if me == p - 1 { Builtin::Max } else { Builtin::Sum })
            .unwrap_err();
        // Within a node the check names the operator; across nodes, the operator or the
        // element type (one word of the leaders' claims carries both).
        assert!(
            matches!(e, Error::Mismatch { culprit, what: "operator" | "operator or element type", .. } if culprit == p - 1),
            "{e}"
        );
        // The same size and operator, another element type: f64 on all, u64 on the last.
        let ints = vec![3u64; 100];
        let mut int_out = vec![0u64; 100];
        let e = match me == p - 1 {
            true => comm.all_reduce_into(&ints, &mut int_out, Builtin::Sum),
            false => comm.all_reduce_into(&send, &mut recv, Builtin::Sum),
        }
        .unwrap_err();
        assert!(
            matches!(e, Error::Mismatch { culprit, what: "element type" | "operator or element type", .. } if culprit == p - 1),
            "{e}"
        );
        assert!(int_out.iter().all(|&x| x == 0), "a failed call wrote its output");
        let short = if me == 1 { &send[..99] } else { &send[..] };
        let e = comm.all_reduce_into(short, &mut recv[..short.len()], Builtin::Sum).unwrap_err();
        assert!(matches!(e, Error::LengthMismatch { culprit: 1, .. }), "{e}");
        let e = comm.reduce_into_root(&send, &mut recv, p, Builtin::Sum).unwrap_err();
        assert_eq!(e, Error::InvalidRoot { rank: me, root: p, size: p });
        // A receive buffer of another length, large enough for the multi-root path: an
        // error on every rank (naming the culprit where the check sees it), no hang.
        let big = vec![1u32; 40_000];
        let mut out = vec![0u32; if me == p - 1 { 39_999 } else { 40_000 }];
        let e = comm.all_reduce_into(&big, &mut out, Builtin::Sum).unwrap_err();
        assert!(
            matches!(e, Error::LengthMismatch { culprit, .. } if culprit == p - 1)
                || matches!(e, Error::PeerFailed { .. }),
            "{e}"
        );
        // `reduce_with` has no in-place form: a root passing `None` has no output, a
        // length error on every rank (at a size whose givers wait for the verdict).
        out.fill(0);
        let e = comm
            .reduce_with(
                &big,
                (me != p - 1).then_some(&mut out[..]),
                p - 1,
                Builtin::Sum,
                ReduceAlgorithm::Auto,
            )
            .unwrap_err();
        assert!(
            matches!(e, Error::LengthMismatch { culprit, found: 0, .. } if culprit == p - 1)
                || matches!(e, Error::PeerFailed { .. }),
            "{e}"
        );
        assert!(out.iter().all(|&x| x == 0), "a failed reduce wrote its output");
    }
    assert!(recv.iter().all(|&x| x == 0.0), "a failed call wrote its output");
    comm.barrier().unwrap();
}

/// Elements whose size does not divide the reduction's scratch: 3, 12 and 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Rgb {
    c: [u8; 3],
}

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Vec3 {
    v: [f32; 3],
}

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Point {
    v: [f64; 3],
}

/// User operators on 3-, 12- and 24-byte elements, every algorithm, lengths that end
/// mid-scratch, against the fold in rank order computed here. Each element is an affine
/// map and a tag: `(m, a, t) ∘ (m', a', t') = (m m', a m' + a', t)`, associative (as MPI
/// requires) and not commutative. Small integers, so the floats are exact.
fn odd_element_sizes(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let val = |r: i32, i: usize, j: usize| match j {
        0 => 1 + (r as usize + i) % 2,
        _ => (r as usize * 7 + i * 3 + j) % 5,
    } as u8;
    let rgb = |r: i32, i: usize| Rgb { c: [val(r, i, 0), val(r, i, 1), val(r, i, 2)] };
    let vec3 = |r: i32, i: usize| Vec3 { v: [0, 1, 2].map(|j| val(r, i, j) as f32) };
    let point = |r: i32, i: usize| Point { v: [0, 1, 2].map(|j| val(r, i, j) as f64) };
    let rgb_op = UserOp::non_commutative(|acc: &mut [Rgb], x: &[Rgb]| {
        for (a, b) in acc.iter_mut().zip(x) {
            a.c = [a.c[0].wrapping_mul(b.c[0]), a.c[1].wrapping_mul(b.c[0]).wrapping_add(b.c[1]), a.c[2]];
        }
    });
    let vec3_op = UserOp::non_commutative(|acc: &mut [Vec3], x: &[Vec3]| {
        for (a, b) in acc.iter_mut().zip(x) {
            a.v = [a.v[0] * b.v[0], a.v[1] * b.v[0] + b.v[1], a.v[2]];
        }
    });
    let point_op = UserOp::non_commutative(|acc: &mut [Point], x: &[Point]| {
        for (a, b) in acc.iter_mut().zip(x) {
            a.v = [a.v[0] * b.v[0], a.v[1] * b.v[0] + b.v[1], a.v[2]];
        }
    });
    for n in [1usize, 7, 10_923, 65_467] {
        check_user(comm, me, p, n, &rgb, &rgb_op, "rgb");
        check_user(comm, me, p, n, &vec3, &vec3_op, "[f32; 3]");
        check_user(comm, me, p, n, &point, &point_op, "[f64; 3]");
    }
}

/// Allreduce (apart and in place) and reduce to the last rank of `n` elements made by
/// `make(rank, i)`, with every algorithm, against the fold in rank order.
fn check_user<T: Pod + PartialEq + std::fmt::Debug>(
    comm: &Comm,
    me: i32,
    p: i32,
    n: usize,
    make: &dyn Fn(i32, usize) -> T,
    op: &impl Operator<T>,
    what: &str,
) {
    let send: Vec<T> = (0..n).map(|i| make(me, i)).collect();
    let expect: Vec<T> = (0..n)
        .map(|i| {
            let mut acc = [make(0, i)];
            for r in 1..p {
                op.apply(&mut acc, &[make(r, i)]);
            }
            acc[0]
        })
        .collect();
    for algo in algorithms() {
        let mut recv = vec![T::zeroed(); n];
        comm.all_reduce_into_with(&send, &mut recv, op, algo).unwrap();
        assert!(recv == expect, "allreduce of {what} n={n} {algo}");
        let root = p - 1;
        let mut out = vec![T::zeroed(); n];
        comm.reduce_with(&send, (me == root).then_some(&mut out[..]), root, op, algo).unwrap();
        if me == root {
            assert!(out == expect, "reduce of {what} n={n} {algo}");
        }
    }
    if !algorithms().contains(&ReduceAlgorithm::RootRead) {
        let root = p - 1;
        let mut out = vec![T::zeroed(); n];
        let algo = ReduceAlgorithm::RootRead;
        comm.reduce_with(&send, (me == root).then_some(&mut out[..]), root, op, algo).unwrap();
        assert!(me != root || out == expect, "reduce of {what} n={n} {algo}");
    }
    let mut inplace = send.clone();
    comm.all_reduce_in_place(&mut inplace, op).unwrap();
    assert!(inplace == expect, "allreduce in place of {what} n={n}");
}

/// A non-commutative operator written for rsmpi, `(invec, inoutvec)` with the result in
/// `inoutvec`, ported by renaming `UserOperation` and taking typed slices: zcoll computes
/// what rsmpi computes with the same closure body.
fn ported_from_rsmpi(world: &SimpleCommunicator, comm: &Comm) {
    use mpi::collective::UserOperation as MpiUserOperation;
    use mpi::datatype::{DynBuffer, DynBufferMut};
    let me = world.rank();
    let body = |invec: &[Mat2], inoutvec: &mut [Mat2]| {
        for (a, b) in invec.iter().zip(inoutvec.iter_mut()) {
            *b = mat_mul(*a, *b);
        }
    };
    let theirs = MpiUserOperation::associative(|x: DynBuffer<'_>, y: DynBufferMut<'_>| {
        body(x.downcast().unwrap(), y.downcast().unwrap());
    });
    let ours = zcoll::op::UserOperation::associative(body);
    assert!(!ours.commutative());
    for n in [1usize, 33, 5000] {
        let send: Vec<Mat2> = (0..n).map(|i| mat_of(me, i)).collect();
        let mut want = vec![Mat2 { m: [0; 4] }; n];
        world.all_reduce_into(&send[..], &mut want[..], &theirs);
        for algo in algorithms() {
            let mut got = vec![Mat2 { m: [0; 4] }; n];
            comm.all_reduce_into_with(&send, &mut got, &ours, algo).unwrap();
            assert_eq!(got, want, "the operator ported from rsmpi, {algo}, n={n}");
        }
    }
    // rsmpi's predefined operators go to zcoll unchanged (`SystemOperation: Operator`),
    // each as the built-in of the same name: every algorithm, and the reduce to a root.
    use mpi::collective::SystemOperation as S;
    let p = world.size();
    for (k, op) in [S::sum(), S::product(), S::min(), S::max(), S::bitwise_xor(), S::logical_or()]
        .into_iter()
        .enumerate()
    {
        for n in [1usize, 4099, 70_001] {
            let send: Vec<i64> =
                (0..n).map(|i| (i as i64 * 7 + me as i64 * 13 + k as i64) % 29 - 9).collect();
            let mut want = vec![0i64; n];
            world.all_reduce_into(&send[..], &mut want[..], op);
            for algo in algorithms() {
                let mut got = vec![0i64; n];
                comm.all_reduce_into_with(&send, &mut got, op, algo).unwrap();
                assert_eq!(got, want, "rsmpi's operator {k}, {algo}, n={n}");
            }
            let root = (k as i32) % p;
            let mut got = vec![0i64; if me == root { n } else { 0 }];
            match me == root {
                true => comm.reduce_into_root(&send, &mut got, root, op).unwrap(),
                false => comm.reduce_into(&send, root, op).unwrap(),
            }
            assert!(me != root || got == want, "rsmpi's operator {k} to root {root}, n={n}");
        }
    }
    // Refused where the built-in is: a bitwise operator on floats, on every rank.
    let e = comm.all_reduce_into(&[1.0f64], &mut [0.0], S::bitwise_and()).unwrap_err();
    assert!(matches!(e, zcoll::Error::Unsupported { .. }), "{e}");
}

/// Operators written as users write them, for slices that hold elements: each reads
/// `acc[0]` and `x[0]` before the rest, and counts its calls. zcoll must never call one
/// with empty slices (it used to, to ask whether the operator applies: the first index
/// panicked, so a valid small allreduce failed on every rank, a reduce's root waited for
/// ever for non-roots that never arrived, and across nodes the process aborted). Every
/// algorithm of the allreduce, the reduce at two roots, the scans and the reduce-scatter
/// (a nonblocking call runs the same), against the wrapping sums computed here.
fn written_for_elements(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let op = UserOp::commutative(|acc: &mut [u64], x: &[u64]| {
        acc[0] = acc[0].wrapping_add(x[0]);
        for i in 1..acc.len() {
            acc[i] = acc[i].wrapping_add(x[i]);
        }
    });
    let input = |r: i32, n: usize| -> Vec<u64> { (0..n as u64).map(|i| i * 3 + r as u64 * 1000).collect() };
    let sum_of = |ranks: std::ops::Range<i32>, n: usize| -> Vec<u64> {
        ranks.fold(vec![0u64; n], |acc, r| {
            acc.iter().zip(input(r, n)).map(|(a, b)| a.wrapping_add(b)).collect()
        })
    };
    for n in [1usize, 2, 9, 5000] {
        let send = input(me, n);
        let all = sum_of(0..p, n);
        for algo in algorithms() {
            let mut got = vec![0u64; n];
            comm.all_reduce_into_with(&send, &mut got, &op, algo)
                .unwrap_or_else(|e| panic!("allreduce {algo} of {n} with acc[0]: {e}"));
            assert_eq!(got, all, "allreduce {algo} of {n} with acc[0]");
        }
        for root in [0, p - 1] {
            let mut got = vec![0u64; if me == root { n } else { 0 }];
            match me == root {
                true => comm.reduce_into_root(&send, &mut got, root, &op),
                false => comm.reduce_into(&send, root, &op),
            }
            .unwrap_or_else(|e| panic!("reduce of {n} to {root} with acc[0]: {e}"));
            assert!(me != root || got == all, "reduce of {n} to {root} with acc[0]");
        }
        let mut got = vec![0u64; n];
        comm.scan_into(&send, &mut got, &op).unwrap_or_else(|e| panic!("scan of {n} with acc[0]: {e}"));
        assert_eq!(got, sum_of(0..me + 1, n), "scan of {n} with acc[0]");
        let mut got = vec![5u64; n];
        comm.exclusive_scan_into(&send, &mut got, &op).unwrap_or_else(|e| panic!("exscan of {n}: {e}"));
        assert!(me == 0 || got == sum_of(0..me, n), "exscan of {n} with acc[0]");
        let blocks: Vec<u64> = (0..p).flat_map(|_| send.iter().copied()).collect();
        let mut got = vec![0u64; n];
        comm.reduce_scatter_block_into(&blocks, &mut got, &op)
            .unwrap_or_else(|e| panic!("reduce-scatter of {n} with acc[0]: {e}"));
        assert_eq!(got, all, "reduce-scatter of {n} with acc[0]");
    }
}

/// Sums of 8- and 16-bit integers that overflow wrap around, as C's do, whatever the
/// nodes: the same answer from one node, from one rank per node (where MPI's own allreduce
/// would run) and from the leaders' and multi-root paths. Open MPI 4.1's AVX kernels
/// saturate such sums (`200u8 + 201` is 255 there), so the legs between nodes must not
/// hand them to MPI. Checked against the wrapping sum computed here, for the allreduce,
/// the reduce at every root and the scan; lengths below the carried size, below and above
/// the multi-root threshold (16 KiB).
fn narrow_sums(world: &SimpleCommunicator, comm: &Comm) {
    fn run<T: Pod + PartialEq + std::fmt::Debug + zcoll::op::Reducible>(
        world: &SimpleCommunicator,
        comm: &Comm,
        value: impl Fn(i32, usize) -> T,
        add: impl Fn(T, T) -> T,
    ) {
        let (me, p) = (world.rank(), world.size());
        for n in [1usize, 63, 4097, 20_000] {
            let mine: Vec<T> = (0..n).map(|i| value(me, i)).collect();
            let upto = |last: i32| -> Vec<T> {
                (0..n).map(|i| (1..=last).fold(value(0, i), |a, q| add(a, value(q, i)))).collect()
            };
            let want = upto(p - 1);
            let mut out = vec![T::zeroed(); n];
            comm.all_reduce_into(&mine, &mut out, Builtin::Sum).unwrap();
            assert!(out == want, "allreduce of {n} {}: {:?}", std::any::type_name::<T>(), &out[..2.min(n)]);
            for root in 0..p {
                let mut out = vec![T::zeroed(); n];
                match me == root {
                    true => comm.reduce_into_root(&mine, &mut out, root, Builtin::Sum).unwrap(),
                    false => comm.reduce_into(&mine, root, Builtin::Sum).unwrap(),
                }
                assert!(me != root || out == want, "reduce of {n} {} at {root}", std::any::type_name::<T>());
            }
            let mut out = vec![T::zeroed(); n];
            comm.scan_into(&mine, &mut out, Builtin::Sum).unwrap();
            assert!(out == upto(me), "scan of {n} {}", std::any::type_name::<T>());
        }
    }
    // Every rank's element is near the top of the range: any two overflow.
    run::<u8>(world, comm, |r, i| (200 + r as usize + i % 7) as u8, u8::wrapping_add);
    run::<i8>(world, comm, |r, i| (100 + r + (i % 5) as i32) as i8, i8::wrapping_add);
    run::<u16>(world, comm, |r, i| (60_000 + r as usize * 100 + i % 11) as u16, u16::wrapping_add);
    run::<i16>(world, comm, |r, i| (-32_000 - r - (i % 3) as i32) as i16, i16::wrapping_add);
}

/// The minimum and maximum of unsigned integers above and below the top bit, whatever
/// the nodes: MPICH 4.0 compares unsigned integers as signed (`min(0u8, 252)` is 252
/// there), so the legs between nodes must not hand these to MPI either. Checked against
/// the fold computed here, for the allreduce and the reduce at every root.
fn unsigned_extremes(world: &SimpleCommunicator, comm: &Comm) {
    fn run<T: Pod + PartialEq + Ord + std::fmt::Debug + zcoll::op::Reducible>(
        world: &SimpleCommunicator,
        comm: &Comm,
        value: impl Fn(i32, usize) -> T,
    ) {
        let (me, p) = (world.rank(), world.size());
        for n in [1usize, 63, 4097, 20_000] {
            let mine: Vec<T> = (0..n).map(|i| value(me, i)).collect();
            for op in [Builtin::Min, Builtin::Max] {
                let want: Vec<T> = (0..n)
                    .map(|i| {
                        let all = (0..p).map(|q| value(q, i));
                        if op == Builtin::Min { all.min() } else { all.max() }.unwrap()
                    })
                    .collect();
                let mut out = vec![T::zeroed(); n];
                comm.all_reduce_into(&mine, &mut out, op).unwrap();
                assert!(out == want, "allreduce {op:?} of {n} {}", std::any::type_name::<T>());
                for root in 0..p {
                    let mut out = vec![T::zeroed(); n];
                    match me == root {
                        true => comm.reduce_into_root(&mine, &mut out, root, op).unwrap(),
                        false => comm.reduce_into(&mine, root, op).unwrap(),
                    }
                    assert!(
                        me != root || out == want,
                        "reduce {op:?} of {n} {} at {root}",
                        std::any::type_name::<T>()
                    );
                }
            }
        }
    }
    // Rank 0 holds small values, the others values with the top bit set.
    let top = |r: i32, i: usize| if r == 0 { (i % 3) as u64 } else { u64::MAX - (r as u64) - (i % 5) as u64 };
    run::<u8>(world, comm, |r, i| (top(r, i) & 0xff) as u8);
    run::<u16>(world, comm, |r, i| (top(r, i) & 0xffff) as u16);
    run::<u32>(world, comm, |r, i| top(r, i) as u32);
    run::<u64>(world, comm, top);
}
