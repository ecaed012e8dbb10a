#include "client/gdn_client.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/forward_split.h"
#include "client/grpc_status.h"
#include "client/routing_key.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "kernels/gdn_types.h"
#include "proto/tensor_codec.h"

namespace gdn::client {
namespace {

// Checks one typed input's element count against its expected shape.
absl::Status CheckCount(const char* field, const std::vector<float>& values,
                        const std::vector<int64_t>& shape) {
  const int64_t want = wire::NumElements(shape);
  if (static_cast<int64_t>(values.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", values.size(), " values for shape ",
        wire::ShapeString(shape), " (", want, " elements)"));
  }
  return absl::OkStatus();
}

// The routing key of a Forward request's sessions; InvalidArgument when they
// differ.
absl::StatusOr<std::string> RequestRoutingKey(const v1::ForwardRequest& request) {
  std::vector<std::string> ids;
  ids.reserve(request.sequences_size());
  for (const v1::SequenceSpec& s : request.sequences()) ids.push_back(s.session_id());
  return CommonRoutingKey(ids);
}

// The key a Forward is routed by: the first session's. With `check`,
// InvalidArgument when the sessions' keys differ.
absl::StatusOr<std::string> ForwardRouteKey(const v1::ForwardRequest& request, bool check) {
  if (check) return RequestRoutingKey(request);
  return request.sequences().empty() ? std::string()
                                     : RoutingKey(request.sequences(0).session_id());
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeGdnChannel(const std::string& target,
                                              const GdnClientOptions& options,
                                              int channel_index) {
  wire::TransportOptions transport = options.transport;
  transport.max_message_bytes = options.max_message_bytes;
  grpc::ChannelArguments args = wire::ClientChannelArguments(transport);
  // Channels with different arguments never share a connection; a local
  // subchannel pool makes that explicit.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("gdn.channel_index", channel_index);
  return CreateSecureChannel(target, options.security, args);
}

GdnClient::GdnClient(const std::string& target, GdnClientOptions options)
    : GdnClient(MakeGdnChannel(target, options), options) {}

GdnClient::GdnClient(std::shared_ptr<grpc::Channel> channel, GdnClientOptions options)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::GdnService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> GdnClient::NewContext(const std::string& route_key) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (options_.deadline != absl::InfiniteDuration()) {
    context->set_deadline(std::chrono::system_clock::now() +
                          absl::ToChronoNanoseconds(options_.deadline));
  }
  if (!route_key.empty()) context->AddMetadata(kRouteHeader, RouteHeaderValue(route_key));
  return context;
}

absl::Status GdnClient::Retry(absl::string_view method,
                              const std::function<absl::Status(int)>& call) {
  return CallWithRetry(options_.retry, options_.on_retry, method, call);
}

absl::StatusOr<v1::ServerInfoResponse> GdnClient::GetServerInfo() {
  v1::ServerInfoResponse response;
  absl::Status status = Retry("GetServerInfo", [&](int) {
    auto context = NewContext();
    return FromGrpcStatus(
        stub_->GetServerInfo(context.get(), v1::ServerInfoRequest(), &response));
  });
  if (!status.ok()) return status;
  absl::MutexLock lock(&info_mu_);
  info_ = response;
  have_info_ = true;
  return response;
}

absl::StatusOr<v1::ServerInfoResponse> GdnClient::CachedServerInfo() {
  {
    absl::MutexLock lock(&info_mu_);
    if (have_info_) return info_;
  }
  return GetServerInfo();
}

int64_t GdnClient::EffectiveMessageLimit() {
  int64_t limit = options_.max_message_bytes;
  absl::StatusOr<v1::ServerInfoResponse> info = CachedServerInfo();
  if (info.ok() && info->limits().max_message_bytes() > 0) {
    limit = std::min(limit, info->limits().max_message_bytes());
  }
  return limit;
}

absl::StatusOr<std::string> GdnClient::CreateSession(const std::string& id) {
  v1::CreateSessionRequest request;
  request.set_session_id(id);
  v1::CreateSessionResponse response;
  absl::Status status = Retry("CreateSession", [&](int attempt) {
    auto context = NewContext(RoutingKey(id));
    absl::Status s = FromGrpcStatus(stub_->CreateSession(context.get(), request, &response));
    // An earlier try may have created it before its answer was lost.
    if (attempt > 1 && !id.empty() && absl::IsAlreadyExists(s)) {
      response.set_session_id(id);
      return absl::OkStatus();
    }
    return s;
  });
  if (!status.ok()) return status;
  return response.session_id();
}

absl::Status GdnClient::CloseSession(const std::string& id) {
  v1::CloseSessionRequest request;
  request.set_session_id(id);
  v1::CloseSessionResponse response;
  return Retry("CloseSession", [&](int attempt) {
    auto context = NewContext(RoutingKey(id));
    absl::Status s = FromGrpcStatus(stub_->CloseSession(context.get(), request, &response));
    // An earlier try may have closed it before its answer was lost.
    if (attempt > 1 && absl::IsNotFound(s)) return absl::OkStatus();
    return s;
  });
}

absl::StatusOr<std::string> GdnClient::ForkSession(const std::string& parent_id,
                                                   const std::string& child_id,
                                                   std::optional<int64_t> at_position) {
  const std::string key = RoutingKey(parent_id);
  if (options_.session_affinity && !child_id.empty() && RoutingKey(child_id) != key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "child_id '", child_id, "' has routing key '", RoutingKey(child_id),
        "', parent '", parent_id, "' has '", key,
        "': a fork's child must share its parent's key (same prefix before '/')"));
  }
  v1::ForkSessionRequest request;
  request.set_parent_id(parent_id);
  request.set_child_id(child_id);
  if (at_position) request.set_at_position(*at_position);
  v1::ForkSessionResponse response;
  absl::Status status = Retry("ForkSession", [&](int attempt) {
    auto context = NewContext(key);
    absl::Status s = FromGrpcStatus(stub_->ForkSession(context.get(), request, &response));
    if (attempt > 1 && !child_id.empty() && absl::IsAlreadyExists(s)) {
      response.set_session_id(child_id);
      return absl::OkStatus();
    }
    return s;
  });
  if (!status.ok()) return status;
  return response.session_id();
}

absl::StatusOr<v1::DescribeSessionResponse> GdnClient::DescribeSession(
    const std::string& id) {
  v1::DescribeSessionRequest request;
  request.set_session_id(id);
  v1::DescribeSessionResponse response;
  absl::Status status = Retry("DescribeSession", [&](int) {
    auto context = NewContext(RoutingKey(id));
    return FromGrpcStatus(stub_->DescribeSession(context.get(), request, &response));
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::CommitDraftResponse> GdnClient::CommitDraft(
    const std::string& id, int64_t position, const std::vector<int32_t>& layers) {
  v1::CommitDraftRequest request;
  request.set_session_id(id);
  request.set_position(position);
  for (int32_t layer : layers) request.add_layers(layer);
  v1::CommitDraftResponse response;
  // A retry is harmless: a committed layer named again is already there.
  absl::Status status = Retry("CommitDraft", [&](int) {
    auto context = NewContext(RoutingKey(id));
    return FromGrpcStatus(stub_->CommitDraft(context.get(), request, &response));
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ListSessionsResponse> GdnClient::ListSessionsPage(
    int32_t page_size, const std::string& page_token) {
  v1::ListSessionsRequest request;
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  v1::ListSessionsResponse response;
  absl::Status status = Retry("ListSessions", [&](int) {
    auto context = NewContext();
    return FromGrpcStatus(stub_->ListSessions(context.get(), request, &response));
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::vector<std::string>> GdnClient::ListSessions() {
  std::vector<std::string> ids;
  std::string token;
  do {
    absl::StatusOr<v1::ListSessionsResponse> page = ListSessionsPage(0, token);
    if (!page.ok()) return page.status();
    ids.insert(ids.end(), page->session_ids().begin(), page->session_ids().end());
    token = page->next_page_token();
  } while (!token.empty());
  return ids;
}

absl::StatusOr<v1::ForwardResponse> GdnClient::ForwardOnce(
    const v1::ForwardRequest& request, const std::string& route_key) {
  v1::ForwardResponse response;
  // The server answers UNAVAILABLE only for a call it did not apply, so a
  // retry cannot apply twice (and a position check refuses it if it would).
  absl::Status status = Retry("Forward", [&](int) {
    auto context = NewContext(route_key);
    response.Clear();
    return FromGrpcStatus(stub_->Forward(context.get(), request, &response));
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ForwardResponse> GdnClient::Forward(
    const v1::ForwardRequest& request) {
  absl::StatusOr<std::string> key = ForwardRouteKey(request, options_.session_affinity);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::vector<ForwardPart>> parts =
      SplitForwardRequest(request, EffectiveMessageLimit());
  if (!parts.ok()) return parts.status();
  if (parts->size() == 1) return ForwardOnce(request, *key);
  // In order: each part starts where the previous one left its sessions.
  std::vector<v1::ForwardResponse> responses;
  responses.reserve(parts->size());
  for (size_t p = 0; p < parts->size(); ++p) {
    absl::StatusOr<v1::ForwardResponse> r = ForwardOnce((*parts)[p].request, *key);
    if (!r.ok()) return SplitPartStatus(r.status(), p, parts->size());
    responses.push_back(*std::move(r));
  }
  return MergeForwardResponses(request, *parts, responses);
}

absl::StatusOr<v1::ForwardRequest> GdnClient::BuildForwardRequest(
    int32_t layer, const std::vector<SequenceTokens>& sequences,
    const ForwardInputs& inputs) {
  absl::StatusOr<v1::ServerInfoResponse> info = CachedServerInfo();
  if (!info.ok()) return info.status();
  const v1::LayerConfig& c = info->config();
  DType act;
  if (!wire::FromProtoDType(c.activation_dtype(), &act)) {
    return absl::InternalError("server reports no activation dtype");
  }
  int64_t t = 0;
  v1::ForwardRequest request;
  request.set_layer(layer);
  for (const SequenceTokens& s : sequences) {
    v1::SequenceSpec* spec = request.add_sequences();
    spec->set_session_id(s.session_id);
    spec->set_position(s.position);
    spec->set_num_tokens(s.num_tokens);
    if (s.draft) spec->set_draft(true);
    if (s.checkpoint_interval != 0) spec->set_checkpoint_interval(s.checkpoint_interval);
    t += s.num_tokens;
  }
  const std::vector<int64_t> qk_shape = {t, c.num_qk_heads(), c.head_dim_k()};
  const std::vector<int64_t> v_shape = {t, c.num_v_heads(), c.head_dim_v()};
  const std::vector<int64_t> gate_shape = {t, c.num_v_heads()};
  const std::vector<int64_t> head_shape = {c.num_v_heads()};
  for (auto [name, values, shape] :
       {std::make_tuple("q", &inputs.q, &qk_shape), std::make_tuple("k", &inputs.k, &qk_shape),
        std::make_tuple("v", &inputs.v, &v_shape)}) {
    absl::Status s = CheckCount(name, *values, *shape);
    if (!s.ok()) return s;
  }
  *request.mutable_q() = wire::MakeTensor(act, qk_shape, inputs.q.data());
  *request.mutable_k() = wire::MakeTensor(act, qk_shape, inputs.k.data());
  *request.mutable_v() = wire::MakeTensor(act, v_shape, inputs.v.data());
  if (c.gating_mode() == "fused") {
    for (auto [name, values, shape] :
         {std::make_tuple("a", &inputs.a, &gate_shape), std::make_tuple("b", &inputs.b, &gate_shape),
          std::make_tuple("a_log", &inputs.a_log, &head_shape),
          std::make_tuple("dt_bias", &inputs.dt_bias, &head_shape)}) {
      absl::Status s = CheckCount(name, *values, *shape);
      if (!s.ok()) return s;
    }
    *request.mutable_a() = wire::MakeTensor(DType::kF32, gate_shape, inputs.a.data());
    *request.mutable_b() = wire::MakeTensor(DType::kF32, gate_shape, inputs.b.data());
    *request.mutable_a_log() = wire::MakeTensor(DType::kF32, head_shape, inputs.a_log.data());
    *request.mutable_dt_bias() =
        wire::MakeTensor(DType::kF32, head_shape, inputs.dt_bias.data());
  } else {
    for (auto [name, values] : {std::make_pair("g", &inputs.g), std::make_pair("beta", &inputs.beta)}) {
      absl::Status s = CheckCount(name, *values, gate_shape);
      if (!s.ok()) return s;
    }
    *request.mutable_g() = wire::MakeTensor(DType::kF32, gate_shape, inputs.g.data());
    *request.mutable_beta() = wire::MakeTensor(DType::kF32, gate_shape, inputs.beta.data());
  }
  return request;
}

absl::StatusOr<ForwardOutputs> GdnClient::Forward(
    int32_t layer, const std::vector<SequenceTokens>& sequences,
    const ForwardInputs& inputs) {
  absl::StatusOr<v1::ForwardRequest> request =
      BuildForwardRequest(layer, sequences, inputs);
  if (!request.ok()) return request.status();
  absl::StatusOr<v1::ForwardResponse> response = Forward(*request);
  if (!response.ok()) return response.status();
  ForwardOutputs out;
  out.o = wire::ToFloats(response->o());
  out.positions.assign(response->positions().begin(), response->positions().end());
  if (out.o.size() != inputs.v.size()) {
    return absl::InternalError(absl::StrCat("server returned ", out.o.size(),
                                            " values of o, expected ", inputs.v.size()));
  }
  return out;
}

absl::StatusOr<SessionSnapshot> GdnClient::ExportSession(const std::string& id) {
  v1::ExportSessionRequest request;
  request.set_session_id(id);
  std::vector<v1::SessionChunk> chunks;
  absl::Status status = Retry("ExportSession", [&](int) {
    auto context = NewContext(RoutingKey(id));
    std::unique_ptr<grpc::ClientReader<v1::SessionChunk>> reader =
        stub_->ExportSession(context.get(), request);
    chunks.clear();
    v1::SessionChunk chunk;
    while (reader->Read(&chunk)) chunks.push_back(std::move(chunk));
    return FromGrpcStatus(reader->Finish());
  });
  if (!status.ok()) return status;
  if (chunks.empty()) return absl::InternalError("export sent no chunks");
  return SnapshotFromChunks(chunks);
}

absl::StatusOr<v1::ImportSessionResponse> GdnClient::ImportSession(
    const SessionSnapshot& snapshot, const std::string& as_id) {
  const int64_t chunk_bytes = std::max<int64_t>(
      1, std::min(options_.import_chunk_bytes,
                  EffectiveMessageLimit() - kForwardMessageSlackBytes));
  const std::string id = as_id.empty() ? snapshot.session_id : as_id;
  const std::vector<v1::SessionChunk> chunks = SnapshotToChunks(snapshot, chunk_bytes, as_id);
  v1::ImportSessionResponse response;
  absl::Status status = Retry("ImportSession", [&](int attempt) {
    auto context = NewContext(RoutingKey(id));
    std::unique_ptr<grpc::ClientWriter<v1::SessionChunk>> writer =
        stub_->ImportSession(context.get(), &response);
    for (const v1::SessionChunk& c : chunks) {
      if (!writer->Write(c)) break;  // the server ended the call; Finish says why
    }
    writer->WritesDone();
    absl::Status s = FromGrpcStatus(writer->Finish());
    // An earlier try may have imported it before its answer was lost.
    if (attempt > 1 && absl::IsAlreadyExists(s)) {
      response.set_session_id(id);
      return absl::OkStatus();
    }
    return s;
  });
  if (!status.ok()) return status;
  return response;
}

std::unique_ptr<ForwardStream> GdnClient::OpenForwardStream(const std::string& route_key) {
  // No deadline: a stream lives as long as its user keeps it.
  auto context = std::make_unique<grpc::ClientContext>();
  if (!route_key.empty()) context->AddMetadata(kRouteHeader, RouteHeaderValue(route_key));
  return std::make_unique<ForwardStream>(stub_.get(), std::move(context),
                                         options_.session_affinity ? route_key : "");
}

// --- ForwardStream ---------------------------------------------------------

ForwardStream::ForwardStream(v1::GdnService::Stub* stub,
                             std::unique_ptr<grpc::ClientContext> context,
                             std::string check_key)
    : context_(std::move(context)),
      route_key_(std::move(check_key)),
      stream_(stub->ForwardStream(context_.get())) {}

ForwardStream::~ForwardStream() {
  if (!finished_) {
    context_->TryCancel();
    v1::ForwardResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    stream_->Finish().ok();
  }
}

absl::StatusOr<uint64_t> ForwardStream::Send(v1::ForwardRequest request) {
  if (!route_key_.empty()) {
    absl::StatusOr<std::string> key = RequestRoutingKey(request);
    if (!key.ok()) return key.status();
    if (*key != route_key_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request for routing key '", *key, "' on a stream opened for '", route_key_,
          "': a stream reaches one server"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (request.request_id() == 0) {
      request.set_request_id(next_id_);
    }
    next_id_ = std::max(next_id_, request.request_id() + 1);
    in_flight_.push_back(request.request_id());
  }
  if (!stream_->Write(request)) {
    return absl::UnavailableError("the Forward stream is closed; Finish() gives its status");
  }
  return request.request_id();
}

absl::StatusOr<v1::ForwardResponse> ForwardStream::Receive() {
  v1::ForwardResponse response;
  if (!stream_->Read(&response)) {
    return absl::UnavailableError("the Forward stream ended; Finish() gives its status");
  }
  uint64_t expected = 0;
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_.empty()) {
      return absl::InternalError(absl::StrCat(
          "response ", response.request_id(), " to no request in flight"));
    }
    expected = in_flight_.front();
    in_flight_.pop_front();
  }
  if (response.request_id() != expected) {
    return absl::InternalError(absl::StrCat("response ", response.request_id(),
                                            " out of order, expected ", expected));
  }
  if (response.error_code() != 0) {
    return FromGrpcCode(response.error_code(), response.error_message());
  }
  return response;
}

absl::Status ForwardStream::Finish() {
  if (finished_) return absl::FailedPreconditionError("stream already finished");
  if (!writes_done_) {
    stream_->WritesDone();
    writes_done_ = true;
  }
  v1::ForwardResponse ignored;
  while (stream_->Read(&ignored)) {
  }
  finished_ = true;
  return FromGrpcStatus(stream_->Finish());
}

void ForwardStream::Cancel() { context_->TryCancel(); }

}  // namespace gdn::client
