//! The arrival-aware (PAP) collectives: every PAP alltoall variant and the arrival-aware
//! broadcast against rsmpi's own collectives, with every rank sleeping a few random
//! milliseconds before each call so that ranks really arrive out of order; bad input,
//! which must still be the same `Err` on every rank, also when the culprit arrives last;
//! and a stress run of the alltoalls across interleaved virtual nodes (`pap-stress`).

use crate::common::{mix, pattern, same, Guarded};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::Duration;
use zcoll::{AlltoallAlgorithm, BcastAlgorithm, Comm, Error};

/// The PAP variants.
const VARIANTS: [AlltoallAlgorithm; 4] = [
    AlltoallAlgorithm::PapWrite,
    AlltoallAlgorithm::PapRead,
    AlltoallAlgorithm::PapStaged,
    AlltoallAlgorithm::PapShmDirect,
];

/// Runs scenario `name` (`pap`, `pap-errors`).
pub(crate) fn run(name: &str, world: &SimpleCommunicator, comm: &Comm) {
    match name {
        "pap" => {
            alltoall(world, comm);
            bcast(world, comm);
            env(world, comm);
        }
        "pap-errors" => errors(world, comm),
        other => panic!("unknown scenario {other}"),
    }
}

/// Sleeps 0 to `most` ms, chosen from (rank, call): the ranks arrive in a different order
/// at every call.
fn arrive_late(world: &SimpleCommunicator, call: u64, most: u64) {
    let ms = mix(mix(call) ^ world.rank() as u64) % (most + 1);
    std::thread::sleep(Duration::from_millis(ms));
}

/// One alltoall of blocks of `n` bytes, against rsmpi's, with a late arrival of up to
/// `late` ms.
fn check_alltoall(world: &SimpleCommunicator, comm: &Comm, n: usize, algo: AlltoallAlgorithm, seed: u64) {
    let (me, p) = (world.rank() as usize, world.size() as usize);
    let mine = |i: usize| pattern(seed + me as u64, i);
    let send = Guarded::<u8>::new(p * n, mine);
    let mut recv = Guarded::<u8>::new(p * n, |i| !pattern(seed, i));
    let mut oracle = vec![0u8; p * n];
    if n > 0 {
        world.all_to_all_into(send.get(), &mut oracle[..]);
    }
    // After the oracle (a synchronizing collective), so that the delay really spreads the
    // arrivals at the call under test.
    arrive_late(world, seed, 4);
    let what = format!("alltoall n={n} {algo} rank {me}");
    comm.all_to_all_into_with(send.get(), recv.get_mut(), algo).unwrap_or_else(|e| panic!("{what}: {e}"));
    same(recv.get(), &oracle, &what);
    assert!(recv.guard_ok(), "{what}: wrote past the receive buffer");
    assert!(send.is(mine), "{what}: changed the send buffer");
}

/// Block sizes for a total per rank from 0 to 4 MiB (odd and page-crossing among them).
fn blocks(p: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = vec![0, 1, 4097];
    for total in [256 << 10, 4 << 20] {
        sizes.push(total / p);
    }
    sizes
}

fn alltoall(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size() as usize;
    let mut seed = 300;
    for algo in VARIANTS {
        for n in blocks(p) {
            seed += 1;
            check_alltoall(world, comm, n, algo, seed);
        }
    }
    // Typed data through the public generic entry point.
    let me = world.rank() as u64;
    let send: Vec<u64> = (0..p as u64 * 3).map(|i| me << 32 | i).collect();
    let mut recv = vec![0u64; p * 3];
    arrive_late(world, 1, 4);
    comm.all_to_all_into_with(&send, &mut recv, AlltoallAlgorithm::PapRead).unwrap();
    for (j, &x) in recv.iter().enumerate() {
        let (src, i) = (j / 3, (me as usize * 3 + j % 3) as u64);
        assert_eq!(x, (src as u64) << 32 | i, "typed alltoall rank {me}");
    }
}

/// One arrival-aware broadcast of `n` bytes from `root` against rsmpi's.
fn check_bcast(world: &SimpleCommunicator, comm: &Comm, n: usize, root: i32, seed: u64) {
    let me = world.rank();
    let fill = |i: usize| if me == root { pattern(seed, i) } else { !pattern(seed, i) };
    let mut buf = Guarded::<u8>::new(n, fill);
    let mut oracle = buf.get().to_vec();
    if n > 0 {
        world.process_at_rank(root).broadcast_into(&mut oracle[..]);
    }
    arrive_late(world, seed, 6);
    let what = format!("arrival-aware bcast n={n} root={root} rank {me}");
    comm.broadcast_into_with(buf.get_mut(), root, BcastAlgorithm::ArrivalAware)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    same(buf.get(), &oracle, &what);
    assert!(buf.guard_ok(), "{what}: wrote past the buffer");
}

fn bcast(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    let mut seed = 400;
    for n in [0usize, 1, 4097, (1 << 20) + 3, 3 << 20] {
        for root in [0, p - 1, p / 2] {
            seed += 1;
            check_bcast(world, comm, n, root, seed);
        }
    }
}

/// With `ZCOLL_ALLTOALL_ALGORITHM=pap-write`, `Auto` is `PapWrite`: a call where rank 0
/// passes `Auto` and the others `PapWrite` agrees (any other resolution would be a
/// `Mismatch`).
fn env(world: &SimpleCommunicator, comm: &Comm) {
    if std::env::var("ZCOLL_ALLTOALL_ALGORITHM").as_deref() != Ok("pap-write") {
        return;
    }
    let algo = if world.rank() == 0 { AlltoallAlgorithm::Auto } else { AlltoallAlgorithm::PapWrite };
    check_alltoall(world, comm, 5000, algo, 500);
}

/// Every bad call is the same `Err` on every rank, whoever arrives last, with the
/// culprit's buffers and every send buffer untouched.
fn errors(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let (last, pu) = (p - 1, p as usize);
    let n = 4097;
    let bytes = |k: u64| move |i: usize| pattern(1000 * k + me as u64, i);
    let lengths = |culprit, expected, found| Error::LengthMismatch { rank: me, culprit, expected, found };
    for (v, algo) in VARIANTS.into_iter().enumerate() {
        for culprit_late in [true, false] {
            let k = 10 * v as u64 + culprit_late as u64;
            // The culprit sleeps (arrives last), or everyone else does (it arrives first).
            let late = (me == last) == culprit_late;
            // The last rank sends one block more.
            let send = Guarded::<u8>::new(pu * n + n, bytes(k));
            let mut recv = Guarded::<u8>::new(pu * n, bytes(k + 100));
            let len = if me == last { pu * n + n } else { pu * n };
            world.barrier();
            if late {
                std::thread::sleep(Duration::from_millis(30));
            }
            let e = comm.all_to_all_into_with(&send.get()[..len], recv.get_mut(), algo).unwrap_err();
            assert_eq!(e, lengths(last, pu * n, pu * n + n), "{algo} culprit_late={culprit_late}");
            assert!(send.is(bytes(k)), "{algo}: a failed alltoall changed a send buffer");
            if me == last {
                assert!(recv.is(bytes(k + 100)), "{algo}: a failed alltoall wrote into the culprit");
            }
            assert!(recv.guard_ok(), "{algo}: wrote past a receive buffer");
            // The last rank's receive buffer is one block short.
            let send = Guarded::<u8>::new(pu * n, bytes(k + 200));
            let mut recv = Guarded::<u8>::new(pu * n, bytes(k + 300));
            let len = if me == last { pu * n - n } else { pu * n };
            world.barrier();
            if late {
                std::thread::sleep(Duration::from_millis(30));
            }
            let e = comm.all_to_all_into_with(send.get(), &mut recv.get_mut()[..len], algo).unwrap_err();
            assert_eq!(e, lengths(last, pu * n, pu * n - n), "{algo} culprit_late={culprit_late}");
            assert!(send.is(bytes(k + 200)), "{algo}: a failed alltoall changed a send buffer");
            if me == last {
                assert!(recv.is(bytes(k + 300)), "{algo}: a failed alltoall wrote into the culprit");
            }
            assert!(recv.guard_ok(), "{algo}: wrote past a receive buffer");
        }
        // Every rank sends p + 1 `u64`s: not p blocks of whole elements, even where their
        // bytes are (at 2, 4 and 8 ranks). Nothing moves.
        let k = 10 * v as u64 + 500;
        let send = Guarded::<u64>::new(pu + 1, bytes(k));
        let mut recv = Guarded::<u64>::new(pu + 1, bytes(k + 1));
        let e = comm.all_to_all_into_with(send.get(), recv.get_mut(), algo).unwrap_err();
        assert_eq!(e, lengths(0, 8 * pu, 8 * pu + 8), "{algo}");
        assert!(send.is(bytes(k)) && recv.is(bytes(k + 1)), "{algo}: a failed alltoall changed a buffer");
    }
    // The last rank passes bytes where the others pass `u32`s, as many bytes in all: the
    // element size is named (inside a node and across nodes alike), and nothing moves.
    if p > 1 {
        for algo in [AlltoallAlgorithm::PapRead, AlltoallAlgorithm::PapStaged] {
            let send = Guarded::<u8>::new(4 * pu, bytes(60));
            let mut recv = Guarded::<u8>::new(4 * pu, bytes(61));
            let send32 = Guarded::<u32>::new(pu, bytes(62));
            let mut recv32 = Guarded::<u32>::new(pu, bytes(63));
            let e = match me == last {
                true => comm.all_to_all_into_with(send.get(), recv.get_mut(), algo),
                false => comm.all_to_all_into_with(send32.get(), recv32.get_mut(), algo),
            };
            assert_eq!(e, Err(Error::Mismatch { rank: me, culprit: last, what: "element size" }), "{algo}");
            // Blocks of agreeing peers may land in theirs, never in the culprit's (alone in
            // its call, inside a node and across nodes): not even its own block.
            assert!(recv.is(bytes(61)), "{algo}: a failed alltoall wrote into the culprit");
            assert!(
                send.is(bytes(60)) && send32.is(bytes(62)),
                "{algo}: a failed alltoall changed a send buffer"
            );
            assert!(recv.guard_ok() && recv32.guard_ok(), "{algo}: wrote past a receive buffer");
        }
    }
    // (On one `cico` node every PAP variant runs as `pap-staged`, so none disagrees;
    // across nodes the requests are compared, whatever each node's transport.)
    if p > 1 && (comm.info().nodes > 1 || comm.info().transport == zcoll::TransportKind::Cma) {
        // Two PAP variants that disagree, the culprit late.
        let send = Guarded::<u8>::new(pu * n, bytes(50));
        let mut recv = Guarded::<u8>::new(pu * n, bytes(51));
        let algo = if me == last { AlltoallAlgorithm::PapRead } else { AlltoallAlgorithm::PapWrite };
        world.barrier();
        if me == last {
            std::thread::sleep(Duration::from_millis(30));
        }
        let e = comm.all_to_all_into_with(send.get(), recv.get_mut(), algo).unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
        assert!(send.is(bytes(50)), "a failed alltoall changed a send buffer");
        // A PAP rank against an ordinary one (which waits for every arrival in its checks)
        // is the same error too, and against another collective the collective's: across
        // nodes as well, where the PAP legs are messages between the leaders that a rank
        // in another call would never answer.
        let algo = if me == last { AlltoallAlgorithm::Pairwise } else { AlltoallAlgorithm::PapStaged };
        let e = comm.all_to_all_into_with(send.get(), recv.get_mut(), algo).unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
        // (A broadcast longer than a one-phase one, whose root would leave before the
        // verdict.)
        let mut long = Guarded::<u8>::new(40_000, bytes(53));
        let e = match me == last {
            true => comm.broadcast_into(long.get_mut(), 0),
            false => comm.all_to_all_into_with(send.get(), recv.get_mut(), AlltoallAlgorithm::PapRead),
        };
        assert_eq!(e.unwrap_err(), Error::Mismatch { rank: me, culprit: last, what: "collective" });
        assert!(send.is(bytes(50)) && long.is(bytes(53)), "a failed call changed a buffer");
        if comm.info().nodes == 1 {
            // The arrival-aware broadcast: the root arrives last with a longer buffer.
            let mut buf = Guarded::<u8>::new(n + 1, bytes(52));
            let len = if me == last { n + 1 } else { n };
            world.barrier();
            if me == last {
                std::thread::sleep(Duration::from_millis(30));
            }
            let e = comm.broadcast_into_with(&mut buf.get_mut()[..len], last, BcastAlgorithm::ArrivalAware);
            assert_eq!(e.unwrap_err(), lengths(0, n + 1, n));
            assert!(buf.is(bytes(52)), "a failed broadcast changed a buffer");
        }
    }
    // The communicator is still usable after all that, whatever was left in the FIFOs.
    for (i, algo) in VARIANTS.into_iter().enumerate() {
        check_alltoall(world, comm, 3000, algo, 600 + i as u64);
    }
    check_bcast(world, comm, 70_001, 0, 610);
    comm.barrier().unwrap();
}

/// The scenario `pap-stress`: the PAP alltoalls back to back across (virtual) nodes, on a
/// communicator whose ranks interleave the nodes (the virtual nodes of `ZCOLL_NODE_SIZE`
/// world ranks hold every `nodes`th rank, in the reverse of the world's order), each
/// result against rsmpi's. Every other call the ranks arrive together, as they leave the
/// call before (so a follower's first look at its leader races with the leader's
/// arrival); otherwise each rank sleeps up to 2 ms, spins up to 0.5 ms, or not. The four
/// variants of a round share one send buffer, so one oracle, and run with no MPI call of
/// the test between them. `ZCOLL_TEST_ROUNDS` sets the number of rounds (400).
pub(crate) fn stress(world: &SimpleCommunicator) {
    let (w, p) = (world.rank() as usize, world.size() as usize);
    let rounds: u64 =
        std::env::var("ZCOLL_TEST_ROUNDS").map_or(400, |s| s.parse().expect("ZCOLL_TEST_ROUNDS"));
    let k = std::env::var("ZCOLL_NODE_SIZE").map_or(p, |k| k.parse().expect("ZCOLL_NODE_SIZE"));
    let key = (k - 1 - w % k) * p.div_ceil(k) + w / k;
    let mpi = world
        .split_by_color_with_key(mpi::topology::Color::with_value(0), key as i32)
        .expect("a split with a defined color returns a communicator");
    let comm = Comm::new(&mpi).unwrap_or_else(|e| panic!("Comm::new on the permuted communicator: {e}"));
    let me = mpi.rank() as usize;
    for round in 0..rounds {
        // Odd, page-crossing and tiny blocks.
        let n = [1usize, 7, 2777, 4097, 33][(round % 5) as usize];
        let seed = 7000 + 10 * round;
        let mine = |i: usize| pattern(seed + me as u64, i);
        let send = Guarded::<u8>::new(p * n, mine);
        let mut oracle = vec![0u8; p * n];
        mpi.all_to_all_into(send.get(), &mut oracle[..]);
        for (v, algo) in VARIANTS.into_iter().enumerate() {
            let call = seed + v as u64;
            let mut recv = Guarded::<u8>::new(p * n, |i| !pattern(call, i));
            // Every other call nobody waits; else each rank sleeps, spins, or not.
            let r = mix(mix(call) ^ me as u64);
            match if mix(call) % 2 == 0 { 2 } else { r % 3 } {
                0 => std::thread::sleep(Duration::from_micros(r / 3 % 2000)),
                1 => {
                    let until = std::time::Instant::now() + Duration::from_micros(r / 3 % 500);
                    while std::time::Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                _ => {}
            }
            let what = format!("pap-stress round {round} n={n} {algo} rank {me} (world {w})");
            comm.all_to_all_into_with(send.get(), recv.get_mut(), algo)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if recv.get() != &oracle[..] {
                // Which source blocks are wrong, and what they hold instead.
                let bad: Vec<String> = (0..p)
                    .filter(|&s| recv.get()[s * n..(s + 1) * n] != oracle[s * n..(s + 1) * n])
                    .map(|s| {
                        let got = &recv.get()[s * n..(s + 1) * n];
                        let untouched = got.iter().enumerate().all(|(i, &b)| b == !pattern(call, s * n + i));
                        let zero = got.iter().all(|&b| b == 0);
                        format!("block from {s}: untouched {untouched}, zero {zero}")
                    })
                    .collect();
                panic!("{what}: differs from rsmpi: {}", bad.join("; "));
            }
            assert!(recv.guard_ok(), "{what}: wrote past the receive buffer");
            assert!(send.is(mine), "{what}: changed the send buffer");
        }
    }
    comm.barrier().unwrap();
}
