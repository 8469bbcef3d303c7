import Codecs
import ProcessSupervision
import Foundation
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Database TLS as docs/deploy.md tells a team to set it: `sslmode=verify-full` with the provider's CA bundle.
///
/// A PostgreSQL of its own, started with TLS only (hostssl) and a certificate for `localhost` from a throwaway CA;
/// the built push-register connects with the right CA (in the URL, or through libpq's PGSSLMODE/PGSSLROOTCERT as the
/// SAM template sets them), and refuses a server it cannot verify: another CA, or a host name the certificate does
/// not carry. The refusal is a 500 problem naming the setting, and nothing is written.
@Suite("database TLS (verify-full)", .serialized, .timeLimit(.minutes(3)))
final class TLSDatabaseTests {
    let directory: URL
    let port: Int
    let caFile: String
    let otherCAFile: String

    init() throws {
        directory = URL(fileURLWithPath: "/tmp/caregiver-push-tls-db-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificates = directory.appendingPathComponent("certs")
        try FileManager.default.createDirectory(at: certificates, withIntermediateDirectories: true)
        try Self.shell(
            """
            cd '\(certificates.path)'
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=caregiver-push test CA' \
                -keyout ca.key -out ca.crt
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=someone else CA' \
                -keyout other-ca.key -out other-ca.crt
            openssl req -newkey rsa:2048 -nodes -subj '/CN=localhost' -keyout server.key -out server.csr
            printf 'subjectAltName=DNS:localhost\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
                -extfile san.ext -out server.crt
            chmod 600 server.key
            if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres .; chmod 755 .; chmod 644 ca.crt other-ca.crt; fi
            """)
        caFile = certificates.appendingPathComponent("ca.crt").path
        otherCAFile = certificates.appendingPathComponent("other-ca.crt").path
        var found = 0
        for _ in 0..<5 where found == 0 {
            let candidate = Int.random(in: 40_000..<60_000)
            if (try? Self.shell(
                "PG_SSL_DIR='\(certificates.path)' scripts/pg.sh start '\(directory.path)/data' \(candidate)")) != nil
            {
                found = candidate
            }
        }
        port = try #require(found == 0 ? nil : found, "the TLS PostgreSQL did not start")
        try Self.shell(
            "DATABASE_URL='\(url(host: "localhost", "sslmode=verify-full&sslrootcert=\(caFile)"))' "
                + "'\(Executables.binDirectory.path)/runner' migrate --migrations infra/migrations")
    }

    deinit {
        _ = try? Self.shell("scripts/pg.sh stop '\(directory.path)/data'")
        try? FileManager.default.removeItem(at: directory)
    }

    func url(host: String, _ query: String = "") -> String {
        "postgresql://postgres@\(host):\(port)/caregiver_push" + (query.isEmpty ? "" : "?\(query)")
    }

    @discardableResult
    static func shell(_ script: String) throws -> String {
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", "set -e\ncd '\(TestDatabase.repositoryRoot.path)'\n" + script],
            environment: ProcessInfo.processInfo.environment, input: Data())
        guard result.exitStatus == 0 else {
            throw ShellError.failed(String(decoding: result.standardError, as: UTF8.self))
        }
        return String(decoding: result.standardOutput, as: UTF8.self)
    }

    enum ShellError: Error { case failed(String) }

    /// push-register once against this server; the run and whether the device was stored there.
    func register(_ environment: [String: String]) throws -> (run: Executables.Run, stored: Bool) {
        let device = makeDeviceToken()
        let event = try Executables.fixture(
            "push-register/valid.json",
            ["CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": device, "INSTALLATION_ID": "tls"])
        var all = testEnvironment()
        all.merge(environment) { _, new in new }
        let run = try Executables.run("push-register", input: event, environment: all)
        let count = try Self.shell(
            "\"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql\" -qtA "
                + "'\(url(host: "localhost", "sslmode=verify-full&sslrootcert=\(caFile)"))' "
                + "-c \"SELECT count(*) FROM push_devices WHERE token = '\(device)'\"")
        return (run, count.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test("verify-full with the right CA and host name connects (sslrootcert in the URL)")
    func verifiedInURL() throws {
        let (run, stored) = try register([
            "DATABASE_URL": url(host: "localhost", "sslmode=verify-full&sslrootcert=\(caFile)")
        ])
        #expect(run.response?.statusCode == 200)
        #expect(stored)
    }

    @Test("verify-full through PGSSLMODE and PGSSLROOTCERT, as the SAM template sets them")
    func verifiedThroughLibpqVariables() throws {
        let (run, stored) = try register([
            "DATABASE_URL": url(host: "localhost"), "PGSSLMODE": "verify-full", "PGSSLROOTCERT": caFile,
        ])
        #expect(run.response?.statusCode == 200)
        #expect(stored)
    }

    @Test(
        "a server it cannot verify is refused: a 500 problem naming the setting, nothing written",
        arguments: ["wrong CA", "wrong host name", "missing CA file"])
    func refused(_ failure: String) throws {
        let databaseURL =
            switch failure {
            case "wrong CA": url(host: "localhost", "sslmode=verify-full&sslrootcert=\(otherCAFile)")
            case "wrong host name": url(host: "127.0.0.1", "sslmode=verify-full&sslrootcert=\(caFile)")
            default: url(host: "localhost", "sslmode=verify-full&sslrootcert=\(directory.path)/absent.crt")
            }
        let (run, stored) = try register(["DATABASE_URL": databaseURL])
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 500)
        #expect(run.response?.headers["content-type"] == "application/problem+json")
        #expect(run.body?["detail"]?.stringValue?.contains("sslrootcert") == true)
        #expect(run.stderr.contains("\"config.variable\":\"DATABASE_URL\""))
        #expect(!stored)
    }

    @Test("sslmode=require would have connected to the unverifiable server: why verify-full")
    func requireDoesNotVerify() throws {
        let (run, stored) = try register([
            "DATABASE_URL": url(host: "127.0.0.1", "sslmode=require&sslrootcert=\(directory.path)/absent.crt")
        ])
        #expect(run.response?.statusCode == 200)
        #expect(stored)
    }
}
