//! The shared heap: memory of this process that every peer of the node can map.
//!
//! Each process has at most one heap, created on first use: a `memfd` (named
//! `zcoll-heap.<pid>`) and one reservation of [`RESERVE`] bytes of address space that maps
//! all of it (`MAP_SHARED | MAP_NORESERVE`). The file starts empty and grows with
//! `ftruncate` as blocks are handed out; pages past its end are never touched, because
//! only blocks below the top are ever handed out. A peer opens the file through
//! `/proc/<pid>/fd/<n>` (which needs the same ptrace permission as CMA) and maps the
//! whole reservation once, on first use, so that an address `a` of the owner's heap is at
//! `peer_base + (a - owner_base)` in the peer, for the life of both processes.
//!
//! Blocks come in power-of-two size classes from one page up, each page aligned, with one
//! free list per class (the link lives in the free block itself) and a bump pointer for
//! fresh blocks. A spin lock with backoff guards the lists: the heap serves a global
//! allocator ([`ShmAlloc`]), so it must never allocate itself, and it never does: creating
//! it, growing it and freeing into it are system calls and pointer writes only. Freed
//! blocks of 32 MiB and more give their pages back to the kernel (`FALLOC_FL_PUNCH_HOLE`),
//! as glibc's allocator unmaps blocks above its mmap threshold (which grows up to 32 MiB);
//! smaller ones stay in their free list, so that a program that allocates and frees the
//! same buffer in a loop makes no system call (`benches/alloc.rs`).
//!
//! Peer memory stays raw: [`PeerHeaps`] gives a pointer into the peer's mapping, which
//! only the copy functions of `transport` dereference.
//!
//! A peer's mapping never goes stale. It maps the owner's whole file, not a buffer, so an
//! address of the owner's heap always reads what the owner stores there now: a block that
//! was freed and handed out again reads as the new block. And a peer copies a block only
//! inside a round in which its owner published it (the rounds' invariant), so it never
//! reads another buffer's bytes through an old address.

use crate::error::Errno;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{OnceCell, UnsafeCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};

/// The address space every heap reserves: its blocks never exceed it.
pub(crate) const RESERVE: usize = 64 << 30;
const PAGE: usize = 4096;
/// The smallest class: one page (`1 << MIN_SHIFT` bytes).
const MIN_SHIFT: u32 = 12;
/// Classes up to `RESERVE` bytes.
const CLASSES: usize = (RESERVE.trailing_zeros() - MIN_SHIFT + 1) as usize;
/// The file grows in steps of at least this much.
const GROW: usize = 2 << 20;
/// Freed blocks from this size on give their pages back (glibc's largest mmap threshold:
/// below it, a free costs a system call of about 1.6 us for the memory it returns).
const PUNCH_MIN: usize = 32 << 20;

/// The state of the process's heap.
const UNINIT: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;
/// In a child made by `fork`: the heap is this process's private copy (see
/// [`after_fork_in_child`]); its blocks are freed by leaking them, and nothing new comes
/// from it.
const FORKED: u8 = 4;

/// The free lists and the bump pointer, guarded by `Local::lock`.
struct Lists {
    /// The first never-used offset.
    top: usize,
    /// The file's length.
    file_len: usize,
    /// Per class: the offset of the first free block plus one (0: empty).
    free: [usize; CLASSES],
}

impl Lists {
    /// Moves the top to `top` (at most `RESERVE`), first growing the file behind
    /// descriptor `fd` by whole `GROW` steps if it is shorter. Returns whether it could
    /// (`false`, and nothing changed, if the file could not grow).
    fn raise_top(&mut self, fd: i32, top: usize) -> bool {
        if top > self.file_len {
            let len = top.max(self.file_len + GROW).div_ceil(GROW) * GROW;
            let len = len.min(RESERVE);
            // SAFETY: plain system call on our own descriptor.
            if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
                return false;
            }
            self.file_len = len;
        }
        self.top = top;
        true
    }
}

/// This process's heap.
struct Local {
    status: AtomicU8,
    /// The errno of a failed creation.
    error: AtomicI32,
    fd: AtomicI32,
    base: AtomicUsize,
    lock: AtomicBool,
    lists: UnsafeCell<Lists>,
}

// SAFETY: `lists` is only touched by the thread that holds `lock` (acquired with a
// compare-exchange, Acquire; released with Release), which serializes every access; the
// other fields are atomics.
unsafe impl Sync for Local {}

static HEAP: Local = Local {
    status: AtomicU8::new(UNINIT),
    error: AtomicI32::new(0),
    fd: AtomicI32::new(-1),
    base: AtomicUsize::new(0),
    lock: AtomicBool::new(false),
    lists: UnsafeCell::new(Lists { top: 0, file_len: 0, free: [0; CLASSES] }),
};

/// What peers need to map this process's heap: the file descriptor number and the base
/// address of the reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) fd: i32,
    pub(crate) base: usize,
}

/// Creates the heap if it does not exist yet, and says where it is.
///
/// # Errors
///
/// The errno of the step that failed (`memfd_create` or `mmap`), now or at an earlier
/// attempt: a heap that could not be created is never tried again.
pub(crate) fn local() -> Result<Published, Errno> {
    loop {
        match HEAP.status.load(Ordering::Acquire) {
            READY => {
                return Ok(Published {
                    fd: HEAP.fd.load(Ordering::Relaxed),
                    base: HEAP.base.load(Ordering::Relaxed),
                })
            }
            FAILED => return Err(Errno::from_raw(HEAP.error.load(Ordering::Relaxed))),
            // A forked child has no heap of its own that peers could map.
            FORKED => return Err(Errno::EPERM),
            // Another thread creates it: it takes two system calls.
            BUSY => std::thread::yield_now(),
            _ => {
                let _ = try_init();
            }
        }
    }
}

/// Creates the heap unless another thread is doing it; never waits and never allocates.
/// Returns whether the heap is ready.
fn try_init() -> bool {
    if HEAP.status.compare_exchange(UNINIT, BUSY, Ordering::Acquire, Ordering::Acquire).is_err() {
        return HEAP.status.load(Ordering::Acquire) == READY;
    }
    match create() {
        Ok((fd, base)) => {
            HEAP.fd.store(fd, Ordering::Relaxed);
            HEAP.base.store(base, Ordering::Relaxed);
            // SAFETY: registers a plain `extern "C"` function with no arguments, once
            // (only the thread that moved the status from UNINIT gets here). A failure
            // (ENOMEM) leaves a forked child sharing the heap, as before.
            unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
            HEAP.status.store(READY, Ordering::Release);
            true
        }
        Err(e) => {
            HEAP.error.store(e.raw(), Ordering::Relaxed);
            HEAP.status.store(FAILED, Ordering::Release);
            false
        }
    }
}

/// The memfd and its reservation. The name is built on the stack: no allocation.
fn create() -> Result<(i32, usize), Errno> {
    let mut name = *b"zcoll-heap.\0\0\0\0\0\0\0\0\0\0\0\0";
    let mut pid = std::process::id();
    let mut digits = [0u8; 10];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (pid % 10) as u8;
        n += 1;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    for i in 0..n {
        name[11 + i] = digits[n - 1 - i];
    }
    // SAFETY: `name` is NUL-terminated (at most 10 digits after 11 bytes, in 24 bytes).
    let fd = unsafe { libc::memfd_create(name.as_ptr().cast(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Errno::last());
    }
    match map_reserve(fd) {
        Ok(base) => Ok((fd, base as usize)),
        Err(e) => {
            // SAFETY: `fd` is ours and used nowhere else.
            unsafe { libc::close(fd) };
            Err(e)
        }
    }
}

/// Maps the whole reservation of the heap file behind `fd` (ours, or a peer's opened
/// through `/proc`), shared and read-write, at an address the kernel chooses. The mapping
/// stays after `fd` is closed.
fn map_reserve(fd: i32) -> Result<*mut libc::c_void, Errno> {
    // SAFETY: a fresh mapping at an address the kernel chooses, so it overlaps nothing of
    // ours; `fd` is open for the call.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            RESERVE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_NORESERVE,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    Ok(base)
}

/// Runs in the child of every `fork` once the heap exists. The heap's mapping is shared
/// (`MAP_SHARED`), so without this a child would write the parent's live blocks, its free
/// lists (which live in the free blocks) and, by giving pages back or growing the file,
/// the parent's file itself. Instead the child's view becomes a private copy, as any other
/// memory of a forked process is: the same file mapped `MAP_PRIVATE` at the same address,
/// so every pointer into the heap stays valid and the child's writes stay its own. Then the
/// heap is `FORKED`: blocks the child frees are leaked (they are private pages now), new
/// allocations come from the system allocator, and a `Comm` built in the child has no heap.
/// The lock is released, since the thread that may have held it does not exist here.
///
/// Only system calls and atomic stores: a forked child of a threaded program may do no
/// more.
extern "C" fn after_fork_in_child() {
    if HEAP.status.load(Ordering::Acquire) != READY {
        return;
    }
    let (fd, base) = (HEAP.fd.load(Ordering::Relaxed), HEAP.base.load(Ordering::Relaxed));
    // SAFETY: replaces our own reservation, at its own address and length, with a private
    // mapping of the same file: the pages read the same bytes, every pointer into the
    // heap stays valid, and no other mapping lies in the range.
    let remapped = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            RESERVE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_FIXED | libc::MAP_NORESERVE,
            fd,
            0,
        )
    };
    if remapped == libc::MAP_FAILED {
        // Keep sharing rather than lose the child's memory; it is then the program's to
        // exec at once, as it must do anyway where mmap fails.
        return;
    }
    HEAP.status.store(FORKED, Ordering::Release);
    HEAP.lock.store(false, Ordering::Release);
}

/// The class of a block of `size` bytes.
fn class(size: usize) -> Option<usize> {
    let bits = usize::BITS - size.max(1).saturating_sub(1).leading_zeros();
    let class = bits.max(MIN_SHIFT) - MIN_SHIFT;
    ((class as usize) < CLASSES).then_some(class as usize)
}

fn class_bytes(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

/// Runs `f` on the lists with the lock held.
fn locked<R>(f: impl FnOnce(&mut Lists) -> R) -> R {
    let backoff = crossbeam_utils::Backoff::new();
    while HEAP.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        if backoff.is_completed() {
            std::thread::yield_now();
        } else {
            backoff.snooze();
        }
    }
    // SAFETY: we hold the lock, so no other thread touches the lists until we release it.
    let r = f(unsafe { &mut *HEAP.lists.get() });
    HEAP.lock.store(false, Ordering::Release);
    r
}

/// Whether the `len` bytes from `addr` lie in this process's heap (none do if `len` is 0).
pub(crate) fn holds(addr: usize, len: usize) -> bool {
    len > 0 && contains(addr) && addr.checked_add(len - 1).is_some_and(contains)
}

/// Whether `addr` lies in this process's heap.
pub(crate) fn contains(addr: usize) -> bool {
    matches!(HEAP.status.load(Ordering::Acquire), READY | FORKED) && {
        let base = HEAP.base.load(Ordering::Relaxed);
        addr >= base && addr - base < RESERVE
    }
}

/// A block of at least `size` bytes, page aligned, or `None` if the heap does not exist
/// (it is created here if it was never tried) or is full.
fn alloc(size: usize) -> Option<NonNull<u8>> {
    if HEAP.status.load(Ordering::Acquire) != READY && !try_init() {
        return None;
    }
    let class = class(size)?;
    let bytes = class_bytes(class);
    let base = HEAP.base.load(Ordering::Relaxed);
    let fd = HEAP.fd.load(Ordering::Relaxed);
    let offset = locked(|l| {
        if l.free[class] != 0 {
            let offset = l.free[class] - 1;
            // SAFETY: a free block of this class starts at `offset`, below `top`, so inside
            // the file and the reservation; its first word holds the next link, written by
            // `free` under the lock.
            l.free[class] = unsafe { ((base + offset) as *const usize).read() };
            return Some(offset);
        }
        let offset = l.top;
        let top = offset.checked_add(bytes).filter(|&t| t <= RESERVE)?;
        l.raise_top(fd, top).then_some(offset)
    })?;
    NonNull::new((base + offset) as *mut u8)
}

/// Grows the block at `ptr` from the class of `old` bytes to the class of `new` bytes
/// where it stands, if it is the last block handed out (it ends at the top): the common
/// case of a growing `Vec`. Returns whether it did; the block then belongs to the new
/// class.
///
/// # Safety
///
/// - `ptr` was returned by [`alloc`] for a size of the class of `old`, and is live.
unsafe fn grow_in_place(ptr: *mut u8, old: usize, new: usize) -> bool {
    let (Some(from), Some(to)) = (class(old), class(new)) else { return false };
    if HEAP.status.load(Ordering::Acquire) != READY {
        return false;
    }
    let offset = ptr as usize - HEAP.base.load(Ordering::Relaxed);
    let fd = HEAP.fd.load(Ordering::Relaxed);
    locked(|l| {
        let Some(top) = offset.checked_add(class_bytes(to)).filter(|&t| t <= RESERVE) else { return false };
        if offset + class_bytes(from) != l.top {
            return false;
        }
        l.raise_top(fd, top)
    })
}

/// Returns a block to its class.
///
/// # Safety
///
/// - `ptr` was returned by [`alloc`] for a size of the same class as `size`, and is not
///   used after this call.
unsafe fn free(ptr: *mut u8, size: usize) {
    let Some(class) = class(size) else { return };
    if HEAP.status.load(Ordering::Acquire) == FORKED {
        // A private page of a forked child: leaked (see `after_fork_in_child`).
        return;
    }
    let base = HEAP.base.load(Ordering::Relaxed);
    let offset = ptr as usize - base;
    let bytes = class_bytes(class);
    if bytes >= PUNCH_MIN {
        // Give the pages back, all but the first (which holds the link). Failure only
        // keeps the memory.
        // SAFETY: the range lies inside the block, which nobody uses any more, and inside
        // the file (blocks are below `top`, which the file covers).
        unsafe {
            libc::fallocate(
                HEAP.fd.load(Ordering::Relaxed),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                (offset + PAGE) as libc::off_t,
                (bytes - PAGE) as libc::off_t,
            )
        };
    }
    locked(|l| {
        // SAFETY: the block is ours to reuse (the caller's contract) and page aligned, so
        // its first word is writable and aligned.
        unsafe { (ptr as *mut usize).write(l.free[class]) };
        l.free[class] = offset + 1;
    });
}

/// An owned, zero-filled, page-aligned block of the shared heap: the storage of
/// [`ShmBox`](crate::ShmBox).
#[derive(Debug)]
pub(crate) struct Block {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Block` owns its memory exclusively (like a `Box<[u8]>`); peers only touch it
// during a collective that borrows it through the block's owner.
unsafe impl Send for Block {}
// SAFETY: shared access only reads through `&[u8]`.
unsafe impl Sync for Block {}

impl Block {
    /// `len` zero bytes in the heap.
    ///
    /// # Errors
    ///
    /// The errno that prevented the heap's creation, or `ENOMEM` if it is full.
    pub(crate) fn zeroed(len: usize) -> Result<Block, Errno> {
        local()?;
        let ptr = alloc(len).ok_or(Errno::ENOMEM)?;
        // SAFETY: the block has at least `len` bytes (its class), and is ours.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(Block { ptr, len })
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len` initialized bytes we own; peers write them only during a
        // collective, which holds the unique borrow of the `ShmBox`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: the block came from `alloc(self.len)` and nothing refers to it any more.
        unsafe { free(self.ptr.as_ptr(), self.len) };
    }
}

/// A global allocator that puts large allocations in the shared heap, so that ordinary
/// `Vec`s and `Box`es are mapped by the peers of a node and move at memcpy speed, with no
/// system call per collective.
///
/// Allocations of at least the threshold (64 KiB by default) with an alignment of at most
/// a page come from the heap; everything else, and everything if the heap cannot be
/// created or is full (its address space is 64 GiB a process), from the system allocator.
/// Either way the allocation works: the heap only changes how collectives reach the
/// buffer. It is thread safe (a spin lock with backoff guards the free lists).
///
/// `realloc` keeps a block in place within its size class, and grows the last block
/// handed out where it stands.
///
/// After `fork`, the child's heap is a private copy of the parent's, as any other memory
/// of the child is: blocks it inherited keep their contents and addresses, its writes and
/// frees never reach the parent, and its new allocations come from the system allocator.
///
/// # Examples
///
/// ```
/// #[global_allocator]
/// static ALLOC: zcoll::ShmAlloc = zcoll::ShmAlloc::new();
///
/// let big = vec![1.0f64; 1 << 20]; // 8 MiB: in the shared heap
/// let small = vec![0u8; 100]; // from the system allocator
/// assert_eq!(big.iter().sum::<f64>(), (1 << 20) as f64);
/// assert_eq!(small.len(), 100);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ShmAlloc {
    threshold: usize,
}

impl ShmAlloc {
    /// The allocator with the default threshold of 64 KiB.
    pub const fn new() -> ShmAlloc {
        ShmAlloc { threshold: 64 * 1024 }
    }

    /// The allocator that serves allocations of at least `bytes` bytes from the shared
    /// heap (at least one byte: 0 counts as 1).
    pub const fn with_threshold(bytes: usize) -> ShmAlloc {
        ShmAlloc { threshold: if bytes == 0 { 1 } else { bytes } }
    }

    fn wants(&self, layout: Layout) -> bool {
        layout.size() >= self.threshold && layout.align() <= PAGE
    }
}

impl Default for ShmAlloc {
    fn default() -> Self {
        ShmAlloc::new()
    }
}

// SAFETY: every pointer handed out is either the system allocator's (and given back to
// it) or a heap block of at least `layout.size()` bytes, page aligned (so aligned for any
// `layout.align() <= PAGE`), never handed out twice while live; `contains` tells the two
// apart by address, since the heap's reservation is only used for heap blocks.
unsafe impl GlobalAlloc for ShmAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.wants(layout) {
            if let Some(p) = alloc(layout.size()) {
                return p.as_ptr();
            }
        }
        // SAFETY: the caller's layout is valid and of non-zero size (GlobalAlloc contract).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.wants(layout) {
            if let Some(p) = alloc(layout.size()) {
                // SAFETY: the block has at least `layout.size()` bytes and is ours.
                unsafe { std::ptr::write_bytes(p.as_ptr(), 0, layout.size()) };
                return p.as_ptr();
            }
        }
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if contains(ptr as usize) {
            // SAFETY: a heap pointer was allocated by `alloc(layout.size())` above.
            unsafe { free(ptr, layout.size()) }
        } else {
            // SAFETY: any other pointer came from the system allocator with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let in_heap = contains(ptr as usize);
        if in_heap && class(new_size).is_some() && class(new_size) == class(layout.size()) {
            return ptr;
        }
        // SAFETY: a heap pointer was allocated by `alloc(layout.size())` (the caller's
        // contract: it came from this allocator with this layout).
        if in_heap && new_size > layout.size() && unsafe { grow_in_place(ptr, layout.size(), new_size) } {
            return ptr;
        }
        // SAFETY: `new_size` with the old alignment is a valid layout (the caller's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !in_heap && !self.wants(new_layout) {
            // SAFETY: a system pointer with its layout; the caller's contract otherwise.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new_layout` has a non-zero size (the caller's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap (the
            // new one is live while the old one is too).
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            // SAFETY: the old block with its layout, not used after this.
            unsafe { self.dealloc(ptr, layout) };
        }
        new
    }
}

/// A peer's heap, mapped in this process.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
}

// SAFETY: the mapping belongs to the `PeerHeaps` that owns this value; the pointer is only
// an address of it, usable from any thread (the process's address space is shared by all).
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping of `RESERVE` bytes; every pointer into it was borrowed
        // from the `PeerHeaps` that owns it, which is being dropped.
        unsafe { libc::munmap(self.base.cast(), RESERVE) };
    }
}

/// The node's peers' heaps, mapped on first use and cached for the life of the
/// communicator.
#[derive(Debug)]
pub(crate) struct PeerHeaps {
    /// Per local rank: its pid and what it published (`None` for this rank).
    peers: Vec<Option<(libc::pid_t, Published)>>,
    maps: Vec<OnceCell<Result<Mapping, Errno>>>,
}

impl PeerHeaps {
    pub(crate) fn new(peers: Vec<Option<(libc::pid_t, Published)>>) -> PeerHeaps {
        let maps = peers.iter().map(|_| OnceCell::new()).collect();
        PeerHeaps { peers, maps }
    }

    /// Where byte `addr` of local rank `r`'s heap is in this process, for a range of
    /// `len` bytes that `r` published as lying in its heap.
    ///
    /// # Errors
    ///
    /// Why the heap cannot be mapped, or `EFAULT` if the range is not in `r`'s heap.
    pub(crate) fn locate(&self, r: usize, addr: usize, len: usize) -> Result<*mut u8, Errno> {
        let Some((pid, published)) = self.peers[r] else { return Err(Errno::EINVAL) };
        let offset = addr.wrapping_sub(published.base);
        if offset >= RESERVE || RESERVE - offset < len {
            return Err(Errno::EFAULT);
        }
        let map = self.maps[r].get_or_init(|| map_peer(pid, published.fd));
        match map {
            // SAFETY: `offset + len <= RESERVE`, the length of the mapping.
            Ok(m) => Ok(unsafe { m.base.add(offset) }),
            Err(e) => Err(*e),
        }
    }
}

/// Opens a peer's heap file, for the permission check alone.
///
/// # Errors
///
/// The errno of the `open` (`EACCES` or `EPERM` where ptrace rules deny it).
pub(crate) fn probe(pid: libc::pid_t, fd: i32) -> Result<(), Errno> {
    open_peer(pid, fd).map(drop)
}

fn open_peer(pid: libc::pid_t, fd: i32) -> Result<std::fs::File, Errno> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/fd/{fd}"))
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

fn map_peer(pid: libc::pid_t, fd: i32) -> Result<Mapping, Errno> {
    use std::os::fd::AsRawFd;
    let file = open_peer(pid, fd)?;
    Ok(Mapping { base: map_reserve(file.as_raw_fd())?.cast() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forked child sees the parent's heap blocks as they were, but its writes, its
    /// frees and its allocations never reach the parent (the heap is a private copy in
    /// the child), and the parent's heap goes on working.
    #[test]
    fn a_forked_child_does_not_touch_the_parents_heap() {
        local().unwrap();
        let mut block = Block::zeroed(PUNCH_MIN).unwrap(); // large: its free would punch
        block.as_bytes_mut().iter_mut().enumerate().for_each(|(i, x)| *x = (i % 251) as u8);
        let addr = block.as_bytes().as_ptr() as usize;
        // SAFETY: the child runs only the checks below (no lock taken by another thread is
        // needed: the heap's is released by the fork handler, and nothing here allocates
        // from the system allocator) and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", Errno::last());
        if pid == 0 {
            let intact = block.as_bytes().iter().enumerate().all(|(i, &x)| x == (i % 251) as u8);
            block.as_bytes_mut().fill(0xee);
            let still_here = contains(addr);
            drop(block); // a free in the child: leaked, no hole punched in the shared file
            let refused = Block::zeroed(4096).is_err() && local().is_err();
            let code = if intact && still_here && refused { 0 } else { 1 };
            // SAFETY: ends the child without running the test harness's exit paths.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's checks: {status:#x}");
        assert!(
            block.as_bytes().iter().enumerate().all(|(i, &x)| x == (i % 251) as u8),
            "the child's writes or free reached the parent's block"
        );
        drop(block);
        let again = Block::zeroed(3 << 20).unwrap();
        assert!(contains(again.as_bytes().as_ptr() as usize), "the parent's heap still serves blocks");
    }

    #[test]
    fn classes_are_powers_of_two_from_a_page() {
        assert_eq!(class(0), Some(0));
        assert_eq!(class(1), Some(0));
        assert_eq!(class(4096), Some(0));
        assert_eq!(class(4097), Some(1));
        assert_eq!(class(64 * 1024), Some(4));
        assert_eq!(class(RESERVE), Some(CLASSES - 1));
        assert_eq!(class(RESERVE + 1), None);
        assert_eq!(class_bytes(class(100_000).unwrap()), 128 * 1024);
    }

    #[test]
    fn blocks_are_aligned_distinct_reused_and_mapped_by_a_peer() {
        let published = local().unwrap();
        let mut a = Block::zeroed(100_000).unwrap();
        let b = Block::zeroed(5).unwrap();
        assert!(contains(a.as_bytes().as_ptr() as usize) && contains(b.as_bytes().as_ptr() as usize));
        assert_eq!(a.as_bytes().as_ptr() as usize % PAGE, 0);
        assert!(a.as_bytes().iter().all(|&x| x == 0));
        a.as_bytes_mut().iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
        // A second mapping of our own heap, as a peer maps it, sees the same bytes.
        let me = std::process::id() as libc::pid_t;
        let peers = PeerHeaps::new(vec![Some((me, published))]);
        let addr = a.as_bytes().as_ptr() as usize;
        let seen = peers.locate(0, addr + 10, 1000).unwrap();
        assert_ne!(seen as usize, addr + 10);
        // SAFETY: the block is ours, alive, and 100_000 bytes long.
        assert_eq!(unsafe { seen.read() }, 10);
        assert_eq!(peers.locate(0, 5, 1), Err(Errno::EFAULT));
        let freed = addr;
        drop(a);
        let mut c = Block::zeroed(70_000).unwrap();
        assert_eq!(c.as_bytes().as_ptr() as usize, freed, "a freed block of the class is reused");
        assert!(c.as_bytes().iter().all(|&x| x == 0));
        // The peer's cached mapping of the freed block reads the new block's bytes, never
        // the old ones: it maps the file, not a buffer.
        c.as_bytes_mut()[10] = 0xab;
        let again = peers.locate(0, freed + 10, 1).unwrap();
        assert_eq!(again, seen, "the peer's mapping is made once and kept");
        // SAFETY: the reused block is ours, alive, and 70_000 bytes long.
        assert_eq!(unsafe { again.read() }, 0xab);
        assert!(probe(me, published.fd).is_ok());
        assert!(probe(me, 1 << 20).is_err());
    }

    #[test]
    fn threads_allocate_and_free_concurrently_without_sharing_a_block() {
        let a = ShmAlloc::with_threshold(4096);
        std::thread::scope(|s| {
            for t in 0..4u8 {
                s.spawn(move || {
                    let mut live = Vec::new();
                    for i in 0..300usize {
                        let layout = Layout::from_size_align(4096 << (i % 5), 64).unwrap();
                        // SAFETY: a non-zero layout; freed below with the same layout.
                        let p = unsafe { a.alloc(layout) };
                        assert!(contains(p as usize));
                        // SAFETY: the block has `layout.size()` bytes and is ours.
                        unsafe { std::ptr::write_bytes(p, t, layout.size()) };
                        live.push((p, layout));
                        if i % 3 == 2 {
                            let (p, layout) = live.swap_remove(i % live.len());
                            // SAFETY: written above by this thread only, and still live.
                            let all_ours = unsafe { std::slice::from_raw_parts(p, layout.size()) };
                            assert!(all_ours.iter().all(|&x| x == t), "another thread wrote our block");
                            // SAFETY: allocated above with this layout, freed once.
                            unsafe { a.dealloc(p, layout) };
                        }
                    }
                    for (p, layout) in live {
                        // SAFETY: as above.
                        unsafe {
                            assert!(std::slice::from_raw_parts(p, layout.size()).iter().all(|&x| x == t));
                            a.dealloc(p, layout);
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn growing_the_last_block_stays_in_place() {
        let a = ShmAlloc::with_threshold(4096);
        let base = HEAP.base.load(Ordering::Relaxed);
        // Other tests allocate at the same time: the block may not stay the last one
        // between the allocation and the growth, so a few tries.
        let in_place = (0..8).any(|_| {
            let small = Layout::from_size_align(5 << 20, 64).unwrap();
            // SAFETY: non-zero layouts, each freed with the layout it has then.
            unsafe {
                let p = a.alloc(small);
                assert!(contains(p as usize));
                p.add(12345).write(42);
                let last = locked(|l| p as usize - base + class_bytes(class(small.size()).unwrap()) == l.top);
                let q = a.realloc(p, small, 9 << 20);
                assert_eq!(q.add(12345).read(), 42, "the contents survive the growth");
                a.dealloc(q, Layout::from_size_align(9 << 20, 64).unwrap());
                last && q == p
            }
        });
        assert!(in_place, "a last block never grew in place");
    }

    #[test]
    fn the_allocator_serves_large_layouts_from_the_heap() {
        let a = ShmAlloc::with_threshold(8192);
        let big = Layout::from_size_align(20_000, 8).unwrap();
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: non-zero layouts, each freed with the layout it was allocated with.
        unsafe {
            let p = a.alloc_zeroed(big);
            assert!(contains(p as usize));
            p.add(19_999).write(7);
            let q = a.realloc(p, big, 30_000);
            assert_eq!(q, p, "same class: in place");
            let r = a.realloc(q, Layout::from_size_align(30_000, 8).unwrap(), 200_000);
            assert!(contains(r as usize));
            assert_eq!(r.add(19_999).read(), 7);
            let s = a.alloc(small);
            assert!(!contains(s as usize));
            let s2 = a.realloc(s, small, 10_000);
            assert!(contains(s2 as usize));
            a.dealloc(s2, Layout::from_size_align(10_000, 8).unwrap());
            a.dealloc(r, Layout::from_size_align(200_000, 8).unwrap());
        }
    }
}
