// SessionState and Snapshot — the insides of Session and KVHandle: one engine
// SequenceState plus the logits of its last row (kept so that a restored or
// forked state can sample without a recomputation).
#pragma once

#include <memory>
#include <vector>

#include <flashkv/model.hpp>
#include <flashkv/session.hpp>

#include "api/model_core.hpp"
#include "runtime/sequence_state.hpp"

namespace flashkv::detail {

struct SessionState {
  Model model;
  const ModelCore* core = nullptr;  // model's core; kept alive by `model`
  SessionOptions options;
  std::unique_ptr<runtime::SequenceState> state;
  std::vector<float> logits;  // last row; empty when the session is empty
};

struct Snapshot {
  Model model;
  std::unique_ptr<runtime::SequenceState> state;
  std::vector<float> logits;
};

}  // namespace flashkv::detail
