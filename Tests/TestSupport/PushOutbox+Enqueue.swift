import Libpq
import CaregiverPush

extension PushOutbox {
    /// Queues `event`'s push outside a recording, as a recording transaction does (the same statement,
    /// ``PushOutbox/enqueueQuery(_:source:environment:deviceCap:ifRecorded:)``), on `connection`, which should be
    /// inside a transaction: for tests and benchmarks that need deliveries owed without recording a dose.
    /// - Returns: how many deliveries this call created (0 when every recipient already owed one for this event).
    @discardableResult
    package static func enqueue(
        _ event: DoseTakenEvent, source: Source, environment: Configuration.PushEnvironment,
        deviceCap: Int = Configuration.defaultDeviceCap, connection: PostgresConnection
    ) throws -> Int {
        try connection.query(
            enqueueQuery(event, source: source, environment: environment, deviceCap: deviceCap, ifRecorded: nil)
        ).affectedRows
    }

    /// ``enqueue(_:source:environment:deviceCap:connection:)`` with `configuration`'s environment and device cap;
    /// nothing when it sends no push (`PUSH_ENVIRONMENT` unset). Returns whether a push was queued.
    package static func enqueue(
        _ event: DoseTakenEvent, source: Source, configuration: Configuration, connection: PostgresConnection
    ) throws -> Bool {
        guard let environment = configuration.pushEnvironment else { return false }
        try enqueue(
            event, source: source, environment: environment, deviceCap: configuration.pushMaxDevicesPerCaregiver,
            connection: connection)
        return true
    }
}
