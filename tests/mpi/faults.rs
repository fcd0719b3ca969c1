//! A rank that fails in the middle of an algorithm, while staying alive: its single copy
//! fails (`zcoll::fault`, the test-only hook), or its user operator panics and the
//! program catches the panic. Every rank must return an `Err` within two seconds (the
//! ranks waiting for the failed rank's next step must not wait for ever), no byte may
//! land outside any receive buffer, and the communicator must go on working.

use crate::common::{quietly, Guarded};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::{Duration, Instant};
use zcoll::op::{Builtin, UserOp};
use zcoll::{BcastAlgorithm, Comm, ReduceAlgorithm};

/// `n` words made by `fill`, between guard bytes.
fn guarded(n: usize, fill: impl Fn(usize) -> u64) -> Guarded<u64> {
    let mut g = Guarded::new(n, |_| 0);
    for (i, x) in g.get_mut().iter_mut().enumerate() {
        *x = fill(i);
    }
    g
}

/// How the chosen rank fails.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Its `k`-th single copy of the call fails with EIO.
    Copy(u64),
    /// Its user operator panics (the program catches it).
    Panic,
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    assert!(p >= 3, "the fault scenarios want a rank that waits for a rank that waits");
    let n = 300_000usize;
    let reductions = [
        (ReduceAlgorithm::Partitioned, Fault::Copy(1)),
        (ReduceAlgorithm::Partitioned, Fault::Copy(3)),
        (ReduceAlgorithm::Partitioned, Fault::Panic),
        (ReduceAlgorithm::Staged, Fault::Panic),
    ];
    for (algo, fault) in reductions {
        // Across nodes a panicking operator aborts the process (`operator_panic_*`).
        if matches!(fault, Fault::Panic) && comm.info().nodes > 1 {
            continue;
        }
        for root in [None, Some(0)] {
            // The rank that fails: the last, but for an operator's panic in a reduce the
            // root, the one rank sure to apply the operator (a staged reduce's non-roots
            // only give their inputs, and their operator never runs).
            let bad = match (fault, root) {
                (Fault::Panic, Some(root)) => root,
                _ => p - 1,
            };
            let what = format!("{} {algo} {fault:?}", if root.is_some() { "reduce" } else { "allreduce" });
            let send: Vec<u64> = (0..n).map(|i| (i as u64) ^ (me as u64) << 40).collect();
            let mut recv = guarded(n, |i| i as u64 + 7);
            let before = recv.bytes().to_vec();
            let panics = matches!(fault, Fault::Panic) && me == bad;
            let op = UserOp::commutative(move |acc: &mut [u64], x: &[u64]| {
                assert!(!panics, "the injected operator panic");
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = a.wrapping_add(*b);
                }
            });
            if let (Fault::Copy(k), true) = (fault, me == bad) {
                zcoll::fault::fail_copy(k);
            }
            let start = Instant::now();
            let outcome = quietly(|| match root {
                None => comm.all_reduce_into_with(&send, recv.get_mut(), &op, algo),
                Some(root) => {
                    let out = (me == root).then_some(recv.get_mut());
                    comm.reduce_with(&send, out, root, &op, algo)
                }
            });
            zcoll::fault::fail_copy(0);
            check(world, &what, start, outcome.map(|r| r.is_err()), &recv);
            if root == Some(0) && me != 0 {
                assert!(
                    recv.bytes() == &before[..],
                    "{what}: a rank that receives nothing had its buffer written"
                );
            }
            still_works(world, comm, &what);
        }
    }
    let bcasts = [
        BcastAlgorithm::KnomialRead { k: 2 },
        BcastAlgorithm::ScatterAllgather,
        BcastAlgorithm::Pipelined { chunk: 4 * 4096 },
        BcastAlgorithm::DirectRead,
    ];
    for algo in bcasts {
        // A reader in the middle of the tree (rank 1 reads from 0 and is read from by 3
        // under k = 2) and the last rank.
        for bad in [1, p - 1] {
            let what = format!("bcast {algo} failing at rank {bad}");
            let mut buf = guarded(n, |i| if me == 0 { i as u64 * 3 } else { 0 });
            if me == bad {
                zcoll::fault::fail_copy(1);
            }
            let start = Instant::now();
            let outcome = comm.broadcast_into_with(buf.get_mut(), 0, algo);
            zcoll::fault::fail_copy(0);
            check(world, &what, start, Some(outcome.is_err()), &buf);
            if me == 0 {
                assert!(
                    buf.get().iter().enumerate().all(|(i, &x)| x == i as u64 * 3),
                    "{what}: the root's data"
                );
            }
            still_works(world, comm, &what);
        }
    }
}

/// Every rank failed (`failed`: `Some(true)`, or `None` for the rank whose operator
/// panicked), within two seconds, with its guards intact.
fn check(world: &SimpleCommunicator, what: &str, start: Instant, failed: Option<bool>, buf: &Guarded<u64>) {
    let took = start.elapsed();
    assert!(failed != Some(false), "{what}: rank {} returned Ok", world.rank());
    assert!(took < Duration::from_secs(2), "{what}: rank {} took {took:?}", world.rank());
    assert!(buf.guard_ok(), "{what}: rank {} had bytes written outside its buffer", world.rank());
}

/// An allreduce after the failure, against rsmpi's.
fn still_works(world: &SimpleCommunicator, comm: &Comm, what: &str) {
    let send: Vec<u64> = (0..1000).map(|i| i * (world.rank() as u64 + 1)).collect();
    let mut got = vec![0u64; 1000];
    let mut want = vec![0u64; 1000];
    comm.all_reduce_into(&send, &mut got, Builtin::Sum).unwrap_or_else(|e| panic!("after {what}: {e}"));
    world.all_reduce_into(&send[..], &mut want[..], SystemOperation::sum());
    assert!(got == want, "after {what}: the communicator gives wrong sums");
}

/// The scenario `panic-alone`: a small reduction whose user operator panics on one rank
/// only (on real elements: it is never called on empty ones), a rank the others need
/// nothing from, so they may end the call with a success before it fails: each rank of an
/// allreduce folds every input, and a reduce's non-roots leave. The rank that panicked
/// returns an error; where any rank returned `Ok`, the next call fails on every rank
/// (`PreviousFailed`, the deferred verdict), so that no failure is lost; the call after
/// that works. Before, the others returned `Ok` and their next call succeeded: the failure
/// was seen by one rank only.
pub(crate) fn panic_alone(world: &SimpleCommunicator, comm: &Comm) {
    let (me, p) = (world.rank(), world.size());
    for n in [1usize, 3, 4000] {
        for (case, bad) in [("allreduce", p - 1), ("allreduce", 0), ("reduce", 0), ("scan", p - 1)] {
            let what = format!("{case} of {n} with an operator that panics on rank {bad} alone");
            let send: Vec<u64> = (0..n as u64).map(|i| i + me as u64).collect();
            let mut recv = guarded(n, |_| 7);
            let panics = me == bad;
            let op = UserOp::commutative(move |acc: &mut [u64], x: &[u64]| {
                assert!(!acc.is_empty() && acc.len() == x.len(), "called with {} and {}", acc.len(), x.len());
                assert!(!panics, "the injected operator panic");
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = a.wrapping_add(*b);
                }
            });
            let outcome = quietly(|| match case {
                "allreduce" => comm.all_reduce_into(&send, recv.get_mut(), &op),
                "scan" => comm.scan_into(&send, recv.get_mut(), &op),
                _ if me == 0 => comm.reduce_into_root(&send, recv.get_mut(), 0, &op),
                _ => comm.reduce_into(&send, 0, &op),
            });
            assert!(recv.guard_ok(), "{what}: rank {me} had bytes written outside its buffer");
            let failed = outcome.is_none_or(|r| r.is_err());
            assert!(!panics || failed, "{what}: the panicking rank returned Ok");
            let mut all = vec![0u8; p as usize];
            world.all_gather_into(&(failed as u8), &mut all[..]);
            let next = comm.barrier();
            match all.contains(&0) {
                true => assert!(
                    matches!(next, Err(zcoll::Error::PreviousFailed { .. })),
                    "{what}: ranks {all:?} failed the call, and rank {me}'s next call gave {next:?}"
                ),
                false => {
                    assert!(next.is_ok(), "{what}: every rank failed the call, yet the next gave {next:?}")
                }
            }
            still_works(world, comm, &what);
        }
    }
}

/// The scenario `departed`: the last rank's communicator is dropped while its thread
/// panics (the program catches the panic and stays alive, as a rank whose MPI finalize
/// waits for the others would), while the others call collectives on theirs. Each of
/// their calls must fail with `PeerFailed` naming that rank, not wait for as long as its
/// process lives (a `ZCOLL_TIMEOUT` of 30 s turns the old wait into a `Timeout`, which
/// fails the check too). The others' calls among themselves keep working.
pub(crate) fn departed(world: &SimpleCommunicator) {
    let (me, p) = (world.rank(), world.size());
    let gone = p - 1;
    let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    if me == gone {
        let unwound = quietly::<()>(move || {
            let _comm = comm;
            panic!("the injected panic, with the communicator held");
        });
        assert!(unwound.is_none(), "the panic unwound");
    } else {
        for n in [1usize, 100_000] {
            let send = vec![me as u64; n];
            let mut sum = vec![7u64; n];
            let start = Instant::now();
            let outcome = comm.all_reduce_into(&send, &mut sum, Builtin::Sum);
            assert!(
                matches!(outcome, Err(zcoll::Error::PeerFailed { rank, peer }) if rank == me && peer == gone),
                "rank {me}: allreduce of {n} with rank {gone} gone: {outcome:?} after {:?}",
                start.elapsed()
            );
            let mut x = vec![0u8; n];
            let outcome = comm.broadcast_into(&mut x, gone);
            assert!(outcome.is_err(), "rank {me}: a broadcast from the rank that is gone: {outcome:?}");
        }
        drop(comm);
    }
    // The ranks that stayed still have MPI among them.
    let mut total = 0i32;
    world.all_reduce_into(&1i32, &mut total, SystemOperation::sum());
    assert_eq!(total, p);
    println!("ZCOLL-RANK-OK {me}");
}

/// The elements (`u64`) of a call in the scenario `culprit`: few enough that the
/// call's data travel in the leaders' exchange.
const SMALL: usize = 8;

/// The scenario `culprit` (4 ranks on 2 virtual nodes of 2): world rank 3, the second
/// rank of the second node, dies (`SIGKILL`) as it arrives in the call named by
/// `ZCOLL_CULPRIT_CASE`. Every survivor reports its outcome on standard output (the
/// launching test judges it: every error must name rank 3) and leaves with `exit(0)`,
/// without `MPI_Finalize`, whose fence would wait for the dead rank.
pub(crate) fn culprit(world: &SimpleCommunicator) -> ! {
    let me = world.rank();
    assert_eq!(world.size(), 4, "two nodes of two ranks");
    let case = std::env::var("ZCOLL_CULPRIT_CASE").expect("ZCOLL_CULPRIT_CASE");
    let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    assert_eq!(comm.info().nodes, 2, "two virtual nodes");
    comm.barrier().unwrap_or_else(|e| panic!("the barrier before the fault: {e}"));
    if me == 3 {
        zcoll::fault::fail_at(zcoll::fault::Phase::Arrive, zcoll::fault::Failure::Kill);
    }
    let outcome = match case.as_str() {
        "bcast" => {
            let mut buf = [if me == 0 { 7u64 } else { 0 }; SMALL];
            comm.broadcast_into(&mut buf[..], 0)
        }
        "allreduce" => {
            let mut sum = [0u64; SMALL];
            comm.all_reduce_into(&[me as u64; SMALL], &mut sum, Builtin::Sum)
        }
        "barrier" => comm.barrier(),
        other => panic!("ZCOLL_CULPRIT_CASE={other}"),
    };
    println!("CULPRIT {me} {outcome:?}");
    // A communicator with a dead member is of no further use; its MPI handles are not
    // freed (that would talk to the dead).
    std::mem::forget(comm);
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    std::process::exit(0);
}

/// The scenario `operator-panic`: 5 ranks on nodes of 3 and 2, whose second node's
/// ranks (3 and 4) have a user operator that panics, in the reduction
/// `ZCOLL_PANIC_CASE`. The panicking rank must abort the process: it could not unwind
/// without skipping MPI calls the other ranks make. A rank that returns before the
/// launcher ends the job (its node's other rank, finding the panicking one dead) says
/// what it returned on standard output and waits to be ended with the job (leaving at
/// once would end the job before the panicking ranks could say why).
pub(crate) fn operator_panic(world: &SimpleCommunicator) -> ! {
    let me = world.rank();
    assert_eq!(world.size(), 5, "nodes of three and two ranks");
    let case = std::env::var("ZCOLL_PANIC_CASE").expect("ZCOLL_PANIC_CASE");
    // Back to the default panic hook: the test ranks' hook aborts MPI at any panic,
    // before zcoll's own handling could be seen.
    drop(std::panic::take_hook());
    let comm = Comm::new(world).unwrap_or_else(|e| panic!("Comm::new: {e}"));
    assert_eq!(comm.info().nodes, 2, "two virtual nodes");
    let panics = me >= 3;
    let op = UserOp::commutative(move |acc: &mut [u64], x: &[u64]| {
        assert!(!panics, "the injected operator panic");
        for (a, b) in acc.iter_mut().zip(x) {
            *a = a.wrapping_add(*b);
        }
    });
    let n = match case.as_str() {
        "small" => 8,
        _ => 300_000,
    };
    let send = vec![me as u64 + 1; n];
    let mut recv = vec![0u64; n];
    let outcome = match case.as_str() {
        "small" | "allreduce" => comm.all_reduce_into(&send, &mut recv, &op),
        "reduce" if me == 0 => comm.reduce_into_root(&send, &mut recv, 0, &op),
        "reduce" => comm.reduce_into(&send, 0, &op),
        "scan" => comm.scan_into(&send, &mut recv, &op),
        other => panic!("ZCOLL_PANIC_CASE={other}"),
    };
    println!("RETURNED {me} {outcome:?}");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    std::thread::sleep(Duration::from_secs(20));
    std::mem::forget(comm);
    std::process::exit(0);
}

/// A user operator that panics in a reduction across nodes (small and large allreduces,
/// a reduce, a scan) aborts the process, saying why, rather than unwind past the MPI
/// calls the other ranks make: the job ends within a minute, and no rank whose result
/// depends on a panicking rank returns `Ok` (in the scan, ranks 0 to 2 fold only the
/// first node's inputs, and may finish before the job ends).
#[test]
fn operator_panic_across_nodes_aborts_np5_k3() {
    for case in ["small", "allreduce", "reduce", "scan"] {
        let _one = crate::launch::JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let mut cmd = ending_job(5, 3, "operator-panic", &[]);
        cmd.env("ZCOLL_PANIC_CASE", case).env("ZCOLL_TIMEOUT", "30");
        let what = format!("a panicking operator in {case}, 5 ranks on 2 virtual nodes");
        let (status, out, err) =
            crate::launch::run_until(cmd, Duration::from_secs(60), &what, "operator-panic");
        let said = "a reduction operator panicked in a reduction across nodes";
        let independent = if case == "scan" { 0..3 } else { 0..0 };
        let wrong_ok = out.lines().filter_map(|l| l.strip_prefix("RETURNED ")).any(|l| {
            l.contains(" Ok(") && !independent.contains(&l.split(' ').next().unwrap().parse::<i32>().unwrap())
        });
        assert!(
            status.is_some_and(|s| !s.success()) && err.contains(said) && !wrong_ok,
            "{what}: the job must abort, saying why, with no rank that depends on a panicking \
             one returning `Ok` ({status:?}):\n--- stdout\n{out}\n--- stderr\n{err}"
        );
    }
}

/// The Open MPI launcher of `scenario` at `np` ranks on virtual nodes of `node_size`,
/// with `extra` launcher options: for the jobs that end their processes themselves (a
/// rank killed, a process aborted), which the launching test judges from the output.
fn ending_job(np: usize, node_size: usize, scenario: &str, extra: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("mpiexec");
    cmd.args(["-n", &np.to_string(), "--oversubscribe", "--bind-to", "none", "--quiet"])
        .args(extra)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "rank", "--ignored", "--nocapture", "--test-threads=1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("ZCOLL_TEST_SCENARIO", scenario)
        .env("ZCOLL_NODE_SIZE", node_size.to_string())
        .env_remove("ZCOLL_TRANSPORT")
        .env_remove("XPMEM_LIBRARY");
    cmd
}

/// Runs the scenario `culprit` with `case` and returns the survivors' outcomes by rank.
fn culprit_job(case: &str) -> Vec<(i32, String)> {
    let _one = crate::launch::JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = ending_job(4, 2, "culprit", &["--enable-recovery"]);
    cmd.env("ZCOLL_CULPRIT_CASE", case).env("ZCOLL_TIMEOUT", "10");
    let what = format!("culprit {case}, 4 ranks on 2 virtual nodes");
    let (status, out, err) = crate::launch::run_until(cmd, Duration::from_secs(60), &what, "culprit");
    assert!(status.is_some(), "{what} ran past 60 s:\n--- stdout\n{out}\n--- stderr\n{err}");
    let mut got: Vec<(i32, String)> = out
        .lines()
        .filter_map(|l| l.find("CULPRIT ").map(|at| &l[at + "CULPRIT ".len()..]))
        .filter_map(|l| l.split_once(' ').map(|(r, o)| (r.parse().unwrap(), o.to_string())))
        .collect();
    got.sort();
    assert_eq!(got.len(), 3, "{what}: not every survivor reported:\n--- stdout\n{out}\n--- stderr\n{err}");
    got
}

/// A rank that dies in a small call across nodes (its data travel in the leaders'
/// exchange) is the rank every survivor's error names: its node's other rank finds it
/// dead (`PeerDied`), the other node's ranks learn it from the leaders' exchange
/// (`PeerFailed`), all naming rank 3, not the rank that reported it nor their own leader.
#[test]
fn culprit_vnodes_np4_k2() {
    let mut wrong = Vec::new();
    for case in ["bcast", "allreduce", "barrier"] {
        for (rank, outcome) in culprit_job(case) {
            let names =
                |variant: &str| outcome.starts_with(&format!("Err({variant} {{ rank: {rank}, peer: 3"));
            println!("{case}: rank {rank}: {outcome}");
            if !names("PeerFailed") && !names("PeerDied") {
                wrong.push(format!("{case}: survivor {rank} returned {outcome}"));
            }
        }
    }
    assert!(wrong.is_empty(), "every survivor must name the dead rank 3:\n{}", wrong.join("\n"));
}
