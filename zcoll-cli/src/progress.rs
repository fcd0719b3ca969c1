//! Progress of the long runs (`zcoll bench`, `zcoll tune`) on rank 0: an indicatif bar
//! on a terminal, plain lines on standard error otherwise (at most one every
//! [`PLAIN_EVERY`], and one at the end), nothing on the other ranks.
//!
//! Which terminal: under `mpiexec` a rank's standard error is a pipe to the launcher,
//! never a terminal, even when the user's is. So the bar goes to standard error when that
//! is a terminal, else to the job's controlling terminal (`/dev/tty`) when it has one (an
//! interactive `mpiexec`), and otherwise (a batch job, CI, a terminal of type `dumb`)
//! the plain lines go to standard error. Bars are drawn only in the `zcoll` command
//! ([`allow_bars`]): the MPI-job tests and the criterion benches, which share the
//! benchmark loop, must not draw on the terminal of whoever runs `cargo test`.
//!
//! Results go to standard output as before; a line printed while a bar is drawn goes
//! through [`Progress::println`], which lifts the bar out of the way.

use console::Term;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether progress may draw bars on a terminal ([`allow_bars`]).
static BARS: AtomicBool = AtomicBool::new(false);

/// Lets the progress of this process draw bars on a terminal; without it, plain lines
/// only. The `zcoll` command calls it.
pub fn allow_bars() {
    BARS.store(true, Ordering::Relaxed);
}

/// Where a bar can be drawn: standard error if it is a terminal, else the controlling
/// terminal; `None` if bars are not allowed or there is no terminal to draw on.
fn terminal() -> Option<ProgressDrawTarget> {
    if !BARS.load(Ordering::Relaxed) {
        return None;
    }
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
        let read = tty.try_clone().ok()?;
        ProgressDrawTarget::term(Term::read_write_pair(read, tty), 20)
    };
    // indicatif hides the bar on a terminal of type `dumb` (or without TERM).
    (!target.is_hidden()).then_some(target)
}

/// The shortest time between two plain progress lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// How a run reports its progress.
enum Shown {
    /// Not rank 0: nothing.
    Silent,
    /// A bar (or a spinner) on the terminal.
    Bar(ProgressBar),
    /// Plain lines on standard error, with the time of the last one.
    Plain(Instant),
}

/// The progress of one run: `total` steps, or an unknown number (a spinner).
pub struct Progress {
    shown: Shown,
    what: String,
    total: Option<u64>,
    done: u64,
    started: Instant,
}

impl Progress {
    /// A run of `total` steps named `what` (`"zcoll bench"`), shown only if `shown` (rank
    /// 0).
    pub fn new(what: &str, total: u64, shown: bool) -> Progress {
        Progress::start(what, Some(total), shown)
    }

    /// A run of one step of unknown length (a spinner on a terminal; a line at the start
    /// and one at the end otherwise), shown only if `shown`.
    pub fn spinner(what: &str, shown: bool) -> Progress {
        Progress::start(what, None, shown)
    }

    fn start(what: &str, total: Option<u64>, shown: bool) -> Progress {
        let started = Instant::now();
        let shown = if !shown {
            Shown::Silent
        } else if let Some(target) = terminal() {
            let bar = match total {
                Some(n) => ProgressBar::with_draw_target(Some(n), target).with_style(
                    ProgressStyle::with_template(
                        "{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} ({eta} left) {msg}",
                    )
                    .expect("a valid template"),
                ),
                None => {
                    let bar = ProgressBar::with_draw_target(None, target).with_style(
                        ProgressStyle::with_template("{prefix} {spinner} [{elapsed_precise}] {msg}")
                            .expect("a valid template"),
                    );
                    // A slow tick: the run being timed shares the cores with this thread.
                    bar.enable_steady_tick(Duration::from_millis(500));
                    bar
                }
            };
            bar.set_prefix(what.to_owned());
            Shown::Bar(bar)
        } else {
            match total {
                Some(n) => eprintln!("{what}: {n} steps"),
                None => eprintln!("{what}: started"),
            }
            Shown::Plain(started)
        };
        Progress { shown, what: what.to_owned(), total, done: 0, started }
    }

    /// Says what runs now (`"bcast 64 KiB"`).
    pub fn set_message(&self, msg: &str) {
        if let Shown::Bar(bar) = &self.shown {
            bar.set_message(msg.to_owned());
        }
    }

    /// One more step done; `msg` says which.
    pub fn inc(&mut self, msg: &str) {
        self.done += 1;
        match &mut self.shown {
            Shown::Silent => {}
            Shown::Bar(bar) => {
                bar.inc(1);
                bar.set_message(msg.to_owned());
            }
            Shown::Plain(last) => {
                if last.elapsed() >= PLAIN_EVERY {
                    *last = Instant::now();
                    let total = self.total.map_or(String::new(), |n| format!("/{n}"));
                    eprintln!(
                        "{}: {}{total} done ({msg}), {:.0} s",
                        self.what,
                        self.done,
                        self.started.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }

    /// Prints `line` on standard output without breaking the bar.
    pub fn println(&self, line: &str) {
        match &self.shown {
            Shown::Bar(bar) => bar.suspend(|| println!("{line}")),
            _ => println!("{line}"),
        }
    }

    /// Ends the run: clears the bar, or says how long it took.
    pub fn finish(self) {
        match self.shown {
            Shown::Silent => {}
            Shown::Bar(bar) => bar.finish_and_clear(),
            Shown::Plain(_) => {
                eprintln!("{}: done in {:.0} s", self.what, self.started.elapsed().as_secs_f64())
            }
        }
    }
}
