//! Tuning: the cost model, its fit to measurements, and the choice of algorithms.
//!
//! `model` writes the cost of every algorithm in the contention model of the CMA paper;
//! `fit` recovers the model's parameters from timings by least squares. The calibration
//! that measures a machine and the per-call selection build on both.

pub(crate) mod calibrate;
pub mod fit;
pub mod model;
pub mod paper;
pub mod profile;
pub mod select;

pub use model::{Algo, CrossSocket, Flags, Params, CMA_WRITE};
pub use profile::{Machine, Profile};
