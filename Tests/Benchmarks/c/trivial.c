/* The start-up floor: a C program that reads its stdin to EOF and prints a tiny JSON response, nothing more.
 * scripts/bench.sh builds it with cc -O2 (dynamically linked, as a normal C program, and statically for the
 * "trivial static process start" floor). */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    char buffer[65536];
    while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
    }
    fputs("{\"statusCode\":400,\"body\":\"{}\"}\n", stdout);
    return 0;
}
