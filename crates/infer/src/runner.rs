//! The detector as the Pi runs it: a `.grin` file (or the embedded default)
//! read once by grin-net, without Burn, and run on the CPU by the fast path
//! (`fast.rs`), which `tests/parity.rs` checks against the Burn model
//! training uses, set in its place as a [`Reference`].
//!
//! The network is fully convolutional, so it runs at any size: the run size
//! (default: the size it was trained at) only decides how many output points
//! there are, and the [`Points`] are rebuilt to match it. Faces keep the
//! pixel size they have after the image is scaled to the run size, so a run
//! size far from the training size shifts which face sizes are found.

use crate::fast::{FastDetector, Map};
use crate::frame::Frame;
use anyhow::{anyhow, bail, Result};
use grin_image::{ImageBound, InputError, Letterbox, LookCuts};
use grin_net::{
    merge_passes, pass_sizes, second_look, Budget, DecodeParams, Detection, DetectorSpec, ModelConfig, Points,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default model, trained by `grin train` (docs/model.md says how).
pub static DEFAULT_MODEL: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/default.grin"));

pub use grin_terms::{MAX_SIDE, MIN_SIDE};

pub use grin_terms::photo::{own_size, PHOTO_MAX_PIXELS};

/// How large a frame a still photo gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhotoSize {
    /// The run size set on the runner (`--size`), letterboxed.
    RunSize,
    /// The photo's own size times `grin_terms::photo::PHOTO_UPSCALE`, shrunk to at most this many pixels.
    Own { max_pixels: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    Embedded,
    File(PathBuf),
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Embedded => write!(f, "embedded default"),
            ModelSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A forward pass set in the fast one's place: a frame's pixels (`[channels,
/// height, width]`, 0..1) in, the raw outputs (`[OUTPUTS, points]`) out.
/// What `tests/parity.rs` checks the fast path against (Burn's model, kept
/// out of the Pi binary: docs/design.md, "The Pi binary").
pub type Reference = Box<dyn Fn(&[f32], [usize; 3]) -> Vec<f32> + Send + Sync>;

/// A loaded model, ready to run frames: the network, the run size and the
/// decoding settings.
pub struct Runner {
    spec: DetectorSpec,
    fast: FastDetector,
    reference: Option<Reference>,
    params: DecodeParams,
    /// The output points of every pass at the run size, finest first.
    passes: Vec<Points>,
    /// The first pass's working memory in floats (`Budget::activations`),
    /// asked for before each frame: set with the passes, not per frame.
    activations: usize,
    source: ModelSource,
}

impl Runner {
    /// Loads and checks the model; errors name the file.
    pub fn load(source: ModelSource) -> Result<Runner> {
        let weights = match &source {
            ModelSource::Embedded => {
                grin_net::file::from_bytes(DEFAULT_MODEL).map_err(|e| anyhow!("embedded default model: {e}"))?
            }
            ModelSource::File(path) => grin_net::file::read(path)?,
        };
        let spec = weights.spec.clone();
        if !matches!(spec.channels, 1 | 3) {
            bail!("{source}: model expects {} channels; images give 1 or 3", spec.channels);
        }
        let fast = FastDetector::new(weights.folded());
        let params = spec.model.decode_params();
        let (width, height) = (spec.width, spec.height);
        let mut runner = Runner { fast, reference: None, passes: vec![], activations: 0, params, spec, source };
        runner.set_passes(width, height);
        Ok(runner)
    }

    /// The passes at a `width`x`height` run size, and their working memory.
    fn set_passes(&mut self, width: usize, height: usize) {
        self.passes = pass_points(width, height, &self.params);
        self.activations = Budget::of(&DetectorSpec { width, height, ..self.spec.clone() }).activations;
    }

    pub fn spec(&self) -> &DetectorSpec {
        &self.spec
    }

    pub(crate) fn source(&self) -> &ModelSource {
        &self.source
    }

    /// `(width, height)` the network runs at.
    pub fn run_size(&self) -> (usize, usize) {
        (self.passes[0].width, self.passes[0].height)
    }

    pub fn set_run_size(&mut self, width: usize, height: usize) -> Result<()> {
        for (name, side) in [("width", width), ("height", height)] {
            if !(MIN_SIDE..=MAX_SIDE).contains(&side) {
                bail!("--size: {name} {side} is outside {MIN_SIDE}..={MAX_SIDE}");
            }
        }
        self.set_passes(width, height);
        Ok(())
    }

    /// Parameters and MFLOPs of one frame at the run size, every pass counted.
    pub(crate) fn budget(&self) -> Budget {
        let mut passes = self
            .passes
            .iter()
            .map(|p| Budget::of(&DetectorSpec { width: p.width, height: p.height, ..self.spec.clone() }));
        let first = passes.next().expect("at least one pass");
        passes.fold(first, |total, pass| Budget { mflops: total.mflops + pass.mflops, ..total })
    }

    /// `(width, height)` of every pass, the run size first.
    pub fn pass_sizes(&self) -> Vec<(usize, usize)> {
        self.passes.iter().map(|p| (p.width, p.height)).collect()
    }

    /// The model's decision settings (threshold, pyramid, nested cover, the
    /// second look; `grin_net::DecodeFlags::apply` sets a command's flags
    /// over the file's own): everything derived from them follows, as at
    /// [`Runner::load`] — the smile votes follow the threshold
    /// (`DecodeParams::smile_vote_floor`), the passes the pyramid. Settings
    /// out of range, or keys that shape the loaded weights, are refused,
    /// naming the model and the key.
    pub fn set_model(&mut self, model: ModelConfig) -> Result<()> {
        model.validate().map_err(|e| anyhow!("{}: {e}", self.source))?;
        if let Some(key) = self.spec.model.architecture_change(&model) {
            bail!("{}: key `{key}` shapes the loaded weights; it cannot be set over them", self.source);
        }
        self.params = model.decode_params();
        self.spec.model = model;
        let (width, height) = self.run_size();
        self.set_passes(width, height);
        Ok(())
    }

    /// Scales `image` into a frame of the run size and channel count. The
    /// pass's working memory is asked for first (a bound: every map of the
    /// first pass, [`Budget::activations`]), so that a photo whose maps the
    /// process cannot have is an error, not an abort in the pass (issue 90,
    /// round 7: a 9000x9000 photo under 400 MB).
    pub fn frame(&self, image: &image::DynamicImage) -> Result<Frame, grin_image::OutOfMemory> {
        let (w, h) = self.run_size();
        let frame = Frame::new(image, self.spec.channels, w, h)?;
        grin_image::reserved::<f32>(self.activations)?;
        Ok(frame)
    }

    /// Reads an image file within `bound` and makes its frame by the one
    /// photo path training's evaluation takes (`grin_image::letterbox_photo`
    /// is the same two calls, `read_image` then `letterbox_image`): the
    /// picture as decoded (EXIF orientation applied) and the frame. With
    /// [`PhotoSize::Own`] the run size becomes the photo's own first.
    pub fn read_photo(
        &mut self,
        path: &Path,
        bound: ImageBound,
        size: PhotoSize,
    ) -> Result<(image::DynamicImage, Frame), InputError> {
        let image = grin_image::read_image(path, bound)?;
        self.size_for(&image, size);
        let frame = self.frame(&image).map_err(|e| grin_image::too_large(path, &image, e))?;
        Ok((image, frame))
    }

    /// Sets the run size `size` asks for `image` (nothing for [`PhotoSize::RunSize`]).
    pub(crate) fn size_for(&mut self, image: &image::DynamicImage, size: PhotoSize) {
        if let PhotoSize::Own { max_pixels } = size {
            let (w, h) = own_size(image.width(), image.height(), max_pixels);
            if (w, h) != self.run_size() {
                self.set_passes(w, h);
            }
        }
    }

    /// Runs `reference` in the fast path's place (None: the fast path again).
    pub fn set_reference(&mut self, reference: Option<Reference>) {
        self.reference = reference;
    }

    /// The first pass's output points.
    pub fn points(&self) -> &Points {
        &self.passes[0]
    }

    /// The network's raw output for one frame at the run size, `[OUTPUTS,
    /// points]` row-major.
    pub fn raw(&self, frame: Frame) -> Vec<f32> {
        assert_eq!(
            (frame.width, frame.height, frame.channels),
            (self.passes[0].width, self.passes[0].height, self.spec.channels),
            "frame was made for another run size"
        );
        self.forward(frame)
    }

    fn forward(&self, frame: Frame) -> Vec<f32> {
        match &self.reference {
            None => self.fast.forward(Map {
                channels: frame.channels,
                height: frame.height,
                width: frame.width,
                data: frame.pixels,
            }),
            Some(reference) => reference(&frame.pixels, [frame.channels, frame.height, frame.width]),
        }
    }

    /// Detections in the frame's source-image pixels, best first: a pass at
    /// the run size, then passes on the frame halved for larger faces.
    pub fn detect(&self, frame: Frame) -> Vec<Detection> {
        self.detect_timed(frame).0
    }

    /// [`Runner::detect`], with the time its phases took: what a benchmark
    /// reports apart, so a peer's network is set against grin's.
    pub(crate) fn detect_timed(&self, mut frame: Frame) -> (Vec<Detection>, Phases) {
        let mapping = frame.mapping();
        let source = frame.source.take();
        let mut phases = Phases::default();
        let mut found = self.search(frame, &self.passes, &self.params, &mut phases);
        let look = self.spec.model.second_look;
        if let Some(source) = source.filter(|_| !look.is_off()) {
            let start = Instant::now();
            let side = look.side;
            let params = look.cut_params(&self.params);
            // Made at the first cut: most frames have no box to look at.
            let passes = std::cell::OnceCell::new();
            let whole = Letterbox::fit(side as u32, side as u32, side as u32, side as u32);
            let mut cuts = LookCuts::new(mapping.0, &source, side as u32);
            found = second_look(found, &look, &self.params, |windows, mirrored| {
                let passes = passes.get_or_init(|| pass_points(side, side, &params));
                cuts.view(windows, mirrored)
                    .iter()
                    .map(|cut| Frame::from_letterboxed(cut, whole, None))
                    .map(|frame| self.search(frame, passes, &params, &mut Phases::default()))
                    .collect()
            });
            phases.look += start.elapsed();
        }
        let start = Instant::now();
        let detections = found.into_iter().filter_map(|d| mapping.to_source(d)).collect();
        phases.decoding += start.elapsed();
        (detections, phases)
    }

    /// Every pass over `frame` (points `passes`, finest first), decoded and
    /// merged, in the frame's pixels.
    fn search(&self, frame: Frame, passes: &[Points], params: &DecodeParams, phases: &mut Phases) -> Vec<Detection> {
        let mut found = Vec::with_capacity(passes.len());
        let mut frame = Some(frame);
        for (k, points) in passes.iter().enumerate() {
            let start = Instant::now();
            let this = frame.take().expect("one frame per pass");
            if k + 1 < passes.len() {
                frame = Some(this.halved());
            }
            let raw = self.forward(this);
            let decoding = Instant::now();
            found.push(grin_net::decode(&raw, points, params));
            phases.network += decoding - start;
            phases.decoding += decoding.elapsed();
        }
        let start = Instant::now();
        let merged = merge_passes(found, params);
        phases.decoding += start.elapsed();
        merged
    }
}

/// Where one [`Runner::detect_timed`] spent its time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Phases {
    /// Every pyramid pass through the network (the halving between passes included).
    pub network: Duration,
    /// Decoding each pass's outputs, NMS and the merge of the passes.
    pub decoding: Duration,
    /// The second look at low-scoring boxes: their cuts, and the network
    /// and decoding on each (`grin_net::second_look`).
    pub look: Duration,
}

fn pass_points(width: usize, height: usize, params: &DecodeParams) -> Vec<Points> {
    pass_sizes(width, height, params.pyramid_above).into_iter().map(|(w, h)| Points::new(w, h)).collect()
}
