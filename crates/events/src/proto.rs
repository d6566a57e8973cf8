//! The fields of TensorBoard's `event.proto` and `summary.proto` that a
//! scalar log uses, with their field numbers: prost's derive writes the
//! same bytes `protoc` would for these messages.

/// `tensorflow.Event`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// `oneof what`: the first event of a file names the format.
    #[prost(string, optional, tag = "3")]
    pub file_version: Option<String>,
    /// `oneof what`: a step's values.
    #[prost(message, optional, tag = "5")]
    pub summary: Option<Summary>,
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<Value>,
}

/// `tensorflow.Summary.Value`, scalar case.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Value {
    #[prost(string, tag = "1")]
    pub tag: String,
    /// `oneof value`: a scalar.
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}
