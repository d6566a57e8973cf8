//! `grin config`: a config as grin resolves it, with every default filled in
//! and every `--set` applied, so scripts (the sweep, gpu-bench) read values
//! and write trial configs without a copy of the schema of their own.

use super::ConfigArgs;
use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub(crate) struct ConfigCmdArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print one resolved value by its dotted key (e.g. `train.batch_size`);
    /// strings bare, everything else as TOML.
    #[arg(long, value_name = "KEY", conflicts_with = "keys")]
    pub get: Option<String>,
    /// List every key with its resolved value, one `key = value` per line.
    #[arg(long)]
    pub keys: bool,
}

pub(crate) fn run(args: ConfigCmdArgs) -> Result<()> {
    // Standard output onto the config is refused as it loads (`grin config … >> d.toml`).
    let loaded = args.config.load()?;
    let mut value = toml::Value::try_from(&loaded.config)?;
    // A file leaves some keys out at their defaults; a resolved config names
    // them all (`--keys` listed no `model.second_look.*`).
    if let (Some(toml::Value::Table(model)), toml::Value::Table(unwritten)) =
        (value.get_mut("model"), toml::Value::try_from(loaded.config.model.unwritten())?)
    {
        for (key, v) in unwritten {
            model.entry(key).or_insert(v);
        }
    }
    tidy_floats(&mut value);
    if let Some(key) = &args.get {
        let mut node = &value;
        let last = key.split('.').count() - 1;
        for (i, part) in key.split('.').enumerate() {
            match node.get(part) {
                Some(next) => node = next,
                // Only the last part, in a table, can be a key left unset.
                None if i == last && node.is_table() && is_unset_key(&args.config, key) => {
                    bail!("{}: key `{key}` is not set, and has no default", loaded.path.display())
                }
                None => bail!("{}: key `{key}`: not a key of the resolved config", loaded.path.display()),
            }
        }
        match node {
            toml::Value::String(s) => outln!("{s}"),
            toml::Value::Table(t) => out!("{}", toml::to_string_pretty(t)?),
            other => outln!("{other}"),
        }
    } else if args.keys {
        let mut lines = Vec::new();
        flatten("", &value, &mut lines);
        for line in lines {
            outln!("{line}");
        }
    } else {
        out!("{}", toml::to_string_pretty(&value)?);
    }
    Ok(())
}

/// Whether `key`, absent from the resolved config, is one the config takes
/// (an optional key left out, `train.eval_every`) rather than a misspelling:
/// the config's own parser is asked, with the key set. Round 21 of issue 90
/// called such a key "not a key".
fn is_unset_key(config: &super::ConfigArgs, key: &str) -> bool {
    let mut sets = config.set.sets.clone();
    sets.push(format!("{key}=0"));
    match grin_train::load_config(&config.config, &sets) {
        Ok(_) => true,
        Err(e) => !format!("{e:#}").contains("unknown field"),
    }
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        other => out.push(format!("{prefix} = {other}")),
    }
}

/// f32 keys come out of serde widened to f64 (0.2 -> 0.20000000298023224):
/// print such a value as the f32 it is.
fn tidy_floats(value: &mut toml::Value) {
    match value {
        toml::Value::Float(f) if (*f as f32) as f64 == *f => {
            *f = (*f as f32).to_string().parse().unwrap_or(*f);
        }
        toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| tidy_floats(v)),
        toml::Value::Array(a) => a.iter_mut().for_each(tidy_floats),
        _ => {}
    }
}
