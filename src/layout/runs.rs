//! Flattened layouts compressed into runs: `count` fragments of `len` bytes, a constant
//! `stride` apart. A column of a row-major matrix is one run however long it is, where its
//! fragment list holds a pair per element; the copy loops of the layout collectives walk
//! runs, so that a fragment of one element costs one load and one store, not the reading
//! of a list entry too (the list of single `f64`s is twice the data it selects).
//!
//! Every run is checked against its buffer once ([`Runs::check`]: its first and last
//! fragments, between which the others lie); the cursors then slice with `get`, so that
//! a run that was not checked can only fail the copy, never panic or reach outside.

use std::sync::Arc;

/// `count` fragments of `len` bytes, the `i`-th at byte `off + i * stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) off: usize,
    pub(crate) len: usize,
    pub(crate) stride: isize,
    pub(crate) count: usize,
}

impl Run {
    /// The offset of fragment `i` (`i < count`; checked runs never overflow).
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        self.off.wrapping_add((i as isize).wrapping_mul(self.stride) as usize)
    }

    /// The offset of the last fragment, if it fits.
    fn last(&self) -> Option<usize> {
        let k = isize::try_from(self.count.checked_sub(1)?).ok()?;
        let d = k.checked_mul(self.stride)?;
        let off = isize::try_from(self.off).ok()?;
        usize::try_from(off.checked_add(d)?).ok()
    }
}

/// A block's runs, in type-map order, and the bytes they select.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Runs {
    pub(crate) runs: Arc<[Run]>,
    pub(crate) bytes: usize,
}

impl Runs {
    /// The runs of the ordered fragments `frags` (empty ones dropped): consecutive
    /// fragments of one length at a constant stride join a run.
    pub(crate) fn new(frags: impl IntoIterator<Item = (usize, usize)>) -> Runs {
        let mut out: Vec<Run> = Vec::new();
        let mut bytes = 0usize;
        for (off, len) in frags.into_iter().filter(|f| f.1 > 0) {
            bytes = bytes.saturating_add(len);
            if let Some(r) = out.last_mut() {
                if r.len == len {
                    let step = (off as isize).checked_sub(r.at(r.count - 1) as isize);
                    match (r.count, step) {
                        (1, Some(s)) if off <= isize::MAX as usize => {
                            r.stride = s;
                            r.count = 2;
                            continue;
                        }
                        (_, Some(s)) if s == r.stride && off <= isize::MAX as usize => {
                            r.count += 1;
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            out.push(Run { off, len, stride: 0, count: 1 });
        }
        Runs { runs: out.into(), bytes }
    }

    /// The number of fragments.
    pub(crate) fn fragments(&self) -> usize {
        self.runs.iter().map(|r| r.count).sum()
    }

    /// These runs `by` bytes further on; a run whose offset does not fit lands past any
    /// buffer, so that [`check`](Self::check) refuses it.
    pub(crate) fn shifted(&self, by: Option<usize>) -> Runs {
        let runs = self
            .runs
            .iter()
            .map(|r| {
                let off = by.and_then(|b| r.off.checked_add(b)).filter(|&o| o <= isize::MAX as usize);
                Run { off: off.unwrap_or(usize::MAX), ..*r }
            })
            .collect();
        Runs { runs, bytes: self.bytes }
    }

    /// Whether every fragment lies inside a buffer of `len` bytes.
    pub(crate) fn check(&self, len: usize) -> bool {
        self.runs.iter().all(|r| {
            let inside = |o: usize| o.checked_add(r.len).is_some_and(|end| end <= len);
            inside(r.off) && r.last().is_some_and(inside)
        })
    }

    /// The fragments, one pair each (for CMA's iovecs).
    pub(crate) fn expand(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(self.runs.len());
        for r in self.runs.iter() {
            out.extend((0..r.count).map(|i| (r.at(i), r.len)));
        }
        out
    }

    /// A cursor at the first byte of the first fragment.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        Cursor { runs: &self.runs, at: 0, i: 0, into: 0 }
    }
}

/// A place in the byte stream some runs select: run `at`, fragment `i`, byte `into`.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    runs: &'a [Run],
    at: usize,
    i: usize,
    into: usize,
}

/// A fragment that lies outside its buffer, or a stream longer than the runs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outside;

impl Cursor<'_> {
    /// Writes the next `n` bytes of the stream into `dst` at the places the runs select,
    /// reading the stream from `src`, whose byte `base + k` is the `k`-th of these `n`.
    /// Whole fragments of 8 and 4 bytes are one fixed-size copy each, which inlines to a
    /// load and a store; columns of them side by side go through the register tiles of a
    /// transpose.
    ///
    /// # Errors
    ///
    /// `Outside` if a place lies outside `dst`, a byte outside `src`, or the runs end
    /// first (what was copied before stays copied).
    #[inline]
    pub(crate) fn scatter<S: Source + ?Sized>(
        &mut self,
        n: usize,
        src: &S,
        base: usize,
        dst: &mut [u8],
    ) -> Result<(), Outside> {
        self.tiles(n, &mut Scatter { src, base, dst })
    }

    /// Reads the next `n` bytes of the stream from `src` at the places the runs select
    /// into `out`, whose byte `k` is the `k`-th of these `n` (columns side by side through
    /// the register tiles of a transpose, as in [`scatter`](Self::scatter)).
    ///
    /// # Errors
    ///
    /// `Outside` if a place lies outside `src`, a byte outside `out`, or the runs end
    /// first.
    #[inline]
    pub(crate) fn gather<S: Source + ?Sized>(
        &mut self,
        n: usize,
        src: &S,
        out: &mut [u8],
    ) -> Result<(), Outside> {
        self.tiles(n, &mut Gather { src, out })
    }

    /// As [`pieces`](Self::pieces), but not in stream order: where runs of one shape lie
    /// side by side in the buffer (the columns of a row-major matrix: offsets `len`
    /// apart, one stride), up to a cache line of them are walked together, fragment `i`
    /// of each in turn, so that the buffer is written (or read) a line at a time rather
    /// than a column at a time (a blocked transpose). For `scatter` and `gather`, whose
    /// copies do not depend on one another.
    #[inline(always)]
    fn tiles<T: Tiler>(&mut self, n: usize, t: &mut T) -> Result<(), Outside> {
        let mut done = 0;
        while done < n {
            let r = *self.runs.get(self.at).ok_or(Outside)?;
            if self.i == 0 && self.into == 0 && r.count > 1 && r.len < LINE {
                let block = r.count.saturating_mul(r.len);
                let most = (LINE / r.len).min((n - done) / block);
                let mut g = 1;
                while g < most {
                    match self.runs.get(self.at + g) {
                        Some(q)
                            if (q.len, q.count, q.stride) == (r.len, r.count, r.stride)
                                && q.off == r.off.wrapping_add(g * r.len) =>
                        {
                            g += 1
                        }
                        _ => break,
                    }
                }
                if g >= 2 {
                    match r.len {
                        8 => tile(&r, g, done, 8, t)?,
                        4 => tile(&r, g, done, 4, t)?,
                        l => tile(&r, g, done, l, t)?,
                    }
                    done += g * block;
                    self.at += g;
                    continue;
                }
            }
            // The rest of this run, in order.
            let left = ((r.count - self.i) * r.len - self.into).min(n - done);
            let d0 = done;
            if T::HINTS && self.into == 0 && r.len < LINE && r.stride.unsigned_abs() >= SPARSE {
                self.ahead(&r, left, d0, t)?;
            } else {
                self.pieces(left, |s, a, l| t.piece(d0 + s, a, l))?;
            }
            done += left;
        }
        Ok(())
    }

    /// The next `left` bytes of the stream (`d0` on), all in run `r`, whose fragments each
    /// lie in lines of their own (a face of a 3D grid: elements a row apart), from whole
    /// fragments on: fragment by fragment as [`pieces`](Self::pieces) does, with the
    /// buffer's lines [`AHEAD`] fragments on asked for before each group of [`GROUP`]
    /// ([`Tiler::ahead`]), so that their transfers overlap the copies before them. The
    /// processor's own prefetchers do not: each fragment lies in another line, a new page
    /// every few, and each load waits for its line from memory.
    #[inline(always)]
    fn ahead(&mut self, r: &Run, left: usize, d0: usize, t: &mut impl Tiler) -> Result<(), Outside> {
        let whole = left / r.len;
        // `left` ends inside this run, so its whole fragments do too.
        let (i0, end) = (self.i, self.i + whole);
        for i in i0..end.min(i0 + AHEAD) {
            t.ahead(r.at(i));
        }
        let mut k = 0;
        while k < whole {
            let group = GROUP.min(whole - k);
            for i in (i0 + k + AHEAD..end).take(group) {
                t.ahead(r.at(i));
            }
            let dk = d0 + k * r.len;
            self.pieces(group * r.len, |s, a, l| t.piece(dk + s, a, l))?;
            k += group;
        }
        let dk = d0 + whole * r.len;
        self.pieces(left - whole * r.len, |s, a, l| t.piece(dk + s, a, l))
    }

    /// Where the next `n` bytes of the stream lie, if they lie in one fragment (their
    /// buffer offset); then advances past them. Else stays put.
    fn contiguous(&mut self, n: usize) -> Option<usize> {
        let r = *self.runs.get(self.at)?;
        if r.len - self.into < n {
            return None;
        }
        let at = r.at(self.i).wrapping_add(self.into);
        // One piece, inside the fragment: `pieces` advances past it.
        self.pieces(n, |_, _, _| Ok(())).ok()?;
        Some(at)
    }

    /// Calls `f(stream offset, buffer offset, len)` for the next `n` bytes of the stream,
    /// piece by piece, and advances.
    #[inline(always)]
    pub(crate) fn pieces(
        &mut self,
        n: usize,
        mut f: impl FnMut(usize, usize, usize) -> Result<(), Outside>,
    ) -> Result<(), Outside> {
        let mut done = 0;
        while done < n {
            let r = *self.runs.get(self.at).ok_or(Outside)?;
            if self.into == 0 && n - done >= r.len {
                // Whole fragments: the tight loop, specialised for the element sizes.
                let k = ((n - done) / r.len).min(r.count - self.i);
                let (i0, d0) = (self.i, done);
                match r.len {
                    8 => (0..k).try_for_each(|j| f(d0 + 8 * j, r.at(i0 + j), 8))?,
                    4 => (0..k).try_for_each(|j| f(d0 + 4 * j, r.at(i0 + j), 4))?,
                    l => (0..k).try_for_each(|j| f(d0 + l * j, r.at(i0 + j), l))?,
                }
                done += k * r.len;
                self.i += k;
            } else {
                let k = (r.len - self.into).min(n - done);
                f(done, r.at(self.i).wrapping_add(self.into), k)?;
                done += k;
                self.into += k;
                if self.into == r.len {
                    self.into = 0;
                    self.i += 1;
                }
            }
            if self.i == r.count {
                self.i = 0;
                self.at += 1;
            }
        }
        Ok(())
    }
}

/// The bytes of a cache line: the widest tile [`Cursor::tiles`] writes at once.
pub(crate) const LINE: usize = 64;

/// How many fragments ahead of the copy [`Cursor::ahead`] asks for the lines of a run's
/// fragments: about as many lines as a core has misses in flight (10-20 fill buffers)
/// and more, since each takes a memory latency (~100 ns) against a few nanoseconds per
/// fragment copied. Standalone, a gather of 28,900 single `u64`s 720 bytes apart from a
/// grid out of the cache took 180 us with it, 295 without.
const AHEAD: usize = 32;

/// The smallest stride of the runs [`Cursor::ahead`] walks: four lines. Closer
/// fragments lie in lines the processor's own prefetcher streams in (a column of a
/// matrix 8 `u64`s wide, a line apart: its call took 2 to 2.8 times as long with hints
/// as without).
const SPARSE: usize = 4 * LINE;

/// The fragments [`Cursor::ahead`] copies between two rounds of hints.
const GROUP: usize = 8;

/// `g` runs of the shape of `r`, side by side (run `j` at `r.off + j len`), walked
/// fragment by fragment across the runs: stream byte `d0 + (j count + i) len` is
/// fragment `i` of run `j`. The tiler's register tiles first, then one piece a fragment.
#[inline(always)]
fn tile(r: &Run, g: usize, d0: usize, len: usize, t: &mut impl Tiler) -> Result<(), Outside> {
    let first = t.block(r, g, d0)?;
    for i in first..r.count {
        let at = r.at(i);
        for j in 0..g {
            t.piece(d0 + (j * r.count + i) * len, at.wrapping_add(j * len), len)?;
        }
    }
    Ok(())
}

/// What the tiles of [`Cursor::tiles`] copy with: `g` runs side by side (a block of
/// columns), fragment `i` of run `j` being stream byte `d0 + (j count + i) len`.
trait Tiler {
    /// Whether [`ahead`](Self::ahead) asks for anything (else the copy gives no hints).
    const HINTS: bool = false;

    /// A hint: the buffer's byte `at` is copied soon ([`Source::ahead`] where the buffer
    /// is read; nothing where it is written).
    #[inline(always)]
    fn ahead(&mut self, _at: usize) {}
    /// Copies `len` bytes between stream byte `s` and buffer byte `at`.
    fn piece(&mut self, s: usize, at: usize, len: usize) -> Result<(), Outside>;
    /// Copies the first fragments of every run of the block through registers, and says
    /// how many (0 where it has no kernel for the shape).
    fn block(&mut self, r: &Run, g: usize, d0: usize) -> Result<usize, Outside>;
}

/// The stream read from `src` (stream byte `k` at `base + k`), written into `dst`.
struct Scatter<'a, S: ?Sized> {
    src: &'a S,
    base: usize,
    dst: &'a mut [u8],
}

impl<S: Source + ?Sized> Tiler for Scatter<'_, S> {
    #[inline(always)]
    fn piece(&mut self, s: usize, at: usize, len: usize) -> Result<(), Outside> {
        self.src.read(self.base.wrapping_add(s), out(self.dst, at, len)?)
    }

    #[inline(always)]
    fn block(&mut self, r: &Run, g: usize, d0: usize) -> Result<usize, Outside> {
        let mut rows = [0usize; LINE];
        for (j, row) in rows[..g].iter_mut().enumerate() {
            *row = self.base.wrapping_add(d0 + j * r.count * r.len);
        }
        lines(self.src, &rows[..g], r, self.dst)
    }
}

/// The stream read from the places in `src`, written into `out` (stream byte `k` at `k`).
struct Gather<'a, S: ?Sized> {
    src: &'a S,
    out: &'a mut [u8],
}

impl<S: Source + ?Sized> Tiler for Gather<'_, S> {
    const HINTS: bool = S::HINTS;

    #[inline(always)]
    fn ahead(&mut self, at: usize) {
        self.src.ahead(at)
    }

    #[inline(always)]
    fn piece(&mut self, s: usize, at: usize, len: usize) -> Result<(), Outside> {
        self.src.read(at, out(self.out, s, len)?)
    }

    #[inline(always)]
    fn block(&mut self, r: &Run, g: usize, d0: usize) -> Result<usize, Outside> {
        let mut rows = [0usize; LINE];
        for (j, row) in rows[..g].iter_mut().enumerate() {
            *row = d0 + j * r.count * r.len;
        }
        match (r.len, g) {
            (8, 8) => columns_to_rows::<u64, 8, S>(self.src, r, &rows[..g], self.out),
            (4, 16) => columns_to_rows::<u32, 16, S>(self.src, r, &rows[..g], self.out),
            _ => Ok(0),
        }
    }
}

/// `len` bytes of `buf` from byte `at`.
#[inline(always)]
pub(crate) fn out(buf: &mut [u8], at: usize, len: usize) -> Result<&mut [u8], Outside> {
    buf.get_mut(at..at.checked_add(len).ok_or(Outside)?).ok_or(Outside)
}

/// Where the copy loops read: a slice of this process's memory, or (in `transport`, the
/// one module that may load from it) a peer's buffer mapped here.
pub(crate) trait Source {
    /// Fills `dst` with the bytes from byte `at` on.
    ///
    /// # Errors
    ///
    /// `Outside` if they do not all lie inside the source.
    fn read(&self, at: usize, dst: &mut [u8]) -> Result<(), Outside>;

    /// The four words from byte `at` on (a row of a transpose's register tile).
    ///
    /// # Errors
    ///
    /// `Outside` if they do not all lie inside the source.
    fn four<W: Word>(&self, at: usize) -> Result<[W; 4], Outside>;

    /// Whether [`ahead`](Self::ahead) asks for anything.
    const HINTS: bool = false;

    /// A hint that byte `at` is read soon: a source that can, asks for its line now (a
    /// prefetch, in `transport`, which may); this one asks nothing. It reads nothing, so
    /// an `at` outside the source is no error.
    #[inline(always)]
    fn ahead(&self, _at: usize) {}
}

impl Source for [u8] {
    #[inline(always)]
    fn read(&self, at: usize, dst: &mut [u8]) -> Result<(), Outside> {
        let s = self.get(at..at.checked_add(dst.len()).ok_or(Outside)?).ok_or(Outside)?;
        copy_fixed(s, dst);
        Ok(())
    }

    #[inline(always)]
    fn four<W: Word>(&self, at: usize) -> Result<[W; 4], Outside> {
        let s = self.get(at..at.checked_add(4 * W::L).ok_or(Outside)?).ok_or(Outside)?;
        Ok(std::array::from_fn(|k| W::from_bytes(&s[k * W::L..(k + 1) * W::L])))
    }
}

/// The register tiles of a transpose where the kernel has the shape: fragment `i` of
/// row `j` (source byte `rows[j] + i len`) to byte `q.at(i) + j len` of `dst`, for the
/// first fragments of the rows, four at a time; says how many it moved.
#[inline(always)]
fn lines<S: Source + ?Sized>(src: &S, rows: &[usize], q: &Run, dst: &mut [u8]) -> Result<usize, Outside> {
    match (q.len, rows.len()) {
        (8, 8) => rows_to_columns::<u64, 8, S>(src, rows, q, dst),
        (4, 16) => rows_to_columns::<u32, 16, S>(src, rows, q, dst),
        _ => Ok(0),
    }
}

/// An element the register tiles move whole: `u64` or `u32`.
pub(crate) trait Word: Copy + Default {
    /// Its bytes.
    const L: usize;
    /// The word in `b` (`L` bytes), native-endian.
    fn from_bytes(b: &[u8]) -> Self;
    /// Writes the word into `b` (`L` bytes), native-endian.
    fn put(self, b: &mut [u8]);
}

/// [`Word`] for the unsigned integers of each size the tiles move.
macro_rules! words {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const L: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn from_bytes(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("a word's bytes"))
            }
            #[inline(always)]
            fn put(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes())
            }
        }
    )*};
}

words!(u64, u32);

/// A register-blocked transpose of `G` rows of `W`s into `G` columns side by side (a
/// line of the destination, `G L` = [`LINE`] bytes, per fragment): four elements of
/// every row are loaded, then written as four lines. Moves `q.count` rounded down to 4
/// fragments of each row and returns that count (`rows` is `G` long).
#[inline(always)]
fn rows_to_columns<W: Word, const G: usize, S: Source + ?Sized>(
    src: &S,
    rows: &[usize],
    q: &Run,
    dst: &mut [u8],
) -> Result<usize, Outside> {
    let mut i = 0;
    while i + 4 <= q.count {
        let mut v = [[W::default(); 4]; G];
        for (j, row) in v.iter_mut().enumerate() {
            *row = src.four::<W>(rows[j].wrapping_add(i * W::L))?;
        }
        for k in 0..4 {
            let line = out(dst, q.at(i + k), G * W::L)?;
            for (b, row) in line.chunks_exact_mut(W::L).zip(&v) {
                row[k].put(b);
            }
        }
        i += 4;
    }
    Ok(i)
}

/// The reverse of [`rows_to_columns`]: `G` columns of `W`s side by side in `src`
/// (fragment `i` of column `j` at `q.at(i) + j L`) into `G` rows of `out_buf` (row `j`
/// from byte `rows[j]`), four lines at a time.
#[inline(always)]
fn columns_to_rows<W: Word, const G: usize, S: Source + ?Sized>(
    src: &S,
    q: &Run,
    rows: &[usize],
    out_buf: &mut [u8],
) -> Result<usize, Outside> {
    let mut i = 0;
    while i + 4 <= q.count {
        let mut v = [[W::default(); G]; 4];
        for (k, line) in v.iter_mut().enumerate() {
            let mut s = [0u8; LINE];
            src.read(q.at(i + k), &mut s[..G * W::L])?;
            *line = std::array::from_fn(|j| W::from_bytes(&s[j * W::L..(j + 1) * W::L]));
        }
        for (j, &row) in rows.iter().enumerate() {
            let four = out(out_buf, row.wrapping_add(i * W::L), 4 * W::L)?;
            for (b, line) in four.chunks_exact_mut(W::L).zip(&v) {
                line[j].put(b);
            }
        }
        i += 4;
    }
    Ok(i)
}

/// Copies the bytes `from` selects in `src` onto those `to` selects in `dst`, in order
/// (a rank's own block, and packing and unpacking with one side contiguous).
///
/// # Errors
///
/// `Outside` if a fragment lies outside its buffer or the two select different lengths.
pub(crate) fn copy<S: Source + ?Sized>(
    src: &S,
    from: &Runs,
    dst: &mut [u8],
    to: &Runs,
) -> Result<(), Outside> {
    if from.bytes != to.bytes {
        return Err(Outside);
    }
    let mut w = to.cursor();
    let mut r = from.cursor();
    // Walk the side with the longer fragments, and scatter or gather each of them whole.
    let (long_from, long_to) = (mean(from), mean(to));
    if long_from >= LINE && long_to < LINE && from.fragments() > 1 && to.fragments() > 1 {
        // Rows into columns: a blocked transpose straight between the buffers. (A
        // contiguous source, the packed path's unpack, keeps the tiles of `scatter`
        // below.)
        return walk(from, to, src, dst);
    }
    if long_from.min(long_to) < LINE && from.fragments() > 1 && to.fragments() > 1 {
        // Small fragments on one side at least, and neither side contiguous: the long
        // fragments would each scatter into one column. Through a cache-sized chunk,
        // gathered and scattered in tiles (a blocked transpose), one extra copy that stays
        // in the cache.
        return chunked(src, from, dst, to);
    }
    if long_from >= long_to {
        r.pieces(from.bytes, |_, at, len| w.scatter(len, src, at, dst))
    } else {
        w.pieces(to.bytes, |_, at, len| r.gather(len, src, out(dst, at, len)?))
    }
}

/// Copies the bytes `from` selects in `src` onto those `to` selects in `dst` (the same
/// number), with no buffer between: where `to`'s runs lie side by side (columns of
/// single elements) and each of them takes its bytes from one fragment of `from` (a
/// transpose: a row of the source is a column of the destination), up to a cache line
/// of them are written together, fragment `i` of each in turn, read from as many rows,
/// each at its own pointer (a blocked transpose straight between the buffers, through
/// registers for columns of 8- and 4-byte elements); elsewhere both sides are walked in
/// stream order.
///
/// # Errors
///
/// `Outside` if the two select different lengths, or a piece lies outside `src` or
/// `dst`.
pub(crate) fn walk<S: Source + ?Sized>(
    from: &Runs,
    to: &Runs,
    src: &S,
    dst: &mut [u8],
) -> Result<(), Outside> {
    if from.bytes != to.bytes {
        return Err(Outside);
    }
    let (mut r, mut w) = (from.cursor(), to.cursor());
    let mut bases = [0usize; LINE];
    let mut done = 0;
    while done < to.bytes {
        let q = *w.runs.get(w.at).ok_or(Outside)?;
        let mut g = 0;
        if w.i == 0 && w.into == 0 && q.count > 1 && q.len < LINE {
            // The columns side by side from here (as `Cursor::tiles` groups them), each
            // from one fragment of `from`.
            let block = q.count.saturating_mul(q.len);
            let saved = r.clone();
            while g < LINE / q.len {
                match w.runs.get(w.at + g) {
                    Some(c)
                        if (c.len, c.count, c.stride) == (q.len, q.count, q.stride)
                            && c.off == q.off.wrapping_add(g * q.len) =>
                    {
                        match r.contiguous(block) {
                            Some(b) => bases[g] = b,
                            None => break,
                        }
                        g += 1;
                    }
                    _ => break,
                }
            }
            if g >= 2 {
                match q.len {
                    8 => transpose(&q, &bases[..g], 8, src, dst)?,
                    4 => transpose(&q, &bases[..g], 4, src, dst)?,
                    l => transpose(&q, &bases[..g], l, src, dst)?,
                }
                w.at += g;
                done += g * block;
                continue;
            }
            r = saved;
        }
        // The rest of this run in stream order, both sides.
        let left = ((q.count - w.i) * q.len - w.into).min(to.bytes - done);
        w.pieces(left, |_, at, len| {
            r.pieces(len, |s, from, l| src.read(from, out(dst, at.wrapping_add(s), l)?))
        })?;
        done += left;
    }
    Ok(())
}

/// The tiles of [`walk`]: fragment `i` of each of the columns of the shape of `q` side by
/// side (column `j` at `q.off + j len`) from byte `i len` of its row (at `rows[j]`): the
/// register tiles where they fit, then one fragment at a time.
#[inline(always)]
fn transpose<S: Source + ?Sized>(
    q: &Run,
    rows: &[usize],
    len: usize,
    src: &S,
    dst: &mut [u8],
) -> Result<(), Outside> {
    let first = lines(src, rows, q, dst)?;
    for i in first..q.count {
        let (at, step) = (q.at(i), i * len);
        for (j, &row) in rows.iter().enumerate() {
            src.read(row.wrapping_add(step), out(dst, at.wrapping_add(j * len), len)?)?;
        }
    }
    Ok(())
}

/// The chunk [`copy`] goes through where fragments are small: a slice of the stream that
/// stays in the cache between the gather and the scatter.
const CHUNK: usize = 32 * 1024;

/// [`copy`] through a chunk of at most [`CHUNK`] bytes (one per thread, kept).
fn chunked<S: Source + ?Sized>(src: &S, from: &Runs, dst: &mut [u8], to: &Runs) -> Result<(), Outside> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // Taken out of the cell for the copy, and put back: nothing is borrowed across it.
    let mut chunk = BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
    chunk.resize(CHUNK, 0);
    let (mut r, mut w) = (from.cursor(), to.cursor());
    let mut moved = Ok(());
    let mut done = 0;
    while done < from.bytes && moved.is_ok() {
        let n = CHUNK.min(from.bytes - done);
        moved = r.gather(n, src, &mut chunk[..n]);
        moved = moved.and_then(|()| w.scatter(n, &chunk[..n], 0, dst));
        done += n;
    }
    BUF.with(|b| *b.borrow_mut() = chunk);
    moved
}

/// The mean fragment of some runs, in bytes.
fn mean(r: &Runs) -> usize {
    r.bytes / r.fragments().max(1)
}

/// `to.copy_from_slice(from)`, with the element sizes as fixed-size copies (one load and
/// store; a length known only at run time is a call to `memcpy`).
#[inline(always)]
fn copy_fixed(from: &[u8], to: &mut [u8]) {
    match to.len() {
        8 => to.copy_from_slice(&from[..8]),
        4 => to.copy_from_slice(&from[..4]),
        _ => to.copy_from_slice(from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_column_is_one_run() {
        let frags: Vec<(usize, usize)> = (0..1000).map(|i| (i * 80, 8)).collect();
        let r = Runs::new(frags.iter().copied());
        assert_eq!(*r.runs, [Run { off: 0, len: 8, stride: 80, count: 1000 }]);
        assert_eq!((r.fragments(), r.bytes), (1000, 8000));
        assert_eq!(r.expand(), frags);
        assert!(r.check(999 * 80 + 8));
        assert!(!r.check(999 * 80 + 7));
        assert!(!r.shifted(None).check(usize::MAX));
        assert_eq!(r.shifted(Some(16)).runs[0].off, 16);
    }

    /// The columns of a matrix (runs side by side, walked in tiles) take a stream and give
    /// it back exactly as the fragment-by-fragment walk does, with partial calls.
    #[test]
    fn tiled_columns_follow_the_stream() {
        for (rows, cols, len, start) in [(13, 10, 8, 0), (5, 17, 4, 3), (9, 3, 8, 16), (64, 9, 2, 1)] {
            let row = cols * len + 5;
            let frags: Vec<(usize, usize)> =
                (0..cols).flat_map(|c| (0..rows).map(move |r| (start + r * row + c * len, len))).collect();
            let runs = Runs::new(frags.iter().copied());
            assert_eq!(runs.runs.len(), cols);
            let total = rows * cols * len;
            let stream: Vec<u8> = (0..total).map(|i| (i * 7 + i / 251) as u8).collect();
            let mut dst = vec![0u8; start + rows * row];
            let mut want = dst.clone();
            let mut at = 0;
            for &(o, l) in &frags {
                want[o..o + l].copy_from_slice(&stream[at..at + l]);
                at += l;
            }
            // In one call: whole tiles of a line of columns (the register tiles where the
            // fragments are 8 or 4 bytes), from a stream at an offset of its source.
            let mut whole = vec![0u8; dst.len()];
            let shifted: Vec<u8> = [0u8; 3].iter().chain(&stream).copied().collect();
            runs.cursor().scatter(total, &shifted[..], 3, &mut whole).unwrap();
            assert_eq!(whole, want, "{rows} x {cols} of {len}, whole");
            // In pieces of odd sizes, so that tiles start mid-run and stop short.
            let mut cur = runs.cursor();
            let mut done = 0;
            for step in [len * rows * 3 + 1, 5, len * rows * 2, total].iter().cycle() {
                let n = (*step).min(total - done);
                if n == 0 {
                    break;
                }
                let part = &stream[done..done + n];
                cur.scatter(n, part, 0, &mut dst).unwrap();
                done += n;
            }
            assert_eq!(dst, want, "{rows} x {cols} of {len}");
            let mut back = vec![0u8; total];
            runs.cursor().gather(total, &dst[..], &mut back).unwrap();
            assert_eq!(back, stream);
        }
    }

    /// The fragment-by-fragment copy: the oracle of the faster walks.
    fn by_fragments(src: &[u8], from: &Runs, dst: &mut [u8], to: &Runs) {
        let stream: Vec<u8> = from.expand().iter().flat_map(|&(o, l)| src[o..o + l].to_vec()).collect();
        let mut at = 0;
        for (o, l) in to.expand() {
            dst[o..o + l].copy_from_slice(&stream[at..at + l]);
            at += l;
        }
    }

    /// Rows into columns (a transpose's block, with odd shapes, rows longer than a column
    /// and rows that start mid-column), straight between the buffers as through the
    /// oracle; the copy routine takes this path for them.
    #[test]
    fn walked_transposes_follow_the_stream() {
        for (rows, cols, len, extra, pad) in [
            (13, 10, 8, 0, 0),
            (5, 17, 4, 0, 3),
            (9, 3, 8, 8, 16),
            (64, 9, 2, 0, 1),
            (40, 40, 8, 0, 0),
            (3, 70, 1, 0, 0),
        ] {
            // Destination: `cols` columns of `rows` fragments of `len`, side by side.
            let row = cols * len + pad;
            let to =
                Runs::new((0..cols).flat_map(|c| (0..rows).map(move |r| (pad + r * row + c * len, len))));
            // Source: rows of `rows * len + extra` bytes (one column each, and a bit more when
            // `extra` > 0, so that the later columns start mid-row), 7 bytes apart.
            let total = rows * cols * len;
            let rlen = rows * len + extra;
            let nrows = total.div_ceil(rlen);
            let from = Runs::new((0..nrows).map(|k| (k * (rlen + 7), rlen.min(total - k * rlen))));
            assert_eq!(from.bytes, to.bytes);
            let src: Vec<u8> = (0..nrows * (rlen + 7)).map(|i| (i * 13 + i / 253) as u8).collect();
            let mut want = vec![0u8; pad + rows * row];
            by_fragments(&src, &from, &mut want, &to);
            let mut got = vec![0u8; want.len()];
            copy(&src[..], &from, &mut got, &to).unwrap();
            assert_eq!(got, want, "{rows} x {cols} of {len}");
            let mut walked = vec![0u8; want.len()];
            walk(&from, &to, &src[..], &mut walked).unwrap();
            assert_eq!(walked, want, "{rows} x {cols} of {len}");
        }
    }

    proptest! {
        /// Runs keep the fragments and their order; `copy` between any two lists of the
        /// same length moves the bytes in stream order, as the fragment-by-fragment walk.
        #[test]
        fn runs_are_the_fragments(
            a in proptest::collection::vec((0usize..64, 0usize..9), 0..40),
            b in proptest::collection::vec((0usize..64, 0usize..9), 0..40),
        ) {
            let ra = Runs::new(a.iter().copied());
            let want: Vec<(usize, usize)> = a.iter().copied().filter(|f| f.1 > 0).collect();
            prop_assert_eq!(ra.expand(), want.clone());
            // Destination: b's lengths, laid out without overlap, cut to a's total.
            let total: usize = want.iter().map(|f| f.1).sum();
            let mut dst_frags = Vec::new();
            let (mut left, mut at) = (total, 0);
            for &(gap, len) in &b {
                if left == 0 { break; }
                let l = len.max(1).min(left);
                dst_frags.push((at + gap % 3, l));
                at += gap % 3 + l;
                left -= l;
            }
            if left > 0 { dst_frags.push((at, left)); at += left; }
            let rb = Runs::new(dst_frags.iter().copied());
            let src: Vec<u8> = (0..80u8).collect();
            let mut dst = vec![0u8; at];
            prop_assert!(ra.check(src.len()) && rb.check(dst.len()));
            copy(&src[..], &ra, &mut dst, &rb).unwrap();
            let stream: Vec<u8> = want.iter().flat_map(|&(o, l)| src[o..o + l].to_vec()).collect();
            let got: Vec<u8> = dst_frags.iter().flat_map(|&(o, l)| dst[o..o + l].to_vec()).collect();
            prop_assert_eq!(got, stream);
            // The walk, either way round, moves the same bytes.
            let mut walked = vec![0u8; at];
            walk(&ra, &rb, &src[..], &mut walked).unwrap();
            prop_assert_eq!(&walked, &dst);
            let mut back = vec![0u8; 80];
            let mut oracle = back.clone();
            by_fragments(&dst, &rb, &mut oracle, &ra);
            walk(&rb, &ra, &dst[..], &mut back).unwrap();
            prop_assert_eq!(back, oracle);
        }
    }
}
