//! The shared address space: broadcasts and reductions on buffers from `comm.alloc` and
//! from `ShmAlloc` (this test binary's global allocator), and on exposures, each compared
//! with rsmpi; run with the `heap` and `xpmem` (stand-in library) transports forced, and
//! with neither.

use crate::common::op_mpi;
use crate::common::{pattern, GUARD, GUARD_BYTE};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::{BcastAlgorithm, Comm, Error, Pod, ReduceAlgorithm, TransportKind};

/// The stand-in libxpmem cargo built beside this test binary (a dev-dependency).
pub(crate) fn standin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        let so = exe.parent().expect("target/<profile>/deps").join("libxpmem_standin.so");
        assert!(so.exists(), "{} is missing: cargo builds it as a dev-dependency", so.display());
        so.to_str().expect("a UTF-8 path").to_owned()
    })
}

/// Where a test buffer comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// `comm.alloc`: always in the heap.
    Alloc,
    /// A `Vec`: in the heap from 64 KiB on (`ShmAlloc`), from the system allocator below.
    Vec,
}

/// A buffer of `n` elements plus guard bytes from `source`, filled by `fill`.
fn buffer<T: Pod>(comm: &Comm, source: Source, n: usize, fill: impl Fn(usize) -> T) -> Box<dyn Buf<T>> {
    let extra = GUARD.div_ceil(std::mem::size_of::<T>());
    let mut b: Box<dyn Buf<T>> = match source {
        Source::Alloc => Box::new(comm.alloc::<T>(n + extra).unwrap()),
        Source::Vec => Box::new(vec![T::zeroed(); n + extra]),
    };
    let all = b.all();
    all[..n].iter_mut().enumerate().for_each(|(i, x)| *x = fill(i));
    bytemuck::cast_slice_mut::<T, u8>(&mut all[n..]).fill(GUARD_BYTE);
    b
}

/// A buffer of either source, seen whole (elements and guard).
trait Buf<T> {
    fn all(&mut self) -> &mut [T];
}

impl<T: Pod> Buf<T> for zcoll::ShmBox<T> {
    fn all(&mut self) -> &mut [T] {
        self
    }
}

impl<T: Pod> Buf<T> for Vec<T> {
    fn all(&mut self) -> &mut [T] {
        self
    }
}

fn guard_intact<T: Pod>(b: &mut dyn Buf<T>, n: usize) -> bool {
    bytemuck::cast_slice::<T, u8>(&b.all()[n..]).iter().all(|&x| x == GUARD_BYTE)
}

fn bcast(world: &SimpleCommunicator, comm: &Comm, source: Source, n: usize, root: i32, algo: BcastAlgorithm) {
    let me = world.rank();
    let seed = (n as u64) << 8 | root as u64;
    let fill = |i| if me == root { pattern(seed, i) } else { !pattern(seed, i) };
    let mut b = buffer::<u8>(comm, source, n, fill);
    let mut oracle: Vec<u8> = (0..n).map(fill).collect();
    if n > 0 {
        world.process_at_rank(root).broadcast_into(&mut oracle[..]);
    }
    comm.broadcast_into_with(&mut b.all()[..n], root, algo)
        .unwrap_or_else(|e| panic!("bcast {source:?} n={n} root={root} {algo}: {e}"));
    if let Some(i) = b.all()[..n].iter().zip(&oracle).position(|(a, b)| a != b) {
        panic!("bcast {source:?} n={n} root={root} {algo}: rank {me} differs at byte {i}");
    }
    assert!(guard_intact(&mut *b, n), "bcast {source:?} n={n} {algo}: wrote past the buffer");
}

/// Sample values whose sums, minima and maxima are exact in any order.
fn sample<T: Sample>(rank: i32, i: usize, seed: u64) -> T {
    T::from_i64(((i as i64).wrapping_mul(2654435761) + seed as i64 * 97 + rank as i64 * 40503) % 2001 - 1000)
}

trait Sample: Pod + PartialEq + std::fmt::Debug + zcoll::op::Reducible {
    fn from_i64(v: i64) -> Self;
}

impl Sample for f64 {
    fn from_i64(v: i64) -> Self {
        v as f64
    }
}

impl Sample for i32 {
    fn from_i64(v: i64) -> Self {
        v as i32
    }
}

impl Sample for u64 {
    fn from_i64(v: i64) -> Self {
        (v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// Allreduce (apart and in place) and reduce (apart, every rank's buffers from `source`)
/// of `n` elements, against rsmpi's allreduce.
fn reduce<T: Sample>(
    world: &SimpleCommunicator,
    comm: &Comm,
    source: Source,
    n: usize,
    op: Builtin,
    seed: u64,
) {
    let (me, p) = (world.rank(), world.size());
    let send_vals: Vec<T> = (0..n).map(|i| sample(me, i, seed)).collect();
    let mut oracle = vec![T::zeroed(); n];
    if n > 0 {
        world.all_reduce_into(&send_vals[..], &mut oracle[..], op_mpi(op));
    }
    let what = |w: &str| format!("{w} {op:?} {source:?} n={n} x {} B", std::mem::size_of::<T>());
    for algo in [ReduceAlgorithm::Auto, ReduceAlgorithm::Partitioned] {
        let mut send = buffer::<T>(comm, source, n, |i| send_vals[i]);
        let mut recv = buffer::<T>(comm, source, n, |_| T::zeroed());
        let send_slice: Vec<T> = send.all()[..n].to_vec();
        // The input of `all_reduce_into_with` must be the heap buffer itself.
        let input: &[T] = &send.all()[..n];
        comm.all_reduce_into_with(input, &mut recv.all()[..n], op, algo)
            .unwrap_or_else(|e| panic!("{}: {e}", what("allreduce")));
        assert!(recv.all()[..n] == oracle[..], "{} {algo}: rank {me} differs from rsmpi", what("allreduce"));
        assert!(guard_intact(&mut *recv, n) && send.all()[..n] == send_slice[..], "{}", what("allreduce"));
    }
    let mut inplace = buffer::<T>(comm, source, n, |i| send_vals[i]);
    comm.all_reduce_in_place(&mut inplace.all()[..n], op).unwrap();
    assert!(inplace.all()[..n] == oracle[..], "{} rank {me}", what("allreduce in place"));
    assert!(guard_intact(&mut *inplace, n));

    let root = (seed % p as u64) as i32;
    let mut send = buffer::<T>(comm, source, n, |i| send_vals[i]);
    for algo in [ReduceAlgorithm::Partitioned, ReduceAlgorithm::RootRead] {
        if me == root {
            let mut recv = buffer::<T>(comm, source, n, |_| T::zeroed());
            comm.reduce_with(&send.all()[..n], Some(&mut recv.all()[..n]), root, op, algo).unwrap();
            assert!(recv.all()[..n] == oracle[..], "{} {algo}", what("reduce"));
            assert!(guard_intact(&mut *recv, n));
        } else {
            comm.reduce_with(&send.all()[..n], None, root, op, algo).unwrap();
        }
    }
    // In place at the root (`Auto`: the root's reads of its peers' mapped inputs where
    // `ZCOLL_REDUCE_ALGORITHM` says `root-read`).
    if me == root {
        let mut buf = buffer::<T>(comm, source, n, |i| send_vals[i]);
        comm.reduce_in_place_root(&mut buf.all()[..n], root, op).unwrap();
        assert!(buf.all()[..n] == oracle[..], "{} rank {me}", what("reduce in place"));
        assert!(guard_intact(&mut *buf, n));
    } else {
        comm.reduce_into(&send.all()[..n], root, op).unwrap();
    }
}

/// An exposure used for many collectives, against rsmpi's; then its errors.
fn exposure(world: &SimpleCommunicator, comm: &Comm, source: Source, n: usize) {
    let (me, p) = (world.rank(), world.size());
    let mut b = buffer::<i32>(comm, source, n, |_| 0);
    {
        let mut exposed = comm.expose(&mut b.all()[..n]).unwrap();
        for step in 0..6u64 {
            let root = (step % p as u64) as i32;
            let vals: Vec<i32> = (0..n).map(|i| sample(me, i, step)).collect();
            exposed.copy_from_slice(&vals);
            let mut oracle = vals.clone();
            if n > 0 {
                world.process_at_rank(root).broadcast_into(&mut oracle[..]);
            }
            exposed.broadcast(root).unwrap();
            assert!(exposed[..] == oracle[..], "exposure {source:?} n={n} broadcast step {step}: rank {me}");
            exposed.copy_from_slice(&vals);
            if n > 0 {
                world.all_reduce_into(&vals[..], &mut oracle[..], SystemOperation::sum());
            }
            exposed.all_reduce(Builtin::Sum).unwrap();
            assert!(exposed[..] == oracle[..], "exposure {source:?} n={n} allreduce step {step}: rank {me}");
        }
        exposed.withdraw().unwrap();
    }
    assert!(guard_intact(&mut *b, n), "an exposure wrote past its buffer");
}

fn exposure_errors(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    if p == 1 || comm.info().nodes > 1 {
        return;
    }
    // Exposed lengths differ: refused on every rank.
    let mut buf = vec![0u8; 1000];
    let len = if me == p - 1 { 999 } else { 1000 };
    let e = comm.expose(&mut buf[..len]).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { culprit, .. } if culprit == p - 1), "{e}");
    // Ranks use different exposures: the last rank its second, the others their first.
    let (mut a, mut b) = (vec![1u8; 100_000], vec![2u8; 100_000]);
    let mut first = comm.expose(&mut a).unwrap();
    let mut second = comm.expose(&mut b).unwrap();
    let e = if me == p - 1 { second.broadcast(0) } else { first.broadcast(0) }.unwrap_err();
    assert!(matches!(e, Error::Mismatch { what: "exposure", culprit, .. } if culprit == p - 1), "{e}");
    // A plain collective against an exposure's: refused too.
    let mut c = vec![0u8; 100_000];
    let e = if me == 0 { comm.broadcast_into(&mut c, 0) } else { first.broadcast(0) }.unwrap_err();
    assert!(matches!(e, Error::Mismatch { .. }), "{e}");
    // Still usable, and withdrawn in the same order on every rank.
    first.broadcast(0).unwrap();
    second.broadcast(p - 1).unwrap();
    second.withdraw().unwrap();
    first.withdraw().unwrap();
    assert!(a.iter().all(|&x| x == 1) && b.iter().all(|&x| x == 2));
}

/// A reduce to a root past 3 MiB (where two ranks on mapped buffers split the folding at
/// run time) with a non-commutative operator, "the right operand wins": folded in rank
/// order, the root ends with the last rank's input, in place and not.
fn right_wins(world: &SimpleCommunicator, comm: &Comm, source: Source) {
    let (me, p) = (world.rank(), world.size());
    let n = (3 << 20) / 8 + 1001;
    let value = |r: i32, i: usize| (r as u64) << 40 | i as u64;
    let op = zcoll::op::UserOp::non_commutative(|acc: &mut [u64], x: &[u64]| acc.copy_from_slice(x));
    let root = 0;
    let mut send = buffer::<u64>(comm, source, n, |i| value(me, i));
    let oracle: Vec<u64> = (0..n).map(|i| value(p - 1, i)).collect();
    if me == root {
        let mut recv = buffer::<u64>(comm, source, n, |_| 0);
        comm.reduce_into_root(&send.all()[..n], &mut recv.all()[..n], root, &op).unwrap();
        assert!(recv.all()[..n] == oracle[..], "right-wins reduce {source:?}: the root's result");
        assert!(guard_intact(&mut *recv, n));
        comm.reduce_in_place_root(&mut send.all()[..n], root, &op).unwrap();
        assert!(send.all()[..n] == oracle[..], "right-wins reduce in place {source:?}: the root's result");
    } else {
        comm.reduce_into(&send.all()[..n], root, &op).unwrap();
        comm.reduce_into(&send.all()[..n], root, &op).unwrap();
    }
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    let info = comm.info();
    let before = comm.traffic();
    for source in [Source::Alloc, Source::Vec] {
        for n in [0usize, 1, 4095, 65_536 + 3, (1 << 20) + 5, 16 << 20] {
            let roots = if n >= 1 << 20 { vec![p - 1] } else { vec![0, p - 1] };
            for root in roots {
                for algo in [
                    BcastAlgorithm::Auto,
                    BcastAlgorithm::DirectRead,
                    BcastAlgorithm::DirectWrite,
                    BcastAlgorithm::KnomialRead { k: 2 },
                    BcastAlgorithm::ScatterAllgather,
                    BcastAlgorithm::Pipelined { chunk: 64 * 1024 },
                    BcastAlgorithm::ReadWrite,
                ] {
                    if n >= 16 << 20 && !matches!(algo, BcastAlgorithm::Auto | BcastAlgorithm::DirectRead) {
                        continue;
                    }
                    bcast(world, comm, source, n, root, algo);
                }
            }
        }
        let mut seed = 0;
        for n in [0usize, 1, 1000, 100_003] {
            seed += 1;
            reduce::<f64>(world, comm, source, n, Builtin::Sum, seed);
            reduce::<i32>(world, comm, source, n, Builtin::Prod, seed);
            reduce::<u64>(world, comm, source, n, Builtin::BitXor, seed);
            reduce::<f64>(world, comm, source, n, Builtin::Min, seed);
        }
        // 16 MiB of f64, summed.
        reduce::<f64>(world, comm, source, 2 << 20, Builtin::Sum, 99);
        right_wins(world, comm, source);
        for n in [0usize, 5, 300_001] {
            exposure(world, comm, source, n);
        }
    }
    exposure_errors(world, comm);
    every_collective_through_the_heap(world, comm);
    large_blocks_through_the_heap(world, comm);
    staged_beside_auto(world, comm);
    // The buffers took the load/store path where the node has one.
    let moved = comm.traffic();
    let (heap, xpmem) = (moved.heap - before.heap, moved.xpmem - before.xpmem);
    let local = info.node_ranks.len() > 1;
    match info.transport {
        TransportKind::Heap if local => assert!(heap > 16 << 20 && xpmem == 0, "{moved:?}"),
        TransportKind::Xpmem if local => assert!(xpmem > 16 << 20 && heap == 0, "{moved:?}"),
        TransportKind::Cma if local && info.heap => assert!(heap > 16 << 20, "{moved:?}"),
        _ => assert_eq!((heap, xpmem), (0, 0), "{moved:?}"),
    }
    comm.barrier().unwrap();
}

/// One rank names `Staged` while the others leave the choice to `Auto`, with heap blocks of
/// one phase and beyond. On one node, where `Auto` resolves to the staged path the ranks
/// made the same call; where it picks the staged path of a reduce, gather, alltoall or
/// broadcast that may still switch to loads, it publishes its buffers (a shared round)
/// while the named `Staged` is a private one. Either way every rank must reach the same outcome, with no hang: the
/// right result, or the same `Mismatch` everywhere and no byte written (for a giver that
/// left a small call before its verdict: `Ok`, then `PreviousFailed` at its next call, as
/// on every rank). Across nodes the ranks compare what they asked for, so the mix is a
/// `Mismatch` before any byte moves.
fn staged_beside_auto(world: &SimpleCommunicator, comm: &Comm) {
    use mpi::collective::CommunicatorCollectives;
    use zcoll::{AlltoallAlgorithm, GatherAlgorithm};
    let (me, p) = (world.rank(), world.size());
    let (pu, last) = (p as usize, p - 1);
    if pu < 2 {
        return;
    }
    let root = 0;
    // Every rank's outcome alike: `Ok`, or the same mismatch naming the last rank (across
    // nodes too, where the ranks compare what they asked for before any byte moves). A
    // rank that only gives may leave a small call before its verdict: it returns `Ok` and
    // learns of the mismatch at its next call, which then fails on every rank
    // (`PreviousFailed`); the barrier after each call is that next call.
    let agreed = |what: &str, e: zcoll::Result<()>| -> bool {
        let next = comm.barrier();
        let mine = match (&e, &next) {
            (Ok(()), Ok(())) => 0u8,
            (Ok(()), Err(Error::PreviousFailed { .. })) => 1,
            (Err(Error::Mismatch { culprit, what: "algorithm", .. }), _) if *culprit == last => 1,
            _ => panic!("{what} on rank {me}: {e:?}, then {next:?}"),
        };
        if next.is_err() {
            comm.barrier().unwrap_or_else(|e| panic!("{what} on rank {me}: the call after: {e}"));
        }
        let mut all = vec![0u8; pu];
        world.all_gather_into(&mine, &mut all[..]);
        assert!(all.iter().all(|&x| x == mine), "{what}: outcomes {all:?}");
        mine == 0
    };
    for n in [1000usize, 64 * 1024, 300_000] {
        let mut send = comm.alloc::<u32>(pu * n).expect("comm.alloc");
        send.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i as u32).wrapping_mul(2_654_435_761) ^ me as u32);
        let mut recv = comm.alloc::<u32>(pu * n).expect("comm.alloc");
        let named = me == last;

        recv.fill(7);
        let algo = if named { ReduceAlgorithm::Staged } else { ReduceAlgorithm::Auto };
        let out = if me == root { Some(&mut recv[..n]) } else { None };
        let e = comm.reduce_with(&send[..n], out, root, Builtin::Sum, algo);
        let mut oracle = vec![0u32; n];
        let at = world.process_at_rank(root);
        match me == root {
            true => at.reduce_into_root(&send[..n], &mut oracle[..], SystemOperation::sum()),
            false => at.reduce_into(&send[..n], SystemOperation::sum()),
        }
        match agreed(&format!("reduce of {n} u32"), e) {
            true => assert!(me != root || recv[..n] == oracle[..], "reduce of {n} u32: differs from rsmpi's"),
            false => assert!(recv.iter().all(|&x| x == 7), "a failed reduce wrote on rank {me}"),
        }

        recv.fill(7);
        let algo = if named { GatherAlgorithm::Staged } else { GatherAlgorithm::Auto };
        let e = match me == root {
            true => comm.gather_into_root_with(&send[..n], &mut recv[..], root, algo),
            false => comm.gather_into_with(&send[..n], root, algo),
        };
        let mut oracle = vec![0u32; pu * n];
        match me == root {
            true => at.gather_into_root(&send[..n], &mut oracle[..]),
            false => at.gather_into(&send[..n]),
        }
        match agreed(&format!("gather of {n} u32"), e) {
            true => assert!(me != root || recv[..] == oracle[..], "gather of {n} u32: differs from rsmpi's"),
            false => assert!(recv.iter().all(|&x| x == 7), "a failed gather wrote on rank {me}"),
        }

        recv.fill(7);
        let algo = if named { AlltoallAlgorithm::Staged } else { AlltoallAlgorithm::Auto };
        let e = comm.all_to_all_into_with(&send[..], &mut recv[..], algo);
        world.all_to_all_into(&send[..], &mut oracle[..]);
        match agreed(&format!("alltoall of {n} u32 per peer"), e) {
            true => assert!(recv[..] == oracle[..], "alltoall of {n} u32: differs from rsmpi's"),
            false => assert!(recv.iter().all(|&x| x == 7), "a failed alltoall wrote on rank {me}"),
        }
        // The communicator still works after them.
        let mut sum = [me as u64];
        comm.all_reduce_in_place(&mut sum, Builtin::Sum).unwrap();
        assert_eq!(sum[0], (pu * (pu - 1) / 2) as u64);
    }
    // A broadcast of 4000 bytes (one phase), 64 KiB (which `Auto` stages at 2 ranks, and
    // may still read in place from the root's heap) and 156 KiB, beside a rank that names
    // `Staged`.
    for n in [1000usize, 16 * 1024, 40_000] {
        let val = |i: usize| (i as u32).wrapping_mul(2_654_435_761) ^ 0x5a5a;
        let mut buf = comm.alloc::<u32>(n).expect("comm.alloc");
        match me == root {
            true => buf.iter_mut().enumerate().for_each(|(i, x)| *x = val(i)),
            false => buf.fill(7),
        }
        let algo = if me == last { BcastAlgorithm::Staged } else { BcastAlgorithm::Auto };
        let e = comm.broadcast_into_with(&mut buf[..], root, algo);
        match agreed(&format!("bcast of {n} u32"), e) {
            true => {
                assert!(buf.iter().enumerate().all(|(i, &x)| x == val(i)), "bcast of {n} u32 on rank {me}")
            }
            false => assert!(me == root || buf.iter().all(|&x| x == 7), "a failed bcast wrote on rank {me}"),
        }
    }
}

/// Forcing `xpmem` where the library is missing is the same error on every rank, naming
/// the library; the default falls back to `cma` and says why.
pub(crate) fn xpmem_missing(world: &SimpleCommunicator) {
    let e = Comm::new(world).unwrap_err();
    assert!(matches!(&e, Error::Unsupported { rank, .. } if *rank == world.rank()), "{e}");
    assert!(e.to_string().contains("ZCOLL_TRANSPORT=xpmem, but xpmem: libxpmem.so.0 not found"), "{e}");
    std::env::remove_var("ZCOLL_TRANSPORT");
    let comm = Comm::new(world).unwrap();
    assert_eq!(comm.info().transport, TransportKind::Cma, "{}", comm.info());
    assert!(comm.info().reason.contains("xpmem: libxpmem.so.0 not found"), "{}", comm.info());
    bcast(world, &comm, Source::Alloc, 100_000, 0, BcastAlgorithm::Auto);
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// Every collective, with every algorithm, on buffers from `comm.alloc`, checked against
/// values computed here; then the traffic: on one node whose ranks reach each other's
/// heap (or XPMEM), every single copy took loads and stores, none took CMA.
/// Allgather and alltoall of heap blocks past the size from which the copies stream
/// (2 MiB and 12 bytes, so that the streaming loop has a head and a tail), against
/// rsmpi's own collectives on the same data.
fn large_blocks_through_the_heap(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank() as usize, world.size() as usize);
    let b = (2 << 20) / 4 + 3;
    let val = |r: usize, i: usize| (r as u32) << 26 ^ (i as u32).wrapping_mul(2_654_435_761);
    let mut send = comm.alloc::<u32>(p * b).expect("comm.alloc");
    send.iter_mut().enumerate().for_each(|(i, x)| *x = val(me, i));
    let mut recv = comm.alloc::<u32>(p * b).expect("comm.alloc");
    let mut oracle = vec![0u32; p * b];
    comm.all_gather_into(&send[..b], &mut recv[..]).expect("allgather of large heap blocks");
    world.all_gather_into(&send[..b], &mut oracle[..]);
    assert!(recv[..] == oracle[..], "allgather of large heap blocks differs from MPI's");
    assert!((0..p * b).all(|i| recv[i] == val(i / b, i % b)), "allgather of large heap blocks");
    recv.fill(0);
    comm.all_to_all_into(&send[..], &mut recv[..]).expect("alltoall of large heap blocks");
    world.all_to_all_into(&send[..], &mut oracle[..]);
    assert!(recv[..] == oracle[..], "alltoall of large heap blocks differs from MPI's");
    assert!((0..p * b).all(|i| recv[i] == val(i / b, me * b + i % b)), "alltoall of large heap blocks");
}

fn every_collective_through_the_heap(world: &SimpleCommunicator, comm: &Comm) {
    use zcoll::{
        AllgatherAlgorithm, AllgathervAlgorithm, AlltoallAlgorithm, AlltoallvAlgorithm, GatherAlgorithm,
        ScatterAlgorithm,
    };
    let (me, p) = (world.rank(), world.size());
    let (pu, meu) = (p as usize, me as usize);
    let b = 20_000usize;
    let val = |r: usize, i: usize| (r as u32) << 24 | i as u32;
    let alloc = |n: usize| comm.alloc::<u32>(n).expect("comm.alloc");
    let filled = |n: usize, f: &dyn Fn(usize) -> u32| {
        let mut buf = alloc(n);
        for (i, x) in buf.iter_mut().enumerate() {
            *x = f(i);
        }
        buf
    };
    let info = comm.info();
    let one_node = info.nodes == 1 && pu > 1;
    let mapped = matches!(info.transport, TransportKind::Heap | TransportKind::Xpmem)
        || (info.transport == TransportKind::Cma && info.heap);
    let check_traffic = |what: &str, before: zcoll::Traffic| {
        let t = comm.traffic();
        let (cma, mapped_bytes) = (t.cma - before.cma, t.heap + t.xpmem - before.heap - before.xpmem);
        if one_node && mapped {
            assert!(
                cma == 0 && mapped_bytes > 0,
                "{what}: {mapped_bytes} B by loads and stores, {cma} B by CMA"
            );
        }
        // Across nodes too, the node legs copy the leaders' scratch buffers, which are in
        // the shared heap as well (a node of one rank copies nothing).
        if info.nodes > 1 && mapped {
            assert!(cma == 0, "{what}: {cma} B by CMA across nodes");
        }
    };
    // Variable counts that both sides derive alike: q sends count(q, r) to r.
    let count = |q: usize, r: usize| b + (q + 2 * r) % 3 * 5;
    let prefix =
        |c: &[i32]| c.iter().scan(0, |s, &x| Some(std::mem::replace(s, *s + x))).collect::<Vec<i32>>();

    let before = comm.traffic();
    for algo in std::iter::once(BcastAlgorithm::Auto).chain(BcastAlgorithm::ALL) {
        let mut buf = filled(pu * b, &|i| if me == 0 { val(0, i) } else { 0 });
        comm.broadcast_into_with(&mut buf, 0, algo).unwrap_or_else(|e| panic!("bcast {algo}: {e}"));
        assert!(buf.iter().enumerate().all(|(i, &x)| x == val(0, i)), "bcast {algo}");
    }
    check_traffic("bcast", before);

    let before = comm.traffic();
    for algo in std::iter::once(ScatterAlgorithm::Auto).chain(ScatterAlgorithm::ALL) {
        let send = filled(pu * b, &|i| val(0, i));
        let mut recv = alloc(b);
        match me {
            0 => comm.scatter_into_root_with(&send, &mut recv, 0, algo),
            _ => comm.scatter_into_with(&mut recv, 0, algo),
        }
        .unwrap_or_else(|e| panic!("scatter {algo}: {e}"));
        assert!(recv.iter().enumerate().all(|(i, &x)| x == val(0, meu * b + i)), "scatter {algo}");
    }
    check_traffic("scatter", before);

    let before = comm.traffic();
    for algo in std::iter::once(GatherAlgorithm::Auto).chain(GatherAlgorithm::ALL) {
        let send = filled(b, &|i| val(meu, i));
        let mut recv = alloc(pu * b);
        let root = p - 1;
        match me == root {
            true => comm.gather_into_root_with(&send, &mut recv, root, algo),
            false => comm.gather_into_with(&send, root, algo),
        }
        .unwrap_or_else(|e| panic!("gather {algo}: {e}"));
        if me == root {
            assert!(recv.iter().enumerate().all(|(i, &x)| x == val(i / b, i % b)), "gather {algo}");
        }
    }
    check_traffic("gather", before);

    let before = comm.traffic();
    for algo in std::iter::once(AllgatherAlgorithm::Auto).chain(AllgatherAlgorithm::ALL) {
        let send = filled(b, &|i| val(meu, i));
        let mut recv = alloc(pu * b);
        comm.all_gather_into_with(&send, &mut recv, algo).unwrap_or_else(|e| panic!("allgather {algo}: {e}"));
        assert!(recv.iter().enumerate().all(|(i, &x)| x == val(i / b, i % b)), "allgather {algo}");
    }
    check_traffic("allgather", before);

    let before = comm.traffic();
    for algo in std::iter::once(AlltoallAlgorithm::Auto).chain(AlltoallAlgorithm::ALL) {
        let send = filled(pu * b, &|i| val(meu, i));
        let mut recv = alloc(pu * b);
        comm.all_to_all_into_with(&send, &mut recv, algo).unwrap_or_else(|e| panic!("alltoall {algo}: {e}"));
        assert!(recv.iter().enumerate().all(|(i, &x)| x == val(i / b, meu * b + i % b)), "alltoall {algo}");
    }
    check_traffic("alltoall", before);

    // Scatterv from 0 and gatherv to p - 1, rank r's block count(0, r) long.
    let counts: Vec<i32> = (0..pu).map(|r| count(0, r) as i32).collect();
    let displs = prefix(&counts);
    let total = counts.iter().sum::<i32>() as usize;
    let mine = counts[meu] as usize;
    let before = comm.traffic();
    for algo in std::iter::once(ScatterAlgorithm::Auto).chain(ScatterAlgorithm::ALL) {
        let send = filled(total, &|i| val(0, i));
        let mut recv = alloc(mine);
        match me {
            0 => comm.scatter_varcount_into_root_with(&send, &counts, &displs, &mut recv, 0, algo),
            _ => comm.scatter_varcount_into_with(&mut recv, 0, algo),
        }
        .unwrap_or_else(|e| panic!("scatterv {algo}: {e}"));
        let at = displs[meu] as usize;
        assert!(recv.iter().enumerate().all(|(i, &x)| x == val(0, at + i)), "scatterv {algo}");
    }
    check_traffic("scatterv", before);

    let before = comm.traffic();
    for algo in std::iter::once(GatherAlgorithm::Auto).chain(GatherAlgorithm::ALL) {
        let send = filled(mine, &|i| val(meu, i));
        let mut recv = alloc(total);
        let root = p - 1;
        match me == root {
            true => comm.gather_varcount_into_root_with(&send, &mut recv, &counts, &displs, root, algo),
            false => comm.gather_varcount_into_with(&send, root, algo),
        }
        .unwrap_or_else(|e| panic!("gatherv {algo}: {e}"));
        if me == root {
            for r in 0..pu {
                let at = displs[r] as usize;
                let got = &recv[at..at + counts[r] as usize];
                assert!(got.iter().enumerate().all(|(i, &x)| x == val(r, i)), "gatherv {algo}");
            }
        }
    }
    check_traffic("gatherv", before);

    let before = comm.traffic();
    for algo in std::iter::once(AllgathervAlgorithm::Auto).chain(AllgathervAlgorithm::ALL) {
        let send = filled(mine, &|i| val(meu, i));
        let mut recv = alloc(total);
        comm.all_gather_varcount_into_with(&send, &mut recv, &counts, &displs, algo)
            .unwrap_or_else(|e| panic!("allgatherv {algo}: {e}"));
        for r in 0..pu {
            let at = displs[r] as usize;
            let got = &recv[at..at + counts[r] as usize];
            assert!(got.iter().enumerate().all(|(i, &x)| x == val(r, i)), "allgatherv {algo}");
        }
    }
    check_traffic("allgatherv", before);

    let send_counts: Vec<i32> = (0..pu).map(|r| count(meu, r) as i32).collect();
    let recv_counts: Vec<i32> = (0..pu).map(|q| count(q, meu) as i32).collect();
    let (send_displs, recv_displs) = (prefix(&send_counts), prefix(&recv_counts));
    let before = comm.traffic();
    for algo in std::iter::once(AlltoallvAlgorithm::Auto).chain(AlltoallvAlgorithm::ALL) {
        let send = filled(send_counts.iter().sum::<i32>() as usize, &|i| val(meu, i));
        let mut recv = alloc(recv_counts.iter().sum::<i32>() as usize);
        comm.all_to_all_varcount_into_with(
            &send,
            &send_counts,
            &send_displs,
            &mut recv,
            &recv_counts,
            &recv_displs,
            algo,
        )
        .unwrap_or_else(|e| panic!("alltoallv {algo}: {e}"));
        for q in 0..pu {
            // q's block for us starts where q's send displacement for us points.
            let from = (0..meu).map(|r| count(q, r)).sum::<usize>();
            let at = recv_displs[q] as usize;
            let got = &recv[at..at + recv_counts[q] as usize];
            assert!(got.iter().enumerate().all(|(i, &x)| x == val(q, from + i)), "alltoallv {algo}");
        }
    }
    check_traffic("alltoallv", before);

    let before = comm.traffic();
    let want: Vec<u32> = (0..pu * b).map(|i| (0..pu).fold(0u32, |s, r| s.wrapping_add(val(r, i)))).collect();
    for algo in [ReduceAlgorithm::Auto, ReduceAlgorithm::Partitioned] {
        let send = filled(pu * b, &|i| val(meu, i));
        let mut recv = alloc(pu * b);
        comm.all_reduce_into_with(&send, &mut recv, Builtin::Sum, algo)
            .unwrap_or_else(|e| panic!("allreduce {algo}: {e}"));
        assert!(recv[..] == want[..], "allreduce {algo}");
        let mut out = alloc(pu * b);
        comm.reduce_with(&send, (me == 0).then_some(&mut out[..]), 0, Builtin::Sum, algo)
            .unwrap_or_else(|e| panic!("reduce {algo}: {e}"));
        assert!(me != 0 || out[..] == want[..], "reduce {algo}");
    }
    // The root's reads of mapped inputs: loads, no CMA.
    let send = filled(pu * b, &|i| val(meu, i));
    let mut out = alloc(pu * b);
    let algo = ReduceAlgorithm::RootRead;
    comm.reduce_with(&send, (me == 0).then_some(&mut out[..]), 0, Builtin::Sum, algo)
        .unwrap_or_else(|e| panic!("reduce {algo}: {e}"));
    assert!(me != 0 || out[..] == want[..], "reduce {algo}");
    check_traffic("reduce", before);
}

/// `Auto`'s gather and gatherv of large blocks settle what the model chose before the
/// arrival once they know where the blocks are. In the shared heap (or with XPMEM) they
/// move their bytes by the root's loads: no other rank copies a byte, where a parallel
/// write has every leaf store its block into the root's mapping and the staged path copies
/// every byte twice; the root copies every other block itself, by loads (stores into a
/// peer's mapping cost several times what loads of it cost). In `Vec`s, which cross with
/// CMA, they take the model's choice with a CMA write priced as such: with the built-in
/// parameters, the staging areas (no single copy at all). The data are compared with
/// rsmpi's gather and gatherv; the same calls with the writes asked for by name show that
/// the traffic tells them apart.
pub(crate) fn gather_settled(world: &SimpleCommunicator, comm: &Comm) {
    use mpi::datatype::PartitionMut as MpiPartitionMut;
    use zcoll::GatherAlgorithm;
    let (me, p) = (world.rank(), world.size());
    let (meu, pu) = (me as usize, p as usize);
    let info = comm.info();
    assert!(info.nodes == 1 && pu > 1, "{info}");
    let mapped = matches!(info.transport, TransportKind::Heap | TransportKind::Xpmem);
    assert!(
        mapped || info.transport == TransportKind::Cma,
        "this job forces a single-copy transport: {info}"
    );
    // Blocks of the shared heap where peers map them, else `Vec`s.
    let buf = |n: usize| -> Box<dyn std::ops::DerefMut<Target = [u32]>> {
        match mapped {
            true => Box::new(comm.alloc::<u32>(n).expect("comm.alloc")),
            false => Box::new(vec![0u32; n]),
        }
    };
    // What `Auto` has the root copy of the others' `bytes`, and where: (CMA, mapped).
    let by_root = |bytes: u64| if mapped { (0, bytes) } else { (0, 0) };
    // What a leaf copies of its own `bytes` with the writes asked for by name.
    let written = |bytes: u64| if mapped { (0, bytes) } else { (bytes, 0) };
    let root = p - 1;
    let at = world.process_at_rank(root);
    let val = |r: usize, i: usize| (r as u32) << 24 ^ (i as u32).wrapping_mul(2_654_435_761);
    let moved = |before: zcoll::Traffic| {
        let t = comm.traffic();
        (t.cma - before.cma, t.heap + t.xpmem - before.heap - before.xpmem)
    };
    // Blocks of 512 KiB and 1 MiB: far above the staged sizes, where the model picks a
    // write. `Auto` settles it to the root's reads, except from 1 MiB into a root's buffer
    // in its shared heap (every mapped job here: its buffers come from `comm.alloc`), which
    // the others write with stores.
    for n in [128 * 1024, 256 * 1024] {
        let block = 4 * n as u64;
        let heap_write = mapped && block >= 1 << 20;
        let mut send = buf(n);
        for (i, x) in send.iter_mut().enumerate() {
            *x = val(meu, i);
        }
        let mut oracle = vec![0u32; if me == root { pu * n } else { 0 }];
        match me == root {
            true => at.gather_into_root(&send[..], &mut oracle[..]),
            false => at.gather_into(&send[..]),
        }
        for algo in [GatherAlgorithm::Auto, GatherAlgorithm::ParallelWrite] {
            let mut recv = buf(if me == root { pu * n } else { 0 });
            recv.fill(0);
            let before = comm.traffic();
            match me == root {
                true => comm.gather_into_root_with(&send, &mut recv, root, algo),
                false => comm.gather_into_with(&send, root, algo),
            }
            .unwrap_or_else(|e| panic!("gather {algo} of {block} B: {e}"));
            let (cma, loaded) = moved(before);
            if me == root {
                assert!(recv[..] == oracle[..], "gather {algo} of {block} B: differs from rsmpi's");
            }
            let auto = algo == GatherAlgorithm::Auto;
            let want = match (me == root, auto && !heap_write) {
                (true, true) => by_root((pu as u64 - 1) * block),
                (true, false) | (false, true) => (0, 0),
                (false, false) => written(block),
            };
            assert_eq!((cma, loaded), want, "gather {algo} of {block} B on rank {me}: (CMA, mapped) bytes");
        }
    }
    let n = 256 * 1024;

    // Gatherv: rank r gives n + 17 r elements, packed in reverse rank order.
    let counts: Vec<i32> = (0..pu).map(|r| (n + 17 * r) as i32).collect();
    let mut displs = vec![0i32; pu];
    let mut next = 0;
    for r in (0..pu).rev() {
        displs[r] = next;
        next += counts[r];
    }
    let total = next as usize;
    let mine = counts[meu] as usize;
    let mut send = buf(mine);
    for (i, x) in send.iter_mut().enumerate() {
        *x = val(meu, i);
    }
    let mut oracle = vec![0u32; if me == root { total } else { 0 }];
    match me == root {
        true => at.gather_varcount_into_root(
            &send[..],
            &mut MpiPartitionMut::new(&mut oracle[..], &counts[..], &displs[..]),
        ),
        false => at.gather_varcount_into(&send[..]),
    }
    for algo in [GatherAlgorithm::Auto, GatherAlgorithm::ParallelWrite] {
        let mut recv = buf(if me == root { total } else { 0 });
        recv.fill(0);
        let before = comm.traffic();
        match me == root {
            true => comm.gather_varcount_into_root_with(&send, &mut recv, &counts, &displs, root, algo),
            false => comm.gather_varcount_into_with(&send, root, algo),
        }
        .unwrap_or_else(|e| panic!("gatherv {algo}: {e}"));
        let (cma, loaded) = moved(before);
        if me == root {
            assert!(recv[..] == oracle[..], "gatherv {algo}: differs from rsmpi's");
        }
        let others = (0..pu).filter(|&r| r != root as usize).map(|r| 4 * counts[r] as u64).sum::<u64>();
        let want = match (algo, me == root) {
            (GatherAlgorithm::Auto, true) => by_root(others),
            (_, true) | (GatherAlgorithm::Auto, false) => (0, 0),
            (_, false) => written(4 * mine as u64),
        };
        assert_eq!((cma, loaded), want, "gatherv {algo} on rank {me}: (CMA, mapped) bytes");
    }
    comm.barrier().unwrap();
}
