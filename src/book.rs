//! The book's chapters as doctests, so that they cannot drift from the API unnoticed.
//!
//! Each chapter of `book/src` is the documentation of one item compiled only by
//! `cargo test --doc` (`cfg(doctest)`): rustdoc compiles each `rust,no_run` snippet
//! against today's API and runs none, since a snippet needs an MPI job. A snippet that is
//! not meant to compile is `text`. A unit test checks that every `.md` file under
//! `book/src` is listed here, so a new chapter cannot escape the check.

/// One doctest item per chapter (`path` under `book/src`), and the list of the paths.
macro_rules! chapters {
    ($($item:ident: $path:literal,)*) => {
        $(
            #[cfg(doctest)]
            #[doc = include_str!(concat!("../book/src/", $path))]
            struct $item;
        )*
        /// Every chapter the doctests include, as a path under `book/src`.
        #[cfg(test)]
        const CHAPTERS: &[&str] = &[$($path),*];
    };
}

chapters! {
    Summary: "SUMMARY.md",
    Introduction: "introduction.md",
    GettingStarted: "getting-started.md",
    Design: "design.md",
    Safety: "safety.md",
    Transports: "transports.md",
    SharedAddressSpace: "shared-address-space.md",
    Bcast: "collectives/bcast.md",
    Barrier: "collectives/barrier.md",
    Scatter: "collectives/scatter.md",
    Gather: "collectives/gather.md",
    Allgather: "collectives/allgather.md",
    Alltoall: "collectives/alltoall.md",
    Arrival: "arrival.md",
    Varcount: "collectives/varcount.md",
    Reduce: "collectives/reduce.md",
    Layouts: "layouts.md",
    Hierarchy: "hierarchy.md",
    Nonblocking: "nonblocking.md",
    Bgp: "bgp.md",
    Tuning: "tuning.md",
    Benchmarks: "benchmarks.md",
    Testing: "testing.md",
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every `.md` file under `dir`, as a path relative to `root` with `/` separators.
    fn pages(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pages(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path.strip_prefix(root).unwrap();
                out.push(
                    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
                );
            }
        }
    }

    /// A chapter added to the book without a line in `chapters!` fails here, as does a
    /// line whose chapter is gone (that one would not even compile under `cargo test
    /// --doc`).
    #[test]
    fn every_chapter_is_a_doctest() {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/book/src"));
        let mut on_disk = Vec::new();
        pages(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut listed: Vec<String> = super::CHAPTERS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "book/src and the chapters! list of src/book.rs differ");
    }
}
