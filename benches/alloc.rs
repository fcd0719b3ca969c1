//! The shared heap as a global allocator against the system allocator: allocating and
//! freeing blocks of 4 KiB, 1 MiB and 64 MiB, as a program that installs
//! `zcoll::ShmAlloc` does with its buffers (`cargo bench --bench alloc`; no MPI).
//!
//! The binary installs `zcoll_cli::alloc::Switchable` with a threshold of 4 KiB, so that
//! every size measured here comes from the heap while the switch is on, and from the
//! system allocator while it is off. Each iteration allocates a `Vec` of the size
//! (`with_capacity`: the pages are not touched, as a buffer filled later is not) and
//! frees it.

use criterion::{BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use zcoll_cli::alloc::{share_large_allocations, Switchable};

#[global_allocator]
static ALLOC: Switchable = Switchable::with_threshold(4096);

fn alloc_free(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_free");
    for (size, label) in [(4usize << 10, "4KiB"), (1 << 20, "1MiB"), (64 << 20, "64MiB")] {
        group.throughput(Throughput::Elements(1));
        for (shared, name) in [(false, "system"), (true, "shm-heap")] {
            share_large_allocations(shared);
            group.bench_with_input(BenchmarkId::new(name, label), &size, |b, &size| {
                b.iter(|| {
                    let v: Vec<u8> = Vec::with_capacity(black_box(size));
                    black_box(v.as_ptr());
                    drop(v);
                })
            });
            share_large_allocations(false);
        }
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    alloc_free(&mut c);
    c.final_summary();
}
