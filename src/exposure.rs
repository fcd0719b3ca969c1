//! [`Exposure`]: a buffer registered with every peer once, for many collectives.

use crate::coll::reduce::ReduceAlgorithm;
use crate::coll::{self, all_equal, bcast::BcastAlgorithm, check, op, reduce::Bufs, Kind};
use crate::comm::Comm;
use crate::error::Result;
use crate::op::Operator;
use crate::pod::Pod;
use crate::sync::{Call, Registration};
use mpi::topology::Rank;
use std::ops::{Deref, DerefMut};

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
    pub(crate) fn new(comm: &'a Comm, buf: &'a mut [T]) -> Result<Exposure<'a, T>> {
        let ctx = comm.ctx();
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let (addr, len) = (bytes.as_mut_ptr() as usize, bytes.len());
        let call = Call {
            op: op(Kind::Expose, 0, std::mem::size_of::<T>() as u32),
            root: -1,
            send: addr,
            send_len: len,
            recv: addr,
            recv_len: len,
            recv_writable: false,
            aux: 0,
            aux2: 0,
        };
        let round = check(&ctx, call, false, |r| all_equal(r, |c| c.send_len, r.call(0).send_len))?;
        let reg = round.register();
        round.finish(Ok(()))?;
        Ok(Exposure { comm, buf, reg: Some(reg) })
    }

    /// Runs `f` on the exposure's node with its registration.
    fn registered(&mut self, f: impl FnOnce(&coll::Ctx<'_>, &mut [T]) -> Result<()>) -> Result<()> {
        let ctx = self.comm.ctx();
        let reg = self.reg.as_ref().expect("only `withdraw` takes the registration");
        let buf = &mut *self.buf;
        ctx.ctl.with_registration(reg, || f(&ctx, buf))
    }

    /// Broadcasts the buffer from `root` to every rank's exposed buffer, as
    /// [`Comm::broadcast_into`] does, with the peers' buffers taken from the registration.
    ///
    /// # Errors
    ///
    /// As [`Comm::broadcast_into`], and `Error::Mismatch` (`what: "exposure"`) if ranks
    /// use different exposures.
    pub fn broadcast(&mut self, root: Rank) -> Result<()> {
        if self.comm.nodes() > 1 {
            return self.comm.broadcast_into(self.buf, root);
        }
        let src = self.comm.local_of(root);
        self.registered(|ctx, buf| {
            coll::bcast::bcast(ctx, bytemuck::cast_slice_mut(buf), root, src, BcastAlgorithm::Auto, None)
        })
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
        if self.comm.nodes() > 1 {
            return self.comm.all_reduce_in_place(self.buf, op);
        }
        self.registered(|ctx, buf| {
            coll::reduce::reduce(ctx, Bufs::InPlace(buf), None, &op, ReduceAlgorithm::Auto)
        })
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
        let Some(reg) = self.reg.take() else { return Ok(()) };
        let ctx = self.comm.ctx();
        ctx.ctl.with_registration(&reg, || check(&ctx, WITHDRAW, false, |_| Ok(()))?.finish(Ok(())))
    }
}

/// The call of the withdrawal round: no buffer, nothing to move.
const WITHDRAW: Call = Call {
    op: Kind::Withdraw as u64,
    root: -1,
    send: 0,
    send_len: 0,
    recv: 0,
    recv_len: 0,
    recv_writable: false,
    aux: 0,
    aux2: 0,
};

impl<T: Pod> Drop for Exposure<'_, T> {
    /// Withdraws the exposure: a collective step, which blocks until every rank of the
    /// node withdraws its own. A rank that drops it while unwinding a panic does not wait:
    /// it fails the withdrawal round at once (`Control::abandon`), so that its peers'
    /// withdrawal (or whatever collective they are in) ends with an `Err`, not a hang.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.withdraw_now();
        } else if let Some(reg) = self.reg.take() {
            let ctl = self.comm.ctx().ctl;
            let _ = ctl.with_registration(&reg, || {
                ctl.abandon(&WITHDRAW);
                Ok(())
            });
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
