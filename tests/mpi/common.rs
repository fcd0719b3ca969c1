//! What the scenarios share: deterministic data, buffers with guard bytes on both sides,
//! and comparisons that name the first differing byte.

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use zcoll::op::Builtin;
use zcoll::{Comm, Error, GatherAlgorithm, Pod, ScatterAlgorithm};

/// Guard bytes before and after every test buffer: nothing may write there.
pub(crate) const GUARD: usize = 64;
pub(crate) const GUARD_BYTE: u8 = 0xa5;

/// Deterministic content for (seed, byte index), different for every seed.
pub(crate) fn pattern(seed: u64, i: usize) -> u8 {
    let x = (i as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    (x >> 29) as u8
}

/// splitmix64: a well-mixed 64-bit value of `x`, for the scenarios' random choices
/// (every rank that mixes the same value draws the same number).
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small deterministic generator (splitmix64): every rank that starts it from the same
/// seed draws the same numbers.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let z = mix(self.0);
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z
    }

    /// A number in `0..n` (0 for `n = 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// A partition of a buffer among `p` ranks: counts, displacements, and the buffer length,
/// all in elements.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub(crate) counts: Vec<Count>,
    pub(crate) displs: Vec<Count>,
    pub(crate) len: usize,
}

impl Layout {
    /// Blocks of `counts` stored in a random order with random gaps of up to `gap`
    /// elements before each and after the last.
    pub(crate) fn placed(rng: &mut Rng, counts: Vec<Count>, gap: usize) -> Layout {
        let p = counts.len();
        let mut order: Vec<usize> = (0..p).collect();
        for i in (1..p).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut displs = vec![0; p];
        let mut at = 0;
        for &r in &order {
            at += rng.below(gap + 1);
            displs[r] = at as Count;
            at += counts[r] as usize;
        }
        Layout { counts, displs, len: at + rng.below(gap + 1) }
    }
}

/// `n` elements of `T` between guard bytes, allocated as `T` so that they are aligned
/// (and the address is valid even for `n = 0`).
pub(crate) struct Guarded<T = u8> {
    store: Vec<T>,
    /// Elements of guard before the data.
    pre: usize,
    n: usize,
}

impl<T: Pod> Guarded<T> {
    /// `n` elements whose byte `i` is `fill(i)`.
    pub(crate) fn new(n: usize, fill: impl Fn(usize) -> u8) -> Self {
        let size = std::mem::size_of::<T>().max(1);
        let pre = GUARD.div_ceil(size);
        let mut store: Vec<T> = vec![T::zeroed(); pre + n + pre];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut store);
        let (start, end) = (pre * size, (pre + n) * size);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = if (start..end).contains(&i) { fill(i - start) } else { GUARD_BYTE };
        }
        Guarded { store, pre, n }
    }

    pub(crate) fn get(&self) -> &[T] {
        &self.store[self.pre..self.pre + self.n]
    }

    pub(crate) fn get_mut(&mut self) -> &mut [T] {
        &mut self.store[self.pre..self.pre + self.n]
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.get())
    }

    /// Whether the guards on both sides are intact.
    pub(crate) fn guard_ok(&self) -> bool {
        let before: &[u8] = bytemuck::cast_slice(&self.store[..self.pre]);
        let after: &[u8] = bytemuck::cast_slice(&self.store[self.pre + self.n..]);
        before.iter().chain(after).all(|&b| b == GUARD_BYTE)
    }

    /// Panics if anything wrote outside the buffer.
    pub(crate) fn guard(&self, what: &str) {
        assert!(self.guard_ok(), "{what}: wrote outside the buffer");
    }

    /// Panics (naming case `what`) unless the buffer holds the bytes `want` of the oracle
    /// and its guards are intact.
    pub(crate) fn holds(&self, want: &[u8], what: &str) {
        same(self.bytes(), want, what);
        self.guard(what);
    }

    /// Whether byte `i` is `fill(i)` and the guards are intact.
    pub(crate) fn is(&self, fill: impl Fn(usize) -> u8) -> bool {
        self.bytes().iter().enumerate().all(|(i, &b)| b == fill(i)) && self.guard_ok()
    }

    /// Panics unless byte `i` is still `fill(i)` and the guards are intact.
    pub(crate) fn unchanged(&self, fill: impl Fn(usize) -> u8, what: &str) {
        if let Some(i) = self.bytes().iter().enumerate().position(|(i, &b)| b != fill(i)) {
            panic!("{what}: byte {i} of a buffer that must not change changed");
        }
        self.guard(what);
    }
}

/// Panics naming the first byte where `got` differs from `want`.
pub(crate) fn same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: differs from the oracle at byte {i} of {}", got.len());
    }
}

/// Runs `f` with panics caught and unreported (the job's hook would abort it): `None`
/// if it panicked.
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> Option<R> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    std::panic::set_hook(hook);
    r
}

/// rsmpi's operator for a built-in one, for the oracles.
pub(crate) fn op_mpi(op: Builtin) -> SystemOperation {
    match op {
        Builtin::Sum => SystemOperation::sum(),
        Builtin::Prod => SystemOperation::product(),
        Builtin::Min => SystemOperation::min(),
        Builtin::Max => SystemOperation::max(),
        Builtin::BitAnd => SystemOperation::bitwise_and(),
        Builtin::BitOr => SystemOperation::bitwise_or(),
        Builtin::BitXor => SystemOperation::bitwise_xor(),
        Builtin::LogicalAnd => SystemOperation::logical_and(),
        Builtin::LogicalOr => SystemOperation::logical_or(),
        Builtin::LogicalXor => SystemOperation::logical_xor(),
        other => unreachable!("{other:?} has no MPI operator in this test"),
    }
}

/// Every scatter algorithm, the throttled read once for each `k` of `ks`.
pub(crate) fn scatter_algorithms(ks: &[u32]) -> Vec<ScatterAlgorithm> {
    use ScatterAlgorithm::*;
    algorithms(&[Auto, ParallelRead, SequentialWrite], ks, |k| ThrottledRead { k }, Staged)
}

/// Every gather algorithm, the throttled write once for each `k` of `ks`.
pub(crate) fn gather_algorithms(ks: &[u32]) -> Vec<GatherAlgorithm> {
    use GatherAlgorithm::*;
    algorithms(&[Auto, ParallelWrite, SequentialRead], ks, |k| ThrottledWrite { k }, Staged)
}

/// The scatter algorithm rank `me` asks for where the ranks disagree on it (the last rank
/// `last` a sequential write, every other a parallel read), and the error every rank
/// must get for it.
pub(crate) fn disagreeing_scatter(me: i32, last: i32) -> (ScatterAlgorithm, Error) {
    let algo = if me == last { ScatterAlgorithm::SequentialWrite } else { ScatterAlgorithm::ParallelRead };
    (algo, Error::Mismatch { rank: me, culprit: last, what: "algorithm" })
}

/// `first`, then `throttled(k)` for each `k` of `ks` not listed yet, then `last`.
fn algorithms<A: Copy + PartialEq>(first: &[A], ks: &[u32], throttled: impl Fn(u32) -> A, last: A) -> Vec<A> {
    let mut all = first.to_vec();
    for &k in ks {
        let a = throttled(k);
        if !all.contains(&a) {
            all.push(a);
        }
    }
    all.push(last);
    all
}

/// `len` `u32` elements of rank `me`'s pattern for `salt`: `u32`, so that element counts
/// (in `BufferSize` errors) differ from byte counts.
pub(crate) fn words(me: i32, len: usize, salt: u64) -> Vec<u32> {
    (0..len).map(|i| u32::from_le_bytes([0, 1, 2, 3].map(|j| pattern(salt + me as u64, 4 * i + j)))).collect()
}

/// A call on the two buffers of an error case: (send, receive).
pub(crate) type Attempt<'a> = &'a dyn Fn(&mut [u32], &mut [u32]) -> zcoll::Result<()>;

/// Runs `call` on rank `me` on fresh buffers of `send_len` and `recv_len` elements: it
/// must fail with `want`, and leave both buffers as they were filled.
pub(crate) fn fails_unchanged(
    me: i32,
    label: &str,
    send_len: usize,
    recv_len: usize,
    call: Attempt<'_>,
    want: Error,
) {
    let (send0, recv0) = (words(me, send_len, 1), words(me, recv_len, 2));
    let (mut send, mut recv) = (send0.clone(), recv0.clone());
    let e = call(&mut send, &mut recv).expect_err(label);
    assert_eq!(e, want, "{label}: rank {me}");
    assert!(send == send0 && recv == recv0, "{label}: a failed call changed a buffer on rank {me}");
}

/// After a barrier, every rank sees what every rank did before it: in each round, every
/// rank sleeps `delays[round]` ms, leaves a marker file in a directory rank 0 made (named
/// `{prefix}-{pid}`), passes `comm`'s barrier, and must find every rank's marker of the
/// round.
pub(crate) fn check_barrier(world: &SimpleCommunicator, comm: &Comm, prefix: &str, delays: &[u64]) {
    let (me, p) = (world.rank(), world.size());
    let mut dir_name = [0u8; 256];
    if me == 0 {
        let d = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let s = d.to_str().unwrap().as_bytes();
        dir_name[..s.len()].copy_from_slice(s);
    }
    world.process_at_rank(0).broadcast_into(&mut dir_name[..]);
    let end = dir_name.iter().position(|&b| b == 0).unwrap();
    let dir = std::path::PathBuf::from(std::str::from_utf8(&dir_name[..end]).unwrap());
    for (round, &delay) in delays.iter().enumerate() {
        std::thread::sleep(std::time::Duration::from_millis(delay));
        std::fs::write(dir.join(format!("{round}-{me}")), b"").unwrap();
        comm.barrier().unwrap_or_else(|e| panic!("{prefix} round {round} rank {me}: {e}"));
        for r in 0..p {
            assert!(
                dir.join(format!("{round}-{r}")).exists(),
                "{prefix} round {round}: rank {me} passed before rank {r} arrived"
            );
        }
    }
    comm.barrier().unwrap();
    if me == 0 {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
