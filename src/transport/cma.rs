//! Cross Memory Attach: single copies by `process_vm_readv` / `process_vm_writev`.
//!
//! Each call is split at [`cma_sys::MAX_RW_COUNT`] bytes and resumed after a partial
//! transfer, so one call of ours always moves everything or fails.
//!
//! The kernel copies page by page with the CPU's string copy, so on AMD Zen CPUs it meets
//! the slow `rep movsb` at short distances that `transport::copy` steers clear of: a read
//! whose destination's page offset lies 1 to 31 bytes above the source's took, on the
//! development machine, 3.7 us for 4 KiB instead of 1.7, 118 us for 256 KiB instead of 28
//! and 547 us for 1 MiB instead of 106. zcoll does not bounce such reads through a buffer
//! of its own: the buffers it copies systematically at such a distance (staging areas and
//! heap blocks, page aligned, against `Vec`s 16 bytes past a page) never go through CMA,
//! and large `Vec`s on both sides share their page offset.

use super::{RemoteBuf, Write};
use crate::error::Errno;
use cma_sys::iovec;

/// Copies `dst.len()` bytes from `src` at `offset` into `dst`.
///
/// # Errors
///
/// The kernel's error (`EPERM` when ptrace rules deny access, `ESRCH` when the peer is
/// gone, `EFAULT` for an unmapped range), or `EINVAL` if the range is outside `src`.
pub(crate) fn read<A>(src: &RemoteBuf<'_, A>, offset: usize, dst: &mut [u8]) -> Result<(), Errno> {
    let base = src.range(offset, dst.len())?;
    let mut done = 0;
    while done < dst.len() {
        let n = (dst.len() - done).min(cma_sys::MAX_RW_COUNT);
        let local = iovec { iov_base: dst[done..].as_mut_ptr().cast(), iov_len: n };
        let remote = iovec { iov_base: (base + done) as *mut libc::c_void, iov_len: n };
        // SAFETY: `local` covers `n` bytes of `dst`, which we borrow mutably, so the kernel
        // writes only memory we own exclusively; the remote side is only read, and the
        // kernel checks it against the peer's mappings (EFAULT otherwise).
        let r = unsafe { cma_sys::process_vm_readv(src.pid(), &local, 1, &remote, 1, 0) };
        done += transferred(r)?;
    }
    Ok(())
}

/// Copies the remote ranges `(address, len)` of process `pid`, in order, into `dst`,
/// packed: one system call per [`cma_sys::IOV_MAX`] ranges (fewer calls than ranges is the
/// point). The caller checked the ranges against the peer's buffer (`RemoteBuf::pieces`),
/// and that their lengths add up to `dst.len()`.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn read_v(pid: libc::pid_t, pieces: &[(usize, usize)], dst: &mut [u8]) -> Result<(), Errno> {
    let mut remote: Vec<iovec> = pieces
        .iter()
        .map(|&(addr, len)| iovec { iov_base: addr as *mut libc::c_void, iov_len: len })
        .collect();
    let (mut done, mut first) = (0, 0);
    while done < dst.len() {
        let last = remote.len().min(first + cma_sys::IOV_MAX);
        let batch = &remote[first..last];
        let want = batch.iter().map(|v| v.iov_len).sum::<usize>().min(cma_sys::MAX_RW_COUNT);
        let local = iovec { iov_base: dst[done..].as_mut_ptr().cast(), iov_len: want };
        // SAFETY: `local` covers `want <= dst.len() - done` bytes of `dst`, which we borrow
        // mutably, so the kernel writes only memory we own exclusively; the remote iovecs
        // were bounds-checked by the caller and are only read (EFAULT otherwise).
        let r = unsafe { cma_sys::process_vm_readv(pid, &local, 1, batch.as_ptr(), batch.len() as _, 0) };
        let mut got = transferred(r)?;
        done += got;
        // Skip what was read: whole iovecs, then the start of a partly read one.
        while got > 0 {
            let v = &mut remote[first];
            if got >= v.iov_len {
                got -= v.iov_len;
                first += 1;
            } else {
                v.iov_base = (v.iov_base as usize + got) as *mut libc::c_void;
                v.iov_len -= got;
                got = 0;
            }
        }
    }
    Ok(())
}

/// [`read_v`] for ranges that lie close together: where the span from the lowest range
/// to the end of the highest is at most [`DENSE_SPAN`] times their bytes and the ranges
/// are at most [`DENSE_FRAGMENT`] bytes on average, reads them in
/// groups of consecutive ascending ranges whose span is at most [`DENSE_CHUNK`] bytes,
/// each group's span with one remote iovec into a scratch buffer (one per thread, kept,
/// small enough to stay in the cache), copying the ranges out of it, packed into `dst`;
/// else as `read_v`. The kernel pins the pages of each remote iovec anew, so the rows of
/// a transpose's block (a few hundred bytes each, half of every line pair) cost a pin
/// each as separate iovecs and one pin of a group's pages as one: reading the gaps too
/// costs less. The gaps are bytes of the peer's published buffer, which the caller's
/// check of every range bounds on both sides; they are read and dropped. The caller
/// checked the ranges as for `read_v`.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn read_dense(pid: libc::pid_t, pieces: &[(usize, usize)], dst: &mut [u8]) -> Result<(), Errno> {
    thread_local! {
        static SPAN: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let low = pieces.iter().map(|p| p.0).min().unwrap_or(0);
    let high = pieces.iter().map(|p| p.0 + p.1).max().unwrap_or(0);
    if pieces.len() < 2 || high - low > DENSE_SPAN * dst.len() || dst.len() > DENSE_FRAGMENT * pieces.len() {
        return read_v(pid, pieces, dst);
    }
    // Taken out of the cell for the copy, and put back: nothing is borrowed across it.
    let mut buf = SPAN.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buf.len() < DENSE_CHUNK {
        buf.resize(DENSE_CHUNK, 0);
    }
    let moved = dense_groups(pid, pieces, dst, &mut buf);
    SPAN.with(|b| *b.borrow_mut() = buf);
    moved
}

/// The loop of [`read_dense`], through `buf` (at least [`DENSE_CHUNK`] bytes).
fn dense_groups(
    pid: libc::pid_t,
    pieces: &[(usize, usize)],
    dst: &mut [u8],
    buf: &mut [u8],
) -> Result<(), Errno> {
    let (mut i, mut at) = (0, 0);
    while i < pieces.len() {
        // The group: pieces i..j, each starting at or after the end of the one before,
        // whose span fits the scratch buffer.
        let (low, mut high, mut j) = (pieces[i].0, pieces[i].0 + pieces[i].1, i + 1);
        while j < pieces.len() && pieces[j].0 >= high && pieces[j].0 + pieces[j].1 - low <= DENSE_CHUNK {
            high = pieces[j].0 + pieces[j].1;
            j += 1;
        }
        let bytes: usize = pieces[i..j].iter().map(|p| p.1).sum();
        if j - i == 1 {
            read_v(pid, &pieces[i..j], &mut dst[at..at + bytes])?;
        } else {
            read_v(pid, &[(low, high - low)], &mut buf[..high - low])?;
            let mut to = at;
            for &(addr, len) in &pieces[i..j] {
                dst[to..to + len].copy_from_slice(&buf[addr - low..addr - low + len]);
                to += len;
            }
        }
        at += bytes;
        i = j;
    }
    Ok(())
}

/// The most the span of the ranges [`read_dense`] reads may exceed their bytes, as a
/// factor: a transpose's rows fill half of their span at 2 ranks.
const DENSE_SPAN: usize = 2;

/// The longest mean range [`read_dense`] reads through a span: a pin costs as much as
/// copying about this many bytes twice (the gap, then the range out of the scratch); a
/// transpose's rows of 2896 bytes (1 MiB blocks at 2 ranks) were slower through spans.
const DENSE_FRAGMENT: usize = 2048;

/// The span [`read_dense`] reads in one piece at most: its scratch buffer, which stays in
/// the cache beside the bounce buffer.
const DENSE_CHUNK: usize = 64 * 1024;

/// A position in a list of ranges `(start, len)` (none of them empty): the range it is
/// in and how far into it.
struct Cursor<'a> {
    ranges: &'a [(usize, usize)],
    at: usize,
    into: usize,
}

impl Cursor<'_> {
    /// The iovecs of the next at most `max_iov` ranges from here, `base` added to each
    /// start, together at most `max_bytes` long; and their length.
    fn batch(&self, base: usize, max_iov: usize, max_bytes: usize, out: &mut Vec<iovec>) -> usize {
        out.clear();
        let (mut bytes, mut skip) = (0, self.into);
        for &(start, len) in self.ranges[self.at..].iter().take(max_iov) {
            let n = (len - skip).min(max_bytes - bytes);
            if n == 0 {
                break;
            }
            out.push(iovec { iov_base: (base + start + skip) as *mut libc::c_void, iov_len: n });
            bytes += n;
            skip = 0;
        }
        bytes
    }

    /// Moves `n` bytes on.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let left = self.ranges[self.at].1 - self.into;
            if n >= left {
                n -= left;
                self.at += 1;
                self.into = 0;
            } else {
                self.into += n;
                n = 0;
            }
        }
    }
}

/// Copies the remote ranges `(address, len)` of process `pid`, in order, into the ranges
/// `(offset, len)` of `dst`, in order, both sides as iovec lists: each call takes at most
/// [`cma_sys::IOV_MAX`] ranges of either side and [`cma_sys::MAX_RW_COUNT`] bytes, and a
/// partial transfer resumes where it stopped. The caller checked the remote ranges
/// against the peer's buffer, the local ones against `dst` (none empty), and that both
/// lists add up to the same length.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn read_scatter(
    pid: libc::pid_t,
    pieces: &[(usize, usize)],
    dst: &mut [u8],
    local: &[(usize, usize)],
) -> Result<(), Errno> {
    let total: usize = local.iter().map(|r| r.1).sum();
    let base = dst.as_mut_ptr() as usize;
    let (mut r, mut l) =
        (Cursor { ranges: pieces, at: 0, into: 0 }, Cursor { ranges: local, at: 0, into: 0 });
    let (mut riov, mut liov) = (Vec::new(), Vec::new());
    let mut done = 0;
    while done < total {
        let want = r.batch(0, cma_sys::IOV_MAX, cma_sys::MAX_RW_COUNT, &mut riov);
        let want = l.batch(base, cma_sys::IOV_MAX, want, &mut liov);
        r.batch(0, cma_sys::IOV_MAX, want, &mut riov);
        // SAFETY: the local iovecs cover `want` bytes of ranges inside `dst` (checked by
        // the caller), which we borrow mutably, so the kernel writes only memory we own
        // exclusively; the remote iovecs lie inside the peer's published buffer (checked
        // by the caller) and are only read (EFAULT otherwise).
        let got = transferred(unsafe {
            cma_sys::process_vm_readv(pid, liov.as_ptr(), liov.len() as _, riov.as_ptr(), riov.len() as _, 0)
        })?;
        r.advance(got);
        l.advance(got);
        done += got;
    }
    Ok(())
}

/// Copies `src` into `dst` at `offset`.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn write(src: &[u8], dst: &RemoteBuf<'_, Write>, offset: usize) -> Result<(), Errno> {
    let base = dst.range(offset, src.len())?;
    let mut done = 0;
    while done < src.len() {
        let n = (src.len() - done).min(cma_sys::MAX_RW_COUNT);
        let local = iovec { iov_base: src[done..].as_ptr() as *mut libc::c_void, iov_len: n };
        let remote = iovec { iov_base: (base + done) as *mut libc::c_void, iov_len: n };
        // SAFETY: the local iovec covers `n` bytes of `src` and is only read by the kernel;
        // the remote range lies inside `dst`, which its owner published as writable for
        // this round (the contract of `RemoteBuf::new`).
        let r = unsafe { cma_sys::process_vm_writev(dst.pid(), &local, 1, &remote, 1, 0) };
        done += transferred(r)?;
    }
    Ok(())
}

/// Reads one byte from `src` at `offset` against a remote iovec of `remote_len` bytes:
/// the kernel pins up to 1024 pages of the remote range before it copies that byte, so
/// the call's time is the start-up plus the pinning (the calibration's probe of `l` and
/// of the contention). Returns the byte.
///
/// # Errors
///
/// As [`read`].
pub(crate) fn pin_probe<A>(src: &RemoteBuf<'_, A>, offset: usize, remote_len: usize) -> Result<u8, Errno> {
    let base = src.range(offset, remote_len.max(1))?;
    let mut byte = 0u8;
    let local = iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    let remote = iovec { iov_base: base as *mut libc::c_void, iov_len: remote_len.max(1) };
    // SAFETY: `local` covers one byte we own; the remote range lies inside `src` (checked
    // above), which its owner published for this round, and is only read.
    let r = unsafe { cma_sys::process_vm_readv(src.pid(), &local, 1, &remote, 1, 0) };
    transferred(r).map(|_| byte)
}

/// Asks whether this process may use CMA on `pid`: reads 16 bytes at address 0, which
/// gives `EFAULT` when access is allowed (the page does not exist) and `EPERM` or `ESRCH`
/// when it is not.
///
/// # Errors
///
/// The errno that says why access is refused.
pub(crate) fn probe(pid: libc::pid_t) -> Result<(), Errno> {
    let mut probe = [0u8; 16];
    let local = iovec { iov_base: probe.as_mut_ptr().cast(), iov_len: probe.len() };
    let remote = iovec { iov_base: std::ptr::null_mut(), iov_len: probe.len() };
    // SAFETY: `local` covers the 16-byte array we own; the remote address 0 is never
    // mapped, so the kernel either faults on it or refuses before any copy.
    let r = unsafe { cma_sys::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    match transferred(r) {
        Err(Errno::EFAULT) => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(Errno::EINVAL),
    }
}

/// Yama's `ptrace_scope` (`/proc/sys/kernel/yama/ptrace_scope`), where the kernel has Yama.
pub(crate) fn yama_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?.trim().parse().ok()
}

/// Whom a rank names as its ptracer, so that its node's peers may read it with CMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ptracer {
    /// Nobody: the kernel's rules already decide (no Yama, or `ptrace_scope` 0), or no
    /// naming helps (`ptrace_scope` 2 or 3: only an administrator, or nobody).
    Nobody,
    /// The one peer (a node of two ranks): the narrowest grant.
    One(libc::pid_t),
    /// Any process of the same user (`PR_SET_PTRACER_ANY`), as Open MPI does: a process
    /// names at most one ptracer, and a node of more than two ranks has several readers.
    Any,
}

/// Under Yama's `ptrace_scope` 1 (Ubuntu's default) a process may only read its own
/// descendants, so sibling ranks are refused CMA unless the target names a ptracer.
pub(crate) fn ptracer_for(scope: Option<u32>, peers: &[libc::pid_t]) -> Ptracer {
    match (scope, peers) {
        (Some(1), [one]) => Ptracer::One(*one),
        (Some(1), [_, _, ..]) => Ptracer::Any,
        _ => Ptracer::Nobody,
    }
}

/// Names `who` as this process's ptracer (`prctl(PR_SET_PTRACER)`).
///
/// # Errors
///
/// The errno of `prctl`.
pub(crate) fn allow(who: Ptracer) -> Result<(), Errno> {
    let arg = match who {
        Ptracer::Nobody => return Ok(()),
        Ptracer::One(pid) => pid as libc::c_ulong,
        Ptracer::Any => libc::PR_SET_PTRACER_ANY as libc::c_ulong,
    };
    // SAFETY: PR_SET_PTRACER takes a pid (or PR_SET_PTRACER_ANY) by value and touches no
    // memory of ours; the remaining arguments are unused and passed as 0.
    match unsafe {
        libc::prctl(libc::PR_SET_PTRACER, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong)
    } {
        0 => Ok(()),
        _ => Err(Errno::last()),
    }
}

/// The one conversion of a CMA return value: a byte count, or the thread's errno.
/// A transfer of 0 bytes on a non-empty request is a fault (the kernel stopped at once).
fn transferred(r: isize) -> Result<usize, Errno> {
    match r {
        n if n > 0 => Ok(n as usize),
        0 => Err(Errno::EFAULT),
        _ => Err(Errno::last()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Read, TransportKind};
    use super::*;

    fn runs(frags: &[(usize, usize)]) -> crate::layout::runs::Runs {
        crate::layout::runs::Runs::new(frags.iter().copied())
    }

    fn own(buf: &[u8]) -> RemoteBuf<'_, Read> {
        // SAFETY: the buffer is our own, alive and unchanged while the handle is used.
        unsafe { RemoteBuf::new(std::process::id() as libc::pid_t, buf.as_ptr() as usize, buf.len()) }
    }

    #[test]
    fn reads_and_writes_our_own_memory() {
        let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; 9_000];
        read(&own(&src), 1_000, &mut dst).unwrap();
        assert_eq!(&dst[..], &src[1_000..]);

        let mut target = vec![0u8; 100];
        let pid = std::process::id() as libc::pid_t;
        // SAFETY: `target` is ours and is not accessed while the kernel writes into it;
        // the pointer comes from a unique borrow, so writing through it is allowed.
        let handle = unsafe { RemoteBuf::new(pid, target.as_mut_ptr() as usize, 100) };
        write(&[9u8; 10], &handle, 90).unwrap();
        let seen = target;
        assert_eq!(&seen[90..], &[9u8; 10]);
        assert!(seen[..90].iter().all(|&b| b == 0));
    }

    #[test]
    fn reads_scattered_ranges_packed() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + i / 256) as u8).collect();
        // More ranges than one call takes, some empty, one crossing pages.
        let ranges: Vec<(usize, usize)> =
            (0..cma_sys::IOV_MAX + 300).map(|k| (k * 61 % 99_000, k % 7)).collect();
        let total = ranges.iter().map(|r| r.1).sum();
        let mut dst = vec![0u8; total];
        // Through the transport entry, which checks the ranges, then reads them with CMA.
        super::super::read_v(&own(&src), &ranges, &mut dst).unwrap();
        let want: Vec<u8> = ranges.iter().flat_map(|&(o, n)| src[o..o + n].iter().copied()).collect();
        assert_eq!(dst, want);
        assert_eq!(super::super::read_v(&own(&src), &[(0, 3)], &mut [0u8; 4]), Err(Errno::EINVAL));
        assert_eq!(super::super::read_v(&own(&src), &[(99_999, 2)], &mut [0u8; 2]), Err(Errno::EINVAL));
    }

    #[test]
    fn reads_close_ranges_through_their_span() {
        let src: Vec<u8> = (0..600_000u32).map(|i| (i * 13 + i / 256) as u8).collect();
        let (base, pid) = (src.as_ptr() as usize, std::process::id() as libc::pid_t);
        let check = |ranges: &[(usize, usize)]| {
            let total = ranges.iter().map(|r| r.1).sum();
            let mut dst = vec![0u8; total];
            let pieces: Vec<(usize, usize)> = ranges.iter().map(|&(o, n)| (base + o, n)).collect();
            read_dense(pid, &pieces, &mut dst).unwrap();
            let want: Vec<u8> = ranges.iter().flat_map(|&(o, n)| src[o..o + n].iter().copied()).collect();
            assert_eq!(dst, want, "{} ranges", ranges.len());
        };
        // A transpose's rows: 720 bytes of every 1440 (dense, read in groups of spans).
        check(&(0..181).map(|k| (k * 1440, 720)).collect::<Vec<_>>());
        // Rows larger than a group, and rows in descending order (each its own group).
        check(&(0..6).map(|k| (k * 90_000, 70_000)).collect::<Vec<_>>());
        check(&(0..181).rev().map(|k| (k * 1440 + 8, 720)).collect::<Vec<_>>());
        // Sparse ranges (read as separate iovecs) and one range.
        check(&(0..500).map(|k| (k * 1000, 8)).collect::<Vec<_>>());
        check(&[(5, 599_000)]);
    }

    #[test]
    fn reads_scattered_ranges_into_scattered_ranges() {
        let src: Vec<u8> = (0..200_000u32).map(|i| (i * 13 + i / 256) as u8).collect();
        // More ranges than one call takes on both sides, of different cuts, some empty,
        // many crossing pages.
        let remote: Vec<(usize, usize)> =
            (0..cma_sys::IOV_MAX + 500).map(|k| (k * 97 % 190_000, k % 11)).collect();
        let total: usize = remote.iter().map(|r| r.1).sum();
        let mut local = Vec::new();
        let (mut at, mut left, mut k) = (0, total, 0);
        while left > 0 {
            let n = (k % 5).min(left);
            local.push((at, n));
            at += n + 3;
            left -= n;
            k += 1;
        }
        let mut dst = vec![0u8; at];
        let mut want = dst.clone();
        let stream: Vec<u8> = remote.iter().flat_map(|&(o, n)| src[o..o + n].iter().copied()).collect();
        let mut s = stream.iter();
        for &(o, n) in &local {
            want[o..o + n].iter_mut().for_each(|b| *b = *s.next().unwrap());
        }
        super::super::read_scatter(&own(&src), &runs(&remote), &mut dst, &runs(&local)).unwrap();
        assert_eq!(dst, want);
        // Many tiny local fragments go through the bounce buffer, in several slices.
        let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 + i / 4096) as u8).collect();
        let remote = [(5, 300_000), (300_100, 90_001)];
        let local: Vec<(usize, usize)> = (0..390_001).map(|i| (2 * i, 1)).collect();
        let mut dst = vec![0u8; 2 * 390_001];
        super::super::read_scatter(&own(&big), &runs(&remote), &mut dst, &runs(&local)).unwrap();
        let stream: Vec<u8> = remote.iter().flat_map(|&(o, n)| big[o..o + n].iter().copied()).collect();
        assert!(dst.iter().step_by(2).eq(stream.iter()));
        assert!(dst.iter().skip(1).step_by(2).all(|&b| b == 0));
        // Sums that differ, and a local range past the end, are refused.
        assert_eq!(
            super::super::read_scatter(&own(&src), &runs(&[(0, 3)]), &mut [0u8; 4], &runs(&[(0, 4)])),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            super::super::read_scatter(&own(&src), &runs(&[(0, 3)]), &mut [0u8; 4], &runs(&[(2, 3)])),
            Err(Errno::EINVAL)
        );
    }

    /// A peer's buffer mapped here (as a heap block is) is read through the loads and
    /// stores of the layout walks, with the hints for sparse fragments where they apply:
    /// the same bytes as CMA's reads and the fragment-by-fragment oracle, for sparse
    /// elements into one block or into rows, rows into sparse elements, and a fragment past
    /// the end refused.
    #[test]
    fn mapped_reads_scatter_as_cma_does() {
        let src: Vec<u8> = (0..400_000u32).map(|i| (i * 11 + i / 509) as u8).collect();
        let face: Vec<(usize, usize)> = (0..5000).map(|k| (3 + k * 640 % 399_000, 8)).collect();
        let singles: Vec<(usize, usize)> = (0..2000).map(|k| (399_000 - k * 199, 3)).collect();
        type Frags = Vec<(usize, usize)>;
        let cases: [(&Frags, Frags); 4] = [
            (&face, vec![(16, 40_000)]),
            (&face, (0..40).map(|r| (r * 1100, 1000)).collect()),
            (&singles, vec![(0, 6000)]),
            (&vec![(7, 6000)], (0..2000).map(|k| (k * 300, 3)).collect()),
        ];
        for (remote, local) in cases {
            let end = local.iter().map(|&(o, l)| o + l).max().unwrap();
            let mut want = vec![0u8; end + 9];
            let stream: Vec<u8> = remote.iter().flat_map(|&(o, n)| src[o..o + n].iter().copied()).collect();
            let mut at = 0;
            for &(o, l) in &local {
                want[o..o + l].copy_from_slice(&stream[at..at + l]);
                at += l;
            }
            let (rr, rl) = (runs(remote), runs(&local));
            let mut by_cma = vec![0u8; want.len()];
            super::super::read_scatter(&own(&src), &rr, &mut by_cma, &rl).unwrap();
            assert!(by_cma == want, "CMA, {} remote fragments", remote.len());
            // SAFETY: the mapping is the buffer itself, alive and unchanged meanwhile.
            let mapped = unsafe { own(&src).with_mapping(src.as_ptr() as *mut u8, TransportKind::Heap) };
            let mut by_loads = vec![0u8; want.len()];
            super::super::read_scatter(&mapped, &rr, &mut by_loads, &rl).unwrap();
            assert!(by_loads == want, "loads, {} remote fragments", remote.len());
            let short = own(&src[..remote.iter().map(|&(o, l)| o + l).max().unwrap() - 1]);
            // SAFETY: as above, a prefix of the same buffer.
            let short = unsafe { short.with_mapping(src.as_ptr() as *mut u8, TransportKind::Heap) };
            assert_eq!(super::super::read_scatter(&short, &rr, &mut by_loads, &rl), Err(Errno::EINVAL));
        }
    }

    #[test]
    fn refuses_ranges_outside_the_buffer() {
        let src = [1u8; 8];
        let mut dst = [0u8; 4];
        assert_eq!(read(&own(&src), 5, &mut dst), Err(Errno::EINVAL));
        assert_eq!(read(&own(&src), usize::MAX, &mut dst), Err(Errno::EINVAL));
        // SAFETY: a handle to our own array; the write below is refused before any copy.
        let w: RemoteBuf<'_, Write> =
            unsafe { RemoteBuf::new(std::process::id() as libc::pid_t, src.as_ptr() as usize, 8) };
        assert_eq!(write(&dst, &w, 6), Err(Errno::EINVAL));
        assert_eq!(dst, [0u8; 4]);
    }

    #[test]
    fn yama_scope_one_names_the_narrowest_ptracer() {
        assert_eq!(ptracer_for(None, &[10, 11]), Ptracer::Nobody);
        assert_eq!(ptracer_for(Some(0), &[10, 11]), Ptracer::Nobody);
        assert_eq!(ptracer_for(Some(1), &[]), Ptracer::Nobody);
        assert_eq!(ptracer_for(Some(1), &[10]), Ptracer::One(10));
        assert_eq!(ptracer_for(Some(1), &[10, 11]), Ptracer::Any);
        assert_eq!(ptracer_for(Some(2), &[10]), Ptracer::Nobody);
        assert_eq!(ptracer_for(Some(3), &[10]), Ptracer::Nobody);
        // Naming a ptracer works where the kernel has Yama, and is EINVAL where it has not.
        match allow(Ptracer::One(std::process::id() as libc::pid_t)) {
            Ok(()) => assert!(yama_scope().is_some()),
            Err(e) => assert!(yama_scope().is_none() && e == Errno::EINVAL, "{e}"),
        }
        assert_eq!(allow(Ptracer::Nobody), Ok(()));
    }

    #[test]
    fn probe_allows_ourselves_and_refuses_a_missing_process() {
        assert_eq!(probe(std::process::id() as libc::pid_t), Ok(()));
        // pid_max is at most 2^22, so this pid cannot exist.
        assert_eq!(probe(0x7fff_fff0), Err(Errno::ESRCH));
    }
}
