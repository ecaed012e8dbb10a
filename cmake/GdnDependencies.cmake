# Dependencies from Debian's packages (scripts/install_deps.sh installs them).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
# The session file's CRC-32 (proto/session_file.cc); gRPC needs zlib too.
find_package(ZLIB REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
# The metrics port's HTTP server (server/ops/http_endpoint.cc).
find_package(civetweb CONFIG REQUIRED)
# Token digests (server/auth/tokens_file.cc).
find_package(OpenSSL REQUIRED)
if(BUILD_TESTING OR NOT DEFINED BUILD_TESTING)
  find_package(GTest CONFIG REQUIRED)
endif()
find_program(GDN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
