import Libpq
import ProcessSupervision
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestSupport

@Suite("local stack scripts")
struct DevStackTests {
    /// `runner dev` starts PostgreSQL through `scripts/pg.sh` with Foundation's `Process`, which learns that its child
    /// exited when a socket every descendant inherits is closed. A postmaster that kept it made `make dev` wait
    /// forever on a fresh clone (first start only: a running cluster is not started again).
    ///
    /// `make dev`'s cluster (PG_PASSWORD_FILE) lets no other local user in as its superuser: over TCP the password is
    /// asked for, and `COPY … PROGRAM` (which runs as the cluster's OS user) is out of reach without it.
    @Test(
        "pg.sh start returns to a Foundation Process caller; the dev cluster it started answers only with its password"
    )
    func pgStartReturns() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dev-pg-\(UUID().uuidString)")
            .path
        let passwordFile = directory + ".password"
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/pg.sh")
        let port = 25439
        var environment = ProcessInfo.processInfo.environment
        environment["PG_PASSWORD_FILE"] = passwordFile
        let scriptEnvironment = environment
        defer {
            _ = try? ChildProcess.run(executable: script, arguments: ["stop", directory], input: Data())
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: passwordFile)
        }
        let finished = DispatchSemaphore(value: 0)
        let status = Mutex<Int32?>(nil)
        // On a thread of its own, so that a hang fails this test instead of stopping the whole run.
        Thread.detachNewThread {
            let result = try? ChildProcess.run(
                executable: script, arguments: ["start", directory, "\(port)"], environment: scriptEnvironment,
                input: Data())
            status.withLock { $0 = result?.exitStatus ?? -1 }
            finished.signal()
        }
        let returned = finished.wait(timeout: .now() + 120) == .success
        try #require(returned, "pg.sh start had not returned after 120 s")
        #expect(status.withLock { $0 } == 0)
        // Another local user, knowing nothing: refused.
        let refused = #expect(throws: PostgresError.self) {
            try PostgresConnection(url: "postgresql://postgres@127.0.0.1:\(port)/caregiver_push").close()
        }
        #expect(refused?.connectionFailureReason == "authentication failed")
        let password = try String(contentsOfFile: passwordFile, encoding: .utf8)
        #expect(password.count == 32)
        let attributes = try FileManager.default.attributesOfItem(atPath: passwordFile)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // pg.sh url prints the URL with it, and that URL works.
        let url = try ChildProcess.run(
            executable: script, arguments: ["url", "\(port)"], environment: scriptEnvironment, input: Data())
        let text = String(decoding: url.standardOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(text == "postgresql://postgres:\(password)@127.0.0.1:\(port)/caregiver_push")
        let connection = try PostgresConnection(url: text)
        defer { connection.close() }
        #expect(try connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
    }
}

@Suite("runner dev and subcommand errors")
struct RunnerNewcomerTests {
    /// Runs the built runner from the repository root with `arguments`; stdout and stderr together.
    static func runner(_ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        process.arguments = arguments
        process.currentDirectoryURL = TestDatabase.repositoryRoot
        if let environment { process.environment = environment }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        LeakCapture.record(text, source: "runner \(arguments.first ?? "")")
        return (process.terminationStatus, text)
    }

    @Test(
        "runner migrate (the Knative Job's gateway migrate) names the kind of a connection failure, no part of the password"
    )
    func migrateKeepsPasswordOut() throws {
        for url in [
            "postgresql://postgres:hunter2@frag/ment-secret@127.0.0.1:1/caregiver_push",
            "postgresql://postgres:hunter2/fragment-secret@127.0.0.1:1/caregiver_push",
        ] {
            var environment = ProcessInfo.processInfo.environment
            environment["DATABASE_URL"] = url
            let (status, output) = try Self.runner(["migrate"], environment: environment)
            #expect(status != 0)
            #expect(output.contains("cannot connect to DATABASE_URL"))
            for fragment in ["hunter2", "frag", "ment-secret"] {
                #expect(!output.contains(fragment), "\(fragment) in: \(output)")
            }
        }
    }

    /// A listener on a free loopback port, held by a child process until the returned process is terminated.
    static func holdPort() throws -> (Process, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            """
            import signal, socket, time
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
            print(s.getsockname()[1], flush=True)
            time.sleep(120)
            """,
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), let first = byte.first,
            first != UInt8(ascii: "\n")
        {
            line.append(first)
        }
        let port = try #require(Int(String(decoding: line, as: UTF8.self)))
        return (process, port)
    }

    @Test("runner dev on a busy port stops before it touches the database and says what to do, without a usage text")
    func busyPort() throws {
        let (holder, port) = try Self.holdPort()
        defer {
            holder.terminate()
            holder.waitUntilExit()
        }
        // A database port nothing listens on: had runner dev gone on, pg.sh would have started a cluster there.
        let (probe, databasePort) = try Self.holdPort()
        probe.terminate()
        probe.waitUntilExit()
        let (status, output) = try Self.runner([
            "dev", "--port", "\(port)", "--database-port", "\(databasePort)", "--bin-dir",
            Executables.binDirectory.path,
        ])
        #expect(status != 0)
        #expect(output.contains("port \(port) on 127.0.0.1 is in use"))
        #expect(output.contains("DEV_HTTP_PORT="))
        #expect(output.contains("What to do:"))
        #expect(!output.contains("Usage:"))
        #expect(LoopbackPort.isInUse(databasePort) == false)
        #expect(!output.contains("pg.sh"))
    }

    @Test("an error in a subcommand prints that subcommand's usage, not the top level's")
    func subcommandUsage() throws {
        let (status, output) = try Self.runner(["token"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(status != 0)
        #expect(output.contains("SUPABASE_JWT_SECRET is not set"))
        #expect(output.contains("Usage: runner token"))
        #expect(!output.contains("Usage: runner <subcommand>"))
        let (_, invoke) = try Self.runner(["invoke", "no-such-function"])
        #expect(invoke.contains("unknown function") && invoke.contains("Usage: runner invoke"))
    }

    @Test("each subcommand's --help names the environment it reads and where the dev secret lives")
    func helpNamesEnvironment() throws {
        for (command, variables) in [
            ("dev", ["DATABASE_URL", "SUPABASE_JWT_SECRET"]), ("serve", ["DATABASE_URL", "FCM_SERVICE_ACCOUNT_JSON"]),
            ("invoke", ["DATABASE_URL", "SUPABASE_JWT_SECRET"]), ("migrate", ["DATABASE_URL"]),
            ("token", ["SUPABASE_JWT_SECRET"]),
        ] {
            let (_, help) = try Self.runner([command, "--help"])
            for variable in variables { #expect(help.contains(variable), "\(command) --help lacks \(variable)") }
            if command != "migrate" { #expect(help.contains(".data/dev-jwt-secret"), "\(command) --help") }
        }
    }
}
