//! Buffers in the shared heap: [`ShmBox`] (from [`Comm::alloc`](crate::Comm::alloc)) and
//! the [`ShmAlloc`] global allocator.
//!
//! A buffer in this process's shared heap is mapped by every peer of the node (on nodes
//! whose transport is `heap`, or `cma` with the heap available), so collectives copy it
//! with plain loads and stores: no system call, no page pinning. Any other buffer still
//! works, through CMA. The heap itself lives in `transport::heap`.

use crate::pod::Pod;
use crate::transport::heap::Block;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

pub use crate::transport::heap::ShmAlloc;

/// An owned slice of `T` in the shared heap, zero-filled when created and freed on drop:
/// what [`Comm::alloc`](crate::Comm::alloc) returns.
///
/// It dereferences to `[T]`, so it is used like a `Box<[T]>`; its length is fixed.
///
/// # Examples
///
/// ```no_run
/// # use zcoll::ZeroCopy;
/// # let universe = mpi::initialize().unwrap();
/// let comm = universe.world().zero_copy()?;
/// let mut field = comm.alloc::<f64>(1 << 20)?;
/// field.fill(comm.rank() as f64);
/// comm.all_reduce_in_place(&mut field, zcoll::op::Builtin::Sum)?; // loads, no syscall
/// # Ok::<(), zcoll::Error>(())
/// ```
pub struct ShmBox<T> {
    block: Block,
    _elem: PhantomData<T>,
}

impl<T: Pod> ShmBox<T> {
    /// `n` zeroed elements in the heap.
    pub(crate) fn zeroed(n: usize) -> std::result::Result<ShmBox<T>, crate::error::Errno> {
        let size = std::mem::size_of::<T>();
        if size == 0 || std::mem::align_of::<T>() > 4096 {
            return Err(crate::error::Errno::EINVAL);
        }
        let bytes = n.checked_mul(size).ok_or(crate::error::Errno::ENOMEM)?;
        Ok(ShmBox { block: Block::zeroed(bytes)?, _elem: PhantomData })
    }
}

impl<T: Pod> Deref for ShmBox<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // The block is page aligned and holds a whole number of `T`.
        bytemuck::cast_slice(self.block.as_bytes())
    }
}

impl<T: Pod> DerefMut for ShmBox<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        bytemuck::cast_slice_mut(self.block.as_bytes_mut())
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for ShmBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A scratch buffer of a two-level collective: in the shared heap when the node's ranks
/// map each other's heaps, so the node legs copy it with loads and stores as they do the
/// user's heap buffers, else (or when the heap is full) ordinary memory.
#[derive(Debug)]
pub(crate) enum Scratch<T: Pod> {
    /// In the shared heap.
    Heap(ShmBox<T>),
    /// Ordinary memory.
    Mem(Vec<T>),
}

impl<T: Pod> Scratch<T> {
    /// `n` zeroed elements, in the shared heap if `shared` and it has room.
    pub(crate) fn zeroed(n: usize, shared: bool) -> Scratch<T> {
        match shared && n > 0 {
            true => ShmBox::zeroed(n).map_or_else(|_| Scratch::Mem(vec![T::zeroed(); n]), Scratch::Heap),
            false => Scratch::Mem(vec![T::zeroed(); n]),
        }
    }

    /// No elements.
    pub(crate) fn empty() -> Scratch<T> {
        Scratch::Mem(Vec::new())
    }
}

impl<T: Pod> Deref for Scratch<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Scratch::Heap(b) => b,
            Scratch::Mem(v) => v,
        }
    }
}

impl<T: Pod> DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Scratch::Heap(b) => b,
            Scratch::Mem(v) => v,
        }
    }
}
