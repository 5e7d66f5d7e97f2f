// SHA-256 (native/src/packages/sha256.cpp) against FIPS 180-2 / NIST vectors,
// and incremental updates split at every offset.
#include <string>

#include "check.h"
#include "packages/sha256.h"

using namespace guild::packages;

TEST(known_vectors) {
  CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(m448.data(), m448.size()) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string m896 =
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  CHECK(sha256_hex(m896.data(), m896.size()) == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million.data(), million.size()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(padding_boundaries_and_incremental_updates) {
  // Lengths around the 55/56/64-byte padding edges, hashed in one call and in
  // two pieces split at every offset, must agree.
  for (size_t len : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u, 200u}) {
    std::string msg(len, '\0');
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>((i * 131 + 7) & 0xff);
    const std::string whole = sha256_hex(msg.data(), msg.size());
    for (size_t cut = 0; cut <= len; ++cut) {
      Sha256 h;
      h.update(msg.data(), cut);
      h.update(msg.data() + cut, len - cut);
      uint8_t d[32];
      h.finish(d);
      CHECK_MSG(to_hex(d, 32) == whole, "len %zu cut %zu", len, cut);
    }
  }
  // 64 'a' bytes: a known vector for the exact-block case.
  const std::string a64(64, 'a');
  CHECK(sha256_hex(a64.data(), a64.size()) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(file_digest_matches_memory_digest) {
  const std::string path = check::tmp_dir() + "/sha256_file.bin";
  std::string data(200000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 24);
  { std::ofstream f(path, std::ios::binary); f << data; }
  std::string err;
  CHECK(sha256_file_hex(path, &err) == sha256_hex(data.data(), data.size()));
  CHECK(sha256_file_hex(path + ".missing", &err).empty());
  CHECK(err.find("cannot open") != std::string::npos);
}

