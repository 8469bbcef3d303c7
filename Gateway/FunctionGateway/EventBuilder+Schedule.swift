import Codecs
import CaregiverPush
import Foundation

extension EventBuilder {
    /// The account in the ARNs the runner makes up (the Runtime API's invoked-function ARN uses it too).
    static let localAccount = "000000000000"

    /// EventBridge's "Scheduled Event", as a Schedule rule delivers it to its target: a fresh `id`, `time` in UTC to
    /// the second, and the rule's ARN (named after the function) as the one resource.
    static func scheduledEvent(function: String, id: String, region: String, now: Date) -> [UInt8] {
        let time = Timestamp.rfc3339UTC(Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)))
        let event: JSONValue = .object([
            "version": .string("0"), "id": .string(id), "detail-type": .string("Scheduled Event"),
            "source": .string("aws.events"), "account": .string(localAccount), "time": .string(time),
            "region": .string(region),
            "resources": .array([.string("arn:aws:events:\(region):\(localAccount):rule/\(function)")]),
            "detail": .object([:]),
        ])
        return JSONCoding.encode(event) ?? []
    }
}
