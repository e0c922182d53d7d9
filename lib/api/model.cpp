// Model::load and the Model accessors. The CPU engine is the only backend of
// this build; cuda is refused here rather than silently running on the CPU.
#include <flashkv/chat.hpp>
#include <flashkv/error.hpp>
#include <flashkv/model.hpp>
#include <flashkv/tokenizer.hpp>

#include "api/model_core.hpp"

namespace flashkv {

namespace {

void check_load_options(const LoadOptions& options) {
  if (options.threads < 0)
    fail(ErrorCode::kInvalidArgument, "LoadOptions.threads must be >= 0, got {}", options.threads);
  if (options.prefill_chunk <= 0) {
    fail(ErrorCode::kInvalidArgument, "LoadOptions.prefill_chunk must be > 0, got {}", options.prefill_chunk);
  }
  if (options.device == Device::kCuda) {
    fail(ErrorCode::kUnsupported,
         "device cuda: the CUDA backend does not run whole models yet (it "
         "arrives in a later milestone); "
         "load with device cpu");
  }
}

runtime::Numerics engine_numerics(Numerics numerics) {
  return numerics == Numerics::kClean ? runtime::Numerics::kClean : runtime::Numerics::kFaithful;
}

}  // namespace

Model Model::load(const std::filesystem::path& checkpoint_dir, const LoadOptions& options) {
  check_load_options(options);
  runtime::EngineOptions engine_options;
  engine_options.numerics = engine_numerics(options.numerics);
  engine_options.threads = options.threads;
  auto core = std::make_shared<detail::ModelCore>();
  core->engine = runtime::load_cpu_engine(checkpoint_dir, engine_options);
  core->options = options;
  core->memory = make_memory_report(core->engine->config(), core->engine->plan());
  if (std::filesystem::exists(checkpoint_dir / "tokenizer.json"))
    core->tokenizer = Tokenizer::load(checkpoint_dir);
  return Model(std::move(core));
}

const ModelConfig& Model::config() const {
  return core_->engine->config();
}
const LayerPlan& Model::plan() const {
  return core_->engine->plan();
}
const LoadOptions& Model::options() const {
  return core_->options;
}
int64_t Model::vocab_size() const {
  return config().vocab_size;
}
int64_t Model::max_tokens() const {
  return config().max_position_embeddings;
}

bool Model::has_tokenizer() const {
  return core_->tokenizer.has_value();
}
const Tokenizer& Model::tokenizer() const {
  if (!core_->tokenizer) fail(ErrorCode::kNotFound, "the checkpoint directory has no tokenizer.json");
  return *core_->tokenizer;
}
std::vector<int32_t> Model::encode_chat(const std::vector<ChatMessage>& messages,
                                        const ChatOptions& options) const {
  return ChatEncoder::encode(tokenizer(), messages, options);
}

ModelMemory Model::memory() const {
  ModelMemory memory;
  memory.report = core_->memory;
  // The CPU engine dequantizes every parameter of the backbone to fp32 at load
  // (engine.hpp).
  memory.resident_weight_bytes = core_->memory.parameters.total * sizeof(float);
  memory.weight_storage = "fp32, dequantized at load";
  return memory;
}

const char* device_name(Device device) noexcept {
  return device == Device::kCuda ? "cuda" : "cpu";
}
const char* numerics_name(Numerics numerics) noexcept {
  return numerics == Numerics::kClean ? "clean" : "faithful";
}
const char* prefill_mode_name(PrefillMode mode) noexcept {
  return mode == PrefillMode::kCed ? "ced" : "exact";
}

}  // namespace flashkv
