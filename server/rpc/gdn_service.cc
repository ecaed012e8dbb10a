#include "server/rpc/gdn_service.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/rpc/forward_request_reader.h"
#include "server/rpc/forward_response.h"
#include "server/rpc/forward_stream_reactor.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/session_stream_reactors.h"
#include "server/sessions/session_id.h"
#include "server/sessions/session_ops.h"

namespace gdn {

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  const std::chrono::system_clock::time_point deadline = context->deadline();
  // gRPC reports "no deadline" as a time far in the future.
  if (deadline >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

void GdnServiceImpl::FinishUnary(grpc::ServerUnaryReactor* reactor,
                                 const char* method, absl::Time start,
                                 const absl::Status& status) const {
  service_->RecordRequest(method, status, start);
  reactor->Finish(ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* GdnServiceImpl::Forward(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  uint64_t request_id = 0;
  absl::StatusOr<std::unique_ptr<ForwardCall>> read =
      ReadForwardRequest(*request, service_->config.num_layers, service_->config.options,
                         service_->engine->arena(), &request_id,
                         &service_->region_access);
  if (!read.ok()) {
    FinishUnary(reactor, "Forward", start, read.status());
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "Forward", start, s);  // draining: not applied
    return reactor;
  }
  std::unique_ptr<ForwardCall> call = std::move(*read);
  call->deadline = DeadlineOf(context);
  call->is_cancelled = [context] { return context->IsCancelled(); };
  call->enqueued = start;
  call->method = "Forward";
  const int64_t total_tokens = call->total_tokens;
  call->done = [this, reactor, response, start, total_tokens,
                request_id](absl::StatusOr<ForwardResult> result) {
    if (result.ok()) {
      grpc::ByteBuffer encoded = EncodeForwardResult(std::move(*result), total_tokens,
                                                     service_->config.options, request_id);
      response->Swap(&encoded);
    }
    FinishUnary(reactor, "Forward", start, result.status());
    service_->LeaveCall();
  };
  service_->engine->SubmitForward(std::move(call));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GdnServiceImpl::ForwardStream(
    grpc::CallbackServerContext* context) {
  return new ForwardStreamReactor(service_, context);
}

grpc::ServerUnaryReactor* GdnServiceImpl::CreateSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::CreateSessionRequest* request,
    gdn::v1::CreateSessionResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = ValidateSessionId(request->session_id(), "session_id");
      !s.ok()) {
    FinishUnary(reactor, "CreateSession", start, s);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "CreateSession", start, s);
    return reactor;
  }
  service_->engine->RunSessionCommand(
      request->session_id(),
      [this, reactor, request, response, start](StateCache& cache) {
        absl::StatusOr<std::string> id =
            [&]() -> absl::StatusOr<std::string> {
          const std::string& requested = request->session_id();
          if (absl::Status s = service_->CheckIdFree(requested); !s.ok()) {
            return s;  // a drained server left it in --snapshot_dir
          }
          return CreateSessionOp(cache, requested);
        }();
        if (id.ok()) response->set_session_id(*id);
        FinishUnary(reactor, "CreateSession", start, id.status());
        service_->LeaveCall();
      });
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::CloseSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::CloseSessionRequest* request,
    gdn::v1::CloseSessionResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = ValidateRequiredSessionId(request->session_id(), "session_id");
      !s.ok()) {
    FinishUnary(reactor, "CloseSession", start, s);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "CloseSession", start, s);
    return reactor;
  }
  service_->engine->RunSessionCommand(
      request->session_id(),
      [this, reactor, request, start](StateCache& cache) {
        absl::Status s = service_->RestoreIfAbsent(cache, request->session_id());
        if (s.ok()) s = cache.CloseSession(request->session_id());
        FinishUnary(reactor, "CloseSession", start, s);
        service_->LeaveCall();
      });
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::ForkSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::ForkSessionRequest* request,
    gdn::v1::ForkSessionResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status valid = ValidateRequiredSessionId(request->parent_id(), "parent_id");
  if (valid.ok()) valid = ValidateSessionId(request->child_id(), "child_id");
  if (!valid.ok()) {
    FinishUnary(reactor, "ForkSession", start, valid);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "ForkSession", start, s);
    return reactor;
  }
  // Runs once the parent has no running call: the child gets its committed
  // states.
  service_->engine->RunSessionCommand(
      request->parent_id(),
      [this, reactor, request, response, start](StateCache& cache) {
        absl::StatusOr<std::string> id =
            [&]() -> absl::StatusOr<std::string> {
          if (absl::Status s =
                  service_->RestoreIfAbsent(cache, request->parent_id());
              !s.ok()) {
            return s;
          }
          if (absl::Status s = service_->CheckIdFree(request->child_id());
              !s.ok()) {
            return s;
          }
          return ForkSessionOp(cache, request->parent_id(), request->child_id(),
                               request->has_at_position()
                                   ? std::optional<int64_t>(request->at_position())
                                   : std::nullopt);
        }();
        if (id.ok()) response->set_session_id(*id);
        FinishUnary(reactor, "ForkSession", start, id.status());
        service_->LeaveCall();
      });
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::DescribeSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::DescribeSessionRequest* request,
    gdn::v1::DescribeSessionResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = ValidateRequiredSessionId(request->session_id(), "session_id");
      !s.ok()) {
    FinishUnary(reactor, "DescribeSession", start, s);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "DescribeSession", start, s);
    return reactor;
  }
  service_->engine->RunSessionCommand(
      request->session_id(),
      [this, reactor, request, response, start](StateCache& cache) {
        absl::Status restored =
            service_->RestoreIfAbsent(cache, request->session_id());
        absl::StatusOr<gdn::v1::DescribeSessionResponse> described =
            restored.ok()
                ? DescribeSessionOp(cache, request->session_id(), absl::Now())
                : absl::StatusOr<gdn::v1::DescribeSessionResponse>(restored);
        if (described.ok()) *response = std::move(*described);
        FinishUnary(reactor, "DescribeSession", start, described.status());
        service_->LeaveCall();
      });
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::ListSessions(
    grpc::CallbackServerContext* context,
    const gdn::v1::ListSessionsRequest* request,
    gdn::v1::ListSessionsResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Only the sessions this server holds: never files of --snapshot_dir.
  service_->engine->RunSessionCommand(
      "", [this, reactor, response, start](StateCache& cache) {
        for (const std::string& id : cache.ListSessions()) {
          response->add_session_ids(id);
        }
        FinishUnary(reactor, "ListSessions", start, absl::OkStatus());
      });
  return reactor;
}

grpc::ServerWriteReactor<gdn::v1::SessionChunk>* GdnServiceImpl::ExportSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::ExportSessionRequest* request) {
  return new ExportSessionReactor(service_, request->session_id());
}

grpc::ServerReadReactor<gdn::v1::SessionChunk>* GdnServiceImpl::ImportSession(
    grpc::CallbackServerContext* context,
    gdn::v1::ImportSessionResponse* response) {
  return new ImportSessionReactor(service_, context, response);
}

grpc::ServerUnaryReactor* GdnServiceImpl::GetServerInfo(
    grpc::CallbackServerContext* context,
    const gdn::v1::ServerInfoRequest* request,
    gdn::v1::ServerInfoResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const EngineInfo& info = service_->engine->info();
  *response->mutable_config() = service_->layer_config;
  gdn::v1::Limits* limits = response->mutable_limits();
  limits->set_max_message_bytes(service_->config.max_message_bytes);
  limits->set_max_decode_tokens(kMaxDecodeTokens);
  limits->set_max_batch_tokens(service_->config.max_batch_tokens);
  limits->set_device_pages(info.device_pages);
  limits->set_host_pages(info.host_pages);
  limits->set_page_bytes(static_cast<int64_t>(info.layout.page_bytes));
  limits->set_idle_timeout_seconds(
      absl::ToDoubleSeconds(service_->config.idle_timeout));
  response->set_backend(info.backend_name);
  response->set_device(info.device_description);
  response->set_version(service_->version);
  FinishUnary(reactor, "GetServerInfo", start, absl::OkStatus());
  return reactor;
}

}  // namespace gdn
