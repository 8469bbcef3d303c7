import FunctionRuntime
import Logging
import Synchronization
import Testing

@testable import CaregiverPush

/// A warm process's secrets over time, at chosen instants: a refresh keeps a secret it cannot read again for the
/// grace (twice the refresh interval), then fails closed.
@Suite("secrets read again at run time")
struct RuntimeSecretsTests {
    static let environment = [
        "DATABASE_SECRET_ARN": "arn:db", "SUPABASE_JWT_SECRET_ARN": "arn:jwt", "SECRETS_REFRESH_SECONDS": "300",
    ]

    /// What the extension answers, changed by the test between readings.
    final class Store: Sendable {
        let values = Mutex<[String: String]>([
            "arn:db": "postgresql://app:pw@db.example:6543/app", "arn:jwt": String(repeating: "j", count: 40),
        ])
        func read(_ id: String) -> Result<String, SecretsExtensionError> {
            values.withLock { $0[id] }.map { .success($0) }
                ?? .failure(SecretsExtensionError(.refused, status: 400, awsErrorType: "ResourceNotFoundException"))
        }
    }

    /// A store of secrets, the process's reading of them, a logger, and the instant the clock starts at.
    static func started() -> (Store, RuntimeSecrets, Logger, ContinuousClock.Instant) {
        let store = Store()
        return (store, RuntimeSecrets(environment: environment, read: store.read), Logger(label: "tests"), .now)
    }

    @Test("a secret that can no longer be read is kept for the grace, then dropped: the 500 names its ARN variable")
    func failsClosedAfterGrace() throws {
        let (store, secrets, logger, start) = Self.started()
        let first = secrets.configuration(logger: logger, now: start)
        #expect(first.errors.isEmpty && first.databaseURL != nil)
        #expect(secrets.grace == .seconds(600))
        // Not due before the interval: nothing is read.
        #expect(secrets.renewedConfiguration(logger: logger, now: start + .seconds(299)) == nil)
        // The JWT secret is deleted (or its access revoked).
        store.values.withLock { $0["arn:jwt"] = nil }
        // Within the grace (300 s, then 599 s after the last good reading): the last good value stays in use.
        #expect(secrets.renewedConfiguration(logger: logger, now: start + .seconds(300)) == nil)
        #expect(secrets.renewedConfiguration(logger: logger, now: start + .seconds(599)) == nil)
        // Past it: fails closed.
        let closed = try #require(secrets.renewedConfiguration(logger: logger, now: start + .seconds(900)))
        #expect(closed.errors.map(\.variable) == ["SUPABASE_JWT_SECRET_ARN"])
        let error = #expect(throws: ConfigurationError.self) { try closed.requireFunctionBasics() }
        #expect(error?.variable == "SUPABASE_JWT_SECRET_ARN")
        // Readable again: back in use at the next refresh.
        store.values.withLock { $0["arn:jwt"] = String(repeating: "k", count: 40) }
        let healed = try #require(secrets.renewedConfiguration(logger: logger, now: start + .seconds(1200)))
        #expect(healed.errors.isEmpty)
    }

    @Test("past the grace, before an invocation: read again at once, kept if readable, dropped if not")
    func graceBeforeInvocation() throws {
        let (store, secrets, logger, start) = Self.started()
        _ = secrets.configuration(logger: logger, now: start)
        // No refresh ran (short deadlines, or the environment was frozen): within the grace nothing is due before an
        // invocation; a second past it, the clock read says so.
        #expect(!secrets.isPastGrace(now: start + .seconds(599)))
        #expect(secrets.isPastGrace(now: start + .seconds(600)))
        // Readable and unchanged: read again, nothing to renew, and no longer past the grace.
        #expect(secrets.renewedConfiguration(logger: logger, now: start + .seconds(600), force: true) == nil)
        #expect(!secrets.isPastGrace(now: start + .seconds(601)))
        // Hours later (a thawed environment), the JWT secret rotated after a leak: the new value serves the request.
        store.values.withLock { $0["arn:jwt"] = String(repeating: "n", count: 40) }
        let later = start + .seconds(4 * 3600)
        #expect(secrets.isPastGrace(now: later))
        let rotated = try #require(secrets.renewedConfiguration(logger: logger, now: later, force: true))
        #expect(rotated.jwtSecret == String(repeating: "n", count: 40))
        // Hours later again, the secret unreadable: dropped before the request, which gets the 500 naming it.
        store.values.withLock { $0["arn:jwt"] = nil }
        let closed = try #require(
            secrets.renewedConfiguration(logger: logger, now: later + .seconds(4 * 3600), force: true))
        #expect(closed.errors.map(\.variable) == ["SUPABASE_JWT_SECRET_ARN"])
        // A dropped secret is not "past the grace" again (it is already refused); the database's, read just now, is
        // not either.
        #expect(!secrets.isPastGrace(now: later + .seconds(4 * 3600 + 1)))
    }

    @Test("a changed secret is a new configuration at the next refresh; an unchanged one is none")
    func rotation() throws {
        let (store, secrets, logger, start) = Self.started()
        _ = secrets.configuration(logger: logger, now: start)
        #expect(secrets.renewedConfiguration(logger: logger, now: start + .seconds(300)) == nil)
        store.values.withLock { $0["arn:db"] = "postgresql://app:rotated@db.example:6543/app" }
        let renewed = try #require(secrets.renewedConfiguration(logger: logger, now: start + .seconds(600)))
        #expect(renewed.databaseURL == "postgresql://app:rotated@db.example:6543/app")
    }
}
