#include "proto/session_file.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "zlib.h"

namespace gdn::wire {

namespace {

constexpr size_t kChecksumBytes = 4;

uint32_t Checksum(const char* data, size_t size) {
  // Chunks are below 2 GiB (the decoder refuses larger files), so one call.
  return static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size)));
}

uint32_t LoadLittleEndian32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

}  // namespace

void AppendSessionFileChunk(const v1::SessionChunk& chunk, std::string* out) {
  uint8_t length[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(chunk.ByteSizeLong()), length);
  out->append(reinterpret_cast<const char*>(length), end - length);
  const size_t start = out->size();
  chunk.AppendToString(out);
  const uint32_t crc = Checksum(out->data() + start, out->size() - start);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(crc >> (8 * i) & 0xff));
}

std::string EncodeSessionFile(const std::vector<v1::SessionChunk>& chunks) {
  std::string out(kSessionFileMagic);
  for (const v1::SessionChunk& c : chunks) AppendSessionFileChunk(c, &out);
  return out;
}

absl::StatusOr<std::vector<v1::SessionChunk>> DecodeSessionFile(
    absl::string_view data, absl::string_view name) {
  const absl::string_view magic = data.substr(0, kSessionFileMagic.size());
  const bool checksummed = magic == kSessionFileMagic;
  if (!checksummed && magic != kSessionFileMagicV1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not a gdn session snapshot (no ", kSessionFileMagic, " or ",
        kSessionFileMagicV1, " magic)"));
  }
  const size_t body = data.size() - kSessionFileMagic.size();
  if (body > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": larger than 2 GiB, not a session snapshot"));
  }
  const char* const body_data = data.data() + kSessionFileMagic.size();
  google::protobuf::io::CodedInputStream coded(reinterpret_cast<const uint8_t*>(body_data),
                                               static_cast<int>(body));
  coded.SetTotalBytesLimit(static_cast<int>(body));
  std::vector<v1::SessionChunk> chunks;
  while (!coded.ExpectAtEnd()) {
    uint32_t size = 0;
    if (!coded.ReadVarint32(&size)) {
      return absl::DataLossError(
          absl::StrCat(name, ": truncated after chunk ", chunks.size()));
    }
    const size_t at = static_cast<size_t>(coded.CurrentPosition());
    const size_t record = size + (checksummed ? kChecksumBytes : 0);
    if (record > body - at) {
      return absl::DataLossError(absl::StrCat(
          name, ": chunk ", chunks.size(), " claims ", size,
          " bytes, more than the file holds (truncated or corrupt)"));
    }
    // The checksum before the parse: damage is named as such, and no
    // damaged bytes are parsed.
    if (checksummed) {
      const uint32_t stored = LoadLittleEndian32(body_data + at + size);
      const uint32_t computed = Checksum(body_data + at, size);
      if (stored != computed) {
        return absl::DataLossError(absl::StrFormat(
            "%s: chunk %d fails its checksum (stored %08x, computed %08x): the file is damaged",
            name, chunks.size(), stored, computed));
      }
    }
    const auto limit = coded.PushLimit(static_cast<int>(size));
    v1::SessionChunk c;
    if (!c.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage() ||
        coded.BytesUntilLimit() != 0) {
      return absl::DataLossError(absl::StrCat(
          name, ": chunk ", chunks.size(), " is truncated or corrupt"));
    }
    coded.PopLimit(limit);
    if (checksummed && !coded.Skip(static_cast<int>(kChecksumBytes))) {
      return absl::DataLossError(absl::StrCat(name, ": chunk ", chunks.size(), " is truncated"));
    }
    chunks.push_back(std::move(c));
  }
  return chunks;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream buffer;
  buffer << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return std::move(buffer).str();
}

absl::Status WriteSessionFile(const std::string& path,
                              const std::vector<v1::SessionChunk>& chunks) {
  const std::string out = EncodeSessionFile(chunks);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.flush();
  if (!file) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::SessionChunk>> ReadSessionFile(
    const std::string& path) {
  absl::StatusOr<std::string> data = ReadFileBytes(path);
  if (!data.ok()) return data.status();
  return DecodeSessionFile(*data, path);
}

}  // namespace gdn::wire
