import Foundation
@testable import CaregiverPush

/// The `push_deliveries` queue's rules (docs/behaviour.md#leases) over rows in memory, on a ``ManualClock``: a lease
/// takes due rows of enabled devices oldest first and holds them until the lease runs out; outcomes change only the
/// rows their lease still holds; a disabled reason disables the device. Lets a ``DeliveryRun`` be tested without
/// PostgreSQL (the real statements are ``DeliveryQueue``'s, tested in DatabaseTests).
final class InMemoryDeliveryQueue: DeliveryStore {
    struct Row {
        let id = UUID()
        let device: UUID
        let token: String
        var status = "PENDING"
        var attempts = 0
        var nextAttemptAt: ContinuousClock.Instant
        var leaseToken: UUID?
        var leaseUntil: ContinuousClock.Instant?
        var lastError: String?
        var messageName: String?
    }

    /// One `record` call: its lease, when it came, what it carried and how many rows it changed.
    struct Recording {
        let lease: UUID
        let at: ContinuousClock.Instant
        let outcomes: [DeliveryOutcome]
        let updated: Int
    }

    let clock: ManualClock
    /// How long a row stays leased: the send deadline plus 5 s, as ``DeliveryQueue/leaseSeconds(_:)``.
    let leaseDuration: Duration
    private(set) var rows: [Row] = []
    private(set) var disabledDevices: [UUID: PushDeviceRegistry.DisabledReason] = [:]
    /// Each lease taken: when, and how many rows it holds.
    private(set) var leases: [(at: ContinuousClock.Instant, count: Int)] = []
    private(set) var recordings: [Recording] = []
    let event = DoseTakenEvent(
        patientID: AppID(UUID()), date: "2026-11-26", slot: .morning, recordingGroupID: nil,
        takenAt: Date(timeIntervalSince1970: 1_795_000_000), withinTime: true, actingCaregiverID: nil)

    init(clock: ManualClock, tokens: [String], leaseDuration: Duration) {
        self.clock = clock
        self.leaseDuration = leaseDuration
        // Due in the order given: the oldest first.
        rows = tokens.enumerated().map { index, token in
            Row(device: UUID(), token: token, nextAttemptAt: clock.now - .milliseconds(tokens.count - index))
        }
    }

    /// Queues a delivery for `token`, due at `dueAt` (a recording that commits while the run goes on).
    func add(_ token: String, dueAt: ContinuousClock.Instant) {
        rows.append(Row(device: UUID(), token: token, nextAttemptAt: dueAt))
    }

    /// The row of `token`.
    func row(_ token: String) -> Row? { rows.first { $0.token == token } }

    /// Leases from this one on (0: the first) fail, as a store whose database went away does.
    var leasesFailFrom: Int?
    struct LeaseRefused: Error {}
    /// Lease calls made, the refused ones included.
    private(set) var leaseCalls = 0

    func lease(limit: Int) throws -> (token: UUID, deliveries: [LeasedDelivery]) {
        leaseCalls += 1
        if let leasesFailFrom, leaseCalls > leasesFailFrom { throw LeaseRefused() }
        let now = clock.now
        let token = UUID()
        let due = rows.indices.filter { index in
            let row = rows[index]
            let leasable =
                (row.status == "PENDING" && row.nextAttemptAt <= now)
                || (row.status == "SENDING" && (row.leaseUntil ?? now) <= now)
            return leasable && disabledDevices[row.device] == nil
        }.sorted { rows[$0].nextAttemptAt < rows[$1].nextAttemptAt }.prefix(limit)
        var deliveries: [LeasedDelivery] = []
        let message = DoseTakenMessage.Template(event: event, displayName: "山田花子")
        for index in due {
            rows[index].status = "SENDING"
            rows[index].attempts += 1
            rows[index].leaseToken = token
            rows[index].leaseUntil = now + leaseDuration
            deliveries.append(
                LeasedDelivery(
                    deliveryID: rows[index].id, deviceID: rows[index].device, token: rows[index].token,
                    attempts: rows[index].attempts, message: message))
        }
        leases.append((now, deliveries.count))
        return (token, deliveries)
    }

    @discardableResult
    func record(_ outcomes: [DeliveryOutcome], lease: UUID) -> Int? {
        var updated = 0
        for outcome in outcomes {
            // Like the second statement of `DeliveryQueue.record`: a dead token disables its device whatever the lease.
            if let reason = outcome.disabledReason, disabledDevices[outcome.delivery.deviceID] == nil {
                disabledDevices[outcome.delivery.deviceID] = reason
            }
            guard let index = rows.firstIndex(where: { $0.id == outcome.delivery.deliveryID }),
                rows[index].status == "SENDING", rows[index].leaseToken == lease
            else { continue }
            rows[index].status = outcome.status.rawValue
            rows[index].attempts = outcome.attempts
            rows[index].lastError = outcome.lastError
            rows[index].messageName = outcome.messageName
            if outcome.status == .pending {
                rows[index].nextAttemptAt = clock.now + .milliseconds(outcome.retryDelayMilliseconds)
            }
            rows[index].leaseToken = nil
            rows[index].leaseUntil = nil
            updated += 1
        }
        recordings.append(Recording(lease: lease, at: clock.now, outcomes: outcomes, updated: updated))
        return updated
    }

    /// Another sender takes over the rows of `token` as if their lease had run out (a sender that stalled).
    func takeOver(_ token: String) {
        guard let index = rows.firstIndex(where: { $0.token == token }) else { return }
        rows[index].leaseToken = UUID()
        rows[index].attempts += 1
    }
}
