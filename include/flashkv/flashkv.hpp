// flashkv — the public C++ API in one include. docs/api.md walks through it with a runnable example.
//   Model     (model.hpp)     a loaded checkpoint; immutable, shareable
//   Session   (session.hpp)   one token timeline over one KV state; append, logits, sample, generate, rewind
//   KVHandle  (kv_handle.hpp) an immutable, shareable snapshot of a session's KV state
//   decode    (session.hpp)   one batched decode step over several sessions
//   Tokenizer (tokenizer.hpp)  byte-level BPE from tokenizer.json; Detokenizer for streaming text
//   ChatEncoder, ChatStreamParser (chat.hpp)  the DeepSeek-V4.1 chat prompt and output parsing
//   GenerateOptions (generate.hpp), SamplingParams (sampling.hpp), Error (error.hpp), config types
//   (config.hpp)
#pragma once

#include <flashkv/chat.hpp>
#include <flashkv/config.hpp>
#include <flashkv/error.hpp>
#include <flashkv/generate.hpp>
#include <flashkv/kv_handle.hpp>
#include <flashkv/model.hpp>
#include <flashkv/sampling.hpp>
#include <flashkv/session.hpp>
#include <flashkv/tokenizer.hpp>
