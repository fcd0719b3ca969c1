//! The one copy routine of loads and stores: a block of bytes from one address to
//! another of this process (a peer's mapped buffer on one side, or both sides ours).
//!
//! It is `memcpy`, with two exceptions on x86-64.
//!
//! **Large copies stream.** From [`STREAM_LARGE`] it writes with streaming
//! (non-temporal) stores: an ordinary store first reads the destination's line
//! (read-for-ownership), so a copy of a block that is not in the cache moves three bytes
//! over the memory bus per byte copied; streaming stores write whole lines without
//! reading them, two bytes per byte. glibc's `memcpy` switches to them only above its
//! non-temporal threshold, three quarters of the shared cache it detects: on the
//! development machine (a 2-vCPU KVM guest, 32 MiB of L3) it detects 320 MiB and so never
//! does at the sizes of a collective. Measured there, both cores copying at once from a
//! source just written into a destination out of the cache: 1 MiB in 47-60 us against
//! 63-83 (`memcpy`), 2 MiB in 87-130 against 115-174, 8 MiB in 420-517 against 607-701.
//! The cost: the destination is not left in the cache. Below [`STREAM_LARGE`], the L2 of
//! the development machine, the next reader would find it there (the root's reads of a
//! reduce fold each 1 MiB chunk right after copying it), so those copies stay `memcpy`.
//!
//! **A destination just past its source, modulo 4 KiB, is copied with vector loads and
//! stores.** For copies from about 2 KiB up to its L2's size, glibc's `memcpy` uses
//! `rep movsb` on CPUs that announce it fast (ERMS, FSRM). On AMD Zen CPUs that
//! instruction turns very slow when the destination's page offset lies a few bytes above
//! the source's (`(dst - src) mod 4096` from 1 to 31 on the development machine, an AMD
//! EPYC with glibc 2.36; reported upstream as glibc bug 30994): 4 KiB took 2.2 us instead
//! of 0.08, 64 KiB 35 us instead of 1.6, 256 KiB 139 instead of 8, twenty times slower.
//! Collectives meet that distance all the time: staging areas and shared-heap blocks are
//! page aligned, and large `Vec`s from `malloc` begin 16 bytes past a page, so a block
//! copied from a heap buffer or a staging slot into such a `Vec`, or from a heap buffer
//! into a slot after a small header, lies 16 or 24 bytes ahead. Those copies (from
//! [`REP_MOVSB_MIN`] bytes, at distances below [`SHORT_DISTANCE`]) run as a loop of
//! 16-byte loads and stores instead, from the last 64 bytes to the first: within 1.0 to
//! 1.35 times `memcpy`'s time at a harmless distance, measured there, at every size.
//! The kernel's copies (CMA) have the same trouble, which zcoll cannot avoid: see
//! `transport::cma`.
//!
//! Streaming stores are weakly ordered: every streaming copy ends with a store fence, so
//! a flag published after it (with Release) is seen only after the bytes.

use super::prefetch::prefetch;
use crate::layout::runs::{self, Outside, Runs, Source, Word};

/// The smallest copy [`copy`] makes with streaming stores: 2 MiB, the L2 of the
/// development machine; below it the destination's lines stay cached for the reader.
pub(crate) const STREAM_LARGE: usize = 2 << 20;

/// The smallest copy [`copy`] checks for a short distance: glibc's `memcpy` copies
/// smaller blocks with vector registers (from 2112 bytes with `rep movsb`, on CPUs with
/// fast short `rep movsb`).
pub(crate) const REP_MOVSB_MIN: usize = 2 << 10;

/// The page-offset distances (`(dst - src) mod 4096`, from 1) below which [`copy`] does
/// not call `memcpy` from [`REP_MOVSB_MIN`] bytes: 1 to 31 were slow on the development
/// machine, and 64 is the bound glibc itself uses for Intel CPUs with the same trouble.
#[cfg(target_arch = "x86_64")]
pub(crate) const SHORT_DISTANCE: usize = 64;

/// Whether a copy from `src` to `dst` lies at a short distance: the destination's page
/// offset from 1 to [`SHORT_DISTANCE`]` - 1` bytes above the source's.
#[cfg(target_arch = "x86_64")]
fn short_distance(src: *const u8, dst: *const u8) -> bool {
    (1..SHORT_DISTANCE).contains(&((dst as usize).wrapping_sub(src as usize) % 4096))
}

/// Copies `n` bytes from `src` to `dst`: with streaming stores from [`STREAM_LARGE`]
/// bytes on x86-64, with vector loads and stores from [`REP_MOVSB_MIN`] bytes at a short
/// distance (see the module's text), else with `memcpy`.
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, the two do not overlap,
/// and nothing writes `src` or accesses `dst` during the copy.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n >= STREAM_LARGE {
        // SAFETY: the caller's contract, passed on.
        unsafe { stream(src, dst, n) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if n >= REP_MOVSB_MIN && short_distance(src, dst) {
        // SAFETY: the caller's contract, passed on.
        unsafe { backward(src, dst, n) };
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

/// Copies `src` into `dst` with the one copy routine zcoll's loads and stores use: `memcpy`
/// below 2 MiB, streaming (non-temporal) stores and a store fence from there on x86-64,
/// so that a large copy into a destination out of the cache skips the read of every
/// destination line; and, on x86-64, a loop of vector loads and stores instead of
/// `memcpy` from 2 KiB when `dst`'s page offset lies 1 to 63 bytes above `src`'s, where
/// glibc's `memcpy` can be twenty times slower on AMD CPUs. It is the floor a collective
/// on shared-heap buffers is measured against (`zcoll bench` reports it beside glibc's
/// `memcpy`), and a program may use it for its own large copies out of or into such
/// buffers.
///
/// # Panics
///
/// If the lengths differ, as `copy_from_slice` does.
///
/// # Examples
///
/// ```
/// let src = vec![7u8; 3 << 20];
/// let mut dst = vec![0u8; 3 << 20];
/// zcoll::copy_bytes(&src, &mut dst);
/// assert_eq!(src, dst);
/// ```
pub fn copy_bytes(src: &[u8], dst: &mut [u8]) {
    copy_block(src, dst)
}

/// Copies `src` into `dst` (of the same length) with [`copy`]: the copy of a block
/// between two buffers of this process, such as a rank's own block of a collective, in
/// place of `copy_from_slice` wherever the block may be large.
///
/// # Panics
///
/// If the lengths differ, as `copy_from_slice` does.
pub(crate) fn copy_block<T: bytemuck::Pod>(src: &[T], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len(), "copy_block: lengths differ");
    if std::mem::size_of::<T>() == 0 {
        // Nothing to copy, and no bytes to view them as (a cast would panic).
        return;
    }
    let (src, dst) = (bytemuck::cast_slice::<T, u8>(src), bytemuck::cast_slice_mut::<T, u8>(dst));
    // SAFETY: two distinct borrows of `src.len()` bytes (one shared, one unique), so
    // valid, disjoint and untouched by anyone else during the copy.
    unsafe { copy(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
}

/// Copies the bytes `from` selects in `src` onto those `to` selects in `dst`, in order:
/// the copy of a layout between two buffers of this process (a rank's own block of a
/// layout collective, and the packing and unpacking of the packed path), as
/// [`copy_block`] is of a contiguous block. `layout::runs::copy` walks the runs; the
/// source here asks for the lines of strided fragments before it reads them
/// ([`Source::ahead`]), which the walk of `&[u8]` cannot (a prefetch is an intrinsic that
/// only this module's kind of code may call).
///
/// # Errors
///
/// `Outside` if a fragment lies outside its buffer or the two select different lengths
/// (what was copied before stays copied).
pub(crate) fn copy_runs(src: &[u8], from: &Runs, dst: &mut [u8], to: &Runs) -> Result<(), Outside> {
    runs::copy(&Local(src), from, dst, to)
}

/// A buffer of this process as the source of a layout copy: the slice's checked reads,
/// and a prefetch for each hint inside it.
struct Local<'a>(&'a [u8]);

impl Source for Local<'_> {
    const HINTS: bool = true;

    #[inline(always)]
    fn read(&self, at: usize, dst: &mut [u8]) -> Result<(), Outside> {
        if dst.len() < REP_MOVSB_MIN {
            return self.0.read(at, dst);
        }
        let from = self.0.get(at..at.checked_add(dst.len()).ok_or(Outside)?).ok_or(Outside)?;
        copy_block(from, dst);
        Ok(())
    }

    #[inline(always)]
    fn four<W: Word>(&self, at: usize) -> Result<[W; 4], Outside> {
        self.0.four(at)
    }

    #[inline(always)]
    fn ahead(&self, at: usize) {
        if at < self.0.len() {
            prefetch(self.0.as_ptr().wrapping_add(at));
        }
    }
}

/// The streaming copy: ordinary stores up to the first 16-byte boundary of `dst`, 64-byte
/// groups of streaming stores (SSE2, which every x86-64 CPU has), ordinary stores for the
/// tail, then a store fence.
///
/// # Safety
///
/// As [`copy`].
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn stream(s: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::_mm_sfence;
    let head = dst.align_offset(16).min(n);
    let body = (n - head) / 64 * 64;
    // SAFETY: `head <= n`; both ranges lie in the caller's `src` and `dst`.
    unsafe { std::ptr::copy_nonoverlapping(s, dst, head) };
    let mut at = head;
    while at < head + body {
        // SAFETY: `at + 64 <= n`, so the group lies in both ranges, and `dst + at` is
        // 16-byte aligned since `dst + head` is.
        unsafe { group::<true>(s.add(at), dst.add(at)) };
        at += 64;
    }
    // SAFETY: the tail `at..n` lies in both ranges.
    unsafe { std::ptr::copy_nonoverlapping(s.add(at), dst.add(at), n - at) };
    // SAFETY: a fence has no precondition; it orders the streaming stores before the flag
    // the caller publishes next.
    unsafe { _mm_sfence() };
}

/// The copy at a short distance: the tail past the last whole 64-byte group first, then
/// the groups from the last to the first, each with four 16-byte loads before four
/// stores (SSE2, which every x86-64 CPU has). Backward, a load's page offset never
/// matches that of a store just made either (4 KiB aliasing).
///
/// # Safety
///
/// As [`copy`].
#[cfg(target_arch = "x86_64")]
unsafe fn backward(src: *const u8, dst: *mut u8, n: usize) {
    let body = n / 64 * 64;
    // SAFETY: the tail `body..n` lies in both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src.add(body), dst.add(body), n - body) };
    let mut at = body;
    while at > 0 {
        at -= 64;
        // SAFETY: `at + 64 <= body <= n`, so the group lies in both ranges.
        unsafe { group::<false>(src.add(at), dst.add(at)) };
    }
}

/// Copies the 64 bytes at `from` to `to`: four 16-byte loads, then four stores,
/// streaming (non-temporal) ones if `STREAM`, else ordinary ones (SSE2, which every
/// x86-64 CPU has).
///
/// # Safety
///
/// `from` is valid for reads and `to` for writes of 64 bytes, the two do not overlap,
/// and with `STREAM` `to` is 16-byte aligned.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn group<const STREAM: bool>(from: *const u8, to: *mut u8) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_stream_si128};
    let (from, to) = (from as *const __m128i, to as *mut __m128i);
    // SAFETY: the caller's contract: four unaligned 16-byte loads inside `from`'s 64
    // bytes, four stores inside `to`'s (aligned where they stream).
    unsafe {
        let (a, b) = (_mm_loadu_si128(from), _mm_loadu_si128(from.add(1)));
        let (c, d) = (_mm_loadu_si128(from.add(2)), _mm_loadu_si128(from.add(3)));
        if STREAM {
            _mm_stream_si128(to, a);
            _mm_stream_si128(to.add(1), b);
            _mm_stream_si128(to.add(2), c);
            _mm_stream_si128(to.add(3), d);
        } else {
            _mm_storeu_si128(to, a);
            _mm_storeu_si128(to.add(1), b);
            _mm_storeu_si128(to.add(2), c);
            _mm_storeu_si128(to.add(3), d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_arrive_whole_at_every_distance() {
        // A page-aligned source (a staging area) and destinations at every kind of page
        // offset from it: equal, a little ahead (the vector loop), a little behind, far;
        // lengths around the thresholds.
        let page = 4096;
        let src: Vec<u8> = (0..(4 * page + page)).map(|i| (i * 11 + 5) as u8).collect();
        let base = src.as_ptr().align_offset(page);
        let mut dst = vec![0u8; 6 * page];
        let dbase = dst.as_ptr().align_offset(page);
        let min = REP_MOVSB_MIN;
        for len in [0, 1, 63, min - 1, min, min + 1, min + 63, 3 * page + 77] {
            for skew in [0, 1, 16, 24, 63, 64, 2048, page - 16] {
                dst.fill(0xAA);
                let to = dbase + skew;
                let from = &src[base..base + len];
                copy_block(from, &mut dst[to..to + len]);
                assert_eq!(&dst[to..to + len], from, "len {len}, skew {skew}");
                assert!(
                    dst[..to].iter().chain(&dst[to + len..]).all(|&b| b == 0xAA),
                    "len {len}, skew {skew}: wrote outside"
                );
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn short_distances_are_the_few_bytes_ahead() {
        let at = |src: usize, dst: usize| short_distance(src as *const u8, dst as *const u8);
        assert!(at(4096, 4096 + 16) && at(8192 + 100, 4096 + 124) && at(4096, 4096 + 4096 + 63));
        assert!(!at(4096, 4096) && !at(4096, 4096 + 64) && !at(4096 + 16, 4096) && !at(0, 2048));
    }

    /// Layouts of fragments far apart (the copies that prefetch), forwards and backwards,
    /// of odd element sizes and counts around the hints' distance, packed, unpacked and
    /// between two strided layouts (through the chunk, so that runs restart mid-way), move
    /// the bytes as the fragment-by-fragment oracle does, and write nothing else.
    #[test]
    fn sparse_layouts_copy_as_the_fragments_say() {
        let oracle = |src: &[u8], from: &[(usize, usize)], dst: &mut [u8], to: &[(usize, usize)]| {
            let stream: Vec<u8> = from.iter().flat_map(|&(o, l)| src[o..o + l].to_vec()).collect();
            let mut at = 0;
            for &(o, l) in to {
                dst[o..o + l].copy_from_slice(&stream[at..at + l]);
                at += l;
            }
        };
        for len in [1usize, 3, 4, 8, 24] {
            for stride in [256isize, 720, -720, 4096 + 8] {
                for count in [1usize, 31, 32, 33, 41, 1000, 5000] {
                    // Two runs of `count` fragments each, the second after the first.
                    let span = stride.unsigned_abs() * count;
                    let start = if stride < 0 { span - stride.unsigned_abs() } else { 0 };
                    let from: Vec<(usize, usize)> = (0..2 * count)
                        .map(|i| {
                            let (run, k) = (i / count, (i % count) as isize);
                            ((start as isize + run as isize * span as isize + k * stride) as usize, len)
                        })
                        .collect();
                    let src: Vec<u8> = (0..2 * span + len).map(|i| (i * 31 + i / 257) as u8).collect();
                    let bytes = 2 * count * len;
                    let packed = [(5, bytes)];
                    // Another sparse layout, with other lengths: through the chunk.
                    let spread: Vec<(usize, usize)> =
                        (0..bytes.div_ceil(5)).map(|k| (k * 300, 5.min(bytes - 5 * k))).collect();
                    for to in [&packed[..], &spread[..]] {
                        let end = to.last().map_or(0, |&(o, l)| o + l);
                        let mut want = vec![0xeeu8; end + 64];
                        oracle(&src, &from, &mut want, to);
                        let mut got = vec![0xeeu8; end + 64];
                        let (rf, rt) = (Runs::new(from.iter().copied()), Runs::new(to.iter().copied()));
                        copy_runs(&src, &rf, &mut got, &rt).unwrap();
                        assert!(
                            got == want,
                            "{len} bytes {stride} apart, {count} a run, to {} fragments",
                            to.len()
                        );
                        // And back: a strided scatter of the gathered stream.
                        let mut back = vec![0u8; src.len()];
                        let mut oracle_back = back.clone();
                        oracle(&got, to, &mut oracle_back, &from);
                        copy_runs(&got, &rt, &mut back, &rf).unwrap();
                        assert!(back == oracle_back, "back: {len} bytes {stride} apart, {count} a run");
                    }
                    // A source one byte short of the last fragment: an error, not a read.
                    let short = &src[..from.iter().map(|&(o, l)| o + l).max().unwrap() - 1];
                    let mut out = vec![0u8; bytes + 5];
                    let rf = Runs::new(from.iter().copied());
                    assert!(copy_runs(short, &rf, &mut out, &Runs::new(packed)).is_err());
                }
            }
        }
    }

    /// Every length around the streaming threshold and every misalignment of both sides
    /// copies exactly the bytes asked, and nothing past them.
    #[test]
    fn copies_every_length_and_alignment_exactly() {
        let src: Vec<u8> = (0..STREAM_LARGE + 300).map(|i| (i * 7 % 251) as u8).collect();
        for n in [0, 1, 15, 63, 64, 65, 4096, STREAM_LARGE - 1, STREAM_LARGE, STREAM_LARGE + 129] {
            for (so, dof) in [(0, 0), (1, 0), (0, 3), (5, 17), (16, 9)] {
                let mut dst = vec![0xeeu8; n + 64];
                copy_block(&src[so..so + n], &mut dst[dof..dof + n]);
                assert_eq!(&dst[dof..dof + n], &src[so..so + n], "n {n}, offsets {so}/{dof}");
                assert!(dst[..dof].iter().chain(&dst[dof + n..]).all(|&x| x == 0xee), "n {n}: wrote outside");
            }
        }
    }
}
