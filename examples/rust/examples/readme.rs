// Greedy generation from a checkpoint: cargo run --example readme -- CHECKPOINT_DIR
use flashkv::{GenerateOptions, LoadOptions, Model, SamplingParams, SessionOptions};

fn main() -> Result<(), flashkv::Error> {
    let path = std::env::args().nth(1).expect("usage: readme CHECKPOINT_DIR");
    let model = Model::load(path, &LoadOptions::default())?;
    let mut session = model.session(&SessionOptions::default())?;
    let options = GenerateOptions { sampling: SamplingParams::greedy(), max_tokens: 8, ..Default::default() };
    let generation = session.generate_streaming(&[5, 17, 300, 42, 7], &options, |token| {
        println!("token {token}");
        true // false cancels
    })?;
    println!("{} tokens, stopped by {:?}", generation.tokens.len(), generation.stop_reason);
    Ok(())
}
