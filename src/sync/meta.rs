//! Per-call metadata that does not fit a call record: the counts and displacements of the
//! variable-count collectives.
//!
//! A call record has a few words; a variable-count call has two per rank. A rank writes
//! its metadata words at the start of the half of its **own staging area** that the round
//! stages in, before it arrives ([`Control::begin_staged`], whose payload may follow the
//! words); its peers read them after the arrive phase ([`Round::meta`]). The half is idle
//! then (see `begin_staged`), and nobody touches another rank's staging area outside a
//! round. The arrival's Release (and the readers' Acquire in `begin`) orders the words
//! before every peer's reads, exactly as it orders the call record.
//!
//! The words stay valid for the whole round unless their owner stages data through its
//! area in the same round. Then the owner must first know that every peer has finished
//! reading them: each rank calls [`Round::release_meta`] once it has read everything it
//! needs (it posts `progress` step 0, which no algorithm's wait asks for: the staged and
//! throttled copies wait for steps of at least 1), and the owner waits for all of
//! them with [`Round::reclaim_meta`], which also posts `ack` step 0 so that ranks that
//! write into the owner's area can wait for that with [`Round::wait_meta_reclaimed`].
//!
//! The words are read and written with atomic operations on the shared mapping, never
//! through a `&[u64]`: a peer's area is memory another process can change.

use super::{Control, Round};
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering};

/// Metadata words a rank stages with its arrival ([`Control::begin_staged_with`]): words
/// in a slice or an array, or words computed straight into the area ([`Filled`]), so that
/// a call builds no buffer of them first.
pub(crate) trait Meta {
    /// How many words.
    fn words(&self) -> usize;
    /// Writes word `i` to `out.set(i, ..)` for every `i` in `0..words()`.
    fn write(&self, out: &Slots<'_>);
}

impl Meta for &[u64] {
    #[inline]
    fn words(&self) -> usize {
        self.len()
    }

    #[inline]
    fn write(&self, out: &Slots<'_>) {
        // Zipped slices, not a word index each: this runs on every call that stages words.
        out.0.iter().zip(self.iter()).for_each(|(slot, &w)| slot.store(w, Ordering::Relaxed));
    }
}

impl<const N: usize> Meta for [u64; N] {
    #[inline]
    fn words(&self) -> usize {
        N
    }

    #[inline]
    fn write(&self, out: &Slots<'_>) {
        (&self[..]).write(out)
    }
}

/// `.0` metadata words that the closure `.1` writes straight into the area, every one of
/// them (a word it skips holds what an earlier round left there).
pub(crate) struct Filled<F>(pub(crate) usize, pub(crate) F);

impl<F: Fn(&Slots<'_>)> Meta for Filled<F> {
    #[inline]
    fn words(&self) -> usize {
        self.0
    }

    #[inline]
    fn write(&self, out: &Slots<'_>) {
        (self.1)(out)
    }
}

/// The metadata words a rank is about to publish, in its own staging area: write-only,
/// exactly as many as its [`Meta`] declared.
pub(crate) struct Slots<'a>(&'a [AtomicU64]);

impl<'a> Slots<'a> {
    /// Slots over `words`, to test a [`Meta`] writer outside a staging area.
    #[cfg(test)]
    pub(crate) fn over(words: &'a [AtomicU64]) -> Slots<'a> {
        Slots(words)
    }

    /// Sets word `i`.
    ///
    /// # Panics
    ///
    /// If `i` is not below the number of words declared.
    #[inline]
    pub(crate) fn set(&self, i: usize, w: u64) {
        // Relaxed: the Release store of the arrival publishes it (`Control::begin`).
        self.0[i].store(w, Ordering::Relaxed);
    }

    /// Sets the words from `at` on to `words`, in order: one bounds check for them all.
    ///
    /// # Panics
    ///
    /// If they do not all fall below the number of words declared.
    #[inline]
    pub(crate) fn set_from(&self, at: usize, words: impl ExactSizeIterator<Item = u64>) {
        let slots = &self.0[at..at + words.len()];
        // Relaxed, as in `set`.
        slots.iter().zip(words).for_each(|(slot, w)| slot.store(w, Ordering::Relaxed));
    }
}

impl Control {
    /// Writes `meta` at the start of this rank's metadata area for round `epoch`, and
    /// `tail` at its end.
    ///
    /// # Panics
    ///
    /// If the two do not fit the area together.
    #[inline]
    pub(super) fn write_meta(&self, epoch: u64, meta: &(impl Meta + ?Sized), tail: &(impl Meta + ?Sized)) {
        let (head, end) = (meta.words(), tail.words());
        if head + end == 0 {
            return;
        }
        let area = self.meta_area(self.me, epoch);
        assert!(head + end <= area.len(), "{head} + {end} metadata words do not fit the area");
        meta.write(&Slots(&area[..head]));
        tail.write(&Slots(&area[area.len() - end..]));
    }
}

impl Control {
    /// How many metadata words a rank can publish: the half of its staging area a round
    /// stages in (see [`begin_staged`](Control::begin_staged)), in 8-byte words.
    pub(crate) fn meta_words(&self) -> usize {
        self.one_phase_bytes() / 8
    }

    /// The metadata words local rank `r` stages for round `epoch`: the half of its staging
    /// area that round stages in, as atomics (see [`begin_staged`](Control::begin_staged)).
    pub(super) fn meta_area(&self, r: usize, epoch: u64) -> &[AtomicU64] {
        let at = (epoch % 2) as usize * self.one_phase_bytes();
        // SAFETY: `stage(r)` is page aligned and `stage_bytes` long, so either half of it
        // is 8-byte aligned and `meta_words()` words long, inside the mapping, which lives
        // as long as `self`. The segment is shared memory that every rank accesses only
        // through atomics or through copies ordered by the round's step counters (see the
        // module docs), so viewing the half as `AtomicU64`s races with no non-atomic access.
        unsafe { std::slice::from_raw_parts(self.stage(r).add(at).cast::<AtomicU64>(), self.meta_words()) }
    }

    /// Word `i` of the metadata local rank `r` stages for round `epoch`, as an atomic.
    ///
    /// # Panics
    ///
    /// If word `i` lies outside the half of the staging area a round stages in.
    pub(super) fn meta_word(&self, r: usize, epoch: u64, i: usize) -> &AtomicU64 {
        match self.meta_area(r, epoch).get(i) {
            Some(w) => w,
            None => panic!("metadata word {i} is outside the staging area"),
        }
    }
}

impl Round<'_> {
    /// Metadata word `i` that local rank `r` published with
    /// [`begin_staged`](Control::begin_staged) for this round. Meaningful only for a
    /// rank that called the same collective (check the call first) and only until `r`
    /// reclaims its area.
    pub(crate) fn meta(&self, r: usize, i: usize) -> u64 {
        // Relaxed: `begin` saw `r`'s arrival with Acquire, after `r` stored the word.
        self.ctl.meta_word(r, self.epoch, i).load(Ordering::Relaxed)
    }

    /// Where a tail of `len` metadata words starts
    /// ([`begin_staged_with`](Control::begin_staged_with)): the word index to pass to
    /// [`meta`](Round::meta) for its first word.
    pub(crate) fn tail_at(&self, len: usize) -> usize {
        self.ctl.meta_words() - len
    }

    /// Says that this rank has read every metadata word it needs in this round. Must come
    /// before any other `progress` this rank posts in the round (it posts step 0).
    pub(crate) fn release_meta(&self) {
        self.post_progress(0);
    }

    /// Waits until every other rank has released the metadata of this round, so that this
    /// rank may stage data through its own area; then says so with `ack` step 0 (which
    /// must come before any other `ack` this rank posts in the round). A rank that left
    /// the round ([`Round::left`]) read nothing of it and is not awaited.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn reclaim_meta(&self) -> Result<()> {
        for r in (0..self.size()).filter(|&r| r != self.me() && !self.left(r)) {
            self.wait_progress(r, 0)?;
        }
        self.post_ack(0);
        Ok(())
    }

    /// Waits until local rank `owner` has reclaimed its area with
    /// [`reclaim_meta`](Round::reclaim_meta), before writing into it.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn wait_meta_reclaimed(&self, owner: usize) -> Result<()> {
        self.wait_ack(owner, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_node;
    use super::super::{Call, Toward};

    /// Every rank publishes words that depend on the round, reads every peer's, then the
    /// owner of the round stages over its area once the others released it: the words of
    /// the next round are never mixed with the bytes of this one.
    #[test]
    fn metadata_is_read_before_the_owner_reuses_its_area() {
        let n = 4;
        let words = 8192 / 2 / 8;
        on_node(n, |ctl| {
            let me = ctl.me();
            for round in 0..200u64 {
                let owner = (round % n as u64) as usize;
                let len = 1 + (round as usize * 37) % words;
                let meta: Vec<u64> = (0..len as u64).map(|i| round << 40 | (me as u64) << 32 | i).collect();
                let r = ctl.begin_staged(&Call::default(), &meta, &[]).unwrap();
                for peer in 0..n {
                    for i in [0, len / 2, len - 1] {
                        assert_eq!(r.meta(peer, i), round << 40 | (peer as u64) << 32 | i as u64);
                    }
                }
                r.release_meta();
                let mut mine = vec![0u8; 3000];
                let moved = if me == owner {
                    let whole = vec![round as u8; 3000 * n];
                    let parts: Vec<_> = (0..n).map(|q| q * 3000..(q + 1) * 3000).collect();
                    r.reclaim_meta()
                        .and_then(|()| r.stage_parts(Toward::Peers, owner, &parts, &whole, &mut []))
                } else {
                    let parts: Vec<_> = (0..n).map(|q| q * 3000..(q + 1) * 3000).collect();
                    r.stage_parts(Toward::Peers, owner, &parts, &[], &mut mine)
                };
                r.finish(moved).unwrap();
                if me != owner {
                    assert!(mine.iter().all(|&b| b == round as u8));
                }
            }
        });
    }
}
