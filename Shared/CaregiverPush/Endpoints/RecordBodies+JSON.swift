import Codecs

// What the recording endpoints answer, written directly (JSONSerializable) rather than through Foundation's encoder:
// the same bytes (RecordBodiesJSONTests holds each type to the encoder's), for the response every recording writes.

extension DoseRecordBody: JSONSerializable {
    /// `recordingGroupId` is `null` when absent, as ``encode(to:)`` writes it.
    public var jsonValue: JSONValue {
        .object([
            "id": .string(id), "patientId": .string(patientId), "medicationId": .string(medicationId),
            "scheduledAt": .string(scheduledAt), "takenAt": .string(takenAt), "date": .string(date),
            "slot": .string(slot.rawValue), "withinTime": .bool(withinTime),
            "recordingGroupId": recordingGroupId.map(JSONValue.string) ?? .null,
        ])
    }
}

extension PRNRecordBody: JSONSerializable {
    public var jsonValue: JSONValue {
        .object([
            "id": .string(id), "patientId": .string(patientId), "medicationId": .string(medicationId),
            "takenAt": .string(takenAt), "date": .string(date), "slot": .string(slot.rawValue),
            "quantity": .number(Double(quantity)),
        ])
    }
}

extension RecordResponse: JSONSerializable where Record: JSONSerializable {
    public var jsonValue: JSONValue {
        .object(["record": record.jsonValue, "updatedCount": .number(Double(updatedCount))])
    }
}

extension SlotRecordResponse: JSONSerializable {
    /// `recordingGroupId` is `null` when absent, as ``encode(to:)`` writes it.
    public var jsonValue: JSONValue {
        .object([
            "recordingGroupId": recordingGroupId.map(JSONValue.string) ?? .null,
            "updatedCount": .number(Double(updatedCount)), "records": .array(records.map(\.jsonValue)),
        ])
    }
}
