use super::*;

fn figures() -> RunFigures {
    RunFigures::example(Mode::Precomputed)
}

fn write(dir: &Path, text: &str) {
    std::fs::write(dir.join(SUMMARY_FILE), text).unwrap();
}

/// A folder removed when the test ends (a run's folder stands in for it).
fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn figures_read_back_as_written_with_extra_keys_left_alone() {
    let tmp = temp();
    let dir = tmp.path();
    let mut json = serde_json::to_value(figures()).unwrap();
    json["photos"] = serde_json::json!([{"source": "caltech"}]);
    write(dir, &json.to_string());
    assert_eq!(read(dir).unwrap(), figures());
}

#[test]
fn a_loss_never_logged_is_null_and_reads_back_as_nan() {
    let tmp = temp();
    let dir = tmp.path();
    let nan = RunFigures { final_loss: f32::NAN, ..figures() };
    let text = serde_json::to_string(&nan).unwrap();
    assert!(text.contains("\"final_loss\":null"), "{text}");
    write(dir, &text);
    assert!(read(dir).unwrap().final_loss.is_nan());
}

#[test]
fn a_bad_summary_names_its_file_and_key() {
    let tmp = temp();
    let dir = tmp.path();
    let mut json = serde_json::to_value(figures()).unwrap();
    json.as_object_mut().unwrap().remove("step_ms");
    write(dir, &json.to_string());
    let err = read(dir).unwrap_err().to_string();
    assert!(err.contains("summary.json") && err.contains("step_ms"), "{err}");

    json["step_ms"] = serde_json::json!("fast");
    write(dir, &json.to_string());
    let err = read(dir).unwrap_err().to_string();
    assert!(err.contains("summary.json") && err.contains("invalid type"), "{err}");

    write(dir, "{ not json");
    assert!(read(dir).unwrap_err().to_string().contains("not a run summary"));
    let err = read(&dir.join("absent")).unwrap_err().to_string();
    assert!(err.contains("absent/summary.json") && err.contains("cannot read"), "{err}");
}
