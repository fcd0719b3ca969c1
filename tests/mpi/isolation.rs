//! Isolation between users: a process of another user (`setpriv --reuid=65534
//! --regid=65534 --clear-groups`, started by a rank of a running job) tries to reach a
//! rank's memory by each road the ranks themselves use, and each must be refused:
//!
//! - (a) the node's control segment: by its name in `/dev/shm` (which the creator unlinks
//!   as soon as every rank mapped it; while it exists it has mode `0600`) and through the
//!   rank's `/proc/<pid>/map_files` entry for the mapping;
//! - (b) the rank's shared heap, a memfd that peers map through `/proc/<pid>/fd/<n>`;
//! - (c) `process_vm_readv` of a buffer of the rank.
//!
//! The job runs as root here, so the probe, as `nobody`, is another user. Without
//! `setpriv`, the test says so and does not run.

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::process::Command;
use zcoll::Comm;

/// What rank 1 publishes about itself, as the probe's environment.
fn describe(buf: &[u8]) -> Vec<(String, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let seg = maps
        .lines()
        .find(|l| l.contains("/dev/shm/zcoll."))
        .unwrap_or_else(|| panic!("no zcoll segment mapped:\n{maps}"));
    let range = seg.split_whitespace().next().unwrap().to_string();
    let path = seg.split_whitespace().nth(5).unwrap().to_string();
    let heap_fd = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("/memfd:zcoll-heap"))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .expect("the heap's memfd among this process's descriptors");
    vec![
        ("ZCOLL_PROBE_PID".into(), std::process::id().to_string()),
        ("ZCOLL_PROBE_SEGMENT".into(), path),
        ("ZCOLL_PROBE_MAP".into(), range),
        ("ZCOLL_PROBE_FD".into(), heap_fd),
        ("ZCOLL_PROBE_ADDR".into(), (buf.as_ptr() as usize).to_string()),
        ("ZCOLL_PROBE_LEN".into(), buf.len().to_string()),
    ]
}

/// Scenario `isolation` (2 ranks): rank 1 describes itself and waits; rank 0 starts the
/// probe as `nobody` against rank 1 and checks its report.
pub(crate) fn run(world: &SimpleCommunicator, comm: &Comm) {
    assert_eq!(world.size(), 2);
    // A heap buffer with known bytes: the memfd exists, and its pages hold data.
    let mut buf = comm.alloc::<u8>(4096).expect("comm.alloc");
    buf.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8 ^ 0x3c);
    let env = describe(&buf);
    // Rank 1's description, to rank 0, as one string.
    let text = env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\n");
    let mut bytes = vec![0u8; 1024];
    if world.rank() == 1 {
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        world.process_at_rank(0).send(&bytes[..]);
    } else {
        world.process_at_rank(1).receive_into(&mut bytes[..]);
        let peer = String::from_utf8(bytes.iter().copied().take_while(|&b| b != 0).collect()).unwrap();
        let exe = std::env::current_exe().unwrap();
        let mut probe = Command::new("setpriv");
        probe
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe)
            .args(["--exact", "isolation::probe", "--ignored", "--nocapture", "--test-threads=1"])
            .env("ZCOLL_ISOLATION_PROBE", "1")
            .current_dir("/");
        for kv in peer.lines() {
            let (k, v) = kv.split_once('=').unwrap();
            probe.env(k, v);
        }
        let out = probe.output().expect("setpriv runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the probe failed:\n{stdout}\n{stderr}");
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("PROBE ")).collect();
        println!();
        for l in &lines {
            println!("ISOLATION {l}");
        }
        for what in ["segment-name", "segment-map", "heap-fd", "cma"] {
            let line = lines
                .iter()
                .find(|l| l.starts_with(&format!("PROBE {what} ")))
                .unwrap_or_else(|| panic!("the probe did not report {what}:\n{stdout}\n{stderr}"));
            let refused = match what {
                // Unlinked once every rank mapped it; while it exists, 0600 refuses.
                "segment-name" => line.ends_with(" ENOENT") || line.ends_with(" EACCES"),
                _ => line.ends_with(" EACCES") || line.ends_with(" EPERM"),
            };
            assert!(refused, "another user was not refused: {line}");
        }
    }
    world.barrier();
    drop(buf);
}

/// The errno of the last failed call, by name.
fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::ESRCH) => "ESRCH".into(),
        Some(n) => format!("errno {n}"),
        None => e.to_string(),
    }
}

/// The probe, run as another user by the `isolation` scenario (not a test of its own).
#[test]
#[ignore = "run as another user by the isolation scenario"]
fn probe() {
    if std::env::var("ZCOLL_ISOLATION_PROBE").is_err() {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k}"));
    let pid: i32 = var("ZCOLL_PROBE_PID").parse().unwrap();
    // The harness has printed `test ... ` without a newline: start a line of our own.
    // SAFETY: getuid has no preconditions.
    println!("\nPROBE uid {}", unsafe { libc::getuid() });
    let open = |path: &str| std::fs::OpenOptions::new().read(true).write(true).open(path);
    let report = |what: &str, r: std::io::Result<()>| match r {
        Ok(()) => println!("PROBE {what} OPENED"),
        Err(e) => println!("PROBE {what} {}", errno_name(&e)),
    };
    // (a) The control segment, by name and through the rank's mapping of it.
    let name = var("ZCOLL_PROBE_SEGMENT");
    report("segment-name", open(&name).map(drop));
    report("segment-map", open(&format!("/proc/{pid}/map_files/{}", var("ZCOLL_PROBE_MAP"))).map(drop));
    // (b) The heap, as the peers map it.
    report("heap-fd", open(&format!("/proc/{pid}/fd/{}", var("ZCOLL_PROBE_FD"))).map(drop));
    // (c) A single copy from the rank's memory.
    let addr: usize = var("ZCOLL_PROBE_ADDR").parse().unwrap();
    let len: usize = var("ZCOLL_PROBE_LEN").parse().unwrap();
    let mut dst = vec![0u8; len];
    let local = libc::iovec { iov_base: dst.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: `local` covers `dst`, which we own and which outlives the call; the remote
    // side is another process's memory, which the kernel checks (and refuses here).
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    report("cma", if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
}

/// Another user's process cannot open the segment, map a rank's heap, or read a rank's
/// memory with CMA.
#[test]
fn isolation_from_other_users() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        println!("SKIPPED isolation_from_other_users: setpriv (util-linux) is not installed, so no process of another user can be started; the isolation test did not run");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED isolation_from_other_users: not root, so setpriv cannot switch to another user; the isolation test did not run");
        return;
    }
    let out = crate::launch::mpirun(2, "isolation", &[]);
    for l in out.lines().filter(|l| l.starts_with("ISOLATION ")) {
        println!("{l}");
    }
    assert!(out.contains("ISOLATION PROBE uid 65534"), "the probe did not run as another user:\n{out}");
}
