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
//! and the displacement (high 32 bits), both in elements as the user gave them. A
//! staging area of 64 KiB holds 8191 such words, so a node of up to 8190 ranks (4094 for
//! alltoallv, which publishes two partitions) is supported; beyond that every rank gets
//! `Unsupported`.
//!
//! # Judging
//!
//! After the arrive phase every rank reads every published partition and runs the same
//! pure function over them (and over the lengths in the call records), so every rank
//! reaches the same verdict before any byte moves. In order:
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
//! Zero-length blocks are skipped by every algorithm: no system call, no wait, no slot.

mod check;
mod partition;
mod plan;

pub(crate) use check::*;
pub use partition::{Partition, PartitionMut};
pub(crate) use plan::*;
