// flashkv from C++ (README): flashkv_readme_cpp CHECKPOINT_DIR -- greedy tokens of a prompt, streamed.
#include <cstdio>
#include <vector>

#include <flashkv/flashkv.hpp>

int main(int argc, char** argv) try {
  const flashkv::Model model = flashkv::Model::load(argc > 1 ? argv[1] : "", flashkv::LoadOptions{});
  flashkv::Session session(model);
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 7};
  flashkv::GenerateOptions options;
  options.sampling.temperature = 0.0f;  // greedy
  options.max_tokens = 8;
  session.generate(prompt, options, [](int32_t token) {
    std::printf("%d ", token);
    return true;  // false cancels
  });
  std::printf("\n%lld tokens, %lld B of KV state\n", static_cast<long long>(session.length()),
              static_cast<long long>(session.kv_bytes()));
} catch (const flashkv::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
