import Foundation

/// Reads a notification into a ``CaregiverPushDeepLinkTarget``: the remote `DOSE_TAKEN` push, and the app's own local
/// reminders. Pure, nonisolated functions with a `Sendable` result: a notification delegate calls them where iOS calls
/// it (off the main actor), and hands the target to ``CaregiverPushDeepLinkRouter/route(_:)`` on the main actor.
public enum CaregiverPushDeepLink {
    /// The target of a remote push, from its `userInfo` as iOS delivers it (FCM's `data` keys at the top level).
    ///
    /// `type` must be `DOSE_TAKEN`, `date` a valid `YYYY-MM-DD` and `slot` one of the four slots, each a string;
    /// `patientId`, when present, the app's id of the patient as a string, unchanged (``isPatientID(_:)``). Anything else — a missing key, another type, a number where a
    /// string belongs, a malformed patient id — is `nil`. Other keys (`aps`, `gcm.message_id`, `recordingGroupId`)
    /// are ignored.
    public static func target(remotePush userInfo: [AnyHashable: Any]) -> CaregiverPushDeepLinkTarget? {
        guard string(userInfo, DoseTakenPayload.Key.type) == DoseTakenPayload.type,
            let date = string(userInfo, DoseTakenPayload.Key.date),
            let slot = string(userInfo, DoseTakenPayload.Key.slot).flatMap(Slot.init(rawValue:))
        else { return nil }
        var patientID: String?
        if let value = userInfo[AnyHashable(DoseTakenPayload.Key.patientID)] {
            // Present but not an id: the payload is not the server's, so it routes nowhere.
            guard let text = value as? String, isPatientID(text) else { return nil }
            patientID = text
        }
        return CaregiverPushDeepLinkTarget(patientID: patientID, dateKey: date, slot: slot)
    }

    /// Whether `text` can be the app's id of a patient as the server sends it: 1 to 100 characters of
    /// `A-Z a-z 0-9 - _ . :` — a UUID, a Prisma cuid, `patient-123` — compared with the app's own ids as they are.
    public static func isPatientID(_ text: String) -> Bool {
        (1...100).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                    UInt8(ascii: ":"):
                    true
                default: false
                }
            }
    }

    /// The target of one of the app's local reminders, whose identifier is `notif:{YYYY-MM-DD}:{slot}:{n}`
    /// (`notif:2026-02-11:morning:1`), `n` a non-negative number. It names no patient.
    public static func target(localIdentifier identifier: String) -> CaregiverPushDeepLinkTarget? {
        let parts = identifier.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "notif", let slot = Slot(rawValue: String(parts[2])),
            !parts[3].isEmpty, parts[3].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return CaregiverPushDeepLinkTarget(dateKey: String(parts[1]), slot: slot)
    }

    /// A tapped notification of either kind: a `userInfo` with a `type` key is a remote push and is
    /// read only as one; anything else is read by its request identifier.
    public static func target(userInfo: [AnyHashable: Any], identifier: String) -> CaregiverPushDeepLinkTarget? {
        isRemotePush(userInfo) ? target(remotePush: userInfo) : target(localIdentifier: identifier)
    }

    /// Whether a notification came from the server (it has a `type` key), as opposed to a local reminder.
    public static func isRemotePush(_ userInfo: [AnyHashable: Any]) -> Bool {
        userInfo[AnyHashable(DoseTakenPayload.Key.type)] != nil
    }

    /// A `String` value only: `as? String` also accepts the `NSString` APNs payloads are made of, but not numbers.
    static func string(_ userInfo: [AnyHashable: Any], _ key: String) -> String? {
        userInfo[AnyHashable(key)] as? String
    }
}
