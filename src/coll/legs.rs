//! The node legs of the two-level collectives: a gather to the node's leader (local rank
//! 0) and a scatter from it, as rounds of their own.

use super::{all_equal, check, op, BadLength, Ctx, Kind};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Round, Span};
use crate::transport::TransportKind;

/// The algorithm code of the intra-node gather leg of a two-level collective.
const HIER_GATHER: u8 = 0xf0;

/// The algorithm code of the intra-node scatter leg of a two-level collective.
const HIER_SCATTER: u8 = 0xf1;

/// The intra-node gather leg: local rank `a`'s `mine` lands at `out[a * len..]` of the
/// leader (local rank 0), with `len = mine.len()`; `out` is empty elsewhere.
pub(crate) fn gather_to_leader(ctx: &Ctx<'_>, kind: Kind, mine: &[u8], out: &mut [u8]) -> Result<()> {
    let len = mine.len();
    let call =
        Call { op: op(kind, HIER_GATHER, 0), send: mine.as_ptr() as usize, send_len: len, ..Call::default() };
    let round = check(ctx, call, false, |r| all_equal(r, Round::send_len, r.send_len(0)))?;
    let moved = gather_moves(ctx, &round, mine, out);
    round.finish(moved)
}

/// The intra-node scatter leg: `src[b * len..]` of the leader (local rank 0) lands in
/// `recv` of local rank `b`, with `len = recv.len()`; `src` is empty except at the leader.
pub(crate) fn scatter_from_leader(ctx: &Ctx<'_>, kind: Kind, src: &[u8], recv: &mut [u8]) -> Result<()> {
    let len = recv.len();
    let call = Call {
        op: op(kind, HIER_SCATTER, 0),
        send: src.as_ptr() as usize,
        send_len: src.len(),
        recv: recv.as_mut_ptr() as usize,
        recv_len: len,
        ..Call::default()
    };
    let round = check(ctx, call, false, |r| {
        let len = r.recv_len(0);
        all_equal(r, Round::recv_len, len)?;
        match r.send_len(0) {
            n if n == r.size() * len => Ok(()),
            found => Err(BadLength { culprit: 0, expected: r.size() * len, found }),
        }
    })?;
    let moved = scatter_moves(ctx, &round, src, recv);
    round.finish(moved)
}

/// The copies of [`gather_to_leader`].
fn gather_moves(ctx: &Ctx<'_>, round: &Round<'_>, mine: &[u8], out: &mut [u8]) -> Result<()> {
    let len = mine.len();
    let (p, me) = (round.size(), round.me());
    if me == 0 {
        copy_block(mine, &mut out[..len]);
    }
    match ctx.transport {
        TransportKind::Cico => round.stage_pairwise(mine, out, |src, dst| match (src, dst) {
            (src, 0) if src != 0 => Span { len, from: 0, to: src * len },
            _ => Span::default(),
        }),
        _ if me == 0 => (1..p).try_for_each(|a| round.read_send(a, 0, &mut out[a * len..(a + 1) * len])),
        _ => Ok(()),
    }
}

/// The copies of [`scatter_from_leader`].
fn scatter_moves(ctx: &Ctx<'_>, round: &Round<'_>, src: &[u8], recv: &mut [u8]) -> Result<()> {
    let len = recv.len();
    let me = round.me();
    if me == 0 {
        copy_block(&src[..len], recv);
    }
    match ctx.transport {
        TransportKind::Cico => round.stage_pairwise(src, recv, |s, d| match (s, d) {
            (0, d) if d != 0 => Span { len, from: d * len, to: 0 },
            _ => Span::default(),
        }),
        _ if me != 0 => round.read_send(0, me * len, recv),
        _ => Ok(()),
    }
}
