//! [`Partition`] and [`PartitionMut`]: the public types of a buffer cut into blocks.

use mpi::Count;
use std::borrow::Borrow;

/// A buffer cut into one block per rank, by counts and displacements in elements: what
/// rsmpi's [`mpi::datatype::Partition`] describes, for zcoll's variable-count collectives.
///
/// The constructor takes what rsmpi's does, so porting is a change of path; unlike
/// rsmpi's, it does not check the blocks against the buffer: the collective does, on
/// every rank, and returns an `Err` rather than panicking. [`as_mpi`](Self::as_mpi) lends
/// the same partition to rsmpi.
///
/// # Examples
///
/// ```
/// use zcoll::Partition;
///
/// let data = [1u32, 2, 3, 4, 5];
/// let parts = Partition::new(&data[..], [2, 0, 3], [3, 0, 0]);
/// assert_eq!(parts.counts(), [2, 0, 3]);
/// assert_eq!(parts.buf().len(), 5);
/// ```
#[derive(Debug)]
pub struct Partition<'a, T> {
    buf: &'a [T],
    counts: Vec<Count>,
    displs: Vec<Count>,
}

impl<'a, T: crate::pod::Pod> Partition<'a, T> {
    /// Cuts `buf` into blocks: block `r` is `counts[r]` elements from `displs[r]`.
    pub fn new(buf: &'a [T], counts: impl Borrow<[Count]>, displs: impl Borrow<[Count]>) -> Self {
        Partition { buf, counts: counts.borrow().to_vec(), displs: displs.borrow().to_vec() }
    }

    /// The whole buffer.
    pub fn buf(&self) -> &'a [T] {
        self.buf
    }

    /// The count of every block, in elements.
    pub fn counts(&self) -> &[Count] {
        &self.counts
    }

    /// The displacement of every block from the start of the buffer, in elements.
    pub fn displs(&self) -> &[Count] {
        &self.displs
    }

    /// The same partition as rsmpi's type, to hand to rsmpi.
    ///
    /// # Panics
    ///
    /// As [`mpi::datatype::Partition::new`]: if a block ends past the buffer.
    pub fn as_mpi(&self) -> mpi::datatype::Partition<'a, [T], Vec<Count>, Vec<Count>> {
        mpi::datatype::Partition::new(self.buf, self.counts.clone(), self.displs.clone())
    }
}

/// A mutable buffer cut into one block per rank: the receiving side of
/// [`Partition`], what rsmpi's [`mpi::datatype::PartitionMut`] describes.
///
/// # Examples
///
/// ```
/// use zcoll::PartitionMut;
///
/// let mut data = [0u8; 4];
/// let mut parts = PartitionMut::new(&mut data[..], vec![1, 3], vec![3, 0]);
/// parts.buf_mut()[0] = 7;
/// assert_eq!(parts.displs(), [3, 0]);
/// ```
#[derive(Debug)]
pub struct PartitionMut<'a, T> {
    buf: &'a mut [T],
    counts: Vec<Count>,
    displs: Vec<Count>,
}

impl<'a, T: crate::pod::Pod> PartitionMut<'a, T> {
    /// Cuts `buf` into blocks: block `r` is `counts[r]` elements from `displs[r]`.
    pub fn new(buf: &'a mut [T], counts: impl Borrow<[Count]>, displs: impl Borrow<[Count]>) -> Self {
        PartitionMut { buf, counts: counts.borrow().to_vec(), displs: displs.borrow().to_vec() }
    }

    /// The whole buffer.
    pub fn buf(&self) -> &[T] {
        self.buf
    }

    /// The whole buffer, to fill or read.
    pub fn buf_mut(&mut self) -> &mut [T] {
        self.buf
    }

    /// The count of every block, in elements.
    pub fn counts(&self) -> &[Count] {
        &self.counts
    }

    /// The displacement of every block from the start of the buffer, in elements.
    pub fn displs(&self) -> &[Count] {
        &self.displs
    }

    /// The buffer, counts and displacements, for a collective that writes the buffer.
    pub(crate) fn parts(&mut self) -> (&mut [T], &[Count], &[Count]) {
        (self.buf, &self.counts, &self.displs)
    }

    /// The same partition as rsmpi's type, to hand to rsmpi.
    ///
    /// # Panics
    ///
    /// As [`mpi::datatype::PartitionMut::new`]: if a block ends past the buffer.
    pub fn as_mpi(&mut self) -> mpi::datatype::PartitionMut<'_, [T], Vec<Count>, Vec<Count>> {
        mpi::datatype::PartitionMut::new(&mut *self.buf, self.counts.clone(), self.displs.clone())
    }
}
