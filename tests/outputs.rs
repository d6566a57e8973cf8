//! The rule that no command writes over its own inputs, enforced for every
//! output option `grin` has, found in its help rather than listed here.
//!
//! Every option that names a file a command writes has the value name
//! `OUT`, and every option naming a folder it writes into `OUT_DIR`
//! (`src/cmd/mod.rs`). This test walks `grin --help` down to every command,
//! and runs each output option aimed at one of that command's inputs: the
//! config file (or its model, store or run) for `OUT`, a folder it reads
//! photos from for `OUT_DIR`. Each must be refused, naming the input, with
//! the input unchanged (issue 90: `grin bench step --json` replaced its
//! config, `grin simulate --out` a run's model). Each option of a command
//! reading the config is aimed as well at a photo its annotations name
//! outside the photo folder (`../`), or a folder holding it where a run
//! named as the config is lands on it (round 14: a bench's JSON, a
//! dataset, a run and a report replaced one).
//!
//! An option taking a value under any other name must be one this file
//! knows as no output: a new output option that is not marked fails here
//! until it is, and a new command with an output option fails until it has
//! a recipe (how to run it) below.

use crate::common;

use common::GRIN;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Value names of options that name no output: inputs (`CONFIG`, `MODEL`,
/// `DIR`, ...) and plain values. A new name must be added here, or marked
/// `OUT` / `OUT_DIR` where it is declared, for this test to pass.
const NOT_OUTPUTS: &[&str] = &[
    "A..B",
    "BACKEND",
    "BATCH",
    "BATCHES",
    "BETA",
    "COLS",
    "CONFIG",
    "COUNT",
    "DEVICES",
    "DIR",
    "FORMAT",
    "FROM_RUN",
    "KEY",
    "KEY=VALUE",
    "L,T,R,B",
    "LOADERS",
    "LOAD_JITTER_MS",
    "LOAD_MS",
    "MODE",
    "MODEL",
    "MODES",
    "NAME",
    "OPTIMIZER",
    "PER_PHOTO",
    "PHOTOS",
    "PX",
    "QUEUE",
    "REPEATS",
    "RUN",
    "SAMPLES",
    "SCORE",
    "SECONDS",
    "SEED",
    "SHARD_SIZE",
    "SHARE",
    "SPLIT",
    "STEPS",
    "STEP_MS",
    "STORE",
    "T8,T16,T32",
    "THRESHOLD",
    "TIMELINE_SECONDS",
    "WARMUP",
    "WORKERS",
    "WxH",
];

/// Option names that say "this writes": one of them under a value name
/// other than `OUT` / `OUT_DIR` is a mistake, whatever the name.
const WRITING_WORDS: &[&str] = &["out", "json", "draw", "write", "save"];

fn help(command: &[String]) -> String {
    let out = Command::new(GRIN).args(command).arg("--help").output().unwrap();
    assert!(out.status.success(), "grin {command:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    let Some(start) = help.find("\nCommands:\n") else { return Vec::new() };
    help[start + 11..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect()
}

/// Each option of a help text that takes a value, with its value name.
fn valued_options(help: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in help.lines() {
        let line = line.trim_start();
        // `-q, --quiet`: the long name after the short one.
        let short = line.len() > 4 && line.starts_with('-') && !line.starts_with("--") && &line[2..4] == ", ";
        let line = if short { &line[4..] } else { line };
        let Some(rest) = line.strip_prefix("--") else { continue };
        let Some((name, after)) = rest.split_once(' ') else { continue };
        let after = after.trim_start_matches('[');
        if let Some(value) = after.strip_prefix('<').and_then(|v| v.split_once('>')).map(|(v, _)| v) {
            found.push((name.to_string(), value.to_string()));
        }
    }
    found
}

/// Every leaf command (`["bench", "step"]`, ...) with its valued options.
fn every_command() -> BTreeMap<Vec<String>, Vec<(String, String)>> {
    let mut commands = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(command) = todo.pop() {
        let text = help(&command);
        let subs = subcommands(&text);
        for sub in &subs {
            todo.push([command.clone(), vec![sub.clone()]].concat());
        }
        if subs.is_empty() {
            commands.insert(command, valued_options(&text));
        }
    }
    commands
}

/// What a command reads, made once: a config whose source is a folder of
/// photos, a model, a run folder, a dataset.
struct Inputs {
    dir: tempfile::TempDir,
    config: PathBuf,
    photos: PathBuf,
    /// A photo the manifest names as `../elsewhere/tiny/b.png`: `tiny` is
    /// the config's name, so a run in `elsewhere` has it in its folder.
    elsewhere: PathBuf,
    model: PathBuf,
    run: PathBuf,
    store: PathBuf,
}

fn inputs() -> Inputs {
    let dir = tempfile::tempdir().unwrap();
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let photo = image::GrayImage::from_fn(96, 64, |x, y| image::Luma([(x * 3 + y * 5) as u8]));
    photo.save(photos.join("a.png")).unwrap();
    let elsewhere = dir.path().join("elsewhere/tiny/b.png");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    photo.save(&elsewhere).unwrap();
    let manifest = photos.join("m.jsonl");
    let lines = "{\"image\": \"a.png\", \"boxes\": [[30, 20, 70, 60]]}\n\
                 {\"image\": \"../elsewhere/tiny/b.png\", \"boxes\": [[30, 20, 70, 60]]}\n";
    std::fs::write(&manifest, lines).unwrap();
    let config = dir.path().join("tiny.toml");
    let text = format!(
        "name = \"tiny\"\n[features]\nwidth = 64\nheight = 64\n[features.source]\nkind = \"jsonl\"\nmanifest = \
         {:?}\n[model]\nwidth_mult = 0.5\n[train]\nsteps = 2\nbatch_size = 2\n",
        manifest.display().to_string()
    );
    std::fs::write(&config, &text).unwrap();
    let model = dir.path().join("m.grin");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin"), &model).unwrap();
    let run = dir.path().join("runs/r");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(&model, run.join("model.grin")).unwrap();
    std::fs::write(run.join("config.toml"), &text).unwrap();
    let figures = grin_terms::summary::RunFigures::example(grin_terms::Mode::OnTheFly);
    std::fs::write(run.join("summary.json"), serde_json::to_string(&figures).unwrap()).unwrap();
    // A synthetic config's dataset: 8 records.
    let store = dir.path().join("store");
    let synthetic = common::tiny_config(dir.path(), "synthetic.toml", "steps = 2\n");
    let out = Command::new(GRIN)
        .args(["precompute", "--samples", "8", "--config"])
        .arg(&synthetic)
        .arg("--out")
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Inputs { dir, config, photos, elsewhere, model, run, store }
}

/// How to run a command, and which of its inputs an output is aimed at:
/// `file` for an `OUT` option, `folder` for an `OUT_DIR` one.
struct Recipe {
    args: Vec<String>,
    file: PathBuf,
    folder: PathBuf,
    /// Whether it reads the config, and so the photo named elsewhere.
    reads_config: bool,
}

fn recipe(command: &[String], i: &Inputs) -> Option<Recipe> {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let config = |more: &[&str]| -> Vec<String> {
        more.iter().map(|a| a.to_string()).chain(["--config".into(), s(&i.config)]).collect()
    };
    let (args, file, folder) = match command.join(" ").as_str() {
        "train" => (config(&["--backend", "cpu", "--quiet", "--no-balance"]), &i.config, &i.photos),
        "eval" => (config(&["--samples", "1", "--model", &s(&i.model)]), &i.model, &i.photos),
        "mine" => (config(&["--model", &s(&i.model)]), &i.model, &i.photos),
        "precompute" => (config(&["--samples", "8"]), &i.config, &i.photos),
        "features preview" => (config(&["--count", "1"]), &i.config, &i.photos),
        "bench step" => (config(&["--backend", "cpu", "--steps", "1", "--repeats", "1"]), &i.config, &i.photos),
        "bench modes" => (config(&["--backend", "cpu", "--steps", "1"]), &i.config, &i.photos),
        "export" => (vec!["--model".into(), s(&i.model)], &i.model, &i.run),
        "simulate" => (vec!["--from-run".into(), s(&i.run)], &i.run.join("summary.json"), &i.run),
        "store bench" => (
            vec!["--dir".into(), s(&i.store), "--repeats".into(), "1".into()],
            &i.store.join("manifest.json"),
            &i.store,
        ),
        _ => return None,
    };
    let reads_config = args.contains(&s(&i.config));
    let args = command.iter().cloned().chain(args).collect();
    Some(Recipe { args, file: file.clone(), folder: folder.clone(), reads_config })
}

/// Every file under `path` (or the file itself) with its bytes.
fn contents(path: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            all.extend(contents(&entry.unwrap().path()));
        }
    } else {
        all.insert(path.to_path_buf(), std::fs::read(path).unwrap());
    }
    all
}

/// Issue 90: every output option, found in the help, aimed at an input of
/// its command, is refused and the input kept; an option not marked either
/// way fails the test.
#[test]
fn no_output_option_writes_over_its_commands_inputs() {
    let commands = every_command();
    assert!(commands.len() >= 15, "found only {:?}: is the help parsed right?", commands.keys());
    let inputs = inputs();
    // `model-set --out` may name the model: that is its rewrite in place,
    // held against a concurrent change (tests/model_set.rs).
    let in_place = [("model-set", "out")];
    let mut tried = 0;
    for (command, options) in &commands {
        for (option, value) in options {
            let is_output = value == "OUT" || value == "OUT_DIR";
            if !is_output {
                assert!(
                    NOT_OUTPUTS.contains(&value.as_str()),
                    "grin {} --{option} <{value}>: mark an output value_name = OUT or OUT_DIR (src/cmd/mod.rs), \
                     or add {value} to NOT_OUTPUTS in tests/outputs.rs",
                    command.join(" ")
                );
                assert!(
                    !WRITING_WORDS.iter().any(|w| option.contains(w)),
                    "grin {} --{option} <{value}>: an option named like an output must be marked OUT or OUT_DIR",
                    command.join(" ")
                );
                continue;
            }
            if in_place.contains(&(command.join(" ").as_str(), option.as_str())) {
                continue;
            }
            let recipe = recipe(command, &inputs).unwrap_or_else(|| {
                panic!("grin {} writes (--{option}): add a recipe to tests/outputs.rs", command.join(" "))
            });
            let target = if value == "OUT" { &recipe.file } else { &recipe.folder };
            let folder = inputs.elsewhere.parent().and_then(Path::parent).unwrap();
            let elsewhere = if value == "OUT" { &inputs.elsewhere } else { folder };
            let elsewhere = recipe.reads_config.then_some(elsewhere);
            for target in std::iter::once(target.as_path()).chain(elsewhere) {
                let before = contents(target);
                let out = Command::new(GRIN)
                    .args(&recipe.args)
                    .arg(format!("--{option}"))
                    .arg(target)
                    .current_dir(inputs.dir.path())
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                let said = format!("grin {} --{option} {}: {stderr}", command.join(" "), target.display());
                assert_eq!(out.status.code(), Some(2), "{said}");
                let named = ["is also an input", "is inside an input folder", "holds an input"];
                assert!(named.iter().any(|n| stderr.contains(n)), "{said}");
                assert!(!stderr.contains("panicked"), "{said}");
                assert_eq!(contents(target), before, "{said}: the input changed");
                tried += 1;
            }
        }
    }
    assert!(tried >= 20, "only {tried} output options tried");
}

/// Issue 90, rounds 25 and 27: standard output appended to one of the
/// command's inputs (`grin verify st >> st/manifest.json`, `grin eval --run
/// R >> R/model.grin`, `grin precompute --plan … >> photos/m.jsonl`) was
/// written into what the command read, exit 0. Each is refused, naming it,
/// with the input unchanged: a file it names, or one inside a folder it reads.
#[test]
fn standard_output_onto_any_input_is_refused() {
    let i = inputs();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let scratch = |name: &str| s(&i.dir.path().join(name));
    let config = s(&i.config);
    let cases: Vec<(Vec<String>, PathBuf)> = vec![
        (vec!["model-info".into(), "--config".into(), config.clone()], i.config.clone()),
        (vec!["features".into(), "bench".into(), "--config".into(), config.clone()], i.config.clone()),
        (vec!["precompute".into(), "--plan".into(), "--config".into(), config.clone()], i.photos.join("m.jsonl")),
        (vec!["verify".into(), s(&i.store)], i.store.join("manifest.json")),
        (vec!["store".into(), "info".into(), s(&i.store)], i.store.join("shard-00000.json")),
        (vec!["store".into(), "bench".into(), "--dir".into(), s(&i.store)], i.store.join("manifest.json")),
        (
            vec!["simulate".into(), "--from-run".into(), s(&i.run), "--out".into(), scratch("t.svg")],
            i.run.join("summary.json"),
        ),
        (vec!["eval".into(), "--run".into(), s(&i.run), "--samples".into(), "1".into()], i.run.join("model.grin")),
        (
            vec![
                "mine".into(),
                "--model".into(),
                s(&i.model),
                "--config".into(),
                config.clone(),
                "--out".into(),
                scratch("mined"),
            ],
            i.photos.join("a.png"),
        ),
        (
            vec![
                "train".into(),
                "--config".into(),
                config.clone(),
                "--runs-dir".into(),
                scratch("runs2"),
                "--no-balance".into(),
            ],
            i.config.clone(),
        ),
    ];
    for (args, target) in cases {
        let before = std::fs::read(&target).unwrap();
        let appended = std::fs::OpenOptions::new().append(true).open(&target).unwrap();
        let out = Command::new(GRIN).args(&args).stdout(appended).current_dir(i.dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = format!("grin {} >> {}: {stderr}", args.join(" "), target.display());
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(stderr.contains("is also standard output"), "{said}");
        assert_eq!(std::fs::read(&target).unwrap(), before, "{said}: the input changed");
    }
}
