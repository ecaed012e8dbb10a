#include "tests/client/e2e/grpc_probes.h"

#include <chrono>
#include <future>

#include "absl/strings/str_cat.h"
#include "client/grpc_status.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace gdn::e2e {
namespace {

// A length-delimited field (string / bytes / message) in protobuf encoding.
std::string LengthDelimited(int field, const std::string& value) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  varint((static_cast<uint64_t>(field) << 3) | 2);
  varint(value.size());
  out += value;
  return out;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(10);
}

}  // namespace

absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::ByteBuffer request = ToBuffer(LengthDelimited(1, service));
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&done](grpc::Status s) { done.set_value(s); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return client::FromGrpcStatus(status);
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(FromBuffer(response))) {
    return absl::DataLossError("bad HealthCheckResponse");
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1) return static_cast<int>(fields.field(i).varint());
  }
  return 0;  // proto3 default: UNKNOWN
}

absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&cq](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    return cq.Next(&got, &ok) && ok && reinterpret_cast<intptr_t>(got) == tag;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  bool ok = step(1);
  grpc::ByteBuffer request = ToBuffer(LengthDelimited(7, "*"));  // list_services
  grpc::ByteBuffer response;
  if (ok) {
    call->Write(request, reinterpret_cast<void*>(2));
    ok = step(2);
  }
  if (ok) {
    call->WritesDone(reinterpret_cast<void*>(3));
    ok = step(3);
  }
  bool have_response = false;
  if (ok) {
    call->Read(&response, reinterpret_cast<void*>(4));
    have_response = step(4);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  if (!status.ok()) return client::FromGrpcStatus(status);
  if (!have_response) return absl::DataLossError("reflection sent no response");

  // ServerReflectionResponse.list_services_response (6) ->
  // ListServiceResponse.service (1) -> ServiceResponse.name (1).
  google::protobuf::UnknownFieldSet top;
  if (!top.ParseFromString(FromBuffer(response))) return absl::DataLossError("bad response");
  std::vector<std::string> names;
  for (int i = 0; i < top.field_count(); ++i) {
    if (top.field(i).number() == 7) return absl::InternalError("reflection answered an error");
    if (top.field(i).number() != 6) continue;
    google::protobuf::UnknownFieldSet list;
    if (!list.ParseFromString(top.field(i).length_delimited())) continue;
    for (int j = 0; j < list.field_count(); ++j) {
      if (list.field(j).number() != 1) continue;
      google::protobuf::UnknownFieldSet service;
      if (!service.ParseFromString(list.field(j).length_delimited())) continue;
      for (int k = 0; k < service.field_count(); ++k) {
        if (service.field(k).number() == 1) names.push_back(service.field(k).length_delimited());
      }
    }
  }
  return names;
}

}  // namespace gdn::e2e
