#ifndef CCURL_H
#define CCURL_H
/*
 * libcurl, loaded on first use. Nothing links libcurl: ccurl.c opens it with dlopen the first time any ccurl_
 * function runs (once per process, thread-safely) and calls it through the pointers dlsym returns. A process that
 * makes no HTTP request (a one-shot push-register) never maps libcurl or the dozen libraries it needs.
 *
 * curl.h is included for its types and constants only: Swift must call the ccurl_ functions, never curl_ ones (those
 * would not link). Each ccurl_ function has the signature of its curl_ namesake; when libcurl cannot be loaded it
 * does nothing and returns CURLE_FAILED_INIT, CURLM_INTERNAL_ERROR or NULL.
 */
#include <curl/curl.h>

/* The library's name as the loader looks it up (from the executable's run path, then the system's). */
#define CCURL_LIBRARY "libcurl.so.4"

/* Loads libcurl and resolves every function below (the first call; later calls return the first result).
   0 when loaded, -1 when not: ccurl_load_error() then says why. */
int ccurl_load(void);
/* The loader's sentence for the failure (names the library, or the dependency or symbol it lacks), or NULL when
   loaded. Like every ccurl_ function, it tries the load first if nothing has yet. */
const char *ccurl_load_error(void);

CURLcode ccurl_global_init(long flags);

CURL *ccurl_easy_init(void);
void ccurl_easy_cleanup(CURL *handle);

/* curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic: Swift cannot call them, so one typed
   function per argument kind. */
CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
typedef size_t (*ccurl_write_callback)(char *data, size_t size, size_t count, void *context);
CURLcode ccurl_easy_setopt_write_function(CURL *handle, CURLoption option, ccurl_write_callback callback);
CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value);
CURLcode ccurl_easy_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value);

CURLM *ccurl_multi_init(void);
CURLMcode ccurl_multi_cleanup(CURLM *multi);
CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode ccurl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode ccurl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode ccurl_multi_perform(CURLM *multi, int *running);
CURLMcode ccurl_multi_poll(CURLM *multi, struct curl_waitfd extra_fds[], unsigned int extra_nfds, int timeout_ms,
                           int *ret);
CURLMsg *ccurl_multi_info_read(CURLM *multi, int *queued);

struct curl_slist *ccurl_slist_append(struct curl_slist *list, const char *line);
void ccurl_slist_free_all(struct curl_slist *list);

#endif
