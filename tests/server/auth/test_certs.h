// Test-only: a CA, a server certificate for localhost / 127.0.0.1 and a
// client certificate, made at test time with the openssl command (keys are
// never committed), plus a second CA that signed nothing the server trusts.
#ifndef GDN_TESTS_SERVER_AUTH_TEST_CERTS_H_
#define GDN_TESTS_SERVER_AUTH_TEST_CERTS_H_

#include <string>

namespace gdn::testing {

struct TestCerts {
  std::string dir;
  std::string ca_cert, server_cert, server_key, client_cert, client_key;
  std::string other_ca_cert, other_client_cert, other_client_key;  // untrusted
};

// Writes everything into a fresh directory under TMPDIR (or /tmp); fails
// the calling test (ADD_FAILURE) and returns empty paths when openssl fails.
TestCerts MakeTestCerts();

// A whole file.
std::string ReadTextFile(const std::string& path);
// A fresh, empty directory under TMPDIR (or /tmp).
std::string MakeTempDir();

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_AUTH_TEST_CERTS_H_
