//! Top-down fusion's weightless half, forward and backward: the lateral
//! conv's output (half the resolution) repeated over 2x2 blocks and added
//! to the stride-8 map the finest head reads. The lateral conv itself is a
//! plain pointwise layer.
//!
//! Layout as everywhere in the step: `[channels][batch][height * width]`,
//! so each (channel, image) plane is one contiguous run.

use super::layer::{Act, Input, InputGrad, LayerGrads};
use grin_net::add_upsampled;

/// `act.y = skip + upsampled(x)`, planes of `act`'s size.
pub(crate) fn forward(x: Input, skip: &[f32], act: &mut Act) {
    let planes = skip.len() / (act.height * act.width);
    assert!(x.maps.is_none(), "fusion reads a lateral conv's output as stored");
    debug_assert_eq!(x.values.len(), planes * x.height * x.width, "coarse input size");
    act.y.copy_from_slice(skip);
    add_upsampled(&mut act.y, x.values, planes, act.height, act.width);
}

/// The adjoint: `act.dy` goes to `skip` as it is, and to the coarse input
/// summed over each 2x2 block (the blocks cut at an odd edge sum less).
pub(crate) fn backward(act: &Act, x: Input, dx: InputGrad, skip: InputGrad) -> LayerGrads {
    let (h, w) = (act.height, act.width);
    let (ch, cw) = (x.height, x.width);
    debug_assert_eq!((ch, cw), (h.div_ceil(2), w.div_ceil(2)), "coarse map size");
    accumulate(skip, &act.dy);
    let mut coarse = vec![0.0f32; dx.values.len()];
    for (fine, out) in act.dy.chunks_exact(h * w).zip(coarse.chunks_exact_mut(ch * cw)) {
        for (y, row) in fine.chunks_exact(w).enumerate() {
            let target = &mut out[(y / 2) * cw..][..cw];
            for (x, v) in row.iter().enumerate() {
                target[x / 2] += v;
            }
        }
    }
    accumulate(dx, &coarse);
    LayerGrads { weight: Vec::new(), bias: None, norm: None, stats: None }
}

fn accumulate(into: InputGrad, values: &[f32]) {
    if into.accumulate {
        into.values.iter_mut().zip(values).for_each(|(a, b)| *a += b);
    } else {
        into.values.copy_from_slice(values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(h: usize, w: usize, planes: usize) -> Act {
        Act { height: h, width: w, batch: 1, y: vec![0.0; planes * h * w], ..Act::default() }
    }

    #[test]
    fn forward_repeats_each_coarse_value_over_its_block_and_backward_is_its_adjoint() {
        // A 3x3 fine map over a 2x2 coarse one: the last row and column are cut.
        let coarse = [1.0, 2.0, 3.0, 4.0];
        let skip = [10.0; 9];
        let mut a = act(3, 3, 1);
        forward(Input::new(&coarse, 2, 2), &skip, &mut a);
        assert_eq!(a.y, [11.0, 11.0, 12.0, 11.0, 11.0, 12.0, 13.0, 13.0, 14.0]);
        // <up(c), g> = <c, down(g)> for every c and g: the adjoint.
        a.dy = (0..9).map(|v| v as f32).collect();
        let (mut dx, mut dskip) = (vec![0.0; 4], vec![1.0; 9]);
        backward(
            &a,
            Input::new(&coarse, 2, 2),
            InputGrad { values: &mut dx, accumulate: false },
            InputGrad { values: &mut dskip, accumulate: true },
        );
        assert_eq!(dx, [0.0 + 1.0 + 3.0 + 4.0, 2.0 + 5.0, 6.0 + 7.0, 8.0]);
        assert_eq!(dskip, (1..10).map(|v| v as f32).collect::<Vec<_>>());
        let up: f32 = a.y.iter().zip(&skip).map(|(y, s)| y - s).zip(&a.dy).map(|(u, g)| u * g).sum();
        let down: f32 = coarse.iter().zip(&dx).map(|(c, d)| c * d).sum();
        assert_eq!(up, down);
    }
}
