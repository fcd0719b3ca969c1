//! Random sequences of every collective, in the spirit of property testing: element sizes
//! from 1 to 64 bytes (odd ones included), lengths from 0 to a few MiB (mostly small),
//! random roots, built-in and user operators (commutative or not), `Vec` and shared-heap
//! buffers with guard bytes on both sides, and now and then a call that must fail on
//! every rank and leave every receive buffer untouched. Every result is compared with
//! rsmpi's collective on the same data, or, for user operators, with the fold in rank
//! order computed here (every rank can regenerate every rank's input).
//!
//! Every rank draws the same sequence from `ZCOLL_RANDOM_SEED` (a fixed default in CI);
//! a failure names the seed and the step, and `ZCOLL_RANDOM_STEPS` sets the length.
//!
//! The same sequence is the soak (scenario `soak`, `scripts/soak`): mostly small sizes, a
//! third kind of buffer (a `Vec` large enough in capacity that the `ShmAlloc` global
//! allocator of this binary serves it from the shared heap), a thread that churns
//! `ShmAlloc` allocations meanwhile and checks its own bytes, and every mismatch counted
//! rather than fatal, so that the end prints `<N> calls, <M> mismatches` (a call being
//! one step: one collective drawn at random, checked against its oracle; reduction and
//! scan steps check several variants of theirs).

use crate::common::op_mpi;
use crate::common::{mix, Rng, GUARD, GUARD_BYTE};
use mpi::datatype::{Partition as MpiPartition, PartitionMut as MpiPartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::op::{Builtin, Operator, UserOp};
use zcoll::{Comm, Error, Pod};

/// Declares records of odd and even sizes, built from arrays as users write them (each
/// field type one token tree: rsmpi's `Equivalence` derive reads arrays, not a `ty` fragment).
macro_rules! records {
    ($($name:ident { $($f:ident: $t:tt),+ })+) => {$(
        #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
        #[repr(C)]
        struct $name {
            $($f: $t),+
        }
    )+};
}

records! {
    B3 { v: [u8; 3] }
    B5 { v: [u8; 5] }
    F3 { v: [f32; 3] }
    H7 { v: [u16; 7] }
    D3 { v: [f64; 3] }
    B33 { v: [u8; 32], w: u8 }
    W8 { v: [u64; 8] }
}

/// Runs `$body` with `$t` the element type of index `$i` (13 of them, 1 to 64 bytes).
macro_rules! with_type {
    ($i:expr, $t:ident => $body:expr) => {
        with_type!(@pick $i % 13, $t, $body,
            [0 u8, 1 u16, 2 B3, 3 u32, 4 f32, 5 B5, 6 u64, 7 f64, 8 F3, 9 H7, 10 D3, 11 B33], W8)
    };
    (@pick $k:expr, $t:ident, $body:expr, [$($n:literal $ty:ty),+], $last:ty) => {
        match $k {
            $($n => {
                type $t = $ty;
                $body
            })+
            _ => {
                type $t = $last;
                $body
            }
        }
    };
}

/// The same random numbers on every rank.
impl Rng {
    /// The soak's length in bytes: a few hundred bytes mostly, sometimes kilobytes,
    /// rarely up to 64 KiB, so that a million steps take minutes.
    fn small_bytes(&mut self) -> usize {
        match self.below(20) {
            0 => 0,
            1..=12 => self.below(256),
            13..=18 => self.below(8 << 10),
            _ => (16 << 10) + self.below(48 << 10),
        }
    }

    /// A length in bytes: mostly small, sometimes around the 32 KiB scratch, rarely MiBs.
    fn bytes(&mut self) -> usize {
        match self.below(20) {
            0 => 0,
            1..=7 => self.below(200),
            8..=12 => self.below(8 << 10),
            13..=16 => (24 << 10) + self.below(24 << 10),
            17..=18 => self.below(512 << 10),
            _ => (1 << 20) + self.below(2 << 20),
        }
    }
}

/// Where a step's buffers live.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A `Vec` of its own size (small ones from the system allocator, under the 64 KiB
    /// threshold of this binary's `ShmAlloc`).
    Vec,
    /// `comm.alloc`: the shared heap.
    Heap,
    /// A `Vec` with room for at least 64 KiB, which the global `ShmAlloc` serves from the
    /// shared heap whatever the length used (the soak only).
    Global,
}

/// A buffer of `n` elements between guard bytes, in a `Vec` or in the shared heap.
struct Buf<T: Pod> {
    store: Store<T>,
    pre: usize,
    n: usize,
}

enum Store<T: Pod> {
    Vec(Vec<T>),
    Heap(zcoll::ShmBox<T>),
}

impl<T: Pod> Buf<T> {
    fn new(comm: &Comm, heap: Kind, n: usize, fill: impl Fn(usize) -> T) -> Buf<T> {
        let pre = GUARD.div_ceil(std::mem::size_of::<T>());
        let total = pre + n + pre;
        let mut store = match heap {
            Kind::Heap => Store::Heap(comm.alloc::<T>(total).expect("comm.alloc")),
            Kind::Vec => Store::Vec(vec![T::zeroed(); total]),
            Kind::Global => {
                let mut v = Vec::with_capacity(total.max((64 << 10) / std::mem::size_of::<T>() + 1));
                v.resize(total, T::zeroed());
                Store::Vec(v)
            }
        };
        let all = match &mut store {
            Store::Vec(v) => &mut v[..],
            Store::Heap(h) => &mut h[..],
        };
        bytemuck::cast_slice_mut::<T, u8>(all).fill(GUARD_BYTE);
        for (i, x) in all[pre..pre + n].iter_mut().enumerate() {
            *x = fill(i);
        }
        Buf { store, pre, n }
    }

    fn all(&self) -> &[T] {
        match &self.store {
            Store::Vec(v) => v,
            Store::Heap(h) => h,
        }
    }

    fn get(&self) -> &[T] {
        &self.all()[self.pre..self.pre + self.n]
    }

    fn get_mut(&mut self) -> &mut [T] {
        let (pre, n) = (self.pre, self.n);
        match &mut self.store {
            Store::Vec(v) => &mut v[pre..pre + n],
            Store::Heap(h) => &mut h[pre..pre + n],
        }
    }

    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.get())
    }

    fn guard_ok(&self) -> bool {
        let all: &[u8] = bytemuck::cast_slice(self.all());
        let size = std::mem::size_of::<T>();
        let (a, b) = (self.pre * size, (self.pre + self.n) * size);
        all[..a].iter().chain(&all[b..]).all(|&x| x == GUARD_BYTE)
    }
}

/// Rank `r`'s element `i` of step `step`: random bytes (any bit pattern: results are
/// compared as bytes).
fn elem<T: Pod>(step: u64, r: i32, i: usize) -> T {
    let mut t = T::zeroed();
    for (j, b) in bytemuck::bytes_of_mut(&mut t).iter_mut().enumerate() {
        *b = mix(step << 40 ^ (r as u64) << 32 ^ (i as u64) << 8 ^ j as u64) as u8;
    }
    t
}

struct Ctx<'a> {
    world: &'a SimpleCommunicator,
    comm: &'a Comm,
    seed: u64,
    step: u64,
    /// The soak: a mismatch is counted here (with its first few reported), not fatal.
    soak: Option<std::cell::Cell<u64>>,
}

impl Ctx<'_> {
    /// Counts a mismatch in the soak (and says what it was, for the first ten); fails
    /// the job otherwise.
    fn mismatch(&self, what: &str) {
        match &self.soak {
            Some(count) => {
                count.set(count.get() + 1);
                if count.get() <= 10 {
                    eprintln!(
                        "soak step {} (seed {}, rank {}): {what}",
                        self.step,
                        self.seed,
                        self.world.rank()
                    );
                }
            }
            None => self.fail(what),
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "random step {} (seed {}, rank {}): {what}; rerun with ZCOLL_RANDOM_SEED={}",
            self.step,
            self.seed,
            self.world.rank(),
            self.seed
        )
    }

    fn same(&self, got: &[u8], want: &[u8], what: &str) {
        if got.len() != want.len() {
            return self.mismatch(&format!("{what}: {} bytes, rsmpi {}", got.len(), want.len()));
        }
        if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
            self.mismatch(&format!("{what}: differs from the oracle at byte {i} of {}", got.len()));
        }
    }

    /// Checks a bad call in which a rank that only gives (`gives`: the root of a
    /// broadcast or scatter, a non-root of a gather) may have left before the verdict (a
    /// call small enough to travel with its arrival) and returned `Ok`, with `buf` then
    /// holding `holds` (what it held before, or a scatter root's own block): every other
    /// rank fails it as `outcome` says, with `buf` untouched. Then the next call, a
    /// barrier, fails with `PreviousFailed` on every rank if any rank returned `Ok`, and
    /// succeeds everywhere otherwise.
    fn deferred<T: Pod>(
        &self,
        r: zcoll::Result<()>,
        gives: bool,
        buf: &Buf<T>,
        before: &[u8],
        holds: &[u8],
        what: &str,
    ) {
        let left = match (r, gives) {
            (Ok(()), true) => {
                self.guards(buf, what);
                self.same(buf.bytes(), holds, &format!("{what}: a rank that left a bad call"));
                1u8
            }
            (r, _) => {
                self.outcome(r, true, buf, before, what);
                0
            }
        };
        let mut any = 0u8;
        self.world.all_reduce_into(&left, &mut any, mpi::collective::SystemOperation::max());
        match (any, self.comm.barrier()) {
            (1, Err(Error::PreviousFailed { .. })) | (0, Ok(())) => {}
            (any, next) => {
                self.fail(&format!("{what}: {any} ranks left early, and the next call gave {next:?}"))
            }
        }
    }

    fn ok(&self, r: zcoll::Result<()>, what: &str) {
        if let Err(e) = r {
            self.mismatch(&format!("{what}: {e}"));
        }
    }

    fn guards<T: Pod>(&self, b: &Buf<T>, what: &str) {
        if !b.guard_ok() {
            self.mismatch(&format!("{what}: wrote outside the buffer"));
        }
    }

    /// Checks a call on `buf`, which held `before`: it wrote nothing outside `buf`; a call
    /// made `bad` is an error on every rank (the checks' verdict where this rank took part
    /// in it, or a peer's failure) and leaves `buf` as it was, a good one succeeds. Returns
    /// whether it succeeded, so that its result remains to be checked.
    fn outcome<T: Pod>(
        &self,
        r: zcoll::Result<()>,
        bad: bool,
        buf: &Buf<T>,
        before: &[u8],
        what: &str,
    ) -> bool {
        self.guards(buf, what);
        if !bad {
            self.ok(r, what);
            return true;
        }
        match r {
            Err(Error::LengthMismatch { .. } | Error::BufferSize { .. } | Error::PeerFailed { .. }) => {}
            Err(e) => self.fail(&format!("{what}: a bad length gave {e}")),
            Ok(()) => self.fail(&format!("{what}: a bad length gave Ok")),
        }
        self.same(buf.bytes(), before, &format!("{what}: a failed call changed a buffer"));
        false
    }
}

pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    run_with(world, comm, false);
}

/// The soak: `ZCOLL_RANDOM_STEPS` steps (default 10^6) of the same sequence, with small
/// sizes, the global allocator's buffers and a churning thread; prints
/// `<N> calls, <M> mismatches` (summed over the ranks) and fails if `M > 0`.
pub(crate) fn soak(world: &SimpleCommunicator, comm: &Comm) {
    run_with(world, comm, true);
}

fn run_with(world: &SimpleCommunicator, comm: &Comm, soak: bool) {
    let seed = std::env::var("ZCOLL_RANDOM_SEED").map_or(0x5eed_2026, |s| s.parse().expect("a number"));
    let default_steps = if soak { 1_000_000 } else { 300 };
    let steps = std::env::var("ZCOLL_RANDOM_STEPS").map_or(default_steps, |s| s.parse().expect("a number"));
    let mut rng = Rng(seed ^ world.size() as u64);
    let mut cx = Ctx { world, comm, seed, step: 0, soak: soak.then(|| std::cell::Cell::new(0)) };
    let churn = soak.then(|| Churn::start(seed ^ world.rank() as u64));
    let start = std::time::Instant::now();
    for step in 0..steps {
        cx.step = step;
        if soak && world.rank() == 0 && step > 0 && step % 100_000 == 0 {
            let secs = start.elapsed().as_secs_f64();
            eprintln!("soak: {step} calls in {secs:.0} s ({:.0} calls/s)", step as f64 / secs);
        }
        let kind = rng.below(14) as u64;
        let t = rng.below(13);
        let heap = match (rng.below(3), soak) {
            (0, _) => Kind::Heap,
            (1, true) => Kind::Global,
            _ => Kind::Vec,
        };
        let bytes = if soak { rng.small_bytes() } else { rng.bytes() };
        let root = rng.below(world.size() as usize) as i32;
        let bad = rng.below(12) == 0;
        let pick = rng.next();
        with_type!(t, T => {
            let n = bytes / std::mem::size_of::<T>();
            match kind {
                0..=5 => moves::<T>(&cx, kind, n, root, heap, bad),
                6..=8 => varcount::<T>(&cx, kind, n, root, heap, pick),
                12 => alltoallv::<T>(&cx, n, heap, pick),
                13 => scans::<T>(&cx, n, heap, pick),
                _ => reduction::<T>(&cx, n, root, heap, bad, pick),
            }
        });
        if rng.below(16) == 0 {
            cx.ok(comm.barrier(), "barrier");
        }
    }
    if let (Some(churn), Some(count)) = (churn, &cx.soak) {
        let (blocks, changed) = churn.stop();
        count.set(count.get() + changed);
        let mut churned = 0u64;
        world.all_reduce_into(&blocks, &mut churned, mpi::collective::SystemOperation::sum());
        let mut total = 0u64;
        world.all_reduce_into(&count.get(), &mut total, mpi::collective::SystemOperation::sum());
        if world.rank() == 0 {
            println!("{steps} calls, {total} mismatches");
            eprintln!(
                "soak: {steps} calls in {:.0} s, {churned} ShmAlloc blocks churned meanwhile",
                start.elapsed().as_secs_f64()
            );
        }
        assert_eq!(total, 0, "the soak found mismatches (seed {seed}): see the lines above");
        return;
    }
    if world.rank() == 0 {
        println!("random: {steps} steps passed (seed {seed})");
    }
}

/// A thread that allocates, fills, checks and frees `ShmAlloc` blocks (64 KiB to 1 MiB,
/// up to 8 live) while the collectives run, so the shared heap grows and is reused under
/// them; a block whose bytes changed counts as a mismatch.
///
/// It sleeps nine times as long as it works, so that it takes a tenth of a core: at 8
/// ranks on 2 cores, eight threads that filled blocks flat out would take the cores from
/// the ranks (the soak ran at 38 calls per second so, and at 2000 without them).
struct Churn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl Churn {
    fn start(seed: u64) -> Churn {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rng = Rng(seed ^ 0xc4u64 << 56);
            let mut live: Vec<(u8, Vec<u8>)> = Vec::new();
            let mut bad = 0u64;
            let check = |(tag, v): &(u8, Vec<u8>)| v.iter().enumerate().all(|(i, &b)| b == tag ^ i as u8);
            let mut blocks = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let began = std::time::Instant::now();
                if live.len() >= 8 || (rng.below(3) == 0 && !live.is_empty()) {
                    let old = live.swap_remove(rng.below(live.len()));
                    bad += !check(&old) as u64;
                }
                let tag = rng.next() as u8;
                let len = (64 << 10) + rng.below(960 << 10);
                live.push((tag, (0..len).map(|i| tag ^ i as u8).collect()));
                blocks += 1;
                let worked = began.elapsed();
                std::thread::sleep((9 * worked).max(std::time::Duration::from_micros(200)));
            }
            bad += live.iter().filter(|b| !check(b)).count() as u64;
            (blocks, bad)
        });
        Churn { stop, thread }
    }

    /// Stops the thread; returns how many blocks it allocated, and how many of them it
    /// found changed.
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the churning thread")
    }
}

/// Broadcast, scatter, gather, allgather, alltoall (kind 0 to 4; 5 is a broadcast again)
/// of `n` elements per block, against rsmpi; `bad`: one rank's receive buffer is one
/// element short, and every rank must fail with every buffer untouched.
fn moves<T: Pod>(cx: &Ctx<'_>, kind: u64, n: usize, root: i32, heap: Kind, bad: bool) {
    let (world, comm) = (cx.world, cx.comm);
    let (me, p) = (world.rank(), world.size() as usize);
    let short = bad && n > 0;
    let shrink = |len: usize| if short && me == (root + 1) % p as i32 { len - 1 } else { len };
    let step = cx.step;
    let what = format!(
        "{} of {n} x {} B, root {root}",
        ["bcast", "scatter", "gather", "allgather", "alltoall", "bcast"][kind as usize],
        std::mem::size_of::<T>()
    );
    match kind {
        0 | 5 => {
            let len = shrink(n);
            let mut buf = Buf::<T>::new(comm, heap, len, |i| {
                if me == root {
                    elem(step, root, i)
                } else {
                    elem(step, -1, i)
                }
            });
            let before = buf.bytes().to_vec();
            let r = comm.broadcast_into(buf.get_mut(), root);
            if short {
                return cx.deferred(r, me == root, &buf, &before, &before, &what);
            }
            if !cx.outcome(r, short, &buf, &before, &what) {
                return;
            }
            let mut oracle: Vec<T> =
                (0..n).map(|i| if me == root { elem(step, root, i) } else { T::zeroed() }).collect();
            if n > 0 {
                world.process_at_rank(root).broadcast_into(&mut oracle[..]);
            }
            cx.same(buf.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
        1 => {
            let send: Vec<T> = (0..n * p).map(|i| elem(step, me, i)).collect();
            let mut recv = Buf::<T>::new(comm, heap, shrink(n), |i| elem(step, -1, i));
            let before = recv.bytes().to_vec();
            let r = match me == root {
                true => comm.scatter_into_root(&send, recv.get_mut(), root),
                false => comm.scatter_into(recv.get_mut(), root),
            };
            if short {
                // The root may leave a small one (its own block copied).
                let own = bytemuck::cast_slice(&send[me as usize * n..(me as usize + 1) * n]);
                return cx.deferred(r, me == root, &recv, &before, own, &what);
            }
            if !cx.outcome(r, short, &recv, &before, &what) {
                return;
            }
            let mut oracle = vec![T::zeroed(); n];
            if n > 0 {
                let at = world.process_at_rank(root);
                match me == root {
                    true => at.scatter_into_root(&send[..], &mut oracle[..]),
                    false => at.scatter_into(&mut oracle[..]),
                }
            }
            cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
        2 => {
            let send: Vec<T> = (0..n).map(|i| elem(step, me, i)).collect();
            let len = if me == root { n * p } else { 0 };
            let len = if short && me == root { len - 1 } else { len };
            let mut recv = Buf::<T>::new(comm, heap, len, |i| elem(step, -1, i));
            let before = recv.bytes().to_vec();
            let r = match me == root {
                true => comm.gather_into_root(&send, recv.get_mut(), root),
                false => comm.gather_into(&send, root),
            };
            if short {
                // The non-roots may leave a small one.
                return cx.deferred(r, me != root, &recv, &before, &before, &what);
            }
            if !cx.outcome(r, short, &recv, &before, &what) {
                return;
            }
            let mut oracle = vec![T::zeroed(); if me == root { n * p } else { 0 }];
            if n > 0 {
                let at = world.process_at_rank(root);
                match me == root {
                    true => at.gather_into_root(&send[..], &mut oracle[..]),
                    false => at.gather_into(&send[..]),
                }
            }
            cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
        _ => {
            let all = kind == 3;
            let send: Vec<T> = (0..if all { n } else { n * p }).map(|i| elem(step, me, i)).collect();
            let mut recv = Buf::<T>::new(comm, heap, shrink(n * p), |i| elem(step, -1, i));
            let before = recv.bytes().to_vec();
            let r = match all {
                true => comm.all_gather_into(&send, recv.get_mut()),
                false => comm.all_to_all_into(&send, recv.get_mut()),
            };
            if !cx.outcome(r, short, &recv, &before, &what) {
                return;
            }
            let mut oracle = vec![T::zeroed(); n * p];
            if n > 0 {
                match all {
                    true => world.all_gather_into(&send[..], &mut oracle[..]),
                    false => world.all_to_all_into(&send[..], &mut oracle[..]),
                }
            }
            cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
    }
}

/// Scatterv (kind 6), gatherv (7) and allgatherv (8) with random counts (zeros
/// included) summing to about `n` per rank, against rsmpi.
fn varcount<T: Pod>(cx: &Ctx<'_>, kind: u64, n: usize, root: i32, heap: Kind, pick: u64) {
    let (world, comm) = (cx.world, cx.comm);
    let (me, p) = (world.rank(), world.size() as usize);
    let step = cx.step;
    let counts: Vec<i32> = (0..p)
        .map(|r| {
            if mix(pick ^ r as u64) % 4 == 0 {
                0
            } else {
                (mix(pick + r as u64) % (2 * n as u64 + 1)) as i32
            }
        })
        .collect();
    // Displacements in a random order of the blocks, with gaps.
    let mut displs = vec![0i32; p];
    let mut at = 0i32;
    for k in 0..p {
        let r = (k + (pick % p as u64) as usize) % p;
        displs[r] = at;
        at += counts[r] + (mix(pick ^ 0x77 ^ r as u64) % 3) as i32;
    }
    let total = at as usize;
    let mine = counts[me as usize] as usize;
    let what = format!(
        "{} of {} elements of {} B, root {root}",
        ["scatterv", "gatherv", "allgatherv"][kind as usize - 6],
        total,
        std::mem::size_of::<T>()
    );
    match kind {
        6 => {
            let send: Vec<T> = addressed(total, |i| elem(step, me, i));
            let mut recv = Buf::<T>::new(comm, heap, mine, |i| elem(step, -1, i));
            let r = match me == root {
                true => comm.scatter_varcount_into_root(&send, &counts, &displs, recv.get_mut(), root),
                false => comm.scatter_varcount_into(recv.get_mut(), root),
            };
            cx.ok(r, &what);
            cx.guards(&recv, &what);
            let mut oracle = addressed(mine, |_| T::zeroed());
            let (at, out) = (world.process_at_rank(root), &mut oracle[..]);
            match me == root {
                true => at
                    .scatter_varcount_into_root(&MpiPartition::new(&send[..], &counts[..], &displs[..]), out),
                false => at.scatter_varcount_into(out),
            }
            cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
        7 => {
            let send: Vec<T> = (0..mine).map(|i| elem(step, me, i)).collect();
            let len = if me == root { total } else { 0 };
            let mut recv = Buf::<T>::new(comm, heap, len, |i| elem(step, -1, i));
            let r = match me == root {
                true => comm.gather_varcount_into_root(&send, recv.get_mut(), &counts, &displs, root),
                false => comm.gather_varcount_into(&send, root),
            };
            cx.ok(r, &what);
            cx.guards(&recv, &what);
            if me == root {
                // The gaps keep what was there: compare the blocks only.
                for r in 0..p {
                    let (a, c) = (displs[r] as usize, counts[r] as usize);
                    let want: Vec<T> = (0..c).map(|i| elem(step, r as i32, i)).collect();
                    cx.same(bytemuck::cast_slice(&recv.get()[a..a + c]), bytemuck::cast_slice(&want), &what);
                }
            }
        }
        _ => {
            let send: Vec<T> = addressed(mine, |i| elem(step, me, i));
            let mut recv = Buf::<T>::new(comm, heap, total, |i| elem(step, -1, i));
            cx.ok(comm.all_gather_varcount_into(&send, recv.get_mut(), &counts, &displs), &what);
            cx.guards(&recv, &what);
            let mut oracle: Vec<T> = addressed(total, |i| elem(step, -1, i));
            let mut all = MpiPartitionMut::new(&mut oracle[..], &counts[..], &displs[..]);
            world.all_gather_varcount_into(&send[..], &mut all);
            cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
        }
    }
}

/// `len` elements `f(i)`, with room for one at least: an empty vector then still has a
/// real address, where an empty `Vec`'s dangling address is 1, which Open MPI reads as
/// `MPI_IN_PLACE`.
fn addressed<T>(len: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    let mut v = Vec::with_capacity(len.max(1));
    v.extend((0..len).map(f));
    v
}

/// Allreduce, allreduce in place and reduce of `n` elements of `T` with a user
/// operator, commutative (byte-wise wrapping sum) or not (the left operand, so rank 0's
/// value wins), or, for the primitive types, a built-in operator against rsmpi. `bad`:
/// one rank reduces another element type of the same size, or has a short output.
fn reduction<T: Pod>(cx: &Ctx<'_>, n: usize, root: i32, heap: Kind, bad: bool, pick: u64) {
    let (world, comm) = (cx.world, cx.comm);
    let (me, p) = (world.rank(), world.size());
    let step = cx.step;
    let size = std::mem::size_of::<T>();
    let what = format!("reduction of {n} x {size} B (choice {}), root {root}", pick % 6);
    let commutative = pick % 2 == 0;
    let wrapping = UserOp::commutative(|acc: &mut [T], x: &[T]| {
        for (a, b) in acc.iter_mut().zip(x) {
            for (u, v) in bytemuck::bytes_of_mut(a).iter_mut().zip(bytemuck::bytes_of(b)) {
                *u = u.wrapping_add(*v);
            }
        }
    });
    let left = UserOp::non_commutative(|_acc: &mut [T], _x: &[T]| {});
    let send: Vec<T> = (0..n).map(|i| elem(step, me, i)).collect();
    let expect: Vec<T> = (0..n)
        .map(|i| {
            let mut acc = [elem::<T>(step, 0, i)];
            for r in 1..p {
                let x = [elem::<T>(step, r, i)];
                match commutative {
                    true => wrapping.apply(&mut acc, &x),
                    false => left.apply(&mut acc, &x),
                };
            }
            acc[0]
        })
        .collect();
    let op = |acc: &mut [T], x: &[T]| {
        match commutative {
            true => wrapping.apply(acc, x),
            false => left.apply(acc, x),
        };
    };
    let user = match commutative {
        true => UserOp::commutative(op),
        false => UserOp::non_commutative(op),
    };
    if bad && n > 0 {
        // A short output on one rank: an error everywhere, every output untouched.
        let short = (root + 1) % p;
        let mut recv = Buf::<T>::new(comm, heap, if me == short { n - 1 } else { n }, |i| elem(step, -1, i));
        let before = recv.bytes().to_vec();
        let r = comm.all_reduce_into(&send, recv.get_mut(), &user);
        cx.outcome(r, true, &recv, &before, &what);
        return;
    }
    let mut recv = Buf::<T>::new(comm, heap, n, |i| elem(step, -1, i));
    cx.ok(comm.all_reduce_into(&send, recv.get_mut(), &user), &what);
    cx.guards(&recv, &what);
    cx.same(recv.bytes(), bytemuck::cast_slice(&expect), &what);
    let mut inplace = Buf::<T>::new(comm, heap, n, |i| elem(step, me, i));
    cx.ok(comm.all_reduce_in_place(inplace.get_mut(), &user), &format!("{what} in place"));
    cx.same(inplace.bytes(), bytemuck::cast_slice(&expect), &format!("{what} in place"));
    let mut out = Buf::<T>::new(comm, heap, if me == root { n } else { 0 }, |i| elem(step, -1, i));
    let r = match me == root {
        true => comm.reduce_into_root(&send, out.get_mut(), root, &user),
        false => comm.reduce_into(&send, root, &user),
    };
    cx.ok(r, &format!("{what} to the root"));
    cx.guards(&out, &what);
    if me == root {
        cx.same(out.bytes(), bytemuck::cast_slice(&expect), &format!("{what} to the root"));
    }
    builtin(cx, n, pick);
}

/// A built-in operator on a primitive type of the step's size, against rsmpi's
/// allreduce, with small integer values so that floats sum exactly; once in a while one
/// rank passes another type of the same size, which must be a `Mismatch` everywhere.
fn builtin(cx: &Ctx<'_>, n: usize, pick: u64) {
    let (world, comm) = (cx.world, cx.comm);
    let me = world.rank();
    let op = [Builtin::Sum, Builtin::Min, Builtin::Max, Builtin::BitXor][(pick >> 8) as usize % 4];
    let float = op != Builtin::BitXor && (pick >> 12) % 2 == 0;
    let value = |r: i32, i: usize| ((mix(cx.step ^ (r as u64) << 32 ^ i as u64) % 7) as i64) - 3;
    let what = format!("builtin {op:?} of {n} (float {float})");
    if float {
        let send: Vec<f64> = (0..n).map(|i| value(me, i) as f64).collect();
        let mut got = vec![0f64; n];
        cx.ok(comm.all_reduce_into(&send, &mut got, op), &what);
        let mut want = vec![0f64; n];
        if n > 0 {
            world.all_reduce_into(&send[..], &mut want[..], op_mpi(op));
        }
        cx.same(bytemuck::cast_slice(&got), bytemuck::cast_slice(&want), &what);
    } else {
        let send: Vec<i64> = (0..n).map(|i| value(me, i)).collect();
        let mut got = vec![0i64; n];
        cx.ok(comm.all_reduce_into(&send, &mut got, op), &what);
        let mut want = vec![0i64; n];
        if n > 0 {
            world.all_reduce_into(&send[..], &mut want[..], op_mpi(op));
        }
        cx.same(bytemuck::cast_slice(&got), bytemuck::cast_slice(&want), &what);
    }
    if (pick >> 16) % 8 == 0 && world.size() > 1 && op != Builtin::BitXor {
        // f64 everywhere but on the last rank, which passes u64: same size, same operator.
        let last = world.size() - 1;
        let r = match me == last {
            true => comm.all_reduce_into(&vec![1u64; n.max(1)], &mut vec![0u64; n.max(1)], op),
            false => comm.all_reduce_into(&vec![1f64; n.max(1)], &mut vec![0f64; n.max(1)], op),
        };
        match r {
            Err(Error::Mismatch { .. }) => {}
            other => cx.fail(&format!("f64 against u64: {other:?}, not Mismatch")),
        }
    }
}

/// Alltoallv with random counts (zeros included, each pair its own) and displacements
/// with gaps, against rsmpi.
fn alltoallv<T: Pod>(cx: &Ctx<'_>, n: usize, heap: Kind, pick: u64) {
    let (world, comm) = (cx.world, cx.comm);
    let (me, p) = (world.rank() as usize, world.size() as usize);
    let step = cx.step;
    // What q sends r: the same on both sides.
    let count = |q: usize, r: usize| match mix(pick ^ (q * 64 + r) as u64) % 4 {
        0 => 0,
        _ => (mix(pick + (q * 64 + r) as u64) % (n as u64 / 2 + 1)) as i32,
    };
    let place = |c: Vec<i32>| {
        let d: Vec<i32> = c.iter().scan(0, |s, &x| Some(std::mem::replace(s, *s + x + 1))).collect();
        let total = (d.last().copied().unwrap_or(0) + c.last().copied().unwrap_or(0)) as usize;
        (c, d, total)
    };
    let (sc, sd, stotal) = place((0..p).map(|r| count(me, r)).collect());
    let (rc, rd, rtotal) = place((0..p).map(|q| count(q, me)).collect());
    let what = format!("alltoallv of about {n} x {} B", std::mem::size_of::<T>());
    let send: Vec<T> = addressed(stotal, |i| elem(step, me as i32, i));
    let mut recv = Buf::<T>::new(comm, heap, rtotal, |i| elem(step, -1, i));
    cx.ok(comm.all_to_all_varcount_into(&send, &sc, &sd, recv.get_mut(), &rc, &rd), &what);
    cx.guards(&recv, &what);
    let mut oracle: Vec<T> = addressed(rtotal, |i| elem(step, -1, i));
    world.all_to_all_varcount_into(
        &MpiPartition::new(&send[..], &sc[..], &sd[..]),
        &mut MpiPartitionMut::new(&mut oracle[..], &rc[..], &rd[..]),
    );
    cx.same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
}

/// Scan, exclusive scan and block reduce-scatter: a built-in operator on small integers
/// against rsmpi's, and a user operator (commutative byte-wise sum, or the left operand)
/// on `T` against the fold in rank order computed here.
fn scans<T: Pod>(cx: &Ctx<'_>, n: usize, heap: Kind, pick: u64) {
    let (world, comm) = (cx.world, cx.comm);
    let (me, p) = (world.rank(), world.size());
    let pu = p as usize;
    let step = cx.step;
    let op = [Builtin::Sum, Builtin::Min, Builtin::Max, Builtin::BitXor][(pick >> 4) as usize % 4];
    let value = |r: i32, i: usize| ((mix(step ^ (r as u64) << 32 ^ i as u64) % 7) as i64) - 3;
    let what = format!("scans {op:?} of {n}");
    let send: Vec<i64> = (0..n * pu).map(|i| value(me, i)).collect();
    for kind in 0..3 {
        let len = if kind == 2 { n } else { n * pu };
        let mut got = Buf::<i64>::new(comm, heap, len, |_| 9);
        let input = &send[..if kind == 2 { n * pu } else { len }];
        let r = match kind {
            0 => comm.scan_into(input, got.get_mut(), op),
            1 => comm.exclusive_scan_into(input, got.get_mut(), op),
            _ => comm.reduce_scatter_block_into(input, got.get_mut(), op),
        };
        cx.ok(r, &what);
        cx.guards(&got, &what);
        let mut want = vec![9i64; len];
        if len > 0 {
            match kind {
                0 => world.scan_into(input, &mut want[..], op_mpi(op)),
                1 => world.exclusive_scan_into(input, &mut want[..], op_mpi(op)),
                _ => world.reduce_scatter_block_into(input, &mut want[..], op_mpi(op)),
            }
        }
        if kind == 1 && me == 0 {
            want = vec![9i64; len]; // zcoll leaves rank 0's output as it was
        }
        cx.same(got.bytes(), bytemuck::cast_slice(&want), &format!("{what} kind {kind}"));
    }
    // A user operator on T.
    let commutative = pick % 2 == 0;
    let op = |acc: &mut [T], x: &[T]| {
        if commutative {
            for (a, b) in acc.iter_mut().zip(x) {
                for (u, v) in bytemuck::bytes_of_mut(a).iter_mut().zip(bytemuck::bytes_of(b)) {
                    *u = u.wrapping_add(*v);
                }
            }
        }
    };
    let user = match commutative {
        true => UserOp::commutative(op),
        false => UserOp::non_commutative(op),
    };
    let mine: Vec<T> = (0..n).map(|i| elem(step, me, i)).collect();
    let mut got = Buf::<T>::new(comm, heap, n, |i| elem(step, -1, i));
    cx.ok(comm.scan_into(&mine, got.get_mut(), &user), &format!("{what} user scan"));
    cx.guards(&got, &what);
    let want: Vec<T> = (0..n)
        .map(|i| {
            let mut acc = [elem::<T>(step, 0, i)];
            for r in 1..=me {
                user.apply(&mut acc, &[elem::<T>(step, r, i)]);
            }
            acc[0]
        })
        .collect();
    cx.same(got.bytes(), bytemuck::cast_slice(&want), &format!("{what} user scan"));
}
