/* What c/register.c and c/runtime.c share: reading the API Gateway event push-register gets, and the register
 * upsert (the INSERT ... ON CONFLICT statement of Shared/Devices/PushDeviceRegistry.swift) over libpq.
 *
 * These are floors, not a second implementation: the event is searched, not parsed (it is the bench's own, written
 * by JSONEncoder without spaces), and the bearer token's payload is decoded for its `sub` without verifying the
 * signature. One statement, no transaction, no advisory lock, no rotation or hand-over updates. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The caregiver id (`sub`) and the device token of a push-register event; 0 when either is missing. */
static int event_registration(const char *event, char *caregiver, size_t caregiver_capacity, char *token,
                              size_t token_capacity) {
    char jwt[4096];
    if (!event_field(event, "\"authorization\":\"Bearer ", "\"", jwt, sizeof jwt)) return 0;
    const char *payload = strchr(jwt, '.');
    if (payload == NULL) return 0;
    payload++;
    char decoded[3072];
    size_t length = 0;
    unsigned bits = 0;
    int count = 0;
    for (const char *p = payload; *p != '\0' && *p != '.' && length + 1 < sizeof decoded; p++) {
        int value = base64url_value(*p);
        if (value < 0) return 0;
        bits = (bits << 6) | (unsigned)value;
        count += 6;
        if (count >= 8) {
            count -= 8;
            decoded[length++] = (char)((bits >> count) & 0xFF);
        }
    }
    decoded[length] = '\0';
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
