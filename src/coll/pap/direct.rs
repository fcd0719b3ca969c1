//! PAP-Direct: alltoall among the ranks of one node, each rank serving the peers that
//! have arrived (see the module docs of `pap`).

use super::packets::{Packets, Run, Src};
use super::{compatible, self_ok, serve_arrived, settle, Mode, TO_RECV};
use crate::coll::allgather::lengths;
use crate::coll::{alltoall_op, whole_blocks, Ctx};
use crate::error::Result;
use crate::sync::copy_block;
use crate::sync::{Call, Round};

/// Alltoall among the ranks of the node, arrival-aware, by `mode`; `code` is the
/// algorithm's wire code, which the ranks must agree on.
///
/// # Errors
///
/// On every rank of the node: `LengthMismatch` if a send or receive buffer is not `p`
/// blocks of rank 0's block length, `Mismatch` if the algorithms differ; a transport
/// error or a peer's failure during the copies.
pub(crate) fn alltoall(
    ctx: &Ctx<'_>,
    send: &[u8],
    recv: &mut [u8],
    mode: Mode,
    code: u8,
    elem: usize,
) -> Result<()> {
    let p = ctx.ctl.size();
    let n = send.len() / p;
    let (staged, write) = (mode == Mode::Staged, mode == Mode::Write);
    let mut call = Call {
        op: alltoall_op(code, elem),
        root: 0,
        send: send.as_ptr() as usize,
        send_len: send.len(),
        recv: recv.as_mut_ptr() as usize,
        recv_len: recv.len(),
        recv_writable: false,
        aux: 0,
        aux2: 0,
    };
    let ok = self_ok(&call, p);
    // Only a rank whose own call is right lets peers write into it.
    call.recv_writable = write && ok;
    // Leftovers of a failed earlier round must go before anyone can push for this one.
    let drained = if staged { ctx.ctl.drain_p2p() } else { Ok(()) };
    let round = ctx.ctl.begin_eager(&call, 0)?;
    let me = round.me();
    let moved = drained.and_then(|()| {
        if !ok || n == 0 {
            return Ok(());
        }
        match (p, staged) {
            (1, _) => Ok(()),
            (_, true) => staged_exchange(&round, send, recv, n),
            (_, false) => direct(&round, send, recv, n, write),
        }
    });
    settle(ctx, round, moved, false, |r| {
        let op = r.call(0).op;
        let whole = |first: usize| whole_blocks(first, r.size(), op);
        lengths(r, whole, whole)
    })?;
    // A rank's own block, once the verdict is in: copied before it, it landed in the
    // buffer of a culprit whose call is right in itself (another element size, another
    // PAP variant), whose buffers a failed call leaves untouched.
    copy_block(&send[me * n..(me + 1) * n], &mut recv[me * n..(me + 1) * n]);
    Ok(())
}

/// PAP-Direct, by CMA writes (`write`) or reads.
fn direct(round: &Round<'_>, send: &[u8], recv: &mut [u8], n: usize, write: bool) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let mine = round.call(me);
    let mut pending: Vec<usize> = (1..p).map(|i| (me + i) % p).collect();
    let landed = |round: &Round<'_>| !write || round.completions() >= p as u64 - 1;
    loop {
        let agreed = serve_arrived(round, &mut pending, |q| {
            if !compatible(&mine, &round.call(q)) {
                return Ok(false);
            }
            if write {
                round.write_recv(&send[q * n..(q + 1) * n], q, me * n)?;
                round.complete(q);
            } else {
                round.read_send(q, me * n, &mut recv[q * n..(q + 1) * n])?;
            }
            Ok(true)
        })?;
        if !agreed {
            // The verdict names the culprit; nothing more moves.
            return Ok(());
        }
        if pending.is_empty() && landed(round) {
            return Ok(());
        }
        if round.peer_failed().is_some() {
            // Its blocks may never come; `finish` reports it.
            return Ok(());
        }
        round.wait_for(|| {
            pending.iter().any(|&q| round.arrived(q))
                || (pending.is_empty() && landed(round))
                || round.peer_failed().is_some()
        })?;
    }
}

/// PAP copy-in/copy-out inside a node: block `q` of `send` goes to `q`'s FIFO once `q`
/// has arrived; the packets landing in this rank's FIFO go to their place in `recv`.
fn staged_exchange(round: &Round<'_>, send: &[u8], recv: &mut [u8], n: usize) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let mine = round.call(me);
    let mut packets = Packets::new((1..p).map(|i| (me + i) % p));
    for q in (1..p).map(|i| (me + i) % p) {
        packets.owe(q, Run { stream: TO_RECV, src: Src::Send, from: q * n, to: me * n, len: n });
    }
    packets.expected[0] = (p - 1) * n;
    let agrees = |q: usize| compatible(&mine, &round.call(q));
    loop {
        if !packets.push(round, &agrees, &|_| send) {
            return Ok(());
        }
        packets.take(round, recv, &mut [])?;
        if packets.pushed() && packets.expected == [0; 3] || round.peer_failed().is_some() {
            return Ok(());
        }
        round.wait_for(|| packets.ready(round) || round.peer_failed().is_some())?;
    }
}
