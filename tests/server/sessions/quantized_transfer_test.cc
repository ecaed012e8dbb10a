// int8 / fp8 states through export / import (issue 19): pages carry their
// codes and scales as one unit, CheckStateValues validates the scales
// (finite, > 0) and codes, and an import of another state dtype is refused
// naming both dtypes and the flag to use.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/state_page_codec.h"
#include "server/sessions/session_transfer.h"
#include "server/sessions/state_values.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

GdnOptions Options(StateDType dtype) {
  GdnOptions o;
  o.shape = {2, 4, 64, 64};
  o.state_dtype = dtype;
  return o;
}

// A page of `dtype` holding a random state (codes + scales), page_bytes long.
std::vector<uint8_t> RandomPage(const GdnOptions& options, uint64_t seed) {
  const StatePageFormat f = StatePageFormat::For(options);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::vector<float> state(f.elements());
  for (float& x : state) x = normal(rng);
  std::vector<uint8_t> page(StatePageLayout::For(options.shape, options.state_dtype).page_bytes);
  EncodeStatePage(f, state.data(), {}, page.data());
  return page;
}

absl::Status Check(const GdnOptions& o, const std::vector<uint8_t>& page) {
  return CheckStateValues(page, o.state_dtype, o.shape.num_v_heads, o.shape.head_dim_k,
                          o.shape.head_dim_v, 2);
}

void SetScale(const GdnOptions& o, std::vector<uint8_t>* page, int index, float value) {
  const size_t at = StatePageLayout::For(o.shape, o.state_dtype).state_bytes + 4 * index;
  std::memcpy(page->data() + at, &value, sizeof(value));
}

TEST(QuantizedStateValuesTest, GoodPagesPass) {
  for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions o = Options(d);
    EXPECT_TRUE(Check(o, RandomPage(o, 1)).ok()) << StateDTypeName(d);
    std::vector<uint8_t> zeros(StatePageLayout::For(o.shape, d).page_bytes, 0);
    EncodeStatePage(StatePageFormat::For(o), std::vector<float>(4 * 64 * 64, 0.0f).data(), {},
                    zeros.data());
    EXPECT_TRUE(Check(o, zeros).ok());  // zero groups have scale 1
  }
}

TEST(QuantizedStateValuesTest, BadScalesAreRefusedByHeadAndColumns) {
  for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions o = Options(d);
    // Scale 37 of [Hv 4][V / 2 = 32]: head 1, columns 10..11.
    for (float bad : {0.0f, -1.0f, NAN, INFINITY, 1e31f}) {
      std::vector<uint8_t> page = RandomPage(o, 2);
      SetScale(o, &page, 37, bad);
      const absl::Status s = Check(o, page);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(s.message(), HasSubstr("layer 2: scale of head 1, columns 10..11"));
    }
  }
}

TEST(QuantizedStateValuesTest, CodesNoServerWritesAreRefused) {
  GdnOptions o = Options(StateDType::kInt8);
  std::vector<uint8_t> page = RandomPage(o, 3);
  page[64 * 64 + 5] = 0x80;  // -128: head 1, k 0, v 5
  EXPECT_THAT(Check(o, page).message(), HasSubstr("element 4101 has int8 code 0x80"));
  o = Options(StateDType::kFP8);
  page = RandomPage(o, 3);
  page[9] = 0xff;  // NaN
  EXPECT_THAT(Check(o, page).message(), HasSubstr("element 9 has fp8 code 0xff"));
}

TEST(QuantizedStateValuesTest, ShortPagesAndHugeValuesAreRefused) {
  const GdnOptions o = Options(StateDType::kInt8);
  std::vector<uint8_t> page = RandomPage(o, 4);
  const size_t payload = StatePageFormat::For(o).payload_bytes();
  EXPECT_THAT(Check(o, std::vector<uint8_t>(page.begin(), page.begin() + payload - 1)).message(),
              HasSubstr("cannot hold a state of 16384 int8 codes and their scales"));
  // A scale at the bound times code 127 exceeds 1e30.
  SetScale(o, &page, 0, 1e30f);
  page[0] = 127;
  EXPECT_THAT(Check(o, page).message(), HasSubstr("a state must be finite with |x| <= 1e+30"));
}

TEST(QuantizedTransferTest, ExportImportCarriesCodesAndScales) {
  for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions o = Options(d);
    const size_t page_bytes = StatePageLayout::For(o.shape, d).page_bytes;
    const gdn::v1::LayerConfig config = MakeLayerConfig(2, o);
    EXPECT_EQ(config.state_dtype(), StateDTypeName(d));
    SessionStates states;
    states.session_id = "q";
    states.layers.resize(2);
    states.layers[0].position = 9;
    states.layers[0].bytes = RandomPage(o, 5);
    for (size_t piece : {size_t{1000}, page_bytes}) {
      ImportAssembler assembler(config, page_bytes);
      for (const auto& chunk : MakeExportChunks(states, config, piece)) {
        ASSERT_TRUE(assembler.Add(chunk).ok());
      }
      absl::StatusOr<SessionStates> back = assembler.Finish();
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->layers[0].bytes, states.layers[0].bytes);  // scales included
    }
    // A bad scale inside the stream stops the import at that layer.
    SetScale(o, &states.layers[0].bytes, 3, NAN);
    ImportAssembler assembler(config, page_bytes);
    absl::Status s;
    for (const auto& chunk : MakeExportChunks(states, config, page_bytes)) {
      if (!(s = assembler.Add(chunk)).ok()) break;
    }
    if (s.ok()) s = assembler.Finish().status();
    EXPECT_THAT(s.message(), HasSubstr("layer 0: scale of head 0, columns 6..7"));
  }
}

TEST(QuantizedTransferTest, AnotherStateDtypeIsRefusedClearly) {
  const GdnOptions int8 = Options(StateDType::kInt8), f32 = Options(StateDType::kF32);
  const absl::Status s = CheckLayerConfig(MakeLayerConfig(2, f32), MakeLayerConfig(2, int8));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("this server has int8, the imported session has fp32"));
  EXPECT_THAT(s.message(), HasSubstr("--state_dtype=fp32"));
  EXPECT_FALSE(CheckLayerConfig(MakeLayerConfig(2, Options(StateDType::kFP8)),
                                MakeLayerConfig(2, int8))
                   .ok());
}

}  // namespace
}  // namespace gdn
