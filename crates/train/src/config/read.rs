//! From text to a [`GrinConfig`]: a config file read within its bound,
//! `--set key=value` overrides applied to its TOML, strict keys, every
//! error one line naming the file and the line or the dotted key. Also
//! `grin model-set`'s `[model]` overrides, by the same rules.

use super::GrinConfig;
use anyhow::{bail, Context, Result};
use grin_net::ModelConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A config from its TOML `text` with `--set key=value` overrides applied,
/// deserialized with strict keys and checked ([`GrinConfig::validate`]):
/// what `grin` makes of a config file. Every error is one line naming
/// `origin` (the file) and the line or the dotted key.
pub fn parse_config(text: &str, origin: &str, sets: &[String]) -> Result<GrinConfig> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        // The line the span starts on (a span at a line's start was blamed
        // on the line before, round 15), and what it covers when short: the
        // key a "duplicate key" names.
        let Some(span) = e.span() else { return anyhow::anyhow!("{origin}: {}", e.message()) };
        let line = text[..span.start].matches('\n').count() + 1;
        let at = text.get(span).filter(|s| !s.is_empty() && s.len() <= 60 && !s.contains('\n'));
        let at = at.map(|s| format!(" (`{}`)", s.trim())).unwrap_or_default();
        anyhow::anyhow!("{origin}:{line}: {}{at}", e.message())
    })?;
    checked(&table, sets)?.map_err(|e| {
        let e = cut(&e, 240);
        // A value refused is blamed on the `--set` that brought it when the
        // file alone is accepted: the file is not what the user must fix.
        let file_alone = matches!(checked(&table, &[]), Ok(Ok(_)));
        let culprit = sets.iter().find(|set| !matches!(checked(&table, std::slice::from_ref(set)), Ok(Ok(_))));
        match (file_alone, culprit) {
            (true, Some(set)) if switches_kind(set) && e.contains("unknown field") => anyhow::anyhow!(
                "--set {} (over {origin}): {e}; a --set keeps the table's other keys from the file, so a source's \
                 kind is switched in the file",
                shown(set)
            ),
            (true, Some(set)) => anyhow::anyhow!("--set {} (over {origin}): {e}", shown(set)),
            (true, None) => anyhow::anyhow!("{origin} with its --set values: {e}"),
            (false, _) => anyhow::anyhow!("{origin}: {e}"),
        }
    })
}

/// Whether `set` gives a table a new `kind` (`a.kind=x`, or `a={kind=...}`),
/// which leaves that table's other keys, of the old kind, in place.
fn switches_kind(set: &str) -> bool {
    let Some((key, value)) = set.split_once('=') else { return false };
    key.trim().ends_with("kind") || (value.trim_start().starts_with('{') && value.contains("kind"))
}

/// A `--set` as an error line shows it: a value past a line's width is cut
/// (a 900 KB run name made a 900 KB error line), a line break escaped.
fn shown(set: &str) -> String {
    // On one line: a line break inside would split the error line.
    cut(&set.replace('\n', "\\n").replace('\r', "\\r"), 80)
}

/// `text` cut after `chars` characters: a problem quotes the value it
/// refuses, which a `--set` may make any length (round 9: 120 KB).
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// The config `table` makes with `sets` applied: `Err` for a `--set` that
/// cannot apply, `Ok(Err(problem))` for a key refused by name.
fn checked(table: &toml::Table, sets: &[String]) -> Result<std::result::Result<GrinConfig, String>> {
    let mut table = table.clone();
    for set in sets {
        apply_set(&mut table, set).with_context(|| format!("--set {}", shown(set)))?;
    }
    let value = toml::Value::Table(table);
    let config: GrinConfig = match serde_path_to_error::deserialize(value.clone()) {
        Ok(config) => config,
        Err(e) => return Ok(Err(key_error(e, &value))),
    };
    let resolved = toml::Value::try_from(&config).context("the config as TOML")?;
    if let Err(problem) = refuse_arrays_for_tables(&value, &resolved, "") {
        return Ok(Err(problem));
    }
    Ok(config.validate().map(|()| config).map_err(|e| e.to_string()))
}

/// A model file's `[model]` table with `--set model.KEY=VALUE` applied, as
/// `grin model-set` writes it: each key named as in a config, read and
/// range-checked as a config's, and refused when it would change what the
/// weights are shaped by.
pub fn set_model_keys(model: &ModelConfig, sets: &[String]) -> Result<ModelConfig> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Only {
        model: ModelConfig,
    }
    let mut table = toml::Table::new();
    table.insert("model".into(), toml::Value::try_from(model).context("model settings as TOML")?);
    let keys: Vec<&str> = sets.iter().map(|set| set.split_once('=').map_or(set.as_str(), |(k, _)| k).trim()).collect();
    for (set, key) in sets.iter().zip(&keys) {
        if !key.starts_with("model.") {
            bail!("--set {}: a model file holds only `model.*` keys", shown(set));
        }
        apply_set(&mut table, set).with_context(|| format!("--set {}", shown(set)))?;
    }
    let value = toml::Value::Table(table);
    let changed: ModelConfig = serde_path_to_error::deserialize(value.clone())
        .map(|only: Only| only.model)
        .map_err(|e| anyhow::anyhow!(key_error(e, &value)))?;
    changed.validate().map_err(|e| anyhow::anyhow!(e))?;
    if let Some(key) = model.architecture_change(&changed) {
        let folded_by = match key {
            "model.level_thresholds" => Some("--level-thresholds"),
            "model.box_scale" => Some("--box-scale"),
            _ => None,
        };
        if let Some(flag) = folded_by {
            bail!("key `{key}`: records what the weights hold; change it with {flag}, which folds it in");
        }
        bail!("key `{key}`: shapes the weights, so it is set by training, not in a model file");
    }
    Ok(changed)
}

/// Refuses an array that the config read as a table (`train = []`, `--set
/// 'train.loss=[0.5]'`): serde reads a struct from a sequence too, its
/// fields by position and the rest at their defaults, so the file's keys
/// were dropped without a word (issue 90, round 21). `resolved` is the
/// config read, as TOML: a table there (or nothing, a table at its
/// defaults being left out) where `value` gave an array.
fn refuse_arrays_for_tables(value: &toml::Value, resolved: &toml::Value, key: &str) -> Result<(), String> {
    match (value, resolved) {
        (toml::Value::Table(given), toml::Value::Table(resolved)) => {
            for (name, sub) in given {
                let key = if key.is_empty() { name.clone() } else { format!("{key}.{name}") };
                match resolved.get(name) {
                    Some(read) => refuse_arrays_for_tables(sub, read, &key)?,
                    None if sub.is_array() => return refuse_arrays_for_tables(sub, &toml::Table::new().into(), &key),
                    None => {}
                }
            }
            Ok(())
        }
        (toml::Value::Array(_), toml::Value::Table(_)) => {
            Err(format!("key `{key}`: is a table of keys (`[{key}]`, or `{{ key = value }}`), not an array"))
        }
        _ => Ok(()),
    }
}

/// "key `a.b`: problem", the dotted key at fault (an array's entry as
/// `parts[0]`, which `--set` spells `parts.0`) in the config `value`.
fn key_error(e: serde_path_to_error::Error<toml::de::Error>, value: &toml::Value) -> String {
    let key = e.path().to_string();
    // A source is a tagged enum, which serde reads whole: its errors stop at
    // the source's key. A mix's part at fault is found by reading each part
    // alone (round 17: a misspelt key in the second part named no part).
    let at = e.path().iter().try_fold(value, |v, segment| match segment {
        serde_path_to_error::Segment::Seq { index } => v.get(*index),
        serde_path_to_error::Segment::Map { key } => v.get(key.as_str()),
        _ => None,
    });
    let (key, message) = at
        .and_then(|source| part_at_fault(source, &key))
        .unwrap_or_else(|| (key, e.into_inner().message().to_string()));
    format!("key `{key}`: {message}")
}

/// The first of a mix `source`'s parts that is no source, as its key and
/// problem, the deepest part of a nested mix named.
fn part_at_fault(source: &toml::Value, key: &str) -> Option<(String, String)> {
    let parts = source.get("parts")?.as_array()?;
    parts.iter().enumerate().find_map(|(i, part)| {
        let e = serde_path_to_error::deserialize::<_, grin_features::SourceConfig>(part.clone()).err()?;
        let key = format!("{key}.parts[{i}]");
        part_at_fault(part, &key).or_else(|| {
            let inner = e.path().to_string();
            let key = if inner == "." { key } else { format!("{key}.{inner}") };
            Some((key, e.into_inner().message().to_string()))
        })
    })
}

/// `a.b.c=value`: the value is read as TOML (`0.01`, `true`, `"x"`,
/// `[1, 2]`), falling back to a bare string (`mode=in-vram`). A number
/// after an array of tables picks one entry: `features.source.parts.0.crops.min_face`
/// is the first mix part's.
fn apply_set(table: &mut toml::Table, set: &str) -> Result<()> {
    let Some((key, raw)) = set.split_once('=') else { bail!("expected key=value") };
    // One key a --set: the lines after a newline were dropped (round 11).
    if set.contains(['\n', '\r']) {
        bail!("holds a line break: give each key its own --set");
    }
    let value: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").expect("parsed key"),
        // A number TOML cannot hold (`2^64` written out) is no bare string:
        // say what is wrong with it rather than "invalid type: string".
        Err(_) if looks_numeric(raw) => {
            bail!("`{}` is not a number TOML holds (its integers are 64-bit)", cut(raw.trim(), 80))
        }
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.trim().split('.').collect();
    let (last, parents) = parts.split_last().expect("split yields one part");
    let mut node = table;
    let mut rest = parents.iter();
    while let Some(part) = rest.next() {
        let child = node.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let child = match child {
            toml::Value::Array(items) => {
                let n = items.len();
                let index = match rest.next() {
                    Some(i) => i.parse::<usize>().ok().filter(|&i| i < n),
                    // The last part names the entry: `parts.0=...` is not a field.
                    None => None,
                }
                .with_context(|| format!("`{part}` holds {n} entries: name one by its index, 0 to {}", n.max(1) - 1))?;
                &mut items[index]
            }
            other => other,
        };
        node = child.as_table_mut().with_context(|| format!("`{part}` is not a table"))?;
    }
    merge(node, last, value);
    Ok(())
}

/// `key = value` into `node`; a table merges into the table already there,
/// key by key: `model.second_look={below=0.2}` sets `below` and keeps the
/// file's `context` and `side` (replacing the table reset them).
fn merge(node: &mut toml::Table, key: &str, value: toml::Value) {
    match (node.get_mut(key), value) {
        (Some(toml::Value::Table(old)), toml::Value::Table(new)) => {
            for (k, v) in new {
                merge(old, &k, v);
            }
        }
        (_, value) => {
            node.insert(key.to_string(), value);
        }
    }
}

/// Digits with at most a leading sign, a point, an exponent and `_`
/// separators: meant as a number, whatever TOML makes of it (`2024-12`, a
/// name, is not).
fn looks_numeric(raw: &str) -> bool {
    let raw = raw.trim();
    let unsigned = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    mantissa.split('.').all(digits) && mantissa.split('.').count() <= 2 && digits(exponent)
}

/// A loaded config and where it came from. Relative data paths inside it
/// are taken as they are, relative to the working directory (grin runs from
/// the repository root): a run's saved `config.toml` then names the same
/// files as the config it was trained from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub config: GrinConfig,
    /// [`grin_features::photos_named_outside`], read when first asked for.
    outside: OnceLock<Vec<PathBuf>>,
}

impl LoadedConfig {
    /// What a command reading this config reads: the config file and
    /// [`LoadedConfig::data_inputs`]. Its outputs must be none of them, nor
    /// inside one of the folders (`grin_output`'s rule).
    pub fn inputs(&self) -> Vec<&Path> {
        let mut inputs = vec![self.path.as_path()];
        inputs.extend(self.data_inputs());
        inputs
    }

    /// Every file and folder the config's source names, and every photo
    /// its annotations name outside those folders, in any split.
    pub fn data_inputs(&self) -> Vec<&Path> {
        let outside = self.outside.get_or_init(|| grin_features::photos_named_outside(&self.config.features));
        let mut inputs = self.config.features.source.inputs();
        inputs.extend(outside.iter().map(PathBuf::as_path));
        inputs
    }
}

/// Largest config file read: a config is a page of TOML, and a path like
/// `/dev/zero` must not be read forever.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config file at `path` (at most [`MAX_CONFIG_BYTES`], UTF-8) with
/// `--set` overrides applied, as [`parse_config`] makes it.
pub fn load_config(path: &Path, sets: &[String]) -> Result<LoadedConfig> {
    let text = read_capped(path)?;
    let config = parse_config(&text, &path.display().to_string(), sets)?;
    Ok(LoadedConfig { path: path.to_path_buf(), config, outside: OnceLock::new() })
}

fn read_capped(path: &Path) -> Result<String> {
    // A plain file only: a FIFO named as the config hung every command.
    let bytes = grin_output::read_plain(path, MAX_CONFIG_BYTES)
        .with_context(|| format!("{}: cannot read config", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!("{}: config is larger than {} KiB; is it the right file?", path.display(), MAX_CONFIG_BYTES / 1024);
    }
    String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("{}: config is not UTF-8 text: {e}", path.display()))
}
