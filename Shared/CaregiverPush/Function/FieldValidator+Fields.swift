import Codecs
import FoundationEssentials
import FunctionRuntime

// The fields of this service's request bodies, in one place: each endpoint reads its body through these, so a field
// that two endpoints share is checked, and worded, the same way in both.

extension FieldValidator {
    /// An optional boolean; absent or `null` is `false`, anything but `true`/`false` records "`field` must be a
    /// boolean".
    mutating func flag(_ field: String) -> Bool {
        guard let value = members[field], value != .null else { return false }
        guard case .bool(let flag) = value else {
            reject(field, "\(field) must be a boolean")
            return false
        }
        return flag
    }

    /// `patientId`: required for a caregiver, optional for a patient.
    mutating func patientID(for principal: Principal) -> AppID? {
        if case .caregiver = principal {
            return appID("patientId", required: true)
        }
        return appID("patientId", required: false)
    }

    /// An id of one of the app's rows (``AppID``); a present string that is not one records "`field` must be an id".
    mutating func appID(_ field: String, required: Bool) -> AppID? {
        string(
            field, required: required,
            invalidMessage: "\(field) must be an id (1 to \(AppID.maximumLength) letters, digits, '-', '_', '.' or ':')"
        ) { AppID($0) != nil }.flatMap(AppID.init)
    }

    /// `takenAt`, defaulting to now, within the plausible window of ``DoseRules/takenAtWindow(now:scheduledAt:)``.
    /// - Parameter scheduledAt: the dose's scheduled instant, when the request names one (it bounds the window).
    mutating func takenAt(now: Date, scheduledAt: Date? = nil) -> (date: Date, text: String?) {
        guard let given = instant("takenAt", required: false) else { return (now, nil) }
        let window = DoseRules.takenAtWindow(now: now, scheduledAt: scheduledAt)
        guard given.date <= window.upperBound else {
            reject("takenAt", "takenAt may not be more than 5 minutes in the future")
            return (now, given.text)
        }
        guard given.date >= window.lowerBound else {
            reject(
                "takenAt",
                scheduledAt != nil && window.lowerBound > now.addingTimeInterval(-DoseRules.takenAtPastLimit)
                    ? "takenAt may not be more than 24 hours before scheduledAt"
                    : "takenAt may not be more than 31 days in the past")
            return (now, given.text)
        }
        return (given.date, given.text)
    }

    /// The `token` field: an FCM registration token, 1–4096 characters of `A-Z a-z 0-9 _ : . -`.
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

    /// `quantity`: an integer 1–10, default 1. `sent` is what the request said, for the idempotency fingerprint.
    mutating func quantity() -> (value: Int, sent: Int?) {
        guard let raw = members["quantity"], raw != .null else { return (1, nil) }
        guard let integer = raw.integerValue, (1...10).contains(integer) else {
            reject("quantity", "quantity must be an integer from 1 to 10")
            return (1, nil)
        }
        return (Int(integer), Int(integer))
    }
}
