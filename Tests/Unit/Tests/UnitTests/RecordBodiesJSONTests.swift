import CaregiverPush
import Codecs
import Foundation
import FunctionRuntime
import Testing

/// The recording endpoints' answers are written directly (`JSONSerializable`), not through Foundation's encoder: the
/// bytes must stay the encoder's, whatever their text holds and whichever optional member is absent.
@Suite("the recordings' answers written without the encoder")
struct RecordBodiesJSONTests {
    static let texts = ["", "a/b", "q\"uo\\te", "line\nbreak\t\u{1}", "é日😀\u{2028}", "2026-11-29T00:00:00.123Z"]
    static let slots = Slot.allCases.map(\.rawValue)

    /// A body as its type decodes it (the bodies' own initialisers take ids and instants, not arbitrary text).
    static func decoded<T: Decodable>(_ type: T.Type, _ members: [String: JSONValue]) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(try #require(JSONValue.object(members).serialized)))
    }

    static func dose(_ index: Int, group: Bool) throws -> DoseRecordBody {
        let text = { (offset: Int) in JSONValue.string(texts[(index + offset) % texts.count]) }
        var members: [String: JSONValue] = [
            "id": text(0), "patientId": text(1), "medicationId": text(2), "scheduledAt": text(3), "takenAt": text(4),
            "date": text(5), "slot": .string(slots[index % slots.count]), "withinTime": .bool(index % 2 == 0),
        ]
        if group { members["recordingGroupId"] = text(6) }
        return try decoded(DoseRecordBody.self, members)
    }

    static func prn(_ index: Int) throws -> PRNRecordBody {
        let text = { (offset: Int) in JSONValue.string(texts[(index + offset) % texts.count]) }
        return try decoded(
            PRNRecordBody.self,
            [
                "id": text(0), "patientId": text(1), "medicationId": text(2), "takenAt": text(3), "date": text(4),
                "slot": .string(slots[index % slots.count]), "quantity": .number(Double(index % 4 + 1)),
            ])
    }

    /// `{record, updatedCount}` around `record`, decoded as its endpoint's response type.
    static func response<Record: JSONSerializable & Decodable>(_ record: Record, _ count: Int) throws
        -> RecordResponse<Record>
    {
        try decoded(
            RecordResponse<Record>.self,
            [
                "record": try JSONValue.parse(Array(try JSONCoding.encoder().encode(record))),
                "updatedCount": .number(Double(count)),
            ])
    }

    /// The direct bytes, the encoder's, and the response body `APIGatewayV2Response.json` writes: all the same.
    static func expectSame<T: JSONSerializable>(_ value: T) throws {
        let encoder = Array(try JSONCoding.encoder().encode(value))
        #expect(value.jsonValue.serialized == encoder, "\(value)")
        let response = try APIGatewayV2Response.json(status: 200, body: value, requestID: "r")
        #expect(Array(response.body.utf8) == encoder)
    }

    @Test("dose, PRN and slot answers: the encoder's bytes", arguments: 0..<24)
    func matchesTheEncoder(index: Int) throws {
        let dose = try Self.dose(index, group: index % 3 != 0)
        try Self.expectSame(dose)
        try Self.expectSame(try Self.response(dose, index % 2))
        let prn = try Self.prn(index)
        try Self.expectSame(prn)
        try Self.expectSame(try Self.response(prn, index % 2))
        let records = try (0..<(index % 4)).map { try Self.dose(index + $0, group: $0 % 2 == 0) }
        let slot = try Self.decoded(
            SlotRecordResponse.self,
            [
                "updatedCount": .number(Double(records.count)),
                "records": .array(try records.map { try JSONValue.parse(Array(try JSONCoding.encoder().encode($0))) }),
            ].merging(index % 2 == 0 ? ["recordingGroupId": .string(Self.texts[index % Self.texts.count])] : [:]) {
                first, _ in first
            })
        try Self.expectSame(slot)
    }
}
