//! The one error type of the crate.

use std::fmt;

pub use cma_sys::Errno;

/// Says `line` on standard error in one write, so that the lines of ranks that report at
/// once, and share the launcher's standard error, stay whole (`eprintln!` writes a line
/// in pieces). Every message of zcoll's own goes through here.
pub(crate) fn say(line: fmt::Arguments<'_>) {
    let line = format!("zcoll: {line}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// The result of every fallible zcoll call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, and on which rank.
///
/// Every variant names the rank (in the communicator the call was made on) that reports
/// it as `rank`, and, where another rank is the cause, that rank too. A collective that
/// fails returns an error on every rank of the communicator; the ranks agree on the
/// variant and its fields except `rank`. The exception: a rank that only gives in a small
/// call (the root of a broadcast or scatter, a non-root of a reduce or gather) may return
/// `Ok` before the others have checked the call, and a rank may fail a small
/// variable-count call alone while the others return `Ok`; the next call on the
/// communicator then fails on every rank with [`Error::PreviousFailed`].
///
/// `Error` is `Send + Sync` and converts into [`std::io::Error`].
///
/// # Examples
///
/// ```
/// let e = zcoll::Error::InvalidRoot { rank: 1, root: 7, size: 4 };
/// assert_eq!(e.to_string(), "rank 1: root 7 is out of range for a communicator of 4 ranks");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The root given to a rooted collective is not a rank of the communicator.
    InvalidRoot {
        /// The rank reporting the error.
        rank: i32,
        /// The root that was given (by `culprit`'s call, if ranks disagree).
        root: i32,
        /// The size of the communicator.
        size: i32,
    },
    /// Ranks called different collectives, or the same one with different roots or
    /// algorithms, at the same point of the call sequence.
    Mismatch {
        /// The rank reporting the error.
        rank: i32,
        /// The first rank whose call disagrees with the reference rank's.
        culprit: i32,
        /// What disagrees (`"collective"`, `"root"`, `"operator"`, `"algorithm"`, ...).
        what: &'static str,
    },
    /// A buffer's length does not agree with the lengths the other ranks passed.
    LengthMismatch {
        /// The rank reporting the error.
        rank: i32,
        /// The first rank whose buffer is of the wrong length.
        culprit: i32,
        /// The length (in bytes) that rank needed to pass.
        expected: usize,
        /// The length (in bytes) it passed.
        found: usize,
    },
    /// A buffer is of the wrong size for this call on this rank (checked locally).
    BufferSize {
        /// The rank whose buffer is wrong.
        rank: i32,
        /// Which buffer (`"send"`, `"receive"`).
        which: &'static str,
        /// The length (in elements) it must have.
        expected: usize,
        /// The length (in elements) it has.
        found: usize,
    },
    /// Another rank failed during the collective, so this rank's result is not valid.
    PeerFailed {
        /// The rank reporting the error.
        rank: i32,
        /// The rank that failed: the one whose own step failed, or the one a rank found
        /// dead or stalled. A rank that only heard of the failure from a peer names the
        /// rank the news began with, not the peer that passed it on, on its node and
        /// across nodes alike.
        peer: i32,
    },
    /// The previous collective call on this communicator failed, and a rank had left it
    /// before its checks (a rank that only gives in a call small enough to travel with
    /// its arrival, which returns at once: the root of a broadcast, scatter or scatterv,
    /// a non-root of a reduce, gather or gatherv), or, across nodes, it failed on one node after the
    /// leaders had exchanged their verdicts (a bcast, allreduce, reduce or barrier, which
    /// other nodes may have returned `Ok` from): so that every rank learns of the
    /// failure, this call fails on every rank and does nothing. A rank that returned `Ok`
    /// from the failed call learns of it here; the others, which got the failure's own
    /// error then, get this one too. See the book's chapter on safety ("The deferred
    /// verdict", and "The deferred verdict across nodes").
    PreviousFailed {
        /// The rank reporting the error.
        rank: i32,
    },
    /// A process of the node exited while this rank waited for it, or copied from or to
    /// its memory (the kernel found no such process).
    PeerDied {
        /// The rank reporting the error.
        rank: i32,
        /// The rank (in the communicator) that died.
        peer: i32,
        /// Its process id.
        pid: i32,
    },
    /// A wait ran past the limit set with `ZCOLL_TIMEOUT`.
    Timeout {
        /// The rank reporting the error.
        rank: i32,
        /// The rank it was waiting for.
        peer: i32,
        /// The limit, in seconds.
        seconds: f64,
    },
    /// A wait ran past the limit set with `ZCOLL_TIMEOUT` while the awaited rank could
    /// still write into this rank's buffer (this rank had published it writable for the
    /// call), so this rank killed it (`SIGKILL`) and returned only once the kernel had
    /// confirmed that the process exited: nothing writes into the buffer after the call.
    /// See the book's chapter on safety ("Fencing a stalled writer").
    Fenced {
        /// The rank reporting the error.
        rank: i32,
        /// The rank it killed.
        peer: i32,
        /// Its process id.
        pid: i32,
        /// The limit, in seconds.
        seconds: f64,
    },
    /// The kernel refused a single-copy transfer with a peer.
    Transport {
        /// The rank reporting the error.
        rank: i32,
        /// The peer rank of the transfer.
        peer: i32,
        /// The transport and operation (`"cma read"`, `"cma write"`, ...).
        op: &'static str,
        /// The error the kernel returned.
        errno: Errno,
    },
    /// Creating, mapping or sizing the node's shared control segment failed.
    Segment {
        /// The rank reporting the error.
        rank: i32,
        /// The step that failed (`"shm_open"`, `"ftruncate"`, `"mmap"`, ...).
        op: &'static str,
        /// The error the kernel returned.
        errno: Errno,
    },
    /// An environment variable or option has a value zcoll does not understand.
    Config {
        /// The variable or option.
        name: &'static str,
        /// The value it has.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// The control segment holds what this rank's protocol did not expect: a bug, or a
    /// rank of another zcoll version on the node.
    Protocol {
        /// The rank reporting the error.
        rank: i32,
        /// What it found.
        what: String,
    },
    /// A count or displacement of a variable-count collective is negative, or a block of
    /// a receive buffer overlaps another (so some bytes would be written twice).
    InvalidPartition {
        /// The rank reporting the error.
        rank: i32,
        /// The rank that passed the partition.
        culprit: i32,
        /// Which of its buffers the partition cuts (`"send"`, `"receive"`).
        which: &'static str,
        /// The block (the rank it is for).
        index: usize,
        /// What is wrong (`"negative count"`, `"negative displacement"`, `"overlaps another
        /// block"`).
        reason: &'static str,
    },
    /// A [`Layout`](crate::Layout) is malformed, reaches outside its buffer, selects an
    /// element twice on a receive side, or selects another number of elements than the
    /// layout it is paired with.
    InvalidLayout {
        /// The rank reporting the error (`None` from a layout's own methods, which know no
        /// communicator).
        rank: Option<i32>,
        /// The rank that passed the layout (`None` from a layout's own methods).
        culprit: Option<i32>,
        /// Which layout (`"send"`, `"receive"`: a broadcast's layout is a receive side on
        /// every rank; `"layout"` from a layout's own methods).
        which: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The operation is not available with this transport, shape or configuration.
    Unsupported {
        /// The rank reporting the error.
        rank: i32,
        /// What is missing.
        what: String,
    },
}

impl Error {
    /// The rank that reports this error, if the error belongs to a rank.
    pub fn rank(&self) -> Option<i32> {
        match *self {
            Error::InvalidRoot { rank, .. }
            | Error::Mismatch { rank, .. }
            | Error::LengthMismatch { rank, .. }
            | Error::BufferSize { rank, .. }
            | Error::PeerFailed { rank, .. }
            | Error::PreviousFailed { rank }
            | Error::PeerDied { rank, .. }
            | Error::Timeout { rank, .. }
            | Error::Fenced { rank, .. }
            | Error::Transport { rank, .. }
            | Error::Segment { rank, .. }
            | Error::Protocol { rank, .. }
            | Error::InvalidPartition { rank, .. }
            | Error::Unsupported { rank, .. } => Some(rank),
            Error::InvalidLayout { rank, .. } => rank,
            Error::Config { .. } => None,
        }
    }

    /// The rank whose failure this error reports, as the other ranks must name it in
    /// their `PeerFailed`: the peer this rank found failed, dead, stalled or fenced
    /// (`PeerFailed`, `PeerDied`, `Timeout`, `Fenced`), the culprit of an argument error,
    /// else the rank that reports it (its own step failed). `None` for an error that
    /// belongs to no rank.
    pub(crate) fn failed_rank(&self) -> Option<i32> {
        match *self {
            Error::PeerFailed { peer, .. }
            | Error::PeerDied { peer, .. }
            | Error::Timeout { peer, .. }
            | Error::Fenced { peer, .. } => Some(peer),
            Error::Mismatch { culprit, .. }
            | Error::LengthMismatch { culprit, .. }
            | Error::InvalidPartition { culprit, .. } => Some(culprit),
            Error::InvalidLayout { rank, culprit, .. } => culprit.or(rank),
            _ => self.rank(),
        }
    }
}

/// The key by which the ranks that agree on a failure choose the rank to name: the rank
/// `e` (an error of rank `me`) blames ([`Error::failed_rank`]: a rank that found a peer
/// dead blames the peer, not itself), in the low 32 bits; above them, whether `e` only
/// heard of the failure from a peer (`PeerFailed`), which may name a rank that failed
/// because of another. So the least key names the lowest rank that a rank saw fail
/// itself (its own step, or a peer dead or stalled), if any.
pub(crate) fn failure_key(e: &Error, me: i32) -> i64 {
    let heard = matches!(e, Error::PeerFailed { .. }) as i64;
    heard << 32 | i64::from(e.failed_rank().unwrap_or(me) as u32)
}

/// The `what` of the `Mismatch` a rank gets when the root called a non-root method or a
/// non-root called the root's (no reference rank: each rank's role is the root argument's).
pub(crate) const ROLE: &str = "root/non-root method";

/// The rank a [`failure_key`] names.
pub(crate) fn named(key: i64) -> i32 {
    key as u32 as i32
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidRoot { rank, root, size } => {
                write!(f, "rank {rank}: root {root} is out of range for a communicator of {size} ranks")
            }
            Error::Mismatch { rank, culprit, what } if *what == ROLE => write!(
                f,
                "rank {rank}: rank {culprit} called the method of the other role (the root's method \
                 on a rank that is not the root, or the non-root method on the root)"
            ),
            Error::Mismatch { rank, culprit, what } => {
                write!(f, "rank {rank}: rank {culprit} called a different {what} than rank 0 did")
            }
            Error::LengthMismatch { rank, culprit, expected, found } => {
                write!(f, "rank {rank}: rank {culprit} passed {found} bytes where {expected} were needed")
            }
            Error::BufferSize { rank, which, expected, found } => {
                write!(f, "rank {rank}: the {which} buffer has {found} elements where {expected} are needed")
            }
            Error::PeerFailed { rank, peer } => {
                write!(f, "rank {rank}: rank {peer} failed during the collective")
            }
            Error::PreviousFailed { rank } => write!(
                f,
                "rank {rank}: the previous collective on this communicator failed after a rank had \
                 left it early or another node had judged it; this call did nothing"
            ),
            Error::PeerDied { rank, peer, pid } => {
                write!(f, "rank {rank}: rank {peer} (pid {pid}) died")
            }
            Error::Timeout { rank, peer, seconds } => {
                write!(f, "rank {rank}: waited more than {seconds} s for rank {peer}")
            }
            Error::Fenced { rank, peer, pid, seconds } => write!(
                f,
                "rank {rank}: waited more than {seconds} s for rank {peer} (pid {pid}), which could still \
                 write into this rank's buffer; killed it"
            ),
            Error::Transport { rank, peer, op, errno } => {
                write!(f, "rank {rank}: {op} with rank {peer} failed: {errno}")
            }
            Error::Segment { rank, op, errno } => {
                write!(f, "rank {rank}: control segment {op} failed: {errno}")
            }
            Error::Config { name, value, expected } => {
                write!(f, "{name}={value:?} is not understood: expected {expected}")
            }
            Error::Protocol { rank, what } => write!(f, "rank {rank}: protocol violation: {what}"),
            Error::InvalidPartition { rank, culprit, which, index, reason } => {
                write!(
                    f,
                    "rank {rank}: block {index} of rank {culprit}'s {which} buffer is invalid: {reason}"
                )
            }
            Error::InvalidLayout { rank, culprit, which, reason } => {
                if let Some(rank) = rank {
                    write!(f, "rank {rank}: ")?;
                }
                match culprit {
                    Some(c) => write!(f, "rank {c}'s {which} layout is invalid: {reason}"),
                    None => write!(f, "invalid {which}: {reason}"),
                }
            }
            Error::Unsupported { rank, what } => write!(f, "rank {rank}: unsupported: {what}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Transport { errno, .. } | Error::Segment { errno, .. } => {
                std::io::Error::from(*errno).kind()
            }
            Error::Timeout { .. } | Error::Fenced { .. } => std::io::ErrorKind::TimedOut,
            Error::Unsupported { .. } => std::io::ErrorKind::Unsupported,
            Error::PeerDied { .. } | Error::PeerFailed { .. } => std::io::ErrorKind::BrokenPipe,
            _ => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, e)
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The rank a failure is agreed on: one a rank saw fail before one a rank only heard
    /// of, then the lowest.
    #[test]
    fn the_failed_rank_is_the_one_seen_failing() {
        let key = |e: Error| failure_key(&e, e.rank().unwrap());
        let relayed = key(Error::PeerFailed { rank: 5, peer: 3 });
        let found = key(Error::PeerFailed { rank: 3, peer: 4 });
        let own = key(Error::Transport { rank: 4, peer: 3, op: "cma read", errno: Errno::EIO });
        let died = key(Error::PeerDied { rank: 2, peer: 7, pid: 1 });
        let first = [relayed, found, own, died].into_iter().min().unwrap();
        assert_eq!(named(first), 4);
        assert_eq!(named(relayed.min(found)), 3);
        assert_eq!(named(died), 7);
        assert_eq!(named(key(Error::Protocol { rank: 6, what: String::new() })), 6);
    }

    #[test]
    fn every_rank_bound_variant_reports_its_rank() {
        let e = Error::PeerDied { rank: 3, peer: 1, pid: 42 };
        assert_eq!(e.rank(), Some(3));
        assert_eq!(e.to_string(), "rank 3: rank 1 (pid 42) died");
        let f = Error::Fenced { rank: 0, peer: 2, pid: 7, seconds: 0.5 };
        assert_eq!(f.rank(), Some(0));
        assert_eq!(
            f.to_string(),
            "rank 0: waited more than 0.5 s for rank 2 (pid 7), which could still write into this \
             rank's buffer; killed it"
        );
        assert_eq!(std::io::Error::from(f).kind(), std::io::ErrorKind::TimedOut);
        let c = Error::Config { name: "ZCOLL_TRANSPORT", value: "x".into(), expected: "cma|cico" };
        assert_eq!(c.rank(), None);
        // A rank that called the method of the other role is compared with no rank.
        let role = Error::Mismatch { rank: 0, culprit: 0, what: ROLE };
        assert_eq!(
            role.to_string(),
            "rank 0: rank 0 called the method of the other role (the root's method on a rank \
             that is not the root, or the non-root method on the root)"
        );
        let op = Error::Mismatch { rank: 2, culprit: 1, what: "operator or element type" };
        assert_eq!(
            op.to_string(),
            "rank 2: rank 1 called a different operator or element type than rank 0 did"
        );
    }

    #[test]
    fn converts_into_io_error_with_a_fitting_kind() {
        let e = Error::Transport { rank: 0, peer: 1, op: "cma read", errno: Errno::EPERM };
        let io: std::io::Error = e.clone().into();
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(io.into_inner().unwrap().to_string(), e.to_string());
    }
}
