/* The cold floor of push-register: read the event on stdin, connect to DATABASE_URL with libpq, run the register
 * upsert once, print the response, close stdout, then disconnect (the order push-register follows: the host has its
 * answer at stdout's EOF). scripts/bench.sh builds it with cc -O2, linked dynamically against the system's libpq. */
#include <unistd.h>

#include "event.h"

int main(void) {
    size_t capacity = 65536, length = 0;
    char *event = malloc(capacity);
    ssize_t got;
    while (event != NULL && (got = read(STDIN_FILENO, event + length, capacity - length - 1)) > 0) {
        length += (size_t)got;
        if (capacity - length < 2) event = realloc(event, capacity *= 2);
    }
    if (event == NULL) return 1;
    event[length] = '\0';
    PGconn *connection = NULL;
    const char *response = register_device(event, &connection);
    fputs(response, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    close(STDOUT_FILENO);
    if (connection != NULL) PQfinish(connection);
    free(event);
    return 0;
}
