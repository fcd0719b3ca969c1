//! How bytes cross processes.
//!
//! A single-copy transport moves bytes between this process and a buffer a peer has
//! published for the current collective. Peer memory is never a `&[T]` here: it is a
//! [`RemoteBuf`] (pid, address, length), and every access is an explicit, bounds-checked
//! copy. Which transports a node can use is decided collectively by `node` when the
//! communicator is created; which one a copy takes is decided per buffer: a buffer a peer
//! has mapped here (its shared heap, or an XPMEM window) is copied with loads and stores
//! through [`read`] and [`write()`], any other with CMA. The copy-in/copy-out path (`cico`)
//! is not a transport object but the staging algorithms of `coll`, which go through the
//! control segment.

#![allow(unsafe_code)]

pub(crate) mod cma;
pub(crate) mod copy;
pub(crate) mod heap;
pub(crate) mod prefetch;
pub(crate) mod xpmem;

use crate::error::Errno;
use crate::layout::runs::{self, out, Outside, Runs, Source, Word};

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
    /// The shared heap: buffers allocated with [`Comm::alloc`](crate::Comm::alloc) or
    /// [`ShmAlloc`](crate::ShmAlloc) are mapped by every peer and copied with loads and
    /// stores; other buffers go through CMA.
    Heap,
    /// XPMEM: peers attach windows of each other's address space and copy with loads and
    /// stores; what cannot be attached goes through CMA.
    Xpmem,
}

impl TransportKind {
    /// The name used by `ZCOLL_TRANSPORT` and `info`.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Cma => "cma",
            TransportKind::Cico => "cico",
            TransportKind::Heap => "heap",
            TransportKind::Xpmem => "xpmem",
        }
    }

    pub(crate) fn code(self) -> u64 {
        match self {
            TransportKind::Cma => 1,
            TransportKind::Cico => 2,
            TransportKind::Heap => 3,
            TransportKind::Xpmem => 4,
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
            "heap" => Ok(TransportKind::Heap),
            "xpmem" => Ok(TransportKind::Xpmem),
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
    /// Where the buffer is mapped in this process, if it is.
    mapped: Option<Mapped<'r>>,
    _round: std::marker::PhantomData<(&'r (), A)>,
}

/// A peer's buffer mapped in this process: the address of its first byte here, and what
/// keeps the mapping alive.
#[derive(Debug)]
struct Mapped<'r> {
    ptr: *mut u8,
    kind: TransportKind,
    _hold: Option<xpmem::Hold<'r>>,
}

/// How this rank reaches its peers' memory besides CMA, as the node agreed at creation.
#[derive(Debug, Default)]
pub(crate) struct Links {
    /// The peers' shared heaps, when heap buffers are mapped.
    pub(crate) heap: Option<heap::PeerHeaps>,
    /// The peers' address spaces, on an `xpmem` node.
    pub(crate) xpmem: Option<xpmem::Peers>,
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
        RemoteBuf { pid, addr, len, mapped: None, _round: std::marker::PhantomData }
    }

    /// The same buffer, which local rank `r` published as lying in its heap if `in_heap`,
    /// mapped here through the first of `links` that reaches it: an XPMEM window, or the
    /// peer's heap. A buffer neither reaches, or an empty one, stays a CMA buffer.
    ///
    /// # Safety
    ///
    /// - `in_heap` is what `r` published: the range lies in its shared heap.
    pub(crate) unsafe fn map(mut self, links: &'r Links, r: usize, in_heap: bool) -> Self {
        if self.len == 0 {
            return self;
        }
        if let Some(x) = &links.xpmem {
            if let Ok((hold, ptr)) = x.acquire(r, self.addr, self.len) {
                self.mapped = Some(Mapped { ptr, kind: TransportKind::Xpmem, _hold: Some(hold) });
                return self;
            }
        }
        if let (Some(h), true) = (&links.heap, in_heap) {
            if let Ok(ptr) = h.locate(r, self.addr, self.len) {
                self.mapped = Some(Mapped { ptr, kind: TransportKind::Heap, _hold: None });
            }
        }
        self
    }

    /// The address and length published, and where it is mapped here (null if not).
    pub(crate) fn parts(&self) -> (usize, usize, *mut u8, TransportKind) {
        match &self.mapped {
            Some(m) => (self.addr, self.len, m.ptr, m.kind),
            None => (self.addr, self.len, std::ptr::null_mut(), TransportKind::Cma),
        }
    }

    /// The buffer with the mapping of an earlier one (an exposure's registration).
    ///
    /// # Safety
    ///
    /// - `ptr` maps `addr..addr + len` of this buffer's owner in this process, through
    ///   `kind`, and stays mapped for `'r` (the registration holds it).
    pub(crate) unsafe fn with_mapping(mut self, ptr: *mut u8, kind: TransportKind) -> Self {
        if !ptr.is_null() {
            self.mapped = Some(Mapped { ptr, kind, _hold: None });
        }
        self
    }

    /// The transport a copy through this buffer takes.
    pub(crate) fn kind(&self) -> TransportKind {
        self.mapped.as_ref().map_or(TransportKind::Cma, |m| m.kind)
    }

    /// The process that owns it.
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The address and length of every range `(offset, len)` that is not empty, checked to
    /// lie inside the buffer, and the lengths to add up to `total`.
    fn pieces(&self, ranges: &[(usize, usize)], total: usize) -> Result<Vec<(usize, usize)>, Errno> {
        let mut sum = 0usize;
        let mut pieces = Vec::with_capacity(ranges.len());
        for &(offset, len) in ranges.iter().filter(|r| r.1 > 0) {
            pieces.push((self.range(offset, len)?, len));
            sum = sum.checked_add(len).ok_or(Errno::EINVAL)?;
        }
        match sum == total {
            true => Ok(pieces),
            false => Err(Errno::EINVAL),
        }
    }

    /// Checks that `offset..offset + n` lies inside the buffer and returns its address.
    fn range(&self, offset: usize, n: usize) -> Result<usize, Errno> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// Copies `dst.len()` bytes from `src` at `offset` into `dst`: with loads where `src` is
/// mapped here (through [`copy::copy`], which streams its stores from
/// [`copy::STREAM_LARGE`] bytes), else with CMA.
///
/// # Errors
///
/// `EINVAL` if the range is outside `src`; CMA's errors.
pub(crate) fn read<A>(src: &RemoteBuf<'_, A>, offset: usize, dst: &mut [u8]) -> Result<(), Errno> {
    match &src.mapped {
        None => cma::read(src, offset, dst),
        Some(m) => {
            src.range(offset, dst.len())?;
            // SAFETY: `m.ptr` maps the whole published range here for `'r` (the contract of
            // `map`/`with_mapping`), and `offset + dst.len()` lies inside it (checked
            // above); the owner does not write it during the round (a published send
            // buffer, or a result its progress declared final), and `dst` is ours.
            unsafe { copy::copy(m.ptr.add(offset), dst.as_mut_ptr(), dst.len()) };
            Ok(())
        }
    }
}

/// Copies the ranges `(offset, len)` of `src`, in order, into `dst`, packed: with loads
/// where `src` is mapped here, else with one CMA call per `IOV_MAX` ranges.
///
/// # Errors
///
/// As [`read`]; `EINVAL` also when the lengths do not add up to `dst.len()`.
pub(crate) fn read_v<A>(
    src: &RemoteBuf<'_, A>,
    ranges: &[(usize, usize)],
    dst: &mut [u8],
) -> Result<(), Errno> {
    let pieces = src.pieces(ranges, dst.len())?;
    let Some(m) = &src.mapped else {
        return cma::read_v(src.pid(), &pieces, dst);
    };
    let mut at = 0;
    for (addr, len) in pieces {
        // SAFETY: as in `read`: `addr..addr + len` lies inside the published range (checked
        // by `pieces`), which `m.ptr` maps here, and the lengths add up to `dst.len()`.
        unsafe { copy::copy(m.ptr.add(addr - src.addr), dst[at..].as_mut_ptr(), len) };
        at += len;
    }
    Ok(())
}

/// Copies `src` into `dst` at `offset`: with stores where `dst` is mapped here, else with
/// CMA.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn write(src: &[u8], dst: &RemoteBuf<'_, Write>, offset: usize) -> Result<(), Errno> {
    match &dst.mapped {
        None => cma::write(src, dst, offset),
        Some(m) => {
            dst.range(offset, src.len())?;
            // SAFETY: as in `read`; the owner published the range for peers to write during
            // this round (a `Write` buffer), from a unique borrow, and does not access it
            // while the round's algorithm lets us write.
            unsafe { copy::copy(src.as_ptr(), m.ptr.add(offset), src.len()) };
            Ok(())
        }
    }
}

/// Copies the bytes the runs `remote` select in `src`, in order, onto the bytes the runs
/// `local` select in `dst`, in order (a copy between two non-contiguous layouts, with no
/// packing). With loads where `src` is mapped here: each remote fragment scattered onto
/// the local runs, a fragment of 4 or 8 bytes as one load and store, or, where the local
/// fragments are fewer (longer), each local one gathered from the remote runs, which
/// prefetch sparse remote lines ahead ([`Source::ahead`]); else with CMA, both
/// iovec lists in each call, split at [`cma_sys::IOV_MAX`] ranges on either side and at
/// [`cma_sys::MAX_RW_COUNT`] bytes, or, for many small local fragments, through a bounce
/// buffer ([`bounced`]).
///
/// # Errors
///
/// `EINVAL` if a remote fragment is outside `src`, a local one outside `dst`, or the two
/// select different lengths; CMA's errors.
pub(crate) fn read_scatter<A>(
    src: &RemoteBuf<'_, A>,
    remote: &Runs,
    dst: &mut [u8],
    local: &Runs,
) -> Result<(), Errno> {
    if remote.bytes != local.bytes || !remote.check(src.len) || !local.check(dst.len()) {
        return Err(Errno::EINVAL);
    }
    let (locals, remotes) = (local.fragments(), remote.fragments());
    let bounce = locals > remotes && local.bytes < BOUNCE_BELOW * locals;
    let Some(m) = &src.mapped else {
        let pieces: Vec<(usize, usize)> =
            remote.expand().into_iter().map(|(o, l)| (src.addr + o, l)).collect();
        if bounce {
            return bounced(&pieces, dst, local, |slice, buf| cma::read_dense(src.pid(), slice, buf));
        }
        return cma::read_scatter(src.pid(), &pieces, dst, &local.expand());
    };
    // SAFETY: `m.ptr` maps the published `src.len` bytes here for `'r` (as in `read`), and
    // the owner does not write them during the round.
    let view = unsafe { View::new(m.ptr, src.len) };
    if bounce && remote.bytes >= runs::LINE * remotes {
        // Rows into columns (a transpose): each column's bytes lie in one row of the peer's
        // buffer, so the tiles of `runs::walk` load straight from the mapping, a cache
        // line of columns from as many rows at once, with no bounce buffer between.
        return runs::walk(remote, local, &view, dst).map_err(|_| Errno::EINVAL);
    }
    if bounce {
        // Copied into the cache-sized bounce buffer with `memcpy`, then stored in tiles:
        // the stores of single elements a column apart cost more than the extra copy.
        let pieces = remote.expand();
        return bounced(&pieces, dst, local, |slice, buf| {
            let mut at = 0;
            for &(o, l) in slice {
                view.read(o, &mut buf[at..at + l]).map_err(|_| Errno::EINVAL)?;
                at += l;
            }
            Ok(())
        });
    }
    if locals < remotes {
        // The local fragments are the longer ones (a face of single elements into a
        // plane): each gathered from the remote runs, with the hints that ask for sparse
        // remote lines ahead of the loads.
        let mut from = remote.cursor();
        return local
            .cursor()
            .pieces(local.bytes, |_, at, len| from.gather(len, &view, out(dst, at, len)?))
            .map_err(|_| Errno::EINVAL);
    }
    let mut to = local.cursor();
    remote
        .cursor()
        .pieces(remote.bytes, |_, at, len| to.scatter(len, &view, at, dst))
        .map_err(|_| Errno::EINVAL)
}

/// A peer's published buffer as mapped here, read by the copy loops of `layout::runs`
/// through [`Source`], every access checked against its length.
struct View<'r> {
    ptr: *const u8,
    len: usize,
    _round: std::marker::PhantomData<&'r ()>,
}

impl View<'_> {
    /// # Safety
    ///
    /// `ptr..ptr + len` is mapped readable here, and nothing writes it, for as long as
    /// the view lives.
    unsafe fn new(ptr: *const u8, len: usize) -> Self {
        View { ptr, len, _round: std::marker::PhantomData }
    }

    /// Whether `n` bytes from `at` lie inside the buffer.
    #[inline(always)]
    fn inside(&self, at: usize, n: usize) -> Result<(), Outside> {
        match at.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Outside),
        }
    }
}

impl Source for View<'_> {
    const HINTS: bool = true;

    #[inline(always)]
    fn ahead(&self, at: usize) {
        if at < self.len {
            prefetch::prefetch(self.ptr.wrapping_add(at));
        }
    }

    #[inline(always)]
    fn read(&self, at: usize, dst: &mut [u8]) -> Result<(), Outside> {
        self.inside(at, dst.len())?;
        // SAFETY: `at..at + dst.len()` lies inside the mapped range (checked above; see
        // `View::new`); `dst` is ours. Fixed sizes compile to one load and store (a layout
        // of single `f64`s or `u32`s); a length known only at run time goes through the
        // one copy routine.
        unsafe {
            let s = self.ptr.add(at);
            match dst.len() {
                8 => std::ptr::copy_nonoverlapping(s, dst.as_mut_ptr(), 8),
                4 => std::ptr::copy_nonoverlapping(s, dst.as_mut_ptr(), 4),
                n => copy::copy(s, dst.as_mut_ptr(), n),
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn four<W: Word>(&self, at: usize) -> Result<[W; 4], Outside> {
        self.inside(at, 4 * W::L)?;
        let mut b = [0u8; 32];
        let b = &mut b[..4 * W::L];
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), b.as_mut_ptr(), b.len()) };
        Ok(std::array::from_fn(|k| W::from_bytes(&b[k * W::L..(k + 1) * W::L])))
    }
}

/// The mean local fragment under which [`read_scatter`] with CMA reads into a bounce
/// buffer and scatters it with stores, rather than hand the kernel a local iovec per
/// fragment: the kernel's walk of a local iovec costs more than a store of this many
/// bytes plus its share of the extra copy.
const BOUNCE_BELOW: usize = 256;

/// The bounce buffer's size: a slice of the remote stream that stays in the cache between
/// the CMA read and the stores.
const BOUNCE_BYTES: usize = 128 * 1024;

/// [`read_scatter`] with CMA for many small local fragments: reads the remote pieces, in
/// slices of at most [`BOUNCE_BYTES`], into a bounce buffer (one per thread, kept) with one
/// vectored call each (one remote iovec for the slice's span where its pieces lie close:
/// [`cma::read_dense`]), then scatters each slice onto the local runs (checked by the
/// caller, selecting as many bytes as the remote pieces).
fn bounced(
    pieces: &[(usize, usize)],
    dst: &mut [u8],
    local: &Runs,
    fill: impl FnMut(&[(usize, usize)], &mut [u8]) -> Result<(), Errno>,
) -> Result<(), Errno> {
    thread_local! {
        static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // Taken out of the cell for the copy, and put back: nothing is borrowed across it.
    let mut bounce = BOUNCE.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if bounce.len() < BOUNCE_BYTES {
        bounce.resize(BOUNCE_BYTES, 0);
    }
    let moved = scatter_through(pieces, dst, local, &mut bounce, fill);
    BOUNCE.with(|b| *b.borrow_mut() = bounce);
    moved
}

/// The loop of [`bounced`], through `bounce` (at least [`BOUNCE_BYTES`] long).
fn scatter_through(
    pieces: &[(usize, usize)],
    dst: &mut [u8],
    local: &Runs,
    bounce: &mut [u8],
    mut fill: impl FnMut(&[(usize, usize)], &mut [u8]) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut to = local.cursor();
    let mut slice: Vec<(usize, usize)> = Vec::new();
    let mut pending = pieces.iter().copied();
    let mut carry: Option<(usize, usize)> = None;
    loop {
        // The next slice of the remote stream: whole pieces, the last one cut.
        slice.clear();
        let mut n = 0;
        while n < BOUNCE_BYTES {
            let Some((addr, len)) = carry.take().or_else(|| pending.next()) else { break };
            let take = len.min(BOUNCE_BYTES - n);
            slice.push((addr, take));
            if take < len {
                carry = Some((addr + take, len - take));
            }
            n += take;
        }
        if n == 0 {
            return Ok(());
        }
        let got = &mut bounce[..n];
        fill(&slice, got)?;
        let got = &*got;
        to.scatter(n, got, 0, dst).map_err(|_| Errno::EINVAL)?;
    }
}
