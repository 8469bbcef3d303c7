/* The Lambda custom-runtime floor of push-register: the AWS Lambda Runtime API over libcurl, as a `bootstrap` does.
 * GET /2018-06-01/runtime/invocation/next (blocks until there is an event), take Lambda-Runtime-Aws-Request-Id,
 * run the register upsert (connecting at first use, keeping the connection), POST the response to
 * /2018-06-01/runtime/invocation/{id}/response, loop. Leaves after three failed GETs in a row (the API is gone).
 * scripts/bench.sh builds it with cc -O2, linked dynamically against the system's libpq and libcurl. */
#include <curl/curl.h>
#include <strings.h>
#include <unistd.h>

#include "event.h"

struct buffer {
    char *data;
    size_t length, capacity;
};

static size_t append(char *data, size_t size, size_t count, void *target) {
    struct buffer *buffer = target;
    size_t bytes = size * count;
    if (buffer->length + bytes + 1 > buffer->capacity) {
        size_t capacity = (buffer->length + bytes + 1) * 2;
        char *grown = realloc(buffer->data, capacity);
        if (grown == NULL) return 0;
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->length, data, bytes);
    buffer->length += bytes;
    buffer->data[buffer->length] = '\0';
    return bytes;
}

static size_t request_id_header(char *data, size_t size, size_t count, void *target) {
    static const char name[] = "lambda-runtime-aws-request-id:";
    size_t bytes = size * count, prefix = sizeof name - 1;
    if (bytes > prefix && strncasecmp(data, name, prefix) == 0) {
        char *id = target;
        size_t start = prefix, end = bytes;
        while (start < end && (data[start] == ' ' || data[start] == '\t')) start++;
        while (end > start && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' ')) end--;
        if (end - start < 256) {
            memcpy(id, data + start, end - start);
            id[end - start] = '\0';
        }
    }
    return bytes;
}

int main(void) {
    const char *api = getenv("AWS_LAMBDA_RUNTIME_API");
    if (api == NULL || *api == '\0') {
        fputs("AWS_LAMBDA_RUNTIME_API is not set\n", stderr);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *curl = curl_easy_init();
    if (curl == NULL) return 1;
    char next[512], url[1024], id[256];
    snprintf(next, sizeof next, "http://%s/2018-06-01/runtime/invocation/next", api);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    struct buffer event = {NULL, 0, 0}, ignored = {NULL, 0, 0};
    PGconn *connection = NULL;
    int failures = 0;
    while (failures < 3) {
        curl_easy_reset(curl);
        event.length = 0;
        id[0] = '\0';
        curl_easy_setopt(curl, CURLOPT_URL, next);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &event);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, request_id_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, id);
        long status = 0;
        if (curl_easy_perform(curl) != CURLE_OK ||
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200 || id[0] == '\0' ||
            event.data == NULL) {
            failures++;
            usleep(200000 * failures);
            continue;
        }
        failures = 0;
        const char *response = register_device(event.data, &connection);
        curl_easy_reset(curl);
        ignored.length = 0;
        snprintf(url, sizeof url, "http://%s/2018-06-01/runtime/invocation/%s/response", api, id);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, response);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(response));
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ignored);
        if (curl_easy_perform(curl) != CURLE_OK) fputs("the Runtime API refused the response\n", stderr);
    }
    if (connection != NULL) PQfinish(connection);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    return 1;
}
