import Codecs
import Libpq
import CaregiverPush
import Foundation
import Logging
import TestFixtures
import TestSupport

/// Fan-out of one dose event to N devices against an FCM that answers after a fixed delay: how close the
/// dispatcher comes to one round trip, whatever N — and, when it can run, Google's Python Admin SDK doing the same
/// fan-out to the same devices on the same emulator right after ours, for each N.
struct FanOutBenchmark {
    struct Row {
        let devices: Int
        let medianMilliseconds: Double
        /// Connections the last timed round's sends arrived on, as the emulator saw them (a warm process keeps its
        /// connections, so this counts connections used, not opened).
        let connections: Int
        /// The most sends in flight on one connection at once during this device count's rounds.
        let maxConcurrentStreams: Int
        /// Whether every send of the last round arrived as an HTTP/2 stream.
        let allHTTP2: Bool
        /// Access tokens the emulator minted during our rounds for this N (warm-up included).
        let mints: Int
        /// The peer's result for each of `peerAPIs`, in that order; empty when the peer is unavailable.
        let peers: [FirebaseAdminPeer.Result]
        /// Per timed round, medians: CPU of the dispatching thread (lease, messages, libcurl with its TLS, outcomes),
        /// CPU of the rest of this process (the in-process emulator's TLS and HTTP/2), and the machine's cores busy.
        var dispatcherCPUMilliseconds = 0.0
        var emulatorCPUMilliseconds = 0.0
        var machineBusy = 0.0
        /// Behind nghttpx: nghttpx's CPU per timed round (its master and worker processes), median; 0 otherwise.
        var frontCPUMilliseconds = 0.0
        /// The dispatching thread's CPU per message delivered, in microseconds: the sender's own cost per message.
        var dispatcherMicrosecondsPerMessage: Double { dispatcherCPUMilliseconds * 1000 / Double(max(devices, 1)) }
    }

    let databaseURL: String
    let deviceCounts: [Int]
    let repetitions: Int
    let delayMilliseconds: Int
    let peer: FirebaseAdminPeer.Availability
    /// The SDK's entry points to measure: `send_each` (a thread per message over requests) first.
    let peerAPIs: [String]
    /// What the dispatcher talks to: the emulator's own TLS + HTTP/2 listener, or nghttpx (a TLS + HTTP/2 front that
    /// is not ours) in front of the emulator's plain HTTP/1.1 one.
    var front: Front = .emulator
    /// Where the emulator runs when it is the front: in a process of its own (``EmulatorProcess``: its CPU is not the
    /// sender's process's, and is read apart), or among this process's threads.
    var standIn: StandIn = .process

    enum Front {
        case emulator, nghttpx
    }

    enum StandIn {
        case process, inProcess
    }

    func run() throws -> [Row] {
        let emulator: any FCMStandIn =
            front == .emulator && standIn == .process
            ? try EmulatorProcess(delayMilliseconds: delayMilliseconds)
            : try InProcessEmulator.start(delayMilliseconds: delayMilliseconds, tls: front == .emulator)
        let nghttpx = front == .nghttpx ? try Nghttpx(backendPort: emulator.port) : nil
        var environment = [
            "DATABASE_URL": databaseURL, "SUPABASE_JWT_SECRET": String(repeating: "b", count: 32),
            "PUSH_ENVIRONMENT": "DEV", "PUSH_SEND_DEADLINE_MS": "60000",
        ].merging(emulator.environment) { _, new in new }
        if let nghttpx {
            environment["FCM_API_BASE_URL"] = nghttpx.baseURL
            environment["SSL_CERT_FILE"] = nghttpx.certificateFile
        }
        let configuration = Configuration(environment: environment)
        var quiet = Logger(label: "bench")
        quiet.logLevel = .error
        let database = DatabaseSession(url: databaseURL)
        defer { database.close() }
        let push = PushResources(configuration: configuration)
        let dispatcher = PushDispatcher(configuration: configuration, logger: quiet)
        var rows: [Row] = []
        for count in deviceCounts {
            let (patient, tokens) = try seedHousehold(devices: count, connection: database.connection())
            var samples: [Double] = []
            var cpu: [(dispatcher: Double, emulator: Double, busy: Double, front: Double)] = []
            var usage = (connections: 0, maxConcurrentStreams: 0, allHTTP2: false)
            var lastEvent: DoseTakenEvent?
            emulator.resetStreamCount()
            let mintsBefore = emulator.counts().mints
            // One untimed round first: it mints the access token, which is shared thereafter.
            for round in 0...repetitions {
                let event = DoseTakenEvent(
                    patientID: AppID(patient), date: "2026-02-11", slot: .morning, recordingGroupID: AppID(UUID()),
                    takenAt: Date(),
                    withinTime: true, actingCaregiverID: nil)
                lastEvent = event
                // The outbox write belongs to the recording's transaction (measured by the recording benchmark).
                _ = try database.withTransaction { connection in
                    // One caregiver with `count` devices: the cap (10 by default) raised to measure the fan-out itself.
                    try PushOutbox.enqueue(
                        event, source: .slotBulkRecord, environment: .development, deviceCap: count,
                        connection: connection)
                }
                let firstRequest = emulator.requestCount()
                let firstLogged = try nghttpx?.accessLog().count ?? 0
                let meter = CPUShare.Meter()
                let standInStart = emulator.processCPUMilliseconds()
                let frontStart = nghttpx.map { ProcessTreeCPU.tree($0.processIdentifier) }
                let profiled = round > 0 && count == deviceCounts.last
                if profiled { Self.perfControl?.write(Data("enable\n".utf8)) }
                let threadStart = CPUShare.threadMilliseconds()
                let start = ContinuousClock.now
                let report = dispatcher.dispatch(
                    eventKey: event.eventKey, database: database, push: push,
                    deadline: dispatcher.sendDeadline(hostDeadline: nil))
                let elapsed = ContinuousClock.now - start
                if profiled { Self.perfControl?.write(Data("disable\n".utf8)) }
                let dispatching = CPUShare.threadMilliseconds() - threadStart
                let share = meter.read(wall: elapsed)
                // The stand-in's own process when it has one, else the rest of this process (its threads).
                let standInCPU =
                    emulator.processCPUMilliseconds().flatMap { end in standInStart.map { end - $0 } }
                    ?? share.selfMilliseconds - dispatching
                let frontCPU = frontStart.map { start in
                    let end = ProcessTreeCPU.tree(nghttpx!.processIdentifier)
                    return end.root + end.descendants - start.root - start.descendants
                }
                if round > 0 {
                    cpu.append((dispatching, standInCPU, share.machineBusy, frontCPU ?? 0))
                }
                // A send that failed in transit (the stand-in's connection broke: curl 55) goes back to the queue for
                // the sweep, as a recording's own send leaves every retry (docs/behaviour.md#sending-retries); what
                // was not sent and not left for retry fails the run.
                if report.retryScheduled > 0 {
                    FileHandle.standardError.write(
                        Data("bench: fan-out to \(count): \(report.retryScheduled) left for the sweep\n".utf8))
                }
                guard report.sent + report.retryScheduled == count, report.failed == 0 else {
                    let errors = try database.withTransaction { connection in
                        try connection.query(
                            """
                            SELECT coalesce(last_error, '-') || ' ×' || count(*) FROM push_deliveries
                            WHERE event_key = \(event.eventKey) AND status <> 'SENT' GROUP BY last_error
                            """
                        ).map { try $0.decode(String.self, at: 0) }
                    }
                    throw BenchmarkError("fan-out to \(count) sent \(report.sent) (\(report)); not sent: \(errors)")
                }
                if round > 0 {
                    samples.append(
                        Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
                    usage = emulator.connectionUsage(since: firstRequest)
                    if let nghttpx {
                        usage = try Self.frontUsage(nghttpx, since: firstLogged, sends: count)
                    }
                }
            }
            let mints = emulator.counts().mints - mintsBefore
            var peers: [FirebaseAdminPeer.Result] = []
            if case .available(let sdk) = peer, let lastEvent {
                // The message our dispatcher sent, for the peer to rebuild with the SDK's own classes.
                let message = DoseTakenMessage.json(for: lastEvent, displayName: Self.displayName, deviceToken: "")
                for api in peerAPIs {
                    peers.append(try sdk.run(emulator: emulator, tokens: tokens, message: message, api: api))
                }
            }
            var row = Row(
                devices: count, medianMilliseconds: median(samples), connections: usage.connections,
                maxConcurrentStreams: usage.maxConcurrentStreams, allHTTP2: usage.allHTTP2, mints: mints,
                peers: peers)
            row.dispatcherCPUMilliseconds = median(cpu.map(\.dispatcher))
            row.emulatorCPUMilliseconds = median(cpu.map(\.emulator))
            row.machineBusy = median(cpu.map(\.busy))
            row.frontCPUMilliseconds = median(cpu.map(\.front))
            rows.append(row)
        }
        return rows
    }

    private static let displayName = "ベンチ"

    /// `BENCH_PERF_CONTROL=FIFO`: the control FIFO of a `perf record --control=fifo:FIFO -D -1` attached to this
    /// process, told to sample only while the largest device count's timed rounds dispatch (how the sender's CPU per
    /// message was split by library and function).
    private static let perfControl: FileHandle? = ProcessInfo.processInfo.environment[
        "BENCH_PERF_CONTROL"
    ].flatMap { FileHandle(forWritingAtPath: $0) }

    /// The connections a round's sends arrived on at nghttpx (one client port per connection) and whether each was an
    /// HTTP/2 stream; the most streams in flight on one connection is not in its log, so it is the sends per
    /// connection at most. nghttpx logs a request when it has answered it: waits (bounded) until all are logged.
    private static func frontUsage(_ front: Nghttpx, since first: Int, sends: Int) throws -> (
        connections: Int, maxConcurrentStreams: Int, allHTTP2: Bool
    ) {
        var entries: [Nghttpx.Entry] = []
        for _ in 0..<200 {
            entries = try front.accessLog().dropFirst(first).filter { $0.path.hasSuffix("/messages:send") }
            if entries.count >= sends { break }
            ThreadSleep.sleep(for: .milliseconds(10))
        }
        let byConnection = Dictionary(grouping: entries, by: \.clientPort)
        return (
            byConnection.count, byConnection.values.map(\.count).max() ?? 0,
            entries.count == sends && entries.allSatisfy { $0.alpn == "h2" && $0.status == 200 }
        )
    }

    /// A patient with one linked caregiver owning `devices` enabled DEV devices, and those devices' tokens.
    private func seedHousehold(devices: Int, connection: PostgresConnection) throws -> (
        patient: UUID, tokens: [String]
    ) {
        let patient = try connection.query(
            "INSERT INTO patients (display_name) VALUES (\(Self.displayName)) RETURNING id")[0].decode(UUID.self, at: 0)
        let caregiver = UUID()
        try connection.query(
            "INSERT INTO caregiver_patient_links (caregiver_id, patient_id) VALUES (\(caregiver), \(patient))")
        let registry = PushDeviceRegistry(connection: connection)
        var tokens: [String] = []
        for _ in 0..<devices {
            let token = "bench-\(UUID().uuidString)"
            _ = try registry.register(
                .init(token: token, platform: .ios, environment: .development, installationID: nil),
                caregiverID: caregiver, deviceCap: devices)
            tokens.append(token)
        }
        return (patient, tokens)
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
