//! The detector: a depthwise-separable backbone tapped at strides 8, 16 and
//! 32, with one small head per level (and, with `model.top_down`, the
//! stride-16 features fused into the stride-8 head's input). Every output
//! location predicts a face logit, four box distances and a smile logit.

use crate::backend::DetectorBackend;
use crate::layers::{ConvBn, DwSep, FeatureMap};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::conv::Conv2d;
use burn::nn::BatchNorm;
use burn::tensor::backend::Backend;
use burn::tensor::module::avg_pool2d;
use burn::tensor::Tensor;
use grin_net::{decode, is_tapped, merge_passes, pass_sizes, DecodeParams, Detection, DetectorSpec, FoldedDetector};
use grin_net::{Points, Weights, STRIDES};
use grin_terms::output::{DISTANCE, FACE, LOG_DISTANCE_RANGE, SMILE};
use head::{Head, TopDown};

/// Builds a detector from its spec: `spec.init::<B>(device)`.
pub trait InitDetector {
    /// The detector [`DetectorSpec::architecture`] states, its weights
    /// drawn when first read.
    fn init<B: Backend>(&self, device: &B::Device) -> Detector<B>;

    /// A fresh model with every weight drawn now, from `seed` alone: what a
    /// training run starts from.
    fn init_seeded<B: Backend>(&self, seed: u64, device: &B::Device) -> Detector<B> {
        crate::seeded::seeded::<B, _>(device, seed, || {
            let model = self.init(device);
            crate::seeded::draw_now(&model);
            model
        })
    }
}

impl InitDetector for DetectorSpec {
    fn init<B: Backend>(&self, device: &B::Device) -> Detector<B> {
        let arch = self.architecture();
        let blocks =
            arch.blocks.iter().map(|[depthwise, pointwise]| DwSep::new(depthwise, pointwise, device)).collect();
        let heads = arch.heads.iter().map(|[depthwise, pointwise, out]| Head::new(depthwise, pointwise, out, device));
        let heads = heads.collect();
        let top_down = arch.top_down.map(|lateral| TopDown::new(&lateral, device));
        Detector { stem: ConvBn::new(&arch.stem, device), blocks, heads, top_down }
    }
}

#[derive(Module, Debug)]
pub struct Detector<B: Backend> {
    stem: ConvBn<B>,
    blocks: Vec<DwSep<B>>,
    heads: Vec<Head<B>>,
    /// Last: a model file written before it existed holds no such field
    /// (`file.rs` reads those as `None`).
    top_down: Option<TopDown<B>>,
}

/// Raw network output, `[batch, OUTPUTS, points]`, points in [`Points`] order.
#[derive(Debug, Clone)]
pub struct DetectorOutput<B: Backend> {
    pub raw: Tensor<B, 3>,
}

impl<B: Backend> DetectorOutput<B> {
    pub(crate) fn face_logits(&self) -> Tensor<B, 2> {
        self.raw.clone().narrow(1, FACE, 1).squeeze_dim(1)
    }

    /// Box distances (left, top, right, bottom) in pixels, `[batch, 4, points]`.
    pub fn distances(&self, strides: Tensor<B, 3>) -> Tensor<B, 3> {
        // exp keeps distances positive; the clamp keeps an early bad step
        // from overflowing; multiplying by the stride makes one output scale
        // serve every level.
        let (lo, hi) = LOG_DISTANCE_RANGE;
        self.raw.clone().narrow(1, DISTANCE, 4).clamp(lo, hi).exp() * strides
    }

    pub(crate) fn smile_logits(&self) -> Tensor<B, 2> {
        self.raw.clone().narrow(1, SMILE, 1).squeeze_dim(1)
    }
}

impl<B: DetectorBackend> Detector<B> {
    /// `x`: `[batch, channels, height, width]`, values in 0..1.
    pub fn forward(&self, x: Tensor<B, 4>) -> DetectorOutput<B> {
        let levels = self.walk(
            FeatureMap::from_image(x),
            |layer, x| layer.forward(x),
            |fuse, into, from| fuse.forward(into, from),
            |head, x| head.forward(x),
        );
        DetectorOutput { raw: Tensor::cat(levels, 2) }
    }

    /// The weights as plain data with BatchNorm folded in, for an engine
    /// that runs without Burn (the Pi's); see [`grin_net::FoldedDetector`].
    pub fn folded(&self, spec: &DetectorSpec) -> FoldedDetector {
        self.weights(spec).folded()
    }
}

impl<B: Backend> Detector<B> {
    /// Every parameter tensor as plain data, in file order, with `spec`
    /// (the one this detector was built from).
    pub fn weights(&self, spec: &DetectorSpec) -> Weights {
        // A clone of a Burn parameter not yet drawn draws its own random
        // values: without this, a fresh model's weights would be other
        // values than the model goes on to use.
        crate::seeded::draw_now(self);
        struct Collect(Vec<grin_net::Tensor>);
        impl<B: Backend> ModuleVisitor<B> for Collect {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let values = param.val().into_data().convert::<f32>().to_vec::<f32>().expect("f32 values");
                let tensor = grin_net::Tensor { id: param.id.serialize(), shape: param.dims().to_vec(), values };
                self.0.push(tensor);
            }
        }
        let mut collect = Collect(Vec::new());
        self.visit(&mut collect);
        let weights = Weights { spec: spec.clone(), tensors: collect.0 };
        debug_assert!(weights.fit(), "a detector built from its spec");
        weights
    }

    /// Whether the finest head reads the stride-16 features too (`model.top_down`).
    pub(crate) fn has_top_down(&self) -> bool {
        self.top_down.is_some()
    }

    /// The same model with a new top-down fusion (zero weights: it computes
    /// what it did), unless it has one: a model trained without fusion is
    /// where a fused one's fine-tuning starts.
    pub fn with_top_down(mut self, spec: &DetectorSpec, device: &B::Device) -> Self {
        if let (None, Some(lateral)) = (&self.top_down, spec.architecture().top_down) {
            self.top_down = Some(TopDown::new(&lateral, device));
        }
        self
    }

    /// This grey model reading colour: its first conv's weights split
    /// between R, G and B by `shares` (each channel's share of the luma it
    /// was trained on, summing to 1), so that it computes on a colour photo
    /// what it computed on the photo's luma. A grey model is where a colour
    /// one's fine-tuning starts. `None` where the model does not read one
    /// channel.
    pub fn with_colour_input(mut self, shares: [f32; 3]) -> Option<Self> {
        let [out, 1, kh, kw] = self.stem.conv.weight.dims() else {
            return None;
        };
        let w = self.stem.conv.weight.val();
        let split = shares.map(|share| w.clone().mul_scalar(share));
        // Detached: a leaf of its own, as a loaded weight is.
        self.stem.conv.weight = Param::from_tensor(Tensor::cat(split.to_vec(), 1).reshape([out, 3, kh, kw]).detach());
        Some(self)
    }

    /// This model with `wider`'s stride-8 head (a model of the same trunk
    /// whose `model.fine_head` is wider, freshly drawn) holding this one's
    /// head in its first channels: it computes what it did, and the new
    /// channels start with no say ([`Head::widened`]). A model trained with
    /// a narrower head is where a wider one's fine-tuning starts.
    pub fn with_fine_head_of(mut self, mut wider: Detector<B>) -> Result<Self, String> {
        let (old, new) = (&self.heads[0], &wider.heads[0]);
        if old.input_channels() != new.input_channels() || old.mix_channels() > new.mix_channels() {
            return Err(format!(
                "a stride-8 head of {} -> {} channels cannot widen into one of {} -> {}",
                old.input_channels(),
                old.mix_channels(),
                new.input_channels(),
                new.mix_channels()
            ));
        }
        let (old, wide) = (self.heads.remove(0), wider.heads.swap_remove(0));
        self.heads.insert(0, old.widened(wide));
        Ok(self)
    }

    /// Parameter tensors, in module order.
    pub(crate) fn num_params_tensors(&self) -> usize {
        struct Count(usize);
        impl<B: Backend> burn::module::ModuleVisitor<B> for Count {
            fn visit_float<const D: usize>(&mut self, _: &Param<Tensor<B, D>>) {
                self.0 += 1;
            }
        }
        let mut count = Count(0);
        self.visit(&mut count);
        count.0
    }

    /// The one statement of how the layers connect, which `forward`, `macs`
    /// and `folded` all take: `layer` carries the state through each trunk
    /// conv in turn, `fuse` (with `top_down`) joins the stride-16 tap into
    /// the stride-8 one, and each tapped state goes through its level's
    /// `head`.
    fn walk<'a, S: Clone, L>(
        &'a self,
        input: S,
        mut layer: impl FnMut(&'a ConvBn<B>, S) -> S,
        fuse: impl FnOnce(&'a TopDown<B>, S, S) -> S,
        mut head: impl FnMut(&'a Head<B>, S) -> L,
    ) -> Vec<L> {
        let mut x = layer(&self.stem, input);
        let mut taps = Vec::with_capacity(self.heads.len());
        for (i, block) in self.blocks.iter().enumerate() {
            for conv in block.layers() {
                x = layer(conv, x);
            }
            if is_tapped(i) {
                taps.push(x.clone());
            }
        }
        debug_assert_eq!(taps.len(), STRIDES.len());
        if let Some(top_down) = &self.top_down {
            taps[0] = fuse(top_down, taps[0].clone(), taps[1].clone());
        }
        self.heads.iter().zip(taps).map(|(h, tap)| head(h, tap)).collect()
    }

    /// Every trainable conv in one list, the trunk in run order and then
    /// each head's convs, finest level first, and where each head sits in
    /// it: the order the CPU step (grin-cpu-step) keeps its layers and
    /// gradients in.
    pub fn trainables(&self) -> (Vec<Trainable<'_, B>>, Vec<HeadSpan>) {
        fn conv_bn<B: Backend>(layer: &ConvBn<B>) -> Trainable<'_, B> {
            Trainable::ConvBn { conv: &layer.conv, norm: &layer.norm, relu: layer.relu }
        }
        // The state: the list entry the next layer reads.
        let list = std::cell::RefCell::new(Vec::new());
        let heads = self.walk(
            None,
            |layer, _| {
                list.borrow_mut().push(conv_bn(layer));
                Some(list.borrow().len() - 1)
            },
            |top_down, into, from| {
                let mut list = list.borrow_mut();
                list.push(Trainable::Lateral { conv: &top_down.lateral, from: from.expect("a tap") });
                list.push(Trainable::AddUp { skip: into.expect("a tap") });
                Some(list.len() - 1)
            },
            |head, tap| (tap.expect("a tap"), head),
        );
        let mut list = list.into_inner();
        let spans = heads
            .into_iter()
            .map(|(after, head)| {
                let first = list.len();
                list.extend(head.mix.layers().map(conv_bn));
                list.push(Trainable::Out(&head.out));
                HeadSpan { after, first, len: list.len() - first }
            })
            .collect();
        (list, spans)
    }
}

/// One trainable conv: with its BatchNorm and activation (trunk and head
/// mixing layers), or a head's output conv with its bias.
pub enum Trainable<'a, B: Backend> {
    ConvBn {
        conv: &'a Conv2d<B>,
        norm: &'a BatchNorm<B>,
        relu: bool,
    },
    Out(&'a Conv2d<B>),
    /// The fusion's 1x1 conv (with bias), reading entry `from`.
    Lateral {
        conv: &'a Conv2d<B>,
        from: usize,
    },
    /// The fusion's upsample-and-add of the entry before it into entry `skip`.
    AddUp {
        skip: usize,
    },
}

/// A head's place in [`Detector::trainables`]' list: it reads the output of
/// entry `after` (a trunk conv) and is entries `first..first + len`.
pub struct HeadSpan {
    pub after: usize,
    pub first: usize,
    pub len: usize,
}

/// Runs the detector on a batch `[B, C, H, W]` (0..1) and decodes each
/// image: one pass at the batch's size, then passes on the batch halved
/// (`pyramid.rs`) for faces too large for the first.
pub fn detect<B: DetectorBackend>(
    model: &Detector<B>,
    images: Tensor<B, 4>,
    params: &DecodeParams,
) -> Vec<Vec<Detection>> {
    let [batch, _, height, width] = images.dims();
    let mut passes: Vec<Vec<Vec<Detection>>> = vec![Vec::new(); batch];
    let mut images = images;
    for (k, (w, h)) in pass_sizes(width, height, params.pyramid_above).into_iter().enumerate() {
        if k > 0 {
            images = avg_pool2d(images, [2, 2], [2, 2], [0, 0], true, false);
        }
        let points = Points::new(w, h);
        let raw = model.forward(images.clone()).raw;
        let [_, outputs, n] = raw.dims();
        let values = raw.into_data().convert::<f32>().to_vec::<f32>().expect("f32 output");
        for (b, image_passes) in passes.iter_mut().enumerate() {
            image_passes.push(decode(&values[b * outputs * n..(b + 1) * outputs * n], &points, params));
        }
    }
    passes.into_iter().map(|p| merge_passes(p, params)).collect()
}

mod head;
pub(crate) mod level_shift;
#[cfg(test)]
mod tests;
