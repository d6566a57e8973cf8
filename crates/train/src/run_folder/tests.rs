use super::*;

fn error(dir: &Path, resume: bool, overwrite: bool) -> String {
    format!("{:#}", check(dir, resume, overwrite).unwrap_err())
}

#[test]
fn an_empty_or_missing_folder_may_start() {
    let dir = tempfile::tempdir().unwrap();
    check(dir.path(), false, false).unwrap();
    check(&dir.path().join("new"), false, true).unwrap();
    assert!(error(&dir.path().join("new"), true, false).contains("nothing to resume"));
}

#[test]
fn a_finished_run_is_named_with_its_figures_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let figures = grin_terms::summary::RunFigures::example(crate::Mode::OnTheFly);
    std::fs::write(dir.path().join("summary.json"), serde_json::to_string(&figures).unwrap()).unwrap();
    std::fs::write(dir.path().join("model.grin"), b"weights").unwrap();
    let e = error(dir.path(), false, false);
    assert!(
        e.contains("holds a finished run (summary.json: 100 steps, held-out face AP@0.5 0.500, smile accuracy n/a)"),
        "{e}"
    );
    assert!(e.contains("--overwrite") && !e.contains('\n'), "{e}");
    assert!(error(dir.path(), true, false).contains("the run finished: model.grin is there"));
    assert!(prepare(dir.path(), false, false).is_err());
    assert!(dir.path().join("model.grin").exists(), "a refused run removes nothing");

    // A model without its summary (a run killed while scoring) still counts.
    std::fs::remove_file(dir.path().join("summary.json")).unwrap();
    assert!(error(dir.path(), false, false).contains("model.grin, no readable summary.json"));
    // A damaged summary alone is named as what it is.
    std::fs::remove_file(dir.path().join("model.grin")).unwrap();
    std::fs::write(dir.path().join("summary.json"), b"{").unwrap();
    assert!(error(dir.path(), false, false).contains("a summary.json grin cannot read, no model.grin"));
}

#[test]
fn a_locked_run_folder_is_refused_naming_the_holder_until_it_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("x");
    let held = lock(&run_dir).unwrap();
    let e = format!("{:#}", lock(&run_dir).unwrap_err());
    let pid = format!("in use by grin process {}", std::process::id());
    assert!(e.contains(&pid) && e.contains("--name") && e.contains("/x"), "{e}");
    // Round 11: a second run was told to add --overwrite (the live run's
    // metrics.csv) or that nothing was there to resume; the holder first.
    std::fs::write(run_dir.join("metrics.csv"), b"step\n").unwrap();
    let e = format!("{:#}", refuse_a_held_folder(&run_dir).unwrap_err());
    assert!(e.contains(&pid), "{e}");
    drop(held);
    refuse_a_held_folder(&run_dir).unwrap();
    std::fs::remove_file(run_dir.join("metrics.csv")).unwrap();
    let again = lock(&run_dir).unwrap();
    check(&run_dir, false, false).unwrap();
    prepare(&run_dir, false, true).unwrap();
    assert!(run_dir.join(LOCK_FILE).exists(), "--overwrite keeps the lock it runs under");
    // A run's model rewritten in place holds the run folder (round 14).
    std::fs::write(run_dir.join("config.toml"), "").unwrap();
    let e = format!("{:#}", hold_run_of_model(&run_dir.join("model.grin")).unwrap_err());
    assert!(e.contains(&pid) && e.contains("then change its model"), "{e}");
    // Through a link to it too (round 15).
    std::fs::write(run_dir.join("model.grin"), "").unwrap();
    let link = dir.path().join("link.grin");
    std::os::unix::fs::symlink(run_dir.join("model.grin"), &link).unwrap();
    assert!(format!("{:#}", hold_run_of_model(&link).unwrap_err()).contains(&pid));
    drop(again);
    assert!(hold_run_of_model(&run_dir.join("model.grin")).unwrap().is_some());
    assert!(hold_run_of_model(&dir.path().join("loose.grin")).unwrap().is_none(), "no run's model");
    std::fs::remove_file(run_dir.join(LOCK_FILE)).unwrap();
    assert!(hold_run_of_model(&run_dir.join("model.grin")).unwrap().is_none(), "no run ever locked it");
}

#[test]
fn overwrite_clears_the_previous_results() {
    let dir = tempfile::tempdir().unwrap();
    for name in RESULTS.iter().chain(&["config.toml"]) {
        std::fs::write(dir.path().join(name), b"old").unwrap();
    }
    prepare(dir.path(), false, true).unwrap();
    for name in RESULTS {
        assert!(!dir.path().join(name).exists(), "{name} left behind");
    }
    // The config stays for the new run to rewrite (it may be the one
    // the run was given); without --overwrite it is not replaced.
    let e = check(dir.path(), false, false).unwrap_err().to_string();
    assert!(e.contains("holds config.toml, a file a run writes"), "{e}");
}

/// Round 17: a run whose validations were all interrupted was said to have
/// run with `train.eval_every` 0.
#[test]
fn a_missing_best_model_names_both_reasons() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    let e = format!("{:#}", run_model(dir.path(), true).unwrap_err());
    assert!(
        e.ends_with("no best.grin: it is written when a validation finishes: train.eval_every was 0, or none finished"),
        "{e}"
    );
    let e = format!("{:#}", run_model(dir.path(), false).unwrap_err());
    assert!(e.ends_with("no model.grin: the run has not finished"), "{e}");
}
