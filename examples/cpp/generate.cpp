// flashkv C++ API in one page: load a checkpoint, prefill a prompt, stream generated tokens, snapshot the KV
// state and continue two forks from it, then advance both forks in one batched decode step.
//
//   flashkv_example_cpp CHECKPOINT_DIR [TOKEN_ID ...]
//
// Make a checkpoint with: tools/make-tiny-checkpoint --config tiny-v41 --seed 1 --out /tmp/tiny
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <flashkv/flashkv.hpp>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR [TOKEN_ID ...]\n", argv[0]);
    return 2;
  }
  std::vector<int32_t> prompt;
  for (int i = 2; i < argc; ++i) prompt.push_back(static_cast<int32_t>(std::atoi(argv[i])));
  if (prompt.empty()) prompt = {5, 17, 300, 42, 7};

  try {
    flashkv::LoadOptions load;
    load.numerics = flashkv::Numerics::kFaithful;  // the checkpoint's storage formats and cast points
    const flashkv::Model model = flashkv::Model::load(argv[1], load);
    const flashkv::ModelMemory memory = model.memory();
    std::printf(
        "model: %d layers, vocab %lld; weights %llu B (%s); KV %.1f B/token + %llu B window/session\n",
        model.config().num_hidden_layers, static_cast<long long>(model.vocab_size()),
        static_cast<unsigned long long>(memory.resident_weight_bytes), memory.weight_storage.c_str(),
        memory.report.global_kv_bytes_per_token,
        static_cast<unsigned long long>(memory.report.window_bytes_per_session));

    // Greedy generation, streamed. Returning false from the callback would cancel (flashkv::Error
    // kCancelled).
    flashkv::Session session(model);
    flashkv::GenerateOptions options;
    options.sampling.temperature = 0.0f;
    options.max_tokens = 8;
    std::printf("greedy:");
    const flashkv::GenerateResult result = session.generate(prompt, options, [](int32_t token) {
      std::printf(" %d", token);
      std::fflush(stdout);
      return true;
    });
    std::printf("  (%zu tokens, session holds %lld tokens in %lld B)\n", result.tokens.size(),
                static_cast<long long>(session.length()), static_cast<long long>(session.kv_bytes()));

    // Snapshot, then two sessions continue from it with different seeds.
    const flashkv::KVHandle snapshot = session.kv();
    flashkv::Session a(model), b(model);
    a.restore(snapshot);
    b.restore(snapshot.fork());
    flashkv::SamplingParams sampling;
    sampling.temperature = 0.8f;
    sampling.top_p = 0.95f;
    sampling.seed = 1;
    const int32_t next_a = a.sample(sampling);
    sampling.seed = 2;
    const int32_t next_b = b.sample(sampling);

    // One batched forward appends one token to each session.
    flashkv::Session* batch[] = {&a, &b};
    const int32_t next[] = {next_a, next_b};
    flashkv::decode(batch, next);
    std::printf("forks: a +%d, b +%d; both at %lld tokens\n", next_a, next_b,
                static_cast<long long>(a.length()));

    // Rewinding the fork's step gives back the snapshot's timeline.
    a.rewind(1);
    std::printf("a after rewind(1): %lld tokens, same as the snapshot: %s\n",
                static_cast<long long>(a.length()),
                a.length() == static_cast<int64_t>(snapshot.tokens().size()) ? "yes" : "no");
    return 0;
  } catch (const flashkv::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", std::string(flashkv::error_code_name(e.code())).c_str(),
                 e.what());
    return 1;
  }
}
