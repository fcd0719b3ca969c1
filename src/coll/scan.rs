//! Prefix reductions and the block reduce-scatter: `scan` (rank `i` receives `x_0 ∘ ... ∘
//! x_i`), `exclusive_scan` (`x_0 ∘ ... ∘ x_(i-1)`; rank 0's output is left as it was) and
//! `reduce_scatter_block` (rank `i` receives block `i` of `x_0 ∘ ... ∘ x_(p-1)`).
//!
//! One algorithm serves the three: after the checks, rank `i` folds, in rank order, a
//! range of a set of ranks' inputs straight out of their send buffers, chunk by chunk
//! through its scratch (the partitioned reduction's fold), into its own output. Scan folds
//! `[0, n)` of ranks `0..=i`; reduce-scatter folds block `i` of every rank. Per rank, with
//! `c` ranks folded and `n` bytes:
//!
//! ```text
//! (c - 1) (ceil(n / chunk) alpha + n beta) + n (c - 1) gamma_op
//! ```
//!
//! Every byte is copied once per reader, never staged; the scan's last rank does the most
//! work (`p - 1` reads), which a pipelined or tree scan would spread over the ranks: a
//! later improvement. Non-commutative operators fold in rank order.

use super::reduce::fold;
use super::{check, typed_op, BadLength, Ctx, Kind};
use crate::error::{Error, Result};
use crate::op::Operator;
use crate::pod::Pod;
use crate::sync::SCRATCH_HALF;

/// Which prefix-like reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    /// Inclusive prefix.
    Scan,
    /// Exclusive prefix.
    Exscan,
    /// Block `i` of the whole reduction to rank `i`.
    ReduceScatterBlock,
}

/// Runs `which` on the node over `send` into `recv`.
///
/// # Errors
///
/// On every rank of the node: `LengthMismatch` (sends of different lengths; an output of
/// the wrong length), `Mismatch` (another collective, operator or element type),
/// `Unsupported` (an operator that does not apply to `T`); a transport error or a peer's
/// failure.
pub(crate) fn scan<T: Pod, O: Operator<T>>(
    ctx: &Ctx<'_>,
    which: Which,
    send: &[T],
    recv: &mut [T],
    oper: &O,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let p = ctx.ctl.size();
    let kind = match which {
        Which::Scan => Kind::Scan,
        Which::Exscan => Kind::Exscan,
        Which::ReduceScatterBlock => Kind::ReduceScatterBlock,
    };
    let word = typed_op::<T>(kind, 0, (oper.code() as u32) | (size.min(0xffff) as u32) << 16);
    let call =
        crate::sync::Call::new(word, bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv), false);
    let round = check(ctx, call, false, |r| {
        let first = r.send_len(0);
        for q in 0..r.size() {
            let c = r.call(q);
            if c.send_len != first {
                return Err(BadLength { culprit: q, expected: first, found: c.send_len });
            }
            // The reduce-scatter's send is `p` blocks of its receive: a send that cannot be
            // (every rank's is `first` long) is named as the send, against `p` of the
            // receives it was given, not as a receive of a fractional block.
            if which == Which::ReduceScatterBlock && first % (p * size.max(1)) != 0 {
                return Err(BadLength { culprit: q, expected: p * c.recv_len, found: first });
            }
            let want = match which {
                Which::ReduceScatterBlock => first / p,
                _ => first,
            };
            if c.recv_len != want {
                return Err(BadLength { culprit: q, expected: want, found: c.recv_len });
            }
        }
        Ok(())
    })?;
    let moved = (|| {
        let me = round.me();
        if !oper.applies() || (size > 0 && (SCRATCH_HALF / size == 0 || std::mem::align_of::<T>() > 64)) {
            return Err(Error::Unsupported {
                rank: round.rank_of(me),
                what: format!("this operator on {size}-byte elements"),
            });
        }
        let n = recv.len();
        let (ranks, at) = match which {
            Which::Scan => (0..me + 1, 0),
            Which::Exscan => (0..me, 0),
            Which::ReduceScatterBlock => (0..p, me * n),
        };
        if n == 0 || ranks.is_empty() {
            return Ok(());
        }
        let sends: Vec<_> = (0..p).map(|j| round.peer_send(j)).collect();
        let order: Vec<usize> = ranks.collect();
        let mut scratch = round.scratch();
        let (_, x) = super::reduce::scratch_halves::<T>(&mut scratch);
        let chunk = x.len().max(1);
        let mut start = 0;
        while start < n {
            let c = start..(start + chunk).min(n);
            let own = &send[at + c.start..at + c.end];
            fold(&round, &sends, oper, &order, at + c.start, &mut recv[c.clone()], Some(own), x)?;
            start = c.end;
        }
        Ok(())
    })();
    round.finish(moved)
}
