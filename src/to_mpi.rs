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
