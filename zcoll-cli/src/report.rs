//! `zcoll report`: the comparison against both MPI libraries, from the files
//! `scripts/compare` leaves in its output directory, as Markdown (BENCHMARKS.md).
//!
//! The directory holds one `zcoll bench` CSV and its printed log per library and run,
//! `openmpi-<i>.csv`/`.log` and `mpich-<i>.csv`/`.log`, and `meta.txt`, lines of
//! `key: value` that the script wrote: `date`, `machine`, `rust`, `zcoll`, `command`,
//! `<library> detail` (optional, shown after the library's version), and one
//! `run: <library> <i> <load averages>` line per run, logged just before it.
//!
//! Per cell (collective, buffers, size) and run pair `i`: the ratio against Open MPI is
//! Open MPI's time over zcoll's time, both from Open MPI run `i` (the same job, calls
//! interleaved); against MPICH likewise from MPICH run `i`; against the faster library the
//! smaller of the two. The report gives the median over the pairs of each ratio. No MPI
//! is needed: this runs without `mpiexec`.

use crate::plot::{self, Panel, Series, Style};
use crate::regime;
use crate::stats::{self, Summary};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Turn the output of `scripts/compare` into the Markdown report (no MPI needed).
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "report")]
pub struct ReportArgs {
    /// The directory `scripts/compare` wrote (`meta.txt`, `<library>-<run>.csv` and `.log`).
    pub dir: PathBuf,
    /// Write the report to this file [default: standard output].
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Where to write one SVG plot per kind of buffers [default: DIR]; the report links
    /// them relative to --output's directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

/// The two libraries, as `scripts/compare` names their files, and as the report names them.
pub const LIBRARIES: [(&str, &str); 2] = [("openmpi", "Open MPI"), ("mpich", "MPICH")];

/// One measured point of one run: zcoll's default against the library's collective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The MPI library's time, microseconds.
    pub mpi_us: f64,
    /// zcoll's time, microseconds.
    pub zcoll_us: f64,
    /// One copy of the bytes a rank receives with zcoll's copy routine (`copy_us`, the
    /// floor), microseconds; NaN where the call moves no bytes or the CSV predates it.
    pub copy_us: f64,
}

impl Point {
    /// How many times faster zcoll was in this run (above 1: zcoll is faster).
    pub fn ratio(&self) -> f64 {
        self.mpi_us / self.zcoll_us
    }
}

/// A cell of the report: collective, buffers, size in bytes.
pub type Key = (String, String, usize);

/// One run's CSV: the default algorithm's points by cell, in the file's order.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// The points, in the order of the file.
    pub points: Vec<(Key, Point)>,
    /// The ranks of the job (from the CSV's `np` column), and the node's transport.
    pub np: Vec<usize>,
    /// The transports named in the file.
    pub transports: Vec<String>,
}

/// Reads a `zcoll bench` CSV, keeping zcoll's default (`auto`) rows.
///
/// # Errors
///
/// A missing column or a number that does not parse, with its line.
pub fn parse_csv(text: &str) -> Result<Run, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).ok_or(format!("no column {name}"));
    let (c_coll, c_algo, c_buf, c_tr, c_np, c_size, c_mpi, c_z) = (
        col("coll")?,
        col("algorithm")?,
        col("buffers")?,
        col("transport")?,
        col("np")?,
        col("size")?,
        col("mpi_us")?,
        col("zcoll_us")?,
    );
    let c_copy = col("copy_us").ok();
    let mut run = Run::default();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let field = |c: usize| f.get(c).copied().ok_or(format!("line {}: too few fields", n + 2));
        if field(c_algo)? != "auto" {
            continue;
        }
        let num = |c: usize| -> Result<f64, String> {
            field(c)?.parse().map_err(|_| format!("line {}: {:?} is not a number", n + 2, f[c]))
        };
        let key = (field(c_coll)?.to_owned(), field(c_buf)?.to_owned(), num(c_size)? as usize);
        let copy_us = c_copy.map(num).transpose()?.filter(|&v| v > 0.0).unwrap_or(f64::NAN);
        run.points.push((key, Point { mpi_us: num(c_mpi)?, zcoll_us: num(c_z)?, copy_us }));
        let np = num(c_np)? as usize;
        if !run.np.contains(&np) {
            run.np.push(np);
        }
        let tr = field(c_tr)?.to_owned();
        if !run.transports.contains(&tr) {
            run.transports.push(tr);
        }
    }
    Ok(run)
}

/// The median of `v` (the mean of the middle two for an even count); NaN if empty.
pub fn median(v: &[f64]) -> f64 {
    Summary::of(v).map_or(f64::NAN, |s| s.median)
}

/// One cell, summed up over the run pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Collective, buffers, size.
    pub key: Key,
    /// zcoll's time in the Open MPI build's runs (median over them), microseconds.
    pub zcoll_openmpi_us: f64,
    /// zcoll's time in the MPICH build's runs (median over them), microseconds.
    pub zcoll_mpich_us: f64,
    /// Open MPI's time, median over its runs.
    pub openmpi_us: f64,
    /// MPICH's time, median over its runs.
    pub mpich_us: f64,
    /// Median over the pairs of the ratio against Open MPI.
    pub vs_openmpi: f64,
    /// Median over the pairs of the ratio against MPICH.
    pub vs_mpich: f64,
    /// Median over the pairs of the smaller of the two ratios.
    pub vs_faster: f64,
    /// The lowest and highest per-pair ratio against the faster library.
    pub faster_range: (f64, f64),
    /// How many run pairs had this cell.
    pub pairs: usize,
    /// zcoll's time over one copy of the received bytes (the floor), median over every
    /// run of both builds; NaN if no run timed the copy.
    pub vs_copy: f64,
}

/// The cells of paired runs (`pairs[i]` = Open MPI run, MPICH run), in the order of the
/// first Open MPI run; a cell missing from one run of a pair skips that pair.
pub fn cells(pairs: &[(Run, Run)]) -> Vec<Cell> {
    let mut order: Vec<&Key> = Vec::new();
    for (o, _) in pairs {
        for (k, _) in &o.points {
            if !order.contains(&k) {
                order.push(k);
            }
        }
    }
    let find = |run: &Run, key: &Key| run.points.iter().find(|(k, _)| k == key).map(|&(_, p)| p);
    let mut out = Vec::new();
    for key in order {
        let (mut zo, mut zm, mut om, mut mm) = (vec![], vec![], vec![], vec![]);
        let (mut ro, mut rm, mut rf, mut rc) = (vec![], vec![], vec![], vec![]);
        for (o, m) in pairs {
            let (Some(po), Some(pm)) = (find(o, key), find(m, key)) else { continue };
            zo.push(po.zcoll_us);
            zm.push(pm.zcoll_us);
            om.push(po.mpi_us);
            mm.push(pm.mpi_us);
            ro.push(po.ratio());
            rm.push(pm.ratio());
            rf.push(po.ratio().min(pm.ratio()));
            rc.extend([po, pm].iter().map(|p| p.zcoll_us / p.copy_us).filter(|r| r.is_finite()));
        }
        if rf.is_empty() {
            continue;
        }
        let range = Summary::of(&rf).map_or((f64::NAN, f64::NAN), |s| (s.min, s.max));
        out.push(Cell {
            key: key.clone(),
            zcoll_openmpi_us: median(&zo),
            zcoll_mpich_us: median(&zm),
            openmpi_us: median(&om),
            mpich_us: median(&mm),
            vs_openmpi: median(&ro),
            vs_mpich: median(&rm),
            vs_faster: median(&rf),
            faster_range: range,
            pairs: rf.len(),
            vs_copy: median(&rc),
        });
    }
    out
}

/// The directory's `meta.txt`: every `key: value` line, keys in order of appearance
/// (a key may repeat: `run`).
pub fn parse_meta(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// The MPI library named in a `zcoll bench` log's header
/// (`# zcoll 0.1.0 bench: 2 ranks on 1 node(s), transport cma, Open MPI v4.1.4`).
pub fn library_of_log(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.starts_with("# zcoll ") && l.contains(" bench: "))?;
    line.rsplit_once(", ").map(|(_, lib)| lib.trim().to_owned())
}

/// `s` with its first letter upper-case.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

/// How a `zcoll bench` log says its calls started (its `# start: ` line); logs from
/// before that line was printed have none, and their calls started at each rank's exit of
/// a barrier.
pub fn start_of_log(log: &str) -> String {
    log.lines()
        .find_map(|l| l.strip_prefix("# start: "))
        .unwrap_or("every call starts at each rank's exit of a barrier")
        .to_owned()
}

fn size_text(size: usize) -> String {
    if size == 0 {
        "-".into()
    } else {
        stats::format_size(size)
    }
}

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The path to link `target` by from a file in `from_dir` (relative when `target` lies
/// under it, else as given).
fn link(target: &Path, from_dir: Option<&Path>) -> String {
    let rel = from_dir.and_then(|d| target.strip_prefix(d).ok()).unwrap_or(target);
    rel.display().to_string()
}

/// Reads the directory, writes the plots and returns the Markdown.
///
/// # Errors
///
/// A missing or unreadable file, a CSV that does not parse, no complete run pair, or a
/// plot that cannot be written.
pub fn run(args: &ReportArgs) -> Result<String, String> {
    let dir = &args.dir;
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    let meta = parse_meta(&read("meta.txt")?);
    let get = |k: &str| meta.iter().find(|(key, _)| key == k).map_or("?", |(_, v)| v.as_str());
    // Runs as logged: (library, index, load averages).
    let mut runs: Vec<(String, usize, String)> = Vec::new();
    for (_, v) in meta.iter().filter(|(k, _)| k == "run") {
        let mut w = v.split_whitespace();
        let (Some(lib), Some(i)) = (w.next(), w.next().and_then(|i| i.parse().ok())) else {
            return Err(format!("meta.txt: bad run line {v:?}"));
        };
        runs.push((lib.to_owned(), i, w.collect::<Vec<_>>().join(" ")));
    }
    let mut parsed: BTreeMap<(String, usize), Run> = BTreeMap::new();
    let mut versions: BTreeMap<String, String> = BTreeMap::new();
    let mut starts: Vec<String> = Vec::new();
    let mut regimes: BTreeMap<(String, usize), (f64, f64)> = BTreeMap::new();
    for (lib, i, _) in &runs {
        let stem = format!("{lib}-{i}");
        let run = parse_csv(&read(&format!("{stem}.csv"))?).map_err(|e| format!("{stem}.csv: {e}"))?;
        if let Ok(log) = read(&format!("{stem}.log")) {
            if let Some(v) = library_of_log(&log) {
                versions.entry(lib.clone()).or_insert(v);
            }
            starts.push(start_of_log(&log));
            if let Some(r) = regime::of_log(&log) {
                regimes.insert((lib.clone(), *i), r);
            }
        }
        parsed.insert((lib.clone(), *i), run);
    }
    starts.sort_unstable();
    starts.dedup();
    let mut pairs = Vec::new();
    let mut indices: Vec<usize> = runs.iter().map(|r| r.1).collect();
    indices.sort_unstable();
    indices.dedup();
    for i in indices {
        if let (Some(o), Some(m)) =
            (parsed.get(&("openmpi".to_owned(), i)), parsed.get(&("mpich".to_owned(), i)))
        {
            pairs.push((o.clone(), m.clone()));
        }
    }
    if pairs.is_empty() {
        return Err(format!("{}: no run has both an Open MPI and an MPICH CSV", dir.display()));
    }
    let all_cells = cells(&pairs);
    let mut nps: Vec<usize> = parsed.values().flat_map(|r| r.np.iter().copied()).collect();
    nps.sort_unstable();
    nps.dedup();
    let mut transports: Vec<String> = parsed.values().flat_map(|r| r.transports.iter().cloned()).collect();
    transports.sort_unstable();
    transports.dedup();

    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "zcoll's collectives against the MPI library's own, inside one node, measured against \
         both Open MPI and MPICH and judged against the **faster** of the two. This file is \
         generated: `scripts/compare` runs the benchmark and `zcoll report` writes this page \
         from its CSVs (git keeps the earlier, hand-kept campaign log).\n"
    );
    let _ = writeln!(w, "## The run\n");
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| date | {} |", get("date"));
    let _ = writeln!(w, "| machine | {} |", get("machine"));
    for (file, name) in LIBRARIES {
        let detail = meta.iter().find(|(k, _)| *k == format!("{file} detail"));
        let detail = detail.map_or(String::new(), |(_, v)| format!(" ({v})"));
        let _ = writeln!(w, "| {name} | {}{detail} |", versions.get(file).map_or("?", String::as_str));
    }
    let _ = writeln!(w, "| Rust | {} |", get("rust"));
    let _ = writeln!(w, "| zcoll | {} |", get("zcoll"));
    let nps_text = nps.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
    let _ = writeln!(w, "| ranks | {nps_text}, one node, transport {} |", transports.join(", "));
    let _ = writeln!(w, "| run pairs | {} |", pairs.len());
    if pairs.len() == 1 {
        let _ = writeln!(
            w,
            "\n**One run pair only:** nothing shows how far runs disagree; read every ratio as an \
             indication, not a verdict."
        );
    }
    let _ = writeln!(w, "\nThe command that reproduces it (on a quiet machine):\n");
    let _ = writeln!(w, "```text\n{}\n```\n", get("command"));
    if nps.len() > 1 {
        let _ = writeln!(
            w,
            "**Warning:** the runs do not agree on the number of ranks ({nps_text}): a binary \
             started by the other library's launcher runs as separate one-rank jobs.\n"
        );
    }
    let _ = writeln!(
        w,
        "Load average (1, 5 and 15 minutes, from `/proc/loadavg`) just before each run, and \
         the round trip of a one-byte message of that run's MPI library between ranks 0 and 1 \
         before and after it (the cores' distance, which moves every small call; see \
         \"Regime\" below):\n"
    );
    let _ = writeln!(w, "| run | library | load average | ping-pong 0<->1, us |\n|---|---|---|---|");
    for (lib, i, load) in &runs {
        let name = LIBRARIES.iter().find(|(f, _)| f == lib).map_or(lib.as_str(), |(_, n)| n);
        let pp = regimes.get(&(lib.clone(), *i)).map_or("-".into(), |(b, a)| format!("{b:.2} / {a:.2}"));
        let _ = writeln!(w, "| {i} | {name} | {load} | {pp} |");
    }
    let _ = writeln!(w);
    method(w, pairs.len(), &starts);

    let mut kinds: Vec<&str> = all_cells.iter().map(|c| c.key.1.as_str()).collect();
    kinds.dedup();
    let mut seen = Vec::new();
    kinds.retain(|k| {
        let new = !seen.contains(k);
        seen.push(*k);
        new
    });
    let plot_dir = args.plots.clone().unwrap_or_else(|| dir.clone());
    let out_dir = args.output.as_deref().map(|o| o.parent().unwrap_or(Path::new("")));
    for kind in &kinds {
        let mine: Vec<&Cell> = all_cells.iter().filter(|c| c.key.1 == *kind).collect();
        let title = match *kind {
            "vec" => "`Vec` buffers (ordinary memory)",
            "heap" => "shared-heap buffers (`Comm::alloc`)",
            "global" => "`Vec`s served from the shared heap (`ShmAlloc`)",
            other => other,
        };
        let _ = writeln!(w, "## {title}\n");
        let _ = writeln!(
            w,
            "Times in µs, medians over the runs: zcoll's in the Open MPI build's runs / in the \
             MPICH build's runs, and each library's in its runs. Ratios are medians over the run \
             pairs of per-run ratios (with one pair: the library's time over zcoll's in the same \
             job); above 1 zcoll is faster. zcoll / one copy: zcoll's time over one copy of the \
             bytes a rank receives with zcoll's own copy routine (`zcoll::copy_bytes`, timed in \
             the same job), median over every run: the floor, 1.0 would be a single copy.{}\n",
            if pairs.len() > 1 { " After vs faster: the lowest and highest pair." } else { "" }
        );
        let _ = writeln!(
            w,
            "| collective | size | zcoll µs (Open MPI / MPICH job) | zcoll / one copy | Open MPI µs | MPICH µs | vs Open MPI | vs MPICH | vs faster |"
        );
        let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for c in &mine {
            let faster = if c.pairs > 1 {
                format!("{:.2} ({:.2}–{:.2})", c.vs_faster, c.faster_range.0, c.faster_range.1)
            } else {
                format!("{:.2}", c.vs_faster)
            };
            let mark = if c.vs_faster < 1.0 { "**" } else { "" };
            let floor = if c.vs_copy.is_finite() { format!("{:.2}", c.vs_copy) } else { "-".into() };
            let _ = writeln!(
                w,
                "| {} | {} | {} / {} | {floor} | {} | {} | {:.2} | {:.2} | {mark}{faster}{mark} |",
                c.key.0,
                size_text(c.key.2),
                us(c.zcoll_openmpi_us),
                us(c.zcoll_mpich_us),
                us(c.openmpi_us),
                us(c.mpich_us),
                c.vs_openmpi,
                c.vs_mpich
            );
        }
        let panels = panels(&mine);
        if !panels.is_empty() {
            std::fs::create_dir_all(&plot_dir).map_err(|e| format!("{}: {e}", plot_dir.display()))?;
            let path = plot_dir.join(format!("compare-{kind}.svg"));
            std::fs::write(&path, plot::svg(&panels)).map_err(|e| format!("{}: {e}", path.display()))?;
            let _ = writeln!(w, "\n![latency against size, {kind} buffers]({})", link(&path, out_dir));
        }
        let _ = writeln!(w);
    }

    let slower: Vec<&Cell> = all_cells.iter().filter(|c| c.vs_faster < 1.0).collect();
    let _ = writeln!(w, "## Where zcoll is slower than the faster library\n");
    if slower.is_empty() {
        let _ = writeln!(
            w,
            "No cell: the median ratio against the faster library is at least 1.0 in all {}.",
            all_cells.len()
        );
    } else {
        let _ = writeln!(
            w,
            "{} of {} cells have a median ratio below 1.0 against the faster library:\n",
            slower.len(),
            all_cells.len()
        );
        let _ =
            writeln!(w, "| collective | buffers | size | vs faster | slower than |\n|---|---|---:|---:|---|");
        for c in slower {
            let who = match (c.vs_openmpi < 1.0, c.vs_mpich < 1.0) {
                (true, true) => "both",
                (true, false) => "Open MPI",
                (false, true) => "MPICH",
                (false, false) => "neither median alone (the pairs disagree)",
            };
            let _ = writeln!(
                w,
                "| {} | {} | {} | {:.2} | {who} |",
                c.key.0,
                c.key.1,
                size_text(c.key.2),
                c.vs_faster
            );
        }
    }
    Ok(md)
}

/// The section on method, in the report itself so that it travels with the numbers.
fn method(w: &mut String, pairs: usize, starts: &[String]) {
    let _ = writeln!(w, "## Method\n");
    let _ = writeln!(
        w,
        "- **What runs.** `zcoll bench --coll all` times, inside one job, the MPI library's \
         collective (through rsmpi) and zcoll's default (`auto`, the cost model's choice) in an \
         order shuffled every iteration, on buffers of its own (so \
         that no call inherits the cache state another implementation left in them) and with \
         fresh send data, and checks every result. A run's time is the median over iterations of the slowest \
         rank's time. zcoll is built twice, against Open MPI (`target/release`) and against \
         MPICH (`target/mpich/release`), and each build is launched by its own library's \
         `mpiexec`; so zcoll is compared with each library inside the same job, under the same \
         load."
    );
    let _ = writeln!(
        w,
        "- **Start.** {} (`zcoll bench --start`), and a rank's time runs from there to its \
         return. The ranks do not leave an `MPI_Barrier` at once: at 2 ranks MPICH 4.0 lets \
         rank 0 go about 0.3 µs before rank 1, every time, Open MPI 4.1 about 0.05 µs either \
         way, and a call timed from each rank's own exit counts that skew (`--start clock`, \
         the default where the ranks share one host, leaves it out).",
        match starts {
            [one] => capitalized(one),
            _ => format!("Not the same in every run: {}", starts.join("; ")),
        }
    );
    let _ = writeln!(
        w,
        "- **Binding.** Two ranks, each bound to its own core (`--bind-to core` for Open MPI, \
         `-bind-to core` for MPICH's hydra): unbound, the kernel may keep both ranks on one \
         core for a whole run and the benchmark then measures context switches."
    );
    let _ = writeln!(
        w,
        "- **Ratios.** Per cell (collective, buffers, size) and run pair: the ratio against a \
         library is its time over zcoll's time in that library's run; the ratio against the \
         faster library is the smaller of the two. The tables give the median over the {pairs} \
         pair(s) of each ratio, never a ratio of medians: a disturbance that slows one whole \
         run then cancels out in its ratio instead of deciding the comparison."
    );
    let _ = writeln!(
        w,
        "- **Alternation.** The Open MPI and MPICH runs alternate (and which goes first \
         alternates from pair to pair), so a slow drift of the machine's load falls on both. \
         Inside a run, every kind of buffers of a point is measured right after the other, so \
         that the comparison of `Vec` and heap buffers is not one of two moments."
    );
    let _ = writeln!(
        w,
        "- **Noise.** The load average before each run is logged above, because load moves \
         every time, small sizes included: on the shared 2-core development machine, \
         between load average 2 and 13, the 8-byte broadcast went from 0.23 to 0.85 µs for \
         zcoll and from 0.16 to 0.46 µs for Open MPI in the same jobs, and from a few MiB up single runs wander by up to 2x even at moderate load. \
         The range after the ratio against the faster library shows how far the pairs \
         disagreed. A run with a load average above the number of cores says little; cells \
         near 1.0 need a quiet machine and more pairs (`ZCOLL_COMPARE_RUNS`) before they mean \
         anything.\n"
    );
    let _ = writeln!(
        w,
        "- **Regime.** On the development machine the two cores' distance changes under a \
         running job, within minutes: a cache line's round trip between them takes about \
         120 ns for a while and about 500 ns for another. Every small call of zcoll and of \
         both libraries hands a few lines from core to core, so in the far regime all of \
         them are slower, by factors that differ between the libraries and the calls: a \
         small-size cell near 1.0 can flip with the regime. The ping-pong column above \
         tells the regime of each run; small-size cells from runs of different regimes do \
         not compare.\n"
    );
}

/// One panel per collective measured at several sizes: zcoll, Open MPI and MPICH.
fn panels(cells: &[&Cell]) -> Vec<Panel> {
    let mut colls: Vec<&str> = cells.iter().map(|c| c.key.0.as_str()).collect();
    colls.dedup();
    let mut out = Vec::new();
    for coll in colls {
        let mine: Vec<&&Cell> = cells.iter().filter(|c| c.key.0 == coll).collect();
        if mine.len() < 2 {
            continue;
        }
        let line = |label: &str, color: usize, y: fn(&Cell) -> f64| Series {
            label: label.into(),
            points: mine.iter().map(|c| (c.key.2 as f64, y(c))).collect(),
            style: Style::Line,
            color: Some(color),
        };
        out.push(Panel {
            title: format!("{coll}, {} buffers", mine[0].key.1),
            y_label: "latency (µs), median over runs".into(),
            series: vec![
                line("zcoll, Open MPI build", 0, |c| c.zcoll_openmpi_us),
                line("zcoll, MPICH build", 1, |c| c.zcoll_mpich_us),
                line("Open MPI", 2, |c| c.openmpi_us),
                line("MPICH", 3, |c| c.mpich_us),
            ],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(rows: &[(&str, &str, usize, f64, f64)]) -> String {
        let mut s = String::from(crate::bench::CSV_HEADER);
        s.push('\n');
        for &(coll, buf, size, mpi, z) in rows {
            let _ =
                writeln!(s, "{coll},auto,{buf},cma,cma,2,{size},{mpi:.3},{z:.3},{:.3},0.100,0.090", mpi / z);
            let _ = writeln!(s, "{coll},staged,{buf},-,cma,2,{size},{mpi:.3},99.000,0.010,0.100,0.090");
        }
        s
    }

    #[test]
    fn ratios_are_medians_of_per_run_ratios_against_the_faster() {
        // Open MPI: 2 us against zcoll 1 us (2.0); MPICH: 1.5 against 1 (1.5): faster is MPICH.
        let o1 = parse_csv(&csv(&[("bcast", "vec", 8, 2.0, 1.0), ("bcast", "vec", 16, 1.0, 2.0)])).unwrap();
        let m1 = parse_csv(&csv(&[("bcast", "vec", 8, 1.5, 1.0), ("bcast", "vec", 16, 4.0, 2.0)])).unwrap();
        let o2 = parse_csv(&csv(&[("bcast", "vec", 8, 4.0, 1.0), ("bcast", "vec", 16, 1.0, 1.0)])).unwrap();
        let m2 = parse_csv(&csv(&[("bcast", "vec", 8, 3.0, 1.0)])).unwrap();
        assert_eq!(o1.points.len(), 2, "only the auto rows");
        assert_eq!(o1.np, [2]);
        let c = cells(&[(o1.clone(), m1.clone()), (o2, m2)]);
        assert_eq!(c.len(), 2);
        // 8 B: pair 1 min(2.0, 1.5) = 1.5, pair 2 min(4.0, 3.0) = 3.0; median 2.25.
        assert_eq!(c[0].key, ("bcast".to_owned(), "vec".to_owned(), 8));
        assert!((c[0].vs_faster - 2.25).abs() < 1e-9);
        assert!((c[0].vs_openmpi - 3.0).abs() < 1e-9 && (c[0].vs_mpich - 2.25).abs() < 1e-9);
        assert_eq!(c[0].faster_range, (1.5, 3.0));
        assert_eq!(c[0].pairs, 2);
        // 16 B is missing from MPICH run 2: pair 1 only; min(0.5, 2.0) = 0.5.
        assert_eq!(c[1].pairs, 1);
        assert!((c[1].vs_faster - 0.5).abs() < 1e-9);
        assert!((c[1].openmpi_us - 1.0).abs() < 1e-9 && (c[1].mpich_us - 4.0).abs() < 1e-9);
        assert!((c[1].zcoll_openmpi_us - 2.0).abs() < 1e-9 && (c[1].zcoll_mpich_us - 2.0).abs() < 1e-9);
        assert!((c[0].zcoll_openmpi_us - 1.0).abs() < 1e-9);
        // The floor: zcoll's 1 us over the copy's 0.09 us in all four runs.
        assert!((c[0].vs_copy - 1.0 / 0.09).abs() < 1e-6, "{}", c[0].vs_copy);
        // A CSV without the column, or a call that moves no bytes, has no floor.
        let old = "coll,algorithm,buffers,transport,np,size,mpi_us,zcoll_us\nbarrier,auto,vec,cma,2,0,1,1\n";
        let old = parse_csv(old).unwrap();
        assert!(old.points[0].1.copy_us.is_nan());
        assert!(cells(&[(old.clone(), old)])[0].vs_copy.is_nan());
    }

    #[test]
    fn meta_and_logs_parse() {
        let meta =
            parse_meta("date: 2026-11-25 07:00 UTC\nrun: openmpi 1 0.5 0.4 0.3\nrun: mpich 1 1.0 0.5 0.3\n");
        assert_eq!(meta[0], ("date".to_owned(), "2026-11-25 07:00 UTC".to_owned()));
        assert_eq!(meta.iter().filter(|(k, _)| k == "run").count(), 2);
        let log = "# zcoll 0.1.0 bench: 2 ranks on 1 node(s), transport cma, MPICH Version: 4.0.2\n# times";
        assert_eq!(library_of_log(log).as_deref(), Some("MPICH Version: 4.0.2"));
        assert_eq!(library_of_log("nothing"), None);
        let log = "# zcoll 0.1.0 bench: ...\n# start: every call starts at one instant\n# times";
        assert_eq!(start_of_log(log), "every call starts at one instant");
        assert_eq!(
            start_of_log("# zcoll 0.1.0 bench: ..."),
            "every call starts at each rank's exit of a barrier"
        );
        assert_eq!(capitalized("every call"), "Every call");
        assert_eq!(capitalized(""), "");
        assert!(parse_csv("coll,size\n").is_err());
        assert_eq!(link(Path::new("docs/b/x.svg"), Some(Path::new("docs"))), "b/x.svg");
        assert_eq!(link(Path::new("target/x.svg"), Some(Path::new(""))), "target/x.svg");
        assert_eq!(size_text(0), "-");
        assert_eq!(us(1234.5), "1234");
        assert_eq!(us(0.1234), "0.12");
    }
}
