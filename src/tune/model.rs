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
//! pinning when `c` readers pin one process's pages (normalised so that `gamma(1) = 1`
//! for a fitted profile). A transfer that pins pages nobody else pins has `c = 1`.
//! Copy-in/copy-out costs `2 n * memcpy_beta` plus `flag` per hand-off of a chunk.
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
//! for a call that exposes buffers, wait for every rank's `done`), whatever it moves:
//!
//! ```text
//! T_sync(p) = sync + (p - 2) * flag
//! ```
//!
//! with `sync` measured on two ranks, `sync_copy` for the single-copy algorithms (two
//! phases: the arrival and check, then the finish) and `sync_staged` for the
//! copy-in/copy-out ones (a private round: one phase), and one more flag read per peer
//! beyond the first. It is what moves the crossover from copy-in/copy-out to the single
//! copy: without it, a 4 KiB single copy looks cheaper than it is by the second phase.
//!
//! Every algorithm's cost is written from its schedule: what runs in parallel costs
//! the slowest of its transfers, what runs in sequence adds up.

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
    };

    /// The contention factor for `c` concurrent pinners of one process.
    pub fn gamma(&self, c: usize) -> f64 {
        let c = c.max(1) as f64;
        self.a * c * c + self.b * c
    }

    /// One single-copy transfer of `n` bytes with `c` concurrent pinners.
    pub fn transfer(&self, n: usize, c: usize) -> f64 {
        self.cost(n, self.beta, self.gamma(c))
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
        self.copy(n, d, c, false)
    }

    /// A [`wave`](Self::wave) of writes: the same with `write_beta` per byte.
    pub fn write_wave(&self, n: usize, d: usize, c: usize) -> f64 {
        self.copy(n, d, c, true)
    }

    fn copy(&self, n: usize, d: usize, c: usize, write: bool) -> f64 {
        let beta = if write { self.write_beta.unwrap_or(self.beta) } else { self.beta };
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
    /// `d + c - 1`, each pinning alone; writes with `write`.
    fn in_turn(&self, n: usize, d: usize, c: usize, write: bool) -> f64 {
        (d..d + c).map(|d| self.copy(n, d, 1, write)).sum()
    }

    /// `n` bytes with the partner at distance `d`, one call per `chunk` bytes: a
    /// [`wave`](Self::wave) of one (of writes with `write`) with a start-up per call.
    fn chunked(&self, n: usize, d: usize, chunk: usize, write: bool) -> f64 {
        n.div_ceil(chunk).saturating_sub(1) as f64 * self.alpha + self.copy(n, d, 1, write)
    }

    /// The round protocol of one call on `p` ranks: `sync_staged` or `sync_copy`, plus
    /// one flag per peer beyond the first.
    pub fn sync(&self, staged: bool, p: usize) -> f64 {
        let base = if staged { self.sync_staged } else { self.sync_copy };
        base + p.saturating_sub(2) as f64 * self.flag
    }

    /// Copy-in/copy-out of `n` bytes in chunks of `chunk` bytes.
    pub fn staged(&self, n: usize, chunk: usize) -> f64 {
        2.0 * n as f64 * self.memcpy_beta + (n.div_ceil(chunk.max(1)).max(1)) as f64 * self.flag
    }
}

/// The chunk of the copy-in/copy-out paths: half a 64 KiB staging area.
pub const STAGE_CHUNK: usize = 32 * 1024;

/// The chunk in which the partitioned reductions read a peer's piece of their partition
/// (and a reduce writes its result to the root): half the 64 KiB scratch area, so that
/// the piece and the accumulator stay in cache. One CMA call per chunk.
pub const PARTITION_CHUNK: usize = 32 * 1024;

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
    AllreduceStaged = 19, ReducePartitioned = 20, ReduceStaged = 21;
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
        // A wave of `c` partners from distance `d`; `c` partners in turn from distance `d`;
        // the same with writes.
        let w = |n, d, c| self.wave(n, d, c);
        let ww = |n, d, c| self.write_wave(n, d, c);
        let seq = |n, d, c| self.in_turn(n, d, c, false);
        let seq_w = |n, d, c| self.in_turn(n, d, c, true);
        match algo {
            Algo::BcastDirectRead => w(n, 1, q),
            Algo::BcastDirectWrite => seq_w(n, 1, q),
            Algo::BcastKnomial(k) => ceil_log(p, k) as f64 * w(n, 1, (k - 1).min(q)),
            // The scatter reads disjoint pages of the root: no page pinned twice; then a
            // ring with the neighbour.
            Algo::BcastScatterAllgather => w(n.div_ceil(p), 1, 1) + q as f64 * w(n.div_ceil(p), 1, 1),
            // The root refills a half only when all p - 1 readers have drained it.
            Algo::BcastStaged => {
                self.staged(n, STAGE_CHUNK) + (q - 1) as f64 * n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
            Algo::ScatterParallelRead => w(n, 1, q),
            Algo::GatherParallelWrite => ww(n, 1, q),
            Algo::ScatterSequentialWrite => seq_w(n, 1, q),
            Algo::GatherSequentialRead => seq(n, 1, q),
            Algo::ScatterThrottledRead(k) => {
                let k = k.clamp(1, q);
                (0..q.div_ceil(k)).map(|j| w(n, 1 + j * k, k)).sum()
            }
            Algo::GatherThrottledWrite(k) => {
                let k = k.clamp(1, q);
                (0..q.div_ceil(k)).map(|j| ww(n, 1 + j * k, k)).sum()
            }
            // Every step copies from one partner, each pinned by one rank at a time.
            Algo::AllgatherRing => q as f64 * w(n, 1, 1),
            Algo::AlltoallPairwise => seq(n, 1, q),
            Algo::AllgatherRecursiveDoubling => (0..ceil_log(p, 2))
                .map(|i| w(n << i, 1 << i, 1))
                .sum::<f64>()
                .min(q as f64 * w(n, 1, 1) * 2.0),
            Algo::AllgatherBruck => {
                (0..ceil_log(p, 2)).map(|i| w(n << i, 1 << i, 1)).sum::<f64>()
                    + pf * n as f64 * self.memcpy_beta
            }
            Algo::AlltoallBruck => (0..ceil_log(p, 2))
                .map(|i| w(n * p / 2, 1 << i, 1) + 2.0 * (n * p / 2) as f64 * self.memcpy_beta)
                .sum(),
            // The root copies every block once, the readers copy theirs out in parallel.
            Algo::ScatterStaged | Algo::GatherStaged => {
                (q * n + n) as f64 * self.memcpy_beta
                    + (q * n).div_ceil(STAGE_CHUNK).max(1) as f64 * self.flag
            }
            Algo::AllgatherStaged => {
                (p * n) as f64 * self.memcpy_beta + (p * n.div_ceil(STAGE_CHUNK).max(1)) as f64 * self.flag
            }
            Algo::AlltoallStaged => {
                (2 * q * n) as f64 * self.memcpy_beta
                    + (q * n.div_ceil(STAGE_CHUNK).max(1)) as f64 * self.flag
            }
            // Each rank reduces its partition: its own piece copied into the result and
            // every peer's read chunk by chunk and folded (a pass over the bytes each,
            // priced as a copy); then a reduce writes it to the root, chunk by chunk,
            // and an allreduce reads every other partition whole from its owner.
            Algo::AllreducePartitioned | Algo::ReducePartitioned => {
                let part = n.div_ceil(p);
                let reduced = (1..p).map(|d| self.chunked(part, d, PARTITION_CHUNK, false)).sum::<f64>()
                    + p as f64 * part as f64 * self.memcpy_beta;
                reduced
                    + match algo {
                        Algo::ReducePartitioned => self.chunked(part, 1, PARTITION_CHUNK, true),
                        _ => seq(part, 1, q),
                    }
            }
            // Every rank copies its chunk in; the root alone folds each peer's chunk into
            // its output, a copy out per peer.
            Algo::ReduceStaged => {
                self.staged(n, STAGE_CHUNK)
                    + (q - 1) as f64 * n as f64 * self.memcpy_beta
                    + (q - 1) as f64 * n.div_ceil(STAGE_CHUNK) as f64 * self.flag
            }
            // Every rank folds every rank's chunk, after every rank's hand-off.
            Algo::AllreduceStaged => {
                self.staged(n, STAGE_CHUNK)
                    + pf * n as f64 * self.memcpy_beta
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
    use super::*;

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
        // k = 3 of 7 readers: 3 waves, 3 concurrent pinners each.
        assert!(close(P.moving(Algo::ScatterThrottledRead(3), 8, n), 3.0 * t(3)));
        assert!(close(P.moving(Algo::ScatterThrottledRead(100), 8, n), t(7)));
        assert!(close(P.moving(Algo::BcastKnomial(2), 8, n), 3.0 * t(1)));
        assert!(close(P.moving(Algo::BcastKnomial(4), 16, n), 2.0 * t(3)));
        assert!(close(P.moving(Algo::AlltoallPairwise, 4, n), 3.0 * t1));
        assert_eq!(P.moving(Algo::BcastDirectRead, 1, n), 0.0);
        // A staged reduce: the copy in and out of the staging area, then one fold per
        // peer beyond the first at the root (2 chunks of 32 KiB: 2 hand-offs each).
        let m = 65536;
        assert!(close(P.moving(Algo::ReduceStaged, 2, m), P.staged(m, STAGE_CHUNK)));
        let three = P.staged(m, STAGE_CHUNK) + 65536.0 * 0.5e-9 + 2.0 * 1e-7;
        assert!(close(P.moving(Algo::ReduceStaged, 3, m), three));
        assert!(P.moving(Algo::ReduceStaged, 4, m) < P.moving(Algo::AllreduceStaged, 4, m));
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
        // k = 2 of 4 readers: two waves of two, both spanning the sockets.
        assert!(close(x.moving(Algo::ScatterThrottledRead(2), 5, n), 2.0 * cross(2.0)));
        // k = 3 of 4: two waves priced as full ones (the paper's ceil((p-1)/k) T(n, k)).
        assert!(close(x.moving(Algo::ScatterThrottledRead(3), 5, n), 2.0 * cross(3.0)));
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
        assert!(close(w.moving(Algo::GatherThrottledWrite(2), 5, n), 2.0 * write(2)));
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
    fn every_call_pays_its_round_protocol() {
        let n = 8192;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Two ranks: the measured constant alone; each peer beyond adds a flag.
        assert!(close(P.sync(false, 2), 2e-6) && close(P.sync(true, 2), 1e-6));
        assert!(close(P.sync(false, 8), 2e-6 + 6.0 * 1e-7));
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
}
