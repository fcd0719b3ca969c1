//! Raw declarations of the XPMEM user ABI, loaded at run time.
//!
//! [XPMEM] is a Linux kernel module used in HPC that lets one process map
//! pages of another process's address space directly into its own. Its user
//! library, `libxpmem.so.0`, talks to the kernel through the `/dev/xpmem`
//! device.
//!
//! This crate declares that ABI in Rust (the types, constants and C function
//! prototypes, written from the documented interface rather than copied from
//! a header) and resolves the functions **at run time** with [`libloading`].
//! Nothing here links against `libxpmem` at build time, so one binary runs on
//! nodes with XPMEM (where [`Xpmem::load`] succeeds) and without it (where it
//! returns a [`LoadError`] and the caller falls back to another transport).
//!
//! Everything is raw: the [`Xpmem`] accessors call straight through to the C
//! functions and report failure the C way (`-1` plus `errno`). Safe
//! abstractions belong in higher-level crates.
//!
//! [XPMEM]: https://github.com/hpc/xpmem

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("xpmem-sys supports Linux on x86_64 and aarch64 only");

use std::ffi::OsString;
use std::fmt;
use std::fs::OpenOptions;
use std::io;
use std::mem;
use std::path::{Path, PathBuf};

use libc::{c_int, c_void, off_t, size_t};
use libloading::Library;

// C type names from the XPMEM ABI are kept verbatim.
#[allow(non_camel_case_types)]
/// Identifier of a segment exported with `xpmem_make` (C `xpmem_segid_t`).
pub type xpmem_segid_t = i64;

// C type names from the XPMEM ABI are kept verbatim.
#[allow(non_camel_case_types)]
/// Access permit for a segment obtained with `xpmem_get` (C `xpmem_apid_t`).
pub type xpmem_apid_t = i64;

// C type names from the XPMEM ABI are kept verbatim.
#[allow(non_camel_case_types)]
/// Address inside a segment, as passed by value to `xpmem_attach`
/// (C `struct xpmem_addr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct xpmem_addr {
    /// Access permit returned by `xpmem_get`.
    pub apid: xpmem_apid_t,
    /// Byte offset from the start of the segment.
    pub offset: off_t,
}

const _: () = assert!(mem::size_of::<xpmem_addr>() == 16);
const _: () = assert!(mem::align_of::<xpmem_addr>() == 8);

/// `xpmem_get` flag: request read-only access to the segment.
pub const XPMEM_RDONLY: c_int = 0x1;
/// `xpmem_get` flag: request read-write access to the segment.
pub const XPMEM_RDWR: c_int = 0x2;
/// Permit type meaning "the permit value is a Unix file mode" (e.g. `0o600`
/// cast to a pointer), checked against the accessing process's credentials.
pub const XPMEM_PERMIT_MODE: c_int = 0x1;
/// Size that, together with a null address, makes `xpmem_make` export the
/// whole address space of the calling process.
pub const XPMEM_MAXADDR_SIZE: usize = usize::MAX;

/// Default name of the XPMEM user library loaded by [`Xpmem::load`].
pub const LIBRARY_NAME: &str = "libxpmem.so.0";
/// Environment variable that overrides the library loaded by [`Xpmem::load`].
pub const LIBRARY_ENV: &str = "XPMEM_LIBRARY";
/// Path of the XPMEM kernel device.
pub const DEVICE_PATH: &str = "/dev/xpmem";

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `int xpmem_version(void);`
pub type xpmem_version_fn = unsafe extern "C" fn() -> c_int;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `xpmem_segid_t xpmem_make(void *vaddr, size_t size, int permit_type, void *permit_value);`
pub type xpmem_make_fn = unsafe extern "C" fn(
    vaddr: *mut c_void,
    size: size_t,
    permit_type: c_int,
    permit_value: *mut c_void,
) -> xpmem_segid_t;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `int xpmem_remove(xpmem_segid_t segid);`
pub type xpmem_remove_fn = unsafe extern "C" fn(segid: xpmem_segid_t) -> c_int;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `xpmem_apid_t xpmem_get(xpmem_segid_t segid, int flags, int permit_type, void *permit_value);`
pub type xpmem_get_fn = unsafe extern "C" fn(
    segid: xpmem_segid_t,
    flags: c_int,
    permit_type: c_int,
    permit_value: *mut c_void,
) -> xpmem_apid_t;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `int xpmem_release(xpmem_apid_t apid);`
pub type xpmem_release_fn = unsafe extern "C" fn(apid: xpmem_apid_t) -> c_int;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `void *xpmem_attach(struct xpmem_addr addr, size_t size, void *vaddr);`
/// (the struct is passed by value).
pub type xpmem_attach_fn =
    unsafe extern "C" fn(addr: xpmem_addr, size: size_t, vaddr: *mut c_void) -> *mut c_void;

// C function-pointer type names follow the C symbol names.
#[allow(non_camel_case_types)]
/// C `int xpmem_detach(void *vaddr);`
pub type xpmem_detach_fn = unsafe extern "C" fn(vaddr: *mut c_void) -> c_int;

/// Why XPMEM could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// The shared library could not be loaded (absent, wrong architecture, ...).
    LibraryNotFound {
        /// Name or path that was passed to the dynamic loader.
        name: String,
        /// The dynamic loader's explanation.
        reason: String,
    },
    /// The library loaded but does not export a required XPMEM function.
    MissingSymbol {
        /// Name or path of the loaded library.
        library: String,
        /// The first symbol that could not be resolved.
        symbol: &'static str,
    },
    /// The XPMEM device does not exist (the kernel module is not loaded).
    NoDevice {
        /// Device path that was checked.
        path: PathBuf,
    },
    /// The XPMEM device exists but cannot be opened read-write by this user.
    DevicePermission {
        /// Device path that was checked.
        path: PathBuf,
    },
    /// Opening the XPMEM device failed for another reason.
    Device {
        /// Device path that was checked.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LibraryNotFound { name, reason } => write!(f, "{name} not found: {reason}"),
            Self::MissingSymbol { library, symbol } => {
                write!(f, "{library} lacks symbol {symbol}")
            }
            Self::NoDevice { path } => write!(f, "{} missing", path.display()),
            Self::DevicePermission { path } => {
                write!(f, "{}: permission denied", path.display())
            }
            Self::Device { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Device { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Checks that the XPMEM device at `path` exists and can be opened
/// read-write; the device is closed again before returning.
///
/// # Errors
///
/// - [`LoadError::NoDevice`] if `path` does not exist;
/// - [`LoadError::DevicePermission`] if it cannot be opened read-write;
/// - [`LoadError::Device`] for any other I/O error.
pub fn check_device(path: &Path) -> Result<(), LoadError> {
    match OpenOptions::new().read(true).write(true).open(path) {
        // Dropping the file closes it.
        Ok(_file) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(LoadError::NoDevice { path: path.to_path_buf() })
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            Err(LoadError::DevicePermission { path: path.to_path_buf() })
        }
        Err(source) => Err(LoadError::Device { path: path.to_path_buf(), source }),
    }
}

/// A loaded XPMEM user library with its seven functions resolved.
///
/// The function pointers stay valid for as long as this value lives, because
/// it owns the [`Library`] handle they were resolved from.
pub struct Xpmem {
    path: String,
    version: xpmem_version_fn,
    make: xpmem_make_fn,
    remove: xpmem_remove_fn,
    get: xpmem_get_fn,
    release: xpmem_release_fn,
    attach: xpmem_attach_fn,
    detach: xpmem_detach_fn,
    // Keeps the library mapped so the function pointers above remain valid.
    // Never read; only dropped together with the pointers.
    _library: Library,
}

impl fmt::Debug for Xpmem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Xpmem").field("path", &self.path).finish_non_exhaustive()
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LoadError>();
    assert_send_sync::<Xpmem>();
};

/// Resolves `name` in `lib` as a non-null function pointer of type `F`.
///
/// # Safety
///
/// `F` must be an `unsafe extern "C" fn` pointer type whose signature matches
/// the C prototype of `name` in the XPMEM ABI, and the returned pointer must
/// not be called after `lib` is dropped.
unsafe fn resolve<F: Copy>(lib: &Library, library: &str, name: &'static str) -> Result<F, LoadError> {
    assert_eq!(mem::size_of::<F>(), mem::size_of::<*mut c_void>());
    let missing = || LoadError::MissingSymbol { library: library.to_owned(), symbol: name };
    // SAFETY: the symbol is read as a plain data pointer (`*mut c_void`),
    // which is valid for any exported symbol; it is not called here.
    let sym = unsafe { lib.get::<*mut c_void>(name.as_bytes()) }.map_err(|_| missing())?;
    let raw: *mut c_void = *sym;
    if raw.is_null() {
        return Err(missing());
    }
    // SAFETY: `raw` is a non-null address of `name`, `F` is pointer-sized
    // (asserted above) and, by this function's contract, the correct function
    // pointer type for `name`; on Linux data and function pointers share one
    // representation.
    Ok(unsafe { mem::transmute_copy::<*mut c_void, F>(&raw) })
}

impl Xpmem {
    /// Loads the system XPMEM library and checks the kernel device.
    ///
    /// If the environment variable [`LIBRARY_ENV`] (`XPMEM_LIBRARY`) is set
    /// to a non-empty value, that library is loaded instead (as with
    /// [`Xpmem::load_from`]) and the device check is **skipped**: a
    /// user-supplied library may implement the ABI without the kernel device,
    /// for instance a test stand-in. Otherwise [`LIBRARY_NAME`]
    /// (`libxpmem.so.0`) is loaded through the dynamic loader's search path
    /// and [`DEVICE_PATH`] (`/dev/xpmem`) must open read-write (see
    /// [`check_device`]).
    ///
    /// # Errors
    ///
    /// [`LoadError::LibraryNotFound`] if the library cannot be loaded,
    /// [`LoadError::MissingSymbol`] if it lacks an XPMEM function, and the
    /// device errors of [`check_device`] when the default library is used.
    ///
    /// # Examples
    ///
    /// ```
    /// // SAFETY: the system's libxpmem, or the library the administrator named
    /// // in XPMEM_LIBRARY, is a well-behaved XPMEM user library.
    /// match unsafe { xpmem_sys::Xpmem::load() } {
    ///     Ok(xpmem) => {
    ///         // SAFETY: `xpmem_version` takes no arguments and only queries
    ///         // the library / kernel module.
    ///         let version = unsafe { xpmem.version() };
    ///         println!("XPMEM {version:#x} from {}", xpmem.path());
    ///     }
    ///     Err(e) => println!("XPMEM unavailable: {e}"),
    /// }
    /// ```
    ///
    /// # Safety
    ///
    /// As for [`Xpmem::load_from`], of the library this loads: the system's
    /// [`LIBRARY_NAME`], or the one [`LIBRARY_ENV`] names.
    pub unsafe fn load() -> Result<Xpmem, LoadError> {
        // SAFETY: passed on to our caller.
        unsafe { Self::load_with_override(std::env::var_os(LIBRARY_ENV)) }
    }

    /// [`Xpmem::load`] with the value of [`LIBRARY_ENV`] passed in, so that
    /// the override can be tested without touching the process environment.
    ///
    /// # Safety
    ///
    /// As for [`Xpmem::load_from`], of the library this loads.
    unsafe fn load_with_override(override_path: Option<OsString>) -> Result<Xpmem, LoadError> {
        match override_path {
            // SAFETY: passed on to our caller.
            Some(path) if !path.is_empty() => unsafe { Self::load_from(Path::new(&path)) },
            _ => {
                // SAFETY: passed on to our caller.
                let xpmem = unsafe { Self::load_from(Path::new(LIBRARY_NAME)) }?;
                check_device(Path::new(DEVICE_PATH))?;
                Ok(xpmem)
            }
        }
    }

    /// Loads the XPMEM library at `path` and resolves its functions, without
    /// checking the kernel device.
    ///
    /// `path` is passed to `dlopen`: a bare file name is looked up on the
    /// dynamic loader's search path, anything containing `/` is used as is.
    /// # Errors
    ///
    /// [`LoadError::LibraryNotFound`] if the library cannot be loaded and
    /// [`LoadError::MissingSymbol`] if it lacks one of the seven XPMEM
    /// functions.
    ///
    /// # Safety
    ///
    /// As for libloading's `Library::new`, which this calls:
    ///
    /// - loading runs the library's initialisers (and unloading, when the
    ///   returned `Xpmem` drops, its finalisers): they must be sound to run
    ///   here, at any time, on any thread;
    /// - every one of the seven symbols the library exports under an XPMEM
    ///   name must have the prototype this crate declares for it, since the
    ///   calls through [`Xpmem`] trust it.
    pub unsafe fn load_from(path: &Path) -> Result<Xpmem, LoadError> {
        let name = path.to_string_lossy().into_owned();
        // SAFETY: loading runs the library's initialisers, which our caller
        // promises are sound to run here.
        let library = unsafe { Library::new(path) }
            .map_err(|e| LoadError::LibraryNotFound { name: name.clone(), reason: e.to_string() })?;
        // SAFETY: for all seven calls, each type parameter is the function
        // pointer type declared above for the C prototype of that symbol in
        // the XPMEM ABI, and the pointers are stored next to `library` in the
        // returned `Xpmem`, which keeps the library loaded for as long as the
        // pointers can be called.
        let xpmem = unsafe {
            Xpmem {
                version: resolve(&library, &name, "xpmem_version")?,
                make: resolve(&library, &name, "xpmem_make")?,
                remove: resolve(&library, &name, "xpmem_remove")?,
                get: resolve(&library, &name, "xpmem_get")?,
                release: resolve(&library, &name, "xpmem_release")?,
                attach: resolve(&library, &name, "xpmem_attach")?,
                detach: resolve(&library, &name, "xpmem_detach")?,
                path: name,
                _library: library,
            }
        };
        Ok(xpmem)
    }

    /// The name or path the library was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Calls `xpmem_version`: the XPMEM interface version, or `-1` with
    /// `errno` set if the kernel device cannot be used.
    ///
    /// # Safety
    ///
    /// - The loaded library must implement `xpmem_version` as declared by
    ///   this crate (the library is trusted at load time).
    pub unsafe fn version(&self) -> c_int {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.version)() }
    }

    /// Calls `xpmem_make`: exports `size` bytes at `vaddr` of this process as
    /// a segment; returns its id, or `-1` with `errno` set.
    ///
    /// # Safety
    ///
    /// - `vaddr` and `size` must be multiples of the page size and describe
    ///   memory of this process, or be null and [`XPMEM_MAXADDR_SIZE`] to
    ///   export the whole address space.
    /// - Once exported, the memory can be read and written by other
    ///   processes at any time: the caller must not hold Rust references
    ///   (`&`/`&mut`) to it whose aliasing guarantees such accesses would
    ///   break, and must keep it mapped until [`Xpmem::remove`] returns.
    /// - `permit_type` must be [`XPMEM_PERMIT_MODE`] and `permit_value` a
    ///   Unix mode (e.g. `0o600`) cast to a pointer; it is not dereferenced.
    pub unsafe fn make(
        &self,
        vaddr: *mut c_void,
        size: usize,
        permit_type: c_int,
        permit_value: *mut c_void,
    ) -> xpmem_segid_t {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.make)(vaddr, size, permit_type, permit_value) }
    }

    /// Calls `xpmem_remove`: withdraws a segment made by this process;
    /// returns `0`, or `-1` with `errno` set.
    ///
    /// # Safety
    ///
    /// - `segid` must be a segment id returned by [`Xpmem::make`] in this
    ///   process and not yet removed.
    /// - Other processes' attachments of the segment are torn down; they must
    ///   have stopped accessing it (otherwise they fault), which the caller
    ///   has to ensure by its own protocol.
    pub unsafe fn remove(&self, segid: xpmem_segid_t) -> c_int {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.remove)(segid) }
    }

    /// Calls `xpmem_get`: obtains an access permit for another process's
    /// segment; returns the permit id, or `-1` with `errno` set.
    ///
    /// # Safety
    ///
    /// - `flags` must be [`XPMEM_RDONLY`] or [`XPMEM_RDWR`].
    /// - `permit_type` must be [`XPMEM_PERMIT_MODE`]; `permit_value` is
    ///   passed through unchanged (never dereferenced)
    ///   and should be null.
    pub unsafe fn get(
        &self,
        segid: xpmem_segid_t,
        flags: c_int,
        permit_type: c_int,
        permit_value: *mut c_void,
    ) -> xpmem_apid_t {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.get)(segid, flags, permit_type, permit_value) }
    }

    /// Calls `xpmem_release`: gives up an access permit; returns `0`, or
    /// `-1` with `errno` set.
    ///
    /// # Safety
    ///
    /// - `apid` must be a permit returned by [`Xpmem::get`] in this process
    ///   and not yet released.
    /// - Attachments made through `apid` may be invalidated: they must be
    ///   detached first, or no longer accessed.
    pub unsafe fn release(&self, apid: xpmem_apid_t) -> c_int {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.release)(apid) }
    }

    /// Calls `xpmem_attach`: maps `size` bytes of a segment into this
    /// process; returns the mapped address, or `(void*)-1`
    /// ([`libc::MAP_FAILED`], **not** null) with `errno` set.
    ///
    /// # Safety
    ///
    /// - `addr.apid` must be a live permit from [`Xpmem::get`];
    ///   `addr.offset` must be a multiple of the page size and
    ///   `addr.offset + size` must lie within the segment.
    /// - `vaddr` should be null (the kernel chooses the address). A non-null
    ///   `vaddr` requests a fixed mapping that replaces whatever is mapped
    ///   there, so that range must belong to the caller and hold nothing Rust
    ///   still uses.
    /// - The returned mapping is shared with, and concurrently modified by,
    ///   another process: it must only be accessed through raw pointers
    ///   (`ptr::read_volatile`, `ptr::copy_nonoverlapping`, atomics, ...),
    ///   never through `&`/`&mut` references, and not after it has been
    ///   detached, its permit released or the segment removed (accesses
    ///   then fault).
    pub unsafe fn attach(&self, addr: xpmem_addr, size: usize, vaddr: *mut c_void) -> *mut c_void {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.attach)(addr, size, vaddr) }
    }

    /// Calls `xpmem_detach`: unmaps an attachment; returns `0`, or `-1` with
    /// `errno` set.
    ///
    /// # Safety
    ///
    /// - `vaddr` must be an address returned by [`Xpmem::attach`] in this
    ///   process and not yet detached.
    /// - No pointer into the attachment may be used afterwards.
    pub unsafe fn detach(&self, vaddr: *mut c_void) -> c_int {
        // SAFETY: the caller upholds the contract above; the pointer is valid
        // because `self` keeps the library loaded.
        unsafe { (self.detach)(vaddr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc_name() -> &'static Path {
        Path::new("libc.so.6")
    }

    #[test]
    fn xpmem_addr_layout() {
        assert_eq!(mem::size_of::<xpmem_addr>(), 16);
        assert_eq!(mem::align_of::<xpmem_addr>(), 8);
        let a = xpmem_addr { apid: 0, offset: 0 };
        let base = &a as *const xpmem_addr as usize;
        assert_eq!(&a.apid as *const xpmem_apid_t as usize - base, 0);
        assert_eq!(&a.offset as *const off_t as usize - base, 8);
    }

    #[test]
    fn nonexistent_library_is_not_found() {
        let name = "/nonexistent/dir/libxpmem-test.so.0";
        // SAFETY: nothing is loaded: the path does not exist.
        let err = unsafe { Xpmem::load_from(Path::new(name)) }.unwrap_err();
        assert!(
            matches!(&err, LoadError::LibraryNotFound { name: n, reason } if n == name && !reason.is_empty()),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{name} not found")), "{msg}");
    }

    #[test]
    fn library_without_symbols_is_missing_symbol() {
        // SAFETY: libc, loaded already, exports none of the XPMEM names.
        let err = unsafe { Xpmem::load_from(libc_name()) }.unwrap_err();
        assert!(
            matches!(&err, LoadError::MissingSymbol { library, symbol: "xpmem_version" } if library == "libc.so.6"),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "libc.so.6 lacks symbol xpmem_version");
    }

    #[test]
    fn override_uses_given_library_without_device_check() {
        // An override pointing at libc must reach symbol resolution (not the
        // default library, not the device check).
        // SAFETY: as above, libc.
        let err = unsafe { Xpmem::load_with_override(Some("libc.so.6".into())) }.unwrap_err();
        assert!(
            matches!(&err, LoadError::MissingSymbol { library, .. } if library == "libc.so.6"),
            "{err:?}"
        );
        // SAFETY: nothing is loaded: the path does not exist.
        let err =
            unsafe { Xpmem::load_with_override(Some("/nonexistent/libstandin.so".into())) }.unwrap_err();
        assert!(
            matches!(&err, LoadError::LibraryNotFound { name, .. } if name == "/nonexistent/libstandin.so"),
            "{err:?}"
        );
    }

    #[test]
    fn empty_override_means_default_library() {
        // SAFETY: the system's libxpmem where there is one, trusted as `load` trusts it.
        let via_empty = unsafe { Xpmem::load_with_override(Some(OsString::new())) };
        // SAFETY: as above.
        let via_none = unsafe { Xpmem::load_with_override(None) };
        let describe = |r: Result<Xpmem, LoadError>| match r {
            Ok(x) => format!("ok {}", x.path()),
            Err(e) => format!("err {e}"),
        };
        let empty = describe(via_empty);
        assert_eq!(empty, describe(via_none));
        assert!(empty.contains(LIBRARY_NAME) || empty.contains(DEVICE_PATH), "{empty}");
    }

    #[test]
    fn load_without_env_matches_system_state() {
        if std::env::var_os(LIBRARY_ENV).is_some() {
            return;
        }
        // SAFETY: the system's libxpmem where there is one, trusted as `load` trusts it.
        let system = unsafe { Xpmem::load_from(Path::new(LIBRARY_NAME)) };
        // SAFETY: as above.
        let loaded = unsafe { Xpmem::load() };
        match system {
            // The case on machines without XPMEM (including CI).
            Err(LoadError::LibraryNotFound { .. }) => {
                let err = loaded.unwrap_err();
                assert!(
                    matches!(&err, LoadError::LibraryNotFound { name, .. } if name == LIBRARY_NAME),
                    "{err:?}"
                );
                assert!(err.to_string().starts_with("libxpmem.so.0 not found"));
            }
            Err(LoadError::MissingSymbol { .. }) => {
                assert!(matches!(loaded, Err(LoadError::MissingSymbol { .. })));
            }
            Err(e) => panic!("load_from returned a device error: {e:?}"),
            Ok(_) => match check_device(Path::new(DEVICE_PATH)) {
                Ok(()) => assert_eq!(loaded.unwrap().path(), LIBRARY_NAME),
                Err(_) => assert!(matches!(
                    loaded,
                    Err(LoadError::NoDevice { .. }
                        | LoadError::DevicePermission { .. }
                        | LoadError::Device { .. })
                )),
            },
        }
    }

    #[test]
    fn check_device_missing() {
        let path = Path::new("/nonexistent/dev/xpmem");
        let err = check_device(path).unwrap_err();
        assert!(matches!(&err, LoadError::NoDevice { path: p } if p == path), "{err:?}");
        assert_eq!(err.to_string(), "/nonexistent/dev/xpmem missing");
    }

    #[test]
    fn check_device_dev_null_ok() {
        check_device(Path::new("/dev/null")).unwrap();
    }

    #[test]
    fn check_device_directory_is_other_error() {
        let err = check_device(Path::new("/")).unwrap_err();
        match &err {
            LoadError::Device { path, source } => {
                assert_eq!(path, Path::new("/"));
                assert_eq!(source.raw_os_error(), Some(libc::EISDIR));
                assert!(std::error::Error::source(&err).is_some());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn display_permission_denied() {
        let err = LoadError::DevicePermission { path: PathBuf::from(DEVICE_PATH) };
        assert_eq!(err.to_string(), "/dev/xpmem: permission denied");
        assert!(std::error::Error::source(&err).is_none());
    }
}
