//! [`Comm`]: the user's handle, built over any rsmpi communicator.

use crate::alloc::ShmBox;
use crate::coll::allgather::{allgather_hier, hier_checks as all_gather_checks, AllgatherAlgorithm};
use crate::coll::allgatherv::AllgathervAlgorithm;
use crate::coll::alltoall::{alltoall_hier, AlltoallAlgorithm};
use crate::coll::alltoallv::{AlltoallvAlgorithm, Sides};
use crate::coll::gather::{GatherAlgorithm, GatherBufs};
use crate::coll::gatherv::GathervBufs;
use crate::coll::reduce::{Bufs, ReduceAlgorithm};
use crate::coll::rooted::hier_check;
use crate::coll::scatter::{ScatterAlgorithm, ScatterBufs};
use crate::coll::scatterv::ScattervBufs;
use crate::coll::varcount::{Partition, PartitionMut};
use crate::coll::{self, bcast::BcastAlgorithm, Ctx, Overrides};
use crate::error::{Error, Result};
use crate::exposure::Exposure;
use crate::hier::Hierarchy;
use crate::node::{NodeComm, Split};
use crate::op::Operator;
use crate::pod::Pod;
use crate::sync::wait::WaitPolicy;
use crate::transport::TransportKind;
use mpi::topology::{Communicator, Rank, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Root};
use mpi::Count;
use std::fmt;

/// A communicator with zero-copy collectives inside each node.
///
/// Built collectively over any rsmpi communicator (it duplicates it, so zcoll's traffic
/// never mixes with yours). Collective methods are named as rsmpi names them, take roots
/// as ranks of the communicator, and return [`Result`] instead of aborting: a bad
/// argument on any rank is an `Err` on every rank, before any byte moves.
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
/// A `Comm` is neither `Send` nor `Sync`: it holds rsmpi communicators, which are
/// neither, and one collective at a time runs on it. A program that calls zcoll from one
/// thread needs no more than `MPI_THREAD_FUNNELED` (rsmpi's `mpi::initialize`); moving a
/// communicator to another thread, which would need `MPI_THREAD_MULTIPLE` and a check of
/// it, is not offered yet.
pub struct Comm {
    parent: SimpleCommunicator,
    node: NodeComm,
    hier: Hierarchy,
    info: Info,
    overrides: Overrides,
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
    /// read, `Error::Segment` if the control segment cannot be created or mapped,
    /// `Error::Unsupported` if `ZCOLL_TRANSPORT` asks for a transport the node cannot
    /// use; the ranks of the nodes where nothing failed get `Error::PeerFailed` naming
    /// the first rank that failed.
    pub fn new<C: Communicator>(comm: &C) -> Result<Comm> {
        let parent = comm.duplicate();
        let split = Split::from_env();
        let policy = WaitPolicy::from_env();
        // Every rank takes part in the splits even with a bad variable, so none is left
        // waiting; the error is reported after.
        let node = NodeComm::new(
            &parent,
            split.clone().unwrap_or(Split::Shared),
            policy.clone().unwrap_or_default(),
        );
        // Every node must hear of a failure on another before the next collective step
        // (the hierarchy's splits), or it would wait there for ever.
        let set_up = match (&split, &policy, &node) {
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e.clone()),
            _ => Ok(()),
        };
        crate::hier::agree(&parent, set_up)?;
        let (split, node) = (split?, node?);
        if parent.rank() == 0 {
            if let Some(w) = crate::tune::select::warning() {
                eprintln!("zcoll: {w}");
            }
        }
        let hier = Hierarchy::new(&parent, &node);
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
            inter_node: match (hier.nodes(), hier.direct()) {
                (1, _) => InterNode::OneNode,
                (_, true) => InterNode::DirectMpi,
                (_, false) => InterNode::Hierarchical { columns: hier.min_node_size() },
            },
        };
        Ok(Comm { parent, node, hier, info, overrides: Overrides::from_env() })
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
    pub fn mpi(&self) -> &SimpleCommunicator {
        &self.parent
    }

    pub(crate) fn ctx(&self) -> Ctx<'_> {
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
        if self.hier.nodes() > 1 {
            return self.hier.barrier(&self.parent, &self.ctx());
        }
        coll::barrier::barrier(&self.ctx())
    }

    /// Broadcasts `buf` from `root` into `buf` on every other rank, choosing the
    /// algorithm by size and transport.
    ///
    /// Inside a node each byte is copied once (the ranks read the root's buffer with CMA),
    /// or for small messages and the `cico` transport twice through shared memory.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut x = [0.0f64; 4];
    /// if comm.rank() == 1 % comm.size() {
    ///     x = [1.0, 2.0, 3.0, 4.0];
    /// }
    /// comm.broadcast_into(&mut x, 1 % comm.size())?;
    /// assert_eq!(x, [1.0, 2.0, 3.0, 4.0]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `Error::InvalidRoot` if `root` is not a rank, `Error::Mismatch` if
    /// ranks disagree on the root or the collective, `Error::LengthMismatch` if a rank's
    /// buffer has another length in bytes than the root's; a transport error or a peer's
    /// failure during the copy.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.4 (`MPI_Bcast`).
    pub fn broadcast_into<T: Pod>(&self, buf: &mut [T], root: Rank) -> Result<()> {
        self.broadcast_into_with(buf, root, BcastAlgorithm::Auto)
    }

    /// [`broadcast_into`](Self::broadcast_into) with a chosen algorithm. Every rank must
    /// choose the same one. A single-copy algorithm on a `cico` node runs as
    /// [`BcastAlgorithm::Staged`].
    ///
    /// # Errors
    ///
    /// As `broadcast_into`, and `Error::Mismatch` if ranks chose different algorithms.
    pub fn broadcast_into_with<T: Pod>(
        &self,
        buf: &mut [T],
        root: Rank,
        algorithm: BcastAlgorithm,
    ) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        if self.hier.nodes() > 1 {
            return self.hier.bcast(&self.parent, &self.ctx(), bytes, root, algorithm);
        }
        coll::bcast::bcast(&self.ctx(), bytes, root, self.hier.local_of(root), algorithm, None)
    }
}

/// Reductions.
impl Comm {
    /// Combines every rank's `send` with `op` into every rank's `recv`, element-wise.
    ///
    /// Inside a node the reduction is zero-copy and partitioned: each rank reduces one
    /// cache-line aligned partition straight out of its peers' buffers, then the
    /// partitions are shared. Small messages go through the control segment.
    /// Non-commutative operators combine in rank order, and every rank receives bitwise
    /// the same result.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// use zcoll::op::Builtin;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mine = vec![comm.rank() as u64; 1000];
    /// let mut sum = vec![0u64; 1000];
    /// comm.all_reduce_into(&mine, &mut sum, Builtin::Sum)?;
    /// let p = comm.size() as u64;
    /// assert!(sum.iter().all(|&s| s == p * (p - 1) / 2));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `Error::LengthMismatch` if the ranks' `send` lengths differ or a
    /// `recv` has another length than its `send`; `Error::Mismatch` if ranks pass
    /// different operators, element types or algorithms; `Error::Unsupported` if the
    /// operator does not apply to the type (a bitwise operator on floats); a transport
    /// error or a peer's failure.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.9.6 (`MPI_Allreduce`).
    pub fn all_reduce_into<T: Pod, O: Operator<T>>(&self, send: &[T], recv: &mut [T], op: O) -> Result<()> {
        self.all_reduce_into_with(send, recv, op, ReduceAlgorithm::Auto)
    }

    /// [`all_reduce_into`](Self::all_reduce_into) with a chosen algorithm (the same on
    /// every rank).
    ///
    /// # Errors
    ///
    /// As `all_reduce_into`.
    pub fn all_reduce_into_with<T: Pod, O: Operator<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        self.all_reduce_bufs(Bufs::Apart(send, recv), &op, algorithm)
    }

    /// [`all_reduce_into`](Self::all_reduce_into) in place: `buf` is every rank's input
    /// and receives the result (`MPI_IN_PLACE`).
    ///
    /// # Errors
    ///
    /// As `all_reduce_into`.
    pub fn all_reduce_in_place<T: Pod, O: Operator<T>>(&self, buf: &mut [T], op: O) -> Result<()> {
        self.all_reduce_bufs(Bufs::InPlace(buf), &op, ReduceAlgorithm::Auto)
    }

    fn all_reduce_bufs<T: Pod, O: Operator<T>>(
        &self,
        bufs: Bufs<'_, T>,
        op: &O,
        a: ReduceAlgorithm,
    ) -> Result<()> {
        if self.hier.nodes() > 1 {
            return self.hier.all_reduce(&self.parent, &self.ctx(), bufs, op, a);
        }
        coll::reduce::reduce(&self.ctx(), bufs, None, op, a)
    }

    /// The inclusive prefix reduction (`MPI_Scan`, rsmpi's `scan_into`): rank `i`
    /// receives `send_0 ∘ send_1 ∘ ... ∘ send_i`, element-wise, combined in rank order.
    /// Inside a node each rank reads the lower ranks' inputs straight out of their buffers.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// use zcoll::op::Builtin;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut prefix = [0u64];
    /// comm.scan_into(&[1u64], &mut prefix, Builtin::Sum)?;
    /// assert_eq!(prefix[0], comm.rank() as u64 + 1);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `Error::LengthMismatch` if the inputs' lengths differ or an output
    /// has another length than its input, `Error::Mismatch` if ranks pass another
    /// collective, operator or element type, `Error::Unsupported` for an operator that
    /// does not apply to `T`; a transport error or a peer's failure.
    pub fn scan_into<T: Pod, O: Operator<T>>(&self, send: &[T], recv: &mut [T], op: O) -> Result<()> {
        self.scan_family(coll::scan::Which::Scan, send, recv, &op)
    }

    /// The exclusive prefix reduction (`MPI_Exscan`, rsmpi's `exclusive_scan_into`): rank
    /// `i > 0` receives `send_0 ∘ ... ∘ send_(i-1)`; rank 0's `recv` is left as it was
    /// (MPI leaves it undefined).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// use zcoll::op::Builtin;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut before = [0u64];
    /// comm.exclusive_scan_into(&[1u64], &mut before, Builtin::Sum)?;
    /// assert_eq!(before[0], comm.rank() as u64);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scan_into`](Self::scan_into).
    pub fn exclusive_scan_into<T: Pod, O: Operator<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<()> {
        self.scan_family(coll::scan::Which::Exscan, send, recv, &op)
    }

    /// Reduces every rank's `send` (`size()` blocks of `recv.len()` elements) and leaves
    /// block `i` of the result in rank `i`'s `recv` (`MPI_Reduce_scatter_block`, rsmpi's
    /// `reduce_scatter_block_into`). Inside a node each rank reads its block straight out
    /// of every peer's input.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// use zcoll::op::Builtin;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let send = vec![1u32; comm.size() as usize * 4];
    /// let mut mine = [0u32; 4];
    /// comm.reduce_scatter_block_into(&send, &mut mine, Builtin::Sum)?;
    /// assert!(mine.iter().all(|&x| x == comm.size() as u32));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scan_into`](Self::scan_into); `Error::LengthMismatch` also if `send` is not
    /// `size()` blocks of `recv.len()`.
    pub fn reduce_scatter_block_into<T: Pod, O: Operator<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<()> {
        self.scan_family(coll::scan::Which::ReduceScatterBlock, send, recv, &op)
    }

    fn scan_family<T: Pod, O: Operator<T>>(
        &self,
        which: coll::scan::Which,
        send: &[T],
        recv: &mut [T],
        op: &O,
    ) -> Result<()> {
        if self.hier.nodes() > 1 {
            return self.hier.scan(&self.parent, which, send, recv, op);
        }
        coll::scan::scan(&self.ctx(), which, send, recv, op)
    }

    /// Combines every rank's `send` with `op` into `recv` on `root`. Called on the root;
    /// the other ranks call [`reduce_into`](Self::reduce_into) (on another rank, `recv` is
    /// left untouched).
    ///
    /// Inside a node each rank reduces one partition straight out of its peers' buffers
    /// and writes it straight into the root's `recv`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// use zcoll::op::Builtin;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mine = [comm.rank() as f64; 3];
    /// if comm.rank() == 0 {
    ///     let mut max = [0.0; 3];
    ///     comm.reduce_into_root(&mine, &mut max, 0, Builtin::Max)?;
    ///     assert_eq!(max, [(comm.size() - 1) as f64; 3]);
    /// } else {
    ///     comm.reduce_into(&mine, 0, Builtin::Max)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`all_reduce_into`](Self::all_reduce_into), and `Error::InvalidRoot` or
    /// `Error::Mismatch` for a bad root.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.9.1 (`MPI_Reduce`).
    pub fn reduce_into_root<T: Pod, O: Operator<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: Rank,
        op: O,
    ) -> Result<()> {
        self.reduce_bufs(Bufs::Apart(send, recv), root, &op, ReduceAlgorithm::Auto)
    }

    /// The non-root side of [`reduce_into_root`](Self::reduce_into_root).
    ///
    /// # Errors
    ///
    /// As `reduce_into_root`.
    pub fn reduce_into<T: Pod, O: Operator<T>>(&self, send: &[T], root: Rank, op: O) -> Result<()> {
        self.reduce_bufs(Bufs::SendOnly(send), root, &op, ReduceAlgorithm::Auto)
    }

    /// [`reduce_into_root`](Self::reduce_into_root) in place on the root: `buf` is its
    /// input and receives the result.
    ///
    /// # Errors
    ///
    /// As `reduce_into_root`.
    pub fn reduce_in_place_root<T: Pod, O: Operator<T>>(
        &self,
        buf: &mut [T],
        root: Rank,
        op: O,
    ) -> Result<()> {
        self.reduce_bufs(Bufs::InPlace(buf), root, &op, ReduceAlgorithm::Auto)
    }

    /// Any side of a reduce with a chosen algorithm (the same on every rank): `recv` is
    /// `Some` on the root (`None` for in place), `None` elsewhere.
    ///
    /// # Errors
    ///
    /// As [`reduce_into_root`](Self::reduce_into_root).
    pub fn reduce_with<T: Pod, O: Operator<T>>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: Rank,
        op: O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        match recv {
            Some(recv) => self.reduce_bufs(Bufs::Apart(send, recv), root, &op, algorithm),
            None => self.reduce_bufs(Bufs::SendOnly(send), root, &op, algorithm),
        }
    }

    fn reduce_bufs<T: Pod, O: Operator<T>>(
        &self,
        bufs: Bufs<'_, T>,
        root: Rank,
        op: &O,
        a: ReduceAlgorithm,
    ) -> Result<()> {
        // Only the root keeps an output; elsewhere `recv` is ignored, as MPI ignores it.
        let bufs = match bufs {
            Bufs::Apart(send, _) if root != self.rank() => Bufs::SendOnly(send),
            other => other,
        };
        if self.hier.nodes() > 1 {
            return self.hier.reduce(&self.parent, &self.ctx(), bufs, root, op, a);
        }
        let src = self.hier.local_of(root);
        coll::reduce::reduce(&self.ctx(), bufs, Some((root, src)), op, a)
    }
}

/// Scatter and gather.
///
/// The root passes every rank's block in one buffer, block `r` for rank `r`; the other
/// ranks pass their own block. Each has its `_with` variant that chooses the algorithm
/// ([`ScatterAlgorithm`], [`GatherAlgorithm`]; every rank must choose the same one).
/// Every call is checked on every rank before any byte moves: a bad root, blocks of
/// different lengths, a root buffer that does not hold `size()` blocks, or the root calling
/// a non-root method (or the reverse) is the same `Err` on every rank, and leaves every
/// buffer as it was.
impl Comm {
    /// Scatters `send` from this rank, the root: block `r` of `send` (`recv.len()`
    /// elements) goes to rank `r`, this rank's own block into `recv`. The other ranks call
    /// [`scatter_into`](Self::scatter_into).
    ///
    /// Inside a node each byte is copied once (the ranks read their blocks from the root's
    /// buffer with CMA, a few at a time), or for small blocks and the `cico` transport
    /// twice through shared memory.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut mine = [0u32; 2];
    /// if comm.rank() == 0 {
    ///     let all: Vec<u32> = (0..2 * comm.size() as u32).collect();
    ///     comm.scatter_into_root(&all, &mut mine, 0)?;
    /// } else {
    ///     comm.scatter_into(&mut mine, 0)?;
    /// }
    /// let r = comm.rank() as u32;
    /// assert_eq!(mine, [2 * r, 2 * r + 1]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `Error::InvalidRoot` if `root` is not a rank, `Error::Mismatch` if
    /// ranks disagree on the root, the collective or the algorithm, or if `root` is not this
    /// rank (`what` is `"root/non-root method"`), `Error::BufferSize` (naming the root) if
    /// `send` does not hold `size()` blocks of `recv.len()`, `Error::LengthMismatch` if a
    /// rank's block has another length in bytes; a transport error or a peer's failure
    /// during the copy.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.6 (`MPI_Scatter`).
    pub fn scatter_into_root<T: Pod>(&self, send: &[T], recv: &mut [T], root: Rank) -> Result<()> {
        self.scatter_into_root_with(send, recv, root, ScatterAlgorithm::Auto)
    }

    /// [`scatter_into_root`](Self::scatter_into_root) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `scatter_into_root`.
    pub fn scatter_into_root_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: Rank,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let bufs = ScatterBufs::Root {
            send: bytemuck::cast_slice(send),
            recv: Some(bytemuck::cast_slice_mut(recv)),
        };
        self.scatter_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Receives this rank's block of a scatter from `root` into `recv`. The root calls
    /// [`scatter_into_root`](Self::scatter_into_root) or
    /// [`scatter_in_place_root`](Self::scatter_in_place_root).
    ///
    /// # Errors
    ///
    /// As `scatter_into_root`; `Error::Mismatch` if this rank is `root`.
    pub fn scatter_into<T: Pod>(&self, recv: &mut [T], root: Rank) -> Result<()> {
        self.scatter_into_with(recv, root, ScatterAlgorithm::Auto)
    }

    /// [`scatter_into`](Self::scatter_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `scatter_into`.
    pub fn scatter_into_with<T: Pod>(
        &self,
        recv: &mut [T],
        root: Rank,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let bufs = ScatterBufs::Leaf { recv: bytemuck::cast_slice_mut(recv) };
        self.scatter_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Scatters `buf` from this rank, the root, leaving its own block where it is in `buf`
    /// (`MPI_IN_PLACE`): `buf` holds `size()` blocks, and `buf` is not changed.
    ///
    /// # Errors
    ///
    /// As `scatter_into_root`, with `buf` in the place of `send` (a length that is not a
    /// multiple of `size()` is a `BufferSize` error).
    pub fn scatter_in_place_root<T: Pod>(&self, buf: &mut [T], root: Rank) -> Result<()> {
        self.scatter_in_place_root_with(buf, root, ScatterAlgorithm::Auto)
    }

    /// [`scatter_in_place_root`](Self::scatter_in_place_root) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `scatter_in_place_root`.
    pub fn scatter_in_place_root_with<T: Pod>(
        &self,
        buf: &mut [T],
        root: Rank,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let bufs = ScatterBufs::Root { send: bytemuck::cast_slice(buf), recv: None };
        self.scatter_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Gathers every rank's block into `recv` on this rank, the root: rank `r`'s block
    /// (`send.len()` elements) lands at block `r` of `recv`. The other ranks call
    /// [`gather_into`](Self::gather_into).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mine = [comm.rank() as f64; 3];
    /// if comm.rank() == 0 {
    ///     let mut all = vec![0.0; 3 * comm.size() as usize];
    ///     comm.gather_into_root(&mine, &mut all, 0)?;
    ///     assert!(all.chunks(3).enumerate().all(|(r, b)| b == [r as f64; 3]));
    /// } else {
    ///     comm.gather_into(&mine, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `Error::InvalidRoot`, `Error::Mismatch` (ranks disagree on the root,
    /// the collective or the algorithm, or `root` is not this rank), `Error::BufferSize`
    /// (naming the root) if `recv` does not hold `size()` blocks of `send.len()`,
    /// `Error::LengthMismatch` if a rank's block has another length in bytes; a transport
    /// error or a peer's failure during the copy.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.5 (`MPI_Gather`).
    pub fn gather_into_root<T: Pod>(&self, send: &[T], recv: &mut [T], root: Rank) -> Result<()> {
        self.gather_into_root_with(send, recv, root, GatherAlgorithm::Auto)
    }

    /// [`gather_into_root`](Self::gather_into_root) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `gather_into_root`.
    pub fn gather_into_root_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: Rank,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let bufs =
            GatherBufs::Root { send: Some(bytemuck::cast_slice(send)), recv: bytemuck::cast_slice_mut(recv) };
        self.gather_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Sends this rank's block `send` to the gather at `root`. The root calls
    /// [`gather_into_root`](Self::gather_into_root) or
    /// [`gather_in_place_root`](Self::gather_in_place_root).
    ///
    /// # Errors
    ///
    /// As `gather_into_root`; `Error::Mismatch` if this rank is `root`.
    pub fn gather_into<T: Pod>(&self, send: &[T], root: Rank) -> Result<()> {
        self.gather_into_with(send, root, GatherAlgorithm::Auto)
    }

    /// [`gather_into`](Self::gather_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `gather_into`.
    pub fn gather_into_with<T: Pod>(&self, send: &[T], root: Rank, algorithm: GatherAlgorithm) -> Result<()> {
        let bufs = GatherBufs::Leaf { send: bytemuck::cast_slice(send) };
        self.gather_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Gathers into `buf` on this rank, the root, whose own block is already at its place
    /// in `buf` (`MPI_IN_PLACE`): `buf` holds `size()` blocks.
    ///
    /// # Errors
    ///
    /// As `gather_into_root`, with `buf` in the place of `recv`.
    pub fn gather_in_place_root<T: Pod>(&self, buf: &mut [T], root: Rank) -> Result<()> {
        self.gather_in_place_root_with(buf, root, GatherAlgorithm::Auto)
    }

    /// [`gather_in_place_root`](Self::gather_in_place_root) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `gather_in_place_root`.
    pub fn gather_in_place_root_with<T: Pod>(
        &self,
        buf: &mut [T],
        root: Rank,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let bufs = GatherBufs::Root { send: None, recv: bytemuck::cast_slice_mut(buf) };
        self.gather_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    fn scatter_bytes(
        &self,
        bufs: ScatterBufs<'_>,
        root: Rank,
        elem: usize,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let ctx = self.ctx();
        if self.hier.direct() {
            let (p, kind) = (self.size() as usize, coll::Kind::Scatter);
            let block = hier_check(&self.hier, &self.parent, kind, root, bufs.claim(p, elem), "send")?;
            // A variable zcoll cannot read is the same error as on the other paths.
            algorithm.resolve(block, 1, ctx.transport, ctx.overrides)?;
            let at = self.parent.process_at_rank(root);
            match bufs {
                _ if block == 0 => {}
                ScatterBufs::Root { send, recv: Some(recv) } => at.scatter_into_root(send, recv),
                ScatterBufs::Root { send, recv: None } => {
                    at.scatter_into_root(send, &mut vec![0u8; block][..])
                }
                ScatterBufs::Leaf { recv } => at.scatter_into(recv),
            }
            return Ok(());
        }
        if self.hier.nodes() > 1 {
            return coll::scatter::scatter_hier(&self.hier, &self.parent, &ctx, bufs, root, elem, algorithm);
        }
        coll::scatter::scatter(&ctx, bufs, root, self.hier.local_of(root), elem, algorithm)
    }

    fn gather_bytes(
        &self,
        bufs: GatherBufs<'_>,
        root: Rank,
        elem: usize,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let ctx = self.ctx();
        if self.hier.direct() {
            let (p, kind) = (self.size() as usize, coll::Kind::Gather);
            let block = hier_check(&self.hier, &self.parent, kind, root, bufs.claim(p, elem), "receive")?;
            algorithm.resolve(block, 1, ctx.transport, ctx.overrides)?;
            let at = self.parent.process_at_rank(root);
            match bufs {
                _ if block == 0 => {}
                GatherBufs::Root { send: Some(send), recv } => at.gather_into_root(send, recv),
                GatherBufs::Root { send: None, recv } => {
                    let own = recv[root as usize * block..][..block].to_vec();
                    at.gather_into_root(&own[..], recv)
                }
                GatherBufs::Leaf { send } => at.gather_into(send),
            }
            return Ok(());
        }
        if self.hier.nodes() > 1 {
            return coll::gather::gather_hier(&self.hier, &self.parent, &ctx, bufs, root, elem, algorithm);
        }
        coll::gather::gather(&ctx, bufs, root, self.hier.local_of(root), elem, algorithm)
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

/// What [`Comm::new`] set up, as seen from one rank.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// println!("{}", comm.info());
/// # Ok::<(), zcoll::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Info {
    /// This rank in the communicator.
    pub rank: Rank,
    /// The communicator's size.
    pub size: Rank,
    /// The index of this rank's node (nodes are numbered by their lowest rank).
    pub node: usize,
    /// The number of nodes.
    pub nodes: usize,
    /// The communicator ranks of this node, in local-rank order.
    pub node_ranks: Vec<Rank>,
    /// Their process ids.
    pub pids: Vec<i32>,
    /// The transport the node uses.
    pub transport: TransportKind,
    /// Why that transport.
    pub reason: String,
    /// Whether buffers in the shared heap ([`Comm::alloc`], [`ShmAlloc`](crate::ShmAlloc))
    /// are mapped by every rank of the node, and copied with loads and stores.
    pub heap: bool,
    /// The control segment's size in bytes.
    pub segment_bytes: usize,
    /// Its staging bytes per rank (the copy-in/copy-out area).
    pub stage_bytes: usize,
    /// `Some(k)` when nodes are virtual (`ZCOLL_NODE_SIZE=k`).
    pub virtual_nodes: Option<usize>,
    /// Where the cost model's parameters come from: this machine's profile, or the
    /// built-in defaults.
    pub tuning: String,
    /// Which path the collectives take across nodes (the same on every rank).
    pub inter_node: InterNode,
}

/// How the collectives of a [`Comm`] cross nodes: [`Info::inter_node`].
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// use zcoll::InterNode;
/// # let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// if comm.info().inter_node == InterNode::DirectMpi {
///     println!("one rank per node: zcoll checks the arguments, MPI moves the data");
/// }
/// # Ok::<(), zcoll::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InterNode {
    /// The communicator is one node: there is no inter-node leg.
    OneNode,
    /// Two levels: the node legs through the node's transport, the inter-node legs
    /// through rsmpi among the node leaders, or, for large allreduces, along `columns`
    /// column communicators at once (the multi-root allreduce; `columns` is the smallest
    /// node's size, and 1 means the leaders' path).
    Hierarchical {
        /// The number of partitions of the multi-root allreduce.
        columns: usize,
    },
    /// Every node holds one rank, so the node level has nothing to gain: every collective
    /// checks its arguments across the communicator as usual, then calls rsmpi's own
    /// (except the reductions with a user operator and the arrival-aware alltoalls, which
    /// keep zcoll's algorithms).
    DirectMpi,
}

impl fmt::Display for InterNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InterNode::OneNode => f.write_str("one node, no inter-node leg"),
            InterNode::Hierarchical { columns: 1 } => f.write_str(
                "two-level, MPI among the node leaders (a node of one rank: no multi-root allreduce)",
            ),
            InterNode::Hierarchical { columns } => write!(
                f,
                "two-level, MPI among the node leaders; large allreduces multi-root over {columns} columns"
            ),
            InterNode::DirectMpi => f.write_str("one rank per node, collectives call MPI directly"),
        }
    }
}

impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.virtual_nodes {
            Some(k) => format!("virtual node (ZCOLL_NODE_SIZE={k})"),
            None => "node".to_owned(),
        };
        writeln!(
            f,
            "{kind} {} of {}: {} ranks {:?}",
            self.node,
            self.nodes,
            self.node_ranks.len(),
            self.node_ranks
        )?;
        writeln!(f, "  pids       {:?}", self.pids)?;
        writeln!(f, "  transport  {} ({})", self.transport, self.reason)?;
        writeln!(
            f,
            "  segment    {} bytes ({} KiB staging per rank)",
            self.segment_bytes,
            self.stage_bytes / 1024
        )?;
        writeln!(f, "  inter-node {}", self.inter_node)?;
        write!(f, "  tuning     {}", self.tuning)
    }
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

/// Allgather and alltoall.
impl Comm {
    /// Gathers every rank's `send` into `recv` on every rank: block `i` of `recv` (of
    /// `send.len()` elements) is rank `i`'s `send`.
    ///
    /// Inside a node every block is copied once, straight from the rank that owns it
    /// (small blocks and the `cico` transport go twice through shared memory); across
    /// nodes the node leaders exchange whole nodes' blocks with MPI.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mine = [comm.rank() as u64; 2];
    /// let mut all = vec![0u64; 2 * comm.size() as usize];
    /// comm.all_gather_into(&mine, &mut all)?;
    /// assert!(all.chunks(2).enumerate().all(|(r, b)| b == [r as u64; 2]));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::LengthMismatch` if a rank's
    /// `send` has another length in bytes than rank 0's, or a `recv` is not `size()` times
    /// that; `Error::Mismatch` if ranks called another collective. A transport error or a
    /// peer's failure during the copies.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.7 (`MPI_Allgather`).
    pub fn all_gather_into<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_gather_into_with(send, recv, AllgatherAlgorithm::Auto)
    }

    /// [`all_gather_into`](Self::all_gather_into) with a chosen algorithm. Every rank must
    /// choose the same one. A single-copy algorithm on a `cico` node runs as
    /// [`AllgatherAlgorithm::Staged`]; across nodes the algorithm is checked but the
    /// two-level composition moves the data.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{AllgatherAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mine = vec![comm.rank() as f64; 1 << 16];
    /// let mut all = vec![0.0; mine.len() * comm.size() as usize];
    /// comm.all_gather_into_with(&mine, &mut all, AllgatherAlgorithm::RecursiveDoubling)?;
    /// assert_eq!(all[all.len() - 1], (comm.size() - 1) as f64);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As `all_gather_into`; `Error::Mismatch` if ranks chose different algorithms;
    /// `Error::Unsupported` for [`AllgatherAlgorithm::RingNeighbor`]`(j)` with `j` not
    /// coprime with the number of ranks of the node.
    pub fn all_gather_into_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        algorithm: AllgatherAlgorithm,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        if self.hier.direct() {
            let n = all_gather_checks(
                &self.hier,
                &self.parent,
                &self.ctx(),
                Some(send.len()),
                recv.len(),
                algorithm,
            )?;
            if n > 0 {
                self.parent.all_gather_into(send, recv);
            }
            return Ok(());
        }
        if self.hier.nodes() > 1 {
            return allgather_hier(&self.hier, &self.parent, &self.ctx(), Some(send), recv, algorithm);
        }
        coll::allgather::allgather(&self.ctx(), Some(send), recv, algorithm)
    }

    /// Allgather in place: every rank's block already sits at its position in `buf`
    /// (block `rank()` of `size()` equal blocks); afterwards every block is filled.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut ranks = vec![0i32; comm.size() as usize];
    /// ranks[comm.rank() as usize] = comm.rank();
    /// comm.all_gather_in_place(&mut ranks)?;
    /// assert!(ranks.iter().enumerate().all(|(i, &r)| r == i as i32));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`all_gather_into`](Self::all_gather_into): `Error::LengthMismatch` if a
    /// rank's `buf` has another length, or one that is not a multiple of `size()`.
    pub fn all_gather_in_place<T: Pod>(&self, buf: &mut [T]) -> Result<()> {
        self.all_gather_in_place_with(buf, AllgatherAlgorithm::Auto)
    }

    /// [`all_gather_in_place`](Self::all_gather_in_place) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As [`all_gather_into_with`](Self::all_gather_into_with).
    pub fn all_gather_in_place_with<T: Pod>(
        &self,
        buf: &mut [T],
        algorithm: AllgatherAlgorithm,
    ) -> Result<()> {
        let buf: &mut [u8] = bytemuck::cast_slice_mut(buf);
        if self.hier.direct() {
            let n = all_gather_checks(&self.hier, &self.parent, &self.ctx(), None, buf.len(), algorithm)?;
            if n > 0 {
                let own = buf[self.rank() as usize * n..][..n].to_vec();
                self.parent.all_gather_into(&own[..], buf);
            }
            return Ok(());
        }
        if self.hier.nodes() > 1 {
            return allgather_hier(&self.hier, &self.parent, &self.ctx(), None, buf, algorithm);
        }
        coll::allgather::allgather(&self.ctx(), None, buf, algorithm)
    }

    /// Sends block `j` of `send` to rank `j`, and receives block `i` of `recv` from rank
    /// `i`: both buffers hold `size()` blocks of equal length.
    ///
    /// Inside a node every block is copied once, read by its receiver straight from the
    /// sender's buffer (small blocks and the `cico` transport go twice through shared
    /// memory); across nodes the node leaders exchange node-to-node blocks with MPI.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// // Block j, two elements, says "from me, for j".
    /// let send: Vec<i32> = (0..p).flat_map(|j| [me, j]).collect();
    /// let mut recv = vec![0i32; send.len()];
    /// comm.all_to_all_into(&send, &mut recv)?;
    /// assert!(recv.chunks(2).enumerate().all(|(i, b)| b == [i as i32, me]));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::LengthMismatch` if a rank's
    /// `send` or `recv` is not `size()` blocks of rank 0's block length (in bytes);
    /// `Error::Mismatch` if ranks called another collective. A transport error or a
    /// peer's failure during the copies.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.8 (`MPI_Alltoall`).
    pub fn all_to_all_into<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_to_all_into_with(send, recv, AlltoallAlgorithm::Auto)
    }

    /// [`all_to_all_into`](Self::all_to_all_into) with a chosen algorithm. Every rank must
    /// choose the same one. A single-copy algorithm on a `cico` node runs as
    /// [`AlltoallAlgorithm::Staged`] (an arrival-aware one as
    /// [`AlltoallAlgorithm::PapStaged`]); across nodes the algorithm is checked but the
    /// two-level composition moves the data, except that the arrival-aware (`Pap*`)
    /// algorithms run PAP-Shm-Direct.
    ///
    /// # Errors
    ///
    /// As `all_to_all_into`, and `Error::Mismatch` if ranks chose different algorithms.
    /// The arrival-aware algorithms check each peer as it arrives rather than every rank
    /// before any byte moves: the errors are the same, on every rank, but a failed call
    /// may leave blocks from agreeing peers in a receive buffer (never in the culprit's,
    /// never in a send buffer); see the book's arrival chapter.
    pub fn all_to_all_into_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        algorithm: AlltoallAlgorithm,
    ) -> Result<()> {
        let (send, recv): (&[u8], &mut [u8]) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        // The arrival-aware algorithms keep their own exchange (MPI's has no notion of
        // arrival); they decide it as `alltoall_hier` does, alike on every rank.
        let size = self.size() as usize;
        let arrival_aware = matches!(
            algorithm.resolve(send.len() / size, size, TransportKind::Cma, &self.overrides),
            Ok(a) if a.arrival_aware()
        );
        if self.hier.direct() && !arrival_aware {
            coll::alltoall::hier_checks(
                &self.hier,
                &self.parent,
                &self.ctx(),
                send.len(),
                recv.len(),
                algorithm,
            )?;
            coll::varcount::mpi_count(send.len(), self.rank())?;
            if !send.is_empty() {
                self.parent.all_to_all_into(send, recv);
            }
            return Ok(());
        }
        if self.hier.nodes() > 1 {
            return alltoall_hier(&self.hier, &self.parent, &self.ctx(), send, recv, algorithm);
        }
        coll::alltoall::alltoall(&self.ctx(), send, recv, algorithm)
    }
}

/// Tuning.
impl Comm {
    /// Measures this node and fits the cost model: `reps` repetitions per point (the
    /// median is kept). Collective over the communicator; every node measures itself,
    /// and the profile of the node of rank 0 is returned on rank 0 (`None` elsewhere).
    ///
    /// It needs CMA, at least 2 ranks on the node for the transfer parameters and the
    /// rounds (timed broadcasts, on a communicator of one node), and 3 or more for the
    /// contention factor; what it could not measure keeps the built-in default, and the
    /// profile's notes say so. Run it with one rank per core: with
    /// more ranks than cores, the timings measure the scheduler.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// if let Some(profile) = comm.calibrate(20)? {
    ///     profile.save(&zcoll::tune::Profile::path())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::Unsupported` on a node without CMA; `Error::Config` for an unreadable
    /// `ZCOLL_VIRTUAL_SOCKETS`; a transport error or a peer's failure.
    pub fn calibrate(&self, reps: usize) -> Result<Option<crate::tune::Profile>> {
        use crate::tune::calibrate::{fit_all, fit_rounds, Samples};
        use mpi::traits::*;
        let mut buf: Vec<u8> = (0..coll::probe::PROBE_BYTES).map(|i| i as u8).collect();
        let mine = coll::probe::measure(&self.ctx(), &mut buf, reps)?;
        drop(buf);
        let rounds = self.time_rounds((5 * reps).clamp(20, 200))?;
        let node = &self.node.comm;
        if node.rank() != 0 {
            node.process_at_rank(0).send(&mine.encode()[..]);
            return Ok(None);
        }
        let mut all = vec![mine];
        for r in 1..node.size() {
            let (v, _) = node.process_at_rank(r).receive_vec::<f64>();
            all.push(Samples::decode(&v).expect("a rank of this node encoded it"));
        }
        if self.rank() != 0 {
            return Ok(None);
        }
        let (mut params, mut notes) = fit_all(&all, crate::tune::Params::DEFAULT);
        fit_rounds(&mut params, &mut notes, &rounds);
        Ok(Some(crate::tune::Profile { machine: crate::tune::Machine::this(), params, notes }))
    }

    /// Times the staged and the direct-read broadcast from rank 0 on a one-node
    /// communicator of two ranks or more (`iters` timed calls per size, each after a
    /// barrier; the median of each call's slowest rank), for the round constants and the
    /// staged copy cost: a copy through the staging area moves lines another core has
    /// just written, which a local copy does not measure. Empty elsewhere (the same
    /// decision on every rank).
    fn time_rounds(&self, iters: usize) -> Result<crate::tune::calibrate::Rounds> {
        use crate::tune::calibrate::{Rounds, COPY_ROUND_MAX, ROUND_SIZES};
        use mpi::collective::SystemOperation;
        let p = self.node.comm.size() as usize;
        if self.hier.nodes() != 1 || p < 2 {
            return Ok(Rounds::default());
        }
        let mut rounds = Rounds { p, ..Rounds::default() };
        let warmup = iters / 10 + 1;
        for n in ROUND_SIZES {
            let mut buf = vec![0u8; n];
            for algorithm in [BcastAlgorithm::Staged, BcastAlgorithm::DirectRead] {
                if algorithm == BcastAlgorithm::DirectRead && n > COPY_ROUND_MAX {
                    continue;
                }
                let mut times = Vec::with_capacity(iters);
                for i in 0..warmup + iters {
                    self.parent.barrier();
                    let start = std::time::Instant::now();
                    self.broadcast_into_with(&mut buf, 0, algorithm)?;
                    if i >= warmup {
                        times.push(start.elapsed().as_secs_f64());
                    }
                }
                let mut slowest = vec![0f64; iters];
                self.parent.all_reduce_into(&times[..], &mut slowest[..], SystemOperation::max());
                let into =
                    if algorithm == BcastAlgorithm::Staged { &mut rounds.staged } else { &mut rounds.copy };
                into.push((n as f64, coll::probe::median(slowest)));
            }
        }
        Ok(rounds)
    }
}

/// The shared address space: buffers peers map, and buffers registered once.
impl Comm {
    /// Allocates `n` zeroed elements in this process's shared heap.
    ///
    /// The peers of the node map the heap, so collectives on this buffer copy it with
    /// loads and stores, with no system call and no page pinning (on nodes whose transport
    /// is `heap`, or `cma` with [`Info::heap`]; elsewhere it is an ordinary buffer). Not
    /// collective: each rank allocates its own.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut buf = comm.alloc::<u32>(1 << 20)?;
    /// if comm.rank() == 0 {
    ///     buf.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32);
    /// }
    /// comm.broadcast_into(&mut buf, 0)?;
    /// assert_eq!(buf[77], 77);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::Unsupported` if the heap cannot be created here (no `memfd_create`), is
    /// full, or `T` is zero-sized.
    pub fn alloc<T: Pod>(&self, n: usize) -> Result<ShmBox<T>> {
        ShmBox::zeroed(n).map_err(|errno| Error::Unsupported {
            rank: self.rank(),
            what: format!("{n} elements of {} bytes in the shared heap: {errno}", std::mem::size_of::<T>()),
        })
    }

    /// Exposes `buf` to every rank of the node until the returned [`Exposure`] drops.
    /// Collective: every rank exposes a buffer of the same length in bytes.
    ///
    /// Each rank maps or attaches every peer's buffer once, here, and keeps the mapping;
    /// the exposure's collectives reuse it, with no address exchange. The buffer stays
    /// borrowed until the exposure drops.
    ///
    /// # Errors
    ///
    /// On every rank of the node: `Error::LengthMismatch` if the buffers' lengths differ,
    /// `Error::Mismatch` if a rank calls another collective; `PeerDied` or `Timeout`.
    pub fn expose<'a, T: Pod>(&'a self, buf: &'a mut [T]) -> Result<Exposure<'a, T>> {
        Exposure::new(self, buf)
    }

    /// The bytes this rank has copied from and to its peers with single copies, by
    /// transport, in every collective: how much of the traffic took the load/store
    /// paths. Copy-in/copy-out through the segment is not counted.
    pub fn traffic(&self) -> Traffic {
        let [cma, heap, xpmem] = self.node.ctl.traffic();
        Traffic { cma, heap, xpmem }
    }

    /// The number of nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.hier.nodes()
    }

    /// The local rank of rank `r` on its node.
    pub(crate) fn local_of(&self, r: Rank) -> usize {
        self.hier.local_of(r)
    }
}

/// Bytes one rank moved with single copies, by transport: see [`Comm::traffic`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Traffic {
    /// Through Cross Memory Attach.
    pub cma: u64,
    /// With loads and stores on peers' shared heaps.
    pub heap: u64,
    /// With loads and stores on attached XPMEM windows.
    pub xpmem: u64,
}

/// Variable-count collectives: every rank's block has its own length and place.
///
/// The partitioned buffer is described as in MPI and rsmpi: `counts[r]` elements from
/// `displs[r]` (both in elements, [`Count`] = `i32`) for rank `r`; displacements may leave
/// gaps and come in any order, and zero counts cost nothing. Inside a node every block
/// moves once, straight between the two ranks' buffers (or, small blocks and the `cico`
/// transport, through the control segment): the owner of a partition publishes it in the
/// segment and every rank finds its blocks from it. Each method has a `_with` variant that
/// chooses the algorithm (every rank must choose the same one), and a `_partition`
/// variant taking a [`Partition`] or [`PartitionMut`] as rsmpi's methods take theirs.
///
/// Every call is checked on every rank before any byte moves, and a bad call is the same
/// `Err` on every rank with every buffer left as it was: a count that does not match the
/// partner's length (`LengthMismatch`, in bytes, naming the rank whose buffer disagrees
/// with the root's counts), a block outside its buffer or a count array without one entry
/// per rank (`BufferSize`), a negative count or displacement, or receive blocks that
/// overlap (`InvalidPartition`), the root calling a non-root method (`Mismatch`).
impl Comm {
    /// Scatters from this rank, the root: block `r` of `send` (`counts[r]` elements from
    /// `displs[r]`) goes to rank `r`, this rank's own into `recv`. The other ranks call
    /// [`scatter_varcount_into`](Self::scatter_varcount_into).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// // Rank r gets r + 1 elements, the blocks stored last rank first.
    /// let p = comm.size();
    /// let mut mine = vec![0u64; comm.rank() as usize + 1];
    /// if comm.rank() == 0 {
    ///     let counts: Vec<i32> = (0..p).map(|r| r + 1).collect();
    ///     let displs: Vec<i32> = (0..p).map(|r| (r + 1..p).map(|q| q + 1).sum()).collect();
    ///     let all: Vec<u64> = (0..(p * (p + 1) / 2) as u64).collect();
    ///     comm.scatter_varcount_into_root(&all, &counts, &displs, &mut mine, 0)?;
    /// } else {
    ///     comm.scatter_varcount_into(&mut mine, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `InvalidRoot`, `Mismatch` (the root, the collective or the algorithm
    /// differ, or `root` is not this rank), `BufferSize` (naming the root) if `counts` or
    /// `displs` has not `size()` entries or a block ends past `send`, `InvalidPartition`
    /// for a negative count or displacement, `LengthMismatch` if a rank's `recv` has
    /// another length in bytes than its count; `Unsupported` beyond 8190 ranks on a node;
    /// a transport error or a peer's failure during the copy.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.6 (`MPI_Scatterv`).
    pub fn scatter_varcount_into_root<T: Pod>(
        &self,
        send: &[T],
        counts: &[Count],
        displs: &[Count],
        recv: &mut [T],
        root: Rank,
    ) -> Result<()> {
        self.scatter_varcount_into_root_with(send, counts, displs, recv, root, ScatterAlgorithm::Auto)
    }

    /// [`scatter_varcount_into_root`](Self::scatter_varcount_into_root) with a chosen
    /// algorithm (`ZCOLL_SCATTERV_ALGORITHM` sets what `Auto` means).
    ///
    /// # Errors
    ///
    /// As `scatter_varcount_into_root`.
    pub fn scatter_varcount_into_root_with<T: Pod>(
        &self,
        send: &[T],
        counts: &[Count],
        displs: &[Count],
        recv: &mut [T],
        root: Rank,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let bufs = ScattervBufs::Root {
            send: bytemuck::cast_slice(send),
            counts,
            displs,
            recv: bytemuck::cast_slice_mut(recv),
        };
        self.scatterv_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// [`scatter_varcount_into_root`](Self::scatter_varcount_into_root) with the blocks
    /// given as a [`Partition`], as rsmpi's `scatter_varcount_into_root` takes them.
    ///
    /// # Errors
    ///
    /// As `scatter_varcount_into_root`.
    pub fn scatter_partition_into_root<T: Pod>(
        &self,
        send: &Partition<'_, T>,
        recv: &mut [T],
        root: Rank,
    ) -> Result<()> {
        self.scatter_varcount_into_root(send.buf(), send.counts(), send.displs(), recv, root)
    }

    /// Receives this rank's block of a variable-count scatter from `root` into `recv`,
    /// which must be exactly as long as the root's count for this rank. The root calls
    /// [`scatter_varcount_into_root`](Self::scatter_varcount_into_root).
    ///
    /// # Errors
    ///
    /// As `scatter_varcount_into_root`; `Mismatch` if this rank is `root`.
    pub fn scatter_varcount_into<T: Pod>(&self, recv: &mut [T], root: Rank) -> Result<()> {
        self.scatter_varcount_into_with(recv, root, ScatterAlgorithm::Auto)
    }

    /// [`scatter_varcount_into`](Self::scatter_varcount_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `scatter_varcount_into`.
    pub fn scatter_varcount_into_with<T: Pod>(
        &self,
        recv: &mut [T],
        root: Rank,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let bufs = ScattervBufs::Leaf { recv: bytemuck::cast_slice_mut(recv) };
        self.scatterv_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Gathers into `recv` on this rank, the root: rank `r`'s block lands at `displs[r]`,
    /// `counts[r]` elements long, this rank's own from `send`. The other ranks call
    /// [`gather_varcount_into`](Self::gather_varcount_into). Receive blocks may leave gaps
    /// (left as they were) but must not overlap.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// let mine = vec![me as f32; me as usize];
    /// if me == 0 {
    ///     let counts: Vec<i32> = (0..p).collect();
    ///     let displs: Vec<i32> = (0..p).map(|r| r * (r - 1) / 2).collect();
    ///     let mut all = vec![0.0f32; (p * (p - 1) / 2) as usize];
    ///     comm.gather_varcount_into_root(&mine, &mut all, &counts, &displs, 0)?;
    ///     assert_eq!(all.last().copied(), (p > 1).then(|| (p - 1) as f32));
    /// } else {
    ///     comm.gather_varcount_into(&mine, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `InvalidRoot`, `Mismatch` (as for scatter), `BufferSize` (naming the
    /// root) if `counts` or `displs` has not `size()` entries or a block ends past `recv`,
    /// `InvalidPartition` for a negative count or displacement or overlapping blocks,
    /// `LengthMismatch` if a rank's `send` has another length in bytes than its count;
    /// `Unsupported` beyond 8190 ranks on a node; a transport error or a peer's failure.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.5 (`MPI_Gatherv`).
    pub fn gather_varcount_into_root<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
        root: Rank,
    ) -> Result<()> {
        self.gather_varcount_into_root_with(send, recv, counts, displs, root, GatherAlgorithm::Auto)
    }

    /// [`gather_varcount_into_root`](Self::gather_varcount_into_root) with a chosen
    /// algorithm (`ZCOLL_GATHERV_ALGORITHM` sets what `Auto` means).
    ///
    /// # Errors
    ///
    /// As `gather_varcount_into_root`.
    pub fn gather_varcount_into_root_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
        root: Rank,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let bufs = GathervBufs::Root {
            send: bytemuck::cast_slice(send),
            recv: bytemuck::cast_slice_mut(recv),
            counts,
            displs,
        };
        self.gatherv_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// [`gather_varcount_into_root`](Self::gather_varcount_into_root) with the blocks
    /// given as a [`PartitionMut`], as rsmpi's `gather_varcount_into_root` takes them.
    ///
    /// # Errors
    ///
    /// As `gather_varcount_into_root`.
    pub fn gather_partition_into_root<T: Pod>(
        &self,
        send: &[T],
        recv: &mut PartitionMut<'_, T>,
        root: Rank,
    ) -> Result<()> {
        let (buf, counts, displs) = recv.parts();
        self.gather_varcount_into_root(send, buf, counts, displs, root)
    }

    /// Sends this rank's block `send` to the variable-count gather at `root`. The root
    /// calls [`gather_varcount_into_root`](Self::gather_varcount_into_root).
    ///
    /// # Errors
    ///
    /// As `gather_varcount_into_root`; `Mismatch` if this rank is `root`.
    pub fn gather_varcount_into<T: Pod>(&self, send: &[T], root: Rank) -> Result<()> {
        self.gather_varcount_into_with(send, root, GatherAlgorithm::Auto)
    }

    /// [`gather_varcount_into`](Self::gather_varcount_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `gather_varcount_into`.
    pub fn gather_varcount_into_with<T: Pod>(
        &self,
        send: &[T],
        root: Rank,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let bufs = GathervBufs::Leaf { send: bytemuck::cast_slice(send) };
        self.gatherv_bytes(bufs, root, std::mem::size_of::<T>(), algorithm)
    }

    /// Gathers every rank's `send` into every rank's `recv`: rank `r`'s block lands at
    /// `displs[r]`, `counts[r]` elements long, in each rank's own partition (the ranks'
    /// displacements may differ; their counts for rank `r` must all be `r`'s send length).
    /// Receive blocks may leave gaps (left as they were) but must not overlap.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// // Rank r contributes r + 1 copies of r.
    /// let mine = vec![me as u16; me as usize + 1];
    /// let counts: Vec<i32> = (0..p).map(|r| r + 1).collect();
    /// let displs: Vec<i32> = (0..p).map(|r| r * (r + 1) / 2).collect();
    /// let mut all = vec![0u16; (p * (p + 1) / 2) as usize];
    /// comm.all_gather_varcount_into(&mine, &mut all, &counts, &displs)?;
    /// assert_eq!(all[all.len() - 1], (p - 1) as u16);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `BufferSize` (naming the rank at fault) if a rank's `counts` or
    /// `displs` has not `size()` entries or a block ends past its `recv`,
    /// `InvalidPartition` for a negative count or displacement or overlapping blocks,
    /// `LengthMismatch` if a rank's count for itself is not its send length, or (naming
    /// the rank whose counts disagree) if a count for another rank is not that rank's send
    /// length; `Mismatch` if the collective or algorithm differs; `Unsupported` beyond 8190
    /// ranks on a node; a transport error or a peer's failure.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.7 (`MPI_Allgatherv`).
    pub fn all_gather_varcount_into<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
    ) -> Result<()> {
        self.all_gather_varcount_into_with(send, recv, counts, displs, AllgathervAlgorithm::Auto)
    }

    /// [`all_gather_varcount_into`](Self::all_gather_varcount_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `all_gather_varcount_into`.
    pub fn all_gather_varcount_into_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
        algorithm: AllgathervAlgorithm,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        let elem = std::mem::size_of::<T>();
        let ctx = self.ctx();
        if self.hier.nodes() > 1 {
            let (h, p) = (&self.hier, &self.parent);
            return coll::allgatherv::allgatherv_hier(
                h, p, &ctx, send, recv, counts, displs, elem, algorithm,
            );
        }
        coll::allgatherv::allgatherv(&ctx, send, recv, counts, displs, elem, algorithm)
    }

    /// [`all_gather_varcount_into`](Self::all_gather_varcount_into) with the receive blocks
    /// given as a [`PartitionMut`], as rsmpi's `all_gather_varcount_into` takes them.
    ///
    /// # Errors
    ///
    /// As `all_gather_varcount_into`.
    pub fn all_gather_partition_into<T: Pod>(
        &self,
        send: &[T],
        recv: &mut PartitionMut<'_, T>,
    ) -> Result<()> {
        let (buf, counts, displs) = recv.parts();
        self.all_gather_varcount_into(send, buf, counts, displs)
    }

    /// Sends every rank its own block and receives one from every rank: this rank's block
    /// for rank `r` is `send_counts[r]` elements from `send_displs[r]` of `send`, and rank
    /// `r`'s block for this rank lands at `recv_displs[r]` of `recv`, `recv_counts[r]`
    /// elements long (which must be the bytes `r` sends). Receive blocks must not overlap.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (me, p) = (comm.rank(), comm.size());
    /// // Rank q sends q + 1 elements to every rank.
    /// let send = vec![me as i64; (me as usize + 1) * p as usize];
    /// let send_counts = vec![me + 1; p as usize];
    /// let send_displs: Vec<i32> = (0..p).map(|r| r * (me + 1)).collect();
    /// let recv_counts: Vec<i32> = (0..p).map(|q| q + 1).collect();
    /// let recv_displs: Vec<i32> = (0..p).map(|q| q * (q + 1) / 2).collect();
    /// let mut recv = vec![0i64; (p * (p + 1) / 2) as usize];
    /// comm.all_to_all_varcount_into(&send, &send_counts, &send_displs, &mut recv, &recv_counts, &recv_displs)?;
    /// assert_eq!(recv[0], 0);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank: `BufferSize` (naming the rank at fault) if a count or displacement
    /// array has not `size()` entries or a block ends past its buffer, `InvalidPartition` for
    /// a negative count or displacement or overlapping receive blocks, `LengthMismatch` if
    /// a rank's receive count for itself differs from its send count for itself, or (naming
    /// the receiving rank) if a receive count is not the bytes its sender sends; `Mismatch`
    /// if the collective or algorithm differs; `Unsupported` beyond 4094 ranks on a node; a
    /// transport error or a peer's failure.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.8 (`MPI_Alltoallv`).
    pub fn all_to_all_varcount_into<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[Count],
        send_displs: &[Count],
        recv: &mut [T],
        recv_counts: &[Count],
        recv_displs: &[Count],
    ) -> Result<()> {
        let sides = Sides { send_counts, send_displs, recv_counts, recv_displs };
        self.alltoallv_bytes(send, recv, sides, AlltoallvAlgorithm::Auto)
    }

    /// [`all_to_all_varcount_into`](Self::all_to_all_varcount_into) with a chosen algorithm.
    ///
    /// # Errors
    ///
    /// As `all_to_all_varcount_into`.
    #[allow(clippy::too_many_arguments)] // rsmpi's six arguments and the algorithm
    pub fn all_to_all_varcount_into_with<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[Count],
        send_displs: &[Count],
        recv: &mut [T],
        recv_counts: &[Count],
        recv_displs: &[Count],
        algorithm: AlltoallvAlgorithm,
    ) -> Result<()> {
        let sides = Sides { send_counts, send_displs, recv_counts, recv_displs };
        self.alltoallv_bytes(send, recv, sides, algorithm)
    }

    /// [`all_to_all_varcount_into`](Self::all_to_all_varcount_into) with the blocks given as
    /// a [`Partition`] and a [`PartitionMut`], as rsmpi's `all_to_all_varcount_into` takes
    /// them.
    ///
    /// # Errors
    ///
    /// As `all_to_all_varcount_into`.
    pub fn all_to_all_partition_into<T: Pod>(
        &self,
        send: &Partition<'_, T>,
        recv: &mut PartitionMut<'_, T>,
    ) -> Result<()> {
        let (buf, recv_counts, recv_displs) = recv.parts();
        let sides =
            Sides { send_counts: send.counts(), send_displs: send.displs(), recv_counts, recv_displs };
        self.alltoallv_bytes(send.buf(), buf, sides, AlltoallvAlgorithm::Auto)
    }

    fn alltoallv_bytes<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        sides: Sides<'_>,
        algorithm: AlltoallvAlgorithm,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        let elem = std::mem::size_of::<T>();
        let ctx = self.ctx();
        if self.hier.nodes() > 1 {
            let (h, p) = (&self.hier, &self.parent);
            return coll::alltoallv::alltoallv_hier(h, p, &ctx, send, recv, sides, elem, algorithm);
        }
        coll::alltoallv::alltoallv(&ctx, send, recv, sides, elem, algorithm)
    }

    fn scatterv_bytes(
        &self,
        bufs: ScattervBufs<'_>,
        root: Rank,
        elem: usize,
        algorithm: ScatterAlgorithm,
    ) -> Result<()> {
        let ctx = self.ctx();
        if self.hier.nodes() > 1 {
            return coll::scatterv::scatterv_hier(
                &self.hier,
                &self.parent,
                &ctx,
                bufs,
                root,
                elem,
                algorithm,
            );
        }
        coll::scatterv::scatterv(&ctx, bufs, root, self.hier.local_of(root), elem, algorithm)
    }

    fn gatherv_bytes(
        &self,
        bufs: GathervBufs<'_>,
        root: Rank,
        elem: usize,
        algorithm: GatherAlgorithm,
    ) -> Result<()> {
        let ctx = self.ctx();
        if self.hier.nodes() > 1 {
            return coll::gatherv::gatherv_hier(&self.hier, &self.parent, &ctx, bufs, root, elem, algorithm);
        }
        coll::gatherv::gatherv(&ctx, bufs, root, self.hier.local_of(root), elem, algorithm)
    }
}
