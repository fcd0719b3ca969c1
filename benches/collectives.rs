//! Criterion benches: every zcoll collective beside the MPI library's own collective, in
//! the same criterion group, for the collectives of `zcoll bench`'s table
//! (`zcoll_cli::colls`).
//!
//! `cargo bench` starts this binary outside an MPI job; it then re-launches itself under
//! `mpiexec -n ${ZCOLL_BENCH_NP:-2}` (adding what Open MPI needs to run as root and
//! with a rank bound to each core, or oversubscribed when the ranks outnumber the cores;
//! `ZCOLL_BENCH_LAUNCHER` names another launcher). Started by a launcher
//! (`srun target/release/deps/collectives-* --bench` on a cluster, or `mpiexec`), it
//! runs directly. Rank 0 drives criterion: for every batch of iterations criterion asks
//! for (`iter_custom`), it broadcasts which benchmark and how many iterations, every
//! rank runs them (each after an MPI barrier, the send data changed and the result
//! checked every iteration), and the batch's time is the maximum over ranks of each
//! rank's summed collective times.
//!
//! `ZCOLL_BENCH_SIZES` sets the sizes (as `zcoll bench --sizes`, default `8,4K,64K,1M,16M`);
//! `ZCOLL_BENCH_BUFFERS` where the buffers live (as `zcoll bench --buffers`: `vec`, the
//! default, `heap` or `global`).

use criterion::{BenchmarkId, Criterion, Throughput};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use zcoll::ZeroCopy;
use zcoll_cli::colls::{self, Buffers, Collective, Env, Instance};
use zcoll_cli::stats;

/// `ZCOLL_BENCH_BUFFERS=global` puts the benches' `Vec`s in the shared heap.
#[global_allocator]
static ALLOC: zcoll_cli::alloc::Switchable = zcoll_cli::alloc::Switchable::new();

/// Variables that MPI launchers set in every rank (Open MPI, MPICH's Hydra and Slurm's
/// PMI-2, PMIx).
const LAUNCHED: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"];

/// The command rank 0 sends to end the followers' loop.
const STOP: u64 = u64::MAX;

fn main() -> ExitCode {
    if !LAUNCHED.iter().any(|v| std::env::var_os(v).is_some()) {
        return relaunch();
    }
    // A failure on one rank must end the job, not leave the others waiting.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        hook(info);
        SimpleCommunicator::world().abort(3);
    }));
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let comm = world.zero_copy().unwrap_or_else(|e| panic!("zcoll: {e}"));
    let buffers = std::env::var("ZCOLL_BENCH_BUFFERS").unwrap_or_else(|_| "vec".into());
    let buffers = <Buffers as clap::ValueEnum>::from_str(&buffers, true)
        .unwrap_or_else(|e| panic!("ZCOLL_BENCH_BUFFERS={buffers}: {e} (vec, heap or global)"));
    zcoll_cli::alloc::share_large_allocations(buffers == Buffers::Global);
    let env = Env { world: &world, comm: &comm, root: 0, buffers };
    let sizes = std::env::var("ZCOLL_BENCH_SIZES").unwrap_or_else(|_| "8,4K,64K,1M,16M".into());
    let sizes = stats::parse_sizes(&sizes).unwrap_or_else(|e| panic!("ZCOLL_BENCH_SIZES: {e}"));
    let mut bench = Benches::new(env, &sizes);
    if world.rank() == 0 {
        bench.drive();
    } else {
        bench.follow();
    }
    ExitCode::SUCCESS
}

/// Runs this binary again under the MPI launcher, with the same arguments.
fn relaunch() -> ExitCode {
    let np = std::env::var("ZCOLL_BENCH_NP").unwrap_or_else(|_| "2".into());
    let launcher = std::env::var("ZCOLL_BENCH_LAUNCHER").unwrap_or_else(|_| "mpiexec".into());
    let exe = std::env::current_exe().expect("this binary's path");
    let mut cmd = Command::new(&launcher);
    cmd.args(["-n", &np]);
    let version = Command::new(&launcher).arg("--version").output();
    let open_mpi = version.is_ok_and(|o| {
        let v = String::from_utf8_lossy(&o.stdout);
        v.contains("Open MPI") || v.contains("OpenRTE")
    });
    if open_mpi {
        // A rank per core, bound, when they fit (as scripts/mpiexec): unbound, the kernel
        // sometimes runs both ranks on one core for the whole job.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match np.parse::<usize>() {
            Ok(n) if n <= cores => cmd.args(["--bind-to", "core"]),
            _ => cmd.args(["--oversubscribe", "--bind-to", "none"]),
        };
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    cmd.arg(exe).args(std::env::args_os().skip(1));
    match cmd.status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("collectives: {launcher} -n {np} failed: {s}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("collectives: cannot start {launcher} (set ZCOLL_BENCH_LAUNCHER): {e}");
            ExitCode::FAILURE
        }
    }
}

/// What one benchmark runs.
#[derive(Clone, Copy, Debug)]
enum Imp {
    Mpi,
    Zcoll(&'static str),
}

/// One benchmark: a collective, a size and an implementation.
struct Bench {
    coll: &'static dyn Collective,
    /// Index of `(coll, size)` in the instance cache.
    slot: usize,
    size: usize,
    imp: Imp,
}

/// Every benchmark, the same list on every rank, and the buffers of each size.
struct Benches<'a> {
    env: Env<'a>,
    list: Vec<Bench>,
    instances: Vec<Option<Box<dyn Instance + 'a>>>,
    seq: u64,
}

impl<'a> Benches<'a> {
    fn new(env: Env<'a>, sizes: &[usize]) -> Self {
        let mut list = Vec::new();
        let mut slot = 0;
        for &coll in colls::ALL {
            let sizes = if coll.sized() { sizes.to_vec() } else { vec![0] };
            for size in sizes {
                list.push(Bench { coll, slot, size, imp: Imp::Mpi });
                for a in std::iter::once("auto").chain(coll.algorithms()) {
                    list.push(Bench { coll, slot, size, imp: Imp::Zcoll(a) });
                }
                slot += 1;
            }
        }
        Benches { env, list, instances: (0..slot).map(|_| None).collect(), seq: 0 }
    }

    /// Rank 0: criterion decides what runs and how often; the other ranks are told.
    fn drive(&mut self) {
        let mut c = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .configure_from_args();
        for slot in 0..self.instances.len() {
            let ks: Vec<usize> = (0..self.list.len()).filter(|&k| self.list[k].slot == slot).collect();
            let (coll, size) = (self.list[ks[0]].coll, self.list[ks[0]].size);
            let name = if coll.sized() { format!("{}/{}", coll.name(), size) } else { coll.name().into() };
            let mut group = c.benchmark_group(name);
            if coll.sized() {
                group.throughput(Throughput::Bytes(size as u64));
            }
            for k in ks {
                let id = match self.list[k].imp {
                    Imp::Mpi => "mpi".to_owned(),
                    Imp::Zcoll(a) => format!("zcoll-{a}"),
                };
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter_custom(|iters| self.run(k, iters));
                });
            }
            group.finish();
        }
        self.command(STOP, 0);
        c.final_summary();
    }

    /// The other ranks: run what rank 0 says until it says stop.
    fn follow(&mut self) {
        loop {
            let (k, iters) = self.command(0, 0);
            if k == STOP {
                return;
            }
            self.run(k as usize, iters);
        }
    }

    /// Rank 0 broadcasts `(k, iters)`; every rank returns it.
    fn command(&self, k: u64, iters: u64) -> (u64, u64) {
        let mut msg = [k, iters];
        self.env.world.process_at_rank(0).broadcast_into(&mut msg[..]);
        (msg[0], msg[1])
    }

    /// Runs benchmark `k` `iters` times on this rank (rank 0 first tells the others),
    /// and returns on rank 0 the largest summed time of any rank.
    fn run(&mut self, k: usize, iters: u64) -> Duration {
        let world = self.env.world;
        if world.rank() == 0 {
            self.command(k as u64, iters);
        }
        let (coll, slot, size, imp) = {
            let b = &self.list[k];
            (b.coll, b.slot, b.size, b.imp)
        };
        let env = self.env;
        let inst = self.instances[slot].get_or_insert_with(|| coll.prepare(env, size));
        if let Imp::Zcoll(a) = imp {
            inst.select(a).unwrap_or_else(|e| panic!("{} zcoll {a}: {e}", coll.name()));
        }
        let mut total = 0f64;
        for _ in 0..iters {
            self.seq += 1;
            inst.fill(self.seq);
            world.barrier();
            let start = Instant::now();
            match imp {
                Imp::Mpi => inst.mpi(),
                Imp::Zcoll(a) => {
                    inst.zcoll().unwrap_or_else(|e| panic!("{} {size} B zcoll {a}: {e}", coll.name()))
                }
            }
            total += start.elapsed().as_secs_f64();
            if let Err(e) = inst.check(self.seq) {
                panic!("{} {size} B {imp:?}: rank {}: wrong result: {e}", coll.name(), world.rank());
            }
        }
        let root = world.process_at_rank(0);
        if world.rank() == 0 {
            let mut max = 0f64;
            root.reduce_into_root(&total, &mut max, SystemOperation::max());
            Duration::from_secs_f64(max)
        } else {
            root.reduce_into(&total, SystemOperation::max());
            Duration::ZERO
        }
    }
}
