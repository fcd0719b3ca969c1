//! Test-only fault injection (the `fault-injection` feature): make this process's next
//! single copies fail, so that a test can show what every rank of a collective does when
//! one rank's copy fails in the middle of an algorithm. Never enable it in a program that
//! moves real data.
//!
//! # Examples
//!
//! ```
//! // The third single copy from now (a CMA, heap or XPMEM read or write of a collective)
//! // fails with `EIO`, once; the copies around it are not touched.
//! zcoll::fault::fail_copy(3);
//! zcoll::fault::fail_copy(0); // and now no copy fails
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// The copies to go before the failing one, plus one (0: none fails).
static COUNTDOWN: AtomicU64 = AtomicU64::new(0);

/// Makes the `n`-th single copy from now (counted over every thread of the process) fail
/// with `EIO`, once; `0` disarms.
pub fn fail_copy(n: u64) {
    COUNTDOWN.store(n, Ordering::Relaxed);
}

/// Whether the copy about to be made is the one [`fail_copy`] chose.
pub(crate) fn copy_fails() -> bool {
    COUNTDOWN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok_and(|n| n == 1)
}
