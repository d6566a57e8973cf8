//! Rejection-resampled class balance.

use crate::{ClassBalanceConfig, ClassBalancer, FeatureConfig, Pipeline, SceneClass, Split};

fn pipeline(targets: [f32; 3], workers: usize) -> Pipeline {
    let cfg = FeatureConfig {
        width: 64,
        height: 48,
        seed: 5,
        workers,
        balance: Some(ClassBalanceConfig { smiling: targets[0], non_smiling: targets[1], face_free: targets[2] }),
        ..FeatureConfig::default()
    };
    Pipeline::new(&cfg, Split::Train).unwrap()
}

fn check_targets(targets: [f32; 3]) {
    let p = pipeline(targets, 0);
    let sum: f32 = targets.iter().sum();
    let batch = p.batch(&(0..2000).collect::<Vec<u64>>()).unwrap();
    let mut seen = [0usize; 3];
    for i in 0..batch.len {
        seen[batch.sample(i).class().index()] += 1;
    }
    let balancer = p.balancer().unwrap();
    assert_eq!(balancer.counts(), seen.map(|n| n as u64), "the counters must match the output");
    let achieved = balancer.achieved();
    for class in SceneClass::ALL {
        let want = (targets[class.index()] / sum) as f64;
        let got = seen[class.index()] as f64 / 2000.0;
        assert!((got - want).abs() <= 0.05, "{class:?}: got {got:.3}, want {want:.3}");
        assert!((achieved[class.index()] - got).abs() < 1e-12);
    }
    let report = balancer.report();
    assert!(report.contains("balance over 2000 samples") && report.contains("face-free"), "{report}");
}

#[test]
fn equal_targets_are_met_within_five_percent() {
    check_targets([1.0, 1.0, 1.0]);
}

#[test]
fn skewed_targets_are_met_within_five_percent() {
    check_targets([0.2, 0.5, 0.3]);
}

#[test]
fn a_zero_target_class_never_appears() {
    let p = pipeline([1.0, 1.0, 0.0], 2);
    let batch = p.batch(&(0..300).collect::<Vec<u64>>()).unwrap();
    for i in 0..batch.len {
        assert_ne!(batch.sample(i).class(), SceneClass::FaceFree);
    }
}

#[test]
fn wanted_classes_follow_the_normalised_targets() {
    let b = ClassBalancer::new(&ClassBalanceConfig { smiling: 2.0, non_smiling: 1.0, face_free: 1.0 }, 9).unwrap();
    assert_eq!(b.targets(), [0.5, 0.25, 0.25]);
    let mut n = [0usize; 3];
    for i in 0..20000 {
        n[b.wanted(i).index()] += 1;
    }
    assert!((n[0] as f64 / 20000.0 - 0.5).abs() < 0.02, "{n:?}");
    assert!((n[2] as f64 / 20000.0 - 0.25).abs() < 0.02, "{n:?}");
    assert_eq!(b.wanted(17), b.wanted(17));
    assert_eq!(b.achieved(), [0.0; 3]);
}

#[test]
fn bad_targets_are_config_errors() {
    let err =
        ClassBalancer::new(&ClassBalanceConfig { smiling: -1.0, non_smiling: 1.0, face_free: 1.0 }, 0).unwrap_err();
    assert!(err.to_string().contains("features.balance.smiling"), "{err}");
    let err =
        ClassBalancer::new(&ClassBalanceConfig { smiling: 0.0, non_smiling: 0.0, face_free: 0.0 }, 0).unwrap_err();
    assert!(err.to_string().contains("features.balance"), "{err}");
}
