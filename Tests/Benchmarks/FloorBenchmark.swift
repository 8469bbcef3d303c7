import ProcessSupervision
import TestSupport
import CaregiverPush
import Foundation

/// The floors a cold `push-register` cannot beat, measured in the same run: its SQL through `pgbench -C` (a new
/// connection per transaction, as a cold function has), and the start of a trivial static binary.
struct FloorBenchmark {
    let databaseURL: String
    /// `pgbench`, and a trivial statically linked executable (both prepared by scripts/bench.sh).
    let pgbench: String?
    let trivialBinary: String?

    /// The register transaction as the function sends it, with a random token per transaction.
    static let script = """
        \\set n random(1, 1000000000)
        BEGIN;
        SELECT pg_advisory_xact_lock(1347769160, hashtext('pgbench-' || :n));
        INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled, last_seen_at) VALUES ('CAREGIVER', gen_random_uuid(), 'pgbench-' || :n, sha256(convert_to('pgbench-' || :n, 'UTF8')), 'ios', 'DEV', 'pgbench-install-' || :n, true, now()) ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET is_enabled = true, disabled_reason = NULL, last_seen_at = now(), updated_at = now();
        UPDATE push_devices SET is_enabled = false, disabled_reason = 'REPLACED', updated_at = now() WHERE owner_type = 'CAREGIVER' AND owner_id = gen_random_uuid() AND installation_id = 'pgbench-install-' || :n AND is_enabled;
        UPDATE push_devices SET is_enabled = false, disabled_reason = 'TOKEN_REASSIGNED', updated_at = now() WHERE token_sha256 = sha256(convert_to('pgbench-' || :n, 'UTF8')) AND token = 'pgbench-' || :n AND owner_id <> gen_random_uuid() AND is_enabled;
        COMMIT;

        """

    /// Average latency of `transactions` register transactions, each on a new connection (`pgbench -C`).
    func pgbenchConnectPerTransaction(transactions: Int) throws -> Double? {
        guard let pgbench else { return nil }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("register-\(UUID().uuidString).sql")
        try Self.script.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: pgbench),
            arguments: ["-C", "-n", "-t", String(transactions), "-f", file.path, databaseURL], input: Data())
        let output = String(decoding: result.standardOutput, as: UTF8.self)
        guard result.exitStatus == 0,
            let line = output.split(separator: "\n").first(where: { $0.hasPrefix("latency average") }),
            let value = line.split(separator: " ").compactMap({ Double($0) }).first
        else { throw BenchmarkError("pgbench failed: \(String(decoding: result.standardError, as: UTF8.self))") }
        return value
    }

    /// Median time from starting the trivial static binary to its stdout's EOF (its exit), measured like the direct
    /// function invocation.
    func trivialProcessStart(runs: Int) throws -> Double? {
        guard let trivialBinary else { return nil }
        var samples: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            let result = try ChildProcess.run(executable: URL(fileURLWithPath: trivialBinary), input: Data())
            let elapsed = result.standardOutputClosedAt - start
            samples.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        return median(samples)
    }
}
