import Codecs
import CaregiverPush
import CaregiverPushClient
import Foundation
import PushPayloadContract
import Testing

/// The server's message builder and the app's router, joined by `PushPayloadContract`.
@Suite("client: the server's push message routes in the app")
struct PayloadContractTests {
    @Test(
        "a message built by the server's code routes, through the client's code, to its date and slot",
        arguments: Slot.allCases)
    func serverMessageRoutes(slot: PushPayloadContract.Slot) throws {
        let event = DoseTakenEvent(
            patientID: UUID(), date: "2026-02-11", slot: slot, recordingGroupID: slot == .noon ? UUID() : nil,
            takenAt: Date(), withinTime: slot == .morning, actingCaregiverID: nil)
        let bytes = DoseTakenMessage.json(for: event, displayName: "山田花子", deviceToken: makeDeviceToken())
        let message = try #require(try JSONValue.parse(bytes)["message"])
        let userInfo = iOSUserInfo(fromFCM: message, messageName: "projects/demo/messages/1")
        #expect(PushDeepLink.isRemotePush(userInfo))
        #expect(
            PushDeepLink.target(remotePush: userInfo) == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: slot))
    }

    @Test("the message's bytes are SPEC §9.4's: the shared keys did not change the wire")
    func wireBytesUnchanged() throws {
        let patient = try #require(UUID(uuidString: "0f8fad5b-d9cb-469f-a165-70867728950e"))
        let event = DoseTakenEvent(
            patientID: patient, date: "2026-02-11", slot: .evening, recordingGroupID: nil,
            takenAt: Date(timeIntervalSince1970: 1_770_800_400), withinTime: false, actingCaregiverID: nil)
        let expected =
            #"{"message":{"apns":{"headers":{"apns-collapse-id":"\#(event.collapseID)"},"payload":{"aps":{"sound":"default","#
            + #""thread-id":"patient-0f8fad5b-d9cb-469f-a165-70867728950e"}}},"data":{"date":"2026-02-11","#
            + #""patientId":"0f8fad5b-d9cb-469f-a165-70867728950e","recordingGroupId":"","slot":"evening","#
            + #""type":"DOSE_TAKEN"},"notification":{"body":"山田花子さんが薬を服用しました","title":"服薬記録"},"#
            + #""token":"tok"}}"#
        #expect(
            String(decoding: DoseTakenMessage.json(for: event, displayName: "山田花子", deviceToken: "tok"), as: UTF8.self)
                == expected)
        #expect(DoseTakenPayload.Key.all == ["type", "patientId", "date", "slot", "recordingGroupId"])
        #expect(Slot.allCases.map(\.rawValue) == ["morning", "noon", "evening", "bedtime"])
    }
}
