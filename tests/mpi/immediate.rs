//! Nonblocking and persistent collectives (`Comm::immediate_scope`): every `immediate_*`
//! call in flight at once on one communicator, mixed with blocking calls, completed in
//! another order than issued, compared with rsmpi's blocking collectives (the
//! variable-count ones with independently computed values); a leaked and a dropped
//! request; a bad call, an `Err` from `wait` on every rank with the receive buffer
//! unchanged; persistent handles of every collective started 1000 times (fewer for large
//! buffers), their send buffers changed between starts, each start compared with
//! computed values and many with rsmpi's blocking collective, and a bad persistent call.

use crate::common::pattern;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Threading;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use zcoll::op::Builtin;
use zcoll::{wait_all, wait_any, Comm, Progress};

/// The scenario `immediate`; `immediate-multiple` initializes MPI with
/// `MPI_THREAD_MULTIPLE` first (so the worker runs calls across nodes too).
pub(crate) fn run(world: &SimpleCommunicator, multiple: bool) {
    let mut comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    let one_node = comm.info().nodes == 1;
    let thread = matches!(comm.info().progress, Progress::Thread { .. });
    let forced_wait = std::env::var("ZCOLL_PROGRESS").as_deref() == Ok("wait");
    assert_eq!(thread, (one_node || multiple) && !forced_wait, "progress: {}", comm.info().progress);
    let mut phases = Phases::new(world);
    for (k, &n) in [1usize, 1000, 70_001].iter().enumerate() {
        all_at_once(world, &mut comm, n, 10 * k as u64);
    }
    phases.end("all_at_once");
    leaked(world, &mut comm);
    no_worker_for_wait(world, &mut comm);
    bad_call(world, &mut comm);
    rsmpi_operators(world, &mut comm);
    any_and_test(world, &mut comm);
    phases.end("leaked..any_and_test");
    persistent(world, &mut comm);
    phases.end("persistent");
    for (n, starts) in [(1, 1000), (700, 200), (40_000, 10)] {
        persistent_rooted(world, &mut comm, n, starts);
    }
    phases.end("persistent_rooted");
    persistent_bad(world, &mut comm);
}

/// With `ZCOLL_TEST_PHASES` set, rank 0 prints how long each phase of the job took (a
/// barrier first, so a phase's time is the slowest rank's).
struct Phases<'a> {
    world: &'a SimpleCommunicator,
    on: bool,
    at: std::time::Instant,
}

impl<'a> Phases<'a> {
    fn new(world: &'a SimpleCommunicator) -> Self {
        let on = std::env::var_os("ZCOLL_TEST_PHASES").is_some();
        if on {
            world.barrier();
        }
        Phases { world, on, at: std::time::Instant::now() }
    }

    fn end(&mut self, phase: &str) {
        if self.on {
            self.world.barrier();
            if self.world.rank() == 0 {
                println!("ZCOLL-PHASE {phase} {:.3} s", self.at.elapsed().as_secs_f64());
            }
            self.at = std::time::Instant::now();
        }
    }
}

/// MPI initialized with `MPI_THREAD_MULTIPLE`, then [`run`].
pub(crate) fn run_multiple() {
    let (universe, got) = mpi::initialize_with_threading(Threading::Multiple).expect("MPI initializes once");
    assert_eq!(got, Threading::Multiple, "this MPI does not provide MPI_THREAD_MULTIPLE");
    let world = universe.world();
    run(&world, true);
    println!("ZCOLL-RANK-OK {}", world.rank());
}

fn input(rank: i32, n: usize, seed: u64) -> Vec<u64> {
    (0..n).map(|i| u64::from(pattern(seed, i)) + 1000 * rank as u64).collect()
}

/// Every collective issued at once, a blocking broadcast among them, waited for in
/// reverse order (and the last few with `wait_any`); then the same with rsmpi.
fn all_at_once(world: &SimpleCommunicator, comm: &mut Comm, n: usize, seed: u64) {
    let (me, p) = (world.rank(), world.size());
    let pu = p as usize;
    let root = p - 1;
    let mine = input(me, n, seed);
    let per_rank: Vec<u64> = (0..n * pu).map(|i| u64::from(pattern(seed + 1, i)) + me as u64).collect();
    let mut bcast = if me == root { input(root, n, seed + 2) } else { vec![0; n] };
    let mut blocking = if me == 0 { input(0, n, seed + 3) } else { vec![0; n] };
    let (mut sum, mut max, mut all, mut exchanged) =
        (vec![0; n], vec![0; n], vec![0; n * pu], vec![0; n * pu]);
    let (mut scattered, mut gathered) = (vec![0; n], vec![0; n * pu]);
    // Variable counts: rank r contributes r + 1 elements (times a block `m`).
    let m = n.div_ceil(8);
    let counts: Vec<Count> = (0..p).map(|r| ((r as usize + 1) * m) as Count).collect();
    let displs: Vec<Count> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect();
    let total = counts.iter().sum::<Count>() as usize;
    let vmine: Vec<u64> = input(me, counts[me as usize] as usize, seed + 4);
    let vall_send: Vec<u64> = (0..total).map(|i| i as u64 * 3 + seed).collect();
    let (mut vall, mut vgathered, mut vscattered) =
        (vec![0; total], vec![0; total], vec![0; counts[me as usize] as usize]);
    // All-to-all-v: to rank r, `r + 1` elements; from rank q, `me + 1`.
    let to: Vec<Count> = (0..p).map(|r| r + 1).collect();
    let to_displs: Vec<Count> = (0..p).map(|r| r * (r + 1) / 2).collect();
    let from: Vec<Count> = vec![me + 1; pu];
    let from_displs: Vec<Count> = (0..p).map(|q| q * (me + 1)).collect();
    let vsend: Vec<u64> =
        (0..p).flat_map(|r| (0..=r).map(move |i| (me * 100 + r) as u64 * 1000 + i as u64)).collect();
    let mut vrecv = vec![0u64; pu * (me as usize + 1)];
    let mut reduced = vec![0u64; n];
    // Reductions queued the other ways: a user operator (its call boxed with it), and
    // a lent built-in operator over another element type (queued as bytes).
    let small: Vec<i32> = mine.iter().map(|&x| (x % 1_000_003) as i32 - 500_000).collect();
    let (mut user_sum, mut small_min) = (vec![0u64; n], vec![0i32; n]);
    let lent_min: &Builtin = &Builtin::Min;
    let add = zcoll::op::UserOp::commutative(|acc: &mut [u64], x: &[u64]| {
        acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.wrapping_add(*b))
    });

    let outcome = comm.immediate_scope(|s| {
        let mut reqs = vec![
            s.immediate_broadcast_into(&mut bcast, root),
            s.immediate_all_reduce_into(&mine, &mut sum, Builtin::Sum),
            s.immediate_all_gather_into(&mine, &mut all),
            s.immediate_all_to_all_into(&per_rank, &mut exchanged),
            match me == 0 {
                true => s.immediate_scatter_into_root(&per_rank, &mut scattered, 0),
                false => s.immediate_scatter_into(&mut scattered, 0),
            },
            match me == root {
                true => s.immediate_gather_into_root(&mine, &mut gathered, root),
                false => s.immediate_gather_into(&mine, root),
            },
        ];
        // A blocking call in the middle: it runs after the six above, before the rest.
        s.blocking(|c| c.broadcast_into(&mut blocking, 0))?;
        reqs.push(match me == 0 {
            true => s.immediate_reduce_into_root(&mine, &mut reduced, 0, Builtin::Max),
            false => s.immediate_reduce_into(&mine, 0, Builtin::Max),
        });
        reqs.push(s.immediate_all_reduce_into(&mine, &mut max, Builtin::Max));
        reqs.push(s.immediate_all_reduce_into(&mine, &mut user_sum, add));
        reqs.push(s.immediate_all_reduce_into(&small, &mut small_min, lent_min));
        reqs.push(s.immediate_all_gather_varcount_into(&vmine, &mut vall, &counts, &displs));
        reqs.push(match me == 0 {
            true => s.immediate_gather_varcount_into_root(&vmine, &mut vgathered, &counts, &displs, 0),
            false => s.immediate_gather_varcount_into(&vmine, 0),
        });
        reqs.push(match me == root {
            true => {
                s.immediate_scatter_varcount_into_root(&vall_send, &counts, &displs, &mut vscattered, root)
            }
            false => s.immediate_scatter_varcount_into(&mut vscattered, root),
        });
        reqs.push(s.immediate_all_to_all_varcount_into(
            &vsend,
            &to,
            &to_displs,
            &mut vrecv,
            &from,
            &from_displs,
        ));
        reqs.push(s.immediate_barrier());
        let mut tail = reqs.split_off(reqs.len() - 4);
        while let Some((_, r)) = wait_any(&mut tail) {
            r?;
        }
        reqs.reverse();
        wait_all(reqs)
    });
    outcome.unwrap_or_else(|e| panic!("rank {me}, n = {n}: {e}"));

    // The oracle: rsmpi's blocking collectives.
    let at = |r| world.process_at_rank(r);
    let mut want = if me == root { input(root, n, seed + 2) } else { vec![0; n] };
    at(root).broadcast_into(&mut want[..]);
    assert_eq!(bcast, want, "broadcast, n = {n}");
    let mut want = if me == 0 { input(0, n, seed + 3) } else { vec![0; n] };
    at(0).broadcast_into(&mut want[..]);
    assert_eq!(blocking, want, "the blocking broadcast, n = {n}");
    let mut want = vec![0; n];
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::sum());
    assert_eq!(sum, want, "allreduce, n = {n}");
    assert_eq!(user_sum, want, "allreduce under a user operator, n = {n}");
    let mut want_min = vec![0i32; n];
    world.all_reduce_into(&small[..], &mut want_min[..], SystemOperation::min());
    assert_eq!(small_min, want_min, "allreduce min of i32, n = {n}");
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::max());
    assert_eq!(max, want, "allreduce max, n = {n}");
    if me == 0 {
        assert_eq!(reduced, want, "reduce, n = {n}");
    }
    let mut want = vec![0; n * pu];
    world.all_gather_into(&mine[..], &mut want[..]);
    assert_eq!(all, want, "allgather, n = {n}");
    if me == root {
        assert_eq!(gathered, want, "gather, n = {n}");
    }
    world.all_to_all_into(&per_rank[..], &mut want[..]);
    assert_eq!(exchanged, want, "alltoall, n = {n}");
    let mut want = vec![0; n];
    match me == 0 {
        true => at(0).scatter_into_root(&per_rank[..], &mut want[..]),
        false => at(0).scatter_into(&mut want[..]),
    }
    assert_eq!(scattered, want, "scatter, n = {n}");
    // The variable-count ones, computed.
    let want: Vec<u64> = (0..p).flat_map(|r| input(r, counts[r as usize] as usize, seed + 4)).collect();
    assert_eq!(vall, want, "allgatherv, n = {n}");
    if me == 0 {
        assert_eq!(vgathered, want, "gatherv, n = {n}");
    }
    let d = displs[me as usize] as usize;
    assert_eq!(vscattered, vall_send[d..d + vscattered.len()], "scatterv, n = {n}");
    let want: Vec<u64> =
        (0..p).flat_map(|q| (0..=me).map(move |i| (q * 100 + me) as u64 * 1000 + i as u64)).collect();
    assert_eq!(vrecv, want, "alltoallv, n = {n}");
}

/// A request leaked and one dropped: their calls still run in their turn, and the
/// buffers hold the result after the scope.
fn leaked(world: &SimpleCommunicator, comm: &mut Comm) {
    let me = world.rank();
    let n = 50_000;
    let fill = |r: i32| if me == 0 { input(0, n, 77 + r as u64) } else { vec![0; n] };
    let (mut a, mut b, mut c) = (fill(0), fill(1), fill(2));
    comm.immediate_scope(|s| {
        std::mem::forget(s.immediate_broadcast_into(&mut a, 0));
        drop(s.immediate_broadcast_into(&mut b, 0));
        s.immediate_broadcast_into(&mut c, 0).wait()
    })
    .expect("a call after a leaked one");
    assert_eq!(a, input(0, n, 77), "the leaked request's broadcast");
    assert_eq!(b, input(0, n, 78), "the dropped request's broadcast");
    assert_eq!(c, input(0, n, 79), "the broadcast after them");
    // Leaked as the last call of a scope: the scope still completes it.
    let mut d = fill(3);
    comm.immediate_scope(|s| std::mem::forget(s.immediate_broadcast_into(&mut d, 0)));
    assert_eq!(d, input(0, n, 80), "a leaked request at the end of the scope");
}

/// A scope whose calls are small (below `wake_bytes`) and only waited for starts no worker
/// thread (the caller runs them in `wait`); its results are rsmpi's.
fn no_worker_for_wait(world: &SimpleCommunicator, comm: &mut Comm) {
    let me = world.rank();
    let n = 16;
    let bytes = n * std::mem::size_of::<u64>();
    let eager = matches!(comm.info().progress, Progress::Thread { wake_bytes } if wake_bytes <= bytes);
    // The scope's workers only, by name: the MPI library starts and ends threads of its
    // own (a count of every task once failed at load 14 on a rank alone on its node).
    let threads = || {
        std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == zcoll::WORKER_NAME)
            .count()
    };
    let mine = input(me, n, 61);
    let mut sum = vec![0u64; n];
    let mut x = if me == 0 { input(0, n, 62) } else { vec![0; n] };
    // The worker of an earlier scope has finished its work when that scope returns, but
    // its thread leaves `/proc/self/task` a moment later (once failed on a loaded machine).
    let settle = std::time::Instant::now();
    let mut before = threads();
    while before > 0 && settle.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::yield_now();
        before = threads();
    }
    let during = comm
        .immediate_scope(|s| {
            s.immediate_all_reduce_into(&mine, &mut sum, Builtin::Sum).wait()?;
            s.immediate_broadcast_into(&mut x, 0).wait()?;
            Ok::<_, zcoll::Error>(threads())
        })
        .unwrap_or_else(|e| panic!("rank {me}: {e}"));
    if !eager {
        assert_eq!((before, during), (0, 0), "rank {me}: a scope of small waited calls started a worker");
    }
    let mut want = vec![0; n];
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::sum());
    assert_eq!(sum, want, "the waited allreduce");
    assert_eq!(x, input(0, n, 62), "the waited broadcast");
    // The check above can fail: a `test` starts the worker where there is one, and the
    // count by name sees it (the thread names itself as it starts, hence the polling).
    if let Progress::Thread { .. } = comm.info().progress {
        let mut y = if me == 0 { input(0, n, 63) } else { vec![0; n] };
        let seen = comm
            .immediate_scope(|s| {
                let req = s.immediate_broadcast_into(&mut y, 0);
                let _ = req.test();
                let start = std::time::Instant::now();
                let mut seen = threads();
                while seen == 0 && start.elapsed() < std::time::Duration::from_secs(10) {
                    std::thread::yield_now();
                    seen = threads();
                }
                req.wait().map(|()| seen)
            })
            .unwrap_or_else(|e| panic!("rank {me}: {e}"));
        assert_eq!(seen, 1, "rank {me}: the worker a test starts, counted by name");
        assert_eq!(y, input(0, n, 63), "the tested broadcast");
    }
}

/// A bad call (the last rank's receive buffer one element longer): `Err` from `wait` on
/// every rank, the receive buffers unchanged; the next call works.
fn bad_call(world: &SimpleCommunicator, comm: &mut Comm) {
    let (me, p) = (world.rank(), world.size());
    let n = 1000;
    let mine = input(me, n, 5);
    let len = if me == p - 1 { n * p as usize + 1 } else { n * p as usize };
    let mut all = vec![7u64; len];
    let mut sum = vec![0u64; n];
    let (tested, bad, good) = comm.immediate_scope(|s| {
        let bad = s.immediate_all_gather_into(&mine, &mut all);
        let good = s.immediate_all_reduce_into(&mine, &mut sum, Builtin::Sum);
        // Polled to its end first: `test` and then `wait` both report the error.
        let tested = loop {
            match bad.test() {
                Some(r) => break r,
                None => std::thread::yield_now(),
            }
        };
        (tested, bad.wait(), good.wait())
    });
    assert!(bad.is_err(), "rank {me}: a mismatched allgather succeeded");
    assert_eq!(
        tested.map_err(|e| e.to_string()),
        bad.as_ref().map_err(|e| e.to_string()).copied(),
        "rank {me}: test and wait disagree"
    );
    assert!(all.iter().all(|&x| x == 7), "rank {me}: the failed call wrote its receive buffer");
    good.unwrap_or_else(|e| panic!("rank {me}: the call after the bad one: {e}"));
    let mut want = vec![0; n];
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::sum());
    assert_eq!(sum, want, "the allreduce after the bad call");
}

/// rsmpi's operators passed as an rsmpi program passes them (`SystemOperation::sum()` by
/// value, a lent `&SystemOperation`), to the immediate reductions and the persistent ones,
/// compared with rsmpi's immediate reductions (run in rsmpi's own request scope) and its
/// blocking ones; a bitwise operator on floats is an `Err` on every rank, the receive
/// buffer unchanged.
#[allow(clippy::needless_borrows_for_generic_args)] // the lent operators are under test
fn rsmpi_operators(world: &SimpleCommunicator, comm: &mut Comm) {
    let (me, p) = (world.rank(), world.size());
    let n = 3000;
    let mine = input(me, n, 40);
    let floats: Vec<f64> = mine.iter().map(|&x| (x % 997) as f64 * 0.25 - 60.0).collect();
    let words: Vec<u32> = mine.iter().map(|&x| x as u32 ^ (me as u32) << 7).collect();
    let xor = SystemOperation::bitwise_xor();
    let (mut fsum, mut wxor, mut imax) = (vec![0.0f64; n], vec![0u32; n], vec![0u64; n]);
    let mut refused = vec![7.0f64; n];
    let outcome = comm.immediate_scope(|s| {
        let a = s.immediate_all_reduce_into(&floats, &mut fsum, SystemOperation::sum());
        let b = s.immediate_all_reduce_into(&words, &mut wxor, &xor);
        let c = match me == 0 {
            true => s.immediate_reduce_into_root(&mine, &mut imax, 0, SystemOperation::max()),
            false => s.immediate_reduce_into(&mine, 0, &SystemOperation::max()),
        };
        let bad = s.immediate_all_reduce_into(&floats, &mut refused, SystemOperation::bitwise_or());
        (wait_all([a, b, c]), bad.wait())
    });
    let (good, bad) = outcome;
    good.unwrap_or_else(|e| panic!("rank {me}: reductions under rsmpi's operators: {e}"));
    match bad {
        Err(zcoll::Error::Unsupported { .. }) => {}
        other => panic!("rank {me}: a bitwise operator on floats gave {other:?}, not Unsupported"),
    }
    assert!(refused.iter().all(|&x| x == 7.0), "rank {me}: the refused call wrote its receive buffer");
    // The oracle: rsmpi's immediate reductions, the same operators, in rsmpi's scope.
    let (mut want_sum, mut want_xor) = (vec![0.0f64; n], vec![0u32; n]);
    mpi::request::scope(|sc| {
        let a = world.immediate_all_reduce_into(sc, &floats[..], &mut want_sum[..], SystemOperation::sum());
        let b = world.immediate_all_reduce_into(sc, &words[..], &mut want_xor[..], &xor);
        a.wait();
        b.wait();
    });
    assert_eq!(fsum, want_sum, "allreduce of f64 under SystemOperation::sum()");
    assert_eq!(wxor, want_xor, "allreduce of u32 under &SystemOperation::bitwise_xor()");
    let mut want_max = vec![0u64; n];
    world.all_reduce_into(&mine[..], &mut want_max[..], SystemOperation::max());
    if me == 0 {
        assert_eq!(imax, want_max, "reduce under SystemOperation::max()");
    }
    // Persistent: started several times, the send buffer changed between starts.
    let (mut send, mut recv, mut rooted) = (floats.clone(), vec![0.0f64; n], vec![0i64; n]);
    let mut isend: Vec<i64> = mine.iter().map(|&x| x as i64 - 5000 * p as i64).collect();
    let min = SystemOperation::min();
    for start in 0..3 {
        let scale = f64::from(start + 1);
        comm.immediate_scope(|s| {
            let mut all = s.all_reduce_init(&mut send, &mut recv, &min);
            let mut to_root = s.reduce_init(
                &mut isend,
                (me == p - 1).then_some(&mut rooted[..]),
                p - 1,
                SystemOperation::product(),
            );
            all.with_buffers(|(send, _)| send.iter_mut().for_each(|x| *x *= scale));
            to_root.with_buffers(|(send, _)| send.iter_mut().for_each(|x| *x = x.wrapping_add(start.into())));
            zcoll::wait_all([all.start(), to_root.start()])
        })
        .unwrap_or_else(|e| panic!("rank {me}, start {start}: persistent reductions: {e}"));
        let mut want = vec![0.0f64; n];
        world.all_reduce_into(&send[..], &mut want[..], SystemOperation::min());
        assert_eq!(recv, want, "persistent allreduce under &SystemOperation::min(), start {start}");
        let mut want = vec![0i64; n];
        world.all_reduce_into(&isend[..], &mut want[..], SystemOperation::product());
        if me == p - 1 {
            assert_eq!(rooted, want, "persistent reduce under SystemOperation::product(), start {start}");
        }
    }
}

/// `wait_any` hands back every request once; `test` polls a large call to its end.
fn any_and_test(world: &SimpleCommunicator, comm: &mut Comm) {
    let me = world.rank();
    let n = 100_000;
    let mut bufs: Vec<Vec<u64>> =
        (0..4).map(|k| if me == 0 { input(0, n, 90 + k) } else { vec![0; n] }).collect();
    let mut sum = vec![0u64; n];
    let mine = input(me, n, 95);
    comm.immediate_scope(|s| {
        let mut reqs: Vec<_> = bufs.iter_mut().map(|b| s.immediate_broadcast_into(b, 0)).collect();
        let mut seen = Vec::new();
        while let Some((i, r)) = wait_any(&mut reqs) {
            r?;
            seen.push(i);
        }
        assert_eq!(seen.len(), 4, "wait_any returned {seen:?}");
        let req = s.immediate_all_reduce_into(&mine, &mut sum, Builtin::Sum);
        let r = loop {
            match req.test() {
                Some(r) => break r,
                None => std::hint::spin_loop(),
            }
        };
        assert!(req.is_done() && req.test().is_some(), "a done request stays done");
        r
    })
    .unwrap_or_else(|e| panic!("rank {me}: {e}"));
    for (k, b) in bufs.iter().enumerate() {
        assert_eq!(*b, input(0, n, 90 + k as u64), "wait_any's broadcast {k}");
    }
    let mut want = vec![0; n];
    world.all_reduce_into(&mine[..], &mut want[..], SystemOperation::sum());
    assert_eq!(sum, want, "the tested allreduce");
}

/// Persistent handles started 1000 times: a broadcast whose root changes the data between
/// starts, an allreduce and a barrier, interleaved; then a start whose request is leaked,
/// which the next use of the buffers waits for.
fn persistent(world: &SimpleCommunicator, comm: &mut Comm) {
    let (me, p) = (world.rank(), world.size());
    let root = p / 2;
    let n = 257;
    let mut buf = vec![0u64; n];
    let mut mine: Vec<u64> = (0..n as u64).map(|i| i + me as u64).collect();
    let mut mine2 = mine.clone();
    let mut sum = vec![0u64; n];
    let mut reduced = vec![0u64; n];
    let want_sum: Vec<u64> = (0..n as u64).map(|i| i * p as u64 + (p * (p - 1) / 2) as u64).collect();
    comm.immediate_scope(|s| {
        let mut bcast = s.broadcast_init(&mut buf, root);
        let mut allreduce = s.all_reduce_init(&mut mine, &mut sum, Builtin::Sum);
        let mut reduce = s.reduce_init(&mut mine2, (me == 0).then_some(&mut reduced[..]), 0, Builtin::Sum);
        let mut barrier = s.barrier_init();
        for step in 0..1000u64 {
            if me == root {
                bcast.with_buffers(|b| {
                    b.iter_mut().enumerate().for_each(|(i, x)| *x = step * 1_000_003 + i as u64)
                });
            }
            let r1 = bcast.start();
            let r2 = allreduce.start();
            let r3 = reduce.start();
            barrier.start().wait()?;
            wait_all([r3, r2, r1])?;
            bcast.with_buffers(|b| {
                assert!(
                    b.iter().enumerate().all(|(i, &x)| x == step * 1_000_003 + i as u64),
                    "bcast start {step}"
                )
            });
            allreduce.with_buffers(|(_, sum)| assert_eq!(**sum, want_sum[..], "allreduce start {step}"));
            if me == 0 {
                reduce.with_buffers(|(_, r)| {
                    assert_eq!(r.as_deref(), Some(&want_sum[..]), "reduce start {step}")
                });
            }
        }
        if me == root {
            bcast.with_buffers(|b| b.fill(4242));
        }
        std::mem::forget(bcast.start());
        bcast.with_buffers(|b| assert!(b.iter().all(|&x| x == 4242), "after a leaked start"));
        Ok::<(), zcoll::Error>(())
    })
    .unwrap_or_else(|e| panic!("rank {me}: {e}"));
}

/// What rank `rank` sends at start `step`: `len` values that change with every start.
fn at_step(rank: i32, step: u64, len: usize) -> Vec<u64> {
    (0..len as u64).map(|i| (step << 40) + ((rank as u64) << 24) + i).collect()
}

/// Persistent scatter, gather and the four variable-count handles (`n` elements a block),
/// each started `starts` times with its send buffers rewritten between starts, two or
/// four handles in flight at once; after every start each result is compared with the
/// values computed here, and after the first 10 starts and every 100th with rsmpi's
/// blocking collective over the same send buffers.
fn persistent_rooted(world: &SimpleCommunicator, comm: &mut Comm, n: usize, starts: u64) {
    let (me, p) = (world.rank(), world.size());
    let pu = p as usize;
    let (ra, rb) = (p - 1, p / 2);
    // Variable counts: rank r's block has `((r + 1) % 3) * m` elements (rank 2 and 5: none).
    let m = n.div_ceil(4);
    let count = |r: i32| (((r + 1) % 3) as usize * m) as Count;
    let counts: Vec<Count> = (0..p).map(count).collect();
    let displs: Vec<Count> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect();
    let total = counts.iter().sum::<Count>() as usize;
    let mine = count(me) as usize;
    // All-to-all-v: to rank r, `count(r)` elements; from every rank, `count(me)`.
    let from = vec![count(me); pu];
    let from_displs: Vec<Count> = (0..p).map(|q| q * count(me)).collect();

    let mut sc_send = if me == ra { vec![0u64; n * pu] } else { Vec::new() };
    let mut sc_recv = vec![0u64; n];
    let mut ga_send = vec![0u64; n];
    let mut ga_recv = if me == rb { vec![0u64; n * pu] } else { Vec::new() };
    let mut scv_send = if me == rb { vec![0u64; total] } else { Vec::new() };
    let mut scv_recv = vec![0u64; mine];
    let mut gav_send = vec![0u64; mine];
    let mut gav_recv = if me == ra { vec![0u64; total] } else { Vec::new() };
    let mut agv_send = vec![0u64; mine];
    let mut agv_recv = vec![0u64; total];
    let mut atv_send = vec![0u64; total];
    let mut atv_recv = vec![0u64; mine * pu];
    let at = |r| world.process_at_rank(r);

    comm.immediate_scope(|s| {
        let scatter = match me == ra {
            true => s.scatter_init_root(&mut sc_send, &mut sc_recv, ra),
            false => s.scatter_init(&mut sc_recv, ra),
        };
        let gather = match me == rb {
            true => s.gather_init_root(&mut ga_send, &mut ga_recv, rb),
            false => s.gather_init(&mut ga_send, rb),
        };
        let scatterv = match me == rb {
            true => s.scatter_varcount_init_root(&mut scv_send, &counts, &displs, &mut scv_recv, rb),
            false => s.scatter_varcount_init(&mut scv_recv, rb),
        };
        let gatherv = match me == ra {
            true => s.gather_varcount_init_root(&mut gav_send, &mut gav_recv, &counts, &displs, ra),
            false => s.gather_varcount_init(&mut gav_send, ra),
        };
        let allgatherv = s.all_gather_varcount_init(&mut agv_send, &mut agv_recv, &counts, &displs);
        let alltoallv =
            s.all_to_all_varcount_init(&mut atv_send, &counts, &displs, &mut atv_recv, &from, &from_displs);
        let mut handles = [scatter, gather, scatterv, gatherv, allgatherv, alltoallv];
        for step in 0..starts {
            // New send data for this start, on every handle (an empty send stays empty).
            for (k, h) in handles.iter_mut().enumerate() {
                h.with_buffers(|(send, _)| {
                    let new = at_step(me, step * 8 + k as u64, send.len());
                    send.copy_from_slice(&new)
                });
            }
            let [scatter, gather, scatterv, gatherv, allgatherv, alltoallv] = &mut handles;
            // Two handles in flight, then four, waited for in another order.
            let r1 = scatter.start();
            let r2 = gather.start();
            wait_all([r2, r1])?;
            let r3 = scatterv.start();
            let r4 = gatherv.start();
            let r5 = allgatherv.start();
            let r6 = alltoallv.start();
            wait_all([r6, r4, r5, r3])?;

            let what = |c: &str| format!("{c}, n = {n}, start {step}, rank {me}");
            // Some starts against rsmpi's collectives (under MPICH each costs about a
            // millisecond where ranks outnumber cores), every start against values
            // computed here.
            if step < 10 || step % 100 == 99 {
                scatter.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; n];
                    match me == ra {
                        true => at(ra).scatter_into_root(&send[..], &mut want[..]),
                        false => at(ra).scatter_into(&mut want[..]),
                    }
                    assert_eq!(**recv, want[..], "{}", what("scatter"));
                });
                gather.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; recv.len()];
                    match me == rb {
                        true => at(rb).gather_into_root(&send[..], &mut want[..]),
                        false => at(rb).gather_into(&send[..]),
                    }
                    assert_eq!(**recv, want[..], "{}", what("gather"));
                });
                scatterv.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; mine];
                    match me == rb {
                        true => at(rb).scatter_varcount_into_root(
                            &Partition::new(&send[..], &counts[..], &displs[..]),
                            &mut want[..],
                        ),
                        false => at(rb).scatter_varcount_into(&mut want[..]),
                    }
                    assert_eq!(**recv, want[..], "{}", what("scatterv"));
                });
                gatherv.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; recv.len()];
                    match me == ra {
                        true => at(ra).gather_varcount_into_root(
                            &send[..],
                            &mut PartitionMut::new(&mut want[..], &counts[..], &displs[..]),
                        ),
                        false => at(ra).gather_varcount_into(&send[..]),
                    }
                    assert_eq!(**recv, want[..], "{}", what("gatherv"));
                });
                allgatherv.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; total];
                    world.all_gather_varcount_into(
                        &send[..],
                        &mut PartitionMut::new(&mut want[..], &counts[..], &displs[..]),
                    );
                    assert_eq!(**recv, want[..], "{}", what("allgatherv"));
                });
                alltoallv.with_buffers(|(send, recv)| {
                    let mut want = vec![0u64; recv.len()];
                    world.all_to_all_varcount_into(
                        &Partition::new(&send[..], &counts[..], &displs[..]),
                        &mut PartitionMut::new(&mut want[..], &from[..], &from_displs[..]),
                    );
                    assert_eq!(**recv, want[..], "{}", what("alltoallv"));
                });
            }
            let block = |r: i32, k: u64, len: usize| at_step(r, step * 8 + k, len);
            let part = |v: Vec<u64>, at: Count, len: usize| v[at as usize..at as usize + len].to_vec();
            let gathered = |k: u64| (0..p).flat_map(|r| block(r, k, count(r) as usize)).collect::<Vec<_>>();
            let computed: [Vec<u64>; 6] = [
                part(block(ra, 0, n * pu), me * n as Count, n),
                if me == rb { (0..p).flat_map(|r| block(r, 1, n)).collect() } else { Vec::new() },
                part(block(rb, 2, total), displs[me as usize], mine),
                if me == ra { gathered(3) } else { Vec::new() },
                gathered(4),
                (0..p).flat_map(|q| part(block(q, 5, total), displs[me as usize], mine)).collect(),
            ];
            let names = ["scatter", "gather", "scatterv", "gatherv", "allgatherv", "alltoallv"];
            for ((h, want), c) in handles.iter_mut().zip(&computed).zip(names) {
                h.with_buffers(|(_, recv)| assert_eq!(**recv, want[..], "{} (computed)", what(c)));
            }
        }
        Ok::<(), zcoll::Error>(())
    })
    .unwrap_or_else(|e| panic!("rank {me}, n = {n}: {e}"));
}

/// A bad persistent call: an allgatherv whose last rank sends one element more than the
/// counts say, started twice: an `Err` from every start on every rank, the receive buffer
/// unchanged; a good handle started after it works.
fn persistent_bad(world: &SimpleCommunicator, comm: &mut Comm) {
    let (me, p) = (world.rank(), world.size());
    let counts = vec![3 as Count; p as usize];
    let displs: Vec<Count> = (0..p).map(|r| 3 * r).collect();
    let mut send = vec![me as u64; if me == p - 1 { 4 } else { 3 }];
    let mut recv = vec![7u64; 3 * p as usize];
    let mut good = vec![me as u64; 3];
    let mut all = vec![0u64; 3 * p as usize];
    comm.immediate_scope(|s| {
        let mut bad = s.all_gather_varcount_init(&mut send, &mut recv, &counts, &displs);
        for _ in 0..2 {
            let r = bad.start().wait();
            assert!(r.is_err(), "rank {me}: a mismatched persistent allgatherv succeeded");
            bad.with_buffers(|(_, recv)| assert!(recv.iter().all(|&x| x == 7), "rank {me}: it wrote recv"));
        }
        let mut ok = s.all_gather_varcount_init(&mut good, &mut all, &counts, &displs);
        ok.start().wait().unwrap_or_else(|e| panic!("rank {me}: the handle after the bad one: {e}"));
    });
    let want: Vec<u64> = (0..p as u64).flat_map(|r| [r; 3]).collect();
    assert_eq!(all, want, "the allgatherv after the bad one");
}
