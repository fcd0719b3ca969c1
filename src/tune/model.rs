//! The cost model of the contention-aware CMA collectives (Cluster '17), extended with
//! the copy-in/copy-out paths.
//!
//! One single-copy transfer of `n` bytes, while `c` processes pin pages of the same
//! process at once, costs
//!
//! ```text
//! T(n, c) = alpha + n * beta + l * gamma(c) * ceil(n / s),     gamma(c) = a c^2 + b c
//! ```
//!
//! `alpha` is the start-up of a call, `beta` the cost per byte, `l` the cost of pinning
//! one page without contention, `s` the page size, and `gamma(c)` the slowdown of the
//! pinning when `c` readers pin one process's pages. A transfer that pins pages nobody
//! else pins has `c = 1` and pays `l` per page, `gamma(1) = 1` whatever `a + b` is: the
//! paper prices every uncontended transfer so, and its Table IV fits `a c^2 + b c` to
//! contended pins only (`a + b` is 1.71 on its Knights Landing). Copy-in/copy-out costs
//! `2 n * memcpy_beta` plus `flag` per hand-off of a chunk.
//!
//! Concurrent copies share the memory system: where the profile gives the node's copy
//! bandwidth (`node_beta`, seconds per byte copied by the node as a whole), a wave of `m`
//! copies moves each byte at `max(beta, m * node_beta)`; and a wave whose copies all take
//! one process's pages (a root's) draws on the memory of that process's socket alone,
//! `max(beta, m * node_beta * sockets)`. Without `node_beta` every copy gets `beta`, as in
//! the paper.
//!
//! On a node of several sockets, pinning across them contends differently: a wave of
//! transfers whose partners include a process on another socket pins with its own
//! factor `gamma_x(c) = a_x c^2 + b_x c` ([`CrossSocket`], normalised to the same
//! uncontended pin, so `gamma_x(1)` is the price of one remote reader). Ranks are taken to
//! be mapped round-robin over the sockets (MPI's default map beyond two ranks): a partner
//! at distance `d` in rank order is on another socket unless `d` is a multiple of the
//! socket count, so every wave of two transfers or more spans sockets.
//!
//! Every call also pays its round protocol (publish the call, check every rank's, and
//! for a call that exposes buffers, wait for every rank's `done`), whatever it moves.
//! A round has one or two phases: the arrival (with the check), and for the single-copy
//! algorithms the finish. Flat, every rank reads every other rank's flag in a phase,
//! `p - 1` cache lines; a tree of flags of fan-in `k` ([`Flags::Tree`]) costs
//! `L(p, k) = ceil(log_k p) k` lines instead (a parent reads its `k - 1` children per level
//! up, a child its parent per level down). The node awaits arrivals with the structure
//! [`Params::sync_structure`] finds cheaper for its size; the finish stays flat (a rank
//! that leaves a round early cannot stand for a subtree). So
//!
//! ```text
//! T_sync(p) = sync + (A(p) - 1) * flag + [single copy] (p - 2) * flag,
//! A(p) = min(p - 1, min over k = 2..8 of L(p, k))
//! ```
//!
//! with `sync` measured on two ranks (where a phase reads one flag), `sync_copy` for the
//! single-copy algorithms and `sync_staged` for the copy-in/copy-out ones (a private
//! round: the arrival only). It is what moves the crossover from copy-in/copy-out to the
//! single copy: without it, a 4 KiB single copy looks cheaper than it is by the second
//! phase.
//!
//! Every algorithm's cost is written from its schedule: what runs in parallel costs
//! the slowest of its transfers, what runs in sequence adds up, and a step that waits for
//! another rank's signal (the next wave of a throttled chain, the next level of a tree)
//! pays a `flag`.

/// The parameters of one machine.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// Start-up of one CMA call, seconds.
    pub alpha: f64,
    /// Seconds per byte copied by CMA.
    pub beta: f64,
    /// Seconds to pin one page without contention.
    pub l: f64,
    /// Page size, bytes.
    pub s: f64,
    /// `gamma(c) = a c^2 + b c`: the quadratic coefficient.
    pub a: f64,
    /// `gamma(c) = a c^2 + b c`: the linear coefficient.
    pub b: f64,
    /// Seconds per byte of a `memcpy` (the copy-in/copy-out paths).
    pub memcpy_beta: f64,
    /// Seconds for one flag hand-off between two ranks (a cache line moving).
    pub flag: f64,
    /// Seconds of a single-copy call's round protocol on two ranks (arrival and check,
    /// then finish), beyond its transfers. Profiles written before it was fitted lack
    /// it: they get the built-in value.
    #[serde(default = "sync_copy_default")]
    pub sync_copy: f64,
    /// Seconds of a copy-in/copy-out call's round protocol on two ranks (one phase),
    /// beyond its copies and hand-offs. Built-in value where a profile lacks it.
    #[serde(default = "sync_staged_default")]
    pub sync_staged: f64,
    /// Seconds per byte of a CMA *write* into lines the owner has just touched, where it
    /// was measured apart (`None`: `beta`, as the paper prices every transfer). A writer
    /// must take every line from the cache of the process it writes; measured here, that
    /// cost 1.8x a read of the same block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_beta: Option<f64>,
    /// The contention across sockets, on a node of several that was measured with ranks
    /// on more than one; `None` (the default) prices every pin with `gamma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_socket: Option<CrossSocket>,
    /// Seconds per byte the node's memory system copies when many copies run at once
    /// (the inverse of its copy bandwidth, all cores together); `None` (the default):
    /// every copy gets `beta` however many run, as in the paper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_beta: Option<f64>,
    /// Sockets of the node, when known: a wave that reads (or writes) one process's
    /// pages draws on its socket's share of `node_beta`. `None`: the sockets of
    /// `cross_socket`, else one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<usize>,
}

/// The structure of a round's flags on `p` ranks (see the [module](self) docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flags {
    /// Every rank reads every other rank's flag: `p - 1` lines per rank and phase.
    Flat,
    /// A tree of fan-in `k`: `ceil(log_k p)` levels up, a parent reading its `k - 1`
    /// children, and as many down. The code builds it for the arrival phase
    /// (`Info::arrival`); the completion phase stays flat.
    Tree(usize),
}

impl std::fmt::Display for Flags {
    /// `flat`, or `tree:k`: the form `ZCOLL_ARRIVAL` takes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flags::Flat => f.write_str("flat"),
            Flags::Tree(k) => write!(f, "tree:{k}"),
        }
    }
}

/// How pinning contends across the sockets of a node (see the [module](self) docs).
///
/// # Examples
///
/// ```
/// use zcoll::tune::{CrossSocket, Params};
/// let two = Params { cross_socket: Some(CrossSocket { sockets: 2, a: 1.0, b: 1.0 }), ..Params::DEFAULT };
/// // A single reader on the other socket pins at gamma_x(1) = 2, twice the local price.
/// assert!(two.wave(1 << 20, 1, 1) > Params::DEFAULT.transfer(1 << 20, 1));
/// // The reader two ranks away shares the owner's socket.
/// assert_eq!(two.wave(1 << 20, 2, 1), Params::DEFAULT.transfer(1 << 20, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossSocket {
    /// Sockets the node's ranks are spread over, round-robin.
    pub sockets: usize,
    /// `gamma_x(c) = a c^2 + b c`: the quadratic coefficient.
    pub a: f64,
    /// `gamma_x(c) = a c^2 + b c`: the linear coefficient.
    pub b: f64,
}

fn sync_copy_default() -> f64 {
    Params::DEFAULT.sync_copy
}

fn sync_staged_default() -> f64 {
    Params::DEFAULT.sync_staged
}

/// The cost of a remote fragment of a direct layout copy with CMA (an iovec the kernel
/// pins and walks), in seconds: see [`Params::layout_direct`]. From the transpose of
/// `zcoll bench` at 2 ranks on the development machine, where the direct path's time less
/// the packed path's gives 150 to 370 ns per remote iovec (blocks of 90 to 362 rows); it
/// also stands for the CMA read the packed path saves where its scratch buffers lie in
/// the shared heap and cross with loads.
pub const FRAGMENT_REMOTE: f64 = 250e-9;
/// The cost of a local fragment of a direct layout copy with CMA (an iovec walked).
pub const FRAGMENT_LOCAL: f64 = 10e-9;
/// The cost of a fragment of the packed path of a layout collective: a turn of the copy
/// loops over the memoized runs (`layout::runs`), as [`FRAGMENT_LOADS`]. (It was 50 ns
/// while the packed path flattened the layout on every call.)
pub const FRAGMENT_PACKED: f64 = 3e-9;
/// The cost of a fragment of a direct layout copy with loads and stores (a loop turn).
pub const FRAGMENT_LOADS: f64 = 3e-9;
/// The cost of a remote fragment of a direct layout copy with loads: a cache line pulled
/// from the peer's cache for each fragment, where packing reads the peer's fragments in
/// its own cache and moves whole lines. From the column gather of `zcoll bench` with heap
/// buffers at 2 ranks on the development machine (one `u64` per line: the direct path
/// 75 us against the packed path's 38 us for 8192 fragments, about 4.5 ns each over the
/// loop turn, rounded up for lines that also miss in the peer's cache).
pub const FRAGMENT_REMOTE_LOADS: f64 = 10e-9;
/// The smallest block a direct layout copy is chosen for (see [`Params::layout_direct`]).
pub const LAYOUT_MIN_BYTES: usize = 4096;
/// The price of a byte written with CMA against a byte read, where no `write_beta` was
/// measured (see [`Params::over_cma`]). `process_vm_writev` into a buffer its owner has just
/// touched must take every line from the owner's cache; at 2 ranks on the development
/// machine a gather's parallel write took 1.3 to 1.5 times the root's sequential reads of
/// the same 256 KiB to 512 KiB blocks in its fast mode, 2.0 to 3.0 times in its slow one
/// (`zcoll bench`, `Vec` buffers), and 1.8 is what `zcoll tune` fitted there.
pub const CMA_WRITE: f64 = 1.8;

impl Params {
    /// Parameters of the order measured on a 2-core x86-64 VM (DESIGN.md): the built-in
    /// defaults when no profile was measured on this machine.
    pub const DEFAULT: Params = Params {
        alpha: 0.45e-6,
        beta: 1.0 / 20e9,
        l: 50e-9,
        s: 4096.0,
        a: 0.4,
        b: 0.6,
        memcpy_beta: 1.0 / 31e9,
        flag: 0.2e-6,
        sync_copy: 1.5e-6,
        sync_staged: 0.8e-6,
        write_beta: None,
        cross_socket: None,
        node_beta: None,
        sockets: None,
    };

    /// Whether a layout collective (`Comm::all_to_all_layout_into` and its kin) should copy
    /// straight between the ranks' layouts rather than pack: blocks of `n` bytes, cut into
    /// at most `remote` fragments on the side a reader reads and `local` on the side it
    /// writes, read with loads and stores (`loads`) or with CMA.
    ///
    /// Packing costs two local copies of the block on top of the contiguous collective,
    /// each walking its layout, `2 n memcpy_beta + (remote + local) phi_p` (`phi_p` =
    /// [`FRAGMENT_PACKED`]); the direct copy saves them but pays per
    /// fragment: `remote phi_r + local phi_l` with CMA (each remote iovec is pinned and
    /// walked on its own, `phi_r` = [`FRAGMENT_REMOTE`]; a local one only walked, `phi_l` =
    /// [`FRAGMENT_LOCAL`]; or `n memcpy_beta + local phi_m` where a bounce buffer is
    /// cheaper), `remote phi_rl + local phi_m` with loads and stores (a cache line pulled
    /// from the peer per remote fragment, `phi_rl` = [`FRAGMENT_REMOTE_LOADS`], and one
    /// loop turn per local one, `phi_m` = [`FRAGMENT_LOADS`]), so that with loads and
    /// stores the direct copy wins above the smallest block unless the remote fragments
    /// are single elements (a column gather packs), and with CMA it packs unless the remote fragments are
    /// long (a transpose's rows of up to a few KiB pack: measured, the kernel's iovecs cost
    /// more than the packing, whose loops walk memoized runs and whose contiguous
    /// collective crosses the shared heap with loads). Blocks under [`LAYOUT_MIN_BYTES`] pack:
    /// the contiguous collective then crosses in one flag phase through the staging areas,
    /// which the two-phase direct round cannot match. The constants are set from
    /// measurements on the 2-core development machine, not fitted per machine.
    ///
    /// # Examples
    ///
    /// ```
    /// use zcoll::tune::Params;
    /// let p = Params::DEFAULT;
    /// assert!(p.layout_direct(1 << 20, 16, 16, false)); // 64 KiB fragments
    /// assert!(!p.layout_direct(1 << 20, 1 << 17, 1, false)); // 8-byte remote ones
    /// assert!(p.layout_direct(1 << 20, 256, 1 << 17, true)); // 8-byte stores
    /// assert!(!p.layout_direct(1 << 20, 1 << 17, 1, true)); // 8-byte loads
    /// assert!(!p.layout_direct(1024, 1, 1, true)); // too small a block
    /// ```
    pub fn layout_direct(&self, n: usize, remote: usize, local: usize, loads: bool) -> bool {
        let per_fragment = match loads {
            true => remote as f64 * FRAGMENT_REMOTE_LOADS + local as f64 * FRAGMENT_LOADS,
            // Many small local fragments are read into a bounce buffer and stored from
            // there (`transport::read_scatter`): one local copy and a loop turn each.
            false => {
                let walked = local as f64 * FRAGMENT_LOCAL;
                let bounced = n as f64 * self.memcpy_beta + local as f64 * FRAGMENT_LOADS;
                remote as f64 * FRAGMENT_REMOTE + walked.min(bounced)
            }
        };
        let packing = 2.0 * n as f64 * self.memcpy_beta + (remote + local) as f64 * FRAGMENT_PACKED;
        n >= LAYOUT_MIN_BYTES && per_fragment <= packing
    }

    /// The parameters for copies that cross with CMA: a write costs `write_beta` per byte,
    /// or [`CMA_WRITE`] times `beta` where none was measured. The model chooses before
    /// the arrival with the parameters as they are, which price a write like a read (as
    /// the paper does, and as a store into a peer's mapped buffer should be chosen against:
    /// the gather then turns it into the root's loads); a gather or gatherv whose `Auto`
    /// chose a write, and whose blocks turn out to cross with CMA, chooses again with
    /// these (`coll::gather`, `coll::gatherv`). The two choices differ only where a write
    /// was cheapest: pricing writes up never moves a choice away from a read or a staged
    /// path.
    ///
    /// # Examples
    ///
    /// ```
    /// use zcoll::tune::{Algo, Params, CMA_WRITE};
    /// let p = Params::DEFAULT;
    /// assert_eq!(p.over_cma().write_beta, Some(CMA_WRITE * p.beta));
    /// let measured = Params { write_beta: Some(3.0 * p.beta), ..p };
    /// assert_eq!(measured.over_cma(), measured);
    /// // A gather of 512 KiB blocks on 2 ranks: the write and the read cost alike until
    /// // the write is known to cross with CMA.
    /// let n = 512 * 1024;
    /// assert_eq!(p.predict(Algo::GatherParallelWrite, 2, n), p.predict(Algo::GatherSequentialRead, 2, n));
    /// let cma = p.over_cma();
    /// assert!(cma.predict(Algo::GatherParallelWrite, 2, n) > cma.predict(Algo::GatherSequentialRead, 2, n));
    /// ```
    pub fn over_cma(&self) -> Params {
        Params { write_beta: Some(self.write_beta.unwrap_or(CMA_WRITE * self.beta)), ..*self }
    }

    /// The contention factor for `c` concurrent pinners of one process: `a c^2 + b c`
    /// for two or more, 1 for one (an uncontended pin costs `l`, as in the paper).
    pub fn gamma(&self, c: usize) -> f64 {
        if c <= 1 {
            return 1.0;
        }
        let c = c as f64;
        self.a * c * c + self.b * c
    }

    /// One single-copy transfer of `n` bytes with `c` concurrent pinners (and no other
    /// copy sharing the memory system).
    pub fn transfer(&self, n: usize, c: usize) -> f64 {
        self.cost(n, self.beta, self.gamma(c))
    }

    /// The node's sockets: `sockets`, else those of `cross_socket`, else one.
    pub fn socket_count(&self) -> usize {
        self.sockets.or(self.cross_socket.map(|x| x.sockets)).unwrap_or(1).max(1)
    }

    /// Seconds per byte of one of `m` copies running at once, `beta` unless the memory
    /// system is the bound: `m node_beta`, or `m node_beta sockets` when all `m` take
    /// one process's pages (`one_source`), which lie on one socket.
    pub fn shared_beta(&self, beta: f64, m: usize, one_source: bool) -> f64 {
        match self.node_beta {
            Some(node) => {
                let share = if one_source { self.socket_count() as f64 } else { 1.0 };
                beta.max(m.max(1) as f64 * node * share)
            }
            None => beta,
        }
    }

    /// `n` bytes at `beta` per byte, pinned with the contention factor `gamma`.
    fn cost(&self, n: usize, beta: f64, gamma: f64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        self.alpha + n as f64 * beta + self.l * gamma * (n as f64 / self.s).ceil()
    }

    /// A wave of `c` concurrent transfers of `n` bytes each, pinning one process's pages,
    /// whose partners sit at distances `d, d + 1, ..., d + c - 1` from that process in
    /// rank order: [`transfer`](Self::transfer) when they all share its socket,
    /// otherwise the same with the cross-socket factor.
    pub fn wave(&self, n: usize, d: usize, c: usize) -> f64 {
        self.copy(n, d, c, Share::Source(c), false)
    }

    /// A [`wave`](Self::wave) of writes: the same with `write_beta` per byte.
    pub fn write_wave(&self, n: usize, d: usize, c: usize) -> f64 {
        self.copy(n, d, c, Share::Source(c), true)
    }

    /// One transfer of `n` bytes to or from the partner at distance `d`, pinned by `c`
    /// at once, while the copies `share` says run on the node; a write with `write`.
    fn copy(&self, n: usize, d: usize, c: usize, share: Share, write: bool) -> f64 {
        let beta = if write { self.write_beta.unwrap_or(self.beta) } else { self.beta };
        let beta = match share {
            Share::Source(m) => self.shared_beta(beta, m, true),
            Share::Spread(m) => self.shared_beta(beta, m, false),
        };
        let gamma = match self.cross_socket {
            Some(x) if x.sockets > 1 && (c > 1 || d % x.sockets != 0) => {
                let c = c.max(1) as f64;
                x.a * c * c + x.b * c
            }
            _ => self.gamma(c),
        };
        self.cost(n, beta, gamma)
    }

    /// `c` transfers of `n` bytes one after the other, partners at distances `d` to
    /// `d + c - 1`, each pinning alone while `share` runs; writes with `write`.
    fn in_turn(&self, n: usize, d: usize, c: usize, share: Share, write: bool) -> f64 {
        (d..d + c).map(|d| self.copy(n, d, 1, share, write)).sum()
    }

    /// `n` bytes with the partner at distance `d`, one call per `chunk` bytes, while
    /// `share` runs: one transfer (a write with `write`) with a start-up per call.
    fn chunked(&self, n: usize, d: usize, chunk: usize, share: Share, write: bool) -> f64 {
        n.div_ceil(chunk).saturating_sub(1) as f64 * self.alpha + self.copy(n, d, 1, share, write)
    }

    /// The round protocol of one call on `p` ranks, as the code runs it: `sync_staged` or
    /// `sync_copy`, plus the flags the arrival reads beyond two ranks' one, arranged as
    /// [`sync_structure`](Params::sync_structure) picks (which the node uses), plus for a
    /// single-copy call a flat finish: `p - 2` more flags.
    pub fn sync(&self, staged: bool, p: usize) -> f64 {
        let base = if staged { self.sync_staged } else { self.sync_copy };
        if p <= 2 {
            return base;
        }
        let arrival = self.flag_lines(p, self.sync_structure(p)) - 1.0;
        let finish = if staged { 0.0 } else { self.flag_lines(p, Flags::Flat) - 1.0 };
        base + (arrival + finish) * self.flag
    }

    /// The flag lines one rank reads in one phase on `p` ranks arranged as `how`.
    fn flag_lines(&self, p: usize, how: Flags) -> f64 {
        match how {
            Flags::Flat => (p - 1) as f64,
            // Up: a parent reads its k - 1 children per level; down: one read per level.
            Flags::Tree(k) => (ceil_log(p, k) * k.max(2)) as f64,
        }
    }

    /// The round protocol of one call on `p` ranks with the flags arranged as `how`:
    /// the two-rank constant, plus per phase the flags `how` reads beyond the one a
    /// phase reads on two ranks.
    pub fn sync_with(&self, staged: bool, p: usize, how: Flags) -> f64 {
        let (base, phases) = if staged { (self.sync_staged, 1.0) } else { (self.sync_copy, 2.0) };
        if p <= 2 {
            return base;
        }
        base + phases * (self.flag_lines(p, how) - 1.0) * self.flag
    }

    /// The cheaper structure of flags for a round on `p` ranks: flat, or a tree with the
    /// best fan-in from 2 to 8 (flat on a tie). The node awaits arrivals this way
    /// (`ZCOLL_ARRIVAL` overrides).
    pub fn sync_structure(&self, p: usize) -> Flags {
        [Flags::Flat]
            .into_iter()
            .chain((2..=8).map(Flags::Tree))
            .min_by(|x, y| self.sync_with(false, p, *x).total_cmp(&self.sync_with(false, p, *y)))
            .expect("candidates")
    }

    /// Copy-in/copy-out of `n` bytes in chunks of `chunk` bytes.
    pub fn staged(&self, n: usize, chunk: usize) -> f64 {
        2.0 * n as f64 * self.memcpy_beta + (n.div_ceil(chunk.max(1)).max(1)) as f64 * self.flag
    }
}

/// The chunk of the copy-in/copy-out paths: half a 64 KiB staging area.
pub const STAGE_CHUNK: usize = 32 * 1024;

/// The bytes the model prices the root of a read-write broadcast
/// ([`Algo::BcastReadWrite`]) of `n` bytes on `p` ranks as writing into each reader: a
/// `p`-th of `n` from `p` pages on, nothing up to `p - 1` pages, and every byte beyond
/// `p - 1` pages in between. Neither the share nor the reader's part (`n` less the share)
/// then falls as `n` grows, which a share rounded to pages did (a larger broadcast
/// predicted faster). The call itself finds its split at run time (the readers and the
/// root claim ranges as they go), so a root whose writes run slower takes less.
pub(crate) fn read_write_share(n: usize, p: usize) -> usize {
    const PAGE: usize = 4096;
    let p = p.max(1);
    (n / p).min(n.saturating_sub((p - 1) * PAGE))
}

/// The chunk in which the partitioned reductions read a peer's piece of their partition
/// (and a reduce writes its result to the root): half the 64 KiB scratch area, so that
/// the piece and the accumulator stay in cache. One CMA call per chunk.
pub const PARTITION_CHUNK: usize = 32 * 1024;

/// The chunk of a reduce's root reads at 2 ranks, where the peer's bytes go straight into
/// the root's output (`coll::reduce`'s `ROOT_READ_CHUNK`): one CMA call per mebibyte.
/// Beyond 2 ranks every peer but the first is read through the scratch,
/// [`PARTITION_CHUNK`] at a time.
pub const ROOT_READ_CHUNK: usize = 1 << 20;

/// Which copies share the memory system with a transfer.
#[derive(Clone, Copy, Debug)]
enum Share {
    /// This many copies at once, all of one process's pages (a root's).
    Source(usize),
    /// This many copies at once, of pages spread over the node's processes.
    Spread(usize),
}

fn ceil_log(p: usize, k: usize) -> usize {
    let (mut levels, mut reach) = (0, 1usize);
    while reach < p {
        reach = reach.saturating_mul(k.max(2));
        levels += 1;
    }
    levels
}

/// The modelled algorithms, with their parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algo {
    /// Broadcast: every non-root reads the root at once.
    BcastDirectRead,
    /// Broadcast: the root writes every non-root in turn.
    BcastDirectWrite,
    /// Broadcast: k-nomial read tree, at most `k - 1` readers per process at a time.
    BcastKnomial(usize),
    /// Broadcast: scatter of `p` chunks, then a ring allgather of them.
    BcastScatterAllgather,
    /// Broadcast through the staging area (32 KiB chunks).
    BcastStaged,
    /// Broadcast: every non-root reads the head of the root's buffer while the root
    /// writes the tail into each in turn.
    BcastReadWrite,
    /// Scatter: every non-root reads its block from the root at once.
    ScatterParallelRead,
    /// Scatter: the root writes each block in turn.
    ScatterSequentialWrite,
    /// Scatter: `k` readers at a time.
    ScatterThrottledRead(usize),
    /// Gather: every non-root writes its block into the root at once.
    GatherParallelWrite,
    /// Gather: the root reads each block in turn.
    GatherSequentialRead,
    /// Gather: `k` writers at a time.
    GatherThrottledWrite(usize),
    /// Allgather: a ring (each step reads one block from a neighbour).
    AllgatherRing,
    /// Allgather: recursive doubling.
    AllgatherRecursiveDoubling,
    /// Allgather: Bruck, with its final local rotation.
    AllgatherBruck,
    /// Alltoall: pairwise exchange.
    AlltoallPairwise,
    /// Alltoall: Bruck, with packing.
    AlltoallBruck,
    /// Scatter through the root's staging area.
    ScatterStaged,
    /// Gather through the staging areas.
    GatherStaged,
    /// Allgather through the staging areas.
    AllgatherStaged,
    /// Alltoall through the staging areas.
    AlltoallStaged,
    /// Allreduce: partitioned reduce-scatter and allgather.
    AllreducePartitioned,
    /// Allreduce through the staging areas.
    AllreduceStaged,
    /// Reduce: partitioned reduce-scatter, then the partitions to the root.
    ReducePartitioned,
    /// Reduce through the staging areas: only the root folds.
    ReduceStaged,
    /// Reduce: the root reads every peer's input in turn, chunk by chunk, and folds it.
    ReduceRootRead,
}

impl Algo {
    /// Whether the algorithm copies through the staging areas (copy-in/copy-out) rather
    /// than once, process to process: the Cluster '17 paper compares only the others.
    pub fn is_staged(self) -> bool {
        matches!(
            self,
            Algo::BcastStaged
                | Algo::ScatterStaged
                | Algo::GatherStaged
                | Algo::AllgatherStaged
                | Algo::AlltoallStaged
                | Algo::AllreduceStaged
                | Algo::ReduceStaged
        )
    }
}

/// `Algo`'s packing into one word (`tag << 32 | k`, tag from 1, so no algorithm packs to
/// 0): the decision caches hold a plain `u64`.
macro_rules! packing {
    ($($unit:ident = $u:literal),* ; $($with_k:ident = $w:literal),* $(,)?) => {
        impl Algo {
            /// This algorithm as one non-zero word; `None` for a `k` beyond 32 bits.
            pub(crate) fn pack(self) -> Option<u64> {
                Some(match self {
                    $(Algo::$unit => $u << 32,)*
                    $(Algo::$with_k(k) => $w << 32 | u32::try_from(k).ok()? as u64,)*
                })
            }

            /// The algorithm [`pack`](Self::pack) made `word` of.
            pub(crate) fn unpack(word: u64) -> Option<Algo> {
                let k = (word & u64::from(u32::MAX)) as usize;
                Some(match word >> 32 {
                    $($u => Algo::$unit,)*
                    $($w => Algo::$with_k(k),)*
                    _ => return None,
                })
            }
        }
    };
}

packing! {
    BcastDirectRead = 1, BcastDirectWrite = 2, BcastScatterAllgather = 3, BcastStaged = 4,
    ScatterParallelRead = 5, ScatterSequentialWrite = 6, GatherParallelWrite = 7,
    GatherSequentialRead = 8, AllgatherRing = 9, AllgatherRecursiveDoubling = 10,
    AllgatherBruck = 11, AlltoallPairwise = 12, AlltoallBruck = 13, ScatterStaged = 14,
    GatherStaged = 15, AllgatherStaged = 16, AlltoallStaged = 17, AllreducePartitioned = 18,
    AllreduceStaged = 19, ReducePartitioned = 20, ReduceStaged = 21, ReduceRootRead = 25,
    BcastReadWrite = 26;
    BcastKnomial = 22, ScatterThrottledRead = 23, GatherThrottledWrite = 24,
}

impl Params {
    /// The predicted time of `algo` on `p` ranks of one node, `n` bytes per block (the
    /// whole message for broadcast and allreduce, one rank's block otherwise), in
    /// seconds: its round protocol ([`sync`](Self::sync)) and its data movement
    /// ([`moving`](Self::moving)). A rank per core is assumed.
    pub fn predict(&self, algo: Algo, p: usize, n: usize) -> f64 {
        if p <= 1 {
            return 0.0;
        }
        self.sync(algo.is_staged(), p) + self.moving(algo, p, n)
    }

    /// The data movement alone of `algo` on `p` ranks, `n` bytes per block: the Cluster
    /// '17 paper's cost formulas (and the copy-in/copy-out paths').
    pub fn moving(&self, algo: Algo, p: usize, n: usize) -> f64 {
        let p = p.max(1);
        if p == 1 {
            return 0.0;
        }
        let q = p - 1;
        let pf = p as f64;
        // A wave of `c` partners from distance `d`, all on one process's pages; `c`
        // partners in turn from distance `d`; the same with writes. `spread(n, d, m)` is
        // one uncontended transfer while `m` copies of different processes' pages run.
        let w = |n, d, c| self.wave(n, d, c);
        let ww = |n, d, c| self.write_wave(n, d, c);
        let seq = |n, d, c| self.in_turn(n, d, c, Share::Source(1), false);
        let seq_w = |n, d, c| self.in_turn(n, d, c, Share::Source(1), true);
        let spread = |n, d, m| self.copy(n, d, 1, Share::Spread(m), false);
        // Seconds per byte of a user-space copy while `m` ranks copy at once.
        let mb = |m| self.shared_beta(self.memcpy_beta, m, false);
        // Steps that wait for another rank's signal before they start.
        let handoffs = |steps: usize| steps.saturating_sub(1) as f64 * self.flag;
        match algo {
            Algo::BcastDirectRead => w(n, 1, q),
            Algo::BcastDirectWrite => seq_w(n, 1, q),
            // The readers' reads of the head and the root's writes of the tail run at once;
            // a write into a peer costs what a CMA write does where none was measured
            // (stores into lines the reader holds are dearer than loads too), and the
            // root's writes need the readers' arrivals and the readers the root's end: one
            // more synchronization of the round's kind.
            Algo::BcastReadWrite => {
                let tail = read_write_share(n, p);
                let root = match tail {
                    0 => 0.0,
                    t => self.over_cma().in_turn(t, 1, q, Share::Source(1), true),
                };
                w(n - tail, 1, q).max(root) + self.sync_copy
            }
            // Level i: the k^i holders each serve up to k - 1 readers; every level after
            // the first waits for its parent's signal.
            Algo::BcastKnomial(k) => {
                let k = k.max(2);
                let levels = ceil_log(p, k);
                let mut holders = 1usize;
                let mut t = handoffs(levels);
                for _ in 0..levels {
                    let readers = holders.saturating_mul(k - 1).min(p - holders);
                    let share = if holders == 1 { Share::Source(readers) } else { Share::Spread(readers) };
                    t += self.copy(n, 1, (k - 1).min(q), share, false);
                    holders = holders.saturating_mul(k).min(p);
                }
                t
            }
            // Every non-root reads its chunk from the root at once (disjoint pages, but one
            // process's: the paper's contention is per process, not per page), then the
            // chunks go round a ring, every rank copying at once.
            Algo::BcastScatterAllgather => {
                let chunk = n.div_ceil(p);
                w(chunk, 1, q) + q as f64 * spread(chunk, 1, q)
            }
            // The root refills a half only when all p - 1 readers have drained it.
            // The readers copy out at once, sharing the memory system.
            Algo::BcastStaged => {
                self.staged(n, STAGE_CHUNK)
                    + n as f64 * (mb(q) - self.memcpy_beta)
                    + (q - 1) as f64 * n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
            Algo::ScatterParallelRead => w(n, 1, q),
            Algo::GatherParallelWrite => ww(n, 1, q),
            Algo::ScatterSequentialWrite => seq_w(n, 1, q),
            Algo::GatherSequentialRead => seq(n, 1, q),
            // Waves of k; each wave after the first starts on its predecessors' signals.
            Algo::ScatterThrottledRead(k) => {
                let k = k.clamp(1, q);
                (0..q.div_ceil(k)).map(|j| w(n, 1 + j * k, k)).sum::<f64>() + handoffs(q.div_ceil(k))
            }
            Algo::GatherThrottledWrite(k) => {
                let k = k.clamp(1, q);
                (0..q.div_ceil(k)).map(|j| ww(n, 1 + j * k, k)).sum::<f64>() + handoffs(q.div_ceil(k))
            }
            // Every step copies from one partner, each pinned by one rank at a time, while
            // every rank copies.
            Algo::AllgatherRing => q as f64 * spread(n, 1, p),
            Algo::AlltoallPairwise => self.in_turn(n, 1, q, Share::Spread(p), false),
            Algo::AllgatherRecursiveDoubling => (0..ceil_log(p, 2))
                .map(|i| spread(n << i, 1 << i, p))
                .sum::<f64>()
                .min(q as f64 * spread(n, 1, p) * 2.0),
            Algo::AllgatherBruck => {
                (0..ceil_log(p, 2)).map(|i| spread(n << i, 1 << i, p)).sum::<f64>()
                    + pf * n as f64 * self.memcpy_beta
            }
            Algo::AlltoallBruck => (0..ceil_log(p, 2))
                .map(|i| spread(n * p / 2, 1 << i, p) + 2.0 * (n * p / 2) as f64 * self.memcpy_beta)
                .sum(),
            // The root copies every block once, the readers copy theirs out in parallel.
            Algo::ScatterStaged => {
                (q * n) as f64 * self.memcpy_beta
                    + n as f64 * mb(q)
                    + (q * n).div_ceil(STAGE_CHUNK).max(1) as f64 * self.flag
            }
            // The writers copy their blocks in while the root copies out what is in, chunk
            // by chunk through two slots, so the slower of the two streams and one chunk of
            // the writers' before the root starts (measured at 2 ranks once the copies out
            // no longer took `memcpy`'s slow case (`transport::copy`): 512 KiB blocks in 47-52 us where one
            // memcpy of the 1 MiB the root receives took 27 us).
            Algo::GatherStaged => {
                ((q * n) as f64 * self.memcpy_beta).max(n as f64 * mb(q))
                    + n.min(STAGE_CHUNK) as f64 * mb(q)
                    + (q * n).div_ceil(STAGE_CHUNK).max(1) as f64 * self.flag
            }
            // Every rank copies at once.
            Algo::AllgatherStaged => {
                (p * n) as f64 * mb(p) + (p * n.div_ceil(STAGE_CHUNK).max(1)) as f64 * self.flag
            }
            Algo::AlltoallStaged => {
                (2 * q * n) as f64 * mb(p) + (q * n.div_ceil(STAGE_CHUNK).max(1)) as f64 * self.flag
            }
            // Each rank reduces its partition: its own piece copied into the result and
            // every peer's read chunk by chunk and folded (a pass over the bytes each,
            // priced as a copy), every rank reading at once; then a reduce writes it to
            // the root, chunk by chunk (every rank writing the root at once), and an
            // allreduce reads every other partition whole from its owner.
            Algo::AllreducePartitioned | Algo::ReducePartitioned => {
                let part = n.div_ceil(p);
                let reduced = (1..p)
                    .map(|d| self.chunked(part, d, PARTITION_CHUNK, Share::Spread(p), false))
                    .sum::<f64>()
                    + p as f64 * part as f64 * self.memcpy_beta;
                reduced
                    + match algo {
                        Algo::ReducePartitioned => {
                            self.chunked(part, 1, PARTITION_CHUNK, Share::Source(q), true)
                        }
                        _ => self.in_turn(part, 1, q, Share::Spread(p), false),
                    }
            }
            // Every rank copies its chunk in (the root too: into its scratch, then into its
            // staging area); the root alone then folds every rank's chunk into its output
            // in rank order, its own (a pass) and each peer's (a copy out of the peer's
            // area and a pass): on the root, (3 + 2 (p - 1)) n bytes at memcpy speed, the
            // peers' copies in hidden behind its own. At 2 ranks and 512 KiB (Open MPI
            // build, `Vec` buffers) it measured 98 us where these five passes price 88.
            // An input of at most one chunk travels with its rank's arrival: the root folds
            // its own input from its buffer and every peer's out of the peer's area, a copy
            // and a pass each (at 2 ranks with a commutative operator the peer's copy lands
            // in the output and the own input is the one pass), after the peers' copies in:
            // 3 n at 2 ranks, (2 (p - 1) + 2) n beyond.
            Algo::ReduceStaged if n <= STAGE_CHUNK => {
                (2 * q + if p == 2 { 1 } else { 2 }) as f64 * n as f64 * self.memcpy_beta + self.flag
            }
            // Beyond, at two ranks, chunk by chunk: the peer's copies in (a fill and a
            // publish) run beside the root's two passes (the peer's chunk copied straight
            // into the output, its own input folded in), the root a chunk behind.
            Algo::ReduceStaged if p == 2 => {
                (2 * n + 2 * STAGE_CHUNK) as f64 * self.memcpy_beta
                    + n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
            Algo::ReduceStaged => {
                self.staged(n, STAGE_CHUNK)
                    + (2 * q + 1) as f64 * n as f64 * self.memcpy_beta
                    + (q - 1) as f64 * n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
            // The root reads each peer's whole input in turn, one call per chunk, alone
            // on the node, and folds each chunk into its output while it is in cache (a
            // pass over the bytes per peer, priced as a copy; the first rank folded is
            // read or copied straight into the output):
            // (p-1) n beta + (p-1) ceil(n/c) alpha + (p-1) (n/s) l + (p-1) n gamma_op.
            // Serial in p, where the partitioned reduce's p - 1 reads per rank run side
            // by side on n/p bytes each: it wins at 2 ranks only.
            Algo::ReduceRootRead => {
                let chunk = if p == 2 { ROOT_READ_CHUNK } else { PARTITION_CHUNK };
                (1..p).map(|d| self.chunked(n, d, chunk, Share::Source(1), false)).sum::<f64>()
                    + (q * n) as f64 * self.memcpy_beta
            }
            // Every rank folds every rank's chunk, after every rank's hand-off.
            Algo::AllreduceStaged => {
                self.staged(n, STAGE_CHUNK)
                    + pf * n as f64 * mb(p)
                    + (q - 1) as f64 * n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
        }
    }

    /// The cheapest of `candidates` for `p` ranks and `n` bytes, and its predicted time.
    pub fn best(&self, candidates: &[Algo], p: usize, n: usize) -> Option<(Algo, f64)> {
        candidates.iter().map(|&a| (a, self.predict(a, p, n))).min_by(|x, y| x.1.total_cmp(&y.1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::select::{candidates, choose_with, Coll};
    use super::*;
    use proptest::prelude::*;

    const P: Params = Params {
        alpha: 1e-6,
        beta: 1e-9,
        l: 1e-7,
        s: 4096.0,
        a: 0.5,
        b: 0.5,
        memcpy_beta: 0.5e-9,
        flag: 1e-7,
        sync_copy: 2e-6,
        sync_staged: 1e-6,
        write_beta: None,
        cross_socket: None,
        node_beta: None,
        sockets: None,
    };

    #[test]
    fn transfer_matches_the_formula_by_hand() {
        assert_eq!(P.gamma(1), 1.0);
        assert_eq!(P.gamma(3), 0.5 * 9.0 + 0.5 * 3.0);
        // 10000 bytes: 3 pages.
        let want = 1e-6 + 10000.0 * 1e-9 + 1e-7 * 6.0 * 3.0;
        assert!((P.transfer(10000, 3) - want).abs() < 1e-15);
        assert_eq!(P.transfer(0, 5), 0.0);
        assert!((P.staged(65536, 32768) - (2.0 * 65536.0 * 0.5e-9 + 2.0 * 1e-7)).abs() < 1e-15);
    }

    #[test]
    fn algorithm_costs_by_hand() {
        let n = 8192; // 2 pages
        let t1 = 1e-6 + 8192e-9 + 1e-7 * 2.0;
        let t = |c: usize| 1e-6 + 8192e-9 + 1e-7 * P.gamma(c) * 2.0;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(P.moving(Algo::ScatterParallelRead, 8, n), t(7)));
        assert!(close(P.moving(Algo::ScatterSequentialWrite, 8, n), 7.0 * t1));
        // k = 3 of 7 readers: 3 waves, 3 concurrent pinners each, 2 hand-offs (1e-7 s).
        assert!(close(P.moving(Algo::ScatterThrottledRead(3), 8, n), 3.0 * t(3) + 2e-7));
        assert!(close(P.moving(Algo::ScatterThrottledRead(100), 8, n), t(7)));
        // Binomial on 8: 3 levels of one reader per holder, 2 hand-offs between levels.
        assert!(close(P.moving(Algo::BcastKnomial(2), 8, n), 3.0 * t(1) + 2e-7));
        assert!(close(P.moving(Algo::BcastKnomial(4), 16, n), 2.0 * t(3) + 1e-7));
        assert!(close(P.moving(Algo::AlltoallPairwise, 4, n), 3.0 * t1));
        assert_eq!(P.moving(Algo::BcastDirectRead, 1, n), 0.0);
        // A staged reduce: at 2 ranks the root's two passes (the peer's chunk copied into
        // the output, its own folded in) a chunk behind the peer's two, one hand-off per
        // chunk (2 chunks of 32 KiB); beyond, the copy in and out of the staging area, and
        // on the root the rest of its 3 + 2 (p - 1) passes (its own copy in, the fold of
        // its own chunk, a copy out and a fold per peer), one more hand-off per chunk per
        // peer beyond the first.
        let m = 65536;
        let pass = 65536.0 * 0.5e-9;
        assert!(close(P.moving(Algo::ReduceStaged, 2, m), 3.0 * pass + 2.0 * 1e-7));
        let three = P.staged(m, STAGE_CHUNK) + 5.0 * pass + 2.0 * 1e-7;
        assert!(close(P.moving(Algo::ReduceStaged, 3, m), three));
        // The root's reads: per peer one transfer of 16 pages and a fold; at 2 ranks one
        // call per MiB, beyond one per 32 KiB (one start-up more per peer).
        let read = (1e-6 + 65536e-9 + 1e-7 * 16.0) + pass;
        assert!(close(P.moving(Algo::ReduceRootRead, 2, m), read));
        assert!(close(P.moving(Algo::ReduceRootRead, 4, m), 3.0 * (read + 1e-6)));
        // Partitioned on 2 ranks, 128 KiB: each rank's 64 KiB partition is 2 chunks of
        // 32 KiB (2 calls: one start-up more than one transfer of 16 pages), its own
        // piece and the peer's folded (2 x 64 KiB at memcpy speed); then a reduce writes
        // it to the root in 2 calls, an allreduce reads the other partition in one.
        let part = 1e-6 + 65536e-9 + 1e-7 * 16.0;
        let reduced = (1e-6 + part) + 2.0 * 65536.0 * 0.5e-9;
        assert!(close(P.moving(Algo::ReducePartitioned, 2, 2 * m), reduced + 1e-6 + part));
        assert!(close(P.moving(Algo::AllreducePartitioned, 2, 2 * m), reduced + part));
    }

    #[test]
    fn waves_that_span_sockets_pin_with_the_cross_factor() {
        let x = Params { cross_socket: Some(CrossSocket { sockets: 2, a: 1.0, b: 2.0 }), ..P };
        let n = 8192; // 2 pages
        let local = |c: usize| 1e-6 + 8192e-9 + 1e-7 * P.gamma(c) * 2.0;
        let cross = |c: f64| 1e-6 + 8192e-9 + 1e-7 * (c * c + 2.0 * c) * 2.0;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Round-robin over 2 sockets: odd distances cross, even ones stay.
        assert!(close(x.wave(n, 1, 1), cross(1.0)));
        assert!(close(x.wave(n, 2, 1), local(1)));
        assert!(close(x.wave(n, 2, 2), cross(2.0)), "two partners always span both sockets");
        assert_eq!(x.wave(0, 1, 3), 0.0);
        // The root writes ranks at distances 1 to 4 in turn: cross, local, cross, local.
        assert!(close(x.moving(Algo::ScatterSequentialWrite, 5, n), 2.0 * cross(1.0) + 2.0 * local(1)));
        // k = 2 of 4 readers: two waves of two, both spanning the sockets, one hand-off.
        assert!(close(x.moving(Algo::ScatterThrottledRead(2), 5, n), 2.0 * cross(2.0) + 1e-7));
        // k = 3 of 4: two waves priced as full ones (the paper's ceil((p-1)/k) T(n, k)).
        assert!(close(x.moving(Algo::ScatterThrottledRead(3), 5, n), 2.0 * cross(3.0) + 1e-7));
        // All 4 at once.
        assert!(close(x.moving(Algo::GatherParallelWrite, 5, n), cross(4.0)));
        // Recursive doubling on 4 ranks: partners at distance 1 (cross) then 2 (local).
        let rd = 1e-6 + 16384e-9 + 1e-7 * 4.0;
        assert!(close(x.moving(Algo::AllgatherRecursiveDoubling, 4, n), cross(1.0) + rd));
        // One socket, or none said: the cross factor never applies.
        let one = Params { cross_socket: Some(CrossSocket { sockets: 1, a: 9.0, b: 9.0 }), ..P };
        for algo in [
            Algo::BcastDirectRead,
            Algo::BcastDirectWrite,
            Algo::BcastKnomial(3),
            Algo::ScatterThrottledRead(3),
            Algo::AlltoallPairwise,
            Algo::AllgatherBruck,
            Algo::AllreducePartitioned,
        ] {
            assert_eq!(one.moving(algo, 8, n), P.moving(algo, 8, n), "{algo:?}");
            assert!(x.moving(algo, 8, n) > P.moving(algo, 8, n), "{algo:?} crosses sockets");
        }
    }

    #[test]
    fn writes_cost_their_own_beta() {
        let w = Params { write_beta: Some(3e-9), ..P };
        let n = 8192; // 2 pages
        let read = |c: usize| 1e-6 + 8192e-9 + 1e-7 * P.gamma(c) * 2.0;
        let write = |c: usize| 1e-6 + 8192.0 * 3e-9 + 1e-7 * P.gamma(c) * 2.0;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(w.moving(Algo::GatherParallelWrite, 4, n), write(3)));
        assert!(close(w.moving(Algo::GatherThrottledWrite(2), 5, n), 2.0 * write(2) + 1e-7));
        assert!(close(w.moving(Algo::ScatterSequentialWrite, 4, n), 3.0 * write(1)));
        assert!(close(w.moving(Algo::BcastDirectWrite, 3, n), 2.0 * write(1)));
        // The reads keep beta.
        assert!(close(w.moving(Algo::GatherSequentialRead, 4, n), 3.0 * read(1)));
        assert!(close(w.moving(Algo::ScatterParallelRead, 4, n), read(3)));
        // A reduce writes its partition to the root: 2 ranks, 128 KiB, one 64 KiB
        // partition written in 2 calls.
        let (m, part) = (131072, 65536.0);
        let extra = (3e-9 - 1e-9) * part;
        assert!(close(
            w.moving(Algo::ReducePartitioned, 2, m),
            P.moving(Algo::ReducePartitioned, 2, m) + extra
        ));
        assert_eq!(w.moving(Algo::AllreducePartitioned, 2, m), P.moving(Algo::AllreducePartitioned, 2, m));
        // Without a write beta, writes are priced as reads (the paper's model).
        assert_eq!(P.moving(Algo::GatherParallelWrite, 4, n), P.moving(Algo::ScatterParallelRead, 4, n));
    }

    #[test]
    fn staged_gathers_pipeline_and_cma_writes_move_the_crossover() {
        let d = Params::DEFAULT;
        let gather =
            |params: &Params, p: usize, n: usize| params.best(&candidates(Coll::Gather, p), p, n).unwrap().0;
        let us = |params: &Params, a: Algo, p: usize, n: usize| params.predict(a, p, n) * 1e6;
        let close = |got: f64, want: f64| (got - want).abs() < 1e-3;
        // 2 ranks, 512 KiB, the built-in parameters. Staged: the root's copy out (524288 /
        // 31e9 s = 16.912516 us) hides the writer's copy in but for its first 32 KiB
        // chunk (1.057032 us), 16 hand-offs (3.2 us), the private round (0.8 us):
        // 21.969548 us. The root's read: 0.45 + 26.2144 + 128 pages x 0.05 + 1.5 (the
        // round of a single copy) = 34.5644 us. Before the pipelining was priced (the two
        // copies added), staged cost 38.825 us and lost.
        let n = 512 << 10;
        assert!(close(us(&d, Algo::GatherStaged, 2, n), 21.969548));
        assert!(close(us(&d, Algo::GatherSequentialRead, 2, n), 34.5644));
        assert_eq!(gather(&d, 2, n), Algo::GatherStaged);
        // On 4 ranks the root's copies bound it: 3 x 16.912516 + 1.057032 + 48 x 0.2 and
        // the round (0.8 + 2 flags beyond two ranks' one x 0.2).
        assert!(close(us(&d, Algo::GatherStaged, 4, n), 3.0 * 16.912516 + 1.057032 + 9.6 + 1.2));
        // A machine whose user-space copies cost twice CMA's bytes: the single copy wins,
        // and the write, priced like the read, comes first. Priced as a CMA write (1.8 beta) it costs 0.8 x 26.2144 us more at
        // 512 KiB, and the read takes its place; staged or read choices never move.
        let dear = Params { memcpy_beta: 2.0 * d.beta, ..d };
        let cma = dear.over_cma();
        assert_eq!(gather(&dear, 2, n), Algo::GatherParallelWrite);
        assert!(close(
            us(&cma, Algo::GatherParallelWrite, 2, n) - us(&cma, Algo::GatherSequentialRead, 2, n),
            0.8 * 26.2144
        ));
        assert_eq!(gather(&cma, 2, n), Algo::GatherSequentialRead);
        for coll in Coll::ALL {
            for p in [2, 3, 8, 16] {
                for n in [64, 64 << 10, 1 << 20] {
                    let (mapped, over) = (choose_with(&dear, coll, n, p), choose_with(&cma, coll, n, p));
                    let writes = matches!(
                        mapped,
                        Algo::GatherParallelWrite
                            | Algo::GatherThrottledWrite(_)
                            | Algo::ScatterSequentialWrite
                            | Algo::BcastDirectWrite
                            | Algo::ReducePartitioned
                    );
                    assert!(writes || mapped == over, "{coll:?} {p} ranks {n} B: {mapped:?} then {over:?}");
                }
            }
        }
    }

    #[test]
    fn every_call_pays_its_round_protocol() {
        let n = 8192;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Two ranks: the measured constant alone. Beyond, the arrival reads the lines of
        // the cheaper structure (on 8 ranks a binary tree: 3 levels of 2 lines, 6, five
        // beyond two ranks' one) and a single copy's finish one flag per peer beyond the
        // first (flat: 6).
        assert!(close(P.sync(false, 2), 2e-6) && close(P.sync(true, 2), 1e-6));
        assert_eq!(P.sync_structure(8), Flags::Tree(2));
        assert!(close(P.sync(false, 8), 2e-6 + (5.0 + 6.0) * 1e-7));
        assert!(close(P.sync(true, 8), 1e-6 + 5.0 * 1e-7));
        assert_eq!(P.sync_structure(5), Flags::Flat);
        assert!(close(P.sync(false, 5), 2e-6 + 2.0 * 3.0 * 1e-7));
        for (algo, p) in [(Algo::ScatterParallelRead, 8), (Algo::AllgatherRing, 5), (Algo::BcastStaged, 3)] {
            let want = P.sync(algo.is_staged(), p) + P.moving(algo, p, n);
            assert!(close(P.predict(algo, p, n), want), "{algo:?}");
        }
        assert_eq!(P.predict(Algo::BcastStaged, 1, n), 0.0, "one rank moves nothing");
        // The single copy's second phase moves the crossover. With staged bytes twice as
        // dear as CMA bytes, 1536 bytes on 2 ranks: the direct read moves them 0.536 us
        // faster (1 + 1.536 + 0.1 against 3.072 + 0.1 us) but pays 1 us more of rounds.
        let q = Params { memcpy_beta: 1e-9, ..P };
        let pair = [Algo::BcastDirectRead, Algo::BcastStaged];
        let without = Params { sync_copy: 0.0, sync_staged: 0.0, ..q };
        assert_eq!(q.best(&pair, 2, 1536).unwrap().0, Algo::BcastStaged);
        assert_eq!(without.best(&pair, 2, 1536).unwrap().0, Algo::BcastDirectRead);
    }

    #[test]
    fn contention_makes_throttling_win_for_large_messages_on_many_ranks() {
        let strong = Params { a: 2.0, b: -1.0, ..P };
        let (best, _) = strong
            .best(
                &[
                    Algo::ScatterParallelRead,
                    Algo::ScatterSequentialWrite,
                    Algo::ScatterThrottledRead(2),
                    Algo::ScatterThrottledRead(4),
                    Algo::ScatterThrottledRead(8),
                ],
                64,
                1 << 20,
            )
            .unwrap();
        assert!(matches!(best, Algo::ScatterThrottledRead(_)), "{best:?}");
        // Tiny messages under mild contention: the start-ups dominate, and one parallel
        // round beats 63 sequential ones.
        let mild = Params { a: 0.01, b: 0.99, ..P };
        let (best, _) = mild.best(&[Algo::ScatterParallelRead, Algo::ScatterSequentialWrite], 64, 8).unwrap();
        assert_eq!(best, Algo::ScatterParallelRead);
    }

    /// Table IV's Broadwell (alpha 0.98 us, 13.2 GB/s, l 0.11 us, 4 KiB pages, gamma
    /// 0.18 c^2 + 0.83 c), with the assumptions of `profiles/broadwell-28c.toml`: memcpy
    /// at the CMA rate, a 0.1 us flag, rounds of 0.75 and 0.4 us.
    const BDW: Params = Params {
        alpha: 0.98e-6,
        beta: 1.0 / 13.2e9,
        l: 0.11e-6,
        s: 4096.0,
        a: 0.18,
        b: 0.83,
        memcpy_beta: 1.0 / 13.2e9,
        flag: 0.1e-6,
        sync_copy: 0.75e-6,
        sync_staged: 0.4e-6,
        write_beta: None,
        cross_socket: None,
        node_beta: None,
        sockets: Some(2),
    };

    /// `got` (seconds) against `want_us` computed by hand (microseconds, 6 decimals).
    fn us(got: f64, want_us: f64) -> bool {
        (got * 1e6 - want_us).abs() <= 1e-5 * want_us.max(1.0)
    }

    #[test]
    fn every_cost_on_four_broadwell_ranks_by_hand() {
        // gamma(1) = 1 (an uncontended pin is l); gamma(2) = 0.72 + 1.66 = 2.38;
        // gamma(3) = 1.62 + 2.49 = 4.11.
        assert_eq!(BDW.gamma(1), 1.0);
        assert!((BDW.gamma(2) - 2.38).abs() < 1e-12 && (BDW.gamma(3) - 4.11).abs() < 1e-12);
        // n = 8192 (2 pages): n beta = 8192 / 13.2e9 s = 0.620606 us.
        // T1 = 0.98 + 0.620606 + 0.11 x 2 = 1.820606 us;
        // T(n, 2) = 0.98 + 0.620606 + 0.11 x 2.38 x 2 = 2.124206 us;
        // T(n, 3) = 0.98 + 0.620606 + 0.11 x 4.11 x 2 = 2.504806 us.
        let (p, n) = (4, 8192);
        let m = |a| BDW.moving(a, p, n);
        assert!(us(BDW.transfer(n, 1), 1.820606) && us(BDW.transfer(n, 3), 2.504806));
        // Three readers of the root at once: T(n, 3).
        for a in [Algo::BcastDirectRead, Algo::ScatterParallelRead, Algo::GatherParallelWrite] {
            assert!(us(m(a), 2.504806), "{a:?}");
        }
        // Three transfers in turn: 3 T1 = 5.461818; the ring and the pairwise exchange
        // make three uncontended steps too.
        for a in [
            Algo::BcastDirectWrite,
            Algo::ScatterSequentialWrite,
            Algo::GatherSequentialRead,
            Algo::AllgatherRing,
            Algo::AlltoallPairwise,
        ] {
            assert!(us(m(a), 5.461818), "{a:?}");
        }
        // k = 2: ceil(3 / 2) = 2 waves of T(n, 2), one hand-off: 4.248412 + 0.1.
        assert!(us(m(Algo::ScatterThrottledRead(2)), 4.348412));
        assert!(us(m(Algo::GatherThrottledWrite(2)), 4.348412));
        // Binomial: 2 levels of one reader per holder, one hand-off: 2 T1 + 0.1.
        assert!(us(m(Algo::BcastKnomial(2)), 3.741212));
        // 4-nomial on 4 ranks: one level of 3 readers, T(n, 3).
        assert!(us(m(Algo::BcastKnomial(4)), 2.504806));
        // Scatter-allgather: chunks of 2048 B (1 page, 0.155152 us of copy); 3 readers of
        // the root at once, T(2048, 3) = 0.98 + 0.155152 + 0.11 x 4.11 = 1.587252, then
        // 3 ring steps of T(2048, 1) = 0.98 + 0.155152 + 0.11 = 1.245152 each.
        assert!(us(m(Algo::BcastScatterAllgather), 1.587252 + 3.0 * 1.245152));
        // Recursive doubling: 8 KiB then 16 KiB, T(16384, 1) = 0.98 + 1.241212 + 0.44.
        assert!(us(m(Algo::AllgatherRecursiveDoubling), 1.820606 + 2.661212));
        // Bruck: the same steps and a rotation of p n bytes, 32768 beta = 2.482424.
        assert!(us(m(Algo::AllgatherBruck), 4.481818 + 2.482424));
        // Bruck's alltoall: 2 steps of n p / 2 = 16384 bytes, each packed and unpacked
        // (2 x 1.241212): 2 x (2.661212 + 2.482424).
        assert!(us(m(Algo::AlltoallBruck), 2.0 * (2.661212 + 2.482424)));
        // Staged, one 32 KiB chunk: bcast 2 n m + 1 flag (1.341212), then the root waits
        // for 2 more readers per chunk (0.2).
        assert!(us(m(Algo::BcastStaged), 1.341212 + 0.2));
        // Scatter/gather staged: the root copies 3 blocks (1.861818), a reader one
        // (0.620606), ceil(3 x 8192 / 32768) = 1 hand-off.
        assert!(us(m(Algo::ScatterStaged), 1.861818 + 0.620606 + 0.1));
        assert!(us(m(Algo::GatherStaged), 2.582424));
        // Allgather staged: p n bytes (2.482424) and p hand-offs.
        assert!(us(m(Algo::AllgatherStaged), 2.482424 + 0.4));
        // Alltoall staged: 2 (p - 1) n bytes (3.723636) and p - 1 hand-offs.
        assert!(us(m(Algo::AlltoallStaged), 3.723636 + 0.3));
        // Reduce staged, in one phase (the input fits a chunk): the peers' copies in, then
        // on the root its own input copied out of its buffer and a copy out and a fold
        // per peer: 8 passes (0.620606 each), one hand-off: 4.964848 + 0.1.
        assert!(us(m(Algo::ReduceStaged), 5.064848));
        // The root's reads: 3 T1 and 3 folds: 5.461818 + 1.861818.
        assert!(us(m(Algo::ReduceRootRead), 7.323636));
        // Allreduce staged: every rank folds p blocks: 1.341212 + 2.482424 + 0.2.
        assert!(us(m(Algo::AllreduceStaged), 4.023636));
        // Partitioned, 32 KiB on 4 ranks: 8 KiB partitions, one call each. Reducing:
        // 3 reads of T1 and p partitions folded (2.482424): 7.944242; then the reduce
        // writes its partition to the root (T1), the allreduce reads 3 partitions.
        assert!(us(BDW.moving(Algo::ReducePartitioned, p, 32768), 7.944242 + 1.820606));
        assert!(us(BDW.moving(Algo::AllreducePartitioned, p, 32768), 7.944242 + 5.461818));
        // The rounds on 4 ranks: 0.75 + 2 phases x 2 flags x 0.1 = 1.15 us for a single
        // copy; 0.4 + 1 x 2 x 0.1 = 0.6 us staged. predict adds them.
        assert!(us(BDW.sync(false, p), 1.15) && us(BDW.sync(true, p), 0.6));
        assert!(us(BDW.predict(Algo::ScatterParallelRead, p, n), 1.15 + 2.504806));
        assert!(us(BDW.predict(Algo::BcastStaged, p, n), 0.6 + 1.541212));
    }

    #[test]
    fn table_iv_costs_at_full_subscription_by_hand() {
        // Power8, 20 ranks, 1 MiB blocks (16 pages of 64 KiB): 19 readers,
        // gamma(19) = 0.04 x 361 + 1.95 x 19 = 51.49;
        // 0.75 + 1048576 / 3.17e9 s (330.781073 us) + 0.53 x 51.49 x 16 = 768.166273 us.
        let p8 =
            Params { alpha: 0.75e-6, beta: 1.0 / 3.17e9, l: 0.53e-6, s: 65536.0, a: 0.04, b: 1.95, ..BDW };
        assert!(us(p8.moving(Algo::ScatterParallelRead, 20, 1 << 20), 768.166273));
        // Knights Landing, 68 ranks, 4 KiB blocks, k = 8: 67 readers in 9 waves;
        // gamma(8) = 0.11 x 64 + 1.6 x 8 = 19.84; a wave is 1.43 + 4096 / 3.29e9 s
        // (1.244985 us) + 0.25 x 19.84 = 7.634985 us; 9 waves and 8 hand-offs of 0.2 us.
        let knl =
            Params { alpha: 1.43e-6, beta: 1.0 / 3.29e9, l: 0.25e-6, a: 0.11, b: 1.6, flag: 0.2e-6, ..BDW };
        assert!(us(knl.moving(Algo::ScatterThrottledRead(8), 68, 4096), 9.0 * 7.634985 + 1.6));
        // The rounds of 68 ranks: the arrival up and down a tree of fan-in 3 (4 levels of
        // 3 lines: 12, 11 beyond two ranks), the finish flat (66 beyond):
        // 0.75 + (11 + 66) x 0.2 = 16.15 us; flat in both phases it would be 27.15 us.
        assert_eq!(knl.sync_structure(68), Flags::Tree(3));
        assert!(us(knl.sync(false, 68), 16.15));
        assert!(us(knl.sync_with(false, 68, Flags::Flat), 27.15));
    }

    #[test]
    fn a_tree_of_flags_is_priced_per_level() {
        // 28 ranks: flat, 2 phases x 26 flags x 0.1 = 5.2 us over 0.75;
        // binary tree, ceil(log2 28) = 5 levels, 2 flags a level (a child up, the parent
        // down): 10 a phase, 9 beyond two ranks: 0.75 + 2 x 9 x 0.1 = 2.55 us.
        assert!(us(BDW.sync_with(false, 28, Flags::Flat), 5.95));
        assert!(us(BDW.sync_with(false, 28, Flags::Tree(2)), 2.55));
        // Fan-in 4: 3 levels of 4 flags: 0.4 + 1 x 11 x 0.1 = 1.5 us for a staged round.
        assert!(us(BDW.sync_with(true, 28, Flags::Tree(4)), 1.5));
        assert!(matches!(BDW.sync_structure(28), Flags::Tree(_)));
        // Two ranks: every structure is the measured constant, and flat is kept.
        assert_eq!(BDW.sync_structure(2), Flags::Flat);
        assert_eq!(BDW.sync_with(false, 2, Flags::Tree(2)), BDW.sync_copy);
    }

    #[test]
    fn concurrent_copies_share_the_memory_system() {
        // 60 GB/s for the node, 2 sockets: 4 copies of one root's pages get a quarter of
        // one socket's 30 GB/s each, 7.5 GB/s (0.133333 ns/B), below 13.2 GB/s; spread
        // over the node, 15 GB/s each, above it, so beta stands.
        let bw = Params { node_beta: Some(1.0 / 60e9), ..BDW };
        assert!((bw.shared_beta(bw.beta, 4, true) - 4.0 * 2.0 / 60e9).abs() < 1e-22);
        assert_eq!(bw.shared_beta(bw.beta, 4, false), bw.beta);
        assert_eq!(BDW.shared_beta(BDW.beta, 64, true), BDW.beta, "no node_beta, no sharing");
        // 3 readers of the root, 8 KiB: 3 x 2 / 60e9 = 0.1 ns/B, 0.8192 us of copy:
        // 0.98 + 0.8192 + 0.9042 = 2.7034 us.
        assert!(us(bw.moving(Algo::ScatterParallelRead, 4, 8192), 2.7034));
        // A ring of 4 copying at once over the node: 4 / 60e9 = 0.0667 ns/B < beta.
        assert_eq!(bw.moving(Algo::AllgatherRing, 4, 8192), BDW.moving(Algo::AllgatherRing, 4, 8192));
        // On 28 ranks it binds: 28 / 60e9 s/B, 8 KiB: 3.822933 us of copy a step;
        // 27 x (0.98 + 3.822933 + 0.22) = 135.619200 us.
        assert!(us(bw.moving(Algo::AllgatherRing, 28, 8192), 135.6192));
    }

    /// A plausible machine: every parameter of the default one scaled by a factor from
    /// a quarter to four, with or without the node's bandwidth, a write cost of its own,
    /// and a second socket.
    fn machine() -> impl Strategy<Value = Params> {
        let factors = proptest::collection::vec(0.25f64..4.0, 12);
        (factors, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(f, shared, write, sockets)| {
            let d = Params::DEFAULT;
            Params {
                alpha: d.alpha * f[0],
                beta: d.beta * f[1],
                l: d.l * f[2],
                s: d.s,
                a: d.a * f[3],
                b: d.b * f[4],
                memcpy_beta: d.memcpy_beta * f[5],
                flag: d.flag * f[6],
                sync_copy: d.sync_copy * f[7],
                sync_staged: d.sync_staged * f[8],
                write_beta: write.then(|| d.beta * f[1] * 1.8),
                cross_socket: sockets.then(|| CrossSocket { sockets: 2, a: d.a * f[9], b: d.b * f[10] }),
                node_beta: shared.then(|| d.beta * f[11] / 8.0),
                sockets: None,
            }
        })
    }

    /// The algorithms whose every extra rank adds work or contention: a root that
    /// serves or collects one more block, one more step of a ring or an exchange, one
    /// more concurrent reader or writer of one process.
    const GROW_WITH_RANKS: [Algo; 12] = [
        Algo::BcastDirectRead,
        Algo::BcastStaged,
        Algo::ScatterParallelRead,
        Algo::ScatterSequentialWrite,
        Algo::ScatterStaged,
        Algo::GatherParallelWrite,
        Algo::GatherSequentialRead,
        Algo::GatherStaged,
        Algo::AllgatherRing,
        Algo::AllgatherStaged,
        Algo::AlltoallPairwise,
        Algo::AlltoallStaged,
    ];

    proptest! {
        /// On any machine, no algorithm is predicted faster for a larger message.
        #[test]
        fn predictions_never_fall_as_messages_grow(
            params in machine(),
            p in 2usize..20,
            n in 0usize..1 << 24,
            more in 1usize..1 << 20,
        ) {
            for coll in Coll::ALL {
                for algo in candidates(coll, p) {
                    let (small, large) = (params.predict(algo, p, n), params.predict(algo, p, n + more));
                    prop_assert!(small <= large * (1.0 + 1e-12), "{:?} on {} ranks: {} B {} s, {} B {} s", algo, p, n, small, n + more, large);
                }
            }
        }

        /// On any machine, the round protocol costs no less with one more rank, and
        /// neither does an algorithm in which every rank adds work.
        #[test]
        fn predictions_never_fall_as_ranks_are_added(params in machine(), p in 2usize..40, n in 0usize..1 << 22) {
            for staged in [false, true] {
                prop_assert!(params.sync(staged, p) <= params.sync(staged, p + 1));
            }
            for algo in GROW_WITH_RANKS {
                let (fewer, more) = (params.predict(algo, p, n), params.predict(algo, p + 1, n));
                prop_assert!(fewer <= more * (1.0 + 1e-12), "{:?}, {} B: {} ranks {} s, one more {} s", algo, n, p, fewer, more);
            }
        }

        /// On any machine, for any size and node, the choice is one of the collective's
        /// candidates, and packs into the decision cache's word and back.
        #[test]
        fn every_choice_is_a_valid_algorithm(
            params in machine(),
            coll in proptest::sample::select(Coll::ALL.to_vec()),
            bytes in prop_oneof![0usize..1 << 16, 0usize..1 << 34],
            p in 1usize..300,
        ) {
            let algo = choose_with(&params, coll, bytes, p);
            prop_assert!(candidates(coll, p).contains(&algo), "{:?} for {:?}", algo, coll);
            prop_assert_eq!(Algo::unpack(algo.pack().unwrap()), Some(algo));
        }
    }
}
