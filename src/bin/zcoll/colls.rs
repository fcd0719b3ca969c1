//! The table of collectives `zcoll bench` and the criterion benches time.
//!
//! Each collective is one entry of [`ALL`]: a [`Collective`] says how large its buffers
//! are for `p` ranks and how many bytes a rank receives (the memcpy floor), and prepares
//! an [`Instance`] per size that fills the buffers with data that changes every
//! iteration, runs zcoll with a named algorithm, runs the MPI library's own collective
//! through rsmpi, and checks the result independently. Adding a collective to the
//! benchmarks is adding an entry here.

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::{SystemTime, UNIX_EPOCH};
use zcoll::{BcastAlgorithm, Comm};

/// What every entry runs on.
#[derive(Clone, Copy)]
pub(crate) struct Env<'a> {
    /// The MPI communicator of the baseline (and of the barriers between iterations).
    pub(crate) world: &'a SimpleCommunicator,
    /// zcoll's communicator over the same ranks.
    pub(crate) comm: &'a Comm,
    /// The root of rooted collectives.
    pub(crate) root: i32,
}

impl Env<'_> {
    fn rank(&self) -> i32 {
        self.world.rank()
    }
}

/// One collective of the benchmark table.
pub(crate) trait Collective: Sync {
    /// The name used by `--coll` and in the output.
    fn name(&self) -> &'static str;
    /// zcoll's algorithms for it, by the names `--algorithms` and the output use
    /// (`auto`, zcoll's own choice, is not listed: it is always there).
    fn algorithms(&self) -> Vec<&'static str>;
    /// Whether the message size matters (a barrier moves no data: one row, size 0).
    fn sized(&self) -> bool {
        true
    }
    /// The bytes this rank of `env` receives for a message of `size` bytes: one memcpy
    /// of that many bytes is the floor of a single-copy implementation.
    fn received(&self, env: Env<'_>, size: usize) -> usize;
    /// Allocates the buffers for `size` bytes per rank (as the OSU benchmarks count
    /// them) on every rank of `env`.
    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a>;
}

/// A collective's buffers at one size, and the ways to run it.
pub(crate) trait Instance {
    /// Fills the send data for step `seq`: every step's data differs from the previous
    /// step's in every byte, so a result left over from an earlier step fails the check.
    fn fill(&mut self, seq: u64);
    /// Runs zcoll's collective with the algorithm named `algorithm`.
    fn zcoll(&mut self, algorithm: &str) -> zcoll::Result<()>;
    /// Runs the MPI library's collective through rsmpi.
    fn mpi(&mut self);
    /// Checks this rank's result of step `seq`, independently of both implementations.
    /// Collective: every rank calls it after every step. `Err` says what is wrong.
    fn check(&mut self, seq: u64) -> Result<(), String>;
}

/// Every collective the benchmarks know, in the order they run.
pub(crate) const ALL: &[&dyn Collective] = &[&Bcast, &Barrier];

/// The collective named `name`.
pub(crate) fn by_name(name: &str) -> Option<&'static dyn Collective> {
    ALL.iter().copied().find(|c| c.name() == name)
}

/// Word `i` of the data of step `seq`: the per-step byte `s` (1 to 255, different from
/// the previous step's) is XORed into every byte, so consecutive steps differ in every
/// byte; the index term makes the bytes differ from each other.
fn word(seq: u64, i: usize) -> u64 {
    let s = seq % 255 + 1;
    (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ s.wrapping_mul(0x0101_0101_0101_0101)
}

/// Fills `words` (and so every byte of the message they hold) with step `seq`'s data.
pub(crate) fn fill_words(words: &mut [u64], seq: u64) {
    for (i, w) in words.iter_mut().enumerate() {
        *w = word(seq, i).to_le();
    }
}

/// Checks that the first `n` bytes of `words` are step `seq`'s data; the error names the
/// first wrong byte.
pub(crate) fn check_words(words: &[u64], n: usize, seq: u64) -> Result<(), String> {
    let full = n / 8;
    let bad_word = words[..full].iter().enumerate().position(|(i, &w)| w != word(seq, i).to_le());
    let first_bad = match bad_word {
        Some(i) => Some(i),
        None if n % 8 != 0 => Some(full),
        None => None,
    };
    if let Some(i) = first_bad {
        let got = words[i].to_le_bytes();
        let want = word(seq, i).to_le().to_le_bytes();
        if let Some(b) = (0..8).take_while(|b| i * 8 + b < n).find(|&b| got[b] != want[b]) {
            return Err(format!(
                "byte {} of {n} is {:#04x} where {:#04x} was sent",
                i * 8 + b,
                got[b],
                want[b]
            ));
        }
    }
    Ok(())
}

/// Broadcast from the root (`Env::root`): `size` bytes, received by every other rank.
pub(crate) struct Bcast;

impl Collective for Bcast {
    fn name(&self) -> &'static str {
        "bcast"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        BcastAlgorithm::ALL.iter().map(|a| a.name()).collect()
    }

    fn received(&self, env: Env<'_>, size: usize) -> usize {
        if env.rank() == env.root {
            0
        } else {
            size
        }
    }

    fn prepare<'a>(&self, env: Env<'a>, size: usize) -> Box<dyn Instance + 'a> {
        Box::new(BcastRun { env, words: vec![0; size.div_ceil(8)], n: size })
    }
}

struct BcastRun<'a> {
    env: Env<'a>,
    /// The buffer, as words for alignment; the message is its first `n` bytes.
    words: Vec<u64>,
    n: usize,
}

impl BcastRun<'_> {
    fn bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.n]
    }
}

impl Instance for BcastRun<'_> {
    fn fill(&mut self, seq: u64) {
        // Only the root's data is sent; the others keep the previous step's result,
        // which differs from this step's in every byte.
        if self.env.rank() == self.env.root {
            fill_words(&mut self.words, seq);
        }
    }

    fn zcoll(&mut self, algorithm: &str) -> zcoll::Result<()> {
        let algorithm: BcastAlgorithm = algorithm.parse().map_err(|()| zcoll::Error::Config {
            name: "--algorithms",
            value: algorithm.to_owned(),
            expected: "auto, direct-read, direct-write or staged",
        })?;
        let (comm, root) = (self.env.comm, self.env.root);
        comm.broadcast_into_with(self.bytes(), root, algorithm)
    }

    fn mpi(&mut self) {
        let (world, root) = (self.env.world, self.env.root);
        world.process_at_rank(root).broadcast_into(self.bytes());
    }

    fn check(&mut self, seq: u64) -> Result<(), String> {
        // The root's buffer must be unchanged too.
        check_words(&self.words, self.n, seq)
    }
}

/// Barrier: no data; checked by time stamps (no rank leaves before the last one enters).
pub(crate) struct Barrier;

impl Collective for Barrier {
    fn name(&self) -> &'static str {
        "barrier"
    }

    fn algorithms(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn sized(&self) -> bool {
        false
    }

    fn received(&self, _env: Env<'_>, _size: usize) -> usize {
        0
    }

    fn prepare<'a>(&self, env: Env<'a>, _size: usize) -> Box<dyn Instance + 'a> {
        Box::new(BarrierRun { env, stamps: [0; 2] })
    }
}

struct BarrierRun<'a> {
    env: Env<'a>,
    /// Wall-clock nanoseconds when this rank entered and left the last barrier.
    stamps: [u64; 2],
}

/// The wall clock in nanoseconds: one clock for every process of a machine.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Instance for BarrierRun<'_> {
    fn fill(&mut self, _seq: u64) {
        self.stamps = [0; 2];
    }

    fn zcoll(&mut self, algorithm: &str) -> zcoll::Result<()> {
        if algorithm != "auto" {
            return Err(zcoll::Error::Config {
                name: "--algorithms",
                value: algorithm.into(),
                expected: "auto",
            });
        }
        self.stamps[0] = now_ns();
        let done = self.env.comm.barrier();
        self.stamps[1] = now_ns();
        done
    }

    fn mpi(&mut self) {
        self.stamps[0] = now_ns();
        self.env.world.barrier();
        self.stamps[1] = now_ns();
    }

    fn check(&mut self, _seq: u64) -> Result<(), String> {
        let world = self.env.world;
        let mut all = vec![0u64; 2 * world.size() as usize];
        world.all_gather_into(&self.stamps[..], &mut all[..]);
        // Clocks compare only on one machine: all ranks with virtual nodes, else the
        // ranks of this node.
        let info = self.env.comm.info();
        let peers: Vec<i32> = if info.nodes == 1 || info.virtual_nodes.is_some() {
            (0..world.size()).collect()
        } else {
            info.node_ranks.clone()
        };
        let left = self.stamps[1];
        match peers.iter().map(|&r| (all[2 * r as usize], r)).max() {
            Some((entered, r)) if entered > left => {
                Err(format!("left the barrier {} ns before rank {r} entered it", entered - left))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_steps_differ_in_every_byte() {
        let n: usize = 1003;
        let mut a = vec![0u64; n.div_ceil(8)];
        let mut b = a.clone();
        for seq in [0u64, 1, 253, 254, 255, 1 << 40] {
            fill_words(&mut a, seq);
            fill_words(&mut b, seq + 1);
            let (x, y): (&[u8], &[u8]) = (bytemuck::cast_slice(&a), bytemuck::cast_slice(&b));
            assert!(x[..n].iter().zip(&y[..n]).all(|(p, q)| p != q), "seq {seq}");
            assert_eq!(check_words(&a, n, seq), Ok(()));
            assert!(check_words(&b, n, seq).is_err());
        }
    }

    #[test]
    fn the_check_names_the_first_wrong_byte_even_the_last_one() {
        for n in [1usize, 7, 8, 9, 4096, 4099] {
            let mut w = vec![0u64; n.div_ceil(8)];
            fill_words(&mut w, 42);
            assert_eq!(check_words(&w, n, 42), Ok(()));
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut w);
            bytes[n - 1] ^= 1;
            let e = check_words(&w, n, 42).unwrap_err();
            assert!(e.starts_with(&format!("byte {} of {n} ", n - 1)), "{e}");
            // Bytes past the message are not part of it.
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut w);
            bytes[n - 1] ^= 1;
            if let Some(b) = bytes.get_mut(n) {
                *b ^= 1;
                assert_eq!(check_words(&w, n, 42), Ok(()));
            }
        }
    }

    #[test]
    fn every_entry_has_a_unique_name_and_is_found_by_it() {
        for c in ALL {
            assert_eq!(by_name(c.name()).map(|f| f.name()), Some(c.name()));
            assert!(!c.algorithms().contains(&"auto"));
        }
        assert!(by_name("nope").is_none());
        let names: Vec<&str> = BcastAlgorithm::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(Bcast.algorithms(), names);
    }
}
