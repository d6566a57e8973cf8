//! The house rules of `docs/design.md` that no compiler lint checks: no
//! circle of imports inside a crate, no non-test source file over 400 lines,
//! and one set of dependency features for the build and the tests. (`pub`
//! only where another crate uses it is `unreachable_pub`'s job.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The line budget of one source file; a module's tests live beside it in
/// `module/tests.rs`, which the budget leaves out.
const MAX_FILE_LINES: usize = 400;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every source folder of the workspace: each crate's `src` and the root's.
fn source_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.push(root().join("src"));
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_the_line_budget() {
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    assert!(files.len() > 50, "found only {} source files: is the walk right?", files.len());
    let over: Vec<String> = files
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p).unwrap().lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", p.display()))
        })
        .collect();
    assert!(over.is_empty(), "over {MAX_FILE_LINES} lines: {over:?}");
}

#[test]
fn no_crate_has_a_circle_of_imports() {
    let mut args = vec![root().join("scripts/module-circles.py")];
    args.extend(source_dirs());
    let out = match Command::new("python3").args(&args).output() {
        Ok(out) => out,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: python3 could not run scripts/module-circles.py ({e})");
            return;
        }
        Err(e) => panic!("python3: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 circle(s)"), "{text}");
}

/// The line budget of one function, signature and closing brace included.
const MAX_FN_LINES: usize = 100;

/// Each function with a body in `text` (rustfmt's layout: the body closes
/// with `}` at the indentation its `fn` line opened at), as (line, lines);
/// inline test modules (from a column-0 `#[cfg(test)]` on) are left out.
fn function_lengths(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let signature = ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "]
            .iter()
            .fold(body, |rest, prefix| rest.strip_prefix(prefix).unwrap_or(rest));
        if !signature.starts_with("fn ") {
            continue;
        }
        // A declaration without a body (a trait's) ends in `;` before any `{`.
        let Some(open) = lines[i..].iter().position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'))
        else {
            continue;
        };
        if lines[i + open].trim_end().ends_with(';') || line.trim_end().ends_with('}') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close) {
            out.push((i + 1, end + 1));
        }
    }
    out
}

#[test]
fn function_lengths_are_counted_from_fn_to_its_brace() {
    let text = "fn a() {\n    x();\n}\n\ntrait T {\n    fn b(&self)\n        -> u8;\n    fn c(&self) {}\n}\n\
                impl S {\n    pub(crate) fn d(\n        y: u8,\n    ) -> u8 {\n        y\n    }\n}\n\
                #[cfg(test)]\nmod tests {\n    fn e() {\n    }\n}\n";
    assert_eq!(function_lengths(text), [(1, 3), (11, 5)]);
}

#[test]
fn no_function_is_over_the_line_budget() {
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    let mut counted = 0;
    let mut over = Vec::new();
    for path in files.iter().filter(|p| p.file_name().is_some_and(|n| n != "tests.rs")) {
        for (line, lines) in function_lengths(&std::fs::read_to_string(path).unwrap()) {
            counted += 1;
            if lines > MAX_FN_LINES {
                over.push(format!("{}:{line} ({lines} lines)", path.display()));
            }
        }
    }
    assert!(counted > 500, "found only {counted} functions: is the walk right?");
    assert!(over.is_empty(), "functions over {MAX_FN_LINES} lines: {over:?}");
}

/// Each package of the workspace's dependency graph with the features it is
/// built with (`name version|features`), from `cargo tree` over `edges`.
fn resolved_features(edges: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args(["tree", "--offline", "--workspace", "--features", "grin/cuda,grin/wgpu"])
        .args(["-e", edges, "--prefix", "none", "-f", "{p}|{f}"])
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // A blank line parts the trees of two workspace members.
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (package, list) = line.split_once('|').expect("`{p}|{f}` lines");
            // "name vX (path)": the name and version identify the package.
            let id: Vec<&str> = package.split_whitespace().take(2).collect();
            format!("{}|{}", id.join(" "), list.trim_end_matches(" (*)"))
        })
        .collect()
}

/// `cargo build --workspace` and `cargo test --workspace` (CI's two commands)
/// must resolve each dependency with the same features, or the test build
/// compiles Burn a second time (31 minutes of CI). The dev-dependencies'
/// extra features are named in `crates/workspace-hack`.
#[test]
fn the_build_and_the_tests_compile_dependencies_with_the_same_features() {
    let build = resolved_features("normal,build");
    let test = resolved_features("normal,build,dev");
    assert!(build.len() > 100, "only {} packages: is the parse right?", build.len());
    let built: BTreeSet<&str> = build.iter().filter_map(|l| l.split('|').next()).collect();
    // Packages only the tests use are compiled for them anyway; the others
    // must come with the build's features.
    let differ: Vec<&String> =
        test.difference(&build).filter(|l| l.split('|').next().is_some_and(|id| built.contains(id))).collect();
    assert!(differ.is_empty(), "add these features to crates/workspace-hack/Cargo.toml: {differ:#?}");
}

/// The `grin` binary's test harness is not built (`test = false` in
/// Cargo.toml): a unit test under `src/` would never run. Its tests belong
/// in the library that owns the code, or in `tests/`.
#[test]
fn the_binary_has_no_unit_tests() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let with_tests: Vec<String> = files
        .iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains("#[test]"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(with_tests.is_empty(), "unit tests that would never run: {with_tests:?}");
}

/// Burn's random generator is seeded in one place, `grin_model::seeded`,
/// which holds it until the draws that follow are done (why: that module's
/// comment). A `B::seed` anywhere else in the sources could land between
/// another run's seeding and its draws.
#[test]
fn the_backends_generator_is_seeded_in_one_place() {
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    let owner = root().join("crates/model/src/seeded.rs");
    let elsewhere: Vec<String> = files
        .iter()
        .filter(|p| **p != owner)
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.lines().any(|l| l.contains("::seed(") && !l.trim_start().starts_with("//"))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(elsewhere.is_empty(), "Burn's generator seeded outside grin_model::seeded: {elsewhere:?}");
}
