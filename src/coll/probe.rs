//! The measurements behind calibration: timed CMA reads and writes, uncontended and with
//! `c` concurrent readers of one process, a local `memcpy`, and the flag hand-off latency.
//!
//! One round: local rank 0 publishes a buffer of [`PROBE_BYTES`]; the other ranks take
//! turns reading it, with flag barriers (`progress` steps) between the phases so that
//! exactly the intended readers run at once. Each rank returns what it measured; the
//! caller gathers and fits.
//!
//! Every rank also publishes its socket (the physical package of the CPUs its affinity
//! mask allows, when they share one; `ZCOLL_VIRTUAL_SOCKETS=k` puts local rank `r` on
//! socket `r % k` instead, to exercise the measurement on a machine of one socket), and
//! the ranks on another socket than local rank 0 measure the contention across sockets.

use super::{check, op, Ctx, Kind};
use crate::error::{Error, Result};
use crate::sync::copy_block;
use crate::sync::{wait, Call, Round};
use crate::tune::calibrate::{self, Samples};
use crate::tune::fit::Transfer;
use std::time::Instant;

/// The buffer the readers read: 1024 pages, the most one CMA call pins at a time.
pub(crate) const PROBE_BYTES: usize = 1024 * 4096;
/// Page counts of the uncontended transfers.
const PAGES: [usize; 6] = [1, 4, 16, 64, 256, 1024];

/// The median of `v` (the upper one of an even count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        ts.push(t.elapsed().as_secs_f64());
    }
    Ok(median(ts))
}

/// Measures this node, `reps` repetitions per point. Every local rank calls it; `buf`
/// is `PROBE_BYTES` long on every rank (local rank 0's is read by the others).
///
/// # Errors
///
/// `Unsupported` on a node without CMA; a transport error or a peer's failure.
pub(crate) fn measure(ctx: &Ctx<'_>, buf: &mut [u8], reps: usize) -> Result<Samples> {
    let socket = match std::env::var("ZCOLL_VIRTUAL_SOCKETS") {
        Err(_) => calibrate::socket_of(&wait::affinity()),
        Ok(k) => match k.trim().parse::<usize>() {
            Ok(k) if k > 0 => Some(ctx.ctl.me() % k),
            // Every rank reads the same value, so every rank returns here, before the round.
            _ => {
                return Err(Error::Config {
                    name: "ZCOLL_VIRTUAL_SOCKETS",
                    value: k,
                    expected: "a positive integer",
                })
            }
        },
    };
    let call = Call {
        op: op(Kind::Probe, 0, reps as u32),
        send: buf.as_ptr() as usize,
        send_len: buf.len(),
        // Local rank 1 also writes into local rank 0's buffer.
        recv: buf.as_mut_ptr() as usize,
        recv_len: buf.len(),
        recv_writable: ctx.ctl.me() == 0,
        aux2: socket.map_or(UNKNOWN, |s| s as u64),
        ..Call::default()
    };
    let round = check(ctx, call, false, |r| super::all_equal(r, Round::send_len, PROBE_BYTES))?;
    let measured = if ctx.transport != crate::transport::TransportKind::Cma {
        Err(Error::Unsupported { rank: round.rank_of(round.me()), what: "calibration without CMA".into() })
    } else {
        phases(&round, buf, reps.max(1))
    };
    if measured.is_err() {
        // Every later step of ours, at once: peers waiting for one go on to the finish,
        // which tells them of the failure, instead of waiting for us forever.
        round.post_progress(u32::MAX);
    }
    round.finish(measured.as_ref().map(|_| ()).map_err(Clone::clone)).and(measured)
}

/// The published socket of a rank whose socket is not known.
const UNKNOWN: u64 = u64::MAX;

/// A flag barrier among the local ranks: everyone posts `step`, everyone waits for all.
fn barrier(round: &Round<'_>, step: u32) -> Result<()> {
    round.post_progress(step);
    (0..round.size()).try_for_each(|r| round.wait_progress(r, step))
}

fn phases(round: &Round<'_>, buf: &mut [u8], reps: usize) -> Result<Samples> {
    let (me, p) = (round.me(), round.size());
    let mut out = Samples { machine_sockets: calibrate::machine_sockets(), ..Samples::default() };
    let step = std::cell::Cell::new(0u32);
    let next = || {
        step.set(step.get() + 1);
        step.get()
    };
    // The local copy, on every rank.
    let half = buf.len() / 2;
    let (a, b) = buf.split_at_mut(half);
    out.memcpy_beta = time(reps, || {
        copy_block(a, b);
        Ok(())
    })? / half as f64;
    barrier(round, next())?;
    if p == 1 {
        return Ok(out);
    }
    // Uncontended: local rank 1 alone reads rank 0's buffer and writes into it, one copy
    // at a time, each of lines rank 0 has just touched, as in a collective: a sender has
    // just filled what its peers read, a receiver has just read what its peers overwrite
    // (a write into lines their owner holds cost 1.8x the read here). Rank 0 touches and
    // hands over, rank 1 copies and hands back. Then the pin-only reads, of one byte.
    let first = step.get() + 1;
    let mut dst = vec![0u8; if me == 1 { PROBE_BYTES } else { 0 }];
    let mut handoff = first;
    for pages in PAGES {
        let n = pages * 4096;
        for write in [false, true] {
            let mut ts = Vec::with_capacity(reps);
            for rep in 0..reps {
                let s = handoff;
                handoff += 1;
                if me == 0 {
                    if write {
                        std::hint::black_box(buf[..n].iter().step_by(64).fold(0u8, |x, &b| x ^ b));
                    } else {
                        buf[..n].fill(rep as u8);
                    }
                    round.post_progress(s);
                    round.wait_progress(1, s)?;
                } else if me == 1 {
                    round.wait_progress(0, s)?;
                    let t = Instant::now();
                    round.cma_copy(0, write, &mut dst[..n])?;
                    ts.push(t.elapsed().as_secs_f64());
                    round.post_progress(s);
                }
            }
            if me == 1 {
                let sample = Transfer { bytes: n as f64, pages: pages as f64, seconds: median(ts) };
                if write { &mut out.writes } else { &mut out.transfers }.push(sample);
            }
        }
        if me == 1 {
            let pin = time(reps, || round.cma_pin(0, n))?;
            out.transfers.push(Transfer { bytes: 1.0, pages: pages as f64, seconds: pin });
        }
    }
    step.set(handoff - 1);
    barrier(round, next())?;
    // Contended: ranks 1..=c pin all of rank 0's pages at once.
    for c in 1..p {
        let s = next();
        if (1..=c).contains(&me) {
            let t = time(reps, || round.cma_pin(0, PROBE_BYTES))?;
            out.contended.push((c, t));
        }
        barrier(round, s)?;
    }
    // Across sockets: ranks on another socket than rank 0 pin its pages, 1, 2, ... at once.
    let sockets: Vec<u64> = (0..p).map(|r| round.aux2(r)).collect();
    out.sockets = if sockets.contains(&UNKNOWN) {
        0
    } else {
        let mut distinct = sockets.clone();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.len()
    };
    let remote: Vec<usize> = (1..p)
        .filter(|&r| sockets[0] != UNKNOWN && sockets[r] != UNKNOWN && sockets[r] != sockets[0])
        .collect();
    for c in 1..=remote.len() {
        let s = next();
        if remote[..c].contains(&me) {
            let t = time(reps, || round.cma_pin(0, PROBE_BYTES))?;
            out.cross.push((c, t));
        }
        barrier(round, s)?;
    }
    // Flag hand-off: ranks 0 and 1 ping-pong on their progress counters; half the median
    // round trip (a mean would let one descheduled round trip, milliseconds, swamp the
    // hundreds of sub-microsecond ones).
    let base = next();
    if me <= 1 {
        let other = 1 - me;
        let rounds = 200u32;
        let mut trips = Vec::with_capacity(rounds as usize);
        for i in 0..rounds {
            let ping = base + 1 + 2 * i;
            let t = Instant::now();
            if me == 0 {
                round.post_progress(ping);
                round.wait_progress(other, ping + 1)?;
            } else {
                round.wait_progress(other, ping)?;
                round.post_progress(ping + 1);
            }
            trips.push(t.elapsed().as_secs_f64());
        }
        trips.sort_by(f64::total_cmp);
        out.flag = Some(trips[trips.len() / 2] / 2.0);
    }
    Ok(out)
}
