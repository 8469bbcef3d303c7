/* What c/register.c and c/runtime.c share: reading the API Gateway event push-register gets, checking its bearer
 * token, and the register upsert (the INSERT ... ON CONFLICT statement of Shared/Devices/PushDeviceRegistry.swift)
 * over libpq.
 *
 * These are floors, not a second implementation. The token is checked as push-register checks it: the header's
 * `alg` must be HS256, the signature an HMAC-SHA-256 of `header.payload` under SUPABASE_JWT_SECRET (compared with
 * CRYPTO_memcmp), `exp` in the future, `aud` and `role` "authenticated", then `sub` is the caregiver. The HMAC is
 * computed as the function computes it: over OpenSSL's low-level SHA-256 (SHA256_Init/Update/Final), or, built with
 * -DFLOOR_EVP_HMAC, through OpenSSL's one-shot HMAC() (the EVP path: it loads the default provider on first use).
 * What they still skip: the event and the token's JSON are searched, not parsed (the bench writes both without
 * spaces), and the database work is one statement with no transaction, no advisory lock, no device cap, no
 * installation rotation or hand-over. Built with -DFLOOR_SKIP_VERIFY they decode `sub` without any check (the
 * floors of earlier rounds, kept to compare). */
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The text after `marker` up to (not including) `end`, copied into `out`; 0 when absent or too long. */
static int event_field(const char *event, const char *marker, const char *end, char *out, size_t capacity) {
    const char *start = strstr(event, marker);
    if (start == NULL) return 0;
    start += strlen(marker);
    const char *stop = strstr(start, end);
    if (stop == NULL || (size_t)(stop - start) >= capacity) return 0;
    memcpy(out, start, (size_t)(stop - start));
    out[stop - start] = '\0';
    return 1;
}

static int base64url_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/* Decodes base64url text (up to `end` or a '.') into `out`; the decoded length, or -1 when invalid or too long. */
static long base64url_decode(const char *text, const char *end, unsigned char *out, size_t capacity) {
    size_t length = 0;
    unsigned bits = 0;
    int count = 0;
    for (const char *p = text; p < end && *p != '.'; p++) {
        int value = base64url_value(*p);
        if (value < 0) return -1;
        bits = (bits << 6) | (unsigned)value;
        count += 6;
        if (count >= 8) {
            count -= 8;
            if (length + 1 >= capacity) return -1;
            out[length++] = (unsigned char)((bits >> count) & 0xFF);
        }
    }
    return (long)length;
}

#ifndef FLOOR_SKIP_VERIFY
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* HMAC-SHA-256 (RFC 2104) of `message` under `key` into `code` (32 bytes). */
static int hmac_sha256(const unsigned char *key, size_t key_length, const unsigned char *message, size_t length,
                       unsigned char *code) {
#ifdef FLOOR_EVP_HMAC
    unsigned int written = 0;
    return HMAC(EVP_sha256(), key, (int)key_length, message, length, code, &written) != NULL && written == 32;
#else
    unsigned char block[64] = {0}, inner[32];
    SHA256_CTX context;
    if (key_length > sizeof block) {
        SHA256_Init(&context);
        SHA256_Update(&context, key, key_length);
        SHA256_Final(block, &context);
    } else {
        memcpy(block, key, key_length);
    }
    unsigned char pad[64];
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, message, length);
    SHA256_Final(inner, &context);
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, inner, sizeof inner);
    SHA256_Final(code, &context);
    return 1;
#endif
}
#pragma GCC diagnostic pop

/* The token's check (see the top of this file): 1 when `jwt` is a valid session. */
static int token_is_valid(const char *jwt, const char *payload, size_t payload_length) {
    const char *secret = getenv("SUPABASE_JWT_SECRET");
    const char *dot = strchr(payload, '.');
    if (secret == NULL || dot == NULL) return 0;
    unsigned char header[512], signature[64], expected[32];
    long header_length = base64url_decode(jwt, payload - 1, header, sizeof header);
    if (header_length < 0) return 0;
    header[header_length] = '\0';
    if (strstr((const char *)header, "\"alg\":\"HS256\"") == NULL) return 0;
    if (base64url_decode(dot + 1, dot + 1 + strlen(dot + 1), signature, sizeof signature) != 32) return 0;
    if (!hmac_sha256((const unsigned char *)secret, strlen(secret), (const unsigned char *)jwt, (size_t)(dot - jwt),
                     expected))
        return 0;
    if (CRYPTO_memcmp(expected, signature, sizeof expected) != 0) return 0;
    (void)payload_length;
    return 1;
}
#endif

/* The caregiver id (`sub`) and the device token of a push-register event; 0 when either is missing or, unless
 * built with -DFLOOR_SKIP_VERIFY, the token does not pass the check. */
static int event_registration(const char *event, char *caregiver, size_t caregiver_capacity, char *token,
                              size_t token_capacity) {
    char jwt[4096];
    if (!event_field(event, "\"authorization\":\"Bearer ", "\"", jwt, sizeof jwt)) return 0;
    const char *payload = strchr(jwt, '.');
    if (payload == NULL) return 0;
    payload++;
    char decoded[3072];
    long length = base64url_decode(payload, payload + strlen(payload), (unsigned char *)decoded, sizeof decoded);
    if (length < 0) return 0;
    decoded[length] = '\0';
#ifndef FLOOR_SKIP_VERIFY
    if (!token_is_valid(jwt, payload, (size_t)length)) return 0;
    char expiry[32];
    if (!event_field(decoded, "\"exp\":", ",", expiry, sizeof expiry) &&
        !event_field(decoded, "\"exp\":", "}", expiry, sizeof expiry))
        return 0;
    if (strtod(expiry, NULL) < (double)time(NULL)) return 0;
    if (strstr(decoded, "\"aud\":\"authenticated\"") == NULL || strstr(decoded, "\"role\":\"authenticated\"") == NULL)
        return 0;
#endif
    if (!event_field(decoded, "\"sub\":\"", "\"", caregiver, caregiver_capacity)) return 0;
    /* The body is a JSON string inside the event: its quotes arrive escaped. */
    return event_field(event, "\\\"token\\\":\\\"", "\\\"", token, token_capacity);
}

static const char register_sql[] =
    "INSERT INTO caregiver_push.push_devices"
    " (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled, last_seen_at)"
    " VALUES ('CAREGIVER', $1::uuid, $2, sha256(convert_to($2, 'UTF8')), 'ios', 'DEV', NULL, true, now())"
    " ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET"
    " platform = EXCLUDED.platform, environment = EXCLUDED.environment,"
    " installation_id = COALESCE(EXCLUDED.installation_id, push_devices.installation_id),"
    " is_enabled = true, disabled_reason = NULL, last_seen_at = now(), updated_at = now()"
    " RETURNING id";

static const char ok_response[] =
    "{\"body\":\"{\\\"ok\\\":true}\",\"headers\":{\"content-type\":\"application\\/json\"},\"statusCode\":200}";
static const char bad_request_response[] =
    "{\"body\":\"{\\\"title\\\":\\\"Bad Request\\\"}\",\"headers\":{\"content-type\":\"application\\/problem+json\"},"
    "\"statusCode\":400}";
static const char error_response[] =
    "{\"body\":\"{\\\"title\\\":\\\"Service Unavailable\\\"}\",\"headers\":{\"content-type\":"
    "\"application\\/problem+json\"},\"statusCode\":503}";

/* Runs the upsert for `event` on `*connection` (connecting first when there is none or it broke) and returns the
 * response document. */
static const char *register_device(const char *event, PGconn **connection) {
    char caregiver[64], token[4200];
    if (!event_registration(event, caregiver, sizeof caregiver, token, sizeof token)) return bad_request_response;
    if (*connection == NULL || PQstatus(*connection) != CONNECTION_OK) {
        if (*connection != NULL) PQfinish(*connection);
        const char *url = getenv("DATABASE_URL");
        *connection = PQconnectdb(url != NULL ? url : "");
        if (PQstatus(*connection) != CONNECTION_OK) {
            fprintf(stderr, "connect: %s", PQerrorMessage(*connection));
            return error_response;
        }
    }
    const char *values[2] = {caregiver, token};
    PGresult *result = PQexecParams(*connection, register_sql, 2, NULL, values, NULL, NULL, 0);
    int ok = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1;
    if (!ok) fprintf(stderr, "upsert: %s", PQerrorMessage(*connection));
    PQclear(result);
    return ok ? ok_response : error_response;
}
