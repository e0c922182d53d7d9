#include "runtime/window_ring.hpp"

#include <algorithm>
#include <cstring>

namespace flashkv::runtime {

WindowRing make_window_ring(backend::RecordFormat format, int64_t dim, int64_t rope_dim, int64_t capacity) {
  WindowRing ring;
  ring.format = format;
  ring.dim = dim;
  ring.rope_dim = rope_dim;
  ring.capacity = capacity;
  ring.records.assign(static_cast<size_t>(capacity) * ring.row_bytes(), 0);
  ring.positions.assign(static_cast<size_t>(capacity), -1);
  return ring;
}

void window_history(const WindowRing& ring, int64_t start, int64_t window, std::vector<float>& rows,
                    std::vector<int64_t>& positions) {
  rows.clear();
  positions.clear();
  const backend::RecordRows all{ring.format, ring.records.data(), ring.capacity, ring.dim, ring.rope_dim};
  for (int64_t p = std::max<int64_t>(0, start - window + 1); p < start; ++p) {
    const int64_t slot = p % ring.capacity;
    if (ring.positions[static_cast<size_t>(slot)] != p) continue;
    rows.resize(rows.size() + static_cast<size_t>(ring.dim));
    all.dequantize(slot, rows.data() + rows.size() - static_cast<size_t>(ring.dim));
    positions.push_back(p);
  }
}

void append_window_rows(WindowRing& ring, const uint8_t* records, int64_t start, int64_t count) {
  const size_t bytes = ring.row_bytes();
  for (int64_t i = std::max<int64_t>(0, count - ring.capacity); i < count; ++i) {
    const int64_t position = start + i;
    std::memcpy(ring.slot(position), records + static_cast<size_t>(i) * bytes, bytes);
    ring.positions[static_cast<size_t>(position % ring.capacity)] = position;
  }
}

void truncate_window(WindowRing& ring, int64_t length) {
  for (int64_t& position : ring.positions) {
    if (position >= length) position = -1;
  }
}

}  // namespace flashkv::runtime
