//! Broadcast: the root's buffer ends up in every rank's buffer.
//!
//! Algorithms (cost for `p` ranks and `n` bytes, with the model of the book's cost
//! chapter: `alpha` per CMA call, `beta` per byte, `l` per page pinned, `s` page size,
//! `gamma(c)` the slowdown of `c` readers pinning one process):
//!
//! - [`BcastAlgorithm::DirectRead`]: the root publishes its address; every other rank
//!   reads the whole buffer with one CMA read. `alpha + n beta + (n / s) l gamma(p - 1)`:
//!   one copy per byte, but all `p - 1` readers pin the root's pages at once.
//! - [`BcastAlgorithm::DirectWrite`]: every non-root publishes its address; the root
//!   writes the buffer into each in turn. `(p - 1)(alpha + n beta + (n / s) l)`: no
//!   contention (the root pins only its own pages, one reader at a time), but the root
//!   does all the copies sequentially.
//! - [`BcastAlgorithm::Staged`]: copy-in/copy-out through the root's staging area in the
//!   control segment, pipelined in two half-area chunks. Two copies per byte, no system
//!   call, no permission: the path for small messages and for the `cico` transport.

use super::{all_equal, check, op, Ctx, Kind};
use crate::error::{Error, Result};
use crate::sync::Call;
use crate::transport::{cma, TransportKind};

/// Messages below this many bytes take the staged path by default: a CMA call costs
/// about as much as copying this much twice through shared memory.
pub(crate) const DIRECT_MIN_BYTES: usize = 16 * 1024;

/// How [`Comm::broadcast_into_with`](crate::Comm::broadcast_into_with) moves the data.
///
/// # Examples
///
/// ```
/// use zcoll::BcastAlgorithm;
/// assert_eq!("direct-read".parse::<BcastAlgorithm>(), Ok(BcastAlgorithm::DirectRead));
/// assert_eq!(BcastAlgorithm::Staged.to_string(), "staged");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BcastAlgorithm {
    /// Let zcoll choose by size and transport (`ZCOLL_BCAST_ALGORITHM` overrides).
    #[default]
    Auto,
    /// Every non-root rank reads the root's buffer with one single-copy read.
    DirectRead,
    /// Copy-in/copy-out through the control segment, pipelined.
    Staged,
    /// The root writes its buffer into every other rank's, one after the other.
    DirectWrite,
}

impl BcastAlgorithm {
    /// Every algorithm that moves data (all but `Auto`).
    pub const ALL: [BcastAlgorithm; 3] =
        [BcastAlgorithm::DirectRead, BcastAlgorithm::DirectWrite, BcastAlgorithm::Staged];

    /// The name used by `ZCOLL_BCAST_ALGORITHM` and the benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            BcastAlgorithm::Auto => "auto",
            BcastAlgorithm::DirectRead => "direct-read",
            BcastAlgorithm::Staged => "staged",
            BcastAlgorithm::DirectWrite => "direct-write",
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    /// The algorithm a call of `len` bytes uses on `transport`, after `Auto` and the
    /// environment override are resolved. Single-copy algorithms fall back to `Staged`
    /// where the transport cannot do single copies.
    pub(crate) fn resolve(self, len: usize, transport: TransportKind) -> Result<BcastAlgorithm> {
        let chosen = match self {
            BcastAlgorithm::Auto => match std::env::var("ZCOLL_BCAST_ALGORITHM") {
                Ok(v) if !v.is_empty() && v != "auto" => v.parse().map_err(|()| Error::Config {
                    name: "ZCOLL_BCAST_ALGORITHM",
                    value: v,
                    expected: "auto, direct-read, direct-write or staged",
                })?,
                _ if len < DIRECT_MIN_BYTES => BcastAlgorithm::Staged,
                _ => BcastAlgorithm::DirectRead,
            },
            explicit => explicit,
        };
        Ok(match (chosen, transport) {
            (BcastAlgorithm::Auto, _) | (_, TransportKind::Cico) => BcastAlgorithm::Staged,
            (a, _) => a,
        })
    }
}

impl std::fmt::Display for BcastAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BcastAlgorithm {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        std::iter::once(BcastAlgorithm::Auto).chain(BcastAlgorithm::ALL).find(|a| a.name() == s).ok_or(())
    }
}

/// Broadcasts `buf` from local rank `src` to the node. `root` is the root as the user
/// gave it (a rank of the whole communicator), published for the checks.
///
/// # Errors
///
/// The checks' errors, a transport error, or a peer's failure, on every rank of the node.
pub(crate) fn bcast(
    ctx: &Ctx<'_>,
    buf: &mut [u8],
    root: i32,
    src: usize,
    algorithm: BcastAlgorithm,
) -> Result<()> {
    let algorithm = algorithm.resolve(buf.len(), ctx.transport);
    let code = algorithm.as_ref().map(|a| a.code()).unwrap_or(0);
    let len = buf.len();
    // Only the direct-write receivers let a peer write into their buffer.
    let written = algorithm == Ok(BcastAlgorithm::DirectWrite) && ctx.ctl.me() != src;
    let call = Call {
        op: op(Kind::Bcast, code, 0),
        root: root as i64,
        send: buf.as_ptr() as usize,
        send_len: len,
        recv: buf.as_mut_ptr() as usize,
        recv_len: len,
        recv_writable: written,
        aux: src as u64,
        aux2: 0,
    };
    let round = check(ctx, call, true, |r| {
        let expected = r.call(src.min(r.size() - 1)).send_len;
        all_equal(r, |c| c.send_len, expected)
    })?;
    let moved = algorithm.and_then(|algorithm| {
        if round.size() == 1 {
            return Ok(());
        }
        let rank = round.rank_of(round.me());
        let failed = |peer: usize, op| {
            let peer = round.rank_of(peer);
            move |errno| Error::Transport { rank, peer, op, errno }
        };
        match algorithm {
            BcastAlgorithm::DirectRead if round.me() != src => {
                cma::read(&round.remote_send(src), 0, buf).map_err(failed(src, "cma read"))
            }
            BcastAlgorithm::DirectWrite if round.me() == src => (0..round.size())
                .filter(|&r| r != src)
                .try_for_each(|r| cma::write(buf, &round.remote_recv(r), 0).map_err(failed(r, "cma write"))),
            BcastAlgorithm::DirectRead | BcastAlgorithm::DirectWrite => Ok(()),
            _ => round.stage_bcast(src, buf),
        }
    });
    round.finish(moved)
}
