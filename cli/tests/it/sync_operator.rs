//! `sync` against an operator: random interleavings of syncs, `--watch`
//! rounds, syncs killed part-way (SIGKILL to the real command), and what a
//! person or another user does around the synced directory (files added
//! in it, the directory replaced, removed or made again, its state removed
//! and planted by another user, a bind mount of the directory holding it
//! and of the directory itself, a mount over it, which then is the target).
//! After every step: no file the user made is deleted, moved or changed;
//! every skill directory reads as one whole version of that skill (plus
//! the user's own files); both bind mounts show what the directory holds;
//! and a sync that should succeed does, with the newest generation in
//! every skill directory that is not the user's.
//!
//! Runs as root (mounts, files of a second user): the suite does, and
//! elsewhere this test fails and says why.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

/// The user id of "another user" (`nobody`).
const OTHER_UID: u32 = 65534;

/// Skills in the source, and files in each: enough that a sync takes long
/// enough to be killed part-way.
const SKILLS: usize = 3;
const FILES: usize = 120;

#[derive(Debug, Clone)]
enum Step {
    /// One sync, to the end.
    Sync,
    /// A sync killed with SIGKILL after this many milliseconds.
    KilledSync(u64),
    /// `sync --watch` for this many rounds, then SIGTERM.
    Watch(usize),
    /// A file in the source changes, appears or goes (selector).
    ChangeSource(usize),
    /// The user writes a file into the directory (top level or in a skill).
    AddFile(bool),
    /// The user removes the directory.
    RemoveDir,
    /// The user moves the directory aside and makes a new one, with a file
    /// of their own in it or not.
    ReplaceDir(bool),
    /// The user removes the directory and makes an empty one (often on the
    /// same inode); owned by another user or not.
    RecreateEmpty(bool),
    /// The operator removes the state; another user plants their own.
    PlantState,
    /// The operator removes the planted state.
    RemovePlant,
    /// The directory holding the target is bind-mounted.
    BindParent,
    /// The target itself is bind-mounted (as `docker run -v DIR:...` does).
    BindDir,
    /// A directory of the user's is mounted over the target.
    MountOver,
    /// That mount goes.
    Unmount,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Sync),
        3 => (0u64..120).prop_map(Step::KilledSync),
        1 => (1usize..3).prop_map(Step::Watch),
        3 => any::<usize>().prop_map(Step::ChangeSource),
        2 => any::<bool>().prop_map(Step::AddFile),
        1 => Just(Step::RemoveDir),
        1 => any::<bool>().prop_map(Step::ReplaceDir),
        1 => any::<bool>().prop_map(Step::RecreateEmpty),
        1 => Just(Step::PlantState),
        1 => Just(Step::RemovePlant),
        1 => Just(Step::BindParent),
        1 => Just(Step::BindDir),
        1 => Just(Step::MountOver),
        1 => Just(Step::Unmount),
    ]
}

/// A real bind mount, lazily unmounted when dropped.
struct BindMount(PathBuf);

impl BindMount {
    fn new(from: &Path, at: &Path) -> BindMount {
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount").arg("--bind").arg(from).arg(at).status().unwrap();
        assert!(
            status.success(),
            "mount --bind failed: this test needs real bind mounts"
        );
        BindMount(at.to_path_buf())
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A child process, killed when dropped (a failing test leaves none).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` to the end: its exit status and standard error. A command
/// still running after 60 s is killed and fails the test (it hung).
fn finish(cmd: &mut Command) -> (std::process::ExitStatus, String) {
    let mut child = Running(cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap());
    let err = child.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sync did not finish within 60 s: it hung");
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, reader.join().unwrap())
}

/// Every regular file under `root` by relative path (following no link);
/// empty when `root` is absent.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn visit(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries {
            let entry = entry.unwrap();
            if entry.file_name() == "..skillstore" {
                // The state, inside a target that is a mount point.
                continue;
            }
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                visit(root, &path, out);
            } else {
                assert!(kind.is_file(), "not a regular file: {path:?}");
                let relative = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(root, root, &mut out);
    out
}

/// The world of one case: the source, the target, what the user made.
struct World {
    _tmp: tempfile::TempDir,
    source: PathBuf,
    parent: PathBuf,
    target: PathBuf,
    state: PathBuf,
    container: PathBuf,
    container_dir: PathBuf,
    /// Every tree the source has held (the generations a sync may write).
    generations: Vec<BTreeMap<String, Vec<u8>>>,
    /// Files the user made or took over, by absolute path.
    user_files: BTreeMap<PathBuf, Vec<u8>>,
    /// Top-level directories of the target that are the user's (sync can
    /// no longer know it wrote them): never replaced.
    user_dirs: std::collections::BTreeSet<String>,
    /// The user's directories of the target hidden under a mount over it.
    hidden_user_dirs: std::collections::BTreeSet<String>,
    /// The user's files in the target hidden under a mount over it: a sync
    /// through the mount may write files at the same paths.
    hidden_user_files: BTreeMap<PathBuf, Vec<u8>>,
    /// Another user's state is in place.
    planted: bool,
    bound: Option<BindMount>,
    /// The bind mount of the target itself, while it is the target.
    bound_dir: Option<BindMount>,
    over: Option<BindMount>,
    counter: usize,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("src");
        for s in 0..SKILLS {
            let name = format!("skill-{s}");
            let dir = source.join("base").join(&name);
            std::fs::create_dir_all(dir.join("references")).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: Skill {s}.\n---\nBody.\n"),
            )
            .unwrap();
            for f in 0..FILES {
                std::fs::write(dir.join(format!("references/{f}.md")), format!("{name} {f} v0\n")).unwrap();
            }
        }
        let parent = tmp.path().join("skillstore");
        std::fs::create_dir(&parent).unwrap();
        let mut world = World {
            source,
            target: parent.join("skills"),
            state: parent.join(".skills.skillstore"),
            parent,
            container: tmp.path().join("container"),
            container_dir: tmp.path().join("container-dir"),
            _tmp: tmp,
            generations: Vec::new(),
            user_files: BTreeMap::new(),
            user_dirs: Default::default(),
            hidden_user_dirs: Default::default(),
            hidden_user_files: BTreeMap::new(),
            planted: false,
            bound: None,
            bound_dir: None,
            over: None,
            counter: 0,
        };
        world.generations.push(world.source_tree());
        world
    }

    fn source_tree(&self) -> BTreeMap<String, Vec<u8>> {
        files(&self.source.join("base"))
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("skillstore"));
        cmd.args(["--no-cache", "--mount"])
            .arg(format!("/={}", self.source.display()))
            .args(["--source", "/base/", "sync"])
            .arg(&self.target);
        cmd
    }

    fn next(&mut self) -> usize {
        self.counter += 1;
        self.counter
    }

    /// True when a sync must succeed now: unless another user's state is
    /// the one it would use, or a skill directory of sync's holds a file of
    /// the user's.
    fn sync_should_succeed(&self) -> bool {
        let planted = self.planted && self.over.is_none();
        let in_skill = self.over.is_none()
            && self.user_files.keys().any(|p| {
                p.strip_prefix(&self.target).ok().is_some_and(|relative| {
                    let mut parts = relative.components();
                    let top = parts.next().unwrap().as_os_str().to_str().unwrap().to_owned();
                    parts.next().is_some() && !self.user_dirs.contains(&top)
                })
            });
        !planted && !in_skill
    }

    /// Every file under the target becomes the user's (sync can no longer
    /// know it wrote them), and so every directory at its top.
    fn adopt_target(&mut self) {
        for (relative, bytes) in files(&self.target) {
            self.user_files.insert(self.target.join(relative), bytes);
        }
        if let Ok(entries) = std::fs::read_dir(&self.target) {
            for entry in entries {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() && entry.file_name() != "..skillstore" {
                    self.user_dirs.insert(entry.file_name().into_string().unwrap());
                }
            }
        }
    }

    fn forget_target(&mut self) {
        let target = self.target.clone();
        self.user_files.retain(|p, _| !p.starts_with(&target));
        self.user_dirs.clear();
        self.bound_dir = None;
    }

    /// The target as a sync that succeeded must leave it: the newest
    /// generation in every skill directory that is not the user's.
    fn expected_after_sync(&self) -> BTreeMap<String, Vec<u8>> {
        let mut seen = files(&self.target);
        seen.retain(|relative, _| !self.user_files.contains_key(&self.target.join(relative)));
        let mut expected = self.generations.last().unwrap().clone();
        expected.retain(|relative, _| !self.user_dirs.contains(relative.split('/').next().unwrap()));
        assert_eq!(seen, expected, "a sync that succeeded left another tree");
        seen
    }

    fn run(&mut self, step: &Step) {
        match step {
            Step::Sync => {
                let before = files(&self.target);
                let (status, stderr) = finish(&mut self.command());
                if self.sync_should_succeed() {
                    assert!(status.success(), "sync failed: {stderr}");
                    self.expected_after_sync();
                } else {
                    assert!(!status.success(), "sync succeeded where it must refuse");
                    assert_eq!(files(&self.target), before, "a refused sync changed the target");
                }
            }
            Step::KilledSync(after) => {
                let child = Running(
                    self.command()
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap(),
                );
                std::thread::sleep(Duration::from_millis(*after));
                drop(child);
            }
            Step::Watch(rounds) => self.watch(*rounds),
            Step::ChangeSource(which) => {
                let skill = which % SKILLS;
                let file = (which / SKILLS) % (FILES + 4);
                let path = self.source.join(format!("base/skill-{skill}/references/{file}.md"));
                if path.exists() && which % 5 == 0 {
                    std::fs::remove_file(&path).unwrap();
                } else {
                    let n = self.next();
                    std::fs::write(&path, format!("skill-{skill} {file} v{n}\n")).unwrap();
                }
                self.generations.push(self.source_tree());
            }
            Step::AddFile(in_skill) => {
                if self.over.is_some() || !self.target.is_dir() {
                    return;
                }
                let n = self.next();
                let skill = self.target.join("skill-0");
                let path = if *in_skill && skill.is_dir() {
                    skill.join(format!("notes-{n}.txt"))
                } else {
                    self.target.join(format!("mine-{n}.txt"))
                };
                let bytes = format!("the user's file {n}\n").into_bytes();
                std::fs::write(&path, &bytes).unwrap();
                self.user_files.insert(path, bytes);
            }
            Step::RemoveDir => {
                if self.over.is_none() && self.target.exists() {
                    std::fs::remove_dir_all(&self.target).unwrap();
                    self.forget_target();
                }
            }
            Step::ReplaceDir(with_file) => {
                if self.over.is_some() || !self.target.exists() {
                    return;
                }
                let n = self.next();
                let aside = self.parent.join(format!("aside-{n}"));
                std::fs::rename(&self.target, &aside).unwrap();
                self.forget_target();
                for (relative, bytes) in files(&aside) {
                    self.user_files.insert(aside.join(relative), bytes);
                }
                std::fs::create_dir(&self.target).unwrap();
                if *with_file {
                    let path = self.target.join("mine.txt");
                    std::fs::write(&path, b"mine\n").unwrap();
                    self.user_files.insert(path, b"mine\n".to_vec());
                }
            }
            Step::RecreateEmpty(other) => {
                if self.over.is_some() {
                    return;
                }
                if self.target.exists() {
                    std::fs::remove_dir_all(&self.target).unwrap();
                }
                self.forget_target();
                std::fs::create_dir(&self.target).unwrap();
                if *other {
                    // A volume root of another user's: synced into all the same.
                    std::os::unix::fs::chown(&self.target, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
                    std::fs::set_permissions(&self.target, std::fs::Permissions::from_mode(0o777)).unwrap();
                }
            }
            Step::PlantState => {
                if self.planted || self.over.is_some() {
                    return;
                }
                if self.state.exists() {
                    std::fs::remove_dir_all(&self.state).unwrap();
                }
                self.adopt_target();
                self.plant();
                self.planted = true;
            }
            Step::RemovePlant => {
                if self.planted {
                    std::fs::remove_dir_all(&self.state).unwrap();
                    self.planted = false;
                }
            }
            Step::BindParent => {
                if self.bound.is_none() {
                    self.bound = Some(BindMount::new(&self.parent, &self.container));
                }
            }
            Step::BindDir => {
                if self.bound_dir.is_none() && self.over.is_none() && self.target.is_dir() {
                    self.bound_dir = Some(BindMount::new(&self.target, &self.container_dir));
                }
            }
            Step::MountOver => {
                if self.over.is_some() || !self.target.is_dir() {
                    return;
                }
                let n = self.next();
                let theirs = self.parent.join(format!("theirs-{n}"));
                std::fs::create_dir(&theirs).unwrap();
                let path = theirs.join("theirs.txt");
                std::fs::write(&path, b"theirs\n").unwrap();
                self.user_files.insert(path, b"theirs\n".to_vec());
                self.over = Some(BindMount::new(&theirs, &self.target));
                self.hidden_user_dirs = std::mem::take(&mut self.user_dirs);
                let target = self.target.clone();
                let (hidden, shown) = std::mem::take(&mut self.user_files)
                    .into_iter()
                    .partition(|(path, _)| path.starts_with(&target));
                self.hidden_user_files = hidden;
                self.user_files = shown;
                // Seen through the mount, where the target was.
                self.user_files
                    .insert(self.target.join("theirs.txt"), b"theirs\n".to_vec());
            }
            Step::Unmount => {
                if self.over.take().is_some() {
                    self.user_files.remove(&self.target.join("theirs.txt"));
                    self.user_dirs = std::mem::take(&mut self.hidden_user_dirs);
                    self.user_files.append(&mut self.hidden_user_files);
                }
            }
        }
    }

    /// Another user's state: world-writable, a manifest naming the target
    /// as its generation, a FIFO for the lock.
    fn plant(&self) {
        std::fs::create_dir(&self.state).unwrap();
        if let Ok(meta) = std::fs::metadata(&self.target) {
            use std::os::unix::fs::MetadataExt;
            let forged = format!(
                r#"{{"format":2,"id":"0","keep_modes":false,"skills":{{}},"dirs":{{"":{}}}}}"#,
                meta.ino()
            );
            std::fs::write(self.state.join("manifest-0.json"), forged).unwrap();
            std::fs::write(
                self.state
                    .join(format!("manifest-{:x}-{:x}.json", meta.dev(), meta.ino())),
                r#"{"format":1,"keep_modes":false,"skills":{}}"#,
            )
            .unwrap();
        }
        rustix::fs::mknodat(
            rustix::fs::CWD,
            self.state.join("lock"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o666),
            0,
        )
        .unwrap();
        for entry in std::fs::read_dir(&self.state).unwrap() {
            std::os::unix::fs::lchown(entry.unwrap().path(), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
        }
        std::os::unix::fs::chown(&self.state, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
        std::fs::set_permissions(&self.state, std::fs::Permissions::from_mode(0o777)).unwrap();
    }

    /// `sync --watch` until it has reported `rounds` times (a report on
    /// standard output or an error on standard error), then SIGTERM.
    fn watch(&mut self, rounds: usize) {
        let mut child = Running(
            self.command()
                .args(["--watch", "10ms", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel::<bool>();
        let out = child.0.stdout.take().unwrap();
        let err = child.0.stderr.take().unwrap();
        let (tx_out, tx_err) = (tx.clone(), tx);
        let readers = [
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if !line.is_empty() && tx_out.send(true).is_err() {
                        break;
                    }
                }
            }),
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if line.starts_with("error:") && tx_err.send(false).is_err() {
                        break;
                    }
                }
            }),
        ];
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while seen.len() < rounds {
            let left = deadline.saturating_duration_since(Instant::now());
            seen.push(rx.recv_timeout(left).expect("no report from sync --watch within 60 s"));
        }
        let pid = rustix::process::Pid::from_child(&child.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let status = child.0.wait().unwrap();
        drop(rx);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(status.code(), Some(0), "sync --watch did not end with 0 on SIGTERM");
        if self.sync_should_succeed() {
            assert!(
                seen.iter().all(|ok| *ok),
                "a watch round failed where a sync must succeed"
            );
        } else {
            assert!(seen.iter().all(|ok| !ok), "a watch round synced where it must refuse");
        }
    }

    /// What must hold after every step.
    fn check(&self, step: &Step) {
        for (path, bytes) in &self.user_files {
            let found =
                std::fs::read(path).unwrap_or_else(|e| panic!("after {step:?}: the user's {path:?} is gone: {e}"));
            assert_eq!(&found, bytes, "after {step:?}: the user's {path:?} changed");
        }
        let mut seen = files(&self.target);
        seen.retain(|relative, _| !self.user_files.contains_key(&self.target.join(relative)));
        // Each skill directory is switched whole: it holds one version of
        // its skill (a sync killed part-way may leave skills of two).
        let mut skills: BTreeMap<&str, BTreeMap<&str, &Vec<u8>>> = BTreeMap::new();
        for (relative, bytes) in &seen {
            let (skill, inside) = relative.split_once('/').unwrap_or(("", relative));
            skills.entry(skill).or_default().insert(inside, bytes);
        }
        for (skill, held) in &skills {
            let whole = self.generations.iter().any(|g| {
                let prefix = format!("{skill}/");
                let of: BTreeMap<&str, &Vec<u8>> = g
                    .iter()
                    .filter_map(|(p, b)| p.strip_prefix(&prefix).map(|inside| (inside, b)))
                    .collect();
                of == *held
            });
            assert!(
                whole,
                "after {step:?}: `{skill}` is not one whole version of the skill: {:?}",
                held.keys().take(10).collect::<Vec<_>>()
            );
        }
        if self.bound.is_some() && self.over.is_none() {
            assert_eq!(
                files(&self.container.join("skills")),
                files(&self.target),
                "after {step:?}: the bind mount of the parent shows another tree"
            );
        }
        if self.bound_dir.is_some() && self.over.is_none() {
            assert_eq!(
                files(&self.container_dir),
                files(&self.target),
                "after {step:?}: the bind mount of the directory shows another tree"
            );
        }
    }
}

/// `PROPTEST_CASES` when set; otherwise 48 under CI (20 to 40 s),
/// 16 on a developer's machine.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::var_os("CI").is_some() { 48 } else { 16 })
}

/// Runs `steps`, checking after each, then clears the way: whatever
/// happened, a sync then succeeds with the newest generation.
fn run_case(steps: &[Step]) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root: bind mounts and a second user's files"
    );
    let mut world = World::new();
    for step in steps {
        world.run(step);
        world.check(step);
    }
    world.run(&Step::Unmount);
    if world.planted {
        world.run(&Step::RemovePlant);
    }
    world.run(&Step::RemoveDir);
    world.run(&Step::Sync);
    world.check(&Step::Sync);
}

/// A sync through a mount over a target whose skills the user took over
/// writes files at the paths of the hidden ones: they are the sync's, and
/// the user's come back when the mount goes.
#[test]
fn a_sync_through_a_mount_over_adopted_skills_writes_the_generation() {
    run_case(&[Step::Sync, Step::PlantState, Step::MountOver, Step::Sync]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sync_never_loses_a_user_file_and_shows_one_whole_generation(steps in proptest::collection::vec(step(), 4..14)) {
        run_case(&steps);
    }
}
