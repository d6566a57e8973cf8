//! Generates the ONNX protobuf messages from the vendored `proto/onnx.proto`
//! (ONNX's own file, from the `onnx` 1.23 Python package) with prost, using
//! the protoc that `protoc-bin-vendored` ships.

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("protoc-bin-vendored has no protoc for this host");
    prost_build::Config::new()
        .protoc_executable(protoc)
        // The .proto's comments would become doc comments, and rustdoc would
        // try to run the examples in them as tests.
        .disable_comments(["."])
        .compile_protos(&["proto/onnx.proto"], &["proto"])
        .expect("proto/onnx.proto compiles");
}
