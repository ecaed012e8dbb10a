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
#include "server/rpc/session_listing.h"
#include "server/rpc/session_stream_reactors.h"
#include "server/auth/scoped_forward_call.h"
#include "server/auth/tenant_quota.h"
#include "server/sessions/session_id.h"
#include "server/sessions/session_ops.h"

namespace gdn {

void GdnServiceImpl::FinishUnary(grpc::ServerUnaryReactor* reactor, const char* method,
                                 absl::Time start, const absl::Status& status,
                                 const TenantScope& scope) const {
  const absl::Status outward = scope.Outward(status);
  service_->RecordRequest(method, outward, start, scope);
  reactor->Finish(ToGrpcStatus(outward));
}

grpc::ServerUnaryReactor* GdnServiceImpl::Forward(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "Forward", start, &scope)) return reactor;
  uint64_t request_id = 0;
  const RegionAccess access = service_->RegionAccessFor(scope);
  absl::StatusOr<std::unique_ptr<ForwardCall>> read =
      ReadForwardRequest(*request, service_->config.num_layers, service_->config.options,
                         service_->engine->arena(), &request_id, &access);
  if (read.ok()) {
    if (absl::Status s = ScopeForwardCall(scope, service_->tenant_metrics, read->get());
        !s.ok()) {
      read = s;
    }
  }
  if (!read.ok()) {
    FinishUnary(reactor, "Forward", start, read.status(), scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "Forward", start, s, scope);  // draining: not applied
    return reactor;
  }
  std::unique_ptr<ForwardCall> call = std::move(*read);
  call->deadline = DeadlineOf(context);
  call->is_cancelled = [context] { return context->IsCancelled(); };
  call->enqueued = start;
  call->method = "Forward";
  const int64_t total_tokens = call->total_tokens;
  call->done = [this, reactor, response, start, total_tokens, request_id,
                scope](absl::StatusOr<ForwardResult> result) {
    if (result.ok()) {
      grpc::ByteBuffer encoded = EncodeForwardResult(std::move(*result), total_tokens,
                                                     service_->config.options, request_id);
      response->Swap(&encoded);
    }
    FinishUnary(reactor, "Forward", start, result.status(), scope);
    service_->LeaveCall();
  };
  service_->engine->SubmitForward(std::move(call));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GdnServiceImpl::ForwardStream(
    grpc::CallbackServerContext* context) {
  return new ForwardStreamReactor(service_, context);
}

bool GdnServiceImpl::Authenticate(const grpc::CallbackServerContext& context,
                                  grpc::ServerUnaryReactor* reactor, const char* method,
                                  absl::Time start, TenantScope* scope) const {
  absl::StatusOr<TenantScope> caller = service_->ScopeOf(context);
  if (!caller.ok()) {
    FinishUnary(reactor, method, start, caller.status());
    return false;
  }
  *scope = std::move(*caller);
  return true;
}

grpc::ServerUnaryReactor* GdnServiceImpl::CreateSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::CreateSessionRequest* request,
    gdn::v1::CreateSessionResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "CreateSession", start, &scope)) return reactor;
  if (absl::Status s = scope.ValidateId(request->session_id(), "session_id"); !s.ok()) {
    FinishUnary(reactor, "CreateSession", start, s, scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "CreateSession", start, s, scope);
    return reactor;
  }
  const std::string requested =
      request->session_id().empty() ? std::string() : scope.Inward(request->session_id());
  service_->engine->RunSessionCommand(
      requested, [this, reactor, requested, response, start, scope](StateCache& cache) {
        absl::StatusOr<std::string> id = [&]() -> absl::StatusOr<std::string> {
          if (absl::Status s = CheckNewSession(cache, scope, 0, service_->tenant_metrics);
              !s.ok()) {
            return s;
          }
          const std::string id =
              requested.empty() && !scope.open() ? scope.Inward(GenerateSessionId(cache))
                                                 : requested;
          if (absl::Status s = service_->CheckIdFree(id); !s.ok()) {
            return s;  // a drained server left it in --snapshot_dir
          }
          return CreateSessionOp(cache, id);
        }();
        if (id.ok()) response->set_session_id(scope.Outward(*id));
        FinishUnary(reactor, "CreateSession", start, id.status(), scope);
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
  TenantScope scope;
  if (!Authenticate(*context, reactor, "CloseSession", start, &scope)) return reactor;
  if (absl::Status s = scope.ValidateRequiredId(request->session_id(), "session_id"); !s.ok()) {
    FinishUnary(reactor, "CloseSession", start, s, scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "CloseSession", start, s, scope);
    return reactor;
  }
  const std::string id = scope.Inward(request->session_id());
  service_->engine->RunSessionCommand(
      id, [this, reactor, id, start, scope](StateCache& cache) {
        absl::Status s = service_->RestoreIfAbsent(cache, id);
        if (s.ok()) s = cache.CloseSession(id);
        FinishUnary(reactor, "CloseSession", start, s, scope);
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
  TenantScope scope;
  if (!Authenticate(*context, reactor, "ForkSession", start, &scope)) return reactor;
  absl::Status valid = scope.ValidateRequiredId(request->parent_id(), "parent_id");
  if (valid.ok()) valid = scope.ValidateId(request->child_id(), "child_id");
  if (!valid.ok()) {
    FinishUnary(reactor, "ForkSession", start, valid, scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "ForkSession", start, s, scope);
    return reactor;
  }
  const std::string parent = scope.Inward(request->parent_id());
  const std::string child =
      request->child_id().empty() ? std::string() : scope.Inward(request->child_id());
  const std::optional<int64_t> at_position =
      request->has_at_position() ? std::optional<int64_t>(request->at_position()) : std::nullopt;
  // Runs once the parent has no running call: the child gets its committed
  // states.
  service_->engine->RunSessionCommand(
      parent, [this, reactor, parent, child, at_position, response, start,
               scope](StateCache& cache) {
        absl::StatusOr<std::string> id = [&]() -> absl::StatusOr<std::string> {
          if (absl::Status s = service_->RestoreIfAbsent(cache, parent); !s.ok()) return s;
          if (!scope.open()) {
            // The child's pages: one per layer of the parent with a state.
            absl::StatusOr<SessionInfo> info = cache.DescribeSession(parent);
            if (!info.ok()) return info.status();
            int64_t pages = 0;
            for (const LayerStateInfo& layer : info->layers) pages += layer.has_state ? 1 : 0;
            if (absl::Status s = CheckNewSession(cache, scope, pages, service_->tenant_metrics);
                !s.ok()) {
              return s;
            }
          }
          const std::string id =
              child.empty() && !scope.open() ? scope.Inward(GenerateSessionId(cache)) : child;
          if (absl::Status s = service_->CheckIdFree(id); !s.ok()) return s;
          return ForkSessionOp(cache, parent, id, at_position);
        }();
        if (id.ok()) response->set_session_id(scope.Outward(*id));
        FinishUnary(reactor, "ForkSession", start, id.status(), scope);
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
  TenantScope scope;
  if (!Authenticate(*context, reactor, "DescribeSession", start, &scope)) return reactor;
  if (absl::Status s = scope.ValidateRequiredId(request->session_id(), "session_id"); !s.ok()) {
    FinishUnary(reactor, "DescribeSession", start, s, scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "DescribeSession", start, s, scope);
    return reactor;
  }
  const std::string id = scope.Inward(request->session_id());
  service_->engine->RunSessionCommand(
      id, [this, reactor, id, response, start, scope](StateCache& cache) {
        absl::Status restored = service_->RestoreIfAbsent(cache, id);
        absl::StatusOr<gdn::v1::DescribeSessionResponse> described =
            restored.ok() ? DescribeSessionOp(cache, id, absl::Now())
                          : absl::StatusOr<gdn::v1::DescribeSessionResponse>(restored);
        if (described.ok()) {
          *response = std::move(*described);
          response->set_session_id(scope.Outward(response->session_id()));
        }
        FinishUnary(reactor, "DescribeSession", start, described.status(), scope);
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
  TenantScope scope;
  if (!Authenticate(*context, reactor, "ListSessions", start, &scope)) return reactor;
  // Only the sessions this server holds: never files of --snapshot_dir.
  service_->engine->RunSessionCommand(
      "", [this, reactor, request, response, start, scope](StateCache& cache) {
        absl::StatusOr<gdn::v1::ListSessionsResponse> page =
            ListSessionsPage(cache.ListSessions(), scope, *request);
        if (page.ok()) *response = std::move(*page);
        FinishUnary(reactor, "ListSessions", start, page.status(), scope);
      });
  return reactor;
}

grpc::ServerWriteReactor<gdn::v1::SessionChunk>* GdnServiceImpl::ExportSession(
    grpc::CallbackServerContext* context,
    const gdn::v1::ExportSessionRequest* request) {
  return new ExportSessionReactor(service_, service_->ScopeOf(*context), request->session_id());
}

grpc::ServerReadReactor<gdn::v1::SessionChunk>* GdnServiceImpl::ImportSession(
    grpc::CallbackServerContext* context,
    gdn::v1::ImportSessionResponse* response) {
  return new ImportSessionReactor(service_, context, service_->ScopeOf(*context), response);
}

grpc::ServerUnaryReactor* GdnServiceImpl::GetServerInfo(
    grpc::CallbackServerContext* context,
    const gdn::v1::ServerInfoRequest* request,
    gdn::v1::ServerInfoResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "GetServerInfo", start, &scope)) return reactor;
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
  FinishUnary(reactor, "GetServerInfo", start, absl::OkStatus(), scope);
  return reactor;
}

}  // namespace gdn
