// The two output formats of `flashkv info`: a human-readable report and a JSON document.
// Both are documented in docs/config.md; keep them stable (tests and scripts parse them).
#pragma once

#include <string>

#include "checkpoint_description.hpp"

namespace flashkv::cli {

std::string format_info_text(const CheckpointDescription& description);
std::string format_info_json(const CheckpointDescription& description);

}  // namespace flashkv::cli
