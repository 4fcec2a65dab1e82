// The Bench service's code, generated from bench.proto (a byte-identical
// copy of src/contract/bench.proto) at build time, as tonic's examples do;
// the server side only. prost-build runs `protoc` (Debian's, from the
// rust-build base) found on PATH, or the one PROTOC names.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(&["bench.proto"], &["."])?;
    Ok(())
}
