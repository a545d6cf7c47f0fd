#include "checkpoint/zip_archive.h"

#include <unzip.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "checkpoint/printable.h"

namespace glm::checkpoint {

namespace {

constexpr size_t kMaxEntries = size_t{1} << 20;
constexpr uint64_t kDeflateMaxRatio = 1032;  // deflate cannot expand more than this
constexpr size_t kReadChunk = size_t{1} << 20;
constexpr uint64_t kMax32 = 0xffffffffu;

uint64_t le(const uint8_t* b, int k) {
  uint64_t v = 0;
  for (int j = k - 1; j >= 0; --j) v = (v << 8) | b[j];
  return v;
}

// Debian 12's minizip (1.1) compares a central-directory record's 32-bit size and offset fields
// with (ZPOS64_T)(unsigned long)-1, which on LP64 is 2^64 - 1, so it never takes their 64-bit
// values from the ZIP64 extended-information extra field (id 0x0001) and leaves the 0xFFFFFFFF
// sentinels in place: every entry past 4 GB (or over 4 GB) would be unreadable. We apply that
// field ourselves. The fields appear in the spec's order, each only where the record holds the
// sentinel; a third 64-bit value is the local header's offset.
struct Zip64Info {
  bool used = false;
  bool has_offset = false;
  uint64_t local_header = 0;
};

bool apply_zip64_extra(const uint8_t* x, size_t n, unz_file_info64* fi, Zip64Info* z) {
  size_t p = 0;
  while (n - p >= 4) {
    const uint64_t id = le(x + p, 2);
    const size_t len = static_cast<size_t>(le(x + p + 2, 2));
    p += 4;
    if (len > n - p) return false;
    if (id == 1) {
      size_t q = p;
      const size_t end = p + len;
      if (fi->uncompressed_size == kMax32) {
        if (end - q < 8) return false;
        fi->uncompressed_size = le(x + q, 8);
        q += 8;
        z->used = true;
      }
      if (fi->compressed_size == kMax32) {
        if (end - q < 8) return false;
        fi->compressed_size = le(x + q, 8);
        q += 8;
        z->used = true;
      }
      if (end - q >= 8) {
        z->local_header = le(x + q, 8);
        z->has_offset = true;
        z->used = true;
      }
      return true;
    }
    p += len;
  }
  return true;
}

}  // namespace

// The in-memory "file" minizip reads through its I/O callbacks (zlib_filefunc64_def).
namespace {

// The in-memory "file" minizip reads through its I/O callbacks (zlib_filefunc64_def). A read
// past the end sets `error`, which minizip asks through zerror_file (without it, minizip takes
// a short read of its headers as zeros).
struct Stream {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
  bool error = false;
};

voidpf zip_open(voidpf opaque, const void* /*filename*/, int mode) {
  return (mode & ZLIB_FILEFUNC_MODE_READ) ? opaque : nullptr;
}

uLong zip_read(voidpf /*opaque*/, voidpf stream, void* buf, uLong n) {
  Stream* s = static_cast<Stream*>(stream);
  const uint64_t k = std::min<uint64_t>(n, s->pos >= s->size ? 0 : s->size - s->pos);
  if (k < n) s->error = true;
  if (k == 0) return 0;
  std::memcpy(buf, s->data + s->pos, static_cast<size_t>(k));
  s->pos += k;
  return static_cast<uLong>(k);
}

uLong zip_write(voidpf, voidpf, const void*, uLong) { return 0; }

ZPOS64_T zip_tell(voidpf /*opaque*/, voidpf stream) { return static_cast<Stream*>(stream)->pos; }

long zip_seek(voidpf /*opaque*/, voidpf stream, ZPOS64_T offset, int origin) {
  Stream* s = static_cast<Stream*>(stream);
  uint64_t base = 0;
  if (origin == ZLIB_FILEFUNC_SEEK_CUR) {
    base = s->pos;
  } else if (origin == ZLIB_FILEFUNC_SEEK_END) {
    base = s->size;
  } else if (origin != ZLIB_FILEFUNC_SEEK_SET) {
    return -1;
  }
  // minizip seeks backwards by passing a negative offset through the unsigned ZPOS64_T (as
  // fseeko would take it), so relative offsets are signed.
  const int64_t off = static_cast<int64_t>(offset);
  if (origin == ZLIB_FILEFUNC_SEEK_SET ? offset > s->size
                                       : (off < 0 ? static_cast<uint64_t>(-(off + 1)) >= base
                                                  : static_cast<uint64_t>(off) > s->size - base)) {
    return -1;
  }
  s->pos = origin == ZLIB_FILEFUNC_SEEK_SET ? offset : base + offset;  // wraps as intended
  return 0;
}

int zip_close(voidpf, voidpf) { return 0; }

int zip_error(voidpf /*opaque*/, voidpf stream) {
  return static_cast<Stream*>(stream)->error ? 1 : 0;
}

// Closes the minizip handle when parse() returns.
struct UnzCloser {
  unzFile f;
  ~UnzCloser() { unzClose(f); }
};

}  // namespace

ZipArchive::~ZipArchive() = default;

StatusOr<std::unique_ptr<ZipArchive>> ZipArchive::parse(const uint8_t* data, size_t size,
                                                        const std::string& label) {
  auto bad = [&](const std::string& m) { return bad_file(label + ": " + m); };
  auto z = std::unique_ptr<ZipArchive>(new ZipArchive());
  z->label_ = label;
  z->image_ = data;
  Stream stream;
  stream.data = data;
  stream.size = size;
  zlib_filefunc64_def io{};
  io.zopen64_file = zip_open;
  io.zread_file = zip_read;
  io.zwrite_file = zip_write;
  io.ztell64_file = zip_tell;
  io.zseek64_file = zip_seek;
  io.zclose_file = zip_close;
  io.zerror_file = zip_error;
  io.opaque = &stream;
  unzFile uf = unzOpen2_64(label.c_str(), &io);
  if (uf == nullptr) return bad("not a zip archive (no end-of-central-directory record)");
  UnzCloser closer{uf};

  std::vector<char> name(65536);
  std::vector<uint8_t> extra(65536);
  int err = unzGoToFirstFile(uf);
  for (; err == UNZ_OK; err = unzGoToNextFile(uf)) {
    if (z->entries_.size() >= kMaxEntries) return bad("more than 1M zip entries");
    unz_file_info64 fi{};
    if (unzGetCurrentFileInfo64(uf, &fi, name.data(), name.size(), extra.data(), extra.size(),
                                nullptr, 0) != UNZ_OK) {
      return bad("unreadable central directory record");
    }
    Zip64Info z64;
    if (!apply_zip64_extra(extra.data(), std::min<size_t>(fi.size_file_extra, extra.size()), &fi,
                           &z64)) {
      return bad("malformed ZIP64 extra field");
    }
    ZipEntry e;
    e.name.assign(name.data(), std::min<size_t>(fi.size_filename, name.size() - 1));
    e.method = static_cast<uint32_t>(fi.compression_method);
    e.size = fi.uncompressed_size;
    e.compressed_size = fi.compressed_size;
    e.crc32 = static_cast<uint32_t>(fi.crc);
    e.zip64 = z64.used;
    const std::string what = "zip entry " + printable(e.name);
    if (fi.flag & 1) return unsupported(label + ": " + what + " is encrypted");
    if (e.method != 0 && e.method != Z_DEFLATED) {
      return unsupported(label + ": " + what + " uses compression method " +
                         std::to_string(e.method) + " (only stored and deflate are read)");
    }
    if (!z64.has_offset) {
      int method = 0;
      int level = 0;
      if (unzOpenCurrentFile2(uf, &method, &level, /*raw=*/1) != UNZ_OK) {
        return bad(what + ": bad local header (truncated or corrupt file)");
      }
      e.data_offset = unzGetCurrentFileZStreamPos64(uf);
      unzCloseCurrentFile(uf);
    } else {
      // The local header past 4 GB, which minizip cannot reach (see apply_zip64_extra): check
      // its signature and name length, skip its name and extra field.
      const uint64_t h = z64.local_header;
      if (h > size || size - h < 30 || le(data + h, 4) != 0x04034b50 ||
          le(data + h + 26, 2) != fi.size_filename) {
        return bad(what + ": bad local header (truncated or corrupt file)");
      }
      e.data_offset = h + 30 + le(data + h + 26, 2) + le(data + h + 28, 2);
    }
    if (e.data_offset > size || e.compressed_size > size - e.data_offset) {
      return bad(what + ": data runs past the end of the file (truncated download?)");
    }
    if (e.method == 0) {
      if (e.size != e.compressed_size) return bad(what + ": stored entry with two sizes");
      e.data = data + e.data_offset;
    } else if (e.size > kDeflateMaxRatio * e.compressed_size + 1024) {
      return bad(what + ": claims more bytes than deflate can hold");
    }
    z->entries_.push_back(std::move(e));
  }
  if (err != UNZ_END_OF_LIST_OF_FILE) return bad("corrupt central directory");
  std::vector<const ZipEntry*> sorted;
  for (const ZipEntry& e : z->entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->name == sorted[i - 1]->name) {
      return bad("zip entry " + printable(sorted[i]->name) + " appears twice");
    }
  }
  return z;
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  for (const ZipEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Status ZipArchive::read(const ZipEntry& e, std::vector<uint8_t>* buf, const uint8_t** out) const {
  if (e.method == 0) {
    *out = e.data;
    return Status::Ok();
  }
  // Raw deflate straight from the image with zlib (minizip would need its 32-bit sizes).
  const std::string what = label_ + ": zip entry " + printable(e.name);
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return Status(ErrorCode::kInternal, "inflateInit2");
  const uint8_t* in = image_ + e.data_offset;
  uint64_t in_left = e.compressed_size;
  // Grow as bytes really come out, so a lying size field cannot make us allocate; one byte
  // beyond the promised size reveals a corrupt size field.
  buf->clear();
  size_t n = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_left > 0) {
      const uInt k = static_cast<uInt>(std::min<uint64_t>(in_left, uint64_t{1} << 30));
      zs.next_in = const_cast<Bytef*>(in);
      zs.avail_in = k;
      in += k;
      in_left -= k;
    }
    if (n == buf->size()) {
      if (n > e.size) break;
      buf->resize(n + (n == e.size ? 1 : std::min<uint64_t>(kReadChunk, e.size - n)));
    }
    zs.next_out = buf->data() + n;
    zs.avail_out = static_cast<uInt>(buf->size() - n);
    rc = inflate(&zs, Z_NO_FLUSH);
    n = buf->size() - zs.avail_out;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) break;  // input ran out
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) break;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) return bad_file(what + ": corrupt or truncated deflate data");
  if (n != e.size) return bad_file(what + ": inflates to a size other than its header says");
  buf->resize(n);
  if (crc32_z(0, buf->data(), n) != e.crc32)
    return bad_file(what + ": CRC mismatch (corrupt file)");
  *out = buf->data();
  return Status::Ok();
}

}  // namespace glm::checkpoint
