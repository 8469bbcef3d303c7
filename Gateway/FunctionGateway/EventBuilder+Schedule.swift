import Codecs
import FunctionRuntime
import Foundation

extension EventBuilder {
    /// The account in the ARNs the gateway makes up (the Runtime API's invoked-function ARN uses it too).
    static let localAccount = "000000000000"

    /// EventBridge's "Scheduled Event" (``ScheduledEvent``), as a Schedule rule delivers it to its target: a fresh
    /// `id`, `time` in UTC to the second, and the rule's ARN (named after the function) as the one resource.
    static func scheduledEvent(function: String, id: String, region: String, now: Date) -> [UInt8] {
        let time = Timestamp.rfc3339UTC(Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)))
        let event = ScheduledEvent(
            id: id, account: localAccount, time: time, region: region,
            resources: ["arn:aws:events:\(region):\(localAccount):rule/\(function)"])
        return JSONCoding.encode(event) ?? []
    }
}
