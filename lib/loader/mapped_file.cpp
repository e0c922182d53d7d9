#include "loader/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <flashkv/error.hpp>

namespace flashkv::loader {
namespace {

[[noreturn]] void fail_os(const std::filesystem::path& path, std::string_view action, int error_number) {
  fail(ErrorCode::kIo, "cannot {} '{}': {}", action, path.string(), std::strerror(error_number));
}

// Closes the descriptor on every path out of the constructor, including the throwing ones.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_os(path, "open", errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail_os(path, "stat", errno);
  if (!S_ISREG(info.st_mode)) fail(ErrorCode::kIo, "cannot map '{}': not a regular file", path.string());
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) return;  // mmap refuses length 0; an empty span says the same thing
  void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED) {
    size_ = 0;
    fail_os(path, "map", errno);
  }
  data_ = static_cast<const std::byte*>(mapping);
}

MappedFile::~MappedFile() {
  unmap();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace flashkv::loader
