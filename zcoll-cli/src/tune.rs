//! `zcoll tune --plot`: the model's prediction, with the parameters just fitted, against
//! the latency the real collectives take (the model-validation figure of the CMA paper);
//! and `zcoll tune --predict`: what the model chooses on a node of any size, printed and,
//! with `--plot`, drawn (every candidate's predicted latency against the size).
//!
//! The measurements are `zcoll bench`'s ([`bench::measure`]): the same timing loop, the
//! same checks, the median of the per-iteration maximum over ranks. This module only
//! chooses what to time, asks the model for the same points, and prints and draws the
//! two side by side.

use crate::bench::{self, BenchArgs, Row};
use crate::plot::{Panel, Series, Style};
use crate::stats;
use clap::Parser;
use std::fmt::Write as _;
use zcoll::tune::select::{self, Coll};
use zcoll::tune::{Algo, Flags, Params, Profile};

/// The algorithms `--plot` times, per collective, by `zcoll bench`'s names: the paper's
/// scatter trio, the broadcast read patterns, an allgather ring against recursive
/// doubling, and each collective's copy-in/copy-out path. `throttled-read` (`k = 4`)
/// only where it differs from the others (more than 2 ranks).
pub const PLOTTED: &[(&str, &[&str])] = &[
    ("scatter", &["parallel-read", "sequential-write", "throttled-read", "staged"]),
    ("bcast", &["direct-read", "knomial-read", "staged"]),
    ("allgather", &["ring-source-read", "recursive-doubling", "staged"]),
];

/// The `k` of `zcoll bench`'s throttled and k-nomial algorithms (their enums' `ALL`).
const BENCH_K: usize = 4;

/// The model's algorithm for `zcoll bench`'s collective `coll` and algorithm `name`;
/// `None` for what the model does not describe (MPI, `auto`, the arrival-aware ones).
pub fn model_algo(coll: &str, name: &str) -> Option<Algo> {
    Some(match (coll, name) {
        ("bcast", "direct-read") => Algo::BcastDirectRead,
        ("bcast", "direct-write") => Algo::BcastDirectWrite,
        ("bcast", "knomial-read") => Algo::BcastKnomial(BENCH_K),
        ("bcast", "scatter-allgather") => Algo::BcastScatterAllgather,
        ("bcast", "staged" | "fifo") => Algo::BcastStaged,
        ("scatter", "parallel-read") => Algo::ScatterParallelRead,
        ("scatter", "sequential-write") => Algo::ScatterSequentialWrite,
        ("scatter", "throttled-read") => Algo::ScatterThrottledRead(BENCH_K),
        ("scatter", "staged") => Algo::ScatterStaged,
        ("gather", "parallel-write") => Algo::GatherParallelWrite,
        ("gather", "sequential-read") => Algo::GatherSequentialRead,
        ("gather", "throttled-write") => Algo::GatherThrottledWrite(BENCH_K),
        ("gather", "staged") => Algo::GatherStaged,
        ("allgather", "ring-neighbor" | "ring-source-read" | "ring-source-write") => Algo::AllgatherRing,
        ("allgather", "recursive-doubling") => Algo::AllgatherRecursiveDoubling,
        ("allgather", "bruck") => Algo::AllgatherBruck,
        ("allgather", "staged") => Algo::AllgatherStaged,
        ("alltoall", "pairwise") => Algo::AlltoallPairwise,
        ("alltoall", "bruck") => Algo::AlltoallBruck,
        ("alltoall", "staged") => Algo::AlltoallStaged,
        ("allreduce", "partitioned") => Algo::AllreducePartitioned,
        ("allreduce", "staged") => Algo::AllreduceStaged,
        ("reduce", "partitioned") => Algo::ReducePartitioned,
        ("reduce", "staged") => Algo::ReduceStaged,
        ("reduce", "root-read") => Algo::ReduceRootRead,
        _ => return None,
    })
}

/// The `zcoll bench` arguments that time [`PLOTTED`] on `p` ranks at `sizes`.
pub fn bench_args(p: usize, sizes: &str, iters: Option<usize>) -> BenchArgs {
    let colls: Vec<&str> = PLOTTED.iter().map(|(c, _)| *c).collect();
    let mut algos: Vec<&str> = Vec::new();
    for name in PLOTTED.iter().flat_map(|(_, a)| a.iter().copied()) {
        if !algos.contains(&name) && (name != "throttled-read" || p > 2) {
            algos.push(name);
        }
    }
    let (coll, algorithms) = (colls.join(","), algos.join(","));
    let mut line = vec!["bench", "--coll", &coll, "--algorithms", &algorithms, "--sizes", sizes];
    let iters = iters.map(|n| n.to_string());
    if let Some(n) = &iters {
        line.extend(["--iters", n]);
    }
    BenchArgs::try_parse_from(line).expect("the plot's own arguments parse")
}

/// One measured point beside the model's prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// The collective's name in the table.
    pub coll: &'static str,
    /// zcoll's algorithm, by name.
    pub algorithm: String,
    /// The message size in bytes.
    pub size: usize,
    /// Microseconds: the median `zcoll bench` measured, and the model's.
    pub measured: f64,
    /// The model's prediction, microseconds.
    pub predicted: f64,
}

impl Compared {
    /// Measured over predicted: above 1, the collective is slower than the model says.
    pub fn ratio(&self) -> f64 {
        self.measured / self.predicted
    }
}

/// The model's prediction with `params` on a node of `p` ranks for every row it
/// describes.
pub fn compare(rows: &[Row], params: &Params, p: usize) -> Vec<Compared> {
    rows.iter()
        .filter_map(|r| {
            let algo = model_algo(r.coll, &r.algorithm)?;
            Some(Compared {
                coll: r.coll,
                algorithm: r.algorithm.clone(),
                size: r.size,
                measured: r.zcoll.median,
                predicted: params.predict(algo, p, r.size) * 1e6,
            })
        })
        .collect()
}

/// The comparison as a table, and the median ratio per collective and algorithm.
pub fn table(points: &[Compared]) -> String {
    let mut out = format!(
        "{:<10} {:<19} {:>6} {:>12} {:>13} {:>9}",
        "coll", "algorithm", "size", "measured_us", "predicted_us", "meas/pred"
    );
    for c in points {
        let _ = write!(
            out,
            "\n{:<10} {:<19} {:>6} {:>12.2} {:>13.2} {:>9.2}",
            c.coll,
            c.algorithm,
            stats::format_size(c.size),
            c.measured,
            c.predicted,
            c.ratio()
        );
    }
    for (coll, algorithm) in series_keys(points) {
        let ratios: Vec<f64> = points
            .iter()
            .filter(|c| c.coll == coll && c.algorithm == algorithm)
            .map(Compared::ratio)
            .collect();
        let s = stats::Summary::of(&ratios).expect("a key has a point");
        let _ = write!(
            out,
            "\n# {coll} {algorithm}: measured/predicted median {:.2} ({:.2}..{:.2})",
            s.median, s.min, s.max
        );
    }
    out
}

/// The (collective, algorithm) pairs of `points`, in their order.
fn series_keys(points: &[Compared]) -> Vec<(&'static str, &str)> {
    let mut keys: Vec<(&'static str, &str)> = Vec::new();
    for c in points {
        if !keys.contains(&(c.coll, c.algorithm.as_str())) {
            keys.push((c.coll, &c.algorithm));
        }
    }
    keys
}

/// One panel per collective: each algorithm's measurements as points and the model's
/// prediction as a line, in one colour.
pub fn panels(points: &[Compared], p: usize, source: &str) -> Vec<Panel> {
    let mut colls: Vec<&str> = points.iter().map(|c| c.coll).collect();
    colls.dedup();
    colls
        .into_iter()
        .map(|coll| {
            let algos: Vec<&str> =
                series_keys(points).into_iter().filter(|k| k.0 == coll).map(|k| k.1).collect();
            let series = algos
                .iter()
                .enumerate()
                .flat_map(|(i, a)| {
                    let mine: Vec<&Compared> =
                        points.iter().filter(|c| c.coll == coll && c.algorithm == *a).collect();
                    [
                        Series {
                            label: format!("{a}: measured"),
                            points: mine.iter().map(|c| (c.size as f64, c.measured)).collect(),
                            style: Style::Points,
                            color: Some(i),
                        },
                        Series {
                            label: format!("{a}: model"),
                            points: mine.iter().map(|c| (c.size as f64, c.predicted)).collect(),
                            style: Style::Line,
                            color: Some(i),
                        },
                    ]
                })
                .collect();
            Panel {
                title: format!("{coll}, {p} ranks: measured against the model ({source})"),
                y_label: "latency (µs): measured median (points), model (lines)".into(),
                series,
            }
        })
        .collect()
}

/// Times [`PLOTTED`] on every rank and, on rank 0, prints the comparison with `params`
/// and writes the SVG to `path`.
///
/// # Errors
///
/// A bad `--plot-sizes` (on every rank), more than one node, or a file that cannot be
/// written (rank 0).
pub fn plot(
    world: &mpi::topology::SimpleCommunicator,
    comm: &zcoll::Comm,
    params: Option<&Params>,
    sizes: &str,
    iters: Option<usize>,
    path: &std::path::Path,
) -> Result<(), String> {
    let info = comm.info();
    if info.nodes != 1 {
        return Err(format!("--plot: the model describes one node; this job spans {}", info.nodes));
    }
    let p = info.node_ranks.len();
    let rows = bench::measure(world, comm, &bench_args(p, sizes, iters), false)?;
    let Some(params) = params else { return Ok(()) };
    let points = compare(&rows, params, p);
    println!("# measured (zcoll bench's median of the per-iteration maximum) against the model");
    println!("{}", table(&points));
    let svg = super::plot::svg(&panels(&points, p, "fitted parameters"));
    std::fs::write(path, svg).map_err(|e| format!("--plot {}: {e}", path.display()))?;
    println!("# plot written to {}", path.display());
    Ok(())
}

/// The parameters `zcoll tune --predict` plans with, and a sentence saying where they
/// come from: the profile at `path`, else the one zcoll itself would use on this machine
/// (its profile, keyed by CPU, core count and kernel, or the built-in defaults).
///
/// # Errors
///
/// A profile at `path` that cannot be read or is out of range.
pub fn predict_params(path: Option<&std::path::Path>) -> Result<(Params, String), String> {
    match path {
        Some(path) => {
            let profile = Profile::load(path).map_err(|e| e.to_string())?;
            let m = &profile.machine;
            Ok((profile.params, format!("{} ({} cores), profile {}", m.cpu, m.cores, path.display())))
        }
        None => {
            let (params, source) = select::active();
            Ok((*params, format!("this machine's parameters: {source}")))
        }
    }
}

/// The model's choice and predicted time per collective and size on `p` ranks, as
/// `zcoll tune --predict` prints it, with the rounds' cost and the structure of flags the
/// model would prefer.
pub fn predict_table(params: &Params, p: usize, sizes: &[usize], single_copy: bool) -> String {
    let mut out = format!("{:<10} {:>10}  {:<28} {:>12}", "coll", "bytes", "algorithm", "predicted_us");
    let keep = |a: Algo| !(single_copy && a.is_staged());
    for c in select::plan_among(params, p, sizes, keep) {
        let _ = write!(
            out,
            "\n{:<10} {:>10}  {:<28} {:>12.2}",
            c.coll.name(),
            c.bytes,
            format!("{:?}", c.algo),
            c.seconds * 1e6
        );
    }
    let runs = params.sync(false, p) * 1e6;
    let flat = params.sync_with(false, p, Flags::Flat) * 1e6;
    let _ = write!(out, "\n# rounds of a single-copy call: {runs:.2} us as zcoll runs them (arrivals ");
    let _ = match params.sync_structure(p) {
        best @ Flags::Tree(k) => write!(
            out,
            "up and down a tree of fan-in {k}, finish flat); flat in both phases {flat:.2} us; the tree in \
             both {:.2} us (modelled: the finish is not built as a tree)",
            params.sync_with(false, p, best) * 1e6
        ),
        Flags::Flat => write!(out, "flat, finish flat)"),
    };
    out
}

/// One panel per collective: every candidate's predicted latency on `p` ranks against
/// the size, one line each, so that the choice can be seen where the lines cross.
pub fn predict_panels(
    params: &Params,
    p: usize,
    sizes: &[usize],
    single_copy: bool,
    source: &str,
) -> Vec<Panel> {
    Coll::ALL
        .into_iter()
        .map(|coll| {
            let series = select::candidates(coll, p)
                .into_iter()
                .filter(|a| !(single_copy && a.is_staged()))
                .enumerate()
                .map(|(i, algo)| Series {
                    label: format!("{algo:?}"),
                    points: sizes.iter().map(|&n| (n as f64, params.predict(algo, p, n) * 1e6)).collect(),
                    style: if algo.is_staged() { Style::Dashed } else { Style::Line },
                    color: Some(i),
                })
                .collect();
            Panel {
                title: format!("{}, {p} ranks: the model's prediction ({source})", coll.name()),
                y_label: "predicted latency (µs)".into(),
                series,
            }
        })
        .collect()
}

/// `zcoll tune --predict`: prints the plan for `p` ranks (default: the profile's cores)
/// with the profile at `path` or this machine's parameters, and with `plot` draws every
/// candidate's prediction at `plot_sizes` to that SVG file.
///
/// # Errors
///
/// An unreadable profile, bad sizes, or a plot that cannot be written.
pub fn predict(
    path: Option<&std::path::Path>,
    p: Option<usize>,
    sizes: &[usize],
    single_copy: bool,
    plot: Option<(&std::path::Path, &str)>,
) -> Result<(), String> {
    let (params, source) = predict_params(path)?;
    let p = match (p, path) {
        (Some(p), _) => p,
        (None, Some(path)) => Profile::load(path).map_err(|e| e.to_string())?.machine.cores,
        (None, None) => zcoll::tune::Machine::this().cores,
    };
    println!("# {source}");
    println!(
        "# {p} ranks per node{}",
        if single_copy { "; single-copy algorithms only (no staging)" } else { "" }
    );
    println!("{}", predict_table(&params, p, sizes, single_copy));
    if let Some((file, plot_sizes)) = plot {
        let sizes = stats::parse_sizes(plot_sizes)?;
        let short = path.map_or("this machine".to_owned(), |f| f.display().to_string());
        let svg = super::plot::svg(&predict_panels(&params, p, &sizes, single_copy, &short));
        std::fs::write(file, svg).map_err(|e| format!("--plot {}: {e}", file.display()))?;
        println!("# plot written to {}", file.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn row(coll: &'static str, algorithm: &str, size: usize, us: f64) -> Row {
        let s = Summary { median: us, min: us, max: us };
        Row {
            coll,
            algorithm: algorithm.into(),
            buffers: crate::colls::Buffers::Vec,
            moved: "cma".into(),
            transport: "cma".into(),
            np: 2,
            size,
            iters: 10,
            mpi: s,
            zcoll: s,
            memcpy: s,
            copy: s,
        }
    }

    #[test]
    fn every_plotted_algorithm_is_modelled_and_the_arguments_parse() {
        for (coll, algos) in PLOTTED {
            for a in *algos {
                assert!(model_algo(coll, a).is_some(), "{coll} {a}");
            }
        }
        assert_eq!(model_algo("alltoall", "pap-write"), None);
        assert_eq!(model_algo("bcast", "auto"), None);
        let args = bench_args(2, "8:1M:4", Some(7));
        assert_eq!(args.coll, "scatter,bcast,allgather");
        assert!(!args.algorithms.contains("throttled-read"));
        assert_eq!(args.algorithms.matches("staged").count(), 1);
        assert_eq!(args.iters, Some(7));
        assert!(bench_args(4, "8", None).algorithms.contains("throttled-read"));
    }

    #[test]
    fn predictions_line_up_with_the_rows_and_print() {
        let params = Params::DEFAULT;
        let rows = vec![
            row("scatter", "parallel-read", 4096, 3.0),
            row("scatter", "parallel-read", 1 << 20, 80.0),
            row("scatter", "staged", 4096, 1.0),
            row("scatter", "auto", 4096, 1.0),
            row("bcast", "direct-read", 4096, 2.0),
        ];
        let points = compare(&rows, &params, 2);
        assert_eq!(points.len(), 4, "auto is not modelled");
        let want = params.predict(Algo::ScatterParallelRead, 2, 1 << 20) * 1e6;
        assert!((points[1].predicted - want).abs() < 1e-9);
        assert!((points[1].ratio() - 80.0 / want).abs() < 1e-9);
        let text = table(&points);
        let line: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(line[..4], ["scatter", "parallel-read", "1M", "80.00"]);
        assert_eq!(line[4], format!("{want:.2}"));
        assert!(text.contains("# scatter parallel-read: measured/predicted median"));
        assert_eq!(text.matches("\n# ").count(), 3, "{text}");

        let panels = panels(&points, 2, "test");
        assert_eq!(panels.len(), 2);
        let s = &panels[0].series;
        assert_eq!(s.len(), 4);
        assert_eq!(
            (s[0].style, s[0].color, s[1].style, s[1].color),
            (Style::Points, Some(0), Style::Line, Some(0))
        );
        assert_eq!((s[2].label.as_str(), s[2].color), ("staged: measured", Some(1)));
        assert_eq!(s[1].points, [(4096.0, points[0].predicted), (1048576.0, points[1].predicted)]);
        assert!(panels[1].title.starts_with("bcast, 2 ranks"));
    }

    #[test]
    fn predict_prints_the_plan_and_draws_every_candidate() {
        let params = Params { flag: 0.2e-6, ..Params::DEFAULT };
        let text = predict_table(&params, 64, &[8, 1 << 20], false);
        // A header, two sizes per collective, the rounds' line.
        assert_eq!(text.lines().count(), 1 + 2 * Coll::ALL.len() + 1, "{text}");
        let first: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        let (algo, t) = params.best(&select::candidates(Coll::Bcast, 64), 64, 8).unwrap();
        assert_eq!(first, ["bcast", "8", &format!("{algo:?}"), &format!("{:.2}", t * 1e6)]);
        // 64 ranks, flat: sync_copy + 2 phases x 62 flags = 1.5 + 24.8 us; a binary tree
        // of 6 levels reads 12 flags a phase: 1.5 + 2 x 11 x 0.2 = 5.9 us; as zcoll runs
        // them, the tree's arrival and a flat finish: 1.5 + (11 + 62) x 0.2 = 16.1 us.
        let rounds = text.lines().last().unwrap();
        assert!(rounds.contains("16.10 us as zcoll runs them"), "{rounds}");
        assert!(rounds.contains("tree of fan-in 2, finish flat"), "{rounds}");
        assert!(rounds.contains("flat in both phases 26.30 us"), "{rounds}");
        assert!(rounds.contains("the tree in both 5.90 us"), "{rounds}");
        let one = predict_table(&params, 64, &[8], true);
        assert!(!one.contains("Staged"), "{one}");

        let panels = predict_panels(&params, 8, &[8, 4096], false, "test");
        assert_eq!(panels.len(), Coll::ALL.len());
        let scatter = &panels[1];
        assert!(scatter.title.starts_with("scatter, 8 ranks"));
        assert_eq!(scatter.series.len(), select::candidates(Coll::Scatter, 8).len());
        let staged = scatter.series.iter().find(|s| s.label == "ScatterStaged").unwrap();
        assert_eq!(staged.style, Style::Dashed);
        assert_eq!(staged.points[1], (4096.0, params.predict(Algo::ScatterStaged, 8, 4096) * 1e6));
    }

    #[test]
    fn predict_reads_a_profile_or_says_it_uses_this_machines() {
        let (_, source) = predict_params(None).unwrap();
        assert!(source.starts_with("this machine's parameters: "), "{source}");
        assert!(source.contains("profile") || source.contains("built-in defaults"), "{source}");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/broadwell-28c.toml");
        let (params, source) = predict_params(Some(std::path::Path::new(path))).unwrap();
        assert_eq!((params.alpha, params.l), (0.98e-6, 0.11e-6));
        assert!(source.contains("28 cores"), "{source}");
        assert!(predict_params(Some(std::path::Path::new("/nonexistent.toml"))).is_err());
    }
}
