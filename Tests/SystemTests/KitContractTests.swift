import Codecs
import CaregiverPush
import CaregiverPushClient
import Foundation
import PushPayloadContract
import Testing
import TestFixtures
import TestSupport

/// The server's message builder and the app kit (`Client/`), joined by `PushPayloadContract` and the kit's catalog.
@Suite("kit contract: the server's push message routes in the app and reads as the app words it")
struct KitContractTests {
    @Test(
        "a message built by the server's code routes, through the client's code, to its date and slot",
        arguments: Slot.allCases)
    func serverMessageRoutes(slot: PushPayloadContract.Slot) throws {
        let event = DoseTakenEvent(
            patientID: AppID(UUID()), date: "2026-02-11", slot: slot,
            recordingGroupID: (slot == .noon ? UUID() : nil).map(AppID.init),
            takenAt: Date(), withinTime: slot == .morning, actingCaregiverID: nil)
        let bytes = DoseTakenMessage.json(for: event, displayName: "山田花子", deviceToken: makeDeviceToken())
        let message = try #require(try JSONValue.parse(bytes)["message"])
        let userInfo = iOSUserInfo(fromFCM: message, messageName: "projects/demo/messages/1")
        #expect(CaregiverPushDeepLink.isRemotePush(userInfo))
        #expect(
            CaregiverPushDeepLink.target(remotePush: userInfo)
                == CaregiverPushDeepLinkTarget(patientID: event.patientID.text, dateKey: "2026-02-11", slot: slot))
    }

    @Test("the message's bytes are those of docs/behaviour.md#payload: the shared keys did not change the wire")
    func wireBytesUnchanged() throws {
        let patient = try #require(UUID(uuidString: "0f8fad5b-d9cb-469f-a165-70867728950e"))
        let event = DoseTakenEvent(
            patientID: AppID(patient), date: "2026-02-11", slot: .evening, recordingGroupID: nil,
            takenAt: Date(timeIntervalSince1970: 1_770_800_400), withinTime: false, actingCaregiverID: nil)
        let expected =
            #"{"message":{"apns":{"headers":{"apns-collapse-id":"\#(event.collapseID)"},"payload":{"aps":{"sound":"default","#
            + #""thread-id":"patient-0f8fad5b-d9cb-469f-a165-70867728950e"}}},"data":{"date":"2026-02-11","#
            + #""patientId":"0f8fad5b-d9cb-469f-a165-70867728950e","recordedBy":"patient","recordingGroupId":"","#
            + #""slot":"evening","#
            + #""type":"DOSE_TAKEN"},"notification":{"body":"山田花子さんが薬を服用しました","title":"服薬記録"},"#
            + #""token":"tok"}}"#
        #expect(
            String(decoding: DoseTakenMessage.json(for: event, displayName: "山田花子", deviceToken: "tok"), as: UTF8.self)
                == expected)
        #expect(DoseTakenPayload.Key.all == ["type", "patientId", "date", "slot", "recordingGroupId", "recordedBy"])
        #expect(Slot.allCases.map(\.rawValue) == ["morning", "noon", "evening", "bedtime"])
    }

    @Test("the server's title and every body, in every language, are the kit catalog's text, word for word")
    func templatesMatchCatalog() throws {
        let file = Repository.root.appendingPathComponent(
            "Client/CaregiverPushClient/Resources/Localizable.xcstrings")
        let catalog = try CaregiverPushStrings.parseCatalog(Data(contentsOf: file))
        #expect(Set(DoseTakenText.languages).isSubset(of: Set(catalog.keys)))
        for language in DoseTakenText.languages {
            let table = try #require(catalog[language])
            #expect(table[CaregiverPushStringKey.pushTitle.rawValue] == DoseTakenMessage.title(language: language))
            for name in ["山田花子", "Ann"] {
                for recorder in DoseRecorder.allCases {
                    for withinTime in [false, true] {
                        let key = DoseTakenText.bodyKey(withinTime: withinTime, recorder: recorder)
                        #expect(
                            table[key.rawValue]?.replacingOccurrences(of: "%@", with: name)
                                == DoseTakenMessage.body(
                                    displayName: name, withinTime: withinTime, recorder: recorder, language: language))
                    }
                }
            }
        }
        // A language the catalogue lacks gets today's Japanese.
        #expect(DoseTakenMessage.body(displayName: "Ann", withinTime: false, language: "fr") == "Annさんが薬を服用しました")
    }
}

/// The `userInfo` iOS hands the app for an FCM message with a notification: FCM's `data` keys at the top level,
/// `aps` from `apns.payload.aps` plus the `alert` made from `notification`, and FCM's own `gcm.message_id`.
func iOSUserInfo(fromFCM message: JSONValue, messageName: String?) -> [AnyHashable: Any] {
    var userInfo: [AnyHashable: Any] = [:]
    for (key, value) in message["data"]?.objectValue ?? [:] { userInfo[key] = foundationValue(value) }
    var aps = (foundationValue(message["apns"]?["payload"]?["aps"] ?? .object([:])) as? [String: Any]) ?? [:]
    if let notification = message["notification"] { aps["alert"] = foundationValue(notification) }
    userInfo["aps"] = aps
    userInfo["gcm.message_id"] = messageName.map { String($0.split(separator: "/").last ?? "") } ?? "0:0"
    return userInfo
}

/// A JSON value as `JSONSerialization` would give it.
func foundationValue(_ value: JSONValue) -> Any {
    switch value {
    case .string(let text): return text
    case .number(let number): return number
    case .bool(let flag): return flag
    case .null: return NSNull()
    case .array(let items): return items.map(foundationValue)
    case .object(let fields): return fields.mapValues(foundationValue)
    }
}
