//! Fencing: stopping a peer that may still write into this rank's buffers before the
//! rank hands them back to its caller.
//!
//! A rank that published a buffer for peers to write (`recv_writable`: a direct-write
//! receiver, a partitioned reduce's root) must not return while a peer may still write
//! into it. When a wait for such a peer times out (`ZCOLL_TIMEOUT`), the rank cannot wait
//! on, and it cannot return either: the peer may wake up and write into memory the caller
//! has freed. So it *fences* the peer: sends it `SIGKILL` and waits, with the node's wait
//! policy and the same time limit, until the kernel says that the process has exited. A
//! process that has exited has left its copy (`process_vm_writev` runs in the writer's
//! own context) and its stores through a mapping of our heap or an XPMEM attachment; it
//! writes nothing more. Only then does the rank return, with `Error::Fenced`.
//!
//! The peer is named by a pidfd, opened when the node is set up (every peer is alive
//! then, inside `Comm::new`), so neither the signal nor the wait can reach another
//! process that got the pid after the peer's death. The ranks of a job run as one user
//! and already grant each other ptrace access (CMA needs it), so the signal is allowed.
//! A pidfd is readable once every thread of the process has exited (a zombie included);
//! a process whose main thread is a zombie may still have threads on their way out.
//!
//! What cannot be confirmed (no pidfd: the kernel is older than 5.3 or refused one; the
//! signal refused; the process still there when the time limit passes again) leaves the
//! last resort: the rank aborts its own process (`Round::fence`).

use super::wait;
use super::Control;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pidfd for each local rank: `None` for this process itself (the tests' thread
/// ranks share it) and where the kernel gave none.
#[derive(Debug)]
pub(super) struct Pidfds(Vec<Option<OwnedFd>>);

impl Pidfds {
    /// Opens a pidfd on each of `pids` but this process.
    pub(super) fn open(pids: &[libc::pid_t]) -> Pidfds {
        let own = std::process::id() as libc::pid_t;
        Pidfds(pids.iter().map(|&pid| if pid == own { None } else { pidfd_open(pid) }).collect())
    }
}

/// `pidfd_open(2)`: a descriptor that names process `pid` for as long as it is held.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: the system call takes a pid and flags (0: a blocking descriptor, close on
    // exec), and no memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    match i32::try_from(fd) {
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        Ok(fd) if fd >= 0 => Some(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => None,
    }
}

/// Whether every thread of the process `fd` names has exited (its pidfd is readable).
fn exited(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one `pollfd` that we own, for the length 1 we pass; a timeout of 0 returns
    // at once.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// What [`Control::fence`] did to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fence {
    /// The peer reached the point it was awaited for (`done`, or its arrival) before it
    /// was signalled: it was left alone.
    Passed,
    /// The process had exited, or was exiting and now has: it writes nothing.
    Dead,
    /// This rank sent it `SIGKILL`, and the kernel confirmed that it exited.
    Killed,
    /// It may still write: no pidfd, the signal was refused, or the process did not exit
    /// within the time limit.
    Unconfirmed,
}

impl Control {
    /// Makes sure local rank `r` can no longer write into this rank's memory, unless
    /// `passed()` says that it got where it was awaited: the process has exited, or it is
    /// sent `SIGKILL` and awaited (with the node's wait policy) until it has. `passed` is
    /// looked at last thing before the signal, so that a peer that finishes just as the
    /// wait for it timed out is not killed, save in the instant between that look and the
    /// signal; a peer killed in that instant had finished its writes (they precede its
    /// flags), so no byte is lost either way.
    pub(super) fn fence(&self, r: usize, passed: impl Fn() -> bool) -> Fence {
        let pid = self.pids[r];
        let Some(fd) = &self.pidfds.0[r] else {
            // No way to be sure that what we kill is our peer: only a dead one is safe.
            return if wait::alive(pid) { Fence::Unconfirmed } else { Fence::Dead };
        };
        if exited(fd) {
            return Fence::Dead;
        }
        // A process whose main thread has exited (gone, or a zombie) is dying: its other
        // threads may still be on their way out, which the pidfd's readability awaits.
        let dying = !wait::alive(pid);
        if !dying {
            if passed() {
                return Fence::Passed;
            }
            // SAFETY: the system call takes a descriptor, a signal number, a null
            // `siginfo` (the kernel then fills in what `kill` would) and flags; no memory
            // of ours.
            let sent = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<u8>(),
                    0,
                )
            };
            if sent != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) {
                return Fence::Unconfirmed;
            }
        }
        // No liveness check in this wait (no peers): the pidfd is the one word on the
        // exit of every thread; the time limit bounds it.
        let (me, rank) = (self.ranks[self.me], self.ranks[r]);
        let waited = wait::wait_until_any_saying(&self.policy, &[], || exited(fd), &|| {
            format!("rank {me}: rank {rank} (pid {pid}), sent SIGKILL, has not exited yet")
        });
        match (waited, dying) {
            (Ok(()), true) => Fence::Dead,
            (Ok(()), false) => Fence::Killed,
            (Err(_), _) => Fence::Unconfirmed,
        }
    }
}
