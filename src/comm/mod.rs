//! [`Comm`]: the user's handle, built over any rsmpi communicator.

//!
//! One file per family of methods; this one holds the communicator itself, its set-up,
//! and [`Comm::route`], the one place where a call is sent to one node (`coll`) or across
//! nodes (`hier`, which itself calls rsmpi's own collective where every node is one rank),
//! after the check that MPI may be called from this thread.

/// Sends one call down [`Comm::route`]: to the node's collective `$coll`, given the node's
/// `Ctx` and then `$node`, or to the [`Hierarchy`] method `$hier`, given the
/// [`Net`](crate::hier::Net) (the parent communicator and the `Ctx`) and then `$args`. A
/// macro rather than a function taking two closures, because both arms take the same
/// buffers by value; it expands to the `match` on [`Route`] itself, so routing stays as
/// cheap as writing it out.
macro_rules! route {
    ($comm:expr, $coll:path [$($node:expr),* $(,)?], $hier:ident [$($args:expr),* $(,)?]) => {
        match $comm.route()? {
            Route::Node => $coll(&$comm.ctx(), $($node),*),
            Route::Nodes(hier, parent) => hier.$hier($crate::hier::Net { parent, ctx: &$comm.ctx() }, $($args),*),
        }
    };
}

mod all;
pub(crate) mod exposure;
mod immediate;
mod info;
mod layout;
mod memory;
mod persistent;
mod reduce;
mod rooted;
mod tune;
mod varcount;

pub use immediate::{wait_all, wait_any, Progress, Request, Scope, WORKER_NAME};
pub use info::{Info, InterNode, Traffic};
pub use persistent::Persistent;

use crate::coll::{Ctx, Overrides};
use crate::error::{Error, Result};
use crate::hier::Hierarchy;
use crate::node::{NodeComm, Split};
use crate::sync::wait::WaitPolicy;
use mpi::environment::Threading;
use mpi::topology::{Communicator, Rank, SimpleCommunicator};
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A communicator with zero-copy collectives inside each node.
///
/// Built collectively over any rsmpi communicator (it duplicates it, so zcoll's traffic
/// never mixes with yours). Collective methods are named as rsmpi names them, take roots
/// as ranks of the communicator, and return [`Result`] instead of aborting: a bad
/// argument on any rank is an `Err` on every rank, before any byte moves (except on a
/// rank that only gives in a small call, which may return `Ok` first and learn of the
/// failure at its next call: see [`Error::PreviousFailed`]).
///
/// # Dropping
///
/// Dropping a `Comm` is not collective, but a rank whose last call could still fail
/// where it cannot see it (a call it left before the others checked it, or one it ended
/// with a success while a peer could fail it alone) first waits, with the wait policy,
/// until every rank of its node has finished that call, and says on standard error if
/// it failed, since no next call will report it.
///
/// Like an MPI communicator, a `Comm` is used by one thread at a time, and every rank
/// must call its collectives in the same order.
///
/// Across nodes the collectives are two-level: node legs through the node's transport,
/// inter-node legs through rsmpi among the node leaders, and large allreduces multi-root
/// along the column communicators (see the book's reduce chapter). Where every node holds
/// a single rank (one rank per host, or `ZCOLL_NODE_SIZE=1`) the node level has nothing to
/// gain: the collectives check their arguments across the communicator exactly as
/// elsewhere, then call rsmpi's own collective (reductions with a user operator and the
/// arrival-aware alltoalls keep zcoll's paths).
/// [`Info::inter_node`] says which applies.
///
/// # Examples
///
/// ```no_run
/// use zcoll::ZeroCopy;
///
/// let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// let mut data = vec![0u64; 1 << 20];
/// if comm.rank() == 0 {
///     data.iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
/// }
/// comm.broadcast_into(&mut data, 0)?;
/// assert_eq!(data[12345], 12345);
/// # Ok::<(), zcoll::Error>(())
/// ```
///
/// # Threads
///
/// A `Comm` is `Send`, not `Sync`: one collective at a time runs on it, and it may move to
/// another thread (one communicator per thread, say). What MPI allows decides the rest:
///
/// - On the thread that built it, a `Comm` needs no more than `MPI_THREAD_FUNNELED`
///   (rsmpi's `mpi::initialize`).
/// - On any other thread, MPI must have been initialized with `MPI_THREAD_MULTIPLE`
///   (`mpi::initialize_with_threading(Threading::Multiple)`). Without it, every
///   collective called there returns `Error::Unsupported` before touching MPI or the
///   node (so the other ranks see the call missing, and time out: `ZCOLL_TIMEOUT`),
///   [`Comm::mpi`] panics, and dropping the `Comm` there leaks its MPI communicators
///   instead of freeing them.
/// - The one exception: the worker thread of an
///   [`immediate_scope`](Comm::immediate_scope) runs the calls of a communicator of one
///   node, whose collectives make no MPI call (see [`Progress`]).
///
/// # Examples of threads
///
/// ```no_run
/// use mpi::environment::Threading;
/// use mpi::traits::*;
/// use zcoll::ZeroCopy;
///
/// let (universe, level) = mpi::initialize_with_threading(Threading::Multiple).unwrap();
/// assert_eq!(level, Threading::Multiple);
/// let comm = universe.world().zero_copy()?;
/// let sum = std::thread::spawn(move || {
///     let mut sum = [0u64];
///     comm.all_reduce_into(&[1u64], &mut sum, zcoll::op::Builtin::Sum).map(|()| sum[0])
/// })
/// .join()
/// .unwrap()?;
/// assert_eq!(sum, universe.world().size() as u64);
/// # Ok::<(), zcoll::Error>(())
/// ```
pub struct Comm {
    parent: SimpleCommunicator,
    node: NodeComm,
    hier: Hierarchy,
    info: Info,
    overrides: Overrides,
    home: Home,
    /// The layouts this rank has flattened and read from its peers (`comm/layout.rs`).
    layouts: std::cell::RefCell<crate::coll::layout::Memo>,
    /// The layout collectives' packed buffers, kept for the next call of the same length.
    layout_scratch: std::cell::RefCell<Vec<crate::alloc::Scratch<u8>>>,
}

// SAFETY: the fields that are not `Send` are rsmpi's communicator handles (`parent`,
// `node.comm`, the hierarchy's): raw MPI handles, which MPI lets any thread use under
// `MPI_THREAD_MULTIPLE`, and only the thread that initialized MPI under the lower levels.
// Every use of them goes through a method that first asks `home.allows()` (`route`,
// `mpi`, `duplicate`, `split`, `calibrate`), which is true on the thread that built the
// communicator, or on any thread under `MPI_THREAD_MULTIPLE`; `Drop` leaks them rather
// than free them from a thread MPI does not allow. (`route` also lets an immediate scope's
// worker thread run the calls of a one-node communicator, whose node path uses no MPI
// handle.) The rest is `Send`: the segment's
// mapping and the per-call state in `Cell`s (moved with the `Comm`, never shared, since
// `Comm` is not `Sync`).
#[allow(unsafe_code)]
unsafe impl Send for Comm {}

/// The thread that built a communicator, and whether MPI lets other threads call it.
#[derive(Clone, Copy, Debug)]
struct Home {
    thread: u64,
    multiple: bool,
}

/// A number for the calling thread, unique for the life of the process (threads are
/// numbered as they first ask): a thread-local load on every call, where
/// `thread::current().id()` costs two atomic operations on the thread's handle.
#[inline]
fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: Cell<u64> = const { Cell::new(0) };
    }
    NUMBER.with(|n| match n.get() {
        0 => {
            let new = NEXT.fetch_add(1, Ordering::Relaxed);
            n.set(new);
            new
        }
        known => known,
    })
}

impl Home {
    /// This thread, and the thread level MPI was initialized with.
    fn here() -> Home {
        let multiple = mpi::environment::threading_support() == Threading::Multiple;
        Home { thread: thread_number(), multiple }
    }

    /// Whether this thread may call MPI on the communicator.
    #[inline]
    fn allows(&self) -> bool {
        self.multiple || thread_number() == self.thread
    }

    /// `Unsupported` on a thread that may not call MPI.
    #[inline]
    fn check(&self, rank: Rank) -> Result<()> {
        match self.allows() {
            true => Ok(()),
            false => Err(Home::refused(rank)),
        }
    }

    #[cold]
    #[inline(never)]
    fn refused(rank: Rank) -> Error {
        Error::Unsupported {
            rank,
            what: "a call from a thread other than the one that built the communicator, \
                   without MPI_THREAD_MULTIPLE (mpi::initialize_with_threading)"
                .into(),
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        if !self.home.allows() {
            // MPI may not be called here: the communicators are leaked, not freed.
            // `self_comm` is a predefined handle, which rsmpi never frees.
            for c in [&mut self.parent, &mut self.node.comm] {
                std::mem::forget(std::mem::replace(c, SimpleCommunicator::self_comm()));
            }
            self.hier.leak_handles();
        }
    }
}

/// Where [`Comm::route`] sends a call (each arm takes the node's [`Ctx`] from
/// `Comm::ctx`: a small enum keeps the route free on the hot path).
pub(crate) enum Route<'a> {
    /// Every rank is on this node: the node's collectives (`coll`).
    Node,
    /// Several nodes: the two-level compositions (`hier`), over the parent communicator.
    Nodes(&'a Hierarchy, &'a SimpleCommunicator),
}

impl Comm {
    /// Builds a zero-copy communicator over `comm`. Collective over `comm`.
    ///
    /// It splits `comm` into nodes (by shared memory, or into virtual nodes of `k`
    /// consecutive `MPI_COMM_WORLD` ranks with `ZCOLL_NODE_SIZE=k`), exchanges process ids,
    /// maps each node's control segment, and decides each node's transport: `xpmem` if
    /// every rank of the node loads XPMEM and may read every other with
    /// `process_vm_readv`, else `cma` (with buffers in the shared heap mapped by every
    /// rank where the ranks may map each other's heap), else `cico`
    /// (`ZCOLL_TRANSPORT=cma|cico|heap|xpmem` forces one).
    ///
    /// # Errors
    ///
    /// On every rank of `comm`: `Error::Config` for an environment variable zcoll cannot
    /// read, or that the ranks read otherwise where they must agree (`ZCOLL_NODE_SIZE`, and
    /// on a node `ZCOLL_TRANSPORT` and `ZCOLL_ARRIVAL`), `Error::Segment` if the control segment cannot be created or mapped,
    /// `Error::Unsupported` for an intercommunicator, or if `ZCOLL_TRANSPORT` asks for a
    /// transport the node cannot use; the ranks of the nodes where nothing failed get `Error::PeerFailed` naming
    /// the first rank that failed.
    pub fn new<C: Communicator>(comm: &C) -> Result<Comm> {
        // An intercommunicator's collectives join two groups; zcoll's run inside one.
        // Every rank of it sees the same answer, without communicating.
        if comm.test_inter() {
            return Err(Error::Unsupported { rank: comm.rank(), what: "an intercommunicator".into() });
        }
        let parent = comm.duplicate();
        // Agreed before the split, which every rank must make the same way.
        let split = Split::agreed(&parent, Split::from_env());
        let policy = WaitPolicy::from_env();
        let arrival = crate::node::arrival_from_env();
        let progress = immediate::Progress::from_env();
        let piece = crate::hier::piece_from_env();
        // Every rank takes part in the splits even with a bad variable, so none is left
        // waiting; the error is reported after.
        let node = NodeComm::new(
            &parent,
            split.clone().unwrap_or(Split::Shared),
            policy.clone().unwrap_or_default(),
            arrival.clone().unwrap_or_default(),
        );
        // Every node must hear of a failure on another before the next collective step
        // (the hierarchy's splits), or it would wait there for ever.
        let set_up = match (&split, &policy, &arrival, &node, &progress, &piece) {
            (Err(e), ..)
            | (_, Err(e), ..)
            | (_, _, Err(e), ..)
            | (_, _, _, Err(e), ..)
            | (.., Err(e), _)
            | (.., Err(e)) => Err(e.clone()),
            _ => Ok(()),
        };
        crate::hier::agree(&parent, set_up)?;
        let (split, node, progress, piece) = (split?, node?, progress?, piece?);
        if parent.rank() == 0 {
            if let Some(w) = crate::tune::select::warning() {
                crate::error::say(format_args!("{w}"));
            }
        }
        let hier = Hierarchy::new(&parent, &node, piece);
        let home = Home::here();
        let info = Info {
            rank: parent.rank(),
            size: parent.size(),
            node: hier.my_node(),
            nodes: hier.nodes(),
            node_ranks: (0..node.ctl.size()).map(|r| node.ctl.rank_of(r)).collect(),
            pids: node_pids(&node),
            transport: node.transport,
            reason: node.reason.clone(),
            heap: node.heap,
            segment_bytes: node.ctl.segment_bytes(),
            stage_bytes: node.ctl.stage_bytes(),
            virtual_nodes: match split {
                Split::Virtual(k) => Some(k),
                Split::Shared => None,
            },
            tuning: crate::tune::select::active().1.clone(),
            arrival: node.ctl.arrival(),
            inter_node: match (hier.nodes(), hier.direct()) {
                (1, _) => InterNode::OneNode,
                (_, true) => InterNode::DirectMpi,
                (_, false) => InterNode::Hierarchical { columns: hier.min_node_size() },
            },
            progress: immediate::Progress::decide(
                progress,
                hier.nodes() == 1,
                home.multiple,
                crate::sync::wait::union_size(&crate::sync::wait::affinity()) > node.ctl.size(),
            ),
        };
        Ok(Comm {
            parent,
            node,
            hier,
            info,
            overrides: Overrides::from_env(),
            home,
            layouts: Default::default(),
            layout_scratch: Default::default(),
        })
    }

    /// A new zero-copy communicator over the same ranks (`MPI_Comm_dup`), with its own
    /// segment and its own rounds: calls on one never match calls on the other. Collective.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
    /// let library = comm.duplicate()?; // a library's traffic kept apart from the program's
    /// library.barrier()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Comm::new`].
    pub fn duplicate(&self) -> Result<Comm> {
        self.home.check(self.rank())?;
        Comm::new(&self.parent)
    }

    /// Splits the communicator as rsmpi's `split_by_color_with_key` does
    /// (`MPI_Comm_split`): the ranks that pass the same `color` form a new zero-copy
    /// communicator, ordered by `key` (then by rank); a rank that passes
    /// `Color::undefined()` gets `None`. Collective over this communicator; the new
    /// communicators are built with the same checks as [`Comm::new`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use mpi::topology::Color;
    /// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
    /// // Even and odd ranks apart.
    /// let half = comm.split(Color::with_value(comm.rank() % 2), comm.rank())?.expect("a color");
    /// half.barrier()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Comm::new`], on every rank of each new communicator.
    pub fn split(&self, color: mpi::topology::Color, key: Rank) -> Result<Option<Comm>> {
        self.home.check(self.rank())?;
        match self.parent.split_by_color_with_key(color, key) {
            Some(sub) => Comm::new(&sub).map(Some),
            None => Ok(None),
        }
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> Rank {
        self.info.rank
    }

    /// The number of ranks in the communicator.
    pub fn size(&self) -> Rank {
        self.info.size
    }

    /// What zcoll set up: the node, its ranks, the transport and why.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The rsmpi communicator zcoll uses (a duplicate of the one it was built from), for
    /// the calls zcoll does not provide.
    ///
    /// # Panics
    ///
    /// On a thread that may not call MPI (see [Threads](Comm#threads)).
    pub fn mpi(&self) -> &SimpleCommunicator {
        assert!(
            self.home.allows(),
            "zcoll: Comm::mpi on a thread MPI does not allow (see Comm's docs, Threads)"
        );
        &self.parent
    }

    /// Where a call goes: to this node's collectives, or to the two-level ones. Every
    /// collective enters here.
    ///
    /// The one exception to the thread rule: on an immediate scope's worker thread, a
    /// communicator of one node routes its calls to the node's collectives, which make no
    /// MPI call (`coll` holds no MPI handle); the worker runs only the `immediate_*` and
    /// persistent calls, whose methods call MPI nowhere but through this route.
    ///
    /// # Errors
    ///
    /// `Unsupported` on a thread that may not call MPI (see [Threads](Comm#threads)).
    #[inline]
    pub(crate) fn route(&self) -> Result<Route<'_>> {
        if !(self.home.allows() || (self.hier.nodes() == 1 && immediate::on_worker())) {
            return Err(Home::refused(self.rank()));
        }
        Ok(match self.hier.nodes() {
            1 => Route::Node,
            _ => Route::Nodes(&self.hier, &self.parent),
        })
    }

    /// The local rank of rank `r` on its node (0 for a rank that does not exist: the
    /// checks then reject the call on every rank).
    fn local_of(&self, r: Rank) -> usize {
        self.hier.local_of(r)
    }

    #[inline]
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            ctl: &self.node.ctl,
            transport: self.node.transport,
            comm_size: self.info.size,
            overrides: &self.overrides,
        }
    }

    /// Blocks until every rank of the communicator has called it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// comm.barrier()?;
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::Mismatch` if ranks called different collectives at this point;
    /// `Error::PeerDied` or `Error::Timeout` while waiting.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.3 (`MPI_Barrier`).
    pub fn barrier(&self) -> Result<()> {
        route!(self, crate::coll::barrier::barrier[], barrier[])
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm").field("info", &self.info).finish_non_exhaustive()
    }
}

fn node_pids(node: &NodeComm) -> Vec<i32> {
    use mpi::traits::*;
    let mut pids = vec![0i32; node.ctl.size()];
    node.comm.all_gather_into(&(std::process::id() as i32), &mut pids[..]);
    pids
}

/// Turns any rsmpi communicator into a zero-copy one: `world.zero_copy()?`.
///
/// # Examples
///
/// ```no_run
/// use zcoll::ZeroCopy;
/// let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// comm.barrier()?;
/// # Ok::<(), zcoll::Error>(())
/// ```
pub trait ZeroCopy: Communicator {
    /// The same as [`Comm::new(self)`](Comm::new).
    ///
    /// # Errors
    ///
    /// As [`Comm::new`].
    fn zero_copy(&self) -> Result<Comm>
    where
        Self: Sized,
    {
        Comm::new(self)
    }
}

impl<C: Communicator> ZeroCopy for C {}
