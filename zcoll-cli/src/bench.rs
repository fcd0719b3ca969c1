//! `zcoll bench`: zcoll's collectives side by side with the MPI library's own.
//!
//! The method, in the manner of the OSU micro-benchmarks: for each collective of
//! [`colls::ALL`] and each size, every iteration runs the MPI library's collective
//! (through rsmpi), each chosen zcoll algorithm, a memcpy of the bytes a rank receives
//! (glibc's) and one copy of them with zcoll's own copy routine ([`zcoll::copy_bytes`]:
//! streaming stores from 2 MiB, which glibc's `memcpy` uses only past three quarters of
//! the shared cache it detects), in an order shuffled every iteration, each after the same MPI barrier,
//! on buffers of its own and with send data that changes every time; every result is checked, and a wrong one
//! ends the job with an error naming the collective, the implementation, the size and
//! the rank. After warm-up iterations, rank 0 gathers every rank's time of every timed
//! iteration, takes each iteration's maximum over the ranks, and reports the median (and
//! the minimum and maximum) of these per-iteration maxima.

use crate::colls::{self, Buffers, Collective, Env};
use crate::plot::{self, Panel, Series, Style};
use crate::progress::Progress;
use crate::regime;
use crate::start::{self, Start};
use crate::stats::{self, Imbalance, Summary};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;
use zcoll::Comm;

/// Time zcoll's collectives against the MPI library's own (run under mpiexec).
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "bench")]
pub struct BenchArgs {
    /// Collectives to time: comma-separated names (bcast, barrier), or `all`; `ibcast`,
    /// `iallreduce`, `ireduce`, `igather`, `iallgather`, `ialltoall`, `iscatter` and
    /// `ibarrier` time the nonblocking ones beside the MPI library's (a table of their own).
    #[arg(long, default_value = "all")]
    pub coll: String,
    /// Message sizes in bytes per rank: `A:B` (powers of two from A to B), `A:B:F` (times
    /// F each step), single sizes, or a comma-separated list of these; K, M and G suffixes.
    #[arg(long, default_value = "8:64M")]
    pub sizes: String,
    /// zcoll algorithms: `default` (zcoll's own choice, `auto`), `all` (auto and every
    /// algorithm), or comma-separated names (`direct-read,staged`).
    #[arg(long, default_value = "default")]
    pub algorithms: String,
    /// Timed iterations per size [default: enough to move about 512 MiB, 20 to 1000].
    #[arg(long)]
    pub iters: Option<usize>,
    /// Untimed warm-up iterations per size [default: a tenth of the timed ones, 2 to 100].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Write the results as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw latency against size (log-log, SVG) to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Where the buffers live, comma-separated to measure several side by side: `vec`
    /// (ordinary memory), `heap` (`Comm::alloc`: the shared heap, copied with loads and
    /// stores), `global` (`Vec`s, with the global allocator serving large ones from the
    /// shared heap, as a program that installs `zcoll::ShmAlloc` has them).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "vec")]
    pub buffers: Vec<Buffers>,
    /// Process-arrival imbalance: before each timed call a rank busy-waits up to F times
    /// the time of one message of the size (measured before the warm-up).
    #[arg(long, value_name = "F")]
    pub mif: Option<f64>,
    /// With --mif: only PCT% of the ranks (drawn anew every iteration, the same on every
    /// rank) are late, each by the full F times one message.
    #[arg(long, value_name = "PCT", requires = "mif")]
    pub late: Option<f64>,
    /// The root of rooted collectives.
    #[arg(long, default_value_t = 0)]
    pub root: i32,
    /// With the nonblocking collectives (`--coll ibcast,iallreduce`): also the overlap of
    /// communication and computation, as OSU's `osu_iallreduce` measures it.
    #[arg(long)]
    pub overlap: bool,
    /// How the ranks start each timed call: `clock` (at one instant of the host's clock,
    /// awaited after a barrier: the ranks must share one host) or `barrier` (each at its own
    /// exit of an `MPI_Barrier`, which counts the barrier's exit skew) [default: `clock`
    /// where the ranks share one host, else `barrier`].
    #[arg(long, value_enum)]
    pub start: Option<Start>,
}

/// The CSV header, column for column.
pub const CSV_HEADER: &str =
    "coll,algorithm,buffers,moved,transport,np,size,mpi_us,zcoll_us,ratio,memcpy_us,copy_us";

/// One line of results: one zcoll algorithm at one size, beside MPI and memcpy.
#[derive(Clone, Debug)]
pub struct Row {
    /// The collective's name in the table.
    pub coll: &'static str,
    /// zcoll's algorithm, by name (`auto` for zcoll's own choice).
    pub algorithm: String,
    /// Where the buffers lived.
    pub buffers: Buffers,
    /// How zcoll's single copies crossed processes, summed over the ranks (see
    /// [`moved`]): `cma`, `heap`, `xpmem`, a mix joined by `+`, or `-` for none (the
    /// bytes went through the staging areas, or nothing crossed processes).
    pub moved: String,
    /// The node's transport.
    pub transport: String,
    /// The number of ranks.
    pub np: usize,
    /// The message size in bytes, as the OSU benchmarks count it.
    pub size: usize,
    /// Timed iterations.
    pub iters: usize,
    /// The MPI library's collective, microseconds.
    pub mpi: Summary,
    /// zcoll's, microseconds.
    pub zcoll: Summary,
    /// One memcpy (glibc's) of the bytes a rank receives, microseconds: the floor.
    pub memcpy: Summary,
    /// One copy of the same bytes with zcoll's copy routine ([`zcoll::copy_bytes`]),
    /// microseconds: the floor of a collective on shared-heap buffers, which copies with
    /// it (from 2 MiB it streams, where glibc's `memcpy` does not).
    pub copy: Summary,
}

impl Row {
    /// How many times faster zcoll is than MPI (`mpi_us / zcoll_us`).
    pub fn ratio(&self) -> f64 {
        self.mpi.median / self.zcoll.median
    }

    fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3}",
            self.coll,
            self.algorithm,
            self.buffers,
            self.moved,
            self.transport,
            self.np,
            self.size,
            self.mpi.median,
            self.zcoll.median,
            self.ratio(),
            self.memcpy.median,
            self.copy.median
        )
    }
}

/// What one iteration runs, in turn.
#[derive(Clone, Debug, PartialEq)]
enum Imp {
    Mpi,
    Zcoll(&'static str),
    Memcpy,
    /// One copy with [`zcoll::copy_bytes`].
    Copy,
}

impl std::fmt::Display for Imp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Imp::Mpi => f.write_str("MPI"),
            Imp::Zcoll(a) => write!(f, "zcoll {a}"),
            Imp::Memcpy => f.write_str("memcpy"),
            Imp::Copy => f.write_str("zcoll copy"),
        }
    }
}

impl Imp {
    /// Whether it is a collective (MPI's or zcoll's), not one of the two copy references.
    fn is_collective(&self) -> bool {
        matches!(self, Imp::Mpi | Imp::Zcoll(_))
    }
}

/// What to run, decided from the arguments alike on every rank.
struct Plan {
    colls: Vec<(&'static dyn Collective, Vec<&'static str>)>,
    sizes: Vec<usize>,
    imbalance: Option<Imbalance>,
    /// How each timed call starts (decided with the ranks, after the arguments).
    start: Start,
}

fn plan(args: &BenchArgs, np: i32) -> Result<Plan, String> {
    if args.buffers.is_empty() {
        return Err("--buffers: none given".into());
    }
    if !(0..np).contains(&args.root) {
        return Err(format!("--root {}: not a rank of the {np} ranks", args.root));
    }
    let names: Vec<&str> = args.coll.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let chosen: Vec<&'static dyn Collective> = if names == ["all"] {
        colls::ALL.to_vec()
    } else {
        let known = colls::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
        names
            .iter()
            .map(|n| colls::by_name(n).ok_or_else(|| format!("--coll {n}: unknown (known: {known}, all)")))
            .collect::<Result<_, _>>()?
    };
    if chosen.is_empty() {
        return Err("--coll: no collective given".into());
    }
    let wanted: Vec<&str> = args.algorithms.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let mut colls = Vec::new();
    let mut used = vec![false; wanted.len()];
    for c in chosen {
        let mut every = vec!["auto"];
        every.extend(c.algorithms());
        let algos: Vec<&'static str> = match wanted[..] {
            ["default"] | [] => vec!["auto"],
            ["all"] => every,
            _ => every
                .into_iter()
                .filter(|a| {
                    let hit = wanted.iter().position(|w| w == a || (*w == "default" && *a == "auto"));
                    if let Some(i) = hit {
                        used[i] = true;
                    }
                    hit.is_some()
                })
                .collect(),
        };
        if !algos.is_empty() {
            colls.push((c, algos));
        }
    }
    if !matches!(wanted[..], ["default"] | [] | ["all"]) {
        if let Some(i) = used.iter().position(|u| !u) {
            return Err(format!("--algorithms {}: no chosen collective has that algorithm", wanted[i]));
        }
    }
    let sizes = stats::parse_sizes(&args.sizes).map_err(|e| format!("--sizes: {e}"))?;
    let imbalance = match (args.mif, args.late) {
        (None, _) => None,
        (Some(f), _) if !(f >= 0.0 && f.is_finite()) => return Err(format!("--mif {f}: must be >= 0")),
        (Some(_), Some(p)) if !(0.0..=100.0).contains(&p) => {
            return Err(format!("--late {p}: a percentage, 0 to 100"))
        }
        (Some(mif), late_pct) => Some(Imbalance { mif, late_pct }),
    };
    Ok(Plan { colls, sizes, imbalance, start: args.start.unwrap_or(Start::Barrier) })
}

/// Runs the benchmark on every rank of `world` and returns the rows (complete on rank
/// 0, empty elsewhere). Rank 0 prints the table and writes the CSV and the plot.
///
/// A wrong result or a failed zcoll call ends the whole job (`MPI_Abort`, exit code 2)
/// after printing what failed where.
///
/// # Errors
///
/// A bad argument (the same on every rank, before anything runs), or a CSV or plot file
/// that cannot be written (on rank 0).
pub fn run(world: &SimpleCommunicator, comm: &Comm, args: &BenchArgs) -> Result<Vec<Row>, String> {
    let before = regime::ping_pong(world);
    let rows = measure(world, comm, args, true)?;
    let after = regime::ping_pong(world);
    // Starts some rank reached after the common instant had passed (each such call counts
    // the lateness, as a preempted one does): a busy machine or too short a lead.
    let (starts, late) = start::late_starts();
    let mut sum = [0u64; 2];
    world.all_reduce_into(&[starts, late], &mut sum[..], SystemOperation::sum());
    if world.rank() == 0 {
        if sum[1] > 0 {
            println!("# late starts: {} of {} (a rank reached the common start after it)", sum[1], sum[0]);
        }
        if let (Some(before), Some(after)) = (before, after) {
            println!("{}", regime::line(before, after));
        }
        println!("{}", summary_lines(&rows));
        if args.buffers.len() > 1 {
            println!("{}", side_by_side(&rows, &args.buffers));
        }
        let against = default_vs_best(&rows);
        if !against.is_empty() {
            println!("{}", default_vs_best_table(&against));
        }
        if let Some(path) = &args.csv {
            let mut text = format!("{CSV_HEADER}\n");
            rows.iter().for_each(|r| text.push_str(&(r.csv() + "\n")));
            std::fs::write(path, text).map_err(|e| format!("--csv {}: {e}", path.display()))?;
        }
        if let Some(path) = &args.plot {
            let svg = plot::svg(&panels(&rows, &library()));
            std::fs::write(path, svg).map_err(|e| format!("--plot {}: {e}", path.display()))?;
        }
    }
    Ok(rows)
}

/// Times what `args` asks for on every rank of `world` and returns the rows (complete on
/// rank 0, empty elsewhere); with `print`, rank 0 prints the header and every row as it
/// is measured. Rank 0 shows the progress on standard error ([`Progress`]: a bar on a
/// terminal, a plain line every few seconds otherwise). [`run`] without the summary and the files: the timing `zcoll tune
/// --plot` shares.
///
/// # Errors
///
/// A bad argument, the same on every rank, before anything runs.
pub fn measure(
    world: &SimpleCommunicator,
    comm: &Comm,
    args: &BenchArgs,
    print: bool,
) -> Result<Vec<Row>, String> {
    let mut plan = plan(args, world.size())?;
    plan.start = Start::decide(world, args.start)?;
    let me = world.rank();
    let transport = comm.info().transport.to_string();
    if me == 0 && print {
        println!("{}", header(comm, args, &plan));
        println!("{}", table_header());
    }
    let mut rows = Vec::new();
    let mut seq = 0u64;
    let points: usize = plan.colls.iter().map(|(c, _)| c.sizes_of(&plan.sizes).len()).sum();
    let mut progress = Progress::new("zcoll bench", (points * args.buffers.len()) as u64, me == 0);
    for &(coll, ref algos) in &plan.colls {
        for size in coll.sizes_of(&plan.sizes) {
            // Every kind of buffers of one point, one right after the other: the machine's
            // mode (fast or slow, for seconds to minutes) then falls on all of them alike,
            // which a pass over every point per kind of buffers did not give.
            for &buffers in &args.buffers {
                let env = Env { world, comm, root: args.root, buffers };
                // What `global` measures: the process's `Vec`s in the shared heap, as far
                // as its global allocator can put them there (see `crate::alloc`).
                crate::alloc::share_large_allocations(buffers == Buffers::Global);
                let point = Point { coll, algos, size };
                let measured = measure_point(env, point, &plan, args, &transport, &mut seq, &mut progress);
                crate::alloc::share_large_allocations(false);
                for row in measured {
                    if print {
                        progress.println(&table_row(&row));
                    }
                    rows.push(row);
                }
                let _ = std::io::stdout().flush();
            }
        }
    }
    progress.finish();
    Ok(rows)
}

/// One point of [`measure`]: a collective and its algorithms at one size.
#[derive(Clone, Copy)]
struct Point<'p> {
    coll: &'p dyn Collective,
    algos: &'p [&'static str],
    size: usize,
}

/// Times one point with one kind of buffers: its rows (one per algorithm) on rank 0,
/// none elsewhere.
fn measure_point(
    env: Env<'_>,
    point: Point<'_>,
    plan: &Plan,
    args: &BenchArgs,
    transport: &str,
    seq: &mut u64,
    progress: &mut Progress,
) -> Vec<Row> {
    let world = env.world;
    let (me, np) = (world.rank(), world.size() as usize);
    let Point { coll, algos, size } = point;
    let iters = args.iters.unwrap_or_else(|| stats::default_iters(size)).max(1);
    let warmup = args.warmup.unwrap_or_else(|| stats::default_warmup(iters));
    let label = format!("{} {} {}", env.buffers, coll.name(), stats::format_size(size));
    progress.set_message(&label);
    let mut imps = vec![Imp::Mpi];
    imps.extend(algos.iter().map(|&a| Imp::Zcoll(a)));
    if coll.sized() {
        imps.push(Imp::Memcpy);
        imps.push(Imp::Copy);
    }
    let (times, traffic) = time_one(env, coll, size, &imps, (iters, warmup), plan, seq);
    progress.inc(&label);
    // Every rank's single-copy bytes, by transport, summed at rank 0.
    let root = world.process_at_rank(0);
    let mut moved_sum = vec![0u64; traffic.len()];
    if me == 0 {
        root.reduce_into_root(&traffic[..], &mut moved_sum[..], SystemOperation::sum());
    } else {
        root.reduce_into(&traffic[..], SystemOperation::sum());
    }
    // Every rank's times to rank 0, which takes each iteration's maximum over the ranks
    // (the slowest rank makes the iteration's time).
    if me != 0 {
        root.gather_into(&times[..]);
        return Vec::new();
    }
    let mut all = vec![0f64; times.len() * np];
    root.gather_into_root(&times[..], &mut all[..]);
    let summary = |k: usize| {
        let per_rank: Vec<Vec<f64>> =
            all.chunks_exact(times.len()).map(|rank| rank[k * iters..(k + 1) * iters].to_vec()).collect();
        let max = stats::per_iteration_max(&per_rank);
        Summary::of(&max).expect("at least one iteration").scaled(1e6)
    };
    // A collective that moves no data has no copy to compare with.
    let (memcpy, copy) = if coll.sized() {
        (summary(imps.len() - 2), summary(imps.len() - 1))
    } else {
        (Summary { median: 0.0, min: 0.0, max: 0.0 }, Summary { median: 0.0, min: 0.0, max: 0.0 })
    };
    algos
        .iter()
        .enumerate()
        .map(|(k, &algorithm)| Row {
            coll: coll.name(),
            algorithm: algorithm.to_owned(),
            buffers: env.buffers,
            moved: moved(&moved_sum[3 * (k + 1)..3 * (k + 2)]),
            transport: transport.to_owned(),
            np,
            size,
            iters,
            mpi: summary(0),
            zcoll: summary(k + 1),
            memcpy,
            copy,
        })
        .collect()
}

/// The transports that moved bytes, from `[cma, heap, xpmem]` byte counts: their names
/// joined by `+`, or `-` for none.
pub fn moved(bytes: &[u64]) -> String {
    let names: Vec<&str> =
        ["cma", "heap", "xpmem"].into_iter().zip(bytes).filter(|&(_, &b)| b > 0).map(|(n, _)| n).collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join("+")
    }
}

/// Times every implementation of `imps` at `size`, `iters` timed iterations after
/// `warmup` untimed ones: returns this rank's seconds, `iters` per implementation,
/// implementation after implementation.
fn time_one(
    env: Env<'_>,
    coll: &dyn Collective,
    size: usize,
    imps: &[Imp],
    (iters, warmup): (usize, usize),
    plan: &Plan,
    seq: &mut u64,
) -> (Vec<f64>, Vec<u64>) {
    let imbalance = plan.imbalance;
    let world = env.world;
    let (me, np) = (world.rank(), world.size() as usize);
    // Every implementation has buffers of its own: each call then starts from the state
    // its own previous call left, as in a program that calls it in a loop, never from
    // the other's. Shared buffers charged one library's cache footprint to the next
    // call: MPICH (ch4:ucx) leaves a receive buffer's lines in the peer core's cache
    // (the peer wrote them), and whichever call wrote that buffer next took every line
    // back first (a 32 KiB allgather at 2 ranks took 19 us right after MPICH's and 5 us
    // after zcoll's, in the same job; MPICH's own, 25 and 11 us).
    let mut insts: Vec<Option<Box<dyn crate::colls::Instance + '_>>> =
        imps.iter().map(|imp| imp.is_collective().then(|| coll.prepare(env, size))).collect();
    let received = coll.received(env, size);
    let src: Vec<u8> = (0..received).map(|i| stats::mix(i as u64) as u8).collect();
    let mut dst = vec![0u8; received];
    // The copy routine's own destination, as every implementation has buffers of its own.
    let mut dst_copy = vec![0u8; received];
    let t_msg = if imbalance.is_some() { message_time(world, size) } else { 0.0 };
    let mut times = vec![0f64; imps.len() * iters];
    // This rank's single-copy bytes per implementation, by transport (cma, heap, xpmem).
    let mut traffic = vec![0u64; 3 * imps.len()];
    for it in 0..warmup + iters {
        let delay_seed = stats::mix((size as u64) << 32 ^ it as u64);
        // A new order every iteration, the same on every rank: no implementation always
        // goes first, nor always right after the MPI library's call (whose state the
        // next call inherits: a rotation made the first zcoll algorithm 0.05-0.1 us
        // slower at 8 B than the same algorithm named second).
        let order = stats::shuffled(imps.len(), delay_seed);
        for &which in &order {
            let imp = &imps[which];
            let inst = &mut insts[which];
            *seq += 1;
            if let Some(inst) = inst {
                inst.fill(*seq);
            }
            if let (Imp::Zcoll(a), Some(inst)) = (imp, inst.as_mut()) {
                if let Err(e) = inst.select(a) {
                    fail(world, coll.name(), imp, size, &e.to_string());
                }
            }
            let delay = match (imbalance, imp.is_collective()) {
                (Some(imb), true) => imb.delay(delay_seed, me as usize, np, t_msg),
                _ => 0.0,
            };
            let before = env.comm.traffic();
            let start = plan.start.begin(world, delay);
            match (imp, inst.as_mut()) {
                (Imp::Mpi, Some(inst)) => inst.mpi(),
                (Imp::Zcoll(_), Some(inst)) => {
                    if let Err(e) = inst.zcoll() {
                        fail(world, coll.name(), imp, size, &format!("the call failed: {e}"));
                    }
                }
                (Imp::Copy, _) => {
                    zcoll::copy_bytes(&src, &mut dst_copy);
                    std::hint::black_box(&mut dst_copy);
                }
                _ => {
                    dst.copy_from_slice(&src);
                    std::hint::black_box(&mut dst);
                }
            }
            let t = start.elapsed();
            let after = env.comm.traffic();
            let at = &mut traffic[3 * which..3 * which + 3];
            at[0] += after.cma - before.cma;
            at[1] += after.heap - before.heap;
            at[2] += after.xpmem - before.xpmem;
            if let Some(inst) = inst {
                if let Err(e) = inst.check(*seq) {
                    fail(world, coll.name(), imp, size, &e);
                }
            }
            if it >= warmup {
                times[which * iters + it - warmup] = t;
            }
        }
    }
    (times, traffic)
}

/// Ends the job on a wrong result, saying what went wrong where.
fn fail(world: &SimpleCommunicator, coll: &str, imp: &Imp, size: usize, what: &str) -> ! {
    eprintln!(
        "zcoll bench: WRONG RESULT: {coll} with {imp} at {size} bytes per rank, rank {}: {what}",
        world.rank()
    );
    let _ = std::io::stderr().flush();
    world.abort(2)
}

/// The time of one message of `size` bytes between rank 0 and the last rank (half a
/// ping-pong round trip, median of 11), the same on every rank: the unit of `--mif`.
fn message_time(world: &SimpleCommunicator, size: usize) -> f64 {
    let (me, last) = (world.rank(), world.size() - 1);
    let mut buf = vec![0u8; size.max(1)];
    let mut t = [0f64; 1];
    if last > 0 && (me == 0 || me == last) {
        let peer = world.process_at_rank(if me == 0 { last } else { 0 });
        let mut samples = Vec::new();
        for i in 0..13 {
            let start = Instant::now();
            if me == 0 {
                peer.send(&buf[..]);
                peer.receive_into(&mut buf[..]);
            } else {
                peer.receive_into(&mut buf[..]);
                peer.send(&buf[..]);
            }
            if i >= 2 {
                samples.push(start.elapsed().as_secs_f64() / 2.0);
            }
        }
        t[0] = Summary::of(&samples).map_or(0.0, |s| s.median);
    }
    world.process_at_rank(0).broadcast_into(&mut t[..]);
    t[0]
}

/// The MPI library's name and version, from the first line of its version string
/// (`Open MPI v4.1.4, package: ...` or `MPICH Version:\t4.0.2`).
pub fn library() -> String {
    let full = mpi::environment::library_version().unwrap_or_default();
    let first = full.lines().next().unwrap_or("").split(',').next().unwrap_or("");
    let words: Vec<&str> = first.split_whitespace().filter(|w| *w != "Version:").collect();
    if words.is_empty() {
        "MPI".into()
    } else {
        words.join(" ")
    }
}

fn header(comm: &Comm, args: &BenchArgs, plan: &Plan) -> String {
    let info = comm.info();
    let mut h = format!(
        "# zcoll {} bench: {} ranks on {} node(s), transport {}, {}",
        env!("CARGO_PKG_VERSION"),
        info.size,
        info.nodes,
        info.transport,
        library()
    );
    let _ =
        write!(h, "\n# times in microseconds: median (min..max) over iterations of the maximum over ranks");
    let _ = write!(
        h,
        "; ratio = mpi / zcoll (above 1: zcoll is faster); memcpy = one copy of the bytes a rank receives \
         (glibc's memcpy); copy = the same with zcoll's copy routine (streaming stores from 2 MiB)"
    );
    let _ = write!(h, "\n# start: {}", plan.start.describe(comm.size() as usize));
    if let Some(imb) = plan.imbalance {
        let _ = match imb.late_pct {
            Some(p) => write!(h, "\n# imbalance: {p}% of the ranks late by {} x one message", imb.mif),
            None => write!(h, "\n# imbalance: every rank late by up to {} x one message", imb.mif),
        };
    }
    if args.root != 0 {
        let _ = write!(h, "\n# root {}", args.root);
    }
    h
}

fn table_header() -> String {
    format!(
        "{:<8} {:<13} {:<6} {:<9} {:>6} {:>5} {:>11} {:>11} {:>7} {:>10} {:>8} {:>10} {:>7}  {:<21} {:<21}",
        "coll",
        "algorithm",
        "bufs",
        "moved",
        "size",
        "iters",
        "mpi_us",
        "zcoll_us",
        "ratio",
        "memcpy_us",
        "z/memcpy",
        "copy_us",
        "z/copy",
        "zcoll min..max",
        "mpi min..max"
    )
}

fn table_row(r: &Row) -> String {
    let over = |floor: &Summary| {
        if floor.median > 0.0 {
            format!("{:.2}", r.zcoll.median / floor.median)
        } else {
            "-".into()
        }
    };
    format!(
        "{:<8} {:<13} {:<6} {:<9} {:>6} {:>5} {:>11.2} {:>11.2} {:>7.2} {:>10.2} {:>8} {:>10.2} {:>7}  {:<21} {:<21}",
        r.coll,
        r.algorithm,
        r.buffers.to_string(),
        r.moved,
        stats::format_size(r.size),
        r.iters,
        r.mpi.median,
        r.zcoll.median,
        r.ratio(),
        r.memcpy.median,
        over(&r.memcpy),
        r.copy.median,
        over(&r.copy),
        format!("{:.2}..{:.2}", r.zcoll.min, r.zcoll.max),
        format!("{:.2}..{:.2}", r.mpi.min, r.mpi.max)
    )
}

/// The worst and best ratio of each collective and algorithm.
fn summary_lines(rows: &[Row]) -> String {
    let mut out = String::from("#");
    let mut seen: Vec<(&str, &str, Buffers)> = Vec::new();
    for r in rows {
        if seen.contains(&(r.coll, &r.algorithm, r.buffers)) {
            continue;
        }
        seen.push((r.coll, &r.algorithm, r.buffers));
        let same: Vec<&Row> = rows
            .iter()
            .filter(|s| s.coll == r.coll && s.algorithm == r.algorithm && s.buffers == r.buffers)
            .collect();
        let lo = same.iter().min_by(|a, b| a.ratio().total_cmp(&b.ratio())).expect("one row");
        let hi = same.iter().max_by(|a, b| a.ratio().total_cmp(&b.ratio())).expect("one row");
        let _ = write!(
            out,
            "\n# {} {} ({}): ratio {:.2} (at {}) to {:.2} (at {})",
            r.coll,
            r.algorithm,
            r.buffers,
            lo.ratio(),
            stats::format_size(lo.size),
            hi.ratio(),
            stats::format_size(hi.size)
        );
    }
    out
}

/// The compact table of a run with several kinds of buffers: per collective and size,
/// zcoll's default against the MPI library (ratio = mpi / zcoll, above 1: zcoll is
/// faster) with each kind, and each against one copy of the received bytes with zcoll's
/// own copy routine (zcoll / copy: 1 is the floor).
pub fn side_by_side(rows: &[Row], kinds: &[Buffers]) -> String {
    let mut out = format!(
        "# zcoll's default (auto) against the MPI library and against one copy (the floor), by buffers
{:<10} {:>6}",
        "coll", "size"
    );
    for k in kinds {
        let _ = write!(out, " {:>12} {:>12}", format!("ratio {k}"), format!("/copy {k}"));
    }
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.algorithm == "auto") {
        if !keys.contains(&(r.coll, r.size)) {
            keys.push((r.coll, r.size));
        }
    }
    for (coll, size) in keys {
        let _ = write!(out, "\n{coll:<10} {:>6}", stats::format_size(size));
        for k in kinds {
            match rows
                .iter()
                .find(|r| r.coll == coll && r.size == size && r.algorithm == "auto" && r.buffers == *k)
            {
                Some(r) if r.copy.median > 0.0 => {
                    let _ = write!(out, " {:>12.2} {:>12.2}", r.ratio(), r.zcoll.median / r.copy.median);
                }
                Some(r) => {
                    let _ = write!(out, " {:>12.2} {:>12}", r.ratio(), "-");
                }
                None => {
                    let _ = write!(out, " {:>12} {:>12}", "-", "-");
                }
            }
        }
    }
    out
}

/// One collective and size where the default (`auto`) ran beside explicit algorithms.
#[derive(Clone, Debug, PartialEq)]
pub struct Against {
    /// The collective's name in the table.
    pub coll: &'static str,
    /// Where the buffers lived (the default is compared with algorithms on the same).
    pub buffers: Buffers,
    /// The message size in bytes.
    pub size: usize,
    /// The default's median, microseconds.
    pub auto: f64,
    /// The fastest explicit algorithm at this size, and its median.
    pub best: String,
    /// The fastest explicit algorithm's median, microseconds.
    pub best_us: f64,
}

impl Against {
    /// How many times slower the default is than the best explicit algorithm (1: as fast).
    pub fn ratio(&self) -> f64 {
        self.auto / self.best_us
    }
}

/// The default against the fastest explicit algorithm, per collective, kind of buffers
/// and size, where both ran (`--algorithms all`).
pub fn default_vs_best(rows: &[Row]) -> Vec<Against> {
    let mut out = Vec::new();
    for auto in rows.iter().filter(|r| r.algorithm == "auto") {
        let best = rows
            .iter()
            .filter(|r| {
                r.coll == auto.coll
                    && r.buffers == auto.buffers
                    && r.size == auto.size
                    && r.algorithm != "auto"
            })
            .min_by(|a, b| a.zcoll.median.total_cmp(&b.zcoll.median));
        if let Some(best) = best {
            out.push(Against {
                coll: auto.coll,
                buffers: auto.buffers,
                size: auto.size,
                auto: auto.zcoll.median,
                best: best.algorithm.clone(),
                best_us: best.zcoll.median,
            });
        }
    }
    out
}

/// The limit past which the default counts as slower than the best explicit algorithm.
pub const DEFAULT_SLACK: f64 = 1.10;

/// The default-against-best table, one line per collective and size; a `!` marks the
/// lines where the default is more than 10% slower.
pub fn default_vs_best_table(against: &[Against]) -> String {
    let mut out = String::from(
        "# the default (auto) against the fastest explicit algorithm; auto/best above 1.10 is marked !",
    );
    let _ = write!(
        out,
        "\n# {:<10} {:<7} {:>6} {:>11}  {:<18} {:>11} {:>9}",
        "coll", "buffers", "size", "auto_us", "best", "best_us", "auto/best"
    );
    for a in against {
        let mark = if a.ratio() > DEFAULT_SLACK { " !" } else { "" };
        let _ = write!(
            out,
            "\n# {:<10} {:<7} {:>6} {:>11.2}  {:<18} {:>11.2} {:>9.2}{mark}",
            a.coll,
            a.buffers.to_string(),
            stats::format_size(a.size),
            a.auto,
            a.best,
            a.best_us,
            a.ratio()
        );
    }
    let worse = against.iter().filter(|a| a.ratio() > DEFAULT_SLACK).count();
    let _ = write!(
        out,
        "\n# the default is within 10% of the best at {} of {} points",
        against.len() - worse,
        against.len()
    );
    out
}

/// One panel per collective with more than one size: zcoll per algorithm, MPI, memcpy.
fn panels(rows: &[Row], library: &str) -> Vec<Panel> {
    let mut panels = Vec::new();
    let mut colls: Vec<&str> = rows.iter().map(|r| r.coll).collect();
    colls.dedup();
    for coll in colls {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.coll == coll).collect();
        // One line per algorithm and kind of buffers (named only when there are several).
        let mut algos: Vec<(&str, Buffers)> =
            mine.iter().map(|r| (r.algorithm.as_str(), r.buffers)).collect();
        algos.sort_unstable_by_key(|&(a, b)| (a, b.to_string()));
        algos.dedup();
        let several = mine.iter().any(|r| r.buffers != mine[0].buffers);
        let first = mine[0];
        let reference: Vec<&Row> = mine
            .iter()
            .copied()
            .filter(|r| r.algorithm == first.algorithm && r.buffers == first.buffers)
            .collect();
        if reference.len() < 2 {
            continue;
        }
        let mut series: Vec<Series> = algos
            .iter()
            .map(|&(a, b)| Series {
                label: if several { format!("zcoll {a}, {b}") } else { format!("zcoll {a}") },
                points: mine
                    .iter()
                    .filter(|r| r.algorithm == a && r.buffers == b)
                    .map(|r| (r.size as f64, r.zcoll.median))
                    .collect(),
                style: Style::Line,
                color: None,
            })
            .collect();
        series.push(Series {
            label: format!("MPI ({library})"),
            points: reference.iter().map(|r| (r.size as f64, r.mpi.median)).collect(),
            style: Style::Line,
            color: None,
        });
        series.push(Series {
            label: "memcpy of the received bytes".into(),
            points: reference.iter().map(|r| (r.size as f64, r.memcpy.median)).collect(),
            style: Style::Dashed,
            color: None,
        });
        series.push(Series {
            label: "zcoll's copy of the received bytes".into(),
            points: reference.iter().map(|r| (r.size as f64, r.copy.median)).collect(),
            style: Style::Dashed,
            color: None,
        });
        panels.push(Panel {
            title: format!("{coll}: {} ranks, transport {}", first.np, first.transport),
            y_label: plot::MEASURED_LATENCY.into(),
            series,
        });
    }
    panels
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> BenchArgs {
        BenchArgs::try_parse_from(std::iter::once("bench").chain(line.iter().copied())).unwrap()
    }

    #[test]
    fn the_plan_follows_the_arguments() {
        let p = plan(&args(&[]), 2).unwrap();
        let names = [
            "bcast",
            "scatter",
            "gather",
            "allgather",
            "alltoall",
            "allreduce",
            "reduce",
            "scatterv",
            "gatherv",
            "allgatherv",
            "alltoallv",
            "transpose",
            "colgather",
            "faces",
            "barrier",
        ];
        assert_eq!(
            p.colls.iter().map(|(c, a)| (c.name(), a.clone())).collect::<Vec<_>>(),
            names.map(|n| (n, vec!["auto"]))
        );
        assert_eq!(p.sizes.len(), 24);
        let p = plan(&args(&["--coll", "bcast", "--algorithms", "all"]), 2).unwrap();
        let all: Vec<&str> =
            std::iter::once("auto").chain(zcoll::BcastAlgorithm::ALL.iter().map(|a| a.name())).collect();
        assert_eq!(p.colls[0].1, all);
        // Every collective but the barrier and the layout kernels (whose algorithms are
        // `packed` and `direct`) has a `staged` algorithm.
        let p = plan(&args(&["--algorithms", "staged,default"]), 2).unwrap();
        assert_eq!(
            p.colls.iter().map(|(c, a)| (c.name(), a.len())).collect::<Vec<_>>(),
            names.map(|n| (
                n,
                if matches!(n, "barrier" | "transpose" | "colgather" | "faces") { 1 } else { 2 }
            ))
        );
        let p =
            plan(&args(&["--coll", "alltoall", "--algorithms", "pairwise,pap-write,pap-read"]), 2).unwrap();
        assert_eq!(p.colls[0].1, ["pairwise", "pap-write", "pap-read"]);
        assert!(plan(&args(&["--coll", "bcast", "--algorithms", "pap-write"]), 2).is_err());
        let p = plan(&args(&["--mif", "2", "--late", "10"]), 2).unwrap();
        assert_eq!(p.imbalance, Some(Imbalance { mif: 2.0, late_pct: Some(10.0) }));

        for bad in [
            &["--coll", "scan"][..],
            &["--algorithms", "direct-read,nope"],
            &["--sizes", "0:8"],
            &["--mif=-1"],
            &["--mif", "1", "--late", "101"],
            &["--root", "2"],
        ] {
            assert!(plan(&args(bad), 2).is_err(), "{bad:?}");
        }
        assert_eq!(
            args(&["--buffers", "vec,heap,global"]).buffers,
            [Buffers::Vec, Buffers::Heap, Buffers::Global]
        );
        assert!(BenchArgs::try_parse_from(["bench", "--buffers", "disk"]).is_err(), "an unknown kind");
        assert!(BenchArgs::try_parse_from(["bench", "--late", "5"]).is_err(), "--late needs --mif");
    }

    #[test]
    fn rows_print_and_plot() {
        let s = |m: f64| Summary { median: m, min: m, max: m };
        let row = |size, algorithm: &str, z| Row {
            coll: "bcast",
            algorithm: algorithm.into(),
            buffers: Buffers::Vec,
            moved: "cma".into(),
            transport: "cma".into(),
            np: 2,
            size,
            iters: 10,
            mpi: s(2.0),
            zcoll: s(z),
            memcpy: s(0.5),
            copy: s(0.4),
        };
        let rows =
            vec![row(8, "auto", 1.0), row(8, "staged", 4.0), row(16, "auto", 1.0), row(16, "staged", 4.0)];
        assert_eq!(rows[0].csv(), "bcast,auto,vec,cma,cma,2,8,2.000,1.000,2.000,0.500,0.400");
        assert_eq!(CSV_HEADER.split(',').count(), rows[0].csv().split(',').count());
        assert!(summary_lines(&rows).contains("bcast staged (vec): ratio 0.50 (at 8) to 0.50 (at 16)"));
        let p = panels(&rows, "Open MPI v4");
        assert_eq!(p.len(), 1);
        let labels: Vec<&str> = p[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "zcoll auto",
                "zcoll staged",
                "MPI (Open MPI v4)",
                "memcpy of the received bytes",
                "zcoll's copy of the received bytes"
            ]
        );
        assert!(table_row(&rows[1]).contains("0.50"));
        // Several kinds of buffers: one line each, and the side-by-side table.
        let mut both = rows.clone();
        both.extend(rows.iter().map(|r| Row { buffers: Buffers::Heap, moved: "heap".into(), ..r.clone() }));
        let p = panels(&both, "Open MPI v4");
        let labels: Vec<&str> = p[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels[..4],
            ["zcoll auto, heap", "zcoll auto, vec", "zcoll staged, heap", "zcoll staged, vec"]
        );
        let table = side_by_side(&both, &[Buffers::Vec, Buffers::Heap]);
        assert!(
            table.lines().nth(1).unwrap().contains("ratio vec") && table.contains("ratio heap"),
            "{table}"
        );
        let line = table.lines().find(|l| l.starts_with("bcast") && l.contains(" 16 ")).expect(&table);
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells, ["bcast", "16", "2.00", "2.50", "2.00", "2.50"], "{table}");
        assert_eq!(moved(&[0, 5, 0]), "heap");
        assert_eq!(moved(&[1, 5, 0]), "cma+heap");
        assert_eq!(moved(&[0, 0, 0]), "-");
        // The default against the best explicit algorithm: one line per size.
        // A faster explicit algorithm on heap buffers is not the `Vec` default's best.
        let mut more = rows.clone();
        more.push(row(16, "direct-read", 0.8));
        more.push(Row { buffers: Buffers::Heap, ..row(8, "direct-read", 0.1) });
        let against = default_vs_best(&more);
        let vec = Buffers::Vec;
        assert_eq!(
            against,
            [
                Against {
                    coll: "bcast",
                    buffers: vec,
                    size: 8,
                    auto: 1.0,
                    best: "staged".into(),
                    best_us: 4.0
                },
                Against {
                    coll: "bcast",
                    buffers: vec,
                    size: 16,
                    auto: 1.0,
                    best: "direct-read".into(),
                    best_us: 0.8
                },
            ]
        );
        let table = default_vs_best_table(&against);
        let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[2], ["#", "bcast", "vec", "8", "1.00", "staged", "4.00", "0.25"], "{table}");
        assert_eq!(
            lines[3],
            ["#", "bcast", "vec", "16", "1.00", "direct-read", "0.80", "1.25", "!"],
            "{table}"
        );
        assert!(table.ends_with("within 10% of the best at 1 of 2 points"), "{table}");
        // Without the default, or without an explicit algorithm, nothing to compare.
        assert!(default_vs_best(&rows[1..2]).is_empty() && default_vs_best(&rows[..1]).is_empty());
    }
}
