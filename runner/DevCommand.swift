import Codecs
import Libpq
import OpenSSLCrypto
import JOSE
import FunctionRuntime
import Migrations
import FunctionGateway
import GatewayCommands
import ProcessSupervision
import ArgumentParser
import CaregiverPush
import FCMEmulator
import Foundation
import Logging

/// `runner dev` (what `make dev` runs): the one-command local stack — PostgreSQL under `.data/`, migrations, a demo
/// household, `serve` with the FCM emulator on :3000, ready-to-paste `curl` lines, and a rebuild of the functions
/// when `Functions/` or `Shared/` change.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Start the local stack: database, migrations, demo data, runner with FCM emulator.",
        discussion: """
            Run from the repository root (make dev does). Checks that --port is free before anything else, then \
            starts PostgreSQL under .data/postgres, migrates, resets the demo household (its records, deliveries \
            and patient token) and serves the functions.

            Environment: reads none of its own; it sets DATABASE_URL, SUPABASE_JWT_SECRET and PUSH_ENVIRONMENT=DEV \
            for the functions (and FCM_SERVICE_ACCOUNT_JSON, FCM_API_BASE_URL for the emulator). AWS_REGION, when \
            set, names the region of the scheduled events. The dev JWT secret lives in .data/dev-jwt-secret \
            (made on the first start, kept across restarts): SUPABASE_JWT_SECRET="$(cat .data/dev-jwt-secret)" \
            runner token signs more caregiver tokens.
            """)

    @Option(help: "HTTP port.")
    var port: Int = 3000

    @Option(help: "cold or warm.")
    var mode: String = "cold"

    @Option(help: "Port of the local PostgreSQL (under .data/postgres).")
    var databasePort: Int = 25432

    @Flag(
        help: """
            Put PgBouncer (Debian's package, transaction pooling, under .data/pgbouncer) between the functions and \
            the database, as production does; migrations and demo data still go to the database directly.
            """)
    var pooler = false

    @Option(help: "PgBouncer's port with --pooler (not 6432, where Debian's own pgbouncer service may listen).")
    var poolerPort: Int = 26432

    @Option(help: "Server connections PgBouncer keeps per database with --pooler (default_pool_size).")
    var poolSize: Int = 5

    @OptionGroup var schedules: ScheduleOptions

    @OptionGroup var infra: InfraOptions

    static let demoCaregiver = UUID(uuidString: "11111111-1111-4111-8111-111111111111")!
    static let demoPatient = UUID(uuidString: "22222222-2222-4222-8222-222222222222")!
    static let demoDevice = "demo-device-token-caregiver-phone"

    func run() async {
        do {
            try await start()
        } catch let error as DevStepError {
            DevStepError.exit(error)
        } catch {
            Self.exit(withError: error)
        }
    }

    private func start() async throws {
        // The runner's log, with the console's journal listening (its invocations table).
        let journal = InvocationJournal()
        journal.bootstrapLogging()
        var logger = Logger(label: "runner")
        logger[metadataKey: "function"] = "runner"
        guard let serveMode = Gateway.Mode(rawValue: mode) else {
            throw DevStepError(step: "reading the options", error: "--mode must be cold or warm", remedy: "--mode cold")
        }
        let schedules = try await DevStepError.step("reading the options", remedy: "see `runner dev --help`") {
            try self.schedules.setting()
        }
        let binaryDirectory = infra.binaryDirectory()
        try await DevStepError.step(
            "checking the checkout and the packages", remedy: "`make dev` in the checkout installs and builds them"
        ) { try checkPrerequisites() }
        let table = try await DevStepError.step(
            "reading the function table", remedy: "run from a checkout (or pass --functions infra/functions.json)"
        ) { try infra.functionTable() }
        try await DevStepError.step("finding the built functions", remedy: "`swift build` (make dev builds)") {
            try infra.checkBuilt(table, in: binaryDirectory, schedules: schedules)
        }
        // Before the database is touched: a second `make dev` must not reset the running stack's demo data.
        if port != 0, LoopbackPort.isInUse(port) == true {
            throw DevStepError(
                step: "taking the HTTP port",
                error: """
                    port \(port) on 127.0.0.1 is in use (another `make dev` or `runner dev`?). Nothing was started \
                    and the demo data were not touched
                    """,
                remedy: """
                    stop the other one (Ctrl-C in its terminal), or pick another port: `make dev DEV_HTTP_PORT=3001` \
                    (runner dev --port 3001).
                    """)
        }
        // The cluster asks for the postgres role's password over TCP (scripts/pg.sh, PG_PASSWORD_FILE): no other
        // local user may connect as its superuser and run programs as the cluster's OS user.
        let password = try devDatabasePassword()
        let databaseURL = "postgresql://postgres:\(password)@127.0.0.1:\(databasePort)/caregiver_push"
        try await DevStepError.step(
            "starting PostgreSQL (scripts/pg.sh start .data/postgres \(databasePort))",
            remedy: """
                read pg.sh's lines above. Another server on port \(databasePort)? `make dev DEV_PG_PORT=25442`. A \
                broken cluster? `make db-stop`, then remove .data/postgres (and what it links to) and start again.
                """
        ) { try await runScript("scripts/pg.sh", ["start", ".data/postgres", String(databasePort)]) }
        // The banner shows where the password is, not the password.
        let shownDatabaseURL = "postgresql://postgres@127.0.0.1:\(databasePort)/caregiver_push"
        let dataDirectory = Self.realPath(".data/postgres")
        // What the functions get: the database, or PgBouncer in front of it (a running one is kept as it is), as the
        // runtime role (docs/deploy.md#roles), with a password of its own: never the superuser's, which would make
        // every function's environment a superuser login. Migrations, seed data and the console use the owner.
        let runtime = Migrator.runtimeRole
        let runtimePassword = try devRuntimePassword()
        let poolerURL =
            pooler ? "postgresql://\(runtime):\(runtimePassword)@127.0.0.1:\(poolerPort)/caregiver_push" : nil
        if pooler {
            try await DevStepError.step(
                "starting PgBouncer (scripts/pgbouncer.sh start .data/pgbouncer \(poolerPort))",
                remedy:
                    "read pgbouncer.sh's lines above; another pooler port: `make dev POOLER=1 DEV_POOLER_PORT=26433`"
            ) {
                try await runScript(
                    "scripts/pgbouncer.sh",
                    ["start", ".data/pgbouncer", String(poolerPort), String(databasePort), String(poolSize)])
            }
        }
        let functionsURL =
            poolerURL ?? "postgresql://\(runtime):\(runtimePassword)@127.0.0.1:\(databasePort)/caregiver_push"
        let secret = try await DevStepError.step(
            "reading the dev JWT secret (.data/dev-jwt-secret)",
            remedy: "remove .data/dev-jwt-secret (a new one is made; tokens signed with the old one stop working)"
        ) { try devSecret() }
        setenv("DATABASE_URL", functionsURL, 1)
        setenv("SUPABASE_JWT_SECRET", secret, 1)
        setenv("PUSH_ENVIRONMENT", "DEV", 1)
        // Like a current Supabase project: an ES256 key, its JWKS served by the emulator, fetched by the functions.
        let signingKey = try await DevStepError.step(
            "reading the dev signing key (.data/)", remedy: "remove the dev signing key's file under .data/"
        ) {
            let key = try DevSigningKey(create: true)
            await SupabaseJWKSState.shared.serve(try key.jwksDocument())
            return key
        }
        let demo = try await DevStepError.step(
            "migrating and seeding the demo household", remedy: "read the error above; `make db-stop` and start again"
        ) {
            try seed(
                databaseURL: databaseURL, runtimePassword: runtimePassword, signingKey: signingKey, secret: secret,
                logger: logger)
        }
        let runnerPath = Self.displayPath(of: binaryDirectory.appendingPathComponent("runner"))
        let console = DevConsole(
            journal: journal, databaseURL: databaseURL,
            demo: .init(
                patientID: Self.demoPatient.uuidString.lowercased(), caregiverToken: demo.caregiverToken,
                patientToken: demo.patientToken,
                medications: Dictionary(
                    uniqueKeysWithValues: demo.medications.map { ($0.key.rawValue, $0.value.uuidString.lowercased()) }),
                prn: demo.prn.uuidString.lowercased(), today: demo.today))
        // A developer's machine: x-gateway-pid on, so that warm worker reuse can be seen; two warm workers per function
        // rather than the table's concurrency (what `gateway serve` starts), which one person's requests never need;
        // on loopback every request is the developer's, so one client's share is the whole.
        var limits = HTTPLimits()
        limits.maxRequestsPerClient = limits.maxConnections
        let options = GatewayServer.Options(
            host: "127.0.0.1", port: port, mode: serveMode, warmWorkers: 2, debugHeaders: true, limits: limits,
            schedules: schedules,
            additionalRoutes: { console.addRoutes(to: $0) })
        let server = try await DevStepError.step(
            "starting the runner", remedy: "read the error above (the FCM emulator's TLS files need `openssl`)"
        ) {
            let emulator = try EmulatorExtension(demoJWKS: true)
            console.attach(emulator: emulator.emulator.state)
            return try await GatewayServer.make(
                table: table, binDirectory: binaryDirectory, options: options, extensions: [emulator], logger: logger)
        }
        let watcher = SourceWatcher(
            directories: SourceWatcher.watched, logger: logger,
            recentlyInvoked: { journal.recent().map(\.function) }
        ) {
            await server.reloadFunctions()
        }
        let watching = Task { await watcher.run() }
        defer { watching.cancel() }
        try await server.run(grace: .seconds(15)) { boundPort in
            FileHandle.standardOutput.write(
                Data(
                    Self.banner(
                        port: boundPort, databaseURL: shownDatabaseURL, poolerURL: poolerURL.map(Self.withoutPassword),
                        poolSize: poolSize,
                        demo: demo, runnerPath: runnerPath, dataDirectory: dataDirectory
                    ).utf8))
        }
    }

    /// `path` relative to the working directory when it is under it (`.build/debug/runner`), else absolute.
    static func displayPath(of url: URL) -> String {
        let path = url.standardizedFileURL.path
        let here = FileManager.default.currentDirectoryPath + "/"
        return path.hasPrefix(here) ? String(path.dropFirst(here.count)) : path
    }

    /// Where `path` really is (`.data/postgres` may link to a directory the `postgres` user can reach).
    static func realPath(_ path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return resolved == URL(fileURLWithPath: path).standardizedFileURL.path ? path : resolved
    }

    /// Says what is missing instead of installing it (make dev installs).
    private func checkPrerequisites() throws {
        guard DevRepository.enter() else {
            throw ValidationError(
                "neither the working directory nor the runner's own checkout holds scripts/pg.sh and infra/migrations")
        }
        let hasPostgres =
            (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.isEmpty == false
        guard hasPostgres else {
            throw ValidationError("PostgreSQL is not installed: `make dev` installs it (apt-get install postgresql)")
        }
        guard !pooler || FileManager.default.isExecutableFile(atPath: "/usr/sbin/pgbouncer") else {
            throw ValidationError("PgBouncer is not installed: `make dev` installs it (apt-get install pgbouncer)")
        }
    }

    private func runScript(_ path: String, _ arguments: [String]) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["PG_PASSWORD_FILE"] = Self.databasePasswordFile
        environment["PG_RUNTIME_PASSWORD_FILE"] = Self.runtimePasswordFile
        let result = try await ChildProcess.run(
            executable: URL(fileURLWithPath: path), arguments: arguments, environment: environment, input: Data(),
            forwardStandardError: true)
        guard result.exitStatus == 0 else {
            throw ValidationError("\(path) \(arguments.joined(separator: " ")) exited with status \(result.exitStatus)")
        }
    }

    /// Where the dev cluster's `postgres` password is kept (0600): `scripts/pg.sh` and `pgbouncer.sh` read it.
    static let databasePasswordFile = ".data/postgres.password"
    /// Where the runtime role's own password is kept (0600): the functions' `DATABASE_URL` and `pgbouncer.sh` use it.
    static let runtimePasswordFile = ".data/runtime.password"

    /// The runtime role's password: 32 hex digits of its own, made once, never the superuser's.
    private func devRuntimePassword() throws -> String {
        try FileManager.default.createDirectory(atPath: ".data", withIntermediateDirectories: true)
        return try PrivateFile.readOrCreate(
            atPath: Self.runtimePasswordFile,
            isUsable: { text in !text.isEmpty && text.allSatisfy { $0.isHexDigit || $0.isNewline } }
        ) {
            Hex.encode(try SecureRandom.bytes(16))
        }
        .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The dev cluster's `postgres` password: 32 hex digits, made once (an earlier `make db-start` may have made it).
    private func devDatabasePassword() throws -> String {
        try FileManager.default.createDirectory(atPath: ".data", withIntermediateDirectories: true)
        return try PrivateFile.readOrCreate(
            atPath: Self.databasePasswordFile,
            isUsable: { text in !text.isEmpty && text.allSatisfy { $0.isHexDigit || $0.isNewline } }
        ) {
            Hex.encode(try SecureRandom.bytes(16))
        }
        .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A random HS256 secret kept in `.data/` (0600), so tokens stay valid across restarts.
    private func devSecret() throws -> String {
        try PrivateFile.readOrCreate(atPath: ".data/dev-jwt-secret", isUsable: { $0.utf8.count >= 32 }) {
            Base64URL.encode(try SecureRandom.bytes(32))
        }
        .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct Demo {
        /// ES256, verified through the demo JWKS the emulator serves (what the curl lines use).
        let caregiverToken: String
        /// HS256 with the dev secret, for the `runner invoke` line: a lone process has no JWKS URL to fetch from.
        let secretSignedCaregiverToken: String
        let patientToken: String
        let medications: [Slot: UUID]
        let prn: UUID
        let today: String
    }

    /// The demo household, reset on every start so that the printed commands record (and push) anew.
    private func seed(
        databaseURL: String, runtimePassword password: String, signingKey: DevSigningKey, secret: String,
        logger: Logger
    ) throws -> Demo {
        let connection = try PostgresConnection(url: databaseURL, applicationName: "caregiver-push-dev")
        defer { connection.close() }
        try Migrator(directory: URL(fileURLWithPath: "infra/migrations")).migrate(connection, logger: logger)
        // The operator's one step after the first migration (docs/deploy.md#roles): the runtime role logs in, here
        // with its own dev password (hex digits: nothing to quote).
        try connection.query(
            PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN PASSWORD '\(password)'"))
        let patient = Self.demoPatient
        let caregiver = Self.demoCaregiver
        var medications: [Slot: UUID] = [:]
        let prn = UUID(uuidString: "33333333-3333-4333-8333-000000000005")!
        try connection.withTransaction { connection in
            try connection.query("DELETE FROM caregiver_push.patients WHERE id = \(patient)")
            try connection.query("INSERT INTO caregiver_push.patients (id, display_name) VALUES (\(patient), '山田花子')")
            try connection.query(
                "INSERT INTO caregiver_push.caregiver_patient_links (caregiver_id, patient_id) VALUES (\(caregiver), \(patient))"
            )
            for (index, (slot, time)) in [
                (Slot.morning, "08:00"), (.noon, "12:00"), (.evening, "18:00"), (.bedtime, "21:00"),
            ].enumerated() {
                let id = UUID(uuidString: "33333333-3333-4333-8333-00000000000\(index + 1)")!
                try connection.query(
                    "INSERT INTO caregiver_push.medications (id, patient_id, name, start_date) VALUES (\(id), \(patient), \("デモの薬 \(slot.rawValue)"), '2020-01-01')"
                )
                try connection.query(
                    "INSERT INTO caregiver_push.medication_schedule_times (medication_id, time_of_day) VALUES (\(id), \(time)::time)"
                )
                medications[slot] = id
            }
            try connection.query(
                "INSERT INTO caregiver_push.medications (id, patient_id, name, is_prn, start_date) VALUES (\(prn), \(patient), 'デモの頓服薬', true, '2020-01-01')"
            )
            try connection.query(
                "DELETE FROM caregiver_push.push_deliveries WHERE push_device_id IN (SELECT id FROM caregiver_push.push_devices WHERE owner_id = \(caregiver))"
            )
        }
        _ = try PushDeviceRegistry(connection: connection).register(
            .init(token: Self.demoDevice, platform: .ios, environment: .development, installationID: "demo-install"),
            caregiverID: caregiver)
        let session = try PatientSessionToken.generate()
        try connection.query(
            """
            INSERT INTO caregiver_push.patient_sessions (patient_id, token_hash, expires_at)
            VALUES (\(patient), \(PostgresBytes(session.hash)), now() + interval '1 day')
            """)
        let caregiverToken = try signingKey.caregiverToken(subject: caregiver, expiresIn: 86_400)
        let now = Date().timeIntervalSince1970.rounded(.down)
        let secretSignedCaregiverToken = try JWTSigner.sign(
            claims: DevSigningKey.claims(subject: caregiver, issuedAt: now, expiresIn: 86_400),
            using: .hmac(secret: Array(secret.utf8)))
        return Demo(
            caregiverToken: caregiverToken, secretSignedCaregiverToken: secretSignedCaregiverToken,
            patientToken: session.text, medications: medications, prn: prn,
            today: TokyoClock.dateString(of: Date()))
    }

    /// `url` without its password (the banner says where the password is instead).
    static func withoutPassword(_ url: String) -> String {
        url.replacing(/postgres:[0-9a-f]+@/, with: "postgres@")
    }

    static func banner(
        port: Int, databaseURL: String, poolerURL: String?, poolSize: Int, demo: Demo,
        runnerPath: String = ".build/debug/runner", dataDirectory: String = ".data/postgres"
    ) -> String {
        let base = "http://127.0.0.1:\(port)"
        // The body, then the status code on a line of its own.
        let curl = "curl -s -w '\\nHTTP %{http_code}\\n'"
        let json = "-H 'content-type: application/json'"
        let caregiver = "-H 'authorization: Bearer \(demo.caregiverToken)'"
        let patient = "-H 'authorization: Bearer \(demo.patientToken)'"
        let morning = demo.medications[.morning]?.uuidString.lowercased() ?? ""
        let pooled =
            poolerURL.map {
                "\nFunctions: through PgBouncer at \($0) (pool_mode = transaction, \(poolSize) server connections, "
                    + "in .data/pgbouncer; `make db-stop` stops it too)"
            } ?? ""
        return """

            caregiver-push dev stack on \(base) — functions cold or warm behind the runner, FCM emulator included.
            Database: \(databaseURL), password in \(databasePasswordFile) (data in \(dataDirectory == ".data/postgres" ? dataDirectory : "\(dataDirectory), linked from .data/postgres: the postgres user cannot reach this checkout"))\(pooled)
            Console: \(base)\(DevConsole.path) (invocations, what the phone shows, deliveries, devices; live)
            Demo: patient 山田花子 \(demoPatient.uuidString.lowercased()), caregiver \(demoCaregiver.uuidString.lowercased())
                  with phone \(demoDevice) registered for DEV. Edits under Functions/, Shared/ or Client/ rebuild the functions.
            Reset on this start: the demo patient's dose records, the demo phone's deliveries and the patient token
            (earlier patient tokens no longer work). The JWT secret is kept in .data/dev-jwt-secret.

            # A caregiver registers a second phone, and unregisters it again
            \(curl) \(base)/api/push/register \(json) \(caregiver) -d '{"token":"demo-second-phone","platform":"ios","environment":"DEV"}'
            \(curl) \(base)/api/push/unregister \(json) \(caregiver) -d '{"token":"demo-second-phone"}'

            # The patient records this morning's dose → the caregiver's phone is pushed
            \(curl) \(base)/api/dose-records \(json) \(patient) -d '{"medicationId":"\(morning)","scheduledAt":"\(demo.today)T08:00:00+09:00"}'

            # The patient records the whole evening slot
            \(curl) \(base)/api/dose-records/slot \(json) \(patient) -d '{"date":"\(demo.today)","slot":"evening"}'

            # The caregiver records an as-needed dose for the patient (the caregiver is not pushed about its own action)
            \(curl) \(base)/api/prn-dose-records \(json) \(caregiver) -H 'idempotency-key: \(UUID().uuidString.lowercased())' -d '{"patientId":"\(demoPatient.uuidString.lowercased())","medicationId":"\(demo.prn.uuidString.lowercased())","quantity":1}'

            # What the emulated FCM received
            \(curl) \(base)/_emulator/fcm/messages

            # One function without the HTTP server: an event on stdin through the built executable (like sam local invoke)
            sed -e 's/${CAREGIVER_TOKEN}/\(demo.secretSignedCaregiverToken)/' -e 's/${DEVICE_TOKEN}/demo-invoke-phone/' -e 's/${INSTALLATION_ID}/demo-invoke/' Tests/Fixtures/push-register/valid.json | DATABASE_URL="\(databaseURL.replacing("postgres@", with: "postgres:$(cat \(databasePasswordFile))@"))" SUPABASE_JWT_SECRET="$(cat .data/dev-jwt-secret)" PUSH_ENVIRONMENT=DEV \(runnerPath) invoke push-register

            """
    }
}
