//! Records the detector's two ops on Burn's autodiff graph, with backward
//! passes that call the inner backend's gradient methods.

use super::{DetectorBackend, Geometry, NormOutput, NormSettings};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::NodeId;
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

#[derive(Debug)]
struct Depthwise3x3Backward;

impl<B: DetectorBackend> Backward<B, 2> for Depthwise3x3Backward {
    type State = (NodeId, NodeId, Geometry);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_x, node_weight] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, weight_state, geometry) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x_state);
        let weight = checkpointer.retrieve_node_output::<FloatTensor<B>>(weight_state);
        if let Some(node) = node_x {
            let dx = B::depthwise3x3_x_backward(x.clone(), weight.clone(), grad.clone(), geometry);
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_weight {
            grads.register::<B>(node.id, B::depthwise3x3_weight_backward(x, weight, grad, geometry));
        }
    }
}

#[derive(Debug)]
struct BatchNormBackward;

/// The inputs are checkpointed like any op's; the output and batch
/// statistics are kept as they are, since the backward pass needs exactly
/// the values the forward pass used.
#[derive(Debug, Clone)]
struct NormState<B: DetectorBackend> {
    x: NodeId,
    gamma: NodeId,
    forward: NormOutput<B>,
    settings: NormSettings,
}

impl<B: DetectorBackend> Backward<B, 3> for BatchNormBackward {
    type State = NormState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_x, node_gamma, node_beta] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let NormState { x, gamma, forward, settings } = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let gamma = checkpointer.retrieve_node_output::<FloatTensor<B>>(gamma);
        let (dx, dgamma, dbeta) = B::batch_norm_train_backward(x, gamma, forward, grad, settings);
        for (node, grad) in [(node_x, dx), (node_gamma, dgamma), (node_beta, dbeta)] {
            if let Some(node) = node {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

impl<B: DetectorBackend, C: CheckpointStrategy> DetectorBackend for Autodiff<B, C> {
    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        match Depthwise3x3Backward.prepare::<C>([x.node.clone(), weight.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let out = B::depthwise3x3(x.primitive, weight.primitive, geometry);
                prep.finish((x_state, weight_state, geometry), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::depthwise3x3(x.primitive, weight.primitive, geometry)),
        }
    }

    fn batch_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormOutput<Self> {
        let nodes = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
        let forward = B::batch_norm_train(x.primitive.clone(), gamma.primitive.clone(), beta.primitive, settings);
        // The statistics only feed the running averages: no gradient flows.
        let (mean, var) = (Self::from_inner(forward.mean.clone()), Self::from_inner(forward.var.clone()));
        let output = match BatchNormBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let (x, gamma) = (prep.checkpoint(&x), prep.checkpoint(&gamma));
                let output = forward.output.clone();
                prep.finish(NormState { x, gamma, forward, settings }, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(forward.output),
        };
        NormOutput { output, mean, var }
    }
}
