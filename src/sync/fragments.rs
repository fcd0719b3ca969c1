//! The copies of the layout collectives: a read with runs of fragments on both sides
//! ([`Round::read_scatter`], through the one road `Round::copy`), and the flattened
//! layout a peer published for the round ([`Round::peer_list`]), which a reader fetches
//! once and then remembers by its key (`coll::layout`).

use super::Round;
use crate::error::Result;
use crate::layout::runs::Runs;
use crate::transport::{self, Read, RemoteBuf};

impl Round<'_> {
    /// Copies the bytes the runs `remote` select in `src`, local rank `peer`'s buffer, in
    /// order, onto those the runs `local` select in `dst`, in order (both sides
    /// non-contiguous: no packing on either side).
    ///
    /// # Errors
    ///
    /// `Error::Transport` naming the transport and the peer (`EINVAL` if a range lies
    /// outside its buffer or the two lists' lengths differ in sum).
    pub(crate) fn read_scatter<A>(
        &self,
        src: &RemoteBuf<'_, A>,
        peer: usize,
        remote: &Runs,
        dst: &mut [u8],
        local: &Runs,
    ) -> Result<()> {
        self.copy(src.kind(), false, peer, local.bytes, || transport::read_scatter(src, remote, dst, local))
    }

    /// The range local rank `r` published for this round in its metadata words `at`
    /// (address) and `at + 1` (length in bytes), to read from: a buffer of its own it keeps
    /// alive and unchanged until the round ends (its flattened layout). Mapped here where
    /// the node maps every address space (XPMEM) or where the list lies in the peer's heap
    /// (a rank keeps its lists there when peers map heaps), else read with CMA.
    pub(crate) fn peer_list(&self, r: usize, at: usize) -> RemoteBuf<'_, Read> {
        let (addr, len) = (self.meta(r, at) as usize, self.meta(r, at + 1) as usize);
        // SAFETY: rank `r` published this range in its metadata of this round (the layout
        // collectives' contract: words `at`, `at + 1` name a buffer it owns, keeps alive and
        // does not write until it has seen every rank's `done`); we saw its arrival with
        // Acquire, and the handle borrows `self`, so it cannot outlive our `finish`. A
        // range that was not so published can only fail the copy (CMA and XPMEM check the
        // peer's mappings), never touch memory of ours; a range outside the peer's heap
        // is not located there, and is read with CMA.
        unsafe { RemoteBuf::new(self.ctl.pids[r], addr, len).map(&self.ctl.links, r, true) }
    }
}

impl super::Control {
    /// Whether peers copy `buf`, this rank's, with loads and stores: the node maps every
    /// address space (XPMEM), or peers map heaps and `buf` lies in this rank's heap.
    pub(crate) fn reaches_by_loads(&self, buf: &[u8]) -> bool {
        self.links.xpmem.is_some()
            || (self.links.heap.is_some() && transport::heap::holds(buf.as_ptr() as usize, buf.len()))
    }
}
