//! The one vocabulary of algorithms. Each collective's algorithm enum lists its variants
//! once, with their names ([`Algorithm::NAMES`]); from that list this module derives
//! everything else a name is used for: the `name[:param]` spelling, parsing and display,
//! the code published in the call record, and the `ZCOLL_<COLL>_ALGORITHM` overrides
//! ([`Overrides`]), and the steps every collective's `resolve` shares ([`resolve`],
//! [`requested`]). What an algorithm means for the cost model stays with its collective
//! (the `model` each file's `resolve` passes), which is where the model's choice is turned
//! into a variant.

use crate::error::{Error, Result};
use crate::transport::TransportKind;
use std::fmt;

/// An algorithm enum: `Auto` and the algorithms of one collective.
pub(crate) trait Algorithm: Copy + Sized + 'static {
    /// The variable that sets what `Auto` means (`ZCOLL_<COLL>_ALGORITHM`); a collective
    /// that shares the enum of another (gatherv, allreduce) passes its own to [`resolve`]
    /// or [`requested`].
    const VAR: &'static str;
    /// What its variable may hold, for `Error::Config`.
    const EXPECTED: &'static str;
    /// Every variant with its name, `Auto` first; a variant that takes a parameter (a
    /// radix, a chunk) appears with the value its bare name stands for.
    const NAMES: &'static [(Self, &'static str)];

    /// The parameter, for a variant that takes one.
    fn param(self) -> Option<u32> {
        None
    }

    /// The same variant with parameter `p` (the variant itself if it takes none).
    fn with_param(self, _p: u32) -> Self {
        self
    }

    /// The smallest parameter the variant accepts when spelled `name:param`.
    fn min_param(self) -> u32 {
        1
    }

    /// What the variant runs as on a `cico` node (and what `Auto` runs as when it stays
    /// undecided): the copy-in/copy-out algorithm, `staged`.
    fn on_cico(self) -> Self {
        staged()
    }

    /// The cost model's choice for a call of `n` bytes (as the collective measures a
    /// call: a block, or the whole buffer) on `p` ranks of a node. `Auto` (which runs
    /// `staged`) for a collective whose `Auto` is decided after the checks, from every
    /// rank's counts.
    fn model(_n: usize, _p: usize) -> Self {
        Self::NAMES[0].0
    }

    /// [`resolve`] with [`Algorithm::VAR`] and [`Algorithm::model`]: the algorithm a call of
    /// `n` bytes on `p` ranks uses on `transport`.
    ///
    /// # Errors
    ///
    /// As [`resolve`].
    #[inline]
    fn resolve(self, n: usize, p: usize, transport: TransportKind, env: &Overrides) -> Result<Self> {
        resolve(self, Self::VAR, env, transport, || Self::model(n, p))
    }

    /// [`requested`] with [`Algorithm::VAR`]: what this rank asks for before the arrive
    /// phase of a variable-count collective.
    ///
    /// # Errors
    ///
    /// As [`resolve`].
    #[inline]
    fn requested(self, transport: TransportKind, env: &Overrides) -> Result<Self> {
        requested(self, Self::VAR, env, transport)
    }

    /// [`claim_asked`] with [`Algorithm::VAR`].
    #[inline]
    fn claim(self, env: &Overrides) -> u64 {
        claim_asked(self, Self::VAR, env)
    }

    /// [`readable`] with [`Algorithm::VAR`].
    ///
    /// # Errors
    ///
    /// As [`resolve`].
    #[inline]
    fn readable(self, env: &Overrides) -> Result<()> {
        readable(self, Self::VAR, env)
    }

    /// The code of the variant in the call record (`Auto` is 0).
    #[inline]
    fn code(self) -> u8 {
        code(self)
    }

    /// The code and the parameter (0 for none), as a call record carries them.
    #[inline]
    fn wire(self) -> (u8, u32) {
        wire(self)
    }
}

/// The variant named `staged`: every collective has one.
fn staged<A: Algorithm>() -> A {
    A::NAMES.iter().find(|(_, n)| *n == "staged").expect("every collective has `staged`").0
}

/// Whether `a` is `Auto` (the first variant).
fn is_auto<A: Algorithm>(a: A) -> bool {
    entry(a) == 0
}

/// `Config` for a variant made in code with a parameter below its minimum (`k = 0`): a
/// parsed one never has it.
fn check<A: Algorithm>(a: A) -> Result<()> {
    match a.param() {
        Some(p) if p < a.min_param() => Err(Error::Config {
            name: name(a),
            value: p.to_string(),
            expected: "the variant's minimum: k >= 1, a radix >= 2, a chunk >= 4096 bytes",
        }),
        _ => Ok(()),
    }
}

/// What every collective's `resolve` does: `Auto` becomes what `var` names
/// (`ZCOLL_<COLL>_ALGORITHM`), else the cost model's choice (`model`); the variant is
/// checked; on a `cico` node, or where `Auto` stays (the variable says `auto`), it runs
/// as [`Algorithm::on_cico`] says.
///
/// # Errors
///
/// `Config` for an unreadable variable or a parameter below its minimum.
pub(crate) fn resolve<A: Algorithm>(
    a: A,
    var: &'static str,
    env: &Overrides,
    transport: TransportKind,
    model: impl FnOnce() -> A,
) -> Result<A> {
    let (chosen, why, named) = match is_auto(a) {
        false => (a, "named by the call", true),
        true => match env.choice(var)? {
            Some(set) => (set, "from the environment", true),
            None => (model(), "the cost model's choice", false),
        },
    };
    check(chosen)?;
    let cico = transport == TransportKind::Cico || is_auto(chosen);
    let resolved = if cico { chosen.on_cico() } else { chosen };
    // A fallback: what the call or the environment named cannot run here (the model's
    // choice on a `cico` node is not one: `Auto` means staged there).
    if cico && named && !is_auto(chosen) && entry(resolved) != entry(chosen) {
        tracing::warn!(
            "{var}: {} ({why}) cannot run on a cico node: runs as {}",
            describe(chosen),
            describe(resolved)
        );
    }
    tracing::debug!("{var}: {} ({why}{})", describe(resolved), if cico { ", copy-in/copy-out" } else { "" });
    Ok(resolved)
}

/// `a`'s name with its parameter, as `ZCOLL_<COLL>_ALGORITHM` would hold it.
fn describe<A: Algorithm>(a: A) -> String {
    let name = A::NAMES[entry(a)].1;
    match a.param() {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    }
}

/// What a variable-count collective asks for before its arrive phase, where `Auto` is
/// decided later from every rank's counts: `Auto` becomes what `var` names (if set), the
/// variant is checked, and everything runs `staged` on a `cico` node.
///
/// # Errors
///
/// As [`resolve`].
pub(crate) fn requested<A: Algorithm>(
    a: A,
    var: &'static str,
    env: &Overrides,
    transport: TransportKind,
) -> Result<A> {
    let chosen = asked(a, var, env)?;
    check(chosen)?;
    let resolved = if transport == TransportKind::Cico { staged() } else { chosen };
    if transport == TransportKind::Cico && !is_auto(chosen) && entry(resolved) != entry(chosen) {
        tracing::warn!(
            "{var}: {} cannot run on a cico node: runs as {}",
            describe(chosen),
            describe(resolved)
        );
    }
    tracing::debug!(
        "{var}: {} (auto decides after the checks, from every rank's counts)",
        describe(resolved)
    );
    Ok(resolved)
}

/// What a rank asks for: `a`, or what `var` names where `a` is `Auto` and `var` is set.
pub(crate) fn asked<A: Algorithm>(a: A, var: &'static str, env: &Overrides) -> Result<A> {
    match is_auto(a) {
        true => Ok(env.choice(var)?.unwrap_or(a)),
        false => Ok(a),
    }
}

/// The error [`resolve`] would return for `a` asked for through `var`, with nothing chosen
/// or logged: for a call across nodes that runs no node-level algorithm (rsmpi's own with
/// one rank per node), or before any node moves a byte. After the checks across nodes,
/// which compare every rank's [`claim_asked`], it is the same on every rank.
///
/// # Errors
///
/// As [`resolve`].
pub(crate) fn readable<A: Algorithm>(a: A, var: &'static str, env: &Overrides) -> Result<()> {
    check(asked(a, var, env)?)
}

/// The entry of `a`'s variant in `A::NAMES`, whatever its parameter.
fn entry<A: Algorithm>(a: A) -> usize {
    let d = std::mem::discriminant(&a);
    A::NAMES.iter().position(|(v, _)| std::mem::discriminant(v) == d).expect("every variant is named")
}

/// The name of `a`'s variant, without the parameter.
pub(crate) fn name<A: Algorithm>(a: A) -> &'static str {
    A::NAMES[entry(a)].1
}

/// The code of `a`'s variant in the call record (`Auto` is 0).
pub(crate) fn code<A: Algorithm>(a: A) -> u8 {
    entry(a) as u8
}

/// The code and the parameter (0 for none), as a call record carries them.
pub(crate) fn wire<A: Algorithm>(a: A) -> (u8, u32) {
    (code(a), a.param().unwrap_or(0))
}

/// The word a call across nodes claims for the algorithm its caller asked for (`Auto`
/// included, before the environment and the node's transport resolve it): its code and
/// parameter. Every rank must ask for the same (`Mismatch` "algorithm" before any byte
/// moves); the nodes may then resolve it differently, each for its own size.
fn claim_word<A: Algorithm>(a: A) -> u64 {
    let (code, param) = wire(a);
    code as u64 | (param as u64) << 8
}

/// The word a call across nodes claims for what this rank asks for once its environment
/// has spoken: [`claim_word`] of the variant `var` names where `a` is `Auto` and `var` is
/// set, of `a` otherwise, and a word no request makes ([`UNREADABLE`]) where `var` cannot
/// be read. Ranks whose variables differ, or of which some cannot read theirs, then fail
/// the checks with `Mismatch` "algorithm" on every rank before any byte moves, as they do
/// on one node, instead of taking different paths over MPI (a rank that returns its
/// `Config` error alone leaves the others waiting in MPI); where every rank fails to read
/// it alike, the claims agree and each reports its own `Config` error.
pub(crate) fn claim_asked<A: Algorithm>(a: A, var: &'static str, env: &Overrides) -> u64 {
    asked(a, var, env).map_or(UNREADABLE, claim_word)
}

/// [`claim_asked`]'s word where the variable cannot be read: [`claim_word`] uses 40 bits.
const UNREADABLE: u64 = u64::MAX;

/// `name`, or `name:param` for a variant with a parameter.
pub(crate) fn write<A: Algorithm>(a: A, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match a.param() {
        Some(p) => write!(f, "{}:{p}", name(a)),
        None => f.write_str(name(a)),
    }
}

/// Parses `name` (a parameterised variant at its default) or `name:param` (a variant
/// that takes a parameter, at least its `min_param`).
pub(crate) fn parse<A: Algorithm>(s: &str) -> std::result::Result<A, ()> {
    let (n, p) = match s.split_once(':') {
        Some((n, p)) => (n, Some(p.parse::<u32>().map_err(drop)?)),
        None => (s, None),
    };
    let &(a, _) = A::NAMES.iter().find(|(_, name)| *name == n).ok_or(())?;
    match (p, a.param()) {
        (None, _) => Ok(a),
        (Some(p), Some(_)) if p >= a.min_param() => Ok(a.with_param(p)),
        (Some(_), _) => Err(()),
    }
}

/// Declares an algorithm enum's vocabulary: its variable, what the variable may hold, and
/// every variant (`Auto` first) with its name; a variant with a parameter is listed with
/// the value its bare name stands for (`ThrottledRead { k: 4 }`, `RingNeighbor(1)`).
/// Generates the [`Algorithm`] table (and its `param`/`with_param` for such variants),
/// `ALL`, `name`, `Display` and `FromStr`; anything after the list goes into the
/// `Algorithm` impl (the collective's `model`, for one).
macro_rules! vocabulary {
    (
        $ty:ident($var:literal): $expected:literal,
        [
            Auto => "auto",
            $($v:ident $({ $f:ident: $d:expr })? $(($t:expr))? => $n:literal),+ $(,)?
        ]
        $($extra:tt)*
    ) => {
        impl $ty {
            /// Every algorithm that moves data (all but `Auto`), in the order of their codes;
            /// one that takes a parameter at the value its bare name stands for.
            pub const ALL: [$ty; [$($n),+].len()] = [$($ty::$v $({ $f: $d })? $(($t))?),+];

            /// The name used by the environment variables and the benchmarks (without a
            /// parameter).
            pub fn name(self) -> &'static str {
                $crate::coll::algorithm::name(self)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                $crate::coll::algorithm::write(*self, f)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = ();
            fn from_str(s: &str) -> std::result::Result<Self, ()> {
                $crate::coll::algorithm::parse(s)
            }
        }

        impl $crate::coll::algorithm::Algorithm for $ty {
            const VAR: &'static str = $var;
            const EXPECTED: &'static str = $expected;
            const NAMES: &'static [(Self, &'static str)] =
                &[($ty::Auto, "auto"), $(($ty::$v $({ $f: $d })? $(($t))?, $n)),+];

            #[allow(unreachable_patterns)] // an enum without parameters has only `_`
            fn param(self) -> Option<u32> {
                match self {
                    $($($ty::$v { $f } => Some($f),)?)+
                    $($($ty::$v(p) => Some({ let _default = $t; p }),)?)+
                    _ => None,
                }
            }

            #[allow(unreachable_patterns, unused_variables)] // as `param`
            fn with_param(self, p: u32) -> Self {
                match self {
                    $($($ty::$v { .. } => $ty::$v { $f: p },)?)+
                    $($($ty::$v(_) => { let _default = $t; $ty::$v(p) })?)+
                    a => a,
                }
            }

            $($extra)*
        }
    };
}
pub(crate) use vocabulary;

/// The variables that set what `Auto` means, one per collective.
pub(crate) const ALGORITHM_VARS: [&str; 12] = [
    "ZCOLL_BCAST_ALGORITHM",
    "ZCOLL_SCATTER_ALGORITHM",
    "ZCOLL_GATHER_ALGORITHM",
    "ZCOLL_ALLGATHER_ALGORITHM",
    "ZCOLL_ALLTOALL_ALGORITHM",
    "ZCOLL_ALLREDUCE_ALGORITHM",
    "ZCOLL_REDUCE_ALGORITHM",
    "ZCOLL_SCATTERV_ALGORITHM",
    "ZCOLL_GATHERV_ALGORITHM",
    "ZCOLL_ALLGATHERV_ALGORITHM",
    "ZCOLL_ALLTOALLV_ALGORITHM",
    "ZCOLL_LAYOUT_ALGORITHM",
];

/// The `ZCOLL_<COLL>_ALGORITHM` variables that are set, read once when a `Comm` is
/// built, so that a call with `Auto` reads no environment (a lock and a scan of
/// `environ`, 0.1 us under `mpiexec`, as much as a small staged broadcast's copies).
/// Values are kept as written and parsed by the call that uses them, so a bad value is
/// that call's `Error::Config`, on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    set: Vec<(&'static str, String)>,
}

impl Overrides {
    /// What the environment holds now (every rank must see the same values).
    pub(crate) fn from_env() -> Overrides {
        let set = ALGORITHM_VARS
            .iter()
            .filter_map(|&var| Some((var, std::env::var(var).ok().filter(|v| !v.is_empty() && v != "auto")?)))
            .collect();
        Overrides { set }
    }

    /// Overrides as if the environment held `vars` (for tests).
    #[cfg(test)]
    pub(crate) fn with(vars: &[(&'static str, &str)]) -> Overrides {
        Overrides { set: vars.iter().map(|&(var, value)| (var, value.to_owned())).collect() }
    }

    /// The algorithm `var` asks for, if any: `None` when it was unset, empty or `auto`.
    ///
    /// # Errors
    ///
    /// `Error::Config` naming `var` and what it may hold if the value is not one of
    /// `A`'s algorithms.
    #[inline]
    pub(crate) fn choice<A: Algorithm>(&self, var: &'static str) -> Result<Option<A>> {
        // The common case, no override at all, costs a load and a branch per call.
        if self.set.is_empty() {
            return Ok(None);
        }
        self.parse(var)
    }

    fn parse<A: Algorithm>(&self, var: &'static str) -> Result<Option<A>> {
        debug_assert!(ALGORITHM_VARS.contains(&var), "{var} is read by Overrides::from_env");
        match self.set.iter().find(|(v, _)| *v == var) {
            None => Ok(None),
            Some((_, value)) => parse(value).map(Some).map_err(|()| Error::Config {
                name: var,
                value: value.clone(),
                expected: A::EXPECTED,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AllgatherAlgorithm, AllgathervAlgorithm, AlltoallAlgorithm, AlltoallvAlgorithm, BcastAlgorithm,
        GatherAlgorithm, ReduceAlgorithm, ScatterAlgorithm,
    };

    /// A claim across nodes is the variable's choice where the call asks for `Auto`, the
    /// call's own otherwise, and a word no request makes where the variable is unreadable.
    #[test]
    fn claims_include_the_environment() {
        use AlltoallAlgorithm::*;
        let none = Overrides::with(&[]);
        let set = Overrides::with(&[("ZCOLL_ALLTOALL_ALGORITHM", "pap-read")]);
        let bad = Overrides::with(&[("ZCOLL_ALLTOALL_ALGORITHM", "bogus")]);
        assert_eq!(Auto.claim(&none), claim_word(Auto));
        assert_eq!(Auto.claim(&set), claim_word(PapRead));
        assert_eq!(Pairwise.claim(&set), claim_word(Pairwise));
        assert_eq!(Pairwise.claim(&bad), claim_word(Pairwise));
        let unreadable = Auto.claim(&bad);
        assert!(AlltoallAlgorithm::NAMES.iter().all(|&(a, _)| claim_word(a) != unreadable));
        // The variable of a collective that shares another's enum.
        let v = Overrides::with(&[("ZCOLL_SCATTERV_ALGORITHM", "staged")]);
        let asked = claim_asked(ScatterAlgorithm::Auto, crate::coll::scatterv::SCATTERV_VAR, &v);
        assert_eq!(asked, claim_word(ScatterAlgorithm::Staged));
        assert_eq!(ScatterAlgorithm::Auto.claim(&v), claim_word(ScatterAlgorithm::Auto));
    }

    /// Every enum's table starts with `Auto`, names each variant once, lists exactly its
    /// `ALL` after `Auto`, every name (and every parameter from the least up) reads back
    /// as the variant it names and nothing else does, and on `cico` every variant asks for
    /// `staged`.
    fn table_is_whole<A: Algorithm + PartialEq + fmt::Debug + fmt::Display + Default>(all: &[A]) {
        assert_eq!(A::NAMES[0].0, A::default(), "Auto first");
        assert_eq!(A::NAMES[0].1, "auto");
        let listed: Vec<A> = A::NAMES[1..].iter().map(|&(a, _)| a).collect();
        assert_eq!(listed, all, "NAMES after Auto is ALL");
        for (i, &(a, n)) in A::NAMES.iter().enumerate() {
            assert_eq!((name(a), code(a) as usize), (n, i));
            assert_eq!(parse::<A>(&a.to_string()), Ok(a), "{a}");
            assert_eq!(parse::<A>(n), Ok(a), "{n}");
            for bad in [format!("{n}:"), format!("{n}:x"), n[..n.len() - 1].to_string()] {
                assert_eq!(parse::<A>(&bad), Err(()), "{bad}");
            }
            match a.param() {
                Some(_) => {
                    let least = a.min_param();
                    assert!(least >= 1);
                    assert_eq!(parse::<A>(&format!("{n}:{least}")), Ok(a.with_param(least)));
                    assert_eq!(parse::<A>(&format!("{n}:{}", least - 1)), Err(()), "{n} below its least");
                    let more = a.with_param(least + 16);
                    assert_eq!(parse::<A>(&more.to_string()), Ok(more), "{more}");
                }
                None => assert_eq!(parse::<A>(&format!("{n}:7")), Err(()), "{n} takes no parameter"),
            }
            let none = Overrides::default();
            assert_eq!(a.requested(TransportKind::Cico, &none).map(name), Ok("staged"), "{a} on cico");
        }
        assert_eq!(parse::<A>("no-such-algorithm"), Err(()));
        assert_eq!(parse::<A>(""), Err(()));
        assert!(A::NAMES.iter().all(|(_, n)| A::EXPECTED.contains(n)), "{}", A::EXPECTED);
    }

    #[test]
    fn every_vocabulary_is_whole() {
        table_is_whole(&BcastAlgorithm::ALL);
        table_is_whole(&ScatterAlgorithm::ALL);
        table_is_whole(&GatherAlgorithm::ALL);
        table_is_whole(&AllgatherAlgorithm::ALL);
        table_is_whole(&AlltoallAlgorithm::ALL);
        table_is_whole(&AllgathervAlgorithm::ALL);
        table_is_whole(&AlltoallvAlgorithm::ALL);
        table_is_whole(&ReduceAlgorithm::ALL);
    }

    #[test]
    fn every_variable_is_read() {
        let vars = [
            BcastAlgorithm::VAR,
            ScatterAlgorithm::VAR,
            GatherAlgorithm::VAR,
            AllgatherAlgorithm::VAR,
            AlltoallAlgorithm::VAR,
            AllgathervAlgorithm::VAR,
            AlltoallvAlgorithm::VAR,
            ReduceAlgorithm::VAR,
        ];
        assert!(vars.iter().all(|v| ALGORITHM_VARS.contains(v)), "{vars:?}");
    }
}
