//! Nonblocking collectives: [`Comm::immediate_scope`], its [`Scope`] and the
//! [`Request`]s it issues, which borrow their buffers for the scope's lifetime.
//!
//! **The shape.** As `std::thread::scope` and rsmpi's `mpi::request::scope`: the scope
//! takes the communicator by `&mut` (nothing else uses it meanwhile) and a closure, which
//! issues calls with `immediate_*`. Each call is a job in one queue; the jobs run in issue
//! order, one at a time, so every rank's calls match by order as blocking calls do.
//! Whoever holds the communicator runs the next job: the scope's worker thread (the
//! progress engine, where MPI allows it: see [`Progress`]; started the first time a call
//! needs it), or the caller inside [`Request::wait`] when the worker is idle or was never
//! started (no thread switch, and no thread created, on the latency path).
//!
//! **Why it is safe.** A request borrows its buffers for `'scope`, which the closure
//! cannot name beyond its body and cannot shorten: touching a buffer while a call may
//! still read or write it, or letting the buffer die, does not compile. Leaking a request
//! (`mem::forget`) does not cancel its call: it stays in the queue, runs in order, and
//! the scope runs (or joins the worker running) every queued call before it returns, so
//! no peer and no local thread touches a buffer after the scope ends. No `unsafe` here.

use super::Comm;
use crate::error::{Error, Result};
use crate::op::{Builtin, Operator, Reducible, SendOperator};
use crate::pod::Pod;
use crate::sync::wait::{self, WaitPolicy};
use mpi::topology::Rank;
use mpi::Count;
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

/// How the calls of an [`immediate_scope`](Comm::immediate_scope) make progress:
/// [`Info::progress`](crate::Info::progress), set with `ZCOLL_PROGRESS`.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// if let zcoll::Progress::Thread { wake_bytes } = comm.info().progress {
///     println!("calls of {wake_bytes} bytes and more start at once on the worker thread");
/// }
/// # Ok::<(), zcoll::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// A worker thread per scope runs the calls while the caller computes. A call of at
    /// least `wake_bytes` bytes (on this rank) wakes it when issued; a smaller one runs
    /// when the caller tests it (which wakes the worker) or waits for it (the caller runs
    /// it itself if the worker is idle, saving a thread switch). The worker is started
    /// the first time it is woken: a scope whose calls all run in `wait` creates none.
    /// `ZCOLL_PROGRESS=thread` or `thread:<bytes>`. By default 65536 where this process may run on more CPUs than
    /// the node has ranks (the worker can run beside the caller), else `usize::MAX`
    /// (never at issue: a worker that shares the caller's core only adds thread switches).
    /// Chosen on a communicator of one node, whose collectives make no MPI call, and on
    /// any communicator under `MPI_THREAD_MULTIPLE`.
    Thread {
        /// The smallest call that wakes the worker when issued.
        wake_bytes: usize,
    },
    /// No worker: calls run on the caller's thread, in issue order, when it tests or waits
    /// for them (deferred execution: correct, no overlap). `ZCOLL_PROGRESS=wait`, and
    /// always on a communicator of several nodes without `MPI_THREAD_MULTIPLE`.
    Wait,
}

/// The default [`Progress::Thread::wake_bytes`] where the worker has a core of its own:
/// below it a futex wake-up (a microsecond or more) is a large part of the call it would
/// overlap (at 2 ranks here, a 4 KiB broadcast takes about 1 us).
const WAKE_BYTES: usize = 64 << 10;

impl Progress {
    /// `ZCOLL_PROGRESS` as set (`None`: unset), not yet weighed against what MPI allows.
    ///
    /// # Errors
    ///
    /// `Error::Config` for a value other than `thread`, `thread:<bytes>` or `wait`.
    pub(crate) fn from_env() -> Result<Option<Progress>> {
        let Ok(v) = std::env::var("ZCOLL_PROGRESS") else { return Ok(None) };
        match v.trim() {
            "wait" => Ok(Some(Progress::Wait)),
            "thread" => Ok(None),
            other => match other.strip_prefix("thread:").map(str::parse::<usize>) {
                Some(Ok(wake_bytes)) => Ok(Some(Progress::Thread { wake_bytes })),
                _ => Err(Error::Config {
                    name: "ZCOLL_PROGRESS",
                    value: v,
                    expected: "thread, thread:<bytes> or wait",
                }),
            },
        }
    }

    /// What a communicator uses: the one asked for, but never a worker where the worker
    /// would have to call MPI from a thread MPI does not allow; unasked, a worker woken at
    /// issue only where it has a core of its own (`idle_core`).
    pub(crate) fn decide(
        asked: Option<Progress>,
        one_node: bool,
        multiple: bool,
        idle_core: bool,
    ) -> Progress {
        match (asked, one_node || multiple) {
            (Some(Progress::Wait), _) | (_, false) => Progress::Wait,
            (Some(thread), true) => thread,
            (None, true) => Progress::Thread { wake_bytes: if idle_core { WAKE_BYTES } else { usize::MAX } },
        }
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Thread { wake_bytes: usize::MAX } => f.write_str(
                "a worker thread per scope, woken by test (no core of its own: calls run in wait)",
            ),
            Progress::Thread { wake_bytes } => {
                write!(f, "a worker thread per scope (woken at issue from {wake_bytes} bytes)")
            }
            Progress::Wait => f.write_str("in wait and test, on the caller's thread"),
        }
    }
}

thread_local! {
    /// True on a scope's worker thread: there a communicator of one node may run its
    /// collectives (which make no MPI call) although the thread is not the one that built
    /// it. `Comm::route` reads it only when the thread check failed.
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The name of a scope's worker thread (what `/proc/<pid>/task/<tid>/comm` shows and
/// profilers print), so that a worker can be told from the MPI library's own threads.
///
/// # Examples
///
/// ```no_run
/// // How many workers this process runs now (Linux).
/// let workers = std::fs::read_dir("/proc/self/task")?
///     .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
///     .filter(|name| name.trim_end() == zcoll::WORKER_NAME)
///     .count();
/// println!("{workers} zcoll workers");
/// # Ok::<(), std::io::Error>(())
/// ```
pub const WORKER_NAME: &str = "zcoll-worker";

/// Whether this thread is a scope's worker (see [`WORKER`]).
pub(crate) fn on_worker() -> bool {
    WORKER.with(|w| w.get())
}

/// A call of any kind: the blocking collective, with its buffers, run on a communicator.
pub(crate) type Call<'scope> = Box<dyn FnOnce(&mut Comm) -> Result<()> + Send + 'scope>;

/// A queued call.
pub(crate) enum Job<'scope> {
    /// Any call, boxed (a call with counts and displacements, a reduction under a user
    /// operator, a barrier: its closure captures nothing, so its box allocates nothing).
    Boxed(Call<'scope>),
    /// A broadcast of these bytes from this root, the most common small call, queued
    /// with no allocation (`broadcast_into` moves bytes whatever the element type).
    Broadcast(&'scope mut [u8], Rank),
    /// A call over a send and a receive buffer (and a root, a built-in operator where it
    /// takes them), queued with no allocation: its buffers as bytes, and the blocking call
    /// monomorphized for its element type, which views the bytes as elements again.
    Typed(Run, Bytes<'scope>),
    /// A start of a persistent collective: the call its handle holds (shared, not copied).
    Start(Arc<dyn Start + 'scope>),
}

impl Job<'_> {
    fn run(self, comm: &mut Comm) -> Result<()> {
        match self {
            Job::Boxed(call) => call(comm),
            Job::Broadcast(bytes, root) => comm.broadcast_into(bytes, root),
            Job::Typed(run, bytes) => run(comm, bytes),
            Job::Start(held) => held.run(comm),
        }
    }
}

/// What a persistent collective runs at each start ([`Job::Start`]).
pub(crate) trait Start: Send + Sync {
    /// Runs the call over the handle's buffers.
    fn run(&self, comm: &mut Comm) -> Result<()>;
}

/// The buffers and scalars of a [`Job::Typed`], the element type erased (a buffer a side
/// of the call does not have is empty, and its `run` does not look at it).
pub(crate) struct Bytes<'a> {
    send: &'a [u8],
    recv: &'a mut [u8],
    root: Rank,
    op: Builtin,
}

/// The blocking call of a [`Job::Typed`] for one element type.
pub(crate) type Run = for<'a> fn(&mut Comm, Bytes<'a>) -> Result<()>;

/// A buffer's bytes as the elements they were made from (`Bytes` holds only slices of
/// elements of the type its `run` is monomorphized for, so the length and the alignment
/// fit).
fn elems<T: Pod>(b: &[u8]) -> &[T] {
    bytemuck::cast_slice(b)
}

/// [`elems`], mutable.
fn elems_mut<T: Pod>(b: &mut [u8]) -> &mut [T] {
    bytemuck::cast_slice_mut(b)
}

/// `run` unless `T` has no size (a zero-sized element cannot be viewed as bytes and
/// back: such a call keeps its box).
fn sized<T>(run: Run) -> Option<Run> {
    (std::mem::size_of::<T>() != 0).then_some(run)
}

/// A reduction, queued as a [`Job::Typed`] when its operator is a built-in one.
trait Reduction {
    /// The blocking reduction for `T`.
    fn run<T: Reducible>(comm: &mut Comm, b: Bytes<'_>) -> Result<()>;
}

/// [`Comm::all_reduce_into`].
struct AllReduce;
/// [`Comm::reduce_into_root`].
struct ReduceRoot;
/// [`Comm::reduce_into`].
struct ReduceLeaf;

impl Reduction for AllReduce {
    fn run<T: Reducible>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.all_reduce_into(elems::<T>(b.send), elems_mut::<T>(b.recv), b.op)
    }
}

impl Reduction for ReduceRoot {
    fn run<T: Reducible>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.reduce_into_root(elems::<T>(b.send), elems_mut::<T>(b.recv), b.root, b.op)
    }
}

impl Reduction for ReduceLeaf {
    fn run<T: Reducible>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.reduce_into(elems::<T>(b.send), b.root, b.op)
    }
}

/// The reduction `R` over `T` and the built-in operator `op` is, if it is one and `T` is
/// a type the built-in operators apply to (recognized by its `TypeId`: `run` is
/// monomorphized for that very type); else `None`, and the call keeps its box with its
/// operator. An operator whose [`Operator::builtin`] is `Some` computes what that
/// built-in operator computes (its contract), so the call is the same.
fn reduction<T: 'static, R: Reduction>(op: &impl Operator<T>) -> Option<(Run, Builtin)> {
    let op = op.builtin()?;
    let id = std::any::TypeId::of::<T>();
    macro_rules! find {
        ($($t:ty)*) => {$(
            if id == std::any::TypeId::of::<$t>() {
                return Some((R::run::<$t> as Run, op));
            }
        )*};
    }
    find!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize f32 f64);
    None
}

/// The blocking calls of the [`Job::Typed`] jobs that are not reductions.
mod typed {
    use super::{elems, elems_mut, Bytes, Comm, Pod, Result};

    pub(super) fn scatter_root<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.scatter_into_root(elems::<T>(b.send), elems_mut::<T>(b.recv), b.root)
    }
    pub(super) fn scatter<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.scatter_into(elems_mut::<T>(b.recv), b.root)
    }
    pub(super) fn gather_root<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.gather_into_root(elems::<T>(b.send), elems_mut::<T>(b.recv), b.root)
    }
    pub(super) fn gather<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.gather_into(elems::<T>(b.send), b.root)
    }
    pub(super) fn all_gather<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.all_gather_into(elems::<T>(b.send), elems_mut::<T>(b.recv))
    }
    pub(super) fn all_to_all<T: Pod>(comm: &mut Comm, b: Bytes<'_>) -> Result<()> {
        comm.all_to_all_into(elems::<T>(b.send), elems_mut::<T>(b.recv))
    }
}

/// A [`Job::Typed`] over `send` and `recv`.
fn typed_job<'scope, T: Pod>(
    run: Run,
    send: &'scope [T],
    recv: &'scope mut [T],
    root: Rank,
    op: Builtin,
) -> Job<'scope> {
    Job::Typed(
        run,
        Bytes { send: bytemuck::cast_slice(send), recv: bytemuck::cast_slice_mut(recv), root, op },
    )
}

/// A call's place in the scope's order of calls (the `seq`-th issued, from 0). Calls
/// finish in this order, so a call is done once the scope's count of finished calls
/// passes it: a request is its number, with no state of its own to allocate.
pub(crate) type Seq = u64;

/// A mutex's guard, poisoned or not (a call that panicked is reported by the scope, which
/// resumes the panic when it ends).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Queue<'scope> {
    jobs: VecDeque<(Job<'scope>, Seq)>,
    /// Calls issued so far.
    issued: u64,
    /// The scope has ended: the worker leaves once the queue is empty.
    closed: bool,
    /// The worker is asked to run the queue (a large call was issued, or a request
    /// tested): it sleeps on [`Engine::wake`] until then, and leaves small calls to the
    /// caller's `wait` (a worker that took every call would cost a thread switch each).
    kick: bool,
}

/// Starts a scope's worker thread.
type Spawn<'scope> = Box<dyn FnOnce() + Send + 'scope>;

/// A scope's worker thread: started the first time a call needs it (a call of at least
/// `wake_bytes`, or a `test`), so that a scope whose calls all run in `wait` costs no
/// thread creation, and no thread competes for the caller's core while it computes.
enum Worker<'scope> {
    /// Not yet needed.
    Unstarted(Spawn<'scope>),
    /// Started: it runs what is left when the scope ends.
    Running,
    /// None ([`Progress::Wait`], or the scope ended before one was needed): what is left
    /// runs on the caller's thread.
    Absent,
}

/// The state a scope shares with its worker and its requests.
pub(crate) struct Engine<'scope> {
    comm: Mutex<&'scope mut Comm>,
    queue: Mutex<Queue<'scope>>,
    wake: Condvar,
    /// The policy of the caller's waits on the worker: the communicator's, without a time
    /// limit (the call itself has one) and yielding (the worker shares the caller's core).
    policy: WaitPolicy,
    progress: Progress,
    /// The communicator's rank and size, read without waiting for the worker.
    rank: Rank,
    size: Rank,
    /// A call's panic, resumed on the caller's thread when the scope ends (shared with
    /// the scope, which reads it after the worker has left).
    panic: Arc<Mutex<Option<Panic>>>,
    worker: Mutex<Worker<'scope>>,
    /// Calls finished so far: call `seq` is done once this passes `seq` (calls finish in
    /// issue order, one at a time).
    finished: AtomicU64,
    /// Whether a call failed: only then is [`errors`](Engine::errors) looked at.
    failed: AtomicBool,
    /// The errors of the calls that failed, until their requests are waited for (a
    /// dropped request's stays until the scope ends).
    errors: Mutex<Vec<(Seq, Error)>>,
}

/// A panic's payload.
type Panic = Box<dyn std::any::Any + Send>;

/// What a request needs of its engine (a trait object, so that [`Request`] is covariant
/// in its lifetime and a persistent handle's request can borrow the handle).
pub(crate) trait Progressing {
    /// Returns once call `seq` is done.
    fn complete(&self, seq: Seq);
    /// Makes call `seq` progress without waiting for it.
    fn poke(&self, seq: Seq);
    /// Whether call `seq` is done.
    fn done(&self, seq: Seq) -> bool;
    /// The result of call `seq`, which is done; `take`: the last time it is asked for.
    fn outcome(&self, seq: Seq, take: bool) -> Result<()>;
}

impl<'scope> Engine<'scope> {
    fn new(
        comm: &'scope mut Comm,
        spawn: Option<Spawn<'scope>>,
        panic: Arc<Mutex<Option<Panic>>>,
    ) -> Engine<'scope> {
        let mut policy = *comm.node.ctl.policy();
        policy.timeout = None;
        policy.report_after = None;
        policy.spin = false;
        let (progress, rank, size) = (comm.info.progress, comm.rank(), comm.size());
        Engine {
            comm: Mutex::new(comm),
            queue: Mutex::new(Queue { jobs: VecDeque::new(), issued: 0, closed: false, kick: false }),
            wake: Condvar::new(),
            policy,
            progress,
            rank,
            size,
            panic,
            worker: Mutex::new(spawn.map_or(Worker::Absent, Worker::Unstarted)),
            finished: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// Starts the worker if it is not running yet (and the scope has not ended).
    fn start(&self) {
        let mut worker = lock(&self.worker);
        if let Worker::Unstarted(_) = *worker {
            if let Worker::Unstarted(spawn) = std::mem::replace(&mut *worker, Worker::Running) {
                spawn();
            }
        }
    }

    /// Queues a call of `bytes` bytes; wakes the worker if it is large enough.
    pub(crate) fn push(&self, job: Job<'scope>, bytes: usize) -> Seq {
        let mut q = lock(&self.queue);
        let seq = q.issued;
        q.issued += 1;
        q.jobs.push_back((job, seq));
        if let Progress::Thread { wake_bytes } = self.progress {
            if bytes >= wake_bytes && !q.kick {
                q.kick = true;
                self.wake.notify_one();
                drop(q);
                self.start();
            }
        }
        seq
    }

    /// Runs queued calls in order on `comm` until `until` is done (all of them if `None`).
    fn drain(&self, comm: &mut Comm, until: Option<Seq>) {
        loop {
            if until.is_some_and(|seq| self.done(seq)) {
                return;
            }
            let Some((job, seq)) = lock(&self.queue).jobs.pop_front() else { return };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(&mut *comm)));
            let r = r.unwrap_or_else(|payload| {
                lock(&self.panic).get_or_insert(payload);
                Err(Error::Unsupported { rank: comm.rank(), what: "a call that panicked".into() })
            });
            if let Err(e) = r {
                lock(&self.errors).push((seq, e));
                self.failed.store(true, Ordering::Relaxed);
            }
            // Calls run one at a time (whoever runs them holds the communicator), in order.
            debug_assert_eq!(self.finished.load(Ordering::Relaxed), seq);
            // Release: who sees the call done sees its buffers written and its error.
            self.finished.store(seq + 1, Ordering::Release);
        }
    }

    /// The worker thread's loop: sleep until asked, run every queued call; at the end of
    /// the scope, run what is left and leave.
    fn work(&self) {
        WORKER.with(|w| w.set(true));
        loop {
            let closed = {
                let mut q = lock(&self.queue);
                while !q.kick && !q.closed {
                    q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
                q.kick = false;
                q.closed
            };
            let mut comm = lock(&self.comm);
            self.drain(&mut comm, None);
            if closed {
                return;
            }
        }
    }

    /// Runs every queued call, then `f` on the communicator, on this thread.
    fn exclusive<R>(&self, f: impl FnOnce(&Comm) -> R) -> R {
        let mut comm = self.acquire();
        self.drain(&mut comm, None);
        f(&comm)
    }

    /// The communicator, once the worker has let it go (a wait under the wait policy).
    fn acquire(&self) -> MutexGuard<'_, &'scope mut Comm> {
        let mut guard = None;
        let _ = wait::wait_until_any(&self.policy, &[], || {
            guard = self.try_comm();
            guard.is_some()
        });
        guard.unwrap_or_else(|| lock(&self.comm))
    }

    /// The communicator if nobody runs calls on it.
    fn try_comm(&self) -> Option<MutexGuard<'_, &'scope mut Comm>> {
        match self.comm.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Ends the scope: the worker (if it was started; none starts after this) runs what
    /// is left and leaves. Returns whether it was started.
    fn close(&self) -> bool {
        let running = {
            let mut worker = lock(&self.worker);
            if !matches!(*worker, Worker::Running) {
                *worker = Worker::Absent;
            }
            matches!(*worker, Worker::Running)
        };
        lock(&self.queue).closed = true;
        self.wake.notify_all();
        running
    }
}

impl Progressing for Engine<'_> {
    /// Returns once call `seq` is done: runs the queue up to it on this thread if the
    /// communicator is free, else waits (under the wait policy) for the worker.
    fn complete(&self, seq: Seq) {
        while !self.done(seq) {
            match self.try_comm() {
                Some(mut comm) => self.drain(&mut comm, Some(seq)),
                None => {
                    let _ = wait::wait_until_any(&self.policy, &[], || {
                        self.done(seq)
                            || !matches!(self.comm.try_lock(), Err(std::sync::TryLockError::WouldBlock))
                    });
                }
            }
        }
    }

    /// Makes sure call `seq` progresses: wakes the worker, or (with no worker) runs it.
    fn poke(&self, seq: Seq) {
        match self.progress {
            Progress::Wait => self.complete(seq),
            Progress::Thread { .. } => {
                let mut q = lock(&self.queue);
                if !q.kick && !q.jobs.is_empty() {
                    q.kick = true;
                    self.wake.notify_one();
                    drop(q);
                    self.start();
                }
            }
        }
    }

    #[inline]
    fn done(&self, seq: Seq) -> bool {
        self.finished.load(Ordering::Acquire) > seq
    }

    fn outcome(&self, seq: Seq, take: bool) -> Result<()> {
        if !self.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut errors = lock(&self.errors);
        match errors.iter().position(|(s, _)| *s == seq) {
            Some(i) if take => Err(errors.swap_remove(i).1),
            Some(i) => Err(errors[i].1.clone()),
            None => Ok(()),
        }
    }
}

/// Ends the scope however its closure leaves (a panic too): the worker runs what is left
/// and leaves, so `std::thread::scope` can join it; with no worker started, what is left
/// runs here.
struct CloseOnDrop<'a, 'scope>(&'a Engine<'scope>);

impl Drop for CloseOnDrop<'_, '_> {
    fn drop(&mut self) {
        if !self.0.close() {
            self.0.exclusive(|_| ());
        }
    }
}

impl Comm {
    /// Runs `f` with a [`Scope`] in which collectives are issued without waiting
    /// (`immediate_*`), as rsmpi's `mpi::request::scope` does for rsmpi's: each returns a
    /// [`Request`] that borrows its buffers until the scope ends, and is completed with
    /// [`Request::wait`], [`Request::test`], [`wait_all`] or [`wait_any`].
    ///
    /// Calls run one at a time in issue order (every rank must issue the same collectives
    /// in the same order, as with blocking calls), on the scope's worker thread while `f`
    /// computes, or on the caller's thread when it waits (see [`Progress`] and
    /// [`Info::progress`](crate::Info::progress)). [`Scope::blocking`] runs a blocking
    /// call (or anything else on the communicator) in the same order. When `f` returns,
    /// every call still queued runs (a dropped or leaked request's call too) before
    /// `immediate_scope` returns.
    ///
    /// The correspondence with rsmpi: `mpi::request::scope(|s| ...)` is
    /// `comm.immediate_scope(|s| ...)`, and `comm.immediate_all_reduce_into(s, &a, &mut b,
    /// op)` is `s.immediate_all_reduce_into(&a, &mut b, op)` (the scope knows its
    /// communicator). Unlike rsmpi, a request dropped unfinished is not a panic: its call
    /// completes at the end of the scope, and its result is dropped.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zcoll::{op::Builtin, ZeroCopy};
    ///
    /// let universe = mpi::initialize().unwrap();
    /// let mut comm = universe.world().zero_copy()?;
    /// let size = comm.size() as u64;
    /// let (mine, mut sum) = ([1u64; 1024], [0u64; 1024]);
    /// let local = comm.immediate_scope(|s| {
    ///     let sum_req = s.immediate_all_reduce_into(&mine, &mut sum, Builtin::Sum);
    ///     let local: u64 = (0..1000u64).sum(); // computed while the allreduce runs
    ///     sum_req.wait().map(|()| local)
    /// })?;
    /// assert_eq!((local, sum[0]), (499_500, size));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// The buffers are borrowed until the scope ends, so this does not compile:
    ///
    /// ```compile_fail
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut buf = vec![0u8; 64];
    /// comm.immediate_scope(|s| {
    ///     let req = s.immediate_broadcast_into(&mut buf, 0);
    ///     buf[0] = 1; // a peer may be reading `buf`
    ///     req.wait()
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If `f` panics, after every queued call has run (as the panic unwinds); if a call's reduction operator
    /// panicked, when the scope ends (that call's request reports `Unsupported`).
    pub fn immediate_scope<'env, F, R>(&mut self, f: F) -> R
    where
        F: for<'scope> FnOnce(&Scope<'scope, 'env>) -> R,
    {
        let worker = matches!(self.info.progress, Progress::Thread { .. });
        let panic = Arc::new(Mutex::new(None));
        let out = std::thread::scope(|threads| {
            // The worker starts when a call first needs it (`Engine::start`); it holds the
            // engine, which holds the means to start it only weakly.
            let engine = Arc::new_cyclic(|weak: &Weak<Engine<'_>>| {
                let weak = weak.clone();
                let spawn = worker.then(|| -> Spawn<'_> {
                    Box::new(move || {
                        if let Some(e) = weak.upgrade() {
                            std::thread::Builder::new()
                                .name(WORKER_NAME.into())
                                .spawn_scoped(threads, move || e.work())
                                .expect("a scope's worker thread");
                        }
                    })
                });
                Engine::new(self, spawn, panic.clone())
            });
            let scope = Scope { engine: engine.clone(), _scope: PhantomData, _env: PhantomData };
            let _close = CloseOnDrop(&engine);
            f(&scope)
        });
        if let Some(payload) = lock(&panic).take() {
            std::panic::resume_unwind(payload);
        }
        out
    }
}

/// The handle of an [`immediate_scope`](Comm::immediate_scope): issues nonblocking
/// collectives whose requests and buffers live as long as `'scope`.
///
/// `'scope` is the scope's lifetime (the buffers of its calls must outlive it) and
/// `'env` that of what the scope may borrow, as in `std::thread::Scope`.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// let (mut a, mut b) = (vec![0u32; 8], vec![0u32; 8]);
/// comm.immediate_scope(|s| {
///     let first = s.immediate_broadcast_into(&mut a, 0);
///     let second = s.immediate_broadcast_into(&mut b, 1 % s.size());
///     zcoll::wait_all(vec![first, second])
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    engine: Arc<Engine<'scope>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope> Scope<'scope, '_> {
    /// Queues `job` (`bytes` bytes on this rank) and returns its request.
    pub(crate) fn issue(&self, bytes: usize, job: Job<'scope>) -> Request<'scope> {
        let seq = self.engine.push(job, bytes);
        Request { seq, engine: self.engine.clone() }
    }

    /// The engine, for persistent handles.
    pub(crate) fn engine(&self) -> &Arc<Engine<'scope>> {
        &self.engine
    }

    /// Runs `f` on the communicator on this thread, after every call issued before it
    /// (so it takes its place in the order of calls): a blocking collective among
    /// nonblocking ones, or anything else a `&Comm` offers.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut a, mut b) = (vec![0u8; 100], vec![0u8; 100]);
    /// comm.immediate_scope(|s| {
    ///     let req = s.immediate_broadcast_into(&mut a, 0);
    ///     s.blocking(|comm| comm.broadcast_into(&mut b, 0))?; // after `req`'s call
    ///     req.wait()
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// None of its own: `f`'s result is returned.
    pub fn blocking<R>(&self, f: impl FnOnce(&Comm) -> R) -> R {
        self.engine.exclusive(f)
    }

    /// The communicator's number of ranks.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let p = comm.size();
    /// comm.immediate_scope(|s| assert_eq!(s.size(), p));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn size(&self) -> Rank {
        self.engine.size
    }

    /// This rank in the communicator.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let me = comm.rank();
    /// comm.immediate_scope(|s| assert_eq!(s.rank(), me));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn rank(&self) -> Rank {
        self.engine.rank
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("progress", &self.engine.progress).finish_non_exhaustive()
    }
}

/// A nonblocking collective issued in a [`Scope`]: complete it with [`wait`](Request::wait)
/// or [`test`](Request::test). Its buffers stay borrowed until the scope ends.
///
/// Dropping (or leaking) a request does not cancel its call: every rank issued it, so it
/// runs in its turn, and the scope completes it before it returns.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// comm.immediate_scope(|s| {
///     let req = s.immediate_barrier();
///     while req.test().is_none() {
///         // compute
///     }
///     Ok::<(), zcoll::Error>(())
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
#[must_use = "a request's call runs anyway; wait for it to see its result"]
pub struct Request<'a> {
    /// The call's place in its scope's order.
    seq: Seq,
    engine: Arc<dyn Progressing + 'a>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(seq: Seq, engine: Arc<dyn Progressing + 'a>) -> Request<'a> {
        Request { seq, engine }
    }

    /// Waits until the call is done and returns its result: the blocking call's, the same
    /// on every rank. If the worker is idle, the call (and those issued before it) runs on
    /// this thread.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut x = [comm.rank()];
    /// comm.immediate_scope(|s| s.immediate_broadcast_into(&mut x, 0).wait())?;
    /// assert_eq!(x, [0]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Those of the blocking collective (see each `immediate_*`).
    pub fn wait(self) -> Result<()> {
        self.engine.complete(self.seq);
        self.engine.outcome(self.seq, true)
    }

    /// The call's result if it is done, else `None` (and the call is made to progress: the
    /// worker is woken). Under [`Progress::Wait`] there is no worker: `test` runs the call
    /// and those before it on this thread, so it returns `Some` (after as long as the call
    /// takes).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut x = vec![0.0f64; 1 << 20];
    /// let mut iterations = 0;
    /// comm.immediate_scope(|s| {
    ///     let req = s.immediate_broadcast_into(&mut x, 0);
    ///     loop {
    ///         match req.test() {
    ///             Some(result) => break result,
    ///             None => iterations += 1, // compute a little
    ///         }
    ///     }
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Some(Err(_))`: those of the blocking collective.
    pub fn test(&self) -> Option<Result<()>> {
        if !self.engine.done(self.seq) {
            self.engine.poke(self.seq);
        }
        self.engine.done(self.seq).then(|| self.engine.outcome(self.seq, false))
    }

    /// Whether the call is done (no progress is made: see [`test`](Request::test)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// comm.immediate_scope(|s| {
    ///     let req = s.immediate_barrier();
    ///     let _maybe = req.is_done();
    ///     req.wait()
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn is_done(&self) -> bool {
        self.engine.done(self.seq)
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.engine.done(self.seq) { "done" } else { "pending" };
        f.debug_struct("Request").field("state", &state).finish()
    }
}

/// Waits for every request, and returns the first error in the order given (every call
/// is waited for even after one failed).
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// let mut bufs = vec![vec![0u16; 10]; 4];
/// comm.immediate_scope(|s| {
///     let reqs: Vec<_> = bufs.iter_mut().map(|b| s.immediate_broadcast_into(b, 0)).collect();
///     zcoll::wait_all(reqs)
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
///
/// # Errors
///
/// The first request's error, as [`Request::wait`] gives it.
pub fn wait_all<'a>(requests: impl IntoIterator<Item = Request<'a>>) -> Result<()> {
    let mut first = Ok(());
    for r in requests {
        let r = r.wait();
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Waits until one of `requests` is done, removes it and returns its index (in
/// `requests` as it was) and result; `None` if `requests` is empty. As rsmpi's
/// `mpi::request::wait_any`.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// let mut bufs = vec![vec![0u16; 10]; 4];
/// comm.immediate_scope(|s| {
///     let mut reqs: Vec<_> = bufs.iter_mut().map(|b| s.immediate_broadcast_into(b, 0)).collect();
///     while let Some((_index, result)) = zcoll::wait_any(&mut reqs) {
///         result?;
///     }
///     Ok::<(), zcoll::Error>(())
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
///
/// # Errors
///
/// `Some((i, Err(_)))`: request `i`'s error.
pub fn wait_any(requests: &mut Vec<Request<'_>>) -> Option<(usize, Result<()>)> {
    // Calls finish in issue order: a call already done is taken at once; else the first
    // issued of those given finishes first, and is waited for.
    let i = match requests.iter().position(Request::is_done) {
        Some(i) => i,
        None => (0..requests.len()).min_by_key(|&i| requests[i].seq)?,
    };
    let r = requests.remove(i);
    Some((i, r.wait()))
}

/// Generates the `immediate_*` methods: each queues the blocking collective of the same
/// name with the same arguments, its buffers borrowed for `'scope`.
macro_rules! immediate {
    ($s:lifetime; $(
        $(#[$doc:meta])*
        $name:ident [$($g:tt)*] ($($arg:ident: $ty:ty),*) => $blocking:ident, bytes($bytes:expr),
        $(convert($conv:ident),)?
        $(job($pat:pat = $scrut:expr => $job:expr),)?
        example($($ex:literal)*);
    )*) => {
        impl<$s> Scope<$s, '_> {
            $(
                #[doc = concat!("[`Comm::", stringify!($blocking), "`] without waiting: its request.")]
                ///
                $(#[$doc])*
                ///
                /// # Examples
                ///
                /// ```no_run
                /// # use zcoll::{op::Builtin, ZeroCopy};
                /// # let universe = mpi::initialize().unwrap();
                /// # let mut comm = universe.world().zero_copy()?;
                /// # let (me, p) = (comm.rank(), comm.size() as usize);
                $(#[doc = $ex])*
                /// # Ok::<(), zcoll::Error>(())
                /// ```
                ///
                /// # Errors
                ///
                #[doc = concat!("From [`Request::wait`] or [`Request::test`]: those of [`Comm::", stringify!($blocking), "`], on every rank.")]
                pub fn $name<$($g)*>(&self, $($arg: $ty),*) -> Request<$s> {
                    let bytes: usize = $bytes;
                    $(let $conv = $conv.into_send();)?
                    let job = immediate!(@job $($pat = $scrut => $job)?;
                        Job::Boxed(Box::new(move |comm: &mut Comm| comm.$blocking($($arg),*))));
                    self.issue(bytes, job)
                }
            )*
        }
    };
    (@job $pat:pat = $scrut:expr => $job:expr; $boxed:expr) => {
        match $scrut {
            $pat => $job,
            #[allow(unreachable_patterns)]
            _ => $boxed,
        }
    };
    (@job ; $boxed:expr) => { $boxed };
}

immediate! {
    'scope;

    /// MPI 4.1, 6.12.2 (`MPI_Ibarrier`).
    immediate_barrier[]() => barrier, bytes(0),
    example("comm.immediate_scope(|s| s.immediate_barrier().wait())?;");

    /// MPI 4.1, 6.12.3 (`MPI_Ibcast`).
    immediate_broadcast_into[T: Pod + Send](buf: &'scope mut [T], root: Rank) => broadcast_into,
    bytes(std::mem::size_of_val(buf)),
    job(true = std::mem::size_of::<T>() != 0 => Job::Broadcast(bytemuck::cast_slice_mut(buf), root)),
    example("let mut buf = vec![me; 16];"
            "comm.immediate_scope(|s| s.immediate_broadcast_into(&mut buf, 0).wait())?;"
            "assert_eq!(buf, vec![0; 16]);");

    /// MPI 4.1, 6.12.5 (`MPI_Iscatter`), the root's side.
    immediate_scatter_into_root[T: Pod + Send + Sync](send: &'scope [T], recv: &'scope mut [T], root: Rank)
        => scatter_into_root, bytes(std::mem::size_of_val(send)),
    job(Some(run) = sized::<T>(typed::scatter_root::<T>) => typed_job(run, send, recv, root, Builtin::Sum)),
    example("let send: Vec<i32> = (0..p as i32).collect();"
            "let mut mine = [0i32];"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_scatter_into_root(&send, &mut mine, 0).wait(),"
            "    _ => s.immediate_scatter_into(&mut mine, 0).wait(),"
            "})?;"
            "assert_eq!(mine, [me]);");

    /// MPI 4.1, 6.12.5 (`MPI_Iscatter`), a non-root's side.
    immediate_scatter_into[T: Pod + Send](recv: &'scope mut [T], root: Rank) => scatter_into,
    bytes(std::mem::size_of_val(recv)),
    job(Some(run) = sized::<T>(typed::scatter::<T>) => typed_job(run, &[], recv, root, Builtin::Sum)),
    example("let mut mine = [0i32];"
            "if me != 0 {"
            "    comm.immediate_scope(|s| s.immediate_scatter_into(&mut mine, 0).wait())?;"
            "}");

    /// MPI 4.1, 6.12.4 (`MPI_Igather`), the root's side.
    immediate_gather_into_root[T: Pod + Send + Sync](send: &'scope [T], recv: &'scope mut [T], root: Rank)
        => gather_into_root, bytes(std::mem::size_of_val(recv)),
    job(Some(run) = sized::<T>(typed::gather_root::<T>) => typed_job(run, send, recv, root, Builtin::Sum)),
    example("let mut all = vec![0i32; p];"
            "let mine = [me];"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_gather_into_root(&mine, &mut all, 0).wait(),"
            "    _ => s.immediate_gather_into(&mine, 0).wait(),"
            "})?;");

    /// MPI 4.1, 6.12.4 (`MPI_Igather`), a non-root's side.
    immediate_gather_into[T: Pod + Sync](send: &'scope [T], root: Rank) => gather_into,
    bytes(std::mem::size_of_val(send)),
    job(Some(run) = sized::<T>(typed::gather::<T>) => typed_job(run, send, &mut [], root, Builtin::Sum)),
    example("if me != 0 {"
            "    let mine = [me];"
            "    comm.immediate_scope(|s| s.immediate_gather_into(&mine, 0).wait())?;"
            "}");

    /// MPI 4.1, 6.12.6 (`MPI_Iallgather`).
    immediate_all_gather_into[T: Pod + Send + Sync](send: &'scope [T], recv: &'scope mut [T]) => all_gather_into,
    bytes(std::mem::size_of_val(recv)),
    job(Some(run) = sized::<T>(typed::all_gather::<T>) => typed_job(run, send, recv, 0, Builtin::Sum)),
    example("let mut all = vec![0i32; p];"
            "let mine = [me];"
            "comm.immediate_scope(|s| s.immediate_all_gather_into(&mine, &mut all).wait())?;"
            "assert_eq!(all, (0..p as i32).collect::<Vec<_>>());");

    /// MPI 4.1, 6.12.7 (`MPI_Ialltoall`).
    immediate_all_to_all_into[T: Pod + Send + Sync](send: &'scope [T], recv: &'scope mut [T]) => all_to_all_into,
    bytes(std::mem::size_of_val(recv)),
    job(Some(run) = sized::<T>(typed::all_to_all::<T>) => typed_job(run, send, recv, 0, Builtin::Sum)),
    example("let send = vec![me; p];"
            "let mut recv = vec![0i32; p];"
            "comm.immediate_scope(|s| s.immediate_all_to_all_into(&send, &mut recv).wait())?;"
            "assert_eq!(recv, (0..p as i32).collect::<Vec<_>>());");

    /// MPI 4.1, 6.12.9 (`MPI_Ireduce`), the root's side.
    immediate_reduce_into_root[T: Pod + Send + Sync, O: SendOperator<T, Op: 'scope>](
        send: &'scope [T], recv: &'scope mut [T], root: Rank, op: O) => reduce_into_root,
    bytes(std::mem::size_of_val(send)), convert(op),
    job(Some((run, op)) = reduction::<T, ReduceRoot>(&op) => typed_job(run, send, recv, root, op)),
    example("let mut sum = [0i32];"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_reduce_into_root(&[1], &mut sum, 0, Builtin::Sum).wait(),"
            "    _ => s.immediate_reduce_into(&[1], 0, Builtin::Sum).wait(),"
            "})?;"
            "// rsmpi's operator, as an rsmpi program passes it:"
            "let op = mpi::collective::SystemOperation::product();"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_reduce_into_root(&[2], &mut sum, 0, &op).wait(),"
            "    _ => s.immediate_reduce_into(&[2], 0, &op).wait(),"
            "})?;");

    /// MPI 4.1, 6.12.9 (`MPI_Ireduce`), a non-root's side.
    immediate_reduce_into[T: Pod + Sync, O: SendOperator<T, Op: 'scope>](send: &'scope [T], root: Rank, op: O)
        => reduce_into, bytes(std::mem::size_of_val(send)), convert(op),
    job(Some((run, op)) = reduction::<T, ReduceLeaf>(&op) => typed_job(run, send, &mut [], root, op)),
    example("if me != 0 {"
            "    comm.immediate_scope(|s| s.immediate_reduce_into(&[1i32], 0, Builtin::Sum).wait())?;"
            "}");

    /// MPI 4.1, 6.12.10 (`MPI_Iallreduce`).
    immediate_all_reduce_into[T: Pod + Send + Sync, O: SendOperator<T, Op: 'scope>](
        send: &'scope [T], recv: &'scope mut [T], op: O) => all_reduce_into,
    bytes(std::mem::size_of_val(send)), convert(op),
    job(Some((run, op)) = reduction::<T, AllReduce>(&op) => typed_job(run, send, recv, 0, op)),
    example("let (mut sum, mut sum_f) = ([0i32], [0.0f64]);"
            "comm.immediate_scope(|s| s.immediate_all_reduce_into(&[1], &mut sum, Builtin::Sum).wait())?;"
            "assert_eq!(sum, [p as i32]);"
            "// rsmpi's operators, as an rsmpi program passes them, by value or lent:"
            "use mpi::collective::SystemOperation;"
            "let (max, mine, mut top) = (SystemOperation::max(), [me as f64], [0.0f64]);"
            "comm.immediate_scope(|s| {"
            "    let a = s.immediate_all_reduce_into(&[1.5], &mut sum_f, SystemOperation::sum());"
            "    let b = s.immediate_all_reduce_into(&mine, &mut top, &max);"
            "    zcoll::wait_all([a, b])"
            "})?;"
            "assert_eq!((sum_f, top), ([1.5 * p as f64], [(p - 1) as f64]));");

    /// MPI 4.1, 6.12.5 (`MPI_Iscatterv`), the root's side.
    immediate_scatter_varcount_into_root[T: Pod + Send + Sync](
        send: &'scope [T], counts: &'scope [Count], displs: &'scope [Count], recv: &'scope mut [T], root: Rank)
        => scatter_varcount_into_root, bytes(std::mem::size_of_val(send)),
    example("let counts: Vec<i32> = (0..p as i32).map(|r| r + 1).collect();"
            "let displs: Vec<i32> = (0..p as i32).map(|r| r * (r + 1) / 2).collect();"
            "let send = vec![7u8; counts.iter().sum::<i32>() as usize];"
            "let mut mine = vec![0u8; me as usize + 1];"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_scatter_varcount_into_root(&send, &counts, &displs, &mut mine, 0).wait(),"
            "    _ => s.immediate_scatter_varcount_into(&mut mine, 0).wait(),"
            "})?;"
            "assert!(mine.iter().all(|&x| x == 7));");

    /// MPI 4.1, 6.12.5 (`MPI_Iscatterv`), a non-root's side.
    immediate_scatter_varcount_into[T: Pod + Send](recv: &'scope mut [T], root: Rank) => scatter_varcount_into,
    bytes(std::mem::size_of_val(recv)),
    example("let mut mine = vec![0u8; me as usize + 1];"
            "if me != 0 {"
            "    comm.immediate_scope(|s| s.immediate_scatter_varcount_into(&mut mine, 0).wait())?;"
            "}");

    /// MPI 4.1, 6.12.4 (`MPI_Igatherv`), the root's side.
    immediate_gather_varcount_into_root[T: Pod + Send + Sync](
        send: &'scope [T], recv: &'scope mut [T], counts: &'scope [Count], displs: &'scope [Count], root: Rank)
        => gather_varcount_into_root, bytes(std::mem::size_of_val(recv)),
    example("let counts: Vec<i32> = (0..p as i32).map(|r| r + 1).collect();"
            "let displs: Vec<i32> = (0..p as i32).map(|r| r * (r + 1) / 2).collect();"
            "let mine = vec![me as u8; me as usize + 1];"
            "let mut all = vec![0u8; counts.iter().sum::<i32>() as usize];"
            "comm.immediate_scope(|s| match me {"
            "    0 => s.immediate_gather_varcount_into_root(&mine, &mut all, &counts, &displs, 0).wait(),"
            "    _ => s.immediate_gather_varcount_into(&mine, 0).wait(),"
            "})?;");

    /// MPI 4.1, 6.12.4 (`MPI_Igatherv`), a non-root's side.
    immediate_gather_varcount_into[T: Pod + Sync](send: &'scope [T], root: Rank) => gather_varcount_into,
    bytes(std::mem::size_of_val(send)),
    example("let mine = vec![me as u8; me as usize + 1];"
            "if me != 0 {"
            "    comm.immediate_scope(|s| s.immediate_gather_varcount_into(&mine, 0).wait())?;"
            "}");

    /// MPI 4.1, 6.12.6 (`MPI_Iallgatherv`).
    immediate_all_gather_varcount_into[T: Pod + Send + Sync](
        send: &'scope [T], recv: &'scope mut [T], counts: &'scope [Count], displs: &'scope [Count])
        => all_gather_varcount_into, bytes(std::mem::size_of_val(recv)),
    example("let counts: Vec<i32> = (0..p as i32).map(|r| r + 1).collect();"
            "let displs: Vec<i32> = (0..p as i32).map(|r| r * (r + 1) / 2).collect();"
            "let mine = vec![me as u8; me as usize + 1];"
            "let mut all = vec![0u8; counts.iter().sum::<i32>() as usize];"
            "comm.immediate_scope(|s| s.immediate_all_gather_varcount_into(&mine, &mut all, &counts, &displs).wait())?;");

    /// MPI 4.1, 6.12.7 (`MPI_Ialltoallv`).
    immediate_all_to_all_varcount_into[T: Pod + Send + Sync](
        send: &'scope [T], send_counts: &'scope [Count], send_displs: &'scope [Count],
        recv: &'scope mut [T], recv_counts: &'scope [Count], recv_displs: &'scope [Count])
        => all_to_all_varcount_into, bytes(std::mem::size_of_val(recv)),
    example("let ones = vec![1i32; p];"
            "let displs: Vec<i32> = (0..p as i32).collect();"
            "let send = vec![me; p];"
            "let mut recv = vec![0i32; p];"
            "comm.immediate_scope(|s| {"
            "    s.immediate_all_to_all_varcount_into(&send, &ones, &displs, &mut recv, &ones, &displs).wait()"
            "})?;"
            "assert_eq!(recv, (0..p as i32).collect::<Vec<_>>());");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_only_where_mpi_allows_it() {
        let thread = Progress::Thread { wake_bytes: WAKE_BYTES };
        let shared = Progress::Thread { wake_bytes: usize::MAX };
        let custom = Progress::Thread { wake_bytes: 7 };
        // (asked, one node, MPI_THREAD_MULTIPLE, an idle core) -> chosen
        let cases = [
            (None, true, false, true, thread),
            (None, true, false, false, shared),
            (None, false, true, true, thread),
            (None, false, false, true, Progress::Wait),
            (Some(custom), true, false, false, custom),
            (Some(custom), false, false, true, Progress::Wait),
            (Some(Progress::Wait), true, true, true, Progress::Wait),
        ];
        for (asked, one_node, multiple, idle, want) in cases {
            let got = Progress::decide(asked, one_node, multiple, idle);
            assert_eq!(got, want, "{asked:?} {one_node} {multiple} {idle}");
        }
    }

    #[test]
    fn reductions_under_builtin_operators_are_queued_as_bytes() {
        fn found<T: Reducible>() -> bool {
            reduction::<T, AllReduce>(&Builtin::Sum).is_some_and(|(_, op)| op == Builtin::Sum)
        }
        // Every type the built-in operators apply to (`op.rs`'s `integers!` and `floats!`).
        assert!(found::<i8>() && found::<i16>() && found::<i32>() && found::<i64>() && found::<isize>());
        assert!(found::<u8>() && found::<u16>() && found::<u32>() && found::<u64>() && found::<usize>());
        assert!(found::<f32>() && found::<f64>());
        let max = mpi::collective::SystemOperation::max();
        assert_eq!(reduction::<f64, ReduceRoot>(&max).map(|(_, op)| op), Some(Builtin::Max));
        assert_eq!(reduction::<u8, ReduceLeaf>(&&Builtin::BitXor).map(|(_, op)| op), Some(Builtin::BitXor));
        // A user operator keeps its box.
        let user = crate::op::UserOp::commutative(|_: &mut [u64], _: &[u64]| {});
        assert!(reduction::<u64, AllReduce>(&user).is_none());
        assert!(sized::<u8>(typed::all_gather::<u8>).is_some());
        assert!(sized::<()>(typed::all_gather::<u8>).is_none());
    }

    #[test]
    fn wait_any_of_nothing_is_none() {
        assert!(wait_any(&mut Vec::new()).is_none());
        assert!(wait_all(Vec::new()).is_ok());
    }
}
