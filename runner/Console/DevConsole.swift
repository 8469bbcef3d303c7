import Codecs
import FCMEmulator
import Foundation
import HTTPTypes
import Hummingbird
import Libpq
import Synchronization

/// The local console of `runner dev` at `/_dev`: the runner's recent invocations, the notifications the FCM emulator
/// received as a phone would show them, every delivery's state and attempts with push-sweep's runs, and the
/// registered devices. `runner serve` never adds these routes: only `DevCommand` builds a console.
///
/// A page with its script and style served from the binary (nothing is fetched from elsewhere), polling
/// `/_dev/api/state`; the page writes every value with `textContent`, never as markup. Answered only to a loopback
/// peer naming a loopback host (a page of another site that resolves its name to 127.0.0.1 is refused), and the
/// demo's tokens only to a request carrying `x-dev-console`, which a cross-site page cannot send.
final class DevConsole: Sendable {
    /// What the page's buttons need to do what the banner's curl lines do.
    struct Demo: Sendable {
        let patientID: String
        let caregiverToken: String
        let patientToken: String
        let medications: [String: String]
        let prn: String
        let today: String
    }

    static let path = "/_dev"
    let journal: InvocationJournal
    let databaseURL: String
    let demo: Demo
    private let emulatorState = Mutex<FCMEmulatorState?>(nil)

    init(journal: InvocationJournal, databaseURL: String, demo: Demo) {
        self.journal = journal
        self.databaseURL = databaseURL
        self.demo = demo
    }

    /// The emulator whose received messages the console shows (known once the runner has made it).
    func attach(emulator: FCMEmulatorState?) {
        emulatorState.withLock { $0 = emulator }
    }

    func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        router.get(.init(stringLiteral: Self.path)) { request, context in
            try Self.guardLoopback(request, context)
            return Self.asset(ConsoleAssets.html, type: "text/html; charset=utf-8")
        }
        router.get(.init(stringLiteral: Self.path + "/console.js")) { request, context in
            try Self.guardLoopback(request, context)
            return Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8")
        }
        router.get(.init(stringLiteral: Self.path + "/console.css")) { request, context in
            try Self.guardLoopback(request, context)
            return Self.asset(ConsoleAssets.style, type: "text/css; charset=utf-8")
        }
        router.get(.init(stringLiteral: Self.path + "/api/state")) { request, context in
            try Self.guardLoopback(request, context)
            return Self.json(await self.state())
        }
        router.get(.init(stringLiteral: Self.path + "/api/demo")) { request, context in
            try Self.guardLoopback(request, context)
            guard request.headers[HTTPField.Name("x-dev-console")!] != nil else {
                throw HTTPError(.forbidden, message: "the console's own page asks for this")
            }
            return Self.json(self.demoDocument())
        }
    }

    // MARK: who may ask

    /// Loopback peers naming a loopback host only, and no other site's page (``LocalControl``).
    static func guardLoopback<Context: RequestContext>(_ request: Request, _ context: Context) throws {
        try LocalControl.check(request, context)
    }

    // MARK: documents

    private func demoDocument() -> JSONValue {
        .object([
            "patientId": .string(demo.patientID), "caregiverToken": .string(demo.caregiverToken),
            "patientToken": .string(demo.patientToken), "prn": .string(demo.prn), "today": .string(demo.today),
            "medications": .object(demo.medications.mapValues(JSONValue.string)),
        ])
    }

    /// Everything the page shows, newest first in each list.
    func state() async -> JSONValue {
        let received = await emulatorState.withLock { $0 }?.received ?? []
        let database = await Task.detached { [databaseURL] in ConsoleQueries.read(databaseURL: databaseURL) }.value
        let names = database.patientNames
        let notifications: [JSONValue] = received.reversed().prefix(100).map { entry in
            Self.notification(entry, patientNames: names)
        }
        let entries = journal.recent()
        return .object([
            "invocations": .array(entries.filter { $0.trigger == "request" }.prefix(100).map(Self.invocation)),
            "sweeps": .array(
                entries.filter { $0.trigger == "scheduled" && $0.function == "push-sweep" }.prefix(30).map(
                    Self.invocation)),
            "notifications": .array(notifications),
            "deliveries": database.deliveries,
            "devices": database.devices,
            "databaseError": database.error.map(JSONValue.string) ?? .null,
        ])
    }

    static func invocation(_ entry: InvocationJournal.Entry) -> JSONValue {
        .object([
            "sequence": .number(Double(entry.sequence)), "at": .string(Timestamp.rfc3339UTC(entry.at)),
            "function": .string(entry.function), "status": .string(entry.status), "mode": .string(entry.mode),
            "durationMs": entry.durationMilliseconds.map(JSONValue.number) ?? .null,
            "requestId": .string(entry.requestID), "method": entry.method.map(JSONValue.string) ?? .null,
            "path": entry.path.map(JSONValue.string) ?? .null,
            "summary": .object(entry.summary.mapValues(JSONValue.number)),
        ])
    }

    /// One `messages:send` as the phone would show it: the notification's title and body, whose patient it is about,
    /// the date and slot, the collapse id (a duplicate replaces the earlier one on the phone), and the screen the
    /// app's deep-link router opens for its `data`.
    static func notification(_ entry: FCMEmulatorState.Received, patientNames: [String: String]) -> JSONValue {
        let message = entry.message["message"] ?? entry.message
        let data = message["data"]?.objectValue ?? [:]
        let patientID = data["patientId"]?.stringValue ?? ""
        let date = data["date"]?.stringValue ?? ""
        let slot = data["slot"]?.stringValue ?? ""
        let type = data["type"]?.stringValue ?? ""
        let deepLink = type == "DOSE_TAKEN" && !date.isEmpty && !slot.isEmpty ? "History · \(date) · \(slot)" : "none"
        return .object([
            "receivedAt": .string(Timestamp.rfc3339UTC(entry.receivedAt)), "status": .number(Double(entry.status)),
            "attempt": .number(Double(entry.attempt)), "device": .string(shortToken(entry.deviceToken)),
            "title": message["notification"]?["title"] ?? .null, "body": message["notification"]?["body"] ?? .null,
            "patientId": .string(patientID), "patientName": patientNames[patientID].map(JSONValue.string) ?? .null,
            "date": .string(date), "slot": .string(slot), "type": .string(type),
            "collapseId": message["apns"]?["headers"]?["apns-collapse-id"] ?? .null,
            "threadId": message["apns"]?["payload"]?["aps"]?["thread-id"] ?? .null,
            "deepLink": .string(deepLink),
        ])
    }

    /// A device token's first characters: enough to tell the demo's phones apart, not the whole credential.
    static func shortToken(_ token: String) -> String {
        token.count <= 20 ? token : String(token.prefix(20)) + "…"
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: type, .cacheControl: "no-store", HTTPField.Name("x-content-type-options")!: "nosniff",
                HTTPField.Name("content-security-policy")!:
                    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                    + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func json(_ value: JSONValue) -> Response {
        let data = (try? JSONCoding.encoder().encode(value)) ?? Data("{}".utf8)
        return Response(
            status: .ok,
            headers: [
                .contentType: "application/json; charset=utf-8", .cacheControl: "no-store",
                HTTPField.Name("x-content-type-options")!: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// The console's reads of the database: JSON made by PostgreSQL itself, one short-lived connection per read.
enum ConsoleQueries {
    struct Snapshot: Sendable {
        var deliveries: JSONValue = .array([])
        var devices: JSONValue = .array([])
        var patientNames: [String: String] = [:]
        var error: String?
    }

    static let deliveries: PostgresQuery = """
        SELECT coalesce(json_agg(d), '[]')::text FROM (
            SELECT pd.status, pd.attempts, pd.last_error AS "lastError", pd.event_key AS "eventKey",
                   to_char(pd.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
                   to_char(pd.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "updatedAt",
                   to_char(pd.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "nextAttemptAt",
                   pe.source, pe.local_date::text AS date, pe.slot, p.display_name AS "patientName",
                   CASE WHEN char_length(dev.token) <= 20 THEN dev.token ELSE left(dev.token, 20) || '…' END AS device
            FROM caregiver_push.push_deliveries pd
            JOIN caregiver_push.push_devices dev ON dev.id = pd.push_device_id
            LEFT JOIN caregiver_push.push_events pe ON pe.event_key = pd.event_key
            LEFT JOIN caregiver_push.patients p ON p.id = pe.patient_id
            ORDER BY pd.created_at DESC, pd.id LIMIT 100) d
        """

    static let devices: PostgresQuery = """
        SELECT coalesce(json_agg(d), '[]')::text FROM (
            SELECT CASE WHEN char_length(token) <= 20 THEN token ELSE left(token, 20) || '…' END AS device,
                   owner_id::text AS "ownerId", platform, environment, installation_id AS "installationId",
                   is_enabled AS enabled, disabled_reason AS reason,
                   to_char(last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "lastSeenAt",
                   to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "updatedAt"
            FROM caregiver_push.push_devices ORDER BY updated_at DESC, id LIMIT 100) d
        """

    static let patientNames: PostgresQuery = """
        SELECT coalesce(json_object_agg(id::text, display_name), '{}')::text
        FROM (SELECT id, display_name FROM caregiver_push.patients LIMIT 1000) p
        """

    static func read(databaseURL: String) -> Snapshot {
        var snapshot = Snapshot()
        do {
            let connection = try PostgresConnection(url: databaseURL, applicationName: "caregiver-push-dev-console")
            defer { connection.close() }
            func document(_ query: PostgresQuery) throws -> JSONValue {
                try JSONValue.parse(try connection.query(query)[0].decode(String.self, at: 0), maxDepth: 8)
            }
            snapshot.deliveries = try document(deliveries)
            snapshot.devices = try document(devices)
            for (id, name) in try document(patientNames).objectValue ?? [:] {
                if let name = name.stringValue { snapshot.patientNames[id] = name }
            }
        } catch {
            snapshot.error = "the database could not be read: \(error)"
        }
        return snapshot
    }
}
