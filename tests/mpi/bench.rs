//! `zcoll bench` as a job: the CLI's own argument parser and benchmark loop (the files of
//! `src/bin/zcoll/`, compiled into this test binary), run at a few sizes; rank 0 then
//! checks the CSV it wrote: the exact header, every collective and size present, and
//! every time positive. Every iteration's result is checked by the benchmark itself, so a
//! wrong collective fails the job.

// The benchmark's modules, as the `zcoll` binary has them; this scenario uses only part
// of them.
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/zcoll/bench.rs"]
mod cli;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/zcoll/colls.rs"]
mod colls;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/zcoll/plot.rs"]
mod plot;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/zcoll/stats.rs"]
mod stats;

use clap::Parser;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::Comm;

/// `zcoll bench --coll all --sizes 8:64K --iters 5 --csv FILE --plot FILE`, plus the
/// arguments in `ZCOLL_TEST_BENCH_ARGS` (space-separated).
pub(crate) fn bench(world: &SimpleCommunicator, comm: &Comm) {
    let dir = std::env::temp_dir();
    let csv = dir.join(format!("zcoll-bench-{}.csv", std::process::id()));
    let svg = csv.with_extension("svg");
    let extra = std::env::var("ZCOLL_TEST_BENCH_ARGS").unwrap_or_default();
    let mut line = vec!["bench", "--coll", "all", "--sizes", "8:64K", "--iters", "5", "--warmup", "1"];
    let (csv_arg, svg_arg) = (csv.to_str().unwrap().to_owned(), svg.to_str().unwrap().to_owned());
    line.extend(["--csv", &csv_arg, "--plot", &svg_arg]);
    line.extend(extra.split_whitespace());
    let args = cli::BenchArgs::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let rows = cli::run(world, comm, &args).unwrap_or_else(|e| panic!("zcoll bench: {e}"));
    if world.rank() != 0 {
        assert!(rows.is_empty());
        return;
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("coll,algorithm,transport,np,size,mpi_us,zcoll_us,ratio,memcpy_us"));
    let algorithms =
        if extra.contains("--algorithms all") { zcoll::BcastAlgorithm::ALL.len() + 1 } else { 1 };
    let mut seen = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 9, "{line}");
        assert_eq!(f[2], comm.info().transport.to_string(), "{line}");
        assert_eq!(f[3], world.size().to_string(), "{line}");
        let size: usize = f[4].parse().unwrap();
        let num = |i: usize| -> f64 { f[i].parse().unwrap_or_else(|_| panic!("{line}: column {i}")) };
        let (mpi, zcoll, ratio, memcpy) = (num(5), num(6), num(7), num(8));
        assert!(mpi > 0.0 && zcoll > 0.0 && ratio > 0.0, "{line}");
        assert!((ratio - mpi / zcoll).abs() <= 0.01 * ratio + 0.002, "{line}: ratio is not mpi / zcoll");
        match f[0] {
            "bcast" => assert!(memcpy > 0.0, "{line}"),
            "barrier" => assert_eq!((size, memcpy), (0, 0.0), "{line}"),
            other => panic!("{line}: unknown collective {other}"),
        }
        seen.push((f[0].to_owned(), f[1].to_owned(), size));
    }
    // 8 B to 64 KiB is 14 powers of two per bcast algorithm, and one barrier row.
    let bcasts = seen.iter().filter(|s| s.0 == "bcast").count();
    assert_eq!(bcasts, 14 * algorithms, "{seen:?}");
    for k in 3..=16 {
        assert!(seen.iter().any(|s| s == &("bcast".into(), "auto".into(), 1 << k)), "{seen:?}");
    }
    assert_eq!(seen.iter().filter(|s| s.0 == "barrier").count(), 1, "{seen:?}");
    assert_eq!(rows.len(), seen.len());
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("bcast: ") && plot.contains("<polyline"));
    std::fs::remove_file(&csv).unwrap();
    std::fs::remove_file(&svg).unwrap();
}
