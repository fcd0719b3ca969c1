//! Reduce and allreduce: zero-copy partitioned reductions.
//!
//! [`ReduceAlgorithm::Partitioned`] (the shared-address-space reduction of the MVAPICH2-X
//! work, on CMA): the `n` elements are cut into `p` partitions, cache-line aligned.
//! Rank `i` reduces partition `i` straight out of every rank's input: chunk by chunk
//! (32 KiB, so the chunk stays in cache), it reads each peer's piece with one CMA read
//! into a scratch and folds it into the result, in rank order. For allreduce the
//! result partition lands in rank `i`'s own output and every rank then reads the other
//! partitions from their owners (a partitioned broadcast, in ring order so that each
//! owner has one reader per step); for reduce, rank `i` writes its partition straight
//! into the root's output. Per rank, with `P = ceil(n / (s / e))` pages of input:
//!
//! ```text
//! allreduce: 2 (p-1)/p n beta + 2 (p-1) ceil(n/(p c)) alpha + (p-1)/p (n/s) l (2 + ...) + n/p (p-1) gamma_op
//! reduce:      (p-1)/p n beta +   (p-1) ceil(n/(p c)) alpha + ...                       + n/p (p-1) gamma_op
//! ```
//!
//! with `c` the chunk and `gamma_op` the operator's cost per element: every byte crosses
//! once per reader, no rank holds a copy of a whole peer buffer, and the reduction work
//! is split evenly.
//!
//! [`ReduceAlgorithm::Staged`]: copy-in/copy-out through the staging areas, in chunks of
//! half an area: every rank publishes its chunk, every consumer (all ranks, or the root)
//! folds all of them in rank order. For small messages, where a CMA call costs more than
//! the copies, and on `cico` nodes.
//!
//! [`ReduceAlgorithm::RootRead`] (a reduce to a root only): the root reads each peer's
//! whole input, chunk by chunk (one CMA read each: 1 MiB where the peer's bytes go
//! straight into the output, as at two ranks, else 32 KiB through the scratch; 8 KiB
//! where every input is mapped here), and folds it into its output in rank order; the
//! other ranks only publish their input and wait for the root's `done`. It is how Open MPI reduces at
//! two ranks (one single-copy receive, then the fold), without the temporary buffer:
//! no byte is written into another process, and no rank copies through the staging
//! areas. On the root, with `c` the chunk:
//!
//! ```text
//! reduce: (p-1) n beta + (p-1) ceil(n/c) alpha + (p-1) (n/s) l + (p-1) n gamma_op
//! ```
//!
//! serial in `p`: it wins at two ranks, where the partitioned reduce's other half is a
//! CMA write (dearer than a read) and the staged one copies every byte twice, and loses
//! to the partitioned reduce from three ranks on (see the reductions chapter).
//!
//! [`reduce_scatter`] stops the partitioned reduction after its first phase, with `m`
//! partitions owned by local ranks `0..m`: the first leg of the multi-root allreduce
//! across nodes (see `hier/reduce.rs`).
//!
//! Both fold in rank order for a non-commutative operator, and every allreduce result
//! element is computed once, by one rank, so all ranks hold bitwise the same result.

use super::algorithm::Algorithm;
use super::{check, check_staged, from_inline, inline_word, typed_op, BadLength, Ctx, Kind, INLINE_BYTES};
use crate::error::{Error, Result};
use crate::op::{Builtin, Operator};
use crate::pod::Pod;
use crate::sync::copy_block;
use crate::sync::{Call, Chunk, End, FoldOrder, Round, CLAIM_MAX, SCRATCH_HALF};
use crate::transport::{Read, RemoteBuf, TransportKind, Write};
use crate::tune::{select, Algo};

/// One entry per rank of the node, on the stack up to 16 ranks (a call's per-peer lists,
/// built every call).
type Ranks<T> = smallvec::SmallVec<[T; 16]>;

/// The chunk of the partitioned reduction when every peer's input is mapped here: the
/// accumulator's chunk and the peer's copy of it fit in L1 together.
pub(crate) const MAPPED_CHUNK: usize = 8 * 1024;

/// The chunk of the root's reads ([`ReduceAlgorithm::RootRead`]) where a peer's bytes go
/// straight into the output (two ranks, a commutative operator or a root that folds
/// second, not in place): one CMA call costs about 1.8 us more than the bytes it moves
/// on the development machine, so 32 KiB chunks (the scratch's) took 82 us at 512 KiB
/// where 1 MiB ones took 55, as Open MPI's one receive of the whole message; 1 MiB (the
/// output's and the input's chunk together in L2) measured best at 2 and 8 MiB.
pub(crate) const ROOT_READ_CHUNK: usize = 1 << 20;

/// The bytes from which a reduce to a root whose `Auto` chose the root's reads
/// ([`ReduceAlgorithm::RootRead`], at two ranks) runs partitioned instead where every
/// buffer turns out to be mapped ([`loads_everywhere`]): the root's loads of one whole
/// input and the fold of it lose there to two owners that each load half of both inputs
/// and store their half of the result into the root's output. Measured at 2 ranks with
/// heap buffers (root's reads against partitioned, medians of 60 to 100 calls): 89-106
/// against 156-202 us at 1 MiB, 170-188 against 191-214 at 1.5 MiB, level at 2 MiB
/// (231-312 against 212-286), 392-409 against 320-372 at 3 MiB, 819 against 560 at
/// 4 MiB and 1929 against 1297 at 8 MiB.
const LOADS_PARTITION_MIN: usize = 3 << 20;

/// How a reduction moves and combines the data.
///
/// # Examples
///
/// ```
/// use zcoll::ReduceAlgorithm;
/// assert_eq!("partitioned".parse::<ReduceAlgorithm>(), Ok(ReduceAlgorithm::Partitioned));
/// assert_eq!(ReduceAlgorithm::Staged.to_string(), "staged");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReduceAlgorithm {
    /// Let zcoll choose by size and transport (`ZCOLL_REDUCE_ALGORITHM` or
    /// `ZCOLL_ALLREDUCE_ALGORITHM` override).
    #[default]
    Auto,
    /// Every rank reduces one partition straight out of its peers' buffers.
    Partitioned,
    /// Copy-in/copy-out through the staging areas.
    Staged,
    /// A reduce to a root only: the root reads every peer's input with single copies and
    /// folds it; the others only publish theirs. An allreduce (or a
    /// `ZCOLL_ALLREDUCE_ALGORITHM` set to it) fails with `Error::Unsupported` on every
    /// rank.
    RootRead,
}

impl ReduceAlgorithm {
    /// The cost model's choice for the reduction `coll` of `len` bytes on `p` ranks. A
    /// reduce to a root is chosen with the partitioned reduce's write into the root priced
    /// as a CMA write ([`select::choose_over_cma`]): where every buffer turns out to be
    /// mapped, an `Auto` that chose the staged path turns, after the arrival
    /// ([`loads_everywhere`]), into the root's reads (loads) at two ranks below
    /// [`LOADS_PARTITION_MIN`] bytes and partitioned otherwise, and one that chose the
    /// root's reads keeps them below it and turns partitioned from it, so the choice
    /// before it is the one for CMA.
    fn chosen(coll: select::Coll, len: usize, p: usize) -> ReduceAlgorithm {
        let algo = match coll {
            select::Coll::Reduce => select::choose_over_cma(coll, len, p),
            _ => select::choose(coll, len, p),
        };
        match algo {
            Algo::ReduceRootRead => ReduceAlgorithm::RootRead,
            a if a.is_staged() => ReduceAlgorithm::Staged,
            _ => ReduceAlgorithm::Partitioned,
        }
    }

    /// [`Algorithm::resolve`] with the variable and model of a reduce (`var` is
    /// [`REDUCE_VAR`]) or an allreduce.
    fn resolve_as(
        self,
        var: &'static str,
        len: usize,
        p: usize,
        transport: TransportKind,
        env: &super::Overrides,
    ) -> Result<ReduceAlgorithm> {
        let coll = if var == REDUCE_VAR { select::Coll::Reduce } else { select::Coll::Allreduce };
        super::algorithm::resolve(self, var, env, transport, || ReduceAlgorithm::chosen(coll, len, p))
    }
}

/// The variable that sets what `Auto` means for an allreduce (the reduce's enum, its own
/// variable).
const ALLREDUCE_VAR: &str = "ZCOLL_ALLREDUCE_ALGORITHM";

/// `Unsupported` for `rank` where an allreduce asks for [`ReduceAlgorithm::RootRead`] (the
/// call, or `ZCOLL_ALLREDUCE_ALGORITHM` for `Auto`): an algorithm of a reduce to a root
/// only. What the rank asked for, not what its node would run (a `cico` node runs every
/// algorithm staged), so that the same program fails alike on every node and every path:
/// each caller asks after the checks that made every rank's request equal.
///
/// # Errors
///
/// `Unsupported`, as above.
pub(crate) fn allreduce_refuses(algorithm: ReduceAlgorithm, env: &super::Overrides, rank: i32) -> Result<()> {
    match super::algorithm::asked(algorithm, ALLREDUCE_VAR, env) {
        Ok(ReduceAlgorithm::RootRead) => Err(Error::Unsupported {
            rank,
            what: "root-read in an allreduce (it is an algorithm of a reduce to a root only)".into(),
        }),
        _ => Ok(()),
    }
}

/// The variable that sets what `Auto` means for a reduce to a root (`rooted`) or an
/// allreduce: the one rule, on one node and across nodes.
pub(crate) fn var(rooted: bool) -> &'static str {
    match rooted {
        true => REDUCE_VAR,
        false => ALLREDUCE_VAR,
    }
}

super::algorithm::vocabulary! {
ReduceAlgorithm("ZCOLL_REDUCE_ALGORITHM"): "auto, partitioned, staged or root-read",
[
    Auto => "auto",
    Partitioned => "partitioned",
    Staged => "staged",
    RootRead => "root-read",
]
    /// The model's choice for a reduce to a root (an allreduce's: `resolve_as`).
    fn model(len: usize, p: usize) -> ReduceAlgorithm {
        ReduceAlgorithm::chosen(select::Coll::Reduce, len, p)
    }
}

/// The variable that sets what `Auto` means for a reduce to a root.
const REDUCE_VAR: &str = <ReduceAlgorithm as Algorithm>::VAR;

/// A rank's buffers in a reduction.
pub(crate) enum Bufs<'a, T> {
    /// Input and output apart (allreduce, or the root of a reduce).
    Apart(&'a [T], &'a mut [T]),
    /// The input is in the output buffer.
    InPlace(&'a mut [T]),
    /// Input only: a non-root rank of a reduce.
    SendOnly(&'a [T]),
}

impl<T> Bufs<'_, T> {
    /// The input's length in elements.
    pub(crate) fn input_len(&self) -> usize {
        match self {
            Bufs::Apart(s, _) | Bufs::SendOnly(s) => s.len(),
            Bufs::InPlace(b) => b.len(),
        }
    }
}

/// Which ranks of the node receive which part of the reduced data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// Every rank, all of it (allreduce).
    All,
    /// Local rank `src`, all of it (reduce).
    Root(usize),
    /// Local rank `j < m` receives partition `j` of `m` ([`partition`]) in its output, at
    /// the partition's place; the rest of every output is left undefined (reduce-scatter).
    Scatter(usize),
}

impl Target {
    /// Whether local rank `r` receives anything.
    fn consumes(self, r: usize) -> bool {
        match self {
            Target::All => true,
            Target::Root(src) => r == src,
            Target::Scatter(m) => r < m,
        }
    }
}

/// Reduces every local rank's input with `oper`, into every rank's output (`root ==
/// None`, allreduce) or into local rank `src`'s (reduce; `root` is the user's root, for
/// the checks).
///
/// # Errors
///
/// On every rank of the node: the checks' errors; `Unsupported` if the operator does not
/// apply to `T`; a transport error or a peer's failure.
pub(crate) fn reduce<T: Pod, O: Operator<T>>(
    ctx: &Ctx<'_>,
    bufs: Bufs<'_, T>,
    root: Option<(i32, usize)>,
    oper: &O,
    algorithm: ReduceAlgorithm,
) -> Result<()> {
    match root {
        None => reduce_to(ctx, bufs, -1, Target::All, oper, algorithm),
        Some((root, src)) => reduce_to(ctx, bufs, root, Target::Root(src), oper, algorithm),
    }
}

/// The reduce-scatter of the node: every rank needs an output as long as its input, and
/// local rank `j < m` ends with partition `j` of `m` of the node's reduced data (see
/// [`partition`]) at its place in its output; the rest of every output is left
/// undefined. The first leg of the multi-root allreduce across nodes
/// (`Hierarchy::all_reduce`, in `hier/reduce.rs`). The staged algorithm
/// reduces the whole buffer on every owner.
///
/// # Errors
///
/// As [`reduce`].
pub(crate) fn reduce_scatter<T: Pod, O: Operator<T>>(
    ctx: &Ctx<'_>,
    bufs: Bufs<'_, T>,
    m: usize,
    oper: &O,
    algorithm: ReduceAlgorithm,
) -> Result<()> {
    reduce_to(ctx, bufs, -1, Target::Scatter(m.max(1)), oper, algorithm)
}

fn reduce_to<T: Pod, O: Operator<T>>(
    ctx: &Ctx<'_>,
    mut bufs: Bufs<'_, T>,
    root: i32,
    target: Target,
    oper: &O,
    algorithm: ReduceAlgorithm,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let n = bufs.input_len();
    let (kind, var) = match target {
        Target::Root(_) => (Kind::Reduce, var(true)),
        _ => (Kind::Allreduce, var(false)),
    };
    let requested = algorithm;
    let algorithm = algorithm.resolve_as(var, n * size, ctx.ctl.size(), ctx.transport, ctx.overrides);
    let code = algorithm.as_ref().map(|a| a.code()).unwrap_or(0);
    let (send, recv, recv_len) = match &mut bufs {
        Bufs::Apart(s, r) => (s.as_ptr() as usize, r.as_mut_ptr() as usize, std::mem::size_of_val(*r)),
        Bufs::InPlace(b) => (b.as_ptr() as usize, b.as_mut_ptr() as usize, std::mem::size_of_val(*b)),
        Bufs::SendOnly(s) => (s.as_ptr() as usize, 0, 0),
    };
    let src = match target {
        Target::Root(src) => Some(src),
        _ => None,
    };
    // A reduce to a root above the one-phase size for which the model chose the staged
    // path (best where the partition owners would write the root's output with CMA) may
    // still be partitioned: where every buffer turns out to be reached with loads and
    // stores (see `loads_everywhere`), which is known only after the arrival. The call
    // then publishes its buffers, and says in `aux2` that `Auto` chose. Below
    // `LOADS_PARTITION_MIN` bytes at two ranks it turns into the root's reads instead,
    // which with loads beat the partitioned reduce's stores into the root; where `Auto`
    // chose the root's reads, they stay below that size and turn partitioned from it.
    let switchable = src.is_some()
        && requested == ReduceAlgorithm::Auto
        && match algorithm {
            Ok(ReduceAlgorithm::Staged) => true,
            Ok(ReduceAlgorithm::RootRead) => n * size >= LOADS_PARTITION_MIN,
            _ => false,
        }
        && super::heap_switchable::<ReduceAlgorithm>(ctx, n * size);
    // The staged reduction crosses only the segment: a private call (one flag phase).
    let private = super::staged_private(matches!(algorithm, Ok(ReduceAlgorithm::Staged)) && !switchable);
    // A staged reduction whose input fits in the staging area travels with the arrival:
    // one flag phase, every consumer folds straight out of the peers' areas; a few bytes
    // travel in the call record itself.
    let prestaged = matches!(algorithm, Ok(ReduceAlgorithm::Staged)) && n * size <= ctx.ctl.one_phase_bytes();
    let inline = prestaged && n * size <= INLINE_BYTES;
    let input: &[u8] = match &bufs {
        Bufs::Apart(s, _) | Bufs::SendOnly(s) => bytemuck::cast_slice(s),
        Bufs::InPlace(b) => bytemuck::cast_slice(b),
    };
    let call = Call {
        op: typed_op::<T>(kind, code, (oper.code() as u32) | (size.min(0xffff) as u32) << 16) | private,
        root: root as i64,
        send,
        send_len: n * size,
        recv,
        recv_len,
        // The root of a reduce lets the partition owners write into its output.
        recv_writable: src.is_some_and(|s| s == ctx.ctl.me())
            && (matches!(algorithm, Ok(ReduceAlgorithm::Partitioned)) || switchable),
        aux: src.unwrap_or(0) as u64,
        aux2: if inline { inline_word(input) } else { switchable as u64 },
    };
    // What a rank stages only the other consumers read: the root of a reduce folds its own
    // input from its buffer (`fold_staged`), unless, in place, its output is overwritten
    // by an earlier rank's input before its own turn comes.
    let me = ctx.ctl.me();
    let in_place = matches!(bufs, Bufs::InPlace(_));
    let unread = src == Some(me) && !(in_place && me != 0 && !swapped(ctx.ctl.size(), oper));
    let parts: &[&[u8]] = if inline || unread { &[] } else { &[input] };
    // Every length against the root's (local rank 0's in an allreduce), as the other
    // rooted calls judge theirs: the root's input and output say what the call moves.
    let lengths = |r: &Round<'_>| {
        let first = r.send_len(src.filter(|&s| s < r.size()).unwrap_or(0));
        for q in 0..r.size() {
            let (send_len, recv_len) = r.lens(q);
            if send_len != first {
                return Err(BadLength { culprit: q, expected: first, found: send_len });
            }
            let needs_output = src.is_none_or(|s| s == q);
            if needs_output && recv_len != first {
                return Err(BadLength { culprit: q, expected: first, found: recv_len });
            }
        }
        Ok(())
    };
    // A non-root of a reduce to a root only gives: where its input travels with its
    // arrival, it leaves at once where it can (the verdict deferred:
    // `Control::leave_staged`); the root judges the round. What this rank can check alone
    // (a root outside the communicator, an operator that does not apply) is judged in
    // the call, on every rank, as before.
    if let Target::Root(dst) = target {
        if prestaged
            && private != 0
            && me != dst
            && ctx.may_leave(root)
            && unsupported(ctx, oper, ctx.ctl.rank_of(me)).is_none()
        {
            return ctx.ctl.leave_staged(&call, &[], parts);
        }
    }
    let mut round = match prestaged {
        true => check_staged(ctx, call, &[], parts, src.is_some(), lengths)?,
        false => check(ctx, call, src.is_some(), lengths)?,
    };
    let loads = switchable && loads_everywhere(&round, target);
    if switchable && !loads && matches!(algorithm, Ok(ReduceAlgorithm::Staged)) {
        // Staged after all: nobody touches anybody's buffers, so the call ends as a
        // private one would.
        round.leave_early();
    }
    let moved = algorithm.and_then(|algorithm| {
        let rank = round.rank_of(round.me());
        if let Some(e) = unsupported(ctx, oper, rank) {
            return Err(e);
        }
        if src.is_none() {
            allreduce_refuses(requested, ctx.overrides, rank)?;
        }
        if n == 0 || size == 0 {
            return Ok(());
        }
        match algorithm {
            ReduceAlgorithm::Partitioned => partitioned(&round, bufs, target, oper, false),
            // At two ranks, below `LOADS_PARTITION_MIN`, the root's reads with loads beat
            // the partitioned stores into the root: the staged path `Auto` chose for CMA
            // turns into them.
            _ if loads && round.size() == 2 && n * size < LOADS_PARTITION_MIN => {
                root_read(&round, bufs, oper)
            }
            _ if loads => partitioned(&round, bufs, target, oper, round.size() == 2),
            ReduceAlgorithm::RootRead => root_read(&round, bufs, oper),
            _ if prestaged => fold_staged(&round, bufs, target, oper, inline),
            _ => staged(&round, bufs, target, oper),
        }
    });
    round.finish(moved)
}

/// The `Unsupported` error rank `rank` reports where `oper` does not apply to `T`, or the
/// elements do not fit the staged path: the scratch is viewed as `T`s (64-byte aligned,
/// each half holding whole elements, `scratch_halves`), and an element must fit in one,
/// and in half a staging area (the staged chunk). A property of `T`, the operator and the
/// node, so a rank may check it alone, before its arrival.
fn unsupported<T: Pod, O: Operator<T>>(ctx: &Ctx<'_>, oper: &O, rank: i32) -> Option<Error> {
    let size = std::mem::size_of::<T>();
    let supported = oper.applies();
    let half = SCRATCH_HALF.min(ctx.ctl.stage_bytes() / 2);
    match !supported || (size > 0 && (half / size == 0 || std::mem::align_of::<T>() > 64)) {
        true => Some(Error::Unsupported { rank, what: format!("this operator on {}-byte elements", size) }),
        false => None,
    }
}

/// Whether a reduce every rank published as switchable (`aux2` 1: `Auto` chose the staged
/// path, which it takes where the partition owners would reach the root's output with
/// CMA, or the root's reads of at least [`LOADS_PARTITION_MIN`] bytes) runs partitioned
/// instead: every rank's input and the root's output are reached with loads and stores,
/// so the owners read and write them with no system call, and partitioned moves half the
/// bytes (on two ranks split at run time: [`partitioned`]). A pure function of the published
/// records, so every rank decides alike. Measured at 2 ranks with heap buffers, against
/// the staged path: 15 against 22 us at 256 KiB, 102 against 187 us at 2 MiB.
fn loads_everywhere(round: &Round<'_>, target: Target) -> bool {
    let Target::Root(src) = target else { return false };
    (0..round.size()).all(|r| round.aux2(r) == 1 && round.loads(r, false)) && round.loads(src, true)
}

/// The partition of `n` elements that rank `i` of `p` owns: cache-line aligned.
pub(crate) fn partition<T>(n: usize, p: usize, i: usize) -> std::ops::Range<usize> {
    let per_line = (64 / std::mem::size_of::<T>().max(1)).max(1);
    let q = n.div_ceil(p).div_ceil(per_line) * per_line;
    (i * q).min(n)..((i + 1) * q).min(n)
}

// The model prices the partitioned reductions with one CMA call per half scratch, and
// the root's reads at two ranks with one per `ROOT_READ_CHUNK`.
const _: () = assert!(crate::tune::model::PARTITION_CHUNK == SCRATCH_HALF);
const _: () = assert!(crate::tune::model::ROOT_READ_CHUNK == ROOT_READ_CHUNK);
// The root folds each chunk it read while the chunk is in its cache: the read must not
// stream past the cache.
const _: () = assert!(ROOT_READ_CHUNK < crate::sync::STREAM_LARGE);

/// Folds the elements `range` of every rank's input in `order`, `chunk` at a time: into
/// this rank's output, or (a send-only rank) into the first half of the scratch, then
/// stored into the output of `root` (its local rank and its published output).
#[allow(clippy::too_many_arguments)] // the fold's inputs, its range and where its result goes
fn fold_range<T: Pod, O: Operator<T>>(
    round: &Round<'_>,
    sends: &[RemoteBuf<'_, Read>],
    oper: &O,
    order: &[usize],
    bufs: &mut Bufs<'_, T>,
    range: std::ops::Range<usize>,
    chunk: usize,
    (first, x): (&mut [T], &mut [T]),
    root: Option<(usize, &RemoteBuf<'_, Write>)>,
) -> Result<()> {
    let mut start = range.start;
    while start < range.end {
        let c = start..(start + chunk).min(range.end);
        let len = c.len();
        match bufs {
            Bufs::Apart(s, r) => {
                fold(round, sends, oper, order, c.start, &mut r[c.clone()], Some(&s[c.clone()]), x)?
            }
            Bufs::InPlace(b) => {
                // Keep our own input: the fold may overwrite it before it uses it.
                copy_block(&b[c.clone()], &mut first[..len]);
                fold(round, sends, oper, order, c.start, &mut b[c.clone()], Some(&first[..len]), x)?
            }
            Bufs::SendOnly(s) => {
                fold(round, sends, oper, order, c.start, &mut first[..len], Some(&s[c.clone()]), x)?;
                let (root, dst) = root.expect("only a reduce to a root has send-only ranks");
                round.write(
                    bytemuck::cast_slice(&first[..len]),
                    dst,
                    root,
                    c.start * std::mem::size_of::<T>(),
                )?;
            }
        }
        start = c.end;
    }
    Ok(())
}

/// [`ReduceAlgorithm::Partitioned`]: every rank folds its partition, chunk by chunk, into
/// its output (or, a send-only rank, into the scratch, stored into the root's output).
///
/// With `split` (a reduce to a root on two ranks whose buffers are all mapped,
/// [`loads_everywhere`]), the halves are not fixed: the root folds from the head of the
/// vector, half of what is left at a time, and its peer from the tail, a chunk at a time,
/// each claiming its range first ([`Round::claim`] on the root's word), so whichever folds
/// faster folds more. The peer's stores into lines the root's core holds run slow at
/// times on a shared machine; a fixed half then waits for them. Both decide `split` alike
/// (the same records), and cut units alike (from the length and the element alone).
fn partitioned<T: Pod, O: Operator<T>>(
    round: &Round<'_>,
    mut bufs: Bufs<'_, T>,
    target: Target,
    oper: &O,
    split: bool,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let src = match target {
        Target::Root(src) => Some(src),
        _ => None,
    };
    let n = bufs.input_len();
    let size = std::mem::size_of::<T>();
    // Every peer's input, resolved once: mapped here (heap, XPMEM) or through CMA.
    let sends: Ranks<_> = (0..p).map(|j| round.peer_send(j)).collect();
    // Copies out of mapped memory cost no system call, so their chunk can be small enough
    // for the accumulator and the peer's piece to stay in L1.
    let mapped = (0..p).filter(|&j| j != me).all(|j| sends[j].kind() != TransportKind::Cma);
    let chunk = if mapped { MAPPED_CHUNK.min(SCRATCH_HALF) } else { SCRATCH_HALF } / size;
    let chunk = chunk.max(1);
    let root_recv = src.filter(|&s| s != me).map(|s| round.peer_recv(s));
    let mine = match target {
        Target::Scatter(m) if me >= m => 0..0,
        Target::Scatter(m) => partition::<T>(n, m, me),
        _ => partition::<T>(n, p, me),
    };
    let mut scratch = round.scratch();
    let (first, x) = scratch_halves::<T>(&mut scratch);
    // A commutative operator folds the next rank's piece first: it is read straight into
    // the accumulator, where our own input would cost a copy of its own.
    let order: Ranks<usize> =
        if oper.commutative() { (1..=p).map(|s| (me + s) % p).collect() } else { (0..p).collect() };
    // A unit of the split is a chunk (or more, to keep the count within a claim word).
    let unit = chunk.max(n.div_ceil(CLAIM_MAX));
    let units = n.div_ceil(unit);
    let (end, want): (End, &dyn Fn(usize) -> usize) = match src == Some(me) {
        true => (End::Head, &|left: usize| left.div_ceil(2)),
        false => (End::Tail, &|_| 1),
    };
    let mut fixed = Some(mine);
    let mut next = || match (split, src) {
        (true, Some(root)) => {
            round.claim(root, units, end, want).map(|r| r.start * unit..(r.end * unit).min(n))
        }
        _ => fixed.take(),
    };
    while let Some(range) = next() {
        fold_range(
            round,
            &sends,
            oper,
            &order,
            &mut bufs,
            range,
            chunk,
            (&mut *first, &mut *x),
            src.zip(root_recv.as_ref()),
        )?;
    }
    if target != Target::All {
        return Ok(());
    }
    // Allreduce: our partition is ready; take every other one from its owner.
    round.post_progress(1);
    let out: &mut [T] = match &mut bufs {
        Bufs::Apart(_, r) => r,
        Bufs::InPlace(b) => b,
        Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
    };
    for s in 1..p {
        let owner = (me + s) % p;
        let theirs = partition::<T>(n, p, owner);
        if theirs.is_empty() {
            continue;
        }
        round.wait_progress(owner, 1)?;
        round.read(
            &round.peer_result(owner),
            owner,
            theirs.start * size,
            bytemuck::cast_slice_mut(&mut out[theirs]),
        )?;
    }
    Ok(())
}

/// [`ReduceAlgorithm::RootRead`]: the root reads every peer's input, a chunk at a time
/// (one single copy per peer and chunk, into its scratch, or straight into its output
/// for the first rank folded), and folds the chunk into its output while it is in
/// cache: in rank order for a non-commutative operator; else the peers first (the
/// first read needs no copy of the root's own input) or, in place, the root's input
/// first, as its output already holds it. The other ranks move nothing: their input is
/// published, and the round's finish keeps it untouched until the root is done.
fn root_read<T: Pod, O: Operator<T>>(round: &Round<'_>, bufs: Bufs<'_, T>, oper: &O) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let (out, input): (&mut [T], Option<&[T]>) = match bufs {
        Bufs::SendOnly(_) => return Ok(()),
        Bufs::Apart(s, r) => (r, Some(s)),
        Bufs::InPlace(b) => (b, None),
    };
    let size = std::mem::size_of::<T>();
    let sends: Ranks<_> = (0..p).map(|j| round.peer_send(j)).collect();
    let mapped = (0..p).filter(|&j| j != me).all(|j| sends[j].kind() != TransportKind::Cma);
    let peers = (0..p).filter(|&j| j != me);
    let order: Ranks<usize> = match (oper.commutative(), input.is_some()) {
        (false, _) => (0..p).collect(),
        (true, true) => peers.chain(std::iter::once(me)).collect(),
        (true, false) => std::iter::once(me).chain(peers).collect(),
    };
    // Where the only peer read is the first rank folded and our own input is apart, the
    // peer's bytes go straight into the output with no scratch, and one CMA call takes a
    // mebibyte (see `ROOT_READ_CHUNK`). In place, our input goes through the scratch.
    let direct = input.is_some() && order[0] != me && order[1..].iter().all(|&j| j == me);
    let chunk = match (mapped, direct) {
        (true, _) => MAPPED_CHUNK.min(SCRATCH_HALF),
        (false, true) => ROOT_READ_CHUNK,
        (false, false) => SCRATCH_HALF,
    };
    let chunk = (chunk / size).max(1);
    let mut scratch = round.scratch();
    let (first, x) = scratch_halves::<T>(&mut scratch);
    for (c, acc) in out.chunks_mut(chunk).enumerate() {
        let at = c * chunk;
        let len = acc.len();
        let own: Option<&[T]> = match input {
            Some(s) => Some(&s[at..at + len]),
            None if order[0] == me => None,
            None => {
                // In place, and a peer folds first: keep our input before it is overwritten.
                copy_block(acc, &mut first[..len]);
                Some(&first[..len])
            }
        };
        fold(round, &sends, oper, &order, at, acc, own, x)?;
    }
    Ok(())
}

/// The two halves of the rank's scratch as `T`s: each of `SCRATCH_HALF / size_of::<T>()`
/// whole elements (a 24-byte element leaves 8 bytes of a half unused), the second
/// starting at `SCRATCH_HALF`, 64-byte aligned like the first. `reduce_to` has refused
/// elements larger than a half or aligned to more than 64 bytes.
pub(super) fn scratch_halves<T: Pod>(scratch: &mut [u8]) -> (&mut [T], &mut [T]) {
    let whole = SCRATCH_HALF / std::mem::size_of::<T>() * std::mem::size_of::<T>();
    let (first, second) = scratch.split_at_mut(SCRATCH_HALF);
    (bytemuck::cast_slice_mut(&mut first[..whole]), bytemuck::cast_slice_mut(&mut second[..whole]))
}

/// Folds the chunk at element `at` of every rank's input into `acc`, in `order` (rank
/// order, or another order for a commutative operator); `own` is this rank's input, or
/// `None` where `acc` already holds it and this rank comes first in `order` (in place);
/// `x` the scratch a peer's piece is read into. The first rank of `order` is copied (a
/// peer's piece read) straight into `acc`.
#[allow(clippy::too_many_arguments)] // the fold's inputs, each needed; grouping them hides nothing
pub(super) fn fold<T: Pod, O: Operator<T>>(
    round: &Round<'_>,
    sends: &[RemoteBuf<'_, Read>],
    oper: &O,
    order: &[usize],
    at: usize,
    acc: &mut [T],
    own: Option<&[T]>,
    x: &mut [T],
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    for (k, &j) in order.iter().enumerate() {
        if j == round.me() {
            match (k, own) {
                (0, Some(own)) => copy_block(own, acc),
                (_, Some(own)) => {
                    oper.apply(acc, own);
                }
                (0, None) => {}
                (_, None) => unreachable!("an input held in `acc` is folded first"),
            }
            continue;
        }
        let dst: &mut [T] = if k == 0 { &mut *acc } else { &mut x[..acc.len()] };
        round.read(&sends[j], j, at * size, bytemuck::cast_slice_mut(dst))?;
        if k > 0 {
            oper.apply(acc, &x[..acc.len()]);
        }
    }
    Ok(())
}

/// The one-phase staged reduction: every rank's whole input is in its staging area
/// (staged before it arrived), or with `inline` in its call record, and every consumer
/// folds them into its output in rank order, a cache-sized chunk at a time, so every
/// consumer computes bitwise the same result. The output may be the input (in place):
/// the inputs are read from the areas or records.
fn fold_staged<T: Pod, O: Operator<T>>(
    round: &Round<'_>,
    mut bufs: Bufs<'_, T>,
    target: Target,
    oper: &O,
    inline: bool,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    // This rank's own input where it is apart from the output: folded in from there, not
    // from the copy it staged for its peers.
    let (input, out): (Option<&[T]>, &mut [T]) = match &mut bufs {
        _ if !target.consumes(me) => return Ok(()),
        Bufs::Apart(s, r) => (Some(*s), r),
        Bufs::InPlace(b) => (None, b),
        Bufs::SendOnly(_) => unreachable!("only ranks with an output consume"),
    };
    let size = std::mem::size_of::<T>();
    let mut scratch = round.scratch();
    let (x, _) = scratch_halves::<T>(&mut scratch);
    // Rank `r`'s input at byte `at`: in its call record, or in its staging area.
    let take = |r: usize, at: usize, dst: &mut [T]| match inline {
        true => from_inline(round.aux2(r), bytemuck::cast_slice_mut(dst)),
        false => round.read_staged(r, at, bytemuck::cast_slice_mut(dst)),
    };
    let swap = swapped(p, oper);
    for (c, acc) in out.chunks_mut(x.len()).enumerate() {
        let at = c * x.len() * size;
        let own = input.map(|s| &s[c * x.len()..][..acc.len()]);
        let x = &mut x[..acc.len()];
        match (swap, own) {
            (true, Some(own)) => {
                take(1 - me, at, acc);
                oper.apply(acc, own);
            }
            (true, None) => {
                take(1 - me, at, x);
                oper.apply(acc, x);
            }
            // Rank order, each input taken where it is nearest: rank 0 in place holds
            // its own already, and this rank's own input is folded in from its buffer.
            (false, _) => {
                match (me, own) {
                    (0, Some(own)) => copy_block(own, acc),
                    (0, None) => {}
                    _ => take(0, at, acc),
                }
                for r in 1..p {
                    match own {
                        Some(own) if r == me => oper.apply(acc, own),
                        _ => {
                            take(r, at, x);
                            oper.apply(acc, x)
                        }
                    };
                }
            }
        }
    }
    Ok(())
}

/// Whether the consumers of a one-phase staged reduction on `p` ranks fold `x_peer ∘ x_me`
/// ([`fold_staged`]): at two ranks with an operator that commutes, the same as `x_0 ∘ x_1`.
/// The peer's input lands in the output, and this rank's own is folded in where it lies
/// (in place, the output holds it: the peer's goes through the scratch). Min and max keep
/// rank order: on floats, which of two equal zeros (or NaNs) they return depends on it,
/// and every rank must end with the same bits.
fn swapped<T, O: Operator<T>>(p: usize, oper: &O) -> bool {
    p == 2 && oper.commutative() && !matches!(oper.builtin(), Some(Builtin::Min | Builtin::Max))
}

fn staged<T: Pod, O: Operator<T>>(
    round: &Round<'_>,
    mut bufs: Bufs<'_, T>,
    target: Target,
    oper: &O,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let n = bufs.input_len();
    let consumes = |r: usize| target.consumes(r);
    let order =
        FoldOrder { in_place: matches!(bufs, Bufs::InPlace(_)), commutes: swapped(round.size(), oper) };
    // The input is read (into the staging area) before the output of the same chunk is
    // written, so in place works; `fill` and `combine` take turns on the buffers.
    let bufs = std::cell::RefCell::new(&mut bufs);
    let mut fill = |offset: usize, dst: &mut [u8]| {
        let b = bufs.borrow();
        let input: &[T] = match &**b {
            Bufs::Apart(s, _) | Bufs::SendOnly(s) => s,
            Bufs::InPlace(b) => b,
        };
        let from = offset / size;
        copy_block(bytemuck::cast_slice(&input[from..from + dst.len() / size]), dst);
    };
    let mut combine = |offset: usize, len: usize, first: bool, chunk: Chunk<'_>| -> Result<()> {
        let mut b = bufs.borrow_mut();
        let (input, out): (Option<&[T]>, &mut [T]) = match &mut **b {
            Bufs::Apart(s, r) => (Some(*s), r),
            Bufs::InPlace(b) => (None, b),
            Bufs::SendOnly(_) => unreachable!("only ranks with an output consume"),
        };
        let at = offset / size..(offset + len) / size;
        let acc = &mut out[at.clone()];
        match (first, chunk) {
            (true, Chunk::Peer(copy)) => copy(bytemuck::cast_slice_mut(acc)),
            (true, Chunk::Bytes(x)) => copy_block(bytemuck::cast_slice(x), acc),
            (false, Chunk::Bytes(x)) => {
                oper.apply(acc, bytemuck::cast_slice(x));
            }
            // In place, this rank's own chunk is already in the output where it comes first
            // (`stage_reduce` hands it over copied wherever it comes later).
            (true, Chunk::Own) => {
                if let Some(s) = input {
                    copy_block(&s[at], acc);
                }
            }
            (false, Chunk::Own) => {
                let own = input.expect("in place, a later own chunk comes copied");
                oper.apply(acc, &own[at]);
            }
            (false, Chunk::Peer(_)) => {
                unreachable!("only the first chunk is copied straight into the output")
            }
        }
        Ok(())
    };
    round.stage_reduce(n * size, size, consumes, order, &mut fill, &mut combine)
}
