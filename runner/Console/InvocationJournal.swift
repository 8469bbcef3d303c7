import Codecs
import Foundation
import FunctionRuntime
import Logging
import Synchronization

/// What the dev console shows of the runner's invocations: the runner's own `request` and `scheduled run` log
/// events, kept (the last ``capacity``) as they are written. It reads the log rather than the gateway, so that the
/// gateway knows nothing of the console (`runner serve` never has one).
final class InvocationJournal: Sendable {
    struct Entry: Sendable, Equatable {
        let sequence: Int
        let at: Date
        /// `request` (through the HTTP API) or `scheduled` (the scheduler's run).
        let trigger: String
        let function: String
        /// The HTTP status of a request, or the outcome of a scheduled run (`completed`, `timed out`, …).
        let status: String
        /// `cold` (a process per invocation) or `warm` (a worker on the private Runtime API).
        let mode: String
        let durationMilliseconds: Double?
        let requestID: String
        let method: String?
        let path: String?
        /// A scheduled run's numeric summary (`summary.sent` → `sent`): push-sweep's counts.
        let summary: [String: Double]
    }

    static let capacity = 200
    private let state = Mutex<(next: Int, entries: [Entry])>((1, []))

    /// Keeps the event when it is one of the two the console shows; ignores every other.
    func record(message: String, metadata: Logger.Metadata) {
        guard message == "request" || message == "scheduled run" else { return }
        func text(_ key: String) -> String? {
            guard let value = metadata[key] else { return nil }
            if case .string(let string) = value { return string }
            return value.description
        }
        var summary: [String: Double] = [:]
        for (key, value) in metadata where key.hasPrefix("summary.") {
            if let number = Double(value.description) { summary[String(key.dropFirst("summary.".count))] = number }
        }
        state.withLock { state in
            let entry = Entry(
                sequence: state.next, at: Date(), trigger: message == "request" ? "request" : "scheduled",
                function: text("function") ?? "-",
                status: text(message == "request" ? "http.status" : "outcome") ?? "-",
                mode: text("mode") ?? "-", durationMilliseconds: text("duration_ms").flatMap(Double.init),
                requestID: text("requestId") ?? "-", method: text("http.method"), path: text("http.path"),
                summary: summary)
            state.next += 1
            state.entries.append(entry)
            if state.entries.count > Self.capacity { state.entries.removeFirst(state.entries.count - Self.capacity) }
        }
    }

    /// The kept entries, newest first.
    func recent() -> [Entry] {
        state.withLock { $0.entries.reversed() }
    }

    /// Installs the runner's JSON log handler with this journal listening to it (once per process).
    func bootstrapLogging(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let (level, format) = LogFormat.from(environment: environment)
        LoggingSystem.bootstrap { [self] label in
            var handler = JSONLogHandler(label: label, format: format)
            handler.logLevel = level
            return JournalingLogHandler(inner: handler, journal: self)
        }
    }
}

/// The runner's JSON log handler, with every event also offered to the journal.
struct JournalingLogHandler: LogHandler {
    var inner: JSONLogHandler
    let journal: InvocationJournal

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        inner.log(event: event)
        var merged = inner.metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        journal.record(message: event.message.description, metadata: merged)
    }
}
