//! Measure this node and print the fitted cost-model profile (what `zcoll tune` writes).
//!
//! ```text
//! mpiexec -n 4 target/release/examples/calibrate
//! ```
//!
//! Run one rank per core: the transfer parameters need 2 ranks, the contention factor
//! 3 or more. The example checks that every fitted parameter is positive and that the
//! profile survives its TOML form, and prints it.

use zcoll::ZeroCopy;

fn main() -> Result<(), zcoll::Error> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let comm = universe.world().zero_copy()?;
    if let Some(profile) = comm.calibrate(15)? {
        let p = profile.params;
        assert!([p.alpha, p.beta, p.l, p.memcpy_beta, p.flag].iter().all(|v| v.is_finite() && *v > 0.0));
        assert_eq!(zcoll::tune::Profile::from_toml(&profile.to_toml())?, profile);
        println!("{}", profile.to_toml());
        println!(
            "# CMA: {:.2} us start-up, {:.1} GB/s, {:.0} ns per page pinned; memcpy {:.1} GB/s; flag {:.2} us",
            p.alpha * 1e6,
            1e-9 / p.beta,
            p.l * 1e9,
            1e-9 / p.memcpy_beta,
            p.flag * 1e6
        );
    }
    Ok(())
}
