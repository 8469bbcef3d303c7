import Libpq
import ArgumentParser
import Foundation

/// `gateway households`: create and manage households (patient, caregiver links, medications, patient sessions) for a
/// team with no app backend, as the role `caregiver_push_households` (docs/deploy.md#households).
///
/// Each subcommand is one call of a function of migration 000011, which checks the input; the command only passes its
/// options on as text (the database parses the ids, dates, times and intervals) and prints what comes back. An error
/// is one line on stderr and exit status 1.
package struct Households<Root: ParsableCommand>: ParsableCommand {
    package static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "households",
            abstract: "Create and manage households as the role caregiver_push_households.",
            discussion: """
                Environment: DATABASE_URL, a libpq URL whose user is caregiver_push_households (or a login that is a \
                member of it), never the owner's: docs/deploy.md, "Households without an app backend".
                """,
            subcommands: [
                CreatePatient.self, Link.self, Unlink.self, AddMedication.self, ArchiveMedication.self,
                IssueSession.self, RevokeSession.self, DeletePatient.self,
            ])
    }

    package init() {}

    struct CreatePatient: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(commandName: "create-patient", abstract: "Create a patient; prints its id.")
        }

        @Option(help: "The name a caregiver's push shows: 1 to 50 characters, not blank.")
        var name: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                try connection.query("SELECT caregiver_push.household_create_patient(\(name))::text")[0]
                    .decode(String.self, at: 0)
            }
        }
    }

    struct Link: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "link",
                abstract: "Link a caregiver (their Supabase Auth user id) to a patient; linking again is harmless.")
        }

        @Option(help: "The patient's id.") var patient: String
        @Option(help: "The caregiver's id (the `sub` of their Supabase Auth token).") var caregiver: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                try connection.query(
                    "SELECT caregiver_push.household_link_caregiver(\(patient)::uuid, \(caregiver)::uuid)")
                return "linked caregiver \(caregiver) to patient \(patient)"
            }
        }
    }

    struct Unlink: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "unlink",
                abstract: "Unlink a caregiver from a patient; what is still queued for them for the patient is stopped."
            )
        }

        @Option(help: "The patient's id.") var patient: String
        @Option(help: "The caregiver's id.") var caregiver: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                let stopped = try connection.query(
                    "SELECT caregiver_push.household_unlink_caregiver(\(patient)::uuid, \(caregiver)::uuid)")
                let count = try stopped[0].decode(Int.self, at: 0)
                return "unlinked caregiver \(caregiver) from patient \(patient); \(count) queued deliveries stopped"
            }
        }
    }

    struct AddMedication: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "add-medication", abstract: "Add a medication with its schedule times; prints its id.")
        }

        @Option(help: "The patient's id.") var patient: String
        @Option(help: "1 to 200 characters, not blank (health data: it never leaves the database).") var name: String
        @Flag(help: "Taken as needed (PRN): no schedule times.") var prn = false
        @Option(help: "The first day it is taken (YYYY-MM-DD).") var start: String
        @Option(help: "The last day it is taken (YYYY-MM-DD, on or after --start); none: open-ended.") var end: String?
        @Option(
            help: "Tokyo times of day, comma-separated (08:00,20:00): 1 to 24 distinct whole minutes; none for PRN.")
        var times: String?

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                try connection.query(
                    """
                    SELECT caregiver_push.household_add_medication(
                        \(patient)::uuid, \(name), \(prn), \(start)::date, \(end)::date,
                        pg_catalog.string_to_array(\(times), ',')::time[])::text
                    """
                )[0].decode(String.self, at: 0)
            }
        }
    }

    struct ArchiveMedication: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "archive-medication",
                abstract: "Archive a medication: no longer active; its records stay.")
        }

        @Option(help: "The medication's id.") var medication: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                try connection.query("SELECT caregiver_push.household_archive_medication(\(medication)::uuid)")
                return "archived medication \(medication)"
            }
        }
    }

    struct IssueSession: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "issue-session",
                abstract: "Issue a patient session; prints its id and its token, which is shown this once only.",
                discussion: "Output: `session <id>` and `token pst_…`, one line each.")
        }

        @Option(help: "The patient's id.") var patient: String
        @Option(help: "How long the session lasts, a PostgreSQL interval ('90 days'): more than 0, at most 366 days.")
        var ttl: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                let issued = try connection.query(
                    """
                    SELECT session_id::text, token
                    FROM caregiver_push.household_issue_patient_session(\(patient)::uuid, \(ttl)::interval)
                    """)
                let (session, token) = try issued[0].decode((String, String).self)
                return "session \(session)\ntoken \(token)"
            }
        }
    }

    struct RevokeSession: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "revoke-session", abstract: "Revoke a patient session: its token is refused from now on.")
        }

        @Option(help: "The session's id (what issue-session printed).") var session: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                try connection.query("SELECT caregiver_push.household_revoke_patient_session(\(session)::uuid)")
                return "revoked session \(session)"
            }
        }
    }

    struct DeletePatient: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "delete-patient",
                abstract: "Delete a patient and all of theirs: links, sessions, medication and records, push events.")
        }

        @Option(help: "The patient's id.") var patient: String

        func run() {
            HouseholdsCall.run(Root.self) { connection in
                let deleted = try connection.query(
                    "SELECT caregiver_push.household_delete_patient(\(patient)::uuid)")[0].decode(Bool.self, at: 0)
                return deleted ? "deleted patient \(patient)" : "no patient \(patient)"
            }
        }
    }
}

/// One subcommand's call: DATABASE_URL, one bounded transaction, and every failure as one line.
enum HouseholdsCall {
    /// The database's message for what it refused (the functions name the field), or a fixed text for the rest:
    /// never libpq's connection text, which may repeat part of the URL.
    struct Failure: Error, CustomStringConvertible {
        let description: String

        init(_ error: PostgresError) {
            switch error.code {
            case .server:
                let state = error.sqlState.map { " (SQLSTATE \($0.rawValue))" } ?? ""
                description = (error.serverMessage ?? "the database refused the call") + state
            case .connectionFailed, .invalidConnectionString, .startupParameterRefused, .serverNotVerified:
                description = "cannot connect to DATABASE_URL: \(error.connectionFailureReason)"
            default:
                description = "the database call failed: \(error.code)"
            }
        }

        init(_ description: String) { self.description = description }
    }

    /// Runs `body` in a transaction on DATABASE_URL, with a 5 s lock wait and a 30 s statement bound, and prints what
    /// it returns once the transaction has committed (a session's token is never shown for a session that was not
    /// stored); exits 1 with `Error: …` on stderr when anything fails.
    static func run<Root: ParsableCommand>(_ root: Root.Type, _ body: (PostgresConnection) throws -> String) {
        let output: String
        do {
            guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
                throw Failure("DATABASE_URL is not set")
            }
            let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-households")
            defer { connection.close() }
            connection.transactionSettings = TransactionSettings(
                lockTimeoutMilliseconds: 5000, statementTimeoutMilliseconds: 30_000)
            output = try connection.withTransaction { try body($0) }
        } catch let error as PostgresError {
            Root.exit(withError: Failure(error))
        } catch {
            Root.exit(withError: error)
        }
        print(output)
    }
}
