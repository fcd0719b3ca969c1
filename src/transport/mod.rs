//! How bytes cross processes.
//!
//! A single-copy transport moves bytes between this process and a buffer a peer has
//! published for the current collective. Peer memory is never a `&[T]` here: it is a
//! [`RemoteBuf`] (pid, address, length), and every access is an explicit, bounds-checked
//! copy. Which transport a node uses is decided collectively by `node` when the
//! communicator is created; the copy-in/copy-out path (`cico`) is not a transport object
//! but the staging algorithms of `coll`, which go through the control segment.

#![allow(unsafe_code)]

pub(crate) mod cma;

use crate::error::Errno;

/// The ways zcoll can move collective data between the processes of a node.
///
/// # Examples
///
/// ```
/// assert_eq!(zcoll::TransportKind::Cma.to_string(), "cma");
/// assert_eq!("cico".parse::<zcoll::TransportKind>(), Ok(zcoll::TransportKind::Cico));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// Linux Cross Memory Attach: `process_vm_readv`/`process_vm_writev`, one copy in the
    /// kernel.
    Cma,
    /// Copy-in/copy-out through the node's shared control segment: two copies, no special
    /// permission.
    Cico,
}

impl TransportKind {
    /// The name used by `ZCOLL_TRANSPORT` and `info`.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Cma => "cma",
            TransportKind::Cico => "cico",
        }
    }

    pub(crate) fn code(self) -> u64 {
        match self {
            TransportKind::Cma => 1,
            TransportKind::Cico => 2,
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TransportKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "cma" => Ok(TransportKind::Cma),
            "cico" => Ok(TransportKind::Cico),
            _ => Err(()),
        }
    }
}

/// Marks a [`RemoteBuf`] that may only be read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Read {}

/// Marks a [`RemoteBuf`] its owner published for peers to write.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Write {}

/// A buffer of a peer process, published for the current collective.
///
/// It is only an address range in another address space: it can be copied from (and,
/// with `A = Write`, to) through a transport, never dereferenced. The lifetime ties it to
/// the collective round that published it, so it cannot be used after the peer may have
/// returned.
#[derive(Debug)]
pub(crate) struct RemoteBuf<'r, A> {
    pid: libc::pid_t,
    addr: usize,
    len: usize,
    _round: std::marker::PhantomData<(&'r (), A)>,
}

impl<'r, A> RemoteBuf<'r, A> {
    /// Describes `len` bytes at `addr` in process `pid`.
    ///
    /// # Safety
    ///
    /// - `addr..addr + len` is a buffer that process `pid` has published for the current
    ///   collective, and it stays allocated, and is not accessed by its owner in a way
    ///   that conflicts with this process's copies, for all of `'r`.
    /// - With `A = Write`, the owner published the range for peers to write, and derived
    ///   the address from a unique borrow.
    pub(crate) unsafe fn new(pid: libc::pid_t, addr: usize, len: usize) -> Self {
        RemoteBuf { pid, addr, len, _round: std::marker::PhantomData }
    }

    /// The process that owns it.
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Checks that `offset..offset + n` lies inside the buffer and returns its address.
    fn range(&self, offset: usize, n: usize) -> Result<usize, Errno> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(Errno::EINVAL),
        }
    }
}
