//! The variable-count collectives: every rank's block has its own length and place.

use super::{Comm, Route};
use crate::coll;
use crate::coll::allgatherv::AllgathervAlgorithm;
use crate::coll::alltoallv::{AlltoallvAlgorithm, Sides};
use crate::coll::gather::GatherAlgorithm;
use crate::coll::gatherv::GathervBufs;
use crate::coll::scatter::ScatterAlgorithm;
use crate::coll::scatterv::ScattervBufs;
use crate::coll::varcount::{Exchange, Given, Partition, PartitionMut};
use crate::error::Result;
use crate::pod::Pod;
use mpi::topology::Rank;
use mpi::Count;

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
    /// another length in bytes than its count; `Unsupported` beyond 4095 ranks on a node;
    /// a transport error or a peer's failure during the copy.
    ///
    /// A root whose bytes travel with its arrival (a small call on one node) may return
    /// `Ok` before the others have checked the call; if they fail it, this rank's next call
    /// on the communicator fails on every rank with `Error::PreviousFailed` (the deferred
    /// verdict: the book's safety chapter). A leaf's
    /// `LengthMismatch` and a leaf naming another root are such failures: what the root
    /// checks alone (its partition, its own block) it reports in the call.
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
    /// `Unsupported` beyond 4095 ranks on a node; a transport error or a peer's failure.
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
    ///
    /// A rank whose block travels with its arrival (a small call on one node) may return
    /// `Ok` before the root has checked the call; if the root fails it, this rank's next call
    /// on the communicator fails on every rank with `Error::PreviousFailed` (the deferred
    /// verdict: the book's safety chapter).
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
    /// length; `Mismatch` if the collective or algorithm differs; `Unsupported` beyond 4095
    /// ranks on a node; a transport error or a peer's failure. One exception: a call
    /// inside one node whose blocks move in one phase (small blocks) judges a count for
    /// another rank only on the rank that holds it, which fails with `LengthMismatch`,
    /// while the others return `Ok` with their results; the next call on the communicator
    /// then fails on every rank with `PreviousFailed`.
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
        let call = Exchange { send, recv, parts: Given { counts, displs }, elem, algorithm };
        route!(self, coll::allgatherv::allgatherv[call], allgatherv[call])
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
    /// if the collective or algorithm differs; `Unsupported` beyond 1364 ranks on a node; a
    /// transport error or a peer's failure. One exception: a call inside one node whose
    /// blocks move in one phase (small blocks) judges a receive count from another rank
    /// only on the receiver, which fails with `LengthMismatch`, while the others return
    /// `Ok` with their results; the next call on the communicator then fails on every rank
    /// with `PreviousFailed`.
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
        let call = Exchange { send, recv, parts: sides, elem, algorithm };
        route!(self, coll::alltoallv::alltoallv[call], alltoallv[call])
    }
}
