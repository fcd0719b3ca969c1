//! Barrier: every rank of the node arrives, then every rank leaves.
//!
//! The arrive phase of the round is the barrier itself; the finish phase lets the ranks
//! agree on the outcome (a rank that called another collective is an error on all).
//! Cost: two flag exchanges, `2 p` cache-line reads per rank.

use super::{check, op, Ctx, Kind};
use crate::error::Result;
use crate::sync::Call;

/// Waits until every rank of the node has called it.
///
/// # Errors
///
/// `Mismatch` if ranks called different collectives; a wait's error.
pub(crate) fn barrier(ctx: &Ctx<'_>) -> Result<()> {
    let call = Call { op: op(Kind::Barrier, 0, 0), ..Call::default() };
    check(ctx, call, false, |_| Ok(()))?.finish(Ok(()))
}
