//! [`Comm`]: the user's handle, built over any rsmpi communicator.

use crate::coll::allgather::{allgather_hier, AllgatherAlgorithm};
use crate::coll::alltoall::{alltoall_hier, AlltoallAlgorithm};
use crate::coll::{self, bcast::BcastAlgorithm, Ctx};
use crate::error::Result;
use crate::hier::Hierarchy;
use crate::node::{NodeComm, Split};
use crate::sync::wait::WaitPolicy;
use crate::transport::TransportKind;
use crate::Pod;
use mpi::topology::{Communicator, Rank, SimpleCommunicator};
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
pub struct Comm {
    parent: SimpleCommunicator,
    node: NodeComm,
    hier: Hierarchy,
    info: Info,
}

impl Comm {
    /// Builds a zero-copy communicator over `comm`. Collective over `comm`.
    ///
    /// It splits `comm` into nodes (by shared memory, or into virtual nodes of `k`
    /// consecutive ranks with `ZCOLL_NODE_SIZE=k`), exchanges process ids, maps each node's
    /// control segment, and decides each node's transport: `cma` if every rank of the node
    /// may read every other with `process_vm_readv`, else `cico`
    /// (`ZCOLL_TRANSPORT=cma|cico` forces one).
    ///
    /// # Errors
    ///
    /// `Error::Config` for an environment variable zcoll cannot read, `Error::Segment` if
    /// the control segment cannot be created or mapped, `Error::Unsupported` if
    /// `ZCOLL_TRANSPORT=cma` is set where the kernel refuses CMA.
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
        let (split, _) = (split?, policy?);
        let node = node?;
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
            segment_bytes: node.ctl.segment_bytes(),
            stage_bytes: node.ctl.stage_bytes(),
            virtual_nodes: match split {
                Split::Virtual(k) => Some(k),
                Split::Shared => None,
            },
        };
        Ok(Comm { parent, node, hier, info })
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

    fn ctx(&self) -> Ctx<'_> {
        Ctx { ctl: &self.node.ctl, transport: self.node.transport, comm_size: self.info.size }
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
        coll::bcast::bcast(&self.ctx(), bytes, root, self.hier.local_of(root), algorithm)
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
    /// The control segment's size in bytes.
    pub segment_bytes: usize,
    /// Its staging bytes per rank (the copy-in/copy-out area).
    pub stage_bytes: usize,
    /// `Some(k)` when nodes are virtual (`ZCOLL_NODE_SIZE=k`).
    pub virtual_nodes: Option<usize>,
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
        write!(
            f,
            "  segment    {} bytes ({} KiB staging per rank)",
            self.segment_bytes,
            self.stage_bytes / 1024
        )
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
        let buf = bytemuck::cast_slice_mut(buf);
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
    /// [`AlltoallAlgorithm::Staged`]; across nodes the algorithm is checked but the
    /// two-level composition moves the data.
    ///
    /// # Errors
    ///
    /// As `all_to_all_into`, and `Error::Mismatch` if ranks chose different algorithms.
    pub fn all_to_all_into_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        algorithm: AlltoallAlgorithm,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        if self.hier.nodes() > 1 {
            return alltoall_hier(&self.hier, &self.parent, &self.ctx(), send, recv, algorithm);
        }
        coll::alltoall::alltoall(&self.ctx(), send, recv, algorithm)
    }
}
