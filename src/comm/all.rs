//! Allgather and alltoall: every rank to every rank, in blocks of one length.

use super::{Comm, Route};
use crate::coll;
use crate::coll::allgather::AllgatherAlgorithm;
use crate::coll::alltoall::AlltoallAlgorithm;
use crate::error::Result;
use crate::pod::Pod;

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
        let elem = std::mem::size_of::<T>();
        route!(self, coll::allgather::allgather[Some(send), recv, algorithm, elem], allgather[Some(send), recv, algorithm, elem])
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
    /// rank's `buf` has another length, or a number of elements that is not a multiple of
    /// `size()` (lengths in the error are in bytes).
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
        let elem = std::mem::size_of::<T>();
        route!(self, coll::allgather::allgather[None, buf, algorithm, elem], allgather[None, buf, algorithm, elem])
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
    /// `send` or `recv` is not `size()` blocks of rank 0's block length, each block whole
    /// elements (lengths in the error are in bytes); `Error::Mismatch` if ranks called
    /// another collective, or with elements of another size. A transport error or a
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
    /// may leave blocks from agreeing peers in a receive buffer (never in a send buffer,
    /// nor in the buffer of a rank whose call agrees with nobody's); see the book's
    /// arrival chapter.
    pub fn all_to_all_into_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        algorithm: AlltoallAlgorithm,
    ) -> Result<()> {
        let (send, recv): (&[u8], &mut [u8]) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        let elem = std::mem::size_of::<T>();
        route!(self, coll::alltoall::alltoall[send, recv, algorithm, elem], alltoall[send, recv, algorithm, elem])
    }
}
