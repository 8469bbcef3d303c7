/*
 * libcurl through dlopen (see include/ccurl.h for why). The dlopen call is in this file, which is linked into the
 * executable, so the loader searches the executable's run path first: a Lambda zip's bootstrap (DT_RUNPATH
 * $ORIGIN/lib) finds lib/libcurl.so.4, and libcurl (run path $ORIGIN) finds its own dependencies beside it.
 */
#include "ccurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Each pointer has the type of the function curl.h declares (typeof of the declaration: nothing is linked). */
static struct {
    __typeof__(curl_global_init) *global_init;
    __typeof__(curl_easy_init) *easy_init;
    __typeof__(curl_easy_cleanup) *easy_cleanup;
    __typeof__(curl_easy_setopt) *easy_setopt;
    __typeof__(curl_easy_getinfo) *easy_getinfo;
    __typeof__(curl_multi_init) *multi_init;
    __typeof__(curl_multi_cleanup) *multi_cleanup;
    __typeof__(curl_multi_setopt) *multi_setopt;
    __typeof__(curl_multi_add_handle) *multi_add_handle;
    __typeof__(curl_multi_remove_handle) *multi_remove_handle;
    __typeof__(curl_multi_perform) *multi_perform;
    __typeof__(curl_multi_poll) *multi_poll;
    __typeof__(curl_multi_info_read) *multi_info_read;
    __typeof__(curl_slist_append) *slist_append;
    __typeof__(curl_slist_free_all) *slist_free_all;
} api;

/* Written once, inside pthread_once; pthread_once makes the writes visible to every thread that calls it. */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = -1;
static char load_error[512];

static void record_error(const char *what, const char *reason) {
    snprintf(load_error, sizeof load_error, "%s%s", what, reason ? reason : "unknown reason");
}

static void load(void) {
    void *library = dlopen(CCURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        /* dlerror's sentence starts with the library's name or path ("libcurl.so.4: cannot open shared object
           file: …", or names the dependency that is missing). */
        record_error("", dlerror());
        return;
    }
#define CCURL_RESOLVE(field, symbol)                                                                               \
    do {                                                                                                           \
        dlerror();                                                                                                 \
        api.field = (__typeof__(api.field))dlsym(library, #symbol);                                                \
        if (api.field == NULL) {                                                                                   \
            record_error(CCURL_LIBRARY " lacks " #symbol ": ", dlerror());                                         \
            return;                                                                                                \
        }                                                                                                          \
    } while (0)
    CCURL_RESOLVE(global_init, curl_global_init);
    CCURL_RESOLVE(easy_init, curl_easy_init);
    CCURL_RESOLVE(easy_cleanup, curl_easy_cleanup);
    CCURL_RESOLVE(easy_setopt, curl_easy_setopt);
    CCURL_RESOLVE(easy_getinfo, curl_easy_getinfo);
    CCURL_RESOLVE(multi_init, curl_multi_init);
    CCURL_RESOLVE(multi_cleanup, curl_multi_cleanup);
    CCURL_RESOLVE(multi_setopt, curl_multi_setopt);
    CCURL_RESOLVE(multi_add_handle, curl_multi_add_handle);
    CCURL_RESOLVE(multi_remove_handle, curl_multi_remove_handle);
    CCURL_RESOLVE(multi_perform, curl_multi_perform);
    CCURL_RESOLVE(multi_poll, curl_multi_poll);
    CCURL_RESOLVE(multi_info_read, curl_multi_info_read);
    CCURL_RESOLVE(slist_append, curl_slist_append);
    CCURL_RESOLVE(slist_free_all, curl_slist_free_all);
#undef CCURL_RESOLVE
    /* The library stays loaded for the life of the process (never dlclose'd: OpenSSL's state lives in it). */
    load_status = 0;
}

int ccurl_load(void) {
    if (pthread_once(&load_once, load) != 0) return -1;
    return load_status;
}

const char *ccurl_load_error(void) { return ccurl_load() == 0 ? NULL : load_error; }

/* Every entry point loads first (after the first call, pthread_once is one atomic load): a call can never reach a
   pointer that is not set. */
#define CCURL_READY (ccurl_load() == 0)

CURLcode ccurl_global_init(long flags) { return CCURL_READY ? api.global_init(flags) : CURLE_FAILED_INIT; }

CURL *ccurl_easy_init(void) { return CCURL_READY ? api.easy_init() : NULL; }

void ccurl_easy_cleanup(CURL *handle) {
    if (CCURL_READY) api.easy_cleanup(handle);
}

CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return CCURL_READY ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return CCURL_READY ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return CCURL_READY ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return CCURL_READY ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_setopt_write_function(CURL *handle, CURLoption option, ccurl_write_callback callback) {
    return CCURL_READY ? api.easy_setopt(handle, option, callback) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return CCURL_READY ? api.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return CCURL_READY ? api.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}

CURLcode ccurl_easy_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return CCURL_READY ? api.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}

CURLM *ccurl_multi_init(void) { return CCURL_READY ? api.multi_init() : NULL; }

CURLMcode ccurl_multi_cleanup(CURLM *multi) { return CCURL_READY ? api.multi_cleanup(multi) : CURLM_INTERNAL_ERROR; }

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return CCURL_READY ? api.multi_setopt(multi, option, value) : CURLM_INTERNAL_ERROR;
}

CURLMcode ccurl_multi_add_handle(CURLM *multi, CURL *handle) {
    return CCURL_READY ? api.multi_add_handle(multi, handle) : CURLM_INTERNAL_ERROR;
}

CURLMcode ccurl_multi_remove_handle(CURLM *multi, CURL *handle) {
    return CCURL_READY ? api.multi_remove_handle(multi, handle) : CURLM_INTERNAL_ERROR;
}

CURLMcode ccurl_multi_perform(CURLM *multi, int *running) {
    return CCURL_READY ? api.multi_perform(multi, running) : CURLM_INTERNAL_ERROR;
}

CURLMcode ccurl_multi_poll(CURLM *multi, struct curl_waitfd extra_fds[], unsigned int extra_nfds, int timeout_ms,
                           int *ret) {
    return CCURL_READY ? api.multi_poll(multi, extra_fds, extra_nfds, timeout_ms, ret) : CURLM_INTERNAL_ERROR;
}

CURLMsg *ccurl_multi_info_read(CURLM *multi, int *queued) {
    return CCURL_READY ? api.multi_info_read(multi, queued) : NULL;
}

struct curl_slist *ccurl_slist_append(struct curl_slist *list, const char *line) {
    return CCURL_READY ? api.slist_append(list, line) : NULL;
}

void ccurl_slist_free_all(struct curl_slist *list) {
    if (CCURL_READY) api.slist_free_all(list);
}
