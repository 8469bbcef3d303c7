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

    /// What a device's identity is, and the HTTP v1 field a message names it by (`push_devices.target`): an FCM
    /// registration token, or the Firebase Installation ID that FCM addresses since 2026.
    public enum Target: String, Sendable, CaseIterable {
        case token
        case fid
    }

    /// A registration as validated from a request.
    public struct Registration: Sendable {
        /// The device's identity: a registration token, or a FID (``target``).
        public var token: String
        public var target: Target
        public var platform: Platform
        public var environment: Configuration.PushEnvironment
        /// The app's installation; a FID registration without one is its own installation (the FID is the
        /// installation's id), so that the token it replaces, registered with the same id, is disabled.
        public var installationID: String?
        /// The app's language (a primary language subtag, `en`), which the device's pushes are worded in; `nil`
        /// keeps what the device registered before (Japanese for a new one).
        public var language: String?

        public init(
            token: String, target: Target = .token, platform: Platform, environment: Configuration.PushEnvironment,
            installationID: String?, language: String? = nil
        ) {
            self.token = token
            self.language = language
            self.target = target
            self.platform = platform
            self.environment = environment
            self.installationID = installationID ?? (target == .fid ? token : nil)
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

    /// Namespace of the advisory locks taken per token (the second key is the token's hash); migration 000009's
    /// `register_push_device` takes it by this number.
    static let tokenLockNamespace: Int = 0x5055_5348  // "PUSH"
    /// How many disabled devices a caregiver keeps (the most recently disabled); older ones are deleted at the next
    /// registration, and any disabled device by `push-sweep` after `PUSH_RETENTION_DAYS`.
    public static let disabledRowsKept = 20

    /// Namespace of the advisory locks taken per caregiver (the second key is the id's hash): the cap's; migration
    /// 000009's `register_push_device` takes it by this number.
    static let ownerLockNamespace: Int = 0x4F57_4E52  // "OWNR"

    let connection: PostgresConnection

    /// `push_devices.token_sha256`: the key that uniqueness and look-ups by token use.
    static func tokenHash(_ token: String) -> PostgresBytes {
        PostgresBytes(SHA256.hash(Array(token.utf8)))
    }

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Registers (or re-registers) a caregiver's device: one call of `caregiver_push.register_push_device`
    /// (migration 000009) in a transaction of two round trips, `BEGIN`, the settings and the call in one flight, then
    /// `COMMIT` (which waits for the call, so that a process that dies while it waits leaves nothing behind).
    ///
    /// The function runs the statements this method once sent one by one, in order, each with a snapshot of its own
    /// (docs/decisions.md, "A registration is one PL/pgSQL call"): a transaction-scoped advisory lock on the token
    /// serialises registrations of the same token (without it, two caregivers registering one phone at the same moment
    /// would each miss the other's uncommitted row and both stay enabled); the upsert and the updates start only once
    /// the lock is held, so they see a registration of the same token that committed while this one waited.
    ///
    /// The cap: a caregiver has at most `deviceCap` enabled devices. Past it, the least recently seen of the others
    /// are disabled as `REPLACED` — the phone registering now always gets its pushes, an abandoned one loses them.
    /// A second advisory lock, on the caregiver and taken before the token's (always in that order, so two
    /// registrations cannot wait on each other), serialises one caregiver's registrations: the cap's statement runs
    /// after every earlier registration of the caregiver committed, so concurrent registrations cannot together
    /// leave more than `deviceCap` enabled. Disabled rows are kept for their reason (the app shows it), but only the
    /// caregiver's most recently disabled ``disabledRowsKept``: registering endless distinct tokens cannot grow the
    /// table without bound.
    /// - Parameter deviceCap: `PUSH_MAX_DEVICES_PER_CAREGIVER`.
    public func register(
        _ registration: Registration, caregiverID: UUID, deviceCap: Int = Configuration.defaultDeviceCap
    ) throws -> RegistrationResult {
        try connection.withPipelinedTransaction { transaction in
            var flight = transaction.flight()
            let call = flight.add(
                """
                SELECT device_id, replaced_count, reassigned_count, over_cap_count
                FROM caregiver_push.register_push_device(
                    \(caregiverID), \(registration.token), \(Self.tokenHash(registration.token)),
                    \(registration.platform.rawValue), \(registration.environment.rawValue), \(registration.installationID),
                    \(max(deviceCap, 1)), \(Self.disabledRowsKept))
                """)
            // The identity's kind and the language, set in the same transaction (the function's locks are held until
            // COMMIT): one statement on the row the call upserted, by its unique key.
            _ = flight.add(
                """
                UPDATE caregiver_push.push_devices
                SET target = \(registration.target.rawValue),
                    language = coalesce(\(registration.language)::text, language), updated_at = now()
                WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiverID)
                  AND token_sha256 = \(Self.tokenHash(registration.token))
                  AND (target <> \(registration.target.rawValue)
                       OR language <> coalesce(\(registration.language)::text, language))
                """)
            guard let row = try transaction.run(flight)[call].single else {
                throw PostgresError(.unexpectedResult, serverMessage: "register_push_device returned no row")
            }
            return RegistrationResult(
                deviceID: try row.decode(UUID.self, at: 0), replaced: try row.decode(Int.self, at: 1),
                reassigned: try row.decode(Int.self, at: 2), overCap: try row.decode(Int.self, at: 3))
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

// The device fields of push-register and push-unregister.

extension FieldValidator {
    /// The `token` field: an FCM registration token, 1–512 characters of `A-Z a-z 0-9 _ : . -`.
    /// The longest device token stored: FCM's registration tokens are about 160 characters (APNs device tokens 64);
    /// 512 leaves room for a longer format without letting one row carry kilobytes (docs/behaviour.md#limits).
    static let maxDeviceTokenLength = 512

    mutating func deviceToken() -> String? {
        string("token", required: true, invalidMessage: "token must be 1 to 512 characters of A-Z a-z 0-9 _ : . -") {
            value in
            (1...Self.maxDeviceTokenLength).contains(value.utf8.count) && value.consists(of: Self.isTokenCharacter)
        }
    }

    /// The device's identity: `token` (a registration token) or `fid` (a Firebase Installation ID, 22 characters of
    /// `A-Z a-z 0-9 - _`), exactly one of them, even as `null`. Without either, "token is required", as before FIDs.
    mutating func deviceIdentity() -> (text: String, target: PushDeviceRegistry.Target)? {
        // A member sent as `null` counts as sent: `{"token": …, "fid": null}` is not a token registration.
        let members = self.members
        let sent = { (field: String) in members[field] != nil }
        guard sent("fid") else { return deviceToken().map { ($0, .token) } }
        guard !sent("token") else {
            reject("fid", "send token or fid, not both")
            return nil
        }
        return string(
            "fid", required: true,
            invalidMessage: "fid must be a Firebase Installation ID: 22 characters of A-Z a-z 0-9 - _"
        ) { value in
            value.utf8.count == 22
                && value.consists { Self.isTokenCharacter($0) && $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: ".") }
        }.map { ($0, .fid) }
    }

    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "."),
            UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
