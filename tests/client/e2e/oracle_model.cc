#include "tests/client/e2e/oracle_model.h"

#include <cstring>

#include "kernels/dtype_convert.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::e2e {

void OracleModel::AddSession(const std::string& id) {
  sessions_[id] = std::vector<LayerState>(num_layers_);
}

void OracleModel::Fork(const std::string& parent, const std::string& child) {
  sessions_[child] = sessions_.at(parent);
}

void OracleModel::Close(const std::string& id) { sessions_.erase(id); }

oracle::Inputs OracleModel::MakeInputs(const std::vector<int>& tokens, uint64_t seed) const {
  return testing::MakeRandomInputs(options_, tokens, seed, /*random_initial_state=*/false);
}

client::ForwardInputs OracleModel::ToClientInputs(const oracle::Inputs& in) {
  client::ForwardInputs out;
  out.q = in.q;
  out.k = in.k;
  out.v = in.v;
  out.g = in.g;
  out.beta = in.beta;
  out.a = in.a;
  out.b = in.b;
  out.a_log = in.A_log;
  out.dt_bias = in.dt_bias;
  return out;
}

std::vector<double> OracleModel::Forward(int layer, const std::vector<std::string>& sessions,
                                         oracle::Inputs inputs) {
  inputs.initial_states.clear();
  for (const std::string& id : sessions) {
    inputs.initial_states.push_back(sessions_.at(id)[layer].state);
  }
  oracle::Outputs out = oracle::Run(options_, inputs);
  for (size_t i = 0; i < sessions.size(); ++i) {
    LayerState& s = sessions_.at(sessions[i])[layer];
    s.state = testing::ToFloat(out.final_states[i]);
    testing::RoundThroughState(options_.state_dtype, &s.state);
    s.position += inputs.cu_seqlens[i + 1] - inputs.cu_seqlens[i];
  }
  return out.o;
}

const std::vector<float>& OracleModel::State(const std::string& id, int layer) const {
  return sessions_.at(id)[layer].state;
}

int64_t OracleModel::Position(const std::string& id, int layer) const {
  return sessions_.at(id)[layer].position;
}

std::vector<float> StateFromBytes(const std::string& bytes, StateDType dtype, size_t elements) {
  std::vector<float> out(elements, 0.0f);
  if (bytes.size() < elements * StateDTypeSize(dtype)) return {};
  if (dtype == StateDType::kF32) {
    std::memcpy(out.data(), bytes.data(), elements * sizeof(float));
  } else {
    ConvertToFloat(bytes.data(), DType::kBF16, elements, out.data());
  }
  return out;
}

}  // namespace gdn::e2e
