//! PAP-Shm-Direct: the arrival-aware alltoall across nodes, in three phases inside one
//! eager round per node (see the module docs of `pap`).

use super::{Hierarchy, Net, Nodes};
use crate::coll::algorithm::Algorithm;
use crate::coll::alltoall::AlltoallAlgorithm;
use crate::coll::pap::packets::{Packets, Run, Src};
use crate::coll::pap::{serve_arrived, TO_OUTBOX, TO_RECV, TO_SCATTER};
use crate::coll::{alltoall_op, differs_in, whole_blocks, ELEMENT_SIZE};
use crate::error::{failure_key, named, Error, Result};
use crate::sync::copy_block;
use crate::sync::{Call, Round};
use crate::transport::TransportKind;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// The MPI tags of the leaders' exchange.
const HEADER_TAG: i32 = 0x7a50;
const DATA_TAG: i32 = 0x7a51;

/// What the checks need of every rank of the communicator: its op word and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Shape {
    op: u64,
    send_len: u64,
    recv_len: u64,
}

impl Shape {
    fn of(call: &Call) -> Shape {
        // `aux2` carries the user's receive length (a leader publishes its inbox as `recv`).
        Shape { op: call.op, send_len: call.send_len as u64, recv_len: call.aux2 }
    }
}

/// The verdict over every rank's shape, as four integers every leader computes alike:
/// `[0, ..]` for agreement, else `[1 + kind, culprit, expected, found]`.
fn shapes_verdict(shapes: &[Shape], k_of: &[usize], n: usize) -> [i64; 4] {
    let p = shapes.len();
    let first = shapes[0];
    let whole = whole_blocks(first.send_len as usize, p, first.op) as u64;
    let find = |f: &dyn Fn(&Shape) -> bool| shapes.iter().position(|s| !f(s));
    if let Some(c) = find(&|s| s.op & 0xff == first.op & 0xff) {
        return [1, c as i64, 0, 0];
    }
    if let Some(c) = find(&|s| s.send_len == whole) {
        return [2, c as i64, whole as i64, shapes[c].send_len as i64];
    }
    if let Some(c) = find(&|s| s.recv_len == whole) {
        return [2, c as i64, whole as i64, shapes[c].recv_len as i64];
    }
    if let Some(c) = find(&|s| differs_in(first.op, s.op) != ELEMENT_SIZE) {
        return [5, c as i64, 0, 0];
    }
    if let Some(c) = find(&|s| s.op == first.op) {
        return [3, c as i64, 0, 0];
    }
    // The largest leader-to-leader message must fit an MPI count.
    let big = k_of.iter().max().copied().unwrap_or(0);
    let largest = big.saturating_mul(big).saturating_mul(n);
    if largest > i32::MAX as usize {
        return [4, 0, largest as i64, 0];
    }
    [0; 4]
}

/// Agrees across the communicator on the outcome: the leaders' verdict (the same on every
/// leader that has one), then the rank that failed (the least [`failure_key`] of the
/// ranks' errors, as in [`agree`](super::agree)).
fn agree(parent: &SimpleCommunicator, verdict: Option<[i64; 4]>, local: Result<()>) -> Result<()> {
    let rank = parent.rank();
    let mut mine = [i64::MIN; 5];
    if let Some(v) = verdict {
        mine[..4].copy_from_slice(&v);
    }
    if let Err(e) = &local {
        mine[4] = -failure_key(e, rank);
    }
    let mut all = [0i64; 5];
    parent.all_reduce_into(&mine[..], &mut all[..], SystemOperation::max());
    let (culprit, expected, found) = (all[1] as i32, all[2] as usize, all[3] as usize);
    match all[0] {
        1 => return Err(Error::Mismatch { rank, culprit, what: "collective" }),
        2 => return Err(Error::LengthMismatch { rank, culprit, expected, found }),
        3 => return Err(Error::Mismatch { rank, culprit, what: "algorithm" }),
        5 => return Err(Error::Mismatch { rank, culprit, what: ELEMENT_SIZE }),
        4 => {
            return Err(Error::Unsupported {
                rank,
                what: format!(
                    "a two-level exchange of {expected} bytes between leaders (MPI counts stop at 2 GiB)"
                ),
            })
        }
        _ => {}
    }
    match (local, all[4]) {
        (Err(e), _) => Err(e),
        (Ok(()), i64::MIN) => Ok(()),
        (Ok(()), key) => Err(Error::PeerFailed { rank, peer: named(-key) }),
    }
}

/// Where the blocks of a node's exchange live: the leader's outgoing buffer holds, per
/// destination node `D`, the blocks of every local rank `ia` to every rank `ib` of `D` at
/// `(ia kD + ib) n`; its inbox holds, per source node `S`, the blocks of every rank `ia`
/// of `S` to every local rank `ib` at `(ia k + ib) n`.
struct Layout {
    /// The ranks of every node, ascending.
    members: Vec<Vec<usize>>,
    /// This rank's node and the node's size.
    node: usize,
    k: usize,
    n: usize,
    /// Offsets of each destination node's region in the outbox (the own node's is empty).
    out_at: Vec<usize>,
    /// Offsets of each source node's region in the inbox.
    in_at: Vec<usize>,
}

impl Layout {
    fn new(members: Vec<Vec<usize>>, node: usize, n: usize) -> Layout {
        let k = members[node].len();
        let (mut out_at, mut in_at, mut at) = (Vec::new(), Vec::new(), 0usize);
        for (d, m) in members.iter().enumerate() {
            out_at.push(at);
            in_at.push(at);
            if d != node {
                at = at.saturating_add(k.saturating_mul(m.len()).saturating_mul(n));
            }
        }
        out_at.push(at);
        in_at.push(at);
        Layout { members, node, k, n, out_at, in_at }
    }

    fn nodes(&self) -> usize {
        self.members.len()
    }

    /// Bytes of the outbox (and of the inbox: the same size).
    fn total(&self) -> usize {
        self.out_at[self.nodes()]
    }

    fn region(&self, d: usize) -> std::ops::Range<usize> {
        self.out_at[d]..self.out_at[d + 1]
    }

    /// The ranges of `ib`'s blocks from source node `s` in the inbox, in `s`'s rank order.
    fn inbox_ranges(&self, s: usize, ib: usize) -> Vec<(usize, usize)> {
        (0..self.members[s].len()).map(|ia| (self.in_at[s] + (ia * self.k + ib) * self.n, self.n)).collect()
    }

    /// The ranges of local rank `ia`'s send buffer bound for node `d`, and where they go in
    /// the outbox (contiguous).
    fn gather_ranges(&self, d: usize, ia: usize) -> (Vec<(usize, usize)>, std::ops::Range<usize>) {
        let n = self.n;
        let ranges = self.members[d].iter().map(|&g| (g * n, n)).collect();
        let kd = self.members[d].len();
        let at = self.out_at[d] + ia * kd * n;
        (ranges, at..at + kd * n)
    }
}

impl Hierarchy {
    /// Alltoall over several nodes, arrival-aware (PAP-Shm-Direct; see the module docs).
    ///
    /// # Errors
    ///
    /// On every rank: `LengthMismatch` or `Mismatch` as the other alltoalls (checked from
    /// every rank's shape, carried in the leaders' headers), `Unsupported` if a leader's
    /// message exceeds the 2 GiB an MPI count can hold; a transport error or a peer's
    /// failure, agreed across nodes.
    pub(crate) fn pap_alltoall(
        &self,
        net: Net<'_>,
        send: &[u8],
        recv: &mut [u8],
        algorithm: AlltoallAlgorithm,
        elem: usize,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        let size = parent.size() as usize;
        let n = send.len() / size;
        let word = alltoall_op(algorithm.code(), elem);
        let layout = Layout::new(Nodes::of(self, size).members, self.my_node(), n);
        if layout.nodes() > ctx.ctl.stage_bytes() / 8 {
            // The same on every rank: the node count is.
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: format!("an arrival-aware alltoall over {} nodes", layout.nodes()),
            });
        }
        let leader = ctx.ctl.me() == 0;
        let biggest = layout.members.iter().map(Vec::len).max().unwrap_or(0);
        let fits = biggest.saturating_mul(biggest).saturating_mul(n) <= i32::MAX as usize;
        let ok = send.len() == recv.len() && whole_blocks(send.len(), size, word) == send.len() && fits;
        let room = if leader && ok { layout.total() } else { 0 };
        let (mut outbox, mut inbox) = (vec![0u8; room], vec![0u8; room]);
        let cico = ctx.transport == TransportKind::Cico;
        let call = Call {
            op: word,
            root: 0,
            send: send.as_ptr() as usize,
            send_len: send.len(),
            // A leader publishes its inbox, for its local ranks to read what has landed.
            recv: if leader { inbox.as_mut_ptr() as usize } else { recv.as_mut_ptr() as usize },
            recv_len: if leader { inbox.len() } else { recv.len() },
            recv_writable: false,
            aux: 0,
            // The user's receive length, which the checks compare.
            aux2: recv.len() as u64,
        };
        let drained = if cico { ctx.ctl.drain_p2p() } else { Ok(()) };
        let round = ctx.ctl.begin_eager(&call, if leader && !cico { layout.nodes() } else { 0 })?;
        let leg = NodeLeg { round: &round, layout: &layout, send, ok: ok && drained.is_ok(), cico };
        let (moved, verdict) = match self.leaders() {
            Some(leaders) => {
                let mut header_in: Vec<Vec<u8>> =
                    layout.members.iter().map(|m| vec![0u8; header_len(m.len())]).collect();
                let mut header_out: Vec<Vec<u8>> = vec![Vec::new(); layout.nodes()];
                let (moved, verdict) = mpi::request::scope(|scope| {
                    lead(&leg, leaders, scope, &mut outbox, &mut inbox, recv, &mut header_in, &mut header_out)
                });
                (moved, Some(verdict))
            }
            None => (follow(&leg, recv), None),
        };
        // The node agrees first (every local rank's buffers stay in use until then), then the
        // communicator.
        let local = round.finish(drained.and(moved));
        agree(parent, verdict, local)?;
        // This rank's own block, once every rank agreed: copied before, it landed in the
        // buffer of a culprit whose call is right in itself (another element size, another
        // PAP variant), which a failed call leaves untouched.
        let g = layout.members[layout.node][ctx.ctl.me()];
        copy_block(&send[g * n..(g + 1) * n], &mut recv[g * n..(g + 1) * n]);
        Ok(())
    }
}

/// What the two roles of a node share.
struct NodeLeg<'r, 'c> {
    round: &'r Round<'c>,
    layout: &'r Layout,
    send: &'r [u8],
    /// This rank's own call is right (and its messages fit): it may move data.
    ok: bool,
    /// The node's transport is copy-in/copy-out: the local legs go through the FIFOs.
    cico: bool,
}

impl NodeLeg<'_, '_> {
    fn me(&self) -> usize {
        self.round.me()
    }

    /// Whether local rank `q` has arrived with a call this rank may exchange data with.
    /// False both before `q` arrives and when it disagrees: to conclude that it disagrees,
    /// see it arrived first (arrival is monotonic, so `agrees` then answers for its call).
    fn agrees(&self, q: usize) -> bool {
        let (round, me) = (self.round, self.me());
        self.ok && round.arrived(q) && {
            let (a, b) = (round.call(me), round.call(q));
            (a.op, a.root, a.aux, a.aux2, a.send_len) == (b.op, b.root, b.aux, b.aux2, b.send_len)
        }
    }

    /// This rank's position in the communicator.
    fn global(&self, local: usize) -> usize {
        self.layout.members[self.layout.node][local]
    }

    /// The blocks between ranks of this node, by CMA: this rank reads, from every arrived
    /// local peer in `pending`, the block that peer sends it. Returns `false` if an arrived
    /// peer disagrees (the verdict reports it).
    fn local_reads(&self, pending: &mut Vec<usize>, recv: &mut [u8]) -> Result<bool> {
        let (n, me, round) = (self.layout.n, self.me(), self.round);
        let g_me = self.global(me);
        serve_arrived(round, pending, |a| {
            if !self.agrees(a) {
                return Ok(false);
            }
            let g = self.global(a);
            // Its own block this rank copies once the verdict is in (`pap_alltoall`).
            if a != me {
                round.read_send(a, g_me * n, &mut recv[g * n..(g + 1) * n])?;
            }
            Ok(true)
        })
    }

    /// Copies this rank's blocks from source node `s` out of the leader's inbox: `region`
    /// (the landed region itself, at the leader), or by a CMA read of the leader's inbox.
    fn copy_out(&self, s: usize, region: Option<&[u8]>, recv: &mut [u8]) -> Result<()> {
        let (l, me, round) = (self.layout, self.me(), self.round);
        let n = l.n;
        let ranges = l.inbox_ranges(s, me);
        let src = &l.members[s];
        let contiguous = src.windows(2).all(|w| w[1] == w[0] + 1);
        let mut scratch = Vec::new();
        let dst: &mut [u8] = if contiguous {
            &mut recv[src[0] * n..(src[0] + src.len()) * n]
        } else {
            scratch.resize(src.len() * n, 0);
            &mut scratch
        };
        match region {
            Some(region) => {
                for (i, &(at, len)) in ranges.iter().enumerate() {
                    let at = at - l.in_at[s];
                    copy_block(&region[at..at + len], &mut dst[i * n..i * n + len]);
                }
            }
            None => round.read_v(&round.peer_result(0), 0, &ranges, dst)?,
        }
        if !contiguous {
            for (i, &g) in src.iter().enumerate() {
                copy_block(&scratch[i * n..(i + 1) * n], &mut recv[g * n..(g + 1) * n]);
            }
        }
        Ok(())
    }

    /// Local rank `a`'s blocks for the other nodes, by CMA (a local copy for the leader's
    /// own), into their places in the outbox.
    fn gather(&self, a: usize, outbox: &mut [u8]) -> Result<()> {
        let l = self.layout;
        for d in (0..l.nodes()).filter(|&d| d != l.node) {
            let (ranges, at) = l.gather_ranges(d, a);
            let dst = &mut outbox[at];
            if a == self.me() {
                for (i, &(from, len)) in ranges.iter().enumerate() {
                    copy_block(&self.send[from..from + len], &mut dst[i * l.n..i * l.n + len]);
                }
            } else {
                self.round.read_v(&self.round.peer_send(a), a, &ranges, dst)?;
            }
        }
        Ok(())
    }

    /// The runs a local rank owes on `cico`: its block for every local peer, and (for a
    /// non-leader) its blocks for the other nodes, to the leader's outbox.
    fn cico_runs(&self) -> Packets {
        let (l, me) = (self.layout, self.me());
        let (k, n) = (l.k, l.n);
        let g_me = self.global(me);
        let mut packets = Packets::new((1..k).map(|i| (me + i) % k));
        for a in (1..k).map(|i| (me + i) % k) {
            let g = self.global(a);
            packets.owe(a, Run { stream: TO_RECV, src: Src::Send, from: g * n, to: g_me * n, len: n });
        }
        if me != 0 {
            for d in (0..l.nodes()).filter(|&d| d != l.node) {
                let (ranges, at) = l.gather_ranges(d, me);
                for (i, &(from, len)) in ranges.iter().enumerate() {
                    let to = at.start + i * n;
                    packets.owe(0, Run { stream: TO_OUTBOX, src: Src::Send, from, to, len });
                }
            }
        }
        packets.expected[0] = (k - 1) * n;
        packets
    }
}

/// A local rank that is not the leader: reads its own node's blocks from its peers, and
/// each other node's blocks from the leader's inbox once that node has landed.
fn follow(leg: &NodeLeg<'_, '_>, recv: &mut [u8]) -> Result<()> {
    if !leg.ok {
        return Ok(());
    }
    if leg.cico {
        return follow_cico(leg, recv);
    }
    let (round, l, me) = (leg.round, leg.layout, leg.me());
    let k = l.k;
    let mut local: Vec<usize> = (0..k).map(|i| (me + i) % k).collect();
    let mut remote: Vec<usize> = (0..l.nodes()).filter(|&s| s != l.node).collect();
    loop {
        if !leg.local_reads(&mut local, recv)? {
            return Ok(());
        }
        // Arrival first, agreement second: `agrees` is also false before the leader
        // arrives, so asking it first and `arrived` after would take a leader that arrives
        // in between for one that disagrees, and leave without its nodes' blocks (a
        // silent wrong result: the verdict, over agreeing calls, is `Ok`).
        if round.arrived(0) {
            if !leg.agrees(0) {
                // The verdict names the culprit; nothing more moves.
                return Ok(());
            }
            let mut i = 0;
            while i < remote.len() {
                if round.board(0, remote[i]) {
                    leg.copy_out(remote[i], None, recv)?;
                    remote.remove(i);
                } else {
                    i += 1;
                }
            }
        }
        if local.is_empty() && remote.is_empty() {
            return Ok(());
        }
        // The leader's exchange is over and some node never landed: the round failed.
        let over = !remote.is_empty() && round.progressed(0, 1) && remote.iter().all(|&s| !round.board(0, s));
        if over || round.peer_failed().is_some() {
            return Ok(());
        }
        round.wait_for(|| {
            local.iter().any(|&a| round.arrived(a))
                || remote.iter().any(|&s| round.board(0, s))
                || (!remote.is_empty() && round.progressed(0, 1))
                || round.peer_failed().is_some()
        })?;
    }
}

/// [`follow`] on a `cico` node: blocks go through the point-to-point FIFOs.
fn follow_cico(leg: &NodeLeg<'_, '_>, recv: &mut [u8]) -> Result<()> {
    let (round, l, me) = (leg.round, leg.layout, leg.me());
    let n = l.n;
    let p: usize = l.members.iter().map(Vec::len).sum();
    let mut packets = leg.cico_runs();
    packets.expected[2] = (p - l.k) * n;
    let (fifo, cursor) = round.p2p(me);
    let mut over = false;
    loop {
        if !packets.push(round, &|q| leg.agrees(q), &|_| leg.send) {
            return Ok(());
        }
        packets.take(round, recv, &mut [])?;
        // The leader has pushed all it will push (a failed round may leave nodes out).
        over = over || (round.progressed(0, 1) && fifo.peek(cursor).is_none());
        if packets.pushed() && packets.expected[0] == 0 && (packets.expected[2] == 0 || over) {
            return Ok(());
        }
        if round.peer_failed().is_some() {
            return Ok(());
        }
        round.wait_for(|| {
            packets.ready(round) || (!over && round.progressed(0, 1)) || round.peer_failed().is_some()
        })?;
    }
}

/// The leader's exchange with the other leaders: the requests in flight, and what has
/// landed.
struct Exchange<'a, 's> {
    leaders: &'a SimpleCommunicator,
    scope: &'s mpi::request::LocalScope<'a>,
    /// Requests in flight, with what they are.
    reqs: Vec<(Req, mpi::request::Request<'a, [u8], &'s mpi::request::LocalScope<'a>>)>,
    /// The inbox, cut per source node, until its data receive is posted.
    regions: Vec<Option<&'a mut [u8]>>,
    /// Every rank's shape, as the headers tell it (this node's filled by the leader).
    shapes: Vec<Shape>,
    /// Landed regions not yet handled.
    fresh: Vec<(usize, &'a [u8])>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    Header(usize),
    Data(usize),
    Send,
}

/// The header a leader sends every other leader: whether its data follows and how long
/// it is, then every local rank's shape.
fn header(valid: bool, data_len: usize, shapes: &[Shape]) -> Vec<u8> {
    let mut words = vec![valid as u64, data_len as u64];
    for s in shapes {
        words.extend_from_slice(&[s.op, s.send_len, s.recv_len]);
    }
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// The bytes of the header of a node of `k` ranks.
fn header_len(k: usize) -> usize {
    (2 + 3 * k) * 8
}

impl<'a> Exchange<'a, '_> {
    /// Tests every request once and handles those that completed. Returns whether any did.
    fn poll(&mut self, layout: &Layout, mine: Shape, ok: bool) -> bool {
        let mut done = Vec::new();
        for (what, req) in std::mem::take(&mut self.reqs) {
            match req.test_with_data() {
                Err(req) => self.reqs.push((what, req)),
                Ok((_, data)) => done.push((what, data)),
            }
        }
        let any = !done.is_empty();
        for (what, data) in done {
            match what {
                Req::Header(s) => self.headed_in(s, data, layout, mine, ok),
                Req::Data(s) => self.fresh.push((s, data)),
                Req::Send => {}
            }
        }
        any
    }

    /// A header from node `s` has come in: note its shapes; receive its data into the
    /// inbox if it agrees with ours, else take the data off the network and drop it.
    fn headed_in(&mut self, s: usize, data: &[u8], layout: &Layout, mine: Shape, ok: bool) {
        let word = |i: usize| u64::from_ne_bytes(data[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let (valid, data_len) = (word(0) != 0, word(1) as usize);
        for (i, &g) in layout.members[s].iter().enumerate() {
            self.shapes[g] =
                Shape { op: word(2 + 3 * i), send_len: word(3 + 3 * i), recv_len: word(4 + 3 * i) };
        }
        let agrees = valid && layout.members[s].iter().all(|&g| self.shapes[g] == mine);
        let from = self.leaders.process_at_rank(s as i32);
        match self.regions[s].take() {
            Some(region) if ok && agrees && data_len == region.len() => {
                if region.is_empty() {
                    self.fresh.push((s, region));
                } else {
                    let req = from.immediate_receive_into_with_tag(self.scope, region, DATA_TAG);
                    self.reqs.push((Req::Data(s), req));
                }
            }
            _ if data_len > 0 => {
                // Its data is on its way whatever we think of it: take it and drop it. The
                // sender posted it together with the header, so this receive completes.
                let _dropped: (Vec<u8>, _) = from.receive_vec_with_tag(DATA_TAG);
            }
            _ => {}
        }
    }
}

/// The leader: gathers its node's outgoing blocks as local ranks arrive, exchanges with
/// the other leaders in completion order, flags each source node on its board (or, on
/// `cico`, pushes it to its local ranks) as it lands, and takes its own blocks like any
/// local rank. Returns the data phase's result and the verdict over every rank's shape.
#[allow(clippy::too_many_arguments)]
fn lead<'a, 's>(
    leg: &NodeLeg<'_, '_>,
    leaders: &'a SimpleCommunicator,
    scope: &'s mpi::request::LocalScope<'a>,
    outbox: &'a mut [u8],
    inbox: &'a mut [u8],
    recv: &mut [u8],
    header_in: &'a mut [Vec<u8>],
    header_out: &'a mut [Vec<u8>],
) -> (Result<()>, [i64; 4]) {
    let (round, l) = (leg.round, leg.layout);
    let (k, n, nodes, me_node) = (l.k, l.n, l.nodes(), l.node);
    let p: usize = l.members.iter().map(Vec::len).sum();
    let k_of: Vec<usize> = l.members.iter().map(Vec::len).collect();
    let mine = Shape::of(&round.call(0));
    let ok = leg.ok;
    // Cut the inbox per source node (an empty inbox if this leader cannot take data).
    let mut regions = Vec::with_capacity(nodes);
    let mut rest: &'a mut [u8] = inbox;
    for s in 0..nodes {
        let len = if ok { l.in_at[s + 1] - l.in_at[s] } else { 0 };
        let (region, tail) = rest.split_at_mut(len);
        regions.push((s != me_node).then_some(region));
        rest = tail;
    }
    let mut ex = Exchange {
        leaders,
        scope,
        reqs: Vec::new(),
        regions,
        shapes: vec![Shape::default(); p],
        fresh: Vec::new(),
    };
    for (s, buf) in header_in.iter_mut().enumerate().filter(|&(s, _)| s != me_node) {
        let req = leaders.process_at_rank(s as i32).immediate_receive_into_with_tag(
            scope,
            &mut buf[..],
            HEADER_TAG,
        );
        ex.reqs.push((Req::Header(s), req));
    }
    let mut result: Result<()> = Ok(());
    // The node cannot send data (or take more part locally) once `bad`.
    let mut bad = !ok;
    let mut to_gather: Vec<usize> = if ok && !leg.cico { (0..k).collect() } else { Vec::new() };
    let mut local: Vec<usize> = if ok && !leg.cico { (0..k).collect() } else { Vec::new() };
    let mut packets = Packets::new(1..k);
    let mut outbox = Some(outbox);
    let mut header_out = Some(header_out);
    let mut landed: Vec<Option<&'a [u8]>> = vec![None; nodes];
    if ok && leg.cico {
        packets = leg.cico_runs();
        packets.expected[1] = (k - 1) * (p - k) * n;
        if let Some(out) = outbox.as_deref_mut() {
            leg.gather(0, out).expect("a local copy");
        }
    }
    let mut sent = false;
    let fail = |result: &mut Result<()>, e: Error| {
        if result.is_ok() {
            *result = Err(e);
        }
    };
    loop {
        if !bad && round.peer_failed().is_some() {
            bad = true;
        }
        // The node's own legs, as far as the arrivals allow.
        if !bad && !leg.cico {
            let mut i = 0;
            while i < to_gather.len() {
                let a = to_gather[i];
                if !round.arrived(a) {
                    i += 1;
                } else if !leg.agrees(a) {
                    bad = true;
                    break;
                } else {
                    let out = outbox.as_deref_mut().expect("the outbox is ours until sent");
                    if let Err(e) = leg.gather(a, out) {
                        fail(&mut result, e);
                        bad = true;
                        break;
                    }
                    to_gather.remove(i);
                }
            }
            match leg.local_reads(&mut local, recv) {
                Ok(true) => {}
                Ok(false) => bad = true,
                Err(e) => {
                    fail(&mut result, e);
                    bad = true;
                }
            }
        }
        if !bad && leg.cico {
            let source = |src: Src| match src {
                Src::Send => leg.send,
                Src::Region(s) => landed[s].unwrap_or(&[]),
            };
            if !packets.push(round, &|q| leg.agrees(q), &source) {
                bad = true;
            }
            let mut none: [u8; 0] = [];
            let out = if sent { &mut none[..] } else { outbox.as_deref_mut().unwrap_or(&mut none[..]) };
            if let Err(e) = packets.take(round, recv, out) {
                fail(&mut result, e);
                bad = true;
            }
        }
        // What has landed from the other nodes.
        ex.poll(l, mine, ok);
        for (s, region) in std::mem::take(&mut ex.fresh) {
            landed[s] = Some(region);
            if !bad {
                if let Err(e) = leg.copy_out(s, Some(region), recv) {
                    fail(&mut result, e);
                    bad = true;
                }
            }
            if leg.cico {
                if !bad {
                    for b in 1..k {
                        for (ia, &g) in l.members[s].iter().enumerate() {
                            let from = (ia * k + b) * n;
                            packets.owe(
                                b,
                                Run { stream: TO_SCATTER, src: Src::Region(s), from, to: g * n, len: n },
                            );
                        }
                    }
                }
            } else {
                round.post_board(s);
            }
        }
        // Once every local rank is here and the node is gathered (or cannot be), send.
        let gathered = if leg.cico { packets.expected[1] == 0 } else { to_gather.is_empty() };
        if !sent && (0..k).all(|a| round.arrived(a)) && (bad || gathered) {
            for a in 0..k {
                ex.shapes[leg.global(a)] = Shape::of(&round.call(a));
            }
            let own: Vec<Shape> = l.members[me_node].iter().map(|&g| ex.shapes[g]).collect();
            let hs = header_out.take().expect("sent once");
            for d in (0..nodes).filter(|&d| d != me_node) {
                hs[d] = header(!bad, if bad { 0 } else { k * k_of[d] * n }, &own);
            }
            let hs: &'a [Vec<u8>] = hs;
            let out: &'a [u8] = outbox.take().expect("sent once");
            for d in (1..nodes).map(|i| (me_node + i) % nodes) {
                let to = leaders.process_at_rank(d as i32);
                ex.reqs.push((Req::Send, to.immediate_send_with_tag(scope, &hs[d][..], HEADER_TAG)));
                if !bad && n > 0 {
                    ex.reqs.push((Req::Send, to.immediate_send_with_tag(scope, &out[l.region(d)], DATA_TAG)));
                }
            }
            sent = true;
        }
        let local_done = if leg.cico {
            packets.pushed() && packets.expected == [0; 3]
        } else {
            local.is_empty() && to_gather.is_empty()
        };
        if sent && ex.reqs.is_empty() && ex.fresh.is_empty() && (local_done || bad) {
            break;
        }
        let waited = round.wait_for(|| {
            ex.poll(l, mine, ok)
                || !ex.fresh.is_empty()
                || (!sent && (0..k).all(|a| round.arrived(a)))
                || (!bad
                    && (round.peer_failed().is_some()
                        || if leg.cico {
                            packets.ready(round)
                        } else {
                            to_gather.iter().chain(&local).any(|&a| round.arrived(a))
                        }))
        });
        if let Err(e) = waited {
            if !ex.reqs.is_empty() {
                crate::error::say(format_args!(
                    "{e}; aborting, since MPI requests of the leaders' exchange are in flight"
                ));
                std::process::abort();
            }
            fail(&mut result, e);
            return (result, [i64::MIN; 4]);
        }
    }
    // Everything that will land has landed (and, on `cico`, has been pushed).
    round.post_progress(1);
    (result, shapes_verdict(&ex.shapes, &k_of, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes of 2, 2 and 1 ranks, seen from the middle one, blocks of 3 bytes: the
    /// regions of the other nodes follow one another, and a block's place in the sender's
    /// outbox is its place in the receiver's inbox.
    #[test]
    fn layout_places_every_block_once() {
        let members = vec![vec![0, 1], vec![2, 3], vec![4]];
        let l = Layout::new(members.clone(), 1, 3);
        assert_eq!((l.k, l.total()), (2, 2 * 2 * 3 + 2 * 3));
        assert_eq!((l.region(0), l.region(1), l.region(2)), (0..12, 12..12, 12..18));
        // Local rank 1 (rank 3) sends to node 0: blocks for ranks 0 and 1, at ia = 1.
        assert_eq!(l.gather_ranges(0, 1), (vec![(0, 3), (3, 3)], 6..12));
        // Local rank 1 receives from node 2 (rank 4): ia = 0, ib = 1.
        assert_eq!(l.inbox_ranges(2, 1), vec![(12 + 3, 3)]);
        // The sender's view: node 0's outbox region for node 1 has (ia, ib) at (ia 2 + ib) 3.
        let sender = Layout::new(members, 0, 3);
        let (_, at) = sender.gather_ranges(1, 1);
        assert_eq!(at.start - sender.region(1).start, 2 * 3);
        let every: Vec<usize> = (0..2).flat_map(|ib| l.inbox_ranges(0, ib)).map(|r| r.0).collect();
        let mut sorted = every.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), every.len(), "two blocks in one place");
    }

    #[test]
    fn the_shapes_verdict_names_the_first_culprit_in_rank_order() {
        let ok = Shape { op: 0x0406, send_len: 40, recv_len: 40 };
        let mut shapes = vec![ok; 4];
        let k_of = [2, 2];
        assert_eq!(shapes_verdict(&shapes, &k_of, 10), [0; 4]);
        shapes[3].send_len = 50;
        shapes[2].recv_len = 30;
        assert_eq!(shapes_verdict(&shapes, &k_of, 10), [2, 3, 40, 50]);
        shapes[1].op = 0x0506;
        assert_eq!(shapes_verdict(&shapes, &k_of, 10), [2, 3, 40, 50]);
        shapes[0].op = 0x0505;
        assert_eq!(shapes_verdict(&shapes, &k_of, 10)[..2], [1, 1]);
        // A send length that is not p blocks is wrong on rank 0 itself.
        let odd = vec![Shape { send_len: 41, recv_len: 41, ..ok }; 4];
        assert_eq!(shapes_verdict(&odd, &k_of, 10), [2, 0, 40, 41]);
        let big = vec![Shape { send_len: 4 << 30, recv_len: 4 << 30, ..ok }; 4];
        assert_eq!(shapes_verdict(&big, &k_of, 1 << 30)[0], 4);
    }

    #[test]
    fn headers_carry_every_shape() {
        let shapes = [Shape { op: 1, send_len: 2, recv_len: 3 }, Shape { op: 4, send_len: 5, recv_len: 6 }];
        let h = header(true, 99, &shapes);
        assert_eq!(h.len(), header_len(2));
        let words: Vec<u64> = h.chunks(8).map(|w| u64::from_ne_bytes(w.try_into().unwrap())).collect();
        assert_eq!(words, [1, 99, 1, 2, 3, 4, 5, 6]);
    }
}
