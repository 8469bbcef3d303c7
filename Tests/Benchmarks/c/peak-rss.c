/* peak-rss PROGRAM: runs PROGRAM (stdin, stdout, stderr and environment inherited) with fork and exec, waits for it,
 * and prints what wait4's rusage says of it as the last line of stderr:
 *     peak-rss-kib=N user-us=N system-us=N minor-faults=N major-faults=N
 * (peak resident set, CPU time in user space and in the kernel, page faults); exits with PROGRAM's status.
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
    fprintf(stderr, "\npeak-rss-kib=%ld user-us=%ld system-us=%ld minor-faults=%ld major-faults=%ld\n", usage.ru_maxrss,
            usage.ru_utime.tv_sec * 1000000L + usage.ru_utime.tv_usec,
            usage.ru_stime.tv_sec * 1000000L + usage.ru_stime.tv_usec, usage.ru_minflt, usage.ru_majflt);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
