//! `zcoll`: what zcoll sets up on this machine, and how fast it is.
//!
//! Run it under the MPI launcher: `mpiexec -n 4 zcoll info`, or
//! `mpiexec -n 2 zcoll bench --coll all --sizes 8:64M --csv bench.csv --plot bench.svg`.

mod bench;
mod colls;
mod plot;
mod stats;

use clap::{Parser, Subcommand};
use mpi::traits::*;
use std::process::ExitCode;
use zcoll::ZeroCopy;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(universe) = mpi::initialize() else {
        eprintln!("zcoll: MPI was already initialized");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let comm = match world.zero_copy() {
        Ok(comm) => comm,
        Err(e) => {
            eprintln!("zcoll: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Info => info(&world, &comm),
        Command::Bench(args) => {
            if let Err(e) = bench::run(&world, &comm, &args) {
                eprintln!("zcoll bench: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
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
