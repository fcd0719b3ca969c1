//! The table of collectives `zcoll bench` and the criterion benches time.
//!
//! Each collective is one entry of [`ALL`]: a [`Collective`] says how large its buffers
//! are for `p` ranks and how many bytes a rank receives (the memcpy floor), and prepares
//! an [`Instance`] per size that fills the buffers with data that changes every
//! iteration, runs zcoll with a named algorithm, runs the MPI library's own collective
//! through rsmpi, and checks the result independently. Adding a collective to the
//! benchmarks is adding an entry here.

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use std::time::{SystemTime, UNIX_EPOCH};
use zcoll::op::Builtin;
use zcoll::{
    AllgatherAlgorithm, AllgathervAlgorithm, AlltoallAlgorithm, AlltoallvAlgorithm, BcastAlgorithm, Comm,
    GatherAlgorithm, Layout, LayoutAlgorithm, ReduceAlgorithm, ScatterAlgorithm,
};

/// What every entry runs on.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    /// The MPI communicator of the baseline (and of the barriers between iterations).
    pub world: &'a SimpleCommunicator,
    /// zcoll's communicator over the same ranks.
    pub comm: &'a Comm,
    /// The root of rooted collectives.
    pub root: i32,
    /// Where the buffers live.
    pub buffers: Buffers,
}

impl Env<'_> {
    fn rank(&self) -> i32 {
        self.world.rank()
    }

    /// `n` zeroed elements where `buffers` says: a `Vec`, or a block of the shared heap
    /// (`Comm::alloc`). An empty buffer is always a `Vec`.
    ///
    /// # Panics
    ///
    /// If the shared heap cannot hold the block (the benchmark cannot measure what it was
    /// asked to).
    pub fn buf<T: zcoll::Pod>(&self, n: usize) -> Buf<T> {
        match self.buffers {
            Buffers::Heap if n > 0 => {
                Buf::Heap(self.comm.alloc(n).unwrap_or_else(|e| panic!("--buffers heap: {e}")))
            }
            _ => Buf::Vec(vec![T::zeroed(); n]),
        }
    }
}

/// Where the benchmark's buffers live.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffers {
    /// `Vec`s on the ordinary heap.
    Vec,
    /// Blocks of the shared heap from `Comm::alloc`: the peers map them, so collectives
    /// copy them with loads and stores.
    Heap,
    /// `Vec`s again, with the process's global allocator serving large allocations from
    /// the shared heap (`zcoll::ShmAlloc`; the `zcoll` command installs a switchable one).
    Global,
}

impl std::fmt::Display for Buffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Buffers::Vec => "vec",
            Buffers::Heap => "heap",
            Buffers::Global => "global",
        })
    }
}

/// A buffer of the benchmark: a `Vec`, or a block of the shared heap.
pub enum Buf<T: zcoll::Pod> {
    /// An ordinary vector (or one in the shared heap through the global allocator).
    Vec(Vec<T>),
    /// A block of the shared heap from `Comm::alloc`.
    Heap(zcoll::ShmBox<T>),
}

impl<T: zcoll::Pod> std::ops::Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Buf::Vec(v) => v,
            Buf::Heap(b) => b,
        }
    }
}

impl<T: zcoll::Pod> std::ops::DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Buf::Vec(v) => v,
            Buf::Heap(b) => b,
        }
    }
}

/// One collective of the benchmark table.
pub trait Collective: Sync {
    /// The name used by `--coll` and in the output.
    fn name(&self) -> &'static str;
    /// zcoll's algorithms for it, by the names `--algorithms` and the output use
    /// (`auto`, zcoll's own choice, is not listed: it is always there).
    fn algorithms(&self) -> Vec<&'static str>;
    /// Whether the message size matters (a barrier moves no data: one row, size 0).
    fn sized(&self) -> bool {
        true
    }
    /// The largest size it is timed at: larger sizes of `--sizes` are left out for it
    /// (a kernel whose buffers grow faster than its messages).
    fn largest(&self) -> usize {
        usize::MAX
    }
    /// The sizes of `sizes` it is timed at (one row, size 0, if it is not sized).
    fn sizes_of(&self, sizes: &[usize]) -> Vec<usize> {
        match self.sized() {
            true => sizes.iter().copied().filter(|&s| s <= self.largest()).collect(),
            false => vec![0],
        }
    }
    /// The bytes this rank of `env` receives for a message of `size` bytes: one memcpy
    /// of that many bytes is the floor of a single-copy implementation.
    fn received(&self, env: Env<'_>, size: usize) -> usize;
    /// Allocates the buffers for `size` bytes per rank (as the OSU benchmarks count
    /// them) on every rank of `env`.
    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a>;
}

/// A collective's buffers at one size, and the ways to run it.
pub trait Instance {
    /// Fills the send data for step `seq`: every step's data differs from the previous
    /// step's in every byte, so a result left over from an earlier step fails the check.
    fn fill(&mut self, seq: u64);
    /// Parses `name` into the algorithm that the next [`zcoll`](Self::zcoll) calls run,
    /// before the clock starts: the timed call is the collective alone.
    fn select(&mut self, name: &str) -> zcoll::Result<()>;
    /// Runs zcoll's collective with the selected algorithm (`auto` until one is).
    fn zcoll(&mut self) -> zcoll::Result<()>;
    /// Runs the MPI library's collective through rsmpi.
    fn mpi(&mut self);
    /// Checks this rank's result of step `seq`, independently of both implementations.
    /// Collective: every rank calls it after every step. `Err` says what is wrong.
    fn check(&mut self, seq: u64) -> Result<(), String>;
}

/// Every collective the benchmarks know, in the order they run.
pub const ALL: &[&dyn Collective] = &[
    &Bcast,
    &Scatter,
    &Gather,
    &Allgather,
    &Alltoall,
    &Allreduce,
    &Reduce,
    &Scatterv,
    &Gatherv,
    &Allgatherv,
    &Alltoallv,
    &Transpose,
    &Colgather,
    &Faces,
    &Barrier,
];

/// The collective named `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Collective> {
    ALL.iter().copied().find(|c| c.name() == name)
}

/// Word `i` of the data of step `seq`: the per-step byte `s` (1 to 255, different from
/// the previous step's) is XORed into every byte, so consecutive steps differ in every
/// byte; the index term makes the bytes differ from each other.
fn word(seq: u64, i: usize) -> u64 {
    let s = seq % 255 + 1;
    (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ s.wrapping_mul(0x0101_0101_0101_0101)
}

/// Fills `words` (and so every byte of the message they hold) with step `seq`'s data.
pub fn fill_words(words: &mut [u64], seq: u64) {
    for (i, w) in words.iter_mut().enumerate() {
        *w = word(seq, i).to_le();
    }
}

/// Checks that the first `n` bytes of `words` are step `seq`'s data; the error names the
/// first wrong byte.
pub fn check_words(words: &[u64], n: usize, seq: u64) -> Result<(), String> {
    let full = n / 8;
    let bad_word = words[..full].iter().enumerate().position(|(i, &w)| w != word(seq, i).to_le());
    let first_bad = match bad_word {
        Some(i) => Some(i),
        None if n % 8 != 0 => Some(full),
        None => None,
    };
    if let Some(i) = first_bad {
        let got = words[i].to_le_bytes();
        let want = word(seq, i).to_le().to_le_bytes();
        if let Some(b) = (0..8).take_while(|b| i * 8 + b < n).find(|&b| got[b] != want[b]) {
            return Err(format!(
                "byte {} of {n} is {:#04x} where {:#04x} was sent",
                i * 8 + b,
                got[b],
                want[b]
            ));
        }
    }
    Ok(())
}

/// Broadcast from the root (`Env::root`): `size` bytes, received by every other rank.
pub struct Bcast;

impl Collective for Bcast {
    fn name(&self) -> &'static str {
        "bcast"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        BcastAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        if env.rank() == env.root {
            0
        } else {
            size
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        Box::new(BcastRun { env, algo: BcastAlgorithm::Auto, words: env.buf(size.div_ceil(8)), n: size })
    }
}

struct BcastRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: BcastAlgorithm,
    /// The buffer, as words for alignment; the message is its first `n` bytes.
    words: Buf<u64>,
    n: usize,
}

impl BcastRun<'_> {
    fn bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.n]
    }
}

impl Instance for BcastRun<'_> {
    fn fill(&mut self, seq: u64) {
        // Only the root's data is sent; the others keep the previous step's result,
        // which differs from this step's in every byte.
        if self.env.rank() == self.env.root {
            fill_words(&mut self.words, seq);
        }
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let (comm, root, algo) = (self.env.comm, self.env.root, self.algo);
        comm.broadcast_into_with(self.bytes(), root, algo)
    }

    fn mpi(&mut self) {
        let (world, root) = (self.env.world, self.env.root);
        world.process_at_rank(root).broadcast_into(self.bytes());
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // The root's buffer must be unchanged too.
        check_words(&self.words, self.n, seq)
    }
}

/// Word `i` of rank `q`'s data of step `seq`: [`word`] at an index offset by the rank, so
/// every rank sends different bytes (rank 0's data is what [`fill_words`] writes).
fn stream_word(seq: u64, q: usize, i: usize) -> u64 {
    word(seq, (q << 40) | i)
}

/// Fills `bytes` with rank `q`'s data of step `seq`, from its first byte.
fn fill_stream(bytes: &mut [u8], seq: u64, q: usize) {
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let w = stream_word(seq, q, i).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Checks that `got` is bytes `start..start + got.len()` of rank `q`'s data of step `seq`;
/// the error names the first wrong byte.
fn check_stream(got: &[u8], seq: u64, q: usize, start: usize) -> Result<(), String> {
    for (k, &b) in got.iter().enumerate() {
        let j = start + k;
        let want = stream_word(seq, q, j / 8).to_le_bytes()[j % 8];
        if b != want {
            return Err(format!(
                "byte {k} of the {} from rank {q} is {b:#04x} where {want:#04x} was sent",
                got.len()
            ));
        }
    }
    Ok(())
}

/// Parses an algorithm name of `--algorithms` for a collective's enum.
fn algorithm<A: std::str::FromStr>(name: &str) -> zcoll::Result<A> {
    name.parse().map_err(|_| zcoll::Error::Config {
        name: "--algorithms",
        value: name.to_owned(),
        expected: "a name `zcoll bench --algorithms all` lists for the collective",
    })
}

/// The MPI count of `n` elements.
fn count(n: usize) -> Count {
    Count::try_from(n).expect("a message fits in an MPI count")
}

/// The displacements of consecutive blocks of `counts` elements.
fn displs(counts: &[Count]) -> Vec<Count> {
    counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect()
}

/// Scatter from the root: the root sends `size` bytes to every rank (itself included).
pub struct Scatter;

impl Collective for Scatter {
    fn name(&self) -> &'static str {
        "scatter"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        ScatterAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, _env: Env<'_>, size: usize) -> usize {
        size
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let root = env.rank() == env.root;
        let send = if root { env.buf(size * env.world.size() as usize) } else { env.buf(0) };
        Box::new(ScatterRun { env, algo: ScatterAlgorithm::Auto, send, recv: env.buf(size) })
    }
}

struct ScatterRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: ScatterAlgorithm,
    /// The root's `p * size` bytes (empty elsewhere).
    send: Buf<u8>,
    recv: Buf<u8>,
}

impl Instance for ScatterRun<'_> {
    fn fill(&mut self, seq: u64) {
        if self.env.rank() == self.env.root {
            fill_stream(&mut self.send, seq, self.env.root as usize);
        }
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        let (comm, root) = (self.env.comm, self.env.root);
        if self.env.rank() == root {
            comm.scatter_into_root_with(&self.send, &mut self.recv, root, a)
        } else {
            comm.scatter_into_with(&mut self.recv, root, a)
        }
    }

    fn mpi(&mut self) {
        let p = self.env.world.process_at_rank(self.env.root);
        if self.env.rank() == self.env.root {
            p.scatter_into_root(&self.send[..], &mut self.recv[..]);
        } else {
            p.scatter_into(&mut self.recv[..]);
        }
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        let start = self.env.rank() as usize * self.recv.len();
        check_stream(&self.recv, seq, self.env.root as usize, start)
    }
}

/// Gather to the root: every rank sends `size` bytes; the root receives `p * size`.
pub struct Gather;

impl Collective for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        GatherAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        if env.rank() == env.root {
            size * env.world.size() as usize
        } else {
            0
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let recv = env.buf(self.received(env, size));
        Box::new(GatherRun { env, algo: GatherAlgorithm::Auto, send: env.buf(size), recv })
    }
}

struct GatherRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: GatherAlgorithm,
    send: Buf<u8>,
    /// The root's `p * size` bytes (empty elsewhere).
    recv: Buf<u8>,
}

impl Instance for GatherRun<'_> {
    fn fill(&mut self, seq: u64) {
        fill_stream(&mut self.send, seq, self.env.rank() as usize);
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        let (comm, root) = (self.env.comm, self.env.root);
        if self.env.rank() == root {
            comm.gather_into_root_with(&self.send, &mut self.recv, root, a)
        } else {
            comm.gather_into_with(&self.send, root, a)
        }
    }

    fn mpi(&mut self) {
        let p = self.env.world.process_at_rank(self.env.root);
        if self.env.rank() == self.env.root {
            p.gather_into_root(&self.send[..], &mut self.recv[..]);
        } else {
            p.gather_into(&self.send[..]);
        }
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        check_blocks(&self.recv, self.send.len(), seq)
    }
}

/// Checks that block `q` of `recv` (blocks of `size` bytes) is rank `q`'s data.
fn check_blocks(recv: &[u8], size: usize, seq: u64) -> Result<(), String> {
    if size == 0 {
        return Ok(());
    }
    recv.chunks(size).enumerate().try_for_each(|(q, block)| check_stream(block, seq, q, 0))
}

/// Allgather: every rank sends `size` bytes and receives `p * size`.
pub struct Allgather;

impl Collective for Allgather {
    fn name(&self) -> &'static str {
        "allgather"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        AllgatherAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        size * env.world.size() as usize
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let recv = env.buf(self.received(env, size));
        Box::new(AllgatherRun { env, algo: AllgatherAlgorithm::Auto, send: env.buf(size), recv })
    }
}

struct AllgatherRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: AllgatherAlgorithm,
    send: Buf<u8>,
    recv: Buf<u8>,
}

impl Instance for AllgatherRun<'_> {
    fn fill(&mut self, seq: u64) {
        fill_stream(&mut self.send, seq, self.env.rank() as usize);
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        self.env.comm.all_gather_into_with(&self.send, &mut self.recv, a)
    }

    fn mpi(&mut self) {
        self.env.world.all_gather_into(&self.send[..], &mut self.recv[..]);
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        check_blocks(&self.recv, self.send.len(), seq)
    }
}

/// Alltoall: every rank sends `size` bytes to every rank and receives `p * size`.
pub struct Alltoall;

impl Collective for Alltoall {
    fn name(&self) -> &'static str {
        "alltoall"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        AlltoallAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        size * env.world.size() as usize
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let n = self.received(env, size);
        Box::new(AlltoallRun { env, algo: AlltoallAlgorithm::Auto, size, send: env.buf(n), recv: env.buf(n) })
    }
}

struct AlltoallRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: AlltoallAlgorithm,
    size: usize,
    send: Buf<u8>,
    recv: Buf<u8>,
}

impl Instance for AlltoallRun<'_> {
    fn fill(&mut self, seq: u64) {
        fill_stream(&mut self.send, seq, self.env.rank() as usize);
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        self.env.comm.all_to_all_into_with(&self.send, &mut self.recv, a)
    }

    fn mpi(&mut self) {
        self.env.world.all_to_all_into(&self.send[..], &mut self.recv[..]);
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // Rank q's block for this rank is bytes [me * size, (me + 1) * size) of its data.
        let (size, me) = (self.size, self.env.rank() as usize);
        if size == 0 {
            return Ok(());
        }
        self.recv.chunks(size).enumerate().try_for_each(|(q, block)| check_stream(block, seq, q, me * size))
    }
}

/// The matrix transpose of DDTBench, as an alltoall over layouts: every rank holds `b`
/// rows of an `n = b p` x `n` matrix of `u64`s and sends the `b` x `b` block of columns
/// `k b ..` to rank `k` (a vector layout resized to `b`), which stores it transposed (a
/// column layout, resized to 1, repeated `b` times). `size` is a block's bytes, `8 b^2`
/// (`b` rounded down to fit). MPI runs `MPI_Alltoall` with the same layouts as derived
/// datatypes (`Layout::to_datatype`), which pack and unpack.
pub struct Transpose;

/// The side `b` of a transpose's blocks of at most `size` bytes (at least 1).
fn transpose_side(size: usize) -> usize {
    ((size / 8) as f64).sqrt().floor().max(1.0) as usize
}

impl Collective for Transpose {
    fn name(&self) -> &'static str {
        "transpose"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        LayoutAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        let b = transpose_side(size);
        8 * b * b * env.world.size() as usize
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (p, b) = (env.world.size() as usize, transpose_side(size));
        let n = b * p;
        let send_layout =
            Layout::vector(b, b, n as isize).and_then(|l| l.resized(b)).expect("a vector layout");
        let column = Layout::vector(b, 1, n as isize).and_then(|l| l.resized(1)).expect("a column");
        let recv_layout = Layout::contiguous_of(b, &column).and_then(|l| l.resized(b)).expect("the columns");
        let (send_type, recv_type) = (
            send_layout.to_datatype::<u64>().expect("MPI's datatype"),
            recv_layout.to_datatype::<u64>().expect("MPI's datatype"),
        );
        Box::new(TransposeRun {
            env,
            algo: LayoutAlgorithm::Auto,
            b,
            send: env.buf(b * n),
            recv: env.buf(b * n),
            send_layout,
            recv_layout,
            send_type,
            recv_type,
        })
    }
}

struct TransposeRun<'a> {
    env: Env<'a>,
    algo: LayoutAlgorithm,
    b: usize,
    send: Buf<u64>,
    recv: Buf<u64>,
    send_layout: Layout,
    recv_layout: Layout,
    send_type: mpi::datatype::UserDatatype,
    recv_type: mpi::datatype::UserDatatype,
}

impl Instance for TransposeRun<'_> {
    fn fill(&mut self, seq: u64) {
        // Element (r, c) of this rank's rows is element (me b + r) n + c of the matrix.
        let n = self.b * self.env.world.size() as usize;
        let first = self.env.rank() as usize * self.b * n;
        self.send.iter_mut().enumerate().for_each(|(i, w)| *w = word(seq, first + i));
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let (send, recv) = (&self.send[..], &mut self.recv[..]);
        self.env.comm.all_to_all_layout_into_with(send, &self.send_layout, recv, &self.recv_layout, self.algo)
    }

    #[allow(unsafe_code)]
    fn mpi(&mut self) {
        let p = self.env.world.size() as Count;
        // SAFETY: both layouts were built for these buffers: `p` blocks of the send layout
        // cover the `b` rows exactly, and `p` blocks of the receive layout too (zcoll's
        // `check` and `check_writable` accept them, as the first zcoll call shows).
        let (send, mut recv) = unsafe {
            (
                mpi::datatype::View::with_count_and_datatype(&self.send[..], p, &self.send_type),
                mpi::datatype::MutView::with_count_and_datatype(&mut self.recv[..], p, &self.recv_type),
            )
        };
        self.env.world.all_to_all_into(&send, &mut recv);
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // Row r of the result is column me b + r of the matrix: t[r][c] = a[c][me b + r].
        let (b, me) = (self.b, self.env.rank() as usize);
        let n = b * self.env.world.size() as usize;
        match (0..b * n).find(|&i| self.recv[i] != word(seq, (i % n) * n + me * b + i / n)) {
            Some(i) => Err(format!("element ({}, {}) of the transpose is wrong", i / n, i % n)),
            None => Ok(()),
        }
    }
}

/// The column gather of DDTBench, as a gather over layouts: every rank holds a `b` x 8
/// row-major matrix of `u64`s (one element per 64-byte line of a column) and sends its
/// first column (a vector layout) to the root, which stores rank `k`'s as row `k` of a
/// `p` x `b` matrix. `size` is a column's bytes, `8 b`. MPI runs `MPI_Gather` with the
/// column as a derived datatype (`Layout::to_datatype`), which packs.
pub struct Colgather;

/// The width of the column gather's matrices: one `u64` of a column per cache line.
const COLGATHER_WIDTH: usize = 8;

impl Collective for Colgather {
    fn name(&self) -> &'static str {
        "colgather"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        LayoutAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        match env.rank() == env.root {
            true => elements(size) * 8 * env.world.size() as usize,
            false => 0,
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (p, b) = (env.world.size() as usize, elements(size));
        let column = Layout::vector(b, 1, COLGATHER_WIDTH as isize).expect("a column");
        let rows = Layout::contiguous(b).expect("a row");
        let column_type = column.to_datatype::<u64>().expect("MPI's datatype");
        let root = env.rank() == env.root;
        Box::new(ColgatherRun {
            env,
            algo: LayoutAlgorithm::Auto,
            b,
            send: env.buf(b * COLGATHER_WIDTH),
            recv: env.buf(if root { b * p } else { 0 }),
            column,
            rows,
            column_type,
        })
    }
}

struct ColgatherRun<'a> {
    env: Env<'a>,
    algo: LayoutAlgorithm,
    b: usize,
    send: Buf<u64>,
    recv: Buf<u64>,
    column: Layout,
    rows: Layout,
    column_type: mpi::datatype::UserDatatype,
}

impl Instance for ColgatherRun<'_> {
    fn fill(&mut self, seq: u64) {
        let first = self.env.rank() as usize * self.send.len();
        self.send.iter_mut().enumerate().for_each(|(i, w)| *w = word(seq, first + i));
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let (comm, root) = (self.env.comm, self.env.root);
        match self.env.rank() == root {
            true => comm.gather_layout_into_root_with(
                &self.send,
                &self.column,
                &mut self.recv,
                &self.rows,
                root,
                self.algo,
            ),
            false => comm.gather_layout_into_with(&self.send, &self.column, root, self.algo),
        }
    }

    #[allow(unsafe_code)]
    fn mpi(&mut self) {
        // SAFETY: one column of `b` elements, 8 apart, lies inside the `8 b` elements of
        // `send` (zcoll's `check` accepts it, as the first zcoll call shows).
        let send =
            unsafe { mpi::datatype::View::with_count_and_datatype(&self.send[..], 1, &self.column_type) };
        let at = self.env.world.process_at_rank(self.env.root);
        match self.env.rank() == self.env.root {
            true => at.gather_into_root(&send, &mut self.recv[..]),
            false => at.gather_into(&send),
        }
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // Row k of the root's result is rank k's first column.
        let (b, width) = (self.b, COLGATHER_WIDTH);
        match (0..self.recv.len()).find(|&i| self.recv[i] != word(seq, (i / b) * b * width + (i % b) * width))
        {
            Some(i) => Err(format!("element {} of rank {}'s column is wrong", i % b, i / b)),
            None => Ok(()),
        }
    }
}

/// The faces of a 3D grid of DDTBench, as an alltoall with a layout per peer: every rank
/// holds an `n`^3 grid of `u64`s and sends every rank `k` one face of it, the low face
/// across axis `(k + 2) mod 3` (at 2 ranks: the `z` face, `n^2` single elements `n`
/// apart, to rank 0; the contiguous `x` face to rank 1), which lands in plane `q` of
/// rank `k`'s `p` x `n` x `n` array for sender `q`. `size` is a face's bytes, `8 n^2`
/// (`n` rounded down). MPI runs `MPI_Alltoallw` with the faces as subarray datatypes.
pub struct Faces;

/// The face of an `n`^3 grid rank `k` gets: the low one across axis `(k + 2) mod 3`.
fn face(n: usize, k: usize) -> Layout {
    let axis = (k + 2) % 3;
    let mut sub = [n, n, n];
    sub[axis] = 1;
    Layout::subarray(&[n, n, n], &sub, &[0, 0, 0]).expect("a face")
}

impl Collective for Faces {
    fn name(&self) -> &'static str {
        "faces"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        LayoutAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    /// 1 MiB faces: the grid is `n^3` elements for faces of `n^2`, 380 MB per rank at
    /// 1 MiB and 24 GB at 16 MiB (which the benchmark's default sizes reach).
    fn largest(&self) -> usize {
        1 << 20
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        let n = transpose_side(size);
        8 * n * n * env.world.size() as usize
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (p, n) = (env.world.size() as usize, transpose_side(size));
        let sends: Vec<Layout> = (0..p).map(|k| face(n, k)).collect();
        let recvs: Vec<Layout> =
            (0..p).map(|q| Layout::subarray(&[p, n, n], &[1, n, n], &[q, 0, 0]).expect("a plane")).collect();
        let types = |ls: &[Layout]| -> Vec<mpi::datatype::UserDatatype> {
            ls.iter().map(|l| l.to_datatype::<u64>().expect("MPI's datatype")).collect()
        };
        Box::new(FacesRun {
            env,
            algo: LayoutAlgorithm::Auto,
            n,
            send: env.buf(n * n * n),
            recv: env.buf(p * n * n),
            send_types: types(&sends),
            recv_types: types(&recvs),
            sends,
            recvs,
        })
    }
}

struct FacesRun<'a> {
    env: Env<'a>,
    algo: LayoutAlgorithm,
    n: usize,
    send: Buf<u64>,
    recv: Buf<u64>,
    sends: Vec<Layout>,
    recvs: Vec<Layout>,
    send_types: Vec<mpi::datatype::UserDatatype>,
    recv_types: Vec<mpi::datatype::UserDatatype>,
}

impl Instance for FacesRun<'_> {
    fn fill(&mut self, seq: u64) {
        let first = self.env.rank() as usize * self.send.len();
        self.send.iter_mut().enumerate().for_each(|(i, w)| *w = word(seq, first + i));
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let (send, recv) = (&self.send[..], &mut self.recv[..]);
        self.env.comm.all_to_all_layouts_into_with(send, &self.sends, recv, &self.recvs, self.algo)
    }

    #[allow(unsafe_code)]
    fn mpi(&mut self) {
        use mpi::raw::AsRaw;
        let p = self.env.world.size() as usize;
        let (ones, zeros) = (vec![1 as Count; p], vec![0 as Count; p]);
        let st: Vec<_> = self.send_types.iter().map(|t| t.as_raw()).collect();
        let rt: Vec<_> = self.recv_types.iter().map(|t| t.as_raw()).collect();
        // SAFETY: every face lies inside the `n^3` send grid and every plane inside the
        // `p n^2` receive array (zcoll's checks accept them, as the first zcoll call
        // shows); the count, displacement and datatype arrays hold one entry per rank and
        // outlive the call.
        let rc = unsafe {
            mpi::ffi::MPI_Alltoallw(
                self.send.as_ptr().cast(),
                ones.as_ptr(),
                zeros.as_ptr(),
                st.as_ptr(),
                self.recv.as_mut_ptr().cast(),
                ones.as_ptr(),
                zeros.as_ptr(),
                rt.as_ptr(),
                self.env.world.as_raw(),
            )
        };
        assert_eq!(rc, 0, "MPI_Alltoallw");
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // Plane q is sender q's face for this rank: element i is word `q n^3 + f_i`.
        let n = self.n;
        let offsets: Vec<usize> = face(n, self.env.rank() as usize)
            .flatten()
            .into_iter()
            .flat_map(|(o, l)| o as usize..o as usize + l)
            .collect();
        match (0..self.recv.len())
            .find(|&i| self.recv[i] != word(seq, (i / (n * n)) * n * n * n + offsets[i % (n * n)]))
        {
            Some(i) => Err(format!("element {} of rank {}'s face is wrong", i % (n * n), i / (n * n))),
            None => Ok(()),
        }
    }
}

/// The `u64` elements of a reduction of `size` bytes (rounded up to whole elements).
fn elements(size: usize) -> usize {
    size.div_ceil(8)
}

/// Allreduce: the wrapping sum of every rank's `size / 8` `u64`s (an exact check).
pub struct Allreduce;

impl Collective for Allreduce {
    fn name(&self) -> &'static str {
        "allreduce"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        // `root-read` is a reduce to a root only (an allreduce refuses it).
        ReduceAlgorithm::ALL.iter().filter(|&&a| a != ReduceAlgorithm::RootRead).map(|a| a.name()).collect()
    }

    fn received(&self, _env: Env<'_>, size: usize) -> usize {
        8 * elements(size)
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let n = elements(size);
        Box::new(ReduceRun {
            env,
            algo: ReduceAlgorithm::Auto,
            all: true,
            send: env.buf(n),
            recv: env.buf(n),
        })
    }
}

/// Reduce to the root: the wrapping sum of every rank's `size / 8` `u64`s.
pub struct Reduce;

impl Collective for Reduce {
    fn name(&self) -> &'static str {
        "reduce"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        ReduceAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        if env.rank() == env.root {
            8 * elements(size)
        } else {
            0
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let n = elements(size);
        let recv = env.buf(if env.rank() == env.root { n } else { 0 });
        Box::new(ReduceRun { env, algo: ReduceAlgorithm::Auto, all: false, send: env.buf(n), recv })
    }
}

struct ReduceRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: ReduceAlgorithm,
    /// Allreduce (else reduce to `env.root`).
    all: bool,
    send: Buf<u64>,
    /// The result (empty on the non-roots of a reduce).
    recv: Buf<u64>,
}

impl Instance for ReduceRun<'_> {
    fn fill(&mut self, seq: u64) {
        let me = self.env.rank() as usize;
        self.send.iter_mut().enumerate().for_each(|(i, x)| *x = stream_word(seq, me, i));
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        let (comm, root) = (self.env.comm, self.env.root);
        if self.all {
            comm.all_reduce_into_with(&self.send, &mut self.recv, Builtin::Sum, a)
        } else if self.env.rank() == root {
            comm.reduce_with(&self.send, Some(&mut self.recv), root, Builtin::Sum, a)
        } else {
            comm.reduce_with(&self.send, None, root, Builtin::Sum, a)
        }
    }

    fn mpi(&mut self) {
        let (world, root) = (self.env.world, self.env.root);
        if self.all {
            world.all_reduce_into(&self.send[..], &mut self.recv[..], SystemOperation::sum());
        } else if self.env.rank() == root {
            world.process_at_rank(root).reduce_into_root(
                &self.send[..],
                &mut self.recv[..],
                SystemOperation::sum(),
            );
        } else {
            world.process_at_rank(root).reduce_into(&self.send[..], SystemOperation::sum());
        }
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        let p = self.env.world.size() as usize;
        for (i, &got) in self.recv.iter().enumerate() {
            let want = (0..p).fold(0u64, |acc, q| acc.wrapping_add(stream_word(seq, q, i)));
            if got != want {
                return Err(format!(
                    "element {i} of {} is {got:#x} where the sum is {want:#x}",
                    self.recv.len()
                ));
            }
        }
        Ok(())
    }
}

/// The bytes rank `r` of `p` sends in the allgatherv of `size` bytes per rank:
/// `floor(2 * size * (r + 1) / (p + 1))`, from about `2 size / p` up to about `2 size`,
/// `p * size` bytes in all (up to rounding).
pub fn allgatherv_bytes(size: usize, r: usize, p: usize) -> usize {
    2 * size * (r + 1) / (p + 1)
}

/// The counts ([`allgatherv_bytes`]) and displacements of the uneven blocks of `p` ranks.
fn uneven(size: usize, p: usize) -> (Vec<Count>, Vec<Count>) {
    let counts: Vec<Count> = (0..p).map(|r| count(allgatherv_bytes(size, r, p))).collect();
    let displs = displs(&counts);
    (counts, displs)
}

/// The bytes rank `q` of `p` sends rank `r` in the alltoallv of `size` bytes per rank:
/// `floor(2 * size * ((q + r) mod p + 1) / (p + 1))`; every rank sends and receives
/// `p * size` bytes in all (up to rounding), in blocks from about `2 size / p` to `2 size`.
pub fn alltoallv_bytes(size: usize, q: usize, r: usize, p: usize) -> usize {
    2 * size * ((q + r) % p + 1) / (p + 1)
}

/// Scatterv from the root with uneven blocks: rank `r` receives
/// [`allgatherv_bytes`]`(size, r, p)`.
pub struct Scatterv;

impl Collective for Scatterv {
    fn name(&self) -> &'static str {
        "scatterv"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        ScatterAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        allgatherv_bytes(size, env.rank() as usize, env.world.size() as usize)
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (counts, displs) = uneven(size, env.world.size() as usize);
        let whole = if env.rank() == env.root { counts.iter().map(|&c| c as usize).sum() } else { 0 };
        let recv = env.buf(self.received(env, size));
        Box::new(VarRootedRun::new(env, true, env.buf(whole), recv, counts, displs))
    }
}

/// Gatherv to the root with uneven blocks: rank `r` sends
/// [`allgatherv_bytes`]`(size, r, p)`.
pub struct Gatherv;

impl Collective for Gatherv {
    fn name(&self) -> &'static str {
        "gatherv"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        GatherAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        let p = env.world.size() as usize;
        if env.rank() == env.root {
            (0..p).map(|r| allgatherv_bytes(size, r, p)).sum()
        } else {
            0
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let p = env.world.size() as usize;
        let (counts, displs) = uneven(size, p);
        let send = env.buf(allgatherv_bytes(size, env.rank() as usize, p));
        let recv = env.buf(self.received(env, size));
        Box::new(VarRootedRun::new(env, false, send, recv, counts, displs))
    }
}

/// A scatterv or a gatherv: the root's whole buffer is cut by `counts` and `displs`.
struct VarRootedRun<'a> {
    env: Env<'a>,
    /// A scatterv (else a gatherv).
    scatter: bool,
    /// The algorithm of a scatterv.
    scatter_algo: ScatterAlgorithm,
    /// The algorithm of a gatherv.
    gather_algo: GatherAlgorithm,
    /// The scatterv root's blocks, or this rank's gatherv block.
    send: Buf<u8>,
    /// This rank's scatterv block, or the gatherv root's blocks.
    recv: Buf<u8>,
    counts: Vec<Count>,
    displs: Vec<Count>,
}

impl<'a> VarRootedRun<'a> {
    /// A scatterv (`scatter`) or gatherv run, with `auto` selected.
    fn new(
        env: Env<'a>,
        scatter: bool,
        send: Buf<u8>,
        recv: Buf<u8>,
        counts: Vec<Count>,
        displs: Vec<Count>,
    ) -> Self {
        let (scatter_algo, gather_algo) = (ScatterAlgorithm::Auto, GatherAlgorithm::Auto);
        VarRootedRun { env, scatter, scatter_algo, gather_algo, send, recv, counts, displs }
    }

    fn is_root(&self) -> bool {
        self.env.rank() == self.env.root
    }
}

impl Instance for VarRootedRun<'_> {
    fn fill(&mut self, seq: u64) {
        if !self.scatter {
            fill_stream(&mut self.send, seq, self.env.rank() as usize);
        } else if self.is_root() {
            for (q, (&c, &d)) in self.counts.iter().zip(&self.displs).enumerate() {
                fill_stream(&mut self.send[d as usize..][..c as usize], seq, q);
            }
        }
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        match self.scatter {
            true => self.scatter_algo = algorithm(name)?,
            false => self.gather_algo = algorithm(name)?,
        }
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let (comm, root) = (self.env.comm, self.env.root);
        let (counts, displs) = (&self.counts[..], &self.displs[..]);
        let (sa, ga) = (self.scatter_algo, self.gather_algo);
        match (self.scatter, self.env.rank() == root) {
            (true, true) => {
                comm.scatter_varcount_into_root_with(&self.send, counts, displs, &mut self.recv, root, sa)
            }
            (true, false) => comm.scatter_varcount_into_with(&mut self.recv, root, sa),
            (false, true) => {
                comm.gather_varcount_into_root_with(&self.send, &mut self.recv, counts, displs, root, ga)
            }
            (false, false) => comm.gather_varcount_into_with(&self.send, root, ga),
        }
    }

    fn mpi(&mut self) {
        let p = self.env.world.process_at_rank(self.env.root);
        let (counts, displs) = (&self.counts[..], &self.displs[..]);
        match (self.scatter, self.is_root()) {
            (true, true) => p.scatter_varcount_into_root(
                &Partition::new(&self.send[..], counts, displs),
                &mut self.recv[..],
            ),
            (true, false) => p.scatter_varcount_into(&mut self.recv[..]),
            (false, true) => p.gather_varcount_into_root(
                &self.send[..],
                &mut PartitionMut::new(&mut self.recv[..], counts, displs),
            ),
            (false, false) => p.gather_varcount_into(&self.send[..]),
        }
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        match (self.scatter, self.is_root()) {
            (true, _) => check_stream(&self.recv, seq, self.env.rank() as usize, 0),
            (false, true) => {
                self.counts.iter().zip(&self.displs).enumerate().try_for_each(|(q, (&c, &d))| {
                    check_stream(&self.recv[d as usize..][..c as usize], seq, q, 0)
                })
            }
            (false, false) => Ok(()),
        }
    }
}

/// Allgatherv with uneven blocks ([`allgatherv_bytes`]).
pub struct Allgatherv;

impl Collective for Allgatherv {
    fn name(&self) -> &'static str {
        "allgatherv"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        AllgathervAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        let p = env.world.size() as usize;
        (0..p).map(|r| allgatherv_bytes(size, r, p)).sum()
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (p, me) = (env.world.size() as usize, env.rank() as usize);
        let (counts, displs) = uneven(size, p);
        let send = env.buf(allgatherv_bytes(size, me, p));
        Box::new(AllgathervRun {
            env,
            algo: AllgathervAlgorithm::Auto,
            send,
            recv: env.buf(self.received(env, size)),
            counts,
            displs,
        })
    }
}

struct AllgathervRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: AllgathervAlgorithm,
    send: Buf<u8>,
    recv: Buf<u8>,
    counts: Vec<Count>,
    displs: Vec<Count>,
}

impl Instance for AllgathervRun<'_> {
    fn fill(&mut self, seq: u64) {
        fill_stream(&mut self.send, seq, self.env.rank() as usize);
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        let comm = self.env.comm;
        comm.all_gather_varcount_into_with(&self.send, &mut self.recv, &self.counts, &self.displs, a)
    }

    fn mpi(&mut self) {
        let mut recv = PartitionMut::new(&mut self.recv[..], &self.counts[..], &self.displs[..]);
        self.env.world.all_gather_varcount_into(&self.send[..], &mut recv);
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        for (q, (&c, &d)) in self.counts.iter().zip(&self.displs).enumerate() {
            check_stream(&self.recv[d as usize..][..c as usize], seq, q, 0)?;
        }
        Ok(())
    }
}

/// Alltoallv with uneven blocks ([`alltoallv_bytes`]).
pub struct Alltoallv;

impl Collective for Alltoallv {
    fn name(&self) -> &'static str {
        "alltoallv"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        AlltoallvAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        let (p, me) = (env.world.size() as usize, env.rank() as usize);
        (0..p).map(|q| alltoallv_bytes(size, q, me, p)).sum()
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        let (p, me) = (env.world.size() as usize, env.rank() as usize);
        let send_counts: Vec<Count> = (0..p).map(|r| count(alltoallv_bytes(size, me, r, p))).collect();
        let recv_counts: Vec<Count> = (0..p).map(|q| count(alltoallv_bytes(size, q, me, p))).collect();
        let (send_displs, recv_displs) = (displs(&send_counts), displs(&recv_counts));
        let send = env.buf((0..p).map(|r| alltoallv_bytes(size, me, r, p)).sum());
        let recv = env.buf(self.received(env, size));
        Box::new(AlltoallvRun {
            env,
            algo: AlltoallvAlgorithm::Auto,
            size,
            send,
            recv,
            send_counts,
            send_displs,
            recv_counts,
            recv_displs,
        })
    }
}

struct AlltoallvRun<'a> {
    env: Env<'a>,
    /// The algorithm `zcoll` runs.
    algo: AlltoallvAlgorithm,
    size: usize,
    send: Buf<u8>,
    recv: Buf<u8>,
    send_counts: Vec<Count>,
    send_displs: Vec<Count>,
    recv_counts: Vec<Count>,
    recv_displs: Vec<Count>,
}

impl Instance for AlltoallvRun<'_> {
    fn fill(&mut self, seq: u64) {
        fill_stream(&mut self.send, seq, self.env.rank() as usize);
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        self.algo = algorithm(name)?;
        Ok(())
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        let a = self.algo;
        let (sc, sd, rc, rd) = (&self.send_counts, &self.send_displs, &self.recv_counts, &self.recv_displs);
        self.env.comm.all_to_all_varcount_into_with(&self.send, sc, sd, &mut self.recv, rc, rd, a)
    }

    fn mpi(&mut self) {
        let send = Partition::new(&self.send[..], &self.send_counts[..], &self.send_displs[..]);
        let mut recv = PartitionMut::new(&mut self.recv[..], &self.recv_counts[..], &self.recv_displs[..]);
        self.env.world.all_to_all_varcount_into(&send, &mut recv);
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        let (p, me) = (self.env.world.size() as usize, self.env.rank() as usize);
        for (q, (&c, &d)) in self.recv_counts.iter().zip(&self.recv_displs).enumerate() {
            // Rank q's block for this rank starts after its blocks for ranks 0..me.
            let start: usize = (0..me).map(|r| alltoallv_bytes(self.size, q, r, p)).sum();
            check_stream(&self.recv[d as usize..][..c as usize], seq, q, start)?;
        }
        Ok(())
    }
}

/// Barrier: no data; checked by time stamps (no rank leaves before the last one enters).
pub struct Barrier;

impl Collective for Barrier {
    fn name(&self) -> &'static str {
        "barrier"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn sized(&self) -> bool {
        false
    }

    fn received(&self, _env: Env<'_>, _size: usize) -> usize {
        0
    }

    fn prepare<'a>(&self, env: Env<'a>, _size: usize) -> Box<dyn Instance + 'a> {
        Box::new(BarrierRun { env, stamps: [0; 2] })
    }
}

struct BarrierRun<'a> {
    env: Env<'a>,
    /// Wall-clock nanoseconds when this rank entered and left the last barrier.
    stamps: [u64; 2],
}

/// The wall clock in nanoseconds: one clock for every process of a machine.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Instance for BarrierRun<'_> {
    fn fill(&mut self, _seq: u64) {
        self.stamps = [0; 2];
    }

    fn select(&mut self, name: &str) -> zcoll::Result<()> {
        match name {
            "auto" => Ok(()),
            _ => Err(zcoll::Error::Config { name: "--algorithms", value: name.into(), expected: "auto" }),
        }
    }

    fn zcoll(&mut self) -> zcoll::Result<()> {
        self.stamps[0] = now_ns();
        let done = self.env.comm.barrier();
        self.stamps[1] = now_ns();
        done
    }

    fn mpi(&mut self) {
        self.stamps[0] = now_ns();
        self.env.world.barrier();
        self.stamps[1] = now_ns();
    }

    fn check(&mut self, _seq: u64) -> Result<(), String> {
        let world = self.env.world;
        let mut all = vec![0u64; 2 * world.size() as usize];
        world.all_gather_into(&self.stamps[..], &mut all[..]);
        // Clocks compare only on one machine: all ranks with virtual nodes, else the
        // ranks of this node.
        let info = self.env.comm.info();
        let peers: Vec<i32> = if info.nodes == 1 || info.virtual_nodes.is_some() {
            (0..world.size()).collect()
        } else {
            info.node_ranks.clone()
        };
        let left = self.stamps[1];
        match peers.iter().map(|&r| (all[2 * r as usize], r)).max() {
            Some((entered, r)) if entered > left => {
                Err(format!("left the barrier {} ns before rank {r} entered it", entered - left))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_steps_differ_in_every_byte() {
        let n: usize = 1003;
        let mut a = vec![0u64; n.div_ceil(8)];
        let mut b = a.clone();
        for seq in [0u64, 1, 253, 254, 255, 1 << 40] {
            fill_words(&mut a, seq);
            fill_words(&mut b, seq + 1);
            let (x, y): (&[u8], &[u8]) = (bytemuck::cast_slice(&a), bytemuck::cast_slice(&b));
            assert!(x[..n].iter().zip(&y[..n]).all(|(p, q)| p != q), "seq {seq}");
            assert_eq!(check_words(&a, n, seq), Ok(()));
            assert!(check_words(&b, n, seq).is_err());
        }
    }

    #[test]
    fn the_check_names_the_first_wrong_byte_even_the_last_one() {
        for n in [1usize, 7, 8, 9, 4096, 4099] {
            let mut w = vec![0u64; n.div_ceil(8)];
            fill_words(&mut w, 42);
            assert_eq!(check_words(&w, n, 42), Ok(()));
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut w);
            bytes[n - 1] ^= 1;
            let e = check_words(&w, n, 42).unwrap_err();
            assert!(e.starts_with(&format!("byte {} of {n} ", n - 1)), "{e}");
            // Bytes past the message are not part of it.
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut w);
            bytes[n - 1] ^= 1;
            if let Some(b) = bytes.get_mut(n) {
                *b ^= 1;
                assert_eq!(check_words(&w, n, 42), Ok(()));
            }
        }
    }

    #[test]
    fn the_uneven_distributions_move_about_p_times_size() {
        for p in [2usize, 3, 8] {
            for size in [8usize, 1000, 1 << 20] {
                let gv: usize = (0..p).map(|r| allgatherv_bytes(size, r, p)).sum();
                assert!(gv <= p * size && gv + p >= p * size, "p {p} size {size}: {gv}");
                assert!(allgatherv_bytes(size, p - 1, p) > allgatherv_bytes(size, 0, p));
                for r in 0..p {
                    let sent: usize = (0..p).map(|q| alltoallv_bytes(size, r, q, p)).sum();
                    let got: usize = (0..p).map(|q| alltoallv_bytes(size, q, r, p)).sum();
                    assert!(sent <= p * size && sent + p >= p * size, "p {p} size {size}: {sent}");
                    assert_eq!(sent, got);
                }
            }
        }
        // The documented formulas, by hand: 2 ranks of 8 B, 3 ranks of 8 B.
        assert_eq!([0, 1].map(|r| allgatherv_bytes(8, r, 2)), [5, 10]);
        assert_eq!([(0, 0), (0, 1), (1, 1)].map(|(q, r)| alltoallv_bytes(8, q, r, 3)), [4, 8, 12]);
        assert_eq!(displs(&[5, 0, 10]), [0, 5, 5]);
    }

    #[test]
    fn rank_streams_differ_and_are_checked_at_any_offset() {
        let mut a = vec![0u8; 100];
        fill_stream(&mut a, 7, 1);
        assert_eq!(check_stream(&a[13..40], 7, 1, 13), Ok(()));
        assert!(check_stream(&a[13..40], 7, 1, 12).is_err());
        assert!(check_stream(&a[13..40], 7, 0, 13).is_err());
        assert!(check_stream(&a[13..40], 8, 1, 13).is_err());
        let mut w = vec![0u64; 13];
        fill_words(&mut w, 7);
        fill_stream(&mut a, 7, 0);
        assert_eq!(&a[..], &bytemuck::cast_slice::<u64, u8>(&w)[..100], "rank 0's stream is fill_words");
        a[99] ^= 1;
        assert!(check_stream(&a, 7, 0, 0).unwrap_err().starts_with("byte 99 of the 100 from rank 0"));
    }

    #[test]
    fn every_entry_has_a_unique_name_and_is_found_by_it() {
        let order: Vec<&str> = ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            order,
            [
                "bcast",
                "scatter",
                "gather",
                "allgather",
                "alltoall",
                "allreduce",
                "reduce",
                "scatterv",
                "gatherv",
                "allgatherv",
                "alltoallv",
                "transpose",
                "colgather",
                "faces",
                "barrier"
            ]
        );
        for c in ALL {
            assert_eq!(by_name(c.name()).map(|f| f.name()), Some(c.name()));
            assert!(!c.algorithms().contains(&"auto"));
        }
        assert!(by_name("nope").is_none());
        let names: Vec<&str> = BcastAlgorithm::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(Bcast.algorithms(), names);
        let names: Vec<&str> = AlltoallAlgorithm::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(Alltoall.algorithms(), names);
        for a in Alltoall.algorithms() {
            assert_eq!(algorithm::<AlltoallAlgorithm>(a).map(|x| x.name()).ok(), Some(a));
        }
        assert!(algorithm::<ReduceAlgorithm>("pap-write").is_err());
    }
}
