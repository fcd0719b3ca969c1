//! Machine profiles: the fitted parameters of one kind of node, stored as TOML.
//!
//! A profile is keyed by the CPU model, the core count and the kernel release, and lives
//! at `$ZCOLL_PROFILE` if set, else under the user's configuration directory
//! (`$XDG_CONFIG_HOME/zcoll/` or `~/.config/zcoll/`) as `<key>.toml`.

use super::Params;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// What kind of node a profile describes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// The CPU model, as `/proc/cpuinfo` names it.
    pub cpu: String,
    /// Online cores.
    pub cores: usize,
    /// The kernel release.
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name") || l.starts_with("CPU part"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        // The machine's processors, not this process's affinity mask: a rank bound to one
        // core (`mpiexec --bind-to core`) is still on the same machine.
        let cores = cpuinfo.lines().filter(|l| l.starts_with("processor")).count().max(1);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Machine { cpu, cores, kernel }
    }

    /// The file name of this machine's profile.
    pub fn key(&self) -> String {
        format!("{}-{}c-{}", clean(&self.cpu), self.cores, clean(&self.kernel))
    }
}

/// A name part of a profile's key: letters, digits and dots, anything else a dash.
pub(crate) fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect()
}

/// The fitted parameters of a machine, and how they were obtained.
///
/// # Examples
///
/// ```
/// use zcoll::tune::{profile::{Machine, Profile}, Params};
/// let p = Profile { machine: Machine::this(), params: Params::DEFAULT, notes: vec![] };
/// let again = Profile::from_toml(&p.to_toml()).unwrap();
/// assert_eq!(again, p);
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    /// The machine measured.
    pub machine: Machine,
    /// Its parameters.
    pub params: Params,
    /// What the calibration could not measure, and what it assumed instead.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Profile {
    /// The profile as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a profile is plain data")
    }

    /// Reads a profile from TOML.
    ///
    /// # Errors
    ///
    /// `Error::Config` naming what is missing or malformed.
    pub fn from_toml(text: &str) -> Result<Profile> {
        let profile: Profile = toml::from_str(text).map_err(|e| Error::Config {
            name: "profile",
            value: e.to_string(),
            expected: "a zcoll profile ([machine] and [params] tables)",
        })?;
        profile.params.check()?;
        Ok(profile)
    }

    /// Where this machine's profile is read from and written to.
    pub fn path() -> PathBuf {
        if let Some(p) = std::env::var_os("ZCOLL_PROFILE") {
            return PathBuf::from(p);
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("zcoll").join(format!("{}.toml", Machine::this().key()))
    }

    /// Reads the profile at `path`.
    ///
    /// # Errors
    ///
    /// `Error::Config` if it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            name: "profile",
            value: format!("{}: {e}", path.display()),
            expected: "a readable profile file",
        })?;
        Profile::from_toml(&text)
    }

    /// Writes the profile to `path`, creating its directory.
    ///
    /// # Errors
    ///
    /// `Error::Config` if it cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let fail = |e: std::io::Error| Error::Config {
            name: "profile",
            value: format!("{}: {e}", path.display()),
            expected: "a writable path",
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        std::fs::write(path, self.to_toml()).map_err(fail)
    }
}

impl Params {
    /// Checks what the model needs of the parameters: every one finite, the costs of a
    /// call, a byte, a page and a flag not negative, a positive page, and `node_beta`
    /// not negative. `a` and `b` (`gamma(c) = a c^2 + b c`, as the paper's Table IV
    /// writes it: `0.11 p^2 + 1.6 p` is `a = 0.11`, `b = 1.6`) need only be finite: a
    /// calibration on an oversubscribed node may fit a negative `a`, and its profile
    /// must read back.
    ///
    /// # Errors
    ///
    /// `Error::Config` naming the first parameter out of range.
    pub fn check(&self) -> Result<()> {
        let bad = |what: &str, v: f64| Error::Config {
            name: "profile",
            value: format!("{what} = {v}"),
            expected: "finite parameters, non-negative costs and s > 0",
        };
        let costs = [
            ("alpha", self.alpha),
            ("beta", self.beta),
            ("l", self.l),
            ("memcpy_beta", self.memcpy_beta),
            ("flag", self.flag),
            ("node_beta", self.node_beta.unwrap_or(0.0)),
        ];
        if let Some((what, v)) = costs.into_iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            return Err(bad(what, v));
        }
        let finite = [
            ("a (gamma(c) = a c^2 + b c)", self.a),
            ("b (gamma(c) = a c^2 + b c)", self.b),
            ("sync_copy", self.sync_copy),
            ("sync_staged", self.sync_staged),
            ("write_beta", self.write_beta.unwrap_or(0.0)),
        ];
        if let Some((what, v)) = finite.into_iter().find(|(_, v)| !v.is_finite()) {
            return Err(bad(what, v));
        }
        if !(self.s.is_finite() && self.s > 0.0) {
            return Err(bad("s", self.s));
        }
        if self.sockets == Some(0) {
            return Err(bad("sockets", 0.0));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_key_is_a_file_name() {
        let m = Machine { cpu: "Intel(R) Xeon(R) CPU @ 2.1GHz".into(), cores: 68, kernel: "6.18.0-1".into() };
        assert_eq!(m.key(), "Intel-R--Xeon-R--CPU---2.1GHz-68c-6.18.0-1");
    }

    #[test]
    fn save_load_and_a_clear_error_for_garbage() {
        let dir = std::env::temp_dir().join(format!("zcoll-profile-{}", std::process::id()));
        let path = dir.join("p.toml");
        let p = Profile {
            machine: Machine::this(),
            params: Params::DEFAULT,
            notes: vec!["gamma assumed".into()],
        };
        p.save(&path).unwrap();
        assert_eq!(Profile::load(&path).unwrap(), p);
        std::fs::write(&path, "[machine]\ncpu = 1\n").unwrap();
        assert!(matches!(Profile::load(&path), Err(Error::Config { name: "profile", .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_papers_profiles_parse_and_bad_parameters_are_named() {
        for text in [
            include_str!("../../profiles/knl-68c.toml"),
            include_str!("../../profiles/broadwell-28c.toml"),
            include_str!("../../profiles/power8-20c.toml"),
        ] {
            let p = Profile::from_toml(text).unwrap();
            assert!(p.params.node_beta.is_none() && p.params.sockets.is_some(), "{}", p.machine.cpu);
        }
        // Table IV's Broadwell gamma, 0.18 c^2 + 0.83 c, read as a and b.
        let bdw = Profile::from_toml(include_str!("../../profiles/broadwell-28c.toml")).unwrap().params;
        assert_eq!((bdw.a, bdw.b), (0.18, 0.83));
        // A profile written before node_beta and sockets existed still reads.
        let old = Profile { machine: Machine::this(), params: Params::DEFAULT, notes: vec![] }.to_toml();
        assert!(!old.contains("node_beta"));
        assert_eq!(Profile::from_toml(&old).unwrap().params, Params::DEFAULT);
        // Out of range: named in the error.
        let text = old.replace("alpha = ", "alpha = -");
        let e = Profile::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains("alpha"), "{e}");
        let text = old.replace("a = 0.4", "a = nan");
        let e = Profile::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains("gamma"), "{e}");
        // A calibration may fit a negative a: still read back.
        assert!(Profile::from_toml(&old.replace("a = 0.4", "a = -0.4")).is_ok());
    }
}
