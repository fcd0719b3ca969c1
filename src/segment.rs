//! The node's shared control segment: a POSIX shared-memory object mapped by every rank
//! of the node.
//!
//! Local rank 0 creates it with `O_CREAT | O_EXCL` and mode `0600` under a name nobody
//! else uses, the peers open it by name, and the creator unlinks the name as soon as
//! every peer has mapped it, so that a crash leaves nothing behind in `/dev/shm`. What is
//! stored inside is `sync`'s business: this module only owns the mapping. Its size is
//! fixed at creation and never depends on message sizes.

#![allow(unsafe_code)]

use crate::error::{Errno, Error, Result};
use memmap2::{MmapOptions, MmapRaw};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// A mapping of the node's control segment.
#[derive(Debug)]
pub(crate) struct Segment {
    map: MmapRaw,
}

impl Segment {
    /// Creates a new segment of `len` bytes (zero-filled) and returns it with its name.
    ///
    /// # Errors
    ///
    /// `Error::Segment` naming the step the kernel refused.
    pub(crate) fn create(rank: i32, len: usize) -> Result<(Segment, String)> {
        static SERIAL: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for attempt in 0..64u32 {
            let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
            let name = format!(
                "/zcoll.{}.{}.{:x}",
                std::process::id(),
                serial,
                nanos.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
            );
            match shm_open(&name, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) {
                Ok(fd) => {
                    let file = File::from(fd);
                    let seg = file
                        .set_len(len as u64)
                        .map_err(|e| io_error(rank, "ftruncate", e))
                        .and_then(|()| reserve(rank, &file, len))
                        .and_then(|()| Segment::map(rank, &file, len));
                    return match seg {
                        Ok(seg) => Ok((seg, name)),
                        Err(e) => {
                            Segment::unlink(&name);
                            Err(e)
                        }
                    };
                }
                Err(Errno::EEXIST) => continue,
                Err(errno) => return Err(Error::Segment { rank, op: "shm_open", errno }),
            }
        }
        Err(Error::Segment { rank, op: "shm_open", errno: Errno::EEXIST })
    }

    /// Maps the segment another rank created, checking that it has `len` bytes.
    ///
    /// # Errors
    ///
    /// `Error::Segment` if it cannot be opened or mapped, or has another size.
    pub(crate) fn open(rank: i32, name: &str, len: usize) -> Result<Segment> {
        let fd = shm_open(name, libc::O_RDWR, 0).map_err(|errno| Error::Segment {
            rank,
            op: "shm_open",
            errno,
        })?;
        let file = File::from(fd);
        let actual = file.metadata().map_err(|e| io_error(rank, "fstat", e))?.len();
        if actual != len as u64 {
            return Err(Error::Segment { rank, op: "size check", errno: Errno::EINVAL });
        }
        Segment::map(rank, &file, len)
    }

    /// Removes the name, so that the segment disappears with its last mapping. Errors are
    /// ignored: the name may already be gone.
    pub(crate) fn unlink(name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
            unsafe { libc::shm_unlink(c.as_ptr()) };
        }
    }

    fn map(rank: i32, file: &File, len: usize) -> Result<Segment> {
        let map = MmapOptions::new().len(len).map_raw(file).map_err(|e| io_error(rank, "mmap", e))?;
        Ok(Segment { map })
    }

    /// The first byte of the mapping, page aligned.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// The mapping's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Allocates the segment's pages now: `ftruncate` alone reserves nothing, and a rank that
/// touched a page past what `/dev/shm` has room for would die of `SIGBUS` in the middle of
/// a collective, where this is an error of the set-up on every rank.
fn reserve(rank: i32, file: &File, len: usize) -> Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| Error::Segment {
        rank,
        op: "fallocate",
        errno: Errno::from_raw(libc::EFBIG),
    })?;
    // SAFETY: the descriptor is open for writing for the duration of the call; the range
    // is plain numbers.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        errno => Err(Error::Segment { rank, op: "fallocate", errno: Errno::from_raw(errno) }),
    }
}

fn io_error(rank: i32, op: &'static str, e: std::io::Error) -> Error {
    Error::Segment { rank, op, errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)) }
}

fn shm_open(name: &str, flags: libc::c_int, mode: libc::mode_t) -> std::result::Result<OwnedFd, Errno> {
    let c = CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `c` is a valid NUL-terminated string; the flags and mode are plain values.
    let fd = unsafe { libc::shm_open(c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `fd` was just returned by shm_open, is open, and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn create_open_unlink() {
        let (a, name) = Segment::create(0, 8192).unwrap();
        let mode = std::fs::metadata(format!("/dev/shm{name}")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Segment::open(1, &name, 8192).unwrap();
        assert_eq!(
            Segment::open(1, &name, 4096).unwrap_err(),
            Error::Segment { rank: 1, op: "size check", errno: Errno::EINVAL }
        );
        Segment::unlink(&name);
        assert!(matches!(
            Segment::open(2, &name, 8192),
            Err(Error::Segment { op: "shm_open", errno: Errno::ENOENT, .. })
        ));
        // Both mappings see the same zero-filled memory.
        // SAFETY: both mappings are 8192 bytes long and alive; nothing else touches them.
        unsafe {
            assert_eq!(*b.as_ptr().add(100), 0);
            *a.as_ptr().add(100) = 42;
            assert_eq!(std::ptr::read_volatile(b.as_ptr().add(100)), 42);
        }
        assert_eq!(a.len(), 8192);
    }
}
