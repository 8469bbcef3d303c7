import CaregiverPushClientTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The server side of the kit's end-to-end tests, reached only through its executables and PostgreSQL's own client:
// the kit's package links nothing of the server. scripts/test.sh passes the built binaries' directory
// (FUNCTIONS_BIN_DIR) and the throwaway database (DATABASE_URL); without them these tests fail with a message saying
// so. The kit's server-free tests are a target of their own (CaregiverPushClientTests).

enum ServerStack {
    struct Missing: Error, CustomStringConvertible {
        let variable: String
        var description: String {
            "\(variable) is not set: the kit's end-to-end tests run through scripts/test.sh (make test), which builds "
                + "the server and starts PostgreSQL; the server-free tests alone: swift test --filter CaregiverPushClientTests"
        }
    }

    static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw Missing(variable: name)
        }
        return value
    }

    static func binDirectory() throws -> URL { URL(fileURLWithPath: try variable("FUNCTIONS_BIN_DIR")) }
    static func databaseURL() throws -> String { try variable("DATABASE_URL") }

    /// The repository (this file is Client/Tests/CaregiverPushClientEndToEndTests/Support/ServerStack.swift).
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The HS256 secret the runners of these tests verify caregiver tokens with.
    static let jwtSecret = "kit-tests-secret-" + UUID().uuidString.lowercased()

    /// `runner migrate`, once per test process.
    private static let migration: Result<Void, any Error> = Result {
        let output = try run(
            binDirectory().appendingPathComponent("runner"),
            ["migrate", "--migrations", repositoryRoot.appendingPathComponent("infra/migrations").path],
            environment: ["DATABASE_URL": try databaseURL()])
        guard output.status == 0 else { throw Failure("runner migrate failed: \(output.stderr)") }
    }

    static func migrated() throws { try migration.get() }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Runs a program to its end; stdout and stderr as text.
    static func run(_ executable: URL, _ arguments: [String], environment: [String: String]) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errors = Locked(Data())
        let reader = Thread { errors.withLock { $0 = stderr.fileHandleForReading.readDataToEndOfFile() } }
        reader.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.005) }
        return (
            process.terminationStatus, String(decoding: out, as: UTF8.self),
            errors.withLock { String(decoding: $0, as: UTF8.self) }
        )
    }
}

/// A caregiver's access token, signed by `runner token` with the tests' secret.
func caregiverToken(_ caregiver: UUID, expiresIn: Int = 3600) throws -> String {
    let output = try ServerStack.run(
        ServerStack.binDirectory().appendingPathComponent("runner"),
        ["token", "--caregiver", caregiver.uuidString.lowercased(), "--expires-in=\(expiresIn)"],
        environment: ["SUPABASE_JWT_SECRET": ServerStack.jwtSecret])
    guard output.status == 0 else { throw ServerStack.Failure("runner token failed: \(output.stderr)") }
    return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A device token of the FCM shape, unique per call; `marker` picks an FCM emulator answer (`UNREGISTERED`).
func makeDeviceToken(marker: String = "") -> String {
    "fcm-" + UUID().uuidString.lowercased() + marker + ":APA91b" + String(repeating: "x", count: 40)
}

/// The environment the runner (and its functions) get.
func testEnvironment(_ overrides: [String: String] = [:]) -> [String: String] {
    var environment = [
        "DATABASE_URL": (try? ServerStack.databaseURL()) ?? "",
        "SUPABASE_JWT_SECRET": ServerStack.jwtSecret,
        "PUSH_ENVIRONMENT": "DEV",
    ]
    for (key, value) in overrides { environment[key] = value }
    return environment
}

/// SQL through `psql`, PostgreSQL's own client: rows as arrays of column texts.
struct Database {
    let url: String

    /// A string literal; the tests only ever quote values they made.
    static func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    @discardableResult
    func query(_ sql: String) throws -> [[String]] {
        let output = try ServerStack.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["psql", "-X", "-q", "-A", "-t", "-F", "\u{1F}", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
            environment: [
                "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "10",
            ])
        guard output.status == 0 else { throw ServerStack.Failure("psql failed: \(output.stderr)") }
        return output.stdout.split(separator: "\n", omittingEmptySubsequences: true).map {
            $0.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init)
        }
    }
}

enum TestDatabase {
    /// Runs `body` against the migrated test database.
    @discardableResult
    static func with<T>(_ body: (Database) throws -> T) throws -> T {
        try ServerStack.migrated()
        return try body(Database(url: try ServerStack.databaseURL()))
    }
}

/// Rows the tests create directly (patients, links, medications and patient sessions have no API).
enum Seed {
    static func patient(_ database: Database, displayName: String = "山田花子") throws -> UUID {
        let rows = try database.query(
            "INSERT INTO patients (display_name) VALUES (\(Database.literal(displayName))) RETURNING id")
        guard let text = rows.first?.first, let id = UUID(uuidString: text) else {
            throw ServerStack.Failure("no id")
        }
        return id
    }

    static func link(_ database: Database, caregiver: UUID, patient: UUID) throws {
        try database.query(
            "INSERT INTO caregiver_patient_links (caregiver_id, patient_id) VALUES ('\(caregiver)', '\(patient)')")
    }

    /// A patient session; returns the token text (the database keeps its SHA-256 only).
    static func session(_ database: Database, patient: UUID) throws -> String {
        // `pst_` and 43 base64url characters, the shape the functions accept (32 random bytes).
        var bytes = [UInt8]()
        for _ in 0..<32 { bytes.append(UInt8.random(in: 0...255)) }
        let token =
            "pst_"
            + Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try database.query(
            """
            INSERT INTO patient_sessions (patient_id, token_hash, expires_at)
            VALUES ('\(patient)', sha256(convert_to(\(Database.literal(token)), 'UTF8')), now() + interval '1 hour')
            """)
        return token
    }

    /// A medication with schedule times (`HH:mm`, Tokyo wall clock).
    static func medication(_ database: Database, patient: UUID, times: [String]) throws -> UUID {
        let rows = try database.query(
            """
            INSERT INTO medications (patient_id, name, is_prn, start_date)
            VALUES ('\(patient)', 'テスト薬', false, '2020-01-01') RETURNING id
            """)
        guard let text = rows.first?.first, let id = UUID(uuidString: text) else {
            throw ServerStack.Failure("no id")
        }
        for time in times {
            try database.query(
                "INSERT INTO medication_schedule_times (medication_id, time_of_day) VALUES ('\(id)', '\(time)'::time)"
            )
        }
        return id
    }

    struct Device: Equatable {
        let token: String
        let platform: String
        let environment: String
        let installationID: String?
        let isEnabled: Bool
        let disabledReason: String?
        let lastSeenAt: String
    }

    /// Every device row of one caregiver, oldest first.
    static func devices(_ database: Database, owner: UUID) throws -> [Device] {
        try database.query(
            """
            SELECT token, platform, environment, coalesce(installation_id, '<null>'), is_enabled,
                   coalesce(disabled_reason, '<null>'), last_seen_at::text
            FROM push_devices WHERE owner_id = '\(owner)' ORDER BY created_at
            """
        ).map { columns in
            Device(
                token: columns[0], platform: columns[1], environment: columns[2],
                installationID: columns[3] == "<null>" ? nil : columns[3], isEnabled: columns[4] == "t",
                disabledReason: columns[5] == "<null>" ? nil : columns[5], lastSeenAt: columns[6])
        }
    }
}

/// Tokyo calendar dates for the dose requests.
enum TokyoDay {
    static func offset(_ days: Int) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "Asia/Tokyo")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date().addingTimeInterval(TimeInterval(days) * 86_400))
    }

    /// `YYYY-MM-DDTHH:mm:00+09:00`.
    static func instant(_ date: String, _ time: String) -> String { "\(date)T\(time):00+09:00" }
}

/// A running `runner serve --fcm-emulator` on a free loopback port, driven over real HTTP.
final class RunnerServer: @unchecked Sendable {
    // @unchecked: `process` is only touched from the test that owns the server; the log buffer is locked.
    let port: Int
    private let process: Process
    private let log = LockedData()

    /// A runner (cold unless told) against the test database, `PUSH_ENVIRONMENT=DEV`, no schedules.
    static func forClient(environment: [String: String] = testEnvironment(), mode: String = "cold") throws
        -> RunnerServer
    {
        try ServerStack.migrated()
        return try RunnerServer(environment: environment, mode: mode)
    }

    private init(environment: [String: String], mode: String) throws {
        let process = Process()
        process.executableURL = try ServerStack.binDirectory().appendingPathComponent("runner")
        process.arguments = [
            "serve", "--port", "0", "--mode", mode, "--fcm-emulator", "--no-schedules", "--functions",
            ServerStack.repositoryRoot.appendingPathComponent("infra/functions.json").path,
        ]
        process.environment = environment
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let reader = stderr.fileHandleForReading
        let log = self.log
        Thread {
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                log.append(chunk)
            }
        }.start()
        var announced = Data()
        while !announced.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            announced.append(chunk)
        }
        let line = announced.prefix { $0 != UInt8(ascii: "\n") }
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
            let port = object["port"] as? Int
        else {
            process.terminate()
            throw ServerStack.Failure("runner serve did not start")
        }
        self.port = port
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            for _ in 0..<100 where process.isRunning { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        LeakCapture.record(stderr, source: "kit: runner stderr")
    }

    var stderr: String { String(decoding: log.value, as: UTF8.self) }
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Stops the runner (SIGTERM) and waits; returns its exit status.
    @discardableResult
    func stop() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// How many `push/register` requests the runner has answered, from its request log (each is logged before its
    /// answer is written). `atLeast`: waits up to 2 s for that many.
    func registrations(atLeast expected: Int = 0) -> Int {
        func count() -> Int { stderr.components(separatedBy: "\"http.path\":\"/api/push/register\"").count - 1 }
        for _ in 0..<100 where count() < expected { Thread.sleep(forTimeInterval: 0.02) }
        Thread.sleep(forTimeInterval: 0.1)
        return count()
    }

    struct Answer {
        let status: Int
        let json: [String: Any]?
    }

    /// A JSON POST with a bearer token.
    func post(_ path: String, bearer: String?, body: [String: Any]) async throws -> Answer {
        var request = URLRequest(url: baseURL.appendingPathComponent(path), timeoutInterval: 30)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "content-type")
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "authorization") }
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        return try await send(request)
    }

    func get(_ path: String) async throws -> Answer {
        try await send(URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!, timeoutInterval: 30))
    }

    private func send(_ request: URLRequest) async throws -> Answer {
        let (data, response) = try await URLSession.shared.data(for: request)
        if request.url?.path.hasPrefix("/_emulator/") == false {
            LeakCapture.record(String(decoding: data, as: UTF8.self), source: "kit: runner answer")
        }
        return Answer(
            status: (response as? HTTPURLResponse)?.statusCode ?? 0,
            json: try? JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The messages the emulated FCM accepted for `token` (`{"name", "message"}` each), waiting up to 5 s for at
    /// least `atLeast` of them.
    func fcmMessages(to token: String, atLeast: Int = 0) async throws -> [[String: Any]] {
        var found: [[String: Any]] = []
        for attempt in 0..<100 {
            let all = try await get("/_emulator/fcm/messages").json?["messages"] as? [[String: Any]] ?? []
            found = all.filter { $0["token"] as? String == token }
            if found.count >= atLeast || attempt == 99 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return found
    }
}

/// Bytes appended from one thread and read from another.
final class LockedData: Sendable {
    private let storage = Locked(Data())
    func append(_ data: Data) { storage.withLock { $0.append(data) } }
    var value: Data { storage.withLock { $0 } }
}

/// What the runner said during the run, appended to `$LEAK_CAPTURE_DIR` for make test's leak scan.
enum LeakCapture {
    private static let file: Locked<FileHandle?> = {
        guard let directory = ProcessInfo.processInfo.environment["LEAK_CAPTURE_DIR"], !directory.isEmpty else {
            return Locked(nil)
        }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = "\(directory)/kit-test-\(ProcessInfo.processInfo.processIdentifier).log"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = FileHandle(forWritingAtPath: path)
        _ = try? handle?.seekToEnd()
        return Locked(handle)
    }()

    static func record(_ text: String, source: String) {
        guard !text.isEmpty else { return }
        file.withLock { handle in
            try? handle?.write(contentsOf: Data("\n=== \(source)\n".utf8) + Data(text.utf8))
        }
    }
}
