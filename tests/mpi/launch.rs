//! Launching this test binary as the ranks of a real MPI job.
//!
//! The launcher runs `mpiexec -n P <this binary> --exact rank --ignored`, with the
//! scenario in `ZCOLL_TEST_SCENARIO`; every rank then runs the ignored test `rank`,
//! which dispatches to the scenario. A failing assertion in a rank aborts the whole job
//! (`MPI_Abort`), so a failure is a non-zero exit here, never a hang; a job that runs past
//! its time limit is killed and fails the test.
//!
//! `ZCOLL_MPI=openmpi` or `mpich` names the launcher (`mpiexec.openmpi`, `mpiexec.mpich`),
//! as in `scripts/mpiexec`; unset, it is the default `mpiexec`. The test binary must be
//! built against the same library (`scripts/with-mpich cargo test ...` for MPICH).

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One job at a time: the machines have two cores and the jobs oversubscribe them.
pub(crate) static JOBS: Mutex<()> = Mutex::new(());

/// How a job is started.
#[derive(Default)]
pub(crate) struct Job<'a> {
    pub(crate) np: usize,
    pub(crate) scenario: &'a str,
    pub(crate) env: &'a [(&'a str, &'a str)],
    /// Start the launcher without CAP_SYS_PTRACE (`setpriv --bounding-set=-sys_ptrace`),
    /// so that root's bypass of the ptrace check is gone.
    pub(crate) without_ptrace: bool,
    /// Start the launcher in a mount namespace of its own (`unshare -m`, as root) whose
    /// `/dev/shm` is a tmpfs of this size (`mount -o size=`), so that shared-memory objects
    /// run out of room.
    pub(crate) shm_size: Option<&'a str>,
    /// Start the launcher, and so every rank, under this limit of address space in bytes
    /// (`prlimit --as=`), as `ulimit -v` does.
    pub(crate) address_space: Option<&'a str>,
}

/// The launcher `ZCOLL_MPI` names, or the default `mpiexec`.
fn launcher() -> &'static str {
    match std::env::var("ZCOLL_MPI").as_deref() {
        Ok("openmpi") => "mpiexec.openmpi",
        Ok("mpich") => "mpiexec.mpich",
        Ok("") | Err(_) => "mpiexec",
        Ok(other) => panic!("ZCOLL_MPI={other}: must be openmpi or mpich"),
    }
}

pub(crate) fn open_mpi() -> bool {
    static IS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IS.get_or_init(|| {
        Command::new(launcher())
            .arg("--version")
            .output()
            .map(|o| {
                let v = String::from_utf8_lossy(&o.stdout);
                v.contains("Open MPI") || v.contains("OpenRTE") || v.contains("open-mpi")
            })
            .unwrap_or(false)
    })
}

impl Job<'_> {
    /// Runs the job and returns its standard output; panics with everything it printed
    /// if it fails or runs past five minutes.
    pub(crate) fn run(&self) -> String {
        self.output().0
    }

    /// [`run`](Self::run), returning the job's standard output and standard error.
    pub(crate) fn output(&self) -> (String, String) {
        let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut cmd = if self.without_ptrace {
            let mut c = Command::new("setpriv");
            c.args(["--bounding-set=-sys_ptrace", launcher()]);
            c
        } else if let Some(size) = self.shm_size {
            let mut c = Command::new("unshare");
            let mount = r#"mount -t tmpfs -o size="$0" tmpfs /dev/shm && exec "$@""#;
            c.args(["-m", "sh", "-c", mount, size, launcher()]);
            c
        } else if let Some(bytes) = self.address_space {
            let mut c = Command::new("prlimit");
            c.args([&format!("--as={bytes}"), "--", launcher()]);
            c
        } else {
            Command::new(launcher())
        };
        cmd.args(["-n", &self.np.to_string()]);
        if open_mpi() {
            cmd.args(["--oversubscribe", "--bind-to", "none"]);
        }
        cmd.arg(&exe).args(["--exact", "rank", "--ignored", "--nocapture", "--test-threads=1"]);
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("ZCOLL_TEST_SCENARIO", self.scenario)
            .env("ZCOLL_TIMEOUT", "120")
            .env_remove("ZCOLL_TRANSPORT")
            .env_remove("ZCOLL_NODE_SIZE")
            .env_remove("XPMEM_LIBRARY");
        for (k, v) in self.env {
            cmd.env(k, v);
        }
        let what = format!("{} -n {} {} {:?}", launcher(), self.np, self.scenario, self.env);
        let (status, stdout, stderr) = run_until(cmd, Duration::from_secs(300), &what, self.scenario);
        match status {
            Some(s) if s.success() && stdout.matches("ZCOLL-RANK-OK").count() == self.np => (stdout, stderr),
            Some(s) => panic!("{what} failed ({s}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"),
            None => {
                panic!("{what} ran past 300 s and was killed:\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
            }
        }
    }
}

/// Runs `cmd` (a launcher) with its output in files, for at most `limit`: past it, the
/// launcher gets SIGTERM (so that it removes its ranks' shared-memory files), then
/// SIGKILL. Returns its status (`None`: it was stopped) and what it printed. `tag` names
/// the output files.
pub(crate) fn run_until(
    mut cmd: Command,
    limit: Duration,
    what: &str,
    tag: &str,
) -> (Option<std::process::ExitStatus>, String, String) {
    let out_path = std::env::temp_dir().join(format!("zcoll-job-{}-{tag}.out", std::process::id()));
    let err_path = out_path.with_extension("err");
    cmd.stdout(Stdio::from(std::fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err_path).unwrap()));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: cannot start the launcher: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            std::thread::sleep(Duration::from_secs(2));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    (status, stdout, stderr)
}

/// Runs `scenario` at `np` ranks with `env`.
pub(crate) fn mpirun(np: usize, scenario: &str, env: &[(&str, &str)]) -> String {
    Job { np, scenario, env, ..Job::default() }.run()
}
