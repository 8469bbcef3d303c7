// What a new server backend's first PL/pgSQL call costs (docs/decisions.md#plpgsql-preloaded): for each of ROUNDS
// new connections, an empty DO block twice, each timed; the first loads the language unless the server preloads it
// (shared_preload_libraries), the second runs it loaded. Not built by make test:
//
//   cc -O2 -o plpgsql-first-call Tests/Benchmarks/probes/plpgsql-first-call.c -I$(pg_config --includedir) -lpq
//   ./plpgsql-first-call "$DATABASE_URL" 20
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double timed(PGconn *connection, const char *sql) {
    double start = now_ms();
    PGresult *result = PQexec(connection, sql);
    double elapsed = now_ms() - start;
    if (PQresultStatus(result) != PGRES_COMMAND_OK && PQresultStatus(result) != PGRES_TUPLES_OK) {
        fprintf(stderr, "%s", PQerrorMessage(connection));
        exit(1);
    }
    PQclear(result);
    return elapsed;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATABASE_URL [ROUNDS]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 20;
    for (int round = 0; round < rounds; round++) {
        PGconn *connection = PQconnectdb(argv[1]);
        if (PQstatus(connection) != CONNECTION_OK) {
            fprintf(stderr, "%s", PQerrorMessage(connection));
            return 1;
        }
        timed(connection, "SELECT 1");
        double first = timed(connection, "DO $$BEGIN END$$");
        double second = timed(connection, "DO $$BEGIN END$$");
        printf("%.3f\t%.3f\n", first, second);
        PQfinish(connection);
    }
    return 0;
}
