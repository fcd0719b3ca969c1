//! The shared address space: buffers peers map, and traffic by transport.

use super::Comm;
use super::Traffic;
use crate::alloc::ShmBox;
use crate::error::Error;
use crate::error::Result;
use crate::pod::Pod;

/// The shared address space: buffers peers map, and buffers registered once.
impl Comm {
    /// Allocates `n` zeroed elements in this process's shared heap.
    ///
    /// The peers of the node map the heap, so collectives on this buffer copy it with
    /// loads and stores, with no system call and no page pinning (on nodes whose transport
    /// is `heap`, or `cma` with [`Info::heap`](crate::Info::heap); elsewhere it is an ordinary buffer). Not
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
    /// `Error::Unsupported` if the heap cannot be created here (no `memfd_create`, or an
    /// address-space limit such as `ulimit -v` or valgrind's that refuses its 64 GiB
    /// reservation), is full, or `T` is zero-sized.
    pub fn alloc<T: Pod>(&self, n: usize) -> Result<ShmBox<T>> {
        ShmBox::zeroed(n).map_err(|errno| Error::Unsupported {
            rank: self.rank(),
            what: format!("{n} elements of {} bytes in the shared heap: {errno}", std::mem::size_of::<T>()),
        })
    }

    /// The bytes this rank has copied from and to its peers with single copies, by
    /// transport, in every collective: how much of the traffic took the load/store
    /// paths. Copy-in/copy-out through the segment is not counted. Also how many layout
    /// collectives took the direct (zero-copy) path, and how many peers' flattened layouts
    /// this rank read (each the first sight of a layout; repeated calls read none).
    pub fn traffic(&self) -> Traffic {
        let [cma, heap, xpmem] = self.node.ctl.traffic();
        let memo = self.layouts.borrow();
        Traffic {
            cma,
            heap,
            xpmem,
            layout_direct: memo.direct,
            layout_lists: memo.fetched,
            layout_packed: memo.packed,
        }
    }
}
