//! The docs stay true to the command: every `zcoll <command> --flag` that the book, the
//! README or the scripts show must be a command and a flag `zcoll` accepts, as its own
//! `--help` lists them. A renamed or removed flag fails here, not in a reader's terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const COMMANDS: [&str; 4] = ["info", "bench", "tune", "report"];

/// The workspace root (this crate lives in `zcoll-cli/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Every documentation file: the book's chapters, the README, the scripts.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    for dir in ["book/src", "book/src/collectives", "scripts"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else { continue };
        files.extend(entries.map(|e| e.expect("a directory entry").path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

/// The flags each documented `zcoll <command>` line uses, with where it was seen.
fn documented() -> BTreeMap<(String, String), String> {
    let mut found = BTreeMap::new();
    for file in documents() {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        // Join shell continuations, so a flag on the next line still counts.
        let text = text.replace("\\\n", " ");
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("zcoll ") {
                let after = &rest[at + "zcoll ".len()..];
                rest = after;
                let mut words = after.split_whitespace();
                let Some(cmd) = words.next().filter(|c| COMMANDS.contains(c)) else { continue };
                for word in words.take_while(|w| !w.starts_with('`') && !w.contains("zcoll")) {
                    let word = word.trim_end_matches(['`', ')', ',', '.', ';', ':']);
                    if let Some(flag) = word.strip_prefix("--") {
                        let flag = flag.split('=').next().unwrap_or(flag);
                        if !flag.is_empty() && flag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                            let place = format!("{}:{}", file.strip_prefix(root()).unwrap().display(), n + 1);
                            found.entry((cmd.to_owned(), format!("--{flag}"))).or_insert(place);
                        }
                    }
                    if word.ends_with('`') {
                        break;
                    }
                }
            }
        }
    }
    found
}

/// What `zcoll <args> --help` prints.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_zcoll"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("zcoll {args:?} --help: {e}"));
    assert!(out.status.success(), "zcoll {args:?} --help failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

#[test]
fn every_documented_flag_exists() {
    let found = documented();
    assert!(
        found.keys().any(|(c, f)| c == "bench" && f == "--coll"),
        "the scan found no `zcoll bench --coll` in the docs: the scan is broken"
    );
    let helps: BTreeMap<&str, String> = COMMANDS.iter().map(|&c| (c, help(&[c]))).collect();
    let missing: Vec<String> = found
        .iter()
        .filter(|((cmd, flag), _)| {
            !helps[cmd.as_str()].split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).any(|w| w == flag)
        })
        .map(|((cmd, flag), place)| format!("{place}: `zcoll {cmd} {flag}`"))
        .collect();
    assert!(missing.is_empty(), "documented flags that zcoll does not accept:\n{}", missing.join("\n"));
}

/// The commands this check knows are the commands `zcoll` has.
#[test]
fn the_commands_are_zcolls() {
    let top = help(&[]);
    for cmd in COMMANDS {
        assert!(
            top.lines().any(|l| l.trim_start().starts_with(cmd)),
            "zcoll --help does not list {cmd}:\n{top}"
        );
    }
}
