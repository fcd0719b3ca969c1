//! Prefetch hints: asking the processor for a cache line before the load or store that
//! needs it, so that its transfer (between the cores, or from memory) overlaps other
//! work. A hint reads and writes nothing a program can see, so it races with no access of
//! any rank and orders nothing; neither the protocol nor a copy relies on one. `sync`
//! asks for its flags' lines with them; the copy loops of the layouts, for the fragments
//! they will read next.

/// Asks the processor to bring the cache line at `p` closer, without waiting for it: a
/// hint, which reads nothing a program can see (and so races with no store).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults nor changes memory, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the processor to bring the cache lines at `lines` closer in the state that lets
/// this core write them (`prefetchw`), without waiting for them: where another core holds
/// a copy, the invalidation starts now instead of at the first store. A hint, like
/// [`prefetch`]: it changes no memory and races with no load or store of any rank. Where
/// the processor does not report `prefetchw` (CPUID's `3dnowprefetch`, asked once per
/// process), nothing is asked.
#[inline(always)]
pub(crate) fn prefetch_write<const N: usize>(lines: [*const u8; N]) {
    #[cfg(target_arch = "x86_64")]
    if has_prefetchw() {
        for p in lines {
            // SAFETY: the processor implements `prefetchw` (checked above), and a
            // prefetch never faults nor changes memory, whatever the address; it touches
            // no register but its operand (nor the flags, nor the stack).
            // (`_mm_prefetch` with `_MM_HINT_ET0` emits no `prefetchw` unless the build
            // targets `prfchw`, hence the instruction by hand.)
            unsafe {
                std::arch::asm!("prefetchw [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = lines;
}

/// Whether the processor implements `prefetchw`: CPUID leaf `0x8000_0001`, ECX bit 8
/// (AMD's since the K6, Intel's since Broadwell). std's feature detection does not name
/// it, so it is asked here, once per process; after that the answer is one Relaxed load
/// (a `LazyLock` there made the whole start of a call measurably slower).
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    /// 0: not asked yet, 1: no, 2: yes. Racing first callers store the same answer.
    static ANSWER: AtomicU8 = AtomicU8::new(0);
    #[cold]
    fn ask() -> bool {
        use std::arch::x86_64::__cpuid;
        // `__cpuid` is an `unsafe fn` in the Rust of `rust-version` and safe in later ones.
        #[allow(unused_unsafe)]
        // SAFETY: every x86-64 processor implements CPUID, and a leaf above the highest
        // one it reports (leaf 0x8000_0000's EAX) is never asked.
        let ecx = unsafe { (__cpuid(0x8000_0000).eax >= 0x8000_0001).then(|| __cpuid(0x8000_0001).ecx) };
        let yes = ecx.is_some_and(|ecx| ecx & (1 << 8) != 0);
        ANSWER.store(1 + yes as u8, Ordering::Relaxed);
        yes
    }
    match ANSWER.load(Ordering::Relaxed) {
        0 => ask(),
        a => a == 2,
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    /// The CPUID answer agrees with the kernel's reading of the same bit.
    #[test]
    fn prefetchw_detection_agrees_with_the_kernel() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).expect("a flags line");
        let kernel = flags.split_whitespace().any(|f| f == "3dnowprefetch");
        assert_eq!(super::has_prefetchw(), kernel);
        assert_eq!(super::has_prefetchw(), kernel, "the cached answer differs");
    }
}
