/* peak-rss PROGRAM: runs PROGRAM (stdin, stdout, stderr and environment inherited) with fork and exec, waits for it,
 * and prints `peak-rss-kib=N` (wait4's ru_maxrss) as the last line of stderr; exits with PROGRAM's status.
 *
 * Why a helper: the bench spawns with posix_spawn, which execs from the bench's own address space (vfork), and Linux
 * carries the high-water mark of the address space an exec leaves into the child's ru_maxrss, so every child would
 * report at least the bench's own peak. This helper is small and static; the mark it passes on is its own. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: peak-rss PROGRAM [ARGUMENTS...]\n", stderr);
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
    }
    fprintf(stderr, "\npeak-rss-kib=%ld\n", usage.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
