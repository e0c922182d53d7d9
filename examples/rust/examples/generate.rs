//! flashkv from Rust in one page: load a checkpoint, stream greedy tokens, snapshot the KV state, continue two
//! sessions from the snapshot with different seeds, advance both in one batched decode step, rewind.
//!
//!   cargo run --example generate -- CHECKPOINT_DIR [TOKEN_ID ...]
//!
//! Make a checkpoint with: tools/make-tiny-checkpoint --config tiny-v41 --seed 1 --out /tmp/tiny
use std::io::Write;
use std::process::ExitCode;

use flashkv::{decode, GenerateOptions, LoadOptions, Model, SamplingParams, Session, SessionOptions};

fn run(checkpoint: &str, prompt: &[i32]) -> flashkv::Result<()> {
    let model = Model::load(checkpoint, &LoadOptions::default())?;
    let config = model.config()?;
    let memory = model.memory()?;
    println!(
        "model: {} layers, vocab {}; weights {} B ({}); KV {:.1} B/token + {} B window/session",
        config.num_hidden_layers,
        config.vocab_size,
        memory.resident_weight_bytes,
        memory.weight_storage,
        memory.global_kv_bytes_per_token,
        memory.window_bytes_per_session
    );

    // Greedy generation, streamed; returning false from the closure would cancel (Status::Cancelled).
    let mut session = model.session(&SessionOptions::default())?;
    let options = GenerateOptions { sampling: SamplingParams::greedy(), max_tokens: 8, ..Default::default() };
    print!("greedy:");
    let generation = session.generate_streaming(prompt, &options, |token| {
        print!(" {token}");
        std::io::stdout().flush().is_ok()
    })?;
    println!(
        "  ({} tokens, {:?}; session holds {} tokens in {} B)",
        generation.tokens.len(),
        generation.stop_reason,
        session.len()?,
        session.kv_bytes()?
    );

    // Snapshot, then two sessions continue from it with different seeds.
    let snapshot = session.kv()?;
    let mut a = Session::new(&model, &SessionOptions::default())?;
    let mut b = Session::new(&model, &SessionOptions::default())?;
    a.restore(&snapshot)?;
    b.restore(&snapshot.fork()?)?;
    let mut sampling = SamplingParams { temperature: 0.8, top_p: 0.95, seed: 1, ..Default::default() };
    let next_a = a.sample(&sampling)?;
    sampling.seed = 2;
    let next_b = b.sample(&sampling)?;

    // One batched forward appends one token to each session.
    decode(&mut [&mut a, &mut b], &[next_a, next_b])?;
    println!("forks: a +{next_a}, b +{next_b}; both at {} tokens", a.len()?);

    a.rewind(1)?;
    println!("a after rewind(1) equals the snapshot: {}", a.tokens()? == snapshot.tokens()?);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: {} CHECKPOINT_DIR [TOKEN_ID ...]", args[0]);
        return ExitCode::from(2);
    }
    let mut prompt: Vec<i32> = Vec::new();
    for arg in &args[2..] {
        match arg.parse() {
            Ok(token) => prompt.push(token),
            Err(_) => {
                eprintln!("not a token id: {arg}");
                return ExitCode::from(2);
            }
        }
    }
    if prompt.is_empty() {
        prompt = vec![5, 17, 300, 42, 7];
    }
    match run(&args[1], &prompt) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
