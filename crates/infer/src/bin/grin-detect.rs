//! grin-detect: finds faces and smiles in images with a trained grin model
//! (see `grin_infer::cli` for the command line and its exit status).

fn main() -> std::process::ExitCode {
    grin_infer::cli::main()
}
