//! Calibration: measuring this node for the cost model.

use super::{Comm, Route};
use crate::coll;
use crate::coll::bcast::BcastAlgorithm;
use crate::error::Result;
use mpi::traits::*;

/// Tuning.
impl Comm {
    /// Measures this node and fits the cost model: `reps` repetitions per point (the
    /// median is kept). Collective over the communicator; every node measures itself,
    /// and the profile of the node of rank 0 is returned on rank 0 (`None` elsewhere).
    ///
    /// It needs CMA, at least 2 ranks on the node for the transfer parameters and the
    /// rounds (timed broadcasts, on a communicator of one node), and 3 or more for the
    /// contention factor; what it could not measure keeps the built-in default, and the
    /// profile's notes say so. Run it with one rank per core: with
    /// more ranks than cores, the timings measure the scheduler.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use zcoll::ZeroCopy;
    /// # let universe = mpi::initialize().unwrap();
    /// let comm = universe.world().zero_copy()?;
    /// if let Some(profile) = comm.calibrate(20)? {
    ///     profile.save(&zcoll::tune::Profile::path())?;
    /// }
    /// # Ok::<(), zcoll::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `Error::Unsupported` on a node without CMA; `Error::Config` for an unreadable
    /// `ZCOLL_VIRTUAL_SOCKETS`; a transport error or a peer's failure.
    pub fn calibrate(&self, reps: usize) -> Result<Option<crate::tune::Profile>> {
        use crate::tune::calibrate::{fit_all, fit_rounds, Samples};
        use mpi::traits::*;
        let mut buf: Vec<u8> = (0..coll::probe::PROBE_BYTES).map(|i| i as u8).collect();
        let mine = match self.route()? {
            Route::Node | Route::Nodes(..) => coll::probe::measure(&self.ctx(), &mut buf, reps)?,
        };
        drop(buf);
        let rounds = self.time_rounds((5 * reps).clamp(20, 200))?;
        let node = &self.node.comm;
        if node.rank() != 0 {
            node.process_at_rank(0).send(&mine.encode()[..]);
            return Ok(None);
        }
        let mut all = vec![mine];
        for r in 1..node.size() {
            let (v, _) = node.process_at_rank(r).receive_vec::<f64>();
            all.push(Samples::decode(&v).expect("a rank of this node encoded it"));
        }
        if self.rank() != 0 {
            return Ok(None);
        }
        let (mut params, mut notes) = fit_all(&all, crate::tune::Params::DEFAULT);
        fit_rounds(&mut params, &mut notes, &rounds);
        Ok(Some(crate::tune::Profile { machine: crate::tune::Machine::this(), params, notes }))
    }

    /// Times the staged and the direct-read broadcast from rank 0 on a one-node
    /// communicator of two ranks or more (`iters` timed calls per size, each after a
    /// barrier; the median of each call's slowest rank), for the round constants and the
    /// staged copy cost: a copy through the staging area moves lines another core has
    /// just written, which a local copy does not measure. Empty elsewhere (the same
    /// decision on every rank).
    fn time_rounds(&self, iters: usize) -> Result<crate::tune::calibrate::Rounds> {
        use crate::tune::calibrate::{Rounds, COPY_ROUND_MAX, ROUND_SIZES};
        use mpi::collective::SystemOperation;
        let p = self.node.comm.size() as usize;
        if self.hier.nodes() != 1 || p < 2 {
            return Ok(Rounds::default());
        }
        let mut rounds = Rounds { p, ..Rounds::default() };
        let warmup = iters / 10 + 1;
        for n in ROUND_SIZES {
            let mut buf = vec![0u8; n];
            for algorithm in [BcastAlgorithm::Staged, BcastAlgorithm::DirectRead] {
                if algorithm == BcastAlgorithm::DirectRead && n > COPY_ROUND_MAX {
                    continue;
                }
                let mut times = Vec::with_capacity(iters);
                for i in 0..warmup + iters {
                    self.parent.barrier();
                    let start = std::time::Instant::now();
                    self.broadcast_into_with(&mut buf, 0, algorithm)?;
                    if i >= warmup {
                        times.push(start.elapsed().as_secs_f64());
                    }
                }
                let mut slowest = vec![0f64; iters];
                self.parent.all_reduce_into(&times[..], &mut slowest[..], SystemOperation::max());
                let into =
                    if algorithm == BcastAlgorithm::Staged { &mut rounds.staged } else { &mut rounds.copy };
                into.push((n as f64, coll::probe::median(slowest)));
            }
        }
        Ok(rounds)
    }
}
