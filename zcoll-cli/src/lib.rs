//! What the `zcoll` command runs, as a library that the criterion benches and the MPI-job
//! tests of `zcoll` share with it: the table of collectives (`colls`), the benchmark loop,
//! how its ranks start each timed call (`start`) and its output (`bench`, `stats`, `plot`), the comparison report from `scripts/compare`'s
//! files (`report`), the model check of `zcoll tune` (`tune`), the progress of long runs
//! (`progress`), the nonblocking collectives' benchmark (`immediate`), and the switchable global allocator behind `--buffers global` (`alloc`).
//!
//! Adding a collective to every benchmark is adding an entry to [`colls::ALL`].

#![deny(unsafe_code)]

#[allow(unsafe_code)] // a `GlobalAlloc` implementation: see the module's SAFETY comment
pub mod alloc;
pub mod bench;
pub mod colls;
pub mod immediate;
pub mod plot;
pub mod progress;
pub mod regime;
pub mod report;
pub mod start;
pub mod stats;
pub mod tune;
