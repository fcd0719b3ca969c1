//! Safe zero-copy collectives for MPI programs written with [rsmpi](mpi).
//!
//! Inside a node, zcoll moves collective data between processes with a single copy
//! (Linux Cross Memory Attach) or, for small messages and where the kernel forbids
//! that, by copy-in/copy-out through a small shared control segment; control goes
//! through plain loads and stores on that segment, never through MPI messages. Between
//! nodes it hands the data to rsmpi, so any MPI library and network keeps working.
//!
//! ```no_run
//! use zcoll::ZeroCopy;
//!
//! let universe = mpi::initialize().unwrap();
//! let comm = universe.world().zero_copy()?;      // collective: maps the node segment
//! let mut field = vec![0.0f64; 1 << 20];
//! if comm.rank() == 0 {
//!     field.fill(1.5);
//! }
//! comm.broadcast_into(&mut field, 0)?;           // one copy per byte inside the node
//! assert!(field.iter().all(|&x| x == 1.5));
//! # Ok::<(), zcoll::Error>(())
//! ```
//!
//! Every collective checks its arguments against every other rank's before any byte
//! moves, and fails with the same [`Error`] on every rank rather than writing past a
//! buffer or hanging. (A rank that only gives in a call small enough to travel with its
//! arrival, such as the root of a small broadcast or scatter or a non-root of a small
//! reduce or gather, returns before the check; it learns of a failure at its next call,
//! which fails on every rank with [`Error::PreviousFailed`].) See the book (`book/`)
//! for the algorithms, their costs, and the safety model.
//!
//! # Logging
//!
//! zcoll emits [`tracing`](https://docs.rs/tracing) events: at debug level each set-up
//! decision of a [`Comm`] (the transport and why) and each call's resolved algorithm, at
//! warn level every fallback. Install a tracing subscriber, or a `log` logger such as
//! `env_logger` (the events are also `log` records while no subscriber is installed),
//! and set `RUST_LOG=zcoll=debug`. With neither, an event costs a few loads and branches
//! (the book's getting-started chapter has the measurement).
//!
//! # Environment
//!
//! Every variable zcoll reads, all of them here (a unit test keeps this table complete):
//!
//! | variable | effect |
//! |---|---|
//! | `ZCOLL_TRANSPORT=auto\|cma\|cico\|heap\|xpmem` | force a transport (default: `xpmem` where every rank has it, else `cma` with heap buffers mapped, where the kernel allows it; XPMEM is not even loaded when another transport is forced) |
//! | `XPMEM_LIBRARY=path` | the XPMEM library to load instead of `libxpmem.so.0` (and no `/dev/xpmem` check) |
//! | `ZCOLL_NODE_SIZE=k` | virtual nodes of `k` consecutive `MPI_COMM_WORLD` ranks, to test the hierarchy on one machine (set alike on every rank, or `Comm::new` fails on every rank) |
//! | `ZCOLL_VIRTUAL_SOCKETS=k` | calibration only: local rank `r` counts as running on socket `r % k`, to exercise the cross-socket measurement on a machine of one socket |
//! | `ZCOLL_MPI_PIECE=n` | the most elements one MPI call of a broadcast, reduction or scan across nodes carries (default and largest: 2147483647, the most an MPI count holds): longer calls go to MPI in pieces |
//! | `ZCOLL_TIMEOUT=s` | give up a wait after `s` seconds with [`Error::Timeout`] (a peer that could still write into the waiting rank's buffer is killed first: [`Error::Fenced`]) |
//! | `ZCOLL_WARN_AFTER=s` | a wait that lasts `s` seconds (default 60; 0: never) says in one line on standard error which collective it is in, that call's number on the node, the ranks not yet in it and whether the awaited rank has entered the call, and again each time its length doubles |
//! | `ZCOLL_ARRIVAL=auto\|flat\|tree:k` | how a round awaits the node's arrivals: every rank polls every other (`flat`), or up a tree of flags of fan-in `k` and down from its root (`tree:k`); default `auto`, the cost model's choice for the node's size (a tree from 8 ranks); every rank of a node must agree |
//! | `ZCOLL_PROGRESS=thread\|thread:bytes\|wait` | how the calls of an [`immediate_scope`](Comm::immediate_scope) progress ([`Progress`]): on a worker thread per scope, woken when a call of at least `bytes` (default 65536 where this process may run on more CPUs than its node has ranks, else never: [`Progress`]) is issued (default where MPI allows it: one node, or `MPI_THREAD_MULTIPLE`), or only in `wait`/`test` on the caller's thread |
//! | `ZCOLL_YIELD_US=us` | how long a wait spins (when the node's ranks fit on the CPUs their affinity masks allow between them; default 2000) or yields (otherwise; default 20) before it sleeps |
//! | `ZCOLL_PROFILE=path` | the machine profile to read (default `$XDG_CONFIG_HOME/zcoll/<cpu>-<cores>c-<kernel>.toml`); rank 0 warns once on standard error if it names no file, and the built-in defaults are used |
//! | `ZCOLL_BCAST_ALGORITHM=name[:k]` | the default broadcast algorithm ([`BcastAlgorithm`]) |
//! | `ZCOLL_SCATTER_ALGORITHM=name[:k]` | the default scatter algorithm ([`ScatterAlgorithm`]) |
//! | `ZCOLL_GATHER_ALGORITHM=name[:k]` | the default gather algorithm ([`GatherAlgorithm`]) |
//! | `ZCOLL_ALLGATHER_ALGORITHM=name[:j]` | the default allgather algorithm ([`AllgatherAlgorithm`]) |
//! | `ZCOLL_ALLTOALL_ALGORITHM=name` | the default alltoall algorithm ([`AlltoallAlgorithm`]) |
//! | `ZCOLL_REDUCE_ALGORITHM=name` | the default reduce algorithm ([`ReduceAlgorithm`]) |
//! | `ZCOLL_ALLREDUCE_ALGORITHM=name` | the default allreduce algorithm ([`ReduceAlgorithm`]) |
//! | `ZCOLL_SCATTERV_ALGORITHM=name[:k]` | the default variable-count scatter algorithm ([`ScatterAlgorithm`]) |
//! | `ZCOLL_GATHERV_ALGORITHM=name[:k]` | the default variable-count gather algorithm ([`GatherAlgorithm`]) |
//! | `ZCOLL_ALLGATHERV_ALGORITHM=name` | the default variable-count allgather algorithm ([`AllgathervAlgorithm`]) |
//! | `ZCOLL_ALLTOALLV_ALGORITHM=name` | the default variable-count alltoall algorithm ([`AlltoallvAlgorithm`]) |
//! | `ZCOLL_LAYOUT_ALGORITHM=name` | the default path of the layout collectives ([`LayoutAlgorithm`]: `packed` or `direct`) |
//!
//! Every variable is read when a [`Comm`] is built (`Comm::new`), not at each call: a
//! program that changes one builds a new `Comm` to see it. A value zcoll cannot read is
//! an [`Error::Config`] naming the variable and what it accepts: from `Comm::new` (on
//! every rank), from the call that would use it for a `ZCOLL_<COLL>_ALGORITHM`, from
//! `Comm::calibrate` for `ZCOLL_VIRTUAL_SOCKETS`. A profile that exists but cannot be read,
//! or a profile of this CPU made under another kernel, is not used, and rank 0 says so in
//! one line on standard error.

#![deny(unsafe_code)]

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("zcoll supports Linux on x86_64 and aarch64 only");

mod alloc;
#[cfg(any(test, doctest))]
mod book;
mod coll;
mod comm;
mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod hier;
mod layout;
mod node;
pub mod op;
mod pod;
mod segment;
mod sync;
mod to_mpi;
mod transport;
pub mod tune;

pub use alloc::{ShmAlloc, ShmBox};
pub use coll::allgather::AllgatherAlgorithm;
pub use coll::allgatherv::AllgathervAlgorithm;
pub use coll::alltoall::AlltoallAlgorithm;
pub use coll::alltoallv::AlltoallvAlgorithm;
pub use coll::bcast::BcastAlgorithm;
pub use coll::gather::GatherAlgorithm;
pub use coll::layout::LayoutAlgorithm;
pub use coll::reduce::ReduceAlgorithm;
pub use coll::scatter::ScatterAlgorithm;
pub use coll::varcount::{Partition, PartitionMut};
pub use comm::exposure::Exposure;
pub use comm::{
    wait_all, wait_any, Comm, Info, InterNode, Persistent, Progress, Request, Scope, Traffic, ZeroCopy,
    WORKER_NAME,
};
pub use error::{Errno, Error, Result};
pub use layout::Layout;
pub use pod::Pod;
pub use transport::copy::copy_bytes;
pub use transport::TransportKind;

/// The rsmpi version zcoll is built on, re-exported so that the types match.
pub use mpi;

#[cfg(test)]
mod tests {
    /// Every `ZCOLL_*` variable the library reads is in the table of the crate docs.
    #[test]
    fn every_variable_is_in_the_table() {
        let docs = include_str!("lib.rs");
        let table: String = docs.lines().filter(|l| l.starts_with("//! | `")).collect();
        let mut missing = Vec::new();
        let mut stack = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (at, _) in text.match_indices("\"ZCOLL_") {
                    let name: String =
                        text[at + 1..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                    let test_only = name.starts_with("ZCOLL_TEST_") || name == "ZCOLL_";
                    if !test_only && !table.contains(&format!("`{name}=")) {
                        missing.push(format!("{name} ({})", path.display()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "not in the table of src/lib.rs: {missing:?}");
    }
}
