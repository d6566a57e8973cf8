//! The real `grin precompute`, killed with SIGKILL mid-way and rerun, ends
//! with the same shards as an uninterrupted run; shard ranges written by
//! concurrent processes merge into that same dataset; `grin verify` names a
//! damaged shard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const GRIN: &str = env!("CARGO_BIN_EXE_grin");

/// Default 320x240 records (77,120 bytes) in 1 MiB shards: 13 records a
/// shard, so a run of a few hundred samples spans dozens of shards.
fn config(dir: &Path) -> PathBuf {
    let path = dir.join("store.toml");
    std::fs::write(
        &path,
        "name = \"store-resume\"\n[features]\nseed = 11\nworkers = 2\n[features.source]\nkind = \"synthetic\"\n",
    )
    .unwrap();
    path
}

fn precompute(config: &Path, out: &Path, samples: u64, extra: &[&str]) -> Command {
    let mut cmd = Command::new(GRIN);
    cmd.arg("precompute")
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .args(["--samples", &samples.to_string(), "--shard-size", "1M"])
        .args(extra);
    cmd
}

fn ok(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run grin");
    assert!(
        out.status.success(),
        "{:?} failed: {}{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn shards(dir: &Path) -> Vec<(String, String)> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    manifest["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["file"].as_str().unwrap().to_string(), s["xxh3"].as_str().unwrap().to_string()))
        .collect()
}

fn finished_shards(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.starts_with("shard-") && name.ends_with(".json")
                })
                .count()
        })
        .unwrap_or(0)
}

const SAMPLES: u64 = 600;

#[test]
fn kill_9_then_rerun_gives_the_checksums_of_an_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path());
    let reference = tmp.path().join("reference");
    ok(precompute(&config, &reference, SAMPLES, &[]));
    let expected = shards(&reference);
    assert_eq!(expected.len(), 47);
    // `store info` names the classes as every report does (round 17: `NonSmiling`).
    let info = ok({
        let mut c = Command::new(GRIN);
        c.args(["store", "info"]).arg(&reference);
        c
    });
    let info = String::from_utf8_lossy(&info.stdout);
    for class in ["smiling", "non-smiling", "face-free"] {
        assert!(info.contains(&format!("\n  {class}: ")), "{class}: {info}");
    }

    let dir = tmp.path().join("killed");
    let mut child =
        precompute(&config, &dir, SAMPLES, &[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while finished_shards(&dir) < 5 {
        assert!(child.try_wait().unwrap().is_none(), "precompute ended before it could be killed");
        assert!(start.elapsed() < Duration::from_secs(300), "no shard finished in 5 minutes");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL on Unix: no cleanup runs.
    child.wait().unwrap();
    let survived = finished_shards(&dir);
    assert!(!dir.join("manifest.json").exists(), "the kill landed after the run finished");
    assert!(survived < expected.len(), "killed mid-way: {survived} shards finished");

    let out = ok(precompute(&config, &dir, SAMPLES, &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("reusing {survived} finished shards")), "{stderr}");
    assert_eq!(shards(&dir), expected);
    for (file, _) in &expected {
        assert_eq!(std::fs::read(dir.join(file)).unwrap(), std::fs::read(reference.join(file)).unwrap(), "{file}");
    }
    assert!(!std::fs::read_dir(&dir).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".tmp")));
    ok({
        let mut c = Command::new(GRIN);
        c.arg("verify").arg(&dir);
        c
    });
}

/// Issue 90, round 25: SIGTERM ended a precompute by the signal (143)
/// without a word. It quits with 130 saying the finished shards are kept,
/// and the same command goes on from them.
#[test]
fn an_interrupted_precompute_says_what_it_keeps_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path());
    let dir = tmp.path().join("interrupted");
    let child = precompute(&config, &dir, SAMPLES, &[]).output_async();
    let start = Instant::now();
    while finished_shards(&dir) < 3 {
        assert!(start.elapsed() < Duration::from_secs(300), "no shard finished in 5 minutes");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!dir.join("manifest.json").exists(), "the interrupt landed after the run finished");
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupt: precompute quits; the shards it finished in"), "{stderr}");
    let out = ok(precompute(&config, &dir, SAMPLES, &[]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reusing"));
}

#[test]
fn concurrent_shard_ranges_merge_into_the_same_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path());
    let reference = tmp.path().join("reference");
    ok(precompute(&config, &reference, 100, &[]));

    let plan = ok(precompute(&config, &tmp.path().join("unused"), 100, &["--plan"]));
    assert!(String::from_utf8_lossy(&plan.stdout).contains("shards: 8"));

    // Two "array tasks" at once, as a scheduler would start them.
    let dir = tmp.path().join("parts");
    let a = precompute(&config, &dir, 100, &["--shards", "0..3"]).output_async();
    let b = precompute(&config, &dir, 100, &["--shards", "3..8"]).output_async();
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!dir.join("manifest.json").exists());
    let mut merge = Command::new(GRIN);
    merge.arg("precompute").arg("--merge").arg(&dir);
    let out = ok(merge);
    assert!(String::from_utf8_lossy(&out.stdout).contains("merged 8 shards (100 samples)"));
    assert_eq!(shards(&dir), shards(&reference));
}

#[test]
fn verify_names_a_damaged_shard_and_exits_nonzero() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path());
    let dir = tmp.path().join("data");
    ok(precompute(&config, &dir, 40, &[]));
    let shard = dir.join("shard-00001.bin");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[5000] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let out = Command::new(GRIN).arg("verify").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("BAD shard-00001.bin (records 13..26): checksum"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: ") && stderr.contains("1 problem(s) in 1 shard(s)"), "{stderr}");

    // A stale config is refused by precompute into the same folder, naming the key.
    let out = precompute(&config, &dir, 40, &["--set", "features.augment.flip=0.0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("features.augment.flip"), "{stderr}");
}

trait OutputAsync {
    fn output_async(self) -> std::process::Child;
}

impl OutputAsync for Command {
    fn output_async(mut self) -> std::process::Child {
        self.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn grin")
    }
}
