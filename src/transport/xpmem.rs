//! XPMEM: peers attach windows of each other's address space and use them with loads
//! and stores.
//!
//! Each process loads the library and makes its whole address space a segment once
//! ([`local`]); the ranks of a node exchange segment ids when the communicator is created,
//! and each gets an access permit for every peer then ([`Peers::new`]). Windows are
//! attached on demand, page aligned, and cached per peer in an interval map ([`Cache`]):
//! a window that covers a request is reused; one that overlaps or touches it is merged
//! with it into a larger window; windows in use are reference counted ([`Hold`]), and
//! unused ones are detached (never `munmap`ed) when the cache holds more than
//! [`MAX_WINDOWS`], least recently used first, or when the communicator goes. An
//! attachment follows the owner's address space, not a buffer, so a cached window stays
//! right when the owner frees and reallocates memory there.

use crate::error::Errno;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use xpmem_sys::{xpmem_addr, xpmem_apid_t, xpmem_segid_t, Xpmem};

const PAGE: usize = 4096;
/// Unused windows a peer's cache keeps attached.
pub(crate) const MAX_WINDOWS: usize = 32;

/// This process's XPMEM: the library, and its whole address space made a segment.
#[derive(Debug)]
pub(crate) struct Local {
    lib: Xpmem,
    segid: xpmem_segid_t,
}

/// Loads XPMEM (`XPMEM_LIBRARY` or `libxpmem.so.0` with `/dev/xpmem`) and makes this
/// process's address space a segment, once per process.
///
/// # Errors
///
/// Why XPMEM cannot be used, as `info` prints it (`libxpmem.so.0 not found: ...`).
pub(crate) fn local() -> Result<&'static Local, &'static str> {
    static LOCAL: OnceLock<Result<Local, String>> = OnceLock::new();
    let made = LOCAL.get_or_init(|| {
        // SAFETY: the library is the system's libxpmem or the one the user named in
        // XPMEM_LIBRARY (the book's transport chapter says so): trusted to be an XPMEM
        // user library whose initialisers are sound to run and whose exports have the
        // ABI's prototypes.
        let lib = unsafe { Xpmem::load() }.map_err(|e| match e {
            // The loader's own words follow in `info` only where they add something.
            xpmem_sys::LoadError::LibraryNotFound { name, .. } => format!("{name} not found"),
            e => e.to_string(),
        })?;
        // SAFETY: a null address with XPMEM_MAXADDR_SIZE makes the whole address space a
        // segment; the permit is a mode cast to a pointer, never dereferenced. Peers only
        // touch memory of ours that we published for a collective, during it.
        let segid = unsafe {
            lib.make(
                std::ptr::null_mut(),
                xpmem_sys::XPMEM_MAXADDR_SIZE,
                xpmem_sys::XPMEM_PERMIT_MODE,
                0o600 as *mut libc::c_void,
            )
        };
        if segid == -1 {
            return Err(format!("xpmem_make of the address space failed: {}", Errno::last()));
        }
        Ok(Local { lib, segid })
    });
    made.as_ref().map_err(|e| e.as_str())
}

impl Local {
    /// The segment id peers `get`.
    pub(crate) fn segid(&self) -> xpmem_segid_t {
        self.segid
    }
}

/// One attached window of a peer: `[start, end)` of its address space at `ptr` here.
#[derive(Debug)]
struct Window {
    id: u64,
    end: usize,
    ptr: *mut u8,
    refs: usize,
    used: u64,
}

// SAFETY: a window is an attachment owned by its cache; its address is valid in every
// thread of the process, and the cache (not `Sync`) is used by one thread at a time.
unsafe impl Send for Window {}

/// A peer's attached windows: live ones by start address (disjoint, never touching),
/// and retired ones (replaced by a merged window while still held).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    live: BTreeMap<usize, Window>,
    retired: Vec<Window>,
    tick: u64,
    next_id: u64,
}

/// What attaching does: the real library, or a stand-in for the cache's tests.
pub(crate) trait Attacher {
    /// Attaches `[start, end)` of the peer's address space.
    ///
    /// # Errors
    ///
    /// The library's errno.
    fn attach(&self, start: usize, end: usize) -> Result<*mut u8, Errno>;
    /// Detaches a window `attach` returned.
    fn detach(&self, ptr: *mut u8);
}

impl Cache {
    /// A window covering `[addr, addr + len)` (`len > 0`), attached or reused, held until
    /// the returned id is released; and where `addr` is in this process.
    fn acquire(&mut self, a: &dyn Attacher, addr: usize, len: usize) -> Result<(u64, *mut u8), Errno> {
        let start = addr / PAGE * PAGE;
        let end = addr.checked_add(len).ok_or(Errno::EINVAL)?.div_ceil(PAGE) * PAGE;
        self.tick += 1;
        let tick = self.tick;
        if let Some((&s, w)) = self.live.range_mut(..=start).next_back() {
            if w.end >= end {
                w.refs += 1;
                w.used = tick;
                // SAFETY: `addr - s < w.end - s`, the window's length.
                return Ok((w.id, unsafe { w.ptr.add(addr - s) }));
            }
        }
        // Merge with every window that overlaps or touches the request.
        let (mut lo, mut hi) = (start, end);
        let mut merged = Vec::new();
        for (&s, w) in self.live.range(..=hi).rev() {
            if w.end < lo {
                break;
            }
            lo = lo.min(s);
            hi = hi.max(w.end);
            merged.push(s);
        }
        let ptr = a.attach(lo, hi)?;
        for s in merged {
            let w = self.live.remove(&s).expect("listed above");
            if w.refs == 0 {
                a.detach(w.ptr);
            } else {
                self.retired.push(w);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(lo, Window { id, end: hi, ptr, refs: 1, used: tick });
        self.evict(a);
        // SAFETY: `lo <= addr < hi`.
        Ok((id, unsafe { ptr.add(addr - lo) }))
    }

    /// Drops one reference to window `id`; a retired window is detached with its last.
    fn release(&mut self, a: &dyn Attacher, id: u64) {
        if let Some(w) = self.live.values_mut().find(|w| w.id == id) {
            w.refs -= 1;
        } else if let Some(i) = self.retired.iter().position(|w| w.id == id) {
            self.retired[i].refs -= 1;
            if self.retired[i].refs == 0 {
                a.detach(self.retired.swap_remove(i).ptr);
            }
        }
        self.evict(a);
    }

    /// Detaches unused windows, least recently used first, down to `MAX_WINDOWS`.
    fn evict(&mut self, a: &dyn Attacher) {
        while self.live.len() > MAX_WINDOWS {
            let Some((&s, _)) = self.live.iter().filter(|(_, w)| w.refs == 0).min_by_key(|(_, w)| w.used)
            else {
                return;
            };
            a.detach(self.live.remove(&s).expect("found above").ptr);
        }
    }

    /// Detaches everything (the communicator is going: nothing is held).
    fn clear(&mut self, a: &dyn Attacher) {
        for (_, w) in std::mem::take(&mut self.live) {
            a.detach(w.ptr);
        }
        for w in self.retired.drain(..) {
            a.detach(w.ptr);
        }
    }

    #[cfg(test)]
    fn windows(&self) -> Vec<(usize, usize, usize)> {
        self.live.iter().map(|(&s, w)| (s, w.end, w.refs)).collect()
    }
}

/// A peer's permit and its attach cache.
#[derive(Debug)]
struct Peer {
    apid: xpmem_apid_t,
    cache: RefCell<Cache>,
}

/// The node's peers, seen through XPMEM.
#[derive(Debug)]
pub(crate) struct Peers {
    local: &'static Local,
    peers: Vec<Option<Peer>>,
}

/// The real library attaching a peer's windows.
struct Lib<'a> {
    local: &'a Local,
    apid: xpmem_apid_t,
}

impl Attacher for Lib<'_> {
    fn attach(&self, start: usize, end: usize) -> Result<*mut u8, Errno> {
        let addr = xpmem_addr { apid: self.apid, offset: start as libc::off_t };
        // SAFETY: `apid` is a live permit (released only when `Peers` drops), the offset
        // is page aligned and the window lies in the address space the segment covers; a
        // null address lets the library choose where. The window is only used through raw
        // pointers by the copy functions of `transport`.
        let p = unsafe { self.local.lib.attach(addr, end - start, std::ptr::null_mut()) };
        if p == libc::MAP_FAILED || p.is_null() {
            return Err(Errno::last());
        }
        Ok(p.cast())
    }

    fn detach(&self, ptr: *mut u8) {
        // SAFETY: `ptr` came from `attach` and the cache detaches each window once, after
        // its last hold is gone, so no pointer into it is used afterwards.
        unsafe { self.local.lib.detach(ptr.cast()) };
    }
}

impl Peers {
    /// Gets a permit for every peer's segment (`segids[me]` is skipped).
    ///
    /// # Errors
    ///
    /// The first peer whose segment cannot be got, and the errno.
    pub(crate) fn new(local: &'static Local, me: usize, segids: &[i64]) -> Result<Peers, (usize, Errno)> {
        let mut peers = Peers { local, peers: Vec::new() };
        for (r, &segid) in segids.iter().enumerate() {
            if r == me {
                peers.peers.push(None);
                continue;
            }
            // SAFETY: read-write access with a mode permit (null, never dereferenced).
            let apid = unsafe {
                local.lib.get(
                    segid,
                    xpmem_sys::XPMEM_RDWR,
                    xpmem_sys::XPMEM_PERMIT_MODE,
                    std::ptr::null_mut(),
                )
            };
            if apid == -1 {
                return Err((r, Errno::last()));
            }
            peers.peers.push(Some(Peer { apid, cache: RefCell::new(Cache::default()) }));
        }
        Ok(peers)
    }

    /// A window of local rank `r` covering `[addr, addr + len)` (`len > 0`), and where
    /// `addr` is here, held until the [`Hold`] drops.
    ///
    /// # Errors
    ///
    /// The library's errno if the window cannot be attached.
    pub(crate) fn acquire(&self, r: usize, addr: usize, len: usize) -> Result<(Hold<'_>, *mut u8), Errno> {
        let peer = self.peers[r].as_ref().ok_or(Errno::EINVAL)?;
        let lib = Lib { local: self.local, apid: peer.apid };
        let (id, ptr) = peer.cache.borrow_mut().acquire(&lib, addr, len)?;
        Ok((Hold { peers: self, r, id }, ptr))
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        for peer in self.peers.iter().flatten() {
            let lib = Lib { local: self.local, apid: peer.apid };
            peer.cache.borrow_mut().clear(&lib);
            // SAFETY: the permit is ours, and every window attached through it is detached.
            unsafe { self.local.lib.release(peer.apid) };
        }
    }
}

/// Keeps a window attached while a pointer into it is in use.
#[derive(Debug)]
pub(crate) struct Hold<'p> {
    peers: &'p Peers,
    r: usize,
    id: u64,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let peer = self.peers.peers[self.r].as_ref().expect("held windows are of peers");
        let lib = Lib { local: self.peers.local, apid: peer.apid };
        peer.cache.borrow_mut().release(&lib, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records attaches and detaches; "maps" window `[s, e)` at `s + 1 << 40`.
    #[derive(Default)]
    struct Fake {
        log: RefCell<Vec<String>>,
    }

    impl Attacher for Fake {
        fn attach(&self, start: usize, end: usize) -> Result<*mut u8, Errno> {
            if start >= 1 << 30 {
                return Err(Errno::EFAULT);
            }
            self.log.borrow_mut().push(format!("attach {start:#x}-{end:#x}"));
            Ok((start + (1 << 40)) as *mut u8)
        }
        fn detach(&self, ptr: *mut u8) {
            self.log.borrow_mut().push(format!("detach {:#x}", ptr as usize - (1 << 40)));
        }
    }

    #[test]
    fn windows_are_reused_merged_counted_and_evicted() {
        let a = Fake::default();
        let mut c = Cache::default();
        let (w1, p) = c.acquire(&a, 0x1010, 100).unwrap();
        assert_eq!(p as usize, 0x1010 + (1 << 40));
        // Inside the window: a hit, no attach.
        let (w1b, _) = c.acquire(&a, 0x1800, 10).unwrap();
        assert_eq!(w1, w1b);
        assert_eq!(c.windows(), [(0x1000, 0x2000, 2)]);
        // Touching it: merged into one window; the old one is still held, so retired.
        let (w2, p2) = c.acquire(&a, 0x2000, 0x1000).unwrap();
        assert_eq!(p2 as usize, 0x2000 + (1 << 40));
        assert_eq!(c.windows(), [(0x1000, 0x3000, 1)]);
        assert_eq!(*a.log.borrow(), ["attach 0x1000-0x2000", "attach 0x1000-0x3000"]);
        c.release(&a, w1);
        c.release(&a, w1b);
        assert_eq!(
            a.log.borrow().last().unwrap(),
            "detach 0x1000",
            "the retired window goes with its last hold"
        );
        c.release(&a, w2);
        assert_eq!(c.windows(), [(0x1000, 0x3000, 0)], "unused windows stay cached");
        // A request the library refuses is an error and changes nothing.
        assert_eq!(c.acquire(&a, 1 << 31, 8).unwrap_err(), Errno::EFAULT);
        // Beyond MAX_WINDOWS, the least recently used unused window is detached.
        for i in 0..MAX_WINDOWS {
            let (id, _) = c.acquire(&a, 0x100_000 * (i + 1), 1).unwrap();
            c.release(&a, id);
        }
        assert_eq!(c.windows().len(), MAX_WINDOWS);
        assert_eq!(a.log.borrow().last().unwrap(), "detach 0x1000");
        c.clear(&a);
        assert!(c.windows().is_empty());
    }
}
