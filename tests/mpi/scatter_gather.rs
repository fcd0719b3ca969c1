//! Scatter and gather: every algorithm, root, block size, element type and variant,
//! compared with rsmpi's `scatter_into_root` / `gather_into_root` on the same input, with
//! guard bytes after every buffer; and bad calls, each the same `Err` on every rank with
//! every buffer left as it was.

use crate::common::{
    disagreeing_scatter, fails_unchanged, gather_algorithms, pattern, same, scatter_algorithms, words,
    Attempt, Guarded,
};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use zcoll::{Comm, Error, GatherAlgorithm, Pod, ScatterAlgorithm, TransportKind};

/// Bytes past the end of every buffer, checked after every call: nothing writes there.
const ROLE: &str = "root/non-root method";

/// Runs scenario `scenario` (`scatter`, `gather` or `scatter-gather-errors`).
pub(crate) fn run(scenario: &str, world: &SimpleCommunicator, comm: &Comm) {
    match scenario {
        "scatter" => scatter(world, comm),
        "gather" => gather(world, comm),
        "scatter-gather-errors" => errors(world, comm),
        other => panic!("unknown scenario {other}"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Separate,
    InPlace,
}

/// The cases of one job: (block in elements, root, variant), for u8 blocks of
/// 0, 1, 4095, 4097 and 1 MiB + 3 bytes at every root (two roots for the large block at
/// P > 5), 8 MiB in all at one root, and in-place calls.
fn byte_cases(p: i32) -> Vec<(usize, i32, Variant)> {
    let mut cases = Vec::new();
    for n in [0usize, 1, 4095, 4097, (1 << 20) + 3] {
        let roots: Vec<i32> = if n > 1 << 20 && p > 5 { vec![0, p - 1] } else { (0..p).collect() };
        cases.extend(roots.into_iter().map(|root| (n, root, Variant::Separate)));
    }
    cases.push(((8 << 20) / p as usize, p / 2, Variant::Separate));
    for (i, n) in [0usize, 1, 4097, (1 << 20) + 3].into_iter().enumerate() {
        cases.push((n, (i as i32 + p - 1) % p, Variant::InPlace));
    }
    cases
}

/// u32 blocks of 4, 4092, 4100 and 1 MiB + 4 bytes, one root each.
fn word_cases(p: i32) -> Vec<(usize, i32)> {
    [1usize, 1023, 1025, (1 << 18) + 1]
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, (i as i32 * 3 + 1) % p))
        .collect()
}

fn scatter(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    every_case(
        p,
        1000,
        scatter_algorithms(&[2, 3, 4, p as u32]),
        |n, root, algo, variant, seed| check_scatter::<u8>(world, comm, n, root, algo, variant, seed),
        |n, root, algo, seed| check_scatter::<u32>(world, comm, n, root, algo, Variant::Separate, seed),
    );
}

fn gather(world: &SimpleCommunicator, comm: &Comm) {
    let p = world.size();
    every_case(
        p,
        2000,
        gather_algorithms(&[2, 3, 4, p as u32]),
        |n, root, algo, variant, seed| check_gather::<u8>(world, comm, n, root, algo, variant, seed),
        |n, root, algo, seed| check_gather::<u32>(world, comm, n, root, algo, Variant::Separate, seed),
    );
}

/// For every algorithm of `algos`, every byte case (`bytes`, u8 blocks) and every word
/// case (`words`, u32 blocks), each with the next seed after `seed`.
fn every_case<A: Copy>(
    p: i32,
    mut seed: u64,
    algos: Vec<A>,
    bytes: impl Fn(usize, i32, A, Variant, u64),
    words: impl Fn(usize, i32, A, u64),
) {
    for algo in algos {
        for (n, root, variant) in byte_cases(p) {
            seed += 1;
            bytes(n, root, algo, variant, seed);
        }
        for (n, root) in word_cases(p) {
            seed += 1;
            words(n, root, algo, seed);
        }
    }
}

/// Scatters blocks of `n` elements of `T` from `root` with zcoll and with rsmpi, and
/// compares; the root's buffer must come back unchanged.
fn check_scatter<T: Pod>(
    world: &SimpleCommunicator,
    comm: &Comm,
    n: usize,
    root: i32,
    algo: ScatterAlgorithm,
    variant: Variant,
    seed: u64,
) {
    let (me, p) = (world.rank(), world.size() as usize);
    let what =
        format!("scatter {n} x {} B root={root} {algo} {variant:?} rank {me}", std::mem::size_of::<T>());
    let is_root = me == root;
    let mut send = Guarded::<T>::new(if is_root { p * n } else { 0 }, |i| pattern(seed, i));
    let mut recv = Guarded::<T>::new(n, |i| !pattern(seed, i));
    let mut oracle = vec![T::zeroed(); n];
    if n > 0 {
        // Open MPI rejects zero-length calls at dangling (empty Vec) addresses.
        let at = world.process_at_rank(root);
        if is_root {
            at.scatter_into_root(send.get(), &mut oracle[..]);
        } else {
            at.scatter_into(&mut oracle[..]);
        }
    }
    match (is_root, variant) {
        (true, Variant::Separate) => comm.scatter_into_root_with(send.get(), recv.get_mut(), root, algo),
        (true, Variant::InPlace) => comm.scatter_in_place_root_with(send.get_mut(), root, algo),
        (false, _) => comm.scatter_into_with(recv.get_mut(), root, algo),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want: &[u8] = bytemuck::cast_slice(&oracle);
    if is_root && variant == Variant::InPlace {
        let size = std::mem::size_of::<T>();
        same(&send.bytes()[root as usize * n * size..][..n * size], want, &what);
        assert!(
            recv.bytes().iter().enumerate().all(|(i, &b)| b == !pattern(seed, i)),
            "{what}: recv touched"
        );
    } else {
        same(recv.bytes(), want, &what);
    }
    assert!(send.bytes().iter().enumerate().all(|(i, &b)| b == pattern(seed, i)), "{what}: send changed");
    send.guard(&what);
    recv.guard(&what);
}

/// Gathers blocks of `n` elements of `T` to `root` with zcoll and with rsmpi, and
/// compares; every rank's block must come back unchanged.
fn check_gather<T: Pod>(
    world: &SimpleCommunicator,
    comm: &Comm,
    n: usize,
    root: i32,
    algo: GatherAlgorithm,
    variant: Variant,
    seed: u64,
) {
    let (me, p) = (world.rank(), world.size() as usize);
    let size = std::mem::size_of::<T>();
    let what = format!("gather {n} x {size} B root={root} {algo} {variant:?} rank {me}");
    let is_root = me == root;
    let mine = |i: usize| pattern(seed + me as u64, i);
    let send = Guarded::<T>::new(n, mine);
    // The root's buffer: junk, but its own block already in place for the in-place call.
    let own = root as usize * n * size..(root as usize + 1) * n * size;
    let mut recv = Guarded::<T>::new(if is_root { p * n } else { 0 }, |i| match variant {
        Variant::InPlace if own.contains(&i) => mine(i - own.start),
        _ => !pattern(seed, i),
    });
    let mut oracle = vec![T::zeroed(); if is_root { p * n } else { 0 }];
    if n > 0 {
        let at = world.process_at_rank(root);
        if is_root {
            at.gather_into_root(send.get(), &mut oracle[..]);
        } else {
            at.gather_into(send.get());
        }
    }
    match (is_root, variant) {
        (true, Variant::Separate) => comm.gather_into_root_with(send.get(), recv.get_mut(), root, algo),
        (true, Variant::InPlace) => comm.gather_in_place_root_with(recv.get_mut(), root, algo),
        (false, _) => comm.gather_into_with(send.get(), root, algo),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    same(recv.bytes(), bytemuck::cast_slice(&oracle), &what);
    assert!(send.bytes().iter().enumerate().all(|(i, &b)| b == mine(i)), "{what}: send changed");
    send.guard(&what);
    recv.guard(&what);
}

/// Every bad call is the same `Err` on every rank, and leaves every buffer as it was.
fn errors(world: &SimpleCommunicator, comm: &Comm) {
    let me = world.rank();
    let p = world.size();
    let pu = p as usize;
    // Blocks of 36000 bytes, above half a staging area (32 KiB by default): no call here
    // travels in one phase, so no rank that only gives leaves before the verdict, and
    // every bad call is caught in the call (the deferred verdict of small ones: the
    // `deferred` jobs).
    let n = 9000usize;
    let last = p - 1;
    let fill = |len: usize, salt: u64| words(me, len, salt);
    let single_node_cma = comm.info().nodes == 1 && comm.info().transport == TransportKind::Cma;

    // Every call below fails on fresh buffers of the given lengths (send, receive), which
    // must be as filled afterwards.
    let case = |label: &str, send_len, recv_len, call: Attempt<'_>, want| {
        fails_unchanged(me, label, send_len, recv_len, call, want)
    };

    // A root outside the communicator, given alike by everyone.
    for bad in [p, -1, i32::MAX] {
        let want = Error::InvalidRoot { rank: me, root: bad, size: p };
        case("scatter bad root", 0, n, &|_, r| comm.scatter_into(r, bad), want.clone());
        case("gather bad root", n, 0, &|s, _| comm.gather_into(s, bad), want);
    }

    // The root's buffer does not hold p blocks.
    let root = last;
    let is_root = me == root;
    let want = Error::BufferSize { rank: root, which: "send", expected: pu * n, found: pu * n + 1 };
    case(
        "scatter short send",
        if is_root { pu * n + 1 } else { 0 },
        n,
        &|s, r| if is_root { comm.scatter_into_root(s, r, root) } else { comm.scatter_into(r, root) },
        want.clone(),
    );
    if p > 1 {
        // In place, p n + 1 elements is not p blocks of n (at p = 1 it is one block of n + 1).
        case(
            "scatter in place, long buffer",
            if is_root { pu * n + 1 } else { 0 },
            n,
            &|s, r| if is_root { comm.scatter_in_place_root(s, root) } else { comm.scatter_into(r, root) },
            want,
        );
    }
    let want = Error::BufferSize { rank: root, which: "receive", expected: pu * n, found: pu * n - 1 };
    case(
        "gather short recv",
        n,
        if is_root { pu * n - 1 } else { 0 },
        &|s, r| if is_root { comm.gather_into_root(s, r, root) } else { comm.gather_into(s, root) },
        want.clone(),
    );
    if p > 1 {
        case(
            "gather in place, short buffer",
            0,
            if is_root { pu * n - 1 } else { n },
            &|_, r| if is_root { comm.gather_in_place_root(r, root) } else { comm.gather_into(r, root) },
            want,
        );
    }

    // The root calls the non-root method: nobody claims the root's role.
    let want = Error::Mismatch { rank: me, culprit: 0, what: ROLE };
    case("scatter without root", 0, n, &|_, r| comm.scatter_into(r, 0), want.clone());
    case("gather without root", n, 0, &|s, _| comm.gather_into(s, 0), want);

    if p > 1 {
        let root = 0;
        let is_root = me == root;
        // The last rank's block is one element longer.
        let want = Error::LengthMismatch { rank: me, culprit: last, expected: 4 * n, found: 4 * (n + 1) };
        let recv_len = if me == last { n + 1 } else { n };
        case(
            "scatter uneven block",
            if is_root { pu * n } else { 0 },
            recv_len,
            &|s, r| if is_root { comm.scatter_into_root(s, r, root) } else { comm.scatter_into(r, root) },
            want.clone(),
        );
        case(
            "gather uneven block",
            recv_len,
            if is_root { pu * n } else { 0 },
            &|s, r| if is_root { comm.gather_into_root(s, r, root) } else { comm.gather_into(s, root) },
            want,
        );

        // The last rank calls the root's method too.
        let want = Error::Mismatch { rank: me, culprit: last, what: ROLE };
        let claims = is_root || me == last;
        case(
            "scatter with two roots",
            if claims { pu * n } else { 0 },
            n,
            &|s, r| if claims { comm.scatter_into_root(s, r, root) } else { comm.scatter_into(r, root) },
            want.clone(),
        );
        case(
            "gather with two roots",
            n,
            if claims { pu * n } else { 0 },
            &|s, r| if claims { comm.gather_into_root(s, r, root) } else { comm.gather_into(s, root) },
            want,
        );

        // Rank 0 scatters while the others gather.
        let want = Error::Mismatch { rank: me, culprit: 1, what: "collective" };
        case(
            "scatter against gather",
            if is_root { pu * n } else { n },
            n,
            &|s, r| if is_root { comm.scatter_into_root(s, r, root) } else { comm.gather_into(s, root) },
            want.clone(),
        );
        // Rank 0 (not the root) calls a rooted collective while the others call ones checked
        // otherwise: with one rank per node, each check's first collective has the same
        // shape, and every rank takes the same second one when they differ.
        let zero = me == 0;
        case(
            "scatter against allgather",
            n,
            if zero { n } else { pu * n },
            &|s, r| if zero { comm.scatter_into(r, root) } else { comm.all_gather_into(s, r) },
            want.clone(),
        );
        case(
            "gather against broadcast",
            n,
            n,
            &|s, r| if zero { comm.gather_into(s, root) } else { comm.broadcast_into(r, root) },
            want,
        );

        // The last rank names another root.
        let want = Error::Mismatch { rank: me, culprit: last, what: "root" };
        let named = if me == last { 1 } else { 0 };
        case(
            "scatter root disagreement",
            if me == 0 { pu * n } else { 0 },
            n,
            &|s, r| if me == 0 { comm.scatter_into_root(s, r, 0) } else { comm.scatter_into(r, named) },
            want,
        );

        let across = comm.info().nodes > 1;
        if single_node_cma || across {
            // Ranks choose different algorithms (only visible where both can run on one
            // node; across nodes the ranks compare what they asked for before any byte
            // moves).
            let (algo, want) = disagreeing_scatter(me, last);
            case(
                "scatter algorithm disagreement",
                if is_root { pu * n } else { 0 },
                n,
                &|s, r| {
                    if is_root {
                        comm.scatter_into_root_with(s, r, root, algo)
                    } else {
                        comm.scatter_into_with(r, root, algo)
                    }
                },
                want.clone(),
            );
            // Across nodes a named `Staged` beside `Auto` disagrees too, whatever each
            // node would resolve `Auto` to.
            let algo = if me == last { GatherAlgorithm::Staged } else { GatherAlgorithm::Auto };
            if across {
                case(
                    "gather algorithm disagreement across nodes",
                    n,
                    if is_root { pu * n } else { 0 },
                    &|s, r| {
                        if is_root {
                            comm.gather_into_root_with(s, r, root, algo)
                        } else {
                            comm.gather_into_with(s, root, algo)
                        }
                    },
                    want.clone(),
                );
            }
        }
        if single_node_cma {
            let want = Error::Mismatch { rank: me, culprit: last, what: "algorithm" };
            // `Auto` follows the environment: every rank but the last asks for throttled
            // write, so the last one's explicit `Staged` (what `Auto` is for these blocks
            // without the variable) disagrees, and its explicit throttled write agrees.
            // The variable is read when a `Comm` is built: this one sees it.
            if me != last {
                std::env::set_var("ZCOLL_GATHER_ALGORITHM", "throttled-write:2");
            }
            let comm = &Comm::new(world).unwrap();
            std::env::remove_var("ZCOLL_GATHER_ALGORITHM");
            let algo = if me == last { GatherAlgorithm::Staged } else { GatherAlgorithm::Auto };
            case(
                "gather algorithm disagreement through the environment",
                n,
                if is_root { pu * n } else { 0 },
                &|s, r| {
                    if is_root {
                        comm.gather_into_root_with(s, r, root, algo)
                    } else {
                        comm.gather_into_with(s, root, algo)
                    }
                },
                want,
            );
            let algo =
                if me == last { GatherAlgorithm::ThrottledWrite { k: 2 } } else { GatherAlgorithm::Auto };
            check_gather::<u32>(world, comm, n, root, algo, Variant::Separate, 97);
        }
    }

    // An environment variable zcoll cannot read is an error everywhere, in the calls of
    // a `Comm` built while it was set.
    std::env::set_var("ZCOLL_SCATTER_ALGORITHM", "throttled-read:0");
    let configured = Comm::new(world).unwrap();
    std::env::remove_var("ZCOLL_SCATTER_ALGORITHM");
    let (send0, recv0) = (fill(if me == 0 { pu * n } else { 0 }, 3), fill(n, 4));
    let (send, mut recv) = (send0.clone(), recv0.clone());
    let e = if me == 0 {
        configured.scatter_into_root(&send, &mut recv, 0)
    } else {
        configured.scatter_into(&mut recv, 0)
    }
    .unwrap_err();
    let config = |name: &str, value: &str| name == "ZCOLL_SCATTER_ALGORITHM" && value == "throttled-read:0";
    assert!(matches!(&e, Error::Config { name, value, .. } if config(name, value)), "rank {me}: {e}");
    assert!(send == send0 && recv == recv0, "a failed call changed a buffer on rank {me}");
    drop(configured);

    // The communicator is still usable after all that.
    check_scatter::<u32>(world, comm, n, last, ScatterAlgorithm::Auto, Variant::Separate, 99);
    check_gather::<u32>(world, comm, n, last, GatherAlgorithm::Auto, Variant::Separate, 98);
    comm.barrier().unwrap();
}
