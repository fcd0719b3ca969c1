//! [`Exposure`]: a buffer registered with every peer once, for many collectives.

use super::{Comm, Route};
use crate::coll::bcast::{self, BcastAlgorithm};
use crate::coll::expose;
use crate::coll::reduce::{self, Bufs, ReduceAlgorithm};
use crate::error::Result;
use crate::op::Operator;
use crate::pod::Pod;
use crate::sync::Registration;
use mpi::topology::Rank;
use std::ops::{Deref, DerefMut};

impl Comm {
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
}

/// A buffer exposed to every peer of the node: the registration cache.
///
/// [`Comm::expose`] registers the buffer with every rank of the node once: each rank maps
/// (or attaches) every peer's buffer and keeps the mapping. The exposure's collectives
/// then take the peers' buffers from that registration instead of looking their
/// addresses up in every call.
///
/// **Dropping the exposure is a collective call that blocks**: it withdraws the exposure
/// in a step that waits until every rank of the node has withdrawn its own, so every rank
/// must drop its exposures in the same order, as with any collective.
/// [`withdraw`](Self::withdraw) does the same and reports errors. A rank that drops an
/// exposure while unwinding a panic does not wait: it fails the withdrawal at once, and
/// its peers' withdrawal (or the exposure's collective they are in) returns an `Err`
/// instead of waiting for it.
///
/// The exposure borrows the buffer for its whole life, so the buffer cannot be freed,
/// moved, resized or changed behind the peers' backs; between collectives it is read and
/// written through the exposure itself (it dereferences to `[T]`).
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// use zcoll::op::Builtin;
/// # let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// let mut state = comm.alloc::<f64>(1 << 16)?;
/// let mut exposed = comm.expose(&mut state)?;
/// for step in 0..100 {
///     exposed.fill(step as f64);
///     exposed.all_reduce(Builtin::Sum)?; // no address exchange, no attach
///     assert_eq!(exposed[0], step as f64 * comm.size() as f64);
/// }
/// exposed.withdraw()?;
/// # Ok::<(), zcoll::Error>(())
/// ```
///
/// The buffer cannot be freed while exposed:
///
/// ```compile_fail,E0505
/// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
/// let mut buf = vec![0u8; 100];
/// let mut exposed = comm.expose(&mut buf)?;
/// drop(buf);
/// exposed.broadcast(0)?;
/// # Ok(()) }
/// ```
///
/// nor moved:
///
/// ```compile_fail,E0505
/// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
/// let mut buf = vec![0u8; 100];
/// let mut exposed = comm.expose(&mut buf)?;
/// let moved = buf;
/// exposed.broadcast(0)?;
/// # drop(moved); Ok(()) }
/// ```
///
/// nor resized (which could reallocate it):
///
/// ```compile_fail,E0499
/// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
/// let mut buf = vec![0u8; 100];
/// let mut exposed = comm.expose(&mut buf)?;
/// buf.push(1);
/// exposed.broadcast(0)?;
/// # Ok(()) }
/// ```
///
/// nor changed except through the exposure:
///
/// ```compile_fail,E0506
/// # fn f(comm: &zcoll::Comm) -> zcoll::Result<()> {
/// let mut buf = [0u8; 100];
/// let mut exposed = comm.expose(&mut buf)?;
/// buf[0] = 1;
/// exposed.broadcast(0)?;
/// # Ok(()) }
/// ```
pub struct Exposure<'a, T: Pod> {
    comm: &'a Comm,
    buf: &'a mut [T],
    reg: Option<Registration<'a>>,
}

impl<'a, T: Pod> Exposure<'a, T> {
    /// Registers `buf` with every rank of the node (see [`Comm::expose`]).
    fn new(comm: &'a Comm, buf: &'a mut [T]) -> Result<Exposure<'a, T>> {
        comm.route()?;
        let reg = expose::register(&comm.ctx(), bytemuck::cast_slice_mut(buf), std::mem::size_of::<T>())?;
        Ok(Exposure { comm, buf, reg: Some(reg) })
    }

    /// Broadcasts the buffer from `root` to every rank's exposed buffer, as
    /// [`Comm::broadcast_into`] does, with the peers' buffers taken from the registration.
    ///
    /// # Errors
    ///
    /// As [`Comm::broadcast_into`], and `Error::Mismatch` (`what: "exposure"`) if ranks
    /// use different exposures.
    pub fn broadcast(&mut self, root: Rank) -> Result<()> {
        match self.comm.route()? {
            Route::Node => {
                let src = self.comm.local_of(root);
                let reg = self.reg.as_ref().expect("only `withdraw` takes the registration");
                let (buf, ctx) = (bytemuck::cast_slice_mut(&mut *self.buf), self.comm.ctx());
                expose::with(&ctx, reg, || bcast::bcast(&ctx, buf, root, src, BcastAlgorithm::Auto, None))
            }
            Route::Nodes(..) => self.comm.broadcast_into(self.buf, root),
        }
    }

    /// Combines every rank's buffer with `op` into every rank's buffer, in place, as
    /// [`Comm::all_reduce_in_place`] does, with the peers' buffers taken from the
    /// registration.
    ///
    /// # Errors
    ///
    /// As [`Comm::all_reduce_in_place`], and `Error::Mismatch` (`what: "exposure"`) if
    /// ranks use different exposures.
    pub fn all_reduce<O: Operator<T>>(&mut self, op: O) -> Result<()> {
        match self.comm.route()? {
            Route::Node => {
                let reg = self.reg.as_ref().expect("only `withdraw` takes the registration");
                let (buf, ctx) = (Bufs::InPlace(&mut *self.buf), self.comm.ctx());
                expose::with(&ctx, reg, || reduce::reduce(&ctx, buf, None, &op, ReduceAlgorithm::Auto))
            }
            Route::Nodes(..) => self.comm.all_reduce_in_place(self.buf, op),
        }
    }

    /// Withdraws the exposure: waits until every rank of the node withdraws its own, then
    /// releases the mappings of the peers' buffers. Dropping the exposure does the same and
    /// ignores errors.
    ///
    /// # Errors
    ///
    /// `Error::Mismatch` if a rank does something else at this point, `PeerDied` or
    /// `Timeout`.
    pub fn withdraw(mut self) -> Result<()> {
        self.withdraw_now()
    }

    fn withdraw_now(&mut self) -> Result<()> {
        match self.reg.take() {
            Some(reg) => expose::withdraw(&self.comm.ctx(), reg),
            None => Ok(()),
        }
    }
}

impl<T: Pod> Drop for Exposure<'_, T> {
    /// Withdraws the exposure: a collective step, which blocks until every rank of the
    /// node withdraws its own. A rank that drops it while unwinding a panic does not wait:
    /// it fails the withdrawal round at once, so that its peers' withdrawal (or whatever
    /// collective they are in) ends with an `Err`, not a hang.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.withdraw_now();
        } else if let Some(reg) = self.reg.take() {
            expose::abandon(&self.comm.ctx(), reg);
        }
    }
}

impl<T: Pod> Deref for Exposure<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.buf
    }
}

impl<T: Pod> DerefMut for Exposure<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.buf
    }
}

impl<T: Pod> std::fmt::Debug for Exposure<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exposure")
            .field("len", &self.buf.len())
            .field("id", &self.reg.as_ref().map(|r| r.id()))
            .finish_non_exhaustive()
    }
}
