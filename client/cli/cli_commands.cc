#include "client/cli/cli_commands.h"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/grpc_status.h"
#include "client/npy.h"
#include "client/session.h"
#include "client/session_snapshot.h"
#include "google/protobuf/text_format.h"
#include "kernels/gdn_types.h"
#include "proto/tensor_codec.h"

namespace gdn::client::cli {
namespace {

std::string TextOf(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(message, &text);
  return text;
}

NpyDType NpyDTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return NpyDType::kF32;
    case DType::kF16:
      return NpyDType::kF16;
    case DType::kBF16:
      return NpyDType::kBF16;
  }
  return NpyDType::kF32;
}

// A wire tensor of `dtype` from a .npy file: the raw bytes when the file
// already holds `dtype`, else its values rounded once to `dtype`.
absl::StatusOr<v1::Tensor> LoadTensor(const std::string& path, DType dtype) {
  absl::StatusOr<NpyArray> array = ReadNpyFile(path);
  if (!array.ok()) return array.status();
  if (array->dtype == NpyDTypeOf(dtype)) {
    return wire::MakeTensorRaw(dtype, array->shape, array->data.data());
  }
  const std::vector<float> values = NpyToFloats(*array);
  return wire::MakeTensor(dtype, array->shape, values.data());
}

}  // namespace

int ReportError(const absl::Status& status) {
  std::cerr << "error: " << GrpcCodeName(status.code()) << ": " << status.message() << "\n";
  return kExitError;
}

int RunInfo(GdnClient& client) {
  absl::StatusOr<v1::ServerInfoResponse> info = client.GetServerInfo();
  if (!info.ok()) return ReportError(info.status());
  std::cout << TextOf(*info);
  return kExitOk;
}

int RunCreate(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<std::string> id = client.CreateSession(flags.id);
  if (!id.ok()) return ReportError(id.status());
  std::cout << *id << "\n";
  return kExitOk;
}

int RunFork(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<std::string> id = client.ForkSession(flags.parent, flags.id);
  if (!id.ok()) return ReportError(id.status());
  std::cout << *id << "\n";
  return kExitOk;
}

int RunClose(GdnClient& client, const CliFlags& flags) {
  absl::Status status = client.CloseSession(flags.id);
  if (!status.ok()) return ReportError(status);
  std::cout << "closed " << flags.id << "\n";
  return kExitOk;
}

int RunDescribe(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<v1::DescribeSessionResponse> d = client.DescribeSession(flags.id);
  if (!d.ok()) return ReportError(d.status());
  std::cout << TextOf(*d);
  return kExitOk;
}

int RunList(GdnClient& client) {
  absl::StatusOr<std::vector<std::string>> ids = client.ListSessions();
  if (!ids.ok()) return ReportError(ids.status());
  for (const std::string& id : *ids) std::cout << id << "\n";
  return kExitOk;
}

int RunForward(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<v1::ServerInfoResponse> info = client.CachedServerInfo();
  if (!info.ok()) return ReportError(info.status());
  const v1::LayerConfig& config = info->config();
  DType act;
  if (!wire::FromProtoDType(config.activation_dtype(), &act)) {
    return ReportError(absl::InternalError("server reports no activation dtype"));
  }
  const bool fused = config.gating_mode() == "fused";
  const std::vector<std::pair<const char*, const std::string*>> needed =
      fused ? std::vector<std::pair<const char*, const std::string*>>{
                  {"a", &flags.a}, {"b", &flags.b}, {"a_log", &flags.a_log}, {"dt_bias", &flags.dt_bias}}
            : std::vector<std::pair<const char*, const std::string*>>{
                  {"g", &flags.g}, {"beta", &flags.beta}};
  for (const auto& [name, path] : needed) {
    if (path->empty()) {
      std::cerr << "forward: the server's gating mode is '" << config.gating_mode()
                << "', which needs --" << name << "\n";
      return kExitUsage;
    }
  }

  int64_t position = flags.position;
  if (position < 0) {
    absl::StatusOr<Session> session = Session::Attach(&client, flags.id);
    if (!session.ok()) return ReportError(session.status());
    // An out-of-range layer reads -1: send 0 and let the server name the error.
    position = std::max<int64_t>(0, session->position(flags.layer));
  }

  v1::ForwardRequest request;
  request.set_layer(flags.layer);
  struct Field {
    const std::string* path;
    v1::Tensor* (v1::ForwardRequest::*mutable_tensor)();
    DType dtype;
  };
  std::vector<Field> fields = {{&flags.q, &v1::ForwardRequest::mutable_q, act},
                               {&flags.k, &v1::ForwardRequest::mutable_k, act},
                               {&flags.v, &v1::ForwardRequest::mutable_v, act}};
  if (fused) {
    fields.push_back({&flags.a, &v1::ForwardRequest::mutable_a, DType::kF32});
    fields.push_back({&flags.b, &v1::ForwardRequest::mutable_b, DType::kF32});
    fields.push_back({&flags.a_log, &v1::ForwardRequest::mutable_a_log, DType::kF32});
    fields.push_back({&flags.dt_bias, &v1::ForwardRequest::mutable_dt_bias, DType::kF32});
  } else {
    fields.push_back({&flags.g, &v1::ForwardRequest::mutable_g, DType::kF32});
    fields.push_back({&flags.beta, &v1::ForwardRequest::mutable_beta, DType::kF32});
  }
  for (const Field& f : fields) {
    absl::StatusOr<v1::Tensor> t = LoadTensor(*f.path, f.dtype);
    if (!t.ok()) return ReportError(t.status());
    *(request.*f.mutable_tensor)() = *std::move(t);
  }
  if (request.q().shape_size() < 1 || request.q().shape(0) < 1) {
    return ReportError(absl::InvalidArgumentError("q must have shape [T, Hqk, K] with T >= 1"));
  }
  v1::SequenceSpec* spec = request.add_sequences();
  spec->set_session_id(flags.id);
  spec->set_position(position);
  spec->set_num_tokens(static_cast<int32_t>(request.q().shape(0)));

  absl::StatusOr<v1::ForwardResponse> response = client.Forward(request);
  if (!response.ok()) return ReportError(response.status());
  const std::vector<int64_t> shape(response->o().shape().begin(), response->o().shape().end());
  NpyArray o;
  if (flags.out_dtype == "fp32") {
    o = NpyFromFloats(NpyDType::kF32, shape, wire::ToFloats(response->o()));
  } else {
    o.dtype = NpyDTypeOf(act);
    o.shape = shape;
    o.data = response->o().data();
  }
  absl::Status written = WriteNpyFile(flags.out, o);
  if (!written.ok()) return ReportError(written);
  std::cout << "session " << flags.id << " layer " << flags.layer << ": position "
            << position << " -> "
            << (response->positions_size() > 0 ? response->positions(0) : -1) << ", o ["
            << absl::StrJoin(shape, ", ") << "] " << NpyDescr(o.dtype) << " -> " << flags.out
            << (o.dtype == NpyDType::kBF16 ? " (bf16 bit patterns as uint16)" : "") << "\n";
  return kExitOk;
}

int RunExport(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<SessionSnapshot> snapshot = client.ExportSession(flags.id);
  if (!snapshot.ok()) return ReportError(snapshot.status());
  std::string path = flags.out;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || (!path.empty() && path.back() == '/')) {
    std::filesystem::create_directories(path, ec);
    path = (std::filesystem::path(path) / (snapshot->session_id + ".gdnsnap")).string();
  }
  absl::Status status = WriteSnapshotFile(path, *snapshot);
  if (!status.ok()) return ReportError(status);
  int64_t bytes = 0;
  for (const SessionSnapshot::Layer& l : snapshot->layers) bytes += l.bytes.size();
  std::cout << "exported " << snapshot->session_id << ": " << snapshot->layers.size()
            << " layers, " << bytes << " state bytes -> " << path << "\n";
  return kExitOk;
}

int RunImport(GdnClient& client, const CliFlags& flags) {
  absl::StatusOr<SessionSnapshot> snapshot = ReadSnapshotFile(flags.file);
  if (!snapshot.ok()) return ReportError(snapshot.status());
  absl::StatusOr<v1::ImportSessionResponse> r = client.ImportSession(*snapshot, flags.id);
  if (!r.ok()) return ReportError(r.status());
  std::cout << "imported " << r->session_id() << ": " << r->layers_imported() << " layers\n";
  return kExitOk;
}

}  // namespace gdn::client::cli
