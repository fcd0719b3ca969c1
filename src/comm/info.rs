//! [`Info`]: what a communicator set up; [`Traffic`]: what it moved.

use crate::transport::TransportKind;
use mpi::topology::Rank;
use std::fmt;

/// What [`Comm::new`](crate::Comm::new) set up, as seen from one rank.
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
    /// Whether buffers in the shared heap ([`Comm::alloc`](crate::Comm::alloc), [`ShmAlloc`](crate::ShmAlloc))
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
    /// How a collective's rounds await the arrival of the node's ranks: every rank polls
    /// every other (`flat`), or a tree of flags of fan-in `k` (`tree:k`), as the cost
    /// model chose for the node's size or `ZCOLL_ARRIVAL` asked.
    pub arrival: crate::tune::Flags,
    /// How the calls of an [`immediate_scope`](crate::Comm::immediate_scope) progress: a
    /// worker thread, or only in `wait` and `test` (`ZCOLL_PROGRESS`, and what MPI's
    /// thread level allows).
    pub progress: super::Progress,
}

/// How the collectives of a [`Comm`](crate::Comm) cross nodes: [`Info::inter_node`].
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
        writeln!(f, "  arrivals   {}", self.arrival)?;
        writeln!(f, "  progress   {}", self.progress)?;
        write!(f, "  tuning     {}", self.tuning)
    }
}

/// Bytes one rank moved with single copies, by transport: see [`Comm::traffic`](crate::Comm::traffic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Traffic {
    /// Through Cross Memory Attach.
    pub cma: u64,
    /// With loads and stores on peers' shared heaps.
    pub heap: u64,
    /// With loads and stores on attached XPMEM windows.
    pub xpmem: u64,
    /// Layout collectives that copied straight between the ranks' layouts (no packing).
    pub layout_direct: u64,
    /// Peers' flattened layouts read by those calls: one per peer and layout first seen.
    pub layout_lists: u64,
    /// Layout collectives that packed, called the contiguous collective and unpacked.
    pub layout_packed: u64,
}
