//! What the variable-count collectives (scatterv, gatherv, allgatherv, alltoallv) share:
//! the partition types of the public API, how counts and displacements are published and
//! judged, the throttled chain over the ranks that move bytes, and the layout of packed
//! node parts for the two-level versions.
//!
//! # Publishing counts
//!
//! A call record has a few words; a partition has two numbers per rank. Every rank that
//! owns a partition (the root of a scatterv or gatherv, every rank of an allgatherv, every
//! rank of an alltoallv, for both its buffers) writes it into its own staging area before
//! it arrives ([`Control::begin_staged`](crate::sync::Control::begin_staged)): one
//! word with the two array lengths, then one word per rank holding the count (low 32 bits)
//! and the displacement (high 32 bits), both in elements as the user gave them. An
//! alltoallv adds the map of what it stages for its peers (`1 + p` words: the total, then
//! each block's length and place in its payload). Where the words lie follows who reads
//! them: a scatterv's or gatherv's root puts its partition first (every leaf of a
//! scatterv reads it beside its block); an alltoallv puts its map first, its payload
//! right after it, and its partitions at the end of the half
//! ([`Control::begin_staged_with`](crate::sync::Control::begin_staged_with)), and an
//! allgatherv its payload first and its partition at the end: only the paths beyond one
//! phase read those partitions, so a one-phase reader of small blocks takes one cache
//! line of each sender's area, and none that the sender filled with words it does not
//! read. A round publishes in half a staging
//! area: of 64 KiB, 4096 words, so a node of up to 4095 ranks is supported (1364 for
//! alltoallv, which publishes `3p + 3` words); beyond that every rank gets `Unsupported`.
//! A rank of an allgatherv or alltoallv whose own call is bad publishes the fault's four
//! words instead ([`fault_words`]) and sets [`OWN_FAULT`] in its record's `aux2`.
//!
//! # Judging
//!
//! Every rank reaches the same verdict before any byte moves, except where a one-phase
//! allgatherv or alltoallv defers it (below). In order:
//!
//! 1. the roles (exactly the root called the root's method), as in scatter and gather;
//! 2. each partition by itself: one count and one displacement per rank
//!    (`BufferSize { which: "send counts" | ... }`), none negative (`InvalidPartition`),
//!    every non-empty block inside its buffer (`BufferSize`, in elements), and, for a
//!    partition of a receive buffer, no two non-empty blocks overlapping
//!    (`InvalidPartition`): every byte of a receive buffer is written at most once, so the
//!    result does not depend on the order of the copies;
//! 3. every pair of partners: the bytes one sends are the bytes the other receives
//!    (`LengthMismatch`, in bytes, naming the receiving rank, or the rank whose own two
//!    numbers disagree).
//!
//! A scatterv's or gatherv's ranks all judge the root's partition and every rank's length
//! against it after the arrive phase (`p` words each). An allgatherv's or alltoallv's rank
//! judges its own partitions (2, and its own block in 3) before it arrives, and the
//! verdict reads one flag per rank ([`judge_flags`]), not `p` partitions of `p` counts.
//! The pairs (3) are then judged where the blocks move: beyond one phase every rank judges
//! every pair before any byte moves ([`judge_pairs`], `p^2` counts, next to copies that
//! cost more); in one phase each rank compares its own counts with what each sender
//! published for it, where it reads the sender's block, before it writes a byte, and a
//! rank whose count differs fails alone (`Round::finish_alone`): its peers return `Ok`
//! with their (right) results, and the next call on the communicator fails on every rank
//! with `PreviousFailed` (the deferred verdict).
//!
//! Zero-length blocks are skipped by every algorithm: no system call, no wait, no slot.

mod check;
mod partition;
mod plan;

pub(crate) use check::*;
pub use partition::{Partition, PartitionMut};
pub(crate) use plan::*;
