//! A small builder over the ONNX protobuf messages: nodes with one output
//! each, named constants stored once, and the typed inputs and outputs.

use crate::pb::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto, AttributeProto, GraphProto,
    NodeProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::collections::HashSet;

/// One axis of an input's or output's shape.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dim {
    Fixed(usize),
    /// A named dynamic axis.
    Named(&'static str),
}

#[derive(Default)]
pub(crate) struct Graph {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    constants: HashSet<String>,
}

impl Graph {
    /// Adds `op` reading `inputs`; its one output is named `name`, as the node is.
    pub(crate) fn op(
        &mut self,
        op: &str,
        name: impl Into<String>,
        inputs: &[&str],
        attributes: Vec<AttributeProto>,
    ) -> String {
        let name = name.into();
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![name.clone()],
            name: Some(name.clone()),
            op_type: Some(op.into()),
            attribute: attributes,
            ..Default::default()
        });
        name
    }

    /// An f32 constant of shape `dims`; a name already given is not stored twice.
    pub(crate) fn floats(&mut self, name: impl Into<String>, dims: &[usize], values: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len(), "constant's shape and values");
        self.constant(name.into(), dims, DataType::Float, |t| t.float_data = values.to_vec())
    }

    /// An i64 vector constant, named by its values so that each is stored once.
    pub(crate) fn ints(&mut self, values: &[i64]) -> String {
        let name = format!("i64{values:?}");
        self.constant(name, &[values.len()], DataType::Int64, |t| t.int64_data = values.to_vec())
    }

    /// An i64 scalar constant (CumSum's axis), named by its value.
    pub(crate) fn int(&mut self, value: i64) -> String {
        self.constant(format!("i64({value})"), &[], DataType::Int64, |t| t.int64_data = vec![value])
    }

    fn constant(
        &mut self,
        name: String,
        dims: &[usize],
        kind: DataType,
        fill: impl FnOnce(&mut TensorProto),
    ) -> String {
        if self.constants.insert(name.clone()) {
            let mut tensor = TensorProto {
                dims: dims.iter().map(|&d| d as i64).collect(),
                data_type: Some(kind as i32),
                name: Some(name.clone()),
                ..Default::default()
            };
            fill(&mut tensor);
            self.initializers.push(tensor);
        }
        name
    }

    /// The graph, reading `inputs` and giving `outputs` (name, shape, documentation).
    pub(crate) fn finish(
        self,
        name: &str,
        inputs: &[(&str, &[Dim], &str)],
        outputs: &[(&str, &[Dim], &str)],
    ) -> GraphProto {
        let values =
            |list: &[(&str, &[Dim], &str)]| list.iter().map(|(n, dims, doc)| value_info(n, dims, doc)).collect();
        GraphProto {
            node: self.nodes,
            name: Some(name.into()),
            initializer: self.initializers,
            input: values(inputs),
            output: values(outputs),
            ..Default::default()
        }
    }
}

fn value_info(name: &str, dims: &[Dim], doc: &str) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match *d {
                Dim::Fixed(n) => tensor_shape_proto::dimension::Value::DimValue(n as i64),
                Dim::Named(s) => tensor_shape_proto::dimension::Value::DimParam(s.into()),
            }),
            ..Default::default()
        })
        .collect();
    let tensor = type_proto::Tensor { elem_type: Some(DataType::Float as i32), shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }),
        doc_string: Some(doc.into()),
        ..Default::default()
    }
}

pub(crate) fn int_attr(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

pub(crate) fn ints_attr(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}
