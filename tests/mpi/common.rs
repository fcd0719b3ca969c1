//! What the scenarios share: deterministic data, buffers with guard bytes on both sides,
//! and comparisons that name the first differing byte.

use mpi::collective::SystemOperation;
use zcoll::op::Builtin;
use zcoll::Pod;

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
