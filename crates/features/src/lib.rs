//! grin-features: the CPU feature pipeline. No Burn here.
pub mod config;
pub mod sample;

pub use config::{
    AugmentConfig, BalanceConfig, FeatureConfig, OnBadSample, PhotoCrops, SourceConfig, Split, SplitConfig,
};
pub use sample::{FaceBox, HostBatch, Sample, SceneClass, Smile, LABEL_IGNORE, LABEL_PADDING, MAX_BOXES};
pub mod error;
pub mod source;
pub use error::{BadInputKind, FeatureError, SkipCounts};
pub use source::{SampleRng, Source};
pub mod synthetic;
pub use synthetic::{SyntheticParams, SyntheticSource};
pub mod annotations;
pub mod crops;
pub use annotations::AnnotatedSource;
pub use crops::CropsSource;
pub mod mix;
pub mod photos;
pub use mix::MixSource;
pub use photos::{held_out_photos, photos_of_split, HeldOutPhotos, PhotoSource};
pub mod augment;
pub mod balance;
pub mod pipeline;
pub mod preview;
pub use balance::Balancer;
pub use pipeline::Pipeline;
pub mod bench;
