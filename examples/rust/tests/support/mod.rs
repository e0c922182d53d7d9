//! Test fixtures: one tiny checkpoint per test binary, generated at test time by tools/make-tiny-checkpoint from a
//! fresh seed (FLASHKV_TEST_SEED replays one; every assertion message prints it), and the two oracles: the numpy
//! reference (tests/reference, written from the spec) and the `flashkv run --json` program (itself checked against
//! the reference by tests/python/test_cli_run.py).
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

pub fn build_dir() -> PathBuf {
    std::env::var_os("FLASHKV_BUILD_DIR").map(PathBuf::from).unwrap_or_else(|| repository().join("build"))
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

pub fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        if let Ok(text) = std::env::var("FLASHKV_TEST_SEED") {
            return text.parse().expect("FLASHKV_TEST_SEED is an integer");
        }
        let mut bytes = [0u8; 4];
        File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).expect("read /dev/urandom");
        u64::from(u32::from_le_bytes(bytes))
    })
}

/// "seed N" for assertion messages, so a failure can be replayed with FLASHKV_TEST_SEED=N.
pub fn context() -> String {
    format!("seed {} (replay with FLASHKV_TEST_SEED={})", seed(), seed())
}

fn run_checked(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{}: cannot run {command:?}: {e}", context()));
    assert!(output.status.success(), "{}: {command:?} failed: {}", context(), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn make_checkpoint(config: &str, directory: &Path) {
    run_checked(
        Command::new(python())
            .arg(repository().join("tools/make-tiny-checkpoint"))
            .args(["--config", config, "--seed", &seed().to_string(), "--out"])
            .arg(directory)
            .arg("--overwrite"),
    );
}

/// The tiny-v41 checkpoint of this run (made once per test binary).
pub fn checkpoint() -> &'static Path {
    static DIRECTORY: OnceLock<PathBuf> = OnceLock::new();
    DIRECTORY.get_or_init(|| {
        let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tiny-v41-{}", std::process::id()));
        make_checkpoint("tiny-v41", &directory);
        directory
    })
}

/// splitmix64: a seeded stream of token ids, independent of the library's own generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(salt: u64) -> Rng {
        Rng(seed() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    pub fn prompt(&mut self, vocab: i64, length: usize) -> Vec<i32> {
        (0..length).map(|_| self.below(vocab as u64) as i32).collect()
    }
}

fn ids(tokens: &[i32]) -> String {
    tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

/// The integers of the JSON array under "tokens" (both oracles print a flat list of ints there).
fn json_tokens(json: &str) -> Vec<i32> {
    let key = json.find("\"tokens\"").unwrap_or_else(|| panic!("no \"tokens\" in {json}"));
    let open = key + json[key..].find('[').expect("tokens array");
    let close = open + json[open..].find(']').expect("tokens array end");
    json[open + 1..close].split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect()
}

/// Greedy tokens of `flashkv run` (faithful numerics, exact prefill, eos ignored).
pub fn cli_greedy(model: &Path, prompt: &[i32], n: usize) -> Vec<i32> {
    let out = run_checked(Command::new(build_dir().join("flashkv")).args(["run", "-m"]).arg(model).args([
        "--prompt-ids",
        &ids(prompt),
        "-n",
        &n.to_string(),
        "--ignore-eos",
        "--json",
    ]));
    json_tokens(&out)
}

/// Greedy tokens of the numpy reference (which never stops at eos).
pub fn reference_greedy(model: &Path, prompt: &[i32], n: usize, numerics: &str) -> Vec<i32> {
    let out = run_checked(
        Command::new(python())
            .current_dir(repository())
            .args(["-m", "tests.reference.run", "--model"])
            .arg(model)
            .args(["--prompt-ids", &ids(prompt), "-n", &n.to_string(), "--numerics", numerics])
            .args(["--prefill", "exact", "--json"]),
    );
    json_tokens(&out)
}
