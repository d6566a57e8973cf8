use super::load_config as load;

fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn error(path: &std::path::Path, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    format!("{:#}", load(path, &sets).unwrap_err())
}

#[test]
fn a_number_picks_an_entry_of_an_array_of_tables() {
    let text = "name = \"x\"\n[features.source]\nkind = \"mix\"\nweights = [0.5, 0.5]\n\
                [[features.source.parts]]\nkind = \"synthetic\"\n[[features.source.parts]]\nkind = \"synthetic\"\n";
    let (_dir, path) = write(text);
    let sets = vec!["features.source.parts.1.max_faces=2".to_string()];
    let loaded = load(&path, &sets).unwrap();
    let parts = toml::to_string(&loaded.config.features.source).unwrap();
    assert!(parts.contains("max_faces = 2"), "{parts}");
    for bad in ["features.source.parts.2.max_faces=2", "features.source.parts.x.max_faces=2"] {
        let e = error(&path, &[bad]);
        assert!(e.contains("`parts` holds 2 entries"), "{bad}: {e}");
    }
    assert!(error(&path, &["features.source.kind.x=2"]).contains("`kind` is not a table"));
}

/// Issue 90, round 17: a misspelt key in a mix's part named no part.
#[test]
fn a_bad_key_in_a_mix_part_names_that_part() {
    let part = "[[features.source.parts]]\nkind = \"synthetic\"\n";
    let text =
        format!("name = \"x\"\n[features.source]\nkind = \"mix\"\nweights = [0.5, 0.5]\n{part}{part}max_facez = 3\n");
    let (_dir, path) = write(&text);
    let e = error(&path, &[]);
    assert!(e.contains("key `features.source.parts[1]`: unknown field `max_facez`"), "{e}");
    // A nested mix names the deepest part, and a --set is blamed by its key.
    let nested = format!(
        "name = \"x\"\n[features.source]\nkind = \"mix\"\nweights = [0.5, 0.5]\n{part}\
         [[features.source.parts]]\nkind = \"mix\"\nweights = [1.0]\n[[features.source.parts.parts]]\n\
         kind = \"synthetic\"\n"
    );
    let (_dir, path) = write(&nested);
    let e = error(&path, &["features.source.parts.1.parts.0.max_faces=\"two\""]);
    assert!(e.contains("key `features.source.parts[1].parts[0]`: invalid type: string \"two\""), "{e}");
}

/// Issue 90, round 18: a source's kind switched by --set was refused naming
/// a key of the old kind that the user never typed, and not why.
#[test]
fn a_kind_switched_by_set_says_the_other_keys_stay() {
    let (_dir, path) = write("name = \"x\"\n[features.source]\nkind = \"synthetic\"\nhard_negatives = 1.0\n");
    for set in ["features.source.kind=crops", "features.source={kind=\"crops\", root=\"/x\"}"] {
        let e = error(&path, &[set]);
        assert!(e.contains("`hard_negatives`") && e.ends_with("a source's kind is switched in the file"), "{e}");
    }
}

/// Issue 90, round 21: an array where a table belongs was read by position,
/// the table's other keys reset to their defaults without a word.
#[test]
fn an_array_for_a_table_is_refused_by_key() {
    let (_dir, path) = write("name = \"x\"\n[train]\nsteps = 3000\n[train.loss]\nsmile_weight = 5.0\n");
    for (set, key) in
        [("train=[]", "train"), ("train.loss=[0.5]", "train.loss"), ("model.second_look=[0.5]", "model.second_look")]
    {
        let e = error(&path, &[set]);
        assert!(e.contains(&format!("key `{key}`: is a table of keys")), "{set}: {e}");
    }
    let (_dir, path) = write("name = \"x\"\n[train]\nloss = [0.5]\n");
    assert!(error(&path, &[]).contains("key `train.loss`: is a table of keys"));
}

/// Issue 90, round 15: a duplicate key was blamed on the line before it,
/// and not named.
#[test]
fn a_toml_error_names_its_own_line_and_the_key() {
    for (text, want) in [
        ("name = \"x\"\n[train]\nsteps = 5\nsteps = 6\n", "c.toml:4: duplicate key (`steps`)"),
        ("name = \"x\"\n[train]\nsteps = 5\n\nsteps = 6\n", "c.toml:5: duplicate key (`steps`)"),
    ] {
        let (_dir, path) = write(text);
        let e = error(&path, &[]);
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn unknown_key_is_named_with_its_file() {
    let (_dir, path) = write("[train]\nlrr = 0.1\n");
    let e = error(&path, &[]);
    assert!(e.contains("c.toml") && e.contains("train") && e.contains("`lrr`"), "{e}");
    let (_dir, path) = write("name = \"x\"\n");
    assert!(error(&path, &["model.widht_mult=2"]).contains("`widht_mult`"));
}

#[test]
fn bad_values_name_the_dotted_key() {
    let (_dir, path) = write("[features]\nwidth = -5\n");
    let e = error(&path, &[]);
    assert!(e.contains("features.width") && !e.contains('\n'), "{e}");
    let (_dir, path) = write("name = \"x\"\n");
    assert!(error(&path, &["train.lr=-1"]).contains("train.lr"));
    assert!(error(&path, &["features.height=8"]).contains("features.height"));
}

#[test]
fn validation_photos_on_a_source_without_photos_are_refused_naming_the_key() {
    let (_dir, path) = write("name = \"x\"\n");
    let e = error(&path, &["train.val_photos=5"]);
    assert!(e.contains("key `train.val_photos`: 5 needs real photos with faces") && !e.contains('\n'), "{e}");
    let text = "name = \"x\"\n[features.source]\nkind = \"caltech\"\nroot = \"w\"\n[train]\nval_photos = 5\n";
    let (_dir, path) = write(text);
    load(&path, &[]).unwrap();
}

/// A config with every table and every source kind (a mix of all of them).
const EVERY_KEY: &str = r#"
name = "all"
[features]
width = 64
height = 64
[features.balance]
smiling = 0.4
non_smiling = 0.4
face_free = 0.2
[features.source]
kind = "mix"
weights = [1.0, 1.0, 1.0, 1.0]
[[features.source.parts]]
kind = "synthetic"
[[features.source.parts]]
kind = "crops"
root = "c"
[[features.source.parts]]
kind = "caltech"
root = "w"
[[features.source.parts]]
kind = "celeba_aligned"
images = "i"
attr = "a"
[train]
run_size = [128, 96]
ema = 0.999
"#;

/// Every numeric leaf of `value` with its dotted path (array elements
/// as `[i]`), resolved with defaults filled in.
fn numeric_leaves(value: &toml::Value, path: String, out: &mut Vec<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                numeric_leaves(v, p, out);
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                numeric_leaves(v, format!("{path}[{i}]"), out);
            }
        }
        toml::Value::Integer(_) | toml::Value::Float(_) => out.push(path),
        _ => {}
    }
}

/// The value at a dotted path from [`numeric_leaves`].
fn at<'a>(value: &'a mut toml::Value, path: &str) -> &'a mut toml::Value {
    path.split('.').fold(value, |node, part| match part.split_once('[') {
        Some((key, i)) => &mut node[key][i.trim_end_matches(']').parse::<usize>().unwrap()],
        None => &mut node[part],
    })
}

/// Every numeric key, wherever it sits (mix parts and arrays included),
/// refuses NaN, the infinities and -1 (floats) or 2^63 - 1 (integers)
/// with one line naming it: nothing out of range reaches a run, a store
/// or a model file.
#[test]
fn every_numeric_key_has_a_range() {
    let (_dir, path) = write(EVERY_KEY);
    let resolved = toml::Value::try_from(load(&path, &[]).unwrap().config).unwrap();
    let mut keys = Vec::new();
    numeric_leaves(&resolved, String::new(), &mut keys);
    assert!(keys.len() > 80, "{keys:?}");
    for key in keys.iter().filter(|k| *k != "features.seed") {
        // Any u64 is a seed; every other key has a range.
        let leaf = key.rsplit('.').next().unwrap().split('[').next().unwrap();
        let bad = match at(&mut resolved.clone(), key) {
            toml::Value::Integer(_) => vec![toml::Value::Integer(i64::MAX)],
            _ => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0].map(toml::Value::Float).to_vec(),
        };
        for with in bad {
            let mut edited = resolved.clone();
            *at(&mut edited, key) = with.clone();
            let (_d, p) = write(&toml::to_string(&edited).unwrap());
            let e = match load(&p, &[]) {
                Ok(_) => panic!("{key} = {with} was accepted"),
                Err(e) => format!("{e:#}"),
            };
            // A value of the wrong type inside a source is named by its
            // table only (a mix's part, `features.source.parts[2]`): serde's
            // internally tagged enums (`kind`) buffer the table and lose the
            // path. Ranges name the key.
            let table = e.split("key `").nth(1).and_then(|k| k.split('`').next()).unwrap_or("?");
            let named = e.contains(leaf)
                || (key.starts_with("features.source") && key.starts_with(table) && e.contains("invalid value"));
            assert!(named && e.contains("c.toml") && !e.contains('\n'), "{key} = {with}: {e}");
        }
    }
}

#[test]
fn missing_file_is_named() {
    let e = error(std::path::Path::new("/no/such/grin.toml"), &[]);
    assert!(e.contains("/no/such/grin.toml") && e.contains("cannot read"), "{e}");
}

#[test]
fn overrides_apply() {
    let (_dir, path) = write("name = \"x\"\n[train]\nlr = 0.1\n");
    let c = load(&path, &["train.lr=0.5".into(), "train.mode=in-vram".into()]).unwrap().config;
    assert_eq!(c.train.lr, 0.5);
    assert_eq!(c.train.mode, crate::Mode::InVram);
}

/// Issue 90: a 900 KB run name was accepted and failed at mkdir with a
/// 900 KB error line. It is bounded by key, and the error line stays short.
#[test]
fn a_run_name_past_a_folder_names_bound_is_refused_by_key() {
    let (_dir, path) = write("name = \"x\"\n");
    let long = format!("name={:?}", "n".repeat(900_000));
    let e = error(&path, &[&long]);
    assert!(
        e.contains("key `name`") && e.contains("900000 bytes") && e.contains("at most 255"),
        "{}",
        &e[..200.min(e.len())]
    );
    assert!(e.len() < 400, "one short line: {} bytes", e.len());
    assert!(load(&path, &[format!("name={:?}", "n".repeat(255))]).is_ok());
    // Round 9: a value the problem quotes (a 120 KB string for a number).
    let nested = format!("train.lr={}{}", "[".repeat(60_000), "]".repeat(60_000));
    let e = error(&path, &[&nested]);
    assert!(e.contains("key `train.lr`") && e.len() < 600, "one short line: {} bytes", e.len());
}

/// `model.level_thresholds` records what `grin model-set` folded into a
/// trained model's weights: a config setting it would train with a record
/// of shifts the weights do not hold.
#[test]
fn a_config_cannot_set_the_folded_level_thresholds_or_box_scale() {
    for (key, value) in [("level_thresholds", "[0.5, 0.4, 0.3]"), ("box_scale", "[1.1, 2.0, 1.1, 1.2]")] {
        let (_dir, path) = write(&format!("name = \"x\"\n[model]\n{key} = {value}\n"));
        let e = error(&path, &[]);
        assert!(e.contains(&format!("key `model.{key}`")) && e.contains("a config cannot set it"), "{e}");
    }
}

/// Issue 90, round 10: an inline table replaced the file's table (its other
/// keys reset to the defaults), and a number too large for TOML was read as
/// a string ("invalid type: string").
#[test]
fn a_table_set_merges_and_a_number_too_large_is_named() {
    let (_dir, path) = write("name = \"x\"\n[model.second_look]\nbelow = 0.5\ncontext = 2.0\nside = 96\n");
    let c = load(&path, &["model.second_look={below=0.2}".into()]).unwrap().config;
    let look = c.model.second_look;
    assert_eq!((look.below, look.context, look.side), (0.2, 2.0, 96), "only `below` changes");
    let e = error(&path, &["train.steps=18446744073709551616"]);
    assert!(e.contains("--set train.steps=18446744073709551616") && e.contains("not a number TOML holds"), "{e}");
    // Round 11: the lines after a newline were dropped without a word.
    let e = error(&path, &["train.steps=5\nname=\"x\""]);
    assert!(e.contains("holds a line break: give each key its own --set"), "{e}");
    // A name that starts with digits is still a name.
    assert_eq!(load(&path, &["name=2024-12".into()]).unwrap().config.name, "2024-12");
}
