//! The fault matrix: one rank of a collective dies (`exit`, `SIGKILL`) or stalls at a
//! chosen phase of the call (arrive, copy, finish; `zcoll::fault::fail_at`), for every
//! collective and every algorithm family whose copies differ. Every survivor must get an
//! `Err` within two seconds with the guard bytes around its buffers intact, and once the
//! job has ended no segment of the job may remain in `/dev/shm` and no process of the job
//! may still hold its memfd heap.
//!
//! A dead rank ends an ordinary Open MPI job, and a communicator with a dead member is of
//! no further use, so one job runs many cases this way: it is started with
//! `--enable-recovery` (`mpiexec` then lets the other ranks run on when one exits or is
//! killed) at `2 + C` ranks for `C` cases. World ranks 0 and 1 are the survivors of every
//! case; case `c` runs on a communicator of three ranks, the survivors and world rank
//! `2 + c`, its victim, all of them built while every rank is alive. The cases run one
//! after the other: the survivors meet on their own communicator, rank 0 opens the turn
//! of case `c` with a file, the victim arms its fault and makes the call. The ranks report
//! on standard output and leave with `exit(0)`, without `MPI_Finalize` (whose fence
//! would wait for the dead); the launching test checks the reports, the segments and the
//! processes, and prints the table of survivors' times that the testing chapter shows.

use crate::common::Guarded;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::io::Write as _;
use std::time::{Duration, Instant};
use zcoll::fault::{Failure, Phase};
use zcoll::op::Builtin;
use zcoll::{
    AllgatherAlgorithm, AllgathervAlgorithm, AlltoallAlgorithm, AlltoallvAlgorithm, BcastAlgorithm, Comm,
    GatherAlgorithm, ReduceAlgorithm, ScatterAlgorithm,
};

/// Elements (`u64`) per block: large enough that no call takes an eager or one-phase
/// path, so each algorithm moves its bytes as named.
const N: usize = 40_000;

/// How long a stalled rank sleeps: many times the stall jobs' `ZCOLL_TIMEOUT`.
const STALL: Duration = Duration::from_secs(2);

/// The stall jobs' `ZCOLL_TIMEOUT`, in seconds. A survivor may meet it twice in one call
/// (waiting for the stalled rank's step, then for its `done`), so a quarter of a second
/// keeps the survivors' answer well under the two seconds the matrix allows; and each of
/// the stall jobs' 39 cases waits for it, so a longer one only makes the suite longer.
/// (A tenth of a second, tried, saved 18 s of the suite and left a survivor less slack
/// on a loaded machine.)
const STALL_TIMEOUT: &str = "0.25";

/// What a case's call did on one rank: its result, whether the guard bytes around its
/// receive buffer held, and, if it succeeded, whether what it received is right (an
/// independent computation from every rank's input, which every rank can regenerate).
struct Outcome {
    result: zcoll::Result<()>,
    guards: bool,
    correct: bool,
}

impl Outcome {
    /// `buf` after `result`; if that is `Ok`, its blocks `(at, want)` must hold `want`.
    fn of(result: zcoll::Result<()>, buf: &Guarded<u64>, blocks: &[(usize, Vec<u64>)]) -> Outcome {
        let correct =
            result.is_err() || blocks.iter().all(|(at, want)| &buf.get()[*at..*at + want.len()] == want);
        Outcome { guards: buf.guard_ok(), result, correct }
    }
}

/// One call of the matrix: the collective and algorithm, run by local rank `me` of three,
/// the victim being local rank 2 (the root is rank 0 unless the name says otherwise:
/// the victim roots the cases where only the root copies).
type Case = fn(&Comm, i32) -> Outcome;

/// Every case: the collectives with each family of algorithms whose copies differ
/// (reads of a peer's buffer, copy-in/copy-out through the staging areas, and the
/// tree and pipeline broadcasts, whose readers are read in turn).
const CASES: &[(&str, Case)] = &[
    ("bcast direct-read", |c, me| bcast(c, me, BcastAlgorithm::DirectRead)),
    ("bcast knomial-read:2", |c, me| bcast(c, me, BcastAlgorithm::KnomialRead { k: 2 })),
    ("bcast scatter-allgather", |c, me| bcast(c, me, BcastAlgorithm::ScatterAllgather)),
    ("bcast pipelined", |c, me| bcast(c, me, BcastAlgorithm::Pipelined { chunk: 16 << 10 })),
    ("bcast staged", |c, me| bcast(c, me, BcastAlgorithm::Staged)),
    // The root (a survivor) writes the tail of the victim's buffer.
    ("bcast read-write", |c, me| bcast(c, me, BcastAlgorithm::ReadWrite)),
    ("scatter parallel-read", |c, me| scatter(c, me, ScatterAlgorithm::ParallelRead)),
    ("scatter staged", |c, me| scatter(c, me, ScatterAlgorithm::Staged)),
    ("gather sequential-read", |c, me| gather(c, me, GatherAlgorithm::SequentialRead)),
    ("gather staged", |c, me| gather(c, me, GatherAlgorithm::Staged)),
    ("allgather ring-source-read", |c, me| allgather(c, me, AllgatherAlgorithm::RingSourceRead)),
    ("allgather staged", |c, me| allgather(c, me, AllgatherAlgorithm::Staged)),
    ("alltoall pairwise", |c, me| alltoall(c, me, AlltoallAlgorithm::Pairwise)),
    ("alltoall staged", |c, me| alltoall(c, me, AlltoallAlgorithm::Staged)),
    ("reduce partitioned", |c, me| reduce(c, me, Some(2), ReduceAlgorithm::Partitioned)),
    ("reduce staged", |c, me| reduce(c, me, Some(2), ReduceAlgorithm::Staged)),
    ("reduce root-read", |c, me| reduce(c, me, Some(2), ReduceAlgorithm::RootRead)),
    ("allreduce partitioned", |c, me| reduce(c, me, None, ReduceAlgorithm::Partitioned)),
    ("allreduce staged", |c, me| reduce(c, me, None, ReduceAlgorithm::Staged)),
    ("scan", scan),
    ("barrier", |c, _| Outcome { result: c.barrier(), guards: true, correct: true }),
    ("scatterv parallel-read", |c, me| scatterv(c, me, ScatterAlgorithm::ParallelRead)),
    ("scatterv staged", |c, me| scatterv(c, me, ScatterAlgorithm::Staged)),
    ("gatherv sequential-read", |c, me| gatherv(c, me, GatherAlgorithm::SequentialRead)),
    ("gatherv staged", |c, me| gatherv(c, me, GatherAlgorithm::Staged)),
    ("allgatherv ring-source-read", |c, me| allgatherv(c, me, AllgathervAlgorithm::RingSourceRead)),
    ("allgatherv staged", |c, me| allgatherv(c, me, AllgathervAlgorithm::Staged)),
    ("alltoallv pairwise", |c, me| alltoallv(c, me, AlltoallvAlgorithm::Pairwise)),
    ("alltoallv staged", |c, me| alltoallv(c, me, AlltoallvAlgorithm::Staged)),
    // A broadcast small enough to travel with its root's arrival: the root leaves at
    // once (its verdict deferred to its next call), as the victim and as a survivor.
    ("bcast one-phase, root 2", |c, me| one_phase_bcast(c, me, 2)),
    ("bcast one-phase", |c, me| one_phase_bcast(c, me, 0)),
    // From here on, a survivor publishes its receive buffer for the victim to write.
    ("bcast direct-write, root 2", |c, me| bcast_at(c, me, 2, BcastAlgorithm::DirectWrite)),
    ("bcast read-write, root 2", |c, me| bcast_at(c, me, 2, BcastAlgorithm::ReadWrite)),
    ("scatter sequential-write, root 2", |c, me| scatter_at(c, me, 2, ScatterAlgorithm::SequentialWrite)),
    ("gather parallel-write, root 0", |c, me| gather_at(c, me, 0, GatherAlgorithm::ParallelWrite)),
    ("allgather ring-source-write", |c, me| allgather(c, me, AllgatherAlgorithm::RingSourceWrite)),
    ("alltoall pairwise-write", |c, me| alltoall(c, me, AlltoallAlgorithm::PairwiseWrite)),
    ("reduce partitioned, root 0", |c, me| reduce(c, me, Some(0), ReduceAlgorithm::Partitioned)),
    ("alltoallv pairwise-write", |c, me| alltoallv(c, me, AlltoallvAlgorithm::PairwiseWrite)),
];

/// The first case of `CASES` where a survivor lets the victim write into its buffer.
/// When such a victim stalls, a survivor whose wait for it times out must not return
/// while it could still write (the memory may be freed by then): it fences it (kills it
/// and awaits the kernel's word that it exited, `Round::fence`) and returns
/// `Error::Fenced`. So at least one survivor of each of these cases reports `Fenced`.
const FIRST_WRITE: usize = 31;

/// Rank `me`'s `n` input words.
fn words(n: usize, me: i32) -> Vec<u64> {
    (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (me as u64) << 48).collect()
}

fn recv(n: usize) -> Guarded<u64> {
    Guarded::new(n, |i| i as u8)
}

fn bcast(comm: &Comm, me: i32, algo: BcastAlgorithm) -> Outcome {
    bcast_at(comm, me, 0, algo)
}

fn bcast_at(comm: &Comm, me: i32, root: i32, algo: BcastAlgorithm) -> Outcome {
    let mut buf = recv(N);
    if me == root {
        buf.get_mut().copy_from_slice(&words(N, root));
    }
    Outcome::of(comm.broadcast_into_with(buf.get_mut(), root, algo), &buf, &[(0, words(N, root))])
}

/// A staged broadcast of 4 KiB from `root`, which leaves the call right after staging
/// its bytes: a survivor root returns `Ok` whatever the victim does, and learns of the
/// victim's failure at its next call.
fn one_phase_bcast(comm: &Comm, me: i32, root: i32) -> Outcome {
    let n = 512;
    let mut buf = recv(n);
    if me == root {
        buf.get_mut().copy_from_slice(&words(n, root));
    }
    Outcome::of(
        comm.broadcast_into_with(buf.get_mut(), root, BcastAlgorithm::Staged),
        &buf,
        &[(0, words(n, root))],
    )
}

fn scatter(comm: &Comm, me: i32, algo: ScatterAlgorithm) -> Outcome {
    scatter_at(comm, me, 0, algo)
}

fn scatter_at(comm: &Comm, me: i32, root: i32, algo: ScatterAlgorithm) -> Outcome {
    let mut out = recv(N);
    let r = match me == root {
        true => comm.scatter_into_root_with(&words(3 * N, me), out.get_mut(), root, algo),
        false => comm.scatter_into_with(out.get_mut(), root, algo),
    };
    let m = me as usize;
    Outcome::of(r, &out, &[(0, words(3 * N, root)[m * N..(m + 1) * N].to_vec())])
}

/// The victim (local rank 2) is the root: it is the rank that reads.
fn gather(comm: &Comm, me: i32, algo: GatherAlgorithm) -> Outcome {
    gather_at(comm, me, 2, algo)
}

fn gather_at(comm: &Comm, me: i32, root: i32, algo: GatherAlgorithm) -> Outcome {
    let mut out = recv(if me == root { 3 * N } else { 0 });
    let r = match me == root {
        true => comm.gather_into_root_with(&words(N, me), out.get_mut(), root, algo),
        false => comm.gather_into_with(&words(N, me), root, algo),
    };
    let want: Vec<_> =
        if me == root { (0..3).map(|q| (q as usize * N, words(N, q))).collect() } else { vec![] };
    Outcome::of(r, &out, &want)
}

fn allgather(comm: &Comm, me: i32, algo: AllgatherAlgorithm) -> Outcome {
    let mut out = recv(3 * N);
    let r = comm.all_gather_into_with(&words(N, me), out.get_mut(), algo);
    Outcome::of(r, &out, &(0..3).map(|q| (q as usize * N, words(N, q))).collect::<Vec<_>>())
}

fn alltoall(comm: &Comm, me: i32, algo: AlltoallAlgorithm) -> Outcome {
    let mut out = recv(3 * N);
    let r = comm.all_to_all_into_with(&words(3 * N, me), out.get_mut(), algo);
    let m = me as usize;
    let want: Vec<_> =
        (0..3).map(|q| (q as usize * N, words(3 * N, q)[m * N..(m + 1) * N].to_vec())).collect();
    Outcome::of(r, &out, &want)
}

/// The XOR of ranks `0..=last`'s words.
fn xor_upto(last: i32) -> Vec<u64> {
    (0..=last).map(|q| words(N, q)).reduce(|a, b| a.iter().zip(&b).map(|(x, y)| x ^ y).collect()).unwrap()
}

fn reduce(comm: &Comm, me: i32, root: Option<i32>, algo: ReduceAlgorithm) -> Outcome {
    let mut out = recv(N);
    let send = words(N, me);
    let r = match root {
        None => comm.all_reduce_into_with(&send, out.get_mut(), Builtin::BitXor, algo),
        Some(root) => {
            let o = (me == root).then_some(out.get_mut());
            comm.reduce_with(&send, o, root, Builtin::BitXor, algo)
        }
    };
    let gets = root.is_none_or(|root| root == me);
    let want = if gets { vec![(0, xor_upto(2))] } else { vec![] };
    Outcome::of(r, &out, &want)
}

fn scan(comm: &Comm, me: i32) -> Outcome {
    let mut out = recv(N);
    let r = comm.scan_into(&words(N, me), out.get_mut(), Builtin::BitXor);
    Outcome::of(r, &out, &[(0, xor_upto(me))])
}

/// Counts `N - 1000`, `N`, `N + 1000` with a gap of 7 between blocks.
fn partition() -> (Vec<i32>, Vec<i32>, usize) {
    let counts: Vec<i32> = (0..3).map(|r| N as i32 - 1000 + 1000 * r).collect();
    let displs: Vec<i32> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c + 7))).collect();
    let total = (displs[2] + counts[2]) as usize;
    (counts, displs, total)
}

/// Every rank's block of a partition, where `(counts, displs)` place them.
fn blocks(counts: &[i32], displs: &[i32]) -> Vec<(usize, Vec<u64>)> {
    (0..3).map(|q| (displs[q] as usize, words(counts[q] as usize, q as i32))).collect()
}

fn scatterv(comm: &Comm, me: i32, algo: ScatterAlgorithm) -> Outcome {
    let (counts, displs, total) = partition();
    let m = me as usize;
    let mut out = recv(counts[m] as usize);
    let r = match me {
        0 => {
            comm.scatter_varcount_into_root_with(&words(total, me), &counts, &displs, out.get_mut(), 0, algo)
        }
        _ => comm.scatter_varcount_into_with(out.get_mut(), 0, algo),
    };
    let (at, n) = (displs[m] as usize, counts[m] as usize);
    Outcome::of(r, &out, &[(0, words(total, 0)[at..at + n].to_vec())])
}

fn gatherv(comm: &Comm, me: i32, algo: GatherAlgorithm) -> Outcome {
    let (counts, displs, total) = partition();
    let send = words(counts[me as usize] as usize, me);
    let mut out = recv(if me == 2 { total } else { 0 });
    let r = match me {
        2 => comm.gather_varcount_into_root_with(&send, out.get_mut(), &counts, &displs, 2, algo),
        _ => comm.gather_varcount_into_with(&send, 2, algo),
    };
    Outcome::of(r, &out, &if me == 2 { blocks(&counts, &displs) } else { vec![] })
}

fn allgatherv(comm: &Comm, me: i32, algo: AllgathervAlgorithm) -> Outcome {
    let (counts, displs, total) = partition();
    let send = words(counts[me as usize] as usize, me);
    let mut out = recv(total);
    let r = comm.all_gather_varcount_into_with(&send, out.get_mut(), &counts, &displs, algo);
    Outcome::of(r, &out, &blocks(&counts, &displs))
}

fn alltoallv(comm: &Comm, me: i32, algo: AlltoallvAlgorithm) -> Outcome {
    // Rank q sends rank r `N + 100 (q + r)` words, packed.
    let count = |q: i32, r: i32| N as i32 + 100 * (q + r);
    let place = |c: Vec<i32>| {
        let d: Vec<i32> = c.iter().scan(0, |at, &x| Some(std::mem::replace(at, *at + x))).collect();
        let total = c.iter().sum::<i32>() as usize;
        (c, d, total)
    };
    let (sc, sd, st) = place((0..3).map(|r| count(me, r)).collect());
    let (rc, rd, rt) = place((0..3).map(|q| count(q, me)).collect());
    let mut out = recv(rt);
    let r = comm.all_to_all_varcount_into_with(&words(st, me), &sc, &sd, out.get_mut(), &rc, &rd, algo);
    let want: Vec<_> = (0..3)
        .map(|q| {
            // Where q's block for me starts in q's send buffer.
            let (qc, _, qt) = place((0..3).map(|r| count(q, r)).collect());
            let at: i32 = qc[..me as usize].iter().sum();
            (rd[q as usize] as usize, words(qt, q)[at as usize..(at + rc[q as usize]) as usize].to_vec())
        })
        .collect();
    Outcome::of(r, &out, &want)
}

fn parse_phase(s: &str) -> Phase {
    match s {
        "arrive" => Phase::Arrive,
        "copy" => Phase::Copy,
        "finish" => Phase::Finish,
        other => panic!("ZCOLL_FAULT_PHASE={other}"),
    }
}

fn parse_failure(s: &str) -> Failure {
    match s {
        "exit" => Failure::Exit,
        "kill" => Failure::Kill,
        "stall" => Failure::Stall(STALL),
        other => panic!("ZCOLL_FAULT_KIND={other}"),
    }
}

/// What every rank of a matrix job runs (scenario `fault-matrix`).
pub(crate) fn rank(world: &SimpleCommunicator) -> ! {
    let (me, p) = (world.rank(), world.size());
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (kind, phase, dir) = (var("ZCOLL_FAULT_KIND"), var("ZCOLL_FAULT_PHASE"), var("ZCOLL_FAULT_DIR"));
    let cases: Vec<usize> = var("ZCOLL_FAULT_CASES").split(',').map(|c| c.parse().unwrap()).collect();
    assert_eq!(p as usize, 2 + cases.len(), "two survivors and one victim per case");
    // Every process of the job, for the launcher's check that none outlives it.
    let pid = std::process::id() as i32;
    let mut pids = vec![0i32; p as usize];
    world.all_gather_into(&pid, &mut pids[..]);
    if me == 0 {
        let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        println!("FAULT-PIDS {}", list.join(" "));
    }
    let mut comms = Vec::new();
    for c in 0..cases.len() {
        let member = me < 2 || me == 2 + c as i32;
        let color = if member { Color::with_value(0) } else { Color::undefined() };
        let sub = world.split_by_color(color);
        comms.push(sub.map(|sub| Comm::new(&sub).unwrap_or_else(|e| panic!("Comm::new of case {c}: {e}"))));
    }
    let pair = world.split_by_color(if me < 2 { Color::with_value(0) } else { Color::undefined() });
    let turn = |c: usize| std::path::Path::new(&dir).join(format!("turn-{c}"));
    if me >= 2 {
        let c = me as usize - 2;
        let comm = comms[c].take().expect("the victim's communicator");
        assert_eq!(comm.rank(), 2);
        while !turn(c).exists() {
            std::thread::sleep(Duration::from_millis(1));
        }
        zcoll::fault::fail_at(parse_phase(&phase), parse_failure(&kind));
        let (name, case) = CASES[cases[c]];
        let o = case(&comm, 2);
        assert!(
            o.result.is_err() || o.correct,
            "{name}: the victim's data is wrong although its fault never fired"
        );
        // Still here: the call never reached the phase.
        zcoll::fault::disarm();
        println!("FAULT-NOT-FIRED {name}");
        std::mem::forget(comm);
        leave();
    }
    let pair = pair.expect("the survivors' communicator");
    for (c, &k) in cases.iter().enumerate() {
        let comm = comms[c].take().expect("a survivor's communicator");
        pair.barrier();
        if me == 0 {
            std::fs::write(turn(c), b"").unwrap();
        }
        let (name, case) = CASES[k];
        let start = Instant::now();
        let o = case(&comm, me);
        let mut took = start.elapsed();
        let outcome = match &o.result {
            Err(e) => format!("err {e}"),
            Ok(()) if !o.correct => "ok but wrong data".to_string(),
            // A call whose data crossed through the staging areas alone (and a barrier)
            // leaves without waiting for the victim's `done`: the victim had delivered
            // everything, so the survivor's result is right and complete. The failure
            // must then show at the next call, within the same two seconds.
            Ok(()) => match comm.barrier() {
                Err(e) => {
                    took = start.elapsed();
                    format!("ok, then err at the next call: {e}")
                }
                Ok(()) => "ok, and ok at the next call".to_string(),
            },
        };
        println!("FAULT-CASE {name}|{me}|{:.1}|{}|{outcome}", took.as_secs_f64() * 1e3, o.guards);
        // A communicator with a dead or stalled member is of no further use; its MPI
        // handles are not freed (that would talk to the dead).
        std::mem::forget(comm);
    }
    println!("ZCOLL-RANK-OK {me}");
    leave();
}

/// Ends the process without `MPI_Finalize`, whose fence would wait for the dead ranks.
fn leave() -> ! {
    std::io::stdout().flush().unwrap();
    std::process::exit(0);
}

/// One line of a job's report.
#[derive(Debug)]
struct Report {
    case: String,
    rank: i32,
    ms: f64,
    guards: bool,
    outcome: String,
}

fn parse(stdout: &str) -> (Vec<Report>, Vec<String>, Vec<i32>) {
    let mut reports = Vec::new();
    let mut not_fired = Vec::new();
    let mut pids = Vec::new();
    for line in stdout.lines() {
        // A rank's first line follows the harness's `test rank ... ` on the same line.
        let line = line.find("FAULT-").map_or(line, |at| &line[at..]);
        if let Some(rest) = line.strip_prefix("FAULT-CASE ") {
            let f: Vec<&str> = rest.splitn(5, '|').collect();
            reports.push(Report {
                case: f[0].to_string(),
                rank: f[1].parse().unwrap(),
                ms: f[2].parse().unwrap(),
                guards: f[3] == "true",
                outcome: f[4].to_string(),
            });
        } else if let Some(name) = line.strip_prefix("FAULT-NOT-FIRED ") {
            not_fired.push(name.to_string());
        } else if let Some(list) = line.strip_prefix("FAULT-PIDS ") {
            pids = list.split(' ').map(|p| p.parse().unwrap()).collect();
        }
    }
    (reports, not_fired, pids)
}

/// Runs the cases `cases` (indices into `CASES`) with `kind` at `phase` in one job and
/// returns, per case, the survivors' worst time and their outcomes; panics with every
/// broken promise.
fn job(kind: &str, phase: &str, cases: &[usize], extra_env: &[(&str, &str)]) -> Vec<(String, String)> {
    let _one = crate::launch::JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("zcoll-faults-{}-{kind}-{phase}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let list: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
    let exe = std::env::current_exe().unwrap();
    let np = 2 + cases.len();
    let mut cmd = std::process::Command::new("mpiexec");
    cmd.args(["-n", &np.to_string(), "--oversubscribe", "--bind-to", "none", "--enable-recovery", "--quiet"])
        .arg(&exe)
        .args(["--exact", "rank", "--ignored", "--nocapture", "--test-threads=1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("ZCOLL_TEST_SCENARIO", "fault-matrix")
        .env("ZCOLL_FAULT_KIND", kind)
        .env("ZCOLL_FAULT_PHASE", phase)
        .env("ZCOLL_FAULT_CASES", list.join(","))
        .env("ZCOLL_FAULT_DIR", &dir)
        .env("ZCOLL_TIMEOUT", if kind == "stall" { STALL_TIMEOUT } else { "10" })
        .env_remove("ZCOLL_TRANSPORT")
        .env_remove("ZCOLL_NODE_SIZE")
        .env_remove("XPMEM_LIBRARY");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let what = format!("fault matrix {kind} at {phase}, {np} ranks");
    let out = run_limited(cmd, Duration::from_secs(120), &what);
    let _ = std::fs::remove_dir_all(&dir);
    let (reports, not_fired, pids) = parse(&out);
    let mut broken = Vec::new();
    // Nothing of the job outlives it: its processes (and so their memfd heaps) are
    // gone, and no segment it created is left in /dev/shm (a segment's name starts with
    // `zcoll.<creator's pid>.`).
    assert_eq!(pids.len(), np, "{what}: the job did not report its pids:\n{out}");
    for &pid in &pids {
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            broken.push(format!("process {pid} of the job is still alive"));
        }
    }
    for entry in std::fs::read_dir("/dev/shm").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if pids.iter().any(|pid| name.starts_with(&format!("zcoll.{pid}."))) {
            broken.push(format!("/dev/shm/{name} was left behind"));
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let mut rows = Vec::new();
    for &k in cases {
        let name = CASES[k].0;
        let mine: Vec<&Report> = reports.iter().filter(|r| r.case == name).collect();
        if not_fired.iter().any(|n| n == name) {
            rows.push((name.to_string(), "n/a (no such phase)".to_string()));
            continue;
        }
        if mine.len() != 2 {
            broken.push(format!("{name}: {} survivors reported, not 2", mine.len()));
            continue;
        }
        for r in &mine {
            // `Ok` is the right answer only where the victim failed after it had delivered
            // everything (at finish), or in a one-phase broadcast, whose root leaves the
            // call before its verdict and whose readers copy from the root's staging area
            // alone (a reader's result is complete whatever another reader does), and
            // only with the error at the next call.
            let deferred = name.contains("one-phase");
            let legit = r.outcome.starts_with("err")
                || ((phase == "finish" || deferred) && r.outcome.starts_with("ok, then err"));
            if !legit {
                broken
                    .push(format!("{name}: survivor {} returned {} ({kind} at {phase})", r.rank, r.outcome));
            }
            if r.ms >= 2000.0 {
                broken.push(format!("{name}: survivor {} took {} ms", r.rank, r.ms));
            }
            // Whoever found the victim dead, and whoever only heard of a failure from the
            // other survivor, names the victim (local rank 2). A timeout names the rank it
            // waited for, which may be the other survivor, itself waiting for the victim.
            let variant = short(&r.outcome);
            let names_failed = variant.ends_with("PeerFailed") || variant.ends_with("PeerDied");
            if let Some(named) = named_rank(&r.outcome).filter(|&named| names_failed && named != 2) {
                broken.push(format!("{name}: survivor {} named rank {named}: {}", r.rank, r.outcome));
            }
            if !r.guards {
                broken.push(format!("{name}: survivor {} had bytes written outside its buffer", r.rank));
            }
        }
        let fenced = mine.iter().any(|r| short(&r.outcome) == "Fenced");
        if kind == "stall" && k >= FIRST_WRITE && !fenced {
            broken.push(format!("{name}: no survivor fenced the stalled writer"));
        }
        if kind != "stall" && fenced {
            broken.push(format!("{name}: a survivor killed a victim that was dead already"));
        }
        let worst = mine.iter().map(|r| r.ms).fold(0.0, f64::max);
        let errors: Vec<String> = mine.iter().map(|r| short(&r.outcome)).collect();
        rows.push((name.to_string(), format!("{worst:.0} ms ({})", errors.join(", "))));
    }
    assert!(broken.is_empty(), "{what}:\n{}\n--- job output\n{out}", broken.join("\n"));
    rows
}

/// The rank an outcome's error names as the one that failed: the second rank its message
/// names (the first is the rank that reports it), if any.
fn named_rank(outcome: &str) -> Option<i32> {
    let mut ranks = outcome.split("rank ").skip(1).filter_map(|s| {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    ranks.nth(1)
}

/// The error's variant, as the table shows it.
fn short(outcome: &str) -> String {
    let variant = [
        ("killed it", "Fenced"),
        ("died", "PeerDied"),
        ("waited more than", "Timeout"),
        ("failed", "PeerFailed"),
    ]
    .iter()
    .find(|(needle, _)| outcome.contains(needle))
    .map_or(outcome, |(_, name)| name);
    match outcome.starts_with("ok, then") {
        true => format!("Ok, then {variant}"),
        false => variant.to_string(),
    }
}

/// Runs `cmd` to its end (or stops it after `limit`) and returns its standard output.
fn run_limited(cmd: std::process::Command, limit: Duration, what: &str) -> String {
    let (status, stdout, stderr) = crate::launch::run_until(cmd, limit, what, "faults");
    assert!(status.is_some(), "{what} ran past {limit:?}:\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    stdout
}

/// Runs every case with `kind` at each phase and prints the table's rows.
fn matrix(kind: &str) {
    assert_eq!(CASES[FIRST_WRITE].0, "bcast direct-write, root 2", "FIRST_WRITE follows CASES");
    let all: Vec<usize> = (0..CASES.len()).collect();
    let phases = ["arrive", "copy", "finish"];
    let mut table: Vec<(String, Vec<String>)> =
        all.iter().map(|&c| (CASES[c].0.to_string(), Vec::new())).collect();
    for phase in phases {
        for (i, (_, cell)) in job(kind, phase, &all, &[]).into_iter().enumerate() {
            table[i].1.push(cell);
        }
    }
    println!("| collective, algorithm | {kind} at arrive | {kind} at copy | {kind} at finish |");
    println!("|---|---|---|---|");
    for (name, cells) in table {
        println!("| {name} | {} |", cells.join(" | "));
    }
}

#[test]
fn fault_matrix_exit() {
    matrix("exit");
}

#[test]
fn fault_matrix_kill() {
    matrix("kill");
}

#[test]
fn fault_matrix_stall() {
    matrix("stall");
}
