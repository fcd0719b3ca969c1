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
//! The peer is named by a pidfd, so neither the signal nor the wait can reach another
//! process that got the pid after the peer's death. No descriptor is held between calls
//! (a rank of a 64-rank node would otherwise hold 63 per communicator, and a program with
//! a few dozen communicators would run out of the default 1024): when the node is set up
//! (every peer is alive then, inside `Comm::new`) each rank notes every peer's start time
//! (`/proc/<pid>/stat`), and a fence opens the pidfd and then checks that the process it
//! names started at that time. A pidfd opened on a reused pid names the newcomer, whose
//! start time differs: the peer is then known dead. The ranks of a job run as one user and
//! already grant each other ptrace access (CMA needs it), so the signal is allowed. A
//! pidfd is readable once every thread of the process has exited (a zombie included); a
//! process whose main thread is a zombie may still have threads on their way out.
//!
//! What cannot be confirmed (no pidfd: the kernel is older than 5.3 or refused one; the
//! signal refused; the process still there when the time limit passes again) leaves the
//! last resort: the rank aborts its own process (`Round::fence`).

use super::wait;
use super::Control;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The start time of each local rank's process, noted at set-up: `None` for this process
/// itself (the tests' thread ranks share it) and where `/proc` did not say.
#[derive(Debug)]
pub(super) struct Births(Vec<Option<u64>>);

impl Births {
    /// Notes the start time of each of `pids` but this process.
    pub(super) fn of(pids: &[libc::pid_t]) -> Births {
        let own = std::process::id() as libc::pid_t;
        Births(pids.iter().map(|&pid| if pid == own { None } else { start_time(pid) }).collect())
    }
}

/// When process `pid` started (field 22 of `/proc/<pid>/stat`, in clock ticks since boot),
/// if it exists.
fn start_time(pid: libc::pid_t) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    // Field 3 is the first after it, so field 22 is the 20th.
    stat.get(stat.rfind(')')? + 1..)?.split_whitespace().nth(19)?.parse().ok()
}

/// `pidfd_open(2)`: a descriptor that names process `pid` for as long as it is held, or
/// the errno (`ESRCH`: no such process).
fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd, i32> {
    // SAFETY: the system call takes a pid and flags (0: a blocking descriptor, close on
    // exec), and no memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    match i32::try_from(fd) {
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        Ok(fd) if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)),
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
        // No way to be sure that what we would kill is our peer: only a dead one is safe.
        let unsure = || if wait::alive(pid) { Fence::Unconfirmed } else { Fence::Dead };
        let Some(birth) = self.births.0[r] else { return unsure() };
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(libc::ESRCH) => return Fence::Dead,
            Err(_) => return unsure(),
        };
        // The pidfd names whatever process holds `pid` now; it is our peer only if it
        // started when ours did. Checked after the open, so a peer that dies and whose pid
        // is reused in between is seen as the newcomer, and as dead.
        if start_time(pid) != Some(birth) {
            return Fence::Dead;
        }
        let fd = &fd;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A process's start time is read from `/proc`, the same each time; a pid that names
    /// no process has none, and `pidfd_open` says so with `ESRCH`.
    #[test]
    fn start_times_name_one_process() {
        let me = std::process::id() as libc::pid_t;
        let born = start_time(me).expect("this process has a start time");
        assert_eq!(start_time(me), Some(born));
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let child_born = start_time(pid).expect("the child has a start time");
        assert!(child_born >= born);
        assert!(pidfd_open(pid).is_ok());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(start_time(pid), None, "reaped: no such process");
        assert_eq!(pidfd_open(pid).err(), Some(libc::ESRCH));
    }
}
