//! Real MPI jobs: every collective at several process counts, compared with rsmpi.
//!
//! Each test starts `mpiexec` on this same binary (see `launch`); the ranks run the
//! ignored test `rank`.

mod bench;
mod common;
mod deferred;
mod empty;
mod exchange;
mod fault_matrix;
mod faults;
mod heap;
mod hier;
mod immediate;
mod isolation;
mod launch;
mod layout;
mod pap;
mod random;
mod rank;
mod reduce;
mod relay;
mod scan;
mod scatter_gather;
mod threads;
mod unchanged;
mod varcount;

use launch::{mpirun, Job};

/// A rank that waits longer than `ZCOLL_WARN_AFTER` says, in one line on standard error,
/// which collective it is in, that call's number on the node and the ranks it still waits
/// for; with `ZCOLL_WARN_AFTER=0` nothing is said.
#[test]
fn warn_after_np3() {
    let job = |after| {
        Job { np: 3, scenario: "warn-after", env: &[("ZCOLL_WARN_AFTER", after)], ..Job::default() }
            .output()
            .1
    };
    let stderr = job("0.5");
    for r in 0..2 {
        let said = stderr.lines().any(|l| {
            l.starts_with(&format!("zcoll: rank {r} has waited "))
                && l.contains("in bcast, collective call ")
                && l.contains("ranks not yet in it: [2]")
        });
        assert!(said, "rank {r} did not say what it waits for:\n{stderr}");
    }
    assert!(!stderr.contains("zcoll: rank 2 has waited"), "the late rank waited for nobody:\n{stderr}");
    let quiet = job("0");
    assert!(!quiet.contains("has waited"), "ZCOLL_WARN_AFTER=0 still reported:\n{quiet}");
}

/// zcoll's events reach a `log` logger (through tracing's `log` bridge, with no tracing
/// subscriber installed) and a tracing subscriber alike: at debug level the node's
/// transport and why, and each call's algorithm and where it came from; at warn level the
/// fallback of an algorithm the call names that cannot run on a `cico` node; nothing with
/// the filter off.
/// A communicator dropped right after a bad call whose root left it early: the root
/// reports the failure on standard error, since no next call will. So do the ranks that
/// returned `Ok` from a call one rank failed alone. Nobody reports a call that failed on
/// every rank with `PreviousFailed`.
#[test]
fn deferred_drop_report_np3() {
    let (_, stderr) = Job { np: 3, scenario: "deferred-drop", ..Job::default() }.output();
    assert!(
        stderr.contains("zcoll: rank 0: the last collective call on this communicator")
            && stderr.contains("failed on another rank"),
        "no report of the deferred failure:\n{stderr}"
    );
    for r in 0..2 {
        let said = stderr.lines().any(|l| {
            l.starts_with(&format!("zcoll: rank {r}: the last collective call"))
                && l.contains("which this rank ended with a success, failed on rank 2")
        });
        assert!(said, "rank {r} did not report the call rank 2 failed alone:\n{stderr}");
    }
    // The third communicator's last call failed with `PreviousFailed` on every rank: no
    // report of it (its call 2; the reports above are of call 1).
    assert!(!stderr.contains("(call 2 of the node)"), "a report of a failure every rank reported:\n{stderr}");
}

#[test]
fn log_np2() {
    for logger in ["log", "tracing"] {
        let job = |filter| {
            let env = [("ZCOLL_TRANSPORT", "cico"), ("ZCOLL_TEST_LOGGER", logger), ("RUST_LOG", filter)];
            Job { np: 2, scenario: "log", env: &env, ..Job::default() }.output().1
        };
        let record = |stderr: &str, level: &str, text: &str| {
            stderr.lines().any(|l| l.contains(level) && l.contains("zcoll::") && l.contains(text))
        };
        let fallback =
            "ZCOLL_BCAST_ALGORITHM: direct-read (named by the call) cannot run on a cico node: runs as";
        let debug = job("zcoll=debug");
        for r in 0..2 {
            let setup = format!("rank {r}: local rank {r} of 2, transport cico: ");
            assert!(record(&debug, "DEBUG", &setup), "{logger}: no set-up record of rank {r}:\n{debug}");
        }
        // One record of each call's algorithm per rank: the model's (the machine's
        // profile decides which) and the one the call named, run staged.
        let calls = |why: &str| {
            debug
                .lines()
                .filter(|l| l.contains("DEBUG") && l.contains("ZCOLL_BCAST_ALGORITHM: ") && l.contains(why))
                .count()
        };
        assert_eq!(calls("(the cost model's choice, copy-in/copy-out)"), 2, "{logger}:\n{debug}");
        assert_eq!(calls(": staged (named by the call, copy-in/copy-out)"), 2, "{logger}:\n{debug}");
        assert!(record(&debug, "WARN", fallback), "{logger}: no warning of the fallback:\n{debug}");
        let warn = job("zcoll=warn");
        assert!(record(&warn, "WARN", fallback), "{logger}: no warning of the fallback:\n{warn}");
        assert!(!warn.contains("DEBUG"), "{logger}: debug records under zcoll=warn:\n{warn}");
        let off = job("off");
        assert!(!off.contains("zcoll::"), "{logger}: records with RUST_LOG=off:\n{off}");
    }
}

/// Every job allocates its large buffers in the shared heap: those of the `heap` scenario
/// and, as a stress test of the allocator, everyone else's.
#[global_allocator]
static ALLOC: zcoll::ShmAlloc = zcoll::ShmAlloc::new();

/// The entry point of every rank of a launched job (not a test of its own).
#[test]
#[ignore = "a rank of an MPI job: started by the other tests under mpiexec"]
fn rank() {
    rank::main();
}

macro_rules! at {
    ($($name:ident: $np:expr, $scenario:expr, [$($k:expr => $v:expr),*];)*) => {$(
        #[test]
        fn $name() {
            mpirun($np, $scenario, &[$(($k, $v)),*]);
        }
    )*};
}

at! {
    bcast_np1: 1, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_np2: 2, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_np3: 3, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_np4: 4, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_np5: 5, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_np8: 8, "bcast", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    bcast_cico_np1: 1, "bcast", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    bcast_cico_np3: 3, "bcast", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    bcast_cico_np8: 8, "bcast", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    bcast_vnodes_np4_k2: 4, "bcast", ["ZCOLL_NODE_SIZE" => "2"];
    bcast_vnodes_np5_k2: 5, "bcast", ["ZCOLL_NODE_SIZE" => "2"];
    bcast_vnodes_np8_k3: 8, "bcast", ["ZCOLL_NODE_SIZE" => "3"];
    bcast_vnodes_np8_k1: 8, "bcast", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_TRANSPORT" => "cico"];
    errors_np1: 1, "errors", [];
    errors_np2: 2, "errors", [];
    errors_np5: 5, "errors", ["ZCOLL_EXPECT_ARRIVAL" => "flat"];
    errors_np8: 8, "errors", ["ZCOLL_EXPECT_ARRIVAL" => "tree:2"];
    errors_flat_np8: 8, "errors", ["ZCOLL_ARRIVAL" => "flat", "ZCOLL_EXPECT_ARRIVAL" => "flat"];
    errors_cico_np3: 3, "errors", ["ZCOLL_TRANSPORT" => "cico"];
    errors_vnodes_np8_k3: 8, "errors", ["ZCOLL_NODE_SIZE" => "3"];
    bad_env_yield_np2: 2, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_YIELD_US", "ZCOLL_YIELD_US" => "fast"];
    bad_env_timeout_np3: 3, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_TIMEOUT", "ZCOLL_TIMEOUT" => "-1"];
    bad_env_node_size_np3: 3, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_NODE_SIZE", "ZCOLL_NODE_SIZE" => "0"];
    bad_env_arrival_np3: 3, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_ARRIVAL", "ZCOLL_ARRIVAL" => "tree:1"];
    bad_env_progress_np2: 2, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_PROGRESS", "ZCOLL_PROGRESS" => "threads"];
    bad_env_piece_np2: 2, "bad-env", ["ZCOLL_TEST_BAD_VAR" => "ZCOLL_MPI_PIECE", "ZCOLL_MPI_PIECE" => "0"];
    setup_fails_vnodes_np4_k2: 4, "setup-fails", ["ZCOLL_NODE_SIZE" => "2"];
    setup_fails_vnodes_np5_k2: 5, "setup-fails", ["ZCOLL_NODE_SIZE" => "2"];
    node_size_disagrees_np4_k2: 4, "node-size-disagrees", ["ZCOLL_NODE_SIZE" => "2"];
    node_size_disagrees_np3_k1: 3, "node-size-disagrees", ["ZCOLL_NODE_SIZE" => "1"];
    algorithm_var_disagrees_np3: 3, "algorithm-var-disagrees", [];
    algorithm_var_disagrees_vnodes_np2_k1: 2, "algorithm-var-disagrees", ["ZCOLL_NODE_SIZE" => "1"];
    algorithm_var_disagrees_vnodes_np4_k2: 4, "algorithm-var-disagrees", ["ZCOLL_NODE_SIZE" => "2"];
    empty_np1: 1, "empty", [];
    empty_np3: 3, "empty", [];
    empty_vnodes_np5_k2: 5, "empty", ["ZCOLL_NODE_SIZE" => "2"];
    empty_vnodes_np8_k3: 8, "empty", ["ZCOLL_NODE_SIZE" => "3"];
    empty_vnodes_np4_k1: 4, "empty", ["ZCOLL_NODE_SIZE" => "1"];
    empty_cico_vnodes_np5_k2: 5, "empty", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    unchanged_np2: 2, "unchanged", [];
    unchanged_np3: 3, "unchanged", [];
    unchanged_vnodes_np5_k2: 5, "unchanged", ["ZCOLL_NODE_SIZE" => "2"];
    unchanged_vnodes_np8_k3: 8, "unchanged", ["ZCOLL_NODE_SIZE" => "3"];
    unchanged_vnodes_np4_k1: 4, "unchanged", ["ZCOLL_NODE_SIZE" => "1"];
    exposure_panic_np2: 2, "exposure-panic", [];
    exposure_panic_np3: 3, "exposure-panic", [];
    exposure_panic_heap_np3: 3, "exposure-panic", ["ZCOLL_TRANSPORT" => "heap"];
    layout_np1: 1, "layout", ["ZCOLL_TEST_SEED" => "2301"];
    layout_np2: 2, "layout", ["ZCOLL_TEST_SEED" => "2302"];
    layout_np3: 3, "layout", ["ZCOLL_TEST_SEED" => "2303"];
    layout_np5: 5, "layout", ["ZCOLL_TEST_SEED" => "2305"];
    layout_np8: 8, "layout", ["ZCOLL_TEST_SEED" => "2308"];
    layout_heap_np3: 3, "layout", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_TEST_SEED" => "2313"];
    layout_vnodes_np4_k1: 4, "layout", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_TEST_SEED" => "2341"];
    layout_vnodes_np5_k2: 5, "layout", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_SEED" => "2352"];
    layout_vnodes_np6_k3: 6, "layout", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TEST_SEED" => "2363"];
    layout_vnodes_np8_k3: 8, "layout", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TEST_SEED" => "2383"];
    layout_direct_np1: 1, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2401"];
    layout_direct_np2: 2, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2402"];
    layout_direct_np3: 3, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2403"];
    layout_direct_np5: 5, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2405"];
    layout_direct_np8: 8, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2408"];
    layout_packed_np3: 3, "layout", ["ZCOLL_LAYOUT_ALGORITHM" => "packed", "ZCOLL_TEST_SEED" => "2413"];
    layout_direct_cma_np3: 3, "layout",
        ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2423"];
    layout_direct_heap_np2: 2, "layout",
        ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2432"];
    layout_direct_vnodes_np5_k2: 5, "layout",
        ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_LAYOUT_ALGORITHM" => "direct", "ZCOLL_TEST_SEED" => "2452"];
    scan_np1: 1, "scan", [];
    scan_np2: 2, "scan", [];
    scan_np3: 3, "scan", [];
    scan_np5: 5, "scan", [];
    scan_np8: 8, "scan", [];
    scan_vnodes_np5_k2: 5, "scan", ["ZCOLL_NODE_SIZE" => "2"];
    scan_vnodes_np8_k3: 8, "scan", ["ZCOLL_NODE_SIZE" => "3"];
    scan_vnodes_np4_k1: 4, "scan", ["ZCOLL_NODE_SIZE" => "1"];
    immediate_np1: 1, "immediate", [];
    immediate_np2: 2, "immediate", [];
    immediate_np3: 3, "immediate", [];
    immediate_np5: 5, "immediate", [];
    immediate_np8: 8, "immediate", [];
    immediate_cico_np3: 3, "immediate", ["ZCOLL_TRANSPORT" => "cico"];
    immediate_wait_np3: 3, "immediate", ["ZCOLL_PROGRESS" => "wait"];
    immediate_eager_np2: 2, "immediate", ["ZCOLL_PROGRESS" => "thread:0"];
    immediate_vnodes_np4_k2: 4, "immediate", ["ZCOLL_NODE_SIZE" => "2"];
    immediate_vnodes_np5_k2: 5, "immediate", ["ZCOLL_NODE_SIZE" => "2"];
    immediate_vnodes_np8_k3: 8, "immediate", ["ZCOLL_NODE_SIZE" => "3"];
    immediate_vnodes_np3_k1: 3, "immediate", ["ZCOLL_NODE_SIZE" => "1"];
    immediate_multiple_np3: 3, "immediate-multiple", [];
    immediate_multiple_vnodes_np4_k2: 4, "immediate-multiple", ["ZCOLL_NODE_SIZE" => "2"];
    immediate_multiple_vnodes_np5_k2: 5, "immediate-multiple", ["ZCOLL_NODE_SIZE" => "2"];
    threads_multiple_np1: 1, "threads", ["ZCOLL_TEST_THREADING" => "multiple"];
    threads_multiple_np3: 3, "threads", ["ZCOLL_TEST_THREADING" => "multiple"];
    threads_multiple_vnodes_np4_k2: 4, "threads", ["ZCOLL_TEST_THREADING" => "multiple", "ZCOLL_NODE_SIZE" => "2"];
    threads_funneled_np2: 2, "threads", ["ZCOLL_TEST_THREADING" => "funneled"];
    threads_funneled_vnodes_np4_k2: 4, "threads", ["ZCOLL_TEST_THREADING" => "funneled", "ZCOLL_NODE_SIZE" => "2"];
    split_np1: 1, "split", [];
    split_np4: 4, "split", [];
    split_np5: 5, "split", [];
    split_vnodes_np6_k2: 6, "split", ["ZCOLL_NODE_SIZE" => "2"];
    random_np2: 2, "random", [];
    random_np3: 3, "random", [];
    random_np5: 5, "random", [];
    random_np8: 8, "random", [];
    random_vnodes_np5_k2: 5, "random", ["ZCOLL_NODE_SIZE" => "2"];
    random_pieces_np4_k1: 4, "random", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_MPI_PIECE" => "1000"];
    random_pieces_np5_k2: 5, "random", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_MPI_PIECE" => "1000"];
    random_vnodes_np8_k3: 8, "random", ["ZCOLL_NODE_SIZE" => "3"];
    random_cico_np3: 3, "random", ["ZCOLL_TRANSPORT" => "cico"];
    // Nodes that chose different transports (the first node copies in and out, the others
    // use CMA), as on a cluster where some nodes refuse CMA: every collective across them.
    random_mixed_transports_np5_k2: 5, "random", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_CICO_BELOW" => "2"];
    varcount_mixed_transports_np4_k2: 4, "varcount", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_CICO_BELOW" => "2"];
    // Including the reductions' bad calls: an allreduce asked for `root-read` fails with
    // `Unsupported` on every rank, the `cico` node's too.
    reduce_mixed_transports_np5_k2: 5, "reduce", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_CICO_BELOW" => "2"];
    // The bad calls of the variable-count and PAP collectives across them: requests that
    // differ are compared across nodes, so the `cico` node's ranks fail as the others do.
    varcount_errors_mixed_transports_np5_k2: 5, "varcount-errors", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_CICO_BELOW" => "2"];
    pap_errors_mixed_transports_np5_k2: 5, "pap-errors", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_CICO_BELOW" => "2"];
    random_xpmem_np3: 3, "random", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem"];
    // Beyond the 8 ranks above, oversubscribing 2 cores: with the default seed, the
    // first 72 steps call all 14 kinds of collective at 16 and at 32 ranks (blocks up to
    // 3 MB); about 10 s per job here.
    random_np16: 16, "random", ["ZCOLL_RANDOM_STEPS" => "72", "ZCOLL_EXPECT_ARRIVAL" => "tree:2"];
    random_np32: 32, "random", ["ZCOLL_RANDOM_STEPS" => "72", "ZCOLL_EXPECT_ARRIVAL" => "tree:2"];
    random_vnodes_np32_k8: 32, "random", ["ZCOLL_RANDOM_STEPS" => "72", "ZCOLL_NODE_SIZE" => "8", "ZCOLL_EXPECT_ARRIVAL" => "tree:2"];
    random_tree_np9_k4: 9, "random", ["ZCOLL_RANDOM_STEPS" => "72", "ZCOLL_ARRIVAL" => "tree:4", "ZCOLL_EXPECT_ARRIVAL" => "tree:4"];
    errors_tree_np16_k4: 16, "errors", ["ZCOLL_ARRIVAL" => "tree:4", "ZCOLL_EXPECT_ARRIVAL" => "tree:4"];
    errors_tree_np32_k3: 32, "errors", ["ZCOLL_ARRIVAL" => "tree:3", "ZCOLL_EXPECT_ARRIVAL" => "tree:3"];
    // The deferred verdict: `1`, the root of a one-phase broadcast leaves (one node, flat
    // arrivals); `0`, it may not (a tree of arrivals, virtual nodes).
    deferred_np2: 2, "deferred", ["ZCOLL_EXPECT_LEAVE" => "1"];
    deferred_np3: 3, "deferred", ["ZCOLL_EXPECT_LEAVE" => "1"];
    deferred_np5: 5, "deferred", ["ZCOLL_EXPECT_LEAVE" => "1"];
    deferred_flat_np8: 8, "deferred", ["ZCOLL_ARRIVAL" => "flat", "ZCOLL_EXPECT_LEAVE" => "1"];
    deferred_np8: 8, "deferred", ["ZCOLL_EXPECT_ARRIVAL" => "tree:2", "ZCOLL_EXPECT_LEAVE" => "0"];
    deferred_cico_np3: 3, "deferred", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_LEAVE" => "1"];
    deferred_vnodes_np5_k2: 5, "deferred", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_EXPECT_LEAVE" => "0"];
    deferred_vnodes_np8_k3: 8, "deferred", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_EXPECT_LEAVE" => "0"];
    // The verdict across nodes carried by the leaders (bcast, allreduce, reduce,
    // barrier), with its deferral after the exchange: even, uneven and one-rank nodes.
    relay_vnodes_np2_k1: 2, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np3_k1: 3, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np4_k1: 4, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np5_k1: 5, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np4_k2: 4, "relay", ["ZCOLL_NODE_SIZE" => "2"];
    relay_vnodes_np4_k3: 4, "relay", ["ZCOLL_NODE_SIZE" => "3"];
    relay_vnodes_np7_k1: 7, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np8_k1: 8, "relay", ["ZCOLL_NODE_SIZE" => "1"];
    relay_vnodes_np8_k2: 8, "relay", ["ZCOLL_NODE_SIZE" => "2"];
    relay_vnodes_np8_k3: 8, "relay", ["ZCOLL_NODE_SIZE" => "3"];
    // The soak's short version (scripts/soak runs 10^6 calls at 2, 3 and 8 ranks).
    soak_np3: 3, "soak", ["ZCOLL_RANDOM_STEPS" => "10000"];
    faults_np3: 3, "faults", [];
    faults_np5: 5, "faults", [];
    panic_alone_np2: 2, "panic-alone", [];
    panic_alone_np3: 3, "panic-alone", [];
    panic_alone_np5: 5, "panic-alone", [];
    // Across nodes, the failing rank (the last) in a node of two: its copy fails in the
    // middle of its node's step, and the legs between nodes and the agreement carry the
    // failure to every rank (the panicking operator is left out there: see the scenario).
    faults_vnodes_np5_k3: 5, "faults", ["ZCOLL_NODE_SIZE" => "3"];
    departed_np3: 3, "departed", ["ZCOLL_TIMEOUT" => "30"];
    departed_np5: 5, "departed", ["ZCOLL_TIMEOUT" => "30"];
    barrier_np1: 1, "barrier", [];
    barrier_np2: 2, "barrier", [];
    barrier_np3: 3, "barrier", [];
    barrier_np5: 5, "barrier", [];
    barrier_np8: 8, "barrier", [];
    barrier_vnodes_np8_k3: 8, "barrier", ["ZCOLL_NODE_SIZE" => "3"];
    calibrate_np1: 1, "calibrate", [];
    calibrate_np2: 2, "calibrate", [];
    calibrate_np3: 3, "calibrate", [];
    calibrate_sockets_np5: 5, "calibrate", ["ZCOLL_VIRTUAL_SOCKETS" => "2"];
    reduce_np1: 1, "reduce", [];
    reduce_np2: 2, "reduce", [];
    reduce_np3: 3, "reduce", [];
    reduce_np4: 4, "reduce", [];
    reduce_np5: 5, "reduce", [];
    reduce_np8: 8, "reduce", [];
    reduce_cico_np3: 3, "reduce", ["ZCOLL_TRANSPORT" => "cico"];
    reduce_vnodes_np4_k2: 4, "reduce", ["ZCOLL_NODE_SIZE" => "2"];
    reduce_vnodes_np8_k3: 8, "reduce", ["ZCOLL_NODE_SIZE" => "3"];
    reduce_vnodes_np6_k4: 6, "reduce", ["ZCOLL_NODE_SIZE" => "4"];
    reduce_vnodes_np6_k2: 6, "reduce", ["ZCOLL_NODE_SIZE" => "2"];
    reduce_vnodes_np4_k1: 4, "reduce", ["ZCOLL_NODE_SIZE" => "1"];
    reduce_vnodes_np5_k1: 5, "reduce", ["ZCOLL_NODE_SIZE" => "1"];
    // The root's reads as what `Auto` means for a reduce (in place, the user operators,
    // every size above), and the allreduce refusing them.
    reduce_root_read_np2: 2, "reduce", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_root_read_np3: 3, "reduce", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_root_read_np5: 5, "reduce", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_root_read_np8: 8, "reduce", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_root_read_vnodes_np6_k3: 6, "reduce", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    // This binary's large `Vec`s lie in the shared heap (its global allocator), which the
    // jobs above reach with loads: these copy with CMA, the mebibyte chunks included.
    reduce_root_read_cma_np2: 2, "reduce", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma", "ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_root_read_cma_np3: 3, "reduce", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma", "ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    reduce_cma_np2: 2, "reduce", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma"];
    random_root_read_np3: 3, "random", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    random_root_read_np5: 5, "random", ["ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    direct_bcast_vnodes_np4_k1: 4, "bcast", ["ZCOLL_NODE_SIZE" => "1"];
    direct_barrier_vnodes_np4_k1: 4, "barrier", ["ZCOLL_NODE_SIZE" => "1"];
    direct_errors_vnodes_np4_k1: 4, "errors", ["ZCOLL_NODE_SIZE" => "1"];
    direct_scatter_vnodes_np4_k1: 4, "scatter", ["ZCOLL_NODE_SIZE" => "1"];
    direct_gather_vnodes_np4_k1: 4, "gather", ["ZCOLL_NODE_SIZE" => "1"];
    direct_scatter_gather_errors_vnodes_np4_k1: 4, "scatter-gather-errors", ["ZCOLL_NODE_SIZE" => "1"];
    direct_allgather_vnodes_np4_k1: 4, "exchange-allgather", ["ZCOLL_NODE_SIZE" => "1"];
    direct_alltoall_vnodes_np4_k1: 4, "exchange-alltoall", ["ZCOLL_NODE_SIZE" => "1"];
    direct_exchange_errors_vnodes_np4_k1: 4, "exchange-errors", ["ZCOLL_NODE_SIZE" => "1"];
    direct_varcount_vnodes_np4_k1: 4, "varcount", ["ZCOLL_NODE_SIZE" => "1"];
    direct_varcount_errors_vnodes_np4_k1: 4, "varcount-errors", ["ZCOLL_NODE_SIZE" => "1"];
    scatter_np1: 1, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_np2: 2, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_np3: 3, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_np4: 4, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_np5: 5, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_np8: 8, "scatter", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    scatter_cico_np3: 3, "scatter", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    scatter_cico_np8: 8, "scatter", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    scatter_vnodes_np4_k2: 4, "scatter", ["ZCOLL_NODE_SIZE" => "2"];
    scatter_vnodes_np5_k2: 5, "scatter", ["ZCOLL_NODE_SIZE" => "2"];
    scatter_vnodes_np8_k3: 8, "scatter", ["ZCOLL_NODE_SIZE" => "3"];
    scatter_vnodes_cico_np5_k2: 5, "scatter", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    gather_np1: 1, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_np2: 2, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_np3: 3, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_np4: 4, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_np5: 5, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_np8: 8, "gather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    gather_cico_np3: 3, "gather", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    gather_cico_np8: 8, "gather", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    gather_vnodes_np4_k2: 4, "gather", ["ZCOLL_NODE_SIZE" => "2"];
    gather_vnodes_np5_k2: 5, "gather", ["ZCOLL_NODE_SIZE" => "2"];
    gather_vnodes_np8_k3: 8, "gather", ["ZCOLL_NODE_SIZE" => "3"];
    gather_vnodes_cico_np5_k2: 5, "gather", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    scatter_gather_errors_np1: 1, "scatter-gather-errors", [];
    scatter_gather_errors_np2: 2, "scatter-gather-errors", [];
    scatter_gather_errors_np5: 5, "scatter-gather-errors", [];
    scatter_gather_errors_np8: 8, "scatter-gather-errors", [];
    scatter_gather_errors_cico_np3: 3, "scatter-gather-errors", ["ZCOLL_TRANSPORT" => "cico"];
    scatter_gather_errors_vnodes_np8_k3: 8, "scatter-gather-errors", ["ZCOLL_NODE_SIZE" => "3"];
    varcount_np1: 1, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_np2: 2, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_np3: 3, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_np4: 4, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_np5: 5, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_np8: 8, "varcount", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    varcount_cico_np3: 3, "varcount", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    varcount_cico_np8: 8, "varcount", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    varcount_vnodes_np4_k2: 4, "varcount", ["ZCOLL_NODE_SIZE" => "2"];
    varcount_vnodes_np5_k2: 5, "varcount", ["ZCOLL_NODE_SIZE" => "2"];
    varcount_vnodes_np8_k3: 8, "varcount", ["ZCOLL_NODE_SIZE" => "3"];
    varcount_vnodes_cico_np5_k2: 5, "varcount", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    varcount_errors_np1: 1, "varcount-errors", [];
    varcount_errors_np2: 2, "varcount-errors", [];
    varcount_errors_np5: 5, "varcount-errors", [];
    varcount_errors_np8: 8, "varcount-errors", [];
    varcount_errors_cico_np3: 3, "varcount-errors", ["ZCOLL_TRANSPORT" => "cico"];
    varcount_errors_vnodes_np8_k3: 8, "varcount-errors", ["ZCOLL_NODE_SIZE" => "3"];
    exchange_allgather_np1: 1, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_np2: 2, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_np3: 3, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_np4: 4, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_np5: 5, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_np8: 8, "exchange-allgather", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_allgather_cico_np3: 3, "exchange-allgather", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    exchange_allgather_cico_np8: 8, "exchange-allgather", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    exchange_allgather_vnodes_np4_k2: 4, "exchange-allgather", ["ZCOLL_NODE_SIZE" => "2"];
    exchange_allgather_vnodes_np5_k2: 5, "exchange-allgather", ["ZCOLL_NODE_SIZE" => "2"];
    exchange_allgather_vnodes_np8_k3: 8, "exchange-allgather", ["ZCOLL_NODE_SIZE" => "3"];
    exchange_allgather_vnodes_cico_np5_k2: 5, "exchange-allgather", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    exchange_alltoall_np1: 1, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_np2: 2, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_np3: 3, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_np4: 4, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_np5: 5, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_np8: 8, "exchange-alltoall", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    exchange_alltoall_cico_np3: 3, "exchange-alltoall", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    exchange_alltoall_cico_np8: 8, "exchange-alltoall", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    exchange_alltoall_vnodes_np4_k2: 4, "exchange-alltoall", ["ZCOLL_NODE_SIZE" => "2"];
    exchange_alltoall_vnodes_np5_k2: 5, "exchange-alltoall", ["ZCOLL_NODE_SIZE" => "2"];
    exchange_alltoall_vnodes_np8_k3: 8, "exchange-alltoall", ["ZCOLL_NODE_SIZE" => "3"];
    exchange_alltoall_vnodes_cico_np5_k2: 5, "exchange-alltoall", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    exchange_errors_np1: 1, "exchange-errors", [];
    exchange_errors_np2: 2, "exchange-errors", [];
    exchange_errors_np5: 5, "exchange-errors", [];
    exchange_errors_np8: 8, "exchange-errors", [];
    exchange_errors_cico_np3: 3, "exchange-errors", ["ZCOLL_TRANSPORT" => "cico"];
    exchange_errors_vnodes_np8_k3: 8, "exchange-errors", ["ZCOLL_NODE_SIZE" => "3"];
    exchange_env_np3: 3, "exchange-env", ["ZCOLL_ALLGATHER_ALGORITHM" => "ring-neighbor:3", "ZCOLL_ALLTOALL_ALGORITHM" => "bogus"];
    heap_np1: 1, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_np2: 2, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_np3: 3, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_np4: 4, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_np5: 5, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_np8: 8, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_xpmem_np1: 1, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_np2: 2, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_np3: 3, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_np4: 4, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_np5: 5, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_np8: 8, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_xpmem_auto_np3: 3, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_no_xpmem_np3: 3, "heap", ["ZCOLL_EXPECT_TRANSPORT" => "cma", "ZCOLL_EXPECT_REASON" => "xpmem: libxpmem.so.0 not found"];
    heap_no_xpmem_np1: 1, "heap", ["ZCOLL_EXPECT_TRANSPORT" => "cma", "ZCOLL_EXPECT_REASON" => "xpmem: libxpmem.so.0 not found"];
    heap_xpmem_missing_np2: 2, "xpmem-missing", ["ZCOLL_TRANSPORT" => "xpmem"];
    heap_cma_np3: 3, "heap", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma"];
    xpmem_not_loaded_np2: 2, "barrier", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_UNMAPPED" => heap::standin()];
    xpmem_loaded_np2: 2, "barrier", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    heap_cico_np3: 3, "heap", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    heap_vnodes_np5_k2: 5, "heap", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "heap"];
    heap_vnodes_np6_k3: 6, "heap", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TRANSPORT" => "heap"];
    heap_cma_vnodes_np4_k2: 4, "heap", ["ZCOLL_NODE_SIZE" => "2"];
    heap_xpmem_vnodes_np4_k2: 4, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "xpmem"];
    heap_gather_loads_np2: 2, "heap-gather-loads", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_gather_loads_np3: 3, "heap-gather-loads", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_gather_loads_np5: 5, "heap-gather-loads", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_gather_loads_xpmem_np3: 3, "heap-gather-loads", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem"];
    cma_gather_staged_np2: 2, "heap-gather-loads", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma"];
    cma_gather_staged_np3: 3, "heap-gather-loads", ["ZCOLL_TRANSPORT" => "cma", "ZCOLL_EXPECT_TRANSPORT" => "cma"];
    heap_reduce_np2: 2, "reduce", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_reduce_np4: 4, "reduce", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_reduce_np8: 8, "reduce", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap"];
    heap_reduce_xpmem_np3: 3, "reduce", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem"];
    heap_reduce_xpmem_np5: 5, "reduce", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem"];
    heap_reduce_xpmem_np8: 8, "reduce", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem"];
    heap_root_read_np3: 3, "heap", ["ZCOLL_TRANSPORT" => "heap", "ZCOLL_EXPECT_TRANSPORT" => "heap", "ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    heap_root_read_xpmem_np2: 2, "heap", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem", "ZCOLL_EXPECT_TRANSPORT" => "xpmem", "ZCOLL_REDUCE_ALGORITHM" => "root-read"];
    heap_bcast_xpmem_np3: 3, "bcast", ["XPMEM_LIBRARY" => heap::standin(), "ZCOLL_TRANSPORT" => "xpmem"];
    pap_np1: 1, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_np2: 2, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_np3: 3, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_np4: 4, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_np5: 5, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_np8: 8, "pap", ["ZCOLL_EXPECT_TRANSPORT" => "cma"];
    pap_cico_np3: 3, "pap", ["ZCOLL_TRANSPORT" => "cico", "ZCOLL_EXPECT_TRANSPORT" => "cico"];
    pap_env_np3: 3, "pap", ["ZCOLL_ALLTOALL_ALGORITHM" => "pap-write"];
    pap_vnodes_np4_k2: 4, "pap", ["ZCOLL_NODE_SIZE" => "2"];
    pap_vnodes_np5_k2: 5, "pap", ["ZCOLL_NODE_SIZE" => "2"];
    pap_vnodes_np8_k3: 8, "pap", ["ZCOLL_NODE_SIZE" => "3"];
    pap_vnodes_cico_np5_k2: 5, "pap", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TRANSPORT" => "cico"];
    pap_errors_np2: 2, "pap-errors", [];
    pap_errors_np5: 5, "pap-errors", [];
    pap_errors_cico_np3: 3, "pap-errors", ["ZCOLL_TRANSPORT" => "cico"];
    pap_errors_vnodes_np5_k2: 5, "pap-errors", ["ZCOLL_NODE_SIZE" => "2"];
    pap_errors_vnodes_np8_k3: 8, "pap-errors", ["ZCOLL_NODE_SIZE" => "3"];
    pap_stress_vnodes_np4_k2: 4, "pap-stress", ["ZCOLL_NODE_SIZE" => "2"];
    pap_stress_vnodes_np6_k2: 6, "pap-stress", ["ZCOLL_NODE_SIZE" => "2"];
    pap_stress_vnodes_np8_k3: 8, "pap-stress", ["ZCOLL_NODE_SIZE" => "3"];
    hier_np4_k1: 4, "hier", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_TEST_SEED" => "1041"];
    hier_np4_k2: 4, "hier", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_SEED" => "1042"];
    hier_np4_k3: 4, "hier", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TEST_SEED" => "1043"];
    hier_np4_k4: 4, "hier", ["ZCOLL_NODE_SIZE" => "4", "ZCOLL_TEST_SEED" => "1044"];
    hier_np6_k1: 6, "hier", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_TEST_SEED" => "1061"];
    hier_np6_k2: 6, "hier", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_SEED" => "1062"];
    hier_np6_k3: 6, "hier", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TEST_SEED" => "1063"];
    hier_np6_k4: 6, "hier", ["ZCOLL_NODE_SIZE" => "4", "ZCOLL_TEST_SEED" => "1064"];
    hier_np8_k1: 8, "hier", ["ZCOLL_NODE_SIZE" => "1", "ZCOLL_TEST_SEED" => "1081"];
    hier_np8_k2: 8, "hier", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_SEED" => "1082"];
    hier_np8_k3: 8, "hier", ["ZCOLL_NODE_SIZE" => "3", "ZCOLL_TEST_SEED" => "1083"];
    hier_np8_k4: 8, "hier", ["ZCOLL_NODE_SIZE" => "4", "ZCOLL_TEST_SEED" => "1084"];
    bench_np2: 2, "bench", [];
    bench_imbalance_np3: 3, "bench", ["ZCOLL_TEST_BENCH_ARGS" => "--algorithms all --mif 2 --late 34"];
    bench_vnodes_np4_k2: 4, "bench", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_BENCH_ARGS" => "--mif 1 --start barrier"];
    bench_start_np2: 2, "bench-start", [];
    bench_start_np3: 3, "bench-start", [];
}

/// A rank that is not dumpable, in a job without CAP_SYS_PTRACE, really refuses CMA.
#[test]
fn refused_cma_falls_back_to_cico() {
    for np in [2, 3] {
        Job {
            np,
            scenario: "refused-cma",
            env: &[
                ("ZCOLL_TEST_NONDUMPABLE_RANK", "1"),
                // The MPI library must not use CMA itself: Open MPI's vader, and UCX under
                // MPICH, abort on the refusal.
                ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
                ("UCX_TLS", "^cma"),
            ],
            without_ptrace: true,
            ..Job::default()
        }
        .run();
    }
}

/// A rank that turns non-dumpable after the node chose CMA: the calls that touch its
/// memory, calibration among them, fail on every rank; the others go on working.
#[test]
fn cma_revoked_mid_job_is_an_error_on_every_rank() {
    for np in [2, 3] {
        Job {
            np,
            scenario: "revoked-cma",
            env: &[("OMPI_MCA_btl_vader_single_copy_mechanism", "none"), ("UCX_TLS", "^cma")],
            without_ptrace: true,
            ..Job::default()
        }
        .run();
    }
}

/// A `/dev/shm` too small for the node's control segment is an error of `Comm::new` on
/// every rank (the segment's pages are allocated when it is made), not a `SIGBUS` in the
/// first collective that touches a page past the room. Open MPI only: the job runs in a
/// mount namespace of its own (as root), and Open MPI's own shared memory is off.
#[test]
fn small_dev_shm_is_an_error_on_every_rank() {
    if !launch::open_mpi() {
        return;
    }
    for np in [2, 3] {
        Job {
            np,
            scenario: "small-shm",
            env: &[("OMPI_MCA_btl", "self,tcp")],
            shm_size: Some("16k"),
            ..Job::default()
        }
        .run();
    }
}

/// Under an address-space limit (`ulimit -v`, 16 GiB here) that refuses the shared heap's
/// 64 GiB reservation, the node takes CMA and says why, `alloc` is an error, and forcing
/// `heap` is an error on every rank.
#[test]
fn no_room_for_the_heap_falls_back_to_cma() {
    for (np, transport) in [(2, ""), (3, ""), (2, "heap")] {
        let env: &[(&str, &str)] = match transport {
            "" => &[],
            forced => &[("ZCOLL_TRANSPORT", forced)],
        };
        Job { np, scenario: "no-room-for-heap", env, address_space: Some("17179869184"), ..Job::default() }
            .run();
    }
}

/// Forcing `cma` where a peer refuses it is an error on every rank, not a silent fallback.
#[test]
fn forced_cma_on_a_refusing_node_is_an_error() {
    Job {
        np: 3,
        scenario: "refused-cma",
        env: &[
            ("ZCOLL_TEST_NONDUMPABLE_RANK", "1"),
            ("ZCOLL_TRANSPORT", "cma"),
            ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
            ("UCX_TLS", "^cma"),
        ],
        without_ptrace: true,
        ..Job::default()
    }
    .run();
}
