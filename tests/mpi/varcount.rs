//! Variable-count collectives: scatterv, gatherv, allgatherv and alltoallv, with random
//! counts (zeros included), permuted and gapped displacements, every root and every
//! algorithm, compared with rsmpi's own varcount collectives on the same input, with guard
//! bytes after every buffer; and bad calls, each the same `Err` on every rank with every
//! buffer left as it was.

use crate::common::{
    disagreeing_scatter, fails_unchanged, gather_algorithms, pattern, same, scatter_algorithms, words,
    Attempt, Guarded, Layout, Rng,
};
use crate::rank::Particle;
use mpi::datatype::{Partition as MpiPartition, PartitionMut as MpiPartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use zcoll::{
    AllgathervAlgorithm, AlltoallvAlgorithm, Comm, Error, GatherAlgorithm, Partition, PartitionMut, Pod,
    ScatterAlgorithm, TransportKind,
};

/// Bytes past the end of every buffer, checked after every call: nothing writes there.
const ROLE: &str = "root/non-root method";

/// Runs scenario `scenario` (`varcount` or `varcount-errors`).
pub(crate) fn run(scenario: &str, world: &SimpleCommunicator, comm: &Comm) {
    match scenario {
        "varcount" => {
            rooted(world, comm);
            exchanges(world, comm);
        }
        "varcount-errors" => errors(world, comm),
        other => panic!("unknown scenario {other}"),
    }
}

impl Layout {
    /// `p` blocks of up to `max` elements (a quarter of them empty), stored in a random
    /// order with random gaps of up to `gap` elements before each and after the last.
    fn random(rng: &mut Rng, p: usize, max: usize, gap: usize) -> Layout {
        let counts = random_counts(rng, p, max);
        Layout::placed(rng, counts, gap)
    }

    /// Blocks of `counts` end to end in rank order.
    fn packed(counts: Vec<Count>) -> Layout {
        let displs = counts.iter().scan(0, |s, &c| Some(std::mem::replace(s, *s + c))).collect();
        let len = counts.iter().map(|&c| c as usize).sum();
        Layout { counts, displs, len }
    }

    fn count(&self, r: usize) -> usize {
        self.counts[r] as usize
    }
}

/// `p` counts of up to `max` elements, a quarter of them zero.
fn random_counts(rng: &mut Rng, p: usize, max: usize) -> Vec<Count> {
    (0..p).map(|_| if rng.below(4) == 0 { 0 } else { 1 + rng.below(max) as Count }).collect()
}

/// The layouts of one job: tiny, small and large blocks (across the 8 KiB threshold of
/// the staged path and the 32 KiB halves of the staging area), all empty, one rank only,
/// and blocks end to end.
fn layouts(rng: &mut Rng, p: usize, elem: usize) -> Vec<Layout> {
    let e = |bytes: usize| (bytes / elem).max(1);
    let mut all = vec![
        Layout::random(rng, p, e(64), e(64)),
        Layout::random(rng, p, e(6000), e(3000)),
        Layout::random(rng, p, e(300_000), e(5000)),
        Layout::packed(vec![0; p]),
        Layout::packed((0..p).map(|r| (r + 1) as Count * e(20_000) as Count).collect()),
    ];
    let mut one = vec![0; p];
    one[rng.below(p)] = e(70_000) as Count;
    all.push(Layout::packed(one));
    all
}

/// Every root, algorithm and layout for scatterv and gatherv, in bytes, and a few in
/// other element types.
fn rooted(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    let mut rng = Rng(0x5ca7_7e4f);
    let mut seed = 10_000;
    for (i, layout) in layouts(&mut rng, p as usize, 1).into_iter().enumerate() {
        // Every root for the small layouts, two for the large ones.
        let roots: Vec<i32> = if i == 2 || i == 4 { vec![0, p - 1] } else { (0..p).collect() };
        for &root in &roots {
            for algo in scatter_algorithms(&[1, 2, p as u32]) {
                seed += 1;
                RootedCase { world, comm, layout: &layout, root, seed }.scatterv::<u8>(algo);
            }
            for algo in gather_algorithms(&[1, 2, p as u32]) {
                seed += 1;
                RootedCase { world, comm, layout: &layout, root, seed }.gatherv::<u8>(algo);
            }
        }
    }
    for layout in layouts(&mut rng, p as usize, 8).into_iter().take(3) {
        seed += 1;
        let root = rng.below(p as usize) as i32;
        let case = RootedCase { world, comm, layout: &layout, root, seed };
        case.scatterv::<u64>(ScatterAlgorithm::Auto);
        case.gatherv::<u64>(GatherAlgorithm::Auto);
    }
    for layout in layouts(&mut rng, p as usize, 32).into_iter().take(2) {
        seed += 1;
        let root = rng.below(p as usize) as i32;
        let case = RootedCase { world, comm, layout: &layout, root, seed };
        case.scatterv::<Particle>(ScatterAlgorithm::Auto);
        case.gatherv::<Particle>(GatherAlgorithm::Auto);
    }
}

/// One scatterv or gatherv of `layout` from or to `root`, with the patterns of `seed`.
struct RootedCase<'a> {
    world: &'a SimpleCommunicator,
    comm: &'a Comm,
    layout: &'a Layout,
    root: i32,
    seed: u64,
}

impl RootedCase<'_> {
    /// This rank, the case's name for `coll` run with `algo` on elements of `T`, and
    /// whether this rank is the root.
    fn name<T>(&self, coll: &str, algo: impl std::fmt::Display) -> (i32, String, bool) {
        let (me, layout, root) = (self.world.rank(), self.layout, self.root);
        let size = std::mem::size_of::<T>();
        (me, format!("{coll} {layout:?} x {size} B root={root} {algo} rank {me}"), me == root)
    }

    /// Scatters the layout from the root with zcoll and with rsmpi, and compares; the
    /// root's buffer must not change. Odd seeds go through the `Partition` adapter.
    fn scatterv<T: Pod>(&self, algo: ScatterAlgorithm) {
        let RootedCase { world, comm, layout, root, seed } = *self;
        let (me, what, is_root) = self.name::<T>("scatterv", algo);
        let n = layout.count(me as usize);
        let send = Guarded::<T>::new(if is_root { layout.len } else { 0 }, |i| pattern(seed, i));
        let mut recv = Guarded::<T>::new(n, |i| !pattern(seed, i));
        let mut oracle = Guarded::<T>::new(n, |_| 0);
        let at = world.process_at_rank(root);
        if is_root {
            let parts = MpiPartition::new(send.get(), &layout.counts[..], &layout.displs[..]);
            at.scatter_varcount_into_root(&parts, oracle.get_mut());
        } else {
            at.scatter_varcount_into(oracle.get_mut());
        }
        let got = match (is_root, seed % 2) {
            (true, 1) if algo == ScatterAlgorithm::Auto => {
                let parts = Partition::new(send.get(), &layout.counts[..], &layout.displs[..]);
                comm.scatter_partition_into_root(&parts, recv.get_mut(), root)
            }
            (true, _) => comm.scatter_varcount_into_root_with(
                send.get(),
                &layout.counts,
                &layout.displs,
                recv.get_mut(),
                root,
                algo,
            ),
            (false, _) => comm.scatter_varcount_into_with(recv.get_mut(), root, algo),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(|i| pattern(seed, i), &what);
    }

    /// Gathers the layout to the root with zcoll and with rsmpi, and compares the whole
    /// receive buffer (its gaps must keep their bytes); every send buffer must not change.
    fn gatherv<T: Pod>(&self, algo: GatherAlgorithm) {
        let RootedCase { world, comm, layout, root, seed } = *self;
        let (me, what, is_root) = self.name::<T>("gatherv", algo);
        let mine = |i: usize| pattern(seed + 7 * me as u64, i);
        let send = Guarded::<T>::new(layout.count(me as usize), mine);
        let junk = |i: usize| !pattern(seed, i);
        let whole = if is_root { layout.len } else { 0 };
        let mut recv = Guarded::<T>::new(whole, junk);
        let mut oracle = Guarded::<T>::new(whole, junk);
        let at = world.process_at_rank(root);
        if is_root {
            let mut parts = MpiPartitionMut::new(oracle.get_mut(), &layout.counts[..], &layout.displs[..]);
            at.gather_varcount_into_root(send.get(), &mut parts);
        } else {
            at.gather_varcount_into(send.get());
        }
        let got = match (is_root, seed % 2) {
            (true, 1) if algo == GatherAlgorithm::Auto => {
                let mut parts = PartitionMut::new(recv.get_mut(), &layout.counts[..], &layout.displs[..]);
                comm.gather_partition_into_root(send.get(), &mut parts, root)
            }
            (true, _) => comm.gather_varcount_into_root_with(
                send.get(),
                recv.get_mut(),
                &layout.counts,
                &layout.displs,
                root,
                algo,
            ),
            (false, _) => comm.gather_varcount_into_with(send.get(), root, algo),
        };
        got.unwrap_or_else(|e| panic!("{what}: {e}"));
        recv.holds(oracle.bytes(), &what);
        send.unchanged(mine, &what);
    }
}

fn allgatherv_algorithms() -> Vec<AllgathervAlgorithm> {
    std::iter::once(AllgathervAlgorithm::Auto).chain(AllgathervAlgorithm::ALL).collect()
}

fn alltoallv_algorithms() -> Vec<AlltoallvAlgorithm> {
    std::iter::once(AlltoallvAlgorithm::Auto).chain(AlltoallvAlgorithm::ALL).collect()
}

/// Allgatherv and alltoallv: tiny, small and large blocks (a quarter empty), every rank
/// with its own permuted and gapped partitions, every algorithm, in bytes and in words.
fn exchanges(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size() as usize;
    let mut rng = Rng(0xa11_6a7e);
    let mut seed = 20_000;
    for (max, gap) in [(64, 64), (6000, 3000), (300_000 / p, 5000)] {
        let counts = random_counts(&mut rng, p, max);
        let matrix: Vec<Vec<Count>> = (0..p).map(|_| random_counts(&mut rng, p, max)).collect();
        for algo in allgatherv_algorithms() {
            seed += 1;
            check_allgatherv::<u8>(world, comm, &counts, gap, algo, seed);
        }
        for algo in alltoallv_algorithms() {
            seed += 1;
            check_alltoallv::<u8>(world, comm, &matrix, gap, algo, seed);
        }
    }
    // All empty, and one rank only.
    let mut one = vec![0; p];
    one[p / 2] = 70_000;
    for counts in [vec![0; p], one] {
        let matrix: Vec<Vec<Count>> = (0..p).map(|q| (0..p).map(|r| counts[(q + r) % p]).collect()).collect();
        for algo in allgatherv_algorithms() {
            seed += 1;
            check_allgatherv::<u8>(world, comm, &counts, 10, algo, seed);
        }
        for algo in alltoallv_algorithms() {
            seed += 1;
            check_alltoallv::<u8>(world, comm, &matrix, 10, algo, seed);
        }
    }
    for max in [100, 5000] {
        seed += 1;
        let counts = random_counts(&mut rng, p, max);
        let matrix: Vec<Vec<Count>> = (0..p).map(|_| random_counts(&mut rng, p, max)).collect();
        check_allgatherv::<u32>(world, comm, &counts, 7, AllgathervAlgorithm::Auto, seed);
        check_alltoallv::<Particle>(world, comm, &matrix, 7, AlltoallvAlgorithm::Auto, seed);
    }
}

/// Allgathers blocks of `counts[r]` elements with zcoll and with rsmpi, every rank with a
/// partition of its own (permuted, gaps of up to `gap`), and compares the whole receive
/// buffer. Odd seeds go through the `PartitionMut` adapter.
fn check_allgatherv<T: Pod>(
    world: &SimpleCommunicator,
    comm: &Comm,
    counts: &[Count],
    gap: usize,
    algo: AllgathervAlgorithm,
    seed: u64,
) {
    let me = world.rank();
    let layout = Layout::placed(&mut Rng(seed * 31 + me as u64), counts.to_vec(), gap);
    let size = std::mem::size_of::<T>();
    let what = format!("allgatherv {layout:?} x {size} B {algo} rank {me}");
    let mine = |i: usize| pattern(seed + 5 * me as u64, i);
    let send = Guarded::<T>::new(layout.count(me as usize), mine);
    let junk = |i: usize| !pattern(seed, i);
    let mut recv = Guarded::<T>::new(layout.len, junk);
    let mut oracle = Guarded::<T>::new(layout.len, junk);
    let mut parts = MpiPartitionMut::new(oracle.get_mut(), &layout.counts[..], &layout.displs[..]);
    world.all_gather_varcount_into(send.get(), &mut parts);
    let got = if seed % 2 == 1 && algo == AllgathervAlgorithm::Auto {
        let mut parts = PartitionMut::new(recv.get_mut(), &layout.counts[..], &layout.displs[..]);
        comm.all_gather_partition_into(send.get(), &mut parts)
    } else {
        comm.all_gather_varcount_into_with(send.get(), recv.get_mut(), &layout.counts, &layout.displs, algo)
    };
    got.unwrap_or_else(|e| panic!("{what}: {e}"));
    // Computed independently: block `q` holds rank `q`'s pattern, the rest stays junk.
    let mut want: Vec<u8> = (0..layout.len * size).map(junk).collect();
    for q in 0..world.size() as usize {
        let at = layout.displs[q] as usize * size;
        for i in 0..layout.count(q) * size {
            want[at + i] = pattern(seed + 5 * q as u64, i);
        }
    }
    same(recv.bytes(), &want, &what);
    // rsmpi agrees (MPICH 4.0 puts a single process's block at offset 0, whatever its
    // displacement, so from two ranks up).
    if world.size() > 1 {
        same(oracle.bytes(), &want, &format!("{what}, rsmpi"));
    }
    recv.guard(&what);
    send.unchanged(mine, &what);
}

/// Exchanges blocks of `matrix[q][r]` elements from rank `q` to rank `r` with zcoll and with
/// rsmpi, every rank with partitions of its own (permuted, gaps of up to `gap`), and
/// compares the whole receive buffer. Odd seeds go through the partition adapter.
fn check_alltoallv<T: Pod>(
    world: &SimpleCommunicator,
    comm: &Comm,
    matrix: &[Vec<Count>],
    gap: usize,
    algo: AlltoallvAlgorithm,
    seed: u64,
) {
    let (me, p) = (world.rank(), world.size() as usize);
    let mut rng = Rng(seed * 37 + me as u64);
    let out = Layout::placed(&mut rng, matrix[me as usize].clone(), gap);
    let inn = Layout::placed(&mut rng, (0..p).map(|q| matrix[q][me as usize]).collect(), gap);
    let size = std::mem::size_of::<T>();
    let what = format!("alltoallv send {out:?} recv {inn:?} x {size} B {algo} rank {me}");
    let mine = |i: usize| pattern(seed + 3 * me as u64, i);
    let send = Guarded::<T>::new(out.len, mine);
    let junk = |i: usize| !pattern(seed, i);
    let mut recv = Guarded::<T>::new(inn.len, junk);
    let mut oracle = Guarded::<T>::new(inn.len, junk);
    world.all_to_all_varcount_into(
        &MpiPartition::new(send.get(), &out.counts[..], &out.displs[..]),
        &mut MpiPartitionMut::new(oracle.get_mut(), &inn.counts[..], &inn.displs[..]),
    );
    let got = if seed % 2 == 1 && algo == AlltoallvAlgorithm::Auto {
        comm.all_to_all_partition_into(
            &Partition::new(send.get(), &out.counts[..], &out.displs[..]),
            &mut PartitionMut::new(recv.get_mut(), &inn.counts[..], &inn.displs[..]),
        )
    } else {
        let (sc, sd, rc, rd) = (&out.counts, &out.displs, &inn.counts, &inn.displs);
        comm.all_to_all_varcount_into_with(send.get(), sc, sd, recv.get_mut(), rc, rd, algo)
    };
    got.unwrap_or_else(|e| panic!("{what}: {e}"));
    recv.holds(oracle.bytes(), &what);
    send.unchanged(mine, &what);
}

/// Every bad call is the same `Err` on every rank, and leaves every buffer as it was.
fn errors(world: &SimpleCommunicator, comm: &Comm) {
    let me = world.rank();
    let p = world.size();
    let pu = p as usize;
    let last = p - 1;
    let fill = |len: usize, salt: u64| words(me, len, salt);
    let single_node_cma = comm.info().nodes == 1 && comm.info().transport == TransportKind::Cma;
    // Each call fails on fresh buffers of the given lengths (send, receive), which must be
    // as filled afterwards.
    let case = |label: &str, send_len, recv_len, call: Attempt<'_>, want| {
        fails_unchanged(me, label, send_len, recv_len, call, want)
    };
    // A gatherv's leaves and a scatterv's root may leave a small call before its verdict
    // (one node, flat arrivals: the deferred verdict) and return `Ok` with their buffers
    // as they were, but for a scatterv root's own block (`own`: its elements in the send
    // buffer); every other rank fails with `want`, and if a rank left, the next call (a
    // barrier) fails on every rank with `PreviousFailed`.
    let deferred_own = |label: &str,
                        send_len,
                        recv_len,
                        call: Attempt<'_>,
                        want: Error,
                        gives: bool,
                        own: Option<std::ops::Range<usize>>| {
        let (send0, recv0) = (words(me, send_len, 1), words(me, recv_len, 2));
        let (mut send, mut recv) = (send0.clone(), recv0.clone());
        let left = match call(&mut send, &mut recv) {
            Ok(()) => {
                assert!(gives, "{label}: rank {me}, which does not only give, returned Ok");
                1u8
            }
            Err(e) => {
                assert_eq!(e, want, "{label}: rank {me}");
                0
            }
        };
        let recv_want = match (left, own) {
            (1, Some(own)) => send0[own].to_vec(),
            _ => recv0,
        };
        assert!(send == send0 && recv == recv_want, "{label}: the call changed a buffer on rank {me}");
        let mut any = 0u8;
        world.all_reduce_into(&left, &mut any, mpi::collective::SystemOperation::max());
        match (any, comm.barrier()) {
            (1, Err(Error::PreviousFailed { .. })) | (0, Ok(())) => {}
            (any, next) => panic!("{label}: {any} ranks left the call; the next call gave {next:?}"),
        }
    };
    let deferred = |label: &str, send_len, recv_len, call: Attempt<'_>, want: Error, gives: bool| {
        deferred_own(label, send_len, recv_len, call, want, gives, None)
    };
    // A one-phase allgatherv or alltoallv (one node, small blocks) judges each pair where
    // its block is read: rank `culprit`, whose count differs from its partner's, fails with
    // `want` and leaves its buffers as they were; every other rank may return `Ok` with its
    // result (`result`), and then the next call fails on every rank with
    // `PreviousFailed`: a barrier, or, every other time, a small broadcast from a rank
    // other than the culprit, whose root leaves it at once on one node (it left the call
    // before early with a success, and must still find the culprit's failure). Beyond one
    // phase, or across nodes, every rank fails with `want`.
    let turn = std::cell::Cell::new(0u32);
    let deferred_pair =
        |label: &str, send_len, recv_len, call: Attempt<'_>, want: Error, culprit: i32, result: Vec<u32>| {
            let (send0, recv0) = (words(me, send_len, 1), words(me, recv_len, 2));
            let (mut send, mut recv) = (send0.clone(), recv0.clone());
            let ok = match call(&mut send, &mut recv) {
                Ok(()) => {
                    assert!(me != culprit, "{label}: rank {me}, whose count differs, returned Ok");
                    assert!(recv == result, "{label}: rank {me} returned Ok with a wrong result");
                    1u8
                }
                Err(e) => {
                    assert_eq!(e, want, "{label}: rank {me}");
                    assert!(recv == recv0, "{label}: a failed call changed a buffer on rank {me}");
                    0
                }
            };
            assert!(send == send0, "{label}: the call changed the send buffer on rank {me}");
            let mut any = 0u8;
            world.all_reduce_into(&ok, &mut any, mpi::collective::SystemOperation::max());
            let src = if culprit == 0 { 1 % p } else { 0 };
            let next = match turn.replace(turn.get() + 1) % 2 {
                0 => comm.barrier(),
                _ => {
                    let mut data = [me as u8; 8];
                    comm.broadcast_into(&mut data[..], src).map(|()| {
                        assert_eq!(data, [src as u8; 8], "{label}: rank {me}: the broadcast after it");
                    })
                }
            };
            match (any, next) {
                (1, Err(Error::PreviousFailed { .. })) | (0, Ok(())) => {}
                (any, next) => panic!("{label}: {any} ranks returned Ok; the next call gave {next:?}"),
            }
        };
    // Rank r's block is r + 2 elements, end to end.
    let good = Layout::packed((0..p).map(|r| r + 2).collect());
    let count = |r: i32| (r + 2) as usize;
    let (c, d) = (&good.counts[..], &good.displs[..]);
    let root = last;
    let is_root = me == root;
    let whole = if is_root { good.len } else { 0 };

    // A root outside the communicator, given alike by everyone.
    for bad in [p, -1] {
        let want = Error::InvalidRoot { rank: me, root: bad, size: p };
        case("scatterv bad root", 0, 3, &|_, r| comm.scatter_varcount_into(r, bad), want.clone());
        case("gatherv bad root", 3, 0, &|s, _| comm.gather_varcount_into(s, bad), want);
    }
    // Nobody calls the root's method.
    let want = Error::Mismatch { rank: me, culprit: 0, what: ROLE };
    case("scatterv without root", 0, count(me), &|_, r| comm.scatter_varcount_into(r, 0), want.clone());
    deferred("gatherv without root", count(me), 0, &|s, _| comm.gather_varcount_into(s, 0), want, me != 0);

    // The root's arrays lack an entry.
    let scatterv = |counts: &'static [Count], displs: &'static [Count]| {
        move |s: &mut [u32], r: &mut [u32]| {
            if is_root {
                comm.scatter_varcount_into_root(s, counts, displs, r, root)
            } else {
                comm.scatter_varcount_into(r, root)
            }
        }
    };
    let leak = |v: Vec<Count>| -> &'static [Count] { Vec::leak(v) };
    let want = Error::BufferSize { rank: root, which: "send counts", expected: pu, found: pu - 1 };
    case(
        "scatterv short counts",
        whole,
        count(me),
        &scatterv(leak(c[..pu - 1].to_vec()), leak(d.to_vec())),
        want,
    );
    let want = Error::BufferSize { rank: root, which: "send displacements", expected: pu, found: pu + 1 };
    let mut long = d.to_vec();
    long.push(0);
    case("scatterv long displs", whole, count(me), &scatterv(leak(c.to_vec()), leak(long)), want);
    // A negative count, and a negative displacement.
    let mut neg = c.to_vec();
    neg[pu - 1] = -1;
    let want = Error::InvalidPartition {
        rank: me,
        culprit: root,
        which: "send",
        index: pu - 1,
        reason: "negative count",
    };
    case("scatterv negative count", whole, count(me), &scatterv(leak(neg), leak(d.to_vec())), want);
    let mut neg = d.to_vec();
    neg[0] = -3;
    let want = Error::InvalidPartition {
        rank: me,
        culprit: root,
        which: "send",
        index: 0,
        reason: "negative displacement",
    };
    case("scatterv negative displ", whole, count(me), &scatterv(leak(c.to_vec()), leak(neg)), want);
    // The last block ends one element past the send buffer.
    let want = Error::BufferSize { rank: root, which: "send", expected: good.len, found: good.len - 1 };
    case(
        "scatterv short send",
        if is_root { good.len - 1 } else { 0 },
        count(me),
        &scatterv(leak(c.to_vec()), leak(d.to_vec())),
        want,
    );

    let gatherv = |counts: &'static [Count], displs: &'static [Count]| {
        move |s: &mut [u32], r: &mut [u32]| {
            if is_root {
                comm.gather_varcount_into_root(s, r, counts, displs, root)
            } else {
                comm.gather_varcount_into(s, root)
            }
        }
    };
    let want = Error::BufferSize { rank: root, which: "receive", expected: good.len, found: good.len - 1 };
    deferred(
        "gatherv short recv",
        count(me),
        if is_root { good.len - 1 } else { 0 },
        &gatherv(leak(c.to_vec()), leak(d.to_vec())),
        want,
        !is_root,
    );
    if p > 1 {
        // Block 1 starts inside block 0.
        let mut over = d.to_vec();
        over[1] = 1;
        let want = Error::InvalidPartition {
            rank: me,
            culprit: root,
            which: "receive",
            index: 1,
            reason: "overlaps another block",
        };
        deferred("gatherv overlap", count(me), whole, &gatherv(leak(c.to_vec()), leak(over)), want, !is_root);

        // The first rank's buffer is one element longer than the root's count for it.
        let first = 0;
        let len = |r: i32| count(r) + (r == first) as usize;
        let want = Error::LengthMismatch {
            rank: me,
            culprit: first,
            expected: 4 * count(first),
            found: 4 * len(first),
        };
        // The root (the last rank) passes its own checks: it may leave, holding its block.
        let own = |r: i32| d[r as usize] as usize..d[r as usize] as usize + count(r);
        deferred_own(
            "scatterv long recv",
            whole,
            len(me),
            &scatterv(leak(c.to_vec()), leak(d.to_vec())),
            want.clone(),
            is_root,
            is_root.then(|| own(root)),
        );
        let gatherv = gatherv(leak(c.to_vec()), leak(d.to_vec()));
        deferred("gatherv long send", len(me), whole, &gatherv, want, !is_root);

        // The last rank calls the root's method too.
        let r0 = 0;
        let claims = me == r0 || me == last;
        let want = Error::Mismatch { rank: me, culprit: last, what: ROLE };
        // Rank 0, the root every rank names, passes its own checks and may leave.
        deferred_own(
            "scatterv with two roots",
            if claims { good.len } else { 0 },
            count(me),
            &|s, r| {
                if claims {
                    comm.scatter_varcount_into_root(s, c, d, r, r0)
                } else {
                    comm.scatter_varcount_into(r, r0)
                }
            },
            want,
            me == r0,
            (me == r0).then(|| own(r0)),
        );
        // Rank 0 scatters while the others gather: every rank only gives.
        let want = Error::Mismatch { rank: me, culprit: 1, what: "collective" };
        deferred_own(
            "scatterv against gatherv",
            if me == 0 { good.len } else { count(me) },
            count(me),
            &|s, r| {
                if me == 0 {
                    comm.scatter_varcount_into_root(s, c, d, r, 0)
                } else {
                    comm.gather_varcount_into(s, 0)
                }
            },
            want,
            true,
            (me == 0).then(|| own(0)),
        );
        if single_node_cma {
            let (algo, want) = disagreeing_scatter(me, last);
            case(
                "scatterv algorithm disagreement",
                whole,
                count(me),
                &|s, r| {
                    if is_root {
                        comm.scatter_varcount_into_root_with(s, c, d, r, root, algo)
                    } else {
                        comm.scatter_varcount_into_with(r, root, algo)
                    }
                },
                want,
            );
        }
    }
    exchange_errors(comm, &case, &deferred_pair, count);

    // An environment variable zcoll cannot read is an error everywhere.
    // (Read when a `Comm` is built.)
    std::env::set_var("ZCOLL_GATHERV_ALGORITHM", "throttled-write:0");
    let configured = Comm::new(world).unwrap();
    std::env::remove_var("ZCOLL_GATHERV_ALGORITHM");
    let (send, mut recv) = (fill(count(me), 3), fill(whole, 4));
    let e = if is_root {
        configured.gather_varcount_into_root(&send, &mut recv, c, d, root)
    } else {
        configured.gather_varcount_into(&send, root)
    }
    .unwrap_err();
    assert!(matches!(&e, Error::Config { name: "ZCOLL_GATHERV_ALGORITHM", .. }), "rank {me}: {e}");
    assert!(
        send == fill(count(me), 3) && recv == fill(whole, 4),
        "a failed call changed a buffer on rank {me}"
    );
    drop(configured);

    // The communicator is still usable after all that.
    RootedCase { world, comm, layout: &good, root: last, seed: 98 }.scatterv::<u32>(ScatterAlgorithm::Auto);
    RootedCase { world, comm, layout: &good, root: 0, seed: 99 }.gatherv::<u32>(GatherAlgorithm::Auto);
    check_allgatherv::<u32>(world, comm, &good.counts, 3, AllgathervAlgorithm::Auto, 100);
    let matrix: Vec<Vec<Count>> = (0..p).map(|q| (0..p).map(|r| (q + 2 * r) % 3).collect()).collect();
    check_alltoallv::<u32>(world, comm, &matrix, 3, AlltoallvAlgorithm::Auto, 101);
    comm.barrier().unwrap();
}

/// A bad exchange whose pairs disagree: label, send and receive lengths, the call, the
/// error, the rank whose count differs, and what a rank that returns `Ok` holds (see
/// `deferred_pair` in [`errors`]).
type PairCase<'a> = dyn Fn(&str, usize, usize, Attempt<'_>, Error, i32, Vec<u32>) + 'a;

/// The bad allgatherv and alltoallv calls: each rank's block for rank `r` is `count(r)`
/// elements (allgatherv) or `count(q + r)` elements from `q` to `r` (alltoallv), end to end
/// in rank order, changed one number at a time.
fn exchange_errors(
    comm: &Comm,
    case: &dyn Fn(&str, usize, usize, Attempt<'_>, Error),
    pair_case: &PairCase<'_>,
    count: impl Fn(i32) -> usize,
) {
    let (me, p) = (comm.rank(), comm.size());
    let (pu, last) = (p as usize, p - 1);
    let packed = |counts: Vec<Count>| Layout::packed(counts);
    let all = packed((0..p).map(|r| count(r) as Count).collect());

    // allgatherv: the last rank sends one element more than its count for itself.
    let send_len = |r: i32| count(r) + (r == last) as usize;
    let want = Error::LengthMismatch {
        rank: me,
        culprit: last,
        expected: 4 * count(last),
        found: 4 * send_len(last),
    };
    case(
        "allgatherv long send",
        send_len(me),
        all.len,
        &|s, r| comm.all_gather_varcount_into(s, r, &all.counts, &all.displs),
        want,
    );
    if p > 1 {
        // Rank 0 counts one element more for rank 1 (in a buffer long enough).
        let mine = if me == 0 {
            packed((0..p).map(|r| (count(r) + (r == 1) as usize) as Count).collect())
        } else {
            all.clone()
        };
        let want =
            Error::LengthMismatch { rank: me, culprit: 0, expected: 4 * count(1), found: 4 * (count(1) + 1) };
        // Every rank's block, end to end: what a rank that returns `Ok` holds.
        let result = (0..p).flat_map(|r| words(r, count(r), 1)).collect();
        pair_case(
            "allgatherv count disagreement",
            count(me),
            mine.len,
            &|s, r| comm.all_gather_varcount_into(s, r, &mine.counts, &mine.displs),
            want,
            0,
            result,
        );
        // Rank 1's block 1 starts inside its block 0.
        let mut over = all.clone();
        if me == 1 {
            over.displs[1] = 1;
        }
        let want = Error::InvalidPartition {
            rank: me,
            culprit: 1,
            which: "receive",
            index: 1,
            reason: "overlaps another block",
        };
        case(
            "allgatherv overlap",
            count(me),
            all.len,
            &|s, r| comm.all_gather_varcount_into(s, r, &over.counts, &over.displs),
            want,
        );
    }

    // alltoallv: q sends count(q + r) elements to r.
    let n = |q: i32, r: i32| count((q + r) % p);
    let out = packed((0..p).map(|r| n(me, r) as Count).collect());
    let inn = packed((0..p).map(|q| n(q, me) as Count).collect());
    let alltoallv = |out: &Layout, inn: &Layout| {
        let (out, inn) = (out.clone(), inn.clone());
        move |s: &mut [u32], r: &mut [u32]| {
            comm.all_to_all_varcount_into(s, &out.counts, &out.displs, r, &inn.counts, &inn.displs)
        }
    };
    // Rank 0's receive counts lack an entry.
    let mut short = inn.clone();
    if me == 0 {
        short.counts.pop();
    }
    let want = Error::BufferSize { rank: 0, which: "receive counts", expected: pu, found: pu - 1 };
    case("alltoallv short recv counts", out.len, inn.len, &alltoallv(&out, &short), want);
    // Rank 1 (or 0) has a negative send displacement.
    let bad = 1 % p;
    let mut neg = out.clone();
    if me == bad {
        neg.displs[0] = -1;
    }
    let want = Error::InvalidPartition {
        rank: me,
        culprit: bad,
        which: "send",
        index: 0,
        reason: "negative displacement",
    };
    case("alltoallv negative displacement", out.len, inn.len, &alltoallv(&neg, &inn), want);
    // The last rank's send buffer is one element short.
    let want = Error::BufferSize { rank: last, which: "send", expected: out.len, found: out.len - 1 };
    let short_send = if me == last { out.len - 1 } else { out.len };
    case("alltoallv short send", short_send, inn.len, &alltoallv(&out, &inn), want);
    if p > 1 {
        // The last rank expects one element more from rank 0 (in a buffer long enough).
        let more = if me == last {
            packed((0..p).map(|q| (n(q, me) + (q == 0) as usize) as Count).collect())
        } else {
            inn.clone()
        };
        let want = Error::LengthMismatch {
            rank: me,
            culprit: last,
            expected: 4 * n(0, last),
            found: 4 * (n(0, last) + 1),
        };
        // The block each rank `q` sends this rank, in rank order: what a rank that returns
        // `Ok` holds.
        let result = (0..p)
            .flat_map(|q| {
                let at: usize = (0..me).map(|r| n(q, r)).sum();
                let len: usize = (0..p).map(|r| n(q, r)).sum();
                words(q, len, 1)[at..at + n(q, me)].to_vec()
            })
            .collect();
        pair_case(
            "alltoallv count disagreement",
            out.len,
            more.len,
            &alltoallv(&out, &more),
            want,
            last,
            result,
        );
        // Visible wherever the requests are compared: across nodes (whatever each node's
        // transport), and inside a node that runs them (on `cico` every one runs staged).
        if comm.info().nodes > 1 || comm.info().transport == TransportKind::Cma {
            let want = Error::Mismatch { rank: me, culprit: last, what: "algorithm" };
            let algo =
                if me == last { AlltoallvAlgorithm::PairwiseWrite } else { AlltoallvAlgorithm::Pairwise };
            case(
                "alltoallv algorithm disagreement",
                out.len,
                inn.len,
                &|s, r| {
                    comm.all_to_all_varcount_into_with(
                        s,
                        &out.counts,
                        &out.displs,
                        r,
                        &inn.counts,
                        &inn.displs,
                        algo,
                    )
                },
                want,
            );
        }
    }
    // (Read when a `Comm` is built.)
    std::env::set_var("ZCOLL_ALLTOALLV_ALGORITHM", "bogus");
    let configured = Comm::new(comm.mpi()).unwrap();
    std::env::remove_var("ZCOLL_ALLTOALLV_ALGORITHM");
    let (send, mut recv) = (vec![0; out.len], vec![0; inn.len]);
    let e = configured
        .all_to_all_varcount_into(&send, &out.counts, &out.displs, &mut recv, &inn.counts, &inn.displs)
        .unwrap_err();
    assert!(matches!(&e, Error::Config { name: "ZCOLL_ALLTOALLV_ALGORITHM", .. }), "rank {me}: {e}");
}
