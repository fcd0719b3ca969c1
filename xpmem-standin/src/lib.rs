//! A stand-in for `libxpmem.so.0`, for tests on machines without the XPMEM kernel module.
//!
//! It exports the seven functions of the XPMEM user ABI (`xpmem_version`, `xpmem_make`,
//! `xpmem_remove`, `xpmem_get`, `xpmem_release`, `xpmem_attach`, `xpmem_detach`) with
//! their C signatures, so that zcoll's `xpmem` transport, its loading, its attach cache and
//! its algorithms run end to end with `XPMEM_LIBRARY` pointing at this library.
//!
//! It is built on zcoll's shared heap, not on the kernel: a process's "segment" is its
//! whole address space, but **only the part of it in the process's shared heap can be
//! attached** (the memfd named `zcoll-heap.<pid>`, found through `/proc/<pid>/maps` and
//! opened through `/proc/<pid>/fd`). An attach anywhere else fails with `EFAULT`, where the
//! kernel would succeed; zcoll then copies that buffer with CMA. Test programs therefore
//! use `zcoll::ShmAlloc` as their global allocator, so that their large buffers are in the
//! heap.
//!
//! The kernel's rules that matter are kept: `xpmem_make` takes the whole address space
//! (null and `XPMEM_MAXADDR_SIZE`) or page-aligned ranges (this stand-in supports only the
//! former: anything else is `EINVAL` if unaligned, `ENOSYS` if aligned); `xpmem_get` takes
//! `XPMEM_RDWR` only (`EINVAL` otherwise) with `XPMEM_PERMIT_MODE`; `xpmem_attach` takes a
//! page-aligned offset and a non-zero size (`EINVAL` otherwise), and fails by returning
//! `(void *)-1` with `errno` set; every other failure returns -1 with `errno` set.

use libc::{c_int, c_void, off_t, size_t};
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

const PAGE: usize = 4096;
const XPMEM_RDWR: c_int = 0x2;
const XPMEM_PERMIT_MODE: c_int = 0x1;
const XPMEM_MAXADDR_SIZE: usize = usize::MAX;

/// C `struct xpmem_addr`, passed by value to `xpmem_attach`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct XpmemAddr {
    /// The access permit.
    pub apid: i64,
    /// The offset in the segment: an address of the owner.
    pub offset: off_t,
}

/// An access permit: the owner's heap file, and where the heap is in the owner.
#[derive(Debug)]
struct Permit {
    file: File,
    base: usize,
    len: usize,
}

#[derive(Debug, Default)]
struct State {
    permits: HashMap<i64, Permit>,
    next_apid: i64,
    /// Attached windows: address here -> length.
    attached: HashMap<usize, usize>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(State::default))
}

fn fail(errno: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = errno };
}

/// The interface version: that of XPMEM 2.6.
#[no_mangle]
pub extern "C" fn xpmem_version() -> c_int {
    0x0002_6003
}

/// Makes the whole address space of the caller a segment; its id is the caller's pid.
///
/// # Safety
///
/// None beyond the C ABI: no pointer is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn xpmem_make(
    vaddr: *mut c_void,
    size: size_t,
    permit_type: c_int,
    _permit_value: *mut c_void,
) -> i64 {
    if permit_type != XPMEM_PERMIT_MODE {
        fail(libc::EINVAL);
        return -1;
    }
    if !(vaddr.is_null() && size == XPMEM_MAXADDR_SIZE) {
        let aligned = vaddr as usize % PAGE == 0 && size % PAGE == 0 && size > 0;
        fail(if aligned { libc::ENOSYS } else { libc::EINVAL });
        return -1;
    }
    std::process::id() as i64
}

/// Removes a segment of the caller.
///
/// # Safety
///
/// None beyond the C ABI.
#[no_mangle]
pub unsafe extern "C" fn xpmem_remove(segid: i64) -> c_int {
    if segid != std::process::id() as i64 {
        fail(libc::EINVAL);
        return -1;
    }
    0
}

/// Where process `pid`'s shared heap is mapped in it: (base, length).
fn heap_of(pid: i64) -> Result<(usize, usize), c_int> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| errno_of(&e))?;
    let name = format!("/memfd:zcoll-heap.{pid} ");
    maps.lines()
        .filter(|l| l.contains(&name))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, offset) = (f.next()?, f.nth(1)?);
            let (lo, hi) = range.split_once('-')?;
            let lo = usize::from_str_radix(lo, 16).ok()?;
            let hi = usize::from_str_radix(hi, 16).ok()?;
            (offset.chars().all(|c| c == '0')).then_some((lo, hi - lo))
        })
        .max_by_key(|&(_, len)| len)
        .ok_or(libc::ENOENT)
}

/// Opens process `pid`'s shared heap file through `/proc/<pid>/fd`.
fn heap_file(pid: i64) -> Result<File, c_int> {
    let target = format!("/memfd:zcoll-heap.{pid} (deleted)");
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|e| errno_of(&e))?;
    for entry in dir.flatten() {
        if std::fs::read_link(entry.path()).is_ok_and(|t| t.as_os_str() == target.as_str()) {
            return std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(entry.path())
                .map_err(|e| errno_of(&e));
        }
    }
    Err(libc::ENOENT)
}

fn errno_of(e: &std::io::Error) -> c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Gets read-write access to segment `segid` (a pid): opens its shared heap.
///
/// # Safety
///
/// None beyond the C ABI: `permit_value` is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn xpmem_get(
    segid: i64,
    flags: c_int,
    permit_type: c_int,
    _permit_value: *mut c_void,
) -> i64 {
    if flags != XPMEM_RDWR || permit_type != XPMEM_PERMIT_MODE || segid <= 0 {
        fail(libc::EINVAL);
        return -1;
    }
    let permit = heap_of(segid).and_then(|(base, len)| Ok(Permit { file: heap_file(segid)?, base, len }));
    match permit {
        Ok(p) => with_state(|s| {
            s.next_apid += 1;
            s.permits.insert(s.next_apid, p);
            s.next_apid
        }),
        Err(e) => {
            fail(e);
            -1
        }
    }
}

/// Releases a permit.
///
/// # Safety
///
/// None beyond the C ABI.
#[no_mangle]
pub unsafe extern "C" fn xpmem_release(apid: i64) -> c_int {
    match with_state(|s| s.permits.remove(&apid)) {
        Some(_) => 0,
        None => {
            fail(libc::EINVAL);
            -1
        }
    }
}

/// Attaches `size` bytes of the segment at `addr.offset` (an address of the owner, page
/// aligned): maps that part of the owner's heap here.
///
/// # Safety
///
/// None beyond the C ABI; the caller must use the window by the rules of XPMEM (raw
/// access only, not after detaching).
#[no_mangle]
pub unsafe extern "C" fn xpmem_attach(addr: XpmemAddr, size: size_t, vaddr: *mut c_void) -> *mut c_void {
    let offset = addr.offset as usize;
    if addr.offset < 0 || offset % PAGE != 0 || size == 0 || !vaddr.is_null() {
        fail(libc::EINVAL);
        return libc::MAP_FAILED;
    }
    with_state(|s| {
        let Some(p) = s.permits.get(&addr.apid) else {
            fail(libc::EINVAL);
            return libc::MAP_FAILED;
        };
        let inside = offset >= p.base && offset - p.base <= p.len && size <= p.len - (offset - p.base);
        if !inside {
            fail(libc::EFAULT);
            return libc::MAP_FAILED;
        }
        // SAFETY: a new shared mapping of the owner's heap file at an address the kernel
        // chooses; the file offset is page aligned (both `offset` and `base` are).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                p.file.as_raw_fd(),
                (offset - p.base) as off_t,
            )
        };
        if ptr != libc::MAP_FAILED {
            s.attached.insert(ptr as usize, size);
        }
        ptr
    })
}

/// Detaches a window `xpmem_attach` returned.
///
/// # Safety
///
/// `vaddr` must not be used after this call.
#[no_mangle]
pub unsafe extern "C" fn xpmem_detach(vaddr: *mut c_void) -> c_int {
    match with_state(|s| s.attached.remove(&(vaddr as usize))) {
        Some(len) => {
            // SAFETY: a mapping of ours, of this length, which the caller no longer uses.
            unsafe { libc::munmap(vaddr, len) }
        }
        None => {
            fail(libc::EINVAL);
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_rules_are_kept() {
        let me = std::process::id() as i64;
        // SAFETY: no pointer is dereferenced by these calls.
        unsafe {
            assert_eq!(
                xpmem_make(std::ptr::null_mut(), XPMEM_MAXADDR_SIZE, XPMEM_PERMIT_MODE, 0o600 as _),
                me
            );
            assert_eq!(xpmem_make(std::ptr::null_mut(), 100, XPMEM_PERMIT_MODE, 0o600 as _), -1);
            assert_eq!(*libc::__errno_location(), libc::EINVAL);
            assert_eq!(xpmem_get(me, 0x1, XPMEM_PERMIT_MODE, std::ptr::null_mut()), -1);
            assert_eq!(*libc::__errno_location(), libc::EINVAL);
            // This process has no zcoll heap.
            assert_eq!(xpmem_get(me, XPMEM_RDWR, XPMEM_PERMIT_MODE, std::ptr::null_mut()), -1);
            assert_eq!(*libc::__errno_location(), libc::ENOENT);
            let p = xpmem_attach(XpmemAddr { apid: 99, offset: 4096 }, 4096, std::ptr::null_mut());
            assert_eq!(p, libc::MAP_FAILED);
            let p = xpmem_attach(XpmemAddr { apid: 99, offset: 4095 }, 4096, std::ptr::null_mut());
            assert_eq!((p, *libc::__errno_location()), (libc::MAP_FAILED, libc::EINVAL));
            assert_eq!(xpmem_detach(8192 as _), -1);
            assert_eq!(xpmem_version(), 0x0002_6003);
        }
    }
}
