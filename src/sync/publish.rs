//! The one copy into a staging area that a peer will read (streaming stores for large
//! copies), and the one copy out of one.
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

use crate::transport::copy::copy;

/// The smallest copy made with streaming stores: 8 KiB. Measured at 2 ranks through the
/// one-phase collectives: with the cores far apart, streaming stores from 4 KiB took an
/// 8 KiB broadcast from 4.4 to 1.5 us and a 12 KiB one from 6.6 to 1.9 (gather, allgather,
/// reduce alike), which were losses against the MPI library; with the cores near, the
/// 4 KiB calls became 40-60% slower (broadcast 0.53 to 0.90 us, still 3x the MPI
/// library's) and the 8 KiB ones 5-45% slower (reduce 1.6 to 2.3 us, still 1.4x), the
/// 16 KiB ones unchanged. From 8 KiB the far case's gain outweighs the near case's loss.
pub(crate) const STREAM_MIN: usize = 8 << 10;

/// Copies `src` to `dst`, which a peer will read after a flag this rank publishes next,
/// with streaming stores from [`STREAM_MIN`] bytes on x86-64, else with the one copy
/// routine (`transport::copy::copy`).
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
    unsafe { copy(src.as_ptr(), dst, src.len()) };
}

/// Copies `dst.len()` bytes from `src`, a staging area a peer filled, into `dst`, with
/// the one copy routine (`transport::copy::copy`, which steers clear of `memcpy`'s slow
/// case at the short distances a page-aligned slot and a `Vec` 16 bytes past a page meet).
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes, does not overlap `dst`, and nothing
/// writes it during the copy.
pub(crate) unsafe fn copy_from_peers(src: *const u8, dst: &mut [u8]) {
    // SAFETY: the caller's contract, passed on.
    unsafe { copy(src, dst.as_mut_ptr(), dst.len()) };
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
}
