//! Buffers handed to the MPI library.
//!
//! An empty Rust slice has a dangling address: its element type's alignment, so 1 for
//! one-byte elements. Open MPI reads a buffer address of 1 as `MPI_IN_PLACE` and rejects
//! the call (`MPI_ERR_BUFFER`), or, where in place is legal, computes something else. Every
//! buffer zcoll hands to rsmpi therefore goes through [`send`] or [`recv`], which give an
//! empty slice the address of a real (never touched) location.

use crate::pod::Pod;

/// Somewhere real for empty buffers to point at, aligned for any element an empty slice
/// needs to be cast to (alignments above 64 never dangle to 1).
#[repr(C, align(64))]
pub(crate) struct Spot([u8; 64]);

impl Spot {
    pub(crate) fn new() -> Spot {
        Spot([0; 64])
    }
}

static SPOT: Spot = Spot([0; 64]);

/// `s`, or, if it is empty, an empty slice at a real address.
pub(crate) fn send<T: Pod>(s: &[T]) -> &[T] {
    match s.is_empty() && std::mem::align_of::<T>() <= 64 {
        true => bytemuck::cast_slice(&SPOT.0[..0]),
        false => s,
    }
}

/// `s`, or, if it is empty, an empty slice at `spot`'s address.
pub(crate) fn recv<'a, T: Pod>(s: &'a mut [T], spot: &'a mut Spot) -> &'a mut [T] {
    match s.is_empty() && std::mem::align_of::<T>() <= 64 {
        true => bytemuck::cast_slice_mut(&mut spot.0[..0]),
        false => s,
    }
}

/// `dt` with lower bound `lb` and extent `extent`, in bytes (`MPI_Type_create_resized`,
/// which rsmpi 0.8 does not wrap), committed.
///
/// The crate's one unsafe item outside the shared-memory modules besides `Send for Comm`:
/// the datatype conversion of [`Layout`](crate::Layout) needs it for resized layouts and
/// subarrays, whose extents MPI sets by explicit bounds.
#[allow(unsafe_code)]
pub(crate) fn resized(
    dt: &mpi::datatype::UserDatatype,
    lb: mpi::Address,
    extent: mpi::Address,
) -> mpi::datatype::UserDatatype {
    use mpi::raw::{AsRaw, FromRaw};
    let mut new = std::mem::MaybeUninit::<mpi::ffi::MPI_Datatype>::uninit();
    // SAFETY: `dt` is a valid committed datatype handle (a `UserDatatype` owns one until
    // it is dropped, after this call); `new` is a valid place for one handle, which
    // `MPI_Type_create_resized` writes before returning MPI_SUCCESS (any other return
    // aborts under MPI's default error handler, which rsmpi leaves in place).
    let rc = unsafe { mpi::ffi::MPI_Type_create_resized(dt.as_raw(), lb, extent, new.as_mut_ptr()) };
    assert_eq!(rc, 0, "MPI_Type_create_resized returned {rc}");
    // SAFETY: `new` was initialised by the successful call above.
    let mut new = unsafe { new.assume_init() };
    // SAFETY: `new` is a datatype handle we own and have not committed; committing it in
    // place is what rsmpi's own `commit` does.
    let rc = unsafe { mpi::ffi::MPI_Type_commit(&mut new) };
    assert_eq!(rc, 0, "MPI_Type_commit returned {rc}");
    // SAFETY: `new` is a committed user datatype owned by nobody else; the returned
    // `UserDatatype` frees it exactly once, when dropped.
    unsafe { mpi::datatype::UserDatatype::from_raw(new) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buffers_get_a_real_address() {
        let empty: Vec<u8> = Vec::new();
        assert_eq!(empty.as_ptr() as usize, 1, "the dangling address MPI would misread");
        assert_ne!(send(&empty[..]).as_ptr() as usize, 1);
        assert!(send(&empty[..]).is_empty());
        let mut spot = Spot::new();
        let mut out: Vec<u16> = Vec::new();
        let r = recv(&mut out[..], &mut spot);
        assert!(r.is_empty() && r.as_ptr() as usize != 1);
        let full = [1u8, 2];
        assert_eq!(send(&full[..]).as_ptr(), full.as_ptr());
    }
}
