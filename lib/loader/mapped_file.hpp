// A read-only memory mapping of a whole file (RAII).
//
// Ownership: the object owns the mapping; bytes() stays valid until it is destroyed or moved from
// (moving transfers the mapping without remapping, so spans taken before a move stay valid as long as
// the moved-to object lives). The file descriptor is closed right after mapping.
// Errors: kIo naming the path and the OS reason (missing file, not a regular file, permission, mmap).
// An empty file maps to an empty span. Threading: immutable after construction; share freely.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace flashkv::loader {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  void unmap() noexcept;

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace flashkv::loader
