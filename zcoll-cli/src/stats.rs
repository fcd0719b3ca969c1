//! The numbers behind `zcoll bench`: which sizes to run, how many iterations, how late
//! each rank arrives, and what a series of timings sums up to. Pure functions, tested
//! without MPI.

/// Parses one size in bytes: `8`, `4K`, `64M`, `1G` (binary multiples: `K` is 1024), with
/// an optional `B` or `iB` after the suffix (`4KiB`, `64MB`).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: usize = digits.parse().map_err(|_| format!("{s:?} is not a size (e.g. 8, 4K, 64M)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

/// Parses a size list: comma-separated items, each a size, a range `A:B` (A, 2A, 4A, ...
/// up to B: powers of two from a power of two), or `A:B:F` (times F each step). The
/// result is sorted and has no duplicates. Every size is at least one byte.
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let mut sizes = Vec::new();
    for item in s.split(',').filter(|i| !i.trim().is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        let (from, to, factor) = match parts[..] {
            [one] => {
                let n = parse_size(one)?;
                (n, n, 2)
            }
            [a, b] => (parse_size(a)?, parse_size(b)?, 2),
            [a, b, f] => (
                parse_size(a)?,
                parse_size(b)?,
                f.trim().parse().map_err(|_| format!("{f:?} is not a factor (e.g. 2, 4)"))?,
            ),
            _ => return Err(format!("{item:?}: a size range is A:B or A:B:F")),
        };
        if from == 0 {
            return Err(format!("{item:?}: sizes start at 1 byte"));
        }
        if from > to {
            return Err(format!("{item:?}: the range is empty ({from} > {to})"));
        }
        if factor < 2 {
            return Err(format!("{item:?}: the factor must be at least 2"));
        }
        let mut n = from;
        while n <= to {
            sizes.push(n);
            match n.checked_mul(factor) {
                Some(next) => n = next,
                None => break,
            }
        }
    }
    if sizes.is_empty() {
        return Err("no sizes given".into());
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// Formats a size the way `parse_size` reads it: `8`, `4K`, `64M`.
pub fn format_size(n: usize) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

/// The timed iterations for a message of `size` bytes when `--iters` is not given: as
/// many as move about 512 MiB, at least 20 and at most 1000, so that a quick run (sizes
/// 4 B to 16 MiB) takes seconds and small messages still get a stable median.
pub fn default_iters(size: usize) -> usize {
    ((512usize << 20) / size.max(1)).clamp(20, 1000)
}

/// The warm-up iterations for `iters` timed ones when `--warmup` is not given.
pub fn default_warmup(iters: usize) -> usize {
    (iters / 10).clamp(2, 100)
}

/// The maximum over ranks of every iteration's time: `per_rank[r][i]` is rank `r`'s time
/// of iteration `i`. This is what the benchmark's reduction (`MPI_MAX` over ranks)
/// computes; an iteration is as slow as its slowest rank.
pub fn per_iteration_max(per_rank: &[Vec<f64>]) -> Vec<f64> {
    let iters = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..iters).map(|i| per_rank.iter().map(|r| r[i]).fold(f64::NEG_INFINITY, f64::max)).collect()
}

/// Median, minimum and maximum of a series of timings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Summary {
    /// Sums up `samples` (the per-iteration maxima). `None` if there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        };
        Some(Summary { median, min: s[0], max: s[n - 1] })
    }

    /// The same summary with every value multiplied by `k` (seconds to microseconds).
    pub fn scaled(self, k: f64) -> Summary {
        Summary { median: self.median * k, min: self.min * k, max: self.max * k }
    }
}

/// A 64-bit mixer (splitmix64's finalizer): the benchmark's only source of randomness,
/// so that every rank computes the same "random" choices from the same seed.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `0..n` in an order drawn from `seed` (Fisher-Yates): every order equally likely, the
/// same for the same seed.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (mix(seed ^ (i as u64) << 40) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// A uniform number in `[0, 1)` from a seed.
fn unit(seed: u64) -> f64 {
    (mix(seed) >> 11) as f64 / (1u64 << 53) as f64
}

/// Process-arrival imbalance (the maximum imbalance factor of Qian and Afsahi's
/// process-arrival-pattern benchmarks).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Imbalance {
    /// The largest delay, as a multiple of the time of one message of the size timed.
    pub mif: f64,
    /// `Some(pct)`: only `ceil(pct% of p)` ranks are late, each by the full `mif` times a
    /// message; `None`: every rank is late by a uniform random fraction of it.
    pub late_pct: Option<f64>,
}

impl Imbalance {
    /// How long `rank` of `np` busy-waits before iteration `seed`'s collective, given
    /// that one message takes `t_msg` seconds. Every rank computes the same pattern from
    /// the same seed, so a run is reproducible.
    pub fn delay(&self, seed: u64, rank: usize, np: usize, t_msg: f64) -> f64 {
        let most = self.mif * t_msg;
        match self.late_pct {
            None => most * unit(seed ^ mix(rank as u64 + 1)),
            Some(pct) => {
                let late = ((pct / 100.0 * np as f64).ceil() as usize).min(np);
                // The late ranks are the first `late` of a permutation drawn from `seed`
                // (ranks sorted by a per-rank key).
                let key = |r: usize| mix(seed ^ mix(r as u64 + 1));
                let mine = key(rank);
                let before = (0..np).filter(|&r| (key(r), r) < (mine, rank)).count();
                if before < late {
                    most
                } else {
                    0.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_permutations_and_every_one_leads_and_follows_every_other() {
        let mut first = [0usize; 5];
        let mut after = [[0usize; 5]; 5];
        for seed in 0..2000 {
            let v = shuffled(5, mix(seed));
            let mut sorted = v.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3, 4]);
            assert_eq!(v, shuffled(5, mix(seed)), "the same seed, the same order");
            first[v[0]] += 1;
            v.windows(2).for_each(|w| after[w[0]][w[1]] += 1);
        }
        // 400 expected each; and each ordered pair about 2000 * 4 / 20 = 400 times.
        assert!(first.iter().all(|&n| (300..500).contains(&n)), "{first:?}");
        for (a, row) in after.iter().enumerate() {
            for (b, &n) in row.iter().enumerate() {
                assert!(a == b || (300..500).contains(&n), "{a} then {b}: {n}");
            }
        }
        assert!(shuffled(0, 1).is_empty() && shuffled(1, 1) == [0]);
    }

    #[test]
    fn sizes_take_suffixes_ranges_factors_and_lists() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MB"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1").is_err());

        let p2: Vec<usize> = (3..=26).map(|k| 1 << k).collect();
        assert_eq!(parse_sizes("8:64M"), Ok(p2));
        assert_eq!(parse_sizes("4:16M:4").unwrap().len(), 12);
        assert_eq!(parse_sizes("4:16M:4").unwrap()[5], 4096);
        assert_eq!(parse_sizes("3:100"), Ok(vec![3, 6, 12, 24, 48, 96]));
        assert_eq!(parse_sizes("1M, 4K,4K,8:16"), Ok(vec![8, 16, 4096, 1 << 20]));
        assert!(parse_sizes("0:8").is_err());
        assert!(parse_sizes("64:8").is_err());
        assert!(parse_sizes("8:64:1").is_err());
        assert!(parse_sizes("1:2:3:4").is_err());
        assert!(parse_sizes("").is_err());
        for n in [1, 8, 1000, 4096, 1 << 20, 3 << 20] {
            assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
    }

    #[test]
    fn the_summary_is_the_median_of_the_per_iteration_maxima() {
        // Three ranks, five iterations: the slowest rank of each iteration counts.
        let per_rank =
            vec![vec![1.0, 9.0, 3.0, 4.0, 2.0], vec![2.0, 1.0, 3.5, 1.0, 8.0], vec![1.5, 1.0, 3.0, 7.0, 1.0]];
        let max = per_iteration_max(&per_rank);
        assert_eq!(max, vec![2.0, 9.0, 3.5, 7.0, 8.0]);
        assert_eq!(Summary::of(&max), Some(Summary { median: 7.0, min: 2.0, max: 9.0 }));
        // The median of the maxima, not the maximum of the medians (4.0) nor the
        // median of everything (2.0).
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1e-6]).unwrap().scaled(1e6), Summary { median: 1.0, min: 1.0, max: 1.0 });
    }

    #[test]
    fn default_iterations_shrink_with_size() {
        assert_eq!(default_iters(0), 1000);
        assert_eq!(default_iters(8), 1000);
        assert_eq!(default_iters(1 << 20), 512);
        assert_eq!(default_iters(64 << 20), 20);
        assert_eq!(default_warmup(1000), 100);
        assert_eq!(default_warmup(20), 2);
    }

    #[test]
    fn imbalance_is_reproducible_and_bounded() {
        let all = Imbalance { mif: 4.0, late_pct: None };
        for seed in 0..100 {
            for rank in 0..8 {
                let d = all.delay(seed, rank, 8, 1e-6);
                assert!((0.0..4e-6).contains(&d), "{d}");
                assert_eq!(d, all.delay(seed, rank, 8, 1e-6));
            }
        }
        let some = Imbalance { mif: 2.0, late_pct: Some(25.0) };
        let mut hit = [0usize; 8];
        for seed in 0..200 {
            let late: Vec<usize> = (0..8).filter(|&r| some.delay(seed, r, 8, 1.0) > 0.0).collect();
            assert_eq!(late.len(), 2, "seed {seed}: {late:?}");
            for r in late {
                assert_eq!(some.delay(seed, r, 8, 1.0), 2.0);
                hit[r] += 1;
            }
        }
        // Every rank is late in some iterations: the choice moves with the seed.
        assert!(hit.iter().all(|&h| h > 10), "{hit:?}");
        let one = Imbalance { mif: 1.0, late_pct: Some(1.0) };
        assert_eq!((0..3).filter(|&r| one.delay(7, r, 3, 1.0) > 0.0).count(), 1);
    }
}
