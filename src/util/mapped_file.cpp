#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace llms {

namespace {

std::string os_reason() { return std::strerror(errno); }

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    auto kind = errno == ENOENT ? Error::Kind::kNotFound : Error::Kind::kIo;
    throw Error(kind, "cannot open '" + path.string() + "': " + os_reason());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string reason = os_reason();
    ::close(fd);
    throw Error(Error::Kind::kIo, "cannot stat '" + path.string() + "': " + reason);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Error::Kind::kIo, "'" + path.string() + "' is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return MappedFile(nullptr, 0);
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  std::string reason = data == MAP_FAILED ? os_reason() : std::string();
  ::close(fd);  // the mapping keeps the file alive
  if (data == MAP_FAILED) {
    throw Error(Error::Kind::kIo, "cannot mmap '" + path.string() + "': " + reason);
  }
  return MappedFile(static_cast<const uint8_t*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace llms
