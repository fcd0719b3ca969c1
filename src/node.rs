//! The node communicator: which ranks share a node, their process ids, the control
//! segment they map, and the transport they agree on.

use crate::error::{Errno, Error, Result};
use crate::segment::Segment;
use crate::sync::wait::{self, WaitPolicy};
use crate::sync::Control;
use crate::transport::{cma, heap, xpmem, Links, TransportKind};
use crate::tune::Flags;
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
    /// Whether the ranks map each other's heap buffers.
    pub(crate) heap: bool,
}

/// The node's last call is judged before the node goes, where this rank left it before
/// its verdict or ended it without waiting for the others ([`Control::report_left`]).
impl Drop for NodeComm {
    fn drop(&mut self) {
        self.ctl.report_left();
        self.ctl.depart();
    }
}

/// How the parent communicator is cut into nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// By shared memory (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`).
    Shared,
    /// Virtual nodes: processes whose `MPI_COMM_WORLD` ranks `w` have the same `w / k`
    /// share a node, as consecutive world ranks share a real node under the usual block
    /// placement. A parent whose ranks are permuted (by `split` keys) therefore gets
    /// nodes that interleave its ranks, as it would on a cluster.
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

    /// `mine` (this rank's [`from_env`](Self::from_env)), checked against every other
    /// rank's over `parent`. Collective over `parent`.
    ///
    /// The ranks must cut `parent` the same way: a rank that splits by shared memory and
    /// one that splits by color call different MPI collectives, and both would wait in
    /// them for ever. So after this every rank holds the same `Ok`, or an `Err` (and
    /// splits by shared memory, as every rank with an `Err` does).
    ///
    /// # Errors
    ///
    /// This rank's own `Error::Config`, or `Error::Config` naming `ZCOLL_NODE_SIZE` if
    /// another rank reads it otherwise (unset, another size, or a value it cannot read).
    pub(crate) fn agreed(parent: &SimpleCommunicator, mine: Result<Split>) -> Result<Split> {
        let code = match &mine {
            Ok(Split::Shared) => 0,
            Ok(Split::Virtual(k)) => i64::try_from(*k).unwrap_or(i64::MAX),
            Err(_) => -1,
        };
        // The largest code and the negated smallest, in one call.
        let mut most = [0i64; 2];
        parent.all_reduce_into(&[code, -code][..], &mut most[..], SystemOperation::max());
        match mine {
            Ok(split) if most[0] != -most[1] => Err(Error::Config {
                name: "ZCOLL_NODE_SIZE",
                value: match split {
                    Split::Shared => "unset here, set on another rank".into(),
                    Split::Virtual(k) => format!("{k} here, another value on another rank"),
                },
                expected: "the same value on every rank",
            }),
            mine => mine,
        }
    }
}

/// `ZCOLL_ARRIVAL`: how the rounds of a node await arrivals, `flat` or `tree:k`; unset or
/// `auto`, the cost model's choice for the node's size (`Params::sync_structure`).
///
/// # Errors
///
/// `Error::Config` for any other value, or a fan-in below 2.
pub(crate) fn arrival_from_env() -> Result<Option<Flags>> {
    let Ok(v) = std::env::var("ZCOLL_ARRIVAL") else { return Ok(None) };
    match v.trim() {
        "auto" => Ok(None),
        "flat" => Ok(Some(Flags::Flat)),
        tree => match tree.strip_prefix("tree:").map(str::parse::<usize>) {
            Some(Ok(k)) if k >= 2 => Ok(Some(Flags::Tree(k))),
            _ => Err(Error::Config {
                name: "ZCOLL_ARRIVAL",
                value: v,
                expected: "flat, tree:k (k >= 2) or auto",
            }),
        },
    }
}

impl NodeComm {
    /// Splits `parent` into nodes and sets up this rank's node. Collective over `parent`.
    ///
    /// # Errors
    ///
    /// On every rank of the node when any of them fails: the segment cannot be created or
    /// mapped, or `ZCOLL_TRANSPORT` asks for what the node cannot do or disagrees.
    ///
    /// `arrival` is how the rounds await arrivals (`None`: the cost model decides for the
    /// node's size, the same on every rank).
    pub(crate) fn new(
        parent: &SimpleCommunicator,
        split: Split,
        policy: WaitPolicy,
        arrival: Option<Flags>,
    ) -> Result<NodeComm> {
        let rank = parent.rank();
        let comm = match split {
            Split::Shared => parent.split_shared(rank),
            Split::Virtual(k) => parent
                .split_by_color_with_key(Color::with_value((world_rank() as usize / k) as i32), rank)
                .expect("a split with a defined color returns a communicator"),
        };
        let me = comm.rank() as usize;
        let n = comm.size() as usize;
        let pid = std::process::id() as libc::pid_t;
        let mut pids = vec![0 as libc::pid_t; n];
        comm.all_gather_into(&pid, &mut pids[..]);
        let mut ranks = vec![0i32; n];
        comm.all_gather_into(&rank, &mut ranks[..]);

        // The wait policy: whether the ranks sharing this machine's CPUs outnumber the
        // CPUs they may run on between them. Virtual nodes share the machine with the
        // others, so count every rank of the machine, not of the node.
        let machine = match split {
            Split::Shared => None,
            Split::Virtual(_) => Some(parent.split_shared(rank)),
        };
        let sharing = machine.as_ref().unwrap_or(&comm);
        let mine = wait::affinity();
        let mut masks = vec![0u64; sharing.size() as usize * wait::CPU_WORDS];
        sharing.all_gather_into(&mine[..], &mut masks[..]);
        let policy = policy.fit_to(sharing.size() as usize, wait::union_size(&masks));

        let requested = requested_transport();
        let mut ctl = map_segment(&comm, rank, me, ranks, pids.clone(), policy)?;
        let yama = let_peers_read(&comm, me, &pids);
        let (transport, mut reason, links) = choose_transport(&comm, rank, me, &pids, requested)?;
        if let Some(yama) = yama {
            reason = format!("{reason}; {yama}");
        }
        let heap = links.heap.is_some();
        ctl.set_links(links);
        let arrival = arrival.unwrap_or_else(|| crate::tune::select::active().0.sync_structure(pids.len()));
        // Ranks that await arrivals differently would wait for flags nobody posts: the
        // node must agree (every rank reads the same profile and variable, unless a job
        // sets them per rank).
        let code = match arrival {
            Flags::Flat => 1,
            Flags::Tree(k) => k as u64,
        };
        let (mut lo, mut hi) = (0u64, 0u64);
        comm.all_reduce_into(&code, &mut lo, SystemOperation::min());
        comm.all_reduce_into(&code, &mut hi, SystemOperation::max());
        if lo != hi {
            return Err(Error::Config {
                name: "ZCOLL_ARRIVAL",
                value: arrival.to_string(),
                expected: "the same value (and the same profile) on every rank of a node",
            });
        }
        ctl.set_arrival(arrival);
        tracing::debug!("rank {rank}: arrivals awaited {arrival:?}");
        tracing::debug!("rank {rank}: local rank {me} of {}, transport {transport}: {reason}", pids.len());
        Ok(NodeComm { comm, ctl, transport, reason, heap })
    }
}

/// This process's rank in `MPI_COMM_WORLD`: where it sits, for virtual nodes.
fn world_rank() -> i32 {
    SimpleCommunicator::world().rank()
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

/// Under Yama's `ptrace_scope` 1 a rank may not read a sibling with CMA unless the sibling
/// names it its ptracer, as Open MPI's ranks do: every rank names its peer (a node of
/// two) or any process of its user, and the node waits until all have, before anyone
/// probes. Returns what was done, for `info`.
fn let_peers_read(comm: &SimpleCommunicator, me: usize, pids: &[libc::pid_t]) -> Option<String> {
    let peers: Vec<libc::pid_t> =
        pids.iter().enumerate().filter(|&(r, _)| r != me).map(|(_, &p)| p).collect();
    let who = cma::ptracer_for(cma::yama_scope(), &peers);
    if who == cma::Ptracer::Nobody {
        return None;
    }
    let done = cma::allow(who);
    comm.barrier();
    Some(match (done, who) {
        (Ok(()), cma::Ptracer::One(pid)) => {
            format!(
                "yama ptrace_scope=1: PR_SET_PTRACER({pid}) so that the node's other rank may read this one"
            )
        }
        (Ok(()), _) => {
            "yama ptrace_scope=1: PR_SET_PTRACER_ANY so that the node's ranks may read each other".into()
        }
        (Err(e), _) => format!("yama ptrace_scope=1: PR_SET_PTRACER failed ({e})"),
    })
}

/// `ZCOLL_TRANSPORT`, if set.
fn requested_transport() -> Result<Option<TransportKind>> {
    match std::env::var("ZCOLL_TRANSPORT") {
        Err(_) => Ok(None),
        Ok(v) if v.is_empty() || v == "auto" => Ok(None),
        Ok(v) => v.parse().map(Some).map_err(|()| Error::Config {
            name: "ZCOLL_TRANSPORT",
            value: v,
            expected: "auto, cma, cico, heap or xpmem",
        }),
    }
}

/// What every rank contributes to the choice: its request (0 = none, -1 = invalid), the
/// first peer it may not read with CMA and the errno, its heap (fd, base; fd -1 if it has
/// none, with the errno in `base`), and its XPMEM segment id (-1 if none).
const SHARE: usize = 7;

/// Probes CMA, the shared heaps and XPMEM between every pair of the node and agrees on
/// one transport, and on how peers' memory is reached besides CMA.
fn choose_transport(
    comm: &SimpleCommunicator,
    rank: i32,
    me: usize,
    pids: &[libc::pid_t],
    requested: Result<Option<TransportKind>>,
) -> Result<(TransportKind, String, Links)> {
    let n = pids.len();
    let refused = pids
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != me)
        .find_map(|(r, &pid)| cma::probe(pid).err().map(|e| (r as i64, e.raw() as i64)));
    let want = match &requested {
        Ok(None) => 0,
        Ok(Some(k)) => k.code() as i64,
        Err(_) => -1,
    };
    let (peer, errno) = refused.unwrap_or((-1, 0));
    let (heap_fd, heap_base) = match heap::local() {
        Ok(h) => (h.fd as i64, h.base as i64),
        Err(e) => (-1, e.raw() as i64),
    };
    // Load libxpmem (and run its initialisers) only where XPMEM may be chosen.
    let xpmem_local = match &requested {
        Ok(Some(k)) if *k != TransportKind::Xpmem => Err("not loaded, since ZCOLL_TRANSPORT rules it out"),
        _ => xpmem::local(),
    };
    let segid = xpmem_local.map_or(-1, |x| x.segid());
    let mut all = vec![[0i64; SHARE]; n];
    comm.all_gather_into(&[want, peer, errno, heap_fd, heap_base, segid, 0][..], flatten_mut(&mut all));
    let requested = requested?;
    if let Some(r) = all.iter().position(|v| v[0] != want) {
        return Err(Error::Config {
            name: "ZCOLL_TRANSPORT",
            value: format!("{:?} here, another value on local rank {r}", requested.map(|k| k.name())),
            expected: "the same value on every rank of a node",
        });
    }
    let denial = all.iter().enumerate().find(|(_, v)| v[1] >= 0).map(|(r, v)| {
        format!("local rank {r} may not read local rank {}: {}", v[1], Errno::from_raw(v[2] as i32))
    });

    // Second round: every rank opens every peer's heap and gets every peer's segment.
    let heaps_exist = all.iter().position(|v| v[3] < 0);
    let heap_refused = match heaps_exist {
        Some(_) => None,
        None => (0..n)
            .filter(|&r| r != me)
            .find_map(|r| heap::probe(pids[r], all[r][3] as i32).err().map(|e| (r as i64, e.raw() as i64))),
    };
    let segids: Vec<i64> = all.iter().map(|v| v[5]).collect();
    let xpmem_peers = match (xpmem_local, segids.iter().all(|&s| s != -1)) {
        (Ok(local), true) => Some(xpmem::Peers::new(local, me, &segids)),
        _ => None,
    };
    let xpmem_refused = match &xpmem_peers {
        Some(Err((r, e))) => (*r as i64, e.raw() as i64),
        _ => (-1, 0),
    };
    let (hp, he) = heap_refused.unwrap_or((-1, 0));
    let mut probes = vec![[0i64; 4]; n];
    comm.all_gather_into(
        &[hp, he, xpmem_refused.0, xpmem_refused.1][..],
        bytemuck::cast_slice_mut::<_, i64>(&mut probes),
    );

    let heap_why = match (heaps_exist, probes.iter().enumerate().find(|(_, v)| v[0] >= 0)) {
        (Some(r), _) => {
            let errno = Errno::from_raw(all[r][4] as i32);
            // The reservation is what an address-space limit refuses (`ulimit -v`, valgrind).
            let hint = match errno {
                Errno::ENOMEM => format!(
                    ": it reserves {} GiB of address space, which a limit such as `ulimit -v` refuses",
                    crate::transport::heap::RESERVE >> 30
                ),
                _ => String::new(),
            };
            Err(format!("heap: local rank {r} has no shared heap ({errno}{hint})"))
        }
        (None, Some((r, v))) => Err(format!(
            "heap: local rank {r} may not map local rank {}'s heap: {}",
            v[0],
            Errno::from_raw(v[1] as i32)
        )),
        (None, None) => Ok("heap: every rank maps every peer's shared heap, for heap buffers".to_owned()),
    };
    let xpmem_why = match (xpmem_local, all.iter().position(|v| v[5] == -1)) {
        (Err(why), _) => Err(format!("xpmem: {why}")),
        (Ok(_), Some(r)) => Err(format!("xpmem: not available on local rank {r}")),
        (Ok(_), None) => match probes.iter().enumerate().find(|(_, v)| v[2] >= 0) {
            Some((r, v)) => Err(format!(
                "xpmem: local rank {r} may not get local rank {}'s segment: {}",
                v[2],
                Errno::from_raw(v[3] as i32)
            )),
            None => Ok("xpmem: every rank attaches every peer's address space".to_owned()),
        },
    };
    let why = |r: &std::result::Result<String, String>| match r {
        Ok(s) | Err(s) => s.clone(),
    };
    let peer_heaps = || {
        heap::PeerHeaps::new(
            (0..n)
                .map(|r| {
                    (r != me).then(|| {
                        (pids[r], heap::Published { fd: all[r][3] as i32, base: all[r][4] as usize })
                    })
                })
                .collect(),
        )
    };
    let xpmem_links = || match xpmem_peers {
        Some(Ok(p)) => Some(p),
        _ => None,
    };
    let unsupported = |what: String| Err(Error::Unsupported { rank, what });
    let cma_why = match &denial {
        None => "cma: process_vm_readv allowed between every pair".to_owned(),
        Some(why) => format!("cma refused: {why}"),
    };
    let others = |first: &str| format!("{first}; {}; {}", why(&heap_why), why(&xpmem_why));
    match (requested, &denial) {
        (Some(TransportKind::Cico), _) => {
            Ok((TransportKind::Cico, others("forced by ZCOLL_TRANSPORT=cico"), Links::default()))
        }
        (Some(TransportKind::Cma), Some(why)) => unsupported(format!("ZCOLL_TRANSPORT=cma, but {why}")),
        (Some(TransportKind::Cma), None) => {
            Ok((TransportKind::Cma, format!("forced by ZCOLL_TRANSPORT=cma; {cma_why}"), Links::default()))
        }
        (Some(k @ (TransportKind::Heap | TransportKind::Xpmem)), Some(why)) => {
            unsupported(format!("ZCOLL_TRANSPORT={k} needs cma for other buffers, but {why}"))
        }
        (Some(TransportKind::Heap), None) => match heap_why {
            Ok(h) => Ok((
                TransportKind::Heap,
                format!("forced by ZCOLL_TRANSPORT=heap; {h}; {cma_why} for other buffers"),
                Links { heap: Some(peer_heaps()), xpmem: None },
            )),
            Err(h) => unsupported(format!("ZCOLL_TRANSPORT=heap, but {h}")),
        },
        (Some(TransportKind::Xpmem), None) => match xpmem_why {
            Ok(x) => Ok((
                TransportKind::Xpmem,
                format!("forced by ZCOLL_TRANSPORT=xpmem; {x}; {cma_why} for what cannot attach"),
                Links { heap: None, xpmem: xpmem_links() },
            )),
            Err(x) => unsupported(format!("ZCOLL_TRANSPORT=xpmem, but {x}")),
        },
        (_, None) if n == 1 => {
            Ok((TransportKind::Cma, others("single rank: nothing crosses processes"), Links::default()))
        }
        (_, None) => match (&xpmem_why, &heap_why) {
            (Ok(x), _) => Ok((
                TransportKind::Xpmem,
                format!("{x}; {cma_why} for what cannot attach; {}", why(&heap_why)),
                Links { heap: None, xpmem: xpmem_links() },
            )),
            (Err(_), Ok(_)) => {
                Ok((TransportKind::Cma, others(&cma_why), Links { heap: Some(peer_heaps()), xpmem: None }))
            }
            (Err(_), Err(h)) => {
                if me == 0 {
                    tracing::warn!("heap buffers fall back to cma ({h})");
                }
                Ok((TransportKind::Cma, others(&cma_why), Links::default()))
            }
        },
        (_, Some(why)) => {
            if me == 0 {
                tracing::warn!("cma refused ({why}): the node falls back to copy-in/copy-out (cico)");
            }
            Ok((TransportKind::Cico, others(&cma_why), Links::default()))
        }
    }
}

fn flatten_mut(v: &mut [[i64; SHARE]]) -> &mut [i64] {
    bytemuck::cast_slice_mut(v)
}
