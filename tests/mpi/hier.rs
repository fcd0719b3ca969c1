//! Every collective across virtual nodes, on a communicator whose ranks interleave the
//! nodes as on a cluster: the world's ranks are permuted with `split` keys (a seeded
//! random permutation), so the `k` processes of a virtual node (consecutive
//! `MPI_COMM_WORLD` ranks) hold scattered ranks of the communicator. Each collective runs
//! with random roots at sizes from 0 to 8 MiB and is compared with rsmpi's own collective
//! on the same permuted communicator, with guard bytes after every buffer; a bad call is
//! the same `Err` on every rank and leaves every buffer as it was; the barrier is checked
//! with marker files.
//!
//! The seed comes from `ZCOLL_TEST_SEED` (every job of the table has its own); a failing
//! rank prints it with the node size and the permutation, so the job can be replayed.

use crate::common::op_mpi;
use crate::common::{check_barrier, pattern, same, Guarded, Layout, Rng};
use crate::rank::Particle;
use mpi::datatype::{Partition as MpiPartition, PartitionMut as MpiPartitionMut};
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use mpi::Count;
use zcoll::op::{Builtin, Reducible};
use zcoll::{
    AllgatherAlgorithm, AllgathervAlgorithm, AlltoallAlgorithm, AlltoallvAlgorithm, BcastAlgorithm, Comm,
    Error, GatherAlgorithm, Pod, ScatterAlgorithm,
};

/// The sizes of a job, in bytes per rank (a rooted collective's root holds `P` blocks of
/// `size / P`, so no rank holds more than 8 MiB): empty, one byte, odd, page-crossing,
/// about 100 KiB, 1 MiB and odd, 8 MiB.
const SIZES: [usize; 7] = [0, 1, 7, 4097, 100_003, (1 << 20) + 5, 8 << 20];

/// The job's seed: `ZCOLL_TEST_SEED`, or a fixed one.
fn seed() -> u64 {
    std::env::var("ZCOLL_TEST_SEED").map_or(0x41e7, |s| s.parse().expect("ZCOLL_TEST_SEED is a number"))
}

/// The scenario `hier`: builds the permuted communicator and runs every check on it.
pub(crate) fn run(world: &SimpleCommunicator) {
    let seed = seed();
    let p = world.size() as usize;
    let k = std::env::var("ZCOLL_NODE_SIZE").map_or(p, |k| k.parse().expect("ZCOLL_NODE_SIZE"));
    // The same permutation on every rank: world rank w gets rank perm[w].
    let mut rng = Rng(seed);
    let mut perm: Vec<usize> = (0..p).collect();
    for i in (1..p).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let w = world.rank() as usize;
    // A failing rank names what replays the job, then the hook of `rank` aborts it.
    let hook = std::panic::take_hook();
    let replay = format!("hier: ZCOLL_TEST_SEED={seed} P={p} ZCOLL_NODE_SIZE={k} permutation {perm:?}");
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("{replay}");
        hook(info);
    }));
    let permuted = world
        .split_by_color_with_key(Color::with_value(0), perm[w] as i32)
        .expect("a split with a defined color returns a communicator");
    assert_eq!(permuted.rank() as usize, perm[w], "split keys order the ranks");
    let comm = Comm::new(&permuted).unwrap_or_else(|e| panic!("Comm::new on the permuted communicator: {e}"));

    // The nodes: ceil(P / k) of them, each the permuted ranks of k consecutive world ranks.
    let info = comm.info();
    assert_eq!((info.rank, info.size), (permuted.rank(), p as i32), "{info}");
    assert_eq!(info.nodes, p.div_ceil(k), "{info}");
    let mut members: Vec<i32> = (0..p).filter(|&v| v / k == w / k).map(|v| perm[v] as i32).collect();
    members.sort_unstable();
    assert_eq!(info.node_ranks, members, "{info}");
    assert_eq!(info.virtual_nodes, Some(k).filter(|_| std::env::var("ZCOLL_NODE_SIZE").is_ok()));

    let mut t = Tester { mpi: &permuted, comm: &comm, me: permuted.rank(), p: p as i32, rng, seed };
    for (i, &bytes) in SIZES.iter().enumerate() {
        t.size(i, bytes);
    }
    t.varcount();
    t.barrier();
    t.errors();
    comm.barrier().unwrap();
}

/// The checks of one job, on the permuted communicator `mpi` (the oracle's) and `comm`.
struct Tester<'a> {
    mpi: &'a SimpleCommunicator,
    comm: &'a Comm,
    me: i32,
    p: i32,
    /// Draws the roots and layouts: every rank draws the same sequence.
    rng: Rng,
    /// The data seed of the next call.
    seed: u64,
}

impl Tester<'_> {
    fn next_seed(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(1);
        self.seed
    }

    fn root(&mut self) -> i32 {
        self.rng.below(self.p as usize) as i32
    }

    /// Every collective at `bytes` bytes per rank (the `i`th size): the big ones in bytes
    /// only, the small ones also in words and records, in place, and one of them (4097 and
    /// 100_003 bytes) with every algorithm of every collective.
    fn size(&mut self, i: usize, bytes: usize) {
        let p = self.p as usize;
        // A block of a rooted or exchange collective: tiny sizes as they are, the others
        // shared among the ranks.
        let block = if bytes < 4096 { bytes } else { bytes / p };
        // An all-to-all block goes to every rank: P blocks per rank.
        let exchange = if bytes < 4096 { bytes } else { bytes / (p * p) };
        let big = bytes > 1 << 20;
        self.bcast::<u8>(bytes, BcastAlgorithm::Auto);
        self.allreduce::<u64>(bytes / 8, Builtin::Sum, i % 2 == 1);
        self.scatter::<u8>(block, false, ScatterAlgorithm::Auto);
        self.gather::<u8>(block, false, GatherAlgorithm::Auto);
        self.allgather::<u8>(block, false, AllgatherAlgorithm::Auto);
        self.alltoall::<u8>(exchange, AlltoallAlgorithm::Auto);
        if big {
            return;
        }
        self.reduce::<u64>(bytes / 8, Builtin::Sum);
        self.reduce::<i32>(bytes / 4, Builtin::Max);
        self.allreduce::<u32>(bytes / 4, Builtin::BitXor, i % 2 == 0);
        self.scatter::<u8>(block, true, ScatterAlgorithm::Auto);
        self.gather::<u8>(block, true, GatherAlgorithm::Auto);
        self.allgather::<u8>(block, true, AllgatherAlgorithm::Auto);
        self.bcast::<Particle>(bytes.div_ceil(32), BcastAlgorithm::Auto);
        self.scatter::<u32>(block.div_ceil(4), false, ScatterAlgorithm::Auto);
        self.gather::<Particle>(block.div_ceil(32), false, GatherAlgorithm::Auto);
        self.allgather::<u32>(block.div_ceil(4), false, AllgatherAlgorithm::Auto);
        self.alltoall::<u32>(exchange.div_ceil(4), AlltoallAlgorithm::Auto);
        if bytes == 4097 || bytes == 100_003 {
            self.algorithms(bytes, block, exchange);
        }
    }

    /// Every algorithm of every collective that takes one (across nodes it is checked
    /// alike everywhere and chooses the node legs), the pipelined broadcast also with a
    /// chunk of three pages so that the inter-node stream comes in many pieces.
    fn algorithms(&mut self, bytes: usize, block: usize, exchange: usize) {
        let p = self.p as u32;
        let bcasts = BcastAlgorithm::ALL
            .into_iter()
            .chain([BcastAlgorithm::Pipelined { chunk: 3 * 4096 }, BcastAlgorithm::KnomialRead { k: 2 }]);
        for a in bcasts {
            self.bcast::<u8>(bytes, a);
        }
        self.bcast::<u8>((1 << 20) + 5, BcastAlgorithm::Pipelined { chunk: 3 * 4096 });
        for (j, a) in
            ScatterAlgorithm::ALL.into_iter().chain([ScatterAlgorithm::ThrottledRead { k: p }]).enumerate()
        {
            self.scatter::<u8>(block, j % 2 == 1, a);
        }
        for (j, a) in
            GatherAlgorithm::ALL.into_iter().chain([GatherAlgorithm::ThrottledWrite { k: p }]).enumerate()
        {
            self.gather::<u8>(block, j % 2 == 1, a);
        }
        for (j, a) in AllgatherAlgorithm::ALL.into_iter().enumerate() {
            self.allgather::<u8>(block, j % 2 == 1, a);
        }
        for a in AlltoallAlgorithm::ALL {
            self.alltoall::<u8>(exchange, a);
        }
    }

    fn bcast<T: Pod>(&mut self, n: usize, algo: BcastAlgorithm) {
        let (root, seed, me) = (self.root(), self.next_seed(), self.me);
        let what = format!("bcast {n} x {} B root={root} {algo} rank {me}", size::<T>());
        let fill = |i: usize| if me == root { pattern(seed, i) } else { !pattern(seed, i) };
        let mut buf = Guarded::<T>::new(n, fill);
        let mut oracle = buf.get().to_vec();
        if n > 0 {
            // Open MPI rejects an empty broadcast from a dangling (empty Vec) pointer.
            self.mpi.process_at_rank(root).broadcast_into(&mut oracle[..]);
        }
        let got = match algo {
            BcastAlgorithm::Auto => self.comm.broadcast_into(buf.get_mut(), root),
            a => self.comm.broadcast_into_with(buf.get_mut(), root, a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        buf.holds(bytemuck::cast_slice(&oracle), &what);
    }

    /// Reduce to a random root with the root and non-root methods (in place on the root
    /// for odd seeds).
    fn reduce<T: Reducible>(&mut self, n: usize, op: Builtin) {
        let (root, seed, me) = (self.root(), self.next_seed(), self.me);
        let what = format!("reduce {n} x {} B {op:?} root={root} rank {me}", std::mem::size_of::<T>());
        let mine = |i: usize| pattern(seed + 11 * me as u64, i);
        let send = Guarded::<T>::new(n, mine);
        let mut oracle = vec![T::zeroed(); if me == root { n } else { 0 }];
        if n > 0 {
            let at = self.mpi.process_at_rank(root);
            if me == root {
                at.reduce_into_root(send.get(), &mut oracle[..], op_mpi(op));
            } else {
                at.reduce_into(send.get(), op_mpi(op));
            }
        }
        if me != root {
            self.comm.reduce_into(send.get(), root, op).unwrap_or_else(|e| panic!("{what}: {e}"));
        } else if seed % 2 == 1 {
            let mut buf = Guarded::<T>::new(n, mine);
            self.comm.reduce_in_place_root(buf.get_mut(), root, op).unwrap_or_else(|e| panic!("{what}: {e}"));
            same(buf.bytes(), bytemuck::cast_slice(&oracle), &format!("{what} in place"));
            buf.guard(&what);
        } else {
            let mut recv = Guarded::<T>::new(n, |i| !pattern(seed, i));
            self.comm
                .reduce_into_root(send.get(), recv.get_mut(), root, op)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            recv.holds(bytemuck::cast_slice(&oracle), &what);
        }
        send.unchanged(mine, &what);
    }

    fn allreduce<T: Reducible>(&mut self, n: usize, op: Builtin, in_place: bool) {
        let (seed, me) = (self.next_seed(), self.me);
        let what =
            format!("allreduce {n} x {} B {op:?} in place {in_place} rank {me}", std::mem::size_of::<T>());
        let mine = |i: usize| pattern(seed + 13 * me as u64, i);
        let send = Guarded::<T>::new(n, mine);
        let mut oracle = vec![T::zeroed(); n];
        if n > 0 {
            self.mpi.all_reduce_into(send.get(), &mut oracle[..], op_mpi(op));
        }
        let got = if in_place {
            let mut buf = Guarded::<T>::new(n, mine);
            self.comm.all_reduce_in_place(buf.get_mut(), op).unwrap_or_else(|e| panic!("{what}: {e}"));
            buf
        } else {
            let mut recv = Guarded::<T>::new(n, |i| !pattern(seed, i));
            self.comm
                .all_reduce_into(send.get(), recv.get_mut(), op)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            recv
        };
        got.holds(bytemuck::cast_slice(&oracle), &what);
        send.unchanged(mine, &what);
    }

    /// Scatter of `block` elements per rank from a random root; in place, the root's
    /// buffer must not change at all.
    fn scatter<T: Pod>(&mut self, block: usize, in_place: bool, algo: ScatterAlgorithm) {
        let (root, seed, me, p) = (self.root(), self.next_seed(), self.me, self.p as usize);
        let what =
            format!("scatter {block} x {} B root={root} in place {in_place} {algo} rank {me}", size::<T>());
        let is_root = me == root;
        let all = |i: usize| pattern(seed, i);
        let junk = |i: usize| !pattern(seed, i);
        let mut send = Guarded::<T>::new(if is_root { p * block } else { 0 }, all);
        let mut recv = Guarded::<T>::new(block, junk);
        let mut oracle = vec![T::zeroed(); block];
        if block > 0 {
            let at = self.mpi.process_at_rank(root);
            if is_root {
                at.scatter_into_root(send.get(), &mut oracle[..]);
            } else {
                at.scatter_into(&mut oracle[..]);
            }
        }
        let auto = algo == ScatterAlgorithm::Auto;
        let got = match (is_root, in_place) {
            (true, true) if auto => self.comm.scatter_in_place_root(send.get_mut(), root),
            (true, true) => self.comm.scatter_in_place_root_with(send.get_mut(), root, algo),
            (true, false) if auto => self.comm.scatter_into_root(send.get(), recv.get_mut(), root),
            (true, false) => self.comm.scatter_into_root_with(send.get(), recv.get_mut(), root, algo),
            (false, _) if auto => self.comm.scatter_into(recv.get_mut(), root),
            (false, _) => self.comm.scatter_into_with(recv.get_mut(), root, algo),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        if !(is_root && in_place) {
            recv.holds(bytemuck::cast_slice(&oracle), &what);
        }
        send.unchanged(all, &what);
    }

    /// Gather of `block` elements per rank to a random root; in place, the root's block
    /// already sits at its place in the receive buffer.
    fn gather<T: Pod>(&mut self, block: usize, in_place: bool, algo: GatherAlgorithm) {
        let (root, seed, me, p) = (self.root(), self.next_seed(), self.me, self.p as usize);
        let what =
            format!("gather {block} x {} B root={root} in place {in_place} {algo} rank {me}", size::<T>());
        let is_root = me == root;
        let mine = |i: usize| pattern(seed + 7 * me as u64, i);
        let send = Guarded::<T>::new(block, mine);
        let whole = if is_root { p * block } else { 0 };
        let junk = |i: usize| !pattern(seed, i);
        let mut recv = Guarded::<T>::new(whole, junk);
        let mut oracle = vec![T::zeroed(); whole];
        if block > 0 {
            let at = self.mpi.process_at_rank(root);
            if is_root {
                at.gather_into_root(send.get(), &mut oracle[..]);
            } else {
                at.gather_into(send.get());
            }
        }
        if is_root && in_place {
            let own = root as usize * block..(root as usize + 1) * block;
            recv.get_mut()[own].copy_from_slice(send.get());
        }
        let auto = algo == GatherAlgorithm::Auto;
        let got = match (is_root, in_place) {
            (true, true) if auto => self.comm.gather_in_place_root(recv.get_mut(), root),
            (true, true) => self.comm.gather_in_place_root_with(recv.get_mut(), root, algo),
            (true, false) if auto => self.comm.gather_into_root(send.get(), recv.get_mut(), root),
            (true, false) => self.comm.gather_into_root_with(send.get(), recv.get_mut(), root, algo),
            (false, _) if auto => self.comm.gather_into(send.get(), root),
            (false, _) => self.comm.gather_into_with(send.get(), root, algo),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(bytemuck::cast_slice(&oracle), &what);
        send.unchanged(mine, &what);
    }

    fn allgather<T: Pod>(&mut self, block: usize, in_place: bool, algo: AllgatherAlgorithm) {
        let (seed, me, p) = (self.next_seed(), self.me, self.p as usize);
        let what = format!("allgather {block} x {} B in place {in_place} {algo} rank {me}", size::<T>());
        let mine = |i: usize| pattern(seed + 5 * me as u64, i);
        let send = Guarded::<T>::new(block, mine);
        let mut recv = Guarded::<T>::new(p * block, |i| !pattern(seed, i));
        let mut oracle = vec![T::zeroed(); p * block];
        if block > 0 {
            self.mpi.all_gather_into(send.get(), &mut oracle[..]);
        }
        if in_place {
            let own = me as usize * block..(me as usize + 1) * block;
            recv.get_mut()[own].copy_from_slice(send.get());
        }
        let got = match (in_place, algo) {
            (true, AllgatherAlgorithm::Auto) => self.comm.all_gather_in_place(recv.get_mut()),
            (true, a) => self.comm.all_gather_in_place_with(recv.get_mut(), a),
            (false, AllgatherAlgorithm::Auto) => self.comm.all_gather_into(send.get(), recv.get_mut()),
            (false, a) => self.comm.all_gather_into_with(send.get(), recv.get_mut(), a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(bytemuck::cast_slice(&oracle), &what);
        send.unchanged(mine, &what);
    }

    fn alltoall<T: Pod>(&mut self, block: usize, algorithm: AlltoallAlgorithm) {
        let (seed, me, p) = (self.next_seed(), self.me, self.p as usize);
        let what = format!("alltoall {block} x {} B {algorithm} rank {me}", size::<T>());
        let mine = |i: usize| pattern(seed + 3 * me as u64, i);
        let send = Guarded::<T>::new(p * block, mine);
        let mut recv = Guarded::<T>::new(p * block, |i| !pattern(seed, i));
        let mut oracle = vec![T::zeroed(); p * block];
        if block > 0 {
            self.mpi.all_to_all_into(send.get(), &mut oracle[..]);
        }
        let got = match algorithm {
            AlltoallAlgorithm::Auto => self.comm.all_to_all_into(send.get(), recv.get_mut()),
            a => self.comm.all_to_all_into_with(send.get(), recv.get_mut(), a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(bytemuck::cast_slice(&oracle), &what);
        send.unchanged(mine, &what);
    }

    /// The varcount collectives: random counts (a quarter empty) of up to `max` elements,
    /// blocks stored in a random order with gaps, random roots; every algorithm once.
    fn varcount(&mut self) {
        let p = self.p as usize;
        for max in [0, 1, 70, 5000, 300_000 / p, (1 << 20) / p] {
            let counts = self.counts(max);
            let matrix: Vec<Vec<Count>> = (0..p).map(|_| self.counts(max / p + 1)).collect();
            self.scatterv::<u8>(&counts, ScatterAlgorithm::Auto);
            self.gatherv::<u8>(&counts, GatherAlgorithm::Auto);
            self.allgatherv::<u8>(&counts, AllgathervAlgorithm::Auto);
            self.alltoallv::<u8>(&matrix, AlltoallvAlgorithm::Auto);
        }
        let counts = self.counts(3000);
        let matrix: Vec<Vec<Count>> = (0..p).map(|_| self.counts(700)).collect();
        self.scatterv::<u32>(&counts, ScatterAlgorithm::Auto);
        self.gatherv::<Particle>(&counts, GatherAlgorithm::Auto);
        self.allgatherv::<u64>(&counts, AllgathervAlgorithm::Auto);
        self.alltoallv::<Particle>(&matrix, AlltoallvAlgorithm::Auto);
        for a in ScatterAlgorithm::ALL {
            self.scatterv::<u8>(&counts, a);
        }
        for a in GatherAlgorithm::ALL {
            self.gatherv::<u8>(&counts, a);
        }
        for a in AllgathervAlgorithm::ALL {
            self.allgatherv::<u8>(&counts, a);
        }
        for a in AlltoallvAlgorithm::ALL {
            self.alltoallv::<u8>(&matrix, a);
        }
    }

    /// `p` counts of up to `max` elements, a quarter of them zero.
    fn counts(&mut self, max: usize) -> Vec<Count> {
        let rng = &mut self.rng;
        (0..self.p)
            .map(|_| if max == 0 || rng.below(4) == 0 { 0 } else { 1 + rng.below(max) as Count })
            .collect()
    }

    fn scatterv<T: Pod>(&mut self, counts: &[Count], algo: ScatterAlgorithm) {
        let (root, seed, me) = (self.root(), self.next_seed(), self.me);
        let layout = Layout::placed(&mut self.rng, counts.to_vec(), 9);
        let what = format!("scatterv {layout:?} x {} B root={root} {algo} rank {me}", size::<T>());
        let is_root = me == root;
        let n = layout.counts[me as usize] as usize;
        let all = |i: usize| pattern(seed, i);
        let send = Guarded::<T>::new(if is_root { layout.len } else { 0 }, all);
        let mut recv = Guarded::<T>::new(n, |i| !pattern(seed, i));
        let mut oracle = Guarded::<T>::new(n, |_| 0);
        let at = self.mpi.process_at_rank(root);
        if is_root {
            at.scatter_varcount_into_root(
                &MpiPartition::new(send.get(), &layout.counts[..], &layout.displs[..]),
                oracle.get_mut(),
            );
        } else {
            at.scatter_varcount_into(oracle.get_mut());
        }
        let (c, d) = (&layout.counts, &layout.displs);
        let got = match (is_root, algo) {
            (true, ScatterAlgorithm::Auto) => {
                self.comm.scatter_varcount_into_root(send.get(), c, d, recv.get_mut(), root)
            }
            (true, a) => self.comm.scatter_varcount_into_root_with(send.get(), c, d, recv.get_mut(), root, a),
            (false, ScatterAlgorithm::Auto) => self.comm.scatter_varcount_into(recv.get_mut(), root),
            (false, a) => self.comm.scatter_varcount_into_with(recv.get_mut(), root, a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(all, &what);
    }

    /// Gatherv: the whole receive buffer is compared, so its gaps must keep their bytes.
    fn gatherv<T: Pod>(&mut self, counts: &[Count], algo: GatherAlgorithm) {
        let (root, seed, me) = (self.root(), self.next_seed(), self.me);
        let layout = Layout::placed(&mut self.rng, counts.to_vec(), 9);
        let what = format!("gatherv {layout:?} x {} B root={root} {algo} rank {me}", size::<T>());
        let is_root = me == root;
        let mine = |i: usize| pattern(seed + 7 * me as u64, i);
        let send = Guarded::<T>::new(layout.counts[me as usize] as usize, mine);
        let whole = if is_root { layout.len } else { 0 };
        let junk = |i: usize| !pattern(seed, i);
        let mut recv = Guarded::<T>::new(whole, junk);
        let mut oracle = Guarded::<T>::new(whole, junk);
        let at = self.mpi.process_at_rank(root);
        if is_root {
            let mut parts = MpiPartitionMut::new(oracle.get_mut(), &layout.counts[..], &layout.displs[..]);
            at.gather_varcount_into_root(send.get(), &mut parts);
        } else {
            at.gather_varcount_into(send.get());
        }
        let (c, d) = (&layout.counts, &layout.displs);
        let got = match (is_root, algo) {
            (true, GatherAlgorithm::Auto) => {
                self.comm.gather_varcount_into_root(send.get(), recv.get_mut(), c, d, root)
            }
            (true, a) => self.comm.gather_varcount_into_root_with(send.get(), recv.get_mut(), c, d, root, a),
            (false, GatherAlgorithm::Auto) => self.comm.gather_varcount_into(send.get(), root),
            (false, a) => self.comm.gather_varcount_into_with(send.get(), root, a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(mine, &what);
    }

    /// Allgatherv, every rank with a receive layout of its own.
    fn allgatherv<T: Pod>(&mut self, counts: &[Count], algo: AllgathervAlgorithm) {
        let (seed, me) = (self.next_seed(), self.me);
        let layout = Layout::placed(&mut Rng(seed * 31 + me as u64), counts.to_vec(), 9);
        let what = format!("allgatherv {layout:?} x {} B {algo} rank {me}", size::<T>());
        let mine = |i: usize| pattern(seed + 5 * me as u64, i);
        let send = Guarded::<T>::new(layout.counts[me as usize] as usize, mine);
        let junk = |i: usize| !pattern(seed, i);
        let mut recv = Guarded::<T>::new(layout.len, junk);
        let mut oracle = Guarded::<T>::new(layout.len, junk);
        let mut parts = MpiPartitionMut::new(oracle.get_mut(), &layout.counts[..], &layout.displs[..]);
        self.mpi.all_gather_varcount_into(send.get(), &mut parts);
        let (c, d) = (&layout.counts, &layout.displs);
        let got = match algo {
            AllgathervAlgorithm::Auto => self.comm.all_gather_varcount_into(send.get(), recv.get_mut(), c, d),
            a => self.comm.all_gather_varcount_into_with(send.get(), recv.get_mut(), c, d, a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(mine, &what);
    }

    /// Alltoallv of `matrix[q][r]` elements from rank `q` to rank `r`, every rank with
    /// layouts of its own.
    fn alltoallv<T: Pod>(&mut self, matrix: &[Vec<Count>], algo: AlltoallvAlgorithm) {
        let (seed, me, p) = (self.next_seed(), self.me, self.p as usize);
        let mut rng = Rng(seed * 37 + me as u64);
        let out = Layout::placed(&mut rng, matrix[me as usize].clone(), 9);
        let inn = Layout::placed(&mut rng, (0..p).map(|q| matrix[q][me as usize]).collect(), 9);
        let what = format!("alltoallv send {out:?} recv {inn:?} x {} B {algo} rank {me}", size::<T>());
        let mine = |i: usize| pattern(seed + 3 * me as u64, i);
        let send = Guarded::<T>::new(out.len, mine);
        let junk = |i: usize| !pattern(seed, i);
        let mut recv = Guarded::<T>::new(inn.len, junk);
        let mut oracle = Guarded::<T>::new(inn.len, junk);
        self.mpi.all_to_all_varcount_into(
            &MpiPartition::new(send.get(), &out.counts[..], &out.displs[..]),
            &mut MpiPartitionMut::new(oracle.get_mut(), &inn.counts[..], &inn.displs[..]),
        );
        let (sc, sd, rc, rd) = (&out.counts, &out.displs, &inn.counts, &inn.displs);
        let got = match algo {
            AlltoallvAlgorithm::Auto => {
                self.comm.all_to_all_varcount_into(send.get(), sc, sd, recv.get_mut(), rc, rd)
            }
            a => self.comm.all_to_all_varcount_into_with(send.get(), sc, sd, recv.get_mut(), rc, rd, a),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(mine, &what);
    }

    /// After a barrier, every rank finds the marker file every rank wrote before it; the
    /// ranks arrive in turn (rank `r` sleeps `r` ms), in an order that interleaves nodes.
    fn barrier(&mut self) {
        let me = self.me;
        // Round 0: rank r arrives r ms late; later rounds: one random late rank.
        let delays: Vec<u64> = (0..6)
            .map(|round| {
                let late = self.root();
                if round == 0 {
                    me as u64
                } else {
                    5 * u64::from(me == late)
                }
            })
            .collect();
        check_barrier(self.mpi, self.comm, "zcoll-hier-barrier", &delays);
    }

    /// Bad calls on the permuted communicator: the same `Err` on every rank (checked
    /// against the expected error where it is known, and across ranks always), every
    /// buffer as it was.
    fn errors(&mut self) {
        let (me, p) = (self.me, self.p);
        let pu = p as usize;
        if p < 2 {
            return; // nobody to disagree with
        }
        // Elements (`u32`): more than a one-phase broadcast holds (half a staging area),
        // whose root would leave before the verdict (the `deferred` jobs test that).
        let n = 8201;
        // The culprit: a random rank, the same everywhere, never rank 0 (the reference);
        // the root: any other rank (its block is the reference of a rooted call).
        let last = 1 + self.rng.below(pu - 1) as i32;
        let others: Vec<i32> = (0..p).filter(|&r| r != last).collect();
        let root = others[self.rng.below(others.len())];
        let is_root = me == root;
        let longer = |len: usize| if me == last { len + 1 } else { len };
        let fill = |len: usize, salt: u64| -> Vec<u32> {
            (0..len).map(|i| u32::from_le_bytes([0, 1, 2, 3].map(|j| pattern(salt, 4 * i + j)))).collect()
        };
        type Call<'c> = &'c dyn Fn(&mut [u32], &mut [u32]) -> zcoll::Result<()>;
        let case = |label: &str, send_len: usize, recv_len: usize, call: Call<'_>, want: Option<Error>| {
            let (send0, recv0) = (fill(send_len, 1 + me as u64), fill(recv_len, 2 + me as u64));
            let (mut send, mut recv) = (send0.clone(), recv0.clone());
            let e = call(&mut send, &mut recv).expect_err(label);
            if let Some(want) = want {
                assert_eq!(e, want, "{label}: rank {me}");
            }
            assert!(send == send0 && recv == recv0, "{label}: a failed call changed a buffer on rank {me}");
            self.same_everywhere(&e, label);
        };
        let mismatch = |expected: usize, found: usize| {
            Some(Error::LengthMismatch { rank: me, culprit: last, expected, found })
        };
        case(
            "bcast longer",
            longer(n),
            0,
            &|s, _| self.comm.broadcast_into(s, root),
            mismatch(4 * n, 4 * n + 4),
        );
        case(
            "allreduce longer",
            longer(n),
            longer(n),
            &|s, r| self.comm.all_reduce_into(s, r, Builtin::Sum),
            mismatch(4 * n, 4 * n + 4),
        );
        case("allgather longer", longer(n), longer(n) * pu, &|s, r| self.comm.all_gather_into(s, r), None);
        case("alltoall longer", longer(n) * pu, n * pu, &|s, r| self.comm.all_to_all_into(s, r), None);
        // A non-root's block is one element longer than the root's.
        let block = if is_root { n } else { longer(n) };
        case(
            "scatter longer",
            if is_root { n * pu } else { 0 },
            block,
            &|s, r| {
                if is_root {
                    self.comm.scatter_into_root(s, r, root)
                } else {
                    self.comm.scatter_into(r, root)
                }
            },
            None,
        );
        case(
            "gather longer",
            block,
            if is_root { n * pu } else { 0 },
            &|s, r| {
                if is_root {
                    self.comm.gather_into_root(s, r, root)
                } else {
                    self.comm.gather_into(s, root)
                }
            },
            None,
        );
        // A root out of range and a root named differently.
        let want = Error::InvalidRoot { rank: me, root: p, size: p };
        case("bcast bad root", n, 0, &|s, _| self.comm.broadcast_into(s, p), Some(want));
        let other = if me == last { (root + 1) % p } else { root };
        let want = Error::Mismatch { rank: me, culprit: last, what: "root" };
        case("bcast other root", n, 0, &|s, _| self.comm.broadcast_into(s, other), Some(want));
        // Nobody calls the root's method.
        case("scatterv without root", 0, n, &|_, r| self.comm.scatter_varcount_into(r, root), None);
        // The communicator still works.
        self.bcast::<u32>(n, BcastAlgorithm::Auto);
        self.allgather::<u8>(n, false, AllgatherAlgorithm::Auto);
    }

    /// Panics unless every rank got `e`, up to the rank it names as its own.
    fn same_everywhere(&self, e: &Error, label: &str) {
        let text = format!("{e:?}").replace(&format!("rank: {}, ", self.me), "rank: _, ");
        let mut mine = [0u8; 256];
        let len = text.len().min(mine.len());
        mine[..len].copy_from_slice(&text.as_bytes()[..len]);
        let mut all = vec![0u8; 256 * self.p as usize];
        self.mpi.all_gather_into(&mine[..], &mut all[..]);
        for (r, theirs) in all.chunks(256).enumerate() {
            assert_eq!(
                theirs,
                &mine[..],
                "{label}: rank {} got {text}, rank {r} {}",
                self.me,
                String::from_utf8_lossy(theirs).trim_end_matches('\0')
            );
        }
    }
}

fn size<T>() -> usize {
    std::mem::size_of::<T>()
}
