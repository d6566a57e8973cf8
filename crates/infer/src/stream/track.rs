//! Faces followed from frame to frame, and a smile state that does not
//! flicker.
//!
//! Each frame's detections are matched to the live tracks by IoU (greedy,
//! best overlap first), so a face keeps its track id while it moves. The
//! smile state of a track switches on only after its smile probability has
//! been at or above `on` for `hold` frames in a row, and off only after `hold`
//! frames at or below `off`: two thresholds (hysteresis) so a probability
//! hovering near one value does not toggle it, and a hold so one odd frame
//! does not either. A track unseen for more than `patience` frames ends;
//! if it was smiling, its smile ends with it.

use grin_net::Detection;
use grin_terms::boxes::iou;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TrackerConfig {
    /// Smile probability at or above which a face counts toward smiling.
    pub on: f32,
    /// Smile probability at or below which a smiling face counts toward not smiling.
    pub off: f32,
    /// Frames in a row a change must last before the state switches.
    pub hold: u32,
    /// Least IoU for a detection to continue a track.
    pub min_iou: f32,
    /// Frames a track may go unseen before it ends.
    pub patience: u32,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig { on: 0.6, off: 0.4, hold: 3, min_iou: 0.3, patience: 5 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventKind {
    SmileStarted,
    SmileEnded,
}

/// A change of a tracked face's smile state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Event {
    pub event: EventKind,
    pub track: u64,
    /// The track's last box, in image pixels.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
    /// Why a smile ended other than by the face's expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<EndReason>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EndReason {
    /// The face went unseen for longer than `patience` frames.
    FaceLost,
    /// The stream ended while the face was smiling.
    StreamEnded,
}

/// One detection of this frame, with its track.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrackedFace {
    pub track: u64,
    pub detection: Detection,
    pub smiling: bool,
}

#[derive(Debug, Clone)]
struct Track {
    id: u64,
    bbox: [f32; 4],
    missed: u32,
    smiling: bool,
    /// Frames in a row that argue for the other state.
    streak: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    config: TrackerConfig,
    tracks: Vec<Track>,
    next_id: u64,
}

impl Tracker {
    pub(super) fn new(config: TrackerConfig) -> Tracker {
        Tracker { config, tracks: Vec::new(), next_id: 1 }
    }

    /// Live tracks (seen within `patience` frames).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.tracks.len()
    }

    /// Tracks started so far (ids are handed out in order from 1).
    pub(crate) fn tracks_started(&self) -> u64 {
        self.next_id - 1
    }

    /// Advances one frame: the frame's faces (in detection order) and the
    /// smile events it caused.
    pub(super) fn update(&mut self, detections: &[Detection]) -> (Vec<TrackedFace>, Vec<Event>) {
        let c = self.config;
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (t, track) in self.tracks.iter().enumerate() {
            for (d, det) in detections.iter().enumerate() {
                let overlap = iou(track.bbox, det.corners());
                if overlap >= c.min_iou {
                    pairs.push((overlap, t, d));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut track_of: Vec<Option<usize>> = vec![None; detections.len()];
        let mut taken = vec![false; self.tracks.len()];
        for (_, t, d) in pairs {
            if !taken[t] && track_of[d].is_none() {
                taken[t] = true;
                track_of[d] = Some(t);
            }
        }

        let mut events = Vec::new();
        let mut faces = Vec::with_capacity(detections.len());
        for (d, det) in detections.iter().enumerate() {
            let t = match track_of[d] {
                Some(t) => t,
                None => {
                    self.tracks.push(Track {
                        id: self.next_id,
                        bbox: det.corners(),
                        missed: 0,
                        smiling: false,
                        streak: 0,
                    });
                    self.next_id += 1;
                    self.tracks.len() - 1
                }
            };
            let track = &mut self.tracks[t];
            track.bbox = det.corners();
            track.missed = 0;
            let argues_for_change = if track.smiling { det.smile <= c.off } else { det.smile >= c.on };
            track.streak = if argues_for_change { track.streak + 1 } else { 0 };
            if track.streak >= c.hold.max(1) {
                track.smiling = !track.smiling;
                track.streak = 0;
                let event = if track.smiling { EventKind::SmileStarted } else { EventKind::SmileEnded };
                events.push(Event { event, track: track.id, bbox: track.bbox, reason: None });
            }
            faces.push(TrackedFace { track: track.id, detection: *det, smiling: track.smiling });
        }

        for (t, track) in self.tracks.iter_mut().enumerate() {
            // Tracks created this frame sit past `taken`'s end: all were seen.
            if t < taken.len() && !taken[t] {
                track.missed += 1;
            }
        }
        let patience = c.patience;
        self.tracks.retain(|track| {
            let alive = track.missed <= patience;
            if !alive && track.smiling {
                events.push(Event {
                    event: EventKind::SmileEnded,
                    track: track.id,
                    bbox: track.bbox,
                    reason: Some(EndReason::FaceLost),
                });
            }
            alive
        });
        (faces, events)
    }

    /// Ends every track (the stream ended): smiles still on end now.
    pub(super) fn finish(&mut self) -> Vec<Event> {
        self.tracks
            .drain(..)
            .filter(|t| t.smiling)
            .map(|t| Event {
                event: EventKind::SmileEnded,
                track: t.id,
                bbox: t.bbox,
                reason: Some(EndReason::StreamEnded),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(x: f32, smile: f32) -> Detection {
        Detection { x0: x, y0: 10.0, x1: x + 40.0, y1: 50.0, score: 0.9, smile }
    }

    #[test]
    fn a_moving_face_keeps_its_id_and_a_new_one_gets_the_next() {
        let mut t = Tracker::new(TrackerConfig::default());
        let (a, _) = t.update(&[face(0.0, 0.1)]);
        let (b, _) = t.update(&[face(5.0, 0.1), face(200.0, 0.1)]);
        assert_eq!(a[0].track, 1);
        assert_eq!((b[0].track, b[1].track), (1, 2));
    }

    #[test]
    fn smile_state_needs_hold_frames_past_each_threshold() {
        let config = TrackerConfig { on: 0.6, off: 0.4, hold: 2, ..TrackerConfig::default() };
        let mut t = Tracker::new(config);
        let probs = [0.7, 0.5, 0.7, 0.7, 0.5, 0.45, 0.3, 0.7, 0.3, 0.3];
        let mut states = Vec::new();
        let mut events = Vec::new();
        for (i, p) in probs.iter().enumerate() {
            let (faces, ev) = t.update(&[face(0.0, *p)]);
            states.push(faces[0].smiling);
            events.extend(ev.into_iter().map(|e| (i, e.event)));
        }
        // 0.7 then 0.5 resets the streak; two 0.7s switch on; values between
        // the thresholds keep it on; one 0.3 is not enough; two are.
        assert_eq!(states, [false, false, false, true, true, true, true, true, true, false]);
        assert_eq!(events, [(3, EventKind::SmileStarted), (9, EventKind::SmileEnded)]);
    }

    #[test]
    fn a_lost_smiling_face_ends_its_smile_after_patience() {
        let config = TrackerConfig { hold: 1, patience: 2, ..TrackerConfig::default() };
        let mut t = Tracker::new(config);
        let (_, ev) = t.update(&[face(0.0, 0.9)]);
        assert_eq!(ev[0].event, EventKind::SmileStarted);
        assert!(t.update(&[]).1.is_empty());
        assert!(t.update(&[]).1.is_empty());
        let (_, ev) = t.update(&[]);
        assert_eq!((ev[0].event, ev[0].reason, t.len()), (EventKind::SmileEnded, Some(EndReason::FaceLost), 0));
        let (faces, _) = t.update(&[face(0.0, 0.1)]);
        assert_eq!(faces[0].track, 2, "a face after the track ended is a new track");
    }
}
