//! Collectives over non-contiguous [`Layout`]s: alltoall, allgather and bcast.
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
//!   other's heaps), call the contiguous collective, with all its checks, and unpack: two
//!   extra local copies (`2 n β_memcpy`), as rsmpi's derived datatypes make.

use super::{Comm, Route};
use crate::alloc::Scratch;
use crate::coll::layout::{self as engine, Bufs, LayoutAlgorithm, Shape, Which};
use crate::error::{Error, Result};
use crate::layout::{Layout, COUNTS, REASONS};
use crate::op::Builtin;
use crate::pod::Pod;
use mpi::topology::Rank;

/// The layouts a rank can get wrong, by their index in the agreement word.
const WHICH: [&str; 2] = ["send", "receive"];

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
    /// blocks differ in size; `Error::Mismatch` if ranks called different collectives.
    /// A transport error or a peer's failure during the copies. `recv` is unchanged on
    /// error.
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
        let shape = self.shape_of(send, send_layout, recv_layout);
        let ((sends, recvs), shape) = self.agree_on_layouts(local, shape)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct::<T>(Which::Alltoall, (0, 0), bufs, send_layout, recv_layout);
        }
        let packed = self.packed(send, &sends)?;
        let mut got = Scratch::zeroed(recvs.count(), self.ctx().ctl.loads_heaps());
        self.all_to_all_into(&packed, &mut got)?;
        recvs.unpack(&got, recv)
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
    /// blocks differ in size; `Error::Mismatch` if ranks called different collectives.
    /// A transport error or a peer's failure during the copies. `recv` is unchanged on
    /// error.
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
        let shape = self.shape_of(send, send_layout, recv_layout);
        let (recvs, shape) = self.agree_on_layouts(local, shape)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::Two(bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
            return self.run_direct::<T>(Which::Allgather, (0, 0), bufs, send_layout, recv_layout);
        }
        let packed = self.packed(send, send_layout)?;
        let mut got = Scratch::zeroed(recvs.count(), self.ctx().ctl.loads_heaps());
        self.all_gather_into(&packed, &mut got)?;
        recvs.unpack(&got, recv)
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
    /// [`broadcast_into`](Self::broadcast_into) (with the layouts' counts as lengths). A
    /// transport error or a peer's failure during the copy. `buf` is unchanged on error.
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
        let shape = self.shape_of(buf, layout, layout);
        let ((), shape) = self.agree_on_layouts(local.map(drop), shape)?;
        if self.direct(algorithm, shape)? {
            let bufs = Bufs::One(bytemuck::cast_slice_mut(buf));
            return self.run_direct::<T>(Which::Bcast, (root, self.local_of(root)), bufs, layout, layout);
        }
        let mut packed = match self.rank() == root {
            true => self.packed(buf, layout)?,
            false => Scratch::zeroed(layout.count(), self.ctx().ctl.loads_heaps()),
        };
        self.broadcast_into(&mut packed, root)?;
        match self.rank() == root {
            true => Ok(()),
            false => layout.unpack(&packed, buf),
        }
    }

    /// What this rank's call weighs for the choice of path, as words to agree on (the
    /// most of every rank): the block's bytes, its send and receive fragments, and 1 if
    /// its send buffer is not copied with loads and stores.
    fn shape_of<T: Pod>(&self, send: &[T], send_layout: &Layout, recv_layout: &Layout) -> [u64; 4] {
        let size = std::mem::size_of::<T>();
        let mut memo = self.layouts.borrow_mut();
        let (s, r) = (memo.own(send_layout, size), memo.own(recv_layout, size));
        let loads = self.ctx().ctl.reaches_by_loads(bytemuck::cast_slice(send));
        [(send_layout.count() * size) as u64, s.fragments() as u64, r.fragments() as u64, !loads as u64]
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
        let mut memo = self.layouts.borrow_mut();
        let (s, r) = (memo.own(send_layout, size), memo.own(recv_layout, size));
        engine::direct(&self.ctx(), &mut memo, which, root, bufs, &s, &r)
    }

    /// Makes every rank's verdict on its layouts global: `Ok` everywhere, or on every
    /// rank the `InvalidLayout` of the lowest rank that failed; and the most of every
    /// rank's `shape` words, from which every rank chooses the same path. One allreduce.
    fn agree_on_layouts<V>(
        &self,
        local: std::result::Result<V, (usize, Error)>,
        shape: [u64; 4],
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
        let mut all = [0u64; 5];
        self.all_reduce_into(&[word, bytes, remote, local_frags, far], &mut all, Builtin::Max)?;
        let shape = Shape {
            bytes: all[1] as usize,
            remote: all[2] as usize,
            local: all[3] as usize,
            loads: all[4] == 0,
        };
        match (all[0], local) {
            (0, Ok(v)) => Ok((v, shape)),
            (w, _) => Err(Error::InvalidLayout {
                rank: Some(me),
                culprit: Some(size - (w >> 16) as Rank),
                which: WHICH[((w >> 8) & 0xff) as usize % WHICH.len()],
                reason: REASONS[((w & 0xff) as usize).saturating_sub(1) % REASONS.len()],
            }),
        }
    }

    /// The elements `layout` selects in `buf`, packed into a scratch buffer in the shared
    /// heap where the node's ranks map each other's heaps. `layout` was checked.
    fn packed<T: Pod>(&self, buf: &[T], layout: &Layout) -> Result<Scratch<T>> {
        let mut out = Scratch::zeroed(layout.count(), self.ctx().ctl.loads_heaps());
        layout.pack_into(buf, &mut out)?;
        Ok(out)
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
