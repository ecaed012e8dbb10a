#include "server/rpc/session_stream_reactors.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/auth/tenant_quota.h"
#include "server/rpc/grpc_status.h"
#include "server/sessions/session_id.h"
#include "server/sessions/session_ops.h"

namespace gdn {

ExportSessionReactor::ExportSessionReactor(const ServiceContext* service,
                                           absl::StatusOr<TenantScope> scope,
                                           std::string session_id)
    : service_(service), start_(absl::Now()) {
  if (!scope.ok()) {
    FinishWith(scope.status());
    return;
  }
  scope_ = std::move(*scope);
  if (absl::Status s = scope_.ValidateRequiredId(session_id, "session_id"); !s.ok()) {
    FinishWith(s);
    return;
  }
  session_id_ = scope_.Inward(session_id);
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishWith(s);  // draining
    return;
  }
  service_->engine->RunSessionCommand(session_id_, [this](StateCache& cache) {
    absl::Status restored = service_->RestoreIfAbsent(cache, session_id_);
    absl::StatusOr<SessionStates> states =
        restored.ok() ? ExportSessionOp(cache, session_id_)
                      : absl::StatusOr<SessionStates>(restored);
    service_->LeaveCall();  // the states are copied out
    Exported(std::move(states));
  });
}

void ExportSessionReactor::Exported(absl::StatusOr<SessionStates> states) {
  if (!states.ok()) {
    FinishWith(states.status());
    return;
  }
  states_ = std::move(*states);
  states_.session_id = scope_.Outward(states_.session_id);  // chunks carry the caller's id
  chunker_.emplace(&states_, service_->layer_config,
                   static_cast<size_t>(service_->config.max_message_bytes / 2));
  WriteNext();
}

void ExportSessionReactor::WriteNext() {
  if (!chunker_->Next(&chunk_)) {
    FinishWith(absl::OkStatus());
    return;
  }
  StartWrite(&chunk_);
}

void ExportSessionReactor::OnWriteDone(bool ok) {
  if (!ok) {
    FinishWith(absl::CancelledError("the client went away during export"));
    return;
  }
  WriteNext();
}

void ExportSessionReactor::FinishWith(const absl::Status& status) {
  const absl::Status outward = scope_.Outward(status);
  service_->RecordRequest("ExportSession", outward, start_, scope_);
  Finish(ToGrpcStatus(outward));
}

void ExportSessionReactor::OnDone() { delete this; }

ImportSessionReactor::ImportSessionReactor(
    const ServiceContext* service, grpc::CallbackServerContext* context,
    absl::StatusOr<TenantScope> scope, gdn::v1::ImportSessionResponse* response)
    : service_(service),
      context_(context),
      start_(absl::Now()),
      response_(response),
      assembler_(service->layer_config,
                 service->engine->info().layout.page_bytes) {
  if (!scope.ok()) {
    FinishWith(scope.status());  // nothing of the stream is read
    return;
  }
  scope_ = std::move(*scope);
  StartRead(&chunk_);
}

void ImportSessionReactor::OnReadDone(bool ok) {
  if (ok) {
    absl::Status status = assembler_.Add(chunk_);  // validates every chunk's id
    if (!status.ok()) {
      FinishWith(status);  // the rest of the stream is not read
      return;
    }
    StartRead(&chunk_);
    return;
  }
  // End of the client's stream, or the call ended: never import a stream
  // that did not end cleanly.
  if (context_->IsCancelled()) {
    FinishWith(absl::CancelledError("import stream cancelled"));
    return;
  }
  absl::StatusOr<SessionStates> states = assembler_.Finish();
  if (!states.ok()) {
    FinishWith(states.status());
    return;
  }
  if (absl::Status s = scope_.ValidateRequiredId(states->session_id, "session_id"); !s.ok()) {
    FinishWith(s);
    return;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishWith(s);  // draining: not imported
    return;
  }
  auto shared = std::make_shared<SessionStates>(std::move(*states));
  shared->session_id = scope_.Inward(shared->session_id);
  service_->engine->RunSessionCommand(
      shared->session_id, [this, shared](StateCache& cache) {
        int64_t pages = 0;
        for (const StateCache::LayerState& layer : shared->layers) {
          pages += layer.bytes.empty() ? 0 : 1;
        }
        absl::Status status = CheckNewSession(cache, scope_, pages, service_->tenant_metrics);
        if (status.ok()) status = service_->CheckIdFree(shared->session_id);
        if (status.ok()) status = ImportSessionOp(cache, *shared);
        service_->LeaveCall();
        if (status.ok()) {
          response_->set_session_id(scope_.Outward(shared->session_id));
          response_->set_layers_imported(shared->layers_received);
        }
        FinishWith(status);
      });
}

void ImportSessionReactor::FinishWith(const absl::Status& status) {
  const absl::Status outward = scope_.Outward(status);
  service_->RecordRequest("ImportSession", outward, start_, scope_);
  Finish(ToGrpcStatus(outward));
}

void ImportSessionReactor::OnDone() { delete this; }

}  // namespace gdn
