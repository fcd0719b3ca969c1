//! Reduction operators: the built-in ones of MPI, for every primitive number type, and
//! user closures.
//!
//! An operator combines element-wise: `acc[i] = acc[i] ∘ x[i]`. A reduction over ranks
//! folds in rank order, `x_0 ∘ x_1 ∘ ... ∘ x_{p-1}`, so non-commutative operators get the
//! order MPI defines. The built-in kernels are plain loops over slices, which the compiler
//! vectorizes.

use crate::pod::Pod;

/// The built-in operators of MPI (MPI 4.1, 6.9.2).
///
/// # Examples
///
/// ```
/// use zcoll::op::{Builtin, Reducible};
/// let mut acc = [1i32, 5, -3];
/// assert!(i32::combine(Builtin::Max, &mut acc, &[4, 2, -1]));
/// assert_eq!(acc, [4, 5, -1]);
/// // Bitwise operators make no sense on floats: refused, as MPI refuses them.
/// assert!(!f64::combine(Builtin::BitXor, &mut [1.0], &[2.0]));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Builtin {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_PROD`.
    Prod,
    /// `MPI_MIN`. On floats, as [`f64::min`]: a NaN is ignored (the result is NaN only
    /// where every rank's is), and of `0.0` and `-0.0` either may come out. MPI defines
    /// neither: where the MPI library reduces (one rank per node,
    /// [`InterNode::DirectMpi`](crate::InterNode::DirectMpi)), Open MPI and MPICH pass a
    /// NaN on or drop it depending on the ranks' order, so a result with NaNs may depend
    /// on how the ranks sit on nodes.
    Min,
    /// `MPI_MAX`. On floats, as [`f64::max`], with the same caveats as [`Min`](Self::Min).
    Max,
    /// `MPI_BAND` (integers only).
    BitAnd,
    /// `MPI_BOR` (integers only).
    BitOr,
    /// `MPI_BXOR` (integers only).
    BitXor,
    /// `MPI_LAND`: 1 if both are non-zero, else 0 (integers only).
    LogicalAnd,
    /// `MPI_LOR`: 1 if either is non-zero, else 0 (integers only).
    LogicalOr,
    /// `MPI_LXOR`: 1 if exactly one is non-zero, else 0 (integers only).
    LogicalXor,
}

impl Builtin {
    /// Every built-in operator.
    pub const ALL: [Builtin; 10] = [
        Builtin::Sum,
        Builtin::Prod,
        Builtin::Min,
        Builtin::Max,
        Builtin::BitAnd,
        Builtin::BitOr,
        Builtin::BitXor,
        Builtin::LogicalAnd,
        Builtin::LogicalOr,
        Builtin::LogicalXor,
    ];

    /// MPI's operator.
    pub(crate) fn mpi(self) -> mpi::collective::SystemOperation {
        use mpi::collective::SystemOperation as S;
        match self {
            Builtin::Sum => S::sum(),
            Builtin::Prod => S::product(),
            Builtin::Min => S::min(),
            Builtin::Max => S::max(),
            Builtin::BitAnd => S::bitwise_and(),
            Builtin::BitOr => S::bitwise_or(),
            Builtin::BitXor => S::bitwise_xor(),
            Builtin::LogicalAnd => S::logical_and(),
            Builtin::LogicalOr => S::logical_or(),
            Builtin::LogicalXor => S::logical_xor(),
        }
    }

    /// The code published in a call record, so that ranks can check they agree.
    pub(crate) fn code(self) -> u64 {
        Builtin::ALL.iter().position(|&b| b == self).expect("listed") as u64 + 1
    }

    /// The built-in operator that MPI's `op` is: each of the ten that rsmpi constructs
    /// (`SystemOperation::sum()` and its kin) is the one of the same name. `None` only for
    /// a handle rsmpi cannot build, such as `MPI_MAXLOC`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mpi::collective::SystemOperation;
    /// use zcoll::op::Builtin;
    /// assert_eq!(Builtin::from_mpi(&SystemOperation::sum()), Some(Builtin::Sum));
    /// assert_eq!(Builtin::from_mpi(&SystemOperation::logical_xor()), Some(Builtin::LogicalXor));
    /// ```
    pub fn from_mpi(op: &mpi::collective::SystemOperation) -> Option<Builtin> {
        use mpi::raw::AsRaw;
        Builtin::ALL.into_iter().find(|b| b.mpi().as_raw() == op.as_raw())
    }
}

/// Element types the built-in operators apply to: every primitive integer and float.
pub trait Reducible: Pod {
    /// `acc[i] = acc[i] ∘ x[i]` for `i < acc.len()`; returns false (and changes nothing)
    /// if `op` does not apply to this type.
    ///
    /// # Panics
    ///
    /// If `x` is shorter than `acc`.
    fn combine(op: Builtin, acc: &mut [Self], x: &[Self]) -> bool;
}

fn zip<T: Copy>(acc: &mut [T], x: &[T], f: impl Fn(T, T) -> T) {
    let x = &x[..acc.len()];
    for (a, &b) in acc.iter_mut().zip(x) {
        *a = f(*a, b);
    }
}

macro_rules! integers {
    ($($t:ty)*) => {$(
        impl Reducible for $t {
            fn combine(op: Builtin, acc: &mut [Self], x: &[Self]) -> bool {
                match op {
                    Builtin::Sum => zip(acc, x, <$t>::wrapping_add),
                    Builtin::Prod => zip(acc, x, <$t>::wrapping_mul),
                    Builtin::Min => zip(acc, x, <$t>::min),
                    Builtin::Max => zip(acc, x, <$t>::max),
                    Builtin::BitAnd => zip(acc, x, |a, b| a & b),
                    Builtin::BitOr => zip(acc, x, |a, b| a | b),
                    Builtin::BitXor => zip(acc, x, |a, b| a ^ b),
                    Builtin::LogicalAnd => zip(acc, x, |a, b| (a != 0 && b != 0) as $t),
                    Builtin::LogicalOr => zip(acc, x, |a, b| (a != 0 || b != 0) as $t),
                    Builtin::LogicalXor => zip(acc, x, |a, b| ((a != 0) != (b != 0)) as $t),
                }
                true
            }
        }
    )*};
}

integers!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

macro_rules! floats {
    ($($t:ty)*) => {$(
        impl Reducible for $t {
            fn combine(op: Builtin, acc: &mut [Self], x: &[Self]) -> bool {
                match op {
                    Builtin::Sum => zip(acc, x, |a, b| a + b),
                    Builtin::Prod => zip(acc, x, |a, b| a * b),
                    Builtin::Min => zip(acc, x, <$t>::min),
                    Builtin::Max => zip(acc, x, <$t>::max),
                    _ => return false,
                }
                true
            }
        }
    )*};
}

floats!(f32 f64);

/// What a reduction combines with: a built-in operator or a user closure.
///
/// Implemented by [`Builtin`] (for [`Reducible`] types) and by [`UserOp`].
pub trait Operator<T> {
    /// `acc[i] = acc[i] ∘ x[i]`; false if the operator does not apply to `T`.
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool;
    /// Whether the operator applies to `T` at all. Every rank asks before its call moves
    /// anything, so that a pairing that cannot work (a bitwise operator on floats) fails
    /// on every rank alike; answering combines nothing. The default, for an operator
    /// written for its element type (a user closure), is `true`.
    fn applies(&self) -> bool {
        true
    }
    /// Whether `a ∘ b = b ∘ a`: a commutative operator may combine in any order.
    fn commutative(&self) -> bool;
    /// Identifies the operator in the call record, so that ranks can check they agree
    /// (user closures are identified only by their commutativity).
    fn code(&self) -> u64;
    /// The built-in operator this is, if any (the legs between nodes hand it to MPI).
    fn builtin(&self) -> Option<Builtin> {
        None
    }
}

impl<T: Reducible> Operator<T> for Builtin {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        T::combine(*self, acc, x)
    }
    fn applies(&self) -> bool {
        T::combine(*self, &mut [], &[])
    }
    fn commutative(&self) -> bool {
        true
    }
    fn code(&self) -> u64 {
        Builtin::code(*self)
    }
    fn builtin(&self) -> Option<Builtin> {
        Some(*self)
    }
}

/// rsmpi's predefined operators (`SystemOperation::sum()` and its kin) work as they do
/// with rsmpi's own collectives, so a reduction ports by changing only the receiver:
/// each is the [`Builtin`] of the same name, refused where the `Builtin` is (a bitwise
/// operator on floats: [`Error::Unsupported`](crate::Error::Unsupported) on every rank).
///
/// # Examples
///
/// ```
/// use mpi::collective::SystemOperation;
/// use zcoll::op::Operator;
/// let mut acc = [1.5f64, -2.0];
/// assert!(SystemOperation::max().apply(&mut acc, &[0.5, 3.0]));
/// assert_eq!(acc, [1.5, 3.0]);
/// ```
impl<T: Reducible> Operator<T> for mpi::collective::SystemOperation {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        MpiOperator::from(self).apply(acc, x)
    }
    fn applies(&self) -> bool {
        <MpiOperator as Operator<T>>::applies(&MpiOperator::from(self))
    }
    fn commutative(&self) -> bool {
        <MpiOperator as Operator<T>>::commutative(&MpiOperator::from(self))
    }
    fn code(&self) -> u64 {
        <MpiOperator as Operator<T>>::code(&MpiOperator::from(self))
    }
    fn builtin(&self) -> Option<Builtin> {
        Builtin::from_mpi(self)
    }
}

/// An rsmpi `SystemOperation` as zcoll knows it, a value that may cross threads (MPI's
/// handle may not: Open MPI's is a pointer). It is what a nonblocking or persistent
/// reduction carries to its scope's worker ([`SendOperator`]): the [`Builtin`] of the same
/// name, or, for a handle zcoll has no equivalent of (`MPI_MAXLOC` made with
/// `SystemOperation::from_raw`), an operator that applies to nothing, so that the call
/// fails with [`Error::Unsupported`](crate::Error::Unsupported) on every rank, as the
/// blocking call does.
///
/// # Examples
///
/// ```
/// use mpi::collective::SystemOperation;
/// use zcoll::op::{Builtin, MpiOperator, Operator};
/// let op = MpiOperator::from(&SystemOperation::product());
/// assert_eq!(op.builtin(), Some(Builtin::Prod));
/// let mut acc = [3i64, -2];
/// assert!(op.apply(&mut acc, &[5, 4]));
/// assert_eq!(acc, [15, -8]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MpiOperator(Option<Builtin>);

impl MpiOperator {
    /// The built-in operator this is, `None` for one zcoll has no equivalent of.
    ///
    /// # Examples
    ///
    /// ```
    /// use mpi::collective::SystemOperation;
    /// use zcoll::op::{Builtin, MpiOperator};
    /// assert_eq!(MpiOperator::from(SystemOperation::min()).builtin(), Some(Builtin::Min));
    /// ```
    pub fn builtin(self) -> Option<Builtin> {
        self.0
    }
}

impl From<&mpi::collective::SystemOperation> for MpiOperator {
    fn from(op: &mpi::collective::SystemOperation) -> Self {
        MpiOperator(Builtin::from_mpi(op))
    }
}

impl From<mpi::collective::SystemOperation> for MpiOperator {
    fn from(op: mpi::collective::SystemOperation) -> Self {
        MpiOperator::from(&op)
    }
}

/// The code of an operator zcoll does not know: the same on every rank that passes one,
/// so that the ranks agree, and each gets the `Unsupported` that `apply` leads to.
const UNKNOWN_MPI_CODE: u64 = 0xff;

impl<T: Reducible> Operator<T> for MpiOperator {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        self.0.is_some_and(|b| T::combine(b, acc, x))
    }
    fn applies(&self) -> bool {
        self.0.is_some_and(|b| T::combine(b, &mut [], &[]))
    }
    fn commutative(&self) -> bool {
        // Every predefined reduction operator of MPI commutes (MPI 4.1, 6.9.2).
        true
    }
    fn code(&self) -> u64 {
        self.0.map_or(UNKNOWN_MPI_CODE, Builtin::code)
    }
    fn builtin(&self) -> Option<Builtin> {
        self.0
    }
}

/// An operator that a nonblocking or persistent reduction can carry to its scope's worker
/// thread: converted once, at the call, into a form that is `Send`.
///
/// The operator itself where it is `Send` (a [`Builtin`], a [`UserOp`] or
/// [`UserOperation`] whose closure is `Send`, a lent `&Builtin` or `&UserOp` whose closure
/// is `Sync`); rsmpi's `SystemOperation` (by value or lent) becomes its [`MpiOperator`],
/// so a reduction written for rsmpi, `s.immediate_all_reduce_into(&a, &mut b,
/// SystemOperation::sum())`, compiles as the blocking `all_reduce_into` does. A user
/// operator that is not `Send` stays refused at compile time. A type of your own that
/// implements [`Operator`] and is `Send` implements this with `type Op = Self`.
///
/// # Examples
///
/// ```
/// use mpi::collective::SystemOperation;
/// use zcoll::op::{Builtin, Operator, SendOperator};
/// fn on_another_thread<T, O: SendOperator<T>>(op: O) -> Option<Builtin> {
///     let op = op.into_send();
///     std::thread::scope(|s| s.spawn(move || op.builtin()).join().unwrap())
/// }
/// assert_eq!(on_another_thread::<f64, _>(SystemOperation::sum()), Some(Builtin::Sum));
/// assert_eq!(on_another_thread::<u8, _>(&SystemOperation::bitwise_or()), Some(Builtin::BitOr));
/// assert_eq!(on_another_thread::<i32, _>(Builtin::Max), Some(Builtin::Max));
/// ```
///
/// A user operator whose closure is not `Send` is refused:
///
/// ```compile_fail
/// use zcoll::op::{SendOperator, UserOp};
/// fn sendable<T, O: SendOperator<T>>(_: O) {}
/// let shared = std::rc::Rc::new(1u64);
/// sendable::<u64, _>(UserOp::commutative(move |acc: &mut [u64], x: &[u64]| {
///     acc.iter_mut().zip(x).for_each(|(a, b)| *a += b * *shared)
/// }));
/// ```
pub trait SendOperator<T> {
    /// The operator in a form that may cross threads.
    type Op: Operator<T> + Send;
    /// Converts it.
    fn into_send(self) -> Self::Op;
}

/// Implements [`SendOperator`] as the identity.
macro_rules! send_as_is {
    ($([$($g:tt)*] $ty:ty),* $(,)?) => {$(
        impl<$($g)*> SendOperator<T> for $ty {
            type Op = Self;
            fn into_send(self) -> Self {
                self
            }
        }
    )*};
}

send_as_is! {
    [T: Reducible] Builtin,
    ['a, T: Reducible] &'a Builtin,
    [T: Reducible] MpiOperator,
    [T, F: Fn(&mut [T], &[T]) + Send] UserOp<F>,
    ['a, T, F: Fn(&mut [T], &[T]) + Sync] &'a UserOp<F>,
    [T: Copy + Send, F: Fn(&[T], &mut [T]) + Send] UserOperation<T, F>,
}

impl<T: Reducible> SendOperator<T> for mpi::collective::SystemOperation {
    type Op = MpiOperator;
    fn into_send(self) -> MpiOperator {
        MpiOperator::from(&self)
    }
}

impl<T: Reducible> SendOperator<T> for &mpi::collective::SystemOperation {
    type Op = MpiOperator;
    fn into_send(self) -> MpiOperator {
        MpiOperator::from(self)
    }
}

/// An operator lent by reference is the same operator.
impl<T, O: Operator<T> + ?Sized> Operator<T> for &O {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        (**self).apply(acc, x)
    }
    fn applies(&self) -> bool {
        (**self).applies()
    }
    fn commutative(&self) -> bool {
        (**self).commutative()
    }
    fn code(&self) -> u64 {
        (**self).code()
    }
    fn builtin(&self) -> Option<Builtin> {
        (**self).builtin()
    }
}

/// A user operator: a closure `f(acc, x)` that sets `acc[i] = acc[i] ∘ x[i]`. zcoll
/// calls it only with slices of the same length, never empty ones.
///
/// # Examples
///
/// ```
/// use zcoll::op::{Operator, UserOp};
/// // 2x2 matrix product, flattened: not commutative, so ranks combine in rank order.
/// let matmul = UserOp::non_commutative(|acc: &mut [[i64; 4]], x: &[[i64; 4]]| {
///     for (a, b) in acc.iter_mut().zip(x) {
///         *a = [a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
///               a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]];
///     }
/// });
/// let mut acc = [[1, 1, 0, 1]];
/// assert!(matmul.apply(&mut acc, &[[1, 0, 1, 1]]));
/// assert_eq!(acc, [[2, 1, 1, 1]]);
/// assert!(!matmul.commutative());
/// ```
pub struct UserOp<F> {
    f: F,
    commutative: bool,
}

impl<F> UserOp<F> {
    /// A commutative operator, `f(acc, x)` setting `acc[i] = acc[i] ∘ x[i]`: zcoll may
    /// combine the ranks' values in any order.
    pub fn commutative(f: F) -> Self {
        UserOp { f, commutative: true }
    }

    /// A non-commutative operator, `f(acc, x)` setting `acc[i] = acc[i] ∘ x[i]`, where
    /// `acc` holds the lower ranks' values and `x` the next rank's: zcoll combines in rank
    /// order. A closure written for rsmpi or MPI takes its operands the other way round:
    /// use [`UserOperation`] for it.
    pub fn non_commutative(f: F) -> Self {
        UserOp { f, commutative: false }
    }
}

/// A user operator in rsmpi's and MPI's shape: `f(invec, inoutvec)` sets
/// `inoutvec[i] = invec[i] ∘ inoutvec[i]`, where `invec` holds the lower ranks' values
/// (MPI 4.1, 6.9.5), called only with slices of the same length, never empty ones. A
/// program ported from rsmpi's `UserOperation` renames the type and
/// takes typed slices instead of `DynBuffer`s, and computes the same, also for a
/// non-commutative operator. (zcoll's own [`UserOp`] takes `(acc, x)`, the accumulator
/// first.)
///
/// # Examples
///
/// ```
/// use zcoll::op::{Operator, UserOperation};
/// // 2x2 matrix product as an rsmpi program writes it: inoutvec = invec * inoutvec.
/// let matmul = UserOperation::non_commutative(|invec: &[[i64; 4]], inoutvec: &mut [[i64; 4]]| {
///     for (a, b) in invec.iter().zip(inoutvec.iter_mut()) {
///         *b = [a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
///               a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]];
///     }
/// });
/// // zcoll folds rank 0's value (the accumulator) with rank 1's: acc * x.
/// let mut acc = [[1, 1, 0, 1]];
/// assert!(matmul.apply(&mut acc, &[[1, 0, 1, 1]]));
/// assert_eq!(acc, [[2, 1, 1, 1]]);
/// ```
pub struct UserOperation<T, F> {
    f: F,
    commutative: bool,
    /// The right operand's copy, which `f` overwrites with the result.
    scratch: std::cell::RefCell<Vec<T>>,
}

impl<T, F> UserOperation<T, F> {
    /// A commutative operator, `f(invec, inoutvec)` (rsmpi's
    /// `UserOperation::commutative`).
    pub fn commutative(f: F) -> Self {
        UserOperation { f, commutative: true, scratch: Default::default() }
    }

    /// A non-commutative operator, `f(invec, inoutvec)` with `invec` the lower ranks'
    /// values.
    pub fn non_commutative(f: F) -> Self {
        UserOperation { f, commutative: false, scratch: Default::default() }
    }

    /// [`non_commutative`](Self::non_commutative) under rsmpi's name
    /// (`UserOperation::associative`: every user operator must be associative; this one
    /// need not commute).
    pub fn associative(f: F) -> Self {
        Self::non_commutative(f)
    }
}

impl<T: Copy, F: Fn(&[T], &mut [T])> Operator<T> for UserOperation<T, F> {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        if acc.is_empty() {
            return true;
        }
        // acc ∘ x is f's invec ∘ inoutvec with invec = acc and inoutvec = x.
        let mut right = self.scratch.borrow_mut();
        right.clear();
        right.extend_from_slice(&x[..acc.len()]);
        (self.f)(acc, &mut right);
        acc.copy_from_slice(&right);
        true
    }
    fn commutative(&self) -> bool {
        self.commutative
    }
    fn code(&self) -> u64 {
        0x100 | self.commutative as u64
    }
}

impl<T, F: Fn(&mut [T], &[T])> Operator<T> for UserOp<F> {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        if !acc.is_empty() {
            (self.f)(acc, &x[..acc.len()]);
        }
        true
    }
    fn commutative(&self) -> bool {
        self.commutative
    }
    fn code(&self) -> u64 {
        0x100 | self.commutative as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an operator applies is asked without combining anything: a user closure
    /// is never called to answer, nor ever on empty slices (one written for elements,
    /// `acc[0] += x[0]`, would panic).
    #[test]
    fn applying_is_asked_of_no_closure() {
        let op = UserOp::commutative(|_: &mut [u8], _: &[u8]| panic!("called on empty slices"));
        assert!(Operator::<u8>::applies(&op));
        assert!(op.apply(&mut [], &[]));
        let ported = UserOperation::commutative(|_: &[u8], _: &mut [u8]| panic!("called on empty slices"));
        assert!(Operator::<u8>::applies(&ported));
        assert!(ported.apply(&mut [], &[]));
        assert!(Operator::<f64>::applies(&Builtin::Sum));
        assert!(!Operator::<f64>::applies(&Builtin::BitAnd));
        assert!(!Operator::<f64>::applies(&&Builtin::BitXor));
        assert!(Operator::<u8>::applies(&MpiOperator(Some(Builtin::BitAnd))));
        assert!(!Operator::<u8>::applies(&MpiOperator(None)));
    }

    /// The float `Min` and `Max` are documented as `f64::min`/`max`: a NaN is ignored
    /// unless every operand is one.
    #[test]
    fn float_min_max_ignore_nan() {
        for op in [Builtin::Min, Builtin::Max] {
            let mut acc = [f32::NAN, 1.0, f32::NAN];
            assert!(f32::combine(op, &mut acc, &[2.0, f32::NAN, f32::NAN]));
            assert_eq!(acc[..2], [2.0, 1.0], "{op:?}");
            assert!(acc[2].is_nan(), "{op:?}");
        }
    }

    #[test]
    fn integer_kernels_match_their_definitions() {
        let a = [0i16, 3, -7, i16::MAX];
        let b = [5i16, 0, -2, 1];
        let expect: [(Builtin, [i16; 4]); 10] = [
            (Builtin::Sum, [5, 3, -9, i16::MIN]),
            (Builtin::Prod, [0, 0, 14, i16::MAX]),
            (Builtin::Min, [0, 0, -7, 1]),
            (Builtin::Max, [5, 3, -2, i16::MAX]),
            (Builtin::BitAnd, [0, 0, -8, 1]),
            (Builtin::BitOr, [5, 3, -1, i16::MAX]),
            (Builtin::BitXor, [5, 3, 7, i16::MAX - 1]),
            (Builtin::LogicalAnd, [0, 0, 1, 1]),
            (Builtin::LogicalOr, [1, 1, 1, 1]),
            (Builtin::LogicalXor, [1, 1, 0, 0]),
        ];
        for (op, want) in expect {
            let mut acc = a;
            assert!(i16::combine(op, &mut acc, &b));
            assert_eq!(acc, want, "{op:?}");
        }
    }

    #[test]
    fn float_kernels_and_refusals() {
        let mut acc = [1.5f32, -2.0];
        assert!(f32::combine(Builtin::Prod, &mut acc, &[2.0, 4.0]));
        assert_eq!(acc, [3.0, -8.0]);
        for op in [Builtin::BitAnd, Builtin::BitOr, Builtin::BitXor, Builtin::LogicalAnd, Builtin::LogicalOr]
        {
            assert!(!f64::combine(op, &mut [1.0], &[1.0]));
        }
    }

    #[test]
    fn codes_are_distinct() {
        let mut codes: Vec<u64> = Builtin::ALL.iter().map(|&b| Builtin::code(b)).collect();
        codes.push(<UserOp<fn(&mut [u8], &[u8])> as Operator<u8>>::code(&UserOp::commutative(|_, _| {})));
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Builtin::ALL.len() + 1);
    }

    #[test]
    fn an_unknown_mpi_operator_applies_to_nothing() {
        let unknown = MpiOperator(None);
        assert!(!unknown.apply(&mut [1u32], &[2]));
        assert_eq!(<MpiOperator as Operator<u32>>::code(&unknown), UNKNOWN_MPI_CODE);
        assert!(!Builtin::ALL.iter().any(|&b| Builtin::code(b) == UNKNOWN_MPI_CODE));
        assert_eq!(SendOperator::<u32>::into_send(unknown), unknown);
    }

    #[test]
    fn rsmpi_operators_are_the_builtins_of_the_same_name() {
        use mpi::collective::SystemOperation as S;
        for b in Builtin::ALL {
            assert_eq!(Builtin::from_mpi(&b.mpi()), Some(b));
            assert_eq!(<S as Operator<u8>>::code(&b.mpi()), Builtin::code(b));
            let (mut via_mpi, mut via_builtin) = ([3u8, 0, 250], [3u8, 0, 250]);
            assert!(b.mpi().apply(&mut via_mpi, &[6, 0, 9]));
            assert!(u8::combine(b, &mut via_builtin, &[6, 0, 9]));
            assert_eq!(via_mpi, via_builtin, "{b:?}");
            assert_eq!(SendOperator::<u8>::into_send(b.mpi()), MpiOperator(Some(b)));
            assert_eq!(SendOperator::<f32>::into_send(&b.mpi()).builtin(), Some(b));
        }
        assert_eq!(<S as Operator<u8>>::code(&S::sum()), Builtin::code(Builtin::Sum));
        assert!(!S::bitwise_xor().apply(&mut [1.0f64], &[2.0]), "refused on floats, as Builtin");
    }
}
