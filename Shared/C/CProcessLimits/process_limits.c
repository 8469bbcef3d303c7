#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "process_limits.h"

int caregiver_push_limit_data(pid_t pid, unsigned long long bytes) {
    struct rlimit limit = {.rlim_cur = (rlim_t)bytes, .rlim_max = (rlim_t)bytes};
    return prlimit(pid, RLIMIT_DATA, &limit, NULL);
}

int caregiver_push_loopback_port_in_use(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int bound = bind(fd, (struct sockaddr *)&address, sizeof address);
    int error = errno;
    close(fd);
    if (bound == 0) return 0;
    errno = error;
    return error == EADDRINUSE ? 1 : -1;
}
