import FoundationEssentials
import Logging

/// Where a ``DeliveryRun`` takes its leases and records their outcomes: ``DeliveryQueue`` over libpq in production,
/// an in-memory queue in the unit tests.
protocol DeliveryStore {
    /// Leases at most `limit` due deliveries (docs/behaviour.md#leases).
    /// - Returns: the lease token and the deliveries it holds (none when nothing is due).
    /// - Throws: when nothing could be leased (the run then stops, or takes no further lease).
    func lease(limit: Int) throws -> (token: UUID, deliveries: [LeasedDelivery])
    /// Records the outcomes of one lease, for the rows that lease still holds.
    /// - Returns: how many were recorded, or `nil` when none could be (the lease then runs out).
    @discardableResult
    func record(_ outcomes: [DeliveryOutcome], lease: UUID) -> Int?
}

/// The `push_deliveries` queue of one process's database session: the deliveries of one event (a recording's own
/// send) or of any (the sweep).
struct DatabaseDeliveryStore: DeliveryStore {
    let eventKey: String?
    /// What the recording transaction already leased: the lease then takes these, without a statement.
    var preLeased: OwedPush.Lease? = nil
    let configuration: Configuration
    let database: DatabaseSession
    let logger: Logger

    func lease(limit: Int) throws -> (token: UUID, deliveries: [LeasedDelivery]) {
        if let preLeased { return (preLeased.token, try DeliveryQueue.leased(preLeased.rows)) }
        return try DeliveryQueue.lease(
            eventKey: eventKey, limit: limit, configuration: configuration, database: database)
    }

    @discardableResult
    func record(_ outcomes: [DeliveryOutcome], lease: UUID) -> Int? {
        DeliveryQueue.record(outcomes, lease: lease, database: database, logger: logger)
    }
}
