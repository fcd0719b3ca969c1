//! The one wait policy: spin with backoff, then yield (or, where every rank has a CPU of
//! its own, spin on), then sleep, checking that the process waited for is still alive and
//! that the optional time limit has not passed.
//!
//! Ranks often outnumber cores (8 ranks on 2 cores in the test suite), so a waiter must
//! give its core away quickly once the short spin fails: a spinning waiter would keep the
//! very rank it waits for off the CPU. A yield gives the core away only to threads of the
//! waiter's own scheduling group: with the kernel's autogroups, its session, and MPICH's
//! launcher starts each rank in a session of its own, so there only the sleeps give the
//! core away (the book's wait-policy section measures what that costs).

use crate::error::{Error, Result};
use crossbeam_utils::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long waits spin, yield and sleep, and when they give up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitPolicy {
    /// How long to keep yielding after the spin phase, before sleeping. Sleeping costs a
    /// timer wake-up (tens to hundreds of microseconds late); yielding costs nothing when
    /// every rank has its own core, and a lot when ranks share cores: see [`fit_to`].
    ///
    /// [`fit_to`]: WaitPolicy::fit_to
    pub(crate) yield_for: Duration,
    /// Whether that phase spins (`spin_loop`) instead of yielding: where every rank has a
    /// CPU of its own, a yield hands the core to whatever else runs there (a compiler, a
    /// daemon) for a whole time slice, and costs a system call even when nothing does; a
    /// spinning waiter keeps its core and sees the awaited store within a cache-line
    /// transfer, as MPI libraries' polling does. See [`fit_to`].
    ///
    /// [`fit_to`]: WaitPolicy::fit_to
    pub(crate) spin: bool,
    /// The first sleep; each further sleep doubles, up to `max_sleep`.
    pub(crate) min_sleep: Duration,
    /// The longest single sleep.
    pub(crate) max_sleep: Duration,
    /// Give up with `Error::Timeout` after this long (`ZCOLL_TIMEOUT`, seconds).
    pub(crate) timeout: Option<Duration>,
    /// `ZCOLL_YIELD_US`: the yield phase chosen by the user, over [`fit_to`]'s.
    ///
    /// [`fit_to`]: WaitPolicy::fit_to
    pub(crate) yield_override: Option<Duration>,
    /// Say on standard error what a wait waits for once it has lasted this long, and again
    /// each time its length doubles (`ZCOLL_WARN_AFTER`, seconds; `None`: never).
    pub(crate) report_after: Option<Duration>,
}

/// How long a wait lasts before it says what it waits for, unless `ZCOLL_WARN_AFTER`
/// says otherwise: long enough that a rank computing or writing a file while the others
/// wait in a collective stays quiet, short enough that a stuck job explains itself.
const REPORT_AFTER: Duration = Duration::from_secs(60);

/// The value of the environment variable `name` as `parse` reads it (`None` if it is not
/// set).
///
/// # Errors
///
/// `Error::Config` saying it should be `expected` if it is set and `parse` cannot read it.
fn env_var<T>(
    name: &'static str,
    expected: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>> {
    match std::env::var(name) {
        Ok(value) => match parse(&value) {
            Some(v) => Ok(Some(v)),
            None => Err(Error::Config { name, value, expected }),
        },
        Err(_) => Ok(None),
    }
}

impl WaitPolicy {
    /// The default policy, with `ZCOLL_TIMEOUT` read from the environment.
    ///
    /// # Errors
    ///
    /// `Error::Config` if `ZCOLL_TIMEOUT` is not a positive number of seconds.
    pub(crate) fn from_env() -> Result<Self> {
        let seconds = |v: &str| v.trim().parse::<f64>().ok().filter(|s| *s > 0.0 && s.is_finite());
        let timeout = env_var("ZCOLL_TIMEOUT", "a positive number of seconds", |v| {
            seconds(v).map(Duration::from_secs_f64)
        })?;
        let yield_override = env_var("ZCOLL_YIELD_US", "a whole number of microseconds", |v| {
            v.trim().parse::<u64>().ok().map(Duration::from_micros)
        })?;
        // Zero: never report.
        let warn_after = |v: &str| match v.trim().parse::<f64>() {
            Ok(0.0) => Some(None),
            _ => seconds(v).map(|s| Some(Duration::from_secs_f64(s))),
        };
        let report_after = env_var("ZCOLL_WARN_AFTER", "a number of seconds (0: never report)", warn_after)?
            .unwrap_or(Some(REPORT_AFTER));
        Ok(WaitPolicy { timeout, yield_override, report_after, ..WaitPolicy::default() })
    }
}

impl WaitPolicy {
    /// Sets the phase between the first spins and the sleeps for a node of `ranks`
    /// processes that may run on `cpus` distinct CPUs between them (the union of their
    /// affinity masks, [`Cpus`]): 2 ms of spinning when they fit (a waiter keeps its core:
    /// yielding would hand it to any other process there for a time slice, and sleeping
    /// would wake it late), 20 us of yielding when they outnumber them (a waiter must give
    /// its core to the rank it waits for). `ZCOLL_YIELD_US`
    /// ([`yield_override`](Self::yield_override)) overrides the length of both.
    ///
    /// The union, not this process's own mask: a rank bound to one core (`mpiexec
    /// --bind-to core`) still has the whole node's cores beside it, each rank on its own.
    pub(crate) fn fit_to(mut self, ranks: usize, cpus: usize) -> Self {
        self.spin = ranks <= cpus;
        let fitted = Duration::from_micros(if self.spin { 2000 } else { 20 });
        self.yield_for = self.yield_override.unwrap_or(fitted);
        self
    }
}

/// A set of CPUs as bit words (CPU `i` is bit `i % 64` of word `i / 64`), the first
/// `libc::CPU_SETSIZE` of them: a form that crosses MPI as plain `u64`s.
pub(crate) type Cpus = [u64; CPU_WORDS];

/// The words of a [`Cpus`].
pub(crate) const CPU_WORDS: usize = libc::CPU_SETSIZE as usize / 64;

/// How many CPUs the [`Cpus`] laid end to end in `masks` name between them.
pub(crate) fn union_size(masks: &[u64]) -> usize {
    (0..CPU_WORDS)
        .map(|w| masks.iter().skip(w).step_by(CPU_WORDS).fold(0, |u, m| u | m).count_ones() as usize)
        .sum()
}

/// The CPUs this process may run on (`sched_getaffinity`); every CPU the set can name if
/// the kernel does not say.
pub(crate) fn affinity() -> Cpus {
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes into `set`, which we
    // own; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return [u64::MAX; CPU_WORDS];
    }
    let mut words = [0u64; CPU_WORDS];
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: `cpu < CPU_SETSIZE`, the size of the set, so the test stays inside it.
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            words[cpu / 64] |= 1 << (cpu % 64);
        }
    }
    words
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy {
            yield_for: Duration::from_micros(20),
            spin: false,
            min_sleep: Duration::from_micros(20),
            max_sleep: Duration::from_millis(1),
            timeout: None,
            yield_override: None,
            report_after: Some(REPORT_AFTER),
        }
    }
}

/// What a waiter needs to know about the process it waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer {
    /// The waiting rank, for the error.
    pub(crate) me: i32,
    /// The awaited rank in the user's communicator.
    pub(crate) rank: i32,
    /// Its process id.
    pub(crate) pid: libc::pid_t,
    /// Its word that says it dropped its communicator, in the node's control segment (null
    /// where there is none, in tests): see [`Peer::with_departed`].
    departed: *const AtomicU64,
}

// SAFETY: `departed` is null or points to an atomic in a shared mapping that outlives the
// peer (the contract of `with_departed`); an atomic may be read from any thread.
unsafe impl Send for Peer {}
// SAFETY: as for `Send`: the only access through the pointer is an atomic load.
unsafe impl Sync for Peer {}

impl Peer {
    /// A peer known by its process only: a wait for it fails when the process is gone.
    #[cfg(test)]
    pub(crate) fn new(me: i32, rank: i32, pid: libc::pid_t) -> Peer {
        Peer { me, rank, pid, departed: std::ptr::null() }
    }

    /// A peer that also says, in `departed`, when it dropped its communicator: a wait
    /// for it then fails too, as for a process that is gone.
    ///
    /// # Safety
    ///
    /// `departed` must stay mapped for as long as this value and its copies are used:
    /// it lies in the control segment, which the `Control` that makes its peers owns.
    pub(crate) unsafe fn with_departed(me: i32, rank: i32, pid: libc::pid_t, departed: &AtomicU64) -> Peer {
        Peer { me, rank, pid, departed }
    }

    /// Whether the peer can still make a wait for it end: its process lives and it has
    /// not dropped its communicator.
    fn present(&self) -> bool {
        // SAFETY: null, or mapped for as long as this peer is used (`with_departed`).
        let departed = unsafe { self.departed.as_ref() }.is_some_and(|d| d.load(Ordering::Acquire) != 0);
        !departed && alive(self.pid)
    }
}

/// Waits until `ready()` is true when any of `peers` may be the one that makes it true
/// (a FIFO writer waiting for room, a reader waiting for whichever writer): each sleep
/// checks the liveness of one of them, in turn.
///
/// # Errors
///
/// `Error::PeerDied` for a peer found dead, `Error::Timeout` (naming the first peer)
/// after `policy.timeout`.
pub(crate) fn wait_until_any(policy: &WaitPolicy, peers: &[Peer], ready: impl FnMut() -> bool) -> Result<()> {
    wait_until_any_saying(policy, peers, ready, &|| String::new())
}

/// [`wait_until_any`], where `state` says what the wait is for and where the peers stand,
/// for the report of a long wait ([`WaitPolicy::report_after`]): a job that hangs names
/// the rank it waits for and what that rank last did, instead of waiting in silence.
///
/// # Errors
///
/// As [`wait_until_any`].
pub(crate) fn wait_until_any_saying(
    policy: &WaitPolicy,
    peers: &[Peer],
    mut ready: impl FnMut() -> bool,
    state: &dyn Fn() -> String,
) -> Result<()> {
    let yielding = match policy.spin {
        true => {
            // A first batch of polls before the clock is read: most waits of a small call
            // end in it (a flag already set, or one cache-line transfer away), and a read
            // of the clock costs as much as that transfer's tail.
            for _ in 0..16 {
                if ready() {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
            Instant::now()
        }
        false => {
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if ready() {
                    return Ok(());
                }
                backoff.snooze();
            }
            Instant::now()
        }
    };
    loop {
        for _ in 0..16 {
            if ready() {
                return Ok(());
            }
            match policy.spin {
                true => std::hint::spin_loop(),
                false => std::thread::yield_now(),
            }
        }
        if yielding.elapsed() >= policy.yield_for {
            break;
        }
    }
    let start = Instant::now();
    let mut sleep = policy.min_sleep;
    let mut report = policy.report_after;
    for turn in 0.. {
        if ready() {
            return Ok(());
        }
        if let Some(after) = report.filter(|&after| yielding.elapsed() >= after) {
            crate::error::say(format_args!("{}", hang_report(peers, yielding.elapsed(), &state())));
            report = Some(after * 2);
        }
        if let Some(peer) = peers.get(turn % peers.len().max(1)) {
            if !peer.present() {
                // It may have finished its part and left just after: look once more.
                return match (ready(), alive(peer.pid)) {
                    (true, _) => Ok(()),
                    (false, false) => Err(Error::PeerDied { rank: peer.me, peer: peer.rank, pid: peer.pid }),
                    (false, true) => Err(Error::PeerFailed { rank: peer.me, peer: peer.rank }),
                };
            }
        }
        if let Some(limit) = policy.timeout {
            if start.elapsed() > limit {
                let (me, peer) = peers.first().map_or((-1, -1), |p| (p.me, p.rank));
                return Err(Error::Timeout { rank: me, peer, seconds: limit.as_secs_f64() });
            }
        }
        std::thread::sleep(sleep);
        sleep = (sleep * 2).min(policy.max_sleep);
    }
    unreachable!("the loop only ends by returning")
}

/// The line a long wait prints: who waits, for whom, how long, and `state`.
fn hang_report(peers: &[Peer], waited: Duration, state: &str) -> String {
    let waiter = match peers {
        // A wait on no peer (a fence awaiting a process's exit) says who waits in `state`.
        [] => String::new(),
        [p] => format!(
            "rank {} has waited {:.0} s for rank {} (pid {})",
            p.me,
            waited.as_secs_f64(),
            p.rank,
            p.pid
        ),
        [p, ..] => format!(
            "rank {} has waited {:.0} s for any of ranks {:?}",
            p.me,
            waited.as_secs_f64(),
            peers.iter().map(|p| p.rank).collect::<Vec<_>>()
        ),
    };
    let state = match (waiter.is_empty(), state.is_empty()) {
        (_, true) => String::new(),
        (true, false) => format!("{state} (waited {:.0} s)", waited.as_secs_f64()),
        (false, false) => format!("; {state}"),
    };
    format!(
        "{waiter}{state} (ZCOLL_TIMEOUT=s makes such a wait an error, ZCOLL_WARN_AFTER=0 \
         silences this)"
    )
}

/// Whether process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: libc::pid_t) -> bool {
    if let Err(e) = nix_kill0(pid) {
        return e != libc::ESRCH;
    }
    // A zombie still answers kill(0); its state in /proc/<pid>/stat is Z (or X).
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => true,
    }
}

fn nix_kill0(pid: libc::pid_t) -> std::result::Result<(), i32> {
    // SAFETY: signal 0 sends nothing; it only checks that `pid` exists and may be
    // signalled. No memory is passed.
    match unsafe { libc::kill(pid, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn me() -> Peer {
        Peer::new(0, 1, std::process::id() as libc::pid_t)
    }

    #[test]
    fn ranks_bound_to_cores_of_their_own_still_fit() {
        let one = |cpu: usize| {
            let mut m = [0u64; CPU_WORDS];
            m[cpu / 64] |= 1 << (cpu % 64);
            m
        };
        // Two ranks bound to CPUs 0 and 70: each sees one CPU, the node two.
        let bound: Vec<u64> = [one(0), one(70)].concat();
        assert_eq!(union_size(&bound), 2);
        let fitted = WaitPolicy::default().fit_to(2, union_size(&bound));
        assert_eq!((fitted.yield_for, fitted.spin), (Duration::from_millis(2), true));
        // Two ranks bound to the same CPU share it: waiters must give it away at once.
        let shared: Vec<u64> = [one(3), one(3)].concat();
        assert_eq!(union_size(&shared), 1);
        let shared = WaitPolicy::default().fit_to(2, 1);
        assert_eq!((shared.yield_for, shared.spin), (Duration::from_micros(20), false));
        // This process runs somewhere.
        assert!(union_size(&affinity()) >= 1);
    }

    #[test]
    fn returns_once_ready_even_after_sleeping() {
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                flag.store(true, Ordering::Release);
            })
        };
        wait_until_any(&WaitPolicy::default(), &[me()], || flag.load(Ordering::Acquire)).unwrap();
        setter.join().unwrap();
    }

    /// A long wait says what it waits for once it has lasted `report_after`, then again
    /// each time its length doubles, and still ends when the flag is set.
    #[test]
    fn a_long_wait_says_what_it_waits_for() {
        let policy = WaitPolicy { report_after: Some(Duration::from_millis(40)), ..WaitPolicy::default() };
        let reports = std::cell::Cell::new(0);
        let start = Instant::now();
        wait_until_any_saying(&policy, &[me()], || start.elapsed() > Duration::from_millis(300), &|| {
            reports.set(reports.get() + 1);
            format!("report {}", reports.get())
        })
        .unwrap();
        // At about 40, 80 and 160 ms (then 320, past the end); sleeps may stretch them.
        assert!((1..=3).contains(&reports.get()), "{} reports", reports.get());
        let line = hang_report(&[me()], Duration::from_secs(61), "in round 7");
        assert!(line.starts_with("rank 0 has waited 61 s for rank 1 (pid "), "{line}");
        assert!(line.contains("; in round 7 ("), "{line}");
        // A wait on no peer (a fence) says who waits through its state alone.
        let line = hang_report(
            &[],
            Duration::from_secs(3),
            "rank 0: rank 2 (pid 9), sent SIGKILL, has not exited yet",
        );
        assert!(
            line.starts_with("rank 0: rank 2 (pid 9), sent SIGKILL, has not exited yet (waited 3 s) ("),
            "{line}"
        );
        let quiet = WaitPolicy { report_after: None, ..WaitPolicy::default() };
        let start = Instant::now();
        wait_until_any_saying(&quiet, &[me()], || start.elapsed() > Duration::from_millis(60), &|| {
            panic!("a wait with reports off reported")
        })
        .unwrap();
    }

    #[test]
    fn times_out() {
        let policy = WaitPolicy { timeout: Some(Duration::from_millis(20)), ..WaitPolicy::default() };
        let err = wait_until_any(&policy, &[me()], || false).unwrap_err();
        assert!(matches!(err, Error::Timeout { rank: 0, peer: 1, .. }), "{err}");
    }

    #[test]
    fn a_dead_process_is_an_error_not_a_hang() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        // Not reaped yet: a zombie must count as dead.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!alive(pid));
        let err = wait_until_any(&WaitPolicy::default(), &[Peer::new(2, 3, pid)], || false).unwrap_err();
        assert_eq!(err, Error::PeerDied { rank: 2, peer: 3, pid });
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(alive(std::process::id() as libc::pid_t));
    }
}
