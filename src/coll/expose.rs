//! The exposure protocol: a buffer registered with every rank of the node once, for many
//! collectives (the registration cache of the shared-address-space thesis), and its
//! withdrawal. `comm::exposure` holds the user's handle over it.

use super::{all_equal, check, op, Ctx, Kind};
use crate::error::Result;
use crate::sync::{Call, Registration, Round};

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

/// Registers `buf` (of elements of `elem` bytes) with every rank of the node, which map or
/// attach it once, here. Collective over the node.
///
/// # Errors
///
/// On every rank of the node: `LengthMismatch` if the buffers' lengths differ, `Mismatch`
/// if a rank calls another collective; `PeerDied` or `Timeout`.
pub(crate) fn register<'c>(ctx: &Ctx<'c>, buf: &mut [u8], elem: usize) -> Result<Registration<'c>> {
    let (addr, len) = (buf.as_mut_ptr() as usize, buf.len());
    let call = Call {
        op: op(Kind::Expose, 0, elem as u32),
        root: -1,
        send: addr,
        send_len: len,
        recv: addr,
        recv_len: len,
        ..Call::default()
    };
    let round = check(ctx, call, false, |r| all_equal(r, Round::send_len, r.send_len(0)))?;
    let reg = round.register();
    round.finish(Ok(()))?;
    Ok(reg)
}

/// Runs `f`, a collective of this node, with the peers' buffers taken from `reg`.
///
/// # Errors
///
/// `f`'s, and `Mismatch` (`what: "exposure"`) if ranks use different registrations.
pub(crate) fn with<R>(ctx: &Ctx<'_>, reg: &Registration<'_>, f: impl FnOnce() -> Result<R>) -> Result<R> {
    ctx.ctl.with_registration(reg, f)
}

/// Withdraws `reg`: waits until every rank of the node withdraws its own, then releases
/// the mappings of the peers' buffers.
///
/// # Errors
///
/// `Mismatch` if a rank does something else at this point, `PeerDied` or `Timeout`.
pub(crate) fn withdraw(ctx: &Ctx<'_>, reg: Registration<'_>) -> Result<()> {
    with(ctx, &reg, || check(ctx, WITHDRAW, false, |_| Ok(()))?.finish(Ok(())))
}

/// Withdraws `reg` without waiting, while unwinding a panic: the withdrawal round fails at
/// once, so that the peers' withdrawal (or whatever collective they are in) ends with an
/// `Err`, not a hang.
pub(crate) fn abandon(ctx: &Ctx<'_>, reg: Registration<'_>) {
    let _ = with(ctx, &reg, || {
        ctx.ctl.abandon(&WITHDRAW, None);
        Ok(())
    });
}
