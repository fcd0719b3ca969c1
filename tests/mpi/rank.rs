//! What every rank of a test job runs. Each scenario compares zcoll's results with an
//! oracle: rsmpi's own collective on the same input, or a value computed independently.

use crate::common::{check_barrier, pattern, GUARD, GUARD_BYTE};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::Builtin;
use zcoll::{BcastAlgorithm, Comm, Error, Pod, TransportKind};

/// A `#[repr(C)]` record with both derives, as users write them.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
#[repr(C)]
pub(crate) struct Particle {
    pub(crate) position: [f64; 3],
    pub(crate) id: u64,
}

pub(crate) fn main() {
    // A failed assertion on one rank must end the job at once, not leave the others
    // waiting for it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        SimpleCommunicator::world().abort(3);
    }));
    if std::env::var("ZCOLL_TEST_SCENARIO").as_deref() == Ok("threads") {
        // It initializes MPI at a thread level of its own.
        return crate::threads::run();
    }
    if std::env::var("ZCOLL_TEST_SCENARIO").as_deref() == Ok("immediate-multiple") {
        return crate::immediate::run_multiple();
    }
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    if let Ok(r) = std::env::var("ZCOLL_TEST_NONDUMPABLE_RANK") {
        if world.rank() == r.parse::<i32>().unwrap() {
            nix::sys::prctl::set_dumpable(false).expect("prctl(PR_SET_DUMPABLE, 0)");
        }
    }
    let scenario = std::env::var("ZCOLL_TEST_SCENARIO").expect("ZCOLL_TEST_SCENARIO");
    if scenario == "refused-cma" {
        return refused_cma(&world);
    }
    if scenario == "revoked-cma" {
        return revoked_cma(&world);
    }
    if scenario == "bad-env" {
        return bad_env(&world);
    }
    if scenario == "setup-fails" {
        return setup_fails(&world);
    }
    if scenario == "small-shm" {
        return small_shm(&world);
    }
    if scenario == "no-room-for-heap" {
        return no_room_for_heap(&world);
    }
    if scenario == "node-size-disagrees" {
        return node_size_disagrees(&world);
    }
    if scenario == "algorithm-var-disagrees" {
        return algorithm_var_disagrees(&world);
    }
    if scenario == "xpmem-missing" {
        return crate::heap::xpmem_missing(&world);
    }
    if scenario == "pap-stress" {
        // It builds its own communicator, with the nodes interleaved.
        crate::pap::stress(&world);
        println!("ZCOLL-RANK-OK {}", world.rank());
        return;
    }
    if scenario == "fault-matrix" {
        // It builds a communicator per case, and ends the process itself.
        crate::fault_matrix::rank(&world);
    }
    if scenario == "log" {
        log_to(std::env::var("ZCOLL_TEST_LOGGER").as_deref().unwrap_or("unset"));
    }
    if scenario == "culprit" {
        // It kills a rank and ends the process itself.
        crate::faults::culprit(&world);
    }
    if scenario == "operator-panic" {
        // Its process is meant to abort; it ends the process itself if it does not.
        crate::faults::operator_panic(&world);
    }
    if scenario == "departed" {
        // It builds its own communicator, which one rank drops while panicking.
        return crate::faults::departed(&world);
    }
    if scenario == "deferred-drop" {
        // It builds and drops its own communicator.
        return crate::deferred::drop_report(&world);
    }
    if scenario == "hier" {
        // It builds its own communicator, over a permutation of the world's ranks.
        crate::hier::run(&world);
        println!("ZCOLL-RANK-OK {}", world.rank());
        return;
    }
    // Nodes of different transports (each node decides its own): the ranks below
    // `ZCOLL_TEST_CICO_BELOW`, whole nodes of them, copy in and out where the others do not.
    if let Ok(below) = std::env::var("ZCOLL_TEST_CICO_BELOW") {
        if world.rank() < below.parse::<i32>().expect("a rank") {
            std::env::set_var("ZCOLL_TRANSPORT", "cico");
        }
    }
    let comm = Comm::new(&world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    expectations(&world, &comm);
    match scenario.as_str() {
        "bcast" => bcast(&world, &comm),
        "errors" => errors(&world, &comm),
        "barrier" => barrier(&world, &comm),
        "warn-after" => warn_after(&world, &comm),
        "log" => {
            check_bcast::<u8>(&world, &comm, 4096, 0, BcastAlgorithm::Auto, 1);
            check_bcast::<u8>(&world, &comm, 4096, 0, BcastAlgorithm::DirectRead, 2);
        }
        "reduce" => crate::reduce::reduce(&world, &comm),
        "immediate" => crate::immediate::run(&world, false),
        "faults" => crate::faults::run(&world, &comm),
        "panic-alone" => crate::faults::panic_alone(&world, &comm),
        "empty" => crate::empty::run(&world, &comm),
        "unchanged" => crate::unchanged::run(&world, &comm),
        "random" => crate::random::run(&world, &comm),
        "deferred" => crate::deferred::run(&world, &comm),
        "relay" => crate::relay::run(&world, &comm),
        "soak" => crate::random::soak(&world, &comm),
        "isolation" => crate::isolation::run(&world, &comm),
        "split" => split(&world, &comm),
        "scan" => crate::scan::run(&world, &comm),
        "layout" => crate::layout::run(&world, &comm),
        "exposure-panic" => exposure_panic(&world, &comm),
        "calibrate" => calibrate(&world, &comm),
        "heap" => crate::heap::run(&world, &comm),
        "heap-gather-loads" => crate::heap::gather_settled(&world, &comm),
        s @ ("scatter" | "gather" | "scatter-gather-errors") => crate::scatter_gather::run(s, &world, &comm),
        s @ ("varcount" | "varcount-errors") => crate::varcount::run(s, &world, &comm),
        s if s.starts_with("exchange-") => crate::exchange::run(s, &world, &comm),
        s @ ("pap" | "pap-errors") => crate::pap::run(s, &world, &comm),
        "bench" => crate::bench::bench(&world, &comm),
        "bench-start" => crate::bench::common_start(&world, &comm),
        other => panic!("unknown scenario {other}"),
    }
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// Installs what receives zcoll's events on standard error, filtered by `RUST_LOG`: a
/// `log` logger (`log`: env_logger, which gets them through tracing's `log` bridge since
/// no tracing subscriber is installed) or a tracing subscriber (`tracing`).
fn log_to(logger: &str) {
    match logger {
        "log" => env_logger::init(),
        "tracing" => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init(),
        other => panic!("ZCOLL_TEST_LOGGER={other}: must be log or tracing"),
    }
}

/// What the launcher expects `info` to say.
fn expectations(world: &SimpleCommunicator, comm: &Comm) {
    let info = comm.info();
    assert_eq!((info.rank, info.size), (world.rank(), world.size()));
    assert!(info.node_ranks.contains(&info.rank));
    if let Ok(t) = std::env::var("ZCOLL_EXPECT_TRANSPORT") {
        assert_eq!(info.transport, t.parse::<TransportKind>().unwrap(), "{info}");
    }
    if let Ok(lib) = std::env::var("ZCOLL_EXPECT_UNMAPPED") {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(!maps.contains(&lib), "{lib} was loaded although ZCOLL_TRANSPORT rules XPMEM out");
    }
    if let Ok(arrival) = std::env::var("ZCOLL_EXPECT_ARRIVAL") {
        assert_eq!(info.arrival.to_string(), arrival, "{info}");
    }
    if let Ok(reason) = std::env::var("ZCOLL_EXPECT_REASON") {
        assert!(info.reason.contains(&reason), "reason {:?} lacks {reason:?}", info.reason);
    }
    if let Ok(k) = std::env::var("ZCOLL_NODE_SIZE") {
        let k: usize = k.parse().unwrap();
        let p = world.size() as usize;
        assert_eq!(info.nodes, p.div_ceil(k), "{info}");
        let first = info.rank as usize / k * k;
        let expected: Vec<i32> = (first..(first + k).min(p)).map(|r| r as i32).collect();
        assert_eq!(info.node_ranks, expected);
    } else {
        assert_eq!((info.nodes, info.node_ranks.len()), (1, world.size() as usize), "{info}");
    }
}

/// Broadcasts `n` elements of `T` from `root` with zcoll and with rsmpi, and compares.
fn check_bcast<T: Pod>(
    world: &SimpleCommunicator,
    comm: &Comm,
    n: usize,
    root: i32,
    algo: BcastAlgorithm,
    seed: u64,
) {
    let me = world.rank();
    let size = std::mem::size_of::<T>();
    let fill = |i: usize| if me == root { pattern(seed, i) } else { !pattern(seed, i) };
    // Element-aligned storage: allocate as T, view as bytes.
    let mut store: Vec<T> = vec![T::zeroed(); n + GUARD.div_ceil(size)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut store);
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = if i < n * size { fill(i) } else { GUARD_BYTE };
    }
    let mut oracle: Vec<T> = store[..n].to_vec();
    if n > 0 {
        // Open MPI rejects a zero-length broadcast from a dangling (empty Vec) pointer.
        world.process_at_rank(root).broadcast_into(&mut oracle[..]);
    }
    comm.broadcast_into_with(&mut store[..n], root, algo)
        .unwrap_or_else(|e| panic!("bcast n={n} root={root} {algo}: {e}"));
    let got: &[u8] = bytemuck::cast_slice(&store[..n]);
    let want: &[u8] = bytemuck::cast_slice(&oracle);
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("bcast n={n} x {size} B root={root} {algo}: rank {me} differs at byte {i}");
    }
    let tail: &[u8] = bytemuck::cast_slice(&store[n..]);
    assert!(tail.iter().all(|&b| b == GUARD_BYTE), "bcast n={n} root={root} {algo}: wrote past the buffer");
}

/// Every broadcast algorithm, with the k-nomial radix at 2, 3, 4 and p, and a pipeline
/// chunk of three pages besides the default.
fn bcast_algorithms(p: i32) -> Vec<BcastAlgorithm> {
    let mut all: Vec<_> = std::iter::once(BcastAlgorithm::Auto).chain(BcastAlgorithm::ALL).collect();
    for k in [2, 3, p.max(2) as u32] {
        all.push(BcastAlgorithm::KnomialRead { k });
    }
    all.push(BcastAlgorithm::Pipelined { chunk: 3 * 4096 });
    all
}

/// The largest broadcast the `bcast` jobs make at `p` ranks: 16 MiB up to 3 ranks (many
/// pipeline chunks and 1 MiB root-read chunks, the sizes where the model's choice
/// settles). At 4 to 8 ranks, oversubscribed in the test build, those took three quarters
/// of each job (7.5 s of 9 at 8 ranks, every algorithm from two roots); those jobs stop at
/// 4 MiB and 5 bytes, still four root-read chunks and an odd tail.
fn biggest_bcast(p: i32) -> usize {
    if p > 3 {
        (4 << 20) + 5
    } else {
        16 << 20
    }
}

fn bcast(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    let mut seed = 1u64;
    for n in [0usize, 1, 7, 4095, 4097, (1 << 20) + 3, biggest_bcast(p)] {
        let roots: Vec<i32> = if n >= 1 << 20 { vec![0, p - 1] } else { (0..p).collect() };
        for &root in roots.iter().take(if n >= 1 << 20 && p == 1 { 1 } else { roots.len() }) {
            for algo in bcast_algorithms(p) {
                seed += 1;
                check_bcast::<u8>(world, comm, n, root, algo, seed);
            }
        }
    }
    for (i, n) in [1usize, 3, 1001, 70_001].into_iter().enumerate() {
        let root = (i as i32 * 7 + 1) % p;
        for algo in bcast_algorithms(p) {
            seed += 1;
            check_bcast::<u32>(world, comm, n, root, algo, seed);
            check_bcast::<f64>(world, comm, n, root, algo, seed);
            check_bcast::<Particle>(world, comm, n, root, algo, seed);
        }
    }
}

/// Every bad call is the same `Err` on every rank, and leaves every buffer as it was.
fn errors(world: &SimpleCommunicator, comm: &Comm) {
    let me = world.rank();
    let p = world.size();
    // Larger than a one-phase broadcast (half a staging area), whose root leaves before
    // the verdict and learns a failure at its next call: the `deferred` jobs test that.
    let n = 40_000;
    let original = |r: i32| -> Vec<u8> { (0..n + 1).map(|i| pattern(r as u64, i)).collect() };

    // A root outside the communicator, given alike by everyone: also at 8 bytes, where a
    // root may leave a broadcast before its verdict (and must not, for a root it can see
    // is bad).
    for (bad, len) in [p, -1, i32::MAX].into_iter().flat_map(|bad| [(bad, n), (bad, 8)]) {
        let mut buf = original(me);
        let e = comm.broadcast_into(&mut buf[..len], bad).unwrap_err();
        assert_eq!(e, Error::InvalidRoot { rank: me, root: bad, size: p });
        assert_eq!(buf, original(me), "a failed call changed the buffer");
    }
    if p > 1 {
        let last = p - 1;
        // The last rank's buffer is one byte longer.
        let mut buf = original(me);
        let len = if me == last { n + 1 } else { n };
        let e = comm.broadcast_into(&mut buf[..len], 0).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { rank: me, culprit: last, expected: n, found: n + 1 });
        assert_eq!(buf, original(me));
        // The last rank names another root.
        let e = comm.broadcast_into(&mut buf[..n], if me == last { 0 } else { 1 }).unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "root" });
        assert_eq!(buf, original(me));
        // Rank 0 calls a barrier while the others broadcast.
        let e = if me == 0 { comm.barrier() } else { comm.broadcast_into(&mut buf[..n], 0) }.unwrap_err();
        assert_eq!(e, Error::Mismatch { rank: me, culprit: 1, what: "collective" });
        assert_eq!(buf, original(me));
        // Ranks choose different algorithms (only visible where both can run).
        if comm.info().transport == TransportKind::Cma && comm.info().nodes == 1 {
            let algo = if me == last { BcastAlgorithm::DirectWrite } else { BcastAlgorithm::DirectRead };
            let e = comm.broadcast_into_with(&mut buf[..n], 0, algo).unwrap_err();
            assert_eq!(e, Error::Mismatch { rank: me, culprit: last, what: "algorithm" });
            assert_eq!(buf, original(me));
        }
        // A reduce to the last rank whose rank 0 passes one element more: on one node the
        // root's lengths are the reference, so rank 0 is named (across nodes rank 0's
        // are, as the safety chapter says). Above the one-phase size: judged in the call.
        if comm.info().nodes == 1 {
            let words = n / 8;
            let send = vec![1u64; if me == 0 { words + 1 } else { words }];
            let e = match me == last {
                true => {
                    let mut out = vec![7u64; words];
                    let e = comm.reduce_into_root(&send, &mut out, last, Builtin::Sum).unwrap_err();
                    assert!(out.iter().all(|&x| x == 7), "a failed reduce wrote the root's output");
                    e
                }
                false => comm.reduce_into(&send, last, Builtin::Sum).unwrap_err(),
            };
            let (expected, found) = (8 * words, 8 * words + 8);
            assert_eq!(e, Error::LengthMismatch { rank: me, culprit: 0, expected, found });
        }
    }
    // The communicator is still usable after all that.
    check_bcast::<u8>(world, comm, n, p - 1, BcastAlgorithm::Auto, 99);
    comm.barrier().unwrap();
}

/// After a barrier, every rank sees what every rank did before it: each rank creates a
/// file before the barrier, and after it each rank finds all of them.
fn barrier(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    // Make the early ranks really early.
    let delays: Vec<u64> = (0..20).map(|round| if (me + round) % p == 0 { 5 } else { 0 }).collect();
    check_barrier(world, comm, "zcoll-barrier", &delays);
}

/// The last rank enters a broadcast 2.5 s after the others, which wait for it: with
/// `ZCOLL_WARN_AFTER` short, each of them says on standard error what it waits for (the
/// test reads those lines); the broadcast then gives rsmpi's result.
fn warn_after(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    let mut data: Vec<u64> = (0..1000).map(|i| if me == 0 { i * 3 + 1 } else { 0 }).collect();
    if me == p - 1 {
        std::thread::sleep(std::time::Duration::from_millis(1500));
    }
    comm.broadcast_into(&mut data[..], 0).unwrap();
    assert!(data.iter().enumerate().all(|(i, &x)| x == i as u64 * 3 + 1), "the late broadcast's data");
    comm.barrier().unwrap();
}

/// A rank that made itself non-dumpable denies CMA in a job without CAP_SYS_PTRACE: the
/// node falls back to `cico` (and says why), forcing `cma` is an error on every rank, and
/// the collectives still give rsmpi's results.
fn refused_cma(world: &SimpleCommunicator) {
    let me = world.rank();
    if std::env::var("ZCOLL_TRANSPORT").as_deref() == Ok("cma") {
        let e = Comm::new(world).unwrap_err();
        assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}");
        assert!(e.to_string().contains("may not read local rank 1"), "{e}");
    } else {
        let comm = Comm::new(world).unwrap();
        assert_eq!(comm.info().transport, TransportKind::Cico, "{}", comm.info());
        assert!(comm.info().reason.contains("may not read local rank 1"), "{}", comm.info().reason);
        for (i, n) in [0usize, 1, 4097, 100_000].into_iter().enumerate() {
            for algo in bcast_algorithms(world.size()) {
                check_bcast::<u8>(world, &comm, n, (i as i32) % world.size(), algo, i as u64);
            }
        }
        comm.barrier().unwrap();
    }
    println!("ZCOLL-RANK-OK {me}");
}

/// Under an address-space limit (`ulimit -v`) the shared heap's 64 GiB reservation
/// fails: the node takes CMA and its reason says why, `alloc` is `Unsupported`, and the
/// collectives on `Vec`s give rsmpi's results; forcing `heap` is an error on every rank.
fn no_room_for_heap(world: &SimpleCommunicator) {
    let me = world.rank();
    let why = "reserves 64 GiB of address space";
    if std::env::var("ZCOLL_TRANSPORT").as_deref() == Ok("heap") {
        let e = Comm::new(world).unwrap_err();
        assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    } else {
        let comm = Comm::new(world).unwrap();
        assert_eq!(comm.info().transport, TransportKind::Cma, "{}", comm.info());
        assert!(comm.info().reason.contains(why), "{}", comm.info().reason);
        let e = comm.alloc::<u64>(1000).unwrap_err();
        assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}");
        for (i, n) in [1usize, 4097, 100_000].into_iter().enumerate() {
            check_bcast::<u8>(world, &comm, n, (i as i32) % world.size(), BcastAlgorithm::Auto, i as u64);
        }
        comm.barrier().unwrap();
    }
    println!("ZCOLL-RANK-OK {me}");
}

/// Rank 0 makes itself non-dumpable after the node chose CMA (in a job without
/// CAP_SYS_PTRACE): every call that reads or writes rank 0's memory fails on every rank,
/// with the kernel's refusal on the ranks that met it, leaves rank 0's buffers and every
/// guard untouched, and the communicator goes on working for the calls that need no
/// access to rank 0. Calibration, which reads rank 0, fails mid-probe on every rank
/// instead of hanging.
fn revoked_cma(world: &SimpleCommunicator) {
    let (me, p) = (world.rank(), world.size());
    let comm = Comm::new(world).unwrap();
    assert_eq!(comm.info().transport, TransportKind::Cma, "{}", comm.info());
    if me == 0 {
        nix::sys::prctl::set_dumpable(false).expect("prctl(PR_SET_DUMPABLE, 0)");
    }
    world.barrier();
    let refused = |e: &Error| match e {
        Error::Transport { rank, peer: 0, errno, .. } => *rank == me && *errno == zcoll::Errno::EPERM,
        Error::PeerFailed { rank, .. } => *rank == me,
        _ => false,
    };
    let n = 100_000;
    let guarded = |fill: u8| {
        let mut v = vec![fill; n + GUARD];
        v[n..].fill(GUARD_BYTE);
        v
    };
    // Every reader reads rank 0 at once.
    let mut buf = guarded(if me == 0 { 7 } else { 0 });
    let e = comm.broadcast_into_with(&mut buf[..n], 0, BcastAlgorithm::DirectRead).unwrap_err();
    assert!(refused(&e), "bcast from the revoked rank: {e}");
    if me != 0 {
        assert!(matches!(e, Error::Transport { .. }), "a reader meets the refusal itself: {e}");
    }
    assert!(buf[n..].iter().all(|&b| b == GUARD_BYTE), "bcast wrote past the buffer");
    if me == 0 {
        assert!(buf[..n].iter().all(|&b| b == 7), "the root's data changed");
    }
    // Every writer writes into rank 0 at once.
    let send = vec![me as u8 + 1; n];
    let total = n * p as usize;
    let mut recv = vec![0xee; total + GUARD];
    recv[total..].fill(GUARD_BYTE);
    let r = if me == 0 {
        comm.gather_into_root_with(&send, &mut recv[..total], 0, zcoll::GatherAlgorithm::ParallelWrite)
    } else {
        comm.gather_into_with(&send, 0, zcoll::GatherAlgorithm::ParallelWrite)
    };
    let e = r.unwrap_err();
    assert!(refused(&e), "gather into the revoked rank: {e}");
    assert!(recv[total..].iter().all(|&b| b == GUARD_BYTE), "gather wrote past the buffer");
    // Rank 0 may read the others: the same communicator still broadcasts from rank 1.
    if p > 1 {
        check_bcast::<u8>(world, &comm, n, 1, BcastAlgorithm::DirectRead, 71);
    }
    // The staging areas need no access to rank 0's memory.
    check_bcast::<u8>(world, &comm, n, 0, BcastAlgorithm::Staged, 72);
    if p > 1 {
        let e = comm.calibrate(3).unwrap_err();
        assert!(refused(&e), "calibration with a revoked rank: {e}");
    }
    comm.barrier().unwrap();
    check_bcast::<u8>(world, &comm, 4097, p - 1, BcastAlgorithm::Auto, 73);
    println!("ZCOLL-RANK-OK {me}");
}

/// Calibration produces a complete, plausible profile on rank 0, and says what it could
/// not measure with this few ranks.
fn calibrate(world: &SimpleCommunicator, comm: &Comm) {
    let profile = comm.calibrate(5).unwrap();
    assert_eq!(profile.is_some(), world.rank() == 0);
    let Some(profile) = profile else { return };
    let p = profile.params;
    for (name, v) in
        [("alpha", p.alpha), ("beta", p.beta), ("l", p.l), ("memcpy_beta", p.memcpy_beta), ("flag", p.flag)]
    {
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }
    assert!(p.s >= 4096.0);
    // One rank measures a local copy alone: the transfers, gamma and the rounds are
    // noted as not measured. Two ranks or more time the broadcasts, and say what they fitted.
    let expected_notes = match world.size() {
        1 => 4,
        2 => 3,
        _ => 2,
    };
    // With more ranks than cores the contention fit may fail; it is then noted, never wrong.
    assert!(profile.notes.len() >= expected_notes, "{:?}", profile.notes);
    assert!(profile.notes.len() <= 6, "{:?}", profile.notes);
    if world.size() >= 2 {
        for fitted in ["memcpy_beta", "sync_copy"] {
            assert!(profile.notes.iter().any(|n| n.starts_with(fitted)), "{fitted}: {:?}", profile.notes);
        }
        assert!(p.sync_copy.is_finite() && p.sync_staged.is_finite() && p.sync_staged > 0.0, "{p:?}");
    }
    // Local ranks 1 and 3 on a virtual second socket: two levels of readers across
    // sockets, always enough to fit the cross factor. Without them, none.
    match std::env::var("ZCOLL_VIRTUAL_SOCKETS").ok().and_then(|k| k.parse::<usize>().ok()) {
        Some(2) if world.size() >= 4 => {
            let x = p.cross_socket.expect("a cross-socket factor with ranks on two sockets");
            assert_eq!(x.sockets, 2);
            assert!(x.a.is_finite() && x.b.is_finite(), "{x:?}");
        }
        _ => assert_eq!(p.cross_socket, None, "one socket here"),
    }
    let again = zcoll::tune::Profile::from_toml(&profile.to_toml()).unwrap();
    assert_eq!(again, profile);
}

/// `Comm::new` fails on the first (virtual) node only: its ranks force XPMEM, which this
/// machine lacks. Every rank must get an `Err` (the first node its own, the others
/// `PeerFailed` naming rank 0) instead of waiting for ever in the set-up of the hierarchy;
/// the world communicator then builds a working `Comm`.
fn setup_fails(world: &SimpleCommunicator) {
    let k: i32 = std::env::var("ZCOLL_NODE_SIZE").expect("virtual nodes").parse().unwrap();
    let me = world.rank();
    if me < k {
        std::env::set_var("ZCOLL_TRANSPORT", "xpmem");
        std::env::set_var("XPMEM_LIBRARY", "/nonexistent/libxpmem.so.0");
    }
    let start = std::time::Instant::now();
    let Err(e) = Comm::new(world) else { panic!("a node failed, so every rank fails") };
    let took = start.elapsed();
    match me < k {
        true => assert!(matches!(e, Error::Unsupported { rank, .. } if rank == me), "{e}"),
        false => assert_eq!(e, Error::PeerFailed { rank: me, peer: 0 }),
    }
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    std::env::remove_var("ZCOLL_TRANSPORT");
    std::env::remove_var("XPMEM_LIBRARY");
    let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new after the failure: {e}"));
    check_bcast::<u8>(world, &comm, 100_003, world.size() - 1, BcastAlgorithm::Auto, 7);
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// `/dev/shm` (a tmpfs the launcher mounted) has room for a few pages only: `Comm::new`
/// fails on every rank with `Error::Segment` (the segment's creator naming `fallocate`,
/// the others its creation), rather than a rank dying of `SIGBUS` in the first call that
/// stages data.
fn small_shm(world: &SimpleCommunicator) {
    let me = world.rank();
    match Comm::new(world) {
        Err(Error::Segment { op, errno, .. }) if me == 0 => {
            assert_eq!((op, errno), ("fallocate", zcoll::Errno::from_raw(libc::ENOSPC)));
        }
        Err(Error::Segment { op: "creation on local rank 0", .. }) => {}
        Err(e) => panic!("rank {me}: {e}"),
        Ok(comm) => {
            // Stage through every rank's area, as a user's first calls would.
            let mut data = vec![me as u8; 200_000];
            let r = comm.broadcast_into_with(&mut data[..40_000], 0, BcastAlgorithm::Staged);
            let r = r.and(comm.broadcast_into(&mut data, 0));
            panic!("rank {me}: Comm::new succeeded in a full /dev/shm (broadcast: {r:?})");
        }
    }
    println!("ZCOLL-RANK-OK {me}");
}

/// `ZCOLL_NODE_SIZE` read otherwise by one rank than by the others (unset there, a value
/// it cannot read, another size): `Error::Config` naming it on every rank, not a wait for
/// ever in MPI (a rank splitting by shared memory and the others by color would call
/// different MPI collectives); with the same value everywhere again, `Comm::new` works.
fn node_size_disagrees(world: &SimpleCommunicator) {
    let k = std::env::var("ZCOLL_NODE_SIZE").expect("virtual nodes");
    let (me, last) = (world.rank(), world.size() - 1);
    for (odd, value) in [(last, None), (last, Some("two")), (0, Some("1000"))] {
        match (me == odd, value) {
            (true, None) => std::env::remove_var("ZCOLL_NODE_SIZE"),
            (true, Some(v)) => std::env::set_var("ZCOLL_NODE_SIZE", v),
            (false, _) => std::env::set_var("ZCOLL_NODE_SIZE", &k),
        }
        let start = std::time::Instant::now();
        match Comm::new(world) {
            Err(Error::Config { name: "ZCOLL_NODE_SIZE", .. }) => {}
            Err(e) => panic!("rank {odd} with ZCOLL_NODE_SIZE={value:?}: {e}, not Error::Config"),
            Ok(_) => panic!("rank {odd} with ZCOLL_NODE_SIZE={value:?}, the others {k}: accepted"),
        }
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    }
    std::env::set_var("ZCOLL_NODE_SIZE", &k);
    let comm =
        Comm::new(world).unwrap_or_else(|e| panic!("Comm::new with ZCOLL_NODE_SIZE={k} everywhere: {e}"));
    assert_eq!(comm.info().virtual_nodes, Some(k.parse().unwrap()));
    check_bcast::<u8>(world, &comm, 100_003, last, BcastAlgorithm::Auto, 7);
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// An algorithm variable set otherwise on the last rank than on the others (a value it
/// cannot read, or another algorithm) while every rank asks for `Auto`: `Mismatch`
/// "algorithm" naming the last rank on every rank, inside a node and across nodes alike,
/// not a rank returning its `Config` error alone while the others wait in MPI (an
/// alltoall or a scatter with one rank per node hung so), nor an error on the odd rank's
/// node and `PeerFailed` on the others. Large calls, so that no giver leaves a round
/// before its verdict (the deferred verdict inside a node). Then the same unreadable
/// value on every rank: that variable's `Config` error on every rank, whichever path the
/// call takes (with one rank per node, the broadcast and the reductions went straight to
/// MPI once the checks agreed, and returned `Ok`).
fn algorithm_var_disagrees(world: &SimpleCommunicator) {
    use zcoll::op::Builtin;
    let (me, p) = (world.rank(), world.size() as usize);
    let last = world.size() - 1;
    let n = 40_000usize;
    type Call = fn(&Comm, i32, usize) -> zcoll::Result<()>;
    let alltoall: Call =
        |c, _, n| c.all_to_all_into(&vec![1u8; n * c.size() as usize], &mut vec![0u8; n * c.size() as usize]);
    let bcast: Call = |c, _, n| c.broadcast_into(&mut vec![2u8; n], 0);
    let scatter: Call = |c, me, n| {
        let p = c.size() as usize;
        match me {
            0 => c.scatter_into_root(&vec![3u8; n * p], &mut vec![0u8; n], 0),
            _ => c.scatter_into(&mut vec![0u8; n], 0),
        }
    };
    let allreduce: Call =
        |c, _, n| c.all_reduce_into(&vec![1u64; n / 8], &mut vec![0u64; n / 8], Builtin::Sum);
    let gatherv: Call = |c, me, n| {
        let p = c.size() as usize;
        let counts = vec![n as mpi::Count; p];
        let displs: Vec<mpi::Count> = (0..p).map(|r| (r * n) as mpi::Count).collect();
        match me {
            0 => c.gather_varcount_into_root(&vec![4u8; n], &mut vec![0u8; n * p], &counts, &displs, 0),
            _ => c.gather_varcount_into(&vec![4u8; n], 0),
        }
    };
    let reduce: Call = |c, me, n| match me {
        0 => c.reduce_into_root(&vec![1u64; n / 8], &mut vec![0u64; n / 8], 0, Builtin::Sum),
        _ => c.reduce_into(&vec![1u64; n / 8], 0, Builtin::Sum),
    };
    let layout: Call = |c, _, n| {
        let p = c.size() as usize;
        let every_other = zcoll::Layout::vector(n / 2, 1, 2)?.resized(n)?;
        c.all_to_all_layout_into(&vec![5u8; n * p], &every_other, &mut vec![0u8; n * p], &every_other)
    };
    let cases: [(&str, &str, Call); 8] = [
        ("ZCOLL_ALLTOALL_ALGORITHM", "bogus", alltoall),
        ("ZCOLL_ALLTOALL_ALGORITHM", "pap-read", alltoall),
        ("ZCOLL_BCAST_ALGORITHM", "staged", bcast),
        ("ZCOLL_SCATTER_ALGORITHM", "bogus", scatter),
        ("ZCOLL_ALLREDUCE_ALGORITHM", "staged", allreduce),
        ("ZCOLL_GATHERV_ALGORITHM", "staged", gatherv),
        ("ZCOLL_LAYOUT_ALGORITHM", "bogus", layout),
        ("ZCOLL_LAYOUT_ALGORITHM", "packed", layout),
    ];
    for (var, value, call) in cases {
        if me == last {
            std::env::set_var(var, value);
        }
        let comm =
            Comm::new(world).unwrap_or_else(|e| panic!("Comm::new with {var}={value} on one rank: {e}"));
        std::env::remove_var(var);
        let e = call(&comm, me, n);
        assert_eq!(
            e,
            Err(Error::Mismatch { rank: me, culprit: last, what: "algorithm" }),
            "{var}={value} on rank {last} only, at {p} ranks"
        );
        // The communicator still works (for what its last rank's variable does not name).
        comm.barrier().unwrap_or_else(|e| panic!("a barrier after {var}={value}: {e}"));
    }
    let unreadable: [(&str, Call); 7] = [
        ("ZCOLL_BCAST_ALGORITHM", bcast),
        ("ZCOLL_ALLREDUCE_ALGORITHM", allreduce),
        ("ZCOLL_REDUCE_ALGORITHM", reduce),
        ("ZCOLL_SCATTER_ALGORITHM", scatter),
        ("ZCOLL_ALLTOALL_ALGORITHM", alltoall),
        ("ZCOLL_GATHERV_ALGORITHM", gatherv),
        ("ZCOLL_LAYOUT_ALGORITHM", layout),
    ];
    let mut wrong = Vec::new();
    for (var, call) in unreadable {
        std::env::set_var(var, "bogus");
        let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new with {var}=bogus: {e}"));
        std::env::remove_var(var);
        match call(&comm, me, n) {
            Err(Error::Config { name, value, .. }) if name == var && value == "bogus" => {}
            other => wrong.push(format!("{var}=bogus: {other:?}")),
        }
        comm.barrier().unwrap_or_else(|e| panic!("a barrier after {var}=bogus: {e}"));
    }
    assert!(
        wrong.is_empty(),
        "on every rank, at {p} ranks, not the variable's Config error:\n{}",
        wrong.join("\n")
    );
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// A variable zcoll cannot read (named by `ZCOLL_TEST_BAD_VAR`, set by the launcher) is
/// `Error::Config` naming it on every rank, not a silent default; without it, `Comm::new`
/// works. Then an unreadable `ZCOLL_VIRTUAL_SOCKETS` fails calibration the same way.
fn bad_env(world: &SimpleCommunicator) {
    let var = std::env::var("ZCOLL_TEST_BAD_VAR").expect("the variable under test");
    match Comm::new(world) {
        Err(Error::Config { name, .. }) => assert_eq!(name, var),
        Err(e) => panic!("{var}: {e}, not Error::Config"),
        Ok(_) => panic!("{var}={:?} was accepted", std::env::var(&var)),
    }
    std::env::remove_var(&var);
    let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new without {var}: {e}"));
    std::env::set_var("ZCOLL_VIRTUAL_SOCKETS", "two");
    match comm.calibrate(1) {
        Err(Error::Config { name: "ZCOLL_VIRTUAL_SOCKETS", .. }) => {}
        other => panic!("ZCOLL_VIRTUAL_SOCKETS=two: {:?}", other.map(|_| ())),
    }
    comm.barrier().unwrap();
    println!("ZCOLL-RANK-OK {}", world.rank());
}

/// `Comm::split` and `Comm::duplicate`: even and odd ranks apart (keys reversing the
/// order), each half broadcasting and reducing against rsmpi on the same split of the
/// world; a duplicate works beside its original.
fn split(world: &SimpleCommunicator, comm: &Comm) {
    use mpi::collective::SystemOperation;
    use mpi::topology::Color;
    let me = world.rank();
    let color = Color::with_value(me % 2);
    let half = comm.split(color, -me).unwrap().expect("every rank has a color");
    let theirs = world.split_by_color_with_key(color, -me).expect("a color");
    assert_eq!((half.rank(), half.size()), (theirs.rank(), theirs.size()));
    check_bcast::<u32>(&theirs, &half, 70_001, theirs.size() - 1, BcastAlgorithm::Auto, 11);
    let send: Vec<u64> = (0..10_000).map(|i| i * (me as u64 + 1)).collect();
    let (mut got, mut want) = (vec![0u64; 10_000], vec![0u64; 10_000]);
    half.all_reduce_into(&send, &mut got, zcoll::op::Builtin::Sum).unwrap();
    theirs.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
    assert_eq!(got, want, "allreduce on the split communicator");
    assert!(comm.split(Color::undefined(), 0).unwrap().is_none());
    let dup = comm.duplicate().unwrap();
    assert_eq!((dup.rank(), dup.size()), (comm.rank(), comm.size()));
    check_bcast::<u8>(world, &dup, 4097, 0, BcastAlgorithm::Auto, 12);
    check_bcast::<u8>(world, comm, 4097, 0, BcastAlgorithm::Auto, 13);
    if world.size() >= 2 {
        intercommunicator(world, &theirs);
    }
}

/// An intercommunicator between the two halves of `split`: refused on every rank, and
/// nothing else happens (the world's communicator works after).
fn intercommunicator(world: &SimpleCommunicator, half: &SimpleCommunicator) {
    use mpi::raw::{AsRaw, FromRaw};
    let (me, p) = (world.rank(), world.size());
    // Each half's leader is its rank 0 in `half`: the highest world rank of its parity.
    let highest = |parity: i32| if (p - 1) % 2 == parity { p - 1 } else { p - 2 };
    let mut raw = std::mem::MaybeUninit::uninit();
    // SAFETY: every rank calls it with valid communicators, the other half's leader in
    // the world, and one tag; it writes the new handle into `raw`.
    let rc = unsafe {
        mpi::ffi::MPI_Intercomm_create(
            half.as_raw(),
            0,
            world.as_raw(),
            highest(1 - me % 2),
            77,
            raw.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "MPI_Intercomm_create");
    // SAFETY: MPI returned an intercommunicator handle in `raw`.
    let inter = unsafe { mpi::topology::InterCommunicator::from_raw(raw.assume_init()) };
    match Comm::new(&inter) {
        Err(Error::Unsupported { rank, what }) => {
            assert_eq!((rank, what.as_str()), (inter.rank(), "an intercommunicator"))
        }
        other => panic!("an intercommunicator gave {:?}", other.map(|_| ())),
    }
    world.barrier();
}

/// A rank panics while it holds an exposure (the program catches the panic): dropping the
/// exposure during the unwinding must not leave its peers waiting in their withdrawal.
/// They get an `Err` within seconds, and the communicator then works for everyone.
fn exposure_panic(world: &SimpleCommunicator, comm: &Comm) {
    let me = world.rank();
    let bad = world.size() - 1;
    let mut buf = vec![me as u64; 100_000];
    let start = std::time::Instant::now();
    let outcome = crate::common::quietly(|| {
        let mut exposed = comm.expose(&mut buf).expect("expose");
        exposed.broadcast(0).expect("a broadcast on the exposure");
        assert!(me != bad, "the injected panic, with the exposure alive");
        exposed.withdraw()
    });
    match (me == bad, outcome) {
        (true, None) => {}
        (false, Some(Err(_))) => {}
        (_, other) => panic!("rank {me}: {:?}", other.map(|r| r.map_err(|e| e.to_string()))),
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(5), "took {:?}", start.elapsed());
    assert!(buf.iter().all(|&x| x == 0), "the broadcast's data");
    comm.barrier().unwrap();
    check_bcast::<u8>(world, comm, 10_007, bad, BcastAlgorithm::Auto, 21);
}
