//! Barrier: every rank of the node arrives, then every rank leaves.
//!
//! The arrive phase of the round is the barrier itself: every rank checks every rank's
//! call there (a rank that called another collective is an error on all), and the call
//! shares no buffer, so a barrier that succeeds leaves without a finish phase (a private
//! round, see `sync`). Cost: one flag exchange, `p` cache-line reads per rank.

use super::{check, op, Ctx, Kind};
use crate::error::Result;
use crate::sync::{Call, PRIVATE};

/// Waits until every rank of the node has called it.
///
/// # Errors
///
/// `Mismatch` if ranks called different collectives; a wait's error.
pub(crate) fn barrier(ctx: &Ctx<'_>) -> Result<()> {
    let call = Call { op: op(Kind::Barrier, 0, 0) | PRIVATE, ..Call::default() };
    check(ctx, call, false, |_| Ok(()))?.finish(Ok(()))
}
