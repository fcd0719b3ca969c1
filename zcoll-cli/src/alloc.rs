//! A global allocator that the benchmark switches between the system allocator and
//! [`zcoll::ShmAlloc`], so that one run measures ordinary `Vec`s (`--buffers vec`) and
//! `Vec`s in the shared heap (`--buffers global`) side by side.
//!
//! The `zcoll` command installs it. In a process that installs another global allocator
//! the switch changes nothing, and the benchmark's `moved` column shows which transport
//! the bytes really took.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether new large allocations come from the shared heap.
static SHARED: AtomicBool = AtomicBool::new(false);

/// Sends new allocations of 64 KiB or more to the shared heap (`on`), or to the system
/// allocator. Blocks already allocated stay where they are, and are freed correctly
/// either way.
pub fn share_large_allocations(on: bool) {
    SHARED.store(on, Ordering::Relaxed);
}

/// [`zcoll::ShmAlloc`] while [`share_large_allocations`] is on, the system allocator
/// otherwise.
///
/// # Examples
///
/// ```
/// #[global_allocator]
/// static ALLOC: zcoll_cli::alloc::Switchable = zcoll_cli::alloc::Switchable::new();
///
/// zcoll_cli::alloc::share_large_allocations(true);
/// let shared = vec![0u8; 1 << 20]; // in the shared heap, where it could be created
/// zcoll_cli::alloc::share_large_allocations(false);
/// let private = vec![0u8; 1 << 20]; // from the system allocator
/// assert_eq!(shared.len(), private.len());
/// ```
#[derive(Debug, Default)]
pub struct Switchable {
    shared: zcoll::ShmAlloc,
}

impl Switchable {
    /// The allocator, switched off.
    pub const fn new() -> Switchable {
        Switchable { shared: zcoll::ShmAlloc::new() }
    }

    /// The allocator, switched off, whose shared side serves allocations of at least
    /// `bytes` bytes (as [`zcoll::ShmAlloc::with_threshold`]).
    pub const fn with_threshold(bytes: usize) -> Switchable {
        Switchable { shared: zcoll::ShmAlloc::with_threshold(bytes) }
    }
}

// SAFETY: every call goes to one of two sound allocators. `ShmAlloc` frees and reallocates
// blocks of either origin (it tells its own from the system's by address), so a block
// allocated while the switch was on may be freed while it is off, and the other way
// round; with the switch off, `realloc` allocates from the system and copies, so a block
// never moves into the shared heap unasked.
unsafe impl GlobalAlloc for Switchable {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if SHARED.load(Ordering::Relaxed) {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.shared.alloc(layout) }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if SHARED.load(Ordering::Relaxed) {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.shared.alloc_zeroed(layout) }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from `ShmAlloc` or the system
        // allocator, both of which `ShmAlloc::dealloc` frees.
        unsafe { self.shared.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if SHARED.load(Ordering::Relaxed) {
            // SAFETY: as in `dealloc`, and the caller's contract.
            return unsafe { self.shared.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new_size` with the old alignment is a valid layout (the caller's
        // contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size (the caller's contract).
        let new = unsafe { System.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            // SAFETY: the old block with its layout, not used after this.
            unsafe { self.dealloc(ptr, layout) };
        }
        new
    }
}
