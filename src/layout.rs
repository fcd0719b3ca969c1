//! Non-contiguous layouts of a buffer: which elements, in which order.
//!
//! A [`Layout`] describes, in elements of the buffer's type `T`, the positions a
//! collective reads from (send side) or writes to (receive side): MPI's derived datatypes
//! restricted to one element type. Its meaning is MPI's **type map**: an *ordered*
//! sequence of element offsets from the start of the buffer. [`Layout::flatten`] gives it
//! as ordered fragments `(offset, len)`; [`Layout::pack`] and [`Layout::unpack`] move the
//! selected elements to and from a contiguous buffer in that order, and are the reference
//! semantics every faster path must match.
//!
//! # Extent
//!
//! As in MPI, every layout has a *lower bound* and an *extent*, which say where the next
//! copy of it starts when it is repeated (by [`Layout::contiguous_of`], [`Layout::vector_of`],
//! [`Layout::indexed_of`], or by a collective, whose `k`-th block is the layout shifted by
//! `k` times its extent):
//!
//! - an element: lower bound 0, extent 1;
//! - a contiguous, vector or indexed layout: from its lowest to one past its highest
//!   element (more exactly, from the lowest lower bound to the highest upper bound of
//!   the copies of its unit it places; blocks of length 0 place none);
//! - a subarray: the whole array (lower bound 0, extent the product of `sizes`), as
//!   `MPI_Type_create_subarray`;
//! - [`Layout::resized`]`(e)`: lower bound 0, extent `e`, as
//!   `MPI_Type_create_resized(t, 0, e)`: the way to interleave blocks, as the columns of
//!   a matrix transpose do;
//! - a layout with no elements and no explicit bounds: extent 0.
//!
//! Strides and displacements of vector and indexed layouts count in extents of their
//! unit, as `MPI_Type_vector` and `MPI_Type_indexed` do.
//!
//! # Validity
//!
//! Constructors refuse arithmetic that overflows (every offset fits an `isize`) and
//! shapes that disagree. [`Layout::check`] refuses a layout that reaches outside a buffer
//! of a given length; [`Layout::check_writable`] also refuses one that selects an element
//! twice (which a receive side would write twice). Nothing here panics on any input,
//! and nothing reads or writes outside a buffer.
//!
//! Memory: a layout stores its parameters (an indexed layout its block lists), not its
//! type map; [`Layout::flatten`] allocates one pair per fragment.

use crate::error::{Error, Result};
use crate::pod::Pod;
use mpi::datatype::UserDatatype;
use mpi::{Address, Count};
use std::sync::Arc;

pub(crate) mod runs;

/// Why a layout is refused: the `reason` of [`Error::InvalidLayout`].
pub(crate) const REASONS: [&str; 8] = [
    "its offsets overflow",
    "its parameters disagree",
    "it selects an element before the buffer's start",
    "it selects an element past the buffer's end",
    "it selects an element twice, which a receive side would write twice",
    "the send and receive layouts select different numbers of elements",
    "a count or displacement does not fit MPI's int",
    "the call takes one layout per rank, size() of them",
];
const OVERFLOW: &str = REASONS[0];
const SHAPE: &str = REASONS[1];
const BEFORE: &str = REASONS[2];
const PAST: &str = REASONS[3];
const TWICE: &str = REASONS[4];
const MPI_INT: &str = REASONS[6];
/// The `reason` of a send and a receive layout that select different numbers of elements.
pub(crate) const COUNTS: &str = REASONS[5];
/// The `reason` of a list of per-rank layouts that is not one layout per rank.
pub(crate) const PER_RANK: &str = REASONS[7];

/// The error of a layout refused outside a collective (no rank to name).
fn invalid(which: &'static str, reason: &'static str) -> Error {
    Error::InvalidLayout { rank: None, culprit: None, which, reason }
}

/// Which elements of a buffer of `T`, in which order: MPI's derived datatypes over one
/// element type (contiguous, vector, indexed, subarray, resized, and compositions).
///
/// See the book's layouts chapter for the extent rules. A `Layout` is cheap to
/// clone (its unit is shared).
///
/// # Examples
///
/// The second column of a 3 x 4 row-major matrix:
///
/// ```
/// use zcoll::Layout;
/// let column = Layout::vector(3, 1, 4)?;
/// let m: Vec<u32> = (0..12).collect();
/// assert_eq!(column.pack(&m[1..])?, [1, 5, 9]);
/// assert_eq!(column.flatten(), [(0, 1), (4, 1), (8, 1)]);
/// assert_eq!((column.count(), column.extent()), (3, 9));
/// # Ok::<(), zcoll::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Shape,
    /// The number of elements selected (with repetitions).
    count: usize,
    /// Lower and upper bound (`None`: no elements and no explicit bounds).
    bounds: Option<(isize, isize)>,
    /// The lowest and highest offset of an element (`None`: no elements).
    span: Option<(isize, isize)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    Element,
    /// Copies of `unit` in blocks `(start, len)`, both counted in extents of `unit`.
    Blocks {
        kind: Kind,
        unit: Arc<Layout>,
    },
    Subarray {
        sizes: Arc<[usize]>,
        subsizes: Arc<[usize]>,
        starts: Arc<[usize]>,
    },
    Resized {
        extent: usize,
        inner: Arc<Layout>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Contiguous(usize),
    Vector { count: usize, blocklength: usize, stride: isize },
    Indexed { blocklengths: Arc<[usize]>, displacements: Arc<[isize]> },
}

impl Kind {
    /// The blocks `(start, len)` in extents of the unit, in type-map order.
    fn blocks(&self) -> Box<dyn Iterator<Item = (isize, usize)> + '_> {
        match self {
            Kind::Contiguous(n) => Box::new(std::iter::once((0, *n))),
            &Kind::Vector { count, blocklength, stride } => {
                // Every start fits: the constructor checked the last one, `(count-1)*stride`.
                Box::new((0..count).map(move |i| (i as isize * stride, blocklength)))
            }
            Kind::Indexed { blocklengths, displacements } => {
                Box::new(displacements.iter().zip(blocklengths.iter()).map(|(&d, &l)| (d, l)))
            }
        }
    }

    /// Blocks whose bounds enclose those of every block: all of an indexed layout's, the
    /// first and last of a vector's (its starts are linear in the block's index). `None`
    /// if the last start of a vector overflows.
    fn extremes(&self) -> Option<Vec<(isize, usize)>> {
        match self {
            &Kind::Vector { count, blocklength, stride } if count > 2 => {
                let last = isize::try_from(count - 1).ok()?.checked_mul(stride)?;
                Some(vec![(0, blocklength), (last, blocklength)])
            }
            _ => Some(self.blocks().collect()),
        }
    }
}

/// `lo..=hi` of `len` copies of something spanning `lo..=hi` (or `lo..hi`, for bounds) at
/// `start * ext`, `(start + 1) * ext`, ...: `None` on overflow.
fn place(start: isize, len: usize, ext: isize, (lo, hi): (isize, isize)) -> Option<(isize, isize)> {
    let first = start.checked_mul(ext)?;
    let last = start.checked_add(isize::try_from(len - 1).ok()?)?.checked_mul(ext)?;
    Some((first.checked_add(lo)?, last.checked_add(hi)?))
}

fn widen(acc: Option<(isize, isize)>, (lo, hi): (isize, isize)) -> Option<(isize, isize)> {
    Some(acc.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))))
}

/// Appends a fragment, merging it with the previous one when adjacent.
fn push(out: &mut Vec<(isize, usize)>, offset: isize, len: usize) {
    if len == 0 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.0 + last.1 as isize == offset {
            last.1 += len;
            return;
        }
    }
    out.push((offset, len));
}

impl Layout {
    /// One element at offset 0 (extent 1): the unit of every other constructor.
    ///
    /// # Examples
    ///
    /// ```
    /// let one = zcoll::Layout::element();
    /// assert_eq!((one.count(), one.extent(), one.flatten()), (1, 1, vec![(0, 1)]));
    /// ```
    pub fn element() -> Layout {
        Layout { shape: Shape::Element, count: 1, bounds: Some((0, 1)), span: Some((0, 0)) }
    }

    /// `count` consecutive elements (`MPI_Type_contiguous`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(zcoll::Layout::contiguous(5)?.flatten(), [(0, 5)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if `count` does not fit an `isize`.
    pub fn contiguous(count: usize) -> Result<Layout> {
        Layout::contiguous_of(count, &Layout::element())
    }

    /// `count` blocks of `blocklength` elements, block `i` starting at `i * stride`
    /// (`MPI_Type_vector`; `stride` may be negative or 0).
    ///
    /// # Examples
    ///
    /// ```
    /// let v = zcoll::Layout::vector(3, 2, 5)?;
    /// assert_eq!(v.flatten(), [(0, 2), (5, 2), (10, 2)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if an offset or the count overflows.
    pub fn vector(count: usize, blocklength: usize, stride: isize) -> Result<Layout> {
        Layout::vector_of(count, blocklength, stride, &Layout::element())
    }

    /// Blocks of `blocklengths[i]` elements at `displacements[i]` (`MPI_Type_indexed`), in
    /// this order (displacements need not increase, and may be negative).
    ///
    /// # Examples
    ///
    /// ```
    /// let x = zcoll::Layout::indexed(&[2, 0, 1], &[4, 9, 0])?;
    /// assert_eq!(x.flatten(), [(4, 2), (0, 1)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if the two slices differ in length, or an offset or the
    /// count overflows.
    pub fn indexed(blocklengths: &[usize], displacements: &[isize]) -> Result<Layout> {
        Layout::indexed_of(blocklengths, displacements, &Layout::element())
    }

    /// `count` consecutive copies of `unit` (`MPI_Type_contiguous(count, unit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use zcoll::Layout;
    /// let pair = Layout::indexed(&[1, 1], &[0, 2])?; // extent 3
    /// assert_eq!(Layout::contiguous_of(2, &pair)?.flatten(), [(0, 1), (2, 2), (5, 1)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if an offset or the count overflows.
    pub fn contiguous_of(count: usize, unit: &Layout) -> Result<Layout> {
        Layout::blocks(Kind::Contiguous(count), unit)
    }

    /// `count` blocks of `blocklength` copies of `unit`, block `i` starting at
    /// `i * stride` extents of `unit` (`MPI_Type_vector(count, blocklength, stride, unit)`).
    ///
    /// # Examples
    ///
    /// A 2 x 2 tile at the corner of a 4 x 4 matrix, repeated down a column of tiles:
    ///
    /// ```
    /// use zcoll::Layout;
    /// let tile = Layout::vector(2, 2, 4)?.resized(8)?; // 2 rows of a 4-wide matrix
    /// let column = Layout::vector_of(2, 1, 1, &tile)?;
    /// assert_eq!(column.flatten(), [(0, 2), (4, 2), (8, 2), (12, 2)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if an offset or the count overflows.
    pub fn vector_of(count: usize, blocklength: usize, stride: isize, unit: &Layout) -> Result<Layout> {
        Layout::blocks(Kind::Vector { count, blocklength, stride }, unit)
    }

    /// Blocks of `blocklengths[i]` copies of `unit` at `displacements[i]` extents of
    /// `unit` (`MPI_Type_indexed(.., unit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use zcoll::Layout;
    /// let pair = Layout::contiguous(2)?;
    /// assert_eq!(Layout::indexed_of(&[1, 2], &[3, 0], &pair)?.flatten(), [(6, 2), (0, 4)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if the two slices differ in length, or an offset or the
    /// count overflows.
    pub fn indexed_of(blocklengths: &[usize], displacements: &[isize], unit: &Layout) -> Result<Layout> {
        if blocklengths.len() != displacements.len() {
            return Err(invalid("layout", SHAPE));
        }
        let kind = Kind::Indexed { blocklengths: blocklengths.into(), displacements: displacements.into() };
        Layout::blocks(kind, unit)
    }

    fn blocks(kind: Kind, unit: &Layout) -> Result<Layout> {
        let overflow = || invalid("layout", OVERFLOW);
        let ext = isize::try_from(unit.extent()).map_err(|_| overflow())?;
        let (mut bounds, mut span) = (None, None);
        let extremes = match unit.bounds {
            // An empty unit without bounds places nothing: no offset is ever computed.
            None => Vec::new(),
            Some(_) => kind.extremes().ok_or_else(overflow)?,
        };
        for (start, len) in extremes.into_iter().filter(|&(_, len)| len > 0) {
            if let Some(b) = unit.bounds {
                bounds = widen(bounds, place(start, len, ext, b).ok_or_else(overflow)?);
            }
            if let Some(s) = unit.span {
                span = widen(span, place(start, len, ext, s).ok_or_else(overflow)?);
            }
        }
        let units = match &kind {
            Kind::Contiguous(n) => Some(*n),
            Kind::Vector { count, blocklength, .. } => count.checked_mul(*blocklength),
            Kind::Indexed { blocklengths, .. } => {
                blocklengths.iter().try_fold(0usize, |acc, &l| acc.checked_add(l))
            }
        };
        let count = units.and_then(|u| u.checked_mul(unit.count)).ok_or_else(overflow)?;
        // Every offset, fragment end and count fits an `isize`, so `flatten` and `pack`
        // never overflow. (A resized unit's elements may reach past its upper bound, so
        // the span's end is checked on its own.)
        if isize::try_from(count).is_err() || span.is_some_and(|(_, hi)| hi == isize::MAX) {
            return Err(overflow());
        }
        Ok(Layout { shape: Shape::Blocks { kind, unit: Arc::new(unit.clone()) }, count, bounds, span })
    }

    /// The `subsizes` block starting at `starts` of a row-major (C order) array of
    /// `sizes`, in row-major order (`MPI_Type_create_subarray` with `MPI_ORDER_C`). Its
    /// lower bound is 0 and its extent the whole array, as MPI's.
    ///
    /// # Examples
    ///
    /// The 2 x 2 middle of a 4 x 4 array:
    ///
    /// ```
    /// let mid = zcoll::Layout::subarray(&[4, 4], &[2, 2], &[1, 1])?;
    /// assert_eq!(mid.flatten(), [(5, 2), (9, 2)]);
    /// assert_eq!(mid.extent(), 16);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if the slices differ in length or are empty, if a block
    /// reaches past its array (`starts[i] + subsizes[i] > sizes[i]`), or if the array's
    /// size overflows.
    pub fn subarray(sizes: &[usize], subsizes: &[usize], starts: &[usize]) -> Result<Layout> {
        let n = sizes.len();
        if n == 0 || subsizes.len() != n || starts.len() != n {
            return Err(invalid("layout", SHAPE));
        }
        for i in 0..n {
            match starts[i].checked_add(subsizes[i]) {
                Some(end) if end <= sizes[i] => {}
                _ => return Err(invalid("layout", SHAPE)),
            }
        }
        let overflow = || invalid("layout", OVERFLOW);
        let total = sizes.iter().try_fold(1usize, |a, &s| a.checked_mul(s)).ok_or_else(overflow)?;
        let total = isize::try_from(total).map_err(|_| overflow())?;
        let count: usize = subsizes.iter().product(); // <= total
                                                      // Strides of a row-major array: all <= total, so every offset below fits.
        let span = (count > 0).then(|| {
            let (mut lo, mut hi, mut stride) = (0isize, 0isize, 1isize);
            for i in (0..n).rev() {
                lo += starts[i] as isize * stride;
                hi += (starts[i] + subsizes[i] - 1) as isize * stride;
                stride *= sizes[i] as isize;
            }
            (lo, hi)
        });
        let shape = Shape::Subarray { sizes: sizes.into(), subsizes: subsizes.into(), starts: starts.into() };
        Ok(Layout { shape, count, bounds: Some((0, total)), span })
    }

    /// This layout with lower bound 0 and extent `extent`
    /// (`MPI_Type_create_resized(self, 0, extent)`): the type map is unchanged; copies of
    /// it (in a composition or a collective's blocks) start `extent` elements apart.
    ///
    /// # Examples
    ///
    /// The `k`-th of 3 column blocks of a 2 x 6 row-major matrix, each 2 columns wide,
    /// start 2 elements apart:
    ///
    /// ```
    /// use zcoll::Layout;
    /// let block = Layout::vector(2, 2, 6)?.resized(2)?;
    /// let all = Layout::contiguous_of(3, &block)?;
    /// assert_eq!(all.flatten(), [(0, 2), (6, 2), (2, 2), (8, 2), (4, 2), (10, 2)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if `extent` does not fit an `isize`.
    pub fn resized(&self, extent: usize) -> Result<Layout> {
        let ub = isize::try_from(extent).map_err(|_| invalid("layout", OVERFLOW))?;
        let inner = match &self.shape {
            Shape::Resized { inner, .. } => inner.clone(),
            _ => Arc::new(self.clone()),
        };
        Ok(Layout {
            shape: Shape::Resized { extent, inner },
            count: self.count,
            bounds: Some((0, ub)),
            span: self.span,
        })
    }

    /// The number of elements the layout selects (counting an element selected twice
    /// twice): the length of its packed form.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(zcoll::Layout::subarray(&[4, 5], &[2, 3], &[1, 1])?.count(), 6);
    /// assert_eq!(zcoll::Layout::vector(4, 1, 0)?.count(), 4); // one element, four times
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn count(&self) -> usize {
        self.count
    }

    /// The extent: how many elements apart consecutive copies of the layout start.
    ///
    /// # Examples
    ///
    /// ```
    /// use zcoll::Layout;
    /// assert_eq!(Layout::indexed(&[1, 0, 2], &[2, 9, 5])?.extent(), 5); // 2 ..= 6
    /// assert_eq!(Layout::subarray(&[4, 5], &[2, 3], &[1, 1])?.extent(), 20);
    /// assert_eq!(Layout::vector(3, 1, 4)?.resized(1)?.extent(), 1);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn extent(&self) -> usize {
        self.bounds.map_or(0, |(lb, ub)| (ub - lb) as usize)
    }

    /// The lower bound (see the book's layouts chapter); 0 for a layout with no
    /// elements and no explicit bounds.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(zcoll::Layout::indexed(&[1, 2], &[7, 3])?.lower_bound(), 3);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn lower_bound(&self) -> isize {
        self.bounds.map_or(0, |(lb, _)| lb)
    }

    /// The type map as ordered fragments `(offset, len)` in elements: adjacent fragments
    /// merged, empty ones dropped. Offsets may be negative or repeat (a send layout may
    /// read an element twice).
    ///
    /// # Examples
    ///
    /// Blocks of length 0 vanish, and blocks that touch merge:
    ///
    /// ```
    /// let x = zcoll::Layout::indexed(&[2, 0, 3, 1], &[0, 1, 2, 9])?;
    /// assert_eq!(x.flatten(), [(0, 5), (9, 1)]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    pub fn flatten(&self) -> Vec<(isize, usize)> {
        let mut out = Vec::new();
        self.flatten_at(0, &mut out);
        out
    }

    /// Appends the fragments of this layout shifted by `shift` to `out`. Every offset fits:
    /// the constructors checked the extreme ones.
    fn flatten_at(&self, shift: isize, out: &mut Vec<(isize, usize)>) {
        match &self.shape {
            Shape::Element => push(out, shift, 1),
            Shape::Resized { inner, .. } => inner.flatten_at(shift, out),
            Shape::Subarray { sizes, subsizes, starts } => {
                let n = sizes.len();
                if self.count == 0 {
                    return;
                }
                // Walk the rows (every index but the last) in row-major order.
                let mut idx = vec![0usize; n - 1];
                loop {
                    let mut off = 0isize;
                    for i in 0..n {
                        let at = starts[i] + if i < n - 1 { idx[i] } else { 0 };
                        off = off * sizes[i] as isize + at as isize;
                    }
                    push(out, shift + off, subsizes[n - 1]);
                    let mut i = n - 1;
                    loop {
                        if i == 0 {
                            return;
                        }
                        i -= 1;
                        idx[i] += 1;
                        if idx[i] < subsizes[i] {
                            break;
                        }
                        idx[i] = 0;
                    }
                }
            }
            Shape::Blocks { kind, unit } => {
                let unit_frags = unit.flatten();
                let ext = unit.extent() as isize;
                let dense = matches!(unit_frags[..], [(_, l)] if l as isize == ext);
                if unit_frags.is_empty() {
                    return;
                }
                for (start, len) in kind.blocks().filter(|&(_, len)| len > 0) {
                    let base = shift + start * ext;
                    if dense {
                        push(out, base + unit_frags[0].0, len * ext as usize);
                        continue;
                    }
                    for j in 0..len as isize {
                        for &(o, l) in &unit_frags {
                            push(out, base + j * ext + o, l);
                        }
                    }
                }
            }
        }
    }

    /// Checks that every element the layout selects lies in a buffer of `len` elements.
    ///
    /// # Examples
    ///
    /// ```
    /// let column = zcoll::Layout::vector(3, 1, 4)?;
    /// assert!(column.check(9).is_ok());
    /// assert!(column.check(8).is_err());
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` (with `rank` and `culprit` `None`) if an element lies before
    /// offset 0 or at or past `len`.
    pub fn check(&self, len: usize) -> Result<()> {
        match self.span {
            Some((lo, _)) if lo < 0 => Err(invalid("layout", BEFORE)),
            Some((_, hi)) if hi as usize >= len => Err(invalid("layout", PAST)),
            _ => Ok(()),
        }
    }

    /// [`check`](Self::check), and that no element is selected twice: what a receive
    /// side needs, where an element selected twice would be written twice.
    ///
    /// It costs one [`flatten`](Self::flatten) and a sort of the fragments.
    ///
    /// # Examples
    ///
    /// ```
    /// let twice = zcoll::Layout::vector(2, 3, 2)?; // 0..3 and 2..5 overlap at 2
    /// assert!(twice.check(5).is_ok());
    /// assert!(twice.check_writable(5).is_err());
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As `check`, and `Error::InvalidLayout` if two fragments overlap.
    pub fn check_writable(&self, len: usize) -> Result<()> {
        self.check(len)?;
        // Distinct elements inside `0..len` number at most `len`: more means a repeat, and
        // the flattening below is bounded by `len`.
        if self.count > len {
            return Err(invalid("layout", TWICE));
        }
        let mut frags = self.flatten();
        frags.sort_unstable();
        match frags.windows(2).any(|w| w[0].0 + w[0].1 as isize > w[1].0) {
            true => Err(invalid("layout", TWICE)),
            false => Ok(()),
        }
    }

    /// The selected elements of `buf`, in type-map order (`MPI_Pack`'s order).
    ///
    /// # Examples
    ///
    /// ```
    /// let every_other = zcoll::Layout::vector(3, 1, 2)?;
    /// assert_eq!(every_other.pack(&[1, 2, 3, 4, 5])?, [1, 3, 5]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check)`(buf.len())`.
    pub fn pack<T: Copy>(&self, buf: &[T]) -> Result<Vec<T>> {
        self.check(buf.len())?;
        let mut out = Vec::with_capacity(self.count);
        for (o, l) in self.flatten() {
            out.extend_from_slice(&buf[o as usize..o as usize + l]);
        }
        Ok(out)
    }

    /// Packs the selected elements of `buf` into `out` (of exactly
    /// [`count`](Self::count) elements), in type-map order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut out = [0u8; 2];
    /// zcoll::Layout::indexed(&[1, 1], &[3, 0])?.pack_into(b"abcd", &mut out)?;
    /// assert_eq!(&out, b"da");
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As `check(buf.len())`; `Error::BufferSize` (with `rank` -1) if `out.len()` is not
    /// `count()`. `out` is unchanged on error.
    pub fn pack_into<T: Copy>(&self, buf: &[T], out: &mut [T]) -> Result<()> {
        self.check(buf.len())?;
        self.fits("packed", out.len())?;
        let mut at = 0;
        for (o, l) in self.flatten() {
            out[at..at + l].copy_from_slice(&buf[o as usize..o as usize + l]);
            at += l;
        }
        Ok(())
    }

    /// Writes `packed` (of exactly [`count`](Self::count) elements) to the selected
    /// elements of `buf`, in type-map order (`MPI_Unpack`); the other elements of `buf`
    /// keep their values.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut m = [0u32; 6];
    /// zcoll::Layout::vector(2, 1, 3)?.unpack(&[7, 8], &mut m)?;
    /// assert_eq!(m, [7, 0, 0, 8, 0, 0]);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`check_writable`](Self::check_writable)`(buf.len())`; `Error::BufferSize` (with
    /// `rank` -1) if `packed.len()` is not `count()`. `buf` is unchanged on error.
    pub fn unpack<T: Copy>(&self, packed: &[T], buf: &mut [T]) -> Result<()> {
        self.check_writable(buf.len())?;
        self.fits("packed", packed.len())?;
        let mut at = 0;
        for (o, l) in self.flatten() {
            buf[o as usize..o as usize + l].copy_from_slice(&packed[at..at + l]);
            at += l;
        }
        Ok(())
    }

    /// The rsmpi datatype with this type map and these bounds, over `T`'s datatype: for a
    /// program that hands a layout to MPI itself, and as the oracle of tests (zcoll's legs
    /// between nodes pack layouts into contiguous parts instead).
    ///
    /// Contiguous, vector and indexed layouts map to `MPI_Type_contiguous`, `_vector` and
    /// `_indexed` of their unit's datatype; a subarray to nested `MPI_Type_create_hvector`s
    /// placed by `MPI_Type_create_hindexed` and resized to the whole array (the type map
    /// and bounds of `MPI_Type_create_subarray`); a resized layout to
    /// `MPI_Type_create_resized`. MPI must be initialised.
    ///
    /// The library's own datatype engine then decides what moves, and has its faults: Open
    /// MPI 4.1.4 gives `Layout::vector_of(2, 1, -1, &Layout::indexed(&[1], &[3])?.resized(1)?)`
    /// over `u8` (and the same C datatype over `MPI_BYTE`) the lower bound 0 instead of
    /// -1, and moves the wrong bytes; MPICH 4.0.2 gets it right, and so do both over
    /// `u64`. zcoll's own collectives do not use these datatypes to move a layout.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use mpi::traits::*;
    /// let universe = mpi::initialize().unwrap();
    /// let world = universe.world();
    /// let column = zcoll::Layout::vector(4, 1, 4)?.to_datatype::<f64>()?;
    /// let mut m = [0.0f64; 16];
    /// // The first column of a 4 x 4 matrix from rank 0 to every rank.
    /// // SAFETY: one `column` reaches elements 0, 4, 8 and 12 of `m`, all within its 16
    /// // (`Layout::check(16)` would say so), so MPI writes only inside the buffer.
    /// let mut view = unsafe { mpi::datatype::MutView::with_count_and_datatype(&mut m[..], 1, &column) };
    /// world.process_at_rank(0).broadcast_into(&mut view);
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::InvalidLayout` if a count, stride, displacement or byte offset does not fit
    /// MPI's `int` or `MPI_Aint`.
    pub fn to_datatype<T: Pod>(&self) -> Result<UserDatatype> {
        let int = |x: usize| Count::try_from(x).map_err(|_| invalid("layout", MPI_INT));
        let signed = |x: isize| Count::try_from(x).map_err(|_| invalid("layout", MPI_INT));
        let size = std::mem::size_of::<T>() as isize;
        let bytes =
            |x: isize| x.checked_mul(size).map(|b| b as Address).ok_or_else(|| invalid("layout", MPI_INT));
        Ok(match &self.shape {
            Shape::Element => UserDatatype::contiguous(1, &T::equivalent_datatype()),
            Shape::Resized { extent, inner } => {
                crate::to_mpi::resized(&inner.to_datatype::<T>()?, 0, bytes(*extent as isize)?)
            }
            Shape::Blocks { kind, unit } => {
                let u = unit.to_datatype::<T>()?;
                match kind {
                    Kind::Contiguous(n) => UserDatatype::contiguous(int(*n)?, &u),
                    &Kind::Vector { count, blocklength, stride } => {
                        UserDatatype::vector(int(count)?, int(blocklength)?, signed(stride)?, &u)
                    }
                    Kind::Indexed { blocklengths, displacements } => {
                        let l: Vec<Count> = blocklengths.iter().map(|&l| int(l)).collect::<Result<_>>()?;
                        let d: Vec<Count> =
                            displacements.iter().map(|&d| signed(d)).collect::<Result<_>>()?;
                        UserDatatype::indexed(&l, &d, &u)
                    }
                }
            }
            Shape::Subarray { sizes, subsizes, starts: _ } => {
                let n = sizes.len();
                // Innermost: one row of the block; then each outer dimension repeats the
                // inner type `subsizes[i]` times, one array row of dimension `i` apart.
                let mut t = UserDatatype::contiguous(int(subsizes[n - 1])?, &T::equivalent_datatype());
                let mut stride = sizes[n - 1] as isize;
                for i in (0..n - 1).rev() {
                    t = UserDatatype::heterogeneous_vector(int(subsizes[i])?, 1, bytes(stride)?, &t);
                    stride *= sizes[i] as isize;
                }
                let first = self.span.map_or(0, |(lo, _)| lo);
                let placed = UserDatatype::heterogeneous_indexed(&[1], &[bytes(first)?], &t);
                crate::to_mpi::resized(&placed, 0, bytes(self.extent() as isize)?)
            }
        })
    }

    fn fits(&self, which: &'static str, found: usize) -> Result<()> {
        match found == self.count {
            true => Ok(()),
            false => Err(Error::BufferSize { rank: -1, which, expected: self.count, found }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The type map element by element, straight from MPI's definitions: the oracle of
    /// `flatten`, written without fragments or merging.
    fn naive(l: &Layout) -> Vec<isize> {
        match &l.shape {
            Shape::Element => vec![0],
            Shape::Resized { inner, .. } => naive(inner),
            Shape::Subarray { sizes, subsizes, starts } => {
                let mut out = Vec::new();
                let total: usize = subsizes.iter().product();
                for k in 0..total {
                    // The k-th index tuple of the block in row-major order.
                    let (mut rest, mut off, mut stride) = (k, 0isize, 1isize);
                    for i in (0..sizes.len()).rev() {
                        off += (starts[i] + rest % subsizes[i]) as isize * stride;
                        rest /= subsizes[i];
                        stride *= sizes[i] as isize;
                    }
                    out.push(off);
                }
                out
            }
            Shape::Blocks { kind, unit } => {
                let (u, ext) = (naive(unit), unit.extent() as isize);
                let mut out = Vec::new();
                for (start, len) in kind.blocks() {
                    for j in 0..len as isize {
                        out.extend(u.iter().map(|o| (start + j) * ext + o));
                    }
                }
                out
            }
        }
    }

    fn elements(frags: &[(isize, usize)]) -> Vec<isize> {
        frags.iter().flat_map(|&(o, l)| o..o + l as isize).collect()
    }

    /// An independent verdict on a layout against a buffer of `len`: from the element list.
    fn oracle(elems: &[isize], len: usize, writable: bool) -> bool {
        let inside = elems.iter().all(|&o| o >= 0 && (o as usize) < len);
        let mut seen = vec![false; len];
        inside && (!writable || elems.iter().all(|&o| !std::mem::replace(&mut seen[o as usize], true)))
    }

    /// Random layouts, nested up to three levels, small enough to walk naively.
    fn layouts() -> impl Strategy<Value = Layout> {
        let leaf = prop_oneof![
            Just(Layout::element()),
            (0usize..6).prop_map(|n| Layout::contiguous(n).unwrap()),
            (0usize..4, 0usize..4, -6isize..7).prop_map(|(c, b, s)| Layout::vector(c, b, s).unwrap()),
            proptest::collection::vec((0usize..4, -5isize..12), 0..4).prop_map(|bs| {
                let (l, d): (Vec<_>, Vec<_>) = bs.into_iter().unzip();
                Layout::indexed(&l, &d).unwrap()
            }),
            (proptest::collection::vec((1usize..5, 0usize..5, 0usize..5), 1..4)).prop_map(|dims| {
                let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
                let subsizes: Vec<usize> = dims.iter().map(|d| d.1 % (d.0 + 1)).collect();
                let starts: Vec<usize> =
                    dims.iter().zip(&subsizes).map(|(d, s)| d.2 % (d.0 - s + 1)).collect();
                Layout::subarray(&sizes, &subsizes, &starts).unwrap()
            }),
        ];
        leaf.prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                (0usize..3, inner.clone()).prop_map(|(n, u)| Layout::contiguous_of(n, &u).unwrap()),
                (0usize..3, 0usize..3, -3isize..4, inner.clone())
                    .prop_map(|(c, b, s, u)| Layout::vector_of(c, b, s, &u).unwrap()),
                (proptest::collection::vec((0usize..3, -3isize..5), 0..3), inner.clone()).prop_map(
                    |(bs, u)| {
                        let (l, d): (Vec<_>, Vec<_>) = bs.into_iter().unzip();
                        Layout::indexed_of(&l, &d, &u).unwrap()
                    }
                ),
                (0usize..9, inner).prop_map(|(e, u)| u.resized(e).unwrap()),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// `flatten` is the naive walk, merged: same elements in the same order, no empty
        /// fragment, no two adjacent fragments left unmerged; `count` and the span agree.
        #[test]
        fn flatten_is_the_type_map(l in layouts()) {
            let frags = l.flatten();
            let walk = naive(&l);
            prop_assert_eq!(elements(&frags), walk.clone());
            prop_assert!(frags.iter().all(|&(_, n)| n > 0));
            prop_assert!(frags.windows(2).all(|w| w[0].0 + w[0].1 as isize != w[1].0));
            prop_assert_eq!(l.count(), walk.len());
            let span = walk.iter().min().map(|&lo| (lo, *walk.iter().max().unwrap()));
            prop_assert_eq!(l.span, span);
        }

        /// `check` and `check_writable` refuse exactly what the element-wise oracle
        /// refuses, for every buffer length around the layout's reach; pack and unpack
        /// then move exactly the elements of the walk.
        #[test]
        fn check_refuses_exactly_the_oracle(l in layouts(), slack in 0usize..3) {
            let walk = naive(&l);
            let reach = walk.iter().map(|&o| o.max(0) as usize + 1).max().unwrap_or(0);
            for len in reach.saturating_sub(2)..=reach + slack {
                prop_assert_eq!(l.check(len).is_ok(), oracle(&walk, len, false), "check({})", len);
                prop_assert_eq!(l.check_writable(len).is_ok(), oracle(&walk, len, true), "writable({})", len);
                let buf: Vec<u32> = (0..len as u32).map(|x| x * 7 + 1).collect();
                match l.pack(&buf) {
                    Ok(p) => prop_assert_eq!(p, walk.iter().map(|&o| buf[o as usize]).collect::<Vec<_>>()),
                    Err(_) => prop_assert!(!oracle(&walk, len, false)),
                }
                let mut out = vec![0u32; len];
                let packed: Vec<u32> = (0..l.count() as u32).map(|x| x + 1000).collect();
                match l.unpack(&packed, &mut out) {
                    Ok(()) => {
                        let mut want = vec![0u32; len];
                        for (&o, &x) in walk.iter().zip(&packed) { want[o as usize] = x; }
                        prop_assert_eq!(out, want);
                    }
                    Err(_) => prop_assert!(out.iter().all(|&x| x == 0)),
                }
            }
        }
    }

    /// Arithmetic that overflows is refused at construction, never wrapped or panicking.
    #[test]
    fn overflow_is_an_error() {
        assert!(Layout::vector(usize::MAX, 1, 1).is_err());
        assert!(Layout::vector(3, 1, isize::MAX / 2).is_ok()); // ends at isize::MAX
        assert!(Layout::vector(3, 1, isize::MAX / 2 + 1).is_err());
        assert!(Layout::vector(2, 1, isize::MIN).is_ok()); // reaches isize::MIN exactly
        assert!(Layout::vector_of(2, 1, isize::MIN, &Layout::contiguous(2).unwrap()).is_err());
        assert!(Layout::indexed(&[1], &[isize::MAX]).is_err());
        assert!(Layout::indexed(&[1, 1], &[0]).is_err());
        assert!(Layout::contiguous(usize::MAX).is_err());
        assert!(Layout::subarray(&[usize::MAX, 4], &[1, 1], &[0, 0]).is_err());
        assert!(Layout::subarray(&[4, 4], &[2, 3], &[0, 2]).is_err());
        assert!(Layout::subarray(&[], &[], &[]).is_err());
        assert!(Layout::element().resized(usize::MAX).is_err());
        // An element at isize::MAX would end a fragment past isize::MAX.
        let wide = Layout::contiguous(10).unwrap().resized(1).unwrap();
        assert!(Layout::vector_of(2, 1, isize::MAX - 9, &wide).is_err());
        assert!(Layout::vector_of(2, 1, isize::MAX - 10, &wide).is_ok());
        let big = Layout::contiguous(1 << 40).unwrap();
        assert!(Layout::contiguous_of(1 << 30, &big).is_err());
        // An empty unit places nothing, so huge strides of it are fine.
        let none = Layout::contiguous(0).unwrap();
        let v = Layout::vector_of(usize::MAX >> 2, 1, isize::MAX, &none).unwrap();
        assert_eq!((v.count(), v.flatten()), (0, vec![]));
        assert!(v.check_writable(0).is_ok());
        // A repeat of one element many times: refused for writing without flattening.
        let stuck = Layout::vector(1 << 40, 1, 0).unwrap();
        assert!(stuck.check(1).is_ok());
        assert!(stuck.check_writable(1).is_err());
    }

    /// Fragments that cross page boundaries: a column of a 4 KiB-row matrix of `f64`
    /// packs and unpacks exactly, and neighbouring rows merge into one fragment.
    #[test]
    fn fragments_across_pages() {
        let row = 2 * 4096 / 8 + 3; // rows not page aligned, longer than a block
        let cols = Layout::vector(5, 700, row as isize).unwrap(); // blocks longer than a page
        let buf: Vec<f64> = (0..5 * row + 700).map(|x| x as f64).collect();
        let packed = cols.pack(&buf).unwrap();
        assert_eq!(packed.len(), 3500);
        assert_eq!(packed[700], row as f64);
        let whole = Layout::vector(4, row, row as isize).unwrap();
        assert_eq!(whole.flatten(), [(0, 4 * row)]);
        let mut back = vec![0.0; buf.len()];
        cols.unpack(&packed, &mut back).unwrap();
        assert!(cols.flatten().iter().all(|&(o, l)| back[o as usize..][..l] == buf[o as usize..][..l]));
    }

    #[test]
    fn errors_name_the_reason() {
        let e = Layout::vector(2, 1, -1).unwrap().check(4).unwrap_err();
        assert_eq!(e, Error::InvalidLayout { rank: None, culprit: None, which: "layout", reason: BEFORE });
        let e = Layout::contiguous(3).unwrap().check(2).unwrap_err();
        assert!(e.to_string().contains("past the buffer's end"), "{e}");
        let e = Layout::contiguous(2).unwrap().unpack(&[1], &mut [0, 0]).unwrap_err();
        assert!(matches!(e, Error::BufferSize { expected: 2, found: 1, .. }), "{e}");
    }
}
