import Codecs
import FoundationEssentials
import PushPayloadContract

/// A TAKEN dose to tell caregivers about: everything the push needs, and nothing else — no medication, no dose.
public struct DoseTakenEvent: Sendable, Equatable {
    public let patientID: UUID
    /// The dose's Tokyo date, `YYYY-MM-DD`.
    public let date: String
    public let slot: Slot
    /// Set for slot-bulk recordings: one event for the whole group.
    public let recordingGroupID: UUID?
    public let takenAt: Date
    public let withinTime: Bool
    /// The caregiver who recorded it, who is not told about their own action; `nil` when the patient recorded.
    public let actingCaregiverID: UUID?

    public init(
        patientID: UUID, date: String, slot: Slot, recordingGroupID: UUID?, takenAt: Date, withinTime: Bool,
        actingCaregiverID: UUID?
    ) {
        self.init(
            storedKey: Self.eventKey(
                patientID: patientID, date: date, slot: slot, group: recordingGroupID, takenAt: takenAt),
            patientID: patientID, date: date, slot: slot, recordingGroupID: recordingGroupID, takenAt: takenAt,
            withinTime: withinTime, actingCaregiverID: actingCaregiverID)
    }

    /// An event as the outbox stored it: its key is the stored one, whatever the fields would compute today.
    init(
        storedKey: String, patientID: UUID, date: String, slot: Slot, recordingGroupID: UUID?, takenAt: Date,
        withinTime: Bool, actingCaregiverID: UUID? = nil
    ) {
        self.patientID = patientID
        self.date = date
        self.slot = slot
        self.recordingGroupID = recordingGroupID
        self.takenAt = takenAt
        self.withinTime = withinTime
        self.actingCaregiverID = actingCaregiverID
        self.eventKey = storedKey
    }

    /// An as-needed (PRN) dose: an event of its own, keyed by its record (`doseTaken:prn:{recordID}`), never merged
    /// with a slot's. Its date and slot are those of `takenAt` in Tokyo; it is never within time.
    public static func prn(recordID: UUID, patientID: UUID, takenAt: Date, actingCaregiverID: UUID?) -> Self {
        Self(
            storedKey: "doseTaken:prn:\(recordID.uuidString.lowercased())", patientID: patientID,
            date: TokyoClock.dateString(of: takenAt), slot: Slot(instant: takenAt), recordingGroupID: nil,
            takenAt: takenAt, withinTime: false, actingCaregiverID: actingCaregiverID)
    }

    /// The de-duplication key (docs/behaviour.md#event-key): `doseTaken:{group}` for a slot recording,
    /// `doseTaken:prn:{record}` for a PRN dose (``prn(recordID:patientID:takenAt:actingCaregiverID:)``), or for a
    /// single scheduled dose `doseTaken:{patient}:{date}:{slot}:{HH:mm}` — the dose's Tokyo date and slot and the
    /// Tokyo minute of `takenAt`, which two single doses of one slot taken in one minute share. The primary key of
    /// `push_events`.
    public let eventKey: String

    private static func eventKey(patientID: UUID, date: String, slot: Slot, group: UUID?, takenAt: Date) -> String {
        if let group { return "doseTaken:\(group.uuidString.lowercased())" }
        return
            "doseTaken:\(patientID.uuidString.lowercased()):\(date):\(slot.rawValue):\(TokyoClock.hourMinute(takenAt))"
    }

    /// The APNs collapse id: the first 32 hex digits of SHA-256(event key), so a duplicate shows as one.
    public var collapseID: String { Self.collapseID(of: eventKey) }
}

/// The FCM HTTP v1 message for one device (docs/behaviour.md#payload). The `data` keys and `type` come from
/// `PushPayloadContract`, which the app's deep-link router reads them with.
public enum DoseTakenMessage {
    public static let title = "服薬記録"

    public static func body(displayName: String, withinTime: Bool) -> String {
        withinTime ? "\(displayName)さんが時間内に薬を服用しました！" : "\(displayName)さんが薬を服用しました"
    }

    /// `{"message": {...}}` as JSON bytes, with every `data` value a string.
    public static func json(for event: DoseTakenEvent, displayName: String, deviceToken: String) -> [UInt8] {
        let patient = event.patientID.uuidString.lowercased()
        let message: JSONValue = .object([
            "message": .object([
                "token": .string(deviceToken),
                "notification": .object([
                    "title": .string(title),
                    "body": .string(body(displayName: displayName, withinTime: event.withinTime)),
                ]),
                "data": .object([
                    DoseTakenPayload.Key.type: .string(DoseTakenPayload.type),
                    DoseTakenPayload.Key.patientID: .string(patient),
                    DoseTakenPayload.Key.date: .string(event.date),
                    DoseTakenPayload.Key.slot: .string(event.slot.rawValue),
                    DoseTakenPayload.Key.recordingGroupID: .string(
                        event.recordingGroupID?.uuidString.lowercased() ?? ""),
                ]),
                "apns": .object([
                    "headers": .object(["apns-collapse-id": .string(event.collapseID)]),
                    "payload": .object([
                        "aps": .object(["sound": .string("default"), "thread-id": .string("patient-\(patient)")])
                    ]),
                ]),
            ])
        ])
        return JSONCoding.encode(message) ?? []
    }
}
