#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

/* EVP_RSA_gen / EVP_EC_gen are macros over the variadic EVP_PKEY_Q_keygen, which Swift cannot call. */
static inline EVP_PKEY *copenssl_generate_rsa(unsigned int bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
}

static inline EVP_PKEY *copenssl_generate_ec(const char *curve) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
}

/* SHA-256 and HMAC-SHA-256 over OpenSSL's low-level SHA-256 (SHA256_Init/Update/Final). OpenSSL 3 deprecates these
 * in favour of EVP, but the EVP path (EVP_Digest, HMAC()) fetches its implementation from a provider, and the first
 * fetch of a process loads the configuration file and the default provider: about a million instructions that a
 * cold function pays for one token check (docs/benchmarks.md, "Where the cold gap goes"). The low-level functions
 * are plain code, the same SHA-256 as the default provider's. Deprecation warnings stay inside this header. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
#ifdef COPENSSL_EVP_DIGESTS
/* The benchmark's lever build only (scripts/bench.sh, -Xcc -DCOPENSSL_EVP_DIGESTS): the same two functions through
 * EVP, as before, to measure what the low-level path saves. Never shipped. */
static inline void copenssl_sha256(const unsigned char *data, size_t length, unsigned char digest[32]) {
    unsigned int written = 0;
    if (EVP_Digest(data, length, digest, &written, EVP_sha256(), NULL) != 1 || written != 32) abort();
}

static inline void copenssl_hmac_sha256(const unsigned char *key, size_t key_length, const unsigned char *message,
                                        size_t length, unsigned char code[32]) {
    static const unsigned char empty = 0;
    unsigned int written = 0;
    if (HMAC(EVP_sha256(), key_length > 0 ? key : &empty, (int)key_length, message, length, code, &written) == NULL ||
        written != 32)
        abort();
}
#else
static inline void copenssl_sha256(const unsigned char *data, size_t length, unsigned char digest[32]) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, data, length);
    SHA256_Final(digest, &context);
    OPENSSL_cleanse(&context, sizeof context);
}

/* HMAC-SHA-256 (RFC 2104): SHA-256((K ^ opad) || SHA-256((K ^ ipad) || message)), K the key zero-padded to the
 * 64-byte block, or its SHA-256 when longer. */
static inline void copenssl_hmac_sha256(const unsigned char *key, size_t key_length, const unsigned char *message,
                                        size_t length, unsigned char code[32]) {
    unsigned char block[64], pad[64], inner[32];
    memset(block, 0, sizeof block);
    if (key_length > sizeof block) {
        copenssl_sha256(key, key_length, block);
    } else if (key_length > 0) {
        memcpy(block, key, key_length);
    }
    SHA256_CTX context;
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, message, length);
    SHA256_Final(inner, &context);
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, inner, sizeof inner);
    SHA256_Final(code, &context);
    OPENSSL_cleanse(&context, sizeof context);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
    OPENSSL_cleanse(inner, sizeof inner);
}
#endif
#pragma clang diagnostic pop

#endif
