// Fuzz target: the session snapshot file reader (proto/session_file.h,
// "GDNSNAP2" with per-chunk CRC-32, "GDNSNAP1" without) over arbitrary bytes.
//
// Each input is read twice: as it is (mostly refused by the magic or a
// checksum, which is right) and behind the version-1 magic, where no
// checksum stands between the fuzzer and the chunk framing and parsing.
//
// Properties, beyond "no crash, no sanitizer finding":
//   - a refusal is InvalidArgument (no magic) or DataLoss (anything after it);
//   - the chunks of an accepted file survive a version-2 round trip:
//     Decode(Encode(chunks)) gives them back field for field (NaN = NaN);
//   - cutting the encoded file anywhere inside its last chunk is DataLoss.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/session_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace gdn::wire {
namespace {

void Fuzz(const std::string& file) {
  absl::StatusOr<std::vector<v1::SessionChunk>> chunks = DecodeSessionFile(file, "fuzz");
  if (!chunks.ok()) {
    const absl::StatusCode code = chunks.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
               code == absl::StatusCode::kDataLoss);
    if (code == absl::StatusCode::kInvalidArgument) {
      // Only a missing magic (or a size no snapshot has) is InvalidArgument.
      const absl::string_view magic = absl::string_view(file).substr(0, 8);
      FUZZ_CHECK((magic != kSessionFileMagic && magic != kSessionFileMagicV1) ||
                 file.size() > (size_t{1} << 31));
    }
    return;
  }
  const std::string encoded = EncodeSessionFile(*chunks);
  absl::StatusOr<std::vector<v1::SessionChunk>> again = DecodeSessionFile(encoded, "again");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == chunks->size());
  // Field for field, a NaN equal to a NaN (LayerConfig.scale is a float the
  // bytes may make NaN; it survives the round trip, and the import refuses
  // a config that differs from the server's).
  google::protobuf::util::DefaultFieldComparator floats;
  floats.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&floats);
  for (size_t i = 0; i < chunks->size(); ++i) {
    FUZZ_CHECK(differencer.Compare((*chunks)[i], (*again)[i]));
  }
  if (!chunks->empty()) {
    // The last record: its varint length, message bytes and 4 checksum
    // bytes. Any strict prefix that cuts into it cannot be a whole file.
    const size_t last = chunks->back().ByteSizeLong() + 4;
    const size_t cut = encoded.size() - 1 - file.size() % last;
    FUZZ_CHECK(!DecodeSessionFile(encoded.substr(0, cut), "cut").ok());
  }
}

}  // namespace
}  // namespace gdn::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  gdn::wire::Fuzz(bytes);
  gdn::wire::Fuzz(std::string(gdn::wire::kSessionFileMagicV1) + bytes);
  return 0;
}
