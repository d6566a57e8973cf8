//! The command examples in README.md and docs/*.md, checked against the
//! binaries they name, so an example cannot go stale:
//!
//! - a transcript (`$ grin ...` followed by what it prints) is run from the
//!   repository root, and what it prints must be what the transcript shows
//!   (a line ending in `...` shows only its start);
//! - every other `grin` / `grin-detect` command in a code block (also as
//!   `cargo run --release [-p grin-infer --bin grin-detect] -- ...`) must name a
//!   subcommand that exists and only flags its `--help` lists, and every
//!   `configs/`, `scripts/` or `assets/` path it names must exist.
//!
//! Training runs and benchmarks are not run here (minutes each): CI runs
//! the main job's pieces in other tests, and the figures live in
//! docs/benchmarks.md with their commands.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const GRIN: &str = env!("CARGO_BIN_EXE_grin");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// Each fenced code block of `text`, with the line its body starts on.
fn blocks(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(block) => out.push(block),
                None => open = Some((i + 2, Vec::new())),
            }
        } else if let Some((_, lines)) = open.as_mut() {
            lines.push(line.to_string());
        }
    }
    out
}

/// A command line's words, shell-like: quotes group, `#` starts a comment,
/// a trailing `\` joins the next line (the caller joins them first).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if !started => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

/// The grin or grin-detect invocations of a line: its words from the binary
/// on, up to a pipe, `&&`, `;` or a redirection.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let mut words = words(line.trim_start_matches("$ "));
    // `cargo run --release [-p grin-infer --bin grin-detect] -- ARGS` is the binary too.
    if let (Some(cargo), Some(dashes)) =
        (words.windows(2).position(|w| w == ["cargo", "run"]), words.iter().position(|w| w == "--"))
    {
        if cargo < dashes {
            let run = &words[cargo..dashes];
            // An `--example` is neither binary: its arguments are its own.
            let binary = if run.iter().any(|w| w == "--example") {
                "example"
            } else if run.iter().any(|w| w == "grin-detect") {
                "grin-detect"
            } else {
                "grin"
            };
            words.splice(cargo..=dashes, [binary.to_string()]);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "grin" || words[i] == "grin-detect" {
            let end = words[i..].iter().position(|w| ["|", "&&", ";", ">", "2>", ">>"].contains(&w.as_str()));
            out.push(words[i..end.map_or(words.len(), |e| i + e)].to_vec());
        }
        i += 1;
    }
    out
}

/// The flags `binary subcommand --help` lists.
fn flags(binary: &str, subcommand: &[String]) -> Result<BTreeSet<String>, String> {
    let exe = match binary {
        "grin" => PathBuf::from(GRIN),
        _ => PathBuf::from(GRIN).with_file_name("grin-detect"),
    };
    let out = Command::new(&exe).args(subcommand).arg("--help").output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(['.', ')', ':']).to_string())
        .collect())
}

/// `grin`'s subcommand words (`bench step`, `features preview`, ...): the
/// leading words that are not flags or paths.
fn subcommand(args: &[String]) -> Vec<String> {
    let groups = ["bench", "features", "store"];
    match args.first() {
        Some(first) if groups.contains(&first.as_str()) => args.iter().take(2).cloned().collect(),
        Some(first) if !first.starts_with('-') => vec![first.clone()],
        _ => vec![],
    }
}

/// grin-detect is another package's binary: `cargo test --workspace` builds
/// it beside grin, a lone `cargo test --test suite` may not.
fn grin_detect_built() -> bool {
    PathBuf::from(GRIN).with_file_name("grin-detect").exists()
}

fn check_command(invocation: &[String], place: &str, problems: &mut Vec<String>) {
    let (binary, args) = (invocation[0].as_str(), &invocation[1..]);
    if binary == "grin-detect" && !grin_detect_built() {
        eprintln!(
            "{place}: skipped `{}`: grin-detect is not built (cargo test --workspace builds it)",
            invocation.join(" ")
        );
        return;
    }
    let sub = if binary == "grin" { subcommand(args) } else { vec![] };
    match flags(binary, &sub) {
        Err(e) => problems.push(format!("{place}: `{}`: no such command: {e}", invocation.join(" "))),
        Ok(known) => {
            for arg in args {
                // `--flag=value`, `--flag value`, and placeholders like `[--resume]`.
                let flag = arg.trim_start_matches('[').split('=').next().unwrap().trim_end_matches([']', '|']);
                if flag.starts_with("--") && flag.len() > 2 && !known.contains(flag) {
                    problems.push(format!(
                        "{place}: `{}`: {binary} {} has no {flag}",
                        invocation.join(" "),
                        sub.join(" ")
                    ));
                }
            }
        }
    }
    for arg in args {
        for prefix in ["configs/", "scripts/", "assets/"] {
            if arg.starts_with(prefix) && !arg.contains(['<', '*', '{']) && !root().join(arg).exists() {
                problems.push(format!("{place}: `{}`: {arg} does not exist", invocation.join(" ")));
            }
        }
    }
}

/// Runs a transcript's command and compares what it printed.
fn check_transcript(command: &str, shown: &[String], place: &str, problems: &mut Vec<String>) {
    let words = words(command);
    let exe = match words[0].as_str() {
        "grin" => PathBuf::from(GRIN),
        _ => PathBuf::from(GRIN).with_file_name("grin-detect"),
    };
    let out = Command::new(exe).args(&words[1..]).current_dir(root()).output().unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let printed: Vec<&str> = printed.lines().collect();
    if printed.len() < shown.len() {
        problems.push(format!("{place}: `{command}` printed {} lines, the docs show {}", printed.len(), shown.len()));
        return;
    }
    for (want, got) in shown.iter().zip(&printed) {
        let same = match want.strip_suffix("...") {
            Some(start) => got.starts_with(start),
            None => want == got,
        };
        if !same {
            problems.push(format!("{place}: `{command}`:\n  the docs show: {want}\n  it prints:     {got}"));
        }
    }
}

#[test]
fn every_command_example_names_real_commands_flags_and_files_and_transcripts_print_what_they_show() {
    let mut problems = Vec::new();
    let (mut commands, mut transcripts) = (0, 0);
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(root()).unwrap_or(&doc).display().to_string();
        for (start, lines) in blocks(&text) {
            // Continued lines joined, so a command is one line.
            let mut joined: Vec<(usize, String)> = Vec::new();
            let mut carry = false;
            for (i, line) in lines.iter().enumerate() {
                match (carry, joined.last_mut()) {
                    (true, Some((_, last))) => last.push_str(line.trim_start()),
                    _ => joined.push((start + i, line.clone())),
                }
                carry = line.ends_with('\\');
                if let (true, Some((_, last))) = (carry, joined.last_mut()) {
                    last.pop();
                }
            }
            let mut i = 0;
            while i < joined.len() {
                let (at, line) = &joined[i];
                let place = format!("{name}:{at}");
                if let Some(command) = line.strip_prefix("$ ") {
                    let shown: Vec<String> =
                        joined[i + 1..].iter().map(|(_, l)| l.clone()).take_while(|l| !l.starts_with("$ ")).collect();
                    i += shown.len();
                    if invocations(command).len() == 1 && command.starts_with("grin") {
                        check_transcript(command, &shown, &place, &mut problems);
                        transcripts += 1;
                    }
                }
                for invocation in invocations(line) {
                    check_command(&invocation, &place, &mut problems);
                    commands += 1;
                }
                i += 1;
            }
        }
    }
    assert!(problems.is_empty(), "{} stale examples:\n{}", problems.len(), problems.join("\n"));
    eprintln!("checked {commands} commands and {transcripts} transcripts in README.md and docs/");
    assert!(commands >= 20 && transcripts >= 2, "found only {commands} commands and {transcripts} transcripts");
}

#[test]
fn the_checker_finds_a_stale_flag_a_missing_file_and_a_wrong_transcript() {
    let mut problems = Vec::new();
    check_command(&words("grin train --config configs/demo.toml --no-such-flag"), "t", &mut problems);
    check_command(&words("grin train --config configs/no-such.toml"), "t", &mut problems);
    check_command(&words("grin no-such-command"), "t", &mut problems);
    check_transcript("grin model-info", &["something else".to_string()], "t", &mut problems);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(Path::new(GRIN).exists());
}
