//! The JSON lines the loop writes: one per frame, one per smile event.

use super::track::{EndReason, Event, EventKind, TrackedFace};
use crate::report::{round_probability, round_px};
use anyhow::Result;
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct FaceLine {
    track: u64,
    #[serde(rename = "box")]
    bbox: [f64; 4],
    score: f64,
    smile: f64,
    smiling: bool,
}

#[derive(Serialize)]
pub(super) struct FrameLine {
    frame: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    t_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<f64>,
    width: u32,
    height: u32,
    faces: Vec<FaceLine>,
}

#[derive(Serialize)]
struct EventLine {
    event: EventKind,
    frame: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    t_ms: Option<f64>,
    track: u64,
    #[serde(rename = "box")]
    bbox: [f64; 4],
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<EndReason>,
}

/// The event lines, as JSON.
pub(super) fn event_lines(events: &[Event], frame: u64, t_ms: Option<f64>) -> Result<Vec<String>> {
    let line = |e: &Event| EventLine {
        event: e.event,
        frame,
        t_ms,
        track: e.track,
        bbox: e.bbox.map(round_px),
        reason: e.reason,
    };
    Ok(events.iter().map(|e| serde_json::to_string(&line(e))).collect::<Result<_, _>>()?)
}

/// The frame's line: its tracked faces, rounded as every JSON output is.
pub(super) fn frame_line(
    frame: u64,
    t_ms: Option<f64>,
    latency_ms: Option<f64>,
    (width, height): (u32, u32),
    faces: &[TrackedFace],
) -> FrameLine {
    FrameLine {
        frame,
        t_ms,
        latency_ms,
        width,
        height,
        faces: faces
            .iter()
            .map(|f| FaceLine {
                track: f.track,
                bbox: [f.detection.x0, f.detection.y0, f.detection.x1, f.detection.y1].map(round_px),
                score: round_probability(f.detection.score),
                smile: round_probability(f.detection.smile),
                smiling: f.smiling,
            })
            .collect(),
    }
}
