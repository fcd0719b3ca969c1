//! `zcoll bench --coll ibcast,iallreduce,... [--overlap]`: zcoll's nonblocking collectives
//! (`Comm::immediate_scope`) beside the MPI library's (rsmpi's `immediate_*` in
//! `mpi::request::scope`), with both blocking calls, in the same run: `ibcast`,
//! `iallreduce`, `ireduce`, `igather`, `iallgather`, `ialltoall`, `iscatter` (rooted ones
//! at `--root`, the size being each rank's block) and `ibarrier`.
//!
//! Every iteration runs the four implementations in an order drawn anew (the same on
//! every rank), each after a barrier, on data that changes every step and is checked
//! after each call. The nonblocking ones are timed from the issue to the end of `wait`.
//! Up to 8 iterations run in one zcoll scope (as a program keeps one scope around many
//! calls; its worker thread, if a call starts it, is started once per scope); since a request borrows its
//! buffers until the scope ends, zcoll's nonblocking calls take one of up to 8 buffer
//! sets each (256 KiB in all), checked when the scope ends and reused in the next.
//! zcoll's blocking call has a set of its own too; the MPI library's two calls share one.
//!
//! `--overlap` measures as OSU's `osu_iallreduce` does: `pure` is the nonblocking call's
//! latency measured before; each timed iteration issues the call, computes for `pure`
//! (a busy loop, timed alone as `compute`), then waits (`total`); the overlap is
//! `max(0, 100 - 100 (total - compute) / pure)` percent, from the medians over iterations
//! of the slowest rank.

use crate::bench::BenchArgs;
use crate::colls::fill_words;
use crate::start::Start;
use crate::stats::{self, Summary};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::{Duration, Instant};
use zcoll::op::Builtin;
use zcoll::Comm;

/// The nonblocking collectives `--coll` knows.
pub const NAMES: &[&str] =
    &["ibcast", "iallreduce", "ireduce", "igather", "iallgather", "ialltoall", "iscatter", "ibarrier"];

/// A nonblocking collective of [`NAMES`], by the blocking one it is timed beside.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Coll {
    Bcast,
    Allreduce,
    Reduce,
    Gather,
    Allgather,
    Alltoall,
    Scatter,
    Barrier,
}

impl Coll {
    /// The collective of a name of [`NAMES`].
    fn of(name: &str) -> Coll {
        match name {
            "ibcast" => Coll::Bcast,
            "iallreduce" => Coll::Allreduce,
            "ireduce" => Coll::Reduce,
            "igather" => Coll::Gather,
            "iallgather" => Coll::Allgather,
            "ialltoall" => Coll::Alltoall,
            "iscatter" => Coll::Scatter,
            "ibarrier" => Coll::Barrier,
            other => unreachable!("{other} is not one of NAMES"),
        }
    }
}

/// Splits a `--coll` list into the nonblocking names and the rest (joined again).
pub fn split(colls: &str) -> (Vec<&'static str>, String) {
    let mut imm = Vec::new();
    let mut rest = Vec::new();
    for name in colls.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match NAMES.iter().find(|n| **n == name) {
            Some(n) => imm.push(*n),
            None => rest.push(name),
        }
    }
    (imm, rest.join(","))
}

/// One size of one nonblocking collective: the four latencies (microseconds, medians of
/// the per-iteration slowest rank) and, with `--overlap`, the overlap of each library.
#[derive(Clone, Debug)]
pub struct Row {
    /// A name of [`NAMES`].
    pub coll: &'static str,
    /// Bytes per rank.
    pub size: usize,
    /// The MPI library's blocking call.
    pub mpi: Summary,
    /// The MPI library's nonblocking call, issued and waited for.
    pub impi: Summary,
    /// zcoll's blocking call.
    pub zcoll: Summary,
    /// zcoll's nonblocking call, issued and waited for.
    pub izcoll: Summary,
    /// Overlap percentages (MPI, zcoll), with `--overlap`.
    pub overlap: Option<(f64, f64)>,
}

/// The CSV columns of [`Row::csv`]: median times in microseconds, overlap percentages
/// (empty without `--overlap`).
pub const CSV_HEADER: &str = "coll,size,mpi_us,impi_us,zcoll_us,izcoll_us,overlap_mpi,overlap_zcoll";

impl Row {
    /// The row as a line of [`CSV_HEADER`]'s columns.
    pub fn csv(&self) -> String {
        let (m, z) = self
            .overlap
            .map_or((String::new(), String::new()), |(m, z)| (format!("{m:.1}"), format!("{z:.1}")));
        format!(
            "{},{},{:.4},{:.4},{:.4},{:.4},{m},{z}",
            self.coll, self.size, self.mpi.median, self.impi.median, self.zcoll.median, self.izcoll.median
        )
    }
}

/// Where the nonblocking rows' CSV goes: `--csv`'s file when no blocking table took it,
/// else a sibling named `<stem>-immediate.<ext>`.
pub fn csv_path(path: &std::path::Path, blocking_ran: bool) -> std::path::PathBuf {
    if !blocking_ran {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map_or_else(|| "bench".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-immediate.{}", ext.to_string_lossy()),
        None => format!("{stem}-immediate"),
    };
    path.with_file_name(name)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Imp {
    Mpi,
    Impi,
    Zcoll,
    Izcoll,
}

const IMPS: [Imp; 4] = [Imp::Mpi, Imp::Impi, Imp::Zcoll, Imp::Izcoll];

/// The buffers of one size for one collective: `size` bytes per rank (`n` words), the
/// send and receive buffers as long as the collective needs (`p n` words for a gather's
/// result, an alltoall's two, a scatter's source), and the expected result.
struct Bufs {
    coll: Coll,
    root: i32,
    me: u64,
    p: u64,
    n: usize,
    base: Vec<u64>,
    send: Vec<u64>,
    recv: Vec<u64>,
    want: Vec<u64>,
}

impl Bufs {
    fn new(world: &SimpleCommunicator, coll: Coll, root: i32, size: usize) -> Bufs {
        let (me, p) = (world.rank() as u64, world.size() as u64);
        let n = size.div_ceil(8).max(1);
        let all = n * p as usize;
        let (send, recv) = match coll {
            Coll::Bcast => (0, n),
            Coll::Allreduce | Coll::Reduce => (n, n),
            Coll::Gather | Coll::Allgather => (n, all),
            Coll::Alltoall => (all, all),
            Coll::Scatter => (all, n),
            Coll::Barrier => (0, 0),
        };
        // Written, not `calloc`'s untouched zero pages: no call pays the first touch.
        let touched = |len| vec![u64::MAX; len];
        let base = touched(n);
        Bufs { coll, root, me, p, n, base, send: touched(send), recv: touched(recv), want: touched(recv) }
    }

    /// The words of the three buffers.
    fn words(&self) -> usize {
        self.send.len() + self.recv.len() + self.want.len()
    }

    /// Whether this rank's result is checked (a reduce's or gather's only at the root).
    fn checked(&self) -> bool {
        match self.coll {
            Coll::Reduce | Coll::Gather => self.me == self.root as u64,
            Coll::Barrier => false,
            _ => true,
        }
    }

    /// Step `seq`'s data: every rank's send buffer (a step's words, plus its rank, plus
    /// `2^32` times the destination in an alltoall or a scatter), or the broadcast root's,
    /// and the expected result. Every other result buffer is overwritten with the
    /// complement of the expected result: a call that writes nothing fails the check, and
    /// every implementation finds its buffers just written (as warm in the caches as the
    /// others', whenever it runs in the iteration's order).
    fn fill(&mut self, seq: u64) {
        let (me, p, n) = (self.me, self.p, self.n);
        fill_words(&mut self.base, seq);
        let base = &self.base;
        let word = |i: usize, from: u64, to: u64| base[i % n].wrapping_add(from).wrapping_add(to << 32);
        match self.coll {
            Coll::Bcast => self.want.copy_from_slice(base),
            Coll::Allreduce | Coll::Reduce => {
                self.send.iter_mut().zip(base).for_each(|(s, b)| *s = b.wrapping_add(me));
                let ranks = p * (p - 1) / 2;
                self.want.iter_mut().zip(base).for_each(|(w, b)| *w = b.wrapping_mul(p).wrapping_add(ranks));
            }
            Coll::Gather | Coll::Allgather => {
                self.send.iter_mut().enumerate().for_each(|(i, s)| *s = word(i, me, 0));
                self.want.iter_mut().enumerate().for_each(|(i, w)| *w = word(i, (i / n) as u64, 0));
            }
            Coll::Alltoall => {
                self.send.iter_mut().enumerate().for_each(|(i, s)| *s = word(i, me, (i / n) as u64));
                self.want.iter_mut().enumerate().for_each(|(i, w)| *w = word(i, (i / n) as u64, me));
            }
            Coll::Scatter => {
                self.send.iter_mut().enumerate().for_each(|(i, s)| *s = word(i, 0, (i / n) as u64));
                self.want.iter_mut().enumerate().for_each(|(i, w)| *w = word(i, 0, me));
            }
            Coll::Barrier => {}
        }
        if self.coll == Coll::Bcast && me == self.root as u64 {
            self.recv.copy_from_slice(&self.want);
        } else {
            self.recv.iter_mut().zip(&self.want).for_each(|(r, w)| *r = !w);
        }
    }

    fn check(&self) -> Result<(), String> {
        if !self.checked() {
            return Ok(());
        }
        match self.recv.iter().zip(&self.want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(i) => Err(format!(
                "word {i} of {} is {:#x}, not {:#x}",
                self.recv.len(),
                self.recv[i],
                self.want[i]
            )),
        }
    }
}

/// Busy for `d` (the computation of `--overlap`; nothing for a zero `d`).
fn busy(d: Duration) {
    if d.is_zero() {
        return;
    }
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        for i in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
    }
}

/// Runs `imp` (not [`Imp::Izcoll`]) once on `b` after a barrier, computing for `compute`
/// between issue and wait (the MPI library's nonblocking call only), and returns its time
/// in seconds. zcoll's blocking call runs in its turn in the scope `s`.
fn once(
    world: &SimpleCommunicator,
    s: &zcoll::Scope<'_, '_>,
    b: &mut Bufs,
    imp: Imp,
    compute: Duration,
    start: Start,
) -> Result<f64, String> {
    let root = world.process_at_rank(b.root);
    let is_root = world.rank() == b.root;
    let Bufs { coll, root: b_root, ref send, ref mut recv, .. } = *b;
    let sum = SystemOperation::sum;
    let t = start.begin(world, 0.0);
    match imp {
        Imp::Mpi => match coll {
            Coll::Bcast => root.broadcast_into(&mut recv[..]),
            Coll::Allreduce => world.all_reduce_into(&send[..], &mut recv[..], sum()),
            Coll::Reduce if is_root => root.reduce_into_root(&send[..], &mut recv[..], sum()),
            Coll::Reduce => root.reduce_into(&send[..], sum()),
            Coll::Gather if is_root => root.gather_into_root(&send[..], &mut recv[..]),
            Coll::Gather => root.gather_into(&send[..]),
            Coll::Allgather => world.all_gather_into(&send[..], &mut recv[..]),
            Coll::Alltoall => world.all_to_all_into(&send[..], &mut recv[..]),
            Coll::Scatter if is_root => root.scatter_into_root(&send[..], &mut recv[..]),
            Coll::Scatter => root.scatter_into(&mut recv[..]),
            Coll::Barrier => world.barrier(),
        },
        Imp::Impi if coll == Coll::Barrier => {
            let req = world.immediate_barrier();
            busy(compute);
            req.wait();
        }
        Imp::Impi => mpi::request::scope(|sc| {
            let req = match coll {
                Coll::Bcast => root.immediate_broadcast_into(sc, &mut recv[..]),
                Coll::Allreduce => world.immediate_all_reduce_into(sc, &send[..], &mut recv[..], sum()),
                Coll::Reduce if is_root => {
                    root.immediate_reduce_into_root(sc, &send[..], &mut recv[..], sum())
                }
                Coll::Reduce => root.immediate_reduce_into(sc, &send[..], sum()),
                Coll::Gather if is_root => root.immediate_gather_into_root(sc, &send[..], &mut recv[..]),
                Coll::Gather => root.immediate_gather_into(sc, &send[..]),
                Coll::Allgather => world.immediate_all_gather_into(sc, &send[..], &mut recv[..]),
                Coll::Alltoall => world.immediate_all_to_all_into(sc, &send[..], &mut recv[..]),
                Coll::Scatter if is_root => root.immediate_scatter_into_root(sc, &send[..], &mut recv[..]),
                Coll::Scatter => root.immediate_scatter_into(sc, &mut recv[..]),
                Coll::Barrier => unreachable!("the barrier's request has no scope"),
            };
            busy(compute);
            req.wait();
        }),
        Imp::Zcoll => s
            .blocking(|comm| match coll {
                Coll::Bcast => comm.broadcast_into(&mut recv[..], b_root),
                Coll::Allreduce => comm.all_reduce_into(&send[..], &mut recv[..], Builtin::Sum),
                Coll::Reduce if is_root => {
                    comm.reduce_into_root(&send[..], &mut recv[..], b_root, Builtin::Sum)
                }
                Coll::Reduce => comm.reduce_into(&send[..], b_root, Builtin::Sum),
                Coll::Gather if is_root => comm.gather_into_root(&send[..], &mut recv[..], b_root),
                Coll::Gather => comm.gather_into(&send[..], b_root),
                Coll::Allgather => comm.all_gather_into(&send[..], &mut recv[..]),
                Coll::Alltoall => comm.all_to_all_into(&send[..], &mut recv[..]),
                Coll::Scatter if is_root => comm.scatter_into_root(&send[..], &mut recv[..], b_root),
                Coll::Scatter => comm.scatter_into(&mut recv[..], b_root),
                Coll::Barrier => comm.barrier(),
            })
            .map_err(|e| e.to_string())?,
        Imp::Izcoll => unreachable!("zcoll's nonblocking calls run on the pool's buffers"),
    }
    let t = t.elapsed();
    b.check()?;
    Ok(t)
}

/// The per-iteration maxima over ranks of `times` (every rank's own).
fn slowest(world: &SimpleCommunicator, times: &[f64]) -> Vec<f64> {
    let mut max = vec![0f64; times.len()];
    world.all_reduce_into(times, &mut max[..], SystemOperation::max());
    max
}

/// Times `imps` at one size, `warmup + iters` iterations each in an order drawn anew
/// every iteration, the nonblocking calls computing for `compute[k]` between issue and
/// wait; returns every rank's own times (seconds), per implementation.
///
/// The iterations run inside zcoll's scopes, each of up to 8 iterations: a request borrows
/// its buffers until the scope ends, so zcoll's nonblocking calls take a buffer set of a
/// pool each (reused from scope to scope; at most 256 KiB in all: one set, and a scope per
/// iteration, from 64 KiB), filled just before its call (as the others' one set is, so
/// that every implementation finds its buffers equally warm in the caches) and checked
/// after the scope; zcoll's blocking call has a set of its own, and the MPI library's two
/// calls share one; these are filled and checked around every call.
#[allow(clippy::too_many_arguments)]
fn measure(
    world: &SimpleCommunicator,
    comm: &mut Comm,
    (coll, root, size): (Coll, i32, usize),
    imps: &[Imp],
    compute: &[Duration],
    (iters, warmup): (usize, usize),
    start: Start,
    seq: &mut u64,
) -> Result<Vec<Vec<f64>>, String> {
    let mut times = vec![vec![0f64; iters]; imps.len()];
    let mut b = Bufs::new(world, coll, root, size);
    // zcoll's blocking call has buffers of its own, as its nonblocking call has: on the
    // MPI library's buffers (just used by its calls) it was up to 1.6x faster at 1 MiB
    // than on a set of its own, which made the nonblocking call look that much slower.
    let mut bz = Bufs::new(world, coll, root, size);
    let is_root = world.rank() == root;
    let pool = ((256usize << 10) / (8 * b.words().max(3 * b.n))).clamp(1, 8);
    let sets_needed = if imps.contains(&Imp::Izcoll) { pool } else { 0 };
    let mut sets: Vec<(u64, Bufs)> =
        (0..sets_needed).map(|_| (0, Bufs::new(world, coll, root, size))).collect();
    let mut scratch = if sets_needed > 0 { b.recv.clone() } else { Vec::new() };
    let mut it = 0;
    while it < warmup + iters {
        let n = pool.min(warmup + iters - it);
        let first = it;
        comm.immediate_scope(|s| {
            let mut pool = sets.iter_mut();
            for it in first..first + n {
                for &k in &stats::shuffled(imps.len(), stats::mix((size as u64) << 32 ^ it as u64)) {
                    let t = match imps[k] {
                        Imp::Izcoll => {
                            let (set_seq, set) = pool.next().expect("a buffer set per call");
                            // Filled now, not before the scope: as warm as the others'.
                            *seq += 1;
                            *set_seq = *seq;
                            set.fill(*seq);
                            let (send, recv) = (&set.send[..], &mut set.recv[..]);
                            let t = start.begin(world, 0.0);
                            let sum = Builtin::Sum;
                            let req = match coll {
                                Coll::Bcast => s.immediate_broadcast_into(recv, root),
                                Coll::Allreduce => s.immediate_all_reduce_into(send, recv, sum),
                                Coll::Reduce if is_root => {
                                    s.immediate_reduce_into_root(send, recv, root, sum)
                                }
                                Coll::Reduce => s.immediate_reduce_into(send, root, sum),
                                Coll::Gather if is_root => s.immediate_gather_into_root(send, recv, root),
                                Coll::Gather => s.immediate_gather_into(send, root),
                                Coll::Allgather => s.immediate_all_gather_into(send, recv),
                                Coll::Alltoall => s.immediate_all_to_all_into(send, recv),
                                Coll::Scatter if is_root => s.immediate_scatter_into_root(send, recv, root),
                                Coll::Scatter => s.immediate_scatter_into(recv, root),
                                Coll::Barrier => s.immediate_barrier(),
                            };
                            busy(compute[k]);
                            req.wait().map_err(|e| format!("izcoll: {e}"))?;
                            t.elapsed()
                        }
                        imp => {
                            *seq += 1;
                            let b = if imp == Imp::Zcoll { &mut bz } else { &mut b };
                            b.fill(*seq);
                            once(world, s, b, imp, compute[k], start).map_err(|e| format!("{imp:?}: {e}"))?
                        }
                    };
                    if it >= warmup {
                        times[k][it - warmup] = t;
                    }
                }
            }
            Ok::<(), String>(())
        })?;
        for (seq, set) in sets.iter_mut().take(n) {
            // The expected result of the set's step (its own data is already in place),
            // with `fill`'s writes to the result buffer going to a scratch buffer: a set
            // keeps its buffers, so every call of a size finds them at the same addresses,
            // as zcoll's blocking call and the MPI library's find theirs (a new result
            // buffer every scope cost zcoll's call a fresh mapping of it, 1.2-1.5x at 1 MiB).
            std::mem::swap(&mut set.recv, &mut scratch);
            set.fill(*seq);
            std::mem::swap(&mut set.recv, &mut scratch);
            set.check().map_err(|e| format!("Izcoll: {e}"))?;
        }
        it += n;
    }
    Ok(times)
}

/// Times the nonblocking collectives `names` at every size of `args` on every rank of
/// `world`; rank 0 prints the table. Returns the rows (on every rank).
///
/// # Errors
///
/// A bad `--sizes`, or a wrong result or failed call (every rank checks the same call;
/// the caller aborts the job).
pub fn run(
    world: &SimpleCommunicator,
    comm: &mut Comm,
    args: &BenchArgs,
    names: &[&'static str],
    blocking_ran: bool,
) -> Result<Vec<Row>, String> {
    let sizes = stats::parse_sizes(&args.sizes).map_err(|e| format!("--sizes: {e}"))?;
    let start = Start::decide(world, args.start)?;
    let me = world.rank();
    if me == 0 {
        println!("# start: {}", start.describe(world.size() as usize));
        let over = if args.overlap { "  overlap% mpi  zcoll" } else { "" };
        println!(
            "{:<11}{:>9}{:>10}{:>10}{:>10}{:>10}{:>9}{:>9}{over}",
            "coll", "size", "mpi_us", "impi_us", "zcoll_us", "izcoll_us", "i/zcoll", "impi/iz"
        );
    }
    let mut rows = Vec::new();
    let mut seq = 0u64;
    for &name in names {
        for &size in &sizes {
            let iters = args.iters.unwrap_or_else(|| stats::default_iters(size)).max(1);
            let warmup = args.warmup.unwrap_or_else(|| stats::default_warmup(iters));
            let call = (Coll::of(name), args.root, size);
            let fail = |e: String| format!("{name} at {size} bytes, rank {me}: {e}");
            let zero = [Duration::ZERO; 4];
            let times =
                measure(world, comm, call, &IMPS, &zero, (iters, warmup), start, &mut seq).map_err(fail)?;
            let sum: Vec<Summary> = times
                .iter()
                .map(|t| Summary::of(&slowest(world, t)).expect("iterations").scaled(1e6))
                .collect();
            let overlap = match args.overlap {
                false => None,
                true => {
                    let mut pct = [0f64; 2];
                    for (i, (imp, pure)) in
                        [(Imp::Impi, sum[1].median), (Imp::Izcoll, sum[3].median)].into_iter().enumerate()
                    {
                        let compute = Duration::from_secs_f64(pure * 1e-6);
                        let total =
                            measure(world, comm, call, &[imp], &[compute], (iters, 0), start, &mut seq)
                                .map_err(fail)?;
                        let total = Summary::of(&slowest(world, &total[0])).expect("iterations").median * 1e6;
                        let mut cpu = vec![0f64; iters];
                        for c in &mut cpu {
                            let t = start.begin(world, 0.0);
                            busy(compute);
                            *c = t.elapsed();
                        }
                        let cpu = Summary::of(&slowest(world, &cpu)).expect("iterations").median * 1e6;
                        pct[i] = (100.0 - 100.0 * (total - cpu) / pure).clamp(0.0, 100.0);
                    }
                    Some((pct[0], pct[1]))
                }
            };
            let row =
                Row { coll: name, size, mpi: sum[0], impi: sum[1], zcoll: sum[2], izcoll: sum[3], overlap };
            if me == 0 {
                let over = row.overlap.map(|(m, z)| format!("{m:>13.1}{z:>7.1}")).unwrap_or_default();
                println!(
                    "{:<11}{:>9}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>9.3}{:>9.3}{over}",
                    name,
                    stats::format_size(size),
                    row.mpi.median,
                    row.impi.median,
                    row.zcoll.median,
                    row.izcoll.median,
                    row.izcoll.median / row.zcoll.median,
                    row.impi.median / row.izcoll.median,
                );
            }
            rows.push(row);
        }
    }
    if let (0, Some(path)) = (me, &args.csv) {
        let path = csv_path(path, blocking_ran);
        let mut text = format!("{CSV_HEADER}\n");
        rows.iter().for_each(|r| text.push_str(&(r.csv() + "\n")));
        std::fs::write(&path, text).map_err(|e| format!("--csv {}: {e}", path.display()))?;
        if blocking_ran {
            println!("# the nonblocking rows: {}", path.display());
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonblocking_names_are_split_off() {
        assert_eq!(split("ibcast,bcast, iallreduce"), (vec!["ibcast", "iallreduce"], "bcast".to_string()));
        assert_eq!(split("all"), (vec![], "all".to_string()));
        assert_eq!(split("iallreduce"), (vec!["iallreduce"], String::new()));
        assert_eq!(split("ibarrier,igather,x").0, vec!["ibarrier", "igather"]);
        let colls: Vec<Coll> = NAMES.iter().map(|n| Coll::of(n)).collect();
        assert!(colls.iter().enumerate().all(|(i, c)| !colls[..i].contains(c)), "one collective per name");
    }

    #[test]
    fn rows_go_to_csv_beside_a_blocking_table() {
        let t = |m: f64| Summary { median: m, min: m, max: m };
        let mut row = Row {
            coll: "ibcast",
            size: 8,
            mpi: t(0.25),
            impi: t(0.3),
            zcoll: t(0.2),
            izcoll: t(0.21),
            overlap: None,
        };
        assert_eq!(row.csv(), "ibcast,8,0.2500,0.3000,0.2000,0.2100,,");
        row.overlap = Some((12.34, 5.0));
        assert!(row.csv().ends_with(",12.3,5.0"), "{}", row.csv());
        assert_eq!(CSV_HEADER.split(',').count(), row.csv().split(',').count());
        let p = std::path::Path::new("out/b.csv");
        assert_eq!(csv_path(p, false), p);
        assert_eq!(csv_path(p, true), std::path::Path::new("out/b-immediate.csv"));
        assert_eq!(csv_path(std::path::Path::new("b"), true), std::path::Path::new("b-immediate"));
    }
}
