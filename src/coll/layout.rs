//! The direct copies of the layout collectives (alltoall, allgather, bcast, gather and
//! scatter over [`Layout`]s) inside one node: every reader copies straight from a peer's send layout
//! into its own receive layout, with no packing on either side.
//!
//! **Algorithm.** Each rank flattens its send layout (one block) into byte fragments
//! `(offset, len)` and publishes, in the metadata words of its arrival, the list's key
//! (two 64-bit hashes of the list, its fragment count, its length in bytes and the
//! layout's extent in bytes) and where the list lies in its own memory. After the verdict,
//! a reader that has not seen that key from that rank reads the list once, with the same
//! transport as the data, checks that it hashes to the key, and remembers it in the
//! communicator's [`Memo`] (FALCON's memoized layouts: a repeated call reads only the key).
//! A changed layout has another key, so it is never served by a stale entry; should two
//! lists ever share a key, the copies still stay inside the peer's published buffer (the
//! transport checks every range). Then, for each peer in the pairwise order of the
//! contiguous alltoall (`(me - t) mod p`), the reader copies the peer's block for it (the
//! list shifted by `me` extents for an alltoall) into its own block for that peer (its
//! receive list shifted by the peer's index) in one [`Round::read_scatter`]: CMA with both
//! iovec lists, split at `IOV_MAX` on either side (or into a bounce buffer, then stored,
//! where the local fragments are many and small), or loads and stores where the peer's
//! buffer is mapped here. Its own block is copied locally. Every list is kept as runs
//! (`layout::runs`: fragments of one length at a constant stride), so that a column of
//! single elements costs a load and a store per element, not a list entry too. A gather
//! is the allgather's reads on the root alone; a scatter, the alltoall's read of the
//! root's block on every other rank (the root's list shifted by the reader's index).
//!
//! **A layout per peer** (the `*_layouts_*` calls, MPI's `*w`: [`Sides::Each`]): a rank
//! publishes the key and address of one list per peer on the side that has a layout per
//! rank (one list serving every peer on the other side, none on a side it has no part in),
//! and the bytes of each receive layout; the verdict compares the bytes of every pair the
//! data flows between before any byte moves. A reader then copies the peer's list *for
//! it* (memoized by peer and key as above) into its receive layout for that peer, in the
//! same pairwise order and through the same `read_scatter`. A pair of no bytes is skipped.
//! The path is chosen per pair: a sender whose layout for a peer has many short fragments
//! (under [`PACK_BELOW`] bytes on average: the `z` face of a grid, single elements `n`
//! apart) packs that block into a scratch buffer of its own before it arrives (in the
//! shared heap where peers map heaps) and publishes its address beside the layout's key;
//! the reader then copies one contiguous block onto its receive layout, and reads no list.
//! So the strided reads are made by the sender, in its own cache and at the same time as
//! the other ranks' (not all by the one reader of the face), and with CMA one iovec
//! replaces one per element; the pairs of long fragments are still copied in place.
//!
//! **Cost** (blocks of `n` bytes, `f_r` fragments on the side read, `f_l` on the side
//! written, `p` ranks): `T_sync + (p - 1) (alpha + n beta + f_r phi_r + f_l phi_l)` with
//! CMA, `(p - 1) (n beta + (f_r + f_l) phi_m)` with loads and stores, plus one read of
//! `16 f_r` bytes per peer the first time a layout is seen; packing pays
//! `2 n memcpy_beta + (f_r + f_l) phi_p` more than the contiguous collective.
//! [`LayoutAlgorithm::Auto`] compares the two with `Params::layout_direct`, on values
//! every rank agreed on.

use super::algorithm::{self, Algorithm};
use super::{check_staged, op, BadLength, Ctx, Kind};
use crate::alloc::Scratch;
use crate::error::{Error, Result};
use crate::layout::runs::Runs;
use crate::layout::Layout;
use crate::sync::{self, Call, Round};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// How a layout collective ([`Comm::all_to_all_layout_into_with`](crate::Comm::all_to_all_layout_into_with)
/// and its kin) moves the data.
///
/// # Examples
///
/// ```
/// use zcoll::LayoutAlgorithm;
/// assert_eq!("direct".parse(), Ok(LayoutAlgorithm::Direct));
/// assert_eq!(LayoutAlgorithm::Packed.to_string(), "packed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LayoutAlgorithm {
    /// Let the cost model choose from the block size and the fragments
    /// (`ZCOLL_LAYOUT_ALGORITHM` overrides).
    #[default]
    Auto,
    /// Pack into a contiguous scratch buffer, run the contiguous collective, unpack (an
    /// alltoall, allgather or broadcast on one node whose ranks map each other's heaps,
    /// of blocks of 4 KiB or more: the readers unpack straight from the peers' packed
    /// blocks).
    Packed,
    /// Copy straight from every peer's send layout into the receive layout (a
    /// communicator of one node; across nodes this packs).
    Direct,
}

algorithm::vocabulary! {
    LayoutAlgorithm("ZCOLL_LAYOUT_ALGORITHM"): "auto, packed or direct",
    [Auto => "auto", Packed => "packed", Direct => "direct"]

    fn on_cico(self) -> Self {
        LayoutAlgorithm::Packed
    }
}

/// What every rank agreed on before choosing: the block's bytes, the most fragments of a
/// block on the side read and on the side written, and whether every reader copies with
/// loads and stores.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) bytes: usize,
    pub(crate) remote: usize,
    pub(crate) local: usize,
    pub(crate) loads: bool,
}

impl LayoutAlgorithm {
    /// The algorithm a call of `shape` runs: `Auto` as `ZCOLL_LAYOUT_ALGORITHM` says, else
    /// as the cost model does; `Packed` on a `cico` node.
    ///
    /// # Errors
    ///
    /// `Config` for an unreadable variable.
    pub(crate) fn choose(self, ctx: &Ctx<'_>, shape: Shape) -> Result<LayoutAlgorithm> {
        let model = || {
            let (params, _) = crate::tune::select::active();
            match params.layout_direct(shape.bytes, shape.remote, shape.local, shape.loads) {
                true => LayoutAlgorithm::Direct,
                false => LayoutAlgorithm::Packed,
            }
        };
        let a = algorithm::resolve(self, Self::VAR, ctx.overrides, ctx.transport, model)?;
        Ok(match a {
            LayoutAlgorithm::Auto => LayoutAlgorithm::Packed,
            a => a,
        })
    }
}

/// The key a flattened layout is remembered by: two 64-bit hashes of its fragment list,
/// its fragment count, its length and its extent (in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    hash: [u64; 2],
    fragments: u64,
    bytes: u64,
    extent: u64,
}

/// One block of a layout, flattened into byte fragments `(offset, len)`, in type-map
/// order, with its key; `words` is the list as peers read it (offset, then length, as
/// native-endian `u64`s): for this rank's own layouts, in the shared heap where the
/// node's ranks map each other's heaps, so that a peer reads it with loads, as it reads
/// heap buffers, and no CMA call is left on that path.
#[derive(Debug)]
pub(crate) struct Flat {
    key: Key,
    words: Scratch<u64>,
    /// The blocks [`shifted`](Flat::shifted) made, by shift: a call of the same layout
    /// copies with the lists the first one made (the translated layouts, memoized).
    blocks: Mutex<HashMap<usize, Runs>>,
    /// The list as runs (block 0).
    runs: Runs,
}

/// Two hashes of `words`, with different seeds and multipliers: a changed list changes
/// both (for a false hit, both 64-bit hashes would have to collide, with the same count,
/// length and extent).
fn hash(words: &[u64]) -> [u64; 2] {
    let mix = |seed: u64, mul: u64| {
        let h = words.iter().fold(seed, |h, &w| (h ^ w).wrapping_mul(mul).rotate_left(29));
        // The finalizer of splitmix64.
        let h = (h ^ h >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let h = (h ^ h >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ h >> 31
    };
    [mix(0xcbf2_9ce4_8422_2325, 0x0100_0000_01b3), mix(0x9e37_79b9_7f4a_7c15, 0xff51_afd7_ed55_8ccd)]
}

impl Flat {
    /// `layout` over elements of `size` bytes (checked against its buffer, so its
    /// offsets, in bytes, fit an `isize`), its list in the shared heap if `shared`.
    pub(crate) fn new(layout: &Layout, size: usize, shared: bool) -> Flat {
        let frags = layout.flatten();
        let mut words = Vec::with_capacity(2 * frags.len());
        // Saturating: a layout no buffer can hold (its bytes or extent past `usize`) is
        // refused by the checks against its buffer, never a panic here.
        for (offset, len) in frags {
            words.push(offset.wrapping_mul(size as isize) as u64);
            words.push(len.saturating_mul(size) as u64);
        }
        Flat::from_words(words, layout.extent().saturating_mul(size) as u64, shared)
    }

    fn from_words(words: Vec<u64>, extent: u64, shared: bool) -> Flat {
        let bytes = words.iter().skip(1).step_by(2).fold(0u64, |s, &n| s.wrapping_add(n));
        let key = Key { hash: hash(&words), fragments: (words.len() / 2) as u64, bytes, extent };
        let runs = Runs::new(words.chunks_exact(2).map(|w| (w[0] as usize, w[1] as usize)));
        let words = match shared {
            true => {
                let mut s = Scratch::zeroed(words.len(), true);
                s.copy_from_slice(&words);
                s
            }
            false => Scratch::Mem(words),
        };
        Flat { key, words, blocks: Mutex::default(), runs }
    }

    /// The bytes one block selects.
    pub(crate) fn bytes(&self) -> usize {
        self.key.bytes as usize
    }

    /// The number of fragments.
    pub(crate) fn fragments(&self) -> usize {
        self.words.len() / 2
    }

    /// Whether its blocks tile a buffer from byte 0 on in order: its fragments lie end to
    /// end from offset 0 and its extent is its bytes (a contiguous layout), so that
    /// packing or unpacking blocks of it is a plain copy.
    pub(crate) fn dense(&self) -> bool {
        let mut at = 0usize;
        for r in self.runs.runs.iter() {
            if r.off != at || (r.count > 1 && r.stride != r.len as isize) {
                return false;
            }
            at += r.count * r.len;
        }
        at > 0 && at as u64 == self.key.bytes && self.key.bytes == self.key.extent
    }

    /// Whether its sender packs this block for a peer (a call with a layout per peer):
    /// its fragments are many and short (under a cache line on average), so that the
    /// reader would pay a remote cache line (loads) or an iovec (CMA) per fragment, where
    /// the sender's pack reads them in its own cache and the reader copies one
    /// contiguous block.
    pub(crate) fn packs(&self) -> bool {
        self.fragments() >= 2 && self.bytes() < PACK_BELOW * self.fragments()
    }

    /// The metadata words a rank publishes for it: the key, then the list's address and
    /// length in bytes.
    fn meta(&self) -> [u64; 7] {
        let k = &self.key;
        let addr = self.words.as_ptr() as u64;
        [k.hash[0], k.hash[1], k.fragments, k.bytes, k.extent, addr, 8 * self.words.len() as u64]
    }

    /// The runs of the block `k` extents on, as offsets into the buffer; a run whose
    /// offset does not fit lands past any buffer, so that the copy refuses it. Made once
    /// per `k` and kept.
    pub(crate) fn shifted(&self, k: usize) -> Runs {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if blocks.len() >= BLOCKS_CAP {
            blocks.clear();
        }
        blocks.entry(k).or_insert_with(|| self.shift(k)).clone()
    }

    fn shift(&self, k: usize) -> Runs {
        let by = (k as u64).checked_mul(self.key.extent).and_then(|b| usize::try_from(b).ok());
        self.runs.shifted(by)
    }
}

/// What a communicator remembers of layouts: its own flattened layouts (by layout and
/// element size), the peers' (by local rank and key), and how often each path ran.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    own: Vec<(Layout, usize, Arc<Flat>)>,
    peers: HashMap<(usize, Key), Arc<Flat>>,
    /// The keys of `peers`, oldest first: a full memo forgets its oldest entries, never
    /// those the call in progress just read.
    peer_order: VecDeque<(usize, Key)>,
    /// Receive layouts that passed `check_writable` against a buffer length.
    writable: Vec<(Layout, usize)>,
    /// Calls that took the direct path.
    pub(crate) direct: u64,
    /// Calls that took the packed path.
    pub(crate) packed: u64,
    /// Peers' lists read (each a first sight of a layout).
    pub(crate) fetched: u64,
}

/// The mean fragment, in bytes, under which a call with a layout per peer packs a
/// pair's block on the sender's side ([`Flat::packs`]).
pub(crate) const PACK_BELOW: usize = 64;

/// The most layouts a memo keeps of each kind: past it, it forgets its own layouts all
/// at once, and the peers' oldest first.
const MEMO_CAP: usize = 256;

/// The most shifted blocks a flattened layout keeps (one per peer, for a receive side).
const BLOCKS_CAP: usize = 1 << 16;

impl Memo {
    /// `layout` flattened over elements of `size` bytes, remembered (its list in the
    /// shared heap if `shared`: see [`Flat`]).
    pub(crate) fn own(&mut self, layout: &Layout, size: usize, shared: bool) -> Arc<Flat> {
        if let Some((_, _, f)) = self.own.iter().find(|(l, s, _)| *s == size && l == layout) {
            return f.clone();
        }
        if self.own.len() >= MEMO_CAP {
            self.own.clear();
        }
        let f = Arc::new(Flat::new(layout, size, shared));
        self.own.push((layout.clone(), size, f.clone()));
        f
    }

    /// Whether `layout` passed `Layout::check_writable(len)` before.
    pub(crate) fn writable(&self, layout: &Layout, len: usize) -> bool {
        self.writable.iter().any(|(l, n)| *n == len && l == layout)
    }

    /// Notes that `layout` passed `Layout::check_writable(len)`.
    pub(crate) fn note_writable(&mut self, layout: &Layout, len: usize) {
        if self.writable.len() >= MEMO_CAP {
            self.writable.clear();
        }
        self.writable.push((layout.clone(), len));
    }

    /// Local rank `r`'s flattened send layout of this round whose [`Flat::meta`] words it
    /// published from word `at`: remembered, or read from `r` with the round's transport
    /// and checked against its key.
    fn peer(&mut self, round: &Round<'_>, r: usize, at: usize) -> Result<Arc<Flat>> {
        let w = |i| round.meta(r, at + i);
        let key = Key { hash: [w(0), w(1)], fragments: w(2), bytes: w(3), extent: w(4) };
        if let Some(f) = self.peers.get(&(r, key)) {
            return Ok(f.clone());
        }
        let len = w(6) as usize;
        let mut bytes = vec![0u8; len];
        round.read(&round.peer_list(r, at + 5), r, 0, &mut bytes)?;
        let words =
            bytes.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes"))).collect();
        let flat = Flat::from_words(words, key.extent, false);
        if flat.key != key || len % 16 != 0 {
            return Err(Error::InvalidLayout {
                rank: Some(round.rank_of(round.me())),
                culprit: Some(round.rank_of(r)),
                which: "send",
                reason: "its published fragment list does not match its key",
            });
        }
        while self.peers.len() >= MEMO_CAP {
            let Some(oldest) = self.peer_order.pop_front() else { break };
            self.peers.remove(&oldest);
        }
        let flat = Arc::new(flat);
        self.peers.insert((r, key), flat.clone());
        self.peer_order.push_back((r, key));
        self.fetched += 1;
        Ok(flat)
    }
}

/// Which layout collective a direct copy serves (the parameter of its `op`, with
/// [`Sides::Each`] in the bit above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    Alltoall = 0,
    Allgather = 1,
    Bcast = 2,
    Gather = 3,
    Scatter = 4,
}

/// A rank's buffers: a send and a receive buffer, or a broadcast's one.
pub(crate) enum Bufs<'a> {
    Two(&'a [u8], &'a mut [u8]),
    One(&'a mut [u8]),
}

/// This rank's flattened layouts (checked against its buffers and agreed on by every
/// rank of the communicator).
#[derive(Clone, Copy)]
pub(crate) enum Sides<'a> {
    /// One layout a side, block `k` shifted by `k` extents (the calls with one layout per
    /// side). A scatter's non-root passes its receive layout as `send` too: it publishes
    /// that block's bytes, and nobody reads its list.
    Shifted { send: &'a Flat, recv: &'a Flat },
    /// A layout per peer (the `*_layouts_*` calls, MPI's `*w`): `send[k]` for rank `k`,
    /// `recv[k]` from rank `k`; a side of one layout serves every peer (a gather's send
    /// side, a scatter's receive side), and a side this rank has no part in is empty (a
    /// scatter's non-root sends nothing, a gather's non-root receives nothing).
    Each { send: &'a [Arc<Flat>], recv: &'a [Arc<Flat>] },
}

/// The layout of `side` for rank `k`: its own, or the one that serves every rank.
fn entry(side: &[Arc<Flat>], k: usize) -> Option<&Flat> {
    side.get(if side.len() == 1 { 0 } else { k }).map(|f| &**f)
}

/// The metadata words a call with a layout per peer publishes: the number of send and
/// receive layouts, the [`Flat::meta`] words of each send layout (its key and where its
/// list lies), then the bytes of each receive layout.
fn each_meta(send: &[Arc<Flat>], recv: &[Arc<Flat>], packed: &[Option<Scratch<u8>>]) -> Vec<u64> {
    let mut words = Vec::with_capacity(each_words(send.len(), recv.len()));
    words.extend([send.len() as u64, recv.len() as u64]);
    for (k, f) in send.iter().enumerate() {
        words.extend(f.meta());
        words.extend(match packed.get(k) {
            Some(Some(b)) => [b.as_ptr() as u64, b.len() as u64],
            _ => [0, 0],
        });
    }
    words.extend(recv.iter().map(|f| f.bytes() as u64));
    words
}

/// The number of [`each_meta`] words of `sends` send and `recvs` receive layouts: per
/// send layout its [`Flat::meta`] words, then the address and length of the block packed
/// for that peer (0 where it is not packed).
pub(crate) fn each_words(sends: usize, recvs: usize) -> usize {
    2 + EACH * sends + recvs
}

/// The metadata words of one send layout of a call with a layout per peer.
const EACH: usize = 9;

/// This rank's send blocks packed (a call with a layout per peer): the block for rank
/// `k` where its layout [`packs`](Flat::packs), in the shared heap where peers map heaps
/// (`shared`), so that the reader copies one contiguous block; `None` elsewhere. Its own
/// block too: packed before the arrival, its walk over the short fragments runs while
/// the peers pack theirs, where after the verdict it would follow their packs.
fn pack_pairs(src: &[u8], send: &[Arc<Flat>], shared: bool) -> Vec<Option<Scratch<u8>>> {
    if send.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(send.len());
    for f in send {
        if !f.packs() {
            out.push(None);
            continue;
        }
        // The layout was checked against `src`; should the pack fail all the same, the
        // peer reads the layout itself (and the copy refuses what lies outside).
        let mut block = Scratch::zeroed(f.bytes(), shared);
        let packed = sync::copy_runs(src, &f.shifted(0), &mut block, &Runs::new([(0, f.bytes())]));
        out.push(packed.is_ok().then_some(block));
    }
    out
}

/// What local rank `r` published with [`each_meta`]: where its [`Flat::meta`] words for
/// rank `k` start, and the bytes of its layouts to and from rank `k` (0 where it has
/// none; counts beyond `p` are taken as none, so a word read never leaves its area).
struct Published<'r, 'c> {
    round: &'r Round<'c>,
}

impl Published<'_, '_> {
    fn counts(&self, r: usize) -> (usize, usize) {
        let p = self.round.size() as u64;
        let n = |i| Some(self.round.meta(r, i)).filter(|&n| n <= p).unwrap_or(0) as usize;
        (n(0), n(1))
    }

    /// The word at which `r`'s send layout for `k` starts, if it has one.
    fn send_at(&self, r: usize, k: usize) -> Option<usize> {
        let (ns, _) = self.counts(r);
        let e = if ns == 1 { 0 } else { k };
        (e < ns).then_some(2 + EACH * e)
    }

    fn sent(&self, r: usize, k: usize) -> usize {
        self.send_at(r, k).map_or(0, |at| self.round.meta(r, at + 3) as usize)
    }

    fn received(&self, r: usize, k: usize) -> usize {
        let (ns, nr) = self.counts(r);
        let e = if nr == 1 { 0 } else { k };
        match e < nr {
            true => self.round.meta(r, 2 + EACH * ns + e) as usize,
            false => 0,
        }
    }
}

/// The direct copy of a layout collective inside one node, with this rank's `sides`;
/// `root` is the root of a rooted call, as a rank of the communicator and as a local rank.
///
/// # Errors
///
/// `LengthMismatch` if ranks' blocks differ in bytes (with a layout per peer: a rank
/// whose layout from a peer selects other bytes than the peer's for it, named as the
/// variable-count collective names it); `Mismatch` if ranks called different collectives
/// (both on every rank, before any byte moves); a transport error, a peer's list that
/// does not match its key, or a peer's failure.
pub(crate) fn direct(
    ctx: &Ctx<'_>,
    memo: &mut Memo,
    which: Which,
    (root, root_local): (i32, usize),
    bufs: Bufs<'_>,
    sides: Sides<'_>,
    own: Option<(&[u8], Runs)>,
) -> Result<()> {
    let code = LayoutAlgorithm::Direct.code();
    let each = matches!(sides, Sides::Each { .. });
    let op = op(Kind::Layout, code, which as u32 | (each as u32) << 3);
    let mine: &[u8] = match &bufs {
        Bufs::Two(s, _) => s,
        Bufs::One(b) => b,
    };
    let call =
        Call { op, root: root as i64, send: mine.as_ptr() as usize, send_len: mine.len(), ..Call::default() };
    let rooted = matches!(which, Which::Bcast | Which::Gather | Which::Scatter);
    let bytes = |round: &Round<'_>, r: usize| round.meta(r, 3) as usize;
    // Every block against the root's (rank 0's where there is no root).
    let first = if rooted && root_local < ctx.ctl.size() { root_local } else { 0 };
    let shifted = |round: &Round<'_>| {
        let expected = bytes(round, first);
        match (0..round.size()).find(|&r| bytes(round, r) != expected) {
            Some(culprit) => Err(BadLength { culprit, expected, found: bytes(round, culprit) }),
            None => Ok(()),
        }
    };
    // Every pair of ranks the data flows between: what the sender's layout for the
    // receiver selects against the receiver's layout for the sender, the receiver named
    // (the sender in a gather), as the variable-count collectives name them.
    let pairs = |round: &Round<'_>| {
        let (on, p) = (Published { round }, round.size());
        let flows: Vec<(usize, usize)> = match which {
            Which::Gather => (0..p).map(|q| (q, first)).collect(),
            Which::Scatter | Which::Bcast => (0..p).map(|j| (first, j)).collect(),
            Which::Alltoall | Which::Allgather => (0..p).flat_map(|j| (0..p).map(move |q| (q, j))).collect(),
        };
        let bad = |&(q, j): &(usize, usize)| on.sent(q, j) != on.received(j, q);
        match flows.into_iter().find(bad) {
            Some((q, j)) if which == Which::Gather => {
                Err(BadLength { culprit: q, expected: on.received(j, q), found: on.sent(q, j) })
            }
            Some((q, j)) => Err(BadLength { culprit: j, expected: on.sent(q, j), found: on.received(j, q) }),
            None => Ok(()),
        }
    };
    // The pairs the sender packs, before it arrives (kept until the round ends: peers
    // read them until they post `done`); in an alltoall only, where every rank sends and
    // reads alike (a scatter's root would pack every block alone, one after another).
    let packed = match (&sides, &bufs) {
        (Sides::Each { send, .. }, Bufs::Two(src, _)) if which == Which::Alltoall => {
            pack_pairs(src, send, ctx.ctl.loads_heaps())
        }
        _ => Vec::new(),
    };
    let round = match sides {
        Sides::Shifted { send, .. } => check_staged(ctx, call, &send.meta(), &[], rooted, shifted)?,
        Sides::Each { send, recv } => {
            check_staged(ctx, call, &each_meta(send, recv, &packed), &[], rooted, pairs)?
        }
    };
    let packed_own = packed.get(ctx.ctl.me()).and_then(|b| b.as_deref());
    let own = own.or_else(|| packed_own.map(|b| (b, Runs::new([(0, b.len())]))));
    let moved = copies(&round, memo, which, root_local, bufs, sides, own);
    round.finish(moved)
}

/// The reads of [`direct`], once the verdict is in: a block of no bytes is skipped (its
/// peer's list is not even read). This rank's own block comes from `own` where it is
/// given (the bytes and their runs: where [`pack_pairs`] packed it, or where the send
/// side holds only the peers' blocks), else from its send side.
fn copies(
    round: &Round<'_>,
    memo: &mut Memo,
    which: Which,
    root: usize,
    bufs: Bufs<'_>,
    sides: Sides<'_>,
    own_src: Option<(&[u8], Runs)>,
) -> Result<()> {
    let (p, me) = (round.size(), round.me());
    let (own, dst) = match bufs {
        Bufs::Two(s, r) => (Some(s), r),
        Bufs::One(b) => (None, b),
    };
    let sources: Vec<usize> = match which {
        Which::Bcast if me == root => vec![],
        Which::Bcast => vec![root],
        Which::Gather if me != root => return Ok(()),
        Which::Scatter if me == root => vec![],
        Which::Scatter => vec![root],
        _ => (1..p).map(|t| (me + p - t) % p).collect(),
    };
    for r in sources {
        let (remote, local) = match sides {
            Sides::Shifted { recv, .. } => {
                let local = match which {
                    Which::Alltoall | Which::Allgather | Which::Gather => recv.shifted(r),
                    Which::Scatter | Which::Bcast => recv.shifted(0),
                };
                if local.bytes == 0 {
                    continue;
                }
                let theirs = memo.peer(round, r, 0)?;
                let k = if matches!(which, Which::Alltoall | Which::Scatter) { me } else { 0 };
                (theirs.shifted(k), local)
            }
            Sides::Each { recv, .. } => {
                let at = Published { round }.send_at(r, me);
                let (Some(mine), Some(at)) = (entry(recv, r), at) else { continue };
                if mine.bytes() == 0 {
                    continue;
                }
                if round.meta(r, at + 8) != 0 {
                    // Packed by the sender: one contiguous block (its length against ours
                    // is checked by the copy).
                    let block = round.peer_list(r, at + 7);
                    let whole = Runs::new([(0, round.meta(r, at + 8) as usize)]);
                    round.read_scatter(&block, r, &whole, dst, &mine.shifted(0))?;
                    continue;
                }
                (memo.peer(round, r, at)?.shifted(0), mine.shifted(0))
            }
        };
        round.read_scatter(&round.peer_send(r), r, &remote, dst, &local)?;
    }
    let Some(src) = own else { return Ok(()) };
    let (from, to) = match sides {
        Sides::Shifted { send, recv } => match which {
            Which::Alltoall => (send.shifted(me), recv.shifted(me)),
            Which::Scatter if me == root => (send.shifted(me), recv.shifted(0)),
            Which::Scatter => return Ok(()),
            _ => (send.shifted(0), recv.shifted(me)),
        },
        Sides::Each { send, recv } => {
            // A gather's non-root receives nothing, a scatter's non-root sends nothing:
            // then one side is empty.
            let to = if which == Which::Scatter { entry(recv, 0) } else { entry(recv, me) };
            match (entry(send, me), to) {
                (Some(from), Some(to)) => (from.shifted(0), to.shifted(0)),
                _ => return Ok(()),
            }
        }
    };
    match own_src {
        Some((bytes, runs)) => copy_local(bytes, &runs, dst, &to),
        None => copy_local(src, &from, dst, &to),
    }
}

/// This rank's own block: the bytes `from` selects in `src` onto those `to` selects in
/// `dst`, in order.
fn copy_local(src: &[u8], from: &Runs, dst: &mut [u8], to: &Runs) -> Result<()> {
    sync::copy_runs(src, from, dst, to).map_err(|_| Error::InvalidLayout {
        rank: None,
        culprit: None,
        which: "send",
        reason: "its own block lies outside its buffer",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A changed layout of the same shape (same count, length and extent) gets another
    /// key, so a memo never serves it from a stale entry; the same layout, built again,
    /// gets the same key.
    #[test]
    fn a_changed_layout_of_the_same_shape_has_another_key() {
        let a = Layout::indexed(&[2, 2, 2], &[0, 4, 8]).unwrap();
        let b = Layout::indexed(&[2, 2, 2], &[0, 5, 8]).unwrap();
        let c = Layout::indexed(&[2, 2, 2], &[4, 0, 8]).unwrap();
        let (fa, fb, fc) = (Flat::new(&a, 8, false), Flat::new(&b, 8, false), Flat::new(&c, 8, false));
        assert_eq!(
            (fa.key.fragments, fa.key.bytes, fa.key.extent),
            (fb.key.fragments, fb.key.bytes, fb.key.extent)
        );
        assert_eq!(
            (fa.key.fragments, fa.key.bytes, fa.key.extent),
            (fc.key.fragments, fc.key.bytes, fc.key.extent)
        );
        assert_ne!(fa.key, fb.key);
        assert_ne!(fa.key, fc.key);
        assert_eq!(Flat::new(&a.clone(), 8, true).key, fa.key);
        assert_ne!(Flat::new(&a, 4, false).key, fa.key);
        // A memo's own entries follow the layout, not its shape.
        let mut memo = Memo::default();
        assert_eq!(memo.own(&a, 8, false).key, fa.key);
        assert_eq!(memo.own(&b, 8, false).key, fb.key);
        assert_eq!(memo.own(&a, 8, false).key, fa.key);
        assert_eq!(memo.own.len(), 2);
    }

    #[test]
    fn shifted_blocks_and_local_copies_follow_the_type_map() {
        let col = Layout::vector(3, 1, 4).unwrap().resized(1).unwrap();
        let f = Flat::new(&col, 2, false);
        assert_eq!(f.shifted(0).expand(), [(0, 2), (8, 2), (16, 2)]);
        assert_eq!(f.shifted(2).expand(), [(4, 2), (12, 2), (20, 2)]);
        assert_eq!(f.shifted(2).expand(), [(4, 2), (12, 2), (20, 2)]);
        let src: Vec<u8> = (0..24).collect();
        let mut dst = [0u8; 6];
        copy_local(&src, &f.shifted(1), &mut dst, &Runs::new([(0, 1), (1, 5)])).unwrap();
        assert_eq!(dst, [2, 3, 10, 11, 18, 19]);
        assert!(copy_local(&src, &f.shifted(4), &mut dst, &Runs::new([(0, 6)])).is_err());
    }

    #[test]
    fn dense_layouts_tile_their_buffer() {
        let dense = |l: Layout| Flat::new(&l, 8, false).dense();
        assert!(dense(Layout::contiguous(5).unwrap()));
        // Adjacent blocks, in order: one run of four fragments a length apart.
        assert!(dense(Layout::vector(4, 2, 2).unwrap()));
        assert!(!dense(Layout::vector(4, 2, 3).unwrap()));
        assert!(!dense(Layout::contiguous(5).unwrap().resized(6).unwrap()));
        assert!(!dense(Layout::indexed(&[2, 2], &[2, 0]).unwrap()));
        assert!(!dense(Layout::indexed(&[2], &[1]).unwrap().resized(3).unwrap()));
        assert!(!dense(Layout::contiguous(0).unwrap()));
    }
}
