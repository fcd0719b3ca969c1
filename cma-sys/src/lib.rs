//! Raw declarations for Linux Cross Memory Attach (CMA).
//!
//! CMA moves bytes between the address spaces of two processes with one copy, in the
//! kernel: `process_vm_readv(2)` reads from another process, `process_vm_writev(2)`
//! writes into it. This crate holds only the declarations and the limits a caller must
//! respect; the safe, looping transport lives in the `zcoll` crate.
//!
//! - [`process_vm_readv`] / [`process_vm_writev`] and [`iovec`] are re-exported from
//!   `libc`, so there is one definition of the ABI in the dependency graph.
//! - [`IOV_MAX`] is the most iovecs one call accepts on either side.
//! - [`MAX_RW_COUNT`] is the most bytes one call moves: the kernel clamps every
//!   read/write-like call to `INT_MAX & PAGE_MASK`, and returns a partial count past it.
//! - [`Errno`] is the errno newtype at the syscall edge.
//!
//! The permission rule the kernel applies is the one of `ptrace(2)`
//! (`PTRACE_MODE_ATTACH_REALCREDS`): same user and a dumpable target, or
//! `CAP_SYS_PTRACE`, and whatever Yama's `ptrace_scope` adds.
//!
//! # References
//!
//! `process_vm_readv(2)`; J. Vienne, "Benefits of Cross Memory Attach for MPI libraries
//! on HPC clusters", XSEDE 2014.

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("cma-sys supports Linux on x86_64 and aarch64 only");

use std::fmt;

pub use libc::{iovec, pid_t, process_vm_readv, process_vm_writev};

/// The most iovecs one `process_vm_readv`/`process_vm_writev` call accepts, on each side
/// (`UIO_MAXIOV`); more gives `EINVAL`.
pub const IOV_MAX: usize = 1024;

/// The most bytes one call transfers: the kernel's `MAX_RW_COUNT`, `INT_MAX` rounded down
/// to a page (here to the largest page size the targets use, 64 KiB, so it holds for any
/// base page size). A caller that asks for more gets a partial count and must loop.
pub const MAX_RW_COUNT: usize = (i32::MAX as usize) & !(64 * 1024 - 1);

/// An error number returned by a system call (`errno`).
///
/// # Examples
///
/// ```
/// let e = cma_sys::Errno::EPERM;
/// assert_eq!(e.raw(), libc::EPERM);
/// assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::PermissionDenied);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(i32);

impl Errno {
    /// Operation not permitted: the caller may not access the target (ptrace rules).
    pub const EPERM: Errno = Errno(libc::EPERM);
    /// No such process.
    pub const ESRCH: Errno = Errno(libc::ESRCH);
    /// Bad address: a local or remote iovec points outside a mapping.
    pub const EFAULT: Errno = Errno(libc::EFAULT);
    /// Invalid argument (flags not 0, too many iovecs, a length overflow).
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    /// Out of memory for the kernel's copy of the iovecs.
    pub const ENOMEM: Errno = Errno(libc::ENOMEM);
    /// The system call does not exist (a seccomp filter or an old kernel).
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);
    /// The name already exists (an exclusive create).
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    /// No such file or directory.
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    /// Input/output error.
    pub const EIO: Errno = Errno(libc::EIO);

    /// Wraps a raw error number.
    pub const fn from_raw(raw: i32) -> Errno {
        Errno(raw)
    }

    /// The raw error number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// The calling thread's current `errno`.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Errno({}: {})", self.0, self)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&std::io::Error::from_raw_os_error(self.0), f)
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rw_count_is_page_aligned_and_below_int_max() {
        assert_eq!(MAX_RW_COUNT % 4096, 0);
        assert_eq!(MAX_RW_COUNT % 65536, 0);
        assert!(MAX_RW_COUNT <= i32::MAX as usize);
        assert!(MAX_RW_COUNT > i32::MAX as usize - 65536);
    }

    #[test]
    fn errno_round_trips_and_displays() {
        let e = Errno::from_raw(libc::EFAULT);
        assert_eq!(e, Errno::EFAULT);
        assert_eq!(e.raw(), libc::EFAULT);
        assert!(e.to_string().contains("Bad address"), "{e}");
    }

    #[test]
    fn a_local_read_of_address_zero_faults() {
        // The probe zcoll uses: reading address 0 of a process we may access is EFAULT.
        let mut byte = 0u8;
        let local = iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
        let remote = iovec { iov_base: std::ptr::null_mut(), iov_len: 1 };
        // SAFETY: `local` points at one writable byte we own; the remote iovec is only
        // read by the kernel, which reports EFAULT for address 0 without touching `byte`.
        let n = unsafe { process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        assert_eq!(n, -1);
        assert_eq!(Errno::last(), Errno::EFAULT);
    }
}
