//! The reductions across nodes: reduce, allreduce (by the leaders, or multi-root along
//! the columns) and the scans.

use super::relay::{Relay, CARRY};
use super::{Hierarchy, Net, Stand};
use crate::alloc::Scratch;
use crate::coll::algorithm::{claim_asked, readable};
use crate::coll::reduce::{self as red, partition, reduce_scatter, Bufs, ReduceAlgorithm};
use crate::coll::relay::Claim;
use crate::coll::varcount::{Exchange, Given};
use crate::coll::{self, bcast::BcastAlgorithm};
use crate::error::{Error, Result};
use crate::op::{Builtin, Operator};
use crate::pod::Pod;
use crate::sync::copy_block;
use crate::to_mpi::{self, Spot};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// Runs an allreduce's node step `step` on `bufs` (its input, and its output or the
/// buffer in place), and returns the step's outcome and the output.
fn node_step<'b, T: Pod>(
    bufs: Bufs<'b, T>,
    step: impl FnOnce(Bufs<'_, T>) -> Result<()>,
) -> (Result<()>, &'b mut [T]) {
    match bufs {
        Bufs::Apart(s, r) => (step(Bufs::Apart(s, &mut *r)), r),
        Bufs::InPlace(b) => (step(Bufs::InPlace(&mut *b)), b),
        Bufs::SendOnly(_) => unreachable!("an allreduce rank has an output"),
    }
}

/// Allreduces of fewer bytes than this take the leader path: their time is the latency of
/// the node rounds and of one MPI call, which the multi-root path does not shorten.
pub(crate) const MULTI_ROOT_MIN_BYTES: usize = 16 * 1024;

/// The built-in operator that the legs between nodes may hand to MPI for `T`: `oper`'s,
/// except where an MPI library in use computes it wrongly, which would make the result
/// depend on how the ranks fall into nodes:
///
/// - a sum of 8- or 16-bit integers: zcoll's kernels wrap it around, as C does, and so do
///   MPICH's; Open MPI 4.1's AVX kernels (`op/avx`) saturate it (open-mpi/ompi#8045:
///   `200u8 + 201` is 255 there, not 145);
/// - the minimum or maximum of unsigned integers: MPICH 4.0 compares them as signed
///   (pmodels/mpich#6083: `min(0u8, 252)` is 252 there), and Open MPI 4.1.2 to 4.1.4 do
///   for `unsigned long` (open-mpi/ompi#10525).
///
/// Those fold in zcoll, as a user operator's do: exchanged over MPI point to point along a
/// tree, combined in rank order (`combine_in_order`, `reduce_in_order`).
fn mpi_builtin<T: Pod, O: Operator<T>>(oper: &O) -> Option<Builtin> {
    use std::any::TypeId;
    let unsigned = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
    ]
    .contains(&TypeId::of::<T>());
    oper.builtin().filter(|&b| match b {
        Builtin::Sum => std::mem::size_of::<T>() > 2,
        Builtin::Min | Builtin::Max => !unsigned,
        _ => true,
    })
}

/// A reduction's operator across nodes, whose panic aborts the process. A rank that
/// unwound out of a reduction across nodes would skip the MPI calls its remaining legs
/// make on the other ranks (between the leaders, the agreement on the outcome), and the
/// communicator would be out of step: the next call would meet the others' calls of
/// this one, and fail or wait for ever. Within one node the round's drop handler ends
/// the round as failed instead; the legs between nodes have no such handler, so a panic
/// there ends the process, after saying why, as an MPI error handler aborts the job.
struct Fatal<'o, O>(&'o O);

impl<T, O: Operator<T>> Operator<T> for Fatal<'_, O> {
    fn apply(&self, acc: &mut [T], x: &[T]) -> bool {
        // The operator's state is never looked at again: the process ends here.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.apply(acc, x))) {
            Ok(applied) => applied,
            Err(_) => {
                eprintln!(
                    "zcoll: a reduction operator panicked in a reduction across nodes; the other \
                     ranks' MPI calls of this reduction can no longer be matched, so the process \
                     aborts"
                );
                std::process::abort()
            }
        }
    }
    fn applies(&self) -> bool {
        self.0.applies()
    }
    fn commutative(&self) -> bool {
        self.0.commutative()
    }
    fn code(&self) -> u64 {
        self.0.code()
    }
    fn builtin(&self) -> Option<Builtin> {
        self.0.builtin()
    }
}

/// What a reduce (`rooted`) or an allreduce claims for `algorithm` across nodes: each
/// reads its own variable (`claim_asked`).
fn asked(algorithm: ReduceAlgorithm, rooted: bool, ctx: &crate::coll::Ctx<'_>) -> u64 {
    claim_asked(algorithm, red::var(rooted), ctx.overrides)
}

/// `out`, or where this rank's node step failed, `spare` grown to its length: where a
/// rank that failed still takes part in the legs that write the output (so that nobody
/// waits for it), so that a failed call leaves its output as it was (else a call refused
/// before anything moved would hand every rank the combination of nothing).
fn output_or_spare<'a, T: Pod>(failed: bool, out: &'a mut [T], spare: &'a mut Vec<T>) -> &'a mut [T] {
    match failed {
        false => out,
        true => {
            spare.resize(out.len(), T::zeroed());
            spare
        }
    }
}

impl Hierarchy {
    /// Allreduce over several nodes, by one of three paths that every rank chooses alike
    /// (from the length, the operator and the shape, all checked equal first):
    ///
    /// - one rank per node ([`direct`](Self::direct)) and a built-in operator: rsmpi's own
    ///   `all_reduce_into` on the whole communicator, after the checks (which here also
    ///   compare every `recv` length with the `send` lengths, across the communicator);
    /// - multi-root, for [`MULTI_ROOT_MIN_BYTES`] and more with every node holding at
    ///   least `m >= 2` ranks (`m` the smallest node's size) and a commutative operator:
    ///   (a) the node's partitioned reduce-scatter into `m` partitions (local rank `j < m`
    ///   ends with the node's partition `j`), (b) every owner of partition `j` combines it
    ///   with the other nodes' along column `j`, all `m` columns at once (one MPI
    ///   allreduce of `n / m` elements each; a user operator combines them by recursive
    ///   doubling in column order), (c) the node's allgatherv of the
    ///   partitions (every rank reads them from their owners). Every owner makes its MPI
    ///   call even when its node's step failed, and the final agreement reports the
    ///   failure everywhere;
    /// - otherwise through the leaders: the node reduces, the leaders combine the node
    ///   results over MPI (a user operator as in the multi-root path, in node order, which
    ///   is rank order only when every node holds consecutive ranks: a non-commutative
    ///   user operator needs that), and each leader broadcasts the result to its node.
    ///   Leaders use scratch of `n` elements (and of `2 n` for a user operator).
    ///
    /// # Errors
    ///
    /// On every rank: the checks' errors (`LengthMismatch`, `Mismatch`, `Unsupported` for
    /// an operator that does not apply to `T` or a non-commutative user operator across
    /// interleaved nodes); then any rank's failure, on every rank.
    pub(crate) fn all_reduce<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        bufs: Bufs<'_, T>,
        oper: &O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let oper = &Fatal(oper);
        let Net { parent, ctx } = net;
        let n = bufs.input_len();
        let recv = recv_of(&bufs, false);
        if !self.direct() && n * std::mem::size_of::<T>() <= CARRY {
            return self.small_reduction(net, bufs, None, oper, algorithm);
        }
        let asked = asked(algorithm, false, ctx);
        self.check_reduction(net, (coll::Kind::Allreduce, asked), 0, n, recv, oper)?;
        red::allreduce_refuses(algorithm, ctx.overrides, parent.rank())?;
        if let (true, Some(builtin)) = (self.direct(), mpi_builtin::<T, _>(oper)) {
            // As the direct broadcast: the algorithm variable's error, on every rank alike.
            readable(algorithm, red::var(false), ctx.overrides)?;
            return self.all_reduce_mpi(parent, bufs, builtin);
        }
        if self.multi_root(n * std::mem::size_of::<T>(), oper) {
            return self.all_reduce_multi_root(net, bufs, oper, algorithm);
        }
        let (result, out) = node_step(bufs, |b| red::reduce(ctx, b, None, oper, algorithm));
        self.combine_and_share(net, out, n, oper, result)
    }

    /// Reduce to `root` over several nodes. With one rank per node and a built-in
    /// operator, rsmpi's own reduce after the checks; up to [`CARRY`] bytes, with the
    /// verdict ([`small_reduction`](Self::small_reduction)); otherwise, after the
    /// checks, the node reduces to its leader, the leaders reduce to the root's node's
    /// leader over MPI (a user operator: along a binomial tree, in node order), and
    /// that leader hands the result to the root in a node broadcast.
    ///
    /// # Errors
    ///
    /// As `all_reduce`, and `InvalidRoot` or `Mismatch` for a bad root.
    pub(crate) fn reduce<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        bufs: Bufs<'_, T>,
        root: i32,
        oper: &O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let oper = &Fatal(oper);
        let Net { parent, ctx } = net;
        let n = bufs.input_len();
        let size = std::mem::size_of::<T>();
        if !self.direct() && n * size <= CARRY {
            return self.small_reduction(net, bufs, Some(root), oper, algorithm);
        }
        let claim = (coll::Kind::Reduce, asked(algorithm, true, ctx));
        self.check_reduction(net, claim, root, n, recv_of(&bufs, root == parent.rank()), oper)?;
        if let (true, Some(builtin)) = (self.direct(), mpi_builtin::<T, _>(oper)) {
            readable(algorithm, red::var(true), ctx.overrides)?;
            let at = parent.process_at_rank(root);
            by_pieces(bufs, self.piece, |s, r| match r {
                Some(r) => at.reduce_into_root(s, r, builtin.mpi()),
                None => at.reduce_into(s, builtin.mpi()),
            });
            return Ok(());
        }
        let Stand { root_node, here, leader } = self.stand(ctx, root);
        let loads = ctx.ctl.loads_heaps();
        // (a) The node reduces to its leader, into scratch the node's ranks reach.
        let mut partial = Scratch::<T>::zeroed(if leader { n } else { 0 }, loads);
        let input: &[T] = match &bufs {
            Bufs::Apart(s, _) | Bufs::SendOnly(s) => s,
            Bufs::InPlace(b) => b,
        };
        let to = Some((root, 0));
        let node = match leader {
            true => red::reduce(ctx, Bufs::Apart(input, &mut partial), to, oper, algorithm),
            false => red::reduce(ctx, Bufs::SendOnly(input), to, oper, algorithm),
        };
        // (b) The leaders reduce toward the root's node, whatever their node decided
        // (the checks made every length equal, so every leader sends `n` elements).
        let mut result = Scratch::<T>::zeroed(if leader && here { n } else { 0 }, loads);
        if let Some(leaders) = &self.leaders {
            reduce_to(leaders, root_node as i32, &partial, &mut result, oper, self.piece);
        }
        // (c) The root's leader hands the result to the root (a node whose step failed,
        // on every rank alike, leaves its buffers alone).
        let out = bufs_out(bufs);
        let handed = match (here && node.is_ok(), self.local_of(root)) {
            (false, _) => Ok(()),
            (true, 0) => {
                if let Some(out) = out {
                    copy_block(&result, out);
                }
                Ok(())
            }
            (true, _) => {
                let mut spare = Scratch::<T>::zeroed(if leader || out.is_some() { 0 } else { n }, loads);
                let buf: &mut [T] = match (out, leader) {
                    (Some(out), _) => out,
                    (None, true) => &mut result,
                    (None, false) => &mut spare,
                };
                coll::bcast::bcast(ctx, bytemuck::cast_slice_mut(buf), root, 0, BcastAlgorithm::Auto, None)
            }
        };
        // A large call agrees on its outcome: a node that failed its reduce sent what its
        // step left, so the root must not return that result as `Ok`.
        self.agree(parent, node.and(handed))
    }

    /// A reduction of up to [`CARRY`] bytes (an allreduce, or a reduce to `root`) in
    /// one exchange among the leaders ([`relay`](Self::relay)): the leader folds its
    /// node's inputs (staged with the gather-in) in rank order, every leader folds the
    /// nodes' results in node order, and hands the result (a reduce: to the root's node
    /// only) to its node with the verdict. Every rank computes bitwise the same result.
    ///
    /// # Errors
    ///
    /// As [`all_reduce`](Self::all_reduce).
    fn small_reduction<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        bufs: Bufs<'_, T>,
        root: Option<i32>,
        oper: &O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        let n = bufs.input_len();
        let bytes = n * std::mem::size_of::<T>();
        let (kind, at) = match root {
            Some(r) => (coll::Kind::Reduce, r),
            None => (coll::Kind::Allreduce, 0),
        };
        let here = root.is_none_or(|r| self.stand(ctx, r).here);
        let p = ctx.ctl.size();
        let is_root = root == Some(parent.rank());
        let asked = asked(algorithm, root.is_some(), ctx);
        let claim = self.reduction_claim(kind, at, n, recv_of(&bufs, is_root), oper, asked);
        let input: &[u8] = match &bufs {
            Bufs::Apart(s, _) | Bufs::SendOnly(s) => bytemuck::cast_slice::<T, u8>(s),
            Bufs::InPlace(b) => bytemuck::cast_slice::<T, u8>(b),
        };
        let call = Relay {
            claim,
            rooted: root.is_some(),
            part: input,
            from: 0..p,
            gathered: p * bytes,
            handed: if here { bytes } else { 0 },
        };
        let data = self.relay(
            net,
            call,
            |gathered| fold::<T, O>(gathered.chunks(bytes.max(1)).take(p), n, oper),
            |nodes| match root {
                Some(r) if self.node_of(r) != self.my_node => Vec::new(),
                _ => fold::<T, O>(nodes.iter().copied(), n, oper),
            },
        )?;
        self.supported::<T, O>(parent, oper)?;
        if root.is_none() {
            red::allreduce_refuses(algorithm, ctx.overrides, parent.rank())?;
        }
        let result: Vec<T> = elements(&data);
        match (root, bufs) {
            (Some(r), _) if r != parent.rank() => {}
            (_, Bufs::Apart(_, out) | Bufs::InPlace(out)) => copy_block(&result, out),
            (_, Bufs::SendOnly(_)) => {}
        }
        Ok(())
    }

    /// What a reduction claims in the checks across nodes: its operator and element
    /// type in the tag.
    fn reduction_claim<T: Pod, O: Operator<T>>(
        &self,
        kind: coll::Kind,
        root: i32,
        n: usize,
        recv: Option<usize>,
        oper: &O,
        algo: u64,
    ) -> Claim {
        let size = std::mem::size_of::<T>();
        let tag = oper.code() | (size as u64) << 16 | coll::type_tag::<T>() << 48;
        Claim { kind, root, len: n * size, tag, algo, recv: recv.map(|r| r.saturating_mul(size)) }
    }

    /// The checks every reduction across nodes starts with: the same collective, root,
    /// length (`n` elements), operator, element type and algorithm asked for (`algo`)
    /// everywhere; then [`supported`](Self::supported).
    fn check_reduction<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        (kind, algo): (coll::Kind, u64),
        root: i32,
        n: usize,
        recv: Option<usize>,
        oper: &O,
    ) -> Result<()> {
        self.check_tagged(net, self.reduction_claim(kind, root, n, recv, oper, algo))?;
        self.supported::<T, O>(net.parent, oper)
    }

    /// An operator that applies to `T`; a non-commutative user operator only over
    /// consecutive nodes. Every rank passes the same operator and type (checked before),
    /// so every rank reaches the same verdict here, before MPI (which would abort) sees
    /// the operator.
    fn supported<T: Pod, O: Operator<T>>(&self, parent: &SimpleCommunicator, oper: &O) -> Result<()> {
        let size = std::mem::size_of::<T>();
        if !oper.applies() {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: format!("this operator on {size}-byte elements"),
            });
        }
        let contiguous = self.node_of.windows(2).all(|w| w[0] <= w[1]);
        if !oper.commutative() && oper.builtin().is_none() && !contiguous {
            return Err(Error::Unsupported {
                rank: parent.rank(),
                what: "a non-commutative operator across nodes that do not hold consecutive ranks".into(),
            });
        }
        Ok(())
    }

    /// Whether an allreduce of `bytes` with `oper` takes the multi-root path: the same
    /// verdict on every rank, since it depends only on what the checks made equal.
    fn multi_root<T: Pod, O: Operator<T>>(&self, bytes: usize, oper: &O) -> bool {
        let n = bytes / std::mem::size_of::<T>().max(1);
        self.min_node_size > 1
            && bytes >= MULTI_ROOT_MIN_BYTES
            && n <= i32::MAX as usize
            && (oper.commutative() || oper.builtin().is_some())
    }

    /// The direct allreduce, once the checks (every `recv` as long as the `send`s) have
    /// passed: rsmpi's own.
    fn all_reduce_mpi<T: Pod>(
        &self,
        parent: &SimpleCommunicator,
        bufs: Bufs<'_, T>,
        builtin: crate::op::Builtin,
    ) -> Result<()> {
        by_pieces(bufs, self.piece, |s, r| {
            parent.all_reduce_into(s, r.expect("an allreduce rank has an output"), builtin.mpi())
        });
        Ok(())
    }

    /// The multi-root allreduce of [`Hierarchy::all_reduce`]: reduce-scatter on the node,
    /// one allreduce per partition along the columns, allgatherv on the node.
    fn all_reduce_multi_root<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        bufs: Bufs<'_, T>,
        oper: &O,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        let n = bufs.input_len();
        let m = self.min_node_size;
        // (a) Local rank j < m ends with the node's partition j in its output.
        let (result, out) = node_step(bufs, |b| reduce_scatter(ctx, b, m, oper, algorithm));
        let parts: Vec<std::ops::Range<usize>> =
            (0..ctx.ctl.size()).map(|j| if j < m { partition::<T>(n, m, j) } else { 0..0 }).collect();
        let mine = parts[ctx.ctl.me()].clone();
        // (b) Every owner takes part in its column's allreduce whatever happened on its
        // node (an output of the wrong length, which the node's checks rejected, sends
        // zeros): the other nodes' owners are waiting for it. Empty partitions are empty
        // on every node, and skipped everywhere.
        // Every rank of the node reads it: in the shared heap where they map it.
        let mut reduced = Scratch::<T>::zeroed(mine.len(), ctx.ctl.loads_heaps());
        if !mine.is_empty() {
            let zeros;
            let own: &[T] = match out.get(mine.clone()) {
                Some(own) => own,
                None => {
                    zeros = vec![T::zeroed(); mine.len()];
                    &zeros
                }
            };
            combine(&self.column, own, &mut reduced, oper, self.piece);
        }
        // (c) Every rank reads the partitions from their owners (into scratch where its
        // node step failed).
        let counts: Vec<mpi::Count> = parts.iter().map(|r| r.len() as mpi::Count).collect();
        let displs: Vec<mpi::Count> = parts.iter().map(|r| r.start as mpi::Count).collect();
        let mut spare = Vec::new();
        let into = output_or_spare(result.is_err(), out, &mut spare);
        let spread = coll::allgatherv::allgatherv(
            ctx,
            Exchange {
                send: bytemuck::cast_slice(&reduced),
                recv: bytemuck::cast_slice_mut(into),
                parts: Given { counts: &counts, displs: &displs },
                elem: std::mem::size_of::<T>(),
                algorithm: coll::allgatherv::AllgathervAlgorithm::Auto,
            },
        );
        self.agree(parent, result.and(spread))
    }

    /// The leaders' and the second node leg of the leader path of
    /// [`Hierarchy::all_reduce`]; `n` is the input's length (`out` may differ when the
    /// node's checks failed: the leader then still combines `n` elements).
    fn combine_and_share<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        out: &mut [T],
        n: usize,
        oper: &O,
        mut result: Result<()>,
    ) -> Result<()> {
        let Net { parent, ctx } = net;
        // A rank whose node step failed takes part in both legs, into scratch.
        let failed = result.is_err();
        if let Some(leaders) = &self.leaders {
            let mine = if out.len() == n && !failed { out.to_vec() } else { vec![T::zeroed(); n] };
            let mut combined = vec![T::zeroed(); n];
            combine(leaders, &mine, &mut combined, oper, self.piece);
            if out.len() == n && !failed {
                copy_block(&combined, out);
            }
        }
        let mut spare = Vec::new();
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(output_or_spare(failed, out, &mut spare));
        result = result.and(coll::bcast::bcast(ctx, bytes, 0, 0, BcastAlgorithm::Auto, None));
        self.agree(parent, result)
    }

    /// `scan`, `exclusive_scan` or `reduce_scatter_block` over several nodes, after the
    /// checks across the whole communicator: with one rank per node and a built-in
    /// operator, rsmpi's own; otherwise over point-to-point messages among all the ranks,
    /// in rank order: the scans by recursive doubling ([`scan_in_order`]), the
    /// reduce-scatter as an allreduce of the whole input ([`combine_in_order`]), of which
    /// each rank keeps its block (`log2 p` messages of the input a rank, where gathering
    /// every rank's input took `p` inputs of memory and traffic; a two-level prefix over
    /// node totals would be lighter still).
    ///
    /// # Errors
    ///
    /// As the checks of [`all_reduce`](Self::all_reduce), on every rank.
    pub(crate) fn scan<T: Pod, O: Operator<T>>(
        &self,
        net: Net<'_>,
        which: coll::scan::Which,
        send: &[T],
        recv: &mut [T],
        oper: &O,
    ) -> Result<()> {
        let oper = &Fatal(oper);
        use coll::scan::Which;
        let parent = net.parent;
        let (p, me) = (parent.size() as usize, parent.rank() as usize);
        let kind = match which {
            Which::Scan => coll::Kind::Scan,
            Which::Exscan => coll::Kind::Exscan,
            Which::ReduceScatterBlock => coll::Kind::ReduceScatterBlock,
        };
        // The output must be as long as the input. The reduce-scatter's input is p blocks
        // of its output: it claims p times its output as the length every rank agrees on,
        // and its input as what it passed, so that a wrong input is named as such (with
        // the input's length and p times the output's).
        let (agreed, passed) = match which {
            Which::ReduceScatterBlock => (recv.len().saturating_mul(p), send.len()),
            _ => (send.len(), recv.len()),
        };
        self.check_reduction(net, (kind, 0), 0, agreed, Some(passed), oper)?;
        let n = recv.len();
        if n == 0 {
            return Ok(());
        }
        // Output elements `a..a + c` of every rank depend only on input elements `a..a + c`
        // (of every block, for the reduce-scatter): the call goes to MPI in such pieces.
        let blocks = match which {
            Which::ReduceScatterBlock => p,
            _ => 1,
        };
        let direct = self.direct() && mpi_builtin::<T, _>(oper).is_some();
        // What one output element costs an MPI call's count: one element for MPI's own
        // scans and reduce-scatter (whose count is the output's), every block where the
        // ranks exchange whole inputs.
        let copies = if direct { 1 } else { blocks };
        let step = pieces(n, self.piece, copies);
        let mut piece_in = Vec::new();
        for a in (0..n).step_by(step) {
            let c = step.min(n - a);
            let input: &[T] = match which {
                Which::ReduceScatterBlock if c < n => {
                    piece_in.clear();
                    (0..p).for_each(|q| piece_in.extend_from_slice(&send[q * n + a..q * n + a + c]));
                    &piece_in
                }
                Which::ReduceScatterBlock => send,
                _ => &send[a..a + c],
            };
            let out = &mut recv[a..a + c];
            let mut spot = Spot::new();
            match mpi_builtin::<T, _>(oper) {
                Some(builtin) if direct => {
                    let op = builtin.mpi();
                    match which {
                        Which::Scan => {
                            parent.scan_into(to_mpi::send(input), to_mpi::recv(out, &mut spot), op)
                        }
                        Which::ReduceScatterBlock => parent.reduce_scatter_block_into(
                            to_mpi::send(input),
                            to_mpi::recv(out, &mut spot),
                            op,
                        ),
                        Which::Exscan => {
                            // MPI leaves rank 0's output undefined; zcoll leaves it as it was.
                            let mut before = out.to_vec();
                            parent.exclusive_scan_into(to_mpi::send(input), &mut before[..], op);
                            if me > 0 {
                                copy_block(&before, out);
                            }
                        }
                    }
                }
                _ => match which {
                    Which::Scan => scan_in_order(parent, input, out, oper, false),
                    Which::Exscan => scan_in_order(parent, input, out, oper, true),
                    Which::ReduceScatterBlock => {
                        let mut all = vec![T::zeroed(); input.len()];
                        combine_in_order(parent, input, &mut all, oper);
                        copy_block(&all[me * c..me * c + c], out);
                    }
                },
            }
        }
        Ok(())
    }
}

/// Combines every member's `mine` into `out` over `comm` with `oper`: MPI's own operator
/// for a built-in one; otherwise by recursive doubling in `comm`'s rank order
/// ([`combine_in_order`]), so that every member computes bitwise the same result. No MPI
/// call carries more than `piece` elements (the operators work element by element, so
/// the pieces are independent).
fn combine<T: Pod, O: Operator<T>>(
    comm: &SimpleCommunicator,
    mine: &[T],
    out: &mut [T],
    oper: &O,
    piece: usize,
) {
    let step = pieces(mine.len(), piece, 1);
    for (mine, out) in mine.chunks(step).zip(out.chunks_mut(step)) {
        let mut spot = Spot::new();
        match mpi_builtin::<T, _>(oper) {
            Some(b) => comm.all_reduce_into(to_mpi::send(mine), to_mpi::recv(out, &mut spot), b.mpi()),
            None => combine_in_order(comm, mine, out, oper),
        }
    }
}

/// The tag of the operator trees' messages (the PAP exchange's are `0x7a50` and
/// `0x7a51`).
const TREE_TAG: i32 = 0x7a52;

/// Combines every member's `mine` into `out` over `comm` with `oper`, as an allreduce does,
/// in `comm`'s rank order, by recursive doubling: `log2 q` exchanges of `n` elements for
/// `q` members, where gathering every member's input to every member moved `(q - 1) n`.
/// The first `2 r` members (for `q = 2^k + r`) first fold pairwise, the odd one keeping
/// the pair's partial; then, at distance `1, 2, 4, ...` among the `2^k` left, each pair
/// swaps partials, each covering a run of consecutive members, and both fold them with
/// the lower run first; last, the odd members hand the result back. Both partners fold
/// the same two runs in the same order, so every member ends with bitwise the same result,
/// in the order a non-commutative operator needs.
fn combine_in_order<T: Pod, O: Operator<T>>(comm: &SimpleCommunicator, mine: &[T], out: &mut [T], oper: &O) {
    let (q, me) = (comm.size() as usize, comm.rank() as usize);
    copy_block(mine, out);
    if q == 1 || mine.is_empty() {
        return;
    }
    let at = |r: usize| comm.process_at_rank(r as i32);
    let pow2 = 1 << (usize::BITS - 1 - q.leading_zeros());
    let rest = q - pow2;
    let mut theirs = vec![T::zeroed(); mine.len()];
    // This member's place among the `pow2` that exchange (none for the even member of a
    // first pair), and the member at a place.
    let place = match me < 2 * rest {
        true if me % 2 == 0 => {
            at(me + 1).send_with_tag(&out[..], TREE_TAG);
            None
        }
        true => {
            at(me - 1).receive_into_with_tag(&mut theirs[..], TREE_TAG);
            fold_earlier(oper, out, &mut theirs);
            Some(me / 2)
        }
        false => Some(me - rest),
    };
    let member = |place: usize| if place < rest { 2 * place + 1 } else { place + rest };
    if let Some(place) = place {
        let mut distance = 1;
        while distance < pow2 {
            let partner = place ^ distance;
            swap(&at(member(partner)), out, &mut theirs);
            match partner < place {
                true => fold_earlier(oper, out, &mut theirs),
                false => {
                    oper.apply(out, &theirs);
                }
            }
            distance <<= 1;
        }
    }
    if me < 2 * rest {
        match me % 2 {
            1 => at(me - 1).send_with_tag(&out[..], TREE_TAG),
            _ => {
                at(me + 1).receive_into_with_tag(out, TREE_TAG);
            }
        }
    }
}

/// Sends `mine` to `other` and receives `theirs` from it, at once (both partners of an
/// exchange call it).
fn swap<T: Pod>(other: &mpi::topology::Process<'_>, mine: &[T], theirs: &mut [T]) {
    mpi::point_to_point::send_receive_into_with_tags(mine, other, TREE_TAG, theirs, other, TREE_TAG);
}

/// `acc = x ∘ acc`: folds `x`, which covers earlier members, in before `acc` (`x` is
/// overwritten).
fn fold_earlier<T: Pod, O: Operator<T>>(oper: &O, acc: &mut [T], x: &mut [T]) {
    oper.apply(x, acc);
    copy_block(x, acc);
}

/// The scan of `mine` over `comm` into `out` with `oper`, in `comm`'s rank order: member
/// `r`'s `out` becomes the fold of members `0..=r` (`exclusive`: `0..r`, and member 0's
/// `out` is left as it was), by recursive doubling, `ceil(log2 q)` exchanges of `n`
/// elements for `q` members. At distance `1, 2, 4, ...` partners swap the fold of the
/// aligned run of members each has heard of; a member folds what comes from below into
/// both its run and its `out`, and what comes from above into its run only.
fn scan_in_order<T: Pod, O: Operator<T>>(
    comm: &SimpleCommunicator,
    mine: &[T],
    out: &mut [T],
    oper: &O,
    exclusive: bool,
) {
    let (q, me) = (comm.size() as usize, comm.rank() as usize);
    if mine.is_empty() {
        return;
    }
    let mut run = mine.to_vec();
    let mut theirs = vec![T::zeroed(); mine.len()];
    // Whether `out` holds a fold yet (at once for an inclusive scan: this member's input).
    let mut started = !exclusive;
    if started {
        copy_block(mine, out);
    }
    let mut distance = 1;
    while distance < q {
        let partner = me ^ distance;
        if partner < q {
            swap(&comm.process_at_rank(partner as i32), &run, &mut theirs);
            if partner < me {
                match started {
                    true => fold_earlier(oper, out, &mut theirs.clone()),
                    false => copy_block(&theirs, out),
                }
                started = true;
                fold_earlier(oper, &mut run, &mut theirs);
            } else {
                oper.apply(&mut run, &theirs);
            }
        }
        distance <<= 1;
    }
}

/// Runs an elementwise MPI call over `bufs` in pieces of at most `piece` elements:
/// `call(input, output)`, with no output on a rank that has none, and a copy of an
/// in-place buffer's piece as its input.
fn by_pieces<T: Pod>(bufs: Bufs<'_, T>, piece: usize, mut call: impl FnMut(&[T], Option<&mut [T]>)) {
    match bufs {
        Bufs::Apart(s, r) => s.chunks(piece).zip(r.chunks_mut(piece)).for_each(|(s, r)| call(s, Some(r))),
        Bufs::InPlace(b) => b.chunks_mut(piece).for_each(|b| {
            let input = b.to_vec();
            call(&input, Some(b))
        }),
        Bufs::SendOnly(s) => s.chunks(piece).for_each(|s| call(s, None)),
    }
}

/// How many elements of an elementwise call of `n` go to MPI at once when each of them
/// makes `copies` elements of one MPI call (every block of a reduce-scatter's input): at most
/// `piece` elements a call, and at least one element whatever `copies` is.
fn pieces(n: usize, piece: usize, copies: usize) -> usize {
    (piece / copies.max(1)).clamp(1, n.max(1))
}

/// Reduces every member's `mine` over `comm` into `out` on member `root` (`out` is
/// ignored elsewhere): MPI's own reduce for a built-in operator; otherwise along a
/// binomial tree ([`reduce_in_order`]). No MPI call carries more than `piece` elements.
fn reduce_to<T: Pod, O: Operator<T>>(
    comm: &SimpleCommunicator,
    root: i32,
    mine: &[T],
    out: &mut [T],
    oper: &O,
    piece: usize,
) {
    let at = comm.process_at_rank(root);
    let me = comm.rank() == root;
    let step = pieces(mine.len(), piece, 1);
    // `out` is empty off the root: give every piece an empty output there.
    let outs = out.chunks_mut(step).map(Some).chain(std::iter::repeat_with(|| None));
    for (mine, out) in mine.chunks(step).zip(outs) {
        let mut spot = Spot::new();
        let mut none: [T; 0] = [];
        let out = out.unwrap_or(&mut none);
        match (mpi_builtin::<T, _>(oper), me) {
            (Some(b), true) => at.reduce_into_root(to_mpi::send(mine), to_mpi::recv(out, &mut spot), b.mpi()),
            (Some(b), false) => at.reduce_into(to_mpi::send(mine), b.mpi()),
            (None, _) => reduce_in_order(comm, root as usize, mine, out, oper),
        }
    }
}

/// Reduces every member's `mine` over `comm` into `out` on member `root` with `oper`, along
/// a binomial tree: `ceil(log2 q)` receives of `n` elements at the top for `q` members,
/// where gathering every input there received `(q - 1) n`. At distance `1, 2, 4, ...`, a
/// member whose distance bit is set sends its partial to the member that far below it and
/// is done; the other folds what it receives after its own partial, which covers the
/// members just before. A commutative operator's tree counts from `root`; another's from
/// member 0, in rank order, and member 0 then sends the result to `root`.
fn reduce_in_order<T: Pod, O: Operator<T>>(
    comm: &SimpleCommunicator,
    root: usize,
    mine: &[T],
    out: &mut [T],
    oper: &O,
) {
    let (q, me) = (comm.size() as usize, comm.rank() as usize);
    if mine.is_empty() {
        return;
    }
    let top = if oper.commutative() { root } else { 0 };
    let at = |from_top: usize| comm.process_at_rank(((from_top + top) % q) as i32);
    let mine_from_top = (me + q - top) % q;
    let mut acc = mine.to_vec();
    let mut theirs = vec![T::zeroed(); mine.len()];
    let mut distance = 1;
    while distance < q {
        if mine_from_top & distance != 0 {
            at(mine_from_top - distance).send_with_tag(&acc[..], TREE_TAG);
            break;
        }
        if mine_from_top + distance < q {
            at(mine_from_top + distance).receive_into_with_tag(&mut theirs[..], TREE_TAG);
            oper.apply(&mut acc, &theirs);
        }
        distance <<= 1;
    }
    match (me == top, me == root) {
        (true, true) => copy_block(&acc, out),
        (true, false) => comm.process_at_rank(root as i32).send_with_tag(&acc[..], TREE_TAG),
        (false, true) => {
            comm.process_at_rank(top as i32).receive_into_with_tag(out, TREE_TAG);
        }
        (false, false) => {}
    }
}

/// Folds `parts` (the first `n` elements of each, as bytes) in their order with `oper`,
/// as bytes.
fn fold<'p, T: Pod, O: Operator<T>>(parts: impl Iterator<Item = &'p [u8]>, n: usize, oper: &O) -> Vec<u8> {
    let bytes = n * std::mem::size_of::<T>();
    let mut acc = vec![T::zeroed(); n];
    for (i, part) in parts.enumerate() {
        let x: Vec<T> = elements(&part[..bytes]);
        match i {
            0 => copy_block(&x, &mut acc),
            _ => {
                oper.apply(&mut acc, &x);
            }
        }
    }
    bytemuck::cast_slice(&acc).to_vec()
}

/// `bytes` (a whole number of `T`s) as elements, aligned.
fn elements<T: Pod>(bytes: &[u8]) -> Vec<T> {
    let mut out = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>().max(1)];
    copy_block(bytes, bytemuck::cast_slice_mut::<T, u8>(&mut out));
    out
}

/// A reduction's output, where this rank has one.
fn bufs_out<T>(bufs: Bufs<'_, T>) -> Option<&mut [T]> {
    match bufs {
        Bufs::Apart(_, r) | Bufs::InPlace(r) => Some(r),
        Bufs::SendOnly(_) => None,
    }
}

/// The output length (in elements) a rank of a reduction claims: its receive buffer, or
/// its input in place; `None` for a rank that only sends, except the root (`is_root`),
/// which always has an output: one it did not pass is empty, and the checks refuse it
/// (MPI would abort on a root that calls the sending side).
fn recv_of<T>(bufs: &Bufs<'_, T>, is_root: bool) -> Option<usize> {
    match bufs {
        Bufs::Apart(_, r) => Some(r.len()),
        Bufs::InPlace(b) => Some(b.len()),
        Bufs::SendOnly(_) => is_root.then_some(0),
    }
}
