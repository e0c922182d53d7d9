// The opaque C handles of flashkv.h: each owns one object of the C++ API, so the C functions are thin
// translations and the C++ API's ownership rules (shared weights, shared snapshots) carry over unchanged.
#pragma once

#include <flashkv/flashkv.hpp>

#include "flashkv.h"

struct fkv_model {
  flashkv::Model model;
  // Computed once at load: fkv_memory.weight_storage points into it for the handle's life.
  flashkv::ModelMemory memory;
};

struct fkv_session {
  flashkv::Session session;
};

struct fkv_kv {
  flashkv::KVHandle handle;
};
