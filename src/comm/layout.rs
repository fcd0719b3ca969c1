//! Collectives over non-contiguous [`Layout`]s: alltoall, allgather, bcast, gather and
//! scatter; and, with a layout per rank, alltoall, allgather, gather and scatter (the
//! `*_layouts_*` calls, MPI's `*w`/`*v` with a datatype per block), which take the same
//! two paths, with one flattened list per peer on the side that has a layout per rank.
//!
//! Each takes a buffer with the layout that says which of its elements take part, as
//! rsmpi's `View`/`MutView` pair a buffer with a datatype and a count; the layout is
//! passed beside the buffer (not in a wrapper type) so that a call reads like the
//! contiguous one it extends, and so that one layout value serves every buffer it fits.
//! As in MPI with a count of 1 per rank, the `k`-th block of a buffer holding one block
//! per rank is the layout shifted by `k` times its extent
//! ([`Layout::contiguous_of`]`(size, layout)`); [`Layout::resized`] sets the extent where
//! blocks interleave (the columns of a transpose).
//!
//! **Two paths.** A call first checks every rank's layouts (one small allreduce agrees on
//! the verdict, so a bad layout is the same `Err` on every rank before anything moves,
//! and on the numbers the choice of path is made from). Then, as [`LayoutAlgorithm`]
//! says (by default the cost model, from the block size and the fragment counts):
//!
//! - `direct`, on a communicator that is one node: every reader copies straight from
//!   each peer's send layout into its own receive layout (`coll::layout`: CMA with iovec
//!   lists on both sides, or loads and stores where the peer's buffer is mapped), with the
//!   flattened layouts memoized per peer, so that a repeated call reads none;
//! - `packed` (and every call across nodes, and on a `cico` node): pack the send side
//!   into a contiguous scratch buffer (in the shared heap where the node's ranks map each
//!   other's heaps; kept for the next call of the same length), call the contiguous
//!   collective over bytes, with all its checks, and unpack: two extra local copies
//!   (`2 n β_memcpy`), as rsmpi's derived datatypes make. Both copies walk the layouts'
//!   memoized runs (`layout::runs`), not a flattening per call.

use super::{Comm, Route};
use crate::alloc::Scratch;
use crate::coll::algorithm::Algorithm as _;
use crate::coll::layout::{self as engine, Bufs, Flat, LayoutAlgorithm, Shape, Sides, Which};
use crate::coll::rooted::ROLE;
use crate::error::{Error, Result};
use crate::layout::runs::Runs;
use crate::layout::{Layout, COUNTS, PER_RANK, REASONS};
use crate::op::Builtin;
use crate::pod::Pod;
use crate::sync::copy_runs;
use crate::tune::model::LAYOUT_MIN_BYTES;
use mpi::topology::Rank;
use mpi::Count;
use std::ops::Range;
use std::sync::Arc;

/// The layouts a rank can get wrong, by their index in the agreement word.
const WHICH: [&str; 2] = ["send", "receive"];

/// The index in the agreement word of a rank that called the wrong one of a rooted
/// call's two methods ([`Comm::role`]).
const ROLE_WORD: u64 = 2;

impl Comm {
    /// Alltoall over layouts: block `k` of `send` (the elements of `send_layout` shifted
    /// by `k` times its extent) goes to rank `k`, where it lands in block `me` of its
    /// `recv` (`recv_layout` shifted by `me` times its extent), element by element in
    /// type-map order (`MPI_Alltoall` with a count of 1 and these derived datatypes).
    ///
    /// The two layouts may differ (a transpose sends columns and receives rows) but must
    /// select the same number of elements, on every rank.
    ///
    /// # Examples
    ///
    /// The transpose of an `n` x `n` matrix whose rows are split among `p` ranks: each
    /// rank sends the `k`-th `b`-column block of its `b` rows to rank `k`, which stores
    /// it transposed.
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let b = 4; // rows per rank
    /// let n = b * p;
    /// // My rows r: element (r, c) at r * n + c holds the global (me * b + r, c).
    /// let a: Vec<f64> = (0..b * n).map(|i| ((me * b + i / n) * n + i % n) as f64).collect();
    /// // Block k: b rows of b columns starting at column k * b; blocks start b apart.
    /// let send = Layout::vector(b, b, n as isize)?.resized(b)?;
    /// // Received from rank k: its b x b block, stored transposed at columns k * b.
    /// let column = Layout::vector(b, 1, n as isize)?.resized(1)?; // one column
    /// let recv = Layout::contiguous_of(b, &column)?.resized(b)?;
    /// let mut t = vec![0.0; b * n];
    /// comm.all_to_all_layout_into(&a, &send, &mut t, &recv)?;
    /// // t holds rows me * b .. of the transpose: t[r][c] = a_global[c][me * b + r].
    /// assert!((0..b * n).all(|i| t[i] == ((i % n) * n + me * b + i / n) as f64));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `send_layout` reaches outside `send` (over all `size()` blocks), whose
    /// `recv_layout` reaches outside `recv` or writes an element twice, or whose two
    /// layouts select different numbers of elements; `Error::LengthMismatch` if ranks'
    /// blocks differ in size; `Error::Mismatch` if ranks called different collectives
    /// or asked for different algorithms (`ZCOLL_LAYOUT_ALGORITHM`).
    /// A transport error or a peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.8 (`MPI_Alltoall`), 5.1 (derived datatypes).
    pub fn all_to_all_layout_into<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
    ) -> Result<()> {
        self.all_to_all_layout_into_with(send, send_layout, recv, recv_layout, LayoutAlgorithm::Auto)
    }

    /// [`all_to_all_layout_into`](Self::all_to_all_layout_into) with the algorithm named:
    /// `Direct` copies straight between the layouts on a communicator of one node (and
    /// packs across nodes or on a `cico` node), `Packed` packs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let every_other = Layout::vector(4, 1, 2)?; // 4 elements out of 8 per block
    /// let send: Vec<u32> = (0..8 * p as u32).collect();
    /// let mut recv = vec![0u32; 4 * p];
    /// let packed = Layout::contiguous(4)?;
    /// comm.all_to_all_layout_into_with(&send, &every_other, &mut recv, &packed, LayoutAlgorithm::Direct)?;
    /// let me = comm.rank() as u32;
    /// assert!((0..4 * p).all(|i| recv[i] == 8 * me + 2 * (i as u32 % 4)));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`all_to_all_layout_into`](Self::all_to_all_layout_into); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn all_to_all_layout_into_with<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let p = self.size() as usize;
        let sends = Layout::contiguous_of(p, send_layout).map_err(|e| (0, e));
        let recvs = Layout::contiguous_of(p, recv_layout).map_err(|e| (1, e));
        let local = (|| {
            let (sends, recvs) = (sends?, recvs?);
            sends.check(send.len()).map_err(|e| (0, e))?;
            self.check_writable(&recvs, recv.len()).map_err(|e| (1, e))?;
            same_count(send_layout, recv_layout)?;
            Ok((sends, recvs))
        })();
        let shape = self.shape_of(local.is_ok(), send, send_layout, recv_layout);
        let (_checked, shape) = self.agree_on_layouts(local, shape, algorithm)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct::<T>(Which::Alltoall, (0, 0), bufs, send_layout, recv_layout);
        }
        let (s, r) = self.flats::<T>(send_layout, recv_layout);
        let n = s.bytes();
        let recv: &mut [u8] = bytemuck::cast_slice_mut(recv);
        let moved = match self.reads_packed(shape)? {
            true => self.all_to_all_read_packed(bytemuck::cast_slice(send), &s, recv, &r),
            false => self.packed_with(bytemuck::cast_slice(send), &s, 0..p, n, |packed| {
                self.unpacked_with(recv, &r, 0..p, n, |got| self.all_to_all_into(packed, got))
            }),
        };
        self.count_packed(&moved);
        moved
    }

    /// Allgather over layouts: the elements `send_layout` selects in `send` go to every
    /// rank, where rank `k`'s land in block `k` of `recv` (`recv_layout` shifted by `k`
    /// times its extent), in type-map order (`MPI_Allgather` with a count of 1 and these
    /// derived datatypes).
    ///
    /// # Examples
    ///
    /// Gathering one column of every rank's 3 x 3 matrix into the columns of a 3 x `p`
    /// matrix:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mine: Vec<i32> = (0..9).map(|i| i + 10 * comm.rank()).collect();
    /// let second_column = Layout::indexed(&[1, 1, 1], &[1, 4, 7])?;
    /// let column_of_all = Layout::vector(3, 1, p as isize)?.resized(1)?;
    /// let mut all = vec![0; 3 * p];
    /// comm.all_gather_layout_into(&mine, &second_column, &mut all, &column_of_all)?;
    /// assert!((0..3 * p).all(|i| all[i] == (1 + 3 * (i / p) + 10 * (i % p)) as i32));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `send_layout` reaches outside `send`, whose `recv_layout` (over all
    /// `size()` blocks) reaches outside `recv` or writes an element twice, or whose two
    /// layouts select different numbers of elements; `Error::LengthMismatch` if ranks'
    /// blocks differ in size; `Error::Mismatch` if ranks called different collectives
    /// or asked for different algorithms (`ZCOLL_LAYOUT_ALGORITHM`).
    /// A transport error or a peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.7 (`MPI_Allgather`), 5.1 (derived datatypes).
    pub fn all_gather_layout_into<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
    ) -> Result<()> {
        self.all_gather_layout_into_with(send, send_layout, recv, recv_layout, LayoutAlgorithm::Auto)
    }

    /// [`all_gather_layout_into`](Self::all_gather_layout_into) with the algorithm named
    /// (see [`all_to_all_layout_into_with`](Self::all_to_all_layout_into_with)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mine = [comm.rank(); 6];
    /// let mut all = vec![-1; 2 * p];
    /// let (two, pair) = (Layout::vector(2, 1, 3)?, Layout::contiguous(2)?);
    /// comm.all_gather_layout_into_with(&mine, &two, &mut all, &pair, LayoutAlgorithm::Direct)?;
    /// assert!((0..2 * p).all(|i| all[i] == (i / 2) as i32));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`all_gather_layout_into`](Self::all_gather_layout_into); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn all_gather_layout_into_with<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let p = self.size() as usize;
        let recvs = Layout::contiguous_of(p, recv_layout).map_err(|e| (1, e));
        let local = (|| {
            let recvs = recvs?;
            send_layout.check(send.len()).map_err(|e| (0, e))?;
            self.check_writable(&recvs, recv.len()).map_err(|e| (1, e))?;
            same_count(send_layout, recv_layout)?;
            Ok(recvs)
        })();
        let shape = self.shape_of(local.is_ok(), send, send_layout, recv_layout);
        let (_checked, shape) = self.agree_on_layouts(local, shape, algorithm)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct::<T>(Which::Allgather, (0, 0), bufs, send_layout, recv_layout);
        }
        let (s, r) = self.flats::<T>(send_layout, recv_layout);
        let n = s.bytes();
        let recv: &mut [u8] = bytemuck::cast_slice_mut(recv);
        let moved = match self.reads_packed(shape)? {
            true => self.packed_with(bytemuck::cast_slice(send), &s, 0..1, n, |packed| {
                self.read_packed(Which::Allgather, (0, 0), Bufs::Two(packed, recv), &r, None)
            }),
            false => self.packed_with(bytemuck::cast_slice(send), &s, 0..1, n, |packed| {
                self.unpacked_with(recv, &r, 0..p, n, |got| self.all_gather_into(packed, got))
            }),
        };
        self.count_packed(&moved);
        moved
    }

    /// Broadcast over a layout: the elements `layout` selects in the root's `buf` are
    /// written, in type-map order, to the elements every other rank's `layout` selects in
    /// its `buf` (`MPI_Bcast` with a count of 1 and this derived datatype). Ranks may pass
    /// different layouts that select the same number of elements.
    ///
    /// Unlike MPI, the root's layout too must not select an element twice: the same
    /// layout serves as send and receive side, and is checked once on every rank.
    ///
    /// # Examples
    ///
    /// The boundary column of the root's 4 x 4 grid into every rank's:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut grid = [0u8; 16];
    /// if comm.rank() == 0 {
    ///     grid = *b"abcdefghijklmnop";
    /// }
    /// let last_column = Layout::subarray(&[4, 4], &[4, 1], &[0, 3])?;
    /// comm.broadcast_layout_into(&mut grid, &last_column, 0)?;
    /// assert_eq!(last_column.pack(&grid)?, b"dhlp");
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `layout` reaches outside `buf` or selects an element twice;
    /// `Error::InvalidRoot`, `Error::Mismatch` and `Error::LengthMismatch` as
    /// [`broadcast_into`](Self::broadcast_into) (with the layouts' bytes as lengths). A
    /// transport error or a peer's failure during the copy. `buf` is unchanged by every
    /// error found before the copy; one during it may leave it partly written.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.4 (`MPI_Bcast`), 5.1 (derived datatypes).
    pub fn broadcast_layout_into<T: Pod>(&self, buf: &mut [T], layout: &Layout, root: Rank) -> Result<()> {
        self.broadcast_layout_into_with(buf, layout, root, LayoutAlgorithm::Auto)
    }

    /// [`broadcast_layout_into`](Self::broadcast_layout_into) with the algorithm named
    /// (see [`all_to_all_layout_into_with`](Self::all_to_all_layout_into_with)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let mut grid = [comm.rank() as u8; 16];
    /// let first_row = Layout::subarray(&[4, 4], &[1, 4], &[0, 0])?;
    /// comm.broadcast_layout_into_with(&mut grid, &first_row, 0, LayoutAlgorithm::Direct)?;
    /// assert_eq!(grid[..4], [0; 4]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`broadcast_layout_into`](Self::broadcast_layout_into); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn broadcast_layout_into_with<T: Pod>(
        &self,
        buf: &mut [T],
        layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let local = self.check_writable(layout, buf.len()).map_err(|e| (1, e));
        let shape = self.shape_of(local.is_ok(), buf, layout, layout);
        let ((), shape) = self.agree_on_layouts(local.map(drop), shape, algorithm)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::One(bytemuck::cast_slice_mut(buf));
            return self.run_direct::<T>(Which::Bcast, (root, self.local_of(root)), bufs, layout, layout);
        }
        let (flat, _) = self.flats::<T>(layout, layout);
        let n = flat.bytes();
        if self.reads_packed(shape)? {
            return self.broadcast_read_packed(bytemuck::cast_slice_mut(buf), &flat, root);
        }
        if flat.dense() && (self.rank() != root || self.sends_in_place(bytemuck::cast_slice(buf))) {
            // The layout's elements are the buffer's first `n` bytes: no packing.
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
            let moved = self.broadcast_into(bytes.get_mut(..n).ok_or_else(|| outside("receive"))?, root);
            self.count_packed(&moved);
            return moved;
        }
        let mut packed = match self.rank() == root {
            true => self.pack(bytemuck::cast_slice(buf), &flat, 0..1, n)?,
            false => self.scratch(n),
        };
        let moved = self.broadcast_into(&mut packed[..], root);
        let moved = match self.rank() == root {
            true => moved,
            false => moved.and_then(|()| unpack(&packed, &flat, 0..1, n, bytemuck::cast_slice_mut(buf))),
        };
        self.keep(packed);
        self.count_packed(&moved);
        moved
    }

    /// Gather over layouts, on the root: the elements every rank's `send_layout` selects
    /// in its `send` land in block `k` of the root's `recv` (`recv_layout` shifted by `k`
    /// times its extent) for rank `k`, in type-map order (`MPI_Gather` with a count of 1
    /// and these derived datatypes; DDTBench's column gather). The other ranks call
    /// [`gather_layout_into`](Self::gather_layout_into).
    ///
    /// # Examples
    ///
    /// The first column of every rank's 4 x 4 row-major matrix, as the rows of the root's
    /// `p` x 4 matrix:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mine: Vec<f64> = (0..16).map(|i| (i + 100 * comm.rank()) as f64).collect();
    /// let column = Layout::vector(4, 1, 4)?;
    /// if comm.rank() == 0 {
    ///     let mut rows = vec![0.0; 4 * p];
    ///     comm.gather_layout_into_root(&mine, &column, &mut rows, &Layout::contiguous(4)?, 0)?;
    ///     assert!((0..4 * p).all(|i| rows[i] == (4 * (i % 4) + 100 * (i / 4)) as f64));
    /// } else {
    ///     comm.gather_layout_into(&mine, &column, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `send_layout` reaches outside `send`, or, on the root, whose
    /// `recv_layout` (over all `size()` blocks) reaches outside `recv` or writes an
    /// element twice, or selects another number of elements than its `send_layout`;
    /// `Error::InvalidRoot`, `Error::Mismatch` and `Error::LengthMismatch` as
    /// [`gather_into_root`](Self::gather_into_root) (lengths in bytes). A transport error
    /// or a peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.5 (`MPI_Gather`), 5.1 (derived datatypes).
    pub fn gather_layout_into_root<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        self.gather_layout_into_root_with(send, send_layout, recv, recv_layout, root, LayoutAlgorithm::Auto)
    }

    /// [`gather_layout_into_root`](Self::gather_layout_into_root) with the algorithm
    /// named (see [`all_to_all_layout_into_with`](Self::all_to_all_layout_into_with)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mine = [comm.rank(); 6];
    /// let two = Layout::vector(2, 1, 3)?;
    /// if comm.rank() == 0 {
    ///     let mut all = vec![-1; 2 * p];
    ///     let pair = Layout::contiguous(2)?;
    ///     comm.gather_layout_into_root_with(&mine, &two, &mut all, &pair, 0, LayoutAlgorithm::Packed)?;
    ///     assert!((0..2 * p).all(|i| all[i] == (i / 2) as i32));
    /// } else {
    ///     comm.gather_layout_into_with(&mine, &two, 0, LayoutAlgorithm::Packed)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`gather_layout_into_root`](Self::gather_layout_into_root); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn gather_layout_into_root_with<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        self.gather_layout(send, send_layout, Some((recv, recv_layout)), root, algorithm)
    }

    /// Gather over layouts, on a rank other than the root: sends the elements
    /// `send_layout` selects in `send` (see
    /// [`gather_layout_into_root`](Self::gather_layout_into_root)).
    ///
    /// # Examples
    ///
    /// See [`gather_layout_into_root`](Self::gather_layout_into_root).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, column) = (comm.size() as usize, Layout::vector(3, 1, 3)?);
    /// let mine = [comm.rank(); 9];
    /// if comm.rank() == 0 {
    ///     let mut all = vec![-1; 3 * p];
    ///     comm.gather_layout_into_root(&mine, &column, &mut all, &Layout::contiguous(3)?, 0)?;
    /// } else {
    ///     comm.gather_layout_into(&mine, &column, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`gather_layout_into_root`](Self::gather_layout_into_root).
    pub fn gather_layout_into<T: Pod>(&self, send: &[T], send_layout: &Layout, root: Rank) -> Result<()> {
        self.gather_layout_into_with(send, send_layout, root, LayoutAlgorithm::Auto)
    }

    /// [`gather_layout_into`](Self::gather_layout_into) with the algorithm named.
    ///
    /// # Examples
    ///
    /// See [`gather_layout_into_root_with`](Self::gather_layout_into_root_with).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// if comm.rank() != 0 {
    ///     comm.gather_layout_into_with(&[1u8; 4], &Layout::vector(2, 1, 2)?, 0, LayoutAlgorithm::Direct)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`gather_layout_into_root`](Self::gather_layout_into_root); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn gather_layout_into_with<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        self.gather_layout(send, send_layout, None, root, algorithm)
    }

    /// The gather over layouts, on the root (with its receive side) or not.
    fn gather_layout<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: Option<(&mut [T], &Layout)>,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let p = self.size() as usize;
        let recv_layout = recv.as_ref().map_or(send_layout, |r| r.1);
        let local = (|| {
            self.role(recv.is_some(), root)?;
            send_layout.check(send.len()).map_err(|e| (0, e))?;
            if let Some((buf, l)) = &recv {
                let recvs = Layout::contiguous_of(p, l).map_err(|e| (1, e))?;
                self.check_writable(&recvs, buf.len()).map_err(|e| (1, e))?;
                same_count(send_layout, l)?;
            }
            Ok(())
        })();
        let shape = self.shape_of(local.is_ok(), send, send_layout, recv_layout);
        let ((), shape) = self.agree_on_layouts(local, shape, algorithm)?;
        let mut recv = recv.map(|(b, _)| b);
        if self.direct(algorithm, shape)? {
            let mut none = [0u8; 0];
            let dst: &mut [u8] = match &mut recv {
                Some(b) => bytemuck::cast_slice_mut(b),
                None => &mut none,
            };
            let bufs = Bufs::Two(bytemuck::cast_slice(send), dst);
            let at = (root, self.local_of(root));
            return self.run_direct::<T>(Which::Gather, at, bufs, send_layout, recv_layout);
        }
        let (s, r) = self.flats::<T>(send_layout, recv_layout);
        let n = s.bytes();
        let moved = self.packed_with(bytemuck::cast_slice(send), &s, 0..1, n, |packed| match recv {
            Some(buf) => self.unpacked_with(bytemuck::cast_slice_mut(buf), &r, 0..p, n, |got| {
                self.gather_into_root(packed, got, root)
            }),
            None => self.gather_into(packed, root),
        });
        self.count_packed(&moved);
        moved
    }

    /// Scatter over layouts, on the root: block `k` of the root's `send` (`send_layout`
    /// shifted by `k` times its extent) goes to rank `k`, where it lands on the elements
    /// that rank's `recv_layout` selects in its `recv`, in type-map order (`MPI_Scatter`
    /// with a count of 1 and these derived datatypes); the root's own block lands in its
    /// own `recv`. The other ranks call [`scatter_layout_into`](Self::scatter_layout_into).
    ///
    /// # Examples
    ///
    /// Column `k` of the root's 4 x `p` row-major matrix, as rank `k`'s 4 contiguous
    /// elements:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let mut column = [0u32; 4];
    /// let row = Layout::contiguous(4)?;
    /// if me == 0 {
    ///     let matrix: Vec<u32> = (0..4 * p as u32).collect();
    ///     // One column, then the next one element on: blocks one element apart.
    ///     let columns = Layout::vector(4, 1, p as isize)?.resized(1)?;
    ///     comm.scatter_layout_into_root(&matrix, &columns, &mut column, &row, 0)?;
    /// } else {
    ///     comm.scatter_layout_into(&mut column, &row, 0)?;
    /// }
    /// assert!((0..4).all(|i| column[i] as usize == i * p + me));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `recv_layout` reaches outside `recv` or writes an element twice, or, on
    /// the root, whose `send_layout` (over all `size()` blocks) reaches outside `send` or
    /// selects another number of elements than its `recv_layout`; `Error::Mismatch` if the
    /// root called [`scatter_layout_into`](Self::scatter_layout_into) or another rank this
    /// method (`what` is `"root/non-root method"`), or ranks called different
    /// collectives; `Error::InvalidRoot` and `Error::LengthMismatch` as
    /// [`scatter_into_root`](Self::scatter_into_root) (lengths in bytes). A transport
    /// error or a peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.6 (`MPI_Scatter`), 5.1 (derived datatypes).
    pub fn scatter_layout_into_root<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        self.scatter_layout_into_root_with(send, send_layout, recv, recv_layout, root, LayoutAlgorithm::Auto)
    }

    /// [`scatter_layout_into_root`](Self::scatter_layout_into_root) with the algorithm
    /// named (see [`all_to_all_layout_into_with`](Self::all_to_all_layout_into_with)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mut mine = [-1; 6];
    /// let two = Layout::vector(2, 1, 3)?; // elements 0 and 3
    /// if comm.rank() == 0 {
    ///     let all: Vec<i32> = (0..2 * p as i32).map(|i| i / 2).collect();
    ///     let pair = Layout::contiguous(2)?;
    ///     comm.scatter_layout_into_root_with(&all, &pair, &mut mine, &two, 0, LayoutAlgorithm::Direct)?;
    /// } else {
    ///     comm.scatter_layout_into_with(&mut mine, &two, 0, LayoutAlgorithm::Direct)?;
    /// }
    /// assert_eq!([mine[0], mine[3]], [comm.rank(); 2]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scatter_layout_into_root`](Self::scatter_layout_into_root); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn scatter_layout_into_root_with<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        self.scatter_layout(Some((send, send_layout)), recv, recv_layout, root, algorithm)
    }

    /// Scatter over layouts, on a rank other than the root: receives this rank's block of
    /// the root's `send` onto the elements `recv_layout` selects in `recv` (see
    /// [`scatter_layout_into_root`](Self::scatter_layout_into_root)).
    ///
    /// # Examples
    ///
    /// See [`scatter_layout_into_root`](Self::scatter_layout_into_root).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, column) = (comm.size() as usize, Layout::vector(3, 1, 3)?);
    /// let mut mine = [0u8; 9];
    /// if comm.rank() == 0 {
    ///     comm.scatter_layout_into_root(&vec![7u8; 3 * p], &Layout::contiguous(3)?, &mut mine, &column, 0)?;
    /// } else {
    ///     comm.scatter_layout_into(&mut mine, &column, 0)?;
    /// }
    /// assert_eq!(column.pack(&mine)?, [7; 3]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scatter_layout_into_root`](Self::scatter_layout_into_root).
    pub fn scatter_layout_into<T: Pod>(
        &self,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        self.scatter_layout_into_with(recv, recv_layout, root, LayoutAlgorithm::Auto)
    }

    /// [`scatter_layout_into`](Self::scatter_layout_into) with the algorithm named.
    ///
    /// # Examples
    ///
    /// See [`scatter_layout_into_root_with`](Self::scatter_layout_into_root_with).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// if comm.rank() != 0 {
    ///     let mut mine = [0u8; 4];
    ///     comm.scatter_layout_into_with(&mut mine, &Layout::vector(2, 1, 2)?, 0, LayoutAlgorithm::Packed)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scatter_layout_into_root`](Self::scatter_layout_into_root); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn scatter_layout_into_with<T: Pod>(
        &self,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        self.scatter_layout(None, recv, recv_layout, root, algorithm)
    }

    /// The scatter over layouts, on the root (with its send side) or not.
    fn scatter_layout<T: Pod>(
        &self,
        send: Option<(&[T], &Layout)>,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let p = self.size() as usize;
        let local = (|| {
            self.role(send.is_some(), root)?;
            if let Some((buf, l)) = send {
                let sends = Layout::contiguous_of(p, l).map_err(|e| (0, e))?;
                sends.check(buf.len()).map_err(|e| (0, e))?;
            }
            self.check_writable(recv_layout, recv.len()).map_err(|e| (1, e))?;
            match send {
                Some((_, l)) => same_count(l, recv_layout),
                None => Ok(()),
            }
        })();
        // The side read is the root's send layout: only the root weighs it.
        let shape = match send {
            Some((buf, l)) => self.shape_of(local.is_ok(), buf, l, recv_layout),
            None => {
                let [bytes, _, written, _] = self.shape_of(local.is_ok(), &*recv, recv_layout, recv_layout);
                [bytes, 0, written, 0]
            }
        };
        let ((), shape) = self.agree_on_layouts(local, shape, algorithm)?;
        // A non-root publishes its receive layout as its block (its bytes are checked
        // against the root's; nobody reads its list).
        let send_layout = send.map_or(recv_layout, |(_, l)| l);
        if self.direct(algorithm, shape)? {
            let src: &[u8] = send.map_or(&[], |(b, _)| bytemuck::cast_slice(b));
            let bufs = Bufs::Two(src, bytemuck::cast_slice_mut(recv));
            let at = (root, self.local_of(root));
            return self.run_direct::<T>(Which::Scatter, at, bufs, send_layout, recv_layout);
        }
        let (s, r) = self.flats::<T>(send_layout, recv_layout);
        let n = r.bytes();
        let moved = self.unpacked_with(bytemuck::cast_slice_mut(recv), &r, 0..1, n, |got| match send {
            Some((buf, _)) => self.packed_with(bytemuck::cast_slice(buf), &s, 0..p, n, |packed| {
                self.scatter_into_root(packed, got, root)
            }),
            None => self.scatter_into(got, root),
        });
        self.count_packed(&moved);
        moved
    }

    /// Alltoall with a layout per peer (`MPI_Alltoallw` with counts of 1 and
    /// displacements of 0): the elements `send_layouts[k]` selects in `send` go to rank
    /// `k`, where they land on the elements its `recv_layouts[me]` selects in its `recv`,
    /// in type-map order. Each layout places its elements from the start of its buffer
    /// (as MPI's datatypes with a displacement of 0); a rank that sends a peer nothing
    /// passes an empty layout (`Layout::contiguous(0)`). The faces of a 3D grid are
    /// subarrays, one per neighbour.
    ///
    /// On a communicator of one node, each rank reads every peer's block for it straight
    /// into its receive layout for that peer (the peers' flattened layouts memoized, as
    /// in [`all_to_all_layout_into`](Self::all_to_all_layout_into)); else, or where the
    /// cost model finds the fragments too small (`ZCOLL_LAYOUT_ALGORITHM` forces a path),
    /// it packs: each send layout into its part of a scratch buffer, the contiguous
    /// [`all_to_all_varcount_into`](Self::all_to_all_varcount_into) over bytes, and each
    /// receive layout unpacked from its part, from the memoized runs of the layouts.
    ///
    /// # Examples
    ///
    /// Every rank sends rank `k` the `k`-th row of its `p` x 3 matrix and stores rank
    /// `k`'s row as its own matrix's `k`-th column (a transpose by rows and columns):
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let rows: Vec<Layout> = (0..p).map(|k| Layout::subarray(&[p, 3], &[1, 3], &[k, 0])).collect::<Result<_, _>>()?;
    /// let cols: Vec<Layout> = (0..p).map(|k| Layout::subarray(&[3, p], &[3, 1], &[0, k])).collect::<Result<_, _>>()?;
    /// let mine: Vec<usize> = (0..3 * p).map(|i| 1000 * me + i).collect();
    /// let mut got = vec![0usize; 3 * p];
    /// comm.all_to_all_layouts_into(&mine, &rows, &mut got, &cols)?;
    /// // Column k of `got` is row `me` of rank k's matrix.
    /// assert!((0..3 * p).all(|i| got[i] == 1000 * (i % p) + 3 * me + i / p));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank that passed other than `size()` layouts on a side, a send layout that reaches
    /// outside `send`, or receive layouts that reach outside `recv`, select an element
    /// twice or overlap each other; `Error::LengthMismatch` (lengths in bytes) if rank `k`'s
    /// `send_layouts[j]` and rank `j`'s `recv_layouts[k]` select different numbers of
    /// elements, as [`all_to_all_varcount_into`](Self::all_to_all_varcount_into);
    /// `Error::Count` if a block's bytes do not fit MPI's `int`. A transport error or a
    /// peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls. One exception, as
    /// in `all_to_all_varcount_into`: on the packed path with small blocks inside one node,
    /// a count that disagrees is judged only by its receiver, which fails with
    /// `LengthMismatch` while the others return `Ok` with their blocks; the next call then
    /// fails on every rank with `Error::PreviousFailed`.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.8 (`MPI_Alltoallw`), 5.1 (derived datatypes).
    pub fn all_to_all_layouts_into<T: Pod>(
        &self,
        send: &[T],
        send_layouts: &[Layout],
        recv: &mut [T],
        recv_layouts: &[Layout],
    ) -> Result<()> {
        self.all_to_all_layouts_into_with(send, send_layouts, recv, recv_layouts, LayoutAlgorithm::Auto)
    }

    /// [`all_to_all_layouts_into`](Self::all_to_all_layouts_into) with the algorithm
    /// named: `Direct` copies straight between the layouts on a communicator of one node
    /// (and packs across nodes, on a `cico` node, or beyond the few hundred ranks whose
    /// keys fit a rank's metadata words), `Packed` packs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::{Layout, LayoutAlgorithm, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// // Element 2 k of `mine` to rank k, which stores rank q's at q.
    /// let evens: Vec<Layout> = (0..p).map(|k| Layout::indexed(&[1], &[2 * k as isize])).collect::<Result<_, _>>()?;
    /// let slots: Vec<Layout> = (0..p).map(|q| Layout::indexed(&[1], &[q as isize])).collect::<Result<_, _>>()?;
    /// let mine: Vec<u32> = (0..2 * p as u32).map(|i| 100 * me as u32 + i).collect();
    /// let mut got = vec![0u32; p];
    /// comm.all_to_all_layouts_into_with(&mine, &evens, &mut got, &slots, LayoutAlgorithm::Direct)?;
    /// assert!((0..p).all(|q| got[q] == (100 * q + 2 * me) as u32));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`all_to_all_layouts_into`](Self::all_to_all_layouts_into); `Error::Config` if
    /// `ZCOLL_LAYOUT_ALGORITHM` holds no algorithm's name.
    pub fn all_to_all_layouts_into_with<T: Pod>(
        &self,
        send: &[T],
        send_layouts: &[Layout],
        recv: &mut [T],
        recv_layouts: &[Layout],
        algorithm: LayoutAlgorithm,
    ) -> Result<()> {
        let p = self.size() as usize;
        let size = std::mem::size_of::<T>();
        let local = (|| {
            let sends = per_rank(send_layouts, p, send.len(), size, 0)?;
            let recvs = per_rank(recv_layouts, p, recv.len(), size, 1)?;
            Ok((sends, recvs))
        })();
        let shape = self.shape_each(&local, Some(send), send_layouts, recv_layouts, true);
        let (((sc, sd), (rc, rd)), shape) = self.agree_on_layouts(local, shape, algorithm)?;
        if self.direct_each(algorithm, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct_each::<T>(Which::Alltoall, (0, 0), bufs, send_layouts, recv_layouts);
        }
        let packed =
            self.pack_each(bytemuck::cast_slice(send), &self.flats_each::<T>(send_layouts), &sc, &sd)?;
        let mut got = self.scratch(total(&rc));
        let moved = self.all_to_all_varcount_into(&packed[..], &sc, &sd, &mut got[..], &rc, &rd);
        self.keep(packed);
        let moved = moved.and_then(|()| {
            unpack_each(&got, &self.flats_each::<T>(recv_layouts), &rc, &rd, bytemuck::cast_slice_mut(recv))
        });
        self.keep(got);
        self.count_packed(&moved);
        moved
    }

    /// Scatter with a layout per rank (`MPI_Scatterv` with a datatype per block, counts of
    /// 1 and displacements of 0), on the root: the elements `send_layouts[k]` selects in
    /// `send` go to rank `k`, where they land on the elements its `recv_layout` selects in
    /// its `recv`, in type-map order; the root's own in its own `recv`. Each layout places
    /// its elements from the start of `send`; a rank that gets nothing receives an empty
    /// layout (`Layout::contiguous(0)`). The other ranks call
    /// [`scatter_layouts_into`](Self::scatter_layouts_into).
    ///
    /// It takes the paths of [`all_to_all_layouts_into`](Self::all_to_all_layouts_into):
    /// on one node each rank reads its block straight from the root's send layout for it;
    /// packed, the root packs each send layout into its part of a scratch buffer, the
    /// contiguous [`scatter_varcount_into_root`](Self::scatter_varcount_into_root) moves
    /// the bytes, and each rank unpacks its block, from the memoized runs of the layouts.
    ///
    /// # Examples
    ///
    /// Row `k` of the lower triangle of the root's `p` x `p` matrix (`k + 1` elements) to
    /// rank `k`:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let mut mine = vec![0u32; me + 1];
    /// let row = Layout::contiguous(me + 1)?;
    /// if me == 0 {
    ///     let matrix: Vec<u32> = (0..(p * p) as u32).collect();
    ///     let rows: Vec<Layout> =
    ///         (0..p).map(|k| Layout::subarray(&[p, p], &[1, k + 1], &[k, 0])).collect::<Result<_, _>>()?;
    ///     comm.scatter_layouts_into_root(&matrix, &rows, &mut mine, &row, 0)?;
    /// } else {
    ///     comm.scatter_layouts_into(&mut mine, &row, 0)?;
    /// }
    /// assert!((0..=me).all(|j| mine[j] as usize == me * p + j));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `recv_layout` reaches outside `recv` or writes an element twice, or, on
    /// the root, that passed other than `size()` send layouts or one that reaches outside
    /// `send`; `Error::Mismatch` if the root called
    /// [`scatter_layouts_into`](Self::scatter_layouts_into) or another rank this method;
    /// `Error::InvalidRoot`, and `Error::LengthMismatch` (lengths in bytes) if a rank's
    /// `recv_layout` selects another number of elements than the root's layout for it, as
    /// [`scatter_varcount_into_root`](Self::scatter_varcount_into_root); `Error::InvalidLayout`
    /// too if a block's bytes do not fit MPI's `int`. A transport error or a peer's
    /// failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls. On the packed path a
    /// root whose blocks travel with its arrival leaves before the ranks compare lengths,
    /// as the contiguous call's does: it returns `Ok` with its own block, and learns of a
    /// rank's mismatch at its next call, which fails on every rank
    /// (`Error::PreviousFailed`).
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.6 (`MPI_Scatterv`), 5.1 (derived datatypes).
    pub fn scatter_layouts_into_root<T: Pod>(
        &self,
        send: &[T],
        send_layouts: &[Layout],
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        self.scatter_layouts(Some((send, send_layouts)), recv, recv_layout, root)
    }

    /// Scatter with a layout per rank, on a rank other than the root: receives this rank's
    /// block onto the elements `recv_layout` selects in `recv` (see
    /// [`scatter_layouts_into_root`](Self::scatter_layouts_into_root)).
    ///
    /// # Examples
    ///
    /// See [`scatter_layouts_into_root`](Self::scatter_layouts_into_root).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mut mine = [0u8; 4];
    /// let every_other = Layout::vector(2, 1, 2)?;
    /// if comm.rank() == 0 {
    ///     let pairs: Vec<Layout> = (0..p).map(|k| Layout::indexed(&[2], &[2 * k as isize])).collect::<Result<_, _>>()?;
    ///     comm.scatter_layouts_into_root(&vec![9u8; 2 * p], &pairs, &mut mine, &every_other, 0)?;
    /// } else {
    ///     comm.scatter_layouts_into(&mut mine, &every_other, 0)?;
    /// }
    /// assert_eq!(mine, [9, 0, 9, 0]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`scatter_layouts_into_root`](Self::scatter_layouts_into_root).
    pub fn scatter_layouts_into<T: Pod>(
        &self,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        self.scatter_layouts(None, recv, recv_layout, root)
    }

    /// Gather with a layout per rank (`MPI_Gatherv` with a datatype per block, counts of 1
    /// and displacements of 0), on the root: the elements every rank `k`'s `send_layout`
    /// selects in its `send` land on those `recv_layouts[k]` selects in the root's `recv`,
    /// in type-map order. Each receive layout places its elements from the start of
    /// `recv`; no two may select the same element. The other ranks call
    /// [`gather_layouts_into`](Self::gather_layouts_into).
    ///
    /// It takes the paths of [`all_to_all_layouts_into`](Self::all_to_all_layouts_into):
    /// on one node the root reads every rank's block straight into its receive layout for
    /// it; packed, through the contiguous
    /// [`gather_varcount_into_root`](Self::gather_varcount_into_root).
    ///
    /// # Examples
    ///
    /// The first `k + 1` elements of column 0 of rank `k`'s `p` x 3 matrix, as row `k` of
    /// the lower triangle of the root's `p` x `p` matrix:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let mine: Vec<u32> = (0..3 * p as u32).map(|i| i + 100 * me as u32).collect();
    /// let column = Layout::vector(me + 1, 1, 3)?;
    /// if me == 0 {
    ///     let rows: Vec<Layout> =
    ///         (0..p).map(|k| Layout::subarray(&[p, p], &[1, k + 1], &[k, 0])).collect::<Result<_, _>>()?;
    ///     let mut lower = vec![0u32; p * p];
    ///     comm.gather_layouts_into_root(&mine, &column, &mut lower, &rows, 0)?;
    ///     assert!((0..p).all(|k| (0..=k).all(|j| lower[k * p + j] as usize == 3 * j + 100 * k)));
    /// } else {
    ///     comm.gather_layouts_into(&mine, &column, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `send_layout` reaches outside `send`, or, on the root, that passed other
    /// than `size()` receive layouts, or receive layouts that reach outside `recv`, select
    /// an element twice or overlap each other, or whose blocks' bytes do not fit MPI's
    /// `int`; `Error::Mismatch` if the root called
    /// [`gather_layouts_into`](Self::gather_layouts_into) or another rank this method;
    /// `Error::InvalidRoot`, and `Error::LengthMismatch` (lengths in bytes) if a rank's
    /// `send_layout` selects another number of elements than the root's layout for it, as
    /// [`gather_varcount_into_root`](Self::gather_varcount_into_root). A transport error
    /// or a peer's failure during the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls.
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.5 (`MPI_Gatherv`), 5.1 (derived datatypes).
    pub fn gather_layouts_into_root<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layouts: &[Layout],
        root: Rank,
    ) -> Result<()> {
        self.gather_layouts(send, send_layout, Some((recv, recv_layouts)), root)
    }

    /// Gather with a layout per rank, on a rank other than the root: sends the elements
    /// `send_layout` selects in `send` (see
    /// [`gather_layouts_into_root`](Self::gather_layouts_into_root)).
    ///
    /// # Examples
    ///
    /// See [`gather_layouts_into_root`](Self::gather_layouts_into_root).
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let p = comm.size() as usize;
    /// let mine = [comm.rank() as u8; 4];
    /// let every_other = Layout::vector(2, 1, 2)?;
    /// if comm.rank() == 0 {
    ///     let pairs: Vec<Layout> = (0..p).map(|k| Layout::indexed(&[2], &[2 * k as isize])).collect::<Result<_, _>>()?;
    ///     let mut all = vec![0u8; 2 * p];
    ///     comm.gather_layouts_into_root(&mine, &every_other, &mut all, &pairs, 0)?;
    ///     assert!((0..2 * p).all(|i| all[i] as usize == i / 2));
    /// } else {
    ///     comm.gather_layouts_into(&mine, &every_other, 0)?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`gather_layouts_into_root`](Self::gather_layouts_into_root). On the packed
    /// path a rank whose block travels with its arrival leaves before the ranks compare
    /// lengths, as in the contiguous call: it returns `Ok`, and learns of a mismatch at its
    /// next call, which fails on every rank (`Error::PreviousFailed`).
    pub fn gather_layouts_into<T: Pod>(&self, send: &[T], send_layout: &Layout, root: Rank) -> Result<()> {
        self.gather_layouts(send, send_layout, None, root)
    }

    /// Allgather with a layout per rank (`MPI_Allgatherv` with a datatype per block, counts
    /// of 1 and displacements of 0): the elements every rank `k`'s `send_layout` selects
    /// in its `send` land, on every rank, on those its `recv_layouts[k]` selects in its
    /// `recv`, in type-map order. Each receive layout places its elements from the start
    /// of `recv`; no two may select the same element; ranks may pass different receive
    /// layouts.
    ///
    /// It takes the paths of [`all_to_all_layouts_into`](Self::all_to_all_layouts_into):
    /// on one node every rank reads every rank's block straight into its receive layout
    /// for it; packed, through the contiguous
    /// [`all_gather_varcount_into`](Self::all_gather_varcount_into).
    ///
    /// # Examples
    ///
    /// Rank `k`'s `k + 1` elements as row `k` of the lower triangle of every rank's `p` x
    /// `p` matrix, the upper triangle left as it was:
    ///
    /// ```no_run
    /// # use zcoll::{Layout, ZeroCopy};
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// let (p, me) = (comm.size() as usize, comm.rank() as usize);
    /// let mine = vec![me as u32; me + 1];
    /// let rows: Vec<Layout> =
    ///     (0..p).map(|k| Layout::subarray(&[p, p], &[1, k + 1], &[k, 0])).collect::<Result<_, _>>()?;
    /// let mut lower = vec![u32::MAX; p * p];
    /// comm.all_gather_layouts_into(&mine, &Layout::contiguous(me + 1)?, &mut lower, &rows)?;
    /// assert!((0..p * p).all(|i| lower[i] == if i % p <= i / p { (i / p) as u32 } else { u32::MAX }));
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// On every rank, before any element moves: `Error::InvalidLayout` naming the first
    /// rank whose `send_layout` reaches outside `send`, that passed other than `size()`
    /// receive layouts, or receive layouts that reach outside `recv`, select an element
    /// twice or overlap each other, or whose blocks' bytes do not fit MPI's `int`;
    /// `Error::LengthMismatch` (lengths in bytes) if a rank's `recv_layouts[k]` selects
    /// another number of elements than rank `k`'s `send_layout`, as
    /// [`all_gather_varcount_into`](Self::all_gather_varcount_into); `Error::Mismatch` if
    /// ranks called different collectives. A transport error or a peer's failure during
    /// the copies.
    /// `recv` is unchanged by every error found before the copies; one during them may
    /// leave it partly written, as in the contiguous calls. One exception, as in
    /// `all_gather_varcount_into`: inside one node, a count that disagrees may be judged
    /// only by its receiver (small blocks travel with their arrivals), which fails with
    /// `LengthMismatch` while the others return `Ok` with their blocks; the next call
    /// then fails on every rank with `Error::PreviousFailed` (the deferred verdict).
    ///
    /// # Standard section(s)
    ///
    /// MPI 4.1, 6.7 (`MPI_Allgatherv`), 5.1 (derived datatypes).
    pub fn all_gather_layouts_into<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: &mut [T],
        recv_layouts: &[Layout],
    ) -> Result<()> {
        let p = self.size() as usize;
        let size = std::mem::size_of::<T>();
        let local = (|| {
            send_layout.check(send.len()).map_err(|e| (0, e))?;
            per_rank(recv_layouts, p, recv.len(), size, 1)
        })();
        let one = std::slice::from_ref(send_layout);
        let shape = self.shape_each(&local, Some(send), one, recv_layouts, false);
        let ((rc, rd), shape) = self.agree_on_layouts(local, shape, LayoutAlgorithm::Auto)?;
        if self.direct_each(LayoutAlgorithm::Auto, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct_each::<T>(Which::Allgather, (0, 0), bufs, one, recv_layouts);
        }
        let (s, _) = self.flats::<T>(send_layout, send_layout);
        let n = s.bytes();
        let packed = self.pack(bytemuck::cast_slice(send), &s, 0..1, n)?;
        let mut got = self.scratch(total(&rc));
        let moved = self.all_gather_varcount_into(&packed[..], &mut got[..], &rc, &rd);
        self.keep(packed);
        let moved = moved.and_then(|()| {
            unpack_each(&got, &self.flats_each::<T>(recv_layouts), &rc, &rd, bytemuck::cast_slice_mut(recv))
        });
        self.keep(got);
        self.count_packed(&moved);
        moved
    }

    /// The scatter with a layout per rank, on the root (with its send side) or not.
    fn scatter_layouts<T: Pod>(
        &self,
        send: Option<(&[T], &[Layout])>,
        recv: &mut [T],
        recv_layout: &Layout,
        root: Rank,
    ) -> Result<()> {
        let p = self.size() as usize;
        let size = std::mem::size_of::<T>();
        let local = (|| {
            self.role(send.is_some(), root)?;
            let counts = match send {
                Some((buf, ls)) => per_rank(ls, p, buf.len(), size, 0)?,
                None => (vec![], vec![]),
            };
            self.check_writable(recv_layout, recv.len()).map_err(|e| (1, e))?;
            Ok(counts)
        })();
        let one = std::slice::from_ref(recv_layout);
        let (src, sends): (Option<&[T]>, &[Layout]) = match send {
            Some((buf, ls)) => (Some(buf), ls),
            None => (None, &[]),
        };
        let shape = self.shape_each(&local, src, sends, one, false);
        let ((sc, sd), shape) = self.agree_on_layouts(local, shape, LayoutAlgorithm::Auto)?;
        if self.direct_each(LayoutAlgorithm::Auto, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(src.unwrap_or(&[])), bytemuck::cast_slice_mut(recv));
            let at = (root, self.local_of(root));
            return self.run_direct_each::<T>(Which::Scatter, at, bufs, sends, one);
        }
        let (r, _) = self.flats::<T>(recv_layout, recv_layout);
        let n = r.bytes();
        let mut got = self.scratch(n);
        let moved = match send {
            Some((buf, ls)) => {
                let packed =
                    self.pack_each(bytemuck::cast_slice(buf), &self.flats_each::<T>(ls), &sc, &sd)?;
                let moved = self.scatter_varcount_into_root(&packed[..], &sc, &sd, &mut got[..], root);
                self.keep(packed);
                moved
            }
            None => self.scatter_varcount_into(&mut got[..], root),
        };
        let moved = moved.and_then(|()| unpack(&got, &r, 0..1, n, bytemuck::cast_slice_mut(recv)));
        self.keep(got);
        self.count_packed(&moved);
        moved
    }

    /// The gather with a layout per rank, on the root (with its receive side) or not.
    fn gather_layouts<T: Pod>(
        &self,
        send: &[T],
        send_layout: &Layout,
        recv: Option<(&mut [T], &[Layout])>,
        root: Rank,
    ) -> Result<()> {
        let p = self.size() as usize;
        let size = std::mem::size_of::<T>();
        let local = (|| {
            self.role(recv.is_some(), root)?;
            send_layout.check(send.len()).map_err(|e| (0, e))?;
            match &recv {
                Some((buf, ls)) => per_rank(ls, p, buf.len(), size, 1),
                None => Ok((vec![], vec![])),
            }
        })();
        let one = std::slice::from_ref(send_layout);
        let recvs: &[Layout] = recv.as_ref().map_or(&[], |r| r.1);
        let shape = self.shape_each(&local, Some(send), one, recvs, false);
        let ((rc, rd), shape) = self.agree_on_layouts(local, shape, LayoutAlgorithm::Auto)?;
        let mut recv = recv;
        if self.direct_each(LayoutAlgorithm::Auto, shape)? {
            let mut none = [0u8; 0];
            let dst: &mut [u8] = match &mut recv {
                Some((b, _)) => bytemuck::cast_slice_mut(b),
                None => &mut none,
            };
            let bufs = Bufs::Two(bytemuck::cast_slice(send), dst);
            let at = (root, self.local_of(root));
            return self.run_direct_each::<T>(Which::Gather, at, bufs, one, recvs);
        }
        let (s, _) = self.flats::<T>(send_layout, send_layout);
        let n = s.bytes();
        let packed = self.pack(bytemuck::cast_slice(send), &s, 0..1, n)?;
        let moved = match recv {
            Some((buf, ls)) => {
                let mut got = self.scratch(total(&rc));
                let moved = self.gather_varcount_into_root(&packed[..], &mut got[..], &rc, &rd, root);
                let moved = moved.and_then(|()| {
                    unpack_each(&got, &self.flats_each::<T>(ls), &rc, &rd, bytemuck::cast_slice_mut(buf))
                });
                self.keep(got);
                moved
            }
            None => self.gather_varcount_into(&packed[..], root),
        };
        self.keep(packed);
        self.count_packed(&moved);
        moved
    }

    /// What this rank's call weighs for the choice of path, as words to agree on (the
    /// most of every rank): the block's bytes, its send and receive fragments, and 1 if
    /// its send buffer is not copied with loads and stores. Zeros where its local checks
    /// failed (`checked` false): a layout that does not fit its buffer is never
    /// flattened, however many fragments it has, and the call fails on every rank anyway.
    fn shape_of<T: Pod>(
        &self,
        checked: bool,
        send: &[T],
        send_layout: &Layout,
        recv_layout: &Layout,
    ) -> [u64; 4] {
        if !checked {
            return [0; 4];
        }
        let size = std::mem::size_of::<T>();
        let shared = self.ctx().ctl.loads_heaps();
        let mut memo = self.layouts.borrow_mut();
        let (s, r) = (memo.own(send_layout, size, shared), memo.own(recv_layout, size, shared));
        let loads = self.ctx().ctl.reaches_by_loads(bytemuck::cast_slice(send));
        [
            send_layout.count().saturating_mul(size) as u64,
            s.fragments() as u64,
            r.fragments() as u64,
            !loads as u64,
        ]
    }

    /// [`Layout::check_writable`], remembered: the check flattens and sorts the layout,
    /// which costs as much as the copies of a transpose's receive side, so a layout that
    /// passed against a buffer length is not checked again against the same length.
    fn check_writable(&self, layout: &Layout, len: usize) -> Result<()> {
        let mut memo = self.layouts.borrow_mut();
        if memo.writable(layout, len) {
            return Ok(());
        }
        layout.check_writable(len)?;
        memo.note_writable(layout, len);
        Ok(())
    }

    /// Whether a call of the agreed `shape` copies straight between the layouts: the
    /// algorithm says so, and the communicator is one node.
    fn direct(&self, algorithm: LayoutAlgorithm, shape: Shape) -> Result<bool> {
        let chosen = algorithm.choose(&self.ctx(), shape)?;
        Ok(chosen == LayoutAlgorithm::Direct && matches!(self.route()?, Route::Node))
    }

    /// The direct copy (`coll::layout::direct`) of `which`, with this rank's layouts
    /// (checked and agreed) remembered in the communicator's memo.
    fn run_direct<T: Pod>(
        &self,
        which: Which,
        root: (Rank, usize),
        bufs: Bufs<'_>,
        send_layout: &Layout,
        recv_layout: &Layout,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let shared = self.ctx().ctl.loads_heaps();
        let mut memo = self.layouts.borrow_mut();
        let (s, r) = (memo.own(send_layout, size, shared), memo.own(recv_layout, size, shared));
        let sides = Sides::Shifted { send: &s, recv: &r };
        let moved = engine::direct(&self.ctx(), &mut memo, which, root, bufs, sides, None);
        memo.direct += moved.is_ok() as u64;
        moved
    }

    /// Whether the packed path of a call of the agreed `shape` reads the peers' packed
    /// blocks straight into its receive layout ([`read_packed`](Self::read_packed)): on a
    /// communicator of one node whose ranks map each other's heaps (every packed block then
    /// lies in the shared heap, or is a send buffer that does), where some rank's receive
    /// layout has several fragments per block (it would unpack), and the blocks are not
    /// so small that the contiguous collective's one flag phase through the staging areas
    /// wins ([`LAYOUT_MIN_BYTES`]).
    fn reads_packed(&self, shape: Shape) -> Result<bool> {
        let fits = shape.local > 1 && shape.bytes >= LAYOUT_MIN_BYTES && self.ctx().ctl.loads_heaps();
        Ok(fits && matches!(self.route()?, Route::Node))
    }

    /// The contiguous collective and the unpack of the packed path in one pass: every
    /// rank publishes its packed blocks (as many bytes each as a block of `recv` selects)
    /// as a contiguous send side, and each reader copies a peer's block with loads
    /// straight into its `recv` layout (`coll::layout::direct`), where the packed path
    /// would copy it into a scratch buffer and unpack that; the own block from `own`
    /// where given (bytes and runs), else from the packed blocks. Counted as packed, by
    /// the caller.
    fn read_packed(
        &self,
        which: Which,
        root: (Rank, usize),
        bufs: Bufs<'_>,
        recv: &Flat,
        own: Option<(&[u8], Runs)>,
    ) -> Result<()> {
        let shared = self.ctx().ctl.loads_heaps();
        let mut memo = self.layouts.borrow_mut();
        let packed = memo.own(&Layout::contiguous(recv.bytes())?, 1, shared);
        let sides = Sides::Shifted { send: &packed, recv };
        engine::direct(&self.ctx(), &mut memo, which, root, bufs, sides, own)
    }

    /// The broadcast of [`read_packed`](Self::read_packed): the root publishes its packed
    /// block (its buffer itself where its layout is [dense](Flat::dense) and peers reach
    /// it as fast as a copy), every other rank reads it straight into its `layout`.
    fn broadcast_read_packed(&self, buf: &mut [u8], layout: &Flat, root: Rank) -> Result<()> {
        let at = (root, self.local_of(root));
        let n = layout.bytes();
        let moved = if self.rank() != root {
            self.read_packed(Which::Bcast, at, Bufs::One(buf), layout, None)
        } else if layout.dense() && self.sends_in_place(buf) {
            let whole = buf.get_mut(..n).ok_or_else(|| outside("receive"))?;
            self.read_packed(Which::Bcast, at, Bufs::One(whole), layout, None)
        } else {
            let mut packed = self.pack(buf, layout, 0..1, n)?;
            let moved = self.read_packed(Which::Bcast, at, Bufs::One(&mut packed), layout, None);
            self.keep(packed);
            moved
        };
        self.count_packed(&moved);
        moved
    }

    /// The alltoall of [`read_packed`](Self::read_packed): `send` itself where its layout
    /// `s` is [dense](Flat::dense) and peers reach it as fast as a copy
    /// ([`sends_in_place`](Self::sends_in_place)), else the peers' blocks packed into a
    /// scratch buffer (block `k` at `k n`), and this rank's own block copied from `send`
    /// itself, never packed.
    fn all_to_all_read_packed(&self, send: &[u8], s: &Flat, recv: &mut [u8], r: &Flat) -> Result<()> {
        let (p, me, n) = (self.size() as usize, self.rank() as usize, s.bytes());
        if s.dense() && self.sends_in_place(send) {
            let whole = send.get(..p * n).ok_or_else(|| outside("send"))?;
            return self.read_packed(Which::Alltoall, (0, 0), Bufs::Two(whole, recv), r, None);
        }
        let packed = self.pack_but(send, s, 0..p, n, Some(me))?;
        let own = Some((send, s.shifted(me)));
        let moved = self.read_packed(Which::Alltoall, (0, 0), Bufs::Two(&packed, recv), r, own);
        self.keep(packed);
        moved
    }

    /// The direct copy (`coll::layout::direct`) of `which` with a layout per peer on a side
    /// (or one that serves every peer, or none where this rank has no part in that side),
    /// checked and agreed, remembered in the communicator's memo.
    fn run_direct_each<T: Pod>(
        &self,
        which: Which,
        root: (Rank, usize),
        bufs: Bufs<'_>,
        sends: &[Layout],
        recvs: &[Layout],
    ) -> Result<()> {
        let (s, r) = (self.flats_each::<T>(sends), self.flats_each::<T>(recvs));
        let mut memo = self.layouts.borrow_mut();
        let sides = Sides::Each { send: &s, recv: &r };
        let moved = engine::direct(&self.ctx(), &mut memo, which, root, bufs, sides, None);
        memo.direct += moved.is_ok() as u64;
        moved
    }

    /// What a call with a layout per peer weighs for the choice of path, as
    /// [`shape_of`](Self::shape_of)'s words: the mean bytes and fragments of its non-empty
    /// blocks (the larger mean of its two sides for the bytes), and 1 if its send buffer is
    /// not copied with loads and stores; nothing if its layouts failed their checks (they
    /// are not flattened then) or it sends nothing (a scatter's non-root). Where the
    /// direct path's senders pack their blocks of short fragments (`packs`: the alltoall),
    /// such a block counts as one fragment on the side read, as its reader sees it.
    fn shape_each<T: Pod, V>(
        &self,
        local: &std::result::Result<V, (usize, Error)>,
        send: Option<&[T]>,
        sends: &[Layout],
        recvs: &[Layout],
        packs: bool,
    ) -> [u64; 4] {
        if local.is_err() {
            return [0; 4];
        }
        let (s, r) = (self.flats_each::<T>(sends), self.flats_each::<T>(recvs));
        let mean = |fs: &[Arc<Flat>], of: &dyn Fn(&Flat) -> usize| {
            let full: Vec<&Arc<Flat>> = fs.iter().filter(|f| f.bytes() > 0).collect();
            (full.iter().map(|f| of(f)).sum::<usize>() / full.len().max(1)) as u64
        };
        let far = send.is_some_and(|b| !self.ctx().ctl.reaches_by_loads(bytemuck::cast_slice(b)));
        let bytes = mean(&s, &Flat::bytes).max(mean(&r, &Flat::bytes));
        let read = |f: &Flat| if packs && f.packs() { 1 } else { f.fragments() };
        [bytes, mean(&s, &read), mean(&r, &Flat::fragments), far as u64]
    }

    /// Whether a call with a layout per peer, of the agreed `shape`, copies straight
    /// between the layouts: as [`direct`](Self::direct) says for `algorithm` (`Auto`: the
    /// cost model, or `ZCOLL_LAYOUT_ALGORITHM`), where every rank's keys and byte counts
    /// fit the metadata words of its arrival (`10 p + 2` words: for up to a few hundred
    /// ranks).
    fn direct_each(&self, algorithm: LayoutAlgorithm, shape: Shape) -> Result<bool> {
        let p = self.size() as usize;
        let fits = engine::each_words(p, p) <= self.ctx().ctl.meta_words();
        Ok(fits && self.direct(algorithm, shape)?)
    }

    /// Makes every rank's verdict on its layouts global: `Ok` everywhere, or on every
    /// rank the `InvalidLayout` of the lowest rank that failed; and the most of every
    /// rank's `shape` words, from which every rank chooses the same path. One allreduce,
    /// which also compares what every rank asks for (`algorithm`, as its environment makes
    /// it): ranks that ask for different paths (one `direct`, another `packed`) would
    /// otherwise meet in different collectives. They fail with `Mismatch` "algorithm"
    /// naming the first rank that differs from rank 0, found by one allgather that every
    /// rank then makes.
    fn agree_on_layouts<V>(
        &self,
        local: std::result::Result<V, (usize, Error)>,
        shape: [u64; 4],
        algorithm: LayoutAlgorithm,
    ) -> Result<(V, Shape)> {
        let (me, size) = (self.rank(), self.size());
        let word = match &local {
            Ok(_) => 0u64,
            Err((which, e)) => {
                let reason = match e {
                    Error::InvalidLayout { reason, .. } => REASONS.iter().position(|r| r == reason),
                    _ => None,
                };
                ((size - me) as u64) << 16 | (*which as u64) << 8 | (reason.unwrap_or(0) as u64 + 1)
            }
        };
        let [bytes, remote, local_frags, far] = shape;
        let asked = algorithm.claim(self.ctx().overrides);
        let mut all = [0u64; 7];
        self.all_reduce_into(
            &[word, bytes, remote, local_frags, far, asked, !asked],
            &mut all,
            Builtin::Max,
        )?;
        // The most of the claims and of their complements: the greatest and the least claim.
        if all[0] == 0 && all[5] != !all[6] {
            let mut every = vec![0u64; size as usize];
            self.all_gather_into(std::slice::from_ref(&asked), &mut every[..])?;
            let culprit = every.iter().position(|&a| a != every[0]).unwrap_or(0) as Rank;
            return Err(Error::Mismatch { rank: me, culprit, what: "algorithm" });
        }
        let shape = Shape {
            bytes: all[1] as usize,
            remote: all[2] as usize,
            local: all[3] as usize,
            loads: all[4] == 0,
        };
        match (all[0], local) {
            (0, Ok(v)) => Ok((v, shape)),
            (w, _) if (w >> 8) & 0xff == ROLE_WORD => {
                Err(Error::Mismatch { rank: me, culprit: size - (w >> 16) as Rank, what: ROLE })
            }
            (w, _) => Err(Error::InvalidLayout {
                rank: Some(me),
                culprit: Some(size - (w >> 16) as Rank),
                which: WHICH[((w >> 8) & 0xff) as usize % WHICH.len()],
                reason: REASONS[((w & 0xff) as usize).saturating_sub(1) % REASONS.len()],
            }),
        }
    }

    /// `Ok` unless this rank called a rooted layout collective's root method (`root_method`)
    /// and is not `root`, or the other way round: then the `Mismatch` of the contiguous
    /// call ([`ROLE`]), made global by [`agree_on_layouts`](Self::agree_on_layouts) before
    /// any path is taken (the direct copy has no role in its round). A root outside the
    /// communicator is left to the call's own `InvalidRoot`.
    fn role(&self, root_method: bool, root: Rank) -> std::result::Result<(), (usize, Error)> {
        let real = (0..self.size()).contains(&root);
        match real && root_method != (self.rank() == root) {
            true => Err((
                ROLE_WORD as usize,
                Error::Mismatch { rank: self.rank(), culprit: self.rank(), what: ROLE },
            )),
            false => Ok(()),
        }
    }

    /// This rank's two layouts flattened over `T`, from the communicator's memo.
    fn flats<T: Pod>(&self, send: &Layout, recv: &Layout) -> (Arc<Flat>, Arc<Flat>) {
        let size = std::mem::size_of::<T>();
        let shared = self.ctx().ctl.loads_heaps();
        let mut memo = self.layouts.borrow_mut();
        (memo.own(send, size, shared), memo.own(recv, size, shared))
    }

    /// Each of `layouts` flattened over `T`, from the communicator's memo.
    fn flats_each<T: Pod>(&self, layouts: &[Layout]) -> Vec<Arc<Flat>> {
        let size = std::mem::size_of::<T>();
        let shared = self.ctx().ctl.loads_heaps();
        let mut memo = self.layouts.borrow_mut();
        layouts.iter().map(|l| memo.own(l, size, shared)).collect()
    }

    /// Each of `layouts` (flattened, checked against `buf`, one per rank) packed into its
    /// part of a scratch buffer: `counts[k]` bytes from `displs[k]`.
    fn pack_each(
        &self,
        buf: &[u8],
        layouts: &[Arc<Flat>],
        counts: &[Count],
        displs: &[Count],
    ) -> Result<Scratch<u8>> {
        let mut packed = self.scratch(total(counts));
        for (k, f) in layouts.iter().enumerate() {
            let n = counts[k] as usize;
            let out = &mut packed[displs[k] as usize..][..n];
            copy_runs(buf, &f.shifted(0), out, &Runs::new([(0, n)])).map_err(|_| outside("send"))?;
        }
        Ok(packed)
    }

    /// Blocks `ks` of `layout` (flattened, checked against `buf`) in `buf`, packed one
    /// after the other (`n` bytes each) into a scratch buffer: from the memoized runs,
    /// not a flattening per call.
    fn pack(&self, buf: &[u8], layout: &Flat, ks: Range<usize>, n: usize) -> Result<Scratch<u8>> {
        self.pack_but(buf, layout, ks, n, None)
    }

    /// [`pack`](Self::pack), leaving the place of block `skip` unwritten.
    fn pack_but(
        &self,
        buf: &[u8],
        layout: &Flat,
        ks: Range<usize>,
        n: usize,
        skip: Option<usize>,
    ) -> Result<Scratch<u8>> {
        let whole = Runs::new([(0, n)]);
        let mut out = self.scratch(ks.len() * n);
        for (i, k) in ks.enumerate().filter(|&(_, k)| Some(k) != skip) {
            copy_runs(buf, &layout.shifted(k), &mut out[i * n..][..n], &whole)
                .map_err(|_| outside("send"))?;
        }
        Ok(out)
    }

    /// Whether the packed path sends a [dense](Flat::dense) side from `buf` itself: unless
    /// its scratch copy would lie in the shared heap, reached with loads, where `buf` is
    /// not (a `Vec` beside mapped heaps): then the pack's local copy buys the faster
    /// transfer.
    fn sends_in_place(&self, buf: &[u8]) -> bool {
        let ctx = self.ctx();
        !ctx.ctl.loads_heaps() || ctx.ctl.reaches_by_loads(buf)
    }

    /// Runs `coll` on blocks `ks` of `layout` in `buf`, packed (`n` bytes each): on
    /// `buf`'s own bytes where the layout is [dense](Flat::dense) (packing would be a plain
    /// copy) and [`sends_in_place`](Self::sends_in_place) says so, else on a scratch copy
    /// ([`pack`](Self::pack)).
    fn packed_with(
        &self,
        buf: &[u8],
        layout: &Flat,
        ks: Range<usize>,
        n: usize,
        coll: impl FnOnce(&[u8]) -> Result<()>,
    ) -> Result<()> {
        if layout.dense() && self.sends_in_place(buf) {
            return coll(buf.get(ks.start * n..ks.end * n).ok_or_else(|| outside("send"))?);
        }
        let packed = self.pack(buf, layout, ks, n)?;
        let moved = coll(&packed[..]);
        self.keep(packed);
        moved
    }

    /// Runs `coll` into blocks `ks` of `layout` in `buf`, packed (`n` bytes each), and
    /// unpacks them: straight into `buf` where the layout is [dense](Flat::dense)
    /// (unpacking would be a plain copy), else into a scratch buffer, unpacked after.
    fn unpacked_with(
        &self,
        buf: &mut [u8],
        layout: &Flat,
        ks: Range<usize>,
        n: usize,
        coll: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        if layout.dense() {
            return coll(buf.get_mut(ks.start * n..ks.end * n).ok_or_else(|| outside("receive"))?);
        }
        let mut got = self.scratch(ks.len() * n);
        let moved = coll(&mut got[..]).and_then(|()| unpack(&got, layout, ks, n, buf));
        self.keep(got);
        moved
    }

    /// A scratch buffer of `n` bytes, in the shared heap where the node's ranks map each
    /// other's heaps: one an earlier call of the same length left ([`keep`](Self::keep)),
    /// else a new one (whose zeroing and first touch cost as much as a copy).
    fn scratch(&self, n: usize) -> Scratch<u8> {
        let mut spare = self.layout_scratch.borrow_mut();
        match spare.iter().position(|s| s.len() == n) {
            Some(i) => spare.swap_remove(i),
            None => Scratch::zeroed(n, self.ctx().ctl.loads_heaps()),
        }
    }

    /// Counts a call that took the packed path and succeeded ([`Traffic::layout_packed`](crate::Traffic::layout_packed)).
    fn count_packed(&self, moved: &Result<()>) {
        if moved.is_ok() {
            self.layouts.borrow_mut().packed += 1;
        }
    }

    /// Keeps a scratch buffer for the next call (the last few).
    fn keep(&self, s: Scratch<u8>) {
        let mut spare = self.layout_scratch.borrow_mut();
        if spare.len() >= SPARE {
            spare.remove(0);
        }
        spare.push(s);
    }
}

/// The most scratch buffers a communicator keeps for its layout collectives.
const SPARE: usize = 4;

/// Unpacks `packed` (`n` bytes per block) into blocks `ks` of `layout` (flattened,
/// checked against `buf`) in `buf`.
fn unpack(packed: &[u8], layout: &Flat, ks: Range<usize>, n: usize, buf: &mut [u8]) -> Result<()> {
    let whole = Runs::new([(0, n)]);
    for (i, k) in ks.enumerate() {
        copy_runs(&packed[i * n..][..n], &whole, buf, &layout.shifted(k)).map_err(|_| outside("receive"))?;
    }
    Ok(())
}

/// Unpacks part `k` of `packed` (`counts[k]` bytes from `displs[k]`) into each of
/// `layouts` (flattened, checked against `buf`, one per rank) in `buf`.
fn unpack_each(
    packed: &[u8],
    layouts: &[Arc<Flat>],
    counts: &[Count],
    displs: &[Count],
    buf: &mut [u8],
) -> Result<()> {
    for (k, f) in layouts.iter().enumerate() {
        let n = counts[k] as usize;
        copy_runs(&packed[displs[k] as usize..][..n], &Runs::new([(0, n)]), buf, &f.shifted(0))
            .map_err(|_| outside("receive"))?;
    }
    Ok(())
}

/// The sum of `counts` (checked to fit MPI's `int` together).
fn total(counts: &[Count]) -> usize {
    counts.iter().map(|&n| n as usize).sum()
}

/// The checks of the side `which` (0 send, 1 receive) of a call with a layout per rank:
/// `size()` = `p` layouts, each inside a buffer of `len` elements, and, on the receive
/// side, no element selected twice, by one layout or by two. Returns each layout's bytes
/// over elements of `size` bytes, and their displacements one after the other, as
/// MPI's `int`s.
fn per_rank(
    layouts: &[Layout],
    p: usize,
    len: usize,
    size: usize,
    which: usize,
) -> std::result::Result<(Vec<Count>, Vec<Count>), (usize, Error)> {
    if layouts.len() != p {
        let reason = PER_RANK;
        return Err((which, Error::InvalidLayout { rank: None, culprit: None, which: WHICH[which], reason }));
    }
    match which {
        0 => layouts.iter().try_for_each(|l| l.check(len)),
        _ => disjoint(layouts, len),
    }
    .and_then(|()| byte_counts(layouts, size))
    .map_err(|e| (which, e))
}

/// A checked layout that still reaches outside its buffer: a defect, not the caller's.
fn outside(which: &'static str) -> Error {
    Error::InvalidLayout {
        rank: None,
        culprit: None,
        which,
        reason: "a checked layout reaches outside its buffer",
    }
}

/// The bytes each layout of `ls` selects over elements of `size` bytes, and their
/// displacements one after the other, as MPI's `int`s.
fn byte_counts(ls: &[Layout], size: usize) -> Result<(Vec<Count>, Vec<Count>)> {
    let big = || Error::InvalidLayout { rank: None, culprit: None, which: "layout", reason: REASONS[6] };
    let (mut counts, mut displs, mut at) =
        (Vec::with_capacity(ls.len()), Vec::with_capacity(ls.len()), 0 as Count);
    for l in ls {
        let n = l.count().checked_mul(size).and_then(|n| Count::try_from(n).ok()).ok_or_else(big)?;
        counts.push(n);
        displs.push(at);
        at = at.checked_add(n).ok_or_else(big)?;
    }
    Ok((counts, displs))
}

/// `Ok` if every layout of `ls` lies inside a buffer of `len` elements, and no element is
/// selected twice, by one layout or by two.
fn disjoint(ls: &[Layout], len: usize) -> Result<()> {
    let twice = || Error::InvalidLayout { rank: None, culprit: None, which: "layout", reason: REASONS[4] };
    ls.iter().try_for_each(|l| l.check(len))?;
    if ls.iter().map(|l| l.count()).try_fold(0usize, |a, c| a.checked_add(c)).is_none_or(|n| n > len) {
        return Err(twice());
    }
    let mut frags: Vec<(isize, usize)> = ls.iter().flat_map(|l| l.flatten()).collect();
    frags.sort_unstable();
    match frags.windows(2).any(|w| w[0].0 + w[0].1 as isize > w[1].0) {
        true => Err(twice()),
        false => Ok(()),
    }
}

/// `Ok` if the two layouts select the same number of elements.
fn same_count(send: &Layout, recv: &Layout) -> std::result::Result<(), (usize, Error)> {
    match send.count() == recv.count() {
        true => Ok(()),
        false => {
            Err((1, Error::InvalidLayout { rank: None, culprit: None, which: "receive", reason: COUNTS }))
        }
    }
}
