//! What the exchanges (allgather, alltoall) need of a round beyond the broadcast's: reading
//! the part of a peer's receive buffer that the peer has announced complete, and
//! copy-in/copy-out through the staging areas when every rank both produces and consumes.
//!
//! The staged exchanges use both step counters of the round: `progress` counts the chunks
//! a rank has put into its own staging area, `ack` the chunks it has copied out of its
//! peers' areas. Both are cumulative over the round and deterministic: every rank can
//! compute, from the call's shape alone, which value of a peer's counter means that the
//! peer has produced or consumed a given chunk. A producer refills half `g % 2` of its
//! area with its chunk `g` only once the consumer of its chunk `g - 2` has acknowledged
//! it, so an area of two halves carries any number of chunks.

use super::publish::{copy_for_peers, copy_from_peers};
use super::Round;
use crate::error::Result;
use crate::transport::{Read, RemoteBuf};

/// Where a staged exchange moves the bytes of one (producer, consumer) pair: `len` bytes
/// from offset `from` of the producer's `send` to offset `to` of the consumer's `recv`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) len: usize,
    pub(crate) from: usize,
    pub(crate) to: usize,
}

impl Round<'_> {
    /// The receive buffer local rank `r` published, to read from. Readers only read the
    /// parts `r` has announced complete (through `progress`), which `r` no longer writes.
    pub(crate) fn remote_recv_read(&self, r: usize) -> RemoteBuf<'_, Read> {
        let c = self.published(r);
        // SAFETY: rank `r` published this range for this round (we saw its `arrive` with
        // Acquire in `begin` or in `published`; an empty range if not), from a borrow it
        // holds until it returns, which is after every rank, us included, has posted
        // `done` in `finish`; the handle's borrow of `self` ends before that. Only reads
        // go through it, and the collectives read only blocks the owner has finished
        // writing (a protocol error would copy stale bytes into our own buffer, never
        // touch memory outside the published range).
        unsafe { RemoteBuf::new(self.ctl.pids[r], c.recv, c.recv_len) }
    }

    /// Allgather through the staging areas: every local rank's block of `n` bytes, taken
    /// from `recv[me * n..]`, ends up at `recv[r * n..]` of every rank `r`.
    ///
    /// The blocks move in levels of half a staging area: at level `c` every rank copies
    /// chunk `c` of its block into half `c % 2` of its own area and publishes
    /// `progress = c + 1`, then copies chunk `c` of every peer's block out of the peer's
    /// area and publishes `ack = c + 1`. A rank refills a half only after every peer has
    /// acknowledged the level that last used it. Per rank: `n` bytes in, `(p - 1) n` out.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting.
    ///
    /// # Panics
    ///
    /// If `recv` is shorter than `size() * n` (the caller checked the lengths).
    pub(crate) fn stage_allgather(&self, recv: &mut [u8], n: usize) -> Result<()> {
        let (p, me) = (self.size(), self.me());
        assert!(recv.len() >= p * n, "stage_allgather: a receive buffer of {} < {p} x {n}", recv.len());
        if p == 1 {
            return Ok(());
        }
        let half = self.ctl.stage_bytes() / 2;
        let area = self.ctl.stage(me);
        for c in 0..n.div_ceil(half) {
            let (lo, at) = (c * half, (c % 2) * half);
            let len = half.min(n - lo);
            let level = c as u32 + 1;
            if c >= 2 {
                for r in (0..p).filter(|&r| r != me) {
                    self.wait_ack(r, level - 2)?;
                }
            }
            let mine = &recv[me * n + lo..me * n + lo + len];
            // SAFETY: `at + len <= 2 * half <= stage_bytes`, inside our own staging area.
            // Every peer acknowledged level `c - 2`, the last that used this half (read with
            // Acquire above), and none reads it again before we publish `level` below.
            unsafe { copy_for_peers(mine, area.add(at)) };
            self.post_progress(level);
            for k in 1..p {
                // Start with the next rank, so that the readers of one area are spread.
                let src = (me + k) % p;
                self.wait_progress(src, level)?;
                let out = &mut recv[src * n + lo..src * n + lo + len];
                // SAFETY: `src` published chunk `c` in this half with Release and we saw
                // `level` with Acquire; it refills the half only after we acknowledge this
                // level, so the bytes are stable while we copy them into our own buffer.
                unsafe { copy_from_peers(self.ctl.stage(src).add(at), out) };
            }
            self.post_ack(level);
        }
        Ok(())
    }

    /// A pairwise exchange through the staging areas: at step `s = 1, ..., p - 1` rank `r`
    /// produces for rank `(r + s) % p` and consumes from rank `(r - s) % p`; the pair
    /// (`src`, `dst`) moves `span(src, dst)` in chunks of half a staging area. Pairs of a
    /// rank with itself are skipped (the caller copies locally).
    ///
    /// Every rank passes the same `span` function. Each iteration `i` produces the rank's
    /// `i`-th chunk, then consumes its `i`-th: that cannot deadlock when every chunk is
    /// consumed at the same index it was produced at (all spans of one length, as in an
    /// alltoall), or when no rank both produces and consumes (a gather to one rank, a
    /// scatter from one rank), which are the only shapes zcoll uses.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout` while waiting.
    ///
    /// # Panics
    ///
    /// If a span lies outside `send` or `recv` (the caller checked the lengths).
    pub(crate) fn stage_pairwise(
        &self,
        send: &[u8],
        recv: &mut [u8],
        span: impl Fn(usize, usize) -> Span,
    ) -> Result<()> {
        let (p, me) = (self.size(), self.me());
        if p == 1 {
            return Ok(());
        }
        let half = self.ctl.stage_bytes() / 2;
        let chunks = |src: usize, dst: usize| span(src, dst).len.div_ceil(half);
        // What this rank produces, step by step (to rank me + s), and consumes (from me - s).
        let to = |s: usize| (me + s) % p;
        let from = |s: usize| (me + p - s) % p;
        // The ack a consumer `q` has posted once it has consumed everything before its step
        // `s`: the chunks of steps 1..s, in order.
        let consumed_before = |q: usize, s: usize| (1..s).map(|t| chunks((q + p - t) % p, q)).sum::<usize>();
        // For each of our steps: the first index of its chunks in our sequence, and the ack
        // value before which its consumer has not reached them.
        let mut produce = Vec::with_capacity(p);
        let mut total = 0;
        for s in 1..p {
            let (q, c) = (to(s), chunks(me, to(s)));
            produce.push((total, c, q, consumed_before(q, s)));
            total += c;
        }
        // What this rank consumes, step by step: the first index of the step's chunks in
        // our sequence, their number, the producer, and the index of the first of them in
        // the producer's sequence.
        let mut consume = Vec::with_capacity(p);
        let mut consume_total = 0;
        for s in 1..p {
            let (src, c) = (from(s), chunks(from(s), me));
            let theirs = (1..s).map(|t| chunks(src, (src + t) % p)).sum::<usize>();
            consume.push((consume_total, c, src, theirs));
            consume_total += c;
        }
        let step_of = |steps: &[(usize, usize, usize, usize)], i: usize| {
            steps.iter().rposition(|&(first, c, _, _)| c > 0 && first <= i).expect("a step holds chunk i")
        };
        let area = self.ctl.stage(me);
        for i in 0..total.max(consume_total) {
            if i < total {
                if i >= 2 {
                    // Who consumes our chunk i - 2, the last one in this half, and which of its
                    // acks says it has.
                    let (first, _, q, before) = produce[step_of(&produce, i - 2)];
                    self.wait_ack(q, (before + (i - 2 - first) + 1) as u32)?;
                }
                let (first, _, q, _) = produce[step_of(&produce, i)];
                let sp = span(me, q);
                let lo = (i - first) * half;
                let len = half.min(sp.len - lo);
                let piece = &send[sp.from + lo..sp.from + lo + len];
                // SAFETY: `(i % 2) * half + len <= stage_bytes`, inside our own area. The
                // consumer of chunk `i - 2`, the last one in this half, has acknowledged it
                // (Acquire above), and no consumer reads the half again before we publish
                // `i + 1` below.
                unsafe { copy_for_peers(piece, area.add((i % 2) * half)) };
                self.post_progress(i as u32 + 1);
            }
            if i < consume_total {
                let (first, _, src, theirs) = consume[step_of(&consume, i)];
                let theirs = theirs + (i - first);
                self.wait_progress(src, theirs as u32 + 1)?;
                let sp = span(src, me);
                let lo = (i - first) * half;
                let len = half.min(sp.len - lo);
                let out = &mut recv[sp.to + lo..sp.to + lo + len];
                // SAFETY: `src` published its chunk `theirs` in half `theirs % 2` with Release
                // and we saw it with Acquire; it refills that half only after we acknowledge
                // this chunk below, so the bytes are stable while we copy them.
                unsafe { copy_from_peers(self.ctl.stage(src).add((theirs % 2) * half), out) };
                self.post_ack(i as u32 + 1);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::super::Call;
    use super::Span;

    fn byte(src: usize, dst: usize, i: usize) -> u8 {
        (src * 131 + dst * 17 + i * 7 + i / 251) as u8
    }

    #[test]
    fn staged_allgather_delivers_every_block() {
        let n = 4;
        let sizes = [0usize, 1, 4095, 4096, 4097, 8192 * 2 + 5, 30_001];
        on_node(n, |ctl| {
            for &len in &sizes {
                let me = ctl.me();
                let mut recv = vec![0xAAu8; n * len + 1];
                for i in 0..len {
                    recv[me * len + i] = byte(me, 0, i);
                }
                let round = ctl.begin(&Call::default()).unwrap();
                let moved = round.stage_allgather(&mut recv[..n * len], len);
                round.finish(moved).unwrap();
                for r in 0..n {
                    let block = &recv[r * len..(r + 1) * len];
                    assert!(block.iter().enumerate().all(|(i, &b)| b == byte(r, 0, i)), "len {len}");
                }
                assert_eq!(recv[n * len], 0xAA);
            }
        });
    }

    #[test]
    fn staged_pairwise_is_an_alltoall_a_gather_and_a_scatter() {
        let n = 3;
        on_node(n, |ctl| {
            let me = ctl.me();
            for len in [0usize, 1, 4096, 4097, 20_000] {
                // Alltoall: block dst of our send goes to block me of dst's recv.
                let send: Vec<u8> = (0..n * len).map(|i| byte(me, i / len.max(1), i % len.max(1))).collect();
                let mut recv = vec![0u8; n * len];
                let round = ctl.begin(&Call::default()).unwrap();
                let span = |src: usize, dst: usize| Span { len, from: dst * len, to: src * len };
                let moved = round.stage_pairwise(&send, &mut recv, span);
                round.finish(moved).unwrap();
                for src in (0..n).filter(|&r| r != me) {
                    for i in 0..len {
                        assert_eq!(recv[src * len + i], byte(src, me, i), "alltoall len {len}");
                    }
                }
                // Gather to rank 1 and scatter from rank 2, with 2 len bytes per rank.
                for root in [1usize, 2] {
                    let gather = root == 1;
                    let big = 2 * len;
                    let send: Vec<u8> = (0..n * big).map(|i| byte(me, root, i)).collect();
                    let mut recv = vec![0u8; n * big];
                    let span = |src: usize, dst: usize| match (gather, src == root, dst == root) {
                        (true, _, true) => Span { len: big, from: 0, to: src * big },
                        (false, true, _) => Span { len: big, from: dst * big, to: 0 },
                        _ => Span::default(),
                    };
                    let round = ctl.begin(&Call::default()).unwrap();
                    let moved = round.stage_pairwise(&send, &mut recv, span);
                    round.finish(moved).unwrap();
                    if gather && me == root {
                        for src in (0..n).filter(|&r| r != root) {
                            for i in 0..big {
                                assert_eq!(recv[src * big + i], byte(src, root, i));
                            }
                        }
                    } else if !gather && me != root {
                        for (i, &b) in recv[..big].iter().enumerate() {
                            assert_eq!(b, byte(root, root, me * big + i));
                        }
                    }
                }
            }
        });
    }
}
