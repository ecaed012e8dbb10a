#include "tests/server/auth/test_certs.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gdn::testing {
namespace {

bool Run(const std::string& command) {
  const int rc = std::system(absl::StrCat(command, " >/dev/null 2>&1").c_str());
  if (rc != 0) ADD_FAILURE() << "failed (" << rc << "): " << command;
  return rc == 0;
}

// An EC P-256 key and a certificate for `subject` signed by ca (self-signed
// when ca is empty), with `san` as subjectAltName when given.
bool MakeCert(const std::string& dir, const std::string& name, const std::string& subject,
              const std::string& ca, const std::string& san, bool is_ca) {
  const std::string key = absl::StrCat(dir, "/", name, ".key");
  const std::string cert = absl::StrCat(dir, "/", name, ".crt");
  const std::string ext = absl::StrCat(dir, "/", name, ".ext");
  {
    std::ofstream out(ext);
    if (is_ca) {
      out << "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";
    } else {
      out << "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
          << "extendedKeyUsage=serverAuth,clientAuth\n";
      if (!san.empty()) out << "subjectAltName=" << san << "\n";
    }
  }
  if (!Run(absl::StrCat("openssl ecparam -name prime256v1 -genkey -noout -out ", key))) {
    return false;
  }
  const std::string csr = absl::StrCat(dir, "/", name, ".csr");
  if (!Run(absl::StrCat("openssl req -new -key ", key, " -subj '/CN=", subject, "' -out ", csr))) {
    return false;
  }
  const std::string signer =
      ca.empty() ? absl::StrCat("-signkey ", key)
                 : absl::StrCat("-CA ", dir, "/", ca, ".crt -CAkey ", dir, "/", ca,
                                ".key -CAcreateserial");
  return Run(absl::StrCat("openssl x509 -req -in ", csr, " ", signer, " -days 2 -extfile ", ext,
                          " -out ", cert));
}

}  // namespace

std::string MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr ? base : "/tmp", "/gdn-test-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  return pattern;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TestCerts MakeTestCerts() {
  TestCerts c;
  c.dir = MakeTempDir();
  const std::string& d = c.dir;
  if (!MakeCert(d, "ca", "gdn test CA", "", "", true) ||
      !MakeCert(d, "server", "localhost", "ca", "DNS:localhost,IP:127.0.0.1", false) ||
      !MakeCert(d, "client", "gdn test client", "ca", "", false) ||
      !MakeCert(d, "other_ca", "untrusted CA", "", "", true) ||
      !MakeCert(d, "other_client", "untrusted client", "other_ca", "", false)) {
    return TestCerts();
  }
  c.ca_cert = d + "/ca.crt";
  c.server_cert = d + "/server.crt";
  c.server_key = d + "/server.key";
  c.client_cert = d + "/client.crt";
  c.client_key = d + "/client.key";
  c.other_ca_cert = d + "/other_ca.crt";
  c.other_client_cert = d + "/other_client.crt";
  c.other_client_key = d + "/other_client.key";
  return c;
}

}  // namespace gdn::testing
