// load_cpu_engine: placeholder until the CPU engine lands (it throws kUnsupported so callers link and fail
// cleanly).
#include <flashkv/error.hpp>

#include "runtime/engine.hpp"

namespace flashkv::runtime {

std::unique_ptr<Engine> load_cpu_engine(const std::filesystem::path& checkpoint_dir, const EngineOptions&) {
  fail(ErrorCode::kUnsupported, "load_cpu_engine({}): the CPU engine is not built yet", checkpoint_dir.string());
}

}  // namespace flashkv::runtime
