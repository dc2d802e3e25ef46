// runtime/redis/sha1.cpp — SHA-1 through libcrypto. Not for security: it only names scripts to
// Redis, exactly as SCRIPT LOAD would, without a round trip.
#include "sha1.hpp"

#include <openssl/evp.h>

#include <idem/errors.hpp>
#include <idem/identity.hpp>

namespace idem::detail::redis {

std::string sha1_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha1(), nullptr) != 1)
    throw error("SHA-1 failed in libcrypto");
  return to_hex(digest, size);
}

}  // namespace idem::detail::redis
