//! Each rule of `grin_output`, on real files, devices and pipes.
use grin_output::{write_file, write_with};
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

#[test]
fn a_read_only_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.grin");
    std::fs::write(&path, b"keep").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = write_file(&path, &[], b"new").unwrap_err().to_string();
    assert!(e.contains("model.grin: is read-only: not replaced"), "{e}");
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
