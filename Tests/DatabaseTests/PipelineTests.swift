@testable import Libpq
@testable import CaregiverPush
import Foundation
import Testing
import TestSupport

/// libpq pipeline mode in the Postgres layer: what one flight does, and what a pipelined transaction keeps of an
/// ordinary one.
@Suite("libpq pipeline mode")
struct PipelineTests {
    struct Abort: Error {}

    static func patients(named name: String, _ connection: PostgresConnection) throws -> Int {
        try connection.query("SELECT count(*) FROM patients WHERE display_name = \(name)")[0].decode(Int.self, at: 0)
    }

    @Test("a pipeline runs its statements in order in one round trip, each seeing what the earlier ones wrote")
    func inOrder() throws {
        try TestDatabase.with { connection in
            let name = "pipeline-\(UUID().uuidString)"
            let before = connection.roundTrips
            let rows = try connection.pipeline([
                "BEGIN",
                "INSERT INTO patients (display_name) VALUES (\(name)) RETURNING id",
                "SELECT count(*) FROM patients WHERE display_name = \(name)",
                "ROLLBACK",
            ])
            #expect(connection.roundTrips - before == 1)
            #expect(rows.count == 4 && rows[1].count == 1)
            #expect(try rows[2][0].decode(Int.self, at: 0) == 1)
            #expect(try Self.patients(named: name, connection) == 0)
        }
    }

    @Test("the first failure is thrown, the statements after it do not run, and the connection is usable again")
    func failure() throws {
        try TestDatabase.with { (connection: PostgresConnection) throws in
            let name = "pipeline-\(UUID().uuidString)"
            #expect {
                try connection.pipeline([
                    "INSERT INTO patients (display_name) VALUES (\(name))", "SELECT 1 / 0",
                    "INSERT INTO patients (display_name) VALUES (\(name))",
                ])
            } throws: { error in
                (error as? PostgresError)?.sqlState?.rawValue == "22012"
            }
            // Outside BEGIN, the flight was one implicit transaction: the insert before the failure is gone too.
            #expect(try Self.patients(named: name, connection) == 0)
            #expect(try connection.query("SELECT 2")[0].decode(Int.self, at: 0) == 2)
        }
    }

    @Test("a pipelined transaction begins with the session's settings, which bound each statement, not each flight")
    func settings() throws {
        try TestDatabase.with { connection in
            connection.transactionSettings = TransactionSettings(
                lockTimeoutMilliseconds: 150, statementTimeoutMilliseconds: 400)
            let settings = try connection.withPipelinedTransaction { transaction in
                try transaction.run(["SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"])
            }
            #expect(try settings[0][0].decode((String, String).self) == ("150ms", "400ms"))
            // Three statements of 250 ms in one flight: each within the bound, together past it.
            _ = try connection.withPipelinedTransaction { transaction in
                try transaction.run(["SELECT pg_sleep(0.25)", "SELECT pg_sleep(0.25)", "SELECT pg_sleep(0.25)"])
            }
            #expect {
                try connection.withPipelinedTransaction { try $0.run(["SELECT 1", "SELECT pg_sleep(2)"]) }
            } throws: { error in
                (error as? PostgresError)?.sqlState == .queryCanceled
            }
            // SET LOCAL: nothing stays on the session.
            #expect(
                try connection.query("SELECT current_setting('statement_timeout')")[0].decode(String.self, at: 0) == "0"
            )
        }
    }

    @Test("a pipelined transaction commits alone, after its work: a body that throws leaves nothing")
    func commitsAlone() throws {
        try TestDatabase.with { connection in
            let name = "pipeline-\(UUID().uuidString)"
            #expect(throws: Abort.self) {
                try connection.withPipelinedTransaction { transaction in
                    try transaction.run(["INSERT INTO patients (display_name) VALUES (\(name))"])
                    throw Abort()
                }
            }
            #expect(try Self.patients(named: name, connection) == 0)
            let before = connection.roundTrips
            _ = try connection.withPipelinedTransaction { transaction in
                try transaction.run(["INSERT INTO patients (display_name) VALUES (\(name))"])
            }
            #expect(connection.roundTrips - before == 2, "the work, then COMMIT")
            #expect(try Self.patients(named: name, connection) == 1)
        }
    }

    @Test(
        "a flight's rows are read by the statement that asked for them, whichever optional statements were not sent",
        arguments: [false, true])
    func namedResults(sendsMiddle: Bool) throws {
        try TestDatabase.with { connection in
            let before = connection.roundTrips
            let (first, middle, last) = try connection.withPipelinedTransaction { transaction in
                var flight = transaction.flight()
                let first = flight.add("SELECT 'first'")
                let absent = flight.add(nil as PostgresQuery?)
                let middle = flight.add(sendsMiddle ? "SELECT 'middle'" : nil)
                let last = flight.add("SELECT 'last'")
                #expect(absent == nil)
                #expect((middle == nil) == !sendsMiddle)
                let rows = try transaction.run(flight)
                return (
                    try rows[first][0].decode(String.self, at: 0),
                    try rows[middle].map { try $0[0].decode(String.self, at: 0) },
                    try rows[last][0].decode(String.self, at: 0)
                )
            }
            #expect(connection.roundTrips - before == 2, "the flight, then COMMIT")
            #expect(first == "first")
            #expect(middle == (sendsMiddle ? "middle" : nil))
            #expect(last == "last")
        }
    }

    @Test("a read-only transaction is one round trip, and refuses a write")
    func readOnly() throws {
        try TestDatabase.with { (connection: PostgresConnection) throws in
            let before = connection.roundTrips
            let rows = try connection.readOnlyTransaction("SELECT 7")
            #expect(connection.roundTrips - before == 1)
            #expect(try rows[0].decode(Int.self, at: 0) == 7)
            #expect {
                try connection.readOnlyTransaction("INSERT INTO patients (display_name) VALUES ('read-only')")
            } throws: { error in
                (error as? PostgresError)?.sqlState?.rawValue == "25006"
            }
            #expect(try connection.query("SELECT 3")[0].decode(Int.self, at: 0) == 3)
        }
    }

    static func preparedNames(_ connection: PostgresConnection) throws -> Set<String> {
        Set(try connection.query("SELECT name FROM pg_prepared_statements").map { try $0.decode(String.self, at: 0) })
    }

    @Test(
        "with prepareStatements, a statement with parameters is prepared once under a name made of its SQL, then reused"
    )
    func preparedOnce() throws {
        try TestDatabase.with { connection in
            connection.prepareStatements = true
            let query: (Int) -> PostgresQuery = { "SELECT \($0)::int + 1 AS n" }
            let name = PostgresConnection.statementName(query(0).sql)
            // The same SQL twice in one flight: one Parse, two executions.
            let first = try connection.pipeline([query(1), query(2)])
            #expect(try first.map { try $0[0].decode(Int.self, at: 0) } == [2, 3])
            #expect(try Self.preparedNames(connection) == [name])
            let second = try connection.pipeline([query(41)])
            #expect(try second[0][0].decode(Int.self, at: 0) == 42)
            #expect(try Self.preparedNames(connection) == [name])
            #expect(connection.prepared == [query(0).sql: name])
        }
    }

    @Test("a statement whose Parse fails is thrown as that failure, and nothing is kept under its name")
    func preparedParseFails() throws {
        try TestDatabase.with { (connection: PostgresConnection) throws in
            connection.prepareStatements = true
            #expect {
                try connection.pipeline(["SELECT \(1) FROM no_such_table"])
            } throws: { error in
                (error as? PostgresError)?.sqlState?.rawValue == "42P01"
            }
            #expect(connection.prepared.isEmpty)
            #expect(try Self.preparedNames(connection).isEmpty)
        }
    }

    @Test("a statement a pooler lost (the server connection no longer has it) runs again, unnamed, in a new attempt")
    func preparedLost() throws {
        try TestDatabase.with { connection in
            connection.prepareStatements = true
            let query: PostgresQuery = "SELECT \(7)::int"
            _ = try connection.withPipelinedTransaction { try $0.run([query]) }
            #expect(connection.prepared.count == 1)
            // What a transaction-mode pooler does: the next transaction lands on a server connection without it.
            try connection.query("DEALLOCATE ALL")
            let rows = try connection.withPipelinedTransaction { try $0.run([query]) }
            #expect(try rows[0][0].decode(Int.self, at: 0) == 7)
            #expect(!connection.prepareStatements && connection.prepared.isEmpty)
        }
    }

    @Test("a session's connections prepare their statements as DATABASE_PREPARED_STATEMENTS says")
    func sessionFollowsConfiguration() throws {
        for (setting, prepares) in [("on", true), ("off", false)] {
            let configuration = Configuration(environment: [
                "DATABASE_URL": TestDatabase.url, "DATABASE_PREPARED_STATEMENTS": setting,
            ])
            let session = DatabaseSession(configuration: configuration)
            defer { session.close() }
            let connection = try session.connection()
            #expect(connection.prepareStatements == prepares)
            _ = try connection.withPipelinedTransaction { try $0.run(["SELECT \(1)::int"]) }
            #expect(connection.prepared.count == (prepares ? 1 : 0))
        }
    }
}
