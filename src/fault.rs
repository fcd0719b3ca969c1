//! Test-only fault injection (the `fault-injection` feature): make this process's next
//! single copies fail ([`fail_copy`]), so that a test can show what every rank of a
//! collective does when one rank's copy fails in the middle of an algorithm; or make the
//! process die or stall at a chosen phase of its next call ([`fail_at`]), so that a test
//! can show what its peers do. Never enable it in a program that moves real data. Without
//! the feature, neither the module nor its hooks in `sync` exist.
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
use std::time::Duration;

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

/// The phase of a collective call at which [`fail_at`] makes this rank fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the rank publishes its arrival in the call's round (its call record may be
    /// written, its stamp is not): the peers wait for an arrival that never comes.
    Arrive,
    /// In the middle of moving bytes: at the rank's first single copy of the call
    /// (`Round::read`/`write`), its first read of a peer's staged payload, or its first
    /// published step (`progress` or `ack`) of a copy-in/copy-out transfer, whichever
    /// comes first. A call with nothing to copy (a barrier) has no such phase.
    Copy,
    /// After the copies, before the rank publishes `done` (at the start of
    /// `Round::finish`).
    Finish,
}

/// How the rank chosen by [`fail_at`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// `std::process::exit(EXIT_CODE)`: the process ends without unwinding.
    Exit,
    /// The process sends itself `SIGKILL` (through `kill -KILL <pid>`, since this module
    /// holds no unsafe code) and waits for it.
    Kill,
    /// The process sleeps for the given time (to be far longer than the peers'
    /// `ZCOLL_TIMEOUT`), then exits with [`STALL_EXIT_CODE`]; it never goes on with the
    /// call, whose peers have given up on it by then.
    Stall(Duration),
}

/// The exit status of a rank that [`Failure::Exit`] ended.
pub const EXIT_CODE: i32 = 86;

/// The exit status of a rank once its [`Failure::Stall`] is over.
pub const STALL_EXIT_CODE: i32 = 87;

/// The armed phase and failure (`0`: none), see `encode`.
static ARMED: AtomicU64 = AtomicU64::new(0);
/// The length of an armed stall, in milliseconds.
static STALL_MS: AtomicU64 = AtomicU64::new(0);

/// Makes this process fail `how` at `phase` of its next collective call (the first time
/// a call of this process reaches that phase: a call that has no such phase, such as a
/// barrier's copies, leaves it armed for a later one). Test-only: it ends the process.
///
/// # Examples
///
/// ```no_run
/// use zcoll::fault::{fail_at, Failure, Phase};
/// // The next call's first copy never happens: the process exits there.
/// fail_at(Phase::Copy, Failure::Exit);
/// ```
pub fn fail_at(phase: Phase, how: Failure) {
    if let Failure::Stall(d) = how {
        STALL_MS.store(d.as_millis() as u64, Ordering::Relaxed);
    }
    let how = match how {
        Failure::Exit => 1,
        Failure::Kill => 2,
        Failure::Stall(_) => 3,
    };
    ARMED.store(encode(phase) << 8 | how, Ordering::Relaxed);
}

/// Whether a [`fail_at`] is still armed (its phase has not been reached yet).
pub fn armed() -> bool {
    ARMED.load(Ordering::Relaxed) != 0
}

/// Disarms [`fail_at`].
pub fn disarm() {
    ARMED.store(0, Ordering::Relaxed);
}

fn encode(phase: Phase) -> u64 {
    match phase {
        Phase::Arrive => 1,
        Phase::Copy => 2,
        Phase::Finish => 3,
    }
}

/// The hook: fails this process here if [`fail_at`] armed `phase`. Called by `sync` at
/// each phase of every round.
pub(crate) fn at(phase: Phase) {
    let armed = ARMED.load(Ordering::Relaxed);
    if armed == 0 || armed >> 8 != encode(phase) || ARMED.swap(0, Ordering::Relaxed) != armed {
        return;
    }
    match armed & 0xff {
        1 => std::process::exit(EXIT_CODE),
        2 => {
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
            // The signal is on its way; should `kill` be missing, end the process anyway.
            std::thread::sleep(Duration::from_secs(5));
            std::process::abort();
        }
        _ => {
            std::thread::sleep(Duration::from_millis(STALL_MS.load(Ordering::Relaxed)));
            std::process::exit(STALL_EXIT_CODE);
        }
    }
}
