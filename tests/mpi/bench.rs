//! `zcoll bench` as a job: the CLI's own argument parser and benchmark loop (the library
//! of the `zcoll-cli` package), run at a few sizes with `Vec` and shared-heap buffers;
//! rank 0 then checks the CSV it wrote: the exact header, every collective of
//! `colls::ALL` in order with every size and algorithm present for both kinds of
//! buffers, every time positive, and no heap buffer moved by CMA where the peers map the
//! heap. Every iteration's result is checked by the benchmark itself, so a
//! wrong collective fails the job.

use zcoll_cli::bench as cli;
use zcoll_cli::colls;
use zcoll_cli::start::Start;

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
    line.extend(["--buffers", "vec,heap"]);
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
    assert_eq!(
        lines.next(),
        Some("coll,algorithm,buffers,moved,transport,np,size,mpi_us,zcoll_us,ratio,memcpy_us,copy_us")
    );
    let all_algorithms = extra.contains("--algorithms all");
    // `auto`, and with `--algorithms all` every algorithm of the collective's enum.
    let algorithms = |c: &dyn colls::Collective| if all_algorithms { c.algorithms().len() + 1 } else { 1 };
    let (mut seen, mut heap) = (Vec::new(), Vec::new());
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 12, "{line}");
        assert!(["vec", "heap"].contains(&f[2]), "{line}");
        let transports = ["cma", "heap", "xpmem"];
        assert!(f[3] == "-" || f[3].split('+').all(|t| transports.contains(&t)), "{line}");
        if f[2] == "heap" && comm.info().heap {
            // Buffers every peer maps, and the leaders' scratch buffers across nodes
            // too: never a CMA system call.
            assert!(!f[3].contains("cma"), "{line}: heap buffers moved by CMA");
        }
        assert_eq!(f[4], comm.info().transport.to_string(), "{line}");
        assert_eq!(f[5], world.size().to_string(), "{line}");
        let size: usize = f[6].parse().unwrap();
        let num = |i: usize| -> f64 { f[i].parse().unwrap_or_else(|_| panic!("{line}: column {i}")) };
        let (mpi, zcoll, ratio, memcpy, copy) = (num(7), num(8), num(9), num(10), num(11));
        // (A ratio under 0.0005 prints as 0.000: an oversubscribed job may get there.)
        assert!(mpi > 0.0 && zcoll > 0.0 && ratio >= 0.0, "{line}");
        assert!((ratio - mpi / zcoll).abs() <= 0.01 * ratio + 0.002, "{line}: ratio is not mpi / zcoll");
        let coll = colls::by_name(f[0]).unwrap_or_else(|| panic!("{line}: unknown collective"));
        let mut names = vec!["auto"];
        names.extend(coll.algorithms());
        assert!(names.contains(&f[1]), "{line}: not an algorithm of {}", f[0]);
        if coll.sized() {
            // Some rank receives bytes at every size (the root of a gather or reduce).
            assert!(memcpy > 0.0 && copy > 0.0, "{line}");
        } else {
            assert_eq!((size, memcpy, copy), (0, 0.0, 0.0), "{line}");
        }
        if f[2] == "vec" {
            seen.push((f[0].to_owned(), f[1].to_owned(), size));
        } else {
            heap.push((f[0].to_owned(), f[1].to_owned(), size));
        }
    }
    // The heap pass measures exactly what the `Vec` pass does.
    assert_eq!(heap, seen);
    // Every collective in `colls::ALL`'s order; 8 B to 64 KiB is 14 powers of two per
    // algorithm of a sized collective, and a barrier is one row.
    let order: Vec<&str> = seen.iter().map(|s| s.0.as_str()).fold(Vec::new(), |mut v, c| {
        if v.last() != Some(&c) {
            v.push(c);
        }
        v
    });
    assert_eq!(order, colls::ALL.iter().map(|c| c.name()).collect::<Vec<_>>(), "{seen:?}");
    for c in colls::ALL {
        let rows = seen.iter().filter(|s| s.0 == c.name()).count();
        if c.sized() {
            assert_eq!(rows, 14 * algorithms(*c), "{}: {seen:?}", c.name());
            for k in 3..=16 {
                let want = (c.name().to_owned(), "auto".to_owned(), 1 << k);
                assert!(seen.contains(&want), "{want:?}: {seen:?}");
            }
        } else {
            assert_eq!(rows, 1, "{}: {seen:?}", c.name());
        }
    }
    assert_eq!(rows.len(), 2 * seen.len());
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("bcast: ") && plot.contains("<polyline"));
    std::fs::remove_file(&csv).unwrap();
    std::fs::remove_file(&svg).unwrap();
}

/// The common start of a timed call (`zcoll_cli::start`): every rank of one host starts
/// from the same instant of the host's clock, a rank delayed by `d` seconds from that
/// instant plus `d`, and none returns before its instant; `--start clock` is refused
/// nowhere on one host. Each rank also checks, on its own clock, that it returned after
/// the instant (a rank that started from its own barrier exit would not see the others'
/// instant, so the gathered instants would differ).
pub(crate) fn common_start(world: &SimpleCommunicator, _comm: &Comm) {
    assert_eq!(Start::decide(world, None), Ok(Start::Clock));
    assert_eq!(Start::decide(world, Some(Start::Clock)), Ok(Start::Clock));
    assert_eq!(Start::decide(world, Some(Start::Barrier)), Ok(Start::Barrier));
    let (me, p) = (world.rank() as u64, world.size() as usize);
    for i in 0..200u64 {
        // Every tenth round, rank r starts r microseconds late.
        let delay_ns = if i % 10 == 9 { 1_000 * me } else { 0 };
        let stamp = Start::Clock.begin(world, delay_ns as f64 * 1e-9);
        assert!(stamp.elapsed() >= 0.0);
        let mut all = vec![0u64; p];
        world.all_gather_into(&stamp.nanos(), &mut all[..]);
        let common = all[0];
        for (r, &at) in all.iter().enumerate() {
            let want = common + if i % 10 == 9 { 1_000 * r as u64 } else { 0 };
            assert_eq!(at, want, "round {i}: rank {r} started at {at}, rank 0 at {common}");
        }
    }
    // The barrier start times from each rank's own exit: no instant to agree on, but it
    // too returns no earlier than its delay after it began.
    let t = std::time::Instant::now();
    let stamp = Start::Barrier.begin(world, 2e-4);
    assert!(t.elapsed() >= std::time::Duration::from_micros(200), "{:?}", t.elapsed());
    assert!(stamp.elapsed() < 1.0);
}
