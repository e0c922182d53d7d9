// Token ids from Python: a sequence of ints or a 1-D integer numpy array, checked before it reaches the C++
// API so that nothing is silently truncated to int32 (numpy's own casts wrap around) and floats or bools are
// refused.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <pybind11/pybind11.h>

namespace flashkv::python {

// Throws flashkv::Error(kInvalidArgument) naming `what` (e.g. "Session.append: ids") and the position of a
// value outside int32, or the type when `ids` is not a 1-D sequence of integers. Range checks against the
// vocabulary are the C++ API's. Needs the GIL.
std::vector<int32_t> to_token_ids(pybind11::handle ids, std::string_view what);

}  // namespace flashkv::python
