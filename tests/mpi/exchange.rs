//! Allgather and alltoall: every algorithm, at several block sizes and element types, in
//! place and not, compared with rsmpi's own `all_gather_into` / `all_to_all_into`; and
//! every bad call, which must be the same `Err` on every rank with every buffer untouched.

use crate::common::{pattern, same, Guarded};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::{AllgatherAlgorithm, AlltoallAlgorithm, Comm, Error, Pod, TransportKind};

/// A `#[repr(C)]` record of 32 bytes, as users write them.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
struct Cell {
    value: [f64; 3],
    id: u64,
}

/// Runs scenario `name` (`exchange-allgather`, `exchange-alltoall`, `exchange-errors`,
/// `exchange-env`).
pub(crate) fn run(name: &str, world: &SimpleCommunicator, comm: &Comm) {
    match name {
        "exchange-allgather" => allgather(world, comm),
        "exchange-alltoall" => alltoall(world, comm),
        "exchange-errors" => errors(world, comm),
        "exchange-env" => env(world, comm),
        other => panic!("unknown scenario {other}"),
    }
}

/// The allgather algorithms to run: all of them, and the ring with every other `j` worth
/// trying (the smallest `j > 1` coprime with `p`, and `p - 1`); across nodes, where the
/// two-level composition moves the data whatever the algorithm, `Auto` and one other.
fn allgather_algorithms(comm: &Comm) -> Vec<AllgatherAlgorithm> {
    let p = comm.size() as u32;
    if comm.info().nodes > 1 {
        return vec![AllgatherAlgorithm::Auto, AllgatherAlgorithm::Bruck];
    }
    let gcd = |mut a: u32, mut b: u32| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut all: Vec<_> = std::iter::once(AllgatherAlgorithm::Auto).chain(AllgatherAlgorithm::ALL).collect();
    let mut js: Vec<u32> = (2..p).filter(|&j| gcd(p, j) == 1).take(1).collect();
    if p > 2 {
        js.push(p - 1);
    }
    js.dedup();
    all.extend(js.into_iter().map(AllgatherAlgorithm::RingNeighbor));
    all
}

fn alltoall_algorithms(comm: &Comm) -> Vec<AlltoallAlgorithm> {
    if comm.info().nodes > 1 {
        return vec![AlltoallAlgorithm::Auto, AlltoallAlgorithm::Pairwise];
    }
    std::iter::once(AlltoallAlgorithm::Auto).chain(AlltoallAlgorithm::ALL).collect()
}

/// One allgather or alltoall of `n` elements per block, against rsmpi's, with the
/// patterns of `seed`.
#[derive(Clone, Copy)]
struct Exchange<'a> {
    world: &'a SimpleCommunicator,
    comm: &'a Comm,
    n: usize,
    seed: u64,
}

impl Exchange<'_> {
    /// This rank, the number of ranks, and the pattern of this rank's send buffer.
    fn mine(&self) -> (usize, usize, impl Fn(usize) -> u8) {
        let (me, p, seed) = (self.world.rank() as usize, self.world.size() as usize, self.seed);
        (me, p, move |i: usize| pattern(seed + me as u64, i))
    }

    /// One allgather, in place or not.
    fn allgather<T: Pod>(&self, algo: AllgatherAlgorithm, in_place: bool) {
        let Exchange { world, comm, n, seed } = *self;
        let (me, p, mine) = self.mine();
        let size = std::mem::size_of::<T>();
        let send = Guarded::<T>::new(n, &mine);
        // The receive buffer starts as garbage, except our block when in place.
        let start = |i: usize| {
            if in_place && i / (n * size) == me {
                mine(i % (n * size))
            } else {
                !pattern(seed, i)
            }
        };
        let mut recv = Guarded::<T>::new(p * n, start);
        let mut oracle = vec![T::zeroed(); p * n];
        if n > 0 {
            world.all_gather_into(send.get(), &mut oracle[..]);
        }
        let what = format!("allgather n={n} x {size} B {algo} in_place={in_place} rank {me}");
        let result = if in_place {
            comm.all_gather_in_place_with(recv.get_mut(), algo)
        } else {
            comm.all_gather_into_with(send.get(), recv.get_mut(), algo)
        };
        compare(&what, result, &recv, &oracle, &send, mine);
    }

    /// One alltoall.
    fn alltoall<T: Pod>(&self, algo: AlltoallAlgorithm) {
        let Exchange { world, comm, n, seed } = *self;
        let (me, p, mine) = self.mine();
        let send = Guarded::<T>::new(p * n, &mine);
        let mut recv = Guarded::<T>::new(p * n, |i| !pattern(seed, i));
        let mut oracle = vec![T::zeroed(); p * n];
        if n > 0 {
            world.all_to_all_into(send.get(), &mut oracle[..]);
        }
        let what = format!("alltoall n={n} x {} B {algo} rank {me}", std::mem::size_of::<T>());
        let result = comm.all_to_all_into_with(send.get(), recv.get_mut(), algo);
        compare(&what, result, &recv, &oracle, &send, mine);
    }
}

/// The outcome of case `what` against rsmpi's `oracle`: no error, the same bytes, nothing
/// written past the receive buffer, and the send buffer still holds `mine`.
fn compare<T: Pod>(
    what: &str,
    result: zcoll::Result<()>,
    recv: &Guarded<T>,
    oracle: &[T],
    send: &Guarded<T>,
    mine: impl Fn(usize) -> u8,
) {
    result.unwrap_or_else(|e| panic!("{what}: {e}"));
    same(recv.bytes(), bytemuck::cast_slice(oracle), what);
    assert!(recv.guard_ok(), "{what}: wrote past the receive buffer");
    assert!(send.is(mine), "{what}: changed the send buffer");
}

/// Block sizes in bytes: empty, one byte, around a page, and past 1 MiB (one algorithm
/// fewer at 8 ranks, to keep the job short).
fn sizes(p: usize, algo_index: usize) -> Vec<usize> {
    let mut sizes = vec![0usize, 1, 4095, 4097];
    if p < 8 || algo_index % 2 == 0 {
        sizes.push((1 << 20) + 3);
    }
    sizes
}

fn allgather(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size() as usize;
    let mut seed = 100;
    for (i, algo) in allgather_algorithms(comm).into_iter().enumerate() {
        for n in sizes(p, i) {
            for in_place in [false, true] {
                seed += 1;
                Exchange { world, comm, n, seed }.allgather::<u8>(algo, in_place);
            }
        }
        // Around the blocks that travel in the call record (8 bytes and less).
        for n in [7usize, 8, 9] {
            for in_place in [false, true] {
                seed += 1;
                Exchange { world, comm, n, seed }.allgather::<u8>(algo, in_place);
            }
        }
        for n in [1usize, 1001, 70_001] {
            seed += 1;
            Exchange { world, comm, n, seed }.allgather::<u32>(algo, false);
            Exchange { world, comm, n, seed }.allgather::<f64>(algo, n == 1001);
        }
        Exchange { world, comm, n: 3, seed }.allgather::<Cell>(algo, false);
    }
}

fn alltoall(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size() as usize;
    let mut seed = 200;
    for (i, algo) in alltoall_algorithms(comm).into_iter().enumerate() {
        for n in sizes(p, i) {
            seed += 1;
            Exchange { world, comm, n, seed }.alltoall::<u8>(algo);
        }
        for n in [1usize, 1001, 70_001] {
            seed += 1;
            Exchange { world, comm, n, seed }.alltoall::<u32>(algo);
            Exchange { world, comm, n, seed }.alltoall::<f64>(algo);
        }
        Exchange { world, comm, n: 3, seed }.alltoall::<Cell>(algo);
    }
}

/// Every bad call is the same `Err` on every rank, and leaves every buffer as it was.
fn errors(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let (last, pu) = (p - 1, p as usize);
    let n = 4097;
    let seed = |k: u64| 1000 * k + me as u64;
    let bytes = |k: u64| move |i: usize| pattern(seed(k), i);
    let lengths = |culprit, expected, found| Error::LengthMismatch { rank: me, culprit, expected, found };

    // Allgather: the last rank's block is one byte longer.
    if p > 1 {
        let send = Guarded::<u8>::new(n + 1, bytes(1));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(2));
        let len = if me == last { n + 1 } else { n };
        let e = comm.all_gather_into(&send.get()[..len], recv.get_mut()).unwrap_err();
        assert_eq!(e, lengths(last, n, n + 1));
        assert!(send.is(bytes(1)) && recv.is(bytes(2)), "a failed allgather changed a buffer");
    }
    // Allgather: the last rank's receive buffer is one byte short.
    {
        let send = Guarded::<u8>::new(n, bytes(3));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(4));
        let len = if me == last { pu * n - 1 } else { pu * n };
        let e = comm.all_gather_into(send.get(), &mut recv.get_mut()[..len]).unwrap_err();
        assert_eq!(e, lengths(last, pu * n, pu * n - 1));
        assert!(send.is(bytes(3)) && recv.is(bytes(4)), "a failed allgather changed a buffer");
    }
    if p > 1 {
        // In place, with a buffer that is not p blocks (on every rank: rank 0 is the culprit).
        let mut buf = Guarded::<u8>::new(pu * n + 1, bytes(5));
        let e = comm.all_gather_in_place(buf.get_mut()).unwrap_err();
        assert_eq!(e, lengths(0, pu * n, pu * n + 1));
        assert!(buf.is(bytes(5)), "a failed allgather changed its buffer");
        // Alltoall: the last rank sends one block more.
        let send = Guarded::<u8>::new(pu * n + n, bytes(6));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(7));
        let len = if me == last { pu * n + n } else { pu * n };
        let e = comm.all_to_all_into(&send.get()[..len], recv.get_mut()).unwrap_err();
        assert_eq!(e, lengths(last, pu * n, pu * n + n));
        assert!(send.is(bytes(6)) && recv.is(bytes(7)), "a failed alltoall changed a buffer");
        // Alltoall: rank 0's (and everyone's) send is not p blocks.
        let send = Guarded::<u8>::new(pu * n + 1, bytes(8));
        let mut recv = Guarded::<u8>::new(pu * n + 1, bytes(9));
        let e = comm.all_to_all_into(send.get(), recv.get_mut()).unwrap_err();
        assert_eq!(e, lengths(0, pu * n, pu * n + 1));
        assert!(send.is(bytes(8)) && recv.is(bytes(9)), "a failed alltoall changed a buffer");
        // Blocks are whole elements: p + 1 `u64`s are not p blocks, even where their bytes
        // are (at 2, 4 and 8 ranks), in place or not, on every rank.
        let mut buf = Guarded::<u64>::new(pu + 1, bytes(18));
        let e = comm.all_gather_in_place(buf.get_mut()).unwrap_err();
        assert_eq!(e, lengths(0, 8 * pu, 8 * pu + 8));
        assert!(buf.is(bytes(18)), "a failed allgather changed its buffer");
        let send = Guarded::<u64>::new(pu + 1, bytes(19));
        let mut recv = Guarded::<u64>::new(pu + 1, bytes(20));
        let e = comm.all_to_all_into(send.get(), recv.get_mut()).unwrap_err();
        assert_eq!(e, lengths(0, 8 * pu, 8 * pu + 8));
        assert!(send.is(bytes(19)) && recv.is(bytes(20)), "a failed alltoall changed a buffer");
        // Rank 0 calls an alltoall while the others allgather.
        let send = Guarded::<u8>::new(pu * n, bytes(10));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(11));
        let e = if me == 0 {
            comm.all_to_all_into(send.get(), recv.get_mut())
        } else {
            comm.all_gather_into(&send.get()[..n], recv.get_mut())
        }
        .unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: 1, what: "collective" });
        assert!(send.is(bytes(10)) && recv.is(bytes(11)), "a failed call changed a buffer");
    }
    // Alltoall: the last rank passes bytes where the others pass `u32`s, as many bytes in
    // all: the element size is named, not an algorithm nobody chose.
    if p > 1 {
        let (send, mut recv) = (Guarded::<u8>::new(4 * pu, bytes(21)), Guarded::<u8>::new(4 * pu, bytes(22)));
        let (send32, mut recv32) = (Guarded::<u32>::new(pu, bytes(23)), Guarded::<u32>::new(pu, bytes(24)));
        let e = match me == last {
            true => comm.all_to_all_into(send.get(), recv.get_mut()),
            false => comm.all_to_all_into(send32.get(), recv32.get_mut()),
        };
        assert_eq!(e, Err(Error::Mismatch { rank: me, culprit: last, what: "element size" }));
        assert!(recv.is(bytes(22)) && recv32.is(bytes(24)), "a failed alltoall changed a buffer");
    }
    // Alltoall: the last rank's receive buffer is one block short.
    {
        let send = Guarded::<u8>::new(pu * n, bytes(12));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(13));
        let len = if me == last { pu * n - n } else { pu * n };
        let e = comm.all_to_all_into(send.get(), &mut recv.get_mut()[..len]).unwrap_err();
        assert_eq!(e, lengths(last, pu * n, pu * n - n));
        assert!(send.is(bytes(12)) && recv.is(bytes(13)), "a failed alltoall changed a buffer");
    }
    // Ranks choose different algorithms (only visible where both can run).
    if p > 1 && comm.info().transport == TransportKind::Cma {
        let send = Guarded::<u8>::new(pu * n, bytes(14));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(15));
        let (a, b) = (AllgatherAlgorithm::RingSourceRead, AllgatherAlgorithm::RingSourceWrite);
        let e = comm
            .all_gather_into_with(&send.get()[..n], recv.get_mut(), if me == last { b } else { a })
            .unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
        // The ring's j counts as part of the algorithm.
        let ring = AllgatherAlgorithm::RingNeighbor(if me == last { 1 + pu as u32 } else { 1 });
        let e = comm.all_gather_into_with(&send.get()[..n], recv.get_mut(), ring).unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
        let (a, b) = (AlltoallAlgorithm::Pairwise, AlltoallAlgorithm::PairwiseWrite);
        let e = comm
            .all_to_all_into_with(send.get(), recv.get_mut(), if me == last { b } else { a })
            .unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
        assert!(send.is(bytes(14)) && recv.is(bytes(15)), "a failed call changed a buffer");
    }
    // A ring whose j is not coprime with p (j = p) cannot visit every block.
    if p > 1 && comm.info().transport == TransportKind::Cma && comm.info().nodes == 1 {
        let send = Guarded::<u8>::new(n, bytes(16));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(17));
        let ring = AllgatherAlgorithm::RingNeighbor(p as u32);
        let e = comm.all_gather_into_with(send.get(), recv.get_mut(), ring).unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported { rank, what } if *rank == me && what.contains("coprime")),
            "{e}"
        );
        assert!(send.is(bytes(16)) && recv.is(bytes(17)), "a failed allgather changed a buffer");
    }
    // The communicator is still usable after all that.
    Exchange { world, comm, n, seed: 77 }.allgather::<u8>(AllgatherAlgorithm::Auto, false);
    Exchange { world, comm, n, seed: 78 }.alltoall::<u8>(AlltoallAlgorithm::Auto);
    comm.barrier().unwrap();
}

/// `ZCOLL_ALLGATHER_ALGORITHM=ring-neighbor:<p>` and `ZCOLL_ALLTOALL_ALGORITHM=bogus`
/// decide what `Auto` does, and only that.
fn env(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size() as usize);
    assert_eq!(std::env::var("ZCOLL_ALLGATHER_ALGORITHM").unwrap(), format!("ring-neighbor:{p}"));
    let n = 5000;
    let send = Guarded::<u8>::new(p * n, |i| pattern(me as u64, i));
    let mut recv = Guarded::<u8>::new(p * n, |i| !pattern(me as u64, i));
    let e = comm.all_gather_into(&send.get()[..n], recv.get_mut()).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { what, .. } if what.contains(&format!("ring-neighbor:{p}"))),
        "{e}"
    );
    let e = comm.all_to_all_into(send.get(), recv.get_mut()).unwrap_err();
    assert!(
        matches!(&e, Error::Config { name: "ZCOLL_ALLTOALL_ALGORITHM", value, .. } if value == "bogus"),
        "{e}"
    );
    assert!(recv.is(|i| !pattern(me as u64, i)), "a failed call changed the receive buffer");
    // Explicit algorithms do not look at the environment.
    Exchange { world, comm, n, seed: 5 }.allgather::<u8>(AllgatherAlgorithm::RingNeighbor(1), false);
    Exchange { world, comm, n, seed: 6 }.alltoall::<u8>(AlltoallAlgorithm::Bruck);
}
