//! `Pod`: the element-type contract of every collective.

/// The element types zcoll collectives move: plain bytes with an MPI datatype.
///
/// Byte copies between processes are only sound for types with no padding, no pointers
/// and every bit pattern valid, which is what [`bytemuck::Pod`] promises; rsmpi's
/// [`Equivalence`](mpi::datatype::Equivalence) alone does not. Every type with both
/// implements `Pod`.
///
/// # Examples
///
/// ```
/// use mpi::traits::Equivalence;
///
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, Equivalence)]
/// #[repr(C)]
/// struct Particle {
///     position: [f64; 3],
///     id: u64,
/// }
///
/// fn takes_pod<T: zcoll::Pod>() {}
/// takes_pod::<Particle>();
/// takes_pod::<f32>();
/// ```
pub trait Pod: bytemuck::Pod + mpi::datatype::Equivalence {}

impl<T: bytemuck::Pod + mpi::datatype::Equivalence> Pod for T {}
