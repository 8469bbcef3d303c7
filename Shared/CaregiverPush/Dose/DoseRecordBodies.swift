import Codecs
import FoundationEssentials

/// A scheduled dose recorded as TAKEN, as the API returns it.
public struct DoseRecordBody: Codable, Sendable, Equatable {
    public let id: String
    public let patientId: String
    public let medicationId: String
    public let scheduledAt: String
    public let takenAt: String
    /// Tokyo date of `scheduledAt`.
    public let date: String
    public let slot: Slot
    public let withinTime: Bool
    public let recordingGroupId: String?

    init(
        id: AppID, patientID: AppID, medicationID: AppID, scheduledAt: Date, takenAt: Date, recordingGroupID: AppID?
    ) {
        self.id = id.text
        patientId = patientID.text
        medicationId = medicationID.text
        self.scheduledAt = Timestamp.rfc3339UTC(scheduledAt)
        self.takenAt = Timestamp.rfc3339UTC(takenAt)
        date = TokyoClock.dateString(of: scheduledAt)
        slot = Slot(instant: scheduledAt)
        withinTime = DoseRules.isWithinTime(scheduledAt: scheduledAt, takenAt: takenAt)
        recordingGroupId = recordingGroupID?.text
    }

    /// Encodes `recordingGroupId` as `null` rather than leaving it out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(patientId, forKey: .patientId)
        try container.encode(medicationId, forKey: .medicationId)
        try container.encode(scheduledAt, forKey: .scheduledAt)
        try container.encode(takenAt, forKey: .takenAt)
        try container.encode(date, forKey: .date)
        try container.encode(slot, forKey: .slot)
        try container.encode(withinTime, forKey: .withinTime)
        try container.encode(recordingGroupId, forKey: .recordingGroupId)
    }
}

/// `{record, updatedCount}` — dose-record and prn-record.
public struct RecordResponse<Record: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    public let record: Record
    /// 1 when this request recorded it, 0 when it had been recorded before.
    public let updatedCount: Int
}

/// `{recordingGroupId, updatedCount, records}` — slot-bulk-record.
public struct SlotRecordResponse: Codable, Sendable, Equatable {
    public let recordingGroupId: String?
    public let updatedCount: Int
    public let records: [DoseRecordBody]

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordingGroupId, forKey: .recordingGroupId)
        try container.encode(updatedCount, forKey: .updatedCount)
        try container.encode(records, forKey: .records)
    }
}

/// An as-needed (PRN) dose, as the API returns it.
public struct PRNRecordBody: Codable, Sendable, Equatable {
    public let id: String
    public let patientId: String
    public let medicationId: String
    public let takenAt: String
    /// Tokyo date of `takenAt`.
    public let date: String
    /// Slot of `takenAt` in Tokyo.
    public let slot: Slot
    public let quantity: Int

    init(id: AppID, patientID: AppID, medicationID: AppID, takenAt: Date, quantity: Int) {
        self.id = id.text
        patientId = patientID.text
        medicationId = medicationID.text
        self.takenAt = Timestamp.rfc3339UTC(takenAt)
        date = TokyoClock.dateString(of: takenAt)
        slot = Slot(instant: takenAt)
        self.quantity = quantity
    }
}
