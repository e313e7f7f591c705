//! The conformance suite every [`SkillBackend`] must pass, and the matrix of
//! backends it runs on, each declared once.
//!
//! The matrix: [`memory_fixture`], [`mount_fixture`],
//! [`object_store_memory_fixture`], [`fs_fixture`] (the default path
//! resolver), [`fs_portable_fixture`] (the per-component resolver), with
//! feature `git`, `git_repo::git_fixture` (a Git repository committed by the
//! real `git` after every write) and, with feature `s3-server`,
//! [`s3_server::s3_fixture`] (the in-process S3 server). [`conformance_matrix!`](crate::conformance_matrix) expands every
//! conformance case on every backend of it;
//! [`backend_matrix!`](crate::backend_matrix) does the same for cases of the
//! caller's own, so a crate built on these backends tests its code on all of
//! them:
//!
//! ```text
//! // tests/catalog_on_every_backend.rs
//! use skillstore_backends::testkit::Fixture;
//!
//! async fn loads_a_skill(f: Fixture) { /* uses f.backend */ }
//! async fn reports_a_missing_file(f: Fixture) { /* ... */ }
//!
//! skillstore_backends::backend_matrix!(loads_a_skill, reports_a_missing_file);
//! // tests named memory::loads_a_skill, fs_portable::loads_a_skill, s3::...
//! ```
//!
//! [`conformance_tests!`](crate::conformance_tests) runs the suite on one
//! backend outside the matrix (a second S3 implementation, say). A factory
//! returns a fresh, empty, writable [`Fixture`]. Cases that need special
//! files (FIFOs, symbolic links) use [`Fixture::specials`]; for a backend
//! that cannot hold them, the same cases check that it declares so.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use crate::backend::SkillBackend;

pub mod cases;
#[cfg(feature = "s3-server")]
pub mod fault_proxy;
#[cfg(all(feature = "git", unix))]
pub mod git_repo;
#[cfg(all(feature = "git", unix))]
pub mod git_servers;
pub mod hostile;
pub mod latency_proxy;
pub mod read_only;
#[cfg(feature = "s3-server")]
pub mod s3_server;

/// A backend under test, with whatever keeps it alive (a temporary
/// directory, a bucket).
pub struct Fixture {
    /// The backend, empty and writable.
    pub backend: Arc<dyn SkillBackend>,
    /// How to create special files behind the backend's back, where it can
    /// hold them.
    pub specials: Option<Box<dyn Specials>>,
    /// Whether the server behind the backend makes a conditional write
    /// (create-only, `If-None-Match: *`) atomic: true for every target but
    /// moto, which checks the condition and then writes, so two
    /// simultaneous create-only writes can both succeed. Cases that race
    /// conditional writes assert the weaker property that still holds when
    /// it is false.
    pub atomic_conditionals: bool,
    _keep: Box<dyn Any + Send + Sync>,
}

impl Fixture {
    /// A fixture for a backend that needs nothing kept alive.
    pub fn new(backend: impl SkillBackend + 'static) -> Self {
        Fixture {
            backend: Arc::new(backend),
            specials: None,
            atomic_conditionals: true,
            _keep: Box::new(()),
        }
    }

    /// Marks the server behind the backend as one whose conditional writes
    /// are not atomic (see [`Fixture::atomic_conditionals`]).
    pub fn without_atomic_conditionals(mut self) -> Self {
        self.atomic_conditionals = false;
        self
    }

    /// Keeps `value` alive as long as the fixture.
    pub fn keeping(mut self, value: impl Any + Send + Sync) -> Self {
        self._keep = Box::new(value);
        self
    }

    /// Sets the special-file maker.
    pub fn with_specials(mut self, specials: impl Specials + 'static) -> Self {
        self.specials = Some(Box::new(specials));
        self
    }
}

/// Creates objects a backend's own API cannot: FIFOs and symbolic links.
pub trait Specials: Send + Sync {
    /// Makes a FIFO at `path` (parents must exist).
    fn make_fifo(&self, path: &crate::VPath);
    /// Makes a symbolic link at `link` whose target is the raw `target`.
    fn make_symlink(&self, link: &crate::VPath, target: &str);
    /// A host path to an existing file outside the backend's root.
    fn outside_file(&self) -> String;
}

/// Runs one case against a fresh fixture on a multi-threaded runtime.
pub fn run_case<F, Fut>(factory: fn() -> Fixture, case: F)
where
    F: FnOnce(Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(case(factory()));
}

/// A fresh [`crate::MemoryBackend`].
pub fn memory_fixture() -> Fixture {
    Fixture::new(crate::MemoryBackend::new())
}

/// A [`crate::MemoryBackend`] mounted at `/` of a [`crate::MountTable`].
pub fn mount_fixture() -> Fixture {
    let mut table = crate::MountTable::new();
    table
        .mount(crate::VPath::root(), Arc::new(crate::MemoryBackend::new()))
        .expect("mounting at the root");
    Fixture::new(table)
}

/// An [`crate::ObjectStoreBackend`] over `object_store`'s in-memory store,
/// under a key prefix.
#[cfg(feature = "object-store")]
pub fn object_store_memory_fixture() -> Fixture {
    let store = Arc::new(object_store::memory::InMemory::new());
    Fixture::new(crate::ObjectStoreBackend::new(store, "tenant/skills").expect("a valid prefix"))
}

/// An [`crate::FsBackend`] with the default policy and resolver over a
/// fresh temporary directory, with a sibling `outside/secret.txt` that must
/// stay unreachable.
#[cfg(all(feature = "fs", unix))]
pub fn fs_fixture() -> Fixture {
    fs_fixture_with(crate::SymlinkPolicy::default())
}

/// Like [`fs_fixture`], resolving paths one component at a time
/// ([`crate::PathResolver::PerComponent`]).
#[cfg(all(feature = "fs", unix))]
pub fn fs_portable_fixture() -> Fixture {
    fs_fixture_with_resolver(crate::SymlinkPolicy::default(), crate::PathResolver::PerComponent)
}

/// Like [`fs_fixture`], with the given symlink policy.
#[cfg(all(feature = "fs", unix))]
pub fn fs_fixture_with(policy: crate::SymlinkPolicy) -> Fixture {
    fs_fixture_with_resolver(policy, crate::PathResolver::default())
}

/// Like [`fs_fixture`], with the given symlink policy and path resolver.
#[cfg(all(feature = "fs", unix))]
pub fn fs_fixture_with_resolver(policy: crate::SymlinkPolicy, resolver: crate::PathResolver) -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&root).expect("creating the root");
    std::fs::create_dir(&outside).expect("creating the outside directory");
    std::fs::write(outside.join("secret.txt"), b"outside the root").expect("writing the outside file");
    let backend = crate::FsBackend::with_resolver(&root, policy, resolver).expect("opening the root");
    Fixture::new(backend)
        .with_specials(HostSpecials { root: root.clone() })
        .keeping(dir)
}

/// Special files in a host directory.
#[cfg(all(feature = "fs", unix))]
#[derive(Debug, Clone)]
pub struct HostSpecials {
    /// The backend's root on the host.
    pub root: std::path::PathBuf,
}

#[cfg(all(feature = "fs", unix))]
impl HostSpecials {
    /// The host path of `path` below the root.
    pub fn host(&self, path: &crate::VPath) -> std::path::PathBuf {
        self.root.join(path.relative_str())
    }
}

#[cfg(all(feature = "fs", unix))]
impl Specials for HostSpecials {
    fn make_fifo(&self, path: &crate::VPath) {
        let made = std::process::Command::new("mkfifo")
            .arg(self.host(path))
            .status()
            .expect("running mkfifo");
        assert!(made.success(), "mkfifo failed");
    }

    fn make_symlink(&self, link: &crate::VPath, target: &str) {
        std::os::unix::fs::symlink(target, self.host(link)).expect("symlink");
    }

    fn outside_file(&self) -> String {
        let outside = self
            .root
            .parent()
            .expect("root has a parent")
            .join("outside/secret.txt");
        outside.to_string_lossy().into_owned()
    }
}

/// Expands the conformance suite into `#[test]` functions in the calling
/// module, for one backend. The argument is a `fn() -> Fixture` path.
/// Prefix it with `#[ignore = "..."]` to mark every case ignored (for
/// targets that need an external server).
#[macro_export]
macro_rules! conformance_tests {
    (#[ignore = $why:literal] $factory:path) => {
        $crate::__conformance_cases!([#[ignore = $why]] $factory);
    };
    ($factory:path) => {
        $crate::__conformance_cases!([] $factory);
    };
}

/// Expands the conformance suite on every backend of the matrix: one module
/// per backend (`memory`, `mount`, `object_store`, `fs`, `fs_portable`,
/// `git`, `s3`), one `#[test]` per case in each.
#[macro_export]
macro_rules! conformance_matrix {
    () => {
        $crate::__for_each_backend!(__conformance_module!());
    };
}

/// Expands the caller's own cases on every backend of the matrix: one
/// module per backend, holding one `#[test]` per case, named after it. Each
/// case is an `async fn(Fixture)` in the calling module.
#[macro_export]
macro_rules! backend_matrix {
    ($($case:ident),+ $(,)?) => {
        $crate::__for_each_backend!(__cases_module!($($case),+));
    };
}

/// The matrix, declared once: calls `$crate::$callback!(module, factory;
/// args)` for every backend this build of the crate can run.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_backend {
    ($callback:ident!($($args:tt)*)) => {
        $crate::$callback!(memory, $crate::testkit::memory_fixture; $($args)*);
        $crate::$callback!(mount, $crate::testkit::mount_fixture; $($args)*);
        $crate::__if_object_store! {
            $crate::$callback!(object_store, $crate::testkit::object_store_memory_fixture; $($args)*);
        }
        $crate::__if_fs! {
            $crate::$callback!(fs, $crate::testkit::fs_fixture; $($args)*);
            $crate::$callback!(fs_portable, $crate::testkit::fs_portable_fixture; $($args)*);
        }
        $crate::__if_git! {
            $crate::$callback!(git, $crate::testkit::git_repo::git_fixture; $($args)*);
        }
        $crate::__if_s3_server! {
            $crate::$callback!(s3, $crate::testkit::s3_server::s3_fixture; $($args)*);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_module {
    ($name:ident, $factory:path;) => {
        mod $name {
            $crate::conformance_tests!($factory);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __cases_module {
    ($name:ident, $factory:path; $($case:ident),+) => {
        mod $name {
            $(
                #[test]
                fn $case() {
                    $crate::testkit::run_case($factory, super::$case);
                }
            )+
        }
    };
}

// The feature gates of the matrix, judged in this crate (a `cfg` written
// in an exported macro would be judged in the caller's).

#[cfg(feature = "object-store")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_object_store {
    ($($item:tt)*) => { $($item)* };
}

#[cfg(not(feature = "object-store"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_object_store {
    ($($item:tt)*) => {};
}

#[cfg(all(feature = "fs", unix))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_fs {
    ($($item:tt)*) => { $($item)* };
}

#[cfg(not(all(feature = "fs", unix)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_fs {
    ($($item:tt)*) => {};
}

#[cfg(all(feature = "git", unix))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_git {
    ($($item:tt)*) => { $($item)* };
}

#[cfg(not(all(feature = "git", unix)))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_git {
    ($($item:tt)*) => {};
}

#[cfg(feature = "s3-server")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_s3_server {
    ($($item:tt)*) => { $($item)* };
}

#[cfg(not(feature = "s3-server"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_s3_server {
    ($($item:tt)*) => {};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ([$($attr:tt)*] $factory:path) => {
        $crate::__conformance_expand!([$($attr)*] $factory;
            list_root_shows_files_and_directories,
            list_gives_the_size_and_version_reads_see,
            list_missing_directory_is_not_found,
            list_file_is_not_a_directory,
            stat_file_directory_and_missing,
            read_whole_file,
            read_missing_is_not_found,
            read_directory_is_refused,
            read_root_is_refused,
            read_below_a_file_fails,
            read_empty_file,
            prefix_read_returns_prefix_and_whole_size,
            prefix_read_longer_than_the_file_is_complete,
            prefix_read_of_zero_bytes,
            size_guard_allows_exactly_the_limit,
            size_guard_refuses_one_byte_over,
            size_guard_applies_to_prefix_reads,
            default_limit_is_ten_mebibytes,
            versions_change_when_content_changes,
            versions_are_stable_between_reads,
            put_overwrite_replaces_content,
            put_create_only_creates,
            put_create_only_refuses_an_existing_object,
            put_if_version_replaces_the_matching_version,
            put_if_version_refuses_a_stale_version,
            put_if_version_refuses_a_missing_object,
            put_creates_parent_directories,
            put_returns_the_version_reads_see,
            concurrent_create_only_has_one_winner,
            delete_removes_the_file_and_empty_directories,
            delete_missing_is_not_found,
            delete_if_version_checks_the_version,
            unicode_and_punctuation_names_round_trip,
            percent_encoded_dots_are_literal_names,
            hostile_paths_are_refused_before_any_backend_call,
            lookalike_paths_are_literal_names,
            concurrent_reads_agree,
            fifo_is_refused_not_waited_on,
            symlink_out_of_the_root_is_refused,
            read_many_matches_read,
            stat_many_matches_stat,
            list_many_matches_list,
            read_many_refuses_special_files,
            confined_read_stays_in_its_directory,
            confined_read_through_a_link_out_of_the_skill_is_refused,
            writes_never_follow_a_link,
            walk_returns_every_file_within_its_limits,
            deep_listing_agrees_with_the_walk,
            walk_never_descends_into_directory_links,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_expand {
    ($attrs:tt $factory:path; $($case:ident),* $(,)?) => {
        $( $crate::__conformance_case!($attrs $factory; $case); )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case {
    ([$($attr:tt)*] $factory:path; $case:ident) => {
        #[test]
        $($attr)*
        fn $case() {
            $crate::testkit::run_case($factory, $crate::testkit::cases::$case);
        }
    };
}
