// The schema of a JSON document as its sorted key paths ("scores[].mll_fit.values.noise"), and
// the golden-file check of it: tests/client/cli/golden/<name>.keys holds the paths `gpsel ... --json`
// prints, so a renamed or dropped field fails a test (values are checked by the other tests).
// GPSEL_UPDATE_GOLDEN=1 rewrites the files instead of comparing.
#ifndef GPSEL_TESTS_CLI_JSON_KEYS_H_
#define GPSEL_TESTS_CLI_JSON_KEYS_H_

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace gpsel::testing_json {

inline void CollectKeyPaths(const nlohmann::json& j, const std::string& prefix,
                            std::set<std::string>* paths) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      paths->insert(path);
      CollectKeyPaths(value, path, paths);
    }
  } else if (j.is_array()) {
    for (const auto& value : j) CollectKeyPaths(value, prefix + "[]", paths);
  }
}

inline std::string KeyPaths(const std::string& json_text) {
  std::set<std::string> paths;
  CollectKeyPaths(nlohmann::json::parse(json_text), "", &paths);
  std::string out;
  for (const std::string& path : paths) out += path + "\n";
  return out;
}

// Compares the key paths of `json_text` with tests/client/cli/golden/<name>.keys.
inline void ExpectGoldenKeys(const std::string& name, const std::string& json_text) {
  const std::string path =
      std::string(GPSEL_SOURCE_DIR) + "/tests/client/cli/golden/" + name + ".keys";
  const std::string actual = KeyPaths(json_text);
  const char* update = std::getenv("GPSEL_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << actual;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path
                         << " (GPSEL_UPDATE_GOLDEN=1 writes it)";
  const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(actual, expected) << "the JSON schema of '" << name << "' changed; if on purpose, "
                              << "rerun with GPSEL_UPDATE_GOLDEN=1 and say so in the README";
}

}  // namespace gpsel::testing_json

#endif  // GPSEL_TESTS_CLI_JSON_KEYS_H_
