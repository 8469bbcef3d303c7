import Codecs
import OpenSSLCrypto
import FoundationEssentials
import PushPayloadContract

extension DoseTakenEvent {
    /// The APNs collapse id: the first 32 hex digits of SHA-256(event key), so a duplicate shows as one.
    public var collapseID: String { Self.collapseID(of: eventKey) }

    /// The APNs collapse id of an event key (docs/behaviour.md#payload).
    static func collapseID(of eventKey: String) -> String {
        String(Hex.encode(SHA256.hash(Array(eventKey.utf8))).prefix(32))
    }
}

/// The FCM HTTP v1 message for one device (docs/behaviour.md#payload). The `data` keys and `type` come from
/// `PushPayloadContract`, which the app's deep-link router reads them with, and so do the words (`DoseTakenText`,
/// which the kit's string catalog holds too).
public enum DoseTakenMessage {
    /// The notification's title in `language` (Japanese when the catalogue lacks it).
    public static func title(language: String = DoseTakenText.fallbackLanguage) -> String {
        DoseTakenText.text(.title, language: language)
    }

    /// The notification's body: "on time" only when `withinTime`, "a caregiver recorded" only when `recorder` is one.
    public static func body(
        displayName: String, withinTime: Bool, recorder: DoseRecorder = .patient,
        language: String = DoseTakenText.fallbackLanguage
    ) -> String {
        DoseTakenText.text(
            DoseTakenText.bodyKey(withinTime: withinTime, recorder: recorder), language: language,
            displayName: displayName)
    }

    /// `{"message": {...}}` as JSON bytes, with every `data` value a string.
    public static func json(
        for event: DoseTakenEvent, displayName: String, language: String = DoseTakenText.fallbackLanguage,
        deviceToken: String
    ) -> [UInt8] {
        JSONCoding.encode(message(for: event, displayName: displayName, language: language, deviceToken: deviceToken))
            ?? []
    }

    /// One event's message for any of its devices: everything but the token encoded once, so that a fan-out to N
    /// devices builds and sorts the message's tree once and copies bytes N times. The bytes are exactly
    /// ``json(for:displayName:deviceToken:)``'s: the encoder sorts keys, so `token` is the last member of `message`
    /// and the one member of the text that varies.
    public struct Template: Sendable {
        /// The encoded message up to the token's value (`…,"token":`); `nil` when the encoding did not end as
        /// expected, and each device's message is then encoded whole.
        private let prefix: [UInt8]?
        public let event: DoseTakenEvent
        public let displayName: String
        /// The language the message is worded in.
        public let language: String
        private static let suffix = Array(#""token":""}}"#.utf8)

        public init(event: DoseTakenEvent, displayName: String, language: String = DoseTakenText.fallbackLanguage) {
            self.event = event
            self.displayName = displayName
            self.language = language
            let whole = DoseTakenMessage.json(
                for: event, displayName: displayName, language: language, deviceToken: "")
            prefix =
                whole.count > Self.suffix.count && whole.suffix(Self.suffix.count).elementsEqual(Self.suffix)
                ? Array(whole.dropLast(4)) : nil
        }

        /// The message to `deviceToken`.
        public func json(deviceToken: String) -> [UInt8] {
            guard let prefix, let token = Self.plainJSONString(deviceToken) else {
                return DoseTakenMessage.json(
                    for: event, displayName: displayName, language: language, deviceToken: deviceToken)
            }
            var bytes = prefix
            bytes.reserveCapacity(prefix.count + token.count + 4)
            bytes.append(contentsOf: token)
            bytes.append(contentsOf: [UInt8(ascii: "}"), UInt8(ascii: "}")])
            return bytes
        }

        /// The message to the device whose Firebase Installation ID is `fid` (HTTP v1's `message.fid`), encoded
        /// whole: `fid` does not sort last among the message's keys, so the token's shortcut does not apply.
        public func json(fid: String) -> [UInt8] {
            addressed(to: "fid", fid, validateOnly: false)
        }

        /// The same message addressed to `topic` instead of a device, with `validate_only`: FCM checks everything
        /// of it (the project, the sender's rights, the payload) and delivers nothing (`runner check-deployment`).
        public func validationJSON(topic: String) -> [UInt8] {
            addressed(to: "topic", topic, validateOnly: true)
        }

        /// The message with `target` (`fid` or `topic`) in place of `token`, and `validate_only` when asked.
        private func addressed(to target: String, _ value: String, validateOnly: Bool) -> [UInt8] {
            guard
                case .object(var outer) = DoseTakenMessage.message(
                    for: event, displayName: displayName, language: language, deviceToken: ""),
                case .object(var message) = outer["message"]
            else { return [] }
            message["token"] = nil
            message[target] = .string(value)
            outer["message"] = .object(message)
            if validateOnly { outer["validate_only"] = .bool(true) }
            return JSONCoding.encode(JSONValue.object(outer)) ?? []
        }

        /// `"token"` as JSON when it needs no escaping (printable ASCII without a quote or a backslash, as FCM tokens are);
        /// `nil` otherwise, for the encoder to escape.
        private static func plainJSONString(_ token: String) -> [UInt8]? {
            var bytes: [UInt8] = [UInt8(ascii: "\"")]
            bytes.reserveCapacity(token.utf8.count + 2)
            for byte in token.utf8 {
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else {
                    return nil
                }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
            return bytes
        }
    }

    fileprivate static func message(
        for event: DoseTakenEvent, displayName: String, language: String, deviceToken: String
    ) -> JSONValue {
        let patient = event.patientID.text
        return .object([
            "message": .object([
                "token": .string(deviceToken),
                "notification": .object([
                    "title": .string(title(language: language)),
                    "body": .string(
                        body(
                            displayName: displayName, withinTime: event.withinTime, recorder: event.recorder,
                            language: language)),
                ]),
                "data": .object([
                    DoseTakenPayload.Key.type: .string(DoseTakenPayload.type),
                    DoseTakenPayload.Key.patientID: .string(patient),
                    DoseTakenPayload.Key.date: .string(event.date),
                    DoseTakenPayload.Key.slot: .string(event.slot.rawValue),
                    DoseTakenPayload.Key.recordingGroupID: .string(
                        event.recordingGroupID?.text ?? ""),
                    DoseTakenPayload.Key.recordedBy: .string(event.recorder.rawValue),
                ]),
                "apns": .object([
                    "headers": .object(["apns-collapse-id": .string(event.collapseID)]),
                    "payload": .object([
                        "aps": .object(["sound": .string("default"), "thread-id": .string("patient-\(patient)")])
                    ]),
                ]),
            ])
        ])
    }
}
