//! The PAP packet exchange through the point-to-point FIFOs (copy-in/copy-out): what a
//! rank owes each peer, pushed as far as the rings have room, while it takes what lands
//! in its own FIFO. PAP-Direct's staged variant and PAP-Shm-Direct's `cico` legs use it.

use super::{TO_OUTBOX, TO_RECV, TO_SCATTER};
use crate::error::{Error, Result};
use crate::sync::Round;

/// Where the bytes of a [`Run`] come from: the rank's send buffer, or (at a leader) the
/// inbox region of a source node that has landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Send,
    Region(usize),
}

/// One run of bytes a rank owes a peer through the peer's point-to-point FIFO: `len`
/// bytes from offset `from` of `src`, to offset `to` of the stream's buffer at the peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub(crate) stream: u32,
    pub(crate) src: Src,
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) len: usize,
}

/// The streams of the packets, by index in [`Packets::expected`].
const STREAMS: [u32; 3] = [TO_RECV, TO_OUTBOX, TO_SCATTER];

/// Copy-in/copy-out through the point-to-point FIFOs: what a rank owes each peer (in the
/// order it serves them), pushed as far as the rings have room, while it takes what lands
/// in its own FIFO.
pub(crate) struct Packets {
    /// Per peer to serve: the peer, and the runs still owed to it (the first partly sent).
    pub(crate) owed: Vec<(usize, std::collections::VecDeque<Run>)>,
    /// Bytes still expected in this rank's own FIFO, per stream of [`STREAMS`].
    pub(crate) expected: [usize; 3],
}

impl Packets {
    pub(crate) fn new(order: impl Iterator<Item = usize>) -> Packets {
        Packets { owed: order.map(|q| (q, Default::default())).collect(), expected: [0; 3] }
    }

    /// Adds `run` to what this rank owes `q`.
    pub(crate) fn owe(&mut self, q: usize, run: Run) {
        if run.len == 0 {
            return;
        }
        match self.owed.iter_mut().find(|(r, _)| *r == q) {
            Some((_, runs)) => runs.push_back(run),
            None => self.owed.push((q, std::iter::once(run).collect())),
        }
    }

    /// Whether everything owed has been pushed.
    pub(crate) fn pushed(&self) -> bool {
        self.owed.iter().all(|(_, runs)| runs.is_empty())
    }

    /// Pushes to every arrived peer that `agrees` as much as its ring takes now, the bytes
    /// coming from `source`. Returns `false` if an arrived peer that is owed data does not
    /// agree (the verdict names it).
    pub(crate) fn push<'x>(
        &mut self,
        round: &Round<'_>,
        agrees: &dyn Fn(usize) -> bool,
        source: &dyn Fn(Src) -> &'x [u8],
    ) -> bool {
        for (q, runs) in &mut self.owed {
            if runs.is_empty() || !round.arrived(*q) {
                continue;
            }
            if !agrees(*q) {
                return false;
            }
            let (fifo, _) = round.p2p(*q);
            let payload = fifo.payload();
            while let Some(run) = runs.front_mut() {
                let len = payload.min(run.len);
                let bytes = &source(run.src)[run.from..run.from + len];
                if !fifo.try_push(run.stream, run.to as u64, bytes) {
                    break;
                }
                run.from += len;
                run.to += len;
                run.len -= len;
                if run.len == 0 {
                    runs.pop_front();
                }
            }
        }
        true
    }

    /// Takes every packet that has landed in this rank's FIFO, into `recv` (streams
    /// `TO_RECV` and `TO_SCATTER`) or `outbox` (`TO_OUTBOX`) at the offset it names.
    ///
    /// # Errors
    ///
    /// `Protocol` for a packet of another stream, beyond the buffer, or beyond what the
    /// stream still expects; a FIFO wait's error.
    pub(crate) fn take(&mut self, round: &Round<'_>, recv: &mut [u8], outbox: &mut [u8]) -> Result<()> {
        let (fifo, cursor) = round.p2p(round.me());
        while let Some(h) = fifo.peek(cursor) {
            let k = STREAMS.iter().position(|&s| s == h.stream);
            let dst: &mut [u8] = if h.stream == TO_OUTBOX { &mut *outbox } else { &mut *recv };
            let at = h.meta as usize;
            let fits = at.checked_add(h.len).is_some_and(|end| end <= dst.len());
            match k {
                Some(k) if fits && h.len <= self.expected[k] => {
                    fifo.pop(cursor, &mut dst[at..at + h.len])?;
                    self.expected[k] -= h.len;
                }
                _ => {
                    let mut sink = vec![0u8; fifo.payload()];
                    fifo.pop(cursor, &mut sink)?;
                    return Err(Error::Protocol {
                        rank: round.rank_of(round.me()),
                        what: format!("a point-to-point packet {h:?} outside the alltoall's buffers"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether something can be done now: a packet to take, or room at an arrived peer
    /// that is owed data.
    pub(crate) fn ready(&self, round: &Round<'_>) -> bool {
        let (fifo, cursor) = round.p2p(round.me());
        fifo.peek(cursor).is_some()
            || self
                .owed
                .iter()
                .any(|(q, runs)| !runs.is_empty() && round.arrived(*q) && round.p2p(*q).0.has_room())
    }
}
