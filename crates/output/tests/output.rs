//! Each rule of `grin_output`, on real files, devices and pipes.
use grin_output::{write_file, write_files, write_with};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_new_file_and_a_replaced_one_are_whole_and_keep_the_replaced_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.grin");
    write_file(&path, &[], b"first").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_file(&path, &[], b"second").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_failed_write_leaves_the_old_file_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.onnx");
    std::fs::write(&path, b"old").unwrap();
    let e = write_with(&path, &[], |w| {
        w.write_all(b"half")?;
        Err(std::io::Error::other("disk full"))
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(&format!("{}: cannot write ", path.display())) && e.contains(".tmp") && e.contains("disk full"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

/// Round 26 of issue 90: a report whose second file could not be written
/// had its first replaced, the folder then mixing two reports.
#[test]
fn files_written_as_one_replace_nothing_unless_all_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (curve, figures) = (dir.path().join("pr_curve.svg"), dir.path().join("photos.json"));
    std::fs::write(&curve, b"old curve").unwrap();
    std::fs::write(&figures, b"old figures").unwrap();
    let cannot = dir.path().join("missing/thresholds.svg");
    let report = |third: &Path| {
        vec![(curve.clone(), b"new curve".to_vec()), (figures.clone(), b"new figures".to_vec()), (third.into(), vec![])]
    };
    let e = write_files(&report(&cannot), &[]).unwrap_err().to_string();
    assert!(e.starts_with(&cannot.display().to_string()), "{e}");
    assert_eq!(std::fs::read(&curve).unwrap(), b"old curve");
    assert_eq!(std::fs::read(&figures).unwrap(), b"old figures");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
    // Round 27: a FIFO (or a device) under one name is written as it goes,
    // not whole beside it: refused before the work, and by the write.
    let fifo = dir.path().join("fifo.svg");
    mkfifo(&fifo);
    let e = grin_output::check_files(&[curve.clone(), fifo.clone()], &[]).unwrap_err().to_string();
    assert!(e.contains("fifo.svg: is not a regular file (a FIFO or a device)"), "{e}");
    assert_eq!(write_files(&report(&fifo), &[]).unwrap_err().to_string(), e);
    assert_eq!(std::fs::read(&curve).unwrap(), b"old curve");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
    write_files(&report(&dir.path().join("thresholds.svg")), &[]).unwrap();
    assert_eq!(std::fs::read(&curve).unwrap(), b"new curve");
    assert_eq!(std::fs::read(&figures).unwrap(), b"new figures");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_read_only_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.grin");
    std::fs::write(&path, b"keep").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = write_file(&path, &[], b"new").unwrap_err().to_string();
    assert!(e.contains("model.grin: is read-only: not replaced"), "{e}");
    // Before the work too (round 17: `--draw` found it after detection).
    assert_eq!(grin_output::check_file(&path, &[]).unwrap_err().to_string(), e);
    assert_eq!(std::fs::read(&path).unwrap(), b"keep");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o444);
}

#[test]
fn an_output_that_is_an_input_is_refused_by_name_link_or_hard_link() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("photo.png");
    std::fs::write(&input, b"pixels").unwrap();
    let soft = dir.path().join("soft.png");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let hard = dir.path().join("hard.png");
    std::fs::hard_link(&input, &hard).unwrap();
    for out in [&input, &soft, &hard] {
        let e = write_file(out, &[&input], b"drawing").unwrap_err().to_string();
        assert!(e.contains("is also an input") && e.contains("photo.png"), "{e}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), b"pixels");
    // Round 12: a photo outside an input folder that a link inside it
    // reaches (through a linked folder too) is one of the folder's photos.
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(photos.join("sub")).unwrap();
    std::os::unix::fs::symlink(&input, photos.join("sub/a.png")).unwrap();
    std::os::unix::fs::symlink(&photos, photos.join("sub/loop")).unwrap();
    let e = write_file(&input, &[&photos], b"drawing").unwrap_err().to_string();
    assert!(e.contains("is also an input") && e.contains("sub/a.png"), "{e}");
    assert_eq!(std::fs::read(&input).unwrap(), b"pixels");
}

#[test]
fn nothing_is_written_inside_an_input_folder_new_file_or_old() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("photos")).unwrap();
    let photo = data.join("photos").join("a.png");
    std::fs::write(&photo, b"pixels").unwrap();
    let through = dir.path().join("data").join("..").join("data").join("photos").join("new.png");
    for out in [&photo, &data.join("manifest.json"), &through] {
        let e = write_file(out, &[&data], b"sheet").unwrap_err().to_string();
        assert!(e.contains("is inside an input folder") && e.contains("data"), "{e}");
    }
    assert_eq!(std::fs::read(&photo).unwrap(), b"pixels");
    assert!(!data.join("manifest.json").exists() && !data.join("photos").join("new.png").exists());
    // Beside the folder is fine.
    write_file(&dir.path().join("sheet.png"), &[&data], b"sheet").unwrap();
}

/// Issue 90, round 7: `grin eval --config OUT/photos.json --out OUT`
/// replaced its own config with its report. An output folder holding an
/// input is refused, however the input is named.
#[test]
fn an_output_folder_that_holds_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("sub")).unwrap();
    let config = out.join("sub").join("photos.json");
    std::fs::write(&config, b"[features]").unwrap();
    let through = dir.path().join("out").join("..").join("out");
    for folder in [&out, &through] {
        let e = grin_output::check(folder, &[&config]).unwrap_err().to_string();
        assert!(e.contains("holds an input") && e.contains("photos.json"), "{e}");
    }
    // A folder beside the input, or one not made yet, is fine.
    grin_output::check(&dir.path().join("elsewhere"), &[&config]).unwrap();
    std::fs::create_dir(dir.path().join("beside")).unwrap();
    grin_output::check(&dir.path().join("beside"), &[&config]).unwrap();
}

#[test]
fn a_symbolic_link_is_written_through_and_survives() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.csv");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    write_file(&link, &[], b"new").unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"new");
}

#[test]
fn devices_are_written_through_never_replaced() {
    // Through links in a scratch folder: a wrong implementation replaces
    // the link, never the system's device node.
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    write_file(&null, &[], b"discarded").unwrap();
    assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_symlink());
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let full = dir.path().join("full");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    let e = write_file(&full, &[], &[0u8; 100_000]).unwrap_err().to_string();
    assert!(e.contains("full: cannot write") && e.contains("No space left"), "{e}");
    assert!(std::fs::symlink_metadata(&full).unwrap().file_type().is_symlink());
}

fn mkfifo(path: &Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn a_fifo_is_written_through_to_its_reader_and_refused_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let e = write_file(&fifo, &[], b"x").unwrap_err().to_string();
    assert!(e.contains("is a FIFO with no reader"), "{e}");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            std::fs::File::open(fifo).unwrap().read_to_end(&mut got).unwrap();
            got
        })
    };
    // The reader opens the FIFO on its own thread; write once it is there.
    let mut result = write_file(&fifo, &[], b"detections");
    for _ in 0..200 {
        if result.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        result = write_file(&fifo, &[], b"detections");
    }
    result.unwrap();
    assert_eq!(reader.join().unwrap(), b"detections");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = write_file(dir.path(), &[], b"x").unwrap_err().to_string();
    assert!(e.contains("is a folder"), "{e}");
}

/// Round 10 of issue 90: a name that cannot be a file was found only when
/// written ("cannot create a temporary file", after the work), and a link to
/// nothing was replaced by the file. Each is refused by `check_file` before
/// the work, and by the write, which leaves the link as it was.
#[test]
fn a_name_that_cannot_be_a_file_is_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let slash = std::path::PathBuf::from(format!("{}/", at("o.png").display()));
    let link = at("link.png");
    std::os::unix::fs::symlink(at("nowhere/x.png"), &link).unwrap();
    std::fs::write(at("file"), b"x").unwrap();
    // Round 12: a socket was found only when written, after the work.
    let _socket = std::os::unix::net::UnixListener::bind(at("sock.png")).unwrap();
    for (path, why) in [
        (at("sock.png"), "is a socket: not a file grin can write"),
        (slash, "ends in /, so names a folder: name a file"),
        (at("missing/o.png"), "missing does not exist (grin makes no folder for a file it writes)"),
        (at("file/o.png"), "file is not a folder"),
        (link.clone(), "nowhere/x.png, which does not exist: remove the link or name another file"),
    ] {
        let e = grin_output::check_file(&path, &[]).unwrap_err().to_string();
        assert!(e.contains(why), "{}: {e}", path.display());
        assert_eq!(write_file(&path, &[], b"x").unwrap_err().to_string(), e);
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    // Round 11: a model behind a link named `.png` became a PNG.
    std::fs::write(at("m.grin"), b"model").unwrap();
    std::os::unix::fs::symlink(at("m.grin"), at("drawn.png")).unwrap();
    let e = write_file(&at("drawn.png"), &[], b"png").unwrap_err().to_string();
    assert!(e.contains("m.grin, another kind of file"), "{e}");
    assert_eq!(std::fs::read(at("m.grin")).unwrap(), b"model");
    assert!(!at("missing").exists() && !at("o.png").exists());
    grin_output::check_file(&at("new.png"), &[]).unwrap();
    // A folder that takes no new file, found by making one (round 17).
    if std::path::Path::new("/proc/self").exists() {
        let e = grin_output::check_file(std::path::Path::new("/proc/o.png"), &[]).unwrap_err().to_string();
        assert!(e.starts_with("/proc/o.png: cannot write in its folder /proc: "), "{e}");
    }
    assert!(leftovers(dir.path()).is_empty(), "the trial file is gone: {:?}", leftovers(dir.path()));
}

/// Issue 90: SIGTERM during `grin export` or `grin model-set` left a
/// full-size temporary file. One whose writer is gone (its lock free) is
/// removed by the next write into the folder; one a live writer holds is not.
#[test]
fn a_temporary_file_left_by_a_killed_writer_is_removed_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let stale = dir.path().join(".model.grin.grin-Ab12Cd.tmp");
    std::fs::write(&stale, vec![7u8; 4096]).unwrap();
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(hour_ago).unwrap();
    // A live writer's: locked, so kept however old it looks.
    let live = dir.path().join(".out.onnx.grin-Ef34Gh.tmp");
    std::fs::write(&live, b"half").unwrap();
    let live_file = std::fs::File::options().write(true).open(&live).unwrap();
    live_file.set_modified(hour_ago).unwrap();
    live_file.lock().unwrap();
    // Someone else's file that looks a little like one: never touched.
    let other = dir.path().join("notes.tmp");
    std::fs::write(&other, b"mine").unwrap();
    write_file(&dir.path().join("export.onnx"), &[], b"graph").unwrap();
    assert!(!stale.exists(), "the killed writer's temporary file is removed");
    assert!(live.exists() && other.exists());
    assert_eq!(std::fs::read(dir.path().join("export.onnx")).unwrap(), b"graph");
}

/// Issue 90, cause G: two `grin model-set` runs on one file lost one of
/// their two changes, and `grin calibrate` wrote its old model over one
/// replaced during its run.
#[test]
fn a_held_file_is_locked_and_never_written_back_over_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.grin");
    std::fs::write(&path, b"version 1").unwrap();
    // A second holder is refused while the first holds it.
    let held = grin_output::hold(&path).unwrap();
    let e = grin_output::hold(&path).unwrap_err().to_string();
    assert!(e.contains("another grin process is rewriting it"), "{e}");
    held.write_back(b"version 2").unwrap();
    drop(held);
    assert_eq!(std::fs::read(&path).unwrap(), b"version 2");
    // Replaced (a new file renamed over it) while held: refused, newer kept.
    let held = grin_output::hold(&path).unwrap();
    std::fs::write(dir.path().join("new"), b"version 3").unwrap();
    std::fs::rename(dir.path().join("new"), &path).unwrap();
    let e = held.write_back(b"version 2 again").unwrap_err().to_string();
    assert!(e.contains("changed since grin read it") && e.contains("the newer file is kept"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"version 3");
    drop(held);
    // Written in place, same size, same second (`cp` over it): the hash catches it.
    let held = grin_output::hold(&path).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, b"version 4").unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
    assert!(held.write_back(b"stale").unwrap_err().to_string().contains("changed since grin read it"));
    assert_eq!(std::fs::read(&path).unwrap(), b"version 4");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

/// Issue 90, round 15: links in an input folder reach folders and files
/// elsewhere, which the folder stands for; a link in an output folder to
/// an input has a report written through it; a link named as an input
/// lies where its name is, and a write there replaces it.
#[test]
fn what_links_reach_is_an_input_too() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    for folder in ["root", "elsewhere/photos", "single", "out", "named"] {
        std::fs::create_dir_all(at(folder)).unwrap();
    }
    std::fs::write(at("elsewhere/photos/a.png"), b"pixels").unwrap();
    std::fs::write(at("single/b.png"), b"pixels").unwrap();
    std::os::unix::fs::symlink(at("elsewhere/photos"), at("root/images")).unwrap();
    std::os::unix::fs::symlink(at("single/b.png"), at("root/b.png")).unwrap();
    let root = at("root");
    // A file, new or old, in a folder a link in the input folder reaches.
    for out in [at("elsewhere/photos/a.png"), at("root/images/new.png")] {
        let e = write_file(&out, &[&root], b"sheet").unwrap_err().to_string();
        assert!(e.contains("is inside an input folder") && e.contains("images"), "{e}");
    }
    // An output folder that holds what a link in the input folder reaches.
    for folder in [at("elsewhere"), at("single")] {
        let e = grin_output::check(&folder, &[&root]).unwrap_err().to_string();
        assert!(e.contains("holds an input"), "{e}");
    }
    // An output folder holding a link to an input photo.
    std::os::unix::fs::symlink(at("single/b.png"), at("out/pr_curve.svg")).unwrap();
    let photo = at("single/b.png");
    let e = grin_output::check(&at("out"), &[&photo]).unwrap_err().to_string();
    assert!(e.contains("holds a link") && e.contains("pr_curve.svg") && e.contains("b.png"), "{e}");
    // An input named through a link: the folder its name lies in holds it.
    std::os::unix::fs::symlink(at("single/b.png"), at("named/shard-00000.bin")).unwrap();
    let named = at("out/../named/shard-00000.bin");
    let e = grin_output::check(&at("named"), &[&named]).unwrap_err().to_string();
    assert!(e.contains("holds an input") && e.contains("shard-00000.bin"), "{e}");
    assert_eq!(std::fs::read(at("elsewhere/photos/a.png")).unwrap(), b"pixels");
    assert_eq!(std::fs::read(at("single/b.png")).unwrap(), b"pixels");
    // Round 16: a link to a folder above (`/`, `..`) or into /proc stands
    // for nothing: it refused every output anywhere, after a long walk.
    std::os::unix::fs::symlink("/", at("root/top")).unwrap();
    std::os::unix::fs::symlink("..", at("root/up")).unwrap();
    std::os::unix::fs::symlink("/proc", at("root/kernel")).unwrap();
    grin_output::check(&at("beside.png"), &[&root]).unwrap();
    grin_output::check(&at("newfolder"), &[&root]).unwrap();
}

/// A bind mount, undone when dropped.
struct Bound(std::path::PathBuf);

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 90, round 18: a bind mount shows an input folder under a second
/// path that no link resolves; `features preview --out` replaced a photo
/// through it. Folders are compared by identity too.
#[test]
fn a_second_path_to_an_input_folder_is_that_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (data, alias) = (dir.path().join("data"), dir.path().join("alias"));
    std::fs::create_dir_all(data.join("images")).unwrap();
    std::fs::create_dir_all(&alias).unwrap();
    std::fs::write(data.join("images/p.png"), b"pixels").unwrap();
    let mounted = std::process::Command::new("mount").arg("--bind").arg(&data).arg(&alias).output();
    if !mounted.as_ref().is_ok_and(|o| o.status.success()) {
        // Not a skip of the rule: without the right to mount, no bind mount
        // can show the folder twice either.
        eprintln!("SKIPPED: `mount --bind` is not permitted here: {mounted:?}");
        return;
    }
    let _bound = Bound(alias.clone());
    let photo = data.join("images/p.png");
    for out in [alias.join("images/p.png"), alias.join("images/new.png"), alias.join("run")] {
        let e = grin_output::check(&out, &[&data]).unwrap_err().to_string();
        assert!(e.contains("is inside an input folder"), "{}: {e}", out.display());
        assert_eq!(write_file(&out, &[&data], b"sheet").unwrap_err().to_string(), e);
    }
    let e = write_file(&alias.join("images/p.png"), &[&photo], b"sheet").unwrap_err().to_string();
    assert!(e.contains("input"), "{e}");
    // The second path as an output folder holds the inputs.
    let e = grin_output::check(&alias.join("images"), &[&photo]).unwrap_err().to_string();
    assert!(e.contains("holds an input"), "{e}");
    assert_eq!(std::fs::read(&photo).unwrap(), b"pixels");
    grin_output::check(&dir.path().join("beside.png"), &[&data]).unwrap();
    // Round 22: a bind mount of a folder *under* an input folder reaches
    // no input folder's own identity; every folder under one is known too.
    let inner = dir.path().join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let mounted = std::process::Command::new("mount").arg("--bind").arg(data.join("images")).arg(&inner).status();
    assert!(mounted.unwrap().success());
    let _inner = Bound(inner.clone());
    for out in [inner.join("p.png"), inner.join("new.png"), inner.join("sub/report.json")] {
        let e = grin_output::check(&out, &[&data]).unwrap_err().to_string();
        assert!(e.contains("is inside an input folder"), "{}: {e}", out.display());
    }
    assert_eq!(std::fs::read(&photo).unwrap(), b"pixels");
}

/// Issue 90, rounds 19 and 20: two `grin mine` (or `grin eval`) into one
/// folder at once each replaced the other's files. A held folder refuses a
/// second holder; one it made and left empty goes when it is dropped.
#[test]
fn a_held_folder_refuses_a_second_holder_and_leaves_no_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    let held = grin_output::hold_folder(&made).unwrap();
    let e = grin_output::hold_folder(&made).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "made: another grin command is writing into this folder: wait for it to end, or name another output folder"
        ),
        "{e}"
    );
    drop(held);
    assert!(!made.exists(), "made, left empty, removed");
    let held = grin_output::hold_folder(&made).unwrap();
    std::fs::write(made.join("report.json"), b"{}").unwrap();
    drop(held);
    assert!(made.join("report.json").exists(), "a folder with files stays");
    // A folder that was there stays, empty or not.
    let there = dir.path().join("there");
    std::fs::create_dir(&there).unwrap();
    drop(grin_output::hold_folder(&there).unwrap());
    assert!(there.is_dir());
}
