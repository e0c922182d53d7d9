//! The Rust wrapper against independent oracles on a tiny checkpoint generated for this run: greedy tokens equal the
//! numpy reference (clean numerics) and `flashkv run` (faithful); the session laws hold through the wrapper
//! (snapshot/restore, batched decode, rewind); every misuse is an Err with the C status and a message naming what
//! is wrong; handles outlive each other as documented; the hand-written FFI layout matches the library's.
mod support;

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use flashkv::{
    decode, ffi, Device, GenerateOptions, KvHandle, LoadOptions, Model, Numerics, Prefill, SamplingParams, Session,
    SessionOptions, Status, StopReason,
};
use support::{checkpoint, cli_greedy, context, reference_greedy, Rng};

fn load(numerics: Numerics) -> Model {
    let options = LoadOptions { numerics, threads: 1, ..Default::default() };
    Model::load(checkpoint(), &options).unwrap_or_else(|e| panic!("{}: load: {e}", context()))
}

fn session(model: &Model) -> Session {
    model.session(&SessionOptions::default()).expect("session")
}

fn greedy(max_tokens: i64) -> GenerateOptions {
    GenerateOptions { sampling: SamplingParams::greedy(), max_tokens, stop_at_eos: false, ..Default::default() }
}

fn vocab(model: &Model) -> i64 {
    model.config().expect("config").vocab_size
}

// ---- generation against the oracles -------------------------------------------------------------------------

#[test]
fn greedy_generation_equals_the_numpy_reference_in_clean_numerics() {
    let model = load(Numerics::Clean);
    let mut rng = Rng::new(1);
    let length = 5 + rng.below(20) as usize;
    let prompt = rng.prompt(vocab(&model), length);
    let generation = session(&model).generate(&prompt, &greedy(10)).expect("generate");
    let expected = reference_greedy(checkpoint(), &prompt, 10, "clean");
    assert_eq!(generation.tokens, expected, "{}, prompt {prompt:?}", context());
    assert_eq!(generation.stop_reason, StopReason::MaxTokens);
}

#[test]
fn greedy_generation_equals_flashkv_run_in_faithful_numerics() {
    let model = load(Numerics::Faithful);
    let mut rng = Rng::new(2);
    let length = 5 + rng.below(20) as usize;
    let prompt = rng.prompt(vocab(&model), length);
    let mut streamed = Vec::new();
    let mut s = session(&model);
    let generation = s
        .generate_streaming(&prompt, &greedy(10), |token| {
            streamed.push(token);
            true
        })
        .expect("generate");
    let expected = cli_greedy(checkpoint(), &prompt, 10);
    let context = format!("{}, prompt {prompt:?}", context());
    assert_eq!(generation.tokens, expected, "{context}");
    assert_eq!(streamed, expected, "{context}: the streamed tokens are the returned ones");
    let held = s.tokens().expect("tokens");
    assert_eq!(held[..prompt.len()], prompt[..], "{context}");
    assert_eq!(held[prompt.len()..], expected[..], "{context}");
}

#[test]
fn a_stop_token_ends_generation_and_is_kept() {
    let model = load(Numerics::Faithful);
    let prompt = Rng::new(3).prompt(vocab(&model), 9);
    let free = session(&model).generate(&prompt, &greedy(6)).expect("generate");
    let stop = free.tokens[3];
    let first = free.tokens.iter().position(|&t| t == stop).unwrap();
    let options = GenerateOptions { stop_tokens: vec![stop], ..greedy(6) };
    let stopped = session(&model).generate(&prompt, &options).expect("generate");
    assert_eq!(stopped.tokens, free.tokens[..=first], "{}", context());
    assert_eq!(stopped.stop_reason, StopReason::StopToken);
}

// ---- session laws through the wrapper -------------------------------------------------------------------------

#[test]
fn a_restored_snapshot_continues_like_the_original_session() {
    let model = load(Numerics::Faithful);
    let prompt = Rng::new(4).prompt(vocab(&model), 11);
    let mut original = session(&model);
    original.append(&prompt).expect("append");
    let snapshot = original.kv().expect("kv");
    assert_eq!(snapshot.tokens().unwrap(), prompt);
    assert!(snapshot.bytes().unwrap() > 0);
    let continued = original.generate(&[], &greedy(5)).expect("generate");

    let mut restored = session(&model);
    restored.restore(&snapshot.fork().expect("fork")).expect("restore");
    assert_eq!(restored.generate(&[], &greedy(5)).expect("generate"), continued, "{}", context());
}

#[test]
fn batched_decode_equals_appending_one_by_one() {
    let model = load(Numerics::Clean);
    let mut rng = Rng::new(5);
    let (p, q) = (rng.prompt(vocab(&model), 7), rng.prompt(vocab(&model), 12));
    let next = rng.prompt(vocab(&model), 2);
    let (mut a, mut b) = (session(&model), session(&model));
    a.append(&p).unwrap();
    b.append(&q).unwrap();
    decode(&mut [&mut a, &mut b], &next).expect("decode");

    let (mut a1, mut b1) = (session(&model), session(&model));
    a1.append(&[p.clone(), vec![next[0]]].concat()).unwrap();
    b1.append(&[q.clone(), vec![next[1]]].concat()).unwrap();
    for (batched, alone) in [(&a, &a1), (&b, &b1)] {
        let (x, y) = (batched.logits().unwrap(), alone.logits().unwrap());
        assert_eq!(x.len() as i64, vocab(&model));
        let scale = y.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = x.iter().zip(&y).fold(0f32, |m, (u, v)| m.max((u - v).abs()));
        assert!(worst <= 1e-5 * scale, "{}: batched logits differ by {worst} (scale {scale})", context());
    }
}

#[test]
fn rewind_returns_to_the_earlier_timeline_and_sampling_is_reproducible() {
    let model = load(Numerics::Faithful);
    let prompt = Rng::new(6).prompt(vocab(&model), 8);
    let mut s = session(&model);
    s.append(&prompt).unwrap();
    let logits = s.logits().unwrap();
    let params = SamplingParams { temperature: 0.9, top_k: 50, seed: support::seed(), ..Default::default() };
    let drawn = s.sample(&params).unwrap();
    assert_eq!(s.sample(&params).unwrap(), drawn, "{}: same params, same draw", context());
    assert!((0..vocab(&model) as i32).contains(&drawn));
    s.generate(&[], &greedy(3)).unwrap();
    assert_eq!(s.len().unwrap(), 11);
    s.rewind(3).unwrap();
    assert_eq!(s.tokens().unwrap(), prompt);
    assert_eq!(s.logits().unwrap(), logits, "{}", context());
}

#[test]
fn a_model_is_shared_by_sessions_on_several_threads() {
    let model = Arc::new(load(Numerics::Faithful));
    let prompt = Rng::new(7).prompt(vocab(&model), 6);
    let expected = session(&model).generate(&prompt, &greedy(4)).unwrap().tokens;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (model, prompt) = (Arc::clone(&model), prompt.clone());
            thread::spawn(move || session(&model).generate(&prompt, &greedy(4)).unwrap().tokens)
        })
        .collect();
    for worker in workers {
        assert_eq!(worker.join().unwrap(), expected, "{}", context());
    }
}

// ---- ownership: Drop frees, handles outlive each other as documented ------------------------------------------

#[test]
fn sessions_and_snapshots_outlive_their_model_and_each_other() {
    let model = load(Numerics::Faithful);
    let prompt = Rng::new(8).prompt(vocab(&model), 6);
    let expected = session(&model).generate(&prompt, &greedy(4)).unwrap().tokens;
    let mut s = session(&model);
    s.append(&prompt).unwrap();
    let snapshot: KvHandle = s.kv().unwrap();
    drop(model);
    assert_eq!(s.generate(&[], &greedy(4)).unwrap().tokens, expected, "{}", context());
    drop(s);
    let fork = snapshot.fork().unwrap();
    drop(snapshot);
    assert_eq!(fork.tokens().unwrap(), prompt);
}

#[test]
fn freeing_null_is_a_no_op() {
    // SAFETY: the header documents NULL as a no-op for every *_free.
    unsafe {
        ffi::fkv_model_free(std::ptr::null_mut());
        ffi::fkv_session_free(std::ptr::null_mut());
        ffi::fkv_kv_free(std::ptr::null_mut());
    }
}

// ---- errors: status + message, never a crash ------------------------------------------------------------------

#[test]
fn a_missing_checkpoint_is_not_found_and_names_the_path() {
    let path = checkpoint().join("no-such-dir");
    let error = Model::load(&path, &LoadOptions::default()).expect_err("load of a missing directory");
    assert_eq!(error.status(), Status::NotFound, "{error}");
    assert!(error.message().contains("no-such-dir"), "{error}");
    assert_eq!(error.to_string(), format!("flashkv not_found: {}", error.message()));
}

#[test]
fn a_broken_config_is_invalid_config_and_names_the_file() {
    let directory = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("broken-{}", std::process::id()));
    fs::create_dir_all(&directory).unwrap();
    fs::write(directory.join("config.json"), "{\"vocab_size\": ").unwrap();
    let error = Model::load(&directory, &LoadOptions::default()).expect_err("load of a broken config");
    fs::remove_dir_all(&directory).unwrap();
    assert_eq!(error.status(), Status::InvalidConfig, "{error}");
    assert!(error.message().contains("config.json"), "{error}");
}

#[test]
fn bad_load_options_are_refused() {
    let nul = Model::load("bad\0path", &LoadOptions::default()).expect_err("NUL in path");
    assert_eq!(nul.status(), Status::InvalidArgument, "{nul}");
    let cuda = Model::load(checkpoint(), &LoadOptions { device: Device::Cuda, ..Default::default() });
    assert_eq!(cuda.expect_err("cuda").status(), Status::Unsupported);
    let chunk = Model::load(checkpoint(), &LoadOptions { prefill_chunk: 0, ..Default::default() });
    let chunk = chunk.expect_err("prefill_chunk 0");
    assert_eq!(chunk.status(), Status::InvalidArgument, "{chunk}");
    assert!(chunk.message().contains("prefill_chunk"), "{chunk}");
}

#[test]
fn a_token_outside_the_vocabulary_is_refused_and_leaves_the_session_unchanged() {
    let model = load(Numerics::Faithful);
    let mut s = session(&model);
    s.append(&[3, 4]).unwrap();
    let bad = vocab(&model) as i32 + Rng::new(9).below(1000) as i32;
    let error = s.append(&[5, bad]).expect_err("out-of-vocabulary token");
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    assert!(error.message().contains(&bad.to_string()), "{error}");
    assert_eq!(s.tokens().unwrap(), vec![3, 4]);
    assert_eq!(s.append(&[]).expect_err("empty append").status(), Status::InvalidArgument);
    assert_eq!(s.append(&[-1]).expect_err("negative id").status(), Status::InvalidArgument);
}

#[test]
fn misuse_of_a_session_is_an_error_not_a_crash() {
    let model = load(Numerics::Faithful);
    let mut s = session(&model);
    assert_eq!(s.logits().expect_err("logits of an empty session").status(), Status::InvalidArgument);
    assert_eq!(s.sample(&SamplingParams::default()).expect_err("sample empty").status(), Status::InvalidArgument);
    s.append(&[7, 8, 9]).unwrap();
    assert_eq!(s.rewind(4).expect_err("rewind past the start").status(), Status::InvalidArgument);
    assert_eq!(s.len().unwrap(), 3, "a refused rewind changes nothing");
    let top_p = s.sample(&SamplingParams { top_p: 0.0, ..Default::default() }).expect_err("top_p 0");
    assert!(top_p.message().contains("top_p"), "{top_p}");
    let negative = GenerateOptions { max_tokens: -1, ..greedy(0) };
    assert_eq!(s.generate(&[], &negative).expect_err("max_tokens -1").status(), Status::InvalidArgument);
    let stop = GenerateOptions { stop_tokens: vec![vocab(&model) as i32], ..greedy(2) };
    assert_eq!(s.generate(&[], &stop).expect_err("stop token out of range").status(), Status::InvalidArgument);
    let mut other = session(&model);
    let error = decode(&mut [&mut s, &mut other], &[1]).expect_err("decode with one token for two sessions");
    assert_eq!(error.status(), Status::InvalidArgument);
    let bad = vocab(&model) as i32;
    let error = decode(&mut [&mut s, &mut other], &[1, bad]).expect_err("decode of a token outside the vocabulary");
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    assert!(error.message().contains(&bad.to_string()), "{error}");
    assert_eq!((s.len().unwrap(), other.len().unwrap()), (3, 0), "a refused batch changes no session");
}

#[test]
fn a_snapshot_of_another_load_is_refused() {
    let (first, second) = (load(Numerics::Faithful), load(Numerics::Faithful));
    let mut s = session(&first);
    s.append(&[1, 2, 3]).unwrap();
    let snapshot = s.kv().unwrap();
    let error = session(&second).restore(&snapshot).expect_err("restore across loads");
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
}

#[test]
fn callbacks_cancel_and_the_session_keeps_what_was_appended() {
    let model = load(Numerics::Faithful);
    let prompt = Rng::new(10).prompt(vocab(&model), 6);
    let mut s = session(&model);
    let mut seen = 0;
    let error = s
        .generate_streaming(&prompt, &greedy(8), |_| {
            seen += 1;
            seen < 3
        })
        .expect_err("cancelled generation");
    assert_eq!(error.status(), Status::Cancelled, "{error}");
    assert_eq!(s.len().unwrap(), prompt.len() as i64 + 2, "the cancelling token is not appended");

    let chunked = model.session(&SessionOptions { prefill_chunk: 2, prefill: Some(Prefill::Exact) }).unwrap();
    let mut chunked = chunked;
    let mut progress = Vec::new();
    chunked
        .append_with_progress(&prompt, |done, total| {
            progress.push((done, total));
            true
        })
        .unwrap();
    assert_eq!(progress, vec![(2, 6), (4, 6), (6, 6)]);
    let mut fresh = model.session(&SessionOptions { prefill_chunk: 2, prefill: None }).unwrap();
    let error = fresh.append_with_progress(&prompt, |done, _| done < 4).expect_err("cancelled prefill");
    assert_eq!(error.status(), Status::Cancelled);
    assert_eq!(fresh.len().unwrap(), 4, "the chunks done are kept");
}

#[test]
fn a_panicking_callback_cancels_the_call_and_the_panic_resumes_after_it() {
    let model = load(Numerics::Faithful);
    let mut s = session(&model);
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let _ = s.generate_streaming(&[4, 5, 6], &greedy(4), |_| panic!("from the callback"));
    }));
    let payload = outcome.expect_err("the panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"from the callback"));
    assert_eq!(s.len().unwrap(), 3, "the session stays usable");
    assert_eq!(s.generate(&[], &greedy(2)).unwrap().tokens.len(), 2);
}

#[test]
fn a_log_callback_can_cancel_a_load() {
    let mut lines = Vec::new();
    let error = Model::load_with_log(checkpoint(), &LoadOptions::default(), |level, message| {
        lines.push((level, message.to_string()));
        false
    })
    .expect_err("a load whose log callback returns false");
    assert_eq!(error.status(), Status::Cancelled, "{error}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].1.contains(checkpoint().to_str().unwrap()), "{lines:?}");
    let mut kept = 0;
    Model::load_with_log(checkpoint(), &LoadOptions::default(), |_, _| {
        kept += 1;
        true
    })
    .expect("a load whose log callback returns true");
    assert!(kept >= 1);
}

// ---- the hand-written FFI against the library ------------------------------------------------------------------

#[test]
fn struct_layouts_match_the_library() {
    fn filled<T>(init: unsafe extern "C" fn(*mut T) -> i32) -> (u32, usize) {
        let mut raw = std::mem::MaybeUninit::<T>::zeroed();
        // SAFETY: a writable T; init writes struct_size, the first u32 of every options struct.
        assert_eq!(unsafe { init(raw.as_mut_ptr()) }, ffi::FKV_OK);
        (unsafe { *(raw.as_ptr() as *const u32) }, std::mem::size_of::<T>())
    }
    for (written, size) in [
        filled(ffi::fkv_load_options_init),
        filled(ffi::fkv_session_options_init),
        filled(ffi::fkv_sampling_params_init),
        filled(ffi::fkv_generate_options_init),
    ] {
        assert_eq!(written as usize, size);
    }
    let model = load(Numerics::Faithful);
    let config = model.config().unwrap();
    assert_eq!((config.vocab_size, config.num_hidden_layers, config.eos_token_id), (512, 8, 1));
    let memory = model.memory().unwrap();
    assert_eq!(memory.weight_storage, "fp32, dequantized at load");
    assert_eq!(model.load_options().unwrap().threads, 1);
    assert!(model.global_kv_bytes(1000).unwrap() > model.global_kv_bytes(10).unwrap());
}

#[test]
fn defaults_are_the_documented_ones() {
    let load = LoadOptions::default();
    assert_eq!(
        (load.device, load.threads, load.numerics, load.prefill, load.prefill_chunk),
        (Device::Cpu, 0, Numerics::Faithful, Prefill::Exact, 512)
    );
    assert_eq!(SessionOptions::default(), SessionOptions { prefill: None, prefill_chunk: 0 });
    let sampling = SamplingParams::default();
    assert_eq!((sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p), (1.0, 0, 1.0, 0.0));
    assert_eq!((sampling.repetition_penalty, sampling.presence_penalty, sampling.frequency_penalty), (1.0, 0.0, 0.0));
    let generate = GenerateOptions::default();
    assert_eq!((generate.max_tokens, generate.stop_at_eos, generate.stop_tokens.len()), (256, true, 0));
}

#[test]
fn status_codes_and_names_are_the_headers() {
    let names = [
        "invalid_argument",
        "invalid_config",
        "invalid_checkpoint",
        "not_found",
        "io",
        "unsupported",
        "device",
        "out_of_memory",
        "cancelled",
        "internal",
    ];
    for (raw, name) in (1..).zip(names) {
        let status = Status::from_raw(raw);
        assert_eq!((status.raw(), status.name()), (raw, name));
    }
    assert_eq!(Status::from_raw(77), Status::Unknown(77));
    assert_eq!(Status::Unknown(77).name(), "unknown");
    assert_eq!(flashkv::abi_version(), ffi::FKV_ABI_VERSION);
    let path = std::ffi::CString::new(checkpoint().to_str().unwrap()).unwrap();
    let mut raw = std::ptr::null_mut();
    // SAFETY: valid path and out-pointer; NULL options mean defaults.
    let status = unsafe { ffi::fkv_model_load(2 << 16, path.as_ptr(), std::ptr::null(), &mut raw) };
    assert_eq!((status, raw.is_null()), (ffi::FKV_ERR_UNSUPPORTED, true), "a newer ABI major is refused at load");
    assert!(!flashkv::version().is_empty());
}

#[test]
fn the_readme_example_is_in_the_docs_verbatim() {
    let root = support::repository();
    let example = fs::read_to_string(root.join("examples/rust/examples/readme.rs")).unwrap();
    let docs = fs::read_to_string(root.join("docs/embedding-rust-go.md")).unwrap();
    assert!(
        docs.contains(&format!("```rust\n{example}```\n")),
        "docs/embedding-rust-go.md lost examples/rust/examples/readme.rs"
    );
}
