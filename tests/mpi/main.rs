//! Real MPI jobs: every collective at several process counts, compared with rsmpi.
//!
//! Each test starts `mpiexec` on this same binary (see `launch`); the ranks run the
//! ignored test `rank`.

mod bench;
mod launch;
mod rank;

use launch::{mpirun, Job};

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
    errors_np5: 5, "errors", [];
    errors_np8: 8, "errors", [];
    errors_cico_np3: 3, "errors", ["ZCOLL_TRANSPORT" => "cico"];
    errors_vnodes_np8_k3: 8, "errors", ["ZCOLL_NODE_SIZE" => "3"];
    barrier_np1: 1, "barrier", [];
    barrier_np2: 2, "barrier", [];
    barrier_np5: 5, "barrier", [];
    barrier_np8: 8, "barrier", [];
    barrier_vnodes_np8_k3: 8, "barrier", ["ZCOLL_NODE_SIZE" => "3"];
    bench_np2: 2, "bench", [];
    bench_imbalance_np3: 3, "bench", ["ZCOLL_TEST_BENCH_ARGS" => "--algorithms all --mif 2 --late 34"];
    bench_vnodes_np4_k2: 4, "bench", ["ZCOLL_NODE_SIZE" => "2", "ZCOLL_TEST_BENCH_ARGS" => "--mif 1"];
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
                ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
            ],
            without_ptrace: true,
        }
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
        ],
        without_ptrace: true,
    }
    .run();
}
