//! `zcoll`: what zcoll sets up on this machine, and how fast it is.
//!
//! Run it under the MPI launcher: `mpiexec -n 4 zcoll info`, or
//! `mpiexec -n 2 zcoll bench --coll all --sizes 8:64M --csv bench.csv --plot bench.svg`,
//! or `mpiexec -n 2 zcoll tune --plot model.svg`. `zcoll report DIR` (no MPI) turns what
//! `scripts/compare` measured into the Markdown comparison with Open MPI and MPICH.
//!
//! zcoll's `tracing` events (the transport and algorithm decisions at debug level, every
//! fallback at warn level) go to standard error under `ZCOLL_LOG` or, if that is unset,
//! `RUST_LOG`, in `tracing-subscriber`'s `EnvFilter` syntax:
//! `ZCOLL_LOG=zcoll=debug mpiexec -n 2 zcoll bench`.

use clap::{Parser, Subcommand};
use mpi::traits::*;
use std::process::ExitCode;
use zcoll::ZeroCopy;
use zcoll_cli::bench::BenchArgs;
use zcoll_cli::progress::Progress;
use zcoll_cli::{bench, immediate, report, tune};

/// `zcoll bench --buffers global` measures `Vec`s in the shared heap: this allocator
/// serves them from it while the benchmark says so, from the system allocator otherwise.
#[global_allocator]
static ALLOC: zcoll_cli::alloc::Switchable = zcoll_cli::alloc::Switchable::new();

/// Safe zero-copy MPI collectives: inspection and benchmarks (run under mpiexec).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the node layout, process ids, and each node's transport and why.
    Info,
    /// Time zcoll's collectives beside the MPI library's own, with every result checked.
    Bench(bench::BenchArgs),
    /// Measure this node, fit the cost model and write the profile zcoll then uses; or,
    /// with --predict, print what the model chooses for a node of any size (no MPI).
    Tune(TuneArgs),
    /// Write the comparison against Open MPI and MPICH (Markdown, SVG) from the directory
    /// `scripts/compare` filled (no MPI, no mpiexec).
    Report(report::ReportArgs),
}

#[derive(clap::Args)]
struct TuneArgs {
    /// Repetitions per measured point (the median is kept).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Where to write the profile (default: $ZCOLL_PROFILE, else the user's config dir).
    #[arg(long)]
    output: Option<std::path::PathBuf>,
    /// Print the model's choices instead of measuring (no MPI); with --plot, draw every
    /// candidate's predicted latency against the size.
    #[arg(long)]
    predict: bool,
    /// A profile (TOML) whose parameters to plan with [default: this machine's profile,
    /// else the built-in parameters; the output says which].
    #[arg(long, requires = "predict")]
    params: Option<std::path::PathBuf>,
    /// Ranks per node to plan for [default: the profile's cores, or this machine's].
    #[arg(long = "p", requires = "predict")]
    ranks: Option<usize>,
    /// Sizes to plan for, in bytes (per block, or the message for bcast and allreduce).
    #[arg(long, value_delimiter = ',', default_value = "8,512,4096,65536,1048576,16777216")]
    sizes: Vec<usize>,
    /// With --predict: choose among the single-copy algorithms only (no copy-in/copy-out
    /// through the staging areas), the set the Cluster '17 paper compares.
    #[arg(long, requires = "predict")]
    single_copy: bool,
    /// After calibrating, time a few algorithms (as `zcoll bench` does) and draw their
    /// latency against the model's prediction with the fitted parameters (SVG, log-log);
    /// the comparison is printed as a table too. With --predict: draw the prediction of
    /// every candidate, one panel per collective.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
    /// The sizes of --plot, as `zcoll bench --sizes` reads them.
    #[arg(long, default_value = "8:16M:4", requires = "plot")]
    plot_sizes: String,
    /// Timed iterations per point of --plot [default: as `zcoll bench`].
    #[arg(long, requires = "plot")]
    plot_iters: Option<usize>,
}

/// Installs the subscriber of zcoll's events when `ZCOLL_LOG`, else `RUST_LOG`, is set
/// (an empty value counts as unset): standard error, filtered by the variable's
/// directives; a directive it cannot read is reported on standard error and skipped.
/// Unset, nothing is installed and the events cost what they cost a program that does not
/// listen.
fn log_to_stderr() {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let Some(directives) = var("ZCOLL_LOG").or_else(|| var("RUST_LOG")) else {
        return;
    };
    let filter =
        EnvFilter::builder().with_default_directive(LevelFilter::ERROR.into()).parse_lossy(directives);
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    zcoll_cli::progress::allow_bars();
    log_to_stderr();
    match &cli.command {
        Command::Tune(args) if args.predict => return predict(args),
        Command::Report(args) => return write_report(args),
        _ => {}
    }
    let Some(universe) = mpi::initialize() else {
        eprintln!("zcoll: MPI was already initialized");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let mut comm = match world.zero_copy() {
        Ok(comm) => comm,
        Err(e) => {
            eprintln!("zcoll: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Info => info(&world, &comm),
        Command::Bench(args) => {
            let (nonblocking, rest) = immediate::split(&args.coll);
            let table = BenchArgs { coll: rest, ..args.clone() };
            let blocking = !table.coll.is_empty() || nonblocking.is_empty();
            if blocking {
                if let Err(e) = bench::run(&world, &comm, &table) {
                    eprintln!("zcoll bench: {e}");
                    return ExitCode::FAILURE;
                }
            }
            if !nonblocking.is_empty() {
                if let Err(e) = immediate::run(&world, &mut comm, &args, &nonblocking, blocking) {
                    eprintln!("zcoll bench: {e}");
                    world.abort(2);
                }
            }
        }
        Command::Tune(args) => return calibrate(&world, &comm, &args),
        Command::Report(_) => unreachable!("handled before MPI starts"),
    }
    ExitCode::SUCCESS
}

/// Calibrates the node of rank 0 and writes its profile there; with `--plot`, times a
/// few algorithms on every rank and compares them with the fitted model first.
fn calibrate(world: &mpi::topology::SimpleCommunicator, comm: &zcoll::Comm, args: &TuneArgs) -> ExitCode {
    // The calibration is one library call of minutes: a spinner (or a line at its start
    // and end) on rank 0 says it runs; --plot's timing shows its own progress.
    let progress = Progress::spinner("zcoll tune", comm.rank() == 0);
    progress.set_message(&format!("calibrating this node, {} repetitions per point", args.reps));
    let calibrated = comm.calibrate(args.reps);
    progress.finish();
    let profile = match calibrated {
        Err(e) => {
            eprintln!("zcoll tune: {e}");
            return ExitCode::FAILURE;
        }
        Ok(profile) => profile,
    };
    if let Some(profile) = &profile {
        print!("{}", profile.to_toml());
    }
    if let Some(path) = &args.plot {
        let params = profile.as_ref().map(|p| &p.params);
        if let Err(e) = tune::plot(world, comm, params, &args.plot_sizes, args.plot_iters, path) {
            eprintln!("zcoll tune: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(profile) = profile {
        let path = args.output.clone().unwrap_or_else(zcoll::tune::Profile::path);
        if let Err(e) = profile.save(&path) {
            eprintln!("zcoll tune: {e}");
            return ExitCode::FAILURE;
        }
        println!("# written to {}", path.display());
    }
    ExitCode::SUCCESS
}

/// Writes the report to --output, or prints it.
fn write_report(args: &report::ReportArgs) -> ExitCode {
    let written = report::run(args).and_then(|md| match &args.output {
        Some(path) => std::fs::write(path, md).map_err(|e| format!("--output {}: {e}", path.display())),
        None => {
            print!("{md}");
            Ok(())
        }
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zcoll report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the model's choice and predicted time per collective and size, and with
/// `--plot` draws every candidate's prediction.
fn predict(args: &TuneArgs) -> ExitCode {
    let plot = args.plot.as_deref().map(|file| (file, args.plot_sizes.as_str()));
    match tune::predict(args.params.as_deref(), args.ranks, &args.sizes, args.single_copy, plot) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zcoll tune --predict: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every node leader sends its node's description to rank 0, which prints them in order.
fn info(world: &impl Communicator, comm: &zcoll::Comm) {
    let info = comm.info();
    let leader = info.node_ranks.first() == Some(&info.rank);
    let text = if leader { info.to_string() } else { String::new() };
    if world.rank() == 0 {
        println!(
            "zcoll {}: {} ranks on {} node{}",
            env!("CARGO_PKG_VERSION"),
            info.size,
            info.nodes,
            if info.nodes == 1 { "" } else { "s" }
        );
        println!("{text}");
        for r in 1..world.size() {
            let (bytes, _) = world.process_at_rank(r).receive_vec::<u8>();
            if !bytes.is_empty() {
                println!("{}", String::from_utf8_lossy(&bytes));
            }
        }
    } else {
        world.process_at_rank(0).send(text.as_bytes());
    }
}
