use super::*;

#[test]
fn an_exclusive_lock_excludes_every_other_and_shared_ones_share() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE);
    let held = try_lock(&path, LockMode::Exclusive).unwrap();
    assert!(matches!(held, Locked::Held(_)));
    assert!(matches!(try_lock(&path, LockMode::Exclusive).unwrap(), Locked::Busy(_)));
    assert!(matches!(try_lock(&path, LockMode::Shared).unwrap(), Locked::Busy(_)));
    drop(held);
    let (a, b) = (try_lock(&path, LockMode::Shared).unwrap(), try_lock(&path, LockMode::Shared).unwrap());
    assert!(matches!((&a, &b), (Locked::Held(_), Locked::Held(_))));
    assert!(matches!(try_lock(&path, LockMode::Exclusive).unwrap(), Locked::Busy(_)));
}

/// Issue 90, cause C: a link as `grin.lock` had its target truncated and
/// the PID written there; a dangling one made a file outside the folder.
#[cfg(unix)]
#[test]
fn a_lock_file_that_is_a_link_a_folder_or_a_fifo_is_refused_by_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    type Make<'a> = &'a dyn Fn(&Path);
    let mkfifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    // A folder of that name may hold anything: moved aside, not removed.
    let cases: [(&str, Make<'_>, &str, &str); 4] = [
        ("link", &|p| std::os::unix::fs::symlink(&target, p).unwrap(), "is a symbolic link", "remove it"),
        (
            "dangling",
            &|p| std::os::unix::fs::symlink(dir.path().join("elsewhere"), p).unwrap(),
            "is a symbolic link",
            "remove it",
        ),
        ("folder", &|p| std::fs::create_dir(p).unwrap(), "is a folder", "move it elsewhere"),
        ("fifo", &mkfifo, "is a FIFO", "remove it"),
    ];
    for (name, make, said, to_do) in cases {
        let folder = dir.path().join(name);
        std::fs::create_dir(&folder).unwrap();
        let path = folder.join(LOCK_FILE);
        make(&path);
        for mode in [LockMode::Exclusive, LockMode::Shared] {
            let e = try_lock(&path, mode).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name}: {e}");
            assert!(e.to_string().contains(said) && e.to_string().contains(to_do), "{name}: {e}");
            // A shard's temporary file is locked this way too (round 11:
            // "not a lock file" was said of one).
            assert!(e.to_string().contains("not a file grin made"), "{name}: {e}");
        }
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(!dir.path().join("elsewhere").exists(), "nothing made outside the folder");
}

/// A lock file a writer cannot write was "cannot write the holder's PID:
/// Bad file descriptor"; a reader still locks it read-only.
#[cfg(unix)]
#[test]
fn an_unwritable_lock_file_is_refused_to_a_writer_and_shared_with_readers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE);
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    if std::fs::OpenOptions::new().write(true).open(&path).is_ok() {
        eprintln!("SKIPPED, NOT PASSED: running as root, every file is writable");
        return;
    }
    let e = try_lock(&path, LockMode::Exclusive).unwrap_err();
    assert!(e.to_string().contains("the lock file cannot be written") && e.to_string().contains("chmod u+w"), "{e}");
    assert!(matches!(try_lock(&path, LockMode::Shared).unwrap(), Locked::Held(_)));
}
