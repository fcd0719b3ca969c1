//! What the `zcoll` command runs, as a library that the criterion benches and the MPI-job
//! tests of `zcoll` share with it: the table of collectives (`colls`), the benchmark loop
//! and its output (`bench`, `stats`, `plot`), and the model check of `zcoll tune`
//! (`tune`).
//!
//! Adding a collective to every benchmark is adding an entry to [`colls::ALL`].

pub mod bench;
pub mod colls;
pub mod plot;
pub mod stats;
pub mod tune;
