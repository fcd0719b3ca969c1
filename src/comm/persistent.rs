//! Persistent collectives, as MPI 4 has them (`MPI_Bcast_init` and its kin): a
//! [`Persistent`] handle made once in a [`Scope`], started and completed many times.
//!
//! The handle owns its buffers' borrows (for `'scope`) and hands them to each start's call
//! through a mutex the call holds while it runs; [`Persistent::start`] borrows the handle
//! until its request is done, so [`Persistent::with_buffers`] cannot be called meanwhile
//! (a compile error), and a leaked start's request only makes the next `start` or
//! `with_buffers` wait for that call (it runs in its turn anyway).
//!
//! The send buffers are taken by `&mut` too: as in MPI, a program changes what it sends
//! between starts, through [`Persistent::with_buffers`].
//!
//! Each start issues the blocking collective again: zcoll's calls exchange no addresses
//! beforehand on their small paths, and publish them in the round's call record on the
//! others, so a start costs what a blocking call costs, plus the queueing.

use super::immediate::{Engine, Job, Request, Scope, Seq, Start};
use super::Comm;
use crate::error::Result;
use crate::op::SendOperator;
use crate::pod::Pod;
use mpi::topology::Rank;
use mpi::Count;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The blocking call a persistent collective runs over its buffers `B`.
type Call<'scope, B> = Box<dyn FnMut(&mut Comm, &mut B) -> Result<()> + Send + 'scope>;

/// The buffers of a persistent collective and the call that runs over them.
struct Held<'scope, B> {
    bufs: B,
    call: Call<'scope, B>,
}

impl<B: Send> Start for Mutex<Held<'_, B>> {
    fn run(&self, comm: &mut Comm) -> Result<()> {
        let mut held = self.lock().unwrap_or_else(PoisonError::into_inner);
        let Held { bufs, call } = &mut *held;
        call(comm, bufs)
    }
}

/// A persistent collective (MPI 4's `MPI_*_init`), made by a [`Scope`]'s `*_init`
/// methods: [`start`](Persistent::start) it as often as needed; each start is a
/// [`Request`]. `B` is its buffers (one slice, or the send and receive slices).
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// let mut buf = vec![0u64; 1024];
/// comm.immediate_scope(|s| {
///     let mut bcast = s.broadcast_init(&mut buf, 0);
///     for step in 0..100u64 {
///         if s.rank() == 0 {
///             bcast.with_buffers(|buf| buf.fill(step));
///         }
///         bcast.start().wait()?;
///         bcast.with_buffers(|buf| assert_eq!(buf[0], step));
///     }
///     Ok::<(), zcoll::Error>(())
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
///
/// The buffers cannot be touched while a start is pending:
///
/// ```compile_fail
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// # let mut comm = universe.world().zero_copy()?;
/// let mut buf = vec![0u64; 1024];
/// comm.immediate_scope(|s| {
///     let mut bcast = s.broadcast_init(&mut buf, 0);
///     let req = bcast.start();
///     bcast.with_buffers(|buf| buf[0] = 1); // the call may be reading or writing `buf`
///     req.wait()
/// })?;
/// # Ok::<(), zcoll::Error>(())
/// ```
pub struct Persistent<'scope, B> {
    engine: Arc<Engine<'scope>>,
    held: Arc<Mutex<Held<'scope, B>>>,
    bytes: usize,
    /// The last start's call, which the buffers wait for if its request was leaked.
    last: Option<Seq>,
}

impl<'scope, B: Send + 'scope> Persistent<'scope, B> {
    fn new(
        scope: &Scope<'scope, '_>,
        bufs: B,
        bytes: usize,
        call: impl FnMut(&mut Comm, &mut B) -> Result<()> + Send + 'scope,
    ) -> Self {
        Persistent {
            engine: scope.engine().clone(),
            held: Arc::new(Mutex::new(Held { bufs, call: Box::new(call) })),
            bytes,
            last: None,
        }
    }

    /// Starts the collective (`MPI_Start`): queues its call, in its turn among the scope's
    /// calls, as an `immediate_*` call would. The handle stays borrowed until the request
    /// is done.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// comm.immediate_scope(|s| {
    ///     let mut barrier = s.barrier_init();
    ///     (0..1000).try_for_each(|_| barrier.start().wait())
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From [`Request::wait`] or [`Request::test`]: those of the blocking collective.
    pub fn start(&mut self) -> Request<'_> {
        self.settle();
        let job = Job::Start(self.held.clone());
        let seq = self.engine.push(job, self.bytes);
        self.last = Some(seq);
        Request::new(seq, self.engine.clone())
    }

    /// Runs `f` on the buffers between starts (to fill the send buffer, read the result).
    /// If the last start's request was dropped or leaked unfinished, waits for its call
    /// first.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{op::Builtin, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut send, mut recv) = (vec![1.0f64; 8], vec![0.0f64; 8]);
    /// comm.immediate_scope(|s| {
    ///     let mut sum = s.all_reduce_init(&mut send, &mut recv, Builtin::Sum);
    ///     sum.start().wait()?;
    ///     let total = sum.with_buffers(|(_, recv)| recv[0]);
    ///     assert_eq!(total, s.size() as f64);
    ///     Ok::<(), zcoll::Error>(())
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn with_buffers<R>(&mut self, f: impl FnOnce(&mut B) -> R) -> R {
        self.settle();
        f(&mut self.held.lock().unwrap_or_else(PoisonError::into_inner).bufs)
    }

    /// Waits for the last start's call if its request was not waited for.
    fn settle(&mut self) {
        if let Some(last) = self.last.take() {
            let _ = Request::new(last, self.engine.clone()).wait();
        }
    }
}

impl<B> fmt::Debug for Persistent<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Persistent").field("bytes", &self.bytes).finish_non_exhaustive()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// A persistent barrier (`MPI_Barrier_init`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// comm.immediate_scope(|s| s.barrier_init().start().wait())?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::barrier`].
    pub fn barrier_init(&self) -> Persistent<'scope, ()> {
        Persistent::new(self, (), 0, |comm, ()| comm.barrier())
    }

    /// A persistent broadcast (`MPI_Bcast_init`) of `buf` from `root`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut buf = [comm.rank(); 4];
    /// comm.immediate_scope(|s| s.broadcast_init(&mut buf, 0).start().wait())?;
    /// assert_eq!(buf, [0; 4]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::broadcast_into`].
    pub fn broadcast_init<T: Pod + Send>(
        &self,
        buf: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, &'scope mut [T]> {
        let bytes = std::mem::size_of_val(buf);
        Persistent::new(self, buf, bytes, move |comm, buf| comm.broadcast_into(buf, root))
    }

    /// A persistent allgather (`MPI_Allgather_init`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut mine, mut all) = ([comm.rank()], vec![0; comm.size() as usize]);
    /// comm.immediate_scope(|s| s.all_gather_init(&mut mine, &mut all).start().wait())?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::all_gather_into`].
    pub fn all_gather_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        Persistent::new(self, (send, recv), bytes, |comm, (send, recv)| comm.all_gather_into(send, recv))
    }

    /// A persistent alltoall (`MPI_Alltoall_init`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let (mut send, mut recv) = (vec![comm.rank(); p], vec![0; p]);
    /// comm.immediate_scope(|s| s.all_to_all_init(&mut send, &mut recv).start().wait())?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::all_to_all_into`].
    pub fn all_to_all_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        Persistent::new(self, (send, recv), bytes, |comm, (send, recv)| comm.all_to_all_into(send, recv))
    }

    /// A persistent allreduce (`MPI_Allreduce_init`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{op::Builtin, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut one, mut sum) = ([1u32], [0u32]);
    /// comm.immediate_scope(|s| s.all_reduce_init(&mut one, &mut sum, Builtin::Sum).start().wait())?;
    /// // rsmpi's operator, as an rsmpi program passes it:
    /// let sum_op = mpi::collective::SystemOperation::sum();
    /// comm.immediate_scope(|s| s.all_reduce_init(&mut one, &mut sum, &sum_op).start().wait())?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::all_reduce_into`].
    pub fn all_reduce_init<T: Pod + Send + Sync, O: SendOperator<T, Op: 'scope>>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
        op: O,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(send);
        let op = op.into_send();
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.all_reduce_into(send, recv, &op)
        })
    }

    /// A persistent reduce (`MPI_Reduce_init`): `recv` is `Some` on the root, `None`
    /// elsewhere.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{op::Builtin, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut one, mut sum) = ([1u32], [0u32]);
    /// let recv = (comm.rank() == 0).then_some(&mut sum[..]);
    /// comm.immediate_scope(|s| s.reduce_init(&mut one, recv, 0, Builtin::Sum).start().wait())?;
    /// let recv = (comm.rank() == 0).then_some(&mut sum[..]);
    /// let max = mpi::collective::SystemOperation::max();
    /// comm.immediate_scope(|s| s.reduce_init(&mut one, recv, 0, max).start().wait())?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::reduce_into_root`].
    pub fn reduce_init<T: Pod + Send + Sync, O: SendOperator<T, Op: 'scope>>(
        &self,
        send: &'scope mut [T],
        recv: Option<&'scope mut [T]>,
        root: Rank,
        op: O,
    ) -> Persistent<'scope, (&'scope mut [T], Option<&'scope mut [T]>)> {
        let bytes = std::mem::size_of_val(send);
        let op = op.into_send();
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| match recv {
            Some(recv) => comm.reduce_into_root(send, recv, root, &op),
            None => comm.reduce_into(send, root, &op),
        })
    }

    /// A persistent scatter (`MPI_Scatter_init`), the root's side: each start sends block
    /// `r` of `send` (`size()` blocks of `recv.len()`) to rank `r`, its own into `recv`.
    /// The other ranks make [`scatter_init`](Self::scatter_init).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let (mut send, mut mine) = ((0..p).collect::<Vec<i32>>(), [0i32]);
    /// comm.immediate_scope(|s| {
    ///     let mut scatter = match me {
    ///         0 => s.scatter_init_root(&mut send, &mut mine, 0),
    ///         _ => s.scatter_init(&mut mine, 0),
    ///     };
    ///     for step in 0..10 {
    ///         if me == 0 {
    ///             scatter.with_buffers(|(send, _)| send.iter_mut().for_each(|x| *x += step));
    ///         }
    ///         scatter.start().wait()?;
    ///     }
    ///     Ok::<(), zcoll::Error>(())
    /// })?;
    /// assert_eq!(mine, [me + 45]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// The root's buffers are reached only between starts, through the handle, which the
    /// pending start borrows (`E0499`):
    ///
    /// ```compile_fail,E0499
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut send, mut mine) = (vec![0i32; comm.size() as usize], [0i32]);
    /// comm.immediate_scope(|s| {
    ///     let mut scatter = s.scatter_init_root(&mut send, &mut mine, 0);
    ///     let req = scatter.start();
    ///     scatter.with_buffers(|(send, _)| send[0] = 1); // peers may be reading `send`
    ///     req.wait()
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// and not at all behind the handle's back (`E0499`: the handle borrows `send` for the
    /// scope):
    ///
    /// ```compile_fail,E0499
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (mut send, mut mine) = (vec![0i32; comm.size() as usize], [0i32]);
    /// comm.immediate_scope(|s| {
    ///     let mut scatter = s.scatter_init_root(&mut send, &mut mine, 0);
    ///     let req = scatter.start();
    ///     send[0] = 1; // peers may be reading `send`
    ///     req.wait()
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::scatter_into_root`].
    pub fn scatter_init_root<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(send);
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.scatter_into_root(send, recv, root)
        })
    }

    /// A persistent scatter (`MPI_Scatter_init`), a non-root's side: each start receives
    /// this rank's block into `recv`. The root makes
    /// [`scatter_init_root`](Self::scatter_init_root). The handle's buffers are
    /// `(send, recv)` with an empty `send`: the root's handle's type, so that one variable
    /// holds either (see `scatter_init_root`'s example).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut mine = [0u8; 16];
    /// if comm.rank() != 0 {
    ///     comm.immediate_scope(|s| s.scatter_init(&mut mine, 0).start().wait())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::scatter_into`].
    pub fn scatter_init<T: Pod + Send + Sync>(
        &self,
        recv: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        Persistent::new(self, (&mut [], recv), bytes, move |comm, (_, recv)| comm.scatter_into(recv, root))
    }

    /// A persistent gather (`MPI_Gather_init`), the root's side: each start gathers every
    /// rank's `send` into `recv`, in rank order. The other ranks make
    /// [`gather_init`](Self::gather_init).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size() as usize);
    /// let (mut mine, mut all) = ([me], vec![0; p]);
    /// comm.immediate_scope(|s| {
    ///     let mut gather = match me {
    ///         0 => s.gather_init_root(&mut mine, &mut all, 0),
    ///         _ => s.gather_init(&mut mine, 0),
    ///     };
    ///     for _ in 0..10 {
    ///         gather.with_buffers(|(mine, _)| mine[0] += 1);
    ///         gather.start().wait()?;
    ///     }
    ///     Ok::<(), zcoll::Error>(())
    /// })?;
    /// if me == 0 {
    ///     assert_eq!(all, (0..p as i32).map(|r| r + 10).collect::<Vec<_>>());
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::gather_into_root`].
    pub fn gather_init_root<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.gather_into_root(send, recv, root)
        })
    }

    /// A persistent gather (`MPI_Gather_init`), a non-root's side: each start sends
    /// `send` to `root`. The root makes [`gather_init_root`](Self::gather_init_root). The
    /// handle's buffers are `(send, recv)` with an empty `recv`: the root's handle's type,
    /// so that one variable holds either (see `gather_init_root`'s example).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut mine = [comm.rank(); 4];
    /// if comm.rank() != 0 {
    ///     comm.immediate_scope(|s| s.gather_init(&mut mine, 0).start().wait())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::gather_into`].
    pub fn gather_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(send);
        Persistent::new(self, (send, &mut []), bytes, move |comm, (send, _)| comm.gather_into(send, root))
    }

    /// A persistent variable-count scatter (`MPI_Scatterv_init`), the root's side: each
    /// start sends `send[displs[r]..][..counts[r]]` to rank `r`, its own block into
    /// `recv`. `counts` and `displs` are copied (MPI fixes them when the handle is made);
    /// the other ranks make [`scatter_varcount_init`](Self::scatter_varcount_init).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let counts: Vec<i32> = (1..=p).collect(); // rank r receives r + 1 elements
    /// let displs: Vec<i32> = (0..p).map(|r| r * (r + 1) / 2).collect();
    /// let mut send = vec![0u8; (p * (p + 1) / 2) as usize];
    /// let mut mine = vec![0u8; me as usize + 1];
    /// comm.immediate_scope(|s| {
    ///     let mut scatterv = match me {
    ///         0 => s.scatter_varcount_init_root(&mut send, &counts, &displs, &mut mine, 0),
    ///         _ => s.scatter_varcount_init(&mut mine, 0),
    ///     };
    ///     for step in 1..=10 {
    ///         scatterv.with_buffers(|(send, _)| send.fill(step));
    ///         scatterv.start().wait()?;
    ///     }
    ///     Ok::<(), zcoll::Error>(())
    /// })?;
    /// assert!(mine.iter().all(|&x| x == 10));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::scatter_varcount_into_root`].
    pub fn scatter_varcount_init_root<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        counts: &[Count],
        displs: &[Count],
        recv: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(send);
        let (counts, displs) = (counts.to_vec(), displs.to_vec());
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.scatter_varcount_into_root(send, &counts, &displs, recv, root)
        })
    }

    /// A persistent variable-count scatter (`MPI_Scatterv_init`), a non-root's side: each
    /// start receives this rank's block into `recv`, exactly as long as the root's count
    /// for this rank. The root makes
    /// [`scatter_varcount_init_root`](Self::scatter_varcount_init_root); the buffers are
    /// `(send, recv)` with an empty `send`, the root's handle's type.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut mine = vec![0u8; comm.rank() as usize + 1];
    /// if comm.rank() != 0 {
    ///     comm.immediate_scope(|s| s.scatter_varcount_init(&mut mine, 0).start().wait())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::scatter_varcount_into`].
    pub fn scatter_varcount_init<T: Pod + Send + Sync>(
        &self,
        recv: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        Persistent::new(self, (&mut [], recv), bytes, move |comm, (_, recv)| {
            comm.scatter_varcount_into(recv, root)
        })
    }

    /// A persistent variable-count gather (`MPI_Gatherv_init`), the root's side: each
    /// start gathers rank `r`'s `send` into `recv[displs[r]..][..counts[r]]`. `counts` and
    /// `displs` are copied; the other ranks make
    /// [`gather_varcount_init`](Self::gather_varcount_init).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let counts: Vec<i32> = (1..=p).collect();
    /// let displs: Vec<i32> = (0..p).map(|r| r * (r + 1) / 2).collect();
    /// let mut mine = vec![me; me as usize + 1];
    /// let mut all = vec![0; (p * (p + 1) / 2) as usize];
    /// comm.immediate_scope(|s| {
    ///     let mut gatherv = match me {
    ///         0 => s.gather_varcount_init_root(&mut mine, &mut all, &counts, &displs, 0),
    ///         _ => s.gather_varcount_init(&mut mine, 0),
    ///     };
    ///     (0..10).try_for_each(|_| gatherv.start().wait())
    /// })?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::gather_varcount_into_root`].
    pub fn gather_varcount_init_root<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
        counts: &[Count],
        displs: &[Count],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        let (counts, displs) = (counts.to_vec(), displs.to_vec());
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.gather_varcount_into_root(send, recv, &counts, &displs, root)
        })
    }

    /// A persistent variable-count gather (`MPI_Gatherv_init`), a non-root's side: each
    /// start sends `send` to `root`. The root makes
    /// [`gather_varcount_init_root`](Self::gather_varcount_init_root); the buffers are
    /// `(send, recv)` with an empty `recv`, the root's handle's type.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let mut mine = vec![comm.rank(); comm.rank() as usize + 1];
    /// if comm.rank() != 0 {
    ///     comm.immediate_scope(|s| s.gather_varcount_init(&mut mine, 0).start().wait())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::gather_varcount_into`].
    pub fn gather_varcount_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        root: Rank,
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(send);
        Persistent::new(self, (send, &mut []), bytes, move |comm, (send, _)| {
            comm.gather_varcount_into(send, root)
        })
    }

    /// A persistent variable-count allgather (`MPI_Allgatherv_init`): each start gathers
    /// rank `r`'s `send` into `recv[displs[r]..][..counts[r]]` on every rank. `counts` and
    /// `displs` are copied.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let counts: Vec<i32> = (1..=p).collect();
    /// let displs: Vec<i32> = (0..p).map(|r| r * (r + 1) / 2).collect();
    /// let (mut mine, mut all) = (vec![me; me as usize + 1], vec![0; (p * (p + 1) / 2) as usize]);
    /// comm.immediate_scope(|s| {
    ///     let mut allgatherv = s.all_gather_varcount_init(&mut mine, &mut all, &counts, &displs);
    ///     allgatherv.start().wait()
    /// })?;
    /// assert_eq!(all[all.len() - 1], p - 1);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::all_gather_varcount_into`].
    pub fn all_gather_varcount_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        recv: &'scope mut [T],
        counts: &[Count],
        displs: &[Count],
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        let (counts, displs) = (counts.to_vec(), displs.to_vec());
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            comm.all_gather_varcount_into(send, recv, &counts, &displs)
        })
    }

    /// A persistent variable-count alltoall (`MPI_Alltoallv_init`): each start sends
    /// `send[send_displs[r]..][..send_counts[r]]` to rank `r` and receives rank `q`'s block
    /// for this rank into `recv[recv_displs[q]..][..recv_counts[q]]`. The four arrays are
    /// copied.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// # let mut comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let (ones, displs) = (vec![1; p as usize], (0..p).collect::<Vec<i32>>());
    /// let (mut send, mut recv) = (vec![me; p as usize], vec![0; p as usize]);
    /// comm.immediate_scope(|s| {
    ///     let mut alltoallv = s.all_to_all_varcount_init(&mut send, &ones, &displs, &mut recv, &ones, &displs);
    ///     alltoallv.start().wait()
    /// })?;
    /// assert_eq!(recv, displs);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// From each start's request: those of [`Comm::all_to_all_varcount_into`].
    pub fn all_to_all_varcount_init<T: Pod + Send + Sync>(
        &self,
        send: &'scope mut [T],
        send_counts: &[Count],
        send_displs: &[Count],
        recv: &'scope mut [T],
        recv_counts: &[Count],
        recv_displs: &[Count],
    ) -> Persistent<'scope, (&'scope mut [T], &'scope mut [T])> {
        let bytes = std::mem::size_of_val(recv);
        let arrays = [send_counts, send_displs, recv_counts, recv_displs].map(<[Count]>::to_vec);
        Persistent::new(self, (send, recv), bytes, move |comm, (send, recv)| {
            let [sc, sd, rc, rd] = &arrays;
            comm.all_to_all_varcount_into(send, sc, sd, recv, rc, rd)
        })
    }
}
