// numpy's default generator, reproduced bit for bit for one purpose: the Engram hash multipliers of spec §7
// step 3 (numpy PCG64 default_rng(seed).integers(0, high, count)), which a config not pinned anywhere still
// needs.
//
// Implements SeedSequence(seed) (pool of 4 words, hashmix/mix), PCG64 (128-bit LCG, XSL-RR output) seeded
// from generate_state(4, uint64), and Generator.integers for int64 with Lemire's bounded method (numpy's
// default, unmasked). Checked against numpy by tests/python/test_engine_engram.py. Errors: kUnsupported when
// high <= 2^32 (numpy then draws buffered 32-bit values; no V4.1 config gets there).
#pragma once

#include <cstdint>
#include <vector>

namespace flashkv::runtime {

std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t high, int count);

}  // namespace flashkv::runtime
