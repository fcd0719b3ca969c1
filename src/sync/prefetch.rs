//! Prefetch hints: asking the processor for a cache line before the load or store that
//! needs it, so that its transfer between the cores overlaps other work. A hint reads
//! and writes nothing a program can see, so it races with no access of any rank and
//! orders nothing; the protocol never relies on one.

/// Asks the processor to bring the cache line at `p` closer, without waiting for it: a
/// hint, which reads nothing a program can see (and so races with no store).
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults nor changes memory, whatever the address; `p` is
    // in the segment anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the processor to bring the cache line at `p` closer in the state that lets this
/// core write it (`prefetchw`), without waiting for it: where another core holds a copy,
/// the invalidation starts now instead of at the first store. A hint, like [`prefetch`]:
/// it changes no memory and races with no load or store of any rank.
#[inline(always)]
pub(super) fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `prefetch`: a prefetch never faults nor changes memory, whatever the
    // address, and touches no register but its operand (nor the flags, nor the stack);
    // an x86-64 processor without `prefetchw` (Intel's before Broadwell) decodes its
    // opcode, 0F 0D, as a no-op. (`_mm_prefetch` with `_MM_HINT_ET0` emits no
    // `prefetchw` unless the build targets `prfchw`, hence the instruction by hand.)
    unsafe {
        std::arch::asm!("prefetchw [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
