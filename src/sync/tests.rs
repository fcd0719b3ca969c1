//! The round protocol with threads standing in for ranks over a real segment, and child
//! processes for the ranks that die.

use super::layout::{Slot, PAGE, SLOTS_OFFSET};
use super::round::{reached, stamp};
use super::wait::WaitPolicy;
use super::*;
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::tune::Flags;
use std::sync::atomic::Ordering;

/// `n` controls over one segment, as `n` ranks of one node would see it; each is
/// moved to its own thread by the caller.
pub(super) fn node(n: usize, stage_bytes: usize) -> Vec<Control> {
    let len = Control::segment_len(n, stage_bytes);
    let (first, name) = Segment::create(0, len).unwrap();
    let mut segs = vec![first];
    for r in 1..n {
        segs.push(Segment::open(r as i32, &name, len).unwrap());
    }
    Segment::unlink(&name);
    let pid = std::process::id() as libc::pid_t;
    let policy = WaitPolicy { timeout: Some(std::time::Duration::from_secs(20)), ..WaitPolicy::default() };
    segs.into_iter()
        .enumerate()
        .map(|(me, seg)| {
            Control::new(seg, me, (0..n as i32).collect(), vec![pid; n], stage_bytes, policy, me == 0)
                .unwrap()
        })
        .collect()
}

/// Runs `rank` for each of `n` ranks of one node (staging areas of 8 KiB), each on its own
/// thread with its own `Control`, and returns once every rank returned.
pub(super) fn on_node(n: usize, rank: impl Fn(Control) + Sync) {
    let rank = &rank;
    std::thread::scope(|s| {
        for ctl in node(n, 8192) {
            s.spawn(move || rank(ctl));
        }
    });
}

#[test]
fn step_stamps_survive_epoch_wrap_around() {
    for e in [1u64, 7, u32::MAX as u64 - 1, u32::MAX as u64, 1 << 32, (1 << 40) + 5] {
        assert!(reached(stamp(e, 3), stamp(e, 3)));
        assert!(reached(stamp(e, 4), stamp(e, 3)));
        assert!(!reached(stamp(e, 2), stamp(e, 3)));
        // The previous round's last step never satisfies this round's first.
        assert!(!reached(stamp(e - 1, u32::MAX), stamp(e, 0)));
        assert!(reached(stamp(e + 1, 0), stamp(e, u32::MAX)));
    }
    assert!(!reached(0, stamp(1, 0)));
}

#[test]
fn slots_are_cache_line_multiples() {
    assert_eq!(std::mem::size_of::<Slot>() % 128, 0);
    assert_eq!(SLOTS_OFFSET % 128, 0);
    assert_eq!(Control::segment_len(4, 8192) % PAGE, 0);
}

#[test]
fn a_foreign_layout_is_refused() {
    let mut ctls = node(2, 8192);
    let b = ctls.pop().unwrap();
    let a = ctls.pop().unwrap();
    a.head().magic.store(1, Ordering::Relaxed);
    let err = Control::new(b.seg, 1, vec![0, 1], b.pids, 8192, WaitPolicy::default(), false).unwrap_err();
    assert!(matches!(err, Error::Segment { rank: 1, op: "layout check", .. }));
}

/// Every round shows every rank every rank's call, and a failure on one rank reaches
/// every rank, whether arrivals are awaited flat or up and down trees of several fan-ins
/// (with full and partial last levels).
#[test]
fn rounds_exchange_calls_and_agree_on_failure() {
    for (n, arrival) in
        [(4, Flags::Flat), (4, Flags::Tree(2)), (7, Flags::Tree(2)), (9, Flags::Tree(3)), (6, Flags::Tree(4))]
    {
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = node(n, 8192)
                .into_iter()
                .map(|mut ctl| {
                    ctl.set_arrival(arrival);
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for round in 0..200u64 {
                            let call = Call { op: 7, root: ctl.me() as i64, aux: round, ..Call::default() };
                            let r = ctl.begin(&call).unwrap();
                            for p in 0..n {
                                let c = r.call(p);
                                assert_eq!((c.op, c.root, c.aux), (7, p as i64, round), "{arrival}");
                            }
                            // Rank 2 fails every tenth round; everyone must hear of it.
                            let mine = if round % 10 == 0 && ctl.me() == 2 {
                                Err(Error::Unsupported { rank: 2, what: "test".into() })
                            } else {
                                Ok(())
                            };
                            seen.push(r.finish(mine));
                        }
                        seen
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, seen) in outcomes.iter().enumerate() {
            for (round, outcome) in seen.iter().enumerate() {
                match (round % 10 == 0, me == 2, outcome) {
                    (false, _, Ok(())) => {}
                    (true, true, Err(Error::Unsupported { .. })) => {}
                    (true, false, Err(Error::PeerFailed { rank, peer: 2 })) => assert_eq!(*rank, me as i32),
                    other => panic!("{arrival}: rank {me} of {n}, round {round}: {other:?}"),
                }
            }
        }
    }
}

/// A rank that dies before it arrives, in a tree of arrivals where it stands for a
/// subtree: its parent finds it dead, gives up, and the failure climbs to the root and
/// comes down to every rank, each of which returns an error within two seconds.
#[test]
fn a_tree_of_arrivals_hears_of_a_rank_that_never_arrives() {
    let n = 7;
    let (mut child, name, pids) = spawn_peer(n, "never-arrives");
    let len = Control::segment_len(n, 8192);
    let policy = WaitPolicy { timeout: Some(std::time::Duration::from_secs(60)), ..WaitPolicy::default() };
    let start = std::time::Instant::now();
    let outcomes: Vec<(usize, Result<()>)> = std::thread::scope(|s| {
        let hs: Vec<_> = [0]
            .into_iter()
            .chain(2..n)
            .map(|r| {
                let seg = Segment::open(r as i32, &name, len).unwrap();
                let mut ctl =
                    Control::new(seg, r, (0..n as i32).collect(), pids.clone(), 8192, policy, false).unwrap();
                // Local rank 1 is the parent of 3 and 4; 0 of 1 and 2.
                ctl.set_arrival(Flags::Tree(2));
                s.spawn(move || (r, ctl.begin(&Call::default()).map(drop)))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(start.elapsed() < std::time::Duration::from_secs(2), "{:?}", start.elapsed());
    Segment::unlink(&name);
    assert!(child.wait().unwrap().success());
    for (r, outcome) in outcomes {
        let want = match r {
            0 => Error::PeerDied { rank: 0, peer: 1, pid: pids[1] },
            // Heard from rank 0, which names the rank it found dead.
            _ => Error::PeerFailed { rank: r as i32, peer: 1 },
        };
        assert_eq!(outcome, Err(want), "local rank {r}");
    }
}

/// The peer of `a_peer_that_dies_mid_round_is_an_error`: local rank 1 of
/// `ZCOLL_TEST_RANKS` (default 2), every other rank being a thread of the parent.
/// Arrives, then exits without finishing the round.
#[test]
#[ignore = "run as a separate process by a_peer_that_dies_mid_round_is_an_error"]
fn dying_peer() {
    let name = std::env::var("ZCOLL_TEST_SEGMENT").unwrap();
    let n = std::env::var("ZCOLL_TEST_RANKS").map_or(2, |v| v.parse().unwrap());
    let len = Control::segment_len(n, 8192);
    let seg = Segment::open(1, &name, len).unwrap();
    let parent = std::os::unix::process::parent_id() as libc::pid_t;
    let mut pids = vec![parent; n];
    pids[1] = std::process::id() as libc::pid_t;
    let ranks = (0..n as i32).collect();
    let ctl = Control::new(seg, 1, ranks, pids, 8192, WaitPolicy::default(), false).unwrap();
    let stall = || std::thread::sleep(std::time::Duration::from_secs(30));
    match std::env::var("ZCOLL_TEST_PEER").as_deref() {
        Ok("never-arrives") => std::process::exit(0),
        Ok("stalls-before-arriving") => stall(),
        _ => {}
    }
    let round = ctl.begin(&Call::default()).unwrap();
    match std::env::var("ZCOLL_TEST_PEER").as_deref() {
        Ok("stalls-mid-round") => stall(),
        Ok("finishes") => {
            round.finish(Ok(())).unwrap();
            std::process::exit(0);
        }
        _ => {}
    }
    std::mem::forget(round);
    std::process::exit(0);
}

/// Starts `dying_peer` as local rank 1 of `n` over a new segment; returns the child,
/// the segment's name and the pids every rank uses (the child's at 1, ours elsewhere).
fn spawn_dying_peer(n: usize) -> (std::process::Child, String, Vec<libc::pid_t>) {
    spawn_peer(n, "dies-mid-round")
}

/// [`spawn_dying_peer`], the peer doing `what`: `dies-mid-round` (arrives, then exits),
/// `never-arrives` (exits before it arrives), `stalls-before-arriving` or
/// `stalls-mid-round` (sleeps 30 s there, then exits), or `finishes` (arrives and
/// finishes the round).
fn spawn_peer(n: usize, what: &str) -> (std::process::Child, String, Vec<libc::pid_t>) {
    let len = Control::segment_len(n, 8192);
    let (seg, name) = Segment::create(0, len).unwrap();
    let me = std::process::id() as libc::pid_t;
    let ranks: Vec<i32> = (0..n as i32).collect();
    // Lay out the header before the peer looks at it.
    drop(Control::new(seg, 0, ranks, vec![me; n], 8192, WaitPolicy::default(), true).unwrap());
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sync::tests::dying_peer", "--ignored", "--test-threads=1"])
        .env("ZCOLL_TEST_SEGMENT", &name)
        .env("ZCOLL_TEST_RANKS", n.to_string())
        .env("ZCOLL_TEST_PEER", what)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut pids = vec![me; n];
    pids[1] = child.id() as libc::pid_t;
    (child, name, pids)
}

/// A rank that finds one peer dead still waits for every live one before it returns:
/// a live peer may be writing into its buffers. Ranks 2.. are "writing" for a while
/// after the death; rank 0 must not return before they are done.
#[test]
fn a_dead_peer_does_not_end_the_wait_for_live_ones() {
    use std::sync::atomic::AtomicUsize;
    for n in [3, 5] {
        let (mut child, name, pids) = spawn_dying_peer(n);
        let len = Control::segment_len(n, 8192);
        let policy =
            WaitPolicy { timeout: Some(std::time::Duration::from_secs(60)), ..WaitPolicy::default() };
        let writing_done = AtomicUsize::new(0);
        let ctls: Vec<Control> = [0]
            .into_iter()
            .chain(2..n)
            .map(|r| {
                let seg = Segment::open(r as i32, &name, len).unwrap();
                Control::new(seg, r, (0..n as i32).collect(), pids.clone(), 8192, policy, false).unwrap()
            })
            .collect();
        let (writing_done, pids) = (&writing_done, &pids);
        std::thread::scope(|s| {
            for ctl in ctls {
                s.spawn(move || {
                    let round = ctl.begin(&Call::default()).expect("every rank arrives");
                    if ctl.me() == 0 {
                        let e = round.finish(Ok(())).unwrap_err();
                        assert_eq!(e, Error::PeerDied { rank: 0, peer: 1, pid: pids[1] });
                        assert_eq!(
                            writing_done.load(Ordering::SeqCst),
                            n - 2,
                            "returned while a live peer was still writing"
                        );
                    } else {
                        // Outlive the dead rank by a while, as a long copy would.
                        while crate::sync::wait::alive(pids[1]) {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                        }
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        writing_done.fetch_add(1, Ordering::SeqCst);
                        let _ = round.finish(Ok(()));
                    }
                });
            }
        });
        Segment::unlink(&name);
        assert!(child.wait().unwrap().success());
    }
}

/// A rank that gives up on a round (its copy failed, its operator panicked) posts
/// `done` and no further step. Whoever waits for its step, and whoever waits for that
/// waiter's step, gets an error at once instead of waiting for ever, naming the rank that
/// gave up first.
#[test]
fn a_rank_that_gives_up_mid_round_ends_every_wait() {
    for n in [3, 5] {
        let start = std::time::Instant::now();
        let outcomes: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = node(n, 8192)
                .into_iter()
                .map(|ctl| {
                    s.spawn(move || {
                        let me = ctl.me();
                        let round = ctl.begin(&Call::default()).unwrap();
                        // A chain: rank r moves on once rank r + 1 made its step (and
                        // acknowledged it); the last rank fails instead.
                        let moved = match me == n - 1 {
                            true => Err(Error::Unsupported { rank: me as i32, what: "injected".into() }),
                            false => round.wait_progress(me + 1, 1).and_then(|()| {
                                round.post_progress(1);
                                round.wait_ack(me + 1, 1)?;
                                round.post_ack(1);
                                Ok(())
                            }),
                        };
                        round.finish(moved)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "{:?}", start.elapsed());
        for (me, outcome) in outcomes.into_iter().enumerate() {
            let want = match me == n - 1 {
                true => Error::Unsupported { rank: me as i32, what: "injected".into() },
                // Each heard it from the next, and names the rank it began with.
                false => Error::PeerFailed { rank: me as i32, peer: n as i32 - 1 },
            };
            assert_eq!(outcome, Err(want), "rank {me} of {n}");
        }
    }
}

#[test]
fn a_peer_that_dies_mid_round_is_an_error() {
    let len = Control::segment_len(2, 8192);
    let (mut child, name, pids) = spawn_dying_peer(2);
    let seg = Segment::open(0, &name, len).unwrap();
    let pid = pids[1];
    let policy = WaitPolicy { timeout: Some(std::time::Duration::from_secs(60)), ..WaitPolicy::default() };
    let ctl = Control::new(seg, 0, vec![0, 1], pids, 8192, policy, false).unwrap();
    let round = ctl.begin(&Call::default()).expect("the peer arrives before it dies");
    Segment::unlink(&name);
    assert_eq!(round.finish(Ok(())), Err(Error::PeerDied { rank: 0, peer: 1, pid }));
    assert!(child.wait().unwrap().success());
}

/// A peer that stalls past `ZCOLL_TIMEOUT` in a round where it may write into this
/// rank's buffer (before arriving, or after, without posting `done`) is fenced: killed,
/// and awaited until the kernel confirms its exit, after which the rank returns
/// `Fenced` (instead of aborting, or returning while the peer could still write).
#[test]
fn a_stalled_writer_is_fenced() {
    use std::os::unix::process::ExitStatusExt;
    for what in ["stalls-before-arriving", "stalls-mid-round"] {
        let len = Control::segment_len(2, 8192);
        let (mut child, name, pids) = spawn_peer(2, what);
        let seg = Segment::open(0, &name, len).unwrap();
        let policy =
            WaitPolicy { timeout: Some(std::time::Duration::from_millis(300)), ..WaitPolicy::default() };
        let ctl = Control::new(seg, 0, vec![0, 1], pids.clone(), 8192, policy, false).unwrap();
        let mut buf = vec![0u8; 64];
        let start = std::time::Instant::now();
        let got = ctl.begin(&Call::new(0, &[], &mut buf, true)).and_then(|round| round.finish(Ok(())));
        Segment::unlink(&name);
        let fenced = Error::Fenced { rank: 0, peer: 1, pid: pids[1], seconds: 0.3 };
        assert_eq!(got, Err(fenced), "{what}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "{what}: {:?}", start.elapsed());
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL), "{what}");
    }
}

/// A peer that stalls in a round where it may only read this rank's buffers is timed
/// out as ever, and left alone.
#[test]
fn a_stalled_reader_is_timed_out_not_fenced() {
    let len = Control::segment_len(2, 8192);
    let (mut child, name, pids) = spawn_peer(2, "stalls-mid-round");
    let seg = Segment::open(0, &name, len).unwrap();
    let policy = WaitPolicy { timeout: Some(std::time::Duration::from_millis(300)), ..WaitPolicy::default() };
    let ctl = Control::new(seg, 0, vec![0, 1], pids, 8192, policy, false).unwrap();
    let mut buf = vec![0u8; 64];
    let round = ctl.begin(&Call::new(0, &[], &mut buf, false)).unwrap();
    Segment::unlink(&name);
    assert!(matches!(round.finish(Ok(())), Err(Error::Timeout { rank: 0, peer: 1, .. })));
    assert!(child.try_wait().unwrap().is_none(), "the reader was killed");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The fence looks at the peer's flag last thing before the signal: a peer that got
/// there (posted `done`) is left alone, and a dead one is not signalled.
#[test]
fn a_peer_that_finished_is_not_fenced() {
    let len = Control::segment_len(2, 8192);
    let (mut child, name, pids) = spawn_peer(2, "finishes");
    let seg = Segment::open(0, &name, len).unwrap();
    let policy = WaitPolicy { timeout: Some(std::time::Duration::from_secs(20)), ..WaitPolicy::default() };
    let ctl = Control::new(seg, 0, vec![0, 1], pids, 8192, policy, false).unwrap();
    let mut buf = vec![0u8; 64];
    let round = ctl.begin(&Call::new(0, &[], &mut buf, true)).unwrap();
    Segment::unlink(&name);
    let done = || ctl.slot(1).done.load(Ordering::Acquire) >= 1;
    while !done() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(ctl.fence(1, done), fence::Fence::Passed);
    assert_eq!(round.finish(Ok(())), Ok(()));
    assert!(child.wait().unwrap().success());
    assert_eq!(ctl.fence(1, || false), fence::Fence::Dead);
}
