//! The node communicator: which ranks share a node, their process ids, the control
//! segment they map, and the transport they agree on.

use crate::error::{Errno, Error, Result};
use crate::segment::Segment;
use crate::sync::wait::WaitPolicy;
use crate::sync::Control;
use crate::transport::{cma, TransportKind};
use mpi::collective::SystemOperation;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;

/// Staging bytes per rank in the control segment (two chunks of 32 KiB).
const STAGE_BYTES: usize = 64 * 1024;

/// A node of the communicator, seen from one of its ranks.
pub(crate) struct NodeComm {
    /// The MPI communicator of the node's ranks, ordered by rank in the parent.
    pub(crate) comm: SimpleCommunicator,
    /// The control segment and its protocol.
    pub(crate) ctl: Control,
    /// The transport every rank of the node uses.
    pub(crate) transport: TransportKind,
    /// Why that transport (and not the others).
    pub(crate) reason: String,
}

/// How the parent communicator is cut into nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// By shared memory (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`).
    Shared,
    /// Virtual nodes: parent ranks `r` with the same `r / k` share a node.
    Virtual(usize),
}

impl Split {
    /// `ZCOLL_NODE_SIZE=k`, or the shared-memory split.
    ///
    /// # Errors
    ///
    /// `Error::Config` if the variable is set to something other than a positive integer.
    pub(crate) fn from_env() -> Result<Split> {
        match std::env::var("ZCOLL_NODE_SIZE") {
            Err(_) => Ok(Split::Shared),
            Ok(v) => match v.trim().parse::<usize>() {
                Ok(k) if k > 0 => Ok(Split::Virtual(k)),
                _ => Err(Error::Config { name: "ZCOLL_NODE_SIZE", value: v, expected: "a positive integer" }),
            },
        }
    }
}

impl NodeComm {
    /// Splits `parent` into nodes and sets up this rank's node. Collective over `parent`.
    ///
    /// # Errors
    ///
    /// On every rank of the node when any of them fails: the segment cannot be created or
    /// mapped, or `ZCOLL_TRANSPORT` asks for what the node cannot do or disagrees.
    pub(crate) fn new(parent: &SimpleCommunicator, split: Split, policy: WaitPolicy) -> Result<NodeComm> {
        let rank = parent.rank();
        let comm = match split {
            Split::Shared => parent.split_shared(rank),
            Split::Virtual(k) => parent
                .split_by_color_with_key(Color::with_value((rank as usize / k) as i32), rank)
                .expect("a split with a defined color returns a communicator"),
        };
        let me = comm.rank() as usize;
        let n = comm.size() as usize;
        let pid = std::process::id() as libc::pid_t;
        let mut pids = vec![0 as libc::pid_t; n];
        comm.all_gather_into(&pid, &mut pids[..]);
        let mut ranks = vec![0i32; n];
        comm.all_gather_into(&rank, &mut ranks[..]);

        let requested = requested_transport();
        let ctl = map_segment(&comm, rank, me, ranks, pids.clone(), policy)?;
        let (transport, reason) = choose_transport(&comm, rank, me, &pids, requested)?;
        Ok(NodeComm { comm, ctl, transport, reason })
    }
}

/// Whether every rank of `comm` says `ok`.
fn all_ok(comm: &SimpleCommunicator, ok: bool) -> bool {
    let mut all = 0i32;
    comm.all_reduce_into(&(ok as i32), &mut all, SystemOperation::min());
    all == 1
}

/// Local rank 0 creates the segment and lays out its header; only then does it send the
/// name, so the others map a finished layout. The name is removed once all have mapped it.
fn map_segment(
    comm: &SimpleCommunicator,
    rank: i32,
    me: usize,
    ranks: Vec<i32>,
    pids: Vec<libc::pid_t>,
    policy: WaitPolicy,
) -> Result<Control> {
    let len = Control::segment_len(ranks.len(), STAGE_BYTES);
    let control = |seg, init| Control::new(seg, me, ranks.clone(), pids.clone(), STAGE_BYTES, policy, init);
    let mut name = [0u8; 64];
    let mut ctl = None;
    if me == 0 {
        ctl = Some(Segment::create(rank, len).and_then(|(seg, nm)| {
            name[..nm.len()].copy_from_slice(nm.as_bytes());
            control(seg, true).inspect_err(|_| Segment::unlink(&nm))
        }));
    }
    comm.process_at_rank(0).broadcast_into(&mut name[..]);
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let name = std::str::from_utf8(&name[..end]).unwrap_or_default();
    let ctl = ctl.unwrap_or_else(|| match name {
        "" => Err(Error::Segment { rank, op: "creation on local rank 0", errno: Errno::EIO }),
        _ => Segment::open(rank, name, len).and_then(|seg| control(seg, false)),
    });
    let ok = all_ok(comm, ctl.is_ok());
    if me == 0 && !name.is_empty() {
        Segment::unlink(name);
    }
    match (ok, ctl) {
        (true, Ok(ctl)) => Ok(ctl),
        (_, Err(e)) => Err(e),
        (false, Ok(_)) => Err(Error::Segment { rank, op: "mapping on a peer", errno: Errno::EIO }),
    }
}

/// `ZCOLL_TRANSPORT`, if set.
fn requested_transport() -> Result<Option<TransportKind>> {
    match std::env::var("ZCOLL_TRANSPORT") {
        Err(_) => Ok(None),
        Ok(v) if v.is_empty() || v == "auto" => Ok(None),
        Ok(v) => v.parse().map(Some).map_err(|()| Error::Config {
            name: "ZCOLL_TRANSPORT",
            value: v,
            expected: "auto, cma or cico",
        }),
    }
}

/// Probes CMA between every pair of the node and agrees on one transport.
fn choose_transport(
    comm: &SimpleCommunicator,
    rank: i32,
    me: usize,
    pids: &[libc::pid_t],
    requested: Result<Option<TransportKind>>,
) -> Result<(TransportKind, String)> {
    // Every rank contributes: its request (0 = none, -1 = invalid), the first peer it may
    // not read, and the errno.
    let refused = pids
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != me)
        .find_map(|(r, &pid)| cma::probe(pid).err().map(|e| (r as i32, e.raw())));
    let want = match &requested {
        Ok(None) => 0,
        Ok(Some(k)) => k.code() as i32,
        Err(_) => -1,
    };
    let (peer, errno) = refused.unwrap_or((-1, 0));
    let n = pids.len();
    let mut all = vec![[0i32; 3]; n];
    comm.all_gather_into(&[want, peer, errno][..], flatten_mut(&mut all));
    let requested = requested?;
    if let Some(r) = all.iter().position(|v| v[0] != want) {
        return Err(Error::Config {
            name: "ZCOLL_TRANSPORT",
            value: format!("{:?} here, another value on local rank {r}", requested.map(|k| k.name())),
            expected: "the same value on every rank of a node",
        });
    }
    let denial =
        all.iter().enumerate().find(|(_, v)| v[1] >= 0).map(|(r, v)| {
            format!("local rank {r} may not read local rank {}: {}", v[1], Errno::from_raw(v[2]))
        });
    match (requested, denial) {
        (Some(TransportKind::Cico), _) => Ok((TransportKind::Cico, "forced by ZCOLL_TRANSPORT=cico".into())),
        (_, None) if n == 1 => Ok((TransportKind::Cma, "single rank: nothing crosses processes".into())),
        (_, None) => Ok((TransportKind::Cma, "cma: process_vm_readv allowed between every pair".into())),
        (Some(TransportKind::Cma), Some(why)) => {
            Err(Error::Unsupported { rank, what: format!("ZCOLL_TRANSPORT=cma, but {why}") })
        }
        (_, Some(why)) => Ok((TransportKind::Cico, format!("cma refused: {why}"))),
    }
}

fn flatten_mut(v: &mut [[i32; 3]]) -> &mut [i32] {
    bytemuck::cast_slice_mut(v)
}
