import Codecs
import CaregiverPush
import Foundation
import Testing

/// A fan-out encodes its event's message once and splices each device's token in
/// (`DoseTakenMessage.Template`): the bytes must be exactly those of the message encoded whole for that device.
@Suite("message template: one encoding per event, the same bytes per device")
struct MessageTemplateTests {
    static let tokens = [
        "tok", "", "fcm:APA91b-abc_DEF.123", "a\"quote", "back\\slash", "tab\there", "トークン", "bench-\(UUID())",
    ]

    @Test("the template's message is the whole message's, byte for byte, for any token", arguments: tokens)
    func sameBytes(token: String) throws {
        for (group, withinTime) in [(nil, false), (UUID(), true)] {
            let event = DoseTakenEvent(
                patientID: AppID(UUID()), date: "2026-02-11", slot: .bedtime, recordingGroupID: group.map(AppID.init),
                takenAt: Date(timeIntervalSince1970: 1_770_800_400), withinTime: withinTime, actingCaregiverID: nil)
            let template = DoseTakenMessage.Template(event: event, displayName: "山田\"花子\\")
            let whole = DoseTakenMessage.json(for: event, displayName: "山田\"花子\\", deviceToken: token)
            #expect(template.json(deviceToken: token) == whole)
            let parsed = try JSONValue.parse(template.json(deviceToken: token))
            #expect(parsed["message"]?["token"]?.stringValue == token)
        }
    }
}
