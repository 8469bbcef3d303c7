import Libpq
import OpenSSLCrypto
import FoundationEssentials

/// The caregivers' devices in `push_devices`: registration, rotation, hand-over and soft-disable
/// (docs/behaviour.md#devices).
///
/// A disabled row keeps its reason, and registering the same token again re-enables it; a caregiver keeps at most
/// ``disabledRowsKept`` disabled rows, and `push-sweep` deletes those disabled longer than `PUSH_RETENTION_DAYS`.
public struct PushDeviceRegistry {
    /// Why a device no longer receives pushes (`push_devices.disabled_reason`).
    public enum DisabledReason: String, Sendable, CaseIterable {
        case userDisabled = "USER_DISABLED"
        case replaced = "REPLACED"
        case tokenReassigned = "TOKEN_REASSIGNED"
        case unregistered = "UNREGISTERED"
        case senderIDMismatch = "SENDER_ID_MISMATCH"
        case invalidArgument = "INVALID_ARGUMENT"
        /// Not seen for `PUSH_DEVICE_STALE_DAYS`: disabled by `push-sweep`.
        case stale = "STALE"
    }

    public enum Platform: String, Sendable, CaseIterable {
        case ios
    }

    /// A registration as validated from a request.
    public struct Registration: Sendable {
        public var token: String
        public var platform: Platform
        public var environment: Configuration.PushEnvironment
        public var installationID: String?

        public init(
            token: String, platform: Platform, environment: Configuration.PushEnvironment, installationID: String?
        ) {
            self.token = token
            self.platform = platform
            self.environment = environment
            self.installationID = installationID
        }
    }

    /// What one registration changed.
    public struct RegistrationResult: Sendable, Equatable {
        public let deviceID: UUID
        /// This owner's other devices of the same installation, disabled as `REPLACED`.
        public let replaced: Int
        /// Other owners' devices holding the same token, disabled as `TOKEN_REASSIGNED`.
        public let reassigned: Int
        /// This owner's least recently seen devices past the cap, disabled as `REPLACED`.
        public let overCap: Int
    }

    /// Enabled devices one caregiver may have (`PUSH_MAX_DEVICES_PER_CAREGIVER`'s default).
    public static let defaultDeviceCap = 10

    /// Namespace of the advisory locks taken per token (the second key is the token's hash).
    static let tokenLockNamespace: Int = 0x5055_5348  // "PUSH"
    /// How many disabled devices a caregiver keeps (the most recently disabled); older ones are deleted at the next
    /// registration, and any disabled device by `push-sweep` after `PUSH_RETENTION_DAYS`.
    public static let disabledRowsKept = 20

    /// Namespace of the advisory locks taken per caregiver (the second key is the id's hash): the cap's.
    static let ownerLockNamespace: Int = 0x4F57_4E52  // "OWNR"

    let connection: PostgresConnection

    /// `push_devices.token_sha256`: the key that uniqueness and look-ups by token use.
    static func tokenHash(_ token: String) -> PostgresBytes {
        PostgresBytes(SHA256.hash(Array(token.utf8)))
    }

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Registers (or re-registers) a caregiver's device, in one transaction of two round trips: everything up to
    /// `COMMIT` in one flight, then `COMMIT`.
    ///
    /// A transaction-scoped advisory lock on the token serialises registrations of the same token: without it, two
    /// caregivers registering one phone at the same moment would each miss the other's uncommitted row and both
    /// stay enabled. The statements are pipelined (`BEGIN`, the settings, lock, upsert, rotation, hand-over), but the
    /// server still runs them one after another, each with a snapshot of its own: the upsert and both updates start
    /// only once the lock is held, so they see a registration of the same token that committed while this one
    /// waited. (One statement with data-modifying CTEs could not: all of its parts share the snapshot taken before
    /// the lock was granted.) `COMMIT` waits for their results, so that a process that dies while they wait leaves
    /// nothing behind.
    ///
    /// The cap: a caregiver has at most `deviceCap` enabled devices. Past it, the least recently seen of the others
    /// are disabled as `REPLACED` — the phone registering now always gets its pushes, an abandoned one loses them.
    /// A second advisory lock, on the caregiver and taken before the token's (always in that order, so two
    /// registrations cannot wait on each other), serialises one caregiver's registrations: the cap's statement runs
    /// after every earlier registration of the caregiver committed, so concurrent registrations cannot together
    /// leave more than `deviceCap` enabled.
    /// - Parameter deviceCap: `PUSH_MAX_DEVICES_PER_CAREGIVER`.
    public func register(
        _ registration: Registration, caregiverID: UUID, deviceCap: Int = Self.defaultDeviceCap
    ) throws -> RegistrationResult {
        let tokenHash = Self.tokenHash(registration.token)
        let owner = caregiverID.uuidString.lowercased()
        return try connection.withPipelinedTransaction { transaction in
            var flight = transaction.flight()
            flight.add("SELECT pg_advisory_xact_lock(\(Self.ownerLockNamespace), hashtext(\(owner)))")
            flight.add("SELECT pg_advisory_xact_lock(\(Self.tokenLockNamespace), hashtext(\(registration.token)))")
            let upsert = flight.add(
                """
                INSERT INTO caregiver_push.push_devices
                    (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled,
                     last_seen_at)
                VALUES ('CAREGIVER', \(caregiverID), \(registration.token), \(tokenHash),
                        \(registration.platform.rawValue), \(registration.environment.rawValue),
                        \(registration.installationID), true, now())
                ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET
                    platform = EXCLUDED.platform,
                    environment = EXCLUDED.environment,
                    installation_id = COALESCE(EXCLUDED.installation_id, push_devices.installation_id),
                    is_enabled = true,
                    disabled_reason = NULL,
                    last_seen_at = now(),
                    updated_at = now()
                RETURNING id
                """)
            // The updates cannot take the upserted row's id as a parameter (it is not known until the flight
            // returns), so they name "every row but that one" by the device identity instead: among this owner's
            // rows, only the device has this token hash (push_devices_owner_token_key); among the rows with this
            // token, only the device has this owner.
            let rotation = flight.add(
                registration.installationID.map { installationID -> PostgresQuery in
                    """
                    UPDATE caregiver_push.push_devices
                    SET is_enabled = false, disabled_reason = \(DisabledReason.replaced.rawValue), updated_at = now()
                    WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID)
                      AND installation_id = \(installationID) AND token_sha256 <> \(tokenHash) AND is_enabled
                    """
                })
            let handOver = flight.add(
                """
                UPDATE caregiver_push.push_devices
                SET is_enabled = false, disabled_reason = \(DisabledReason.tokenReassigned.rawValue), updated_at = now()
                WHERE token_sha256 = \(tokenHash) AND token = \(registration.token)
                  AND NOT (owner_type = 'CAREGIVER' AND owner_id = \(caregiverID)) AND is_enabled
                """)
            // The device just registered sorts first whatever the clocks say; then the most recently seen.
            let cap = flight.add(
                """
                UPDATE caregiver_push.push_devices
                SET is_enabled = false, disabled_reason = \(DisabledReason.replaced.rawValue), updated_at = now()
                WHERE id IN (
                    SELECT id FROM caregiver_push.push_devices
                    WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID) AND is_enabled
                    ORDER BY token_sha256 = \(tokenHash) DESC, last_seen_at DESC, id
                    OFFSET \(max(deviceCap, 1)))
                """)
            // Disabled rows are kept for their reason (the app shows it), but only the caregiver's most recently
            // disabled ``disabledRowsKept``: registering endless distinct tokens cannot grow the table without bound.
            flight.add(
                """
                DELETE FROM caregiver_push.push_devices
                WHERE id IN (
                    SELECT id FROM caregiver_push.push_devices
                    WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID) AND NOT is_enabled
                    ORDER BY updated_at DESC, id
                    OFFSET \(Self.disabledRowsKept))
                """)
            let results = try transaction.run(flight)
            guard let row = results[upsert].single else {
                throw PostgresError(.unexpectedResult, serverMessage: "upsert returned no row")
            }
            return RegistrationResult(
                deviceID: try row.decode(UUID.self, at: 0), replaced: results[rotation]?.affectedRows ?? 0,
                reassigned: results[handOver].affectedRows, overCap: results[cap].affectedRows)
        }
    }

    /// One device as its owner may see it: enabled, or why not.
    public struct DeviceStatus: Sendable, Equatable, Encodable {
        public let enabled: Bool
        /// A ``DisabledReason`` raw value; `nil` while enabled.
        public let disabledReason: String?

        enum CodingKeys: String, CodingKey { case enabled, disabledReason }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(enabled, forKey: .enabled)
            try container.encode(disabledReason, forKey: .disabledReason)
        }
    }

    /// The caregiver's device with this token, changing nothing; `nil` when there is none. One read-only round trip.
    public func status(token: String, caregiverID: UUID) throws -> DeviceStatus? {
        let rows = try connection.query(
            """
            SELECT is_enabled, disabled_reason FROM caregiver_push.push_devices
            WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID)
              AND token_sha256 = \(Self.tokenHash(token)) AND token = \(token)
            """)
        guard let row = rows.first else { return nil }
        return DeviceStatus(
            enabled: try row.decode(Bool.self, at: 0), disabledReason: try row.decode(String?.self, at: 1))
    }

    /// Soft-disables the caregiver's device with this token (`USER_DISABLED`). Touches no other owner's row.
    /// - Returns: how many devices were disabled (0 when none matched or it was already disabled).
    @discardableResult
    public func unregister(token: String, caregiverID: UUID) throws -> Int {
        // In a transaction of its own so that a row locked by a concurrent registration is waited for only as long
        // as the connection's lock_timeout allows.
        try connection.withTransaction { connection in
            try connection.query(
                """
                UPDATE caregiver_push.push_devices
                SET is_enabled = false, disabled_reason = \(DisabledReason.userDisabled.rawValue), updated_at = now()
                WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID)
                  AND token_sha256 = \(Self.tokenHash(token)) AND token = \(token) AND is_enabled
                """
            ).affectedRows
        }
    }
}
