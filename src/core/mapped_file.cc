#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace glm {

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && size_ > 0) munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const ErrorCode code = errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kBadFile;
    return Status(code, "cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad_file(path + " is not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      f.size_ = 0;
      if (err == ENOMEM) {
        return Status(ErrorCode::kOutOfMemory,
                      "cannot map " + path + ": out of address space or memory (check ulimit -v)");
      }
      return bad_file("cannot map " + path + ": " + std::strerror(err));
    }
    f.data_ = static_cast<uint8_t*>(p);
  }
  f.fd_ = fd;
  return f;
}

void MappedFile::copy_out(const void* p, size_t n, void* out) const {
  const auto* src = static_cast<const uint8_t*>(p);
  auto* dst = static_cast<uint8_t*>(out);
  // Compared as integers: pointers into different objects have no order.
  const uintptr_t at = reinterpret_cast<uintptr_t>(src), begin = reinterpret_cast<uintptr_t>(data_);
  if (fd_ >= 0 && at >= begin && at - begin <= size_ && n <= size_ - (at - begin)) {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, dst + done, n - done, static_cast<off_t>(at - begin + done));
      if (r > 0) {
        done += static_cast<size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else {
        break;  // the rest from the mapping
      }
    }
    src += done;
    dst += done;
    n -= done;
  }
  if (n > 0) std::memcpy(dst, src, n);
}

void MappedFile::prefetch() const {
  if (data_ != nullptr && size_ > 0) madvise(data_, size_, MADV_WILLNEED);
}

void MappedFile::release(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // madvise takes page-aligned addresses: computed as integers, turned back into a pointer.
  if (end > begin) {
    madvise(reinterpret_cast<void*>(begin), end - begin,  // NOLINT(performance-no-int-to-ptr)
            MADV_DONTNEED);
  }
}

}  // namespace glm
