// ModelCore — what one Model::load produced: the engine and the options it was
// loaded with. Shared (const) by every Model handle, Session and KVHandle of
// that load, so the weights live as long as any of them.
#pragma once

#include <memory>
#include <optional>

#include <flashkv/config.hpp>
#include <flashkv/model.hpp>
#include <flashkv/tokenizer.hpp>

#include "runtime/engine.hpp"

namespace flashkv::detail {

struct ModelCore {
  std::unique_ptr<runtime::Engine> engine;
  LoadOptions options;
  MemoryReport memory;
  std::optional<Tokenizer> tokenizer;  // when the checkpoint directory has tokenizer.json
};

}  // namespace flashkv::detail
