// What a gdn-server should hold, computed independently: the state and
// position of every (session, layer), advanced call by call with the float64
// oracle (kernels/oracle) and rounded to the state dtype after each call, as
// the server stores it. Forks copy, closes erase. Tests compare the server's
// o and its exported states with this model.
#ifndef GDN_TESTS_CLIENT_E2E_ORACLE_MODEL_H_
#define GDN_TESTS_CLIENT_E2E_ORACLE_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "client/gdn_client.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"

namespace gdn::e2e {

class OracleModel {
 public:
  OracleModel(const GdnOptions& options, int num_layers)
      : options_(options), num_layers_(num_layers) {}

  const GdnOptions& options() const { return options_; }

  void AddSession(const std::string& id);
  void Fork(const std::string& parent, const std::string& child);
  void Close(const std::string& id);

  // Fresh random inputs (rounded to the wire dtype) for sessions with
  // `tokens[i]` new tokens each, packed in that order.
  oracle::Inputs MakeInputs(const std::vector<int>& tokens, uint64_t seed) const;
  static client::ForwardInputs ToClientInputs(const oracle::Inputs& inputs);

  // The expected o ([T, Hv, V], float64) of one call at `layer`; advances the
  // model's states and positions as the server should on success.
  std::vector<double> Forward(int layer, const std::vector<std::string>& sessions,
                              oracle::Inputs inputs);

  // Empty: the zero state (never written).
  const std::vector<float>& State(const std::string& id, int layer) const;
  int64_t Position(const std::string& id, int layer) const;

 private:
  struct LayerState {
    int64_t position = 0;
    std::vector<float> state;  // [Hv, K, V], rounded to the state dtype
  };
  GdnOptions options_;
  int num_layers_;
  std::map<std::string, std::vector<LayerState>> sessions_;
};

// Every element of an exported state page as fp32 (the first Hv * K * V).
std::vector<float> StateFromBytes(const std::string& bytes, StateDType dtype, size_t elements);

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_ORACLE_MODEL_H_
