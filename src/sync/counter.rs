//! Message counters (Blue Gene/P DCMF): a buffer that becomes ready piece by piece, read
//! by its peers as it grows.
//!
//! The owner of a buffer publishes its address in the round (`send`) and how much of it
//! is ready: `progress` = chunks ready, a sequence number like every step counter.
//! Readers keep their own count, copy each newly ready range straight out of the owner's
//! buffer (one copy), and when done add one to the owner's completion counter. The owner
//! may reuse its buffer once the completion counter has grown by its number of readers.
//!
//! The completion counter is never reset: it counts every completion the owner was ever
//! owed, and the owner keeps the running total of what it is owed (`Control::owed`), so
//! the target of each wait is known without any exchange.
//!
//! ```text
//!   owner:   fill c0 ─ ready=1 ─ fill c1 ─ ready=2 ─ fill c2 ─ ready=3 ─ wait completed >= owed + (n-1)
//!   reader:        └ wait ready>=1, read c0 ┘ wait ready>=2, read c1 ┘ ... read c2, completed += 1
//! ```

use super::wait;
use super::Round;
use crate::error::Result;
use std::sync::atomic::Ordering;

impl Round<'_> {
    /// Publishes that the first `chunks` chunks of this rank's buffer are ready.
    pub(crate) fn post_ready(&self, chunks: u32) {
        self.post_progress(chunks);
    }

    /// Waits until local rank `owner` has published `chunks` ready chunks.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn wait_ready(&self, owner: usize, chunks: u32) -> Result<()> {
        self.wait_progress(owner, chunks)
    }

    /// Tells local rank `owner` that this rank has finished reading its buffer.
    pub(crate) fn complete(&self, owner: usize) {
        self.ctl.slot(owner).completed.fetch_add(1, Ordering::Release);
    }

    /// Waits until `readers` more peers have completed reading this rank's buffer.
    ///
    /// # Errors
    ///
    /// `PeerDied` or `Timeout`.
    pub(crate) fn wait_completions(&self, readers: u64) -> Result<()> {
        let ctl = self.ctl;
        let target = ctl.owed.get() + readers;
        ctl.owed.set(target);
        let completed = &ctl.slot(ctl.me).completed;
        let peers: Vec<_> = (0..ctl.size()).filter(|&r| r != ctl.me).map(|r| ctl.peer(r)).collect();
        wait::wait_until_any(&ctl.policy, &peers, || completed.load(Ordering::Acquire) >= target)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::node;
    use super::super::Call;

    /// Readers follow a counter that grows chunk by chunk, and the owner learns when all
    /// are done, round after round, with owners that change.
    #[test]
    fn readers_follow_the_counter_and_the_owner_learns_completion() {
        let n = 3;
        std::thread::scope(|s| {
            for ctl in node(n, 8192) {
                s.spawn(move || {
                    for round in 0..100u32 {
                        let owner = (round % n as u32) as usize;
                        let round_ = ctl.begin(&Call::default()).unwrap();
                        let chunks = 1 + round % 7;
                        if ctl.me() == owner {
                            for c in 1..=chunks {
                                round_.post_ready(c);
                            }
                            round_.wait_completions(n as u64 - 1).unwrap();
                        } else {
                            for c in 1..=chunks {
                                round_.wait_ready(owner, c).unwrap();
                            }
                            round_.complete(owner);
                        }
                        round_.finish(Ok(())).unwrap();
                    }
                });
            }
        });
    }
}
