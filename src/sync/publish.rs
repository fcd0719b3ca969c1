//! The one copy into a staging area that a peer will read: streaming stores for large
//! copies.
//!
//! A staging area's lines were last read by the peers that copied the previous payload
//! out, so each line sits in *their* caches. An ordinary store must first take the line
//! back (a read-for-ownership, one cache-line round trip to the other core) and, on the
//! development machine, those round trips barely overlap: copying 64 KiB into lines another
//! core had read took 7 us where that core's copy out took 1.5 us, and 28 us whenever the
//! two cores sat far apart (a cache-line round trip of 460 ns instead of 120 ns), which
//! made every copy-in/copy-out collective of 16 KiB to 256 KiB two to three times slower
//! than a single copy by CMA. Streaming (non-temporal) stores write whole lines without
//! reading them first: the same 64 KiB took 2 us near and far, and the reader's copy out
//! 3.8 us (it now fetches from memory, not from the writer's cache). Below
//! [`STREAM_MIN`] the ordinary copy stays: the store buffer hides the round trips, and the
//! reader gets the bytes from the writer's cache.
//!
//! Streaming stores are weakly ordered: a Release store does not order them, so the
//! copy ends with a store fence, and a flag published after it (with Release) is seen only
//! after the bytes.

/// The smallest copy made with streaming stores: 8 KiB. Measured at 2 ranks through the
/// one-phase collectives: with the cores far apart, streaming stores from 4 KiB took an
/// 8 KiB broadcast from 4.4 to 1.5 us and a 12 KiB one from 6.6 to 1.9 (gather, allgather,
/// reduce alike), which were losses against the MPI library; with the cores near, the
/// 4 KiB calls became 40-60% slower (broadcast 0.53 to 0.90 us, still 3x the MPI
/// library's) and the 8 KiB ones 5-45% slower (reduce 1.6 to 2.3 us, still 1.4x), the
/// 16 KiB ones unchanged. From 8 KiB the far case's gain outweighs the near case's loss.
pub(crate) const STREAM_MIN: usize = 8 << 10;

/// Copies `src` to `dst`, which a peer will read after a flag this rank publishes next,
/// with streaming stores from [`STREAM_MIN`] bytes on x86-64 (ordinary stores elsewhere).
///
/// # Safety
///
/// `dst` is valid for writes of `src.len()` bytes, does not overlap `src`, and nothing
/// reads or writes it during the copy.
pub(crate) unsafe fn copy_for_peers(src: &[u8], dst: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= STREAM_MIN {
        // SAFETY: the caller's contract, passed on.
        unsafe { crate::transport::copy::stream(src.as_ptr(), dst, src.len()) };
        return;
    }
    // SAFETY: the caller's contract: `dst` is valid for `src.len()` bytes and disjoint.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
}

/// The smallest copy out of a staging area that [`copy_from_peers`] checks for 4 KiB
/// aliasing: below it, `memcpy` loads a whole small block before it stores.
pub(crate) const ALIAS_MIN: usize = 4 << 10;

/// How far past a multiple of 4 KiB the destination of a copy may lie ahead of its
/// source before [`copy_from_peers`] copies backward: a few vectors of 64-byte groups.
const ALIAS_WINDOW: usize = 256;

/// Copies `dst.len()` bytes from `src`, a staging area a peer filled, into `dst`. A
/// forward copy whose destination lies a little past its source modulo 4 KiB (the page
/// offsets of `dst` a few bytes above those of `src`) stalls on every load: the CPU takes
/// the load for one from the store it just made to the same page offset (4 KiB aliasing)
/// until it has compared the full addresses. The staging areas are page aligned and
/// `Vec`s of the size of a page multiple from `malloc` start 16 bytes past a page, so
/// every block of such a size is copied out that way: a staged gather of 512 KiB blocks at 2
/// ranks took 79 us where 512 KiB + 64 bytes took 52 to 59 us and 514 KiB 48 to 59. Such a
/// copy runs backward here, where a load's page offset never matches a store just made.
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes, does not overlap `dst`, and nothing
/// writes it during the copy.
pub(crate) unsafe fn copy_from_peers(src: *const u8, dst: &mut [u8]) {
    let n = dst.len();
    #[cfg(target_arch = "x86_64")]
    if n >= ALIAS_MIN
        && (1..ALIAS_WINDOW).contains(&((dst.as_ptr() as usize).wrapping_sub(src as usize) % 4096))
    {
        // SAFETY: the caller's contract, passed on.
        unsafe { backward(src, dst.as_mut_ptr(), n) };
        return;
    }
    // SAFETY: the caller's contract: `src` is valid for `n` bytes and disjoint from `dst`.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), n) };
}

/// The backward copy of [`copy_from_peers`]: the tail past the last whole 64-byte group
/// first, then the groups from the last to the first, each with four 16-byte loads before
/// four stores (SSE2, which every x86-64 CPU has).
///
/// # Safety
///
/// As [`copy_from_peers`], for `n` bytes at `dst`.
#[cfg(target_arch = "x86_64")]
unsafe fn backward(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
    let body = n / 64 * 64;
    // SAFETY: the tail `body..n` lies in both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src.add(body), dst.add(body), n - body) };
    let mut at = body;
    while at > 0 {
        at -= 64;
        // SAFETY: `at + 64 <= body <= n`, so the four 16-byte loads lie in `src` and the
        // four stores in `dst` (both unaligned).
        unsafe {
            let (from, to) = (src.add(at) as *const __m128i, dst.add(at) as *mut __m128i);
            let (a, b) = (_mm_loadu_si128(from), _mm_loadu_si128(from.add(1)));
            let (c, d) = (_mm_loadu_si128(from.add(2)), _mm_loadu_si128(from.add(3)));
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
    fn every_length_and_alignment_arrives_whole() {
        let src: Vec<u8> = (0..(STREAM_MIN * 2 + 200)).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; src.len() + 64];
        for len in
            [0, 1, 63, STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 1, STREAM_MIN + 77, 2 * STREAM_MIN + 131]
        {
            for (from, to) in [(0, 0), (1, 0), (0, 3), (5, 17), (13, 64)] {
                dst.fill(0xAA);
                // SAFETY: `to + len` fits `dst` (it has 64 spare bytes), and the two
                // vectors are distinct.
                unsafe { copy_for_peers(&src[from..from + len], dst.as_mut_ptr().add(to)) };
                assert_eq!(&dst[to..to + len], &src[from..from + len], "len {len}, from {from}, to {to}");
                assert!(
                    dst[..to].iter().chain(&dst[to + len..]).all(|&b| b == 0xAA),
                    "len {len}: wrote outside"
                );
            }
        }
    }

    #[test]
    fn copies_out_arrive_whole_forward_and_backward() {
        // A page-aligned source (a staging area) and destinations at every kind of page
        // offset from it: equal, a little ahead (backward copy), a little behind, far.
        let page = 4096;
        let src: Vec<u8> = (0..(4 * page + page)).map(|i| (i * 11 + 5) as u8).collect();
        let base = src.as_ptr().align_offset(page);
        let mut dst = vec![0u8; 6 * page];
        let dbase = dst.as_ptr().align_offset(page);
        for len in [0, 1, 63, ALIAS_MIN - 1, ALIAS_MIN, ALIAS_MIN + 1, ALIAS_MIN + 63, 3 * page + 77] {
            for skew in [0, 1, 16, 64, ALIAS_WINDOW - 1, ALIAS_WINDOW, 2048, page - 16] {
                dst.fill(0xAA);
                let to = dbase + skew;
                let from = &src[base..base + len];
                // SAFETY: `from` lies in `src`; `to + len` fits `dst` (a page and more to
                // spare past `dbase + skew`); the two vectors are distinct.
                unsafe { copy_from_peers(from.as_ptr(), &mut dst[to..to + len]) };
                assert_eq!(&dst[to..to + len], from, "len {len}, skew {skew}");
                assert!(
                    dst[..to].iter().chain(&dst[to + len..]).all(|&b| b == 0xAA),
                    "len {len}, skew {skew}: wrote outside"
                );
            }
        }
    }
}
